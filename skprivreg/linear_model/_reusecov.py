"""ReuseCov: private regression in many outcomes sharing one design (Neel, PRIMO).

There are ``l`` linear regressions on one design X. Sufficient-statistics
perturbation releases a noisy covariance :math:`\\tilde\\Sigma = X^\\top X/n + E_1`
and a noisy association :math:`\\tilde G = X^\\top Y/n + E_2`. The covariance
depends on X only, so one noisy copy serves all ``l`` outcomes (and later
outcomes too); only the association, whose sensitivity grows like
:math:`\\sqrt l`, pays for ``l``. Under feature or label DP the association
can further be projected onto a public convex set that contains the truth
(:mod:`._reusecov_projection`), which removes most of the growth in ``l``.

The module is organised as pure functions (statistics over row blocks, noise
planning, projection, the solve) and a thin estimator,
:class:`ReuseCovRegressor`. Normative description: ``specs/reusecov.md``.
"""

import argparse
import math
import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin

from .._blockwise import (
    _as_dask_array,
    check_block_finite,
    is_dask_collection,
    set_dask_feature_names,
    sum_over_row_blocks,
    validate_blockwise_data,
)
from .._compat import Interval, StrOptions, check_is_fitted, fit_context, validate_data
from ..accounting import PrivacyEvent, PrivacyLedger, gdp_mu
from .._random import secret_seed_sequence
from ..base import DPEstimatorMixin
from ..bounds import clip_entries, clip_rows, row_norms
from ..exceptions import ConfigurationError, PrivacyLeakWarning
from ..mechanisms import (
    add_gaussian,
    gaussian_event,
    gaussian_event_from_mu,
    primo_gaussian_event,
    subsampled_gaussian_event,
    symmetric_gaussian_matrix,
)
from ._base import LinearPredictMixin
from ._private_bounds import (
    bound_epsilons,
    check_bounds_feasible,
    count_bounds,
    label_magnitude,
    planned_bound_events,
    release_bounds,
)
from ._reusecov_projection import (
    projection_shrinkage,
    spectral_basis,
    trust_region_multiplier,
)

__all__ = [
    "ReuseCovRegressor",
    "NoisyCovariance",
    "SufficientStats",
    "block_statistics",
    "combine_statistics",
    "sufficient_statistics",
    "covariance_sensitivity",
    "association_sensitivity",
    "optimal_cov_budget",
    "theory_ridge",
    "plan_reusecov",
    "psd_factor",
    "apply_factor",
    "plan_command",
    "demo_case",
]

# Association noise is drawn in chunks of this many outcome columns, chunk j
# from its own child seed, so the noise does not depend on the block size.
NOISE_CHUNK = 512
# Failure probability of the high-probability bounds behind the ridge rule.
_RHO = 0.05
# Memory target (bytes) of one block of rows (X and Y) or of outcome columns.
_ROW_BLOCK_BYTES = 64 * 2**20
_OUTCOME_BLOCK_BYTES = 32 * 2**20
# Above this min(n, l), the public Gram matrix of Y (Proj_Y) is costly.
_PROJ_Y_WARN = 20_000

_NEIGHBOURINGS = ("replace-one", "zero-out")
# Child of the secret root seed for the bound estimates (0: covariance,
# 1: subsample, 2, 3, ...: association releases).
_BOUNDS_CHILD = 1 << 30


# ---------------------------------------------------------------------------
# Sufficient statistics over row blocks (pure; a Dask backend can map/reduce)
# ---------------------------------------------------------------------------
@dataclass
class SufficientStats:
    """Sums over rows of the clipped, augmented data (associative; see :func:`combine_statistics`).

    Attributes
    ----------
    n : int
    xtx : ndarray (p, p) or None
        :math:`\\sum_i x_i x_i^\\top` (augmented, clipped).
    xty : ndarray (p, l) or None
        :math:`\\sum_i x_i y_i^\\top`.
    x_clipped, y_clipped : bool
        Whether any row of X / entry of Y was clipped. Not private: for the
        data curator only, never stored on an estimator.
    x_max_norm, y_max_norm : float or None
        Largest row norm of a *public* side (augmented X under label DP, Y
        under feature DP); ``None`` for a private side.
    y_abs_max : float or None
        Largest ``|y_ij|`` of a public Y (feature DP), for the ridge heuristic.
    """

    n: int
    xtx: np.ndarray | None = None
    xty: np.ndarray | None = None
    x_clipped: bool = False
    y_clipped: bool = False
    x_max_norm: float | None = None
    y_max_norm: float | None = None
    y_abs_max: float | None = None


def _prepare_rows(X_b, x_bound, fit_intercept, intercept_scaling):
    """Clip rows to ``x_bound`` (if given) and append the intercept column."""
    X_b = np.asarray(X_b, dtype=np.float64)
    clipped = False
    if x_bound is not None:
        X_b, clipped = clip_rows(X_b, x_bound)
    if fit_intercept:
        X_b = np.hstack([X_b, np.full((X_b.shape[0], 1), float(intercept_scaling))])
    return X_b, clipped


