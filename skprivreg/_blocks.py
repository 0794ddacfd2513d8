"""Buffers and copies of a block of rows, for the passes of :mod:`skprivreg._rows`.

A pass reads cache-sized pieces of a block; the temporaries of a piece (a
converted, clipped or mapped copy, a labels buffer) go to this thread's
reused scratch arrays (:func:`workspace`), in the block's memory order
(:func:`memory_order`). :func:`as_float64_block` gives a block as aligned,
contiguous float64, copying it only when it must (another float type, an
unaligned or strided block, or a block of a file that may change between
two reads: :func:`is_file_backed`; :func:`numpy_owned` tells arrays no other
process can change).
"""

import math
import mmap
import threading

import numpy as np
from scipy import sparse

__all__ = [
    "WORKSPACE_MAX_BYTES",
    "WORKSPACE_TOTAL_BYTES",
    "as_float64_block",
    "is_column_strided",
    "is_file_backed",
    "memory_order",
    "numpy_owned",
    "pass_workspace",
    "workspace",
    "workspace_like",
]

#: Largest buffer :func:`workspace` keeps for reuse (larger ones are allocated
#: for each call: their products cost far more than the allocation), and the
#: most it keeps per thread in all.
WORKSPACE_MAX_BYTES = 8 << 20
WORKSPACE_TOTAL_BYTES = 32 << 20

_WORKSPACE = threading.local()


class pass_workspace:
    """Within it, this thread's :func:`workspace` keeps buffers of up to ``max_bytes``.

    For a pass whose pieces are larger than :data:`WORKSPACE_MAX_BYTES` (the
    long pieces of wide labels, :func:`~skprivreg.linear_model._reusecov_stats.piece_rows`):
    a converted or clipped copy of such a piece is then allocated once per
    thread and pass, not once per piece (a fresh buffer costs a page fault
    per 4 kB). On exit the buffers above :data:`WORKSPACE_MAX_BYTES` are
    dropped: nothing larger outlives the pass.
    """

    def __init__(self, max_bytes):
        self.max_bytes = int(max_bytes)

    def __enter__(self):
        self._previous = getattr(_WORKSPACE, "max_bytes", WORKSPACE_MAX_BYTES)
        _WORKSPACE.max_bytes = max(self.max_bytes, self._previous)
        return self

    def __exit__(self, *exc):
        _WORKSPACE.max_bytes = self._previous
        buffers = getattr(_WORKSPACE, "buffers", {})
        for key in [k for k, b in buffers.items() if 8 * b.size > self._previous]:
            del buffers[key]
        return False


def workspace(key, shape, order="C"):
    """A float64 scratch array of ``shape``, reused by this thread's calls with ``key``.

    For the temporaries of cache-sized pieces (a converted copy of the rows,
    a labels buffer). Allocating them for every piece costs page faults
    where freed memory goes back to the system at once (Dask's nannies set
    ``MALLOC_TRIM_THRESHOLD_``): on a worker, converting a 125,000-row chunk
    in fresh 1 MB pieces took 4 ms, into one reused buffer 0.5 ms. The
    contents are undefined; the array is overwritten by the next call with
    the same ``key`` on this thread, so it must not outlive the piece (never
    part of a partial). Arrays above :data:`WORKSPACE_MAX_BYTES` are not kept,
    nor any that would take a thread's buffers above
    :data:`WORKSPACE_TOTAL_BYTES` (within :class:`pass_workspace`, its
    larger limit, and twice the excess over the total). ``order``: the array's memory order
    (``"F"``: contiguous columns).
    """
    # Called for every piece: plain Python on the shape (NumPy on a tuple
    # costs microseconds).
    shape = tuple(shape) if isinstance(shape, tuple) else (int(shape),)
    size = math.prod(shape)
    try:
        buffers = _WORKSPACE.buffers
    except AttributeError:
        buffers = _WORKSPACE.buffers = {}
    buffer = buffers.get(key)
    if buffer is None or buffer.size < size:
        kept = sum(b.size for k, b in buffers.items() if k != key)
        largest = getattr(_WORKSPACE, "max_bytes", WORKSPACE_MAX_BYTES)
        total = WORKSPACE_TOTAL_BYTES + 2 * (largest - WORKSPACE_MAX_BYTES)
        if 8 * size > largest or 8 * (kept + size) > total:
            return np.empty(shape, order=order)
        buffer = buffers[key] = np.empty(size)
    if order == "F":
        return buffer[:size].reshape(shape[::-1]).T
    return buffer[:size].reshape(shape)


