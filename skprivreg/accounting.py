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

Private selection
-----------------
A search that releases the best of a random number of private runs is
accounted in Renyi DP (:func:`private_selection_rdp`, Papernot & Steinke 2022,
Thm. 2; Liu & Talwar 2019) and converted once with :func:`rdp_to_dp`.

Unlike guarantees
-----------------
Every event carries its privacy *notion* (``'full'``: the whole row is
protected; ``'label'``: only the label; ``'feature'``: only the features) and
its *neighbouring relation* (``'replace-one'``: one row replaced, n public;
``'add-remove'``: one row added or removed; ``'zero-out'``: one row replaced
by a null row, n public). Composition never adds unlike guarantees as equals:

- Relations. When the events of a composition do not all share one relation,
  each add/remove or zero-out guarantee is converted to replace-one by group
  privacy (a replacement is two additions/removals, or two zero-outs):
  :math:`(\\varepsilon, \\delta) \\to (2\\varepsilon, (1 + e^{\\varepsilon})\\delta)`
  (Dwork & Roth 2014, Thm. 2.2 and its approximate-DP form), and
  :math:`\\mu`-GDP :math:`\\to 2\\mu`-GDP (Dong, Roth & Su 2022, Thm. 2.14).
  Replace-one never converts to add/remove or zero-out.
- Notions. Full DP implies label DP and feature DP (their neighbours are full
  neighbours), so full events compose with label events into a *label*
  guarantee and with feature events into a *feature* guarantee. Label events
  and feature events together protect neither; composing them raises
  :class:`~skprivreg.exceptions.CompositionError`.

