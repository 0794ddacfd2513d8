"""Sufficient statistics perturbation (SSP): the Gaussian-mechanism baseline.

Also holds the machinery that AdaSSP shares with it: declared or private
bounds, clipping, intercept augmentation, the replace-one sensitivities of
``X^T X`` and ``X^T Y``, and the PSD-repaired solve.
"""

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from .._compat import Interval, StrOptions, fit_context, validate_params
from .._gram import gram_statistics, source_block_rows
from .._rows import RowSource, validate_blockwise_data
from ..accounting import PrivacyLedger, gdp_mu
from ..base import DPEstimatorMixin
from ..bounds import min_samples_for_private_bound
from ..mechanisms import (
    add_gaussian,
    difference_at_most,
    exact_fraction,
    gaussian_event,
    gaussian_event_from_mu,
    gdp_split,
    gram_upper_sensitivity,
    hypot_at_least,
    intercept_gram_sensitivity,
    shares_at_most,
    sqrt_times_at_least,
    symmetric_gaussian_matrix,
)
from ..mechanisms import cross_sensitivity as mechanisms_cross_sensitivity
from ._base import (
    LinearPredictMixin,
    solve_psd_repaired,
    split_intercept,
)
from ._private_bounds import (
    LARGEST_BOUND_SCALE,
    bound_block_counts,
    bound_epsilons,
    check_bound_scales,
    check_bounds_feasible,
    label_magnitude,
    planned_bound_events,
    resolve_bounds,
)

__all__ = [
    "SSPRegressor",
    "SSPPlan",
    "ssp_plan",
    "gram_sensitivity",
    "cross_sensitivity",
    "bound_block_counts",
]


def gram_sensitivity(x_bound_eff):
    """Replace-one L2-sensitivity of the upper triangle of ``X^T X``: ``sqrt(2) B^2``.

    For rows with ``||x|| <= B``, the upper-triangle vector of
    ``x x^T - x' x'^T`` has squared norm ``(||D||_F^2 + sum_i D_ii^2)/2 <= 2 B^4``,
    with equality at ``x = B e_1``, ``x' = B e_2``. Never rounded down
    (:func:`~skprivreg.mechanisms.gram_upper_sensitivity` without a constant column).
    """
    return gram_upper_sensitivity(x_bound_eff)


def cross_sensitivity(x_bound_eff, y_bound, n_outputs=1):
    """Replace-one L2 (Frobenius) sensitivity of ``X^T Y``: ``2 B sqrt(l) y_bound``.

    ``||x y^T - x' y'^T||_F <= 2 B sqrt(l) y_bound`` for ``|y_j| <= y_bound``,
    with equality at ``x' = -x``, ``y' = y``. Never rounded down
    (:func:`~skprivreg.mechanisms.cross_sensitivity` at the outcome-row
    bound ``sqrt(l) y_bound``, itself rounded up).
    """
    return mechanisms_cross_sensitivity(x_bound_eff, sqrt_times_at_least(n_outputs, y_bound))


