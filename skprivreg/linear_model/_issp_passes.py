"""Blockwise passes of ISSP's filters over a :class:`~skprivreg._rows.RowSource`.

Each pass is a module-level block function
``fn(offset, X_block, y_block, params, into=None) -> partial`` (``X_block`` is
raw X after the public clip, without the ones column) and an associative,
commutative combine, run by ``source.reduce`` (in order on NumPy and memmap
input; on Dask workers one task per chunk, or per worker thread over the
chunks it holds). Block functions are pure and draw nothing
random. The values computed here (Gram matrices, factors, residual sums) are
secret intermediate values of :class:`~skprivreg.linear_model.ISSPRegressor`
and never leave ``fit``.

Floating point. An extreme row makes a float64 Gram matrix useless for the
other rows, so a Gram/Cholesky factor is accepted only with a certificate
(the column-scaled Gram matrix has condition number at most
``GRAM_CONDITION_MAX``); otherwise the factor is recomputed by a row-sorted
Householder TSQR, which is row-wise backward stable and resolves the
leverage of an extreme row (close to 1) without destroying the others.
Whether the design is singular is decided in exact arithmetic
(:mod:`._issp_exact`) unless the float factor certifies full rank. A design
that is full rank in exact arithmetic but too close to singular for float64
to certify is factored in exact whitening coordinates: the rows are mapped by
``T`` (from the exact Gram matrix) in double-double arithmetic, and every pass
that uses the factor maps its rows the same way (``transform``).
"""

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from .._rows import add_tuples, check_block_finite
from ._issp_exact import (
    _exact_gram_add,
    dd_matmul,
    exact_gram,
    exact_gram_is_pd,
    exact_whitening_transform,
)

__all__ = [
    "RowWeights",
    "Factor",
    "gram_piece_add",
    "gram_pass",
    "cross_pass",
    "tsqr_pass",
    "exact_rank_pass",
    "factor_pass",
    "magnitude",
]

_EPS = np.finfo(np.float64).eps
#: Largest condition number of the column-scaled Gram matrix for which the
#: Cholesky factor is trusted (relative leverage error about eps * this).
GRAM_CONDITION_MAX = 1e9

# Rows per piece: a piece of about 1 MiB stays in cache between the BLAS calls
# that read it, so a pass reads each row from memory once (measured: the
# d = 10 Gram pass of ISSP ran 1.6x slower on 21 MB blocks than on pieces).
PIECE_BYTES = 1 << 20


