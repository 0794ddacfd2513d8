"""Privacy accounting: events, ledgers, a shared budget, and GDP conversions.

Every mechanism call inside ``fit`` produces exactly one :class:`PrivacyEvent`,
made from the same numbers that drove the noise. A fitted estimator exposes the
events of its last ``fit`` as a :class:`PrivacyLedger` in ``privacy_spent_``.
A :class:`BudgetAccountant` is a handle to one budget shared by many fits.

Composition
-----------
``'basic'``
    Sequential composition: epsilons add, deltas add.
``'gdp'``
    Gaussian differential privacy (Dong, Roth & Su 2022). A Gaussian release
    with L2-sensitivity :math:`\\Delta` and noise :math:`\\sigma` is
    :math:`\\mu`-GDP with :math:`\\mu = \\Delta/\\sigma`; Gaussian releases
    compose as :math:`\\mu = \\sqrt{\\sum_k \\mu_k^2}`, and :math:`\\mu`-GDP
    implies :math:`(\\varepsilon, \\delta)`-DP exactly when

    .. math::
        \\delta(\\varepsilon; \\mu) = \\Phi(-\\varepsilon/\\mu + \\mu/2)
            - e^{\\varepsilon}\\Phi(-\\varepsilon/\\mu - \\mu/2).

    Non-Gaussian events (Laplace, PTR, exponential mechanism) are added to the
    Gaussian part by basic composition.
"""

import math
import threading
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

from .exceptions import BudgetExceededError

__all__ = [
    "PrivacyEvent",
    "PrivacyLedger",
    "BudgetAccountant",
    "gdp_delta",
    "gdp_mu",
    "gdp_epsilon",
    "compose_ledgers",
    "subsampled_guarantee",
    "subsample_budget",
]

NOTIONS = ("full", "label", "feature")
NEIGHBOURINGS = ("replace-one", "add-remove")
COMPOSITIONS = ("basic", "gdp")

# Relative slack when comparing a spend with a budget: totals are sums of
# floats computed in different orders.
_BUDGET_RTOL = 1e-9


# ---------------------------------------------------------------------------
# GDP <-> (epsilon, delta)
# ---------------------------------------------------------------------------
def gdp_delta(mu, epsilon):
    """Smallest delta such that mu-GDP implies (epsilon, delta)-DP.

    .. math::
        \\delta = \\Phi(-\\varepsilon/\\mu + \\mu/2)
            - e^{\\varepsilon}\\Phi(-\\varepsilon/\\mu - \\mu/2)

    computed in log space (Dong, Roth & Su 2022, Corollary 2.13; Balle &
    Wang 2018, Theorem 8, for the analytic Gaussian mechanism).

    Parameters
    ----------
    mu : float
        GDP parameter, > 0.
    epsilon : float
        >= 0.

    Returns
    -------
    delta : float
    """
    mu = float(mu)
    epsilon = float(epsilon)
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    if math.isinf(epsilon):
        return 0.0
    log_a = log_ndtr(-epsilon / mu + mu / 2)
    log_b = epsilon + log_ndtr(-epsilon / mu - mu / 2)
    if log_b >= log_a:  # only through round-off; delta is >= 0
        return 0.0
    return float(math.exp(log_a) * -math.expm1(log_b - log_a))


