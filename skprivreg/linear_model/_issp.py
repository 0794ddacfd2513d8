"""ISSPRegressor: Insufficient Statistics Perturbation (Brown et al., COLT 2024).

The estimator validates, plans (:func:`~._issp_plan.issp_plan`, public facts
only), spends, and calls the pure functions of :mod:`._issp_mechanism` on a
:class:`~skprivreg._rows.RowSource`; it stores only DP outputs and public
constants.
"""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import DataConversionWarning

from .._blocks import is_file_backed, numpy_owned
from .._compat import Interval, StrOptions, fit_context, validate_data, validate_params
from .._rows import RowSource, is_dask_collection, validate_blockwise_data
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import (
    ConfigurationError,
    ISSPFailedError,
    PlanningWarning,
    PrivateTestFailedWarning,
)
from ._base import LinearPredictMixin, split_intercept
from ._issp_mechanism import _issp_core, private_residual_scale
from ._issp_passes import factor_pass
from ._issp_plan import ISSPPlan, issp_plan

__all__ = ["ISSPRegressor", "ISSPPlan", "issp_plan"]

#: Default streaming block (rows) when ``chunk_size=None``.
DEFAULT_BLOCK = 1 << 17
_FAIL_MESSAGE = (
    "ISSP's private propose-test-release step said FAIL: the data did not look "
    "stable enough for the requested privacy level. The privacy budget of this "
    "fit is spent (see privacy_spent_). This usually means too few rows for "
    "the guarantee; see python -m skprivreg plan issp."
)


def _row_source(X, y, *, fit_intercept, chunk_size, clip, check_finite):
    """The row source of a fit: Dask blocks on the workers, or in-order blocks here.

    Dask input keeps its own row chunks (``chunk_size`` is ignored) and is
    checked for NaN or infinity by the first pass, on the workers (a Dask
    row source always checks). With only one side on Dask, the other takes
    its row chunks (and is checked too).
    """
    if is_dask_collection(X) or is_dask_collection(y):
        return RowSource(X, y.reshape(-1), fit_intercept=fit_intercept, clip=clip)
    return RowSource(X, y, block_rows=chunk_size or DEFAULT_BLOCK,
                     fit_intercept=fit_intercept, clip=clip, check_finite=check_finite)


def _shifted_labels(y, shift):
    """``y - shift``; a finite label that the shift takes out of the float64 range is
    refused (before any spend) as NaN or infinity is: its rows would sum to NaN."""
    if not shift:
        return y
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = y - shift
    if not is_dask_collection(shifted) and not np.all(np.isfinite(shifted)):
        raise ValueError(
            "y minus label_center leaves the float64 range for some label: choose a "
            "label_center nearer the labels. Nothing was spent."
        )
    return shifted


def _label_shift(label_center, fit_intercept):
    """The public value ``a`` subtracted from ``y`` before every pass (with an intercept).

    With an intercept column, least squares, leverages, residuals and every
    score are the same functions of ``y - a`` (the intercept moves by
    ``a``), so the mechanism's output is unchanged in exact arithmetic for
    any ``a``; ``a`` only changes rounding. Labels far from ``a`` against
    their residual scale (``1e13`` residual scales and more) make the float64
    coefficient estimate err by more than the noise, and one replaced row
    could then move the release deterministically; a centre read from the
    data would let one record decide the rounding of every other label (a
    record's own label, or a median that two clusters of labels let one
    record move across). So ``a`` is the declared ``label_center``, a public
    fact, or 0.
    """
    return float(label_center) if fit_intercept else 0.0


def _shift_intercept(beta, a):
    """``beta`` with ``a`` added to its intercept (the last coordinate)."""
    if a == 0.0 or beta is None:
        return beta
    beta = np.array(beta, dtype=np.float64)
    beta[-1] += a
    return beta


