"""ReuseCov's releases: the PSD-repaired solve, the (projected) association releases
over blocks of outcomes, and the reusable :class:`NoisyCovariance`."""

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from .._rows import (
    is_dask_collection,
    sum_over_row_blocks,
)
from ..accounting import PrivacyLedger
from ..exceptions import ConfigurationError
from ..mechanisms import (
    add_gaussian,
    sqrt_times_at_least,
)
from ._reusecov_projection import (
    projection_shrinkage,
    spectral_basis,
    trust_region_multiplier,
)

__all__ = [
    "NOISE_CHUNK",
    "NoisyCovariance",
    "psd_factor",
    "apply_factor",
    "release_associations",
]

# Association noise is drawn in chunks of this many outcome columns, chunk j
# from its own child seed, so the noise does not depend on the block size.
NOISE_CHUNK = 512
# Memory target (bytes) of one block of rows (X and Y) or of outcome columns.
_ROW_BLOCK_BYTES = 64 * 2**20
_OUTCOME_BLOCK_BYTES = 32 * 2**20
# Above this min(n, l), the public Gram matrix of Y (Proj_Y) is costly.
_PROJ_Y_WARN = 20_000


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
    return eigvecs, inverse_eigvals(eigvals, ridge, noisy, psd, stacklevel=4)


def inverse_eigvals(eigvals, ridge, noisy, psd="clip", stacklevel=3):
    """The repaired inverse eigenvalues of ``M = Sigma_tilde + lambda I``.

    ``eigvals`` are the eigenvalues of ``M`` (the covariance's shifted by
    ``lambda``); the rules are those of :func:`psd_factor`.
    """
    eigvals = np.asarray(eigvals, dtype=float)
    top = float(np.abs(eigvals).max(initial=0.0))
    if psd == "none":
        if top == 0 or np.abs(eigvals).min() <= eigvals.shape[0] * np.finfo(float).eps * top:
            raise linalg.LinAlgError(
                "The noisy covariance plus ridge is singular (psd='none'); use "
                "psd='clip' or a positive ridge."
            )
        return 1.0 / eigvals
    if ridge > 0:
        return 1.0 / np.maximum(eigvals, ridge)
    if noisy:
        tau = 1e-10 * max(1.0, top)
        warnings.warn(
            "ridge=0 with a noisy covariance: eigenvalues are floored at 1e-10 "
            "max(1, ||M||); expect a noisy fit. Use ridge='auto'.",
            UserWarning,
            stacklevel=stacklevel,
        )
        return 1.0 / np.maximum(eigvals, tau)
    cutoff = eigvals.shape[0] * np.finfo(np.float64).eps * max(float(eigvals.max()), 0.0)
    keep = eigvals > cutoff
    return np.where(keep, 1.0 / np.where(keep, eigvals, 1.0), 0.0)


def apply_factor(eigvecs, inv_eigvals, G):
    """``W = V diag(inv) V^T G`` for all right-hand sides (columns of G) at once."""
    return eigvecs @ (inv_eigvals[:, None] * (eigvecs.T @ G))


def _reusecov_solve(Sigma_hat, G, E1, E2, lam):
    """Coefficients from given statistics and given noise (for tests of the solve).

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
    return _Projection("X", s / n, sqrt_times_at_least(n * n_outputs, y_bound), V=V)


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
    radius = sqrt_times_at_least(n, x_bound_eff)  # as the plan's (reusecov_plan)
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
    keep=False, choose_factor=None,
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
    choose_factor : callable or None
        ReuseCovGauss, GaussProj_Y, and GaussProj_X when its projection is
        inactive (multiplier 0; otherwise ``eigvecs`` and ``inv_eigvals``
        are used). Called once as
        ``choose_factor(G_hat, noise_ratio)`` with the whole released
        association ``G_hat`` (p x l, after one pass over the outcome
        blocks) and the ratio of its per-entry noise variance (averaged over
        outcomes) to :math:`\\sigma_2^2`: 1 for Gauss; for GaussProj_Y, whose
        noise is :math:`E_2 P` with :math:`P = V \\mathrm{diag}(h) V^\\top`
        (:math:`h` the shrinkage factors), :math:`\\sum_k h_k^2 / l`, a
        function of the public Y and the released multiplier. Returns the
        factor ``(eigvecs, inv_eigvals)`` to solve with (a ridge chosen from
        released values, post-processing); ``eigvecs`` and ``inv_eigvals``
        passed in are then ignored.

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

    if projection is None and choose_factor is not None:
        # Pass 1: the released association of every outcome, in the
        # coefficient buffer; the factor is chosen from all of it; pass 2
        # solves in place, block by block.
        for a, b in blocks:
            W[:, a:b] = _noisy_block(G[:, a:b], a, sigma, seed)
        if keep:
            G_hat[:] = W
        eigvecs, inv_eigvals = choose_factor(W, 1.0)
        for a, b in blocks:
            W[:, a:b] = apply_factor(eigvecs, inv_eigvals, W[:, a:b])
        return W, G_hat, 0.0

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
        if choose_factor is not None and mu == 0:
            # Inactive: the released association is the Gaussian one (in the
            # span of X); the factor is chosen from all of it.
            for a, b in blocks:
                W[:, a:b] = V @ (shrink * coords[:, a:b])
            if keep:
                G_hat[:] = W
            eigvecs, inv_eigvals = choose_factor(W, 1.0)
            for a, b in blocks:
                W[:, a:b] = apply_factor(eigvecs, inv_eigvals, W[:, a:b])
            return W, G_hat, mu
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
    shrink = projection_shrinkage(projection.kappa, mu)
    B = B * shrink
    if choose_factor is not None:
        for a, b in blocks:
            W[:, a:b] = B @ projection.right_block(a, b).T
        if keep:
            G_hat[:] = W
        eigvecs, inv_eigvals = choose_factor(W, float(np.sum(shrink**2)) / n_outputs)
        for a, b in blocks:
            W[:, a:b] = apply_factor(eigvecs, inv_eigvals, W[:, a:b])
        return W, G_hat, mu
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
    x_bound : float or None
        Row-norm bound of X without the intercept column (the bound the
        sensitivity was computed at; None under label DP).
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
    x_bound: float | None = None


