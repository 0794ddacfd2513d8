"""Direct transcriptions of ISSP's filters (reference implementations, for tests).

These recompute every leverage and every weighted least-squares fit from
scratch, ``O(n p^2)`` per step: StableLeverageFiltering (geometric schedule) and
Algorithms 2-3 of Brown et al. (2024). The production engines
(:func:`~._issp_filters.slf_engine`, :func:`~._issp_filters.srf_engine`)
must return the same scores and weights.
"""

import numpy as np
from scipy import linalg

from .._rows import RowSource
from ._issp_filters import (
    _slf_weights,
    leverage_thresholds,
    residual_thresholds,
    slf_engine,
    slf_score,
    srf_engine,
    srf_weights,
)
from ._issp_passes import factor_pass

__all__ = [
    "residual_thresholding",
    "stable_leverage_filtering",
    "stable_residual_filtering",
]


def _direct_leverages(X, w=None, n_exclude=0):
    """Leverages ``x_i^T S_w^{-1} x_i`` of all rows, and whether ``S_w`` is PD.

    Uses the same row-sorted QR and singularity rule as :func:`factor_pass`.
    """
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    keep = w > 0
    if not np.any(keep):
        return np.full(n, np.inf), False
    src = RowSource(X[keep] * np.sqrt(w[keep])[:, None], np.zeros(int(keep.sum())),
                    block_rows=None)
    factor = factor_pass(src, n_exclude=n_exclude)
    if not factor.pd:
        return np.full(n, np.inf), False
    Z = linalg.solve_triangular(factor.G, X.T, lower=True, check_finite=False)
    return np.einsum("ij,ij->j", Z, Z), True


def _weighted_ols(X, y, w):
    keep = w > 0
    root = np.sqrt(w[keep])
    src = RowSource(X[keep] * root[:, None], y[keep] * root, block_rows=None)
    return factor_pass(src).beta


def residual_thresholding(X, y, R, w):
    """ResidualThresholding (Algorithm 2): greedily zero the largest residual above ``R``.

    ``u <- w``; repeat: fit weighted OLS on ``u``; take the row of
    ``supp(u)`` with the largest ``|y_i - x_i^T beta_u|`` (ties to the smallest
    index); if it exceeds ``R``, set its weight to 0, else stop.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    u = np.array(w, dtype=np.float64)
    while np.any(u > 0):
        beta = _weighted_ols(X, y, u)
        r = np.abs(y - X @ beta)
        r[u <= 0] = -np.inf
        i = int(np.argmax(r))
        if r[i] > R:
            u[i] = 0.0
        else:
            break
    return u


def stable_residual_filtering(X, y, W, L0, R0, k, *, method="fast", n_candidates=None,
                              chunk_size=None):
    """StableResidualFiltering on weights ``w = W/k``: ``(k * SCORE2, V = k^2 v or None)``.

    ``method='reference'`` is Algorithm 3 (one ResidualThresholding per level,
    from scratch); ``'fast'`` is Algorithm 4 with rank-one updates
    (:func:`srf_engine`, the production path). They return the same score
    always and the same ``V`` whenever ``SCORE2 < k`` (Brown et al. 2024, Algorithms 3 and 4).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    W = np.asarray(W, dtype=np.int64)
    n = X.shape[0]
    if method == "reference":
        R = residual_thresholds(R0, L0, k)
        scores, V = [], np.zeros(n, dtype=np.int64)
        for j in range(2 * k + 1):
            u = residual_thresholding(X, y, R[j], W / k)
            kept = np.where(u > 0, W, 0)
            scores.append(min(k * k, k * (n + j) - int(kept.sum())))
            if j > k:
                V += kept
        score = min(scores[: k + 1])
        return score, (V if score < k * k else None)
    if method != "fast":
        raise ValueError("method must be 'fast' or 'reference'.")
    src = RowSource(X, y, block_rows=chunk_size)
    mod = np.flatnonzero(W < k)
    res = srf_engine(src, mod, W[mod], L0, R0, k, n_candidates=n_candidates)
    if res.score_num >= k * k:
        return res.score_num, None
    return res.score_num, srf_weights(n, k, W, res.F_idx, res.F_level)


def stable_leverage_filtering(X, L0, k, *, schedule="geometric", method="engine",
                              early_stop=True, n_candidates=None, chunk_size=None):
    """StableLeverageFiltering with the geometric schedule: ``(SCORE1, W = k w or None)``.

    ``method='reference'`` recomputes every leverage from scratch
    (``early_stop=False`` runs every level even after saturation and always
    returns ``W``); ``'engine'`` is the production path (:func:`slf_engine`).
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if method == "engine":
        src = RowSource(X, np.zeros(n), block_rows=chunk_size)
        res = slf_engine(src, L0, k, n_candidates=n_candidates, schedule=schedule)
        return res.score, res.W
    if method != "reference":
        raise ValueError("method must be 'engine' or 'reference'.")
    thresholds = leverage_thresholds(L0, k, schedule)
    A = np.ones(n, dtype=bool)
    removed_at = np.full(n, -1, dtype=np.int64)
    sat = -1
    for j in range(2 * k, -1, -1):
        while True:
            if early_stop and n - A.sum() >= k:
                sat = j
                break
            if not A.any():
                break
            h, pd = _direct_leverages(X, A.astype(float), n_exclude=k)
            out = A.copy() if not pd else A & (h > thresholds[j])
            if not out.any():
                break
            removed_at[out] = j
            A &= ~out
        if sat >= 0:
            break
    score = slf_score(lambda j: int(np.sum(removed_at >= j)), k, sat)
    if early_stop and score >= k:
        return score, None
    removed = np.flatnonzero(removed_at >= 0)
    return score, _slf_weights(n, k, removed, removed_at[removed])
