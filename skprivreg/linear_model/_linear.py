"""``LinearRegression``: the private linear regression to reach for first.

One noisy Gram matrix on rows mapped to declared ranges, then a few calibrated
noisy gradient (refinement) rounds, all Gaussian releases composed in GDP, a
ridge chosen from public noise scales, and a private choice between the model
and the (privately estimated) mean predictor.

Every statistic is a pure block function (one pass over the rows each); the
estimator validates, plans, spends and solves.
"""

import math
from dataclasses import dataclass
from functools import partial
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from .._blocks import WORKSPACE_MAX_BYTES
from .._compat import Interval, StrOptions, fit_context
from .._gram import (
    cache_blocked,
    reduce_threaded,
    reread_piece_bytes,
    source_block_rows,
    streamed_piece_rows,
    threads_for,
)
from .._rows import RowSource, add_tuples, validate_blockwise_data
from ..accounting import PrivacyEvent, PrivacyLedger, gdp_mu
from ..base import DPEstimatorMixin
from ..bounds import (
    check_private_bound_feasible,
    check_x_range,
    check_y_bound,
    data_norm_bound,
    private_norm_bound,
)
from ..mechanisms import (
    add_gaussian,
    bound_bins,
    difference_at_most,
    exact_fraction,
    gaussian_event_from_mu,
    gdp_split,
    intercept_gram_sensitivity,
    product_at_most,
    residual_gradient_sensitivity,
    shares_at_most,
    sqrt_at_least,
    symmetric_gaussian_matrix,
)
from ._base import LinearPredictMixin, solve_psd_repaired
from ._private_bounds import check_data_bounds_supported, count_bounds
from ._range_blocks import (
    INTERCEPT,
    RangeMap,
    feature_sum_block,
    first_pass_block,
    first_pass_stats,
    gradient_block,
    raw_space,
    residual_moment_block,
    selection_block,
)

__all__ = [
    "LinearRegression",
    "RangeMap",
    "range_map",
    "mean_weight",
]

# Value of the constant column appended for the intercept.
_INTERCEPT = INTERCEPT
# Residual clip of the refinement rounds, in units of the released residual RMS.
_RESIDUAL_CLIP_RMS = 3.0
# The model replaces the mean predictor only if its released loss advantage is
# below -_SELECTION_Z noise standard deviations (false adoption <= Phi(-2) = 2.3%).
_SELECTION_Z = 2.0
# Target standard deviation of the released label mean on the [-1, 1] label scale.
_MEAN_TARGET_SD = 0.02


# ---------------------------------------------------------------------------
# Public maps
# ---------------------------------------------------------------------------
def range_map(x_range, y_bound, n_features, fit_intercept=True):
    """The public :class:`RangeMap` of declared ranges (no data access).

    With an intercept, each column's range is mapped to ``[-1, 1]`` (centre =
    midpoint) and the label is centred at its range's midpoint and scaled by
    the half-width; a mapped row has ``||z|| <= sqrt(d)``. Without an
    intercept no centring is allowed (it would add one): columns and label are
    divided by their largest absolute bound.
    """
    low, high = check_x_range(x_range, n_features)
    fb = np.column_stack([low, high])
    lb = np.asarray(check_y_bound(y_bound), dtype=np.float64)
    if fit_intercept:
        center, half = fb.mean(axis=1), (fb[:, 1] - fb[:, 0]) / 2.0
        y_center, y_half = float(lb.mean()), float((lb[1] - lb[0]) / 2.0)
    else:
        center, half = np.zeros(n_features), np.abs(fb).max(axis=1)
        y_center, y_half = 0.0, float(np.abs(lb).max())
    return RangeMap(center, half, y_center, y_half, sqrt_at_least(n_features), True)


def mean_weight(n_samples, mu):
    """Share of ``mu^2`` given to the label sum and second moment: public.

    Enough that the released mean has standard deviation about
    ``_MEAN_TARGET_SD`` on the [-1, 1] label scale (``mu_m = 2 / (0.02 n)``),
    clipped to [0.02, 0.5]: small data spend up to half the budget on the
    mean, which is then a good fallback; large data spend 2%.
    """
    if math.isinf(mu):
        return 0.02
    wanted = (2.0 / (_MEAN_TARGET_SD * n_samples * mu)) ** 2
    return float(min(max(wanted, 0.02), 0.5))


