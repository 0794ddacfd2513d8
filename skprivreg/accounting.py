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

import decimal
import math
from dataclasses import dataclass

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
from ._rounding import difference_at_most, exact_fraction, hypot_at_least, value_at_least
from .exceptions import CompositionError

__all__ = [
    "Guarantee",
    "PrivacyEvent",
    "PrivacyLedger",
    "BudgetAccountant",
    "DetachedAccountant",
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
            f"({text_at_least(self.epsilon, 6)}, {text_at_least(self.delta, 3)})-DP, "
            f"{self.notion} notion, "
            f"{self.neighbouring} neighbours"
        )
        if not self.for_publication:
            text += " (NOT for publication: reproducible test noise)"
        return text


def text_at_least(value, digits):
    """``value`` printed with ``digits`` significant digits, rounded up (a printed
    epsilon or delta never reads below the guarantee)."""
    value = float(value)
    text = f"{value:.{digits}g}"
    # The nearest text reads back as a float at least the value: kept (so a
    # declared 1e-05, whose float lies a hair above 1e-5, prints as 1e-05).
    if not math.isfinite(value) or float(text) >= value:
        return text
    exact = decimal.Decimal(value)
    step = decimal.Decimal(1).scaleb(exact.adjusted() - digits + 1)
    # The float nearest a number of ``digits`` significant digits prints as it.
    return f"{float(exact.quantize(step, rounding=decimal.ROUND_CEILING)):.{digits}g}"


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
    if delta == 0:
        return 2.0 * epsilon, 0.0
    if epsilon > 709.0:
        # e^epsilon overflows: (1 + e^eps) delta = exp(eps + log(delta) + log1p(e^-eps)),
        # the exponent raised by a rounding allowance of its terms and by e^-eps.
        exponent = epsilon + math.log(delta)
        exponent += 2.0**-48 * (epsilon + abs(math.log(delta))) + math.exp(-epsilon)
        return 2.0 * epsilon, 1.0 if exponent >= 0 else min(
            math.nextafter(math.exp(exponent), math.inf), 1.0)
    # math.exp is within an ulp of e^epsilon: the next float up is at least it,
    # and the product is rounded up from its exact value.
    grow = math.nextafter(math.exp(epsilon), math.inf)
    return 2.0 * epsilon, min(value_at_least((1 + exact_fraction(grow))
                                             * exact_fraction(delta)), 1.0)


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


