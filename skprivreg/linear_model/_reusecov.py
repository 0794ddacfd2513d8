"""ReuseCov: private regression in many outcomes sharing one design (Neel, PRIMO).

There are ``l`` linear regressions on one design X. Sufficient-statistics
perturbation releases a noisy covariance :math:`\\tilde\\Sigma = X^\\top X/n + E_1`
and a noisy association :math:`\\tilde G = X^\\top Y/n + E_2`. The covariance
depends on X only, so one noisy copy serves all ``l`` outcomes (and later
outcomes too); only the association, whose sensitivity grows like
:math:`\\sqrt l`, pays for ``l``. Under feature or label DP the association
can further be projected onto a public convex set that contains the truth
(:mod:`._reusecov_projection`), which removes most of the growth in ``l``.

The pure functions live beside this estimator: the pass over the rows in
:mod:`._reusecov_stats`, planning from public numbers (and the public
planner :func:`reusecov_plan`) in :mod:`._reusecov_plan`, the releases and
the solve in :mod:`._reusecov_release`, the projections in
:mod:`._reusecov_projection`, reuse of a released covariance in
:mod:`._reusecov_reuse`, and the order of a fit's releases (budget check,
passes, spend, draws) in :mod:`._reusecov_fit`. This module holds the estimator,
:class:`ReuseCovRegressor`.
"""

import math
import warnings
from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin

from .._compat import Interval, StrOptions, fit_context
from ..accounting import PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import ConfigurationError
from ..mechanisms import difference_at_most, hypot_at_least
from ._base import LinearPredictMixin
from ._private_bounds import (
    LARGEST_BOUND_SCALE,
    bound_epsilons,
    check_bounds_feasible,
    label_magnitude,
)
from ._reusecov_fit import _ReleaseMixin
from ._reusecov_plan import NEIGHBOURINGS
from ._reusecov_release import NoisyCovariance, _check_dask_feature_projection
from ._reusecov_reuse import _CovarianceReuseMixin
from ._reusecov_stats import validate_features_and_labels

__all__ = ["ReuseCovRegressor"]