class _BaseSSP(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Shared ``fit`` of the SSP family: bounds, clipping, statistics, ledger.

    Subclasses define ``_n_gaussian_releases`` and ``_release_and_solve``.
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "x_bound": [Interval(Real, 0, None, closed="neither"), None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "bounds_quantile": [Interval(Real, 0, 1, closed="right"), StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, LARGEST_BOUND_SCALE, closed="right")],
        "composition": [StrOptions({"gdp", "basic"})],
        "verbose": ["verbose"],
    }

    _release_names = ()

    # -- planning (public facts only) ------------------------------------
    def _bound_epsilons(self, private):
        """Epsilon of each missing bound: a budget share, or inf when read from data."""
        missing = [
            name
            for name, value in (("x_bound", self.x_bound), ("y_bound", self.y_bound))
            if value is None
        ]
        return bound_epsilons(missing, private=private, bounds=self.bounds,
                              bounds_budget=self.bounds_budget, epsilon=self.epsilon)

    def _release_events(self, sensitivities, epsilon, delta):
        """One Gaussian event per release, calibrated at the total (epsilon, delta)."""
        names = self._release_names
        if math.isinf(epsilon):
            return [
                gaussian_event(name, sens, np.inf, 0.5)
                for name, sens in zip(names, sensitivities)
            ]
        equal = [1] * len(names)
        deltas = shares_at_most(delta, equal)
        if self.composition == "gdp":
            mus = gdp_split(gdp_mu(epsilon, delta), equal)
            return [
                gaussian_event_from_mu(name, sens, mu, share)
                for name, sens, mu, share in zip(names, sensitivities, mus, deltas)
            ]
        return [
            gaussian_event(name, sens, eps, share)
            for name, sens, eps, share in zip(names, sensitivities,
                                              shares_at_most(epsilon, equal), deltas)
        ]

    def _plan_ledger(self, private, n_outputs, x_bound=1.0, y_bound=1.0, bound_events=None):
        """The ledger of one ``fit``.

        Its (epsilon, delta) does not depend on the bounds, so the check
        before data access can use placeholder bounds.
        """
        bound_eps = self._bound_epsilons(private)
        if bound_events is None:
            bound_events = planned_bound_events(bound_eps)
        epsilon_ssp = difference_at_most(
            self.epsilon, sum(exact_fraction(e) for e in bound_eps.values() if math.isfinite(e)))
        x_eff = self._x_bound_eff(x_bound)
        sensitivities = self._sensitivities(x_eff, y_bound, n_outputs, x_bound)
        events = self._release_events(sensitivities, epsilon_ssp, self.delta)
        composition = self.composition if private else "basic"
        return PrivacyLedger(
            [*bound_events, *events],
            composition=composition,
            delta=self.delta if private else 0.0,
            gaussian_epsilon=epsilon_ssp if composition == "gdp" else None,
        )

    def _gram_sensitivity(self, x_bound):
        """Gram sensitivity of ``[X, c 1]`` (tight form with an intercept)."""
        if self.fit_intercept:
            return intercept_gram_sensitivity(x_bound, self.intercept_scaling)
        return gram_sensitivity(x_bound)

    def _x_bound_eff(self, x_bound):
        if self.fit_intercept:
            return hypot_at_least(x_bound, self.intercept_scaling)
        return x_bound

    # -- fit -------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the private linear model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self : object
        """
        self._reset()
        # Shapes and dtypes only: NaN or infinity in X is refused by the
        # statistics pass, which runs before the first noise draw. float32
        # input stays float32 (each block is accumulated in float64).
        X, y = validate_blockwise_data(self, X, y, dtype=[np.float64, np.float32],
                                       ensure_all_finite=False)
        view = self.__dict__.pop("_column_view", {})
        if view:
            self.n_features_in_ = len(view["columns"])
        private = self._validate_privacy_params()
        single_output = y.ndim == 1
        # A 1-D y is read as one column by the passes (on Dask, y[:, None]
        # would add a task per chunk to every pass).
        n_outputs = 1 if single_output else y.shape[1]

        # Invalid or too large declared bounds are refused before any spend.
        check_bound_scales(self.x_bound, label_magnitude(self.y_bound), n_outputs)
        check_bounds_feasible(X.shape[0], self._bound_epsilons(private), self.bounds_quantile)
        planned = self._plan_ledger(private, n_outputs)
        self._check_budget(planned)
        # The spend is recorded before the first noise draw, after the passes
        # that release nothing and refuse bad input (NaN, infinity).
        rngs = self._secret_rngs("bounds", "noise", spend=planned)
        source = RowSource(X, y, raw_blocks=True, verbose=self.verbose,
                           name=type(self).__name__,
                           block_rows=source_block_rows(X.shape[1] + n_outputs + 1))
        x_bound, y_bound, bound_events = self._resolve_bounds(X, y, private, rngs["bounds"],
                                                              source)
        XtX, XtY = gram_statistics(
            source, x_bound=x_bound, y_bound=y_bound,
            intercept_scaling=self.intercept_scaling if self.fit_intercept else None,
            estimator_name=type(self).__name__, **view,
        )
        ledger = self._plan_ledger(
            private,
            n_outputs,
            x_bound=1.0 if x_bound is None else x_bound,
            y_bound=1.0 if y_bound is None else y_bound,
            bound_events=bound_events,
        )
        self._settle(ledger)
        W = self._release_and_solve(XtX, XtY, ledger, rngs["noise"])

        self.coef_, self.intercept_ = split_intercept(
            W, self.fit_intercept, self.intercept_scaling, single_output
        )
        self.x_bound_ = x_bound
        self.y_bound_ = y_bound
        self.n_outputs_ = n_outputs
        return self

    def _fit_columns(self, X, y, columns, x_range, y_range):
        """``fit(clip(X[:, columns], *x_range), clip(y, *y_range))`` without forming either.

        The columns are selected and clipped block by block inside the one
        statistics pass (for a refit on a public support). Both bounds must
        be declared (they are not estimated from the selected columns).
        """
        if self.x_bound is None or self.y_bound is None:
            raise ValueError("_fit_columns needs declared x_bound and y_bound.")
        self._column_view = {"columns": np.asarray(columns, dtype=np.intp),
                             "x_range": x_range, "y_range": y_range}
        try:
            return self.fit(X, y)
        finally:
            self.__dict__.pop("_column_view", None)

    def _resolve_bounds(self, X, Y, private, rng, source=None):
        """Declared bounds, or private estimates (which spend), or data maxima (which leak)."""
        resolved = {"x_bound": self.x_bound, "y_bound": label_magnitude(self.y_bound)}
        estimated, events = resolve_bounds(
            X, Y, self._bound_epsilons(private), rng, n_samples=X.shape[0],
            quantile=self.bounds_quantile, source=source,
        )
        resolved.update(estimated)
        return resolved["x_bound"], resolved["y_bound"], events

    def _noisy_statistics(self, XtX, XtY, gram_event, cross_event, rng):
        noisy_XtX = XtX + symmetric_gaussian_matrix(XtX.shape[0], gram_event.sigma, rng)
        noisy_XtY = add_gaussian(XtY, cross_event.sigma, rng)
        return noisy_XtX, noisy_XtY

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The non-private mode adds no noise: refits agree.
        tags.non_deterministic = not math.isinf(self.epsilon)
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


class SSPRegressor(_BaseSSP):
    """Private linear regression by Gaussian sufficient statistics perturbation.

    Releases :math:`\\widehat{X^\\top X} = X^\\top X + E` (symmetric, i.i.d.
    Gaussian on and above the diagonal) and
    :math:`\\widehat{X^\\top Y} = X^\\top Y + Z`, then solves the ridge system

    .. math::
        \\hat W = \\Pi_{\\succeq \\lambda}\\left(\\widehat{X^\\top X} + \\lambda I\\right)^{-1}
        \\widehat{X^\\top Y},

    where :math:`\\Pi_{\\succeq \\lambda}` clips eigenvalues at
    :math:`\\lambda` (the Frobenius projection onto :math:`\\{M \\succeq \\lambda I\\}`;
    post-processing). Rows are clipped to the bounds before any statistic is
    computed. The method goes back to Vu & Slavkovic (2009); Wang (2018)
    analyses it as the baseline of AdaSSP.

    **Guarantee.** Full DP (the whole row ``(x_i, y_i)`` is protected) under
    replace-one neighbouring (same n, one row replaced): ``(epsilon, delta)``-DP.

    **Bounds.** A bound you do not declare is estimated privately with
    ``bounds_budget * epsilon`` (its own event in ``privacy_spent_``) when n
    allows it; otherwise :class:`~skprivreg.exceptions.ConfigurationError`
    is raised before any budget is spent, naming the n needed.
    ``bounds='data'`` reads it from the data instead: not private, recorded
    as an event of infinite epsilon, with a :class:`PrivacyLeakWarning`.
    ``epsilon=np.inf`` needs no bounds.

    Budget split: if a bound is missing and ``bounds='private'``, a share
    ``bounds_budget * epsilon`` is spent on the private bound estimates
    (pure DP, exponential mechanism on public geometric bins, split equally
    between the missing bounds); the rest, ``(epsilon', delta)``, goes to the
    two Gaussian releases. With ``composition='gdp'`` the releases get
    ``mu' / sqrt(2)`` each, where ``mu'`` is the GDP parameter of
    ``(epsilon', delta)`` (they compose to at most it: every share is
    rounded down); with ``'basic'`` each gets ``(epsilon'/2, delta/2)``,
    calibrated by the analytic Gaussian mechanism (Balle & Wang 2018).

    Sensitivities (replace-one, ``B = sqrt(x_bound^2 + intercept_scaling^2)``
    with an intercept): ``sqrt(2) x_bound^2`` for the upper triangle of
    :math:`X^\\top X` without an intercept and
    ``sqrt(2) (x_bound^2 + intercept_scaling^2 / 2)`` with one
    (``2 x_bound intercept_scaling`` when ``intercept_scaling^2 > 2 x_bound^2``;
    the constant corner of the Gram matrix does not change), and
    ``2 B sqrt(l) y_bound`` for :math:`X^\\top Y` with ``l`` outputs.

    **Sample size.** The Gram noise has operator norm about
    ``2 sigma_XX sqrt(p)`` (``p`` = number of columns including the
    intercept), and under the GDP split ``sigma_XX = 2 B^2 / mu'``; the fit is
    useful when ``n lambda_min(Sigma)`` is much larger, i.e.
    ``n >> 4 sqrt(p) B^2 / (mu' lambda_min(Sigma))``.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total privacy budget; ``np.inf`` is the non-private test mode (no noise,
        no clipping when bounds are missing, :class:`PrivacyLeakWarning`).
    delta : float, default=1e-6
        Total delta, in (0, 1). Choose it well below ``1/n_samples``.
    x_bound : float or None, default=None
        Public bound on the L2 norm of a raw row of X (without the intercept
        column). Rows above it are scaled down to it.
        Declared bounds must lie in ``[1e-60, 1e60]`` (rescale the data
        otherwise): the calibration multiplies up to four bound-sized
        factors, which must stay in float64's normal range.
    y_bound : float, (low, high) or None, default=None
        Public label range: a float ``B`` (labels in ``[-B, B]``) or a pair
        ``(low, high)``. The sensitivity uses ``B = max(|low|, |high|)`` and
        labels are clipped to ``[-B, B]`` (the range is not re-centred).
    bounds : {'private', 'data'}, default='private'
        How a missing bound is obtained: a private estimate that spends
        ``bounds_budget * epsilon``, or (``'data'``) the data maximum, which
        is **not private** and emits a :class:`PrivacyLeakWarning`.
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on the missing bounds (``bounds='private'``).
        A private bound needs ``n >= 4 (6/epsilon_b) ln(2000)`` rows,
        ``epsilon_b`` its share of the budget (3,649 rows for each of two
        missing bounds at ``epsilon=1``); fewer raise
        :class:`~skprivreg.exceptions.ConfigurationError` before any budget
        is spent (:func:`~skprivreg.bounds.min_samples_for_private_bound`).
    bounds_quantile : float in (0, 1] or 'auto', default='auto'
        Quantile of the row norms (of ``|y|``) that a private bound targets;
        rows above it are clipped. ``'auto'`` leaves about
        ``(6/epsilon_b) ln(2000)`` rows above the bound (``epsilon_b`` the
        bound's budget): the fewest that keep the bound below the data
        maximum with probability 0.999
        (:func:`~skprivreg.mechanisms.upper_bound_margin`; public).
    fit_intercept : bool, default=True
        Append a constant column of value ``intercept_scaling`` (never
        centering by data means, which would break the neighbouring relation).
        The intercept is ridge-penalised like the other coefficients.
    intercept_scaling : float in (0, 1e60], default=1.0
        Value of the constant column (at most 1e60, as a declared bound: the
        calibration would overflow).
    ridge : float >= 0 or 'auto', default='auto'
        Ridge :math:`\\lambda` added to the noisy Gram matrix.
        ``'auto'`` is ``2 sigma_XX sqrt(p)`` (public: the high-probability
        norm of the Gram noise), ``0`` in the non-private mode.
    composition : {'gdp', 'basic'}, default='gdp'
        How the two Gaussian releases share the budget.
    accountant : BudgetAccountant or None, default=None
        A shared budget charged by every fit.
    random_state : None, int or numpy.random.Generator, default=None
        Unused for the noise: every fit draws its noise (and the private
        bounds' noise) from fresh OS entropy, whatever this is, so clones
        fitted with the same seed still draw independent noise. Kept for
        scikit-learn compatibility; see :mod:`skprivreg.testing` for
        reproducible noise in tests.

    verbose : int, default=0
        ``1``: one line per pass over the rows (the pass's name and ``n``);
        ``2``: also about every tenth of a pass. Lines carry public facts
        only (pass number, rows read so far, ``n``), never a value computed
        from the data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    ridge_ : float
        The ridge used (public).
    x_bound_, y_bound_ : float or None
        The bounds used (declared, or released privately).
    privacy_spent_ : PrivacyLedger
        Every release of the last fit.
    n_outputs_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined only when X has feature names that are all strings.

    See Also
    --------
    AdaSSPRegressor : SSP with a private, adaptive ridge.
    IndependentSSPRegressor : One SSP fit per outcome, under one budget.
    ReuseCovRegressor : Many outcomes sharing one noisy covariance.
    sklearn.linear_model.Ridge : The non-private ridge regression.

    References
    ----------
    D. Vu and A. Slavkovic, "Differential privacy for clinical trial data:
    preliminary evaluations", IEEE International Conference on Data Mining
    Workshops (ICDMW), 2009.

    Y.-X. Wang, "Revisiting differentially private linear regression: optimal
    and adaptive prediction & estimation in unbounded domain", UAI 2018.

    B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
    differential privacy: analytical calibration and optimal denoising",
    ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.linear_model import SSPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 5)); y = X @ np.ones(5) + rng.normal(size=20000)
    >>> est = SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=6.0, y_bound=12.0).fit(X, y)
    >>> est.coef_.shape
    (5,)
    >>> [event.name for event in est.privacy_spent_.events]
    ['XtX', 'XtY']
    """

    _parameter_constraints = {
        **_BaseSSP._parameter_constraints,
        "ridge": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
    }
    _release_names = ("XtX", "XtY")

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        x_bound=None,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        bounds_quantile="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        ridge="auto",
        composition="gdp",
        accountant=None,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.bounds_quantile = bounds_quantile
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.ridge = ridge
        self.composition = composition
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    def _sensitivities(self, x_bound_eff, y_bound, n_outputs, x_bound):
        return (
            self._gram_sensitivity(x_bound),
            cross_sensitivity(x_bound_eff, y_bound, n_outputs),
        )

    def _release_and_solve(self, XtX, XtY, ledger, rng):
        gram_event, cross_event = ledger.events[-2:]
        noisy_XtX, noisy_XtY = self._noisy_statistics(XtX, XtY, gram_event, cross_event, rng)
        p = XtX.shape[0]
        if self.ridge == "auto":
            self.ridge_ = 2.0 * gram_event.sigma * math.sqrt(p)
        else:
            self.ridge_ = float(self.ridge)
        M = noisy_XtX + self.ridge_ * np.eye(p)
        return solve_psd_repaired(M, noisy_XtY, floor=self._floor(gram_event.sigma))

    def _floor(self, gram_sigma):
        if self.ridge_ > 0:
            return self.ridge_
        # No ridge: guard against an indefinite noisy Gram matrix with the
        # noise scale itself (public); noiseless statistics get the
        # minimum-norm solution.
        return gram_sigma


# ---------------------------------------------------------------------------
# Public planner (shared with AdaSSP)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SSPPlan:
    """Public planning numbers of an SSP-family fit (no data involved).

    ``str(plan)`` is the text ``python -m skprivreg plan ssp`` prints.

    Attributes
    ----------
    estimator : str
        Class name of the planned estimator.
    n_samples, n_features, n_outputs, n_columns : int
        ``n_columns`` = ``p``, the design columns with the intercept.
    epsilon, delta : float
    x_bound, y_bound : float or None
        The declared bounds (``y_bound`` as its magnitude ``B``); ``None``:
        estimated privately in ``fit``, and the noise scales here are per
        unit bound.
    min_samples : int or None
        Rows needed to estimate the missing bounds privately (``fit`` raises
        :class:`~skprivreg.exceptions.ConfigurationError` below it).
    ledger : PrivacyLedger
        The planned releases, with their noise scales.
    gram_noise_norm : float
        High-probability operator norm ``2 sigma_XX sqrt(p)`` of the Gram noise.
    n_isotropic : float
        For isotropic rows of norm ``x_bound`` (``lambda_min(Sigma) =
        x_bound^2 / d``), the n at which the Gram noise equals
        ``n lambda_min``; useful fits need ``n`` well above it.
    """

    estimator: str
    n_samples: int
    n_features: int
    n_outputs: int
    n_columns: int
    epsilon: float
    delta: float
    x_bound: float | None
    y_bound: float | None
    bounds_budget: float
    min_samples: int | None
    ledger: PrivacyLedger
    gram_noise_norm: float
    n_isotropic: float

    def __str__(self):
        lines = [
            f"{self.estimator}: n={self.n_samples}, d={self.n_features} "
            f"(p={self.n_columns} columns), epsilon={self.epsilon}, delta={self.delta}"
        ]
        if self.x_bound is None or self.y_bound is None:
            lines.append(
                f"  missing bounds are estimated privately with {self.bounds_budget:.0%} "
                "of epsilon; scales below are for unit bounds"
            )
            if self.min_samples is not None and self.n_samples < self.min_samples:
                lines.append(
                    f"  fit refuses: a private bound needs n >= {self.min_samples} "
                    "(declare the bounds, or raise bounds_budget)"
                )
        lines += [
            str(self.ledger),
            "",
            f"  Gram noise operator norm ~ 2*sigma_XX*sqrt(p) = {self.gram_noise_norm:.4g}",
            "  For isotropic rows of norm x_bound (lambda_min(Sigma) = x_bound^2/d), the "
            f"Gram noise is\n  smaller than n*lambda_min once n >> {self.n_isotropic:.3g} "
            f"(you have n/that = {self.n_samples / self.n_isotropic:.3g}).",
        ]
        return "\n".join(lines)


def _ssp_family_plan(Estimator, plan_class, *, n_samples, n_features, n_outputs, **params):
    """The plan of ``Estimator(**params)`` (public facts) for public shapes."""
    estimator = Estimator(**params)
    validate_params(estimator)
    private = not math.isinf(estimator.epsilon)
    if not private:
        raise ValueError(
            f"{Estimator.__name__} with epsilon=inf adds no noise: there is nothing to plan.")
    x_bound = estimator.x_bound
    y_bound = label_magnitude(estimator.y_bound)
    ledger = estimator._plan_ledger(
        private, n_outputs, 1.0 if x_bound is None else x_bound,
        1.0 if y_bound is None else y_bound,
    )
    bound_eps = [eps for eps in estimator._bound_epsilons(private).values()
                 if math.isfinite(eps)]
    min_samples = max((min_samples_for_private_bound(eps) for eps in bound_eps),
                      default=None)
    p = n_features + int(estimator.fit_intercept)
    gram = next(event for event in ledger.events if event.name == "XtX")
    gram_norm = 2 * gram.sigma * math.sqrt(p)
    unit = 1.0 if x_bound is None else x_bound
    n_isotropic = gram_norm / (unit**2 / max(n_features, 1))
    return plan_class(
        estimator=type(estimator).__name__, n_samples=int(n_samples),
        n_features=int(n_features), n_outputs=int(n_outputs), n_columns=p,
        epsilon=float(estimator.epsilon), delta=float(estimator.delta), x_bound=x_bound,
        y_bound=y_bound, bounds_budget=float(estimator.bounds_budget),
        min_samples=min_samples, ledger=ledger, gram_noise_norm=gram_norm,
        n_isotropic=n_isotropic,
    )


def ssp_plan(*, n_samples, n_features, epsilon, delta=1e-6, n_outputs=1, x_bound=None,
             y_bound=None, bounds_budget=0.1, fit_intercept=True, composition="gdp"):
    """Noise scales of :class:`SSPRegressor` for public numbers; reads no data.

    Parameters
    ----------
    n_samples, n_features : int
    epsilon : float
    delta : float, default=1e-6
    n_outputs : int, default=1
    x_bound : float or None
        Bound on the L2 norm of a raw row of X; ``None``: estimated in ``fit``.
    y_bound : float, (low, high) or None
        Label range; ``None``: estimated in ``fit``.
    bounds_budget : float, default=0.1
    fit_intercept : bool, default=True
    composition : {'gdp', 'basic'}, default='gdp'

    Returns
    -------
    SSPPlan
    """
    return _ssp_family_plan(
        SSPRegressor, SSPPlan, n_samples=n_samples, n_features=n_features,
        n_outputs=n_outputs, epsilon=epsilon, delta=delta, x_bound=x_bound, y_bound=y_bound,
        bounds_budget=bounds_budget, fit_intercept=fit_intercept, composition=composition,
    )