def gdp_mu(epsilon, delta):
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP.

    Solves :math:`\\delta(\\varepsilon; \\mu) = \\delta` for :math:`\\mu`
    (the left side increases with :math:`\\mu`) with Brent's method on an
    expanding bracket, then rounds down so that the returned mu satisfies the
    inequality: calibrating ``sigma = sensitivity / mu`` is never too small.

    Reference values: ``gdp_mu(1, 1e-5) = 0.268051`` and
    ``gdp_mu(5, 1/5008**2) = 0.914623``.
    """
    epsilon = float(epsilon)
    delta = float(delta)
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    if math.isinf(epsilon):
        return math.inf

    def excess(log_mu):
        return math.log(max(gdp_delta(math.exp(log_mu), epsilon), 1e-300)) - math.log(
            delta
        )

    lo, hi = math.log(1e-3), math.log(1.0)
    while excess(lo) > 0:
        lo -= 2.0
    while excess(hi) < 0:
        hi += 1.0
    log_mu = brentq(excess, lo, hi, xtol=1e-15, rtol=1e-14, maxiter=500)
    mu = math.exp(log_mu)
    while gdp_delta(mu, epsilon) > delta:
        mu *= 1 - 1e-13
    return mu


def gdp_epsilon(mu, delta):
    """Smallest epsilon such that mu-GDP implies (epsilon, delta)-DP.

    The inverse of :func:`gdp_delta` in epsilon (which decreases in epsilon),
    rounded up so that the returned epsilon is valid.
    """
    mu = float(mu)
    delta = float(delta)
    if not 0 < delta <= 1:
        raise ValueError("delta must lie in (0, 1].")
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
    eps = brentq(
        lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14, maxiter=500
    )
    while gdp_delta(mu, eps) > delta:
        eps *= 1 + 1e-13
    return eps


# ---------------------------------------------------------------------------
# Events and ledgers
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PrivacyEvent:
    """One privacy-consuming mechanism call.

    Parameters
    ----------
    name : str
        What was released (``'XtX'``, ``'ptr'``, ``'x_bound'``, ...).
    epsilon, delta : float
        The guarantee of this release on its own.
    notion : {'full', 'label', 'feature'}
        What is protected: the whole row, only the label, or only the features.
    neighbouring : {'replace-one', 'add-remove'}
        The neighbouring relation of the guarantee.
    sensitivity, sigma, mu : float or None
        For Gaussian releases: L2-sensitivity, noise standard deviation, and
        ``mu = sensitivity / sigma``. ``None`` for other mechanisms.
    """

    name: str
    epsilon: float
    delta: float
    notion: str = "full"
    neighbouring: str = "replace-one"
    sensitivity: float | None = None
    sigma: float | None = None
    mu: float | None = None

    def __post_init__(self):
        if self.notion not in NOTIONS:
            raise ValueError(f"notion must be one of {NOTIONS}.")
        if self.neighbouring not in NEIGHBOURINGS:
            raise ValueError(f"neighbouring must be one of {NEIGHBOURINGS}.")
        if not (self.epsilon >= 0 and 0 <= self.delta <= 1):
            raise ValueError("An event needs epsilon >= 0 and delta in [0, 1].")

    @property
    def is_gaussian(self):
        return self.mu is not None


class PrivacyLedger:
    """Ordered privacy events and their composed total.

    Parameters
    ----------
    events : iterable of PrivacyEvent
    composition : {'basic', 'gdp'}, default='basic'
        How the events compose. ``'gdp'`` composes the Gaussian events'
        ``mu`` as ``sqrt(sum mu**2)`` and adds the rest by basic composition.
    delta : float or None, default=None
        The ledger's total delta. ``None`` means the sum of the events'
        deltas. Under ``'gdp'`` the Gaussian part is converted to epsilon at
        this delta minus the non-Gaussian events' deltas.

    Attributes
    ----------
    epsilon, delta : float
        The composed guarantee.
    """

    def __init__(self, events=(), composition="basic", delta=None):
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}.")
        self.events = tuple(events)
        for event in self.events:
            if not isinstance(event, PrivacyEvent):
                raise TypeError("A PrivacyLedger holds PrivacyEvent objects only.")
        self.composition = composition
        self._delta = None if delta is None else float(delta)

    @classmethod
    def concatenate(cls, ledgers, composition="basic"):
        """One ledger holding the events of several, deltas added."""
        ledgers = list(ledgers)
        events = [event for ledger in ledgers for event in ledger.events]
        delta = sum(ledger.delta for ledger in ledgers)
        return cls(events, composition=composition, delta=min(delta, 1.0))

    def __len__(self):
        return len(self.events)

    def __iter__(self):
        return iter(self.events)

    @property
    def delta(self):
        if self._delta is not None:
            return self._delta
        return min(sum(event.delta for event in self.events), 1.0)

    @property
    def epsilon(self):
        return self._compose()[0]

    @property
    def mu(self):
        """The composed mu of the Gaussian events (``None`` if there are none)."""
        mus = [event.mu for event in self.events if event.is_gaussian]
        if not mus:
            return None
        return math.sqrt(sum(m * m for m in mus))

    def _compose(self):
        basic_eps = sum(event.epsilon for event in self.events)
        if self.composition == "basic" or self.mu is None:
            return basic_eps, self.delta
        gaussian = [event for event in self.events if event.is_gaussian]
        others = [event for event in self.events if not event.is_gaussian]
        delta_gauss = self.delta - sum(event.delta for event in others)
        if delta_gauss <= 0:
            raise ValueError(
                "The ledger's delta leaves nothing for its Gaussian events."
            )
        eps_gauss = gdp_epsilon(self.mu, min(delta_gauss, 1.0))
        if delta_gauss >= sum(event.delta for event in gaussian):
            # Basic composition of the Gaussian events is also valid at this
            # delta; report the smaller of two valid epsilons.
            eps_gauss = min(eps_gauss, sum(event.epsilon for event in gaussian))
        return eps_gauss + sum(event.epsilon for event in others), self.delta

    def __repr__(self):
        header = (
            f"{'event':<24}{'notion':<9}{'neighbours':<13}"
            f"{'epsilon':>10}{'delta':>11}{'mu':>9}"
        )
        lines = [f"PrivacyLedger(composition={self.composition!r})", header]
        for event in self.events:
            mu = "" if event.mu is None else f"{event.mu:9.4f}"
            lines.append(
                f"{event.name:<24}{event.notion:<9}{event.neighbouring:<13}"
                f"{event.epsilon:10.4g}{event.delta:11.3g}{mu:>9}"
            )
        if self.events:
            lines.append(f"{'total':<46}{self.epsilon:10.4g}{self.delta:11.3g}")
        return "\n".join(lines)


def compose_ledgers(ledgers, composition="basic"):
    """``(epsilon, delta)`` of several ledgers run one after the other.

    ``'basic'`` adds each ledger's own (epsilon, delta). ``'gdp'`` composes
    the Gaussian events of all ledgers by their mu (the rest basically) at the
    summed delta, and keeps the basic total when that is smaller (both are
    valid at the same delta).
    """
    ledgers = list(ledgers)
    basic_eps = sum(ledger.epsilon for ledger in ledgers)
    delta = min(sum(ledger.delta for ledger in ledgers), 1.0)
    if composition == "basic" or not ledgers:
        return basic_eps, delta
    if composition != "gdp":
        raise ValueError(f"composition must be one of {COMPOSITIONS}.")
    combined = PrivacyLedger.concatenate(ledgers, composition="gdp")
    return min(combined.epsilon, basic_eps), delta


# ---------------------------------------------------------------------------
# A budget shared by many fits
# ---------------------------------------------------------------------------
class BudgetAccountant:
    """A privacy budget shared by many fits.

    Estimators take ``accountant=None``. When one is given, the estimator
    computes its planned ledger from public facts, calls :meth:`check`
    before touching the data, and :meth:`spend` when the mechanisms have run
    (also when a private test FAILs: the budget is spent).

    The accountant is a *handle*: :func:`sklearn.base.clone` (which deep-copies
    parameters) returns the same object, so every fit of a ``GridSearchCV``
    is charged to the same budget. It is thread-safe. It refuses to be pickled,
    because a copy in another process (joblib workers under ``n_jobs > 1``)
    would record spends that never reach this object.

    Parameters
    ----------
    epsilon : float, default=np.inf
        Total epsilon budget.
    delta : float, default=1.0
        Total delta budget.
    composition : {'basic', 'gdp'}, default='basic'
        How spends compose. ``'gdp'`` composes Gaussian events across fits
        by their mu, the rest by basic composition.

    Examples
    --------
    >>> from skprivreg import BudgetAccountant, AdaSSPRegressor
    >>> acc = BudgetAccountant(epsilon=3.0, delta=1e-4)
    >>> est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, accountant=acc)
    """

    def __init__(self, epsilon=np.inf, delta=1.0, composition="basic"):
        if not (epsilon > 0):
            raise ValueError("epsilon must be > 0.")
        if not (0 < delta <= 1):
            raise ValueError("delta must lie in (0, 1].")
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}.")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.composition = composition
        self._spent = []
        self._lock = threading.Lock()

    def _total(self, extra=()):
        return compose_ledgers([*self._spent, *extra], self.composition)

    def _raise_if_over(self, ledger):
        eps, delta = self._total([ledger])
        eps_over = eps > self.epsilon * (1 + _BUDGET_RTOL)
        delta_over = delta > self.delta * (1 + _BUDGET_RTOL)
        if eps_over or delta_over:
            spent_eps, spent_delta = self._total()
            raise BudgetExceededError(
                "This fit would exceed the privacy budget: it plans "
                f"(epsilon={ledger.epsilon:.6g}, delta={ledger.delta:.3g}) and the "
                f"accountant has (epsilon={self.epsilon:.6g}, delta={self.delta:.3g}) "
                f"of which (epsilon={spent_eps:.6g}, delta={spent_delta:.3g}) is "
                "spent. Nothing was spent."
            )

    def check(self, ledger):
        """Raise :class:`BudgetExceededError` if spending ``ledger`` would exceed the budget."""
        with self._lock:
            self._raise_if_over(ledger)

    def spend(self, ledger):
        """Record ``ledger`` (check first; raise without recording if over budget)."""
        if not isinstance(ledger, PrivacyLedger):
            raise TypeError("spend expects a PrivacyLedger.")
        with self._lock:
            self._raise_if_over(ledger)
            self._spent.append(ledger)

    def total(self):
        """``(epsilon, delta)`` spent so far, under the accountant's composition."""
        with self._lock:
            return self._total()

    def remaining(self):
        """``(epsilon, delta)`` left.

        Under ``'gdp'`` the remaining epsilon is the budget minus the composed
        total; a new spend may fit even when it exceeds this difference,
        because GDP composition is sub-additive. :meth:`check` is exact.
        """
        eps, delta = self.total()
        return max(self.epsilon - eps, 0.0), max(self.delta - delta, 0.0)

    @property
    def ledgers(self):
        """The ledgers spent so far, one per fit, in order."""
        with self._lock:
            return list(self._spent)

    @property
    def n_spends(self):
        """How many ledgers were spent (one per fit)."""
        with self._lock:
            return len(self._spent)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError(
            "A BudgetAccountant cannot be pickled: a copy in another process would "
            "record spends that never reach this budget (with GridSearchCV or "
            "cross_val_score, every worker under n_jobs>1 gets a copy). Use n_jobs=1, "
            "or a thread backend (joblib.parallel_backend('threading')), or charge the "
            "whole search up front on the accountant and fit with accountant=None. To "
            "save a fitted estimator, set_params(accountant=None) first."
        )

    def __repr__(self):
        eps, delta = self.total()
        return (
            f"BudgetAccountant(epsilon={self.epsilon}, delta={self.delta}, "
            f"composition={self.composition!r}; spent epsilon={eps:.6g}, "
            f"delta={delta:.3g} in {self.n_spends} fits)"
        )