class ReuseCovRegressor(
    DPEstimatorMixin, _ReleaseMixin, _CovarianceReuseMixin, LinearPredictMixin,
    MultiOutputMixin, RegressorMixin, BaseEstimator,
):
    """Private multi-outcome linear regression by covariance reuse (PRIMO).

    Fits ``l`` ridge regressions on one design X,

    .. math::
        W = \\Pi_{\\succeq\\lambda}(\\tilde\\Sigma + \\lambda I)^{-1} \\hat G,\\qquad
        \\tilde\\Sigma = X^\\top X/n + E_1,\\quad
        \\hat G = \\Pi_K(X^\\top Y/n + E_2),

    where :math:`E_1` is symmetric Gaussian (i.i.d. :math:`N(0,\\sigma_1^2)`
    on and above the diagonal), :math:`E_2` is i.i.d. :math:`N(0,\\sigma_2^2)`,
    :math:`\\Pi_K` is the identity (``mechanism='gauss'``, ReuseCovGauss) or
    the projection onto a public convex set containing :math:`X^\\top Y/n`
    (``mechanism='proj'``: GaussProj_Y under feature DP, GaussProj_X under
    label DP), and :math:`\\Pi_{\\succeq\\lambda}` clips eigenvalues at
    :math:`\\lambda`. One eigendecomposition serves all ``l`` outcomes; the
    covariance noise does not grow with ``l``.

    **Privacy notions and neighbouring relations** (``privacy=``). The unit is
    one individual: a row ``x_i`` and its whole outcome row ``y^i``.

    - ``'full'``: replace one record ``(x_i, y^i)`` (``neighbouring=
      'replace-one'``, default) or zero out one (``'zero-out'``: the record
      is replaced by a null row that contributes nothing, n public;
      reproduces the paper's constants, which are zero-out values, not
      add/remove ones: n is released). Needs ``x_bound`` and
      ``y_bound``.
    - ``'feature'``: Y is public; one row ``x_i`` is replaced. Needs
      ``x_bound``; the public ``max_i ||y^i||`` enters the sensitivity.
    - ``'label'``: X is public; one outcome row ``y^i`` is replaced. Needs
      ``y_bound``; the covariance is exact (no noise, no budget) and the
      public ``max_i ||x_i||`` enters the sensitivity.

    The fit is ``(epsilon, delta)``-DP for the chosen relation. A fit that
    reuses a released covariance (``covariance=``) spends ``(epsilon, delta)``
    on its association and is charged that; its ``privacy_spent_`` also lists
    the covariance's own releases (charged by the fit that made it), so the
    guarantee of the model as a whole is their composition, above
    ``(epsilon, delta)``.

    **Sensitivities** (replace-one; ``B`` the raw row bound ``x_bound``,
    ``c = intercept_scaling`` with an intercept, else 0): ``sqrt(2)(B^2 +
    c^2/2) / n``, or ``2 B c / n`` when ``c^2 > 2 B^2``, for the upper
    triangle of :math:`X^\\top X/n` (whose corner
    ``c^2`` is the same for every dataset and is released without noise);
    ``2 sqrt(B^2 + c^2) sqrt(l) y_bound / n`` for :math:`X^\\top Y/n` (full);
    ``2 B max_i||y^i|| / n`` (feature: the constant column cancels);
    ``2 max_i||x_i|| sqrt(l) y_bound / n`` (label, augmented rows). Zero-out:
    ``sqrt(B^4 + B^2c^2 + c^4) / n`` and ``sqrt(B^2 + c^2) sqrt(l) y_bound /
    n`` (the corner carries noise). Proofs (tight):
    :mod:`skprivreg.mechanisms` (``gram_upper_sensitivity``,
    ``cross_sensitivity``).

    **Budget split.** ``composition='gdp'`` (default): ``mu = mu(epsilon,
    delta)`` (exact GDP conversion). Under full or feature DP with
    replace-one neighbours the covariance and the association are **one
    joint Gaussian release**
    (:func:`~skprivreg.mechanisms.joint_gram_cross_calibration`): a
    neighbouring pair cannot move both statistics by their sensitivities at
    once (the covariance moves most for nearly orthogonal rows, the
    association for opposite ones), so the release is ``mu``-GDP with both
    noise scales ``gamma < 1`` times those of composing ``sqrt(f) mu`` for
    the covariance and ``sqrt(1-f) mu`` for the association (``gamma``
    about 0.89 for ``n = 2e4``, ``d = 10``, ``l = 50``, ``f = 0.5``); the
    ledger holds one event, ``covariance+association[0]``. Otherwise the
    two releases compose (``sqrt(f) mu`` and ``sqrt(1-f) mu``). ``f =
    cov_budget``; ``'auto'`` minimises ``sigma_1^2 w^2 + sigma_2^2`` over
    ``f`` (numerically for the joint release; ``f = Delta_1 w / (Delta_1 w
    + Delta_2)`` when composed). ``composition='paper'``: basic
    composition, ``(f eps, f delta)`` and ``((1-f) eps, (1-f) delta)`` with
    Neel's Lemma-1 constant ``sigma = c(eps, delta) Delta``. Under label DP,
    and when a released covariance is reused, the association gets the
    whole budget; a released covariance carries its marginal event (``mu =
    Delta_1 / sigma_1``, post-processing of the joint release). With
    ``cov_subsample`` the covariance is computed on a secret uniform
    subsample of ``s`` rows, its sensitivity is divided by ``s`` and its
    budget the amplified ``(log(1 + (n/s)(e^{f eps} - 1)), (n/s) f delta)``
    (Balle et al. 2018); the split is then basic composition. Under basic
    composition the share sets the Renyi-DP curve of the releases, so with
    estimated bounds ``'auto'`` chooses it before the data, from unit
    scales (never from the estimates): the curve is the same for every
    dataset of the shape.

    **Bounds and clipping.** Rows of X on a private side are scaled to L2
    norm ``x_bound``; entries of Y on a private side are clipped to
    ``[-y_bound, y_bound]``; public sides are never clipped. Clipping is
    never signalled from ``fit`` (whether a record exceeded a bound is a fact
    about that record); count clipped rows with
    :func:`skprivreg.diagnostics.clipping_report`, outside the release. A
    bound given for a public side is ignored with a ``UserWarning``.

    **Missing bounds.** Required bounds are ``x_bound`` and ``y_bound``
    (full), ``x_bound`` (feature), ``y_bound`` (label). A required bound you
    do not declare is estimated privately with ``bounds_budget * epsilon``
    (split equally between the missing bounds) when n allows it: a pure-DP
    event of the fit's neighbouring relation and notion (under
    ``privacy='full'`` both bounds are full-DP events; under ``'label'`` the
    label bound is a label-DP event, under ``'feature'`` the row bound a
    feature-DP event), recorded in ``privacy_spent_`` and on the
    accountant. When n is too small,
    :class:`~skprivreg.exceptions.ConfigurationError` is raised before any
    budget is spent, naming the n needed. ``bounds='data'`` reads the bound
    from the data instead: not private, an event of infinite epsilon and a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`. A reused covariance
    brings its own row bound. ``epsilon=np.inf`` needs no bounds.

    **Failure behaviour.** There is no private test: the fit always returns.
    With little data the noisy covariance is indefinite; eigenvalue clipping
    at ``lambda`` keeps the solve stable (post-processing). Invalid
    configurations raise :class:`~skprivreg.exceptions.ConfigurationError`
    before any data access.

    **Dask input.** ``fit`` and :meth:`add_outcomes` accept Dask arrays and
    data frames (known chunk sizes) without collecting X or Y on the driver:
    every pass over rows (the statistics, the public sides' maximum norms,
    ``Y^T Y`` for GaussProj_Y) is one task per row block on the workers,
    tree-summed; NaN/inf is detected there before any budget is spent. The
    secret covariance subsample (``cov_subsample``) is drawn on the driver
    and selected lazily (the indices travel in the task graph to the
    cluster, which is trusted as the data owner's environment, and are never
    stored or returned). All noise is drawn once, on the driver, as for
    NumPy input: inside :func:`skprivreg.testing.reproducible_noise` (which
    fixes the noise, for tests only) a Dask fit equals the NumPy fit up to
    float64 round-off of the block sums.
    Not supported (``ConfigurationError`` before any budget is spent):
    ``mechanism='proj'`` under feature DP with more outcomes than rows
    (``l > n``), which keeps the public Y in memory.

    **Sample size.** The covariance noise matters when ``sigma_1
    sqrt(d_eff)`` approaches ``lambda_min(X^T X / n)``, i.e. useful fits need
    roughly ``n >> sqrt(2 d_eff) B^2 / (sqrt(f) mu lambda_min)`` (full and
    feature DP). The association error grows with ``l`` (Gaussian: per-entry
    variance ``propto l``); the projection helps when ``l >~ n / sqrt(d)``
    (feature) and when the noise pushes the association outside ``K_X``
    (label).

    Parameters
    ----------
    epsilon : float, default=1.0
        Total budget of ``fit``; ``np.inf`` is the non-private test mode.
    delta : float, default=1e-6
        Total delta, in (0, 1). Choose it well below ``1/n_samples``.
    privacy : {'full', 'feature', 'label'}, default='full'
    mechanism : {'gauss', 'proj'}, default='gauss'
        ``'proj'`` needs ``privacy`` in {'feature', 'label'}.
    x_bound : float or None, default=None
        Declared bound on the L2 norm of a raw row ``x_i`` (private X only).
        Declared bounds must lie in ``[1e-60, 1e60]`` (rescale the data
        otherwise): the calibration multiplies up to four bound-sized
        factors, which must stay in float64's normal range.
    y_bound : float, (low, high) or None, default=None
        Declared label range (private Y only): a float ``B`` (labels in
        ``[-B, B]``) or a pair ``(low, high)``; entries are clipped to
        ``[-B, B]`` with ``B = max(|low|, |high|)`` (not re-centred).
    bounds : {'private', 'data'}, default='private'
        How a missing required bound is obtained (see **Missing bounds**).
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on missing bounds.
    w_bound : float or None, default=None
        Scale of a coefficient vector's norm; used only by ``ridge='theory'``
        and ``cov_budget='auto'`` (never for privacy). ``None`` uses
        ``y_scale / x_scale``.
    ridge : float >= 0, 'auto' or 'theory', default='auto'
        ``lambda`` on the normalised scale (``Ridge(alpha=n lambda)``).
        ``'auto'`` (ReuseCovGauss, and GaussProj_Y under feature DP): the
        ridge minimising a first-order estimate of the in-sample excess risk,

        .. math::
            R(\\lambda) = \\sum_j \\sum_i \\frac{s_i A_j
            + \\lambda^2 s_i (u_i^\\top w_j)^2}{(s_i + \\lambda)^2},
            \\qquad A_j = \\sigma_a^2 + \\sigma_1^2 \\lVert w_j\\rVert^2,

        with :math:`(s_i, u_i)` the eigenpairs of the released
        :math:`\\tilde\\Sigma` and the unknowns estimated from the released
        associations of all ``l`` outcomes in that eigenbasis
        (:func:`~skprivreg.linear_model._ridge_rule.risk_minimising_ridge`;
        floor :math:`\\approx \\sigma_1\\sqrt{d_{\\mathrm{eff}}}`). It reads
        the released covariance, the released associations and the public
        noise scales only: post-processing, no budget. The release computes
        every outcome's association first, then the ridge, then the
        coefficients. :math:`\\sigma_a = \\sigma_2` for Gauss; for GaussProj_Y
        the projected noise :math:`E_2 V\\mathrm{diag}(h)V^\\top` has mean
        per-entry variance :math:`\\sigma_a^2 = \\sigma_2^2 \\sum_k h_k^2/l`
        (:math:`h_k = \\kappa_k^2/(\\kappa_k^2+\\mu)`, public Y and the
        released multiplier). GaussProj_X uses the risk rule when its
        projection is inactive (``proj_mu_ = 0``: the release is the
        Gaussian one). ``'theory'`` (and ``'auto'`` for an active GaussProj_X,
        whose projected noise differs by feature direction, which the risk
        estimate does not model): the public high-probability rule
        ``L_d sqrt(sigma_1^2 + sigma_2,eff^2/w^2)`` with ``L_d = sqrt(d
        log(2 d^2/0.05))`` and ``w = w_bound`` (default ``y_scale /
        x_scale``); it is several times larger than the risk-minimising
        ridge on typical problems and over-shrinks. Both are 0 in the
        non-private mode. ``ridge_`` is the ridge used.
    cov_budget : float in (0, 1) or 'auto', default='auto'
        Share ``f`` of the release budget spent on the covariance (see
        **Budget split**); ``'auto'`` is a function of public facts only
        (bounds, n, l, epsilon, delta); with ``mechanism='proj'`` it is 0.5
        (the projection removes most association noise, by an amount known
        only after the release).
    composition : {'gdp', 'paper'}, default='gdp'
    neighbouring : {'replace-one', 'zero-out'}, default='replace-one'
    fit_intercept : bool, default=True
        By augmentation with a constant column ``intercept_scaling`` (never by
        centering with data means); the intercept is ridge-penalised.
    intercept_scaling : float in (0, 1e60], default=1.0
        Value of the constant column (at most 1e60, as a declared bound: the
        calibration would overflow).
    cov_subsample : int, float in (0, 1) or None, default=None
        Size (or fraction of n) of the secret covariance subsample
        (PRIMO's Algorithm 4, with corrected calibration). Buys speed, not
        accuracy. Full/feature DP with replace-one only.
    covariance : NoisyCovariance or None, default=None
        Reuse a released covariance (from :meth:`export_covariance`) on the
        same rows: no covariance release, the whole budget goes to the
        association.
    psd : {'clip', 'none'}, default='clip'
    block_size : int or None, default=None
        Outcome columns per block (memory); results do not depend on it.
    keep_noisy_stats : bool, default=False
        Store the released association as ``noisy_xty_`` (p x l).
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None
        Unused for the noise: every fit draws its noise (and the secret
        subsample) from fresh OS entropy, whatever this is, so a reused
        covariance and a new association never share noise. See
        :mod:`skprivreg.testing` for reproducible noise in tests.
    verbose : int, default=0
        ``1`` or more: one line per pass over the rows (the pass's name and
        ``n``). Lines carry public facts only (pass number, ``n``), never a
        value computed from the data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    n_outputs_ : int
    ridge_ : float
    cov_budget_ : float
    noise_std_ : dict
        ``{'covariance': sigma_1, 'association': sigma_2}``.
    sensitivity_ : dict
        ``{'covariance': Delta_1, 'association': Delta_2}`` of the last release.
    x_bound_, y_bound_ : float or None
        The bounds used (declared, released privately, or from a reused
        covariance); ``y_bound_`` is the magnitude ``B``.
    x_bound_eff_ : float or None
    covariance_ : NoisyCovariance
    proj_mu_ : float
        Projection multiplier (0: inactive).
    proj_active_ : bool
    privacy_spent_ : PrivacyLedger
        Every release the published coefficients depend on (a reused
        covariance included once); the accountant is charged only new ones.
    noisy_xty_ : ndarray (p, l)
        Only with ``keep_noisy_stats``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    IndependentSSPRegressor : The baseline: one SSP fit per outcome.
    SSPRegressor : Sufficient statistics perturbation for one design.
    NoisyCovariance : A released covariance, to reuse for later outcomes.
    sklearn.linear_model.Ridge : The non-private (multi-output) ridge.

    Notes
    -----
    Floating-point Gaussian sampling is not hardened against precision
    attacks (Mironov 2012). ``score`` on private data is itself not private.

    References
    ----------
    S. Neel, "PRIMO: Private Regression in Multiple Outcomes",
    arXiv:2303.04195, 2023.

    B. Balle, G. Barthe and M. Gaboardi, "Privacy amplification by
    subsampling: tight analyses via couplings and divergences", NeurIPS 2018.

    I. Mironov, "On significance of the least significant bits for
    differential privacy", ACM CCS 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.linear_model import ReuseCovRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 5)); W = rng.normal(size=(5, 20))
    >>> Y = X @ W + rng.normal(size=(20000, 20))
    >>> est = ReuseCovRegressor(epsilon=1.0, x_bound=6.0, y_bound=15.0,
    ...                         random_state=0).fit(X, Y)
    >>> est.coef_.shape
    (20, 5)
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "privacy": [StrOptions({"full", "feature", "label"})],
        "mechanism": [StrOptions({"gauss", "proj"})],
        "x_bound": [Interval(Real, 0, None, closed="neither"), None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "w_bound": [Interval(Real, 0, None, closed="neither"), None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "ridge": [Interval(Real, 0, None, closed="left"), StrOptions({"auto", "theory"})],
        "cov_budget": [Interval(Real, 0, 1, closed="neither"), StrOptions({"auto"})],
        "composition": [StrOptions({"gdp", "paper"})],
        "neighbouring": [StrOptions(set(NEIGHBOURINGS))],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, LARGEST_BOUND_SCALE, closed="right")],
        "cov_subsample": [
            Interval(Integral, 2, None, closed="left"),
            Interval(Real, 0, 1, closed="neither"),
            None,
        ],
        "covariance": [NoisyCovariance, None],
        "psd": [StrOptions({"clip", "none"})],
        "block_size": [Interval(Integral, 1, None, closed="left"), None],
        "keep_noisy_stats": ["boolean"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        privacy="full",
        mechanism="gauss",
        x_bound=None,
        y_bound=None,
        w_bound=None,
        bounds="private",
        bounds_budget=0.1,
        ridge="auto",
        cov_budget="auto",
        composition="gdp",
        neighbouring="replace-one",
        fit_intercept=True,
        intercept_scaling=1.0,
        cov_subsample=None,
        covariance=None,
        psd="clip",
        block_size=None,
        keep_noisy_stats=False,
        accountant=None,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.privacy = privacy
        self.mechanism = mechanism
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.w_bound = w_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.ridge = ridge
        self.cov_budget = cov_budget
        self.composition = composition
        self.neighbouring = neighbouring
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.cov_subsample = cov_subsample
        self.covariance = covariance
        self.psd = psd
        self.block_size = block_size
        self.keep_noisy_stats = keep_noisy_stats
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    # -- configuration checks (public facts only) ------------------------
    def _check_config(self, private, n):
        if self.mechanism == "proj" and self.privacy == "full":
            raise ConfigurationError(
                "mechanism='proj' needs a public side: use privacy='feature' or "
                "'label' (under full DP no public convex set contains X^T Y)."
            )
        if self.neighbouring == "zero-out" and self.privacy != "full":
            raise ConfigurationError(
                "neighbouring='zero-out' is supported with privacy='full' only."
            )
        if self.covariance is not None and self.privacy == "label":
            raise ConfigurationError(
                "Under label DP the covariance is exact and public: there is no "
                "released covariance to reuse."
            )
        label_magnitude(self.y_bound)  # an invalid y_bound is refused before any spend
        required = {
            "full": ("x_bound", "y_bound"),
            "feature": ("x_bound",),
            "label": ("y_bound",),
        }[self.privacy]
        missing = [
            name for name in required
            if getattr(self, name) is None
            # a reused covariance fixes the clipping bound of X
            and not (name == "x_bound" and self.covariance is not None)
        ]
        bound_eps = bound_epsilons(missing, private=private, bounds=self.bounds,
                                   bounds_budget=self.bounds_budget, epsilon=self.epsilon)
        check_bounds_feasible(n, bound_eps)
        ignored = {"feature": "y_bound", "label": "x_bound"}.get(self.privacy)
        if ignored is not None and getattr(self, ignored) is not None:
            warnings.warn(
                f"{ignored} is ignored under privacy={self.privacy!r}: that side is "
                "public and is not clipped.",
                UserWarning,
                stacklevel=3,
            )
        delta = self._resolve_delta(n, private)
        cov_rows = self._cov_rows(n)
        if cov_rows is not None:
            if self.privacy == "label" or self.covariance is not None:
                raise ConfigurationError(
                    "cov_subsample has no effect without a covariance release "
                    "(label DP or a reused covariance)."
                )
            if self.neighbouring != "replace-one":
                raise ConfigurationError(
                    "cov_subsample is calibrated for replace-one neighbouring only."
                )
            if not 2 <= cov_rows < n:
                raise ConfigurationError(
                    f"cov_subsample must give 2 <= s < n = {n}."
                )
        return delta, cov_rows, bound_eps

    def _bound_notions(self):
        """The notion of each bound estimate: the notion of the side it bounds."""
        return {
            "x_bound": "feature" if self.privacy == "feature" else "full",
            "y_bound": "label" if self.privacy == "label" else "full",
        }

    def _resolve_delta(self, n, private):
        delta = float(self.delta)
        if private and n > 1 and delta >= 1.0 / n:
            warnings.warn(
                "delta >= 1/n permits releasing a record outright; use delta << 1/n.",
                UserWarning,
                stacklevel=4,
            )
        return delta

    def _cov_rows(self, n):
        s = self.cov_subsample
        if s is None:
            return None
        if isinstance(s, Integral):
            return int(s)
        return max(2, int(math.floor(float(s) * n)))

    def _raw_x_bound(self, covariance):
        """The raw row bound behind a reused covariance's augmented one.

        Stored with the covariance; one saved without it gives the augmented
        bound ``sqrt(B^2 + c^2)``, an upper bound on ``B`` (``B`` is never
        rebuilt as ``sqrt(x_bound_eff^2 - c^2)``, which rounds to 0 when
        ``c >> B``).
        """
        raw = getattr(covariance, "x_bound", None)
        if raw is not None:
            return float(raw)
        return None if covariance.x_bound_eff is None else float(covariance.x_bound_eff)

    def _intercept(self):
        """The constant column ``c`` of the augmented design (0 without intercept)."""
        return float(self.intercept_scaling) if self.fit_intercept else 0.0

    def _x_bound_eff(self, x_bound):
        if x_bound is None:
            return None
        if self.fit_intercept:
            return hypot_at_least(x_bound, self.intercept_scaling)
        return float(x_bound)

    # -- fit ---------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit ``l`` private regressions sharing one noisy covariance.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self : object
        """
        self._reset()
        X, y = validate_features_and_labels(self, X, y)
        private = self._validate_privacy_params()
        single_output = y.ndim == 1
        Y = y[:, None] if single_output else y
        n, d = X.shape
        d_eff = d + int(self.fit_intercept)
        delta, cov_rows, bound_eps = self._check_config(private, n)
        _check_dask_feature_projection(Y, self.privacy, self.mechanism)
        if self.covariance is not None:
            self._check_covariance(self.covariance, n, d_eff)
            if self.x_bound is None and not self.covariance.x_bound_eff:
                # A covariance of a fit without a row bound (epsilon=inf): this
                # fit's rows would be clipped to norm 0.
                raise ValueError(
                    "The reused covariance carries no row bound (it was released "
                    "without one): declare x_bound."
                )

        # Declared bounds now; missing ones are released inside _release,
        # after the budget check and the spend.
        self.x_bound_ = self.x_bound
        if self.x_bound is None and self.covariance is not None:
            self.x_bound_ = self._raw_x_bound(self.covariance)
        self.y_bound_ = label_magnitude(self.y_bound)
        epsilon = float(self.epsilon) if private else math.inf
        epsilon = difference_at_most(epsilon,
                                     *(eps for eps in bound_eps.values() if math.isfinite(eps)))
        W, G_hat, release = self._release(
            X, Y, epsilon=epsilon, delta=delta,
            private=private, cov_rows=cov_rows, reused=self.covariance, seed_index=2,
            bound_eps=bound_eps, labels=y,
        )
        if self.covariance is not None and private:
            # The reused covariance was charged by the fit that released it.
            reused = [
                replace(e, name=f"{e.name}[reused]") for e in self.covariance.ledger.events
            ]
            self.privacy_spent_ = PrivacyLedger(
                [*reused, *release["ledger"].events],
                composition=release["ledger"].composition,
                delta=min(self.covariance.ledger.delta + release["ledger"].delta, 1.0),
            )
            # A covariance released with the testing facility's noise marks this fit.
            self.privacy_spent_.for_publication = (
                self.covariance.ledger.for_publication and release["ledger"].for_publication)
            self.noise_reproducible_ = not self.privacy_spent_.for_publication

        self._set_coefficients(W, single_output)
        self.n_outputs_ = Y.shape[1]
        self.ridge_ = release["ridge"]
        self.cov_budget_ = release["cov_budget"]
        self.noise_std_ = {
            "covariance": self.covariance_.sigma,
            "association": release["sigma_assoc"],
        }
        self.sensitivity_ = {
            "covariance": release["sens_cov"],
            "association": release["sens_assoc"],
        }
        self.x_bound_eff_ = (
            None if self.privacy == "label" else self._x_bound_eff(self.x_bound_)
        )
        self.proj_mu_ = release["proj_mu"]
        self.proj_active_ = release["proj_mu"] > 0
        self.association_releases_ = [self._release_summary(release, Y.shape[1])]
        if self.keep_noisy_stats:
            self.noisy_xty_ = G_hat
        return self

    def _set_coefficients(self, W, single_output):
        if self.fit_intercept:
            coef, intercept = W[:-1].T, self.intercept_scaling * W[-1]
        else:
            coef, intercept = W.T, np.zeros(W.shape[1])
        if single_output:
            self.coef_, self.intercept_ = coef[0].copy(), float(intercept[0])
        else:
            self.coef_, self.intercept_ = np.ascontiguousarray(coef), intercept.copy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        # Noise comes from fresh OS entropy whatever random_state is.
        tags.non_deterministic = not math.isinf(self.epsilon)
        return tags


