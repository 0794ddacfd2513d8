"""Block functions of :class:`~skprivreg.linear_model.LinearRegression` (pure; one read each).

Each pass of the estimator sums a statistic of the *mapped* rows
``z = clip((x - center) / half, -1, 1)`` (a :class:`RangeMap`) and labels
``u = clip((y - y_center) / y_half, -1, 1)`` over cache-sized blocks.

**Raw space.** Clipping each entry to its declared range and then mapping
is the same as mapping and then clipping to ``[-1, 1]``, and the map is
affine, ``z = D x + e`` with ``D = diag(1 / half)`` and ``e = -center / half``.
So the passes sum the *range-clipped raw rows* ``X`` and map the sums:

* ``Z^T Z = D (X^T X) D + D s e^T + e s^T D + m e e^T`` with ``s = X^T 1``
  (once per pass, :func:`first_pass_stats`),
* ``Z^T v = D (X^T v) + e (1^T v)``,
* ``Z w = X (D w) + e^T w``,

with one product on the block as it is stored. A block whose entries all lie
inside their ranges (the block's minimum and maximum) is used as it is; a
block with an entry outside is clipped in a block-sized copy (a NaN or an
infinity is refused there by the first pass); the residual passes read the
rows of a Fortran-ordered array (a data frame's) as stored and multiply
only the rows outside their ranges again, clipped (:func:`_strided_products`).
Both cases give the statistics
of the clipped rows (up to floating-point rounding), so which case a block
falls in changes no released value. It changes how long the pass takes, and
timing is not covered by the privacy guarantee (as for every fit: clipping
costs time only for blocks that need it).

Raw space is used only with declared ranges (a public map with per-entry
clipping, after which ``||z|| <= sqrt(d)`` holds with no row clip) and a
moderate offset (``|center| <= _RAW_OFFSET_LIMIT * half``, a public fact:
far from the origin, the expansion above would cancel digits) and entries
of magnitude at most ``_RAW_MAGNITUDE_LIMIT`` (so that no raw sum can
overflow). Otherwise (private ranges, rows clipped to a released norm
bound, far offsets, vast ranges) each block is mapped and clipped into a
float64 copy (:func:`_mapped`).
"""

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._blocks import as_float64_block, is_column_strided, workspace, workspace_like
from .._gram import FUSED_PIECE_BYTES, cache_block_rows, fused_layout, symmetric_from_upper
from .._rows import check_block_finite
from ..bounds import clip_threshold, row_norms
from ..mechanisms import sqrt_at_least

__all__ = [
    "INTERCEPT",
    "RangeMap",
    "feature_sum_block",
    "first_pass_block",
    "first_pass_stats",
    "gradient_block",
    "raw_space",
    "residual_moment_block",
    "selection_block",
]

#: Value of the constant column appended for the intercept.
INTERCEPT = 1.0
# Largest |center / half| of a map whose statistics come from the raw rows:
# the expansion's rounding error is about (1 + limit)^2 machine epsilons of
# the mapped sums.
_RAW_OFFSET_LIMIT = 16.0
# Largest entry magnitude of a map whose statistics come from the raw rows:
# X^T X sums n products of up to this squared, finite for n below 1e108.
# Wider ranges are mapped first (|z| <= 1), so no sum of any n overflows:
# a raw Gram matrix that one row could make infinite failed after the spend.
_RAW_MAGNITUDE_LIMIT = 1e100
# Smallest half-width of a map whose statistics come from the raw rows: a
# product of two entries stays in the normal range (rounding relative), so
# rescaling the raw sums by 1 / half^2 moves no entry by more than the
# mapped sums' rounding.
_RAW_HALF_FLOOR = 1e-150


