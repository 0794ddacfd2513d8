"""Numerical cores of ISSP: stable leverage and residual filtering, blockwise passes.

Everything here is a pure function of the data and public constants. Nothing in
this module is differentially private on its own: scores, weights, leverages and
residuals are secret intermediate values of :class:`ISSPRegressor` and must
never leave ``fit`` (ISSP spec §8.2).

Two implementations of each filter exist.

* **Reference** (``*_reference``): a direct transcription of the corrected
  algorithms (spec §6.2 and Algorithm 3), recomputing every leverage and every
  weighted least-squares fit from scratch. ``O(n p^2)`` per step; for tests.
* **Engine** (:func:`slf_engine`, :func:`srf_engine`): the production path of
  spec §9. It sees the data only through *passes* over a source of row blocks
  (:class:`ArrayRowSource` for arrays and memmaps, :class:`DaskRowSource` for
  Dask arrays; each pass is a block function and an associative combine,
  spec §9.5), keeps a small candidate set in memory and applies low-rank
  (rank-one) updates on it. Leverage filtering is order independent (spec
  §5.1(a): each level set is the largest stable subset), and residual
  filtering is Algorithm 4, so the engine returns the same scores and weights
  as the reference.

Floating point (spec §14). An extreme row makes a float64 Gram matrix useless
for the other rows. The engine therefore

1. accepts a Gram/Cholesky factor only with a certificate: the column-scaled
   Gram matrix must have condition number at most ``GRAM_CONDITION_MAX``;
   otherwise the factor is recomputed by a row-sorted Householder TSQR, which
   is row-wise backward stable and resolves the leverage of an extreme row
   (close to 1) without destroying the others;
2. never keeps using a factor after removing rows whose whitened Gram block
   ``Z_E Z_E^T`` has an eigenvalue above 1/2 (any removed row with leverage
   above 1/2 triggers this): it rebases, i.e. recomputes the factor of the kept
   rows from scratch in a new pass, instead of downdating.
"""

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg
from scipy.linalg import blas

from .._blockwise import _tree_sum, check_block_finite

__all__ = [
    "ArrayRowSource",
    "DaskRowSource",
    "leverage_thresholds",
    "residual_thresholds",
    "residual_thresholding",
    "stable_leverage_filtering",
    "stable_residual_filtering",
    "slf_engine",
    "srf_engine",
    "factor_pass",
    "gram_pass",
    "cross_pass",
    "tsqr_pass",
    "exact_dot",
    "exact_gram_is_pd",
    "exact_rank_pass",
]

_EPS = np.finfo(np.float64).eps
#: Largest condition number of the column-scaled Gram matrix for which the
#: Cholesky factor is trusted (relative leverage error about eps * this).
GRAM_CONDITION_MAX = 1e9
#: Residual filtering recomputes ``X^T W y`` from scratch (one pass) instead of
#: subtracting removed rows when the cancellation error of the subtraction,
#: as a residual, could exceed this fraction of ``R_0``.
RESIDUAL_REBASE_TOL = 1e-9


# ---------------------------------------------------------------------------
# Public schedules
# ---------------------------------------------------------------------------
def leverage_thresholds(L0, k, schedule="corrected"):
    """Leverage thresholds ``L_j``, ``j = 0..2k``.

    ``'corrected'`` (spec §5.1, normative):
    :math:`L_j = e^{(j-2k)/k} L_0/(1 + 2kL_0)`, so that the returned weights have
    leverage at most ``L0`` (Theorem 9(2)). ``'printed'`` is the paper's
    Algorithm 5, :math:`e^{j/k}L_0`, kept only to show in tests that it breaks
    Theorem 9(2).
    """
    j = np.arange(2 * k + 1, dtype=np.float64)
    if schedule == "corrected":
        top = L0 / (1.0 + 2.0 * k * L0)
        return np.exp((j - 2 * k) / k) * top
    if schedule == "printed":
        return np.exp(j / k) * L0
    raise ValueError("schedule must be 'corrected' or 'printed'.")


def residual_thresholds(R0, L0, k):
    """Residual ladder :math:`R_j = R_0 e^{108 k L_0 j}`, ``j = 0..2k`` (spec §6.1)."""
    with np.errstate(over="ignore"):  # only hand-picked (non-private) L0 can overflow
        return R0 * np.exp(108.0 * k * L0 * np.arange(2 * k + 1, dtype=np.float64))


