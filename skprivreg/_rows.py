"""One row source for NumPy arrays, ``np.memmap`` and Dask collections.

Every estimator reads its training rows through this module. A *pass* over
the rows is a **block function** and an associative **combine**:

* the block function maps one block of rows to a partial statistic,
  ``fn(offset, X_block, Y_block, params, into=None) -> partial``
  (``offset`` is the global index of the block's first row, ``params`` the
  public inputs of the pass); when ``into`` is given it is the running
  partial of other rows (on NumPy, the rows before the block; on Dask, the
  chunks a task has read so far, which need not be adjacent), and the
  function returns ``combine(into, partial of this block)``, which it may
  compute in place;
* ``combine(a, b)`` merges the partials of two disjoint sets of rows and
  must be associative and commutative: a result may depend on the order of
  rows only through float64 rounding (rank by global row index, never by
  position in a partial).

:class:`RowSource` runs a pass with :meth:`RowSource.reduce`. On a NumPy
array or a memmap the blocks are folded in order on this process, one block
of at most ``block_rows`` rows in memory at a time, so a memmap is streamed
from disk with bounded memory. On a Dask array (or a Dask data frame, via
:func:`validate_blockwise_data`) the chunks are read on the workers, in one
task per chunk or, for chunks the workers hold, one task per worker thread
(:mod:`skprivreg._dask_passes`), and only the reduced statistic reaches the
driver. Block functions are pure and draw nothing random: every noise draw
happens on the driver, after the reduction.

Several statistics can share one read of the data: :func:`fuse` turns a list
of passes into one (a tuple of partials per block, combined componentwise),
and :meth:`RowSource.reduce_many` runs them together, for example ``X^T X``,
``X^T y`` and the counts of rows above a ladder of bounds. A simple
statistic that is a sum of per-block terms needs only a function of the
block, wrapped by :func:`block_map`; :func:`sum_over_row_blocks` does this
for one call.
"""

import warnings

import numpy as np
from scipy import sparse
from sklearn.exceptions import DataConversionWarning
from sklearn.utils import check_array

from ._blocks import as_float64_block, is_file_backed, numpy_owned
from ._compat import validate_data
from ._dask_passes import chunk_tasks, reduce_chunks, worker_groups

__all__ = [
    "BLOCK_ROWS",
    "RowSource",
    "add_tuples",
    "as_dask_array",
    "as_dask_arrays",
    "block_map",
    "check_block_finite",
    "check_dask_dtype",
    "check_dask_samples",
    "fuse",
    "is_dask_collection",
    "read_into_memory",
    "same_row_chunks",
    "set_dask_feature_names",
    "sum_over_row_blocks",
    "validate_blockwise_data",
]

#: Default rows per block for NumPy and memmap input.
BLOCK_ROWS = 1 << 16


def is_dask_collection(obj):
    """True for Dask arrays and data frames (without importing Dask)."""
    return hasattr(obj, "__dask_graph__")


def check_block_finite(block, name="X"):
    """Raise scikit-learn's error for NaN or infinity in a block (may run on a worker)."""
    if not np.isfinite(block).all():
        raise ValueError(f"Input {name} contains NaN or infinity.")


def add_tuples(a, b):
    """The default combine: elementwise sum of two tuples of arrays.

    Silent on overflow: ``inf + (-inf)`` in partials of public rows would
    otherwise warn or not depending on other rows' values.
    """
    with np.errstate(all="ignore"):
        return tuple(x + y for x, y in zip(a, b))


def read_into_memory(array, name="X"):
    """``array`` itself, or for a view of a memory-mapped file an in-memory copy, checked
    for NaN or infinity.

    For fits that keep their data in memory and read it several times (an
    iterative solver, a partition, a sort): another process may change the
    file after ``validate_data`` checked it, so such a fit reads the file once
    and checks what it read. Fits that stream a file read each piece once
    instead (:func:`~skprivreg._blocks.as_float64_block`).
    """
    if not is_file_backed(array):
        return array
    if sparse.issparse(array):
        copy = array.copy()
        check_block_finite(copy.data, name)
        return copy
    copy = np.array(array)
    check_block_finite(copy, name)
    return copy