@dataclass(frozen=True)
class RangeMap:
    """The affine map ``z = (x - center) / half`` (public or privately released).

    Attributes
    ----------
    center, half : ndarray of shape (d,)
        Feature centres and half-widths.
    y_center, y_half : float
        Label centre and half-width.
    row_bound : float
        L2 bound of a mapped row (without the constant column).
    clip_coordinates : bool
        Clip each mapped coordinate to ``[-1, 1]`` (declared ranges).
    """

    center: np.ndarray
    half: np.ndarray
    y_center: float
    y_half: float
    row_bound: float
    clip_coordinates: bool

    @cached_property
    def raw_affine(self):
        """``(1 / half, -center / half, low, high, max(low), min(high))`` when the passes
        may sum the range-clipped raw rows (public conditions, see the module docstring),
        else ``None``."""
        d = self.center.shape[0]
        if (not self.clip_coordinates or self.row_bound < sqrt_at_least(d)
                or np.any(np.abs(self.center) > _RAW_OFFSET_LIMIT * self.half)
                or not np.all(np.abs(self.center) + self.half <= _RAW_MAGNITUDE_LIMIT)
                # Raw products of tiny ranges round in the subnormal range, where
                # rounding is not relative: such ranges are mapped first.
                or not np.all(self.half >= _RAW_HALF_FLOOR)):
            return None
        inv = 1.0 / self.half
        low, high = self.center - self.half, self.center + self.half
        return inv, -self.center * inv, low, high, float(low.max()), float(high.min())


def _mapped_labels(y_block, rmap, check=False, out=None):
    """``clip((y - y_center) * (1 / y_half), -1, 1)`` of one block (float64).

    ``check``: refuse NaN or infinity (the first pass does). ``out``: a
    float64 vector to write into (default: a reused buffer). A product with
    the reciprocal costs a quarter of a division; the clip bounds each
    value whatever the rounding.
    """
    y = as_float64_block(np.asarray(y_block).ravel(), scratch="range y")  # a file's: copied
    u = workspace("range u", len(y)) if out is None else out
    with np.errstate(over="ignore", invalid="ignore"):
        if rmap.y_center == 0.0:
            np.multiply(y, 1.0 / rmap.y_half, out=u)
        else:
            np.subtract(y, rmap.y_center, out=u)
            u *= 1.0 / rmap.y_half
        if check and not np.isfinite(np.add.reduce(u)):
            check_block_finite(y, "y")
    return np.clip(u, -1.0, 1.0, out=u)  # one sweep (np.minimum then np.maximum: two)


def _mapped(X_block, y_block, rmap, x_clip=None, check=False):
    """Mapped rows and labels of one block; ``check``: refuse NaN/inf (the first pass does).

    The block is read once as float64 (:func:`as_float64_block`: a piece of
    a file is copied, so what is checked is what is summed) and mapped into
    a float64 buffer; the finiteness check is a sum over the mapped values
    (before the clip, which would map an infinity to 1), with the exact
    check only when that sum is not finite.
    """
    X = as_float64_block(X_block, scratch="range rows")  # one read: a file's piece is copied
    # Vectors and the mapped rows go to this thread's reused buffers: a fresh
    # array per piece costs page faults on Dask workers.
    Z = workspace_like("range mapped", X)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if x_clip is not None:  # private path: rows clipped to the released bound first
            # (silent: an infinite entry, refused below, scales to inf * 0)
            Z = np.multiply(X, _clip_scales(X, x_clip)[:, None], out=Z)
            Z -= rmap.center
        else:
            np.subtract(X, rmap.center, out=Z)
        Z /= rmap.half
        if check and not np.isfinite(np.add.reduce(Z, axis=None)):
            check_block_finite(X, "X")  # NaN or infinity, or only a sum that overflowed
    if rmap.clip_coordinates:
        np.clip(Z, -1.0, 1.0, out=Z)
    if not (rmap.clip_coordinates and rmap.row_bound >= sqrt_at_least(Z.shape[1])):
        # coordinates in [-1, 1] already give ||z|| <= sqrt(d) (exactly)
        norms = row_norms(Z, out=workspace("range mapped norms", len(Z)))
        target = clip_threshold(rmap.row_bound, Z.shape[1])
        over = norms > target
        if over.any():
            Z[over] *= (target / norms[over])[:, None]
    u = None if y_block is None else _mapped_labels(y_block, rmap, check)
    return Z, u


def raw_space(rmap, x_clip):
    """True when a pass sums the raw (range-clipped) rows: public facts only."""
    return x_clip is None and rmap.raw_affine is not None


