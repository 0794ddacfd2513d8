"""Planning weighted LBA and noisy weighted LLP from public facts only.

Bag size, bag count, the budget split and the ledger are functions of
``n``, ``d``, the privacy target and the declared hyperparameters; nothing
here reads data or spends budget.
"""

import math
import warnings
from dataclasses import dataclass, replace

from ..accounting import PrivacyEvent, PrivacyLedger
from ..bounds import check_y_bound
from ..exceptions import ConfigurationError, InsufficientDataError, PrivacyLeakWarning
from ..mechanisms import difference_at_most, width_at_least
from ._accountant import (
    lba_c_star,
    lba_epsilon,
    lba_min_bag_size,
    lba_privacy_profile,
    lba_ptr_bag_size,
    lba_ptr_margin,
    lba_ptr_pass_probability,
    lba_ptr_split,
    lba_ratio,
)
from ._llp_accountant import llp_min_bag_size, llp_privacy_profile

__all__ = [
    "AggregationPlan",
    "plan_aggregation",
    "plan_warnings",
    "resolve_n_bags_min",
    "ptr_pass_probability",
    "ptr_residual_sd_needed",
    "ptr_refusal",
    "MIN_PASS_PROBABILITY",
    "TARGET_PASS_PROBABILITY",
]

#: Below this best possible (or, with ``expected_residual_var``, predicted)
#: pass probability of the private residual test, weighted LBA refuses before
#: any spend.
MIN_PASS_PROBABILITY = 0.05
#: The pass probability the remedies in the refusal message aim at.
TARGET_PASS_PROBABILITY = 0.95

ACCOUNTANT_NAME = "exact-per-bag-v1"
PAPER = "arXiv:2310.10092"


@dataclass(frozen=True)
class AggregationPlan:
    """Everything :func:`run_aggregation` needs, computed from public facts only."""

    mode: str
    assumption: str
    private: bool
    n_samples: int
    n_features: int
    n_columns: int
    fit_intercept: bool
    bag_size: int
    n_bags: int
    label_bounds: tuple | None
    epsilon: float
    delta: float
    epsilon_ptr: float
    delta_ptr: float
    epsilon_aggregation: float
    delta_aggregation: float
    c: float | None
    rss_threshold: float | None
    residual_var_lower_bound: float | None
    delta_partition: float
    noise_fraction: float | None
    noise_scale: float | None
    noise_allocation: str | None
    ptr_target_failure: float
    bounds_epsilon: float = 0.0
    expected_residual_var: float | None = None
    n_bags_min: int = 1
    ptr_epsilon_fraction: float = 0.4

    @property
    def has_ptr_test(self):
        """Whether the release runs the private residual test."""
        return self.private and self.mode == "lba" and self.assumption == "ptr"

    @property
    def bound_pending(self):
        """Whether the label range is still to be estimated privately (in the release)."""
        return self.private and self.label_bounds is None

    def with_label_bounds(self, label_bounds):
        """This plan with the released label range ``(a, b)`` and its residual threshold."""
        label_bounds = (float(label_bounds[0]), float(label_bounds[1]))
        threshold = self.rss_threshold
        if self.c is not None and self.mode == "lba" and self.assumption == "ptr":
            root = (label_bounds[1] - label_bounds[0]) / self.c
            threshold = root * root  # inf (nothing passes), not OverflowError, when huge
        return replace(self, label_bounds=label_bounds, rss_threshold=threshold)

    @property
    def label_range(self):
        if self.label_bounds is None:
            return None
        low, high = self.label_bounds
        return width_at_least(low, high)  # never rounded down

    def ledger(self):
        """The :class:`~skprivreg.accounting.PrivacyLedger` of this run."""
        name = "lba_aggregate" if self.mode == "lba" else "llp_aggregate"
        events = []
        if self.bounds_epsilon > 0:
            events.append(
                PrivacyEvent(name="y_bound", epsilon=self.bounds_epsilon, delta=0.0, notion="label")
            )
        if self.epsilon_ptr > 0:
            events.append(
                PrivacyEvent(
                    name="lba_ptr_check",
                    epsilon=self.epsilon_ptr,
                    delta=self.delta_ptr,
                    notion="label",
                )
            )
        events.append(
            PrivacyEvent(
                name=name,
                epsilon=self.epsilon_aggregation,
                delta=self.delta_aggregation,
                notion="label",
            )
        )
        return PrivacyLedger(events, composition="basic")

    def privacy_report(self, ptr_passed=None):
        """The JSON-serialisable privacy description of the release."""
        ledger = self.ledger()
        return {
            "mechanism": "weighted-LBA" if self.mode == "lba" else "noisy-weighted-LLP",
            "notion": "label",
            "neighbouring": "replace-one",
            "assumption": self.assumption,
            "accountant": ACCOUNTANT_NAME,
            "epsilon": float(ledger.epsilon),
            "delta": float(ledger.delta),
            "target_epsilon": float(self.epsilon),
            "target_delta": float(self.delta),
            "epsilon_aggregation": float(self.epsilon_aggregation),
            "delta_aggregation": float(self.delta_aggregation),
            "epsilon_ptr": float(self.epsilon_ptr),
            "epsilon_y_bound": float(self.bounds_epsilon),
            "delta_ptr": float(self.delta_ptr),
            "ptr_passed": ptr_passed,
            "rss_threshold": self.rss_threshold,
            "c": self.c,
            "label_bounds": None if self.label_bounds is None else list(self.label_bounds),
            "label_range": self.label_range,
            "residual_var_lower_bound": self.residual_var_lower_bound,
            "delta_partition": self.delta_partition,
            "bag_size": self.bag_size,
            "n_bags": self.n_bags,
            "noise_fraction": self.noise_fraction,
            "noise_scale": self.noise_scale,
            "noise_allocation": self.noise_allocation,
            "paper": PAPER,
        }