# ---------------------------------------------------------------------------
# Solve (post-processing)
# ---------------------------------------------------------------------------
def solve_refinement(noisy_gram, ridge, rhs):
    """``(G~ + ridge I)^{-1} rhs`` with eigenvalues repaired at ``ridge`` (post-processing)."""
    if ridge > 0:
        return solve_psd_repaired(noisy_gram + ridge * np.eye(noisy_gram.shape[0]), rhs, ridge)
    return solve_psd_repaired(noisy_gram, rhs, 0.0)


# ---------------------------------------------------------------------------
# The plan: public facts only
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    private: bool
    mu: float  # GDP parameter of all Gaussian releases together
    bound_events: tuple  # pure-DP events of missing ranges (basic composition)
    weights: dict  # release name -> share of mu^2
    row_bound: float  # bound of a mapped row (public)
    n_rounds: int
    gaussian_epsilon: float  # what the bounds leave: mu = gdp_mu(gaussian_epsilon, delta)


def _plan(est, n, d):
    private = not math.isinf(est.epsilon)
    missing = [name for name, v in (("x_range", est.x_range),
                                    ("y_bound", est.y_bound)) if v is None]
    bound_events = []
    eps_bounds = []
    if private and missing and est.bounds == "data":
        # Read from the data (an explicit opt-in): not private, infinite epsilon.
        bound_events = [
            PrivacyEvent(name="x_bound" if name == "x_range" else "y_bound",
                         epsilon=math.inf, delta=0.0)
            for name in missing
        ]
    elif private and missing:
        share = shares_at_most(product_at_most(est.bounds_budget, est.epsilon),
                               [1] * len(missing))[0]
        for name in missing:
            check_private_bound_feasible(n, share, name)
            bound_events.append(PrivacyEvent(
                name="x_bound" if name == "x_range" else "y_bound",
                epsilon=share, delta=0.0))
        eps_bounds = [share] * len(missing)
    elif missing:
        # Non-private mode: the ranges come from the data (nothing is private).
        bound_events = [
            PrivacyEvent(name="x_bound" if name == "x_range" else "y_bound",
                         epsilon=math.inf, delta=0.0)
            for name in missing
        ]
    eps_gauss = difference_at_most(est.epsilon, *eps_bounds) if private else math.inf
    mu = gdp_mu(eps_gauss, est.delta) if private else math.inf
    T = int(est.n_rounds)
    w_mean = mean_weight(n, mu)
    weights = {"label_moments": w_mean}
    if est.x_range is None and est.fit_intercept:  # without an intercept rows are not centred
        weights["feature_mean"] = 0.05
    rest = 1.0 - sum(weights.values())
    weights["XtX"] = 0.30 * rest
    if T == 1:
        weights["Xty"] = 0.63 * rest
    else:
        weights["Xty"] = 0.15 * rest
        weights["residual_scale"] = 0.03 * rest
        for t in range(1, T):
            weights[f"gradient_{t}"] = 0.45 * rest / (T - 1)
    weights["selection"] = 0.07 * rest
    row_bound = sqrt_at_least(d) if est.x_range is not None else 1.0
    return _Plan(private, mu, tuple(bound_events), weights, row_bound, T, eps_gauss)


def _mus(plan):
    names = list(plan.weights)
    return dict(zip(names, gdp_split(plan.mu, [plan.weights[k] for k in names])))


def _gaussian(name, sensitivity, mu, delta_share):
    """A Gaussian event of GDP parameter ``mu`` (its epsilon at ``delta_share``, for display)."""
    return gaussian_event_from_mu(name, sensitivity, mu, delta_share)


def _ledger(plan, events, delta):
    if not plan.private:
        return PrivacyLedger(
            [PrivacyEvent(name=e.name, epsilon=math.inf, delta=0.0) for e in events],
            composition="basic", delta=0.0,
        )
    return PrivacyLedger([*plan.bound_events, *events], composition="gdp", delta=delta,
                         gaussian_epsilon=plan.gaussian_epsilon)


def _row_norm_bound(plan, fit_intercept):
    """``||(z, c)||`` of a mapped row with its intercept column, never rounded down:
    the row of ones with ``c = 1`` attains ``sqrt(d + 1)``."""
    c = exact_fraction(_INTERCEPT if fit_intercept else 0.0)
    return sqrt_at_least(exact_fraction(plan.row_bound) ** 2 + c * c)


