"""ReuseCov's pass over the rows: clipped, augmented sufficient statistics and their sensitivities.

Pure functions over row blocks (:func:`block_statistics` and the associative
:func:`combine_statistics`; a Dask backend maps and tree-reduces them), and
the replace-one / zero-out sensitivities of :math:`X^\\top X / m` and
:math:`X^\\top Y / n`. Shared by :class:`ReuseCovRegressor` and
:class:`IndependentSSPRegressor`.
"""

import math
from dataclasses import dataclass, replace

import numpy as np
from sklearn.utils import check_consistent_length

from .._blocks import as_float64_block, pass_workspace, workspace, workspace_like
from .._compat import validate_data
from .._gram import (
    SHARED_CACHE_BYTES,
    cache_block_rows,
    reduce_threaded,
    rows_may_exceed,
    run_pieces,
    threads_for,
)
from .._rows import RowSource, check_block_finite, is_dask_collection, validate_blockwise_data
from ..bounds import clip_threshold, row_norms
from ..mechanisms import exact_fraction, sqrt_at_least, value_at_least

__all__ = [
    "SufficientStats",
    "block_statistics",
    "combine_statistics",
    "sufficient_statistics",
    "statistics_source",
    "piece_rows",
    "scan_labels",
    "validate_features_and_labels",
    "covariance_sensitivity",
    "association_sensitivity",
]

