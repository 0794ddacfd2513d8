"""The candidate scan of ISSP's filters: one pass keeping the top rows by leverage and residual.

The filters keep a small candidate set in memory and bound every other row by
the largest key left out (``outside_max``). A scan is a block function and an
associative combine over a :class:`~skprivreg._rows.RowSource`; its output
is a secret intermediate value of :class:`~skprivreg.linear_model.ISSPRegressor`.
"""

from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.linalg import blas

from ._issp_passes import RowWeights, _augment, _pieces, rows_in

__all__ = ["Scan", "scan_pass"]


def _top_rows(keys, idx, m):
    """Positions of the ``m`` first rows in the order (-key, idx), and the max key left out."""
    if len(keys) <= m:
        return np.arange(len(keys)), -np.inf
    cut = np.partition(keys, len(keys) - m)[len(keys) - m]
    pool = np.flatnonzero(keys >= cut)
    order = pool[np.lexsort((idx[pool], -keys[pool]))]
    chosen = order[:m]
    mask = np.ones(len(keys), dtype=bool)
    mask[chosen] = False
    return chosen, float(keys[mask].max())


@dataclass
class Scan:
    """Top candidates of one pass: global indices, rows and keys, plus the max key outside."""

    idx: np.ndarray
    X: np.ndarray
    y: np.ndarray
    key: np.ndarray
    outside_max: float
    saturated: bool = False


def _merge_top(current, block_idx, block_X, block_y, block_key, m):
    idx = np.concatenate([current.idx, block_idx])
    keys = np.concatenate([current.key, block_key])
    chosen, left_out = _top_rows(keys, idx, m)
    X = np.vstack([current.X, block_X])[chosen]
    y = np.concatenate([current.y, block_y])[chosen]
    return Scan(idx[chosen], X, y, keys[chosen], max(current.outside_max, left_out))


def _empty_scan(p):
    return Scan(np.zeros(0, np.int64), np.zeros((0, p)), np.zeros(0), np.zeros(0), -np.inf)


def _merge_scans(a, b, m):
    """Top ``m`` of two scans (order (-key, idx)); ``outside_max`` covers every row left out."""
    if a is None:
        return b
    merged = _merge_top(a, b.idx, b.X, b.y, b.key, m)
    merged.outside_max = max(merged.outside_max, a.outside_max, b.outside_max)
    return merged


@dataclass
class _ScanParams:
    """Public inputs of one scan pass (shipped to the workers)."""

    d: int
    p: int
    intercept: bool
    beta: np.ndarray
    n_candidates: int
    weights: RowWeights
    factor: object = None
    screen: object = None
    inv_s2: object = None
    slack: float = 1.0
    GinvF: object = None
    saturate_at: object = None
    transform: object = None


def _residuals_and_screen(Xb, yb, beta, intercept, inv_s2):
    """``|y - X~ beta|`` and, if ``inv_s2`` is given, ``sum_j x~_j^2 inv_s2_j`` per row.

    Both come from one read of each cache-sized piece of the block.
    """
    d = Xb.shape[1]
    r = np.empty(len(yb))
    bound = None if inv_s2 is None else np.empty(len(yb))
    square = None
    for lo, hi in _pieces(len(yb), d):
        Xs = Xb[lo:hi]
        np.dot(Xs, beta[:d], out=r[lo:hi])
        if bound is not None:
            if square is None:
                square = np.empty_like(Xs)
            sq = np.multiply(Xs, Xs, out=square[:hi - lo])
            np.dot(sq, inv_s2[:d], out=bound[lo:hi])
    if intercept:
        r += beta[d]
        if bound is not None:
            bound += inv_s2[d]
    np.subtract(yb, r, out=r)
    return np.abs(r, out=r), bound