def _run_block(fn, offset, X, Y, clip, check_finite, params, into=None):
    """Prepare one raw block and apply the block function ``fn``.

    The block becomes float64; with ``check_finite`` it is checked for NaN or
    infinity (before the clip, which would map an infinite entry to a finite
    one). A block function whose attribute ``checks_finite`` is true does the
    check itself, fused with its own read of the block: it then receives
    ``check_finite=True``.
    """
    X = as_float64_block(X)
    if Y is not None:
        Y = as_float64_block(Y)
    fused = check_finite and clip is None and getattr(fn, "checks_finite", False)
    if check_finite and not fused:
        check_block_finite(X, "X")
        if Y is not None:
            check_block_finite(Y, "y")
    if clip is not None:
        X = np.clip(X, -clip, clip)
    if fused:
        return fn(offset, X, Y, params, into, check_finite=True)
    return fn(offset, X, Y, params, into)


def _call_raw(fn, offset, X, Y, clip, check_finite, params, into=None):
    """Apply ``fn`` to a block as stored (``raw_blocks``: ``fn`` converts, checks and clips)."""
    return fn(offset, X, Y, params, into)


class RowSource:
    """Row blocks of ``(X, Y)`` for a NumPy array, a memmap or a Dask array.

    Parameters
    ----------
    X : ndarray, np.memmap or dask array of shape (n_samples, n_features)
    Y : same kind with n_samples rows (1-D or 2-D), or None
    block_rows : int or None, default=BLOCK_ROWS
        Rows per block for NumPy and memmap input (``None``: one block). Dask
        input keeps its own row chunks.
    fit_intercept : bool, default=False
        Whether the model appends a ones column: sets ``p = d + 1`` and the
        rows returned by :meth:`rows` (block functions see raw ``X``).
    clip : float or None, default=None
        Public per-entry clip of ``X`` to ``[-clip, clip]`` applied to every
        block (a fixed per-row map).
    check_finite : bool, default=False
        Check every block for NaN or infinity during the first complete pass
        (streamed and Dask inputs are validated while they are read, before
        anything is released). Always on for Dask input unless
        ``raw_blocks`` (whose block functions check it themselves).
    raw_blocks : bool, default=False
        Hand the block functions the blocks as stored (any dtype, no
        finiteness check, no clip): for block functions that convert, check
        and clip inside their own read of the block (:mod:`skprivreg._gram`).
    verbose : int, default=0
        Print one progress line per pass (``>= 1``) and, on NumPy and memmap
        input, lines at fixed fractions of a pass that reads every row
        (``>= 2``). A line carries only public facts: the source's name, the
        pass number and label, rows read so far and ``n``.
    name : str, default="rows"
        Name printed at the start of progress lines (an estimator's name).

    Attributes
    ----------
    n, d, p : int
        Rows, columns of ``X``, and ``d + fit_intercept``.
    offsets : ndarray of int
        Global index of the first row of each block (public: from ``n`` and
        the block or chunk sizes).
    is_dask : bool
    in_memory : bool
        ``X`` and ``Y`` are held in memory NumPy allocated (:func:`~skprivreg._blocks.numpy_owned`;
        not Dask, not a file, not shared memory): every pass reads the same
        values, so passes after the first skip the NaN check.
    n_passes : int
        Passes run so far (each :meth:`reduce` call is one read of the rows).
    """

    def __init__(self, X, Y=None, *, block_rows=BLOCK_ROWS, fit_intercept=False, clip=None,
                 check_finite=False, raw_blocks=False, verbose=0, name="rows"):
        self.is_dask = is_dask_collection(X) or is_dask_collection(Y)
        self.n, self.d = int(X.shape[0]), int(X.shape[1])
        if self.is_dask:
            if Y is not None:
                X, Y = same_row_chunks(X, Y)
            X = X.rechunk({1: -1})
            if Y is not None:
                Y = Y.rechunk((X.chunks[0],) + (-1,) * (Y.ndim - 1))
            sizes = np.asarray(X.chunks[0], dtype=np.int64)
            self.block_rows = None
        else:
            self.block_rows = self.n if block_rows is None else max(1, int(block_rows))
            step = max(self.block_rows, 1)
            sizes = np.diff(np.append(np.arange(0, self.n, step), self.n)).astype(np.int64)
        self.X, self.Y = X, Y
        self.in_memory = not self.is_dask and numpy_owned(X) and (Y is None or numpy_owned(Y))
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self._sizes = sizes
        self.fit_intercept = bool(fit_intercept)
        self.p = self.d + int(self.fit_intercept)
        self.clip = clip
        self.raw_blocks = bool(raw_blocks)
        # Dask blocks were never validated on the driver: their first complete
        # pass checks them unless the block functions do (raw blocks).
        self.check_finite = bool(check_finite) or (self.is_dask and not self.raw_blocks)
        self.verbose = int(verbose)
        self.name = str(name)
        self.n_passes = 0
        self._groups = self._chunks = None

    def _progress(self, label, rows=None):
        """One progress line of public facts (the pass number, its label, rows read, n)."""
        text = f"[{self.name}] pass {self.n_passes}"
        if label:
            text += f" ({label})"
        if rows is None:
            text += f": {self.n:,} rows" + (" on Dask" if self.is_dask else "")
        else:
            text += f": {rows:,} / {self.n:,} rows"
        print(text, flush=True)

    @property
    def y(self):
        """The labels (``Y``), as ISSP's single-target code names them."""
        return self.Y

    def reduce(self, fn, combine=add_tuples, params=None, *, stop=None, label=""):
        """One pass: ``combine`` over all blocks of ``fn(offset, X_b, Y_b, params)``.

        ``stop(partial)`` (NumPy and memmap input only) may end the pass
        early: it is called after each block with the running partial, and a
        true value returns that partial at once (the finiteness check of an
        incomplete pass stays pending). A Dask pass always reads every block.
        ``label`` names the pass in progress lines.

        Progress lines never depend on the data: a pass that may stop early
        prints its line before it starts, never the rows it read.
        """
        self.n_passes += 1
        run = _call_raw if self.raw_blocks else _run_block
        if self.verbose and (self.is_dask or stop is not None):
            self._progress(label)
        if self.is_dask:
            result = self._reduce_dask(fn, combine, params, run, label)
        else:
            result = None
            checkpoints = self._checkpoints() if self.verbose and stop is None else {}
            for off, size in zip(self.offsets, self._sizes):
                lo, hi = int(off), int(off + size)
                result = run(fn, lo, self.X[lo:hi], None if self.Y is None else self.Y[lo:hi],
                             self.clip, self.check_finite, params, result)
                if stop is not None and stop(result):
                    return result
                if hi in checkpoints:
                    self._progress(label, hi)
        if self.in_memory:
            # Validated once, during the first complete pass. Rows that may change
            # between passes (a file, a Dask graph recomputed) are checked in each.
            self.check_finite = False
        return result

    def _checkpoints(self):
        """Block ends after which a complete pass prints its progress (public: from n).

        ``verbose=1``: the end of the pass; ``verbose>=2``: also about every
        tenth of the blocks.
        """
        ends = (self.offsets + self._sizes).tolist()
        if self.verbose < 2:
            return set(ends[-1:])
        return {ends[int(round(k * (len(ends) - 1) / 10))] for k in range(11)}

    def _reduce_dask(self, fn, combine, params, run=None, label=""):
        if self._chunks is None:
            self._chunks = chunk_tasks(self.X, self.Y)
        if self._groups is None:
            # Where the chunks are held, asked until they are: a fit's passes
            # read the same chunks.
            self._groups = worker_groups(self.X)
        result = reduce_chunks(self._chunks, self.offsets.tolist(),
                               _run_block if run is None else run, fn, combine, params,
                               self.clip, self.check_finite, self._groups,
                               sizes=self._sizes.tolist())
        if self.verbose:
            self._progress(label, self.n)
        return result

    def reduce_many(self, passes, *, stop=None):
        """Several passes in one read of the rows.

        ``passes`` is a list of ``(fn, combine, params)``; returns the list of
        their results, as separate :meth:`reduce` calls would (see :func:`fuse`).
        """
        fn, combine, params = fuse(passes)
        return list(self.reduce(fn, combine, params, stop=stop))

    def augment(self, Xraw):
        """Append the ones column (if ``fit_intercept``) to raw rows (a copy)."""
        Xraw = np.asarray(Xraw, dtype=np.float64)
        if not self.fit_intercept:
            return np.array(Xraw)
        return np.hstack([Xraw, np.ones((Xraw.shape[0], 1))])

    def rows(self, idx):
        """``(X~, Y)`` of the rows ``idx`` (sorted global indices): clipped, with the ones column.

        Only those rows are read (on Dask, only the blocks holding them).
        """
        idx = np.asarray(idx, dtype=np.int64)
        Xr = self.X[idx]
        Yr = None if self.Y is None else self.Y[idx]
        if self.is_dask:
            import dask

            Xr, Yr = dask.compute(Xr, Yr)
        Xr = np.asarray(Xr, dtype=np.float64).reshape(len(idx), self.d)
        if self.clip is not None:
            Xr = np.clip(Xr, -self.clip, self.clip)
        if Yr is not None:
            Yr = np.asarray(Yr, dtype=np.float64)
            if Yr.ndim == 1 or self.Y.ndim == 1:
                Yr = Yr.reshape(-1)
        return self.augment(Xr), Yr