def _inside(X, rmap, check=False):
    """True when every entry of ``X`` lies inside its column's declared range.

    The block's minimum and maximum against the ranges' intersection; per
    column only when the ranges differ (a per-column reduction of narrow
    rows costs more than the products). A NaN compares false; ``check``:
    refuse NaN or infinity (the first pass does).
    """
    low, high, inner_low, inner_high = rmap.raw_affine[2:]
    lowest, highest = X.min(), X.max()
    if lowest >= inner_low and highest <= inner_high:
        return True
    if check and not (np.isfinite(lowest) and np.isfinite(highest)):
        check_block_finite(X, "X")  # NaN or infinity
    if low.min() < inner_low or high.max() > inner_high:  # the ranges differ
        return bool(np.all(X.min(axis=0) >= low) and np.all(X.max(axis=0) <= high))
    return False


def _clipped_rows(X_block, rmap, check=False, inside=False):
    """The block's rows clipped to their declared ranges (float64); ``check``: refuse NaN/inf.

    The block itself when every entry lies inside its range; otherwise a
    block-sized clipped copy (in the block's memory order). ``inside``: the
    first pass found every entry of the rows inside its range, so the block
    is used as it is without looking (the same rows, read again).
    """
    X = as_float64_block(X_block, scratch="range rows")
    if not inside and X.shape[0] and not _inside(X, rmap, check):
        X = np.clip(X, *rmap.raw_affine[2:4], out=workspace_like("range clipped", X))
    return X


def _predict_mapped(Z, theta, fit_intercept):
    """``A theta`` for ``A = [Z, c 1]`` without forming ``A``."""
    d = Z.shape[1]
    out = Z @ theta[:d]
    if fit_intercept:
        out += INTERCEPT * theta[d]
    return out


def _transpose_times(Z, r, fit_intercept):
    """``A^T r`` for ``A = [Z, c 1]`` without forming ``A``."""
    head = np.dot(Z.T, r)
    return np.append(head, INTERCEPT * r.sum()) if fit_intercept else head


def _residuals(X_block, y_block, rmap, fit_intercept, theta, x_clip, inside=False,
               check=False, column_strided=False):
    """``(r, u, rows, raw)`` with ``r = u - A theta``.

    ``rows`` are the range-clipped raw rows when ``raw``, else the mapped ``Z``;
    ``inside``: see :func:`_clipped_rows`; ``check``: refuse NaN or infinity
    (rows that may have changed since the first pass: a file, a Dask graph);
    ``column_strided``: raw rows of a Fortran-ordered array (a data frame's)
    are read as stored (:func:`_strided_products`) and ``rows`` is ``None``,
    for a caller that needs ``r`` and ``u`` only.
    """
    if not raw_space(rmap, x_clip):
        Z, u = _mapped(X_block, y_block, rmap, x_clip, check)
        return u - _predict_mapped(Z, theta, fit_intercept), u, Z, False
    u = _mapped_labels(y_block, rmap, check)
    inv, e = rmap.raw_affine[:2]
    w = theta[:len(inv)]
    offset = float(e @ w) + (INTERCEPT * theta[len(inv)] if fit_intercept else 0.0)
    X = as_float64_block(X_block, scratch="range rows", column_strided=column_strided)
    if column_strided and is_column_strided(X):
        r = _strided_products(X, rmap, inv * w, check, inside)
        X = None
    else:
        X = _clipped_rows(X, rmap, check=check, inside=inside)
        # Z w = X (D w) + e^T w: one gemv on the rows
        r = np.matmul(X, inv * w, out=workspace("range r", len(u)))
    np.subtract(u, r, out=r)
    r -= offset
    return r, u, X, True