def _pieces(n_rows, n_cols):
    """``(lo, hi)`` row ranges of cache-sized pieces of a block."""
    step = max(256, PIECE_BYTES // (8 * (n_cols + 1)))
    return [(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def gram_piece_add(G, X, y, intercept, root=None, check_finite=False):
    """``G += [X 1 y]^T diag(root^2) [X 1 y]`` (upper triangle), piece by piece.

    The ones column (only if ``intercept``) is handled by dot products, so no
    augmented copy is built; ``root`` (weights' square roots, or ``None``)
    scales a piece-sized copy only. With ``check_finite`` a piece is checked
    for NaN or infinity only when its own diagonal is not finite (NaN and
    infinity always reach the diagonal, a sum of squares; an overflow of
    finite entries is then told apart by the exact check).
    """
    # A finite row whose square overflows (|entry| above about 1e154) is legal
    # data: the Gram matrix becomes non-finite and the callers fall back (TSQR,
    # the residual-scale 'overflow' label). No warning: it would depend on data.
    with np.errstate(over="ignore", invalid="ignore"):
        _gram_piece_add(G, X, y, intercept, root, check_finite)


def _gram_piece_add(G, X, y, intercept, root, check_finite):
    d = X.shape[1]
    p = G.shape[0] - 1
    ones = None
    for lo, hi in _pieces(X.shape[0], d):
        Xs, ys = X[lo:hi], y[lo:hi]
        if root is not None:
            rs = root[lo:hi]
            Xs, ys = Xs * rs[:, None], ys * rs
        gram = np.dot(Xs.T, Xs)  # dsyrk; matmul's transposed path is far slower
        yy = np.dot(ys, ys)
        if check_finite and not (np.isfinite(np.trace(gram)) and np.isfinite(yy)):
            check_block_finite(Xs, "X")
            check_block_finite(ys, "y")
        G[:d, :d] += gram
        G[:d, p] += np.dot(ys, Xs)
        G[p, p] += yy
        if intercept:
            if root is None:
                if ones is None or len(ones) < hi - lo:
                    ones = np.ones(hi - lo)
                G[:d, d] += np.dot(ones[:hi - lo], Xs)  # gemv; a strided sum is slower
                G[d, d] += hi - lo
                G[d, p] += ys.sum()
            else:
                G[:d, d] += np.dot(rs, Xs)
                G[d, d] += np.dot(rs, rs)
                G[d, p] += np.dot(rs, ys)


def _augment(X, intercept):
    """Append the ones column (if ``intercept``) to raw rows (a copy)."""
    if not intercept:
        return np.array(X, dtype=np.float64)
    return np.hstack([X, np.ones((X.shape[0], 1))])


def rows_in(X, intercept, transform=None):
    """Rows ``x~`` (ones column appended if ``intercept``) in a factor's coordinates.

    ``transform``: ``None`` (the rows themselves) or ``(T_hi, T_lo)`` of a
    :class:`Factor` in exact whitening coordinates, giving ``fl(x~^T T)``
    computed in double-double arithmetic.
    """
    if transform is None:
        return _augment(X, intercept) if intercept else X
    return dd_matmul(_augment(X, intercept), *transform)


@dataclass
class RowWeights:
    """Sparse row weights: 1 everywhere except ``w[idx]`` (``idx`` sorted)."""

    idx: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    w: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def from_pairs(cls, idx, w):
        idx = np.asarray(idx, dtype=np.int64)
        w = np.asarray(w, dtype=np.float64)
        order = np.argsort(idx, kind="stable")
        return cls(idx[order], w[order])

    def block(self, start, stop):
        """Dense weights of rows ``start..stop-1``, or ``None`` if all are 1."""
        lo, hi = np.searchsorted(self.idx, [start, stop])
        if lo == hi:
            return None
        out = np.ones(stop - start)
        out[self.idx[lo:hi] - start] = self.w[lo:hi]
        return out


def _gram_block(offset, Xb, yb, params, into=None, check_finite=False):
    """Upper triangle of ``[X~ y]^T diag(w) [X~ y]`` of one block, added into ``into``."""
    p, intercept, weights = params
    S = np.zeros((p + 1, p + 1)) if into is None else into[0]
    wb = weights.block(offset, offset + Xb.shape[0])
    gram_piece_add(S, Xb, yb, intercept, root=None if wb is None else np.sqrt(wb),
                   check_finite=check_finite)
    return (S,)


#: The Gram pass checks finiteness itself, fused with its read of each piece.
_gram_block.checks_finite = True


def gram_pass(source, weights=None):
    """One pass: ``[X~ y]^T diag(w) [X~ y]`` as a (p+1, p+1) matrix (float64 BLAS)."""
    weights = RowWeights() if weights is None else weights
    (S,) = source.reduce(_gram_block, add_tuples,
                         (source.p, source.fit_intercept, weights))
    upper = np.triu(S)
    return upper + np.triu(upper, 1).T


def _cross_block(offset, Xb, yb, params, into=None):
    """``X~^T diag(w) y`` of one block (rows of weight 0 skipped), added into ``into``."""
    p, intercept, weights, transform = params
    t = np.zeros(p) if into is None else into[0]
    wb = weights.block(offset, offset + Xb.shape[0])
    if wb is not None:
        keep = wb > 0
        Xb, yb = Xb[keep], yb[keep] * wb[keep]
    if transform is not None:
        Xb, intercept = rows_in(Xb, intercept, transform), False
    d = Xb.shape[1]
    t[:d] += np.dot(yb, Xb)
    if intercept:
        t[d] += yb.sum()
    return (t,)


def _safe_norm(v):
    """Euclidean norm without overflow in the squares (entries up to the float64 maximum)."""
    top = float(np.max(np.abs(v), initial=0.0))
    if top == 0.0 or not math.isfinite(top):
        return top
    return top * float(np.linalg.norm(v / top))


def magnitude(vectors):
    """``sum_j ||a_j||_2`` over the columns of ``vectors``, bounded above without overflow.

    ``sqrt(rows) * sum_j max_i |a_ij|``: the size of the terms of a sum, which
    bounds its rounding error (``eps`` times this, up to a small factor).
    """
    a = np.abs(np.asarray(vectors, dtype=np.float64))
    if a.size == 0:
        return 0.0
    a = a.reshape(a.shape[0], -1)
    with np.errstate(over="ignore"):
        return float(math.sqrt(a.shape[0]) * np.sum(np.max(a, axis=0)))


def cross_pass(source, weights=None, transform=None):
    """One pass: ``X~^T diag(w) y`` summed from scratch over the rows of positive weight.

    The scale-robust update of residual filtering and of the release: after
    rows are removed, their contribution is never subtracted from a total
    (with ``|y_j| >= 1e20`` the subtraction cancels catastrophically); the
    kept rows are summed again (the rebase rule, applied to ``X^T W y``).
    ``transform``: the rows in a factor's coordinates (:func:`rows_in`).
    """
    weights = RowWeights() if weights is None else weights
    (t,) = source.reduce(_cross_block, add_tuples,
                         (source.p, source.fit_intercept, weights, transform))
    return t


def _sorted_qr_r(M):
    """R factor of ``M`` by Householder QR after sorting rows by decreasing size.

    Row sorting (Powell & Reid 1969; Cox & Higham 1998) makes Householder QR
    row-wise backward stable, so one huge row does not swamp the others.
    """
    if M.shape[0] == 0:
        return np.zeros((0, M.shape[1]))
    order = np.argsort(-np.max(np.abs(M), axis=1), kind="stable")
    R = linalg.qr(M[order], mode="r", check_finite=False)[0]
    return R[: min(M.shape)]


def _merge_column_tops(tops, block, m):
    """Keep the ``m`` largest |entries| per column; return them and the evicted sum of squares."""
    both = np.vstack([tops, np.abs(block)])
    if both.shape[0] <= m:
        return both, np.zeros(both.shape[1])
    if m <= 0:  # nothing kept (non-private OLS): every entry counts towards the bulk
        return both[:0], np.sum(both**2, axis=0)
    part = np.partition(both, both.shape[0] - m, axis=0)
    evicted = part[: both.shape[0] - m]
    return part[both.shape[0] - m:], np.sum(evicted**2, axis=0)


def _tsqr_block(offset, Xb, yb, params, into=None):
    """Partial ``(R, column tops, evicted sum of squares, n_exclude)`` of one block.

    ``R`` is the row-sorted R factor of ``diag(sqrt(w)) [X~ y]`` of the rows
    seen so far: folding into ``into`` factors ``[R_prev; block]`` in one QR.
    """
    p, intercept, weights, n_exclude, transform = params
    wb = weights.block(offset, offset + Xb.shape[0])
    M = np.column_stack([rows_in(Xb, intercept, transform), yb])
    if wb is not None:
        keep = wb > 0
        M = M[keep] * np.sqrt(wb[keep])[:, None]
    # Rank certificate: R of the rows scaled to unit max-norm (same rank; no row
    # dominates, so the backward-error bound is sharp; see _rank_certified).
    top = np.max(np.abs(M[:, :p]), axis=1, initial=0.0)
    unit = M[top > 0, :p] / top[top > 0, None]
    if into is None:
        R, tops, bulk_sq, Ru = (np.zeros((0, p + 1)), np.zeros((0, p)), np.zeros(p),
                                np.zeros((0, p)))
    else:
        R, tops, bulk_sq, _, Ru = into
    tops, evicted = _merge_column_tops(tops, M[:, :p], n_exclude)
    return (_sorted_qr_r(np.vstack([R, M])), tops, bulk_sq + evicted, n_exclude,
            _sorted_qr_r(np.vstack([Ru, unit])))


def _tsqr_combine(a, b):
    """TSQR tree step: R of the stacked R factors; merged column tops."""
    tops, evicted = _merge_column_tops(a[1], b[1], a[3])
    return (_sorted_qr_r(np.vstack([a[0], b[0]])), tops, a[2] + b[2] + evicted, a[3],
            _sorted_qr_r(np.vstack([a[4], b[4]])))


def _exact_gram_block(offset, Xb, yb, params, into=None):
    """Exact Gram sums of the rows of positive weight of one block (unweighted)."""
    p, intercept, weights = params
    wb = weights.block(offset, offset + Xb.shape[0])
    if wb is not None:
        Xb = Xb[wb > 0]
    gram = exact_gram(_augment(Xb, intercept) if intercept else Xb)
    return (_exact_gram_add(None if into is None else into[0], gram),)


def _exact_gram_combine(a, b):
    return (_exact_gram_add(a[0], b[0]),)


def exact_gram_pass(source, weights=None):
    """One pass: the exact Gram matrix of the rows of positive weight (or ``None``)."""
    weights = RowWeights() if weights is None else weights
    (gram,) = source.reduce(_exact_gram_block, _exact_gram_combine,
                            (source.p, source.fit_intercept, weights))
    return gram


def exact_rank_pass(source, weights=None):
    """One pass: is ``S_w`` PD in exact arithmetic? (w > 0 rows span R^p, exactly.)"""
    gram = exact_gram_pass(source, weights)
    return gram is not None and exact_gram_is_pd(gram, source.p)


#: Certificate of full rank from a Householder R of the rows scaled to unit
#: max-norm (scaling rows keeps the rank; Higham 2002, Thm 19.4: columnwise
#: backward error gamma~_{np} ||a_j||): with D the inverse column norms,
#: sigma_min(R D) > RANK_CERTIFICATE * n p^{3/2} eps proves X full rank.
RANK_CERTIFICATE = 10.0


#: Condition number of the column-scaled R above which a full-rank design is
#: factored in exact whitening coordinates (float leverages from R carry a
#: relative error of about ``p eps`` times this: ~2e-9 at p = 10).
TRANSFORM_CONDITION = 1e7


def _scaled_condition(R):
    """Condition number of ``R`` with unit columns (``inf`` if not finite or singular)."""
    if not np.all(np.isfinite(R)):
        return math.inf
    norms = np.sqrt(np.sum(R * R, axis=0))
    if not np.all(norms > 0) or not np.all(np.isfinite(norms)):
        return math.inf
    sv = linalg.svdvals(R / norms[None, :], check_finite=False)
    return math.inf if sv[-1] <= 0 else float(sv[0] / sv[-1])


def _rank_certified(R, n_rows):
    """True when the float R proves full rank (else the exact pass decides)."""
    p = R.shape[0]
    if not np.all(np.isfinite(R)):
        return False
    norms = np.sqrt(np.sum(R * R, axis=0))
    if not np.all(norms > 0) or not np.all(np.isfinite(norms)):
        return False
    smin = linalg.svdvals(R / norms[None, :], check_finite=False)[-1]
    return bool(smin > RANK_CERTIFICATE * max(n_rows, 1) * p**1.5 * _EPS)


def tsqr_pass(source, weights=None, *, n_exclude=0, transform=None):
    """One pass: row-sorted TSQR of ``diag(sqrt(w)) [X~ y]`` and robust column norms.

    Returns ``(R, bulk_norms, R_unit)``: the (p+1, p+1) R factor, ``R_unit``
    the (p, p) R factor of the kept rows of ``X~`` each scaled to unit
    max-norm (for the rank certificate), and for each column
    of ``X~`` the norm of its entries without the ``n_exclude`` largest in
    absolute value (the scale of the bulk of the data, untouched by a few
    extreme rows; used for the numerical-rank decision). ``transform``: the
    rows in a factor's coordinates (:func:`rows_in`).
    """
    weights = RowWeights() if weights is None else weights
    p = source.p
    R, _, bulk_sq, _, Ru = source.reduce(
        _tsqr_block, _tsqr_combine,
        (p, source.fit_intercept, weights, int(n_exclude), transform),
    )
    out = np.zeros((p + 1, p + 1))
    out[: R.shape[0]] = R[: p + 1]
    unit = np.zeros((p, p))
    unit[: Ru.shape[0]] = Ru[:p]
    return out, np.sqrt(bulk_sq), unit

@dataclass
class Factor:
    """``S_w = G G^T`` (G lower triangular), ``theta = G^{-1} X~^T W y``, ``beta = G^{-T} theta``.

    ``pd`` is False when ``S_w`` is judged singular: then stable leverage
    filtering removes everything. ``T`` (``None`` or ``(T_hi, T_lo)``): the
    factor lives in exact whitening coordinates, ``x~ -> fl(x~^T T)`` in
    double-double (:func:`rows_in`); ``G``, ``theta`` and ``beta`` are then
    those of the mapped rows, and every pass that uses the factor maps its
    rows the same way (``beta`` of the original rows: :meth:`to_original`).
    ``Ginv`` (certified
    Gram path only) is ``G^{-1} = L^{-1} D^{-1}`` from the inverse of the
    well-conditioned scaled factor ``L``; whitening a block is then one GEMM
    instead of a much slower many-right-hand-side triangular solve, with
    relative error about ``eps * cond(L)`` (at most ``eps * 3e4``).
    """

    G: np.ndarray
    theta: np.ndarray
    beta: np.ndarray
    pd: bool
    robust: bool
    Ginv: object = None
    col_scale: object = None
    scaled_lambda_min: float = 0.0
    exact_passes: int = 0  # passes of the exact rank decision (rare: uncertified R)
    T: object = None

    def to_original(self, beta):
        """A coefficient vector in this factor's coordinates, in the original ones (``T b``)."""
        beta = np.asarray(beta, dtype=np.float64)
        if self.T is None:
            return beta
        T_hi, T_lo = self.T
        return dd_matmul(beta[None, :], T_hi.T, T_lo.T)[0]


def _singular_factor(p, robust):
    return Factor(np.eye(p), np.zeros(p), np.zeros(p), False, robust)


def factor_pass(source, weights=None, *, n_exclude=0, condition_max=GRAM_CONDITION_MAX,
                gram=None):
    """Factor ``S_w`` from scratch (one Gram pass, plus one TSQR pass if needed).

    Fast path: Cholesky of the column-scaled Gram matrix, accepted only when
    its condition number is at most ``condition_max`` (so the whitened
    leverages have relative error of order ``eps * condition_max``). Otherwise
    a row-sorted TSQR of ``[X~ y]`` gives the factor; it is declared singular
    when a diagonal entry of R is not above ``p sqrt(n) eps`` times the norm of
    its column without the ``n_exclude`` largest entries (numerical rank
    deficiency of the bulk of the rows).
    A few extreme rows thus do not make a full-rank bulk look singular; they
    get leverage close to 1 and are filtered, after which the factor is
    recomputed without them. ``gram``: the augmented Gram matrix of the rows
    if an earlier pass already computed it (unit weights only).
    """
    p = source.p
    S_aug = gram_pass(source, weights) if gram is None else np.asarray(gram)
    S = S_aug[:p, :p]
    diag = np.diag(S).copy()
    if np.all(np.isfinite(S_aug)) and np.all(diag > 0):
        scale = np.sqrt(diag)
        scaled = S / scale[:, None] / scale[None, :]
        try:
            L = linalg.cholesky(scaled, lower=True, check_finite=False)
            sv = linalg.svdvals(L, check_finite=False)
            ok = sv[-1] > 0 and (sv[0] / sv[-1]) ** 2 <= condition_max
        except linalg.LinAlgError:
            ok = False
        if ok:
            G = L * scale[:, None]
            theta = linalg.solve_triangular(G, S_aug[:p, p], lower=True, check_finite=False)
            beta = linalg.solve_triangular(G.T, theta, lower=False, check_finite=False)
            Linv = linalg.solve_triangular(L, np.eye(p), lower=True, check_finite=False)
            return Factor(G, theta, beta, True, False, Linv / scale[None, :], scale,
                          float(sv[-1]) ** 2)
    R_aug, _, R_unit = tsqr_pass(source, weights, n_exclude=n_exclude)
    R = R_aug[:p, :p]
    # Singular iff singular in exact arithmetic: either R certifies full rank
    # (backward-error bound), or an exact pass decides (exact Gram, exact
    # minors). No tolerance, so no cut that one row could move a design across.
    n_rows = source.n - (0 if weights is None else int(np.sum(weights.w <= 0)))
    exact, gram = 0, None
    if not _rank_certified(R_unit, n_rows):
        exact = 1
        gram = exact_gram_pass(source, weights)
        if gram is None or not exact_gram_is_pd(gram, p):
            singular = _singular_factor(p, True)
            singular.exact_passes = exact
            return singular
    # Full rank from here. Float leverages from R carry a relative error of
    # about p eps times its scaled condition number, and an R that overflowed
    # (a column whose norm exceeds the float64 maximum) has none: above
    # TRANSFORM_CONDITION, or not finite, the factor is computed again in exact
    # whitening coordinates, where the mapped rows are well conditioned and of
    # unit scale, whether the rank was certified or decided exactly.
    usable = bool(np.all(np.isfinite(R)) and np.all(np.diag(R) != 0))
    if not usable or _scaled_condition(R_unit) > TRANSFORM_CONDITION:
        if gram is None:
            exact += 1
            gram = exact_gram_pass(source, weights)
        T = exact_whitening_transform(gram, p)
        R_aug_t, _, R_unit_t = tsqr_pass(source, weights, n_exclude=n_exclude, transform=T)
        exact += 1
        R_t = R_aug_t[:p, :p]
        if (_rank_certified(R_unit_t, n_rows) and np.all(np.isfinite(R_t))
                and np.all(np.diag(R_t) != 0)):
            theta = R_aug_t[:p, p].copy()
            beta = linalg.solve_triangular(R_t, theta, lower=False, check_finite=False)
            return Factor(R_t.T.copy(), theta, beta, True, True, exact_passes=exact, T=T)
        # Beyond double-double's reach (a rank gap below ~1e-30 relative):
        # the float factor of the rows themselves, as below.
    if not usable:
        singular = _singular_factor(p, True)
        singular.exact_passes = exact
        return singular
    G = R.T.copy()
    theta = R_aug[:p, p].copy()
    beta = linalg.solve_triangular(R, theta, lower=False, check_finite=False)
    return Factor(G, theta, beta, True, True, exact_passes=exact)