def _issp_trace(X, y, *, n_candidates=None, dense=True, _constants="proven", **params):
    """Run ISSP with the public planning and return its full trace.

    **NOT differentially private — for testing and research only.** The
    trace holds the scores, the weights and the non-private weighted OLS
    ``beta_hat``. Parameters are those of :class:`ISSPRegressor`.
    """
    est = ISSPRegressor(**params)
    validate_params(est)
    if is_dask_collection(X):
        X, y = validate_blockwise_data(est, X, y, multi_output=False)
    else:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
    plan = est._plan(X.shape[0], X.shape[1], constants=_constants)
    est._refuse_predicted_fail(plan)
    rngs = {**est._public_rngs("partition"), **est._secret_rngs("histogram", "ptr", "noise")}
    shift = _label_shift(est.label_center, est.fit_intercept)
    source = _row_source(X, _shifted_labels(y, shift), fit_intercept=est.fit_intercept,
                         chunk_size=est.chunk_size, clip=est.feature_clip, check_finite=False)
    if isinstance(est.residual_bound, str):
        r0 = private_residual_scale(source, plan.eps_r0, plan.delta_r0, rngs["partition"],
                                    rngs["histogram"], residual_slack=est.residual_slack,
                                    eta=est.design_failure_prob, return_gram=True)
        if r0 is None:
            return None
        R0, gram = r0[0], r0[2]
    else:
        R0, gram = float(est.residual_bound), None
    trace = _issp_core(source, k=plan.k, L0=plan.leverage_bound, R0=R0,
                       c=plan.noise_scale(R0), eps_ptr=plan.eps_ptr, delta_ptr=plan.delta_ptr,
                       ptr_fail_prob=plan.ptr_fail_prob, rng_ptr=rngs["ptr"],
                       rng_noise=rngs["noise"], n_candidates=n_candidates, dense=dense,
                       gram=gram)
    trace.beta_hat = _shift_intercept(trace.beta_hat, shift)
    trace.beta_tilde = _shift_intercept(trace.beta_tilde, shift)
    return trace