def _strided_products(X, rmap, v, check=False, inside=False):
    """``clip(X) v`` for the rows of a Fortran-ordered array read as stored (``np.matmul``:
    BLAS reads the column stride as its leading dimension), in a reused vector.

    The product is taken on the rows as stored, whatever they hold; then
    only the rows with an entry outside its range (if any: ``inside`` skips
    the look, see :func:`_clipped_rows`) get their product again from their
    clipped copy. So a row outside its range changes no other row's value,
    bit for bit, whatever the BLAS: the first product is the same call on
    both neighbours. (A clipped copy of the whole piece would be multiplied
    with another leading dimension, which some BLAS kernels round otherwise.)
    The products of the outside rows are sums over the columns in column
    order, one elementwise product and one elementwise sum per column: each
    row's value depends on that row alone, not on how many rows are outside
    or where they are (a BLAS product of the ``k`` outside rows rounds a row
    differently for ``k = 1``, ``k = 2, 3`` and ``k >= 4``). ``check``:
    refuse NaN or infinity.
    """
    r = np.matmul(X, v, out=workspace("range r", len(X)))
    if inside or _inside(X, rmap, check):
        return r
    low, high = rmap.raw_affine[2:4]
    outside = np.zeros(len(X), dtype=bool)
    for j in range(X.shape[1]):  # contiguous columns: no temporary of the piece's size
        outside |= X[:, j] < low[j]
        outside |= X[:, j] > high[j]
    rows = np.flatnonzero(outside)
    clipped = np.clip(X[rows], low, high)
    total = clipped[:, 0] * v[0]
    for j in range(1, X.shape[1]):
        total += clipped[:, j] * v[j]
    r[rows] = total
    return r


def first_pass_block(X_block, y_block, *, rmap, fit_intercept, x_clip=None):
    """``(Z^T Z, Z^T [u, 1], [sum u, sum u^2, rows, clipped])`` of one run of rows.

    See :func:`first_pass_stats`. In raw space (:func:`raw_space`) the first
    two are ``X^T X`` and ``X^T [u, 1]`` of the range-clipped rows ``X``,
    mapped once for the whole pass by :func:`first_pass_stats`, and
    ``clipped`` is 1 when an entry of the run lay outside its range (else
    0): summed over the pass, 0 lets the later passes skip the range check
    (:func:`_clipped_rows`). The first pass over the rows: it also refuses
    NaN or infinity, before any noise.

    The labels of the run are mapped in one sweep (a few calls per run, not
    per piece); the rows are read in cache-sized pieces
    (:func:`~skprivreg._gram.cache_block_rows`), each multiplied with its
    rows of ``[u, 1]``.
    """
    n_rows = len(X_block)
    raw = raw_space(rmap, x_clip)
    width = X_block.shape[1]
    if raw and fused_layout(X_block, width):  # the labels go beside each piece's rows
        u = _mapped_labels(y_block, rmap, check=True, out=workspace("range u run", n_rows))
        XtX, XtL, clipped = _fused_first_pass(X_block, u, rmap)
        return XtX, XtL, np.array([u.sum(), np.dot(u, u), float(n_rows), clipped])
    labels = _labels_with_ones(n_rows)
    u = _mapped_labels(y_block, rmap, check=True, out=labels[:, 0])
    XtX, XtL = np.zeros((width, width)), np.zeros((width, 2))
    clipped = 0.0
    step = cache_block_rows(width + 2)
    for a in range(0, n_rows, step):
        piece = X_block[a:a + step]
        if raw:
            piece_labels = labels[a:a + step]
            X = as_float64_block(piece, scratch="range rows")
            # The products first, while the piece comes from memory (BLAS
            # overlaps the read with the arithmetic); the range check then
            # reads it from cache. A piece with an entry outside its range (or
            # NaN, refused there) is multiplied again, clipped: the same values
            # as a piece that was inside, so the same sums. Silent: the
            # discarded products of such a piece may overflow.
            with np.errstate(all="ignore"):
                part_xx, part_xl = np.dot(X.T, X), np.dot(X.T, piece_labels)
            rows = _clipped_rows(X, rmap, check=True)
            if rows is not X:
                clipped = 1.0
                part_xx, part_xl = np.dot(rows.T, rows), np.dot(rows.T, piece_labels)
        else:
            piece_labels = labels[a:a + step]
            rows, _ = _mapped(piece, None, rmap, x_clip, check=True)
            part_xx, part_xl = np.dot(rows.T, rows), np.dot(rows.T, piece_labels)
        with np.errstate(all="ignore"):  # sums of public (unclipped) rows may overflow
            XtX += part_xx
            XtL += part_xl
    return XtX, XtL, np.array([u.sum(), np.dot(u, u), float(n_rows), clipped])