# ---------------------------------------------------------------------------
# Amplification by subsampling (appended for ReuseCov's sketched covariance)
# ---------------------------------------------------------------------------
def subsampled_guarantee(epsilon, delta, sampling_ratio):
    """Guarantee on the full data of a mechanism run on a secret uniform subsample.

    A mechanism that is (epsilon, delta)-DP (replace-one) on its input, run on
    a uniformly random subsample of size ``s`` drawn *without replacement*
    from ``n`` rows, is ``(epsilon', delta')``-DP (replace-one) on the ``n``
    rows with ``q = s/n`` and

    .. math::
        \\varepsilon' = \\log\\left(1 + q (e^{\\varepsilon} - 1)\\right),
        \\qquad \\delta' = q\\,\\delta

    (Balle, Barthe & Gaboardi 2018, "Privacy amplification by subsampling:
    tight analyses via couplings and divergences", Thm. 9, substitution
    relation, sampling without replacement).
    """
    q = float(sampling_ratio)
    if not 0 < q <= 1:
        raise ValueError("sampling_ratio must lie in (0, 1].")
    if math.isinf(epsilon):
        return math.inf, q * float(delta)
    return math.log1p(q * math.expm1(float(epsilon))), q * float(delta)


def subsample_budget(epsilon, delta, sampling_ratio):
    """The budget a mechanism on a subsample may use so that the whole is (epsilon, delta)-DP.

    The inverse of :func:`subsampled_guarantee`: with ``q = s/n``,

    .. math::
        \\varepsilon_1 = \\log\\left(1 + (e^{\\varepsilon} - 1)/q\\right),
        \\qquad \\delta_1 = \\delta / q.

    Example: ``epsilon = 2.5`` and ``n/s = 10`` give ``epsilon_1 = 4.725837``
    (PRIMO's Algorithm 4 would use the first-order ``(n/s) epsilon = 25``,
    which is unsound for epsilon of order 1). ``delta_1`` must stay below 1;
    this function raises ``ValueError`` otherwise.
    """
    q = float(sampling_ratio)
    if not 0 < q <= 1:
        raise ValueError("sampling_ratio must lie in (0, 1].")
    delta_1 = float(delta) / q
    if not delta_1 < 1:
        raise ValueError(
            "delta / sampling_ratio must be < 1 for the subsampled release."
        )
    if math.isinf(epsilon):
        return math.inf, delta_1
    return math.log1p(math.expm1(float(epsilon)) / q), delta_1