:class:`Guarantee` states which guarantee a total is.
"""

import contextlib
import math
import numbers
import threading
from dataclasses import dataclass

import numpy as np

from ._budget_store import FileBudgetStore
from ._gdp import gdp_delta, gdp_epsilon, gdp_mu
from ._rdp import (  # noqa: F401  (RDP_ORDERS is re-exported)
    RDP_ORDERS,
    gaussian_rdp,
    laplace_rdp,
    ledger_rdp,
    private_selection_rdp,
    pure_dp_rdp,
    rdp_to_dp,
    tnb_gamma_for_mean,
    tnb_mean,
    tnb_pmf,
)
from .exceptions import BudgetExceededError, CompositionError

__all__ = [
    "Guarantee",
    "PrivacyEvent",
    "PrivacyLedger",
    "BudgetAccountant",
    "gdp_delta",
    "gdp_mu",
    "gdp_epsilon",
    "compose_ledgers",
    "subsampled_guarantee",
    "subsample_budget",
    "group_privacy",
    # Renyi DP and private selection (Papernot & Steinke 2022; Liu & Talwar 2019)
    "gaussian_rdp",
    "laplace_rdp",
    "pure_dp_rdp",
    "ledger_rdp",
    "rdp_to_dp",
    "tnb_mean",
    "tnb_gamma_for_mean",
    "tnb_pmf",
    "private_selection_rdp",
]

NOTIONS = ("full", "label", "feature")
NEIGHBOURINGS = ("replace-one", "add-remove", "zero-out")
COMPOSITIONS = ("basic", "gdp")

# Relative slack when comparing a spend with a budget: totals are sums of
# floats computed in different orders.
_BUDGET_RTOL = 1e-9


# ---------------------------------------------------------------------------
# Unlike guarantees: notions and relations
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Guarantee:
    """An (epsilon, delta) guarantee with its notion and neighbouring relation.

    Iterating gives ``(epsilon, delta)``, so ``eps, delta = accountant.total()``
    works as in diffprivlib; the notion and relation stay readable.
    ``for_publication`` is False when any part was fitted with the testing
    facility's reproducible noise (:func:`skprivreg.testing.reproducible_noise`):
    the numbers then hold for the mechanism, not for those outputs.
    """

    epsilon: float
    delta: float
    notion: str = "full"
    neighbouring: str = "replace-one"
    for_publication: bool = True

    def __iter__(self):
        return iter((self.epsilon, self.delta))

    def __getitem__(self, index):
        return (self.epsilon, self.delta)[index]

    def __len__(self):
        return 2

    def __str__(self):
        text = (
            f"({self.epsilon:.6g}, {self.delta:.3g})-DP, {self.notion} notion, "
            f"{self.neighbouring} neighbours"
        )
        if not self.for_publication:
            text += " (NOT for publication: reproducible test noise)"
        return text


def group_privacy(epsilon, delta):
    """``(epsilon, delta)`` for groups of two: ``(2 eps, (1 + e^eps) delta)``.

    A replace-one neighbour is two add/remove (or two zero-out) steps, so an
    add/remove or zero-out ``(epsilon, delta)`` guarantee is a replace-one
    ``(2 epsilon, (1 + e^epsilon) delta)`` guarantee (Dwork & Roth 2014,
    Thm. 2.2; Vadhan 2017, Lemma 2.2).
    """
    epsilon, delta = float(epsilon), float(delta)
    if math.isinf(epsilon):
        return math.inf, delta
    return 2.0 * epsilon, min((1.0 + math.exp(min(epsilon, 700.0))) * delta, 1.0)


def composed_notion(notions):
    """The notion a composition of events with these notions guarantees."""
    notions = set(notions) or {"full"}
    if notions == {"full"}:
        return "full"
    if notions <= {"full", "label"}:
        return "label"
    if notions <= {"full", "feature"}:
        return "feature"
    raise CompositionError(
        "Label-DP and feature-DP releases cannot be composed: together they "
        "protect neither the labels nor the features of a row. Spend them on "
        "separate accountants, or use full-DP estimators."
    )


def composed_neighbouring(relations):
    """The relation of a composition: the common one, else replace-one."""
    relations = set(relations) or {"replace-one"}
    return relations.pop() if len(relations) == 1 else "replace-one"


def _as_replace_one(event):
    """``event`` converted to replace-one by group privacy (identity if it is)."""
    if event.neighbouring == "replace-one":
        return event
    epsilon, delta = group_privacy(event.epsilon, event.delta)
    return PrivacyEvent(
        name=event.name,
        epsilon=epsilon,
        delta=delta,
        notion=event.notion,
        neighbouring="replace-one",
        sensitivity=None if event.sensitivity is None else 2.0 * event.sensitivity,
        sigma=event.sigma,
        mu=None if event.mu is None else 2.0 * event.mu,
        components=event.components,
    )


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
    neighbouring : {'replace-one', 'add-remove', 'zero-out'}
        The neighbouring relation of the guarantee (``'zero-out'``: one row
        replaced by a null row, n public; it is not add/remove).
    sensitivity, sigma, mu : float or None
        For Gaussian releases: L2-sensitivity, noise standard deviation, and
        ``mu = sensitivity / sigma``. ``None`` for other mechanisms.
    components : tuple of (str, float)
        For a joint Gaussian release of several statistics with their own
        noise scales: ``(statistic, sigma)`` of each. ``sensitivity`` and
        ``sigma`` then describe the whitened release (each statistic divided
        by its sigma): ``sigma = 1``, ``sensitivity = mu``. Empty otherwise.
    """

    name: str
    epsilon: float
    delta: float
    notion: str = "full"
    neighbouring: str = "replace-one"
    sensitivity: float | None = None
    sigma: float | None = None
    mu: float | None = None
    components: tuple = ()

    def __post_init__(self):
        # Stored as a tuple of pairs (a JSON round trip gives lists).
        object.__setattr__(self, "components",
                           tuple((str(k), float(v)) for k, v in self.components))
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
    """Ordered privacy events and their composed, typed total.

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
    notion, neighbouring : str
        Which guarantee the total is (see :class:`Guarantee`): the weakest
        notion among the events, and their common relation or, when they
        differ, replace-one after group-privacy conversion.
    for_publication : bool
        ``False`` for a ledger of a fit made under
        :func:`skprivreg.testing.reproducible_noise`: its noise can be
        reproduced, so it guarantees nothing.
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
        self.for_publication = True
        # Refuse an impossible mixture of notions at construction.
        self.notion = composed_notion(event.notion for event in self.events)
        self.neighbouring = composed_neighbouring(event.neighbouring for event in self.events)

    @classmethod
    def concatenate(cls, ledgers, composition="basic"):
        """One ledger holding the events of several, deltas added."""
        ledgers = list(ledgers)
        events = [event for ledger in ledgers for event in ledger.events]
        delta = sum(ledger.delta for ledger in ledgers)
        combined = cls(events, composition=composition, delta=min(delta, 1.0))
        combined.for_publication = all(ledger.for_publication for ledger in ledgers)
        return combined

    def __len__(self):
        return len(self.events)

    def __iter__(self):
        return iter(self.events)

    def _converted(self):
        """The events as composed: converted to replace-one where relations differ."""
        if len({event.neighbouring for event in self.events}) <= 1:
            return self.events
        return tuple(_as_replace_one(event) for event in self.events)

    @property
    def delta(self):
        return self._compose()[1]

    @property
    def epsilon(self):
        return self._compose()[0]

    @property
    def guarantee(self):
        """The composed total as a :class:`Guarantee`."""
        eps, delta = self._compose()
        return Guarantee(eps, delta, self.notion, self.neighbouring, self.for_publication)

    @property
    def mu(self):
        """The composed mu of the Gaussian events (``None`` if there are none)."""
        mus = [event.mu for event in self._converted() if event.is_gaussian]
        if not mus:
            return None
        return math.sqrt(sum(m * m for m in mus))

    def _compose(self):
        events = self._converted()
        gaussian = [event for event in events if event.is_gaussian]
        by_mu = self.composition == "gdp" and bool(gaussian)
        if self._delta is None:
            delta = min(sum(event.delta for event in events), 1.0)
        else:
            # The declared delta plus what group-privacy conversion added
            # (nothing for Gaussian events composed by mu: 2 mu is exact).
            delta = min(self._delta + sum(
                new.delta - old.delta
                for new, old in zip(events, self.events)
                if not (by_mu and new.is_gaussian)
            ), 1.0)
        basic_eps = sum(event.epsilon for event in events)
        if not by_mu:
            return basic_eps, delta
        others = [event for event in events if not event.is_gaussian]
        delta_gauss = delta - sum(event.delta for event in others)
        if delta_gauss <= 0:
            raise ValueError(
                "The ledger's delta leaves nothing for its Gaussian events."
            )
        mu = math.sqrt(sum(event.mu**2 for event in gaussian))
        eps_gauss = gdp_epsilon(mu, min(delta_gauss, 1.0))
        if delta_gauss >= sum(event.delta for event in gaussian):
            # Basic composition of the Gaussian events is also valid at this
            # delta; report the smaller of two valid epsilons.
            eps_gauss = min(eps_gauss, sum(event.epsilon for event in gaussian))
        return eps_gauss + sum(event.epsilon for event in others), delta

    def __repr__(self):
        header = (
            f"{'event':<24}{'notion':<9}{'neighbours':<13}"
            f"{'epsilon':>10}{'delta':>11}{'mu':>9}"
        )
        title = f"PrivacyLedger(composition={self.composition!r})"
        if not self.for_publication:
            title += "  NOT FOR PUBLICATION: noise made reproducible for testing"
        lines = [title, header]
        for event in self.events:
            mu = "" if event.mu is None else f"{event.mu:9.4f}"
            lines.append(
                f"{event.name:<24}{event.notion:<9}{event.neighbouring:<13}"
                f"{event.epsilon:10.4g}{event.delta:11.3g}{mu:>9}"
            )
        if self.events:
            lines.append(
                f"{'total':<24}{self.notion:<9}{self.neighbouring:<13}"
                f"{self.epsilon:10.4g}{self.delta:11.3g}"
            )
            if len({event.neighbouring for event in self.events}) > 1:
                lines.append(
                    "(relations differ: add/remove and zero-out events converted to "
                    "replace-one by group privacy)"
                )
        return "\n".join(lines)


def _ledger_as_replace_one(ledger):
    """``(epsilon, delta)`` of a whole ledger as a replace-one guarantee."""
    eps, delta = ledger.epsilon, ledger.delta
    if ledger.neighbouring == "replace-one":
        return eps, delta
    return group_privacy(eps, delta)


def compose_ledgers(ledgers, composition="basic"):
    """The :class:`Guarantee` of several ledgers run one after the other.

    ``'basic'`` adds each ledger's own (epsilon, delta), after converting each
    to replace-one by group privacy when the ledgers' relations differ.
    ``'gdp'`` composes the Gaussian events of all ledgers by their mu (the
    rest basically) at the summed delta, and keeps the basic total when that
    is smaller at the same delta (both are valid). Incompatible notions raise
    :class:`~skprivreg.exceptions.CompositionError`.
    """
    ledgers = list(ledgers)
    if composition not in COMPOSITIONS:
        raise ValueError(f"composition must be one of {COMPOSITIONS}.")
    if not ledgers:
        return Guarantee(0.0, 0.0)
    notion = composed_notion(ledger.notion for ledger in ledgers)
    neighbouring = composed_neighbouring(ledger.neighbouring for ledger in ledgers)
    if len({ledger.neighbouring for ledger in ledgers}) > 1:
        parts = [_ledger_as_replace_one(ledger) for ledger in ledgers]
    else:
        parts = [(ledger.epsilon, ledger.delta) for ledger in ledgers]
    basic_eps = sum(eps for eps, _ in parts)
    delta = min(sum(d for _, d in parts), 1.0)
    if composition == "gdp":
        combined = PrivacyLedger.concatenate(ledgers, composition="gdp")
        if combined.delta <= delta * (1 + _BUDGET_RTOL):
            basic_eps = min(combined.epsilon, basic_eps)
    publishable = all(ledger.for_publication for ledger in ledgers)
    return Guarantee(basic_eps, delta, notion, neighbouring, publishable)


# ---------------------------------------------------------------------------
# A budget shared by many fits
# ---------------------------------------------------------------------------
class BudgetAccountant:
    """A privacy budget shared by many fits.

    Estimators take ``accountant=None``. When one is given, the estimator
    plans its ledger from public facts and spends it (:meth:`spend`, which
    checks first) before it reads any data value or draws any noise, so an
    exception inside a mechanism never loses a spend, and a failed private
    test is charged like any other fit.

    The accountant is a *handle*: :func:`sklearn.base.clone` (which deep-copies
    parameters) returns the same object, so every fit of a ``GridSearchCV``
    is charged to the same budget. It is thread-safe. A *fitted* estimator
    pickles without it.

    Processes. By default the spends live in this object, and it refuses to
    be pickled: a copy in another process (joblib's workers under
    ``n_jobs > 1``) would record spends that never reach it. With
    ``processes=True`` the spends live in a lock-protected append-only file
    (created with mode 0600 in the temporary directory, removed when this
    object is garbage collected) and the accountant pickles as a handle to
    it: every copy, in any process of this machine, checks and records its
    spend in one atomic step under an exclusive file lock, so
    ``GridSearchCV(n_jobs=-1)`` records exactly the fits ``n_jobs=1``
    records, and a fit that would overspend is refused in its worker before
    it reads any data.

    Composition is typed: the total is a :class:`Guarantee` that states its
    notion and neighbouring relation, spends under different relations are
    converted to replace-one by group privacy, and label-DP spends never
    compose with feature-DP spends (:class:`~skprivreg.exceptions.CompositionError`,
    raised by :meth:`check` before any data is read).

    Parameters
    ----------
    epsilon : float, default=np.inf
        Total epsilon budget.
    delta : float, default=1.0
        Total delta budget.
    composition : {'basic', 'gdp'}, default='basic'
        How spends compose. ``'gdp'`` composes Gaussian events across fits
        by their mu, the rest by basic composition.
    notion : {'full', 'label', 'feature'} or None, default=None
        The notion the budget must guarantee. ``None`` accepts any spends
        whose composition is defined; ``'full'`` refuses label-DP and
        feature-DP spends (their total would only be label or feature DP).
    neighbouring : {'replace-one', 'add-remove', 'zero-out'} or None, default=None
        The relation the total must be stated in. ``None``: the spends'
        common relation, or replace-one after conversion.
    processes : bool, default=False
        Share the budget with copies in other processes (joblib's ``loky``
        and ``multiprocessing`` backends) through a lock-protected file.

    Examples
    --------
    >>> from skprivreg import BudgetAccountant, AdaSSPRegressor
    >>> acc = BudgetAccountant(epsilon=3.0, delta=1e-4)
    >>> est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, accountant=acc)
    >>> acc.spend(0.5, 1e-6)  # diffprivlib-style: a manual full-DP spend
    >>> acc.remaining()
    (2.5, 9.9e-05)

    Across process workers:

    >>> from sklearn.model_selection import GridSearchCV
    >>> acc = BudgetAccountant(epsilon=20.0, delta=1e-3, processes=True)
    >>> search = GridSearchCV(AdaSSPRegressor(accountant=acc), {"epsilon": [0.5, 1.0]},
    ...                       cv=3, n_jobs=2)  # doctest: +SKIP
    """

    def __init__(self, epsilon=np.inf, delta=1.0, composition="basic", notion=None,
                 neighbouring=None, processes=False):
        if not (epsilon > 0):
            raise ValueError("epsilon must be > 0.")
        if not (0 < delta <= 1):
            raise ValueError("delta must lie in (0, 1].")
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}.")
        if notion is not None and notion not in NOTIONS:
            raise ValueError(f"notion must be None or one of {NOTIONS}.")
        if neighbouring is not None and neighbouring not in NEIGHBOURINGS:
            raise ValueError(f"neighbouring must be None or one of {NEIGHBOURINGS}.")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.composition = composition
        self.notion = notion
        self.neighbouring = neighbouring
        self.processes = bool(processes)
        self._spent = []
        self._reserved = []  # ledgers checked by fits in this process, not yet spent
        self._lock = threading.Lock()
        self._store = FileBudgetStore() if self.processes else None

    @contextlib.contextmanager
    def _locked(self):
        """Hold the thread lock (and the file lock); ``self._spent`` is up to date.

        Yields the open store file under ``processes=True``, else ``None``.
        """
        with self._lock:
            if self._store is None:
                yield None
                return
            with self._store.locked() as handle:
                self._spent = self._store.ledgers()
                yield handle

    def _record(self, handle, ledger):
        self._spent.append(ledger)
        if handle is not None:
            self._store.append_spend(handle, ledger)

    @staticmethod
    def _as_ledger(spend, delta):
        if isinstance(spend, PrivacyLedger):
            if delta is not None:
                raise TypeError("Pass either a PrivacyLedger or (epsilon, delta).")
            return spend
        if isinstance(spend, numbers.Real) and not isinstance(spend, bool):
            epsilon = float(spend)
            delta = 0.0 if delta is None else float(delta)
            return PrivacyLedger([PrivacyEvent("manual spend", epsilon, delta)])
        raise TypeError("Spend a PrivacyLedger or a pair (epsilon, delta).")

    def _total(self, extra=()):
        total = compose_ledgers([*self._spent, *extra], self.composition)
        if self.notion is not None and total.notion != self.notion:
            raise CompositionError(
                f"This accountant guarantees {self.notion} DP; the spends would "
                f"compose to {total.notion} DP only."
            )
        if self.neighbouring is not None and total.neighbouring != self.neighbouring:
            if self.neighbouring != "replace-one":
                raise CompositionError(
                    f"This accountant states its total under {self.neighbouring} "
                    f"neighbours; the spends compose under {total.neighbouring} only."
                )
            eps, delta = group_privacy(total.epsilon, total.delta)
            total = Guarantee(eps, delta, total.notion, "replace-one", total.for_publication)
        return total

    def _raise_if_over(self, ledger):
        # Reserved ledgers count: a fit whose check passed may spend them.
        total = self._total([*(held.ledger for held in self._reserved), ledger])
        eps_over = total.epsilon > self.epsilon * (1 + _BUDGET_RTOL)
        delta_over = total.delta > self.delta * (1 + _BUDGET_RTOL)
        if eps_over or delta_over:
            spent = self._total()
            raise BudgetExceededError(
                "This fit would exceed the privacy budget: it plans "
                f"(epsilon={ledger.epsilon:.6g}, delta={ledger.delta:.3g}) and the "
                f"accountant has (epsilon={self.epsilon:.6g}, delta={self.delta:.3g}) "
                f"of which (epsilon={spent.epsilon:.6g}, delta={spent.delta:.3g}) is "
                "spent. Nothing was spent."
            )

    def check(self, spend, delta=None):
        """Raise if spending would exceed the budget or mix incompatible notions.

        ``spend`` is a :class:`PrivacyLedger`, or an epsilon with ``delta``
        (diffprivlib style, recorded as a full-DP replace-one spend).
        Budget held by fits in progress (:meth:`reserve`) counts as spent.
        Returns ``True`` when the spend fits.
        """
        ledger = self._as_ledger(spend, delta)
        with self._locked():
            self._raise_if_over(ledger)
        return True

    def spend(self, spend, delta=None, *, reservation=None):
        """Check, then record ``spend`` (a ledger, or epsilon and delta) atomically.

        ``reservation``: the token of :meth:`reserve` this spend takes the
        place of (released first, so its budget is available to it).
        """
        ledger = self._as_ledger(spend, delta)
        with self._locked() as handle:
            self._drop_reservation(reservation)
            self._raise_if_over(ledger)
            self._record(handle, ledger)

    def reserve(self, spend, delta=None):
        """Check ``spend`` and hold its budget for the caller; returns a token.

        Until the token is passed to :meth:`spend` or :meth:`release`, every
        other check and spend counts the reserved budget as spent, so two
        fits that share this accountant cannot both pass their checks, read
        the data, and then have one refused. Reservations are held in this
        process (with ``processes=True`` other processes see spends only).
        """
        ledger = self._as_ledger(spend, delta)
        with self._locked():
            self._raise_if_over(ledger)
            token = _Reservation(ledger)
            self._reserved.append(token)
        return token

    def release(self, reservation):
        """Give back the budget held by a :meth:`reserve` token (no spend)."""
        with self._locked():
            self._drop_reservation(reservation)

    def _drop_reservation(self, reservation):
        for index, held in enumerate(self._reserved):
            if held is reservation:
                del self._reserved[index]
                return

    def _amend(self, planned, final):
        """Replace a recorded ``planned`` ledger by its ``final`` form.

        Estimators spend their plan before reading data; noise scales that
        depend on privately released bounds are known only later. The final
        ledger must state the same notion and relation and at most the planned
        epsilon and delta (a tighter composition may lower them).
        """
        same = (
            final.epsilon <= planned.epsilon * (1 + _BUDGET_RTOL) + 1e-15
            and final.delta <= planned.delta * (1 + _BUDGET_RTOL) + 1e-300
            and planned.notion == final.notion
            and planned.neighbouring == final.neighbouring
        )
        if not same:
            raise ValueError("A ledger may be amended only to one stating the same guarantee.")
        with self._locked() as handle:
            if handle is not None:
                if self._store.amend(handle, planned, final):
                    self._spent = self._store.ledgers()
                    return
            else:
                for index in range(len(self._spent) - 1, -1, -1):
                    if self._spent[index] is planned:
                        self._spent[index] = final
                        return
        raise ValueError("The planned ledger was not spent on this accountant.")

    def total(self):
        """The :class:`Guarantee` spent so far (iterates as ``(epsilon, delta)``)."""
        with self._locked():
            return self._total()

    def remaining(self):
        """``(epsilon, delta)`` left.

        Under ``'gdp'`` the remaining epsilon is the budget minus the composed
        total; a new spend may fit even when it exceeds this difference,
        because GDP composition is sub-additive. :meth:`check` is exact.
        """
        total = self.total()
        return max(self.epsilon - total.epsilon, 0.0), max(self.delta - total.delta, 0.0)

    @property
    def ledgers(self):
        """The ledgers spent so far, one per fit, in order."""
        with self._locked():
            return list(self._spent)

    @property
    def n_spends(self):
        """How many ledgers were spent (one per fit)."""
        with self._locked():
            return len(self._spent)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        if self._store is not None:
            return (
                _attach_accountant,
                (self._store.path, self.epsilon, self.delta, self.composition,
                 self.notion, self.neighbouring),
            )
        raise TypeError(
            "A BudgetAccountant cannot be pickled: a copy in another process would "
            "record spends that never reach this budget (with GridSearchCV or "
            "cross_val_score, every worker under n_jobs>1 gets a copy). Create it with "
            "BudgetAccountant(..., processes=True) to share it with process workers, "
            "or use n_jobs=1, or a thread backend (joblib.parallel_backend('threading')). "
            "A fitted estimator pickles without its accountant."
        )

    def __repr__(self):
        total = self.total()
        return (
            f"BudgetAccountant(epsilon={self.epsilon}, delta={self.delta}, "
            f"composition={self.composition!r}; spent {total} in {self.n_spends} fits)"
        )


class _Reservation:
    """Token of :meth:`BudgetAccountant.reserve`: the ledger whose budget is held."""

    __slots__ = ("ledger",)

    def __init__(self, ledger):
        self.ledger = ledger


def _attach_accountant(path, epsilon, delta, composition, notion, neighbouring):
    """A copy of a ``processes=True`` accountant, attached to its store ``path``."""
    acc = BudgetAccountant.__new__(BudgetAccountant)
    acc.epsilon, acc.delta, acc.composition = epsilon, delta, composition
    acc.notion, acc.neighbouring, acc.processes = notion, neighbouring, True
    acc._spent = []
    acc._reserved = []
    acc._lock = threading.Lock()
    acc._store = FileBudgetStore(path)
    return acc


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