def _fused_first_pass(X_block, u, rmap):
    """:func:`first_pass_block`'s sums over narrow Fortran-ordered rows (raw space).

    Each piece of :data:`~skprivreg._gram.FUSED_PIECE_BYTES` is copied beside
    its labels and ones and multiplied once, ``X^T [X, u, 1]`` (as the Gram
    pass does, :func:`~skprivreg._gram.fused_layout`); a piece with an entry
    outside its range (or NaN, refused there) is clipped in place and
    multiplied again by the same call, so it gives the sums a piece inside
    its range would. Few calls per piece: their Python cost is paid with
    the interpreter lock held. Silent: a discarded product may overflow.
    Returns ``(X^T X, X^T [u, 1], clipped)``.
    """
    n_rows, width = X_block.shape
    step = cache_block_rows(width + 2, FUSED_PIECE_BYTES)
    total = np.zeros((width, width + 2))
    clipped = 0.0
    with np.errstate(all="ignore"):
        for a in range(0, n_rows, step):
            piece = X_block[a:a + step]
            both = workspace("range fused", (len(piece), width + 2), order="F")
            X = both[:, :width]
            np.copyto(X, piece, casting="unsafe")
            both[:, width] = u[a:a + step]
            both[:, width + 1] = 1.0
            product = np.dot(X.T, both)
            if not _inside(X, rmap, check=True):
                clipped = 1.0
                np.clip(X, *rmap.raw_affine[2:4], out=X)
                product = np.dot(X.T, both)
            total += product
    return symmetric_from_upper(total[:, :width]), total[:, width:].copy(), clipped


def _labels_with_ones(n_rows):
    """``[u, 1]`` as a reused ``(n_rows, 2)`` C-ordered buffer whose first column the
    caller fills with ``u``: one product gives ``X^T u`` and the column sums, and
    the rows of a piece are contiguous (a product copies a strided operand)."""
    labels = workspace("range labels", (n_rows, 2))
    labels[:, 1] = 1.0
    return labels


def first_pass_stats(ZtZ, ZtL, sums, fit_intercept, rmap, x_clip=None):
    """``(A^T A, A^T u, [sum u, sum u^2])`` for ``A = [Z, c 1]`` from the sums of the first pass.

    ``sums`` is ``[sum u, sum u^2, rows, clipped blocks]`` (:func:`first_pass_block`).

    Sums in raw space are mapped here: ``Z^T Z = D (X^T X) D + D s e^T +
    e s^T D + m e e^T`` and ``Z^T [u, 1] = D X^T [u, 1] + e [sum u, m]``.
    """
    if raw_space(rmap, x_clip):
        inv, e = rmap.raw_affine[:2]
        s = inv * ZtL[:, 1]
        ZtZ = inv[:, None] * ZtZ * inv[None, :]
        ZtZ += np.outer(s, e) + np.outer(e, s) + sums[2] * np.outer(e, e)
        ZtL = inv[:, None] * ZtL + np.outer(e, [sums[0], sums[2]])
    Ztu, z_sum = ZtL[:, 0], ZtL[:, 1]
    if not fit_intercept:
        return ZtZ, Ztu, sums[:2]
    c = INTERCEPT
    AtA = np.block([[ZtZ, c * z_sum[:, None]],
                    [c * z_sum[None, :], np.array([[c * c * sums[2]]])]])
    return AtA, np.append(Ztu, c * sums[0]), sums[:2]


