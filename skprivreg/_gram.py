"""One fused pass for the sufficient statistics ``X^T X`` and ``X^T [Y, 1]``.

A linear regression from sufficient statistics needs one read of the rows.
:func:`gram_statistics` makes exactly that read: for every cache-sized block
of rows it

1. converts the block to float64 if needed (a float32 input is read as
   float32 and accumulated in float64, one block at a time);
2. takes the block's largest and smallest entry, which reveal NaN or
   infinity (scikit-learn's error is raised for the block, before anything
   is released: the pass runs before the first noise draw) and bound every
   row norm by ``sqrt(d) max |x_ij|``;
3. only when that bound exceeds the public norm bound, computes the squared
   row norms and clips each row to the bound by a scale factor per row (the
   scaled block is a cache-sized temporary, only when a row of the block
   exceeds the bound);
4. clips the labels to the public bound into a buffer ``[Y, 1]`` whose
   last column is ones, so a single product gives ``X^T Y`` and the column
   sums ``X^T 1`` of the intercept (the labels of a thread's run of blocks
   are prepared together, up to :data:`LABEL_RUN_BYTES`: a few calls per
   run instead of per block);
5. adds ``X^T X`` (a symmetric rank-k update) and ``X^T [Y, 1]`` to the
   running sums.

Nothing of the size of ``X`` or ``Y`` is allocated: peak memory above the
input is ``O(block_rows (d + l) + d^2 + d l)``. The intercept column is
added algebraically afterwards (:func:`augment_gram`).

The same block function runs on NumPy arrays, memmaps and Dask chunks
(through :class:`~skprivreg._rows.RowSource` with ``raw_blocks=True``); a
Dask chunk is itself split into cache-sized blocks on its worker. Block
functions draw nothing random.
"""

import math
import os
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
from sklearn.utils import assert_all_finite

from ._blocks import (
    WORKSPACE_MAX_BYTES,
    as_float64_block,
    memory_order,
    workspace,
    workspace_like,
)
from ._rows import add_tuples
from ._threads import single_threaded_blas
from .base import quiet_floats
from .bounds import clip_threshold

__all__ = [
    "CACHE_BYTES",
    "SHARED_CACHE_BYTES",
    "augment_gram",
    "cache_block_rows",
    "cache_blocked",
    "reduce_threaded",
    "reread_piece_bytes",
    "run_pieces",
    "source_block_rows",
    "rows_may_exceed",
    "streamed_piece_rows",
    "threads_for",
    "check_finite_block",
    "check_finite_extremes",
    "gram_block",
    "gram_statistics",
    "iter_cache_blocks",
]