class block_map:  # noqa: N801 (used like a function)
    """A block function from ``function(X_block, Y_block) -> partial`` (offset and params unused).

    The partials of consecutive blocks are merged with ``combine``.
    """

    def __init__(self, function, combine=add_tuples):
        self.function = function
        self.combine = combine

    def __call__(self, offset, X, Y, params=None, into=None):
        part = self.function(X, Y)
        return part if into is None else self.combine(into, part)


class _Fused:
    """Block function of :func:`fuse`: one partial per fused pass, from one read of the block."""

    def __init__(self, fns):
        self.fns = tuple(fns)
        self.checks_finite = any(getattr(f, "checks_finite", False) for f in self.fns)

    def __call__(self, offset, X, Y, params, into=None, check_finite=False):
        checker = -1
        if check_finite:
            checker = next(i for i, f in enumerate(self.fns) if getattr(f, "checks_finite", False))
        out = []
        for i, fn in enumerate(self.fns):
            acc = None if into is None else into[i]
            if i == checker:
                out.append(fn(offset, X, Y, params[i], acc, check_finite=True))
            else:
                out.append(fn(offset, X, Y, params[i], acc))
        return tuple(out)


class _FusedCombine:
    def __init__(self, combines):
        self.combines = tuple(combines)

    def __call__(self, a, b):
        return tuple(c(x, y) for c, x, y in zip(self.combines, a, b))