# ---------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------
class ISSPRegressor(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Private least squares by Insufficient Statistics Perturbation (Brown et al. 2024).

    ISSP down-weights high-leverage and high-residual rows with two
    deterministic, stability-engineered filters, tests privately (PTR) that
    few rows were filtered, and releases

    .. math::
        \\tilde\\beta \\sim N\\big(\\hat\\beta_v,\\ c^2 S_v^{-1}\\big),\\qquad
        S_v = \\tilde X^\\top \\mathrm{diag}(v)\\tilde X,\\quad
        \\hat\\beta_v = S_v^{-1}\\tilde X^\\top \\mathrm{diag}(v) y .

    The noise has the shape of :math:`S_v^{-1}`, so the error does not depend
    on the condition number of :math:`X^\\top X`; no norm bounds on rows or
    labels are needed. On clean data (every leverage at most
    ``L_base = L_top (1 - L_top)^{2k}``, ``L_top = L0/(1 + (k-1) L0)``, and every
    OLS residual at most ``R0``) the output is exactly
    :math:`N(\\beta_{ols}, c^2 (\\tilde X^\\top\\tilde X)^{-1})`.

    **Guarantee.** Full DP (the whole row ``(x_i, y_i)`` is protected) under
    replace-one neighbouring (n public): ``(epsilon, delta)``-DP for every
    ``epsilon > 0`` and ``delta in (0, 0.1]``, in exact arithmetic (float
    caveats below). **Corrected constants**: the paper's PTR lemma does not
    hold as stated, so ``k = floor(tau + A) + 1`` for a
    truncated-Laplace PTR of sensitivity 4 (about 1.7 times the paper's k);
    the printed leverage schedule breaks Theorem 9, so the thresholds are the
    geometric schedule ``L_j = L_top (1 - L_top)^{2k-j}`` (removing one row of
    leverage ``h`` raises any other leverage by at most the factor
    ``1/(1 - h)``); the location step uses the analytic Gaussian mechanism so
    any epsilon is allowed. **Tighter analysis** (proved on the ISSP privacy
    analysis page): the filtered weights ``v`` of two neighbouring datasets
    differ by at most ``m = 5`` in l1 on the union of their rows, and are
    ``(L_u, (1 + k L_u) R_{2k})``-good with ``L_u = L0/(1 - k L0)``; the
    residual ladder is ``R_j = R0 e^{g j}`` with
    ``e^g = (1 + 2 L_1)/(1 - (k+1) sqrt(L_1 L_2))`` (about ``e^{(k+3) L0}``; the
    paper has ``e^{108 k L0}``), where ``L_1 = L_u/(1 - 2 L_u)`` and
    ``L_2 = L_w/(1 - (k+1) L_w)``, ``L_w = L0/(1 - (k+1) L0)``. The location
    sensitivity is ``||S_v^{1/2}(b - b')||^2 <= 25 L_u (1 + k L_u)^2
    (1 - 5 L_u)^{-3} R_{2k}^2`` (the paper's bound is ``3136 L0 R_{2k}^2``), so
    ``c = sqrt(25 L_u (1 - 5 L_u)^{-3}) (1 + k L_u) R_{2k} sigma_AG(eps_M, delta_M)``;
    the covariance-shape step needs
    ``5 L_u/(1 - 5 L_u) <= min(eps_C, 0.999)/(3 ln(2/delta_C))`` (the paper
    has ``56 L0`` on the left).

    **Budget split inside fit.** ``r0_budget_fraction`` of (epsilon, delta)
    for the private residual scale (``residual_bound='auto'``, Karwa-Vadhan
    stability histogram), then the rest ``(eps1, delta1)`` as
    ``budget_split = (f_T, f_M, f_C)`` of eps1 for PTR / location / shape and
    ``delta1/3`` for the PTR, ``D = 2 delta1/3`` for the two Gaussian steps
    combined by the weak triangle inequality
    (``delta_C = (D/2) e^{-eps_M}``, ``delta_M = min(D/2, (D - delta_C)
    e^{-min(eps_C, 0.999)})``; valid and overflow-free for every epsilon).
    At large epsilon the location step spends only up to the epsilon at which
    the shape-step cap still admits L0; the rest is not spent
    (``planning_['eps_unused']``, and ``privacy_spent_`` says so).
    ``budget_split='auto'`` picks f_T and f_C (shape share in
    {0.1, 0.2, 0.5, 1, 2, 5}% of eps1, kept only where the shape-step cap
    admits L0)
    from public facts to minimise the predicted noise.

    **Required bounds.** None. ``leverage_bound`` (L0) and ``residual_bound``
    (R0) are public tuning constants; ``'auto'`` uses a data-independent
    Gaussian-design rule for L0 and a private estimate for R0. Never tune
    them on the same data without charging budget.

    **Failure behaviour.** Infeasible requests (from n, d and parameters
    only) raise :class:`ConfigurationError` before any data access, and
    so, by default, does a request the public planner predicts to FAIL at
    this n (the message states the n from which a PASS is predicted;
    ``predicted_fail='spend'`` runs anyway). A
    data-dependent FAIL (PTR, or no stable residual scale) spends the whole
    budget, records ``privacy_spent_`` and ``ptr_passed_ = False``, then
    raises :class:`ISSPFailedError` (``on_fail='raise'``) or releases zeros
    with :class:`PrivateTestFailedWarning` (``on_fail='zero'``). There is never a
    non-private fallback.

    **Minimum sample size.** ISSP is practical only for large n: with d = 10,
    delta = 1e-6 and the automatic split the predicted noise is at most 3 times
    the OLS error from about n = 7.7e6 at epsilon = 1, 5.8e5 at epsilon = 4 and
    2.1e5 at epsilon = 8 (2.2 times at n = 1e7, epsilon = 1). Below that it
    FAILs or adds noise tens to thousands of times the OLS error.
    ``python -m skprivreg plan issp --n N --d D --epsilon E --delta DL``
    (or :func:`issp_plan`) prints the numbers; ``planning_`` holds them.

    **Dask.** ``X`` and ``y`` may be a Dask array or Dask DataFrame/Series
    (with known chunk sizes). Every data pass is one task per row chunk on
    the workers (Gram matrices, TSQR, leverage and residual scans, the
    residual-scale group Grams), reduced in a tree; only small statistics and
    candidate rows reach the driver, where all filtering decisions, the PTR
    and the noise happen (nothing random runs on a worker; the residual-scale
    partition is drawn on the driver). Finiteness is checked on the workers in
    the first pass, before any noise. Same ``random_state`` gives the NumPy
    result up to float64 summation order (and the same number of passes: 2
    on clean data). ``predict`` accepts Dask input and returns a Dask array.

    **Floating point.** Exact arithmetic is assumed (Mironov 2012 attacks and
    timing channels are out of scope). Extreme rows are handled by a
    certified Gram factor with a row-sorted TSQR fallback and by recomputing
    factors from scratch after removing a row of leverage above 1/2; whether
    a design is singular is decided in exact arithmetic (a backward-error
    certificate, else an exact integer Gram matrix and exact minors), so no
    tolerance cut exists for one row to cross; residual filtering and the
    release sum the kept rows again instead of subtracting a removed row
    whose label could cancel; with an intercept, every pass works on labels
    shifted by the public ``label_center`` (the output is unchanged in exact
    arithmetic), so with a declared centre near the labels a label offset of
    1e13 or more residual scales no longer moves the float64 estimate
    between neighbours by more than its noise. Residual filtering bounds the
    rounding error of the residuals it compared; where it could reach a
    hundredth of its ladder's margin (labels or fitted values from about
    ``1e6`` residual scales), the filter runs again on ``y - X~ b``, ``b`` its
    fit, computed in double-double arithmetic (the output is the same in exact
    arithmetic for any ``b``). Rows and
    labels up to 1e300 change the scores within their proven sensitivity
    (tested on every neighbouring pair of a brute-force harness), and so does
    a row with entries up to the float64 maximum (whose column norm may
    overflow). Exactly
    collinear columns (including a constant column with
    ``fit_intercept=True``) make ISSP FAIL. A full-rank design whose float
    factor is not finite, or whose scaled condition number exceeds 1e7
    (columns that differ only in the last few bits), is factored in exact
    whitening coordinates (rows mapped in double-double arithmetic), where
    leverages and residuals are accurate again. ``feature_clip`` adds a public
    per-entry clip of X that bounds the dynamic range.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total epsilon, including the residual-scale estimate.
    delta : float, default=1e-6
        Total delta, in (0, 0.1]. Choose it well below 1/n_samples (a
        warning is emitted if delta >= 1/n_samples).
    leverage_bound : 'auto' or float, default='auto'
        L0, at most ``1/(96k)`` and the shape-step cap
        ``5 L_u/(1 - 5 L_u) <= min(eps_C, 0.999)/(3 ln(2/delta_C))`` with
        ``L_u = L0/(1 - k L0)``.
    residual_bound : 'auto' or float, default='auto'
        R0 in units of y; ``'auto'`` estimates it privately, from each
        group's residual sum of squares read off the Cholesky factor of its
        Gram matrix, whose rounding error is about ``1e-16`` times the sum of
        the squared labels: with labels or fitted values about ``1e7``
        residual scales from 0 (after ``label_center``) it is no longer
        accurate and the fit FAILs (its budget spent). Declare
        ``label_center`` for an offset, or a ``residual_bound`` for such a
        strong signal.
    fit_intercept : bool, default=True
        Append a ones column (a per-row map; data-mean centering is never used).
    label_center : float, default=0.0
        A public value near the labels, subtracted from them before every
        pass (with ``fit_intercept=True``; the intercept absorbs it, so the
        output is the same in exact arithmetic). Declare it when the labels
        sit far from 0 against their residual scale (e.g. a domain figure
        such as a typical price): beyond about ``1e13`` residual scales float64
        rounding would move the estimate between neighbours by more than its
        noise, and from about ``1e6`` residual filtering runs a second time on
        relabelled rows (a few more passes) to keep its residuals exact
        enough. It must be a
        public fact: a centre computed from the data would let one record
        decide the rounding of every other label. Without an intercept it must be 0.
    budget_split : 'auto', 'paper' or tuple of 3 floats, default='auto'
        Shares of eps1 for PTR, location and shape.
    r0_budget_fraction : float in (0, 0.5), default=0.05
        Share of (epsilon, delta) for the private residual scale.
    ptr_fail_prob : float in [0, 0.5), default=0.0
        beta: probability of FAIL on clean data, traded for a smaller k.
    leverage_slack : float >= 1, default=1.25
        gamma_L in the automatic L0 rule.
    residual_slack : float >= 1, default=1.0
        gamma_R in the automatic R0 rule (raise for non-Gaussian noise).
    design_failure_prob : float in (0, 0.5), default=0.01
        Tail probabilities of the automatic rules.
    max_blowup : float >= 1, default=10.0
        Planning-warning threshold on the residual blow-up ``(R_{2k}/R0)^2``.
    on_fail : {'raise', 'zero'}, default='raise'
        Behaviour on a data-dependent FAIL.
    predicted_fail : {'refuse', 'spend'}, default='refuse'
        What to do when the public planner predicts that ISSP FAILs at this
        ``n`` (Gaussian-design leverages above the clean-path bound, a fact of
        ``n``, ``d`` and the parameters only). ``'refuse'`` raises
        :class:`ConfigurationError` before any budget is spent, stating the
        number of rows the clean path needs; ``'spend'`` runs anyway (the
        private test then most likely FAILs and the budget is spent).
    chunk_size : int >= 1024 or None, default=None
        Rows per block of the streaming passes; ``None`` streams an in-memory
        array in blocks of 131072 rows. ``np.memmap`` inputs are never loaded
        whole; their file must not change during the fit (the filters chosen
        in one pass are applied to the rows read in the next). Ignored for
        Dask input, whose own row chunks are the blocks.
    feature_clip : float > 0 or None, default=None
        Public per-entry clip of X to ``[-feature_clip, feature_clip]``
        (part of the guarantee: it is a fixed per-row map).
    verbose : int, default=0
        If positive, print one line per stage of a private fit: the public plan
        (rows, columns, ``k``, the leverage bound, the budget split), the start
        of the residual-scale pass (one read of all rows), the start of the
        filtering stage, and the released outcome of the private test. The
        number of passes the filters make depends on the data (a removed row
        triggers a rescan), so it is never printed, nor any per-pass progress
        or timing; every printed value is public or released. The wall-clock
        time of the fit is not covered by the guarantee, with or without
        ``verbose``.
    accountant : BudgetAccountant or None, default=None
        Checked before any data access, charged on PASS and on FAIL.
    random_state : None, int or numpy.random.Generator, default=None
        Never publish a seed used on private data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        DP output.
    intercept_ : float
        DP output (0.0 if ``fit_intercept=False``).
    ptr_passed_ : bool
        The PTR bit (DP output).
    k_, leverage_bound_, budget_split_ : int, float, tuple
        Public constants of the plan.
    noise_scale_ : float
        c (public given R0).
    residual_bound_, sigma2_upper_ : float
        R0 and the private sigma^2 upper estimate (DP outputs; sigma2_upper_
        is None when R0 was given).
    privacy_spent_ : PrivacyLedger
    planning_ : dict
        Public planning numbers (:class:`ISSPPlan` as a dict).
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    TukeyEMRegressor : Private least squares without bounds, for smaller n.
    AdaSSPRegressor : Private ridge from declared or private norm bounds.
    issp_plan : The public planner (predicted noise, minimum n).
    sklearn.linear_model.LinearRegression : The non-private least squares.

    References
    ----------
    G. Brown, J. Hayase, S. Hopkins, W. Kong, X. Liu, S. Oh, J. C. Perdomo,
    A. Smith, "Insufficient Statistics Perturbation: Stable Estimators for
    Private Least Squares", COLT 2024 (arXiv 2404.15409).

    Examples
    --------
    Two features and ``epsilon=8`` keep this example small; at ``d = 10`` and
    ``epsilon = 1`` ISSP needs millions of rows (see above).

    >>> import numpy as np
    >>> from skprivreg.linear_model import ISSPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300_000, 2)); y = X @ [1.0, -2.0] + rng.normal(size=300_000)
    >>> est = ISSPRegressor(epsilon=8.0, delta=1e-6).fit(X, y)  # no bounds needed
    >>> est.coef_.shape
    (2,)
    >>> [event.name for event in est.privacy_spent_.events]
    ['issp_sigma2_histogram', 'issp_ptr', 'issp_location', 'issp_shape']
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "leverage_bound": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="neither")],
        "residual_bound": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "label_center": [Interval(Real, -1e300, 1e300, closed="both")],
        "budget_split": [StrOptions({"auto", "paper"}), tuple, list],
        "r0_budget_fraction": [Interval(Real, 0, 0.5, closed="neither")],
        "ptr_fail_prob": [Interval(Real, 0, 0.5, closed="left")],
        "leverage_slack": [Interval(Real, 1, None, closed="left")],
        "residual_slack": [Interval(Real, 1, None, closed="left")],
        "design_failure_prob": [Interval(Real, 0, 0.5, closed="neither")],
        "max_blowup": [Interval(Real, 1, None, closed="left")],
        "on_fail": [StrOptions({"raise", "zero"})],
        "predicted_fail": [StrOptions({"refuse", "spend"})],
        "chunk_size": [Interval(Integral, 1024, None, closed="left"), None],
        "feature_clip": [Interval(Real, 0, None, closed="neither"), None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        leverage_bound="auto",
        residual_bound="auto",
        fit_intercept=True,
        label_center=0.0,
        budget_split="auto",
        r0_budget_fraction=0.05,
        ptr_fail_prob=0.0,
        leverage_slack=1.25,
        residual_slack=1.0,
        design_failure_prob=0.01,
        max_blowup=10.0,
        on_fail="raise",
        predicted_fail="refuse",
        chunk_size=None,
        feature_clip=None,
        verbose=0,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.leverage_bound = leverage_bound
        self.residual_bound = residual_bound
        self.fit_intercept = fit_intercept
        self.label_center = label_center
        self.budget_split = budget_split
        self.r0_budget_fraction = r0_budget_fraction
        self.ptr_fail_prob = ptr_fail_prob
        self.leverage_slack = leverage_slack
        self.residual_slack = residual_slack
        self.design_failure_prob = design_failure_prob
        self.max_blowup = max_blowup
        self.on_fail = on_fail
        self.predicted_fail = predicted_fail
        self.chunk_size = chunk_size
        self.feature_clip = feature_clip
        self.verbose = verbose
        self.accountant = accountant
        self.random_state = random_state

    def _plan(self, n, d, constants="proven"):
        return issp_plan(
            n_samples=n, n_features=d, epsilon=self.epsilon, delta=self.delta,
            fit_intercept=self.fit_intercept,
            leverage_bound=self.leverage_bound, residual_bound=self.residual_bound,
            budget_split=self.budget_split, r0_budget_fraction=self.r0_budget_fraction,
            ptr_fail_prob=self.ptr_fail_prob, leverage_slack=self.leverage_slack,
            residual_slack=self.residual_slack, design_failure_prob=self.design_failure_prob,
            max_blowup=self.max_blowup, _constants=constants,
        )

    def __sklearn_is_fitted__(self):
        return hasattr(self, "coef_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        tags.input_tags.sparse = False
        if math.isinf(self.epsilon):
            # The non-private mode is deterministic ordinary least squares.
            tags.non_deterministic = False
            tags.regressor_tags.poor_score = False
        return tags

    @staticmethod
    def _single_target(y):
        if y.ndim == 2 and y.shape[1] > 1:
            raise ValueError(
                "ISSPRegressor supports a single target. q targets need q fits, each with "
                "a share of (epsilon, delta) (basic composition); k then grows about "
                "linearly in q and the required n about quadratically."
            )
        if y.ndim == 2:
            warnings.warn("A column-vector y was passed when a 1d array was expected; "
                          "it was raveled.", DataConversionWarning, stacklevel=4)
        return y.reshape(-1)

    def _streamed(self, X):
        return is_file_backed(X) or (self.chunk_size is not None and hasattr(X, "dtype"))

    def _validate_input(self, X, y):
        if is_dask_collection(X) or is_dask_collection(y):
            # Shapes and dtypes only; finiteness is checked on the workers in the
            # first pass, before any noise (RowSource(check_finite=True)).
            return validate_blockwise_data(self, X, y, multi_output=False)
        if self._streamed(X):
            # Streamed input: never load X whole; check finiteness block by block.
            validate_data(self, X, skip_check_array=True)
            if np.ndim(X) != 2:
                raise ValueError("X must be a 2-D array.")
            y = self._single_target(np.asarray(y, dtype=np.float64))
            if y.shape[0] != X.shape[0]:
                raise ValueError("X and y have inconsistent numbers of rows.")
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity.")
            # X itself is checked block by block during the first data pass,
            # which releases nothing (RowSource(check_finite=True)).
            return X, y
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=True,
                             y_numeric=True, accept_sparse=False, multi_output=True)
        return X, self._single_target(y)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit privately; see the class docstring for the guarantee.

        Parameters
        ----------
        X : array-like, np.memmap, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : array-like or Dask array/Series of shape (n_samples,)

        Returns
        -------
        self
        """
        self._reset()
        private = self._validate_privacy_params()
        X, y = self._validate_input(X, y)
        n, d = X.shape
        p = d + int(self.fit_intercept)
        if not self.fit_intercept and self.label_center != 0:
            raise ConfigurationError(
                "label_center shifts the labels for the intercept to absorb: without an "
                "intercept it must be 0."
            )
        if n < p + 2:
            raise ConfigurationError(
                f"ISSP needs n >= p + 2 = {p + 2} rows (p counts the intercept column); "
                f"got n_samples={n}."
            )
        if not private:
            shift, source = self._shifted_source(X, y)
            return self._fit_non_private(source, shift)
        plan = self._plan(n, d)
        self._refuse_predicted_fail(plan)
        ledger = plan.ledger()
        self._check_budget(ledger)
        # The labels are read after the budget check.
        shift, source = self._shifted_source(X, y)
        for note in plan.warnings:
            warnings.warn(note, PlanningWarning, stacklevel=3)
        if self.delta >= 1.0 / n:
            warnings.warn(f"delta={self.delta:g} >= 1/n = {1.0 / n:.3g}: a weak guarantee.",
                          UserWarning, stacklevel=3)
        if self.epsilon > 10:
            warnings.warn(f"epsilon={self.epsilon:g} > 10 is a weak guarantee.", UserWarning,
                          stacklevel=3)
        self._say(f"plan: n={n}, p={p}, k={plan.k}, leverage bound {plan.leverage_bound:.3g}, "
                  f"(epsilon, delta) = ({self.epsilon:g}, {self.delta:g}) split "
                  f"{'/'.join(f'{s:.3g}' for s in plan.budget_split)}")
        self.k_ = plan.k
        self.leverage_bound_ = plan.leverage_bound
        self.budget_split_ = plan.budget_split
        self.planning_ = plan.as_dict()
        # The group partition of the residual-scale histogram is public (the
        # guarantee holds for every fixed partition); every other draw is secret.
        # The spend is recorded before the first secret draw (after passes that
        # release nothing and may refuse non-finite streamed or Dask input).
        rngs = {**self._public_rngs("partition"),
                **self._secret_rngs("histogram", "ptr", "noise", spend=ledger)}
        sigma2_up = None
        if isinstance(self.residual_bound, str):
            self._say(f"stage 1/2: private residual scale (one pass over {n} rows)")
            r0 = private_residual_scale(source, plan.eps_r0, plan.delta_r0, rngs["partition"],
                                        rngs["histogram"], residual_slack=self.residual_slack,
                                        eta=self.design_failure_prob, return_gram=True)
            if r0 is None:
                return self._fail(ledger)
            R0, sigma2_up, gram = r0
        else:
            R0, gram = float(self.residual_bound), None
        c = plan.noise_scale(R0)
        self._say("stage 2/2: leverage and residual filtering, private test, release "
                  "(passes over the rows; their number depends on the data and is not shown)")
        trace = _issp_core(source, k=plan.k, L0=plan.leverage_bound, R0=R0, c=c,
                           eps_ptr=plan.eps_ptr, delta_ptr=plan.delta_ptr,
                           ptr_fail_prob=plan.ptr_fail_prob, rng_ptr=rngs["ptr"],
                           rng_noise=rngs["noise"], gram=gram)
        self.residual_bound_ = R0
        self.sigma2_upper_ = sigma2_up
        self.noise_scale_ = c
        self._settle(ledger)
        if not trace.passed:
            return self._fail(ledger)
        self.ptr_passed_ = True
        self.coef_, self.intercept_ = split_intercept(_shift_intercept(trace.beta_tilde, shift),
                                                      self.fit_intercept)
        self._say("done: private test PASS, coefficients released")
        return self

    def _shifted_source(self, X, y):
        """``(a, row source of (X, y - a))``: the label shift and the rows the passes read."""
        shift = _label_shift(self.label_center, self.fit_intercept)
        source = _row_source(X, _shifted_labels(y, shift), fit_intercept=self.fit_intercept,
                             chunk_size=self.chunk_size, clip=self.feature_clip,
                             check_finite=self._streamed(X) or not numpy_owned(y))
        return shift, source

    def _say(self, message):
        """A progress line of public or released facts only (``verbose > 0``)."""
        if self.verbose:
            print(f"[ISSPRegressor] {message}", flush=True)

    def _refuse_predicted_fail(self, plan):
        """Refuse before any spend when the public plan predicts FAIL (unless told to spend)."""
        if not plan.fail_predicted or self.predicted_fail == "spend":
            return
        raise ConfigurationError(
            f"ISSP is predicted to FAIL at n={plan.n} rows (d={plan.d}, "
            f"epsilon={plan.epsilon:g}, delta={plan.delta:g}): a Gaussian design of this "
            "size is expected to have too many rows above the leverage thresholds (top "
            f"{plan.leverage_top:.3g} at k={plan.k}) for the private test to pass. ISSP "
            f"is predicted to PASS from about n = {plan.predicted_n_pass:.3g} rows at "
            "these settings (python -m skprivreg plan "
            "issp shows the numbers). Nothing was spent; pass predicted_fail='spend' to "
            "spend the budget anyway."
        )

    def _fail(self, ledger):
        self._settle(ledger)  # spent at the first secret draw
        self.ptr_passed_ = False
        self._say("done: private test FAIL")
        if self.on_fail == "raise":
            raise ISSPFailedError(_FAIL_MESSAGE)
        warnings.warn(_FAIL_MESSAGE + " on_fail='zero': zero coefficients were released.",
                      PrivateTestFailedWarning, stacklevel=3)
        d = self.n_features_in_
        self.coef_, self.intercept_ = np.zeros(d), 0.0
        return self

    def _fit_non_private(self, source, shift=0.0):
        """epsilon=inf: ordinary least squares (non-private test mode, warned)."""
        # No noise, no guarantee: the ledger says so.
        self._spend(PrivacyLedger([PrivacyEvent("ols (non-private)", math.inf, 0.0)]))
        factor = factor_pass(source)
        beta = factor.to_original(factor.beta) if factor.pd else np.zeros(source.p)
        self.coef_, self.intercept_ = split_intercept(_shift_intercept(beta, shift),
                                                      self.fit_intercept)
        self.ptr_passed_ = True
        self.noise_scale_ = 0.0
        return self