def memory_order(X):
    """``"F"`` when the columns of the 2-D array ``X`` are contiguous and its rows are
    not (a Fortran-ordered array or a slice of its rows: what scikit-learn makes of a
    data frame), else ``"C"`` (one row or one column is both: ``"C"``).

    Copies of a block keep this order (:func:`as_float64_block`,
    :func:`workspace_like`): a transposing copy of narrow rows costs more than
    the products, and a product rounds the two layouts differently, so a
    clipped copy and a block used as stored must share theirs.
    """
    if (X.ndim == 2 and X.shape[0] > 1 and X.shape[1] > 1 and X.strides[0] == X.itemsize
            and not X.flags.c_contiguous):
        return "F"
    return "C"


def workspace_like(key, X):
    """:func:`workspace` of ``X``'s shape in ``X``'s :func:`memory_order`: the buffer
    for a clipped or mapped copy of a block."""
    return workspace(key, X.shape, order=memory_order(X))


def as_float64_block(block, scratch=None, column_strided=False):
    """The block as aligned, contiguous float64: the block itself, else a block-sized copy.

    A copy when the block is of another float type; when its data are not
    aligned to 8 bytes (NumPy multiplies unaligned arrays without BLAS,
    several times slower; a Dask array made with ``from_array`` reaches the
    workers so, its chunks unpickled at an odd offset); or when it is not
    contiguous (a column slice of a wider array, a slice of the rows of a
    Fortran-ordered one): ``np.dot`` rounds a strided operand differently
    from a contiguous one, and a clipped block is a contiguous copy, so a
    block used as it is must be contiguous too for clipping to change no bit
    of a sum. The copy keeps the block's :func:`memory_order`, as clipped
    copies do (:func:`workspace_like`). ``scratch``: a :func:`workspace` key;
    the copy is made into that reused buffer (for a cache-sized piece that is
    not kept).

    ``column_strided``: a slice of the rows of a Fortran-ordered float64
    array (:func:`is_column_strided`) is used as it is, for a caller that
    multiplies it only with ``np.matmul`` (which hands the column stride to
    BLAS as the leading dimension; ``np.dot`` runs a slow loop on such an
    operand) and never compares that product with one on a copy: BLAS may
    round the same rows differently at another leading dimension (OpenBLAS
    does for pieces of 2-3 rows).

    A block of a file (an ``np.memmap`` or a view of one) is always copied:
    another process may change the file between two reads, so the values a
    block function checks (NaN, ranges, row norms) and the values it sums
    must come from one read. Block functions whose checks guard a sum (a
    clip, a range, NaN refusal before a sum) read a block through this
    function before they check it. (A count of rows above public thresholds
    needs no copy: each row adds at most one to each count, whatever it
    reads.)
    """
    block = np.asarray(block)
    if (block.dtype == np.float64 and block.flags.aligned
            and (block.flags.c_contiguous or block.flags.f_contiguous
                 or (column_strided and is_column_strided(block)))
            and not is_file_backed(block)):
        return block
    if scratch is None:
        return block.astype(np.float64, order=memory_order(block))
    out = workspace_like(scratch, block)
    np.copyto(out, block, casting="unsafe")
    return out


def is_column_strided(X):
    """True when ``X`` is 2-D with contiguous columns of at least two rows at a stride
    of at least their length: a slice of the rows of a Fortran-ordered array (what
    scikit-learn makes of a data frame), which BLAS reads with that stride as its
    leading dimension. (One row is not: its product is a dot product with a stride,
    which BLAS rounds otherwise than a contiguous one.)"""
    return (X.ndim == 2 and X.shape[0] > 1 and X.strides[0] == X.itemsize
            and X.strides[1] > 0
            and X.strides[1] % X.itemsize == 0
            and X.strides[1] >= X.itemsize * X.shape[0])


def numpy_owned(array):
    """True when ``array``'s memory was allocated by NumPy in this process (through
    any chain of views): no file and no other process can change it during a fit.

    An array over a file (:func:`is_file_backed`), over shared memory
    (``multiprocessing``'s ``RawArray`` or ``SharedMemory``) or over any other
    foreign buffer is not: its passes check their rows again, as a file's do.
    """
    if sparse.issparse(array):
        return all(numpy_owned(getattr(array, name))
                   for name in ("data", "indices", "indptr") if hasattr(array, name))
    while isinstance(array, np.ndarray):
        if array.flags.owndata:
            return True
        array = array.base
    return False


def is_file_backed(array):
    """True for a view of a memory-mapped file: an ``np.memmap``, any array over an
    ``mmap`` (also through a ``memoryview``), or a sparse matrix whose arrays are.

    ``validate_data`` returns views. A copy of a memmap (``.copy()``, a pandas
    column made from one) owns its memory: it is in memory.
    """
    if sparse.issparse(array):
        return any(is_file_backed(getattr(array, name, None))
                   for name in ("data", "indices", "indptr"))
    while array is not None:
        if isinstance(array, mmap.mmap):
            return True
        array = array.obj if isinstance(array, memoryview) else getattr(array, "base", None)
    return False