def fuse(passes):
    """One pass computing several statistics: a list of ``(fn, combine, params)`` -> one triple.

    The fused block function reads each block once and returns the tuple of
    the passes' partials; the fused combine merges them componentwise.
    """
    passes = [tuple(p) + (None,) * (3 - len(p)) for p in passes]
    fns, combines, params = zip(*passes)
    return _Fused(fns), _FusedCombine(combines), tuple(params)


def sum_over_row_blocks(block_function, X, Y=None, block_rows=BLOCK_ROWS, combine=add_tuples):
    """``sum_b block_function(X_b, Y_b)`` over row blocks (:class:`RowSource` in one call).

    Parameters
    ----------
    block_function : callable
        ``(X_block, Y_block_or_None) -> statistics``; must be a pure function
        of the block (it may run in another process).
    X : ndarray, memmap or dask array of shape (n, d)
    Y : same kind, shape (n,) or (n, l), or None
    block_rows : int
        Rows per block on NumPy input (Dask input keeps its own chunks).
    combine : callable, default: elementwise sum of tuples
        Associative merge of two blocks' statistics.
    """
    source = RowSource(X, Y, block_rows=block_rows)
    result = source.reduce(block_map(block_function, combine), combine)
    return tuple(result) if combine is add_tuples else result


def validate_blockwise_data(estimator, X, y, *, multi_output=True, dtype=np.float64,
                            ensure_all_finite=True):
    """``validate_data`` for NumPy input; shape-only checks for Dask input.

    Dask input is not materialised: dimensions, dtypes and matching row
    counts are checked here, ``n_features_in_`` and ``feature_names_in_``
    are set as sklearn does, and finiteness is checked inside the block
    functions (:func:`check_block_finite`), before any noise is drawn.
    A Dask data frame becomes a Dask array (its partition lengths, which
    are public, are computed).

    ``dtype`` is scikit-learn's: a type, or a list of accepted types (the
    first is the conversion target of any other). When only one side is a
    Dask collection, the other (in memory) is checked by scikit-learn
    (:func:`same_row_chunks` makes both Dask). With
    ``ensure_all_finite=False`` a NumPy ``X`` is not checked for NaN or
    infinity here: the caller's first pass must do it, before any spend
    (:func:`skprivreg._gram.gram_statistics` does).
    """
    if not (is_dask_collection(X) or is_dask_collection(y)):
        return validate_data(
            estimator, X, y, dtype=dtype, multi_output=multi_output, y_numeric=True,
            ensure_all_finite=ensure_all_finite,
        )
    validate_data(estimator, X, y, skip_check_array=True)
    set_dask_feature_names(estimator, X, reset=True)
    # A side that is not Dask (a list, a pandas object, an array) is in
    # memory already: scikit-learn's checks, finiteness included.
    if not is_dask_collection(X):
        X = check_array(X, dtype="numeric")
    if not is_dask_collection(y):
        y = check_array(y, dtype="numeric", ensure_2d=False)
    X, y = as_dask_arrays(X, y)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array for X, got {X.ndim}D.")
    if y.ndim == 2 and y.shape[1] == 1 and not multi_output:
        # A column vector, as scikit-learn treats it (a public fact: the shape).
        warnings.warn("A column-vector y was passed when a 1d array was expected. "
                      "Please change the shape of y to (n_samples, ), for example "
                      "using ravel().", DataConversionWarning, stacklevel=3)
        y = y[:, 0]
    if y.ndim not in (1, 2) or (y.ndim == 2 and not multi_output):
        raise ValueError("y must be 1D" + (" or 2D." if multi_output else "."))
    if np.isnan(X.shape[0]) or np.isnan(y.shape[0]):
        raise ValueError(
            "Dask input needs known chunk sizes: call .compute_chunk_sizes() first."
        )
    if X.shape[0] != y.shape[0]:
        raise ValueError(
            f"Found input variables with inconsistent numbers of samples: "
            f"[{X.shape[0]}, {y.shape[0]}]"
        )
    check_dask_samples(X, estimator)
    for name, value in (("X", X), ("y", y)):
        check_dask_dtype(name, value.dtype)
    accepted = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype]
    if X.dtype not in accepted:
        X = X.astype(accepted[0])
    return X, y.astype(np.float64)