def _sysfs_cache_bytes(level):
    """The level-``level`` data cache of CPU 0 from Linux's sysfs (bytes), or 0."""
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for index in sorted(os.listdir(root)):
            path = os.path.join(root, index)
            with open(os.path.join(path, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        pass
    return 0


def _cache_bytes(level=2, default=1 << 20):
    """The level-``level`` cache size (bytes); ``default`` when the system does not say."""
    try:
        size = int(os.sysconf(f"SC_LEVEL{level}_CACHE_SIZE"))
    except (AttributeError, ValueError, OSError):
        size = 0
    if size <= 0:
        size = _sysfs_cache_bytes(level)
    return size if size >= (1 << 17) else default


#: Bytes of a cache-sized block of float64 rows: half of L2, and at least 1 MiB.
#: A piece costs tens of microseconds of Python besides its products; at ten
#: features on cores with 512 kB of L2, pieces of 1 MiB (read from L3) made
#: SSP and AdaSSP fits at n = 1e6 1.2-1.4x faster than pieces of 256 kB, at
#: d = 10 and at d = 100 (9 interleaved repeats each).
CACHE_BYTES = max(_cache_bytes() // 2, 1 << 20)
#: Bytes of a piece multiplied as ``X^T [X, Y, 1]`` (:func:`fused_layout`):
#: three quarters of L2. At ten features on 1 MiB of L2, pieces of 1 MiB ran
#: 1.5x slower than pieces of 768 kB, and 512 kB and 256 kB pieces 1.05x and
#: 1.2x (more Python per row).
FUSED_PIECE_BYTES = 3 * _cache_bytes() // 4
#: Size of the last-level (shared) cache, or 8 MiB when the system does not say.
SHARED_CACHE_BYTES = max(_cache_bytes(3, 8 << 20), 2 * _cache_bytes())


def _n_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


#: Threads of a pass over a NumPy array or memmap (one per core, at most 8).
N_THREADS = max(1, min(_n_cores(), 8))

_POOL = {}


def _pool(n_threads):
    """A thread pool of this process (keyed by pid: a forked child builds its own)."""
    key = (os.getpid(), n_threads)
    if key not in _POOL:
        _POOL[key] = ThreadPoolExecutor(n_threads, thread_name_prefix="skprivreg-gram")
    return _POOL[key]


def cache_block_rows(n_columns, cache_bytes=None):
    """Rows of a block of ``n_columns`` float64 values that fits the cache.

    At least 1,024 rows (so the products run at BLAS speed on wide rows and
    the Python cost per block stays small) and at most 65,536.
    """
    cache_bytes = CACHE_BYTES if cache_bytes is None else int(cache_bytes)
    rows = cache_bytes // (8 * max(int(n_columns), 1))
    return int(min(max(rows, 1024), 1 << 16))


def check_finite_block(block, name, estimator_name=None):
    """scikit-learn's error for NaN or infinity in one block (may run on a worker)."""
    assert_all_finite(block, allow_nan=False, input_name=name, estimator_name=estimator_name)


def iter_cache_blocks(n_rows, n_columns, cache_bytes=None):
    """``(start, stop)`` of the cache-sized blocks of ``n_rows`` rows."""
    step = cache_block_rows(n_columns, cache_bytes)
    for start in range(0, n_rows, step):
        yield start, min(start + step, n_rows)


class GramParams:
    """Public inputs of one :func:`gram_block` pass (picklable, for Dask workers).

    Parameters
    ----------
    x_bound : float or None
        Rows with a larger L2 norm are scaled down to it (``None``: no clip).
    y_range : (low, high) or None
        Labels are clipped to ``[low, high]`` (``None``: no clip).
    n_outputs : int
    estimator_name : str or None
        Named in the error for NaN or infinity, as scikit-learn does.
    cache_bytes : int or None
        Size of the cache a block should fill (default :data:`CACHE_BYTES`).
    n_threads : int
        Threads that share the cache blocks of one block (``1`` on a Dask
        worker, whose cores are the cluster's to schedule).
    columns : array of int or None
        Read only these columns of each block (a public support).
    x_range : (low, high) or None
        Per-entry clip of the (selected) columns, before the row clip.
    """

    def __init__(self, x_bound, y_range, n_outputs, estimator_name=None, cache_bytes=None,
                 n_threads=1, columns=None, x_range=None):
        self.x_bound = None if x_bound is None else float(x_bound)
        if self.x_bound is not None and not math.isfinite(self.x_bound * self.x_bound):
            # The pass compares squared norms with the bound's square: above about
            # 1.3e154 it overflows and no row would be clipped. (Estimators refuse
            # bounds above 1e60 before this, with their own message.)
            raise ValueError(f"x_bound={self.x_bound:.3g} is too large: its square overflows.")
        self.y_range = None if y_range is None else tuple(float(v) for v in y_range)
        self.n_outputs = int(n_outputs)
        self.estimator_name = estimator_name
        self.cache_bytes = cache_bytes
        self.n_threads = int(n_threads)
        self.columns = None if columns is None else np.asarray(columns, dtype=np.intp)
        self.x_range = None if x_range is None else tuple(
            np.asarray(v, dtype=np.float64) for v in x_range)


def _empty_partial(d, n_outputs):
    return (np.zeros((d, d)), np.zeros((d, n_outputs + 1)), np.zeros(n_outputs))


def check_finite_extremes(X, estimator_name=None):
    """``max |X_ij|`` of a block from one max and one min; NaN or infinity raises."""
    if X.size == 0:
        return 0.0
    top, low = float(np.maximum.reduce(X, axis=None)), float(np.minimum.reduce(X, axis=None))
    if not (math.isfinite(top) and math.isfinite(low)):
        check_finite_block(X, "X", estimator_name)
    return max(top, -low)


def rows_may_exceed(n_columns, top, bound):
    r"""Whether a row of ``n_columns`` entries, each at most ``top`` in magnitude, may
    have an L2 norm above the clip threshold of ``bound`` (:func:`~skprivreg.bounds.clip_threshold`)
    as the row norms would compute it.

    False only when :math:`d\,m^2` (:math:`m` = ``top``) is below the threshold
    squared by a margin of :math:`(d + 4)\,2^{-52}` (relative): the rounding of
    the computed squared norm (a sum of ``d`` squares) and of these products
    stays inside it, so every row a norm computation would clip is found.
    True when the threshold's square overflows or is close to the subnormal
    range (rounding is then not relative): the norms decide.
    """
    target = clip_threshold(bound, n_columns)
    limit = target * target * (1.0 - (n_columns + 4) * 2.0**-52)
    if not (math.isfinite(limit) and limit >= 2.0**-960):
        return True
    return n_columns * top * top > limit


def _labels_of_run(Y, params, acc):
    """The clipped labels of a run of pieces as a reused ``[Y, 1]`` buffer; adds ``1^T Y``.

    A run's labels are prepared in a few calls over all its rows (per piece,
    these small calls cost a fifth of the pass at ten features): NaN or
    infinity is refused, the labels are clipped to the public range into the
    buffer, whose last column is ones, so one product per piece gives
    ``X^T Y`` and the column sums ``X^T 1``.
    """
    y_sum = acc[2]
    n_rows, l = Y.shape[0], params.n_outputs
    labels = workspace("gram labels", (n_rows, l + 1))
    labels[:, :l] = np.asarray(Y).reshape(n_rows, l)
    if not np.isfinite(labels[:, :l]).all():
        check_finite_block(labels[:, :l], "y", params.estimator_name)
    if params.y_range is not None:
        np.clip(labels[:, :l], *params.y_range, out=labels[:, :l])
    y_sum += labels[:, :l].sum(axis=0)
    labels[:, l] = 1.0
    return labels


def _gram_of_block(X, labels, params, acc, fused=False):
    """Add one cache-sized block's ``(X^T X, X^T [Y, 1])`` to ``acc`` in place.

    ``labels``: the block's rows of :func:`_labels_of_run`'s buffer.
    ``fused``: the rows (converted, clipped) and ``labels`` are copied side by
    side into one Fortran-ordered buffer and multiplied once, ``X^T [X, Y, 1]``
    (:func:`fused_layout`); else ``X`` is used as stored when it can be and
    multiplied twice.
    """
    XtX, XtY1 = acc[:2]
    if params.columns is not None:
        X = np.asarray(X)[:, params.columns]  # a cache-sized copy of the selected columns
    # Temporaries go to this thread's reused buffers (:func:`workspace`).
    n_rows, d = X.shape
    if fused:
        both = workspace("gram fused", (n_rows, d + labels.shape[1]), order="F")
        np.copyto(both[:, :d], X, casting="unsafe")
        both[:, d:] = labels
        X = both[:, :d]
    else:
        X = as_float64_block(X, scratch="gram rows")
    if params.x_range is not None:
        check_finite_extremes(X, params.estimator_name)
        X = np.clip(X, *params.x_range, out=X if fused else workspace_like("gram clipped", X))
    # Largest |entry| of the block, from its max and min (NaN or infinity in
    # either means a NaN or infinity in X: refused, in scikit-learn's words).
    top = check_finite_extremes(X, params.estimator_name)
    if params.x_bound is not None and rows_may_exceed(d, top, params.x_bound):
        # Some row may exceed the bound: its squared norm decides (a finite
        # row whose squared norm overflows becomes a zero row, within the bound).
        with np.errstate(over="ignore", invalid="ignore"):
            squared = np.einsum("ij,ij->i", X, X, out=workspace("gram squared", n_rows))
        target = clip_threshold(params.x_bound, d)
        over = squared > target**2
        if over.any():
            scale = np.ones(n_rows)
            scale[over] = target / np.sqrt(squared[over])
            X = np.multiply(X, scale[:, None],
                            out=X if fused else workspace_like("gram scaled", X))
    # Otherwise ||x||^2 <= d max|x_ij|^2 < x_bound^2 for every row, with a
    # margin for rounding: no row is clipped, as the norms would say, so
    # skipping them changes no statistic
    # (only the time of the pass, which the guarantee does not cover).
    # Silent on overflow: with unclipped (public) rows the sums may overflow,
    # and whether they do can depend on the labels.
    with np.errstate(over="ignore", invalid="ignore"):
        if fused:
            product = np.dot(X.T, both)
            XtX += product[:, :d]
            XtY1 += product[:, d:]
        else:
            XtX += np.dot(X.T, X)
            XtY1 += np.dot(X.T, labels)


#: Most features (with one output; one fewer per further output) multiplied as
#: ``X^T [X, Y, 1]`` in one product (:func:`fused_layout`).
FUSED_MAX_COLUMNS = 12


def symmetric_from_upper(M):
    """``M``'s upper triangle mirrored: a sum of products ``X^T [X, Y, 1]``, which
    BLAS does not promise to be symmetric, made so."""
    return np.triu(M) + np.triu(M, 1).T


def fused_layout(X, n_columns, n_outputs=1):
    """Whether the pieces of block ``X`` are multiplied as one ``X^T [X, Y, 1]``.

    For narrow Fortran-ordered rows (a data frame's), which are copied anyway
    (:func:`~skprivreg._blocks.as_float64_block`): copying the labels beside
    them and multiplying once, in pieces of :data:`FUSED_PIECE_BYTES`, took 0.6-0.7x
    the CPU time of a symmetric product and a second product for the labels
    at ten features (n = 1e6, one thread; pieces above the core's L2 cache
    ran 1.5x slower). The layout alone decides, never the values, so a
    clipped piece is multiplied as its unclipped neighbours are. Not with
    many outputs (``Y`` would be copied once more per piece).
    """
    return (memory_order(np.asarray(X)) == "F"
            and n_columns + n_outputs <= FUSED_MAX_COLUMNS + 1)


def run_pieces(bounds, run, n_threads, into, combine):
    """``run(list of pieces, acc or None) -> partial`` over ``bounds``, shared by threads.

    With ``n_threads > 1`` the pieces are split into that many contiguous
    runs, one per thread (the calling thread runs the first), whose partials
    are combined in row order: the result does not depend on how the threads
    were scheduled. An error in any run leaves once every run has ended. A block
    without rows (an empty Dask chunk) is run as one empty piece: block
    functions return their zero partial for it.
    """
    bounds = bounds or [(0, 0)]
    k = min(n_threads, len(bounds))
    if k <= 1:
        return run(bounds, into)
    runs = [bounds[i * len(bounds) // k:(i + 1) * len(bounds) // k] for i in range(k)]
    # A pool thread has its own floating-point state: silenced here as in ``fit``.
    work = quiet_floats(lambda r: run(r, None))
    # The calling thread runs the first run itself while k - 1 pool threads
    # run the others, instead of waking k threads and waiting: measured at
    # n = 1e6, d = 10 on two cores, a one-round LinearRegression fit took
    # 0.95x the time (median of 30 interleaved pairs; no change at d = 100).
    futures = [_pool(k - 1).submit(work, r) for r in runs[1:]]
    try:
        first = work(runs[0])
    except BaseException:
        wait(futures)  # the other runs end before the error leaves the pass
        raise
    parts = [first, *(future.result() for future in futures)]
    total = parts[0] if into is None else combine(into, parts[0])
    for part in parts[1:]:
        total = combine(total, part)
    return total


def gram_block(offset, X, Y, params, into=None):
    """Block function of :func:`gram_statistics` (see :mod:`skprivreg._rows`).

    ``(X^T X, X^T [Y, 1], 1^T Y)`` of the clipped rows of one block (a NumPy
    slice or a Dask chunk, any float dtype), computed in cache-sized pieces
    and added to ``into`` in place when given; with ``params.n_threads > 1``
    the pieces are shared by threads (:func:`run_pieces`).
    """
    X = np.asarray(X)
    d = X.shape[1] if params.columns is None else len(params.columns)
    fused = fused_layout(X, d, params.n_outputs)
    cache = params.cache_bytes
    if fused and cache is None:
        cache = FUSED_PIECE_BYTES
    bounds = list(iter_cache_blocks(X.shape[0], d + params.n_outputs + 1, cache))

    def run(pieces, acc):
        acc = _empty_partial(d, params.n_outputs) if acc is None else acc
        for group in _label_groups(pieces, params.n_outputs):
            first = group[0][0]
            labels = _labels_of_run(Y[first:group[-1][1]], params, acc)
            for start, stop in group:
                _gram_of_block(X[start:stop], labels[start - first:stop - first], params, acc,
                               fused)
        return acc

    return run_pieces(bounds, run, params.n_threads, into, add_tuples)


#: Largest label buffer of a run of pieces (:func:`_labels_of_run`), in bytes.
LABEL_RUN_BYTES = 2 << 20


def _label_groups(pieces, n_outputs):
    """Consecutive pieces in groups whose rows of ``[Y, 1]`` fit :data:`LABEL_RUN_BYTES`
    (each piece alone when one piece's labels are larger)."""
    limit = max(1, LABEL_RUN_BYTES // (8 * (int(n_outputs) + 1)))
    group = []
    for piece in pieces:
        if group and piece[1] - group[0][0] > limit:
            yield group
            group = []
        group.append(piece)
    if group:
        yield group


class cache_blocked:  # noqa: N801 (used like a function)
    """Block function summing ``function(X_piece, Y_piece)`` over cache-sized pieces.

    For statistics whose block temporaries have the block's shape (a mapped
    or clipped copy of the rows): each piece of ``n_columns``-wide rows fits
    the cache, whatever the size of the block (a Dask chunk, a memmap
    block), so the temporaries stay small. ``piece_rows`` fixes the rows of
    a piece instead (a statistic that reads each row once, with temporaries
    of one value per row: longer products run faster). Partials are tuples of arrays,
    summed in row order; ``n_threads > 1`` shares the pieces of a block
    between threads (:func:`run_pieces`; use 1 on Dask workers).
    Picklable when ``function`` is (for Dask).
    """

    def __init__(self, function, n_columns, n_threads=1, piece_rows=None):
        self.function = function
        self.n_columns = int(n_columns)
        self.n_threads = int(n_threads)
        self.piece_rows = None if piece_rows is None else max(1, int(piece_rows))

    def __call__(self, offset, X, Y, params=None, into=None):
        def run(pieces, acc):
            for start, stop in pieces:
                part = self.function(X[start:stop], None if Y is None else Y[start:stop])
                acc = part if acc is None else add_tuples(acc, part)
            return acc

        if self.piece_rows is None:
            bounds = list(iter_cache_blocks(len(X), self.n_columns))
        else:
            bounds = [(a, min(a + self.piece_rows, len(X)))
                      for a in range(0, len(X), self.piece_rows)]
        return run_pieces(bounds, run, self.n_threads, into, add_tuples)


def threads_for(source):
    """Threads of a pass over ``source``: 1 on Dask workers (the cluster schedules
    their cores), else :data:`N_THREADS`.

    Block functions multiply with ``np.dot``, never ``@``: NumPy's ``matmul``
    keeps the interpreter lock while it computes a result of at most 500
    entries (a Gram matrix of up to 22 columns, ``X^T y``), so threads would
    take turns. Measured at n = 1e6, d = 10 on two cores: two threads read the
    blocks of the SSP pass in 0.97x the floor's time against 1.22x for one,
    and with ``@`` two threads were no faster than one.
    """
    return 1 if source.is_dask else N_THREADS


def reduce_threaded(source, fn, combine, params=None, *, label="", n_threads=1):
    """``source.reduce(...)``, with BLAS kept to one thread when the pass runs threads."""
    if n_threads > 1:
        with single_threaded_blas():
            return source.reduce(fn, combine, params, label=label)
    return source.reduce(fn, combine, params, label=label)


#: About this many rows make a block of a pass over a NumPy array or a memmap.
#: The threads of a pass meet at the end of every block: measured at n = 1e6,
#: d = 10 on two cores (13 interleaved triples), blocks of 2^18 rows made a
#: one-round LinearRegression fit 1.36x the floor against 1.52x with blocks
#: of 2^16 (and 2^20 gained no more). Blocks of raw rows are views, never
#: copied whole: block functions copy at most a cache-sized piece.
SOURCE_BLOCK_ROWS = 1 << 18


def source_block_rows(n_columns):
    """Rows per :class:`~skprivreg._rows.RowSource` block: a whole number of cache blocks.

    About :data:`SOURCE_BLOCK_ROWS` rows, so a block splits into equal
    cache-sized pieces (no short piece per block), and a multiple of
    :data:`N_THREADS` pieces, so the threads of a pass get equal shares of
    every block.
    """
    piece = cache_block_rows(n_columns)
    pieces = max(1, SOURCE_BLOCK_ROWS // piece)
    return piece * max(N_THREADS, pieces - pieces % N_THREADS)


def streamed_piece_rows(block_rows, n_columns, n_threads, piece_bytes=WORKSPACE_MAX_BYTES):
    """Rows of the pieces of a pass whose pieces are longer than cache-sized ones.

    A block's share per thread, cut into equal pieces of at most
    ``piece_bytes`` of rows, and never fewer rows than a cache-sized piece.
    Each thread gets the same number of pieces of every block. The default,
    :data:`~skprivreg._blocks.WORKSPACE_MAX_BYTES`, is for a pass that reads
    each row once into vector temporaries (a piece with an entry outside its
    range is clipped in a copy of that size); a pass that reads each piece
    twice uses :func:`reread_piece_bytes`.
    """
    share = -(-int(block_rows) // max(int(n_threads), 1))
    cap = max(cache_block_rows(n_columns), int(piece_bytes) // (8 * max(int(n_columns), 1)))
    per_thread = -(-share // cap)
    return -(-share // per_thread)


def reread_piece_bytes(n_threads):
    """Bytes of a piece that a block function reads twice (a product on the rows, then
    one on their residuals, or a copy and its product): the pieces of all threads fill
    a quarter of the shared cache (:data:`SHARED_CACHE_BYTES`), so the second read
    comes from it; at least a cache-sized piece, and at most
    :data:`~skprivreg._blocks.WORKSPACE_MAX_BYTES` (a copy of a piece goes to a
    reused buffer).

    Measured on a LinearRegression gradient pass at n = 1e6 on two cores (32 MiB of
    shared cache: 4 MiB pieces), against pieces of half the L2 cache: 29 -> 15 ms at
    d = 10, 57 -> 29 ms at d = 30, 182 -> 91 ms at d = 100 (5 interleaved repeats; the
    Python cost of a piece and the threads' turns at the interpreter lock shrink
    with the number of pieces).
    """
    shared = SHARED_CACHE_BYTES // (4 * max(int(n_threads), 1))
    return max(CACHE_BYTES, min(shared, WORKSPACE_MAX_BYTES))


def augment_gram(XtX, XtY1, y_sum, n_samples, intercept_scaling=None):
    """``([X, c 1]^T [X, c 1], [X, c 1]^T Y)`` from the sums of one pass.

    ``intercept_scaling=None``: no intercept column, ``(X^T X, X^T Y)``.
    """
    XtY, x_sum = XtY1[:, :-1], XtY1[:, -1]
    if intercept_scaling is None:
        return XtX, XtY
    c = float(intercept_scaling)
    gram = np.block([[XtX, c * x_sum[:, None]],
                     [c * x_sum[None, :], np.array([[c * c * n_samples]])]])
    return gram, np.vstack([XtY, c * y_sum[None, :]])


def gram_statistics(source, *, x_bound, y_bound, intercept_scaling=None, estimator_name=None,
                    label="XtX, XtY", columns=None, x_range=None, y_range=None):
    """One pass over ``source``: the clipped ``([X, c 1]^T [X, c 1], [X, c 1]^T Y)``.

    Parameters
    ----------
    source : RowSource
        The rows, with ``raw_blocks=True`` (blocks are read in their own
        dtype) and 2-D ``Y``.
    x_bound, y_bound : float or None
        Public clipping bounds of the row norms of ``X`` and of the labels.
    intercept_scaling : float or None
        Value ``c`` of the constant column (``None``: no intercept).
    estimator_name : str or None
        Named in the error for NaN or infinity.
    label : str
        Name of the pass in ``verbose`` progress lines.
    columns : array of int or None
        Use only these columns of ``X`` (read block by block: no column copy
        of the whole array).
    x_range : (low, high) or None
        Per-entry clip of the used columns (arrays of their length), applied
        before the row clip.
    y_range : (low, high) or None
        Label clip range; overrides ``[-y_bound, y_bound]``.

    Returns
    -------
    XtX : ndarray of shape (p, p)
    XtY : ndarray of shape (p, n_outputs)

    Raises scikit-learn's ``ValueError`` for NaN or infinity in ``X`` or
    ``Y`` during the pass (nothing has been released then).
    """
    n_outputs = 1 if source.Y.ndim == 1 else int(source.Y.shape[1])
    n_threads = threads_for(source)
    if y_range is None and y_bound is not None:
        y_range = (-y_bound, y_bound)
    params = GramParams(x_bound, y_range, n_outputs, estimator_name, n_threads=n_threads,
                        columns=columns, x_range=x_range)
    XtX, XtY1, y_sum = reduce_threaded(source, gram_block, add_tuples, params, label=label,
                                       n_threads=n_threads)
    XtX = symmetric_from_upper(XtX)
    return augment_gram(XtX, XtY1, y_sum, source.n, intercept_scaling)