def planned_ledger(plan, delta, fit_intercept=True):
    """The ledger of one fit with unit residual clip (its epsilon, delta, mu are final)."""
    mus = _mus(plan)
    R = _row_norm_bound(plan, fit_intercept)
    sens = {
        "label_moments": 2.0,
        "feature_mean": 2.0,
        "XtX": intercept_gram_sensitivity(plan.row_bound, _INTERCEPT if fit_intercept else 0.0),
        "Xty": residual_gradient_sensitivity(R, 1.0),
        "residual_scale": 1.0,
        "selection": 8.0,
    }
    share = delta / len(plan.weights)
    events = [
        _gaussian(name, sens.get(name, residual_gradient_sensitivity(R, 1.0)), mus[name], share)
        for name in plan.weights
    ]
    return _ledger(plan, events, delta)


# ---------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------
class LinearRegression(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Differentially private linear regression: the estimator to reach for first.

    **Guarantee.** ``(epsilon, delta)``-DP, full notion (the whole row
    ``(x_i, y_i)`` is protected), replace-one neighbouring (``n`` public, one
    row replaced by any other). All Gaussian releases are composed exactly in
    Gaussian DP (Dong, Roth & Su 2022) and converted to ``(epsilon, delta)``
    once; pure-DP range estimates (only when a range is not declared) are
    added by basic composition.

    **Method.** Declared ranges are public facts: column ``j`` is mapped
    affinely from its range in ``x_range`` to ``[-1, 1]`` and the label is
    centred at the public midpoint of ``y_bound`` and divided by its half-width
    (values outside a declared range are **clipped** to it, or with
    ``fit_intercept=False`` to its symmetric hull: a fixed per-row map, so
    neighbours stay neighbours). A mapped row has
    ``||z|| <= B = sqrt(d)``; with the constant column ``c = 1``,
    ``a = (z, c)`` and ``u`` the mapped label:

    1. release :math:`(\\sum u_i, \\sum u_i^2) + N(0, \\sigma_m^2 I)`
       (L2-sensitivity 2);
    2. release :math:`\\tilde G = A^\\top A + E`, :math:`E` symmetric Gaussian,
       with the intercept-aware sensitivity
       :math:`\\Delta_G = \\sqrt 2 (B^2 + c^2/2)` for :math:`c^2 \\le 2B^2` (proof in
       :func:`skprivreg.mechanisms.intercept_gram_sensitivity`);
    3. release :math:`g_0 = A^\\top u + N(0, \\sigma_0^2 I)`
       (sensitivity :math:`2\\sqrt{B^2+c^2}`), solve
       :math:`\\theta_1 = P g_0`, :math:`P = \\Pi_{\\succeq\\lambda}(\\tilde G + \\lambda I)^{-1}`
       with the ridge :math:`\\lambda = 2\\sigma_G\\sqrt{p}`, the
       high-probability norm of :math:`E` (a function of public numbers: no
       budget is spent on it, and no smallest eigenvalue is released);
    4. release the clipped residual second moment
       :math:`\\sum_i \\min(r_i^2, 1)` at :math:`\\theta_1` (sensitivity 1) and
       set the residual clip :math:`C = 3\\,\\widehat{\\mathrm{rms}}(r)`;
    5. ``n_rounds - 1`` refinement rounds (Tang et al. 2023, boosting on one
       noisy Gram matrix): release
       :math:`g_t = A^\\top \\mathrm{clip}_C(u - A\\theta_t) + N(0, \\sigma_t^2 I)`
       (sensitivity :math:`2C\\sqrt{B^2+c^2}`) and set
       :math:`\\theta_{t+1} = \\theta_t + P g_t`. Because
       :math:`\\tilde G + \\lambda I \\succeq A^\\top A / 2` with high
       probability, this is a contraction whose fixed point does not depend
       on the Gram noise: the Gram matrix only preconditions, and the bias
       of the ridge is removed round by round;
    6. release :math:`D = \\sum_i [\\min(r_i^2, K) - \\min((u_i-\\bar u)^2, K)]`
       (sensitivity :math:`2K`, :math:`K` from the released label moments):
       the fitted model's clipped training loss minus the mean predictor's.
       The model is kept only if :math:`\\tilde D < -2\\sigma_D`; otherwise
       the estimator **degrades to the private mean predictor** (``coef_ = 0``,
       ``intercept_`` the released mean). The choice uses released values
       only; ``mean_fallback_`` records it.

    **Budget split** (GDP, :math:`\\mu` = ``gdp_mu(epsilon', delta)``, with
    :math:`\\mu_k = \\mu\\sqrt{w_k}`, :math:`\\sum_k w_k = 1`, so that
    :math:`\\sqrt{\\sum_k\\mu_k^2} = \\mu`): label moments
    :math:`w_m = \\mathrm{clip}((100/(n\\mu))^2, 0.02, 0.5)` (small samples
    spend more on the mean, their fallback); of the rest, 30% Gram, 15%
    :math:`g_0`, 3% residual scale, 45% shared by the refinement rounds, 7%
    the selection (with ``n_rounds=1``, :math:`g_0` gets 63%). ``epsilon'``
    is ``epsilon`` minus what missing ranges cost.

    **Missing ranges.** If ``x_range`` is None, ``bounds_budget *
    epsilon`` (split with a missing label range) buys a private bound
    ``B^`` on the row norms (pure DP, :func:`skprivreg.bounds.private_norm_bound`),
    rows are clipped to it, a private mean :math:`\\hat m` of the clipped rows
    is released in the GDP part (5% of :math:`\\mu^2`, sensitivity
    ``2 B^``), and rows are mapped to :math:`\\mathrm{clip}_1((x - \\hat m)/\\hat B)`
    (``B = 1``); with ``fit_intercept=False`` rows are not centred and no mean
    is released (:math:`\\hat m = 0`). If ``y_bound`` is None, a private bound ``Y^`` on
    ``|y|`` is released and ``u = clip(y / Y^, -1, 1)`` (the intercept absorbs
    the offset). Too few rows for a private bound raise
    :class:`~skprivreg.exceptions.ConfigurationError` before any spend,
    naming the ``n`` needed.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total privacy budget; ``np.inf`` is the non-private test mode (ordinary
        least squares on the range-clipped data; ranges not declared are taken
        from the data, which is private no longer).
    delta : float, default=1e-6
        Total delta, in (0, 1). Choose it well below ``1/n_samples``.
    x_range : (low, high) or array of shape (n_features, 2), default=None
        Declared range of each column: ``low`` and ``high`` are floats (the
        same range for every column) or arrays of shape ``(n_features,)``.
        Public facts (codebooks, instrument ranges), never read from the data.
    y_bound : float or (low, high), default=None
        Declared label range: a float ``B`` (labels in ``[-B, B]``) or a pair
        ``(low, high)``; labels are centred at its midpoint.
    fit_intercept : bool, default=True
        Without an intercept the maps cannot shift (a shift is an
        intercept): every range is made symmetric about 0, and values are
        clipped to :math:`[-\\max(|l|, |h|), \\max(|l|, |h|)]` of their
        declared range ``(l, h)`` instead of to the range itself.
    n_rounds : int >= 1, default=8
        Gradient releases (the first is ``A^T u``).
    bounds : {'private', 'data'}, default='private'
        How a missing range is obtained: privately (``bounds_budget *
        epsilon``), or (``'data'``) from the data maximum, which is **not
        private**: an event of infinite epsilon and a
        :class:`~skprivreg.exceptions.PrivacyLeakWarning`.
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on missing ranges.
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None
        Never publish a seed used on private data.
    verbose : int, default=0
        ``1``: one line per pass over the rows (its release and ``n``);
        ``2``: also about every tenth of a pass. Lines carry public facts
        only (pass number, rows read so far, ``n``).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    mean_fallback_ : bool
        True when the private selection kept the mean predictor (a released
        bit).
    ridge_ : float
        The ridge on the mapped scale (public).
    residual_clip_ : float or None
        The residual clip of the refinement rounds (released).
    x_bound_, y_bound_ : float or None
        Row-norm and ``|y|`` bounds estimated when ``x_range`` / ``y_bound``
        is not declared (released); ``None`` for a declared range.
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    References
    ----------
    S. Tang, S. Aydore, M. Kearns, S. Rho, A. Roth, Y. Wang, Y.-X. Wang,
    Z. S. Wu, "Improved differentially private regression via gradient
    boosting", arXiv:2303.03451, 2023.
    Y.-X. Wang, "Revisiting differentially private linear regression", UAI 2018.

    See Also
    --------
    AdaSSPRegressor : One-shot sufficient statistics with an adaptive ridge.
    BoostedAdaSSPRegressor : Boosted rounds of AdaSSP on residuals.
    TukeyEMRegressor : Private Tukey-median aggregation of subsample fits.
    PrivateGridSearchCV : Private tuning of this estimator's parameters.
    sklearn.linear_model.LinearRegression : The non-private least squares.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.linear_model import LinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(20000, 3)); y = X @ [1.0, -2.0, 0.5] + 0.1
    >>> est = LinearRegression(epsilon=1.0, x_range=(-1, 1),
    ...                        y_bound=(-4, 4)).fit(X, y)
    >>> est.coef_.shape
    (3,)
    >>> [event.name for event in est.privacy_spent_.events][:3]
    ['label_moments', 'XtX', 'Xty']
    """

    _renamed_parameters = {"feature_bounds": "x_range", "label_bounds": "y_bound"}

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "x_range": ["array-like", None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "fit_intercept": ["boolean"],
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        x_range=None,
        y_bound=None,
        fit_intercept=True,
        n_rounds=8,
        bounds="private",
        bounds_budget=0.1,
        accountant=None,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.x_range = x_range
        self.y_bound = y_bound
        self.fit_intercept = fit_intercept
        self.n_rounds = n_rounds
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the private linear model.

        Parameters
        ----------
        X : array-like or Dask array of shape (n_samples, n_features)
        y : array-like or Dask array of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._reset()  # no attribute of a previous fit survives
        # Public validation: shapes and dtypes only; finiteness is checked in
        # the first pass over the rows, before any noise is drawn. float32
        # stays float32 (mapped to float64 one cache-sized block at a time).
        X, y = validate_blockwise_data(self, X, y, multi_output=False,
                                       dtype=[np.float64, np.float32], ensure_all_finite=False)
        n, d = X.shape
        private = self._validate_privacy_params()
        # Invalid ranges are refused before any spend.
        try:
            check_x_range(self.x_range, d)
        except ValueError as error:
            raise ValueError(f"x_range: {error}") from None
        check_y_bound(self.y_bound)
        plan = _plan(self, n, d)
        assert plan.private == private
        ledger = planned_ledger(plan, self.delta, self.fit_intercept)
        self._check_budget(ledger)
        # The planned ledger is spent before the first secret draw; the final
        # ledger has the same mu's (only the residual-clip sensitivities differ).
        rngs = self._secret_rngs("bounds", "noise", spend=ledger)
        source = RowSource(X, y, raw_blocks=True, verbose=self.verbose,
                           name=type(self).__name__, block_rows=source_block_rows(d + 2))
        result = _fit_private(source, plan, self, rngs)
        self._settle(result["ledger"])
        self.coef_, self.intercept_ = result["coef"], result["intercept"]
        self.mean_fallback_ = result["mean_fallback"]
        self.ridge_ = result["ridge"]
        self.residual_clip_ = result["residual_clip"]
        self.x_bound_, self.y_bound_ = result["x_bound"], result["y_bound"]
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The non-private mode adds no noise: refits agree.
        tags.non_deterministic = not math.isinf(self.epsilon)
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags


# Tests may set this to a list to receive each noisy release (name, value,
# event); nothing is stored on the estimator.
_CAPTURE = None


def _record(name, value, event):
    if _CAPTURE is not None:
        _CAPTURE.append((name, np.array(value, dtype=np.float64, copy=True), event))


def _range_bound(counts, n, epsilon, rng, bins, name, private):
    """A private bound, or (``epsilon=inf``) the smallest bin above every row.

    The latter is read from the data: with a finite fit epsilon
    (``bounds='data'``) it warns with a :class:`PrivacyLeakWarning`. Rows above
    every bin were refused before the spend
    (:func:`~skprivreg.linear_model._private_bounds.check_data_bounds_supported`).
    """
    if math.isinf(epsilon):
        maximum = float(bins[np.argmax(counts == 0)])
        return data_norm_bound(maximum, name=name)[0] if private else maximum
    return private_norm_bound(counts, n, epsilon, rng, name=name)[0]


def _data_pass(source, block, label, streamed=False):
    """One pass over the rows: the sum of ``block(X_piece, y_piece)`` over pieces of rows.

    On NumPy input the pieces of each block are shared by threads (the sums
    are added in row order, so the result does not depend on scheduling).
    ``streamed``: the block function reads each row once and its temporaries
    are vectors (no copy of rows inside their ranges), or it reads its rows
    in cache-sized pieces itself (:func:`first_pass_block`): the pieces are
    long (:func:`~skprivreg._gram.streamed_piece_rows`). A product over
    65,536 rows of ten values ran in half the time of six products over
    10,922 rows, and a piece's vector work costs a few calls whatever its
    length. Otherwise the block function reads each piece twice (a product
    and the transposed product of its residuals, or a copy and its
    product), and the pieces fill a quarter of the shared cache
    (:func:`~skprivreg._gram.reread_piece_bytes`). On Dask the pieces of
    a chunk are cache-sized.
    """
    n_threads = threads_for(source)
    piece_rows = None
    if source.block_rows is not None:
        piece_bytes = WORKSPACE_MAX_BYTES if streamed else reread_piece_bytes(n_threads)
        piece_rows = streamed_piece_rows(min(source.block_rows, source.n), source.d + 2,
                                         n_threads, piece_bytes)
    return reduce_threaded(source, cache_blocked(block, source.d + 2, n_threads, piece_rows),
                           add_tuples, label=label, n_threads=n_threads)


def _fit_private(source, plan, est, rngs):
    """Run the releases of ``plan`` on the rows of ``source``; returns released values only.

    Each pass over the rows feeds one release (the first feeds the label
    moments, the Gram matrix and ``A^T u``).
    """
    n, d = source.n, source.d
    fit_intercept = est.fit_intercept
    mus = _mus(plan)
    noise = rngs["noise"]
    events = []
    share = est.delta / len(plan.weights)

    def release(name, value, sensitivity):
        event = _gaussian(name, sensitivity, mus[name], share)
        noisy = add_gaussian(value, event.sigma, noise)
        events.append(event)
        _record(name, noisy, event)
        return noisy

    # -- public map, or the private range path ------------------------------
    x_clip = y_estimate = None
    if est.x_range is not None and est.y_bound is not None:
        rmap = range_map(est.x_range, est.y_bound, d, fit_intercept)
    else:
        bins = bound_bins()
        counts = count_bounds(None, None, source)
        counts_x, counts_y = counts["x_bound"], counts["y_bound"]
        bound_eps = {e.name: e.epsilon for e in plan.bound_events}
        # A bound read from the data above the largest bin is refused before any
        # release (the first noisy value records the spend).
        check_data_bounds_supported(counts, bound_eps)
        if est.x_range is None:
            x_clip = _range_bound(counts_x, n, bound_eps["x_bound"], rngs["bounds"], bins,
                                  "x_bound", plan.private)
            center = np.zeros(d)  # no centring without an intercept (it would add one)
            if fit_intercept:
                (x_sum,) = _data_pass(source, partial(feature_sum_block, x_clip=x_clip),
                                      "feature_mean")
                center = release("feature_mean", x_sum, 2.0 * x_clip) / n
            half = np.full(d, x_clip)
        else:
            fb = range_map(est.x_range, (0.0, 1.0), d, fit_intercept)
            center, half = fb.center, fb.half
        if est.y_bound is None:
            y_estimate = _range_bound(counts_y, n, bound_eps["y_bound"], rngs["bounds"], bins,
                                      "y_bound", plan.private)
            y_center, y_half = 0.0, y_estimate
        else:
            lb = range_map((0.0, 1.0), est.y_bound, d, fit_intercept)
            y_center, y_half = lb.y_center, lb.y_half
        rmap = RangeMap(center, half, y_center, y_half, plan.row_bound,
                        est.x_range is not None)

    common = dict(rmap=rmap, fit_intercept=fit_intercept, x_clip=x_clip)
    R = _row_norm_bound(plan, fit_intercept)
    gram_sens = intercept_gram_sensitivity(plan.row_bound, _INTERCEPT if fit_intercept else 0.0)

    # In-memory float64 rows, C- or Fortran-ordered (a data frame's), in raw
    # space (public facts): the residual passes read each row once, by one
    # product, into vector temporaries, in pieces of a block's share per
    # thread. The split never depends on the data (so neither does the
    # rounding of a released sum): a piece with an entry outside its range
    # is clipped in a piece-sized copy (Fortran order: only its rows outside
    # their ranges are multiplied again, from a clipped copy). Other rows
    # (float32, a column selection of a wider array) are copied piece by
    # piece, so their pieces stay cache-sized. Measured at n = 1e6 on two
    # cores (median of 9 fits; 3 at d = 100), reading Fortran-ordered rows so
    # made the selection pass 2.7-3.2x (d = 10) and 3.1x (d = 100) faster
    # than cache-sized copies did.
    streamed = (source.in_memory and source.X.dtype == np.float64
                and (source.X.flags.c_contiguous or source.X.flags.f_contiguous)
                and raw_space(rmap, x_clip))

    # -- first pass: Gram, A^T u, label moments ------------------------------
    ZtZ, ZtL, sums = _data_pass(source, partial(first_pass_block, **common),
                                "label_moments, XtX, Xty", streamed=True)
    AtA, Atu, moments = first_pass_stats(ZtZ, ZtL, sums, fit_intercept, rmap, x_clip)
    # No block of the first pass had an entry outside its range: the later
    # passes read the same rows and skip the check. Timing only: both cases
    # give the same statistics, and nothing of this count is released. Only
    # for an in-memory NumPy array: a Dask graph is recomputed for every pass
    # and a memmap's file may change between passes, so their passes check.
    common["inside"] = bool(sums[3] == 0) and source.in_memory
    # Rows that may have changed since the first pass (a file, a Dask graph)
    # are checked for NaN or infinity again, on the copy that is summed.
    common["check"] = not source.in_memory
    p = AtA.shape[0]
    noisy_moments = release("label_moments", moments, 2.0)
    u_mean = float(np.clip(noisy_moments[0] / n, -1.0, 1.0))
    u_var = float(np.clip(noisy_moments[1] / n - u_mean**2, 1e-6, 4.0))

    gram_event = _gaussian("XtX", gram_sens, mus["XtX"], share)
    noisy_gram = AtA + symmetric_gaussian_matrix(p, gram_event.sigma, noise)
    events.append(gram_event)
    _record("XtX", noisy_gram, gram_event)
    ridge = 2.0 * gram_event.sigma * math.sqrt(p)

    g0 = release("Xty", Atu, residual_gradient_sensitivity(R, 1.0))
    theta = solve_refinement(noisy_gram, ridge, g0)

    # -- refinement rounds ---------------------------------------------------
    clip = None
    if plan.n_rounds > 1:
        (second,) = _data_pass(source, partial(residual_moment_block, theta=theta, **common),
                               "residual_scale", streamed=streamed)
        noisy_second = release("residual_scale", second, 1.0)
        scale_event = events[-1]
        floor = 2.0 * scale_event.sigma  # keep the clip away from noise-driven zero
        rms = math.sqrt(max(float(noisy_second[0]), floor, 1e-12) / n)
        clip = min(_RESIDUAL_CLIP_RMS * rms, 2.0) if plan.private else None
        for t in range(1, plan.n_rounds):
            (grad,) = _data_pass(
                source, partial(gradient_block, theta=theta, clip=clip, **common),
                f"gradient_{t}")
            noisy_grad = release(f"gradient_{t}", grad,
                                 residual_gradient_sensitivity(R, 2.0 if clip is None else clip))
            theta = theta + solve_refinement(noisy_gram, ridge, noisy_grad)

    # -- private choice between the model and the mean -----------------------
    cap = float(min(max(9.0 * u_var, 1e-4), 4.0))
    (diff,) = _data_pass(
        source, partial(selection_block, theta=theta, u_mean=u_mean, cap=cap, **common),
        "selection", streamed=streamed)
    noisy_diff = release("selection", diff, 2.0 * cap)
    sel_sigma = events[-1].sigma
    keep_model = float(noisy_diff[0]) < -_SELECTION_Z * sel_sigma if plan.private else (
        float(noisy_diff[0]) <= 0.0)

    if keep_model:
        w = theta[:d]
        c_theta = _INTERCEPT * theta[d] if fit_intercept else 0.0
        coef = rmap.y_half * w / rmap.half
        shift = float(np.sum(w * rmap.center / rmap.half))
        intercept = rmap.y_center + rmap.y_half * (c_theta - shift)
    else:
        coef = np.zeros(d)
        intercept = rmap.y_center + rmap.y_half * u_mean
    return {
        "coef": coef,
        "intercept": float(intercept),
        "mean_fallback": not keep_model,
        "ridge": float(ridge),
        "residual_clip": clip,
        "x_bound": x_clip,
        "y_bound": y_estimate,
        "ledger": _ledger(plan, events, est.delta),
    }
