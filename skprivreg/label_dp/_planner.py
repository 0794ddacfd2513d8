"""The public planner of weighted LBA / noisy weighted LLP: :func:`lba_plan`."""

import math
from dataclasses import dataclass

from ..bounds import check_private_bound_feasible, check_y_bound
from ..mechanisms import gaussian_sigma, product_at_most, width_at_least
from ._planning import (
    TARGET_PASS_PROBABILITY,
    plan_aggregation,
    ptr_pass_probability,
    ptr_refusal,
    ptr_residual_sd_needed,
)

__all__ = ["LBAPlan", "lba_plan"]


@dataclass(frozen=True)
class LBAPlan:
    """What :class:`WeightedLBARegressor` will do, from public facts only.

    ``str(plan)`` is the text ``python -m skprivreg plan lba`` prints.

    Attributes
    ----------
    mode, assumption : str
        As in :class:`WeightedLBARegressor` (``assumption='not-required'``
        for LLP).
    n_samples, n_features, n_columns : int
        ``n``, ``d`` and ``p = d + fit_intercept``.
    bag_size, n_bags, n_bags_min : int
        ``k``, ``m = n // k`` (rows beyond ``m k`` are dropped) and the
        smallest bag count allowed.
    epsilon, delta : float
        The guarantee of the release (label-DP, replace-one label).
    epsilon_y_bound : float
        Spent on a private label range (0 when ``y_bound`` is declared).
    epsilon_test, delta_test, epsilon_aggregation, delta_aggregation : float
        The budget split of the private residual test and the aggregation.
    y_bound : tuple (low, high) or None
        The declared label range (``None``: estimated privately).
    c : float or None
        ``Delta / s``: the residual test requires every bag's
        ``sqrt(RSS_j) >= s = Delta / c`` (LBA only).
    best_pass_probability : float or None
        Pass probability of the private residual test if every bag's residual
        sum of squares took its largest possible value (``k Delta^2 / 4`` with
        an intercept); no data set does better.
    predicted_pass_probability : float or None
        Pass probability at ``expected_residual_var`` (every bag's residual
        sum of squares at ``(k - p) expected_residual_var``), if declared.
    residual_sd_for_target : float or None
        Residual standard deviation (label units; in units of the label range
        when ``y_bound`` is not declared) at which the test passes with
        probability 95%.
    excess_loss_factor : float or None
        OLS on the aggregates: excess loss about ``p / (m - p - 1)`` times the
        residual variance.
    baseline_sigma : float or None
        Noise standard deviation of :class:`GaussianLabelNoiseRegressor` at
        the same ``(epsilon, delta)`` and declared range.
    refusal : str or None
        The :class:`~skprivreg.exceptions.InsufficientDataError` message the
        estimator raises before any spend (pass probability below 5%).
    """

    mode: str
    assumption: str
    n_samples: int
    n_features: int
    n_columns: int
    bag_size: int
    n_bags: int
    n_bags_min: int
    epsilon: float
    delta: float
    epsilon_y_bound: float
    epsilon_test: float
    delta_test: float
    epsilon_aggregation: float
    delta_aggregation: float
    y_bound: tuple | None
    c: float | None
    best_pass_probability: float | None
    predicted_pass_probability: float | None
    residual_sd_for_target: float | None
    excess_loss_factor: float | None
    baseline_sigma: float | None
    refusal: str | None

    def __str__(self):
        p, m, k = self.n_columns, self.n_bags, self.bag_size
        name = "weighted-LBA" if self.mode == "lba" else "noisy-weighted-LLP"
        label_range = None if self.y_bound is None else self.y_bound[1] - self.y_bound[0]
        lines = [
            f"mechanism            {name} (label-DP, replace-one label)",
            f"assumption           {self.assumption}",
            f"n, d, p              {self.n_samples}, {self.n_features}, {p}",
            f"bag_size k           {k}",
            f"n_bags m             {m}  (uses {m * k} samples, drops {self.n_samples - m * k})",
            f"guarantee            epsilon={self.epsilon:.6g}, delta={self.delta:.3g}",
        ]
        if self.y_bound is None:
            lines.append(
                f"label range          estimated privately (epsilon={self.epsilon_y_bound:.4g})"
            )
        else:
            lines.append(f"label range          {self.y_bound} (declared)")
        if self.c is not None:
            s_text = f"{label_range / self.c:.6g}" if label_range else f"{1 / self.c:.4g} * Delta"
            how = "tested" if self.assumption == "ptr" else "assumed"
            lines.append(
                f"per-bag c = Delta/s  {self.c:.6g}  ({how}: every bag sqrt(RSS) >= {s_text})"
            )
        if self.best_pass_probability is not None:
            lines.append(
                f"budget split         test eps={self.epsilon_test:.4g} "
                f"delta={self.delta_test:.3g}; aggregation eps={self.epsilon_aggregation:.4g} "
                f"delta={self.delta_aggregation:.3g}"
            )
            lines.append(
                f"test pass prob.      at most {self.best_pass_probability:.3g} (every bag at its "
                "largest possible RSS)"
            )
            if self.predicted_pass_probability is not None:
                lines.append(
                    f"                     about {self.predicted_pass_probability:.3g} at the "
                    "expected residual variance"
                )
            unit = " (label units)" if label_range else " * Delta"
            lines.append(
                f"residual sd for {TARGET_PASS_PROBABILITY:.0%}  >= "
                f"{self.residual_sd_for_target:.4g}{unit} in every bag"
            )
        if self.excess_loss_factor is not None:
            lines.append(
                f"excess loss (OLS)    about {self.excess_loss_factor:.3g} x residual variance"
            )
        if self.baseline_sigma is not None:
            lines.append(
                f"baseline             Gaussian label noise sigma={self.baseline_sigma:.4g}; "
                f"OLS excess loss about {self.baseline_sigma**2 * p / self.n_samples:.4g} "
                "(absolute, label units^2)"
            )
        if self.refusal is not None:
            lines.append(f"REFUSED              {self.refusal}")
        return "\n".join(lines)