def block_statistics(
    X_b,
    Y_b=None,
    *,
    x_bound=None,
    y_bound=None,
    fit_intercept=True,
    intercept_scaling=1.0,
    x_public=False,
    y_public=False,
    compute_xtx=True,
):
    """The :class:`SufficientStats` of one block of rows.

    Private sides are clipped first (rows of X to L2 norm ``x_bound``,
    entries of Y to ``[-y_bound, y_bound]``); ``None`` bounds mean no
    clipping. Public sides report their largest row norm (and a public Y its
    largest entry). NaN or infinity raises ``ValueError`` here, which on Dask
    input happens on the workers, before any noise is drawn.
    """
    # Floating-point warnings would depend on the data (an entry whose square
    # overflows); finiteness is checked explicitly instead.
    with np.errstate(all="ignore"):
        check_block_finite(X_b, "X")
        if Y_b is not None:
            check_block_finite(Y_b, "y")
        X_b, x_clipped = _prepare_rows(X_b, x_bound, fit_intercept, intercept_scaling)
        stats = SufficientStats(n=X_b.shape[0], x_clipped=x_clipped)
        if x_public:
            stats.x_max_norm = float(row_norms(X_b).max(initial=0.0))
        if compute_xtx:
            stats.xtx = X_b.T @ X_b
        if Y_b is not None:
            Y_b = np.asarray(Y_b, dtype=np.float64)
            # Two reductions first: most blocks need no clipping, and then Y_b is
            # used without a copy.
            if y_bound is not None and Y_b.size and (
                Y_b.max() > y_bound or Y_b.min() < -y_bound
            ):
                Y_b, stats.y_clipped = clip_entries(Y_b, y_bound)
            if y_public:
                stats.y_max_norm = float(row_norms(Y_b).max(initial=0.0))
                stats.y_abs_max = float(np.abs(Y_b).max(initial=0.0))
            stats.xty = X_b.T @ Y_b
    return stats


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _max(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def combine_statistics(a, b):
    """Merge the statistics of two disjoint row blocks (associative, commutative)."""
    return SufficientStats(
        n=a.n + b.n,
        xtx=_add(a.xtx, b.xtx),
        xty=_add(a.xty, b.xty),
        x_clipped=a.x_clipped or b.x_clipped,
        y_clipped=a.y_clipped or b.y_clipped,
        x_max_norm=_max(a.x_max_norm, b.x_max_norm),
        y_max_norm=_max(a.y_max_norm, b.y_max_norm),
        y_abs_max=_max(a.y_abs_max, b.y_abs_max),
    )


def sufficient_statistics(X, Y=None, *, row_block=None, **kwargs):
    """:func:`block_statistics` accumulated over blocks of rows of X, Y.

    ``row_block`` rows at a time (default: about 64 MB of X and Y per block),
    so neither a clipped copy of X nor one of Y is ever held whole; Dask
    arrays are reduced on their workers (:func:`~skprivreg._blockwise.sum_over_row_blocks`).
    """
    width = X.shape[1] + (0 if Y is None else Y.shape[1]) + 1
    step = row_block or max(1, _ROW_BLOCK_BYTES // (8 * width))
    if X.shape[0] == 0:
        return block_statistics(X, Y, **kwargs)
    return sum_over_row_blocks(
        partial(block_statistics, **kwargs), X, Y, block_rows=step, combine=combine_statistics
    )


# ---------------------------------------------------------------------------
# Sensitivities, budget split, ridge (public numbers only)
# ---------------------------------------------------------------------------
def covariance_sensitivity(x_scale, n_rows, neighbouring="replace-one"):
    """L2-sensitivity of the upper-triangle vector of :math:`X^\\top X / m`.

    ``sqrt(2) B^2 / m`` for replace-one (equality at ``x = B e_1``,
    ``x' = B e_2``), ``B^2 / m`` for zero-out, with ``B`` the row-norm
    bound of the (augmented) design and ``m`` the number of rows averaged.
    """
    factor = math.sqrt(2.0) if neighbouring == "replace-one" else 1.0
    return factor * x_scale**2 / n_rows


def association_sensitivity(x_scale, y_row_scale, n_rows, neighbouring="replace-one"):
    """Frobenius sensitivity of :math:`X^\\top Y / n`.

    ``2 B_x B_y / n`` for replace-one (equality at ``x' = -x``, ``y' = y``),
    ``B_x B_y / n`` for zero-out, where ``B_x`` bounds the row norm of the
    design and ``B_y`` the norm of an outcome row: ``sqrt(l) y_bound`` when
    Y is private, the public ``max_i ||y^i||`` under feature DP. Under label
    DP ``B_x`` is the public ``max_i ||x_i||``.
    """
    factor = 2.0 if neighbouring == "replace-one" else 1.0
    return factor * x_scale * y_row_scale / n_rows


def optimal_cov_budget(
    sens_cov, sens_assoc, w_scale, *, composition="gdp", epsilon=None, delta=None,
    sampling_ratio=None,
):
    """Share ``f`` of the budget for the covariance minimising ``sigma_1^2 w^2 + sigma_2^2``.

    This is the Theorem-1 proxy of PRIMO's excess risk. Under GDP with the
    full data, ``sigma_1 = Delta_1/(sqrt(f) mu)`` and
    ``sigma_2 = Delta_2/(sqrt(1-f) mu)`` give the closed form
    ``f* = Delta_1 w / (Delta_1 w + Delta_2)``. Otherwise (PRIMO's constant,
    or a subsampled covariance) the proxy is minimised numerically over
    ``f in [0.01, 0.99]`` with the exact calibrations. Public: depends on
    bounds, n, l and (epsilon, delta) only.
    """
    if composition == "gdp" and sampling_ratio is None:
        a = sens_cov * w_scale
        return a / (a + sens_assoc)

    def proxy(f):
        cov, assoc = _split_events(
            composition, epsilon, delta, f, sens_cov, sens_assoc, "full",
            "replace-one", sampling_ratio,
        )
        return (cov.sigma * w_scale) ** 2 + assoc.sigma**2

    res = minimize_scalar(proxy, bounds=(0.01, 0.99), method="bounded",
                          options={"xatol": 1e-6})
    return float(res.x)


def ridge_log_factor(d_eff, rho=_RHO):
    """``L_d = sqrt(d log(2 d^2 / rho))``: high-probability factor of the Theorem-1 bound."""
    return math.sqrt(d_eff * math.log(2.0 * d_eff**2 / rho))


def theory_ridge(d_eff, sigma_cov, sigma_assoc_eff, w_scale, rho=_RHO):
    """Ridge minimising PRIMO's Theorem-1 bound, on the normalised scale.

    The per-outcome excess risk is bounded by
    ``(L_d^2 / lambda) (sigma_1^2 w^2 + sigma_2^2) + lambda w^2``; its
    minimiser is

    .. math::
        \\lambda = L_d \\sqrt{\\sigma_1^2 + \\sigma_{2,\\mathrm{eff}}^2 / w^2},
        \\qquad L_d = \\sqrt{d \\log(2 d^2/\\rho)}.

    ``lambda`` multiplies the identity added to :math:`X^\\top X / n`, so it
    equals scikit-learn's ``Ridge(alpha=n * lambda)``.
    """
    if w_scale <= 0:
        return ridge_log_factor(d_eff, rho) * sigma_cov
    return ridge_log_factor(d_eff, rho) * math.sqrt(
        sigma_cov**2 + sigma_assoc_eff**2 / w_scale**2
    )


def projection_effective_sigma(sigma_assoc, radius, c_fro, d_eff, n_outputs):
    """Public a-priori per-entry error of a projected association.

    ``E||G_hat - G||_F^2 <= 2 sigma_2 R ||C||_F`` (reusecov spec §2.5), so the
    per-entry variance used by the ridge rule is
    ``min(sigma_2^2, 2 sigma_2 R ||C||_F / (d l))``.
    """
    bound = 2.0 * sigma_assoc * radius * c_fro / (d_eff * n_outputs)
    return math.sqrt(min(sigma_assoc**2, bound))


def _split_events(
    composition, epsilon, delta, f, sens_cov, sens_assoc, notion, neighbouring,
    sampling_ratio=None, assoc_name="association[0]",
):
    """Covariance and association events for a total (epsilon, delta) and share ``f``.

    ``gdp``: ``mu = gdp_mu(epsilon, delta)``; the covariance gets
    ``sqrt(f) mu`` and the association ``sqrt(1-f) mu`` (exact: the mu's
    compose as a root sum of squares). ``paper``: basic composition,
    ``(f eps, f delta)`` and ``((1-f) eps, (1-f) delta)``, each with Neel's
    Lemma-1 constant. A subsampled covariance always uses the basic split,
    with the amplified calibration. ``f = 0`` means no covariance release.
    """
    neigh = neighbouring
    if math.isinf(epsilon):
        # Non-private test mode: no noise, no guarantee (the ledger says inf).
        def noiseless(name, sens):
            return PrivacyEvent(name, math.inf, 0.0, notion=notion, neighbouring=neigh,
                                sensitivity=sens, sigma=0.0)

        cov = noiseless("covariance", sens_cov) if f > 0 else None
        return cov, noiseless(assoc_name, sens_assoc)
    eps_cov, delta_cov = f * epsilon, f * delta
    eps_assoc, delta_assoc = epsilon - eps_cov, delta - delta_cov
    if sampling_ratio is not None and f > 0:
        cov = subsampled_gaussian_event(
            "covariance[subsampled]", sens_cov, eps_cov, delta_cov, sampling_ratio,
            method="analytic" if composition == "gdp" else "primo",
            notion=notion, neighbouring=neigh,
        )
        if composition == "gdp":
            assoc = gaussian_event(assoc_name, sens_assoc, eps_assoc, delta_assoc,
                                   notion=notion, neighbouring=neigh)
        else:
            assoc = primo_gaussian_event(assoc_name, sens_assoc, eps_assoc, delta_assoc,
                                         notion=notion, neighbouring=neigh)
        return cov, assoc
    if composition == "gdp":
        mu = gdp_mu(epsilon, delta)
        cov = None
        if f > 0:
            cov = gaussian_event_from_mu("covariance", sens_cov, math.sqrt(f) * mu,
                                         delta_cov, notion=notion, neighbouring=neigh)
        assoc = gaussian_event_from_mu(assoc_name, sens_assoc, math.sqrt(1 - f) * mu,
                                       delta_assoc if f > 0 else delta, notion=notion,
                                       neighbouring=neigh)
        return cov, assoc
    cov = None
    if f > 0:
        cov = primo_gaussian_event("covariance", sens_cov, eps_cov, delta_cov,
                                   notion=notion, neighbouring=neigh)
    assoc = primo_gaussian_event(assoc_name, sens_assoc, eps_assoc, delta_assoc,
                                 notion=notion, neighbouring=neigh)
    return cov, assoc


@dataclass(frozen=True)
class ReuseCovPlan:
    """Public planning numbers of one ReuseCov fit (no data involved).

    Attributes
    ----------
    cov_budget : float
        Share ``f`` of the budget spent on the covariance (0 if none is released).
    cov_event, assoc_event : PrivacyEvent or None
        The two Gaussian releases (``cov_event`` is None under label DP or
        when a released covariance is reused).
    sigma_cov, sigma_assoc : float
        ``sigma_1`` (on ``X^T X / m``) and ``sigma_2`` (on ``X^T Y / n``).
    sens_cov, sens_assoc : float
    ridge : float
        The ridge ``lambda`` (normalised scale).
    sigma_assoc_eff : float
        Per-entry association error the ridge rule assumed.
    ledger_composition : str
    """

    cov_budget: float
    cov_event: PrivacyEvent | None
    assoc_event: PrivacyEvent
    sigma_cov: float
    sigma_assoc: float
    sens_cov: float
    sens_assoc: float
    ridge: float
    sigma_assoc_eff: float
    ledger_composition: str


def plan_reusecov(
    *,
    n,
    d_eff,
    n_outputs,
    epsilon,
    delta,
    privacy="full",
    mechanism="gauss",
    composition="gdp",
    neighbouring="replace-one",
    x_scale,
    y_row_scale,
    w_scale,
    cov_budget=0.5,
    cov_rows=None,
    reused_sigma_cov=None,
    ridge="auto",
    proj_radius=None,
    proj_c_fro=None,
):
    """Noise scales, budget split and ridge of a fit, from public numbers only.

    Parameters
    ----------
    n, d_eff, n_outputs : int
        Rows, columns of the (augmented) design, outcomes ``l``.
    epsilon, delta : float
        Total budget of this release.
    x_scale : float
        Row-norm bound of the design: the (augmented) ``x_bound`` when X is
        private, the public ``max_i ||x_i||`` under label DP.
    y_row_scale : float
        Bound on an outcome row: ``sqrt(l) y_bound`` when Y is private, the
        public ``max_i ||y^i||`` under feature DP.
    w_scale : float
        Coefficient scale for the ridge rule and the budget split.
    cov_budget : float or 'auto'
    cov_rows : int or None
        Rows of the secret covariance subsample (Algorithm 4); None = all.
    reused_sigma_cov : float or None
        ``sigma_1`` of a previously released covariance that is reused: no
        covariance release, the whole budget goes to the association.
    ridge : float or 'auto' or 'theory'
    proj_radius, proj_c_fro : float or None
        ``R`` and ``||C||_F`` of the projection (``mechanism='proj'``).

    Returns
    -------
    ReuseCovPlan
    """
    sampling_ratio = None
    if cov_rows is not None and cov_rows < n:
        sampling_ratio = cov_rows / n
    m = n if sampling_ratio is None else cov_rows
    sens_cov = covariance_sensitivity(x_scale, m, neighbouring)
    sens_assoc = association_sensitivity(x_scale, y_row_scale, n, neighbouring)
    if privacy == "label" or reused_sigma_cov is not None:
        f = 0.0
    elif cov_budget == "auto":
        f = optimal_cov_budget(
            sens_cov, sens_assoc, w_scale, composition=composition, epsilon=epsilon,
            delta=delta, sampling_ratio=sampling_ratio,
        )
    else:
        f = float(cov_budget)
    cov_event, assoc_event = _split_events(
        composition, epsilon, delta, f, sens_cov, sens_assoc, privacy, neighbouring,
        sampling_ratio,
    )
    if reused_sigma_cov is not None:
        sigma_cov = float(reused_sigma_cov)
    else:
        sigma_cov = 0.0 if cov_event is None else cov_event.sigma
    sigma_assoc = assoc_event.sigma
    sigma_eff = sigma_assoc
    if mechanism == "proj" and proj_radius is not None and sigma_assoc > 0:
        sigma_eff = projection_effective_sigma(
            sigma_assoc, proj_radius, proj_c_fro, d_eff, n_outputs
        )
    if isinstance(ridge, str):
        lam = 0.0 if math.isinf(epsilon) else theory_ridge(
            d_eff, sigma_cov, sigma_eff, w_scale
        )
    else:
        lam = float(ridge)
    ledger_composition = (
        "gdp" if composition == "gdp" and sampling_ratio is None else "basic"
    )
    return ReuseCovPlan(
        cov_budget=f,
        cov_event=cov_event,
        assoc_event=assoc_event,
        sigma_cov=sigma_cov,
        sigma_assoc=sigma_assoc,
        sens_cov=sens_cov,
        sens_assoc=sens_assoc,
        ridge=lam,
        sigma_assoc_eff=sigma_eff,
        ledger_composition=ledger_composition,
    )


# ---------------------------------------------------------------------------
# The solve: one eigendecomposition, applied to every right-hand side
# ---------------------------------------------------------------------------
def psd_factor(M, ridge, noisy, psd="clip"):
    """Eigendecomposition of ``M = Sigma_tilde + lambda I`` with PRIMO's PSD repair.

    - ``psd='clip'`` and ``lambda > 0``: eigenvalues clipped at ``lambda``,
      the Frobenius projection onto :math:`\\{M \\succeq \\lambda I\\}` (a
      convex set holding the true :math:`\\hat\\Sigma + \\lambda I`;
      post-processing; same rule as
      :func:`~skprivreg.linear_model._base.solve_psd_repaired`).
    - ``lambda = 0`` with a noisy covariance: clipped at
      ``tau = 1e-10 max(1, ||M||_2)`` with a ``UserWarning``.
    - ``lambda = 0`` with an exact covariance: pseudo-inverse (minimum-norm
      solution, ``lstsq``'s cut-off).
    - ``psd='none'``: the paper's plain solve; ``LinAlgError`` if singular.

    Returns
    -------
    eigvecs : ndarray (p, p)
    inv_eigvals : ndarray (p,)
        ``W = eigvecs @ (inv_eigvals[:, None] * (eigvecs.T @ G))``.
    """
    M = 0.5 * (M + M.T)
    eigvals, eigvecs = linalg.eigh(M)
    top = float(np.abs(eigvals).max(initial=0.0))
    if psd == "none":
        if top == 0 or np.abs(eigvals).min() <= max(M.shape) * np.finfo(float).eps * top:
            raise linalg.LinAlgError(
                "The noisy covariance plus ridge is singular (psd='none'); use "
                "psd='clip' or a positive ridge."
            )
        return eigvecs, 1.0 / eigvals
    if ridge > 0:
        return eigvecs, 1.0 / np.maximum(eigvals, ridge)
    if noisy:
        tau = 1e-10 * max(1.0, top)
        warnings.warn(
            "ridge=0 with a noisy covariance: eigenvalues are floored at 1e-10 "
            "max(1, ||M||); expect a noisy fit. Use ridge='auto'.",
            UserWarning,
            stacklevel=3,
        )
        return eigvecs, 1.0 / np.maximum(eigvals, tau)
    cutoff = max(M.shape) * np.finfo(np.float64).eps * max(float(eigvals.max()), 0.0)
    keep = eigvals > cutoff
    return eigvecs, np.where(keep, 1.0 / np.where(keep, eigvals, 1.0), 0.0)


def apply_factor(eigvecs, inv_eigvals, G):
    """``W = V diag(inv) V^T G`` for all right-hand sides (columns of G) at once."""
    return eigvecs @ (inv_eigvals[:, None] * (eigvecs.T @ G))


def _reusecov_solve(Sigma_hat, G, E1, E2, lam):
    """Coefficients from given statistics and given noise (for tests of §7.10).

    ``W = clip_lambda(Sigma_hat + E1 + lam I)^{-1} (G + E2)``.
    """
    p = Sigma_hat.shape[0]
    V, inv = psd_factor(Sigma_hat + E1 + lam * np.eye(p), lam, noisy=True)
    return apply_factor(V, inv, G + E2)


# ---------------------------------------------------------------------------
# Association releases, blockwise over outcomes
# ---------------------------------------------------------------------------
def _child_seed(seq, index):
    """The ``index``-th child of a SeedSequence, without spawning the others."""
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, int(index)))