def _sum_at_least(values):
    """The smallest float at least the exact sum of ``values`` (a total of
    epsilons or deltas is never reported below what was spent); ``inf`` if one is."""
    values = list(values)
    if any(math.isinf(v) for v in values):
        return math.inf
    return value_at_least(sum(exact_fraction(v) for v in values))


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
    gaussian_epsilon : float or None, default=None
        Under ``'gdp'``, the epsilon the Gaussian events were planned for
        (their ``mu`` split from ``gdp_mu(gaussian_epsilon, delta')``). When
        their composed ``mu`` is at most ``gdp_mu(gaussian_epsilon, delta')``
        at the delta ``delta'`` they are converted at, ``mu``-GDP implies
        ``(gaussian_epsilon, delta')``-DP, and the Gaussian part is reported
        at no more than ``gaussian_epsilon``: the conversion back to epsilon
        evaluates its bound with its own round-off and can land a few ulps
        above. Checked here, not trusted: otherwise it is ignored.

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

    def __init__(self, events=(), composition="basic", delta=None, gaussian_epsilon=None):
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}.")
        self.events = tuple(events)
        for event in self.events:
            if not isinstance(event, PrivacyEvent):
                raise TypeError("A PrivacyLedger holds PrivacyEvent objects only.")
        self.composition = composition
        self._delta = None if delta is None else float(delta)
        self.gaussian_epsilon = None if gaussian_epsilon is None else float(gaussian_epsilon)
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
        # One planned Gaussian part carries its plan over (the check in the
        # composition decides whether it still applies).
        hints = [getattr(ledger, "gaussian_epsilon", None) for ledger in ledgers
                 if any(event.is_gaussian for event in ledger.events)]
        combined = cls(events, composition=composition, delta=min(delta, 1.0),
                       gaussian_epsilon=hints[0] if len(hints) == 1 else None)
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
        return hypot_at_least(*mus)

    def _compose(self):
        events = self._converted()
        gaussian = [event for event in events if event.is_gaussian]
        by_mu = self.composition == "gdp" and bool(gaussian)
        if self._delta is None:
            delta = min(_sum_at_least(event.delta for event in events), 1.0)
        else:
            # The declared delta plus what group-privacy conversion added
            # (nothing for Gaussian events composed by mu: 2 mu is exact).
            delta = min(self._delta + sum(
                new.delta - old.delta
                for new, old in zip(events, self.events)
                if not (by_mu and new.is_gaussian)
            ), 1.0)
            if not by_mu:
                # A declared delta below its events' deltas would under-report:
                # basic composition needs their sum at least.
                delta = max(delta, min(_sum_at_least(event.delta for event in events), 1.0))
        basic_eps = _sum_at_least(event.epsilon for event in events)
        if not by_mu:
            return basic_eps, delta
        others = [event for event in events if not event.is_gaussian]
        delta_gauss = difference_at_most(delta, *(event.delta for event in others))
        if delta_gauss <= 0:
            raise ValueError(
                "The ledger's delta leaves nothing for its Gaussian events."
            )
        mu = hypot_at_least(*(event.mu for event in gaussian))
        eps_gauss = gdp_epsilon(mu, min(delta_gauss, 1.0))
        planned = getattr(self, "gaussian_epsilon", None)  # None in ledgers pickled before it
        if planned is not None and 0 < planned < eps_gauss and delta_gauss < 1.0:
            try:
                if mu <= gdp_mu(planned, delta_gauss):
                    eps_gauss = planned  # mu-GDP implies (planned, delta_gauss)-DP
            except ValueError:
                pass
        if delta_gauss >= _sum_at_least(event.delta for event in gaussian):
            # Basic composition of the Gaussian events is also valid at this
            # delta; report the smaller of two valid epsilons.
            eps_gauss = min(eps_gauss, _sum_at_least(event.epsilon for event in gaussian))
        return _sum_at_least([eps_gauss, *(event.epsilon for event in others)]), delta

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
                f"{text_at_least(event.epsilon, 4):>10}{text_at_least(event.delta, 3):>11}"
                f"{mu:>9}"
            )
        if self.events:
            lines.append(
                f"{'total':<24}{self.notion:<9}{self.neighbouring:<13}"
                f"{text_at_least(self.epsilon, 4):>10}{text_at_least(self.delta, 3):>11}"
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
    basic_eps = _sum_at_least(eps for eps, _ in parts)
    delta = min(_sum_at_least(d for _, d in parts), 1.0)
    if composition == "gdp":
        combined = PrivacyLedger.concatenate(ledgers, composition="gdp")
        if combined.delta <= delta * (1 + _BUDGET_RTOL):
            basic_eps = min(combined.epsilon, basic_eps)
    publishable = all(ledger.for_publication for ledger in ledgers)
    return Guarantee(basic_eps, delta, notion, neighbouring, publishable)


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
    delta_out = value_at_least(exact_fraction(q) * exact_fraction(delta))
    if math.isinf(epsilon):
        return math.inf, delta_out
    epsilon = float(epsilon)
    if epsilon > 700.0:
        # log(1 + q (e^eps - 1)) = eps + log(q + (1 - q) e^-eps), without overflow;
        # the sum cancels for a tiny q: the allowance is relative to its terms.
        log_term = math.log(q + (1.0 - q) * math.exp(-epsilon))
        value = epsilon + log_term
        return value + _ROUNDING * (epsilon + abs(log_term) + 1.0), delta_out
    value = math.log1p(q * math.expm1(epsilon))
    # A few roundings of a few ulps each: raised so it is never below the exact value.
    return value * (1.0 + _ROUNDING) + 2.0**-1074, delta_out


# Relative rounding allowance of a few float operations (8 units in the last place).
_ROUNDING = 2.0**-50


def subsample_budget(epsilon, delta, sampling_ratio):
    """The budget a mechanism on a subsample may use so that the whole is (epsilon, delta)-DP.

    The inverse of :func:`subsampled_guarantee`: with ``q = s/n``,

    .. math::
        \\varepsilon_1 = \\log\\left(1 + (e^{\\varepsilon} - 1)/q\\right),
        \\qquad \\delta_1 = \\delta / q.

    Example: ``epsilon = 2.5`` and ``n/s = 10`` give ``epsilon_1 = 4.725837``
    (PRIMO's Algorithm 4 would use the first-order ``(n/s) epsilon = 25``,
    which is unsound for epsilon of order 1). ``delta_1`` must stay below 1;
    this function raises ``ValueError`` otherwise. Both are rounded down, so
    the whole's guarantee never exceeds ``(epsilon, delta)`` by a rounding.
    """
    q = float(sampling_ratio)
    if not 0 < q <= 1:
        raise ValueError("sampling_ratio must lie in (0, 1].")
    delta_1 = math.nextafter(float(delta) / q, 0.0)  # at most delta / q in exact arithmetic
    if not delta_1 < 1:
        raise ValueError(
            "delta / sampling_ratio must be < 1 for the subsampled release."
        )
    if math.isinf(epsilon):
        return math.inf, delta_1
    epsilon = float(epsilon)
    # Rounded down, the safe way: the whole's guarantee, each float step within
    # an ulp or so, must not exceed epsilon. Both directions in forms that do
    # not overflow at a large epsilon: log1p(expm1(e)/q) = e - ln q +
    # log1p((q - 1) e^-e), and log1p(q expm1(e)) = e + ln q + log1p((1/q - 1) e^-e).
    eps_1 = (epsilon - math.log(q) + math.log1p((q - 1.0) * math.exp(-epsilon))
             if epsilon > 1.0 else math.log1p(math.expm1(epsilon) / q)) * (1.0 - _ROUNDING)

    def whole(e):
        if e > 1.0:
            return e + math.log(q) + math.log1p((1.0 / q - 1.0) * math.exp(-e))
        return math.log1p(q * math.expm1(e))

    while whole(eps_1) * (1.0 + _ROUNDING) > epsilon:
        eps_1 = math.nextafter(eps_1, 0.0)
    return eps_1, delta_1


# The shared budget lives in its own module, which uses the ledgers above.
# _attach_accountant and _Reservation too: pickles of accountants made before the
# move name them here.
from ._budget_accountant import (  # noqa: E402
    BudgetAccountant,
    DetachedAccountant,
    _attach_accountant,  # noqa: F401
    _Reservation,  # noqa: F401
)