def resolve_n_bags_min(n_bags_min, n_columns, private):
    """``'auto'`` is ``max(20, 4p)`` when private, 1 otherwise."""
    if n_bags_min == "auto":
        return max(20, 4 * n_columns) if private else 1
    return int(n_bags_min)


def _insufficient(n, epsilon, delta, reason, k_needed, m_min, best=None):
    need = "" if not math.isfinite(k_needed) else f", i.e. n_samples>={int(k_needed) * m_min}"
    best_text = "" if best is None else f"; with n_samples={n} the best achievable is {best}"
    raise InsufficientDataError(
        f"n_samples={n} is too small for (epsilon={epsilon}, delta={delta}): {reason} "
        f"need bag_size>={k_needed} and >={m_min} bags{need}{best_text}."
    )


def _check_private_range_possible(mode, assumption, expected_residual_var, bounds_epsilon):
    """ConfigurationError (before any spend) when the label range cannot be estimated."""
    if not 0 < bounds_epsilon < math.inf:
        raise ConfigurationError(
            "y_bound (the label range) is required here: declare it, or let the "
            "estimator spend bounds_budget * epsilon on a private estimate."
        )
    if mode == "llp":
        raise ConfigurationError(
            "mode='llp' calibrates its guarantee to the ratio of the label range to "
            "noise_scale, both in label units: declare y_bound (or use bounds='data', "
            "not private)."
        )
    if assumption == "declared":
        raise ConfigurationError(
            "assumption='declared' calibrates its guarantee to the ratio of the label "
            "range to residual_var_lower_bound, both in label units: declare y_bound "
            "(or use assumption='ptr', which estimates the range privately)."
        )
    if expected_residual_var is not None:
        raise ConfigurationError(
            "expected_residual_var plans the bag size relative to the label range: "
            "declare y_bound with it, or drop it (the bag size is then the largest "
            "allowed)."
        )


