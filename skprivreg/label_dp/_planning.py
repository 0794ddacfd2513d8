"""Planning weighted LBA and noisy weighted LLP from public facts only.

Bag size, bag count, the budget split and the ledger are functions of
``n``, ``d``, the privacy target and the declared hyperparameters; nothing
here reads data or spends budget.
"""

import math
import warnings
from dataclasses import dataclass

from ..accounting import PrivacyEvent, PrivacyLedger
from ..exceptions import InsufficientDataError, PrivacyLeakWarning
from ._accountant import (
    lba_c_star,
    lba_epsilon,
    lba_min_bag_size,
    lba_privacy_profile,
    lba_ptr_bag_size,
    lba_ptr_split,
    llp_min_bag_size,
    llp_privacy_profile,
)

__all__ = ["AggregationPlan", "plan_aggregation", "plan_warnings", "resolve_n_bags_min"]

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

    @property
    def label_range(self):
        if self.label_bounds is None:
            return None
        return float(self.label_bounds[1] - self.label_bounds[0])

    def ledger(self):
        """The :class:`~skprivreg.accounting.PrivacyLedger` of this run."""
        name = "lba_aggregate" if self.mode == "lba" else "llp_aggregate"
        events = []
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


def plan_aggregation(
    n_samples,
    n_features,
    *,
    epsilon=1.0,
    delta=1e-6,
    mode="lba",
    bag_size="auto",
    n_bags=None,
    label_bounds=None,
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
):
    """Resolve bag size, bag count and the budget split from public facts (spec §1.5).

    Raises ``ValueError`` for bad parameters and
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
    if label_bounds is not None:
        a, b = (float(v) for v in label_bounds)
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError("label_bounds must be finite (a, b) with a < b.")
        label_bounds = (a, b)
    elif private:
        raise ValueError(
            "label_bounds=(a, b) is required (public bounds chosen without looking at "
            "the labels) unless assumption='none'."
        )
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
    delta_range = None if label_bounds is None else label_bounds[1] - label_bounds[0]

    eps_ptr = delta_ptr = 0.0
    c = rss_threshold = None
    delta_partition = 0.0
    k = bag_size
    if mode == "lba" and private:
        if assumption == "declared":
            alpha = float(residual_var_lower_bound)
            delta_partition = float(declared_failure_prob)
            if k == "auto":
                k = lba_min_bag_size(epsilon, delta - delta_partition, delta_range, alpha, p)
                if not math.isfinite(k) or k * m_min > n:
                    k_best = max(n // m_min, 1)
                    best = lba_epsilon(
                        delta - delta_partition, delta_range / math.sqrt(alpha * k_best)
                    )
                    _insufficient(
                        n, epsilon, delta,
                        f"label range {delta_range} and residual_var_lower_bound={alpha:g}",
                        k, m_min,
                        best=f"epsilon={best:.3g} at delta={delta} (bag_size={k_best})",
                    )
            rss_threshold = alpha * k
            c = delta_range / math.sqrt(rss_threshold)
            eps_agg = float(epsilon)
            delta_agg = lba_privacy_profile(epsilon, c) + delta_partition
            if delta_agg > delta:
                k_need = lba_min_bag_size(epsilon, delta - delta_partition, delta_range, alpha, p)
                _insufficient(
                    n, epsilon, delta,
                    f"bag_size={k} gives delta={delta_agg:.3g}; label range {delta_range} and "
                    f"residual_var_lower_bound={alpha:g}",
                    k_need, m_min,
                )
        else:  # 'ptr'
            eps_ptr, delta_ptr, eps_agg, delta_half = lba_ptr_split(
                epsilon, delta, ptr_epsilon_fraction
            )
            c = lba_c_star(eps_agg, delta_half)
            if c <= 0:
                raise InsufficientDataError(
                    f"n_samples={n}: (epsilon={epsilon}, delta={delta}) is unreachable by "
                    "weighted LBA at any bag size."
                )
            rss_threshold = (delta_range / c) ** 2
            delta_agg = lba_privacy_profile(eps_agg, c)
            if k == "auto":
                if expected_residual_var is None:
                    k = max(n // m_min, 1)
                else:
                    k = lba_ptr_bag_size(
                        epsilon, delta, delta_range, float(expected_residual_var), p,
                        fraction=ptr_epsilon_fraction, beta=ptr_target_failure,
                    )
                    if k * m_min > n:
                        _insufficient(
                            n, epsilon, delta,
                            f"the residual check with label range {delta_range} and "
                            f"expected_residual_var={expected_residual_var:g} would",
                            k, m_min,
                        )
    elif mode == "llp" and private:
        eps_agg = float(epsilon)
        args = (noise_fraction, delta_range, noise_scale, n, noise_allocation)
        if k == "auto":
            k = llp_min_bag_size(epsilon, delta, *args)
            if not math.isfinite(k) or k * m_min > n:
                _insufficient(
                    n, epsilon, delta,
                    f"noise_fraction={noise_fraction} and label range / noise_scale="
                    f"{delta_range / noise_scale:g}",
                    k, m_min,
                )
        delta_agg = llp_privacy_profile(epsilon, k, *args)
        if delta_agg > delta:
            k_need = llp_min_bag_size(epsilon, delta, *args)
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
    return AggregationPlan(
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
    )


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