def check_dask_samples(X, estimator):
    """scikit-learn's minimum of one sample, for a Dask ``X`` (from its shape: nothing is
    read), with scikit-learn's message. One row fits as it does in memory."""
    if X.shape[0] < 1:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={tuple(X.shape)}) while a minimum of 1 "
            f"is required by {type(estimator).__name__}."
        )


def check_dask_dtype(name, dtype):
    """scikit-learn's dtype rules for a Dask side (from its dtype alone: nothing is read).

    As ``check_array`` does for a float fit: complex data is refused, booleans
    and integers are converted to float64 (block by block, on the workers).
    Strings are refused, as scikit-learn refuses them for numeric input:
    converting them could only fail inside a pass.
    """
    if dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {dtype}.")
    if dtype.kind in "SUa":
        raise ValueError(
            "dtype='numeric' is not compatible with arrays of bytes/strings. "
            f"Convert your data to numeric values explicitly instead ({name} has dtype "
            f"{dtype})."
        )
    if dtype.kind != "b" and not np.issubdtype(dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {dtype}.")


def same_row_chunks(X, y):
    """Both sides as Dask arrays (at least one is a Dask collection).

    A Dask data frame becomes an array; an in-memory side becomes a Dask
    array with the other side's row chunks (float64 when it is not a float
    array already), under a random name: a name hashed from the values
    (Dask's default) would put a fingerprint of the private rows in every
    task key the scheduler, its dashboard and its logs see.
    """
    import dask.array as da

    X, y = as_dask_arrays(X, y)
    if not is_dask_collection(X):
        X = np.asarray(X)
        X = da.from_array(X if X.dtype.kind == "f" else X.astype(np.float64),
                          chunks=(y.chunks[0], -1), name=False)
    if not is_dask_collection(y):
        y = np.asarray(y)
        y = da.from_array(y if y.dtype.kind == "f" else y.astype(np.float64),
                          chunks=(X.chunks[0],) + ((-1,) if y.ndim == 2 else ()), name=False)
    return X, y


def set_dask_feature_names(estimator, X, *, reset):
    """``feature_names_in_`` for a Dask data frame, which sklearn does not recognise.

    With ``reset=False`` the names must match those seen in ``fit``.
    """
    columns = getattr(X, "columns", None)
    names = None
    if columns is not None and all(isinstance(c, str) for c in columns):
        names = np.asarray(list(columns), dtype=object)
    if reset:
        if names is not None:
            estimator.feature_names_in_ = names
        elif hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
        return
    fitted = getattr(estimator, "feature_names_in_", None)
    if fitted is not None and names is not None and not np.array_equal(fitted, names):
        raise ValueError("The feature names should match those that were passed during fit.")


def _numpy_numbers(value):
    """A Dask frame or series whose numeric pandas extension dtypes (nullable
    ``Int64``, ``Float64``, ``boolean``, pyarrow numbers) are read as float64,
    missing values as NaN (refused by the pass, as scikit-learn refuses them).

    Their arrays would otherwise have dtype object. Only those columns are
    converted: NumPy columns keep their dtype (complex data, strings and
    categories are then refused by :func:`check_dask_dtype`).
    """
    import pandas as pd
    from pandas.api.types import is_numeric_dtype

    def extension_number(dtype):
        return not isinstance(dtype, np.dtype) and is_numeric_dtype(dtype)

    dtypes = value.dtypes  # a series of dtypes for a frame, one dtype for a series
    if isinstance(dtypes, pd.Series):
        columns = {name: "float64" for name, dtype in dtypes.items() if extension_number(dtype)}
        return value.astype(columns) if columns else value
    return value.astype("float64") if extension_number(dtypes) else value


def as_dask_array(value):
    if hasattr(value, "to_dask_array"):
        return _numpy_numbers(value).to_dask_array(lengths=True)
    return value


def _columns_of_one_frame(X, y):
    """``(X, y)`` as column slices of one Dask array when both are column selections of
    one Dask frame (``frame[cols]``, ``frame[label]``) with distinct integer or float
    columns and ``X``'s dtype holding ``y``'s; else None.

    Converted apart, each side's graph loads (parses) every partition again
    in every pass; as slices of one array, a pass loads each partition once.
    Only selections of the same frame are combined, so their rows are the
    same rows by construction (frames of different sources are never paired
    by position).
    """
    expr_x, expr_y = getattr(X, "expr", None), getattr(y, "expr", None)
    parent_x, parent_y = getattr(expr_x, "frame", None), getattr(expr_y, "frame", None)
    if (type(expr_x).__name__ != "Projection" or type(expr_y).__name__ != "Projection"
            or parent_x is None or parent_y is None
            or getattr(parent_x, "_name", None) != getattr(parent_y, "_name", 0)
            or getattr(X, "ndim", 0) != 2):
        return None
    y_frame = getattr(y, "ndim", 1) == 2
    y_columns = list(y.columns) if y_frame else [y.name]
    columns = list(X.columns) + y_columns
    dtypes = list(X.dtypes) + (list(y.dtypes) if y_frame else [y.dtype])
    # Integers and floats only: pandas joins booleans with numbers as objects
    # (NumPy's result_type would say float64).
    if (not len(X.columns) or len(set(columns)) != len(columns)
            or not all(isinstance(t, np.dtype) and t.kind in "iuf" for t in dtypes)):
        return None
    x_dtype = np.result_type(*X.dtypes)
    if np.result_type(x_dtype, *dtypes) != x_dtype:
        return None
    import dask.dataframe as dd

    both = dd.concat([X, y], axis=1)
    if list(both.columns) != columns:
        return None
    A = both.to_dask_array(lengths=True)
    d = len(X.columns)
    return A[:, :d], (A[:, d:] if y_frame else A[:, d])


def as_dask_arrays(*values):
    """:func:`as_dask_array` of each value, the data frames' partition lengths
    computed together: features and labels of one frame (``frame[cols]``,
    ``frame[label]``) load each partition once, not once per side (and, with
    plain numeric columns, as slices of one array, once per pass)."""
    frames = [i for i, v in enumerate(values) if hasattr(v, "to_dask_array")]
    if len(frames) < 2:
        return tuple(as_dask_array(v) for v in values)
    if len(values) == 2 and len(frames) == 2:
        joined = _columns_of_one_frame(*values)
        if joined is not None:
            return joined
    import dask

    lengths = dask.compute(*(values[i].map_partitions(len) for i in frames))
    values = list(values)
    for i, sizes in zip(frames, lengths):
        values[i] = _numpy_numbers(values[i]).to_dask_array(
            lengths=tuple(int(s) for s in sizes))
    return tuple(values)