def _max_rss_over_range2(plan):
    """Largest possible ``RSS_j / Delta^2`` of a bag: ``k/4`` with an intercept.

    Labels lie in ``[a, b]``: with an intercept ``RSS_j <= ||y_j - (a+b)/2||^2
    <= k Delta^2 / 4``; without one ``RSS_j <= ||y_j||^2 <= k max(a^2, b^2)``.
    A private range is symmetric, ``(-B, B)``, so both give ``k/4`` then.
    """
    k = plan.bag_size
    if plan.fit_intercept or plan.label_bounds is None:
        return k / 4.0
    a, b = plan.label_bounds
    return k * max(a * a, b * b) / (b - a) ** 2


def _rss_over_range2(plan, residual_sd):
    best = _max_rss_over_range2(plan)
    if residual_sd is None:
        return best
    dof = max(plan.bag_size - plan.n_columns, 1)
    return min(best, dof * (residual_sd / plan.label_range) ** 2)


def _pass_probability(rss_over_range2, c, epsilon_ptr, delta_ptr):
    return lba_ptr_pass_probability(math.sqrt(rss_over_range2) - 1.0 / c, epsilon_ptr, delta_ptr)


def ptr_pass_probability(plan, residual_sd=None):
    """Pass probability of the private residual test, from public facts only.

    The test PASSes iff ``L = (min_j sqrt(RSS_j) - s) / Delta >= A + Z``
    (:func:`~skprivreg.label_dp._accountant.lba_ptr_pass_probability`), with
    ``s = Delta / c``. With ``residual_sd=None`` every bag is given the largest
    possible ``RSS_j`` (``k Delta^2 / 4`` with an intercept): no data set
    passes with a higher probability. With a residual standard deviation
    ``sigma`` (label units), every bag is given ``RSS_j = (k - p) sigma^2``,
    the expectation of a linear model's residual sum of squares (a
    prediction; capped at the largest possible value).
    """
    if not plan.has_ptr_test:
        raise ValueError("The plan has no private residual test.")
    if residual_sd is not None and plan.label_bounds is None:
        raise ValueError("A residual standard deviation needs the label range.")
    return _pass_probability(
        _rss_over_range2(plan, residual_sd), plan.c, plan.epsilon_ptr, plan.delta_ptr
    )


def _required_statistic(plan, target):
    return lba_ptr_margin(plan.epsilon_ptr, plan.delta_ptr, 1.0 - target) + 1.0 / plan.c


def ptr_residual_sd_needed(plan, target=None):
    """Residual sd (in units of the label range) at which the test passes w.p. ``target``.

    Every bag with ``RSS_j = (k - p) sigma^2``: ``sigma / Delta = (M + 1/c) /
    sqrt(k - p)`` with ``M`` the margin of
    :func:`~skprivreg.label_dp._accountant.lba_ptr_margin`.
    """
    target = TARGET_PASS_PROBABILITY if target is None else target
    dof = max(plan.bag_size - plan.n_columns, 1)
    return _required_statistic(plan, target) / math.sqrt(dof)


def _epsilon_needed(plan, rss_over_range2, target):
    """Smallest total epsilon (bag size fixed) with pass probability >= target, or None."""
    share = plan.bounds_epsilon / plan.epsilon if math.isfinite(plan.bounds_epsilon) else 0.0

    def prob(epsilon):
        eps_mech = epsilon * (1.0 - share)
        eps_ptr, delta_ptr, eps_agg, delta_half = lba_ptr_split(
            eps_mech, plan.delta, plan.ptr_epsilon_fraction
        )
        c = lba_c_star(eps_agg, delta_half)
        if c <= 0:
            return 0.0
        return _pass_probability(rss_over_range2, c, eps_ptr, delta_ptr)

    lo, hi = math.log(plan.epsilon), math.log(1e4)
    if prob(math.exp(hi)) < target:
        return None
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if prob(math.exp(mid)) >= target:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-3:
            break
    return math.exp(hi)