def gradient_block(X_block, y_block, *, rmap, fit_intercept, theta, clip, x_clip=None,
                   inside=False, check=False):
    """``A^T clip(u - A theta, -clip, clip)`` of one block (``clip=None``: no clip).

    ``inside``: the first pass clipped no entry (:func:`_clipped_rows`);
    ``check``: refuse NaN or infinity (:func:`_residuals`).
    """
    r, _, rows, raw = _residuals(X_block, y_block, rmap, fit_intercept, theta, x_clip, inside,
                                 check)
    if clip is not None:
        np.clip(r, -clip, clip, out=r)
    grad = _transpose_times(rows, r, fit_intercept)
    if raw:  # X^T r -> Z^T r = D X^T r + e 1^T r
        inv, e = rmap.raw_affine[:2]
        d = len(inv)
        grad[:d] = inv * grad[:d] + e * r.sum()
    return (grad,)


def residual_moment_block(X_block, y_block, *, rmap, fit_intercept, theta, x_clip=None,
                          inside=False, check=False):
    """``sum min(r^2, 1)`` of one block, ``r = u - A theta``: replace-one sensitivity 1."""
    r = _residuals(X_block, y_block, rmap, fit_intercept, theta, x_clip, inside, check,
                   column_strided=True)[0]
    np.clip(r, -1.0, 1.0, out=r)  # min(r^2, 1) = clip(r, -1, 1)^2
    return (np.array([np.dot(r, r)]),)


def selection_block(X_block, y_block, *, rmap, fit_intercept, theta, u_mean, cap, x_clip=None,
                    inside=False, check=False):
    """``sum [min(r^2, K') - min((u - u_mean)^2, K')]``: the model's loss minus the mean's.

    ``K' = s^2 <= K`` for the largest float ``s`` with ``s * s <= K``
    (:func:`_root_within`; ``K' = K`` up to one rounding), computed as
    ``clip(w, -s, s)^2``. Each term lies in ``[-K, K]``, so the sum has
    replace-one sensitivity ``2K``.
    """
    r, u, _, _ = _residuals(X_block, y_block, rmap, fit_intercept, theta, x_clip, inside,
                            check, column_strided=True)
    v = np.subtract(u, u_mean, out=workspace("range v", len(u)))
    root = _root_within(cap)
    np.clip(r, -root, root, out=r)  # each clip(w, -s, s)^2 lies in [0, s^2], s^2 <= K
    np.clip(v, -root, root, out=v)
    return (np.array([np.dot(r, r) - np.dot(v, v)]),)


def _root_within(cap):
    """The largest float ``s`` with ``fl(s * s) <= cap``: each term ``clip(w, -s, s)**2`` of
    the selection sum then lies in ``[0, cap]``, rounded or not, as the sensitivity
    ``2 cap`` needs (the sum itself is rounded as any float sum is)."""
    root = math.sqrt(cap)
    while root * root > cap:
        root = math.nextafter(root, 0.0)
    return root


def feature_sum_block(X_block, y_block, *, x_clip):
    """``sum_i clip(x_i, x_clip)`` of one block: replace-one L2-sensitivity ``2 x_clip``.

    The block is read once (:func:`as_float64_block`: a piece of a file is
    copied), so the rows scaled are the rows whose norms were taken; NaN or
    infinity is refused (its norm is not finite).
    """
    X = as_float64_block(X_block, scratch="range rows")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scales = _clip_scales(X, x_clip, check=True)
        # sum_i s_i x_i as one product: no scaled copy of the rows
        return (np.dot(scales, X),)


def _clip_scales(X, x_clip, check=False):
    """``min(1, t / ||x_i||)`` for each row of ``X`` (1 for a zero row), in a reused buffer;
    ``t`` is the clip threshold of ``x_clip`` (:func:`~skprivreg.bounds.clip_threshold`).

    ``check``: refuse NaN or infinity in ``X`` (its norm is not finite).
    Otherwise NaN in a row gives NaN, an infinite entry 0 (and ``inf * 0`` a
    NaN in the scaled row). Call under ``np.errstate(divide="ignore", ...)``.
    """
    scales = row_norms(X, out=workspace("range clip scales", len(X)))
    if check and not np.isfinite(np.add.reduce(scales)):
        check_block_finite(X, "X")  # NaN or infinity, or only norms that overflowed
    np.divide(clip_threshold(x_clip, X.shape[1]), scales, out=scales)  # a zero row: inf, then 1
    return np.minimum(scales, 1.0, out=scales)