def lba_plan(
    *,
    n_samples,
    n_features,
    epsilon=1.0,
    delta=1e-6,
    y_bound=None,
    mode="lba",
    assumption="ptr",
    bag_size="auto",
    residual_var_lower_bound=None,
    expected_residual_var=None,
    ptr_epsilon_fraction=0.4,
    noise_fraction=0.1,
    noise_scale=1.0,
    noise_allocation="per_bag",
    bounds_budget=0.1,
    fit_intercept=True,
):
    """Plan :class:`WeightedLBARegressor` from public facts; no data is read.

    Parameters
    ----------
    n_samples, n_features : int
        Rows and feature columns of the data to be fitted.
    epsilon : float, default=1.0
    delta : float, default=1e-6
    y_bound : float, (low, high) or None, default=None
        Declared label range (label units). ``None``: a private estimate
        with ``bounds_budget * epsilon`` (``mode='lba'``,
        ``assumption='ptr'`` only).
    mode, assumption, bag_size, residual_var_lower_bound, expected_residual_var, \
ptr_epsilon_fraction, noise_fraction, noise_scale, noise_allocation, bounds_budget, \
fit_intercept :
        As in :class:`WeightedLBARegressor` (variances in label units squared,
        ``noise_scale`` in label units).

    Returns
    -------
    plan : LBAPlan
        ``plan.refusal`` holds the message of the
        :class:`~skprivreg.exceptions.InsufficientDataError` the estimator
        would raise before any spend because its private residual test passes
        with probability below 5%.

    Raises
    ------
    ConfigurationError, InsufficientDataError
        What the estimator raises before any spend for other reasons (too few
        bags, an unreachable target, a label range that cannot be estimated).
    """
    declared = check_y_bound(y_bound)
    private = assumption != "none" and math.isfinite(epsilon)
    bounds_epsilon = 0.0
    if declared is None and private:
        bounds_epsilon = product_at_most(bounds_budget, epsilon)
    plan = plan_aggregation(
        n_samples, n_features, epsilon=epsilon, delta=delta, mode=mode, bag_size=bag_size,
        y_bound=declared, assumption=assumption,
        residual_var_lower_bound=residual_var_lower_bound,
        expected_residual_var=expected_residual_var, ptr_epsilon_fraction=ptr_epsilon_fraction,
        noise_fraction=noise_fraction, noise_scale=noise_scale,
        noise_allocation=noise_allocation, fit_intercept=fit_intercept,
        bounds_epsilon=bounds_epsilon, check_pass_probability=False,
    )
    if bounds_epsilon > 0:
        check_private_bound_feasible(n_samples, bounds_epsilon, "y_bound")
    best = predicted = sd_target = None
    refusal = None
    if plan.has_ptr_test:
        best = ptr_pass_probability(plan)
        if expected_residual_var is not None and declared is not None:
            predicted = ptr_pass_probability(plan, math.sqrt(expected_residual_var))
        sd_target = ptr_residual_sd_needed(plan, TARGET_PASS_PROBABILITY)
        if declared is not None:
            sd_target *= plan.label_range
        refusal = ptr_refusal(plan)
    m, p = plan.n_bags, plan.n_columns
    ledger = plan.ledger()
    sigma = None
    if declared is not None and math.isfinite(epsilon):
        sigma = gaussian_sigma(width_at_least(*declared), epsilon, delta)  # as the fit's
    return LBAPlan(
        mode=plan.mode,
        assumption=plan.assumption,
        n_samples=plan.n_samples,
        n_features=plan.n_features,
        n_columns=p,
        bag_size=plan.bag_size,
        n_bags=m,
        n_bags_min=plan.n_bags_min,
        epsilon=float(ledger.epsilon),
        delta=float(ledger.delta),
        epsilon_y_bound=float(plan.bounds_epsilon),
        epsilon_test=plan.epsilon_ptr,
        delta_test=plan.delta_ptr,
        epsilon_aggregation=plan.epsilon_aggregation,
        delta_aggregation=plan.delta_aggregation,
        y_bound=declared,
        c=plan.c if plan.mode == "lba" else None,
        best_pass_probability=best,
        predicted_pass_probability=predicted,
        residual_sd_for_target=sd_target,
        excess_loss_factor=p / (m - p - 1) if m > p + 1 else None,
        baseline_sigma=sigma,
        refusal=refusal,
    )