def _scan_block(offset, Xb, yb, params, into=None):
    """Partial ``(by_leverage, by_residual, n above the saturation threshold, m)`` of a block."""
    P = params
    d, p, m_top = P.d, P.p, P.n_candidates
    intercept = P.intercept
    m = Xb.shape[0]
    gidx = np.arange(offset, offset + m, dtype=np.int64)
    wb = P.weights.block(offset, offset + m)
    if wb is not None:
        alive = wb > 0
        Xb, yb, gidx = Xb[alive], yb[alive], gidx[alive]
    if P.transform is not None:
        # Rows in the factor's exact whitening coordinates (double-double map).
        Xb, d, intercept = rows_in(Xb, intercept, P.transform), p, False
    q = d
    factor = P.factor
    r, bound = _residuals_and_screen(
        Xb, yb, P.beta, intercept, P.inv_s2 if factor is not None and P.screen is not None
        else None)
    pos, left = _top_rows(r, gidx, m_top)
    res = Scan(gidx[pos], _augment(Xb[pos], intercept) if intercept else Xb[pos], yb[pos],
               r[pos], left)
    lev, above = None, 0
    if factor is not None:
        skipped = -np.inf
        exact = None
        if bound is not None:
            keep = bound * P.slack > P.screen
            if not np.all(keep):
                exact = np.flatnonzero(keep)
                skipped = float(P.screen)
        Xe = Xb if exact is None else Xb[exact]
        if factor.Ginv is not None and len(Xe) > 4 * p:
            # Triangular multiply in place (half the flops of GEMM).
            buf = np.empty((len(Xe), p))
            buf[:, :q] = Xe
            if intercept:
                buf[:, d] = 1.0
            Z = blas.dtrmm(1.0, P.GinvF, buf.T, lower=1, overwrite_b=1)
        elif factor.Ginv is not None:
            # z = G^{-1} [x; 1] = Ginv[:, :d] x + Ginv[:, d]: no augmented copy.
            Z = np.dot(factor.Ginv[:, :q], Xe.T)
            if intercept:
                Z += factor.Ginv[:, d][:, None]
        else:
            Xa = _augment(Xe, intercept) if intercept else Xe
            Z = linalg.solve_triangular(factor.G, Xa.T, lower=True, check_finite=False)
        h = np.einsum("ij,ij->j", Z, Z)
        ge, ye = (gidx, yb) if exact is None else (gidx[exact], yb[exact])
        pos, left = _top_rows(h, ge, m_top)
        lev = Scan(ge[pos], _augment(Xe[pos], intercept) if intercept else Xe[pos], ye[pos],
                   h[pos], max(left, skipped))
        if P.saturate_at is not None:
            above = int(np.count_nonzero(h > P.saturate_at))
    part = (lev, res, above, m_top)
    return part if into is None else _scan_combine(into, part)


def _scan_combine(a, b):
    m = a[3]
    lev = None if a[0] is None and b[0] is None else _merge_scans(a[0], b[0], m)
    return lev, _merge_scans(a[1], b[1], m), a[2] + b[2], m


def scan_pass(source, *, beta, n_candidates, weights=None, factor=None, screen=None,
              saturate=None, transform=None):
    """One pass selecting candidate rows among rows of positive weight.

    Returns ``(by_leverage, by_residual)``: the ``n_candidates`` rows with the
    largest leverage ``h_i = ||G^{-1} x~_i||^2`` (only when ``factor`` is given,
    else ``None``) and with the largest ``|y_i - x~_i^T beta|``, ties to the
    smallest global index, each with the largest key among the other rows
    (``outside_max``, an upper bound).

    ``screen`` (certified Gram factor only): a row whose cheap bound
    ``h_i <= ||D x~_i||^2 / lambda_min(D S D)`` (``D`` the column scaling,
    ``O(p)`` per row) is at most ``screen`` is not whitened; ``outside_max`` is
    then at least ``screen``. Callers pass a ``screen`` below every threshold
    they compare with, so skipped rows can never be needed. On clean data
    almost every row is skipped and the pass costs ``O(n p)``.

    ``saturate=(threshold, count)``: flag ``by_leverage.saturated`` when at
    least ``count`` rows have leverage above ``threshold`` (leverage filtering
    then saturates for certain and the scan is unused). A sequential source
    stops the pass as soon as that happens; a Dask source completes it.

    Rows, ``beta`` and the candidates' rows are in the coordinates of
    ``factor`` (``factor.T``, see :func:`._issp_passes.rows_in`), or of
    ``transform`` when no factor is given.
    """
    weights = RowWeights() if weights is None else weights
    d, p = source.d, source.p
    intercept = source.fit_intercept
    n_candidates = int(n_candidates)
    # Screening pays off only if typical leverages (mean p/n) are below the screen.
    use_screen = (factor is not None and screen is not None and factor.Ginv is not None
                  and factor.scaled_lambda_min > 0 and screen * source.n > p)
    params = _ScanParams(
        d=d, p=p, intercept=intercept, beta=np.asarray(beta, np.float64),
        n_candidates=n_candidates, weights=weights, factor=factor,
        screen=float(screen) if use_screen else None,
        inv_s2=1.0 / factor.col_scale**2 if use_screen else None,
        slack=(1.0 + 1e-6) / factor.scaled_lambda_min if use_screen else 1.0,
        GinvF=None if factor is None or factor.Ginv is None else np.asfortranarray(factor.Ginv),
        saturate_at=None if (saturate is None or factor is None) else float(saturate[0]),
        transform=factor.T if factor is not None else transform,
    )
    stop = None
    if params.saturate_at is not None:
        count = saturate[1]

        def stop(part):
            return part[2] >= count

    lev, res, above, _ = source.reduce(_scan_block, _scan_combine, params, stop=stop)
    if res is None:
        res = _empty_scan(p)
    if factor is not None and lev is None:
        lev = _empty_scan(p)
    if lev is not None and params.saturate_at is not None and above >= saturate[1]:
        lev.saturated = True
    return lev, res