def _noisy_block(G_block, start, sigma, seed):
    """``G_block + E2`` for outcome columns ``start:start+width`` (chunk-aligned).

    Chunk ``j`` (columns ``j*NOISE_CHUNK ...``) takes its noise from child
    ``j`` of ``seed``, so the noise is the same for every block size.
    """
    out = np.empty_like(G_block)
    width = G_block.shape[1]
    for offset in range(0, width, NOISE_CHUNK):
        chunk = (start + offset) // NOISE_CHUNK
        rng = np.random.Generator(np.random.PCG64(_child_seed(seed, chunk)))
        stop = min(offset + NOISE_CHUNK, width)
        out[:, offset:stop] = add_gaussian(G_block[:, offset:stop], sigma, rng)
    return out


def _outcome_blocks(n_outputs, d_eff, block_size):
    if block_size is None:
        block_size = max(1, _OUTCOME_BLOCK_BYTES // (8 * max(d_eff, 1)))
    chunks = max(1, math.ceil(block_size / NOISE_CHUNK))
    step = chunks * NOISE_CHUNK
    return [(a, min(a + step, n_outputs)) for a in range(0, n_outputs, step)]


@dataclass
class _Projection:
    """Public description of the feasible set of a projection mechanism."""

    side: str  # 'X' (label DP, K_X) or 'Y' (feature DP, K_Y)
    kappa: np.ndarray
    radius: float
    V: np.ndarray | None = None  # X: (d, r); Y: (l, r) when l <= n
    U: np.ndarray | None = None  # Y with l > n: left singular vectors (n, r)
    s: np.ndarray | None = None
    Y: np.ndarray | None = field(default=None, repr=False)  # public Y (l > n)

    def right_block(self, start, stop):
        """Rows ``start:stop`` of the right singular vectors of Y (``K_Y``)."""
        if self.V is not None:
            return self.V[start:stop]
        Y_b = np.asarray(self.Y[:, start:stop], dtype=np.float64)
        return (Y_b.T @ self.U) / self.s


def _label_projection(xtx, n, n_outputs, y_bound):
    V, s = spectral_basis(xtx, n, xtx.shape[0])
    return _Projection("X", s / n, math.sqrt(n * n_outputs) * y_bound, V=V)


def _both_dask(X, Y):
    """Wrap a NumPy side as a Dask array aligned with the other side's row chunks."""
    import dask.array as da

    X, Y = _as_dask_array(X), _as_dask_array(Y)
    if not is_dask_collection(X):
        X = da.from_array(np.asarray(X, dtype=np.float64), chunks=(Y.chunks[0], -1))
    if not is_dask_collection(Y):
        Y = np.asarray(Y, dtype=np.float64)
        Y = da.from_array(Y, chunks=(X.chunks[0],) + ((-1,) if Y.ndim == 2 else ()))
    return X, Y


def _outcome_gram_block(Y_b, _unused):
    Y_b = np.asarray(Y_b, dtype=np.float64)
    return (Y_b.T @ Y_b,)


def _check_dask_feature_projection(Y, privacy, mechanism):
    """GaussProj_Y with ``l > n`` keeps the public Y in memory: NumPy input only.

    Public facts only (shapes), checked before any budget is spent.
    """
    if (
        is_dask_collection(Y)
        and privacy == "feature"
        and mechanism == "proj"
        and Y.shape[1] > Y.shape[0]
    ):
        raise ConfigurationError(
            "mechanism='proj' under feature DP with more outcomes than rows (l > n) "
            "projects with the n x n Gram matrix of Y and keeps Y in memory; it is "
            "not supported for Dask input. Pass NumPy arrays, or use l <= n."
        )


def _feature_projection(Y, n, x_bound_eff):
    """``K_Y`` from the public Y, through its smaller Gram matrix.

    For ``l <= n`` only :math:`Y^\top Y` is needed (a row-block reduction,
    also on Dask); for ``l > n`` the projection keeps Y (NumPy input only).
    """
    n_rows, n_outputs = Y.shape
    radius = math.sqrt(n) * x_bound_eff
    if min(n_rows, n_outputs) > _PROJ_Y_WARN:
        warnings.warn(
            "mechanism='proj' under feature DP computes the Gram matrix of Y, "
            f"O(n l min(n, l)) with min(n, l) > {_PROJ_Y_WARN}: this is slow.",
            UserWarning,
            stacklevel=4,
        )
    if n_outputs <= n_rows:
        step = max(1, _ROW_BLOCK_BYTES // (8 * n_outputs))
        if is_dask_collection(Y):
            # Y^T Y (l x l) is a sum over rows: one task per row block on the
            # workers, tree-summed; Y itself never reaches the driver.
            (gram,) = sum_over_row_blocks(_outcome_gram_block, Y)
        else:
            gram = np.zeros((n_outputs, n_outputs))
            for a in range(0, n_rows, step):
                Y_b = np.asarray(Y[a:a + step], dtype=np.float64)
                gram += Y_b.T @ Y_b
        V, s = spectral_basis(gram, n, n_rows)
        return _Projection("Y", s / n, radius, V=V, s=s), float(np.sqrt(np.trace(gram)))
    gram = np.zeros((n_rows, n_rows))
    step = max(1, _ROW_BLOCK_BYTES // (8 * n_rows))
    for a in range(0, n_outputs, step):
        Y_b = np.asarray(Y[:, a:a + step], dtype=np.float64)
        gram += Y_b @ Y_b.T
    U, s = spectral_basis(gram, n, n_outputs)
    return (
        _Projection("Y", s / n, radius, U=U, s=s, Y=Y),
        float(np.sqrt(np.trace(gram))),
    )


def release_associations(
    G, sigma, seed, eigvecs, inv_eigvals, *, projection=None, block_size=None,
    keep=False,
):
    """Noisy (and optionally projected) associations and their coefficients.

    Parameters
    ----------
    G : ndarray of shape (p, l)
        Exact :math:`X^\\top Y / n` (secret).
    sigma : float
        ``sigma_2``.
    seed : numpy.random.SeedSequence
        Secret seed of this association release.
    eigvecs, inv_eigvals : ndarray
        The factor from :func:`psd_factor`.
    projection : _Projection or None
        None for ReuseCovGauss; else GaussProj_X or GaussProj_Y.
    block_size : int or None
        Outcome columns per block (rounded up to a multiple of
        ``NOISE_CHUNK``); the result does not depend on it.
    keep : bool
        Also return the released association (``G_hat``).

    Returns
    -------
    W : ndarray of shape (p, l)
    G_hat : ndarray of shape (p, l) or None
    mu : float
        Projection multiplier (0 for Gauss or an inactive projection).
    """
    p, n_outputs = G.shape
    blocks = _outcome_blocks(n_outputs, p, block_size)
    W = np.empty((p, n_outputs))
    G_hat = np.empty((p, n_outputs)) if keep else None

    def finish(a, b, released):
        W[:, a:b] = apply_factor(eigvecs, inv_eigvals, released)
        if keep:
            G_hat[:, a:b] = released

    if projection is None:
        for a, b in blocks:
            finish(a, b, _noisy_block(G[:, a:b], a, sigma, seed))
        return W, G_hat, 0.0

    if projection.side == "X":
        V = projection.V
        # Pass 1: coordinates V^T G_tilde of every column (mu couples them all),
        # kept in the coefficient buffer.
        coords = W[: V.shape[1]]
        for a, b in blocks:
            coords[:, a:b] = V.T @ _noisy_block(G[:, a:b], a, sigma, seed)
        beta = np.einsum("ij,ij->i", coords, coords)
        mu = trust_region_multiplier(projection.kappa, beta, projection.radius)
        shrink = projection_shrinkage(projection.kappa, mu)[:, None]
        coords = coords.copy()
        for a, b in blocks:
            finish(a, b, V @ (shrink * coords[:, a:b]))
        return W, G_hat, mu

    # K_Y: G_hat lies in the span of V^T, so pass 1 only needs B = G_tilde V.
    r = projection.kappa.shape[0]
    B = np.zeros((p, r))
    for a, b in blocks:
        B += _noisy_block(G[:, a:b], a, sigma, seed) @ projection.right_block(a, b)
    beta = np.einsum("ij,ij->j", B, B)
    mu = trust_region_multiplier(projection.kappa, beta, projection.radius)
    B = B * projection_shrinkage(projection.kappa, mu)
    for a, b in blocks:
        finish(a, b, B @ projection.right_block(a, b).T)
    return W, G_hat, mu


# ---------------------------------------------------------------------------
# Released covariance, reusable across fits
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NoisyCovariance:
    """A released covariance :math:`\\tilde\\Sigma = X^\\top X/m + E_1` (ridge not included).

    It is an (epsilon, delta)-DP release about X (see ``ledger``) and can be
    reused by later fits on the same rows (``ReuseCovRegressor(covariance=...)``
    or ``add_outcomes``) for free: only new association releases cost budget.

    Attributes
    ----------
    matrix : ndarray of shape (d_eff, d_eff)
    n : int
    d_eff : int
        Columns including the intercept column.
    x_bound_eff : float
        Row-norm bound of the augmented design used for the sensitivity.
    fit_intercept : bool
    intercept_scaling : float
    privacy : {'full', 'feature', 'label'}
    neighbouring : {'replace-one', 'zero-out'}
    sigma : float
        ``sigma_1`` (0 for the exact covariance of label DP).
    ledger : PrivacyLedger
        The covariance release (empty under label DP).
    """

    matrix: np.ndarray
    n: int
    d_eff: int
    x_bound_eff: float | None
    fit_intercept: bool
    intercept_scaling: float
    privacy: str
    neighbouring: str
    sigma: float
    ledger: PrivacyLedger


def _plan_ledger(plan, delta, private, association_name=None, bound_events=()):
    """The ledger of a plan's releases (empty totals in the non-private mode).

    ``bound_events`` (pure DP, the private bound estimates of the fit) come first.
    """
    assoc = plan.assoc_event
    if association_name is not None and assoc is not None:
        assoc = replace(assoc, name=association_name)
    events = [*bound_events, *(e for e in (plan.cov_event, assoc) if e is not None)]
    if not private:
        return PrivacyLedger(events, composition="basic", delta=0.0)
    return PrivacyLedger(events, composition=plan.ledger_composition, delta=delta)


# ---------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------
class ReuseCovRegressor(
    DPEstimatorMixin, LinearPredictMixin, MultiOutputMixin, RegressorMixin, BaseEstimator
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

    The fit is ``(epsilon, delta)``-DP for the chosen relation.

    **Sensitivities** (replace-one; ``B`` the row bound of the augmented
    design, ``sqrt(x_bound^2 + intercept_scaling^2)`` with an intercept):
    ``sqrt(2) B^2 / n`` for the upper triangle of :math:`X^\\top X/n`;
    ``2 B sqrt(l) y_bound / n`` for :math:`X^\\top Y/n` (full);
    ``2 B max_i||y^i|| / n`` (feature); ``2 max_i||x_i|| sqrt(l) y_bound / n``
    (label). Add-remove halves the constants (``B^2/n``, ``B sqrt(l) y_bound/n``).

    **Budget split.** ``composition='gdp'`` (default): ``mu = mu(epsilon,
    delta)`` (exact GDP conversion), the covariance gets ``sqrt(f) mu`` and
    the association ``sqrt(1-f) mu`` with ``f = cov_budget`` (``'auto'``:
    ``f = Delta_1 w / (Delta_1 w + Delta_2)``, minimising ``sigma_1^2 w^2 +
    sigma_2^2``). ``composition='paper'``: basic composition, ``(f eps, f
    delta)`` and ``((1-f) eps, (1-f) delta)`` with Neel's Lemma-1 constant
    ``sigma = c(eps, delta) Delta``. Under label DP, and when a released
    covariance is reused, the association gets the whole budget. With
    ``cov_subsample`` the covariance is computed on a secret uniform
    subsample of ``s`` rows, its sensitivity is ``sqrt(2) B^2 / s`` and its
    budget the amplified ``(log(1 + (n/s)(e^{f eps} - 1)), (n/s) f delta)``
    (Balle et al. 2018); the split is then basic composition.

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
    event of the fit's neighbouring relation and of the notion of the side
    it bounds (a label bound is a label-DP event, a row bound under feature
    DP a feature-DP event), recorded in ``privacy_spent_`` and on the
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
    stored or returned). All noise is drawn once, on the driver, from the
    same seeds as for NumPy input, so a Dask fit equals the NumPy fit for
    the same ``random_state`` up to float64 round-off of the block sums.
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
    y_bound : float, (low, high) or None, default=None
        Declared label range (private Y only): a float ``B`` (labels in
        ``[-B, B]``) or a pair ``(low, high)``; entries are clipped to
        ``[-B, B]`` with ``B = max(|low|, |high|)`` (not re-centred).
    bounds : {'private', 'data'}, default='private'
        How a missing required bound is obtained (see **Missing bounds**).
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on missing bounds.
    w_bound : float or None, default=None
        Scale of a coefficient vector's norm; used only by ``ridge='auto'``
        and ``cov_budget='auto'`` (never for privacy). ``None`` uses
        ``y_scale / x_scale``.
    ridge : float >= 0, 'auto' or 'theory', default='auto'
        ``lambda`` on the normalised scale (``Ridge(alpha=n lambda)``).
        ``'auto'``/``'theory'``: ``L_d sqrt(sigma_1^2 + sigma_2,eff^2/w^2)``
        with ``L_d = sqrt(d log(2 d^2/0.05))``; public, costs nothing; 0 in the
        non-private mode. ``'theory'`` requires ``w_bound``.
    cov_budget : float in (0, 1) or 'auto', default=0.5
    composition : {'gdp', 'paper'}, default='gdp'
    neighbouring : {'replace-one', 'zero-out'}, default='replace-one'
    fit_intercept : bool, default=True
        By augmentation with a constant column ``intercept_scaling`` (never by
        centering with data means); the intercept is ridge-penalised.
    intercept_scaling : float > 0, default=1.0
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
        A fixed seed reproduces the noise: never publish one used on private data.

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

    Notes
    -----
    Floating-point Gaussian sampling is not hardened against precision
    attacks (Mironov 2012). ``score`` on private data is itself not private.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.linear_model._reusecov import ReuseCovRegressor
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
        "neighbouring": [StrOptions(set(_NEIGHBOURINGS))],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, None, closed="neither")],
        "cov_subsample": [
            Interval(Integral, 2, None, closed="left"),
            Interval(Real, 0, 1, closed="neither"),
            None,
        ],
        "covariance": [NoisyCovariance, None],
        "psd": [StrOptions({"clip", "none"})],
        "block_size": [Interval(Integral, 1, None, closed="left"), None],
        "keep_noisy_stats": ["boolean"],
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
        cov_budget=0.5,
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
        if self.ridge == "theory" and self.w_bound is None:
            raise ConfigurationError("ridge='theory' needs w_bound.")
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

    def _raw_x_bound(self, x_bound_eff):
        """The raw row bound behind an augmented one (a reused covariance's)."""
        if x_bound_eff is None:
            return None
        if self.fit_intercept:
            return math.sqrt(max(x_bound_eff**2 - self.intercept_scaling**2, 0.0))
        return float(x_bound_eff)

    def _x_bound_eff(self, x_bound):
        if x_bound is None:
            return None
        if self.fit_intercept:
            return math.hypot(x_bound, self.intercept_scaling)
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
        if is_dask_collection(X) or is_dask_collection(y):
            X, y = _both_dask(*validate_blockwise_data(self, X, y))
        else:
            X, y = validate_data(
                self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                y_numeric=True,
            )
        private = self._validate_privacy_params()
        single_output = y.ndim == 1
        Y = y[:, None] if single_output else y
        n, d = X.shape
        d_eff = d + int(self.fit_intercept)
        delta, cov_rows, bound_eps = self._check_config(private, n)
        _check_dask_feature_projection(Y, self.privacy, self.mechanism)
        if self.covariance is not None:
            self._check_covariance(self.covariance, n, d_eff)
            if private and isinstance(self.random_state, Integral):
                warnings.warn(
                    "A fixed integer random_state with a reused covariance: if the "
                    "covariance's own fit used the same seed, the association noise "
                    "repeats and the difference of the two releases is not private. "
                    "Use random_state=None for releases.",
                    PrivacyLeakWarning,
                    stacklevel=3,
                )

        # Declared bounds now; missing ones are released inside _release,
        # after the budget check and the spend.
        self.x_bound_ = self.x_bound
        if self.x_bound is None and self.covariance is not None:
            self.x_bound_ = self._raw_x_bound(self.covariance.x_bound_eff)
        self.y_bound_ = label_magnitude(self.y_bound)
        epsilon = float(self.epsilon) if private else math.inf
        epsilon -= sum(eps for eps in bound_eps.values() if math.isfinite(eps))
        W, G_hat, release = self._release(
            X, Y, epsilon=epsilon, delta=delta,
            private=private, cov_rows=cov_rows, reused=self.covariance, seed_index=2,
            bound_eps=bound_eps,
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

    @staticmethod
    def _release_summary(release, n_outputs):
        return {
            "n_outputs": n_outputs,
            "ridge": release["ridge"],
            "sigma": release["sigma_assoc"],
            "sensitivity": release["sens_assoc"],
            "proj_mu": release["proj_mu"],
        }

    def _scales(self, n_outputs, x_max, y_max, y_abs=None):
        """(x_scale, y_row_scale, w_scale) for sensitivities and heuristics."""
        if self.privacy == "label":
            x_scale = x_max
        else:
            x_scale = self._x_bound_eff(self.x_bound_)
        if self.privacy == "feature":
            y_row = y_max
            y_entry = y_abs
        else:
            y_row = None if self.y_bound_ is None else math.sqrt(n_outputs) * self.y_bound_
            y_entry = self.y_bound_
        if self.w_bound is not None:
            w_scale = float(self.w_bound)
        elif x_scale and y_entry:
            w_scale = y_entry / x_scale
        else:
            w_scale = 1.0
        return (x_scale or 0.0), (y_row or 0.0), w_scale

    def _release(self, X, Y, *, epsilon, delta, private, cov_rows, reused, seed_index,
                 association_name=None, bound_eps=None):
        """The missing bounds, one covariance (unless exact or reused) and one association.

        ``bound_eps`` (from :func:`bound_epsilons`) names the bounds to
        estimate; they are released after the spend and stored in
        ``x_bound_`` / ``y_bound_``. Returns ``(W, G_hat, info)``;
        ``info['ledger']`` holds the new releases only. Sets ``covariance_``.
        """
        n, d = X.shape
        n_outputs = Y.shape[1]
        d_eff = d + int(self.fit_intercept)
        bound_eps = bound_eps or {}
        notions = self._bound_notions()
        bound_events = planned_bound_events(bound_eps, notions=notions,
                                            neighbouring=self.neighbouring)
        exact_cov = self.privacy == "label"
        plan_args = dict(
            n=n, d_eff=d_eff, n_outputs=n_outputs, epsilon=epsilon, delta=delta,
            privacy=self.privacy, mechanism=self.mechanism,
            composition=self.composition, neighbouring=self.neighbouring,
            x_scale=1.0, y_row_scale=1.0, w_scale=1.0,
            cov_budget=self.cov_budget, cov_rows=cov_rows,
            reused_sigma_cov=None if reused is None else reused.sigma, ridge=self.ridge,
        )
        # Budget check before any data value is read: the planned (epsilon,
        # delta) does not depend on the public scales, which the pass measures.
        planned = _plan_ledger(plan_reusecov(**plan_args), delta, private, association_name,
                               bound_events)
        self._check_budget(planned)
        if bound_eps:
            # A counting pass (releases nothing, refuses NaN), the spend, then
            # the private bounds: the clipping of the statistics pass needs them.
            counts = count_bounds(X, Y)
            self._spend(planned)
            seq = secret_seed_sequence(self.random_state)
            rng_bounds = np.random.Generator(np.random.PCG64(_child_seed(seq, _BOUNDS_CHILD)))
            estimated, bound_events = release_bounds(
                counts, bound_eps, rng_bounds, n_samples=n, notions=notions,
                neighbouring=self.neighbouring,
            )
            self.x_bound_ = estimated.get("x_bound", self.x_bound_)
            self.y_bound_ = estimated.get("y_bound", self.y_bound_)
        x_bound = None if self.privacy == "label" else self.x_bound_
        y_bound = None if self.privacy == "feature" else self.y_bound_
        common = dict(
            x_bound=x_bound, fit_intercept=self.fit_intercept,
            intercept_scaling=self.intercept_scaling,
        )
        # One pass over the rows (one task per block on Dask): the statistics
        # and the public sides' norms; it releases nothing and refuses NaN.
        stats = sufficient_statistics(
            X, Y, y_bound=y_bound, x_public=self.privacy == "label",
            y_public=self.privacy == "feature",
            compute_xtx=exact_cov or (reused is None and cov_rows is None), **common,
        )
        if not bound_eps:
            # The spend, before any secret draw.
            self._spend(planned)
            seq = secret_seed_sequence(self.random_state)
        x_scale, y_row, w_scale = self._scales(
            n_outputs, stats.x_max_norm, stats.y_max_norm, stats.y_abs_max
        )
        plan_args.update(x_scale=x_scale, y_row_scale=y_row, w_scale=w_scale)

        if cov_rows is not None:
            # A secret subsample from its own seed, drawn on the driver; the
            # indices are never stored. On Dask, X[rows] is a lazy row
            # selection: the indices travel inside the task graph to the
            # workers (the data owner's trusted cluster) and are dropped with it.
            rng_sub = np.random.Generator(np.random.PCG64(_child_seed(seq, 1)))
            rows = np.sort(rng_sub.choice(n, size=cov_rows, replace=False))
            sub = sufficient_statistics(X[rows], None, **common)
            del rows

        proj = None
        if self.mechanism == "proj":
            if self.privacy == "label":
                proj = _label_projection(stats.xtx, n, n_outputs, self.y_bound_ or 0.0)
                c_fro = math.sqrt(n_outputs * max(np.trace(stats.xtx), 0.0)) / n
            else:
                proj, y_fro = _feature_projection(Y, n, x_scale)
                c_fro = math.sqrt(d_eff) * y_fro / n
            plan_args.update(proj_radius=proj.radius, proj_c_fro=c_fro)
        plan = plan_reusecov(**plan_args)
        self._settle(_plan_ledger(plan, delta, private, association_name, bound_events))

        if exact_cov:
            self.covariance_ = NoisyCovariance(
                stats.xtx / n, n, d_eff, None, self.fit_intercept,
                self.intercept_scaling, self.privacy, self.neighbouring, 0.0,
                PrivacyLedger([], composition="basic", delta=0.0),
            )
        elif reused is not None:
            self.covariance_ = reused
        else:
            xtx, rows_used = (stats.xtx, n) if cov_rows is None else (sub.xtx, cov_rows)
            rng_cov = np.random.Generator(np.random.PCG64(_child_seed(seq, 0)))
            matrix = xtx / rows_used + symmetric_gaussian_matrix(
                d_eff, plan.sigma_cov, rng_cov
            )
            cov_events = [] if plan.cov_event is None else [plan.cov_event]
            self.covariance_ = NoisyCovariance(
                matrix, n, d_eff, x_scale, self.fit_intercept, self.intercept_scaling,
                self.privacy, self.neighbouring, plan.sigma_cov,
                PrivacyLedger(cov_events, composition="basic",
                              delta=sum(e.delta for e in cov_events)),
            )
        M = self.covariance_.matrix + plan.ridge * np.eye(d_eff)
        eigvecs, inv = psd_factor(M, plan.ridge, self.covariance_.sigma > 0, self.psd)
        W, G_hat, mu = release_associations(
            stats.xty / n, plan.sigma_assoc, _child_seed(seq, seed_index), eigvecs, inv,
            projection=proj, block_size=self.block_size, keep=self.keep_noisy_stats,
        )
        info = {
            "ledger": self.privacy_spent_,
            "ridge": plan.ridge,
            "cov_budget": plan.cov_budget,
            "sigma_assoc": plan.sigma_assoc,
            "sens_cov": None if plan.cov_event is None else plan.sens_cov,
            "sens_assoc": plan.sens_assoc,
            "proj_mu": float(mu),
        }
        return W, G_hat, info

    def _set_coefficients(self, W, single_output):
        if self.fit_intercept:
            coef, intercept = W[:-1].T, self.intercept_scaling * W[-1]
        else:
            coef, intercept = W.T, np.zeros(W.shape[1])
        if single_output:
            self.coef_, self.intercept_ = coef[0].copy(), float(intercept[0])
        else:
            self.coef_, self.intercept_ = np.ascontiguousarray(coef), intercept.copy()

    def _check_covariance(self, cov, n, d_eff):
        expected = (
            ("n", n),
            ("d_eff", d_eff),
            ("fit_intercept", self.fit_intercept),
            ("privacy", self.privacy),
            ("neighbouring", self.neighbouring),
        )
        for name, value in expected:
            if getattr(cov, name) != value:
                raise ValueError(
                    f"The reused covariance has {name}={getattr(cov, name)!r} but this "
                    f"fit has {name}={value!r}."
                )
        if self.fit_intercept and not math.isclose(
            cov.intercept_scaling, self.intercept_scaling, rel_tol=1e-12
        ):
            raise ValueError("The reused covariance has another intercept_scaling.")
        mine = self._x_bound_eff(self.x_bound)
        if mine is not None and (
            cov.x_bound_eff is None or not math.isclose(cov.x_bound_eff, mine, rel_tol=1e-12)
        ):
            raise ValueError(
                "The reused covariance was released with another x_bound: clipping "
                "would differ between the releases."
            )

    # -- reuse across time ---------------------------------------------------
    def export_covariance(self):
        """The released covariance, for reuse by later fits on the same rows.

        Returns
        -------
        NoisyCovariance
        """
        check_is_fitted(self)
        return self.covariance_

    def add_outcomes(self, X, Y_new, *, epsilon, delta):
        """Release coefficients for new outcomes with the stored covariance.

        Spends a fresh ``(epsilon, delta)`` entirely on the association of
        ``Y_new`` (same privacy notion, mechanism, bounds and ridge rule) and
        charges it to the accountant; the covariance is reused for free.
        ``privacy_spent_`` becomes the composition of every release so far
        (the covariance counted once). ``X`` must be the rows of ``fit`` in the
        same order: only n and d can be checked (a hash of X would not be
        private).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        Y_new : array-like of shape (n_samples,) or (n_samples, l_new)
        epsilon : float > 0
        delta : float in (0, 1)

        Returns
        -------
        coef_new : ndarray of shape (l_new, n_features)
        """
        check_is_fitted(self)
        if not epsilon > 0:
            raise ValueError("epsilon must be > 0.")
        if not 0 < delta < 1:
            raise ValueError("delta must lie in (0, 1).")
        if is_dask_collection(X) or is_dask_collection(Y_new):
            X, Y_new = self._validate_dask_outcomes(X, Y_new)
        else:
            X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
            Y_new = np.asarray(Y_new, dtype=np.float64)
            if Y_new.ndim == 1:
                Y_new = Y_new[:, None]
            if Y_new.ndim != 2 or Y_new.shape[0] != X.shape[0]:
                raise ValueError("Y_new must have shape (n_samples, l_new).")
            if not np.all(np.isfinite(Y_new)):
                raise ValueError("Y_new contains NaN or infinity.")
        _check_dask_feature_projection(Y_new, self.privacy, self.mechanism)
        n = X.shape[0]
        if n != self.covariance_.n:
            raise ValueError(
                f"add_outcomes needs the rows of fit: n={self.covariance_.n}, got {n}."
            )
        private = not math.isinf(epsilon)
        if not private:
            warnings.warn(
                "add_outcomes(epsilon=inf) adds no noise: the new coefficients are "
                "not differentially private.",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        if self.mechanism == "proj" and Y_new.shape[1] < 100:
            warnings.warn(
                "mechanism='proj' gains with the batch size l; batches of fewer than "
                "100 outcomes lose most of the projection's advantage.",
                UserWarning,
                stacklevel=2,
            )
        reused = None if self.privacy == "label" else self.covariance_
        if reused is not None:
            self._check_covariance(reused, n, reused.d_eff)
        index = len(self.association_releases_)
        old = self.privacy_spent_
        # _release spends the new association on the accountant before reading Y_new.
        W, G_hat, release = self._release(
            X, Y_new, epsilon=float(epsilon), delta=float(delta), private=private,
            cov_rows=None, reused=reused, seed_index=2 + index,
            association_name=f"association[{index}]",
        )
        new = release["ledger"]
        self.privacy_spent_ = PrivacyLedger(
            [*old.events, *new.events],
            composition=old.composition if old.composition == new.composition else "basic",
            delta=min(old.delta + new.delta, 1.0),
        )
        if self.fit_intercept:
            coef_new, intercept_new = W[:-1].T, self.intercept_scaling * W[-1]
        else:
            coef_new, intercept_new = W.T, np.zeros(W.shape[1])
        self.coef_ = np.vstack([np.atleast_2d(self.coef_), coef_new])
        self.intercept_ = np.concatenate([np.atleast_1d(self.intercept_), intercept_new])
        self.n_outputs_ = self.coef_.shape[0]
        self.association_releases_.append(self._release_summary(release, W.shape[1]))
        if self.keep_noisy_stats:
            self.noisy_xty_ = np.hstack([self.noisy_xty_, G_hat])
        return np.ascontiguousarray(coef_new)

    def _validate_dask_outcomes(self, X, Y_new):
        """Shape, dtype and feature-name checks of Dask input, without computing it.

        Finiteness is checked on the workers by the statistics pass, before
        any noise is drawn or budget spent.
        """
        with warnings.catch_warnings():
            if hasattr(X, "columns"):
                # sklearn does not read a Dask frame's names; they are checked
                # by set_dask_feature_names instead.
                warnings.filterwarnings("ignore", message="X does not have valid feature")
            validate_data(self, X, skip_check_array=True, reset=False)
        set_dask_feature_names(self, X, reset=False)
        X, Y_new = _both_dask(X, Y_new)
        if Y_new.ndim == 1:
            Y_new = Y_new[:, None]
        if X.ndim != 2 or Y_new.ndim != 2 or Y_new.shape[0] != X.shape[0]:
            raise ValueError("Y_new must have shape (n_samples, l_new).")
        if any(math.isnan(v.shape[0]) for v in (X, Y_new)):
            raise ValueError(
                "Dask input needs known chunk sizes: call .compute_chunk_sizes() first."
            )
        for name, value in (("X", X), ("Y_new", Y_new)):
            if not np.issubdtype(value.dtype, np.number):
                raise ValueError(f"{name} must be numeric, got dtype {value.dtype}.")
        return X.astype(np.float64), Y_new.astype(np.float64)

    def public_view(self):
        """The DP outputs of the fit (safe to publish together)."""
        check_is_fitted(self)
        return {
            "coef_": self.coef_,
            "intercept_": self.intercept_,
            "covariance_": self.covariance_,
            "ridge_": self.ridge_,
            "cov_budget_": self.cov_budget_,
            "noise_std_": dict(self.noise_std_),
            "sensitivity_": dict(self.sensitivity_),
            "proj_mu_": self.proj_mu_,
            "privacy_spent_": self.privacy_spent_,
        }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        tags.non_deterministic = self.random_state is None and not math.isinf(
            self.epsilon
        )
        return tags


# ---------------------------------------------------------------------------
# Planning CLI and demo
# ---------------------------------------------------------------------------
def _positive_or_none(text):
    return None if text in (None, "none", "None") else float(text)


def plan_command(argv):
    """``python -m skprivreg plan reusecov ...``: public planning numbers, no data.

    Prints ``sigma_1`` (covariance), ``sigma_2`` (association), the budget
    split, the ridge, the sensitivities and the outcome count ``l_0`` where
    the association noise overtakes the covariance noise.
    """
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg plan reusecov",
        description="Noise scales, budget split and ridge of ReuseCovRegressor "
        "from public numbers only (no data is read).",
    )
    parser.add_argument("--n", type=int, required=True, help="number of rows")
    parser.add_argument("--d", type=int, required=True, help="number of features")
    parser.add_argument("--l", type=int, default=1, help="number of outcomes")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=None, help="default 1/n^2")
    parser.add_argument("--privacy", choices=["full", "feature", "label"], default="full")
    parser.add_argument("--mechanism", choices=["gauss", "proj"], default="gauss")
    parser.add_argument("--composition", choices=["gdp", "paper"], default="gdp")
    parser.add_argument(
        "--neighbouring", choices=list(_NEIGHBOURINGS), default="replace-one"
    )
    parser.add_argument("--x-bound", type=float, default=None,
                        help="row-norm bound of X (full/feature)")
    parser.add_argument("--y-bound", type=float, default=None,
                        help="entry bound of Y (full/label)")
    parser.add_argument("--x-max-norm", type=float, default=None,
                        help="public max row norm of the augmented X (label)")
    parser.add_argument("--y-max-norm", type=float, default=None,
                        help="public max row norm of Y (feature)")
    parser.add_argument("--w-bound", type=float, default=None)
    parser.add_argument("--cov-budget", default="0.5", help="float in (0,1) or 'auto'")
    parser.add_argument("--ridge", default="auto", help="float >= 0 or 'auto'")
    parser.add_argument("--cov-subsample", type=int, default=None)
    parser.add_argument("--no-intercept", action="store_true")
    parser.add_argument("--intercept-scaling", type=float, default=1.0)
    args = parser.parse_args(argv)

    if args.mechanism == "proj" and args.privacy == "full":
        parser.error("mechanism='proj' needs privacy 'feature' or 'label'.")
    if args.neighbouring == "zero-out" and args.privacy != "full":
        parser.error("zero-out neighbouring is supported with privacy='full' only.")
    fit_intercept = not args.no_intercept
    d_eff = args.d + int(fit_intercept)
    delta = args.delta if args.delta is not None else 1.0 / args.n**2

    def augmented(bound):
        return math.hypot(bound, args.intercept_scaling) if fit_intercept else bound

    if args.privacy == "label":
        if args.y_bound is None:
            parser.error("privacy='label' needs --y-bound.")
        if args.x_max_norm is None:
            parser.error("privacy='label' needs --x-max-norm (public X).")
        x_scale = args.x_max_norm
    else:
        if args.x_bound is None:
            parser.error(f"privacy={args.privacy!r} needs --x-bound.")
        x_scale = augmented(args.x_bound)
    if args.privacy == "feature":
        if args.y_max_norm is None:
            parser.error("privacy='feature' needs --y-max-norm (public Y).")
        y_row, y_entry = args.y_max_norm, args.y_max_norm
    else:
        if args.y_bound is None:
            parser.error(f"privacy={args.privacy!r} needs --y-bound.")
        y_row, y_entry = math.sqrt(args.l) * args.y_bound, args.y_bound
    w_scale = args.w_bound if args.w_bound is not None else y_entry / x_scale
    cov_budget = "auto" if args.cov_budget == "auto" else float(args.cov_budget)
    ridge = "auto" if args.ridge == "auto" else float(args.ridge)
    proj_radius = proj_c_fro = None
    if args.mechanism == "proj":
        # A-priori bounds: ||X||_F <= sqrt(n) x_scale, ||Y||_F <= sqrt(n) y_row.
        if args.privacy == "label":
            proj_radius = math.sqrt(args.n * args.l) * args.y_bound
            proj_c_fro = math.sqrt(args.l) * math.sqrt(args.n) * x_scale / args.n
        else:
            proj_radius = math.sqrt(args.n) * x_scale
            proj_c_fro = math.sqrt(d_eff) * math.sqrt(args.n) * y_row / args.n
    plan = plan_reusecov(
        n=args.n, d_eff=d_eff, n_outputs=args.l, epsilon=args.epsilon, delta=delta,
        privacy=args.privacy, mechanism=args.mechanism, composition=args.composition,
        neighbouring=args.neighbouring, x_scale=x_scale, y_row_scale=y_row,
        w_scale=w_scale, cov_budget=cov_budget, cov_rows=args.cov_subsample,
        ridge=ridge, proj_radius=proj_radius, proj_c_fro=proj_c_fro,
    )
    ledger = _plan_ledger(plan, delta, True)
    # l_0: outcomes at which sigma_2^2 reaches sigma_1^2 w^2 (sigma_2^2 is linear in l
    # when Y is private).
    l_zero = None
    if args.privacy == "full" and plan.sigma_assoc > 0:
        per_outcome = plan.sigma_assoc**2 / args.l
        l_zero = (plan.sigma_cov * w_scale) ** 2 / per_outcome
    rows = [
        ("n, d_eff, l", f"{args.n}, {d_eff}, {args.l}"),
        ("privacy / neighbouring", f"{args.privacy} / {args.neighbouring}"),
        ("mechanism / composition", f"{args.mechanism} / {args.composition}"),
        ("epsilon, delta", f"{args.epsilon:g}, {delta:.3g}"),
        ("covariance share f", f"{plan.cov_budget:.4f}"),
        ("sensitivity covariance", f"{plan.sens_cov:.6g}" if plan.cov_event else "-"),
        ("sensitivity association", f"{plan.sens_assoc:.6g}"),
        ("sigma_1 (covariance)", f"{plan.sigma_cov:.6g}"),
        ("sigma_2 (association)", f"{plan.sigma_assoc:.6g}"),
        ("sigma_2 effective", f"{plan.sigma_assoc_eff:.6g}"),
        ("ridge lambda (normalised)", f"{plan.ridge:.6g}"),
        ("sklearn Ridge alpha", f"{plan.ridge * args.n:.6g}"),
        ("ledger epsilon, delta", f"{ledger.epsilon:.6g}, {ledger.delta:.3g}"),
    ]
    if l_zero is not None:
        rows.append(("l_0 (assoc = cov noise)", f"{l_zero:.4g}"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


def demo_case():
    """A full-DP multi-outcome fit that works: n=20000, d=10, l=50, epsilon=1.

    ``baseline`` is :class:`IndependentSSPRegressor` at the same budget (50
    separate private regressions), which PRIMO improves on.
    """
    rng = np.random.default_rng(20230304)
    n, d, n_outputs = 25_000, 10, 50
    W = rng.normal(0.0, 1.0 / math.sqrt(d), size=(d, n_outputs))
    X = rng.normal(size=(n, d))
    Y = X @ W + rng.normal(size=(n, n_outputs))
    n_train = 20_000
    estimator = ReuseCovRegressor(
        epsilon=1.0, delta=1e-6, privacy="full", x_bound=1.5 * math.sqrt(d),
        y_bound=4.0, w_bound=1.0, cov_budget="auto", random_state=0,
    )
    from ._independent_ssp import IndependentSSPRegressor

    baseline = IndependentSSPRegressor(
        epsilon=1.0, delta=1e-6, x_bound=1.5 * math.sqrt(d), y_bound=4.0, w_bound=1.0,
        random_state=0,
    )
    return {
        "name": "ReuseCov (PRIMO): 50 outcomes on one design, full DP",
        "estimator": estimator,
        "baseline": baseline,
        "notion": "full",
        "X_train": X[:n_train],
        "y_train": Y[:n_train],
        "X_test": X[n_train:],
        "y_test": Y[n_train:],
    }