# Bytes of Y per chunk of the label scan: read once from memory, then from
# cache (the L2 of current x86 cores is 1-4 MB).
_CACHE_CHUNK_BYTES = 2**20


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
    x_abs_max : float or None
        Largest ``|x_ij|`` of a public (augmented) X (label DP): 0 only for a
        side of zeros, whose product with Y is 0 whatever Y holds.
    """

    n: int
    xtx: np.ndarray | None = None
    xty: np.ndarray | None = None
    x_clipped: bool = False
    y_clipped: bool = False
    x_max_norm: float | None = None
    y_max_norm: float | None = None
    y_abs_max: float | None = None
    x_abs_max: float | None = None


def _prepare_rows(X_b, x_bound, fit_intercept, intercept_scaling, check_finite):
    """``(rows, clipped)``: the piece's rows as float64, checked, clipped to ``x_bound``
    (if given) and with the intercept column, in this thread's reused buffers.

    A float64 piece in memory that needs no clipping and no intercept column
    is used as it is; otherwise it is written once into a piece-sized buffer
    (:func:`~skprivreg._blocks.workspace`): the intercept column is a column
    of that buffer and a clipped row is scaled on the way in. Rows are
    scaled by ``min(1, x_bound / ||x||)``; when ``d max_ij x_ij^2`` is below
    ``x_bound^2`` by a margin for rounding no row can be over the bound and no
    norm is computed (:func:`~skprivreg._gram.rows_may_exceed`).
    """
    X_b = as_float64_block(X_b, scratch="statistics rows")  # a file's piece: copied once
    # The largest |x_ij| decides whether any norm is needed; NaN or infinity
    # makes it non-finite (NaN propagates to the max and the min), so it is
    # the finiteness check too.
    top = _largest_magnitude(X_b) if x_bound is not None else None
    if check_finite and not (top is not None and math.isfinite(top)):
        check_block_finite(X_b, "X")
    scale = None
    if top is not None:
        if rows_may_exceed(X_b.shape[1], top, x_bound):
            # Into a reused buffer: a fresh one per piece costs page faults
            # where freed memory goes back to the system at once (Dask's
            # nannies): 1.5x the pass's time on a worker at d = 10.
            norms = row_norms(X_b, out=workspace("statistics norms", X_b.shape[0]))
            target = clip_threshold(x_bound, X_b.shape[1])
            over = norms > target
            if over.any():
                scale = np.ones_like(norms)
                scale[over] = target / norms[over]
    clipped = scale is not None
    if not fit_intercept:
        if clipped:
            # The piece's memory order, as the unclipped piece has: a product
            # rounds a Fortran-ordered operand differently.
            X_b = np.multiply(X_b, scale[:, None],
                              out=workspace_like("statistics clipped rows", X_b))
        return X_b, clipped
    n_rows, d = X_b.shape
    rows = workspace("statistics design", (n_rows, d + 1))
    if clipped:
        np.multiply(X_b, scale[:, None], out=rows[:, :d])
    else:
        rows[:, :d] = X_b
    rows[:, d] = float(intercept_scaling)
    return rows, clipped


def _largest_magnitude(A):
    """``max |a_ij|`` (0 for an empty array) from one max and one min: no ``|A|`` temporary.

    NaN or infinity anywhere in ``A`` gives a non-finite result (NaN
    propagates to the max and the min; Python's ``max`` would drop it).
    """
    if not A.size:
        return 0.0
    high = float(np.maximum.reduce(A, axis=None))
    low = float(np.minimum.reduce(A, axis=None))
    if not (math.isfinite(high) and math.isfinite(low)):
        return math.nan
    return max(high, -low, 0.0) + 0.0  # + 0.0: never -0.0


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
    check_finite=True,
    into=None,
):
    """The :class:`SufficientStats` of one block of rows.

    Private sides are clipped first (rows of X to L2 norm ``x_bound``,
    entries of Y to ``[-y_bound, y_bound]``); ``None`` bounds mean no
    clipping. Public sides report their largest row norm (and a public Y its
    largest entry). NaN or infinity raises ``ValueError`` here, which on Dask
    input happens on the workers, before any noise is drawn. ``Y_b`` is
    always checked, by the scan that decides its clipping
    (:func:`scan_labels`); ``X_b`` with ``check_finite``. Converted, clipped
    or augmented copies go to this thread's piece-sized buffers: nothing of
    the size of the block is allocated. ``into``: the :class:`SufficientStats`
    of earlier rows, or None; the block's sums are added into its arrays
    (through this thread's buffers: no product is allocated per block) and
    ``into`` is returned, as :func:`combine_statistics` of it and the block's
    statistics would be.
    """
    # Floating-point warnings would depend on the data (an entry whose square
    # overflows); finiteness is checked explicitly instead.
    with np.errstate(all="ignore"):
        X_b, x_clipped = _prepare_rows(X_b, x_bound, fit_intercept, intercept_scaling,
                                       check_finite)
        stats = SufficientStats(n=X_b.shape[0], x_clipped=x_clipped)
        if x_public:
            norms = row_norms(X_b, out=workspace("statistics norms", X_b.shape[0]))
            stats.x_max_norm = float(norms.max(initial=0.0))
            stats.x_abs_max = _largest_magnitude(X_b)
        if compute_xtx:
            stats.xtx = _product(X_b, X_b, into, "xtx")
        if Y_b is not None:
            given = Y_b
            Y_b = as_float64_block(Y_b, scratch="statistics labels")
            if Y_b.ndim == 1:  # one outcome, passed 1-D (a view, never a copy)
                Y_b = Y_b[:, None]
            if scan_labels(Y_b, y_bound):
                # A copy made above is this pass's own: clipped where it is.
                out = (workspace_like("statistics clipped labels", Y_b)
                       if np.may_share_memory(Y_b, given) else Y_b)
                Y_b = np.clip(Y_b, -y_bound, y_bound, out=out)
                stats.y_clipped = True
            if y_public:
                norms = row_norms(Y_b, out=workspace("statistics label norms", Y_b.shape[0]))
                stats.y_max_norm = float(norms.max(initial=0.0))
                stats.y_abs_max = _largest_magnitude(Y_b)
            stats.xty = _product(X_b, Y_b, into, "xty")
    return stats if into is None else _accumulate(into, stats)


def _product(A, B, into, name):
    """:math:`A^\\top B`; with an accumulator ``into`` holding ``name``, added into
    it and None returned (the product goes through this thread's buffer)."""
    acc = None if into is None else getattr(into, name)
    if acc is None:
        return np.dot(A.T, B)
    out = workspace(f"statistics {name}", acc.shape)
    acc += np.dot(A.T, B, out=out)
    return None



def scan_labels(Y_b, y_bound=None):
    """Whether ``Y_b`` needs clipping to ``[-y_bound, y_bound]``; raises on NaN or infinity.

    One read of ``Y_b`` from memory: it is scanned in chunks of whole rows
    of about 1 MB, and the maximum and minimum of a chunk (NaN propagates
    to both, an infinity to one of them) read it from cache. This is the
    finiteness check of the labels too (``fit`` does not repeat it in
    ``validate_data``). With few outcomes :func:`sufficient_statistics`
    sizes its pieces so that :math:`X^\\top Y` then reads the piece from the
    shared cache; wide labels come in long pieces (:func:`piece_rows`).
    """
    row_bytes = 8 * max(1, int(np.prod(Y_b.shape[1:])))
    step = max(1, _CACHE_CHUNK_BYTES // row_bytes)
    needs_clip = False
    for a in range(0, Y_b.shape[0], step):
        chunk = Y_b[a:a + step]
        if not chunk.size:
            continue
        top, low = float(chunk.max()), float(chunk.min())
        if not (math.isfinite(top) and math.isfinite(low)):
            raise ValueError("Input y contains NaN or infinity.")
        if y_bound is not None and (top > y_bound or low < -y_bound):
            needs_clip = True
    return needs_clip


def _max(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def combine_statistics(a, b):
    """Merge the statistics of two disjoint row blocks (associative, commutative).

    A new object: :func:`_accumulate` on a copy of ``a``'s sums.
    """
    return _accumulate(replace(a, xtx=None if a.xtx is None else a.xtx.copy(),
                               xty=None if a.xty is None else a.xty.copy()), b)


def validate_features_and_labels(estimator, X, y):
    """``validate_data`` of ``(X, y)`` without its NaN/inf passes.

    X and y are converted as usual (float64 or float32) but their
    finiteness is left to the statistics pass (:func:`block_statistics`),
    which reads every piece anyway: the largest entry of a piece of X, which
    decides its clipping, and the scan of y that decides its clipping
    (:func:`scan_labels`) raise scikit-learn's ``ValueError`` before any
    budget is spent. Lengths must agree.

    When either side is a Dask collection, nothing is collected: shapes and
    dtypes are checked (:func:`~skprivreg._rows.validate_blockwise_data`; a
    side in memory is checked by scikit-learn), and the finiteness of a Dask
    side is left to the statistics pass on the workers (its row source reads
    both sides in the same row chunks).
    """
    floats = [np.float64, np.float32]
    if is_dask_collection(X) or is_dask_collection(y):
        return validate_blockwise_data(estimator, X, y, dtype=floats)
    X, y = validate_data(
        estimator, X, y,
        validate_separately=(
            dict(dtype=floats, ensure_all_finite=False),
            dict(dtype=floats, ensure_2d=False, ensure_all_finite=False),
        ),
    )
    if y.ndim not in (1, 2):
        raise ValueError(f"y must be 1D or 2D, got {y.ndim}D.")
    check_consistent_length(X, y)
    return X, y


def _accumulate(acc, part):
    """:func:`combine_statistics` of ``acc`` and a later ``part``, adding into ``acc``'s arrays."""
    for name in ("xtx", "xty"):
        mine, theirs = getattr(acc, name), getattr(part, name)
        if mine is None:
            setattr(acc, name, theirs)
        elif theirs is not None:
            # inf + (-inf) of public rows: no data-dependent warning
            with np.errstate(all="ignore"):
                mine += theirs
    acc.n += part.n
    acc.x_clipped = acc.x_clipped or part.x_clipped
    acc.y_clipped = acc.y_clipped or part.y_clipped
    for name in ("x_max_norm", "y_max_norm", "y_abs_max", "x_abs_max"):
        setattr(acc, name, _max(getattr(acc, name), getattr(part, name)))
    return acc


#: Largest piece (bytes of float64 rows): a clipped or converted piece is a
#: temporary of this size per thread.
_PIECE_BYTES_MAX = 32 << 20


def piece_rows(width, n_threads=1, n_products=0):
    """Rows of one piece of ``width`` float64 columns (:func:`sufficient_statistics`).

    A piece is scanned in L2-sized chunks (:func:`scan_labels`) and then
    multiplied while it is still in the shared cache, so ``Y`` is read from
    memory once: each of the ``n_threads`` threads gets half of its share of
    the last-level cache, at most 32 MiB (a piece that needs clipping, or a
    float32 piece, is copied once). At least 16 rows, and never more than a
    cache-sized block of the same width
    (:func:`~skprivreg._gram.cache_block_rows`) unless the labels are wide
    (below): with few outcomes the pieces are as small as the fused Gram
    pass's, so the buffers of a piece's rows stay in the cache.

    ``n_products``: the columns of the design (:math:`p`). Each piece adds
    its products into a :math:`p \\times l` sum, which is read and written
    once per piece; with wide labels that traffic would exceed the piece's
    own, so a piece has at least :math:`16 p` rows (the sum's traffic is
    then at most 3/16 of the piece's), within :data:`_LONG_PIECE_BYTES`:
    its labels are read from memory twice (by the scan and by the product,
    which hides that read behind its arithmetic), the sum once.
    """
    share = min(SHARED_CACHE_BYTES // (2 * max(int(n_threads), 1)), _PIECE_BYTES_MAX)
    shared = max(16, share // (8 * max(int(width), 1)))
    rows = int(min(shared, cache_block_rows(width)))
    long_rows = min(16 * int(n_products), _LONG_PIECE_BYTES // (8 * max(int(width), 1)))
    return max(rows, long_rows)


#: Largest piece of the long pieces of wide labels (:func:`piece_rows`): a
#: converted or clipped copy of one is a buffer of this size per thread for
#: the pass (:class:`~skprivreg._blocks.pass_workspace`).
_LONG_PIECE_BYTES = 64 << 20


class _StatisticsPass:
    """Block function of :func:`sufficient_statistics` (picklable, for Dask workers).

    A block (the whole array on NumPy input, a chunk on Dask) is cut into
    pieces of ``step`` rows; their :func:`block_statistics` are added in row
    order, the pieces shared by ``n_threads`` threads
    (:func:`~skprivreg._gram.run_pieces`). ``params``: None, or the sorted
    indices of the rows to sum (a subsample); each piece then sums its
    selected rows only (a copy of at most a piece), located by the block's
    first row ``offset``.
    """

    def __init__(self, kwargs, step, n_threads=1, width=1):
        self.kwargs = dict(kwargs)
        self.step = int(step)
        self.n_threads = int(n_threads)
        self.piece_bytes = 8 * self.step * int(width)

    def __call__(self, offset, X, Y, params=None, into=None):
        bounds = [(a, min(a + self.step, len(X))) for a in range(0, len(X), self.step)]

        def run(pieces, acc):
            with pass_workspace(self.piece_bytes):
                return run_in(pieces, acc)

        def run_in(pieces, acc):
            for a, b in pieces:
                X_p, Y_p = X[a:b], None if Y is None else Y[a:b]
                if params is not None:
                    lo, hi = np.searchsorted(params, (offset + a, offset + b))
                    local = params[lo:hi] - (offset + a)
                    X_p, Y_p = X_p[local], None if Y_p is None else Y_p[local]
                acc = block_statistics(X_p, Y_p, **self.kwargs, into=acc)
            return acc

        return run_pieces(bounds, run, self.n_threads, into, combine_statistics)


def statistics_source(X, Y=None, *, verbose=0, name="rows"):
    """The :class:`~skprivreg._rows.RowSource` of :func:`sufficient_statistics`.

    One block (a Dask array keeps its chunks), read as stored: the pass cuts
    it into pieces itself. An estimator's passes share it, so its progress
    lines number them in order. ``Y``: 2-D, or 1-D for one outcome (read as
    one column: on Dask, ``y[:, None]`` would add a task per chunk to every
    pass).
    """
    return RowSource(X, Y, block_rows=None, raw_blocks=True, verbose=verbose, name=name)


def sufficient_statistics(X, Y=None, *, row_block=None, source=None, label="XtX, XtY",
                          rows=None, **kwargs):
    """:func:`block_statistics` accumulated over pieces of rows of X, Y: one read of each.

    The pieces have ``row_block`` rows (default :func:`piece_rows`: sized to
    the cache, so each piece of a narrow ``Y`` is read from memory once, by
    the scan that checks and clips it, and multiplied from cache; long
    pieces for wide labels). Pieces are read as
    stored (a float32 piece becomes a piece-sized float64 copy): no clipped
    or converted copy of X or Y is held whole. On NumPy and memmap input the
    pieces are shared by the cores' threads (BLAS on one thread each, the
    partials added in row order); Dask arrays are reduced on their workers,
    each chunk cut into pieces there. ``source``: the
    :func:`statistics_source` to read (``X`` and ``Y`` are then unused);
    ``label`` names the pass in its progress line. ``rows``: sorted indices
    of the rows to sum (a secret subsample, say), or None for all rows; the
    pass still reads every piece and copies none but the selected rows of
    a piece (on Dask the indices go to the workers as the pass's
    parameters, under a random task name).
    """
    if rows is not None:
        rows = np.asarray(rows, dtype=np.intp)
    if source is None:
        if X.shape[0] == 0:
            return block_statistics(X, Y, **kwargs)  # (no rows to select either)
        source = statistics_source(X, Y)
    n_labels = 0 if source.Y is None else math.prod(source.Y.shape[1:])
    width = source.d + n_labels + 1
    n_threads = threads_for(source)
    step = row_block or piece_rows(width, n_threads, source.d + 1 if n_labels else 0)
    return reduce_threaded(source, _StatisticsPass(kwargs, step, n_threads, width),
                           combine_statistics, rows, n_threads=n_threads, label=label)


# ---------------------------------------------------------------------------
# Sensitivities, budget split, ridge (public numbers only)
# ---------------------------------------------------------------------------
def covariance_sensitivity(x_scale, n_rows, neighbouring="replace-one"):
    """L2-sensitivity of the upper-triangle vector of :math:`X^\\top X / m`.

    ``sqrt(2) B^2 / m`` for replace-one (equality at ``x = B e_1``,
    ``x' = B e_2``), ``B^2 / m`` for zero-out, with ``B`` the row-norm
    bound of the (augmented) design and ``m`` the number of rows averaged.
    """
    if math.isinf(x_scale):
        return math.inf
    factor = 2 if neighbouring == "replace-one" else 1  # under the root
    return sqrt_at_least(factor * exact_fraction(x_scale) ** 4 / exact_fraction(n_rows) ** 2)


def association_sensitivity(x_scale, y_row_scale, n_rows, neighbouring="replace-one"):
    """Frobenius sensitivity of :math:`X^\\top Y / n`.

    ``2 B_x B_y / n`` for replace-one (equality at ``x' = -x``, ``y' = y``),
    ``B_x B_y / n`` for zero-out, where ``B_x`` bounds the row norm of the
    design and ``B_y`` the norm of an outcome row: ``sqrt(l) y_bound`` when
    Y is private, the public ``max_i ||y^i||`` under feature DP. Under label
    DP ``B_x`` is the public ``max_i ||x_i||``.
    """
    if math.isinf(x_scale) or math.isinf(y_row_scale):
        return math.inf
    factor = 2 if neighbouring == "replace-one" else 1
    return value_at_least(factor * exact_fraction(x_scale) * exact_fraction(y_row_scale)
                          / exact_fraction(n_rows))