def _bag_size_needed(plan, residual_sd, target):
    """Smallest bag size with pass probability >= target at ``residual_sd`` (None: largest RSS)."""
    need = _required_statistic(plan, target) ** 2
    per_row = _max_rss_over_range2(plan) / plan.bag_size
    if residual_sd is None or (residual_sd / plan.label_range) ** 2 >= per_row:
        return max(math.ceil(need / per_row), 2 * plan.n_columns)
    return plan.n_columns + math.ceil(need / (residual_sd / plan.label_range) ** 2)


def _round_up(value, digits=3):
    """``value`` rounded up to ``digits`` significant digits (a remedy stays sufficient)."""
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return round(math.ceil(value / scale - 1e-9) * scale, 12)


def ptr_refusal(plan):
    """The refusal message when the test cannot pass w.p. >= MIN_PASS_PROBABILITY, else None.

    Public facts only. The remedies aim at :data:`TARGET_PASS_PROBABILITY`
    and are each checked to be possible: a residual standard deviation (if
    some label values in the range can have it), ``n_samples`` (with the bag
    size ``n_samples // n_bags_min``), ``bag_size`` (only up to the largest
    allowed) and ``epsilon`` (up to 1e4).
    """
    declared_sd = None
    if plan.expected_residual_var is not None and plan.label_bounds is not None:
        declared_sd = math.sqrt(plan.expected_residual_var)
    prob = ptr_pass_probability(plan, declared_sd)
    if prob >= MIN_PASS_PROBABILITY:
        return None
    target = TARGET_PASS_PROBABILITY
    n, k, m_min = plan.n_samples, plan.bag_size, plan.n_bags_min
    k_max = max(n // m_min, 1)
    known = plan.label_bounds is not None
    rng_text = f"{plan.label_range:g}" if known else "Delta (estimated privately)"

    def in_units(value):
        if known:
            return f"{_round_up(value * plan.label_range):g}"
        return f"{_round_up(value):g} * Delta"

    if declared_sd is None:
        how = (
            f"at most {prob:.2g}, even if every bag's residual sum of squares took its "
            f"largest possible value ({_max_rss_over_range2(plan) / k:.3g} * bag_size * "
            "label range^2)"
        )
    else:
        how = (
            f"about {prob:.2g} at expected_residual_var={plan.expected_residual_var:g} "
            "(every bag's residual sum of squares near (bag_size - p) * "
            "expected_residual_var)"
        )
    facts = (
        f"n_samples={n}, p={plan.n_columns} design columns, bag_size={k}"
        + (f" (the largest allowed, n_samples // {m_min} bags)" if k == k_max else "")
        + f", label range {rng_text}, epsilon={plan.epsilon:g}, delta={plan.delta:g}"
    )
    remedies, notes = [], []
    sd_needed = ptr_residual_sd_needed(plan, target)
    sd_largest = math.sqrt(_max_rss_over_range2(plan) / max(k - plan.n_columns, 1))
    if sd_needed <= sd_largest:
        remedies.append(
            f"a residual standard deviation of at least {in_units(sd_needed)} "
            "(label units) in every bag"
        )
    else:
        notes.append(
            f"No residual standard deviation suffices at bag_size={k}: it would need "
            f"{in_units(sd_needed)}, above the largest possible {in_units(sd_largest)}."
        )
    sd_text = (
        "with labels at their largest possible spread" if declared_sd is None
        else f"at residual standard deviation {declared_sd:.4g}"
    )
    k_need = _bag_size_needed(plan, declared_sd, target)
    if k < k_need <= k_max:
        remedies.append(f"bag_size >= {k_need} (at most {k_max} here) {sd_text}")
    remedies.append(f"n_samples >= {k_need * m_min} {sd_text}")
    eps_need = _epsilon_needed(plan, _rss_over_range2(plan, declared_sd), target)
    if eps_need is None:
        notes.append(f"No epsilon up to 1e4 suffices at bag_size={k}.")
    else:
        remedies.append(f"epsilon >= {_round_up(eps_need):g} at bag_size={k}, {sd_text}")
    return (
        "Weighted LBA refuses from public facts alone: its private residual test "
        f"would pass with probability {how}, below {MIN_PASS_PROBABILITY:.0%}. Public "
        f"facts: {facts}. Nothing was spent. To pass with probability {target:.0%}, "
        "any one of these suffices: " + "; ".join(remedies) + ". "
        + "".join(note + " " for note in notes)
        + "Otherwise use GaussianLabelNoiseRegressor, which has no private test."
    )


def plan_aggregation(
    n_samples,
    n_features,
    *,
    epsilon=1.0,
    delta=1e-6,
    mode="lba",
    bag_size="auto",
    n_bags=None,
    y_bound=None,
    assumption="ptr",
    residual_var_lower_bound=None,
    declared_failure_prob=0.0,
    expected_residual_var=None,
    ptr_epsilon_fraction=0.4,
    ptr_target_failure=0.05,
    n_bags_min="auto",
    noise_fraction=0.1,
    noise_scale=1.0,
    noise_allocation="per_bag",
    fit_intercept=True,
    bounds_epsilon=0.0,
    check_pass_probability=True,
):
    """Resolve bag size, bag count and the budget split from public facts.

    ``y_bound`` is the declared label range (a float ``B`` for ``[-B, B]`` or
    a pair). Without it, ``bounds_epsilon`` (``0 < bounds_epsilon < epsilon``)
    is the share of ``epsilon`` the release spends on a private label range
    (``mode='lba'``, ``assumption='ptr'`` only: their guarantee does not
    depend on the range, only the residual threshold scales with it);
    ``bounds_epsilon=inf`` records a range read from the data (non-private).

    With ``assumption='ptr'`` the best possible pass probability of the private
    residual test (:func:`ptr_pass_probability`; with
    ``expected_residual_var``, the predicted one) must reach
    :data:`MIN_PASS_PROBABILITY`, else :class:`InsufficientDataError` says
    which ``n_samples``, ``epsilon`` or residual standard deviation would make
    it pass with probability :data:`TARGET_PASS_PROBABILITY`.

    Raises ``ValueError`` for bad parameters, :class:`ConfigurationError` for
    a missing ``y_bound`` that cannot be estimated, and
    :class:`InsufficientDataError` when ``n_samples`` cannot reach the
    target; nothing is read from the data and nothing is spent.
    """
    n = int(n_samples)
    p = int(n_features) + (1 if fit_intercept else 0)
    if mode not in ("lba", "llp"):
        raise ValueError("mode must be 'lba' or 'llp'.")
    if assumption not in ("ptr", "declared", "none"):
        raise ValueError("assumption must be 'ptr', 'declared' or 'none'.")
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    private = assumption != "none" and math.isfinite(epsilon)
    label_bounds = check_y_bound(y_bound)
    bounds_epsilon = float(bounds_epsilon) if private else 0.0
    if label_bounds is None and private:
        _check_private_range_possible(mode, assumption, expected_residual_var, bounds_epsilon)
        if not bounds_epsilon < epsilon:
            raise ValueError("bounds_epsilon must be below epsilon.")
    elif label_bounds is not None and 0 < bounds_epsilon < math.inf:
        raise ValueError("bounds_epsilon applies only when y_bound is not declared.")
    # The mechanisms' budget: what the label range does not take.
    eps_mech = (difference_at_most(epsilon, bounds_epsilon) if math.isfinite(bounds_epsilon)
                else float(epsilon))
    if mode == "llp" and not 0 <= noise_fraction <= 1:
        raise ValueError("noise_fraction must lie in [0, 1].")
    if mode == "llp" and private and noise_fraction == 0:
        raise ValueError(
            "noise_fraction=0 is not label-DP (weighted LLP without noise); it is "
            "allowed only with assumption='none'."
        )
    if mode == "llp" and not noise_scale > 0:
        raise ValueError("noise_scale must be > 0.")
    if noise_allocation not in ("per_bag", "global"):
        raise ValueError("noise_allocation must be 'per_bag' or 'global'.")
    if mode == "lba" and assumption == "declared":
        if residual_var_lower_bound is None or not residual_var_lower_bound > 0:
            raise ValueError("assumption='declared' needs residual_var_lower_bound > 0.")
        if not 0 <= declared_failure_prob < delta:
            raise ValueError("declared_failure_prob must lie in [0, delta).")
    if not 0 < ptr_epsilon_fraction < 1:
        raise ValueError("ptr_epsilon_fraction must lie in (0, 1).")
    if not 0 < ptr_target_failure < 0.5:
        raise ValueError("ptr_target_failure must lie in (0, 0.5).")
    m_min = resolve_n_bags_min(n_bags_min, p, private)
    delta_range = (None if label_bounds is None
                   else width_at_least(*label_bounds))

    eps_ptr = delta_ptr = 0.0
    c = rss_threshold = None
    delta_partition = 0.0
    k = bag_size
    if mode == "lba" and private:
        if assumption == "declared":
            alpha = float(residual_var_lower_bound)
            delta_partition = float(declared_failure_prob)
            if k == "auto":
                k = lba_min_bag_size(eps_mech, delta - delta_partition, delta_range, alpha, p)
                if not math.isfinite(k) or k * m_min > n:
                    k_best = max(n // m_min, 1)
                    best = lba_epsilon(
                        delta - delta_partition, lba_ratio(delta_range, alpha, k_best)
                    )
                    _insufficient(
                        n, epsilon, delta,
                        f"label range {delta_range} and residual_var_lower_bound={alpha:g}",
                        k, m_min,
                        best=f"epsilon={best:.3g} at delta={delta} (bag_size={k_best})",
                    )
            rss_threshold = alpha * k
            c = lba_ratio(delta_range, alpha, k)
            eps_agg = float(eps_mech)
            delta_agg = lba_privacy_profile(eps_mech, c) + delta_partition
            if delta_agg > delta:
                k_need = lba_min_bag_size(eps_mech, delta - delta_partition, delta_range, alpha, p)
                _insufficient(
                    n, epsilon, delta,
                    f"bag_size={k} gives delta={delta_agg:.3g}; label range {delta_range} and "
                    f"residual_var_lower_bound={alpha:g}",
                    k_need, m_min,
                )
        else:  # 'ptr'
            eps_ptr, delta_ptr, eps_agg, delta_half = lba_ptr_split(
                eps_mech, delta, ptr_epsilon_fraction
            )
            c = lba_c_star(eps_agg, delta_half)
            if c <= 0:
                raise InsufficientDataError(
                    f"n_samples={n}: (epsilon={epsilon}, delta={delta}) is unreachable by "
                    "weighted LBA at any bag size."
                )
            root = None if delta_range is None else delta_range / c
            rss_threshold = None if root is None else root * root  # inf when huge: fails
            delta_agg = lba_privacy_profile(eps_agg, c)
            if k == "auto":
                k = max(n // m_min, 1)
                if expected_residual_var is not None:
                    # The bag size at which the test passes w.p. about
                    # 1 - ptr_target_failure, capped at the largest allowed
                    # (the pass-probability check below refuses if too small).
                    k = min(k, lba_ptr_bag_size(
                        eps_mech, delta, delta_range, float(expected_residual_var), p,
                        fraction=ptr_epsilon_fraction, beta=ptr_target_failure,
                    ))
    elif mode == "llp" and private:
        eps_agg = float(eps_mech)
        args = (noise_fraction, delta_range, noise_scale, n, noise_allocation)
        if k == "auto":
            k = llp_min_bag_size(eps_mech, delta, *args)
            if not math.isfinite(k) or k * m_min > n:
                _insufficient(
                    n, epsilon, delta,
                    f"noise_fraction={noise_fraction} and label range / noise_scale="
                    f"{delta_range / noise_scale:g}",
                    k, m_min,
                )
        delta_agg = llp_privacy_profile(eps_mech, k, *args)
        if delta_agg > delta:
            k_need = llp_min_bag_size(eps_mech, delta, *args)
            _insufficient(
                n, epsilon, delta,
                f"bag_size={k} gives delta={delta_agg:.3g}; noise_fraction={noise_fraction} "
                f"and label range / noise_scale={delta_range / noise_scale:g}",
                k_need, m_min,
            )
    else:
        if k == "auto":
            raise ValueError("bag_size='auto' needs a private assumption ('ptr' or 'declared').")
        eps_agg, delta_agg = math.inf, 1.0

    k = int(k)
    if k < 1:
        raise ValueError("bag_size must be >= 1.")
    if k > n:
        _insufficient(n, epsilon, delta, "the chosen settings", k, m_min)
    m = n // k if n_bags is None else int(n_bags)
    if m < 1 or m * k > n:
        raise ValueError(
            f"n_bags={n_bags} with bag_size={k} needs n_bags*bag_size <= n_samples={n}."
        )
    if m < m_min:
        _insufficient(n, epsilon, delta, f"with bag_size={k}, fits", k, m_min)
    plan = AggregationPlan(
        mode=mode,
        # LLP's guarantee needs no assumption on the data.
        assumption=("none" if not private else "not-required" if mode == "llp" else assumption),
        private=private,
        n_samples=n,
        n_features=int(n_features),
        n_columns=p,
        fit_intercept=bool(fit_intercept),
        bag_size=k,
        n_bags=m,
        label_bounds=label_bounds,
        epsilon=float(epsilon),
        delta=float(delta),
        epsilon_ptr=float(eps_ptr),
        delta_ptr=float(delta_ptr),
        epsilon_aggregation=float(eps_agg),
        delta_aggregation=float(delta_agg),
        c=c,
        rss_threshold=rss_threshold,
        residual_var_lower_bound=(
            float(residual_var_lower_bound) if assumption == "declared" and private else None
        ),
        delta_partition=delta_partition,
        noise_fraction=float(noise_fraction) if mode == "llp" else None,
        noise_scale=float(noise_scale) if mode == "llp" else None,
        noise_allocation=noise_allocation if mode == "llp" else None,
        ptr_target_failure=float(ptr_target_failure),
        bounds_epsilon=bounds_epsilon,
        expected_residual_var=(
            None if expected_residual_var is None else float(expected_residual_var)
        ),
        n_bags_min=m_min,
        ptr_epsilon_fraction=float(ptr_epsilon_fraction),
    )
    if check_pass_probability and plan.has_ptr_test:
        message = ptr_refusal(plan)
        if message is not None:
            raise InsufficientDataError(message)
    return plan


def plan_warnings(plan, random_state, stacklevel=3):
    """Public-fact warnings: fixed seed, delta > 1/n, k < 2p, no guarantee."""
    if not plan.private:
        warnings.warn(
            "Weighted LBA/LLP without a privacy assumption (assumption='none' or "
            "epsilon=inf): the output is NOT label-DP.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )
        return
    if plan.delta > 1.0 / plan.n_samples:
        warnings.warn(
            f"delta={plan.delta} > 1/n_samples={1.0 / plan.n_samples:.3g}: a mechanism "
            "that publishes one label in the clear meets this delta.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )
    if plan.bag_size < 2 * plan.n_columns:
        warnings.warn(
            f"bag_size={plan.bag_size} < 2p={2 * plan.n_columns}: bag designs are close "
            "to full rank and residuals small.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )
