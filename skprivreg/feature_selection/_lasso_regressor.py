"""Private sparse linear regression: a private Lasso support, then SSP on it."""

import contextlib
import math
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone

from .._compat import HasMethods, Interval, StrOptions, fit_context, validate_data
from .._rows import read_into_memory
from .._warnings import quiet_warnings
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin, charge_refits_to, refuse_uncharged_accountant
from ..bounds import (
    check_range_bounds_feasible,
    check_x_range,
    check_y_bound,
    estimate_ranges,
    range_bound_epsilons,
    x_range_magnitude,
    y_bound_magnitude,
)
from ..exceptions import ConfigurationError, UnstableSupportError
from ..linear_model._base import LinearPredictMixin
from ..linear_model._private_bounds import check_bound_scales
from ..mechanisms import difference_at_most, product_at_most
from ._lasso_support import (
    _BOUND_CONSTRAINTS,
    _SELECTION_CONSTRAINTS,
    PrivateLassoSupportSelector,
    _check_applicable,
)

__all__ = ["PrivateLassoRegressor"]


def _check_stage2_scales(x_range, y_range, max_features, n_features, stage2_params):
    """Refuse declared ranges too large for stage 2's calibration, before the selection spends.

    Stage 2 clips rows to :math:`\\lVert m_S \\rVert_2` (the range magnitudes
    of the support :math:`S`, at most ``max_features`` columns) and labels
    to :math:`B_y`; SSP (and every sufficient-statistics estimator of this
    package) refuses either above
    :data:`~skprivreg.linear_model._private_bounds.LARGEST_BOUND_SCALE`. The
    largest possible support is checked here, with a margin for the rounding
    of the norm (stage 2 sums the squares in column order), so no support
    found later can make stage 2 fail after the selection's budget is spent.
    Only the bounds whose size stage 2 limits (``stage2_params``,
    :func:`_limited_bounds`) are checked. Public facts only (the declared
    ranges and parameters).
    """
    x_worst = None
    if x_range is not None and "x_bound" in stage2_params:
        mags = np.sort(x_range_magnitude(x_range))[::-1]
        k = n_features if max_features is None else min(int(max_features), n_features)
        with np.errstate(all="ignore"):  # an overflow gives inf, refused below
            x_worst = float(np.linalg.norm(mags[:k])) * (1.0 + (k + 4) * 2.0**-52)
            # The smallest bound a support can get (one column; adding columns
            # never lowers a sum of squares): it must not underflow to 0.
            x_least = float(np.linalg.norm(mags[-1:]))
        if not x_least > 0.0:
            raise ValueError(
                f"x_range is too small: a column's range magnitude {mags[-1]:g} has a square "
                "that underflows to 0, so the row-norm bound of a support of that column "
                "would be 0. Rescale the features."
            )
    y_mag = None
    if y_range is not None and "y_bound" in stage2_params:
        y_mag = y_bound_magnitude(y_range)
    try:
        check_bound_scales(x_worst, y_mag, 1)
    except ValueError as exc:
        side = ("its x_bound is the norm of the range magnitudes of up to max_features "
                "columns" if str(exc).startswith("x_bound") else "its y_bound is B_y")
        raise ValueError(
            f"The declared ranges are too large for the fit on the selected support "
            f"({side}): {exc}"
        ) from None


def _check_stage2_guarantee(estimator):
    """Refuse a stage 2 whose guarantee differs from the regressor's (public parameters).

    The regressor states full DP under replace-one neighbours for the whole
    fit (the selection reads X and y). A stage 2 that is label- or
    feature-DP (a label-DP estimator, ``ReuseCovRegressor(privacy='label')``)
    or uses another neighbouring relation cannot be composed into that
    statement; it is refused before any spend, as is an estimator that is not
    a skprivreg regressor (its fit would not be private).
    """
    if isinstance(estimator, str):
        return
    if not (isinstance(estimator, DPEstimatorMixin) and "epsilon" in estimator.get_params()):
        raise ConfigurationError(
            f"estimator={type(estimator).__name__} is not a skprivreg regressor: its fit "
            "on the selected support would not be private (or would not take the "
            "stage's epsilon). Use 'ssp' or a full-DP skprivreg regressor."
        )
    module = type(estimator).__module__
    notion = ("label" if module.startswith("skprivreg.label_dp")
              else estimator.get_params(deep=False).get("privacy", "full"))
    params = estimator.get_params(deep=False)
    neighbouring = params.get("neighbouring", "replace-one")
    if params.get("constants") == "paper":
        neighbouring = "add-remove"  # AdaSSP's paper constants are stated under add/remove
    if notion != "full" or neighbouring != "replace-one":
        raise ConfigurationError(
            f"estimator={type(estimator).__name__} gives {notion} DP under {neighbouring} "
            "neighbours; the regressor states full DP under replace-one neighbours for the "
            "whole fit (the selection reads X and y). Use a full-DP stage 2."
        )