# ---------------------------------------------------------------------------
# Row sources and blockwise passes
#
# Every pass is a module-level *block function*
# ``fn(offset, X_block, y_block, params, into=None) -> partial`` (``X_block`` is
# raw X after the public clip, without the ones column; ``offset`` is the
# global index of its first row) plus an associative ``combine(a, b)`` of
# partials. ``into``, given only by the sequential source, is the running
# partial, which the function may update in place (``combine(into, partial)``
# without temporaries). A source runs a pass with ``source.reduce(fn,
# combine, params)``: :class:`ArrayRowSource` folds the blocks in order on
# this process, :class:`DaskRowSource` runs one task per Dask block on the
# workers, adds the partials in a tree and computes only the reduced result.
# Block functions are pure and draw nothing random.
# ---------------------------------------------------------------------------
def _prepare_block(X, y, clip, check_finite):
    """Raw block -> float64 ``(X clipped, y)``; the finiteness check of the first pass."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if check_finite:
        check_block_finite(X, "X")
        check_block_finite(y, "y")
    if clip is not None:
        X = np.clip(X, -clip, clip)
    return X, y


def run_block(fn, offset, X, y, clip, check_finite, params, into=None):
    """Prepare one raw block (clip) and apply the block function ``fn``.

    Without a clip the finiteness check of the first pass is left to ``fn``,
    which fuses it with its own read of each cache-sized piece
    (:func:`gram_piece_add`); with a clip it must run first, because
    clipping maps an infinite entry to a finite one.
    """
    fused = check_finite and clip is None
    X, y = _prepare_block(X, y, clip, check_finite and not fused)
    if fused:
        return fn(offset, X, y, params, into, check_finite=True)
    return fn(offset, X, y, params, into)


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


class ArrayRowSource:
    """Row blocks ``(offset, X_block, y_block)`` of an array or memmap, folded in order.

    ``X~`` is ``X`` with entries clipped to ``[-clip, clip]`` (if ``clip`` is
    given; a public per-row map) and a ones column appended (if
    ``fit_intercept``). With ``check_finite=True`` the first complete pass
    raises ``ValueError`` on a non-finite entry (streamed inputs are validated
    during the first pass, which releases nothing). Only one block is
    materialised at a time, so a ``np.memmap`` is streamed from disk with
    memory ``O(chunk_size * p)``.
    """

    def __init__(self, X, y, *, fit_intercept=True, chunk_size=None, clip=None,
                 check_finite=False):
        self.check_finite = bool(check_finite)
        self.X = X
        self.y = y
        self.n = int(X.shape[0])
        self.d = int(X.shape[1])
        self.fit_intercept = bool(fit_intercept)
        self.p = self.d + int(self.fit_intercept)
        self.chunk_size = self.n if chunk_size is None else max(1, int(chunk_size))
        self.clip = clip

    def reduce(self, fn, combine, params, *, stop=None):
        """Fold ``fn`` over the blocks in order; ``stop(partial)`` may end the pass early.

        ``combine`` is not needed here (``fn`` accumulates into the running
        partial); it is part of the signature shared with :class:`DaskRowSource`.
        """
        checking = self.check_finite
        acc = None
        for start in range(0, self.n, self.chunk_size):
            end = min(start + self.chunk_size, self.n)
            acc = run_block(fn, start, self.X[start:end], self.y[start:end], self.clip,
                            checking, params, acc)
            if stop is not None and stop(acc):
                return acc  # incomplete pass: finiteness not yet fully checked
        if checking:
            # Validated once, during the first complete pass (before any noise).
            self.check_finite = False
        return acc

    def augment(self, Xraw):
        """Append the ones column (if ``fit_intercept``) to raw rows (a copy)."""
        return _augment(Xraw, self.fit_intercept)

    def rows(self, idx):
        """``X~`` and ``y`` of the rows ``idx`` (sorted global indices)."""
        idx = np.asarray(idx, dtype=np.int64)
        Xr = np.asarray(self.X[idx], dtype=np.float64).reshape(len(idx), self.d)
        if self.clip is not None:
            Xr = np.clip(Xr, -self.clip, self.clip)
        return self.augment(Xr), np.asarray(self.y[idx], dtype=np.float64).reshape(-1)


class DaskRowSource:
    """Row blocks of a Dask array: every pass is one task per block on the workers.

    The blocks are the row chunks of ``X`` (``y`` is rechunked to match);
    their global offsets come from the public chunk sizes. ``reduce`` maps
    the block function over the blocks as delayed tasks, adds the partials
    with a delayed tree (:func:`skprivreg._blockwise._tree_sum`) and computes
    only the reduced (small) result. The early stop of the sequential source
    is not available: a pass always reads every block (same outcome). With
    ``check_finite=True`` (default) the block functions of the first pass
    check X and y for NaN or infinity on the workers.
    """

    def __init__(self, X, y, *, fit_intercept=True, clip=None, check_finite=True):
        X = X.rechunk({1: -1})
        y = y.reshape(-1).rechunk((X.chunks[0],))
        self.X, self.y = X, y
        self.n = int(X.shape[0])
        self.d = int(X.shape[1])
        self.fit_intercept = bool(fit_intercept)
        self.p = self.d + int(self.fit_intercept)
        self.clip = clip
        self.check_finite = bool(check_finite)
        self.offsets = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
        self._x_blocks = X.to_delayed().ravel()
        self._y_blocks = y.to_delayed().ravel()

    def reduce(self, fn, combine, params, *, stop=None):
        """``combine`` over all blocks of ``fn(offset, X_block, y_block, params)``."""
        import dask

        params_task = dask.delayed(params, traverse=False)
        parts = [
            dask.delayed(run_block, pure=True)(fn, int(off), xb, yb, self.clip,
                                               self.check_finite, params_task)
            for off, xb, yb in zip(self.offsets, self._x_blocks, self._y_blocks)
        ]
        result = _tree_sum(parts, combine).compute()
        self.check_finite = False
        return result

    def augment(self, Xraw):
        return _augment(Xraw, self.fit_intercept)

    def rows(self, idx):
        """``X~`` and ``y`` of the rows ``idx`` (sorted): only their blocks are read."""
        idx = np.asarray(idx, dtype=np.int64)
        Xr, yr = self.X[idx], self.y[idx]
        import dask

        Xr, yr = dask.compute(Xr, yr)
        Xr, yr = _prepare_block(Xr.reshape(len(idx), self.d), yr, self.clip, False)
        return self.augment(Xr), yr


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


def _add_partials(a, b):
    """Associative combine of tuples of arrays (sums)."""
    return tuple(x + y for x, y in zip(a, b))


def _gram_block(offset, Xb, yb, params, into=None, check_finite=False):
    """Upper triangle of ``[X~ y]^T diag(w) [X~ y]`` of one block, added into ``into``."""
    p, intercept, weights = params
    S = np.zeros((p + 1, p + 1)) if into is None else into[0]
    wb = weights.block(offset, offset + Xb.shape[0])
    gram_piece_add(S, Xb, yb, intercept, root=None if wb is None else np.sqrt(wb),
                   check_finite=check_finite)
    return (S,)


def gram_pass(source, weights=None):
    """One pass: ``[X~ y]^T diag(w) [X~ y]`` as a (p+1, p+1) matrix (float64 BLAS)."""
    weights = RowWeights() if weights is None else weights
    (S,) = source.reduce(_gram_block, _add_partials,
                         (source.p, source.fit_intercept, weights))
    upper = np.triu(S)
    return upper + np.triu(upper, 1).T


def _cross_block(offset, Xb, yb, params, into=None, check_finite=False):
    """``X~^T diag(w) y`` of one block (rows of weight 0 skipped), added into ``into``."""
    p, intercept, weights = params
    if check_finite:
        check_block_finite(Xb, "X")
        check_block_finite(yb, "y")
    t = np.zeros(p) if into is None else into[0]
    wb = weights.block(offset, offset + Xb.shape[0])
    if wb is not None:
        keep = wb > 0
        Xb, yb = Xb[keep], yb[keep] * wb[keep]
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


def cross_pass(source, weights=None):
    """One pass: ``X~^T diag(w) y`` summed from scratch over the rows of positive weight.

    The scale-robust update of residual filtering and of the release: after
    rows are removed, their contribution is never subtracted from a total
    (with ``|y_j| >= 1e20`` the subtraction cancels catastrophically); the
    kept rows are summed again (spec §14 rebase rule, applied to ``X^T W y``).
    """
    weights = RowWeights() if weights is None else weights
    (t,) = source.reduce(_cross_block, _add_partials,
                         (source.p, source.fit_intercept, weights))
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


# ---------------------------------------------------------------------------
# Exact Gram matrix (the numerical-rank decision)
#
# Whether S_A is singular decides SCORE1 = k (spec §6.2 convention). A
# tolerance on a floating-point factor puts a cut at some rank gap, and one
# ordinary row can move a design across it. Instead the decision is exact:
# the Gram matrix of the rows (float64 inputs) is summed exactly in integers
# and its leading principal minors are computed exactly (Bareiss), so
# "singular" means singular in exact arithmetic, the arithmetic of the proof.
# ---------------------------------------------------------------------------
_LIMB = 18  # bits per limb: |limb| < 2^18, a block of < 2^35 rows sums exactly in float64


def _int_significands(v):
    """``v = M 2^e`` with integer ``|M| < 2^53`` (exact for every finite float)."""
    m, e = np.frexp(v)
    return (m * 2.0**53).astype(np.int64), e.astype(np.int64) - 53


def exact_dot(a, b):
    """``sum_i a_i b_i`` exactly, as ``(t, e)`` with value ``t 2^e`` (Python int ``t``).

    Each product of 53-bit significands is split into three partial
    products below 2^54 (26/27-bit halves) and each of those into 18-bit
    limbs; limbs are summed per product exponent with ``np.bincount`` in
    float64, exactly since every partial sum stays below 2^53.
    """
    Ma, ea = _int_significands(np.asarray(a, dtype=np.float64))
    Mb, eb = _int_significands(np.asarray(b, dtype=np.float64))
    if len(Ma) == 0:
        return 0, 0
    negative = (Ma < 0) != (Mb < 0)
    Ma, Mb = np.abs(Ma), np.abs(Mb)
    low = (1 << 26) - 1
    ha, la, hb, lb = Ma >> 26, Ma & low, Mb >> 26, Mb & low
    e = ea + eb
    base = int(e.min())
    group = e - base  # at most ~4200 distinct exponents: bincount, no sort
    size = int(group.max()) + 1
    total = 0
    mask = (1 << _LIMB) - 1
    for t, shift in ((ha * hb, 52), (ha * lb + la * hb, 26), (la * lb, 0)):
        np.negative(t, out=t, where=negative)
        for limb in range(3):
            # floor shifts of a negative t give limbs in [0, 2^18) of its two's
            # complement; the top limb (arithmetic shift) carries the sign.
            part = t >> (_LIMB * limb)
            if limb < 2:
                part = part & mask
            sums = np.bincount(group, weights=part.astype(np.float64), minlength=size)
            extra = shift + _LIMB * limb
            for g in np.flatnonzero(sums):
                total += int(sums[g]) << (int(g) + extra)
    return total, base


def _exact_add(u, v):
    (tu, eu), (tv, ev) = u, v
    e = min(eu, ev)
    return (tu << (eu - e)) + (tv << (ev - e)), e


def exact_gram(M):
    """Exact upper triangle of ``M^T M``: ``{(j, l): (t, e)}``, value ``t 2^e``."""
    q = M.shape[1]
    return {(j, l): exact_dot(M[:, j], M[:, l]) for j in range(q) for l in range(j, q)}


def _exact_gram_add(a, b):
    if a is None:
        return b
    return {key: _exact_add(a[key], b[key]) for key in a}


def exact_gram_is_pd(gram, p):
    """True iff the exact symmetric matrix ``gram`` (from :func:`exact_gram`) is PD.

    Bareiss fraction-free elimination on the integer matrix ``2^-e_min G``:
    the k-th pivot is the k-th leading principal minor, all positive iff PD.
    """
    e_min = min(e for _, e in gram.values())
    A = [[0] * p for _ in range(p)]
    for (j, l), (t, e) in gram.items():
        A[j][l] = A[l][j] = t << (e - e_min)
    prev = 1
    for i in range(p):
        if A[i][i] <= 0:
            return False
        for r in range(i + 1, p):
            for c in range(i + 1, p):
                A[r][c] = (A[r][c] * A[i][i] - A[r][i] * A[i][c]) // prev
        prev = A[i][i]
    return True


def _tsqr_block(offset, Xb, yb, params, into=None, check_finite=False):
    """Partial ``(R, column tops, evicted sum of squares, n_exclude)`` of one block.

    ``R`` is the row-sorted R factor of ``diag(sqrt(w)) [X~ y]`` of the rows
    seen so far: folding into ``into`` factors ``[R_prev; block]`` in one QR.
    """
    p, intercept, weights, n_exclude = params
    if check_finite:
        check_block_finite(Xb, "X")
        check_block_finite(yb, "y")
    wb = weights.block(offset, offset + Xb.shape[0])
    M = np.column_stack([_augment(Xb, intercept) if intercept else Xb, yb])
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


def _exact_gram_block(offset, Xb, yb, params, into=None, check_finite=False):
    """Exact Gram sums of the rows of positive weight of one block (unweighted)."""
    p, intercept, weights = params
    wb = weights.block(offset, offset + Xb.shape[0])
    if wb is not None:
        Xb = Xb[wb > 0]
    gram = exact_gram(_augment(Xb, intercept) if intercept else Xb)
    return (_exact_gram_add(None if into is None else into[0], gram),)


def _exact_gram_combine(a, b):
    return (_exact_gram_add(a[0], b[0]),)


def exact_rank_pass(source, weights=None):
    """One pass: is ``S_w`` PD in exact arithmetic? (w > 0 rows span R^p, exactly.)"""
    weights = RowWeights() if weights is None else weights
    (gram,) = source.reduce(_exact_gram_block, _exact_gram_combine,
                            (source.p, source.fit_intercept, weights))
    return gram is not None and exact_gram_is_pd(gram, source.p)


#: Certificate of full rank from a Householder R of the rows scaled to unit
#: max-norm (scaling rows keeps the rank; Higham 2002, Thm 19.4: columnwise
#: backward error gamma~_{np} ||a_j||): with D the inverse column norms,
#: sigma_min(R D) > RANK_CERTIFICATE * n p^{3/2} eps proves X full rank.
RANK_CERTIFICATE = 10.0


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


def tsqr_pass(source, weights=None, *, n_exclude=0):
    """One pass: row-sorted TSQR of ``diag(sqrt(w)) [X~ y]`` and robust column norms.

    Returns ``(R, bulk_norms, R_unit)``: the (p+1, p+1) R factor, ``R_unit``
    the (p, p) R factor of the kept rows of ``X~`` each scaled to unit
    max-norm (for the rank certificate), and for each column
    of ``X~`` the norm of its entries without the ``n_exclude`` largest in
    absolute value (the scale of the bulk of the data, untouched by a few
    extreme rows; used for the numerical-rank decision).
    """
    weights = RowWeights() if weights is None else weights
    p = source.p
    R, _, bulk_sq, _, Ru = source.reduce(
        _tsqr_block, _tsqr_combine, (p, source.fit_intercept, weights, int(n_exclude))
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
    filtering removes everything (spec §6.2 convention). ``Ginv`` (certified
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
    deficiency of the bulk of the rows; spec §14 and the float caveat of §8.5).
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
    # A factor that float64 cannot use (a zero or non-finite pivot of R while
    # the exact Gram matrix is PD: a rank gap below float64's resolution of R)
    # is the one remaining floating-point caveat; it is treated as singular.
    n_rows = source.n - (0 if weights is None else int(np.sum(weights.w <= 0)))
    exact = 0
    if not _rank_certified(R_unit, n_rows):
        exact = 1
        if not exact_rank_pass(source, weights):
            singular = _singular_factor(p, True)
            singular.exact_passes = exact
            return singular
    if not (np.all(np.isfinite(R)) and np.all(np.diag(R) != 0)):
        singular = _singular_factor(p, True)
        singular.exact_passes = exact
        return singular
    G = R.T.copy()
    theta = R_aug[:p, p].copy()
    beta = linalg.solve_triangular(R, theta, lower=False, check_finite=False)
    return Factor(G, theta, beta, True, True, exact_passes=exact)


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


def _scan_block(offset, Xb, yb, params, into=None, check_finite=False):
    """Partial ``(by_leverage, by_residual, n above the saturation threshold, m)`` of a block."""
    P = params
    d, p, m_top = P.d, P.p, P.n_candidates
    q = d
    intercept = P.intercept
    if check_finite:
        check_block_finite(Xb, "X")
        check_block_finite(yb, "y")
    m = Xb.shape[0]
    gidx = np.arange(offset, offset + m, dtype=np.int64)
    wb = P.weights.block(offset, offset + m)
    if wb is not None:
        alive = wb > 0
        Xb, yb, gidx = Xb[alive], yb[alive], gidx[alive]
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
              saturate=None):
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

# ---------------------------------------------------------------------------
# Stable leverage filtering (spec §6.2), engine
# ---------------------------------------------------------------------------
@dataclass
class SLFResult:
    """``score`` = SCORE1 (integer in 0..k); ``W`` = k * w (integers) or None when score = k.

    ``removed_idx`` / ``removed_level``: rows that left ``A`` and the level at
    which they left (levels at or below ``saturated_level`` were not
    completed). ``factor``/``scan``: the factor of all rows and its first
    scan, reused by residual filtering when nothing was removed.
    """

    score: int
    W: object
    removed_idx: np.ndarray
    removed_level: np.ndarray
    saturated_level: int
    n_passes: int
    factor: object = None
    scan: object = None


def slf_score(n_removed_by_level, k, sat):
    """SCORE1 = min(k, min over sat < j <= k of (#{removed at level >= j} + j))."""
    best = k
    for j in range(max(0, sat + 1), k + 1):
        best = min(best, n_removed_by_level(j) + j)
    return int(best)


def _slf_weights(n, k, removed_idx, removed_level):
    W = np.full(n, k, dtype=np.int64)
    W[removed_idx] = np.clip(2 * k - np.asarray(removed_level, dtype=np.int64), 0, k)
    return W


def slf_engine(source, L0, k, *, n_candidates=None, schedule="corrected", dense_weights=True,
               gram=None):
    """Corrected StableLeverageFiltering (spec §6.2) by passes over ``source``.

    Leverages under the current set ``A = [n] \\ E`` come from the base factor
    ``S_base = G G^T`` by the low-rank formula
    ``h_i = z_i^T (I - Z_E^T Z_E)^{-1} z_i`` (``z = G^{-1} x~``) on the candidate
    rows; the rows outside the candidates are bounded by
    ``h_outside / lambda_min(I - Z_E^T Z_E)``. When that bound could reach the
    current threshold, or when ``lambda_min < 1/2`` (a removed row had leverage
    above 1/2, spec §14), the factor of the kept rows is recomputed from
    scratch (rebase). Each level set is the unique largest stable subset
    (spec §5.1(a)), so removing rows in these batches gives exactly the
    reference result.
    """
    n, p = source.n, source.p
    M = max(4 * k + 16, 32) if n_candidates is None else max(int(n_candidates), k + 1)
    thresholds = leverage_thresholds(L0, k, schedule)
    removed_idx, removed_level = [], []
    removed_set = set()
    passes = 0
    first = {}

    def rebase(level):
        nonlocal passes
        weights = RowWeights.from_pairs(removed_idx, np.zeros(len(removed_idx)))
        # The Gram matrix of all rows may come from an earlier pass (``gram``).
        given = gram if not removed_idx and not first else None
        factor = factor_pass(source, weights, n_exclude=k, gram=given)
        passes += int(given is None) + int(factor.robust) + factor.exact_passes
        if not factor.pd:
            return factor, None
        # Every row above L_level leaves in the next round of this level: once
        # k - |removed| of them are seen, the level saturates for certain.
        lev, res = scan_pass(
            source, beta=factor.beta, n_candidates=M, weights=weights, factor=factor,
            screen=0.5 * thresholds[0], saturate=(thresholds[level], k - len(removed_idx)),
        )
        passes += 1
        if not first:
            first["factor"], first["scan"] = factor, (lev, res)
        return factor, lev

    factor, lev = rebase(2 * k)
    sat = -1
    if factor.pd:
        Zc = linalg.solve_triangular(factor.G, lev.X.T, lower=True, check_finite=False).T
        alive = np.ones(len(lev.idx), dtype=bool)
        E_rows = []  # candidate positions removed since the last rebase
        fresh = True
    for j in range(2 * k, -1, -1):
        if sat >= 0:
            break
        L_j = thresholds[j]
        while True:
            if len(removed_idx) >= k or not factor.pd or lev.saturated:
                sat = j
                break
            if E_rows:
                ZE = Zc[E_rows]
                with np.errstate(over="ignore", invalid="ignore"):
                    K = np.eye(p) - ZE.T @ ZE
                # A removed row's whitened z has ||z||^2 = h <= 1 in exact
                # arithmetic; an overflowing one (float factor of an extreme
                # row) forces a rebase like any leverage above 1/2.
                lam_min = (linalg.eigvalsh(K, subset_by_index=[0, 0], check_finite=False)[0]
                           if np.all(np.isfinite(K)) else -math.inf)
                if not lam_min >= 0.5:
                    factor, lev = rebase(j)
                    if factor.pd:
                        Zc = linalg.solve_triangular(
                            factor.G, lev.X.T, lower=True, check_finite=False
                        ).T
                        alive = np.ones(len(lev.idx), dtype=bool)
                        E_rows, fresh = [], True
                    continue
                chol = linalg.cho_factor(K, lower=True, check_finite=False)
                live = np.flatnonzero(alive)
                Y = linalg.cho_solve(chol, Zc[live].T, check_finite=False)
                h = np.einsum("ij,ji->i", Zc[live], Y)
            else:
                lam_min = 1.0
                live = np.flatnonzero(alive)
                h = lev.key[live]
            outside = lev.outside_max / lam_min
            if outside > L_j:
                if not fresh:
                    factor, lev = rebase(j)
                    if factor.pd:
                        Zc = linalg.solve_triangular(
                            factor.G, lev.X.T, lower=True, check_finite=False
                        ).T
                        alive = np.ones(len(lev.idx), dtype=bool)
                        E_rows, fresh = [], True
                    continue
                # Fresh factor and a row outside the candidates above L_j: all
                # M >= k candidates are above it too, so the level saturates.
                sat = j
                break
            out = live[h > L_j]
            if len(out) == 0:
                break
            for pos in out:
                removed_idx.append(int(lev.idx[pos]))
                removed_level.append(j)
                removed_set.add(int(lev.idx[pos]))
            alive[out] = False
            E_rows.extend(int(pos) for pos in out)
            fresh = False
    removed_idx = np.asarray(removed_idx, dtype=np.int64)
    removed_level = np.asarray(removed_level, dtype=np.int64)
    score = slf_score(lambda j: int(np.sum(removed_level >= j)), k, sat)
    W = None
    if score < k:
        W = _slf_weights(n, k, removed_idx, removed_level) if dense_weights else True
    return SLFResult(
        score, W, removed_idx, removed_level, sat, passes,
        first.get("factor"), first.get("scan"),
    )


# ---------------------------------------------------------------------------
# Stable residual filtering, Algorithm 4 (engine)
# ---------------------------------------------------------------------------
@dataclass
class SRFResult:
    """``score_num`` = k * SCORE2 (integer); ``F_idx``/``F_level``: rows removed and the level.

    ``V`` (integers ``k^2 v_i``) is built on request from ``W`` and ``F``;
    ``factor`` is the factor of ``S_w`` used for the release.
    """

    score_num: int
    F_idx: np.ndarray
    F_level: np.ndarray
    saturated_level: int
    n_passes: int
    factor: object = None
    Fz: object = None
    Fy: object = None
    Fw: object = None


def srf_engine(
    source, W_idx, W_val, L0, R0, k, *, n_candidates=None, base=None, base_scan=None,
    h_bound=None,
):
    """Algorithm 4 (StableResidualFiltering, rank-one updates) by passes over ``source``.

    ``W_idx``/``W_val``: rows with ``k w_i < k`` and their numerators (all other
    rows have ``w_i = 1``). ``base``/``base_scan``: factor of ``S_w`` and a
    residual scan under ``beta_w`` if already available (clean path: one
    factor for everything). ``h_bound``: an upper bound on ``h_i(w)`` over
    ``supp(w)`` (``L0`` by Theorem 9(2) when ``None``; a factor 2 of slack).

    Rows are removed greedily by the largest ``|y_i - x~_i^T beta_u|`` (ties to
    the smallest global index). Residuals of candidates are exact; the other
    rows are bounded by ``r_outside + sqrt(h_bound) ||theta_u - theta_scan||``
    (Cauchy-Schwarz in whitened coordinates); when the bound could change the
    argmax or the stop decision, a residual pass (``O(n p)``) rescans.
    Scores use integer arithmetic:
    ``k SCORE^(j) = min(k^2, sum_E (k - W_i) + sum_{F_j} W_i + k j)``.
    """
    p = source.p
    M = max(4 * k + 16, 32) if n_candidates is None else max(int(n_candidates), 2)
    W_idx = np.asarray(W_idx, dtype=np.int64)
    W_val = np.asarray(W_val, dtype=np.int64)
    weights = RowWeights.from_pairs(W_idx, W_val / k)
    w_of = dict(zip(W_idx.tolist(), W_val.tolist()))
    deficit_E = int(np.sum(k - W_val))
    R = residual_thresholds(R0, L0, k)
    passes = 0
    if base is None:
        base = factor_pass(source, weights, n_exclude=k)
        passes += 1 + int(base.robust) + base.exact_passes
    if not base.pd:
        # Impossible in exact arithmetic when SCORE1 < k (Theorem 9(2)); FAIL.
        return SRFResult(k * k, np.zeros(0, np.int64), np.zeros(0, np.int64), 2 * k, passes)
    G = base.G
    if h_bound is None:
        # Exact max leverage under S_w over supp(w), and the first residual
        # candidates under beta_w, from one whitening pass (rare path).
        supp = RowWeights.from_pairs(W_idx[W_val == 0], np.zeros(int(np.sum(W_val == 0))))
        lev, first_scan = scan_pass(source, beta=base.beta, n_candidates=M, weights=supp,
                                    factor=base)
        passes += 1
        h_bound = max(float(np.max(lev.key, initial=0.0)), lev.outside_max) * (1 + 1e-9)
        if base_scan is None:
            base_scan = first_scan
    hb = float(h_bound)
    F_idx, F_level, F_z, F_y, F_w = [], [], [], [], []
    # theta_u = K^{-1} b_u with K = I - Z_F^T diag(om) Z_F (well conditioned:
    # removed rows have leverage <= L0) and b_u = G^{-1} X~^T diag(u) y. b_u is
    # updated by subtracting the removed rows from a reference (b_ref, summed
    # over the rows kept at the time, the first n_ref of F removed). When the
    # subtraction could cancel (a removed label so large that the rounding error
    # of b_ref and of the subtracted terms, seen through sqrt(h_bound), reaches
    # RESIDUAL_REBASE_TOL * R_0), b_ref is recomputed from scratch over the kept
    # rows (cross_pass): one pass, the rebase rule for residual filtering.
    ref = {"b": base.theta.copy(), "n": 0, "mag": magnitude(base.theta)}

    def current_theta():
        nonlocal passes
        if not F_idx:
            return ref["b"].copy()
        Z = np.asarray(F_z)
        om = np.asarray(F_w, dtype=np.float64) / k
        new = slice(ref["n"], len(F_idx))
        Fy = np.asarray(F_y)
        terms = Z[new].T * (om[new] * Fy[new])
        mag = ref["mag"] + magnitude(terms)
        if _EPS * p * mag * math.sqrt(hb) > RESIDUAL_REBASE_TOL * R[0]:
            kept = RowWeights.from_pairs(
                np.concatenate([W_idx, np.asarray(F_idx, dtype=np.int64)]),
                np.concatenate([W_val / k, np.zeros(len(F_idx))]),
            )
            b_ref = linalg.solve_triangular(G, cross_pass(source, kept), lower=True,
                                            check_finite=False)
            passes += 1
            ref.update(b=b_ref, n=len(F_idx), mag=magnitude(b_ref))
            b = b_ref
        else:
            b = ref["b"] - terms.sum(axis=1)
        K = np.eye(p) - (Z.T * om) @ Z
        return linalg.cho_solve(linalg.cho_factor(K, lower=True, check_finite=False), b)

    def rescan(theta):
        nonlocal passes
        beta = linalg.solve_triangular(G.T, theta, lower=False, check_finite=False)
        drop = RowWeights.from_pairs(
            np.concatenate([W_idx[W_val == 0], np.asarray(F_idx, dtype=np.int64)]),
            np.zeros(int(np.sum(W_val == 0)) + len(F_idx)),
        )
        _, res = scan_pass(source, beta=beta, n_candidates=M, weights=drop)
        passes += 1
        return res

    theta_u = base.theta.copy()
    if base_scan is not None:
        cand = base_scan
    else:
        cand = rescan(theta_u)
    theta_scan = theta_u.copy()
    fresh = True
    alive = np.ones(len(cand.idx), dtype=bool)
    level_deficit = {}
    count = 0
    sat = -1
    for j in range(2 * k, -1, -1):
        while True:
            if count >= k:
                break
            live = np.flatnonzero(alive)
            beta_u = linalg.solve_triangular(G.T, theta_u, lower=False, check_finite=False)
            r = np.abs(cand.y[live] - cand.X[live] @ beta_u)
            if len(live):
                best = live[np.lexsort((cand.idx[live], -r))[0]]
                r_best = float(np.abs(cand.y[best] - cand.X[best] @ beta_u))
            else:
                best, r_best = -1, -np.inf
            if fresh:
                bound = cand.outside_max
            else:
                bound = cand.outside_max + math.sqrt(hb) * _safe_norm(theta_u - theta_scan)
            if r_best > R[j]:
                certain = fresh or bound < r_best
            else:
                certain = fresh or bound <= R[j]
            if not certain:
                cand = rescan(theta_u)
                theta_scan = theta_u.copy()
                alive = np.ones(len(cand.idx), dtype=bool)
                fresh = True
                continue
            if r_best <= R[j] or best < 0:
                break
            gi = int(cand.idx[best])
            x_best = cand.X[best]
            z = linalg.solve_triangular(G, x_best, lower=True, check_finite=False)
            F_idx.append(gi)
            F_level.append(j)
            F_z.append(z)
            F_y.append(float(cand.y[best]))
            F_w.append(w_of.get(gi, k))
            alive[best] = False
            count += 1
            theta_u = current_theta()
            fresh = False
        if count >= k:
            sat = j
            break
        level_deficit[j] = deficit_E + int(sum(F_w))
    score_num = k * k
    for j in range(0, k + 1):
        if j <= sat:
            continue
        score_num = min(score_num, k * k, level_deficit[j] + k * j)
    return SRFResult(
        int(score_num),
        np.asarray(F_idx, dtype=np.int64),
        np.asarray(F_level, dtype=np.int64),
        sat,
        passes,
        base,
        np.asarray(F_z).reshape(len(F_idx), p),
        np.asarray(F_y),
        np.asarray(F_w, dtype=np.int64),
    )


def srf_weights(n, k, W, F_idx, F_level):
    """V = k^2 v: ``V_i = W_i c_i`` with ``c_i`` the surviving levels in k+1..2k."""
    V = np.asarray(W, dtype=np.int64) * k
    F_level = np.asarray(F_level, dtype=np.int64)
    V[np.asarray(F_idx, dtype=np.int64)] = np.asarray(W)[F_idx] * np.clip(
        2 * k - F_level, 0, k
    )
    return V


# ---------------------------------------------------------------------------
# Reference implementations (direct recomputation; for tests)
# ---------------------------------------------------------------------------
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
    src = ArrayRowSource(X[keep] * np.sqrt(w[keep])[:, None], np.zeros(int(keep.sum())),
                         fit_intercept=False)
    factor = factor_pass(src, n_exclude=n_exclude)
    if not factor.pd:
        return np.full(n, np.inf), False
    Z = linalg.solve_triangular(factor.G, X.T, lower=True, check_finite=False)
    return np.einsum("ij,ij->j", Z, Z), True


def _weighted_ols(X, y, w):
    keep = w > 0
    root = np.sqrt(w[keep])
    src = ArrayRowSource(X[keep] * root[:, None], y[keep] * root, fit_intercept=False)
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
    always and the same ``V`` whenever ``SCORE2 < k`` (spec §3.4).
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
    src = ArrayRowSource(X, y, fit_intercept=False, chunk_size=chunk_size)
    mod = np.flatnonzero(W < k)
    res = srf_engine(src, mod, W[mod], L0, R0, k, n_candidates=n_candidates)
    if res.score_num >= k * k:
        return res.score_num, None
    return res.score_num, srf_weights(n, k, W, res.F_idx, res.F_level)


def stable_leverage_filtering(X, L0, k, *, schedule="corrected", method="engine",
                              early_stop=True, n_candidates=None, chunk_size=None):
    """StableLeverageFiltering with the corrected schedule: ``(SCORE1, W = k w or None)``.

    ``method='reference'`` recomputes every leverage from scratch
    (``early_stop=False`` runs every level even after saturation and always
    returns ``W``); ``'engine'`` is the production path (:func:`slf_engine`).
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if method == "engine":
        src = ArrayRowSource(X, np.zeros(n), fit_intercept=False, chunk_size=chunk_size)
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