def _limited_bounds(estimator):
    """The stage-2 bounds whose size the stage-2 estimator limits (public parameters).

    The sufficient-statistics estimators refuse ``x_bound`` or ``y_bound``
    above :data:`~skprivreg.linear_model._private_bounds.LARGEST_BOUND_SCALE`;
    other estimators (``LinearRegression``, which takes ranges; estimators of
    other packages) have no such limit, and nothing is checked for them.
    """
    from ..linear_model import (  # noqa: PLC0415 - avoids an import cycle
        AdaSSPRegressor,
        IndependentSSPRegressor,
        ReuseCovRegressor,
        SSPRegressor,
    )

    if isinstance(estimator, str) or isinstance(
            estimator, (SSPRegressor, AdaSSPRegressor, IndependentSSPRegressor, ReuseCovRegressor)):
        return {"x_bound", "y_bound"}
    return set()


# The regressor's own bound parameters serve stage 2 (and the perturbation
# test); they are never "unused", so the applicability check leaves them out.
_OWN_BOUNDS = frozenset(_BOUND_CONSTRAINTS)


class PrivateLassoRegressor(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Private sparse linear regression: private Lasso support, then SSP on it.

    **Guarantee.** ``(epsilon, delta)``-DP, full DP (one row), replace-one
    neighbours, by adaptive sequential composition of replace-one
    guarantees. Budget: ``epsilon_b = bounds_budget * epsilon`` for the
    bounds not declared (none if both are declared), then of the rest
    ``epsilon_1 = selection_fraction * (epsilon - epsilon_b)`` for stage 1
    and ``epsilon_2 = epsilon - epsilon_b - epsilon_1`` for stage 2; each
    stage gets ``delta/2``.

    - Stage 1 runs :class:`PrivateLassoSupportSelector` (Smith & Thakurta
      2013) at ``(epsilon_1, delta/2)`` (threshold ``ln(1/delta)/epsilon_1``
      for ``'subsample'``, ``1 + 2 ln(1/delta)/epsilon_1`` with
      ``Lap(2/epsilon_1)`` for ``'perturbation'``).
    - Stage 2 fits :class:`~skprivreg.linear_model.SSPRegressor` (sufficient
      statistics perturbation, analytic Gaussian mechanism of Balle & Wang
      2018, GDP composition of its two releases) on the selected columns at
      ``(epsilon_2, delta/2)``. It may use the released support: it is
      public after stage 1.

    **Accounting.** The plan (bound estimates, both stages) is checked and
    recorded on the accountant before the data is read. After the fit it is
    replaced by what ran (never more than the plan): the bound events that
    ran, the selection's ledger and stage 2's. **When stage 2 does not run**
    (bottom with ``on_fail='raise'``, or an empty support with
    ``fit_intercept=False``), the fit settles to the selection's ledger (and
    the bound estimates that ran): the planned share of stage 2 is given
    back to the accountant.

    **Bounds.** Stage 2 clips each selected column to its range ``x_range``
    (so a row's norm is at most :math:`\\sqrt{\\sum_{j \\in S} m_j^2}`,
    :math:`m_j = \\max(|l_j|, |h_j|)`, the ``x_bound`` given to SSP) and the
    labels to ``y_bound`` (:math:`|y| \\le B_y = \\max(|l_y|, |h_y|)`).
    ``method='perturbation'`` clips its test to the same ranges. A bound not
    declared is estimated privately with ``epsilon_b`` split equally over the
    missing bounds (pure DP, :func:`skprivreg.bounds.estimate_ranges`):
    ``y_bound`` becomes :math:`[-\\hat B_y, \\hat B_y]` with :math:`\\hat B_y`
    a private upper bound on :math:`|y_i|`; ``x_range`` becomes
    :math:`[-\\hat B_x, \\hat B_x]` in every column with :math:`\\hat B_x` a
    private upper bound on :math:`\\max_{j \\in S} |x_{ij}|`, taken over the
    selected columns :math:`S` (``'subsample'``: the estimate runs after
    stage 1, which needs no bounds) or over all columns
    (``'perturbation'``: its test needs the range). If ``n`` is too small
    for these estimates, :class:`~skprivreg.exceptions.ConfigurationError`
    is raised before any spend, naming the ``n`` needed. Declared ranges
    whose stage-2 bounds could exceed ``1e60`` (:math:`B_y`, or the row-norm
    bound of the ``max_features`` columns of largest magnitude) are refused
    with a ``ValueError``, also before any spend, when stage 2 is SSP or
    another sufficient-statistics estimator (AdaSSP, IndependentSSP,
    ReuseCov), whose calibration would overflow. ``bounds='data'``
    reads the missing bounds from the data instead: not private, recorded
    as events of infinite epsilon, with a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`. At ``epsilon=inf``
    (non-private test mode) missing bounds mean no clipping. With every
    parameter at its default the regressor fits privately: the selection
    estimates its noise level inside each subsample and the bounds are
    estimated privately.

    With an intercept, the selection centres inside each subsample and SSP
    appends a constant column.

    **Failure.** On bottom with ``on_fail='raise'``,
    :class:`~skprivreg.exceptions.UnstableSupportError` is raised (stage 2
    does not run; see **Accounting**). With ``on_fail='empty'`` stage 2 runs
    on the empty support: an intercept-only DP model (a DP mean through the
    constant column) if ``fit_intercept``, else all zeros and stage 2 does
    not run.

    **Sample size.** Selection dominates: see
    :class:`PrivateLassoSupportSelector` (``n ~ 32 ln(1/delta) N_1 /
    epsilon_1``) and :func:`lasso_plan`. The default
    ``selection_fraction=0.75`` reflects that the SSP error at that ``n`` is
    already small.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total budget of one fit; ``np.inf`` is the non-private test mode.
    delta : float, default=1e-6
        Choose it well below ``1/n_samples``.
    max_features, method, selection_rule, alpha, noise_level, lambda_scale, \
sampling, subsample_rate, n_subsamples, max_appearances, standardize, \
lasso_params, rsc_constant, penalty, n_reference, on_fail, n_jobs
        Passed to the selector (see :class:`PrivateLassoSupportSelector`).
    selection_fraction : float in (0, 1), default=0.75
        Share of ``epsilon - epsilon_b`` given to stage 1.
    estimator : 'ssp' or a skprivreg regressor, default='ssp'
        Stage 2, a full-DP regressor under replace-one neighbours (a label- or
        feature-DP one is refused before any spend: the regressor's guarantee
        covers the whole fit). An instance is cloned and given ``epsilon_2``, ``delta/2``,
        the bounds where it has the parameters (``x_bound``: the row-norm
        bound above; ``x_range``: the ranges of the selected columns;
        ``y_bound``: :math:`B_y`), ``fit_intercept`` and its own random
        generator.
    x_range : tuple, array of shape (n_features, 2) or None, default=None
        Per-column range ``(low, high)`` (floats, the same for every column,
        or arrays of shape ``(n_features,)``). A per-entry bound ``b`` is
        ``x_range=(-b, b)``.
    y_bound : float, (low, high) or None, default=None
        Label range (``B`` means ``[-B, B]``).
    bounds : {'private', 'data'}, default='private'
        How missing bounds are obtained (see **Bounds**).
    bounds_budget : float in (0, 1), default=0.1
        Share of ``epsilon`` spent on missing bounds.
    fit_intercept : bool, default=True
    ridge : float or None, default=None
        SSP ridge; ``None`` is SSP's ``'auto'``.
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None
        Stage 1 and stage 2 get independent children; it seeds released
        randomness only (the noise is fresh in every fit).

    Attributes
    ----------
    selector_ : PrivateLassoSupportSelector
    support_ : ndarray of bool
    stable_ : bool
    coef_ : ndarray of shape (n_features_in_,)
        Zero off the support.
    intercept_ : float
    stage2_ : fitted stage-2 estimator or None
    x_range_, y_bound_ : tuple or None
        Ranges used by stage 2 (declared or estimated; public after the fit).
    epsilon_, delta_ : float
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    PrivateLassoSupportSelector : Stage 1 alone: the private Lasso support.
    skprivreg.linear_model.SSPRegressor : Stage 2 alone: private linear regression.
    sklearn.linear_model.Lasso : The non-private Lasso.

    References
    ----------
    A. Smith and A. G. Thakurta, "Differentially private model selection via
    stability arguments and the robustness of the Lasso", COLT 2013.

    B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
    differential privacy: analytical calibration and optimal denoising",
    ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.feature_selection import PrivateLassoRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40000, 20))
    >>> y = X[:, :3] @ np.array([0.5, -0.5, 0.5]) + rng.normal(size=40000)
    >>> est = PrivateLassoRegressor(epsilon=2.0, delta=1e-6, max_features=3,
    ...                             selection_rule="lars", sampling="partition",
    ...                             x_range=(-5.0, 5.0), y_bound=10.0,
    ...                             on_fail="empty").fit(X, y)
    >>> est.coef_.shape
    (20,)
    >>> round(est.privacy_spent_.events[0].epsilon, 6)  # stage 1: 0.75 of epsilon
    1.5
    """

    _renamed_parameters = {
        "feature_bound": "x_range",
        "target_bound": "y_bound",
        "on_failure": "on_fail",
    }

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        **_SELECTION_CONSTRAINTS,
        **_BOUND_CONSTRAINTS,
        "selection_fraction": [Interval(Real, 0, 1, closed="neither")],
        "estimator": [StrOptions({"ssp"}), HasMethods(["fit", "predict", "set_params"])],
        "ridge": [Interval(Real, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        max_features=None,
        method="subsample",
        selection_rule="lasso",
        alpha=None,
        noise_level=None,
        lambda_scale=1.0,
        sampling="poisson",
        subsample_rate=None,
        n_subsamples=1000,
        max_appearances=None,
        fit_intercept=True,
        standardize=False,
        lasso_params=None,
        rsc_constant=None,
        penalty=None,
        n_reference=None,
        selection_fraction=0.75,
        estimator="ssp",
        x_range=None,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        ridge=None,
        on_fail="raise",
        n_jobs=None,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.max_features = max_features
        self.method = method
        self.selection_rule = selection_rule
        self.alpha = alpha
        self.noise_level = noise_level
        self.lambda_scale = lambda_scale
        self.sampling = sampling
        self.subsample_rate = subsample_rate
        self.n_subsamples = n_subsamples
        self.max_appearances = max_appearances
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.lasso_params = lasso_params
        self.rsc_constant = rsc_constant
        self.penalty = penalty
        self.n_reference = n_reference
        self.selection_fraction = selection_fraction
        self.estimator = estimator
        self.x_range = x_range
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.ridge = ridge
        self.on_fail = on_fail
        self.n_jobs = n_jobs
        self.accountant = accountant
        self.random_state = random_state

    # -- planning (public facts only) --------------------------------------
    def _plan(self, n, p, private):
        """Checked ranges, bound epsilons, the stage budgets and the planned ledger."""
        x_range = check_x_range(self.x_range, p)
        y_range = check_y_bound(self.y_bound)
        bound_eps = range_bound_epsilons(
            [name for name, v in (("x_range", x_range), ("y_bound", y_range)) if v is None],
            epsilon=self.epsilon, bounds=self.bounds, bounds_budget=self.bounds_budget,
            private=private,
        )
        check_range_bounds_feasible(n, bound_eps)
        _check_stage2_scales(x_range, y_range, self.max_features, p,
                             _limited_bounds(self.estimator))
        if not private:
            eps1 = eps2 = math.inf
        else:
            rest = difference_at_most(self.epsilon,
                                      *(e for e in bound_eps.values() if math.isfinite(e)))
            eps1 = product_at_most(self.selection_fraction, rest)
            eps2 = difference_at_most(rest, eps1)
        half = self.delta / 2.0 if private else 0.0
        planned = PrivacyLedger(
            [
                *(PrivacyEvent(name, eps, 0.0) for name, eps in bound_eps.items()),
                PrivacyEvent("lasso_support", eps1, half),
                PrivacyEvent("stage2", eps2, half),
            ]
        )
        return x_range, y_range, bound_eps, eps1, eps2, planned

    # -- the two stages ----------------------------------------------------
    def _make_selector(self, eps1, x_range, y_range, rng):
        perturbation = self.method == "perturbation"
        return PrivateLassoSupportSelector(
            epsilon=eps1,
            delta=self.delta,
            max_features=self.max_features,
            method=self.method,
            selection_rule=self.selection_rule,
            alpha=self.alpha,
            noise_level=self.noise_level,
            lambda_scale=self.lambda_scale,
            sampling=self.sampling,
            subsample_rate=self.subsample_rate,
            n_subsamples=self.n_subsamples,
            max_appearances=self.max_appearances,
            fit_intercept=False if perturbation else self.fit_intercept,
            standardize=self.standardize,
            lasso_params=self.lasso_params,
            rsc_constant=self.rsc_constant,
            penalty=self.penalty,
            n_reference=self.n_reference,
            # The perturbation test clips to the regressor's ranges (declared
            # or already estimated); the subsample method uses none.
            x_range=x_range if perturbation else None,
            y_bound=y_range if perturbation else None,
            on_fail=self.on_fail,
            n_jobs=self.n_jobs,
            # The regressor records the whole plan itself, before either stage.
            accountant=None,
            random_state=rng,
        )

    def _make_stage2(self, eps2, delta2, x_bound, y_bound, fit_intercept, rng, z_range=None):
        from ..linear_model import SSPRegressor  # noqa: PLC0415 - avoids an import cycle

        if self.estimator == "ssp":
            return SSPRegressor(
                epsilon=eps2,
                delta=delta2,
                x_bound=x_bound,
                y_bound=y_bound,
                fit_intercept=fit_intercept,
                ridge="auto" if self.ridge is None else self.ridge,
                random_state=rng,
            )
        stage2 = clone(self.estimator)
        known = stage2.get_params(deep=False)
        updates = {"epsilon": eps2}
        optional = {
            "delta": delta2,  # a pure-DP stage 2 has none
            "random_state": rng,
            "x_bound": x_bound,
            "x_range": z_range,
            "y_bound": y_bound,
            "fit_intercept": fit_intercept,
            "accountant": None,
        }
        updates.update({k: v for k, v in optional.items() if k in known})
        return stage2.set_params(**updates)

    # -- fit ---------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Select the support privately, then fit private coefficients on it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object

        Raises
        ------
        UnstableSupportError
            On bottom with ``on_fail='raise'`` (the selection's spend stays
            recorded).
        """
        self._reset()
        _check_applicable(self, names=set(self.get_params(deep=False)) - _OWN_BOUNDS)
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, multi_output=False,
                             ensure_min_samples=2)
        X, y = read_into_memory(X, "X"), read_into_memory(y, "y")  # read once
        private = self._validate_privacy_params()
        n, p = X.shape
        x_range, y_range, bound_eps, eps1, eps2, planned = self._plan(n, p, private)
        _check_stage2_guarantee(self.estimator)
        # Stage 2 is fitted without its own accountant (the Lasso records the spend).
        if hasattr(self.estimator, "get_params"):
            refuse_uncharged_accountant(self.estimator.get_params().get("accountant"),
                                        self.accountant, "the private Lasso",
                                        type(self).__name__)
        # The selection's refusals that need no data, before the spend.
        probe = self._make_selector(eps1, x_range, y_range, None)
        if self.method == "perturbation":
            probe._check_perturbation_params(p)
            if probe.penalty is not None or y_range is not None or not private:
                probe._check_penalty(probe._penalty(n, p, y_range))
        else:
            with quiet_warnings():  # the selector's fit shows its planning warnings
                probe._subsample_config(n, private)
        delta2 = self.delta / 2.0
        # The plan of every release (public facts only) is checked and
        # recorded before the data is read; the nested estimators have no
        # accountant.
        self._spend(planned)
        # The stages get integer seeds drawn from public generators: a fitted
        # estimator stores no generator.
        rngs = {purpose: int(rng.integers(2**32))
                for purpose, rng in self._public_rngs("selection", "estimation").items()}
        bound_rng = self._secret_rngs("bounds")["bounds"]
        ran = []  # the bound events that ran
        perturbation = self.method == "perturbation"
        if perturbation and bound_eps:
            # The test needs both ranges: estimate them over all columns first.
            est_x, est_y, events = estimate_ranges(X, y, bound_eps, bound_rng)
            x_range = est_x if x_range is None else x_range
            y_range = est_y if y_range is None else y_range
            ran += events
            bound_eps = {}
            if est_y is not None and self.penalty is None:
                # The penalty follows the estimated y_bound: checked now, and if the
                # selection cannot run, only the estimates stay spent.
                try:
                    probe._check_penalty(probe._penalty(n, p, y_range), estimated=True)
                except ConfigurationError:
                    self._settle(self._final_ledger(ran, [], private))
                    raise

        selector = self._make_selector(eps1, x_range, y_range, rngs["selection"])
        # Non-private test mode: the stages' warnings (their own epsilon=inf
        # warnings among them) are not shown; this fit has warned once.
        # Private: the stages hide their inner warnings themselves and show
        # only public facts.
        inner = quiet_warnings if not private else contextlib.nullcontext
        try:
            with inner():
                selector.fit(X, y)
        except UnstableSupportError:
            # Stage 2 never runs: the selection's spend (and any bound
            # estimate that ran) remains recorded.
            self._settle(self._final_ledger(ran, [selector.privacy_spent_], private))
            raise
        self.selector_ = selector
        support = selector.support_
        k = int(support.sum())
        coef = np.zeros(p)
        intercept = 0.0
        ledgers = [selector.privacy_spent_]
        self.stage2_ = None
        if k > 0 or self.fit_intercept:
            # Remaining bounds (subsample method): estimated now, x over the
            # selected columns only (the support is public).
            needed = {name: eps for name, eps in bound_eps.items() if name == "y_bound" or k > 0}
            if needed:
                est_x, est_y, events = estimate_ranges(
                    X[:, support], y, needed, bound_rng
                )
                y_range = est_y if y_range is None else y_range
                if est_x is not None:
                    x_range = (np.full(p, est_x[0][0]), np.full(p, est_x[1][0]))
                ran += events
            y_mag = None if y_range is None else y_bound_magnitude(y_range)
            fused = (self.estimator == "ssp" and k > 0 and x_range is not None
                     and y_range is not None)
            yc = y if y_range is None or fused else np.clip(y, y_range[0], y_range[1])
            if k > 0:
                Z = None if fused else X[:, support]
                x_bound = z_range = None
                if x_range is not None:
                    z_range = (x_range[0][support], x_range[1][support])
                    # Per-entry clipping (a per-row map); no warning, as
                    # whether an entry was clipped depends on one record.
                    if not fused:
                        Z = np.clip(Z, x_range[0][support], x_range[1][support])
                    x_bound = float(np.linalg.norm(x_range_magnitude(x_range)[support]))
                fit_intercept = self.fit_intercept
            else:
                Z = np.ones((n, 1))
                x_bound = 1.0  # the constant column alone (intercept-only model)
                z_range = (np.zeros(1), np.ones(1))
                fit_intercept = False
            stage2 = self._make_stage2(eps2, delta2, x_bound, y_mag, fit_intercept,
                                       rngs["estimation"], z_range)
            with inner():
                if fused:
                    # SSP on the support: columns selected and clipped inside
                    # its one statistics pass (no copy of X[:, support]).
                    stage2._fit_columns(X, y, np.flatnonzero(support), z_range, y_range)
                else:
                    stage2.fit(Z, yc)
            self.stage2_ = stage2
            ledgers.append(stage2.privacy_spent_)
            if k > 0:
                coef[support] = np.ravel(stage2.coef_)
                intercept = float(np.ravel(stage2.intercept_)[0])
            else:
                intercept = float(np.ravel(stage2.coef_)[0])
        # The final ledger replaces the plan (same guarantee, at most the plan).
        ledger = self._final_ledger(ran, ledgers, private)
        self._settle(ledger)
        self.coef_ = coef
        self.intercept_ = intercept
        self.support_ = support
        self.stable_ = selector.stable_
        self.x_range_ = x_range
        self.y_bound_ = y_range
        self.epsilon_ = ledger.epsilon
        self.delta_ = ledger.delta
        for fitted in (self.selector_, self.stage2_):
            charge_refits_to(fitted, self.accountant)
        return self

    @staticmethod
    def _final_ledger(bound_events, ledgers, private):
        ledgers = [PrivacyLedger(bound_events), *ledgers] if bound_events else list(ledgers)
        return PrivacyLedger.concatenate(ledgers, composition="gdp" if private else "basic")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The non-private mode (epsilon=inf) draws nothing: the same data give
        # the same selection.
        tags.non_deterministic = not (isinstance(self.epsilon, Real) and math.isinf(self.epsilon))
        tags.input_tags.sparse = False
        return tags
