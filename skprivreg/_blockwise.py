"""Reductions over row blocks, for NumPy arrays, memmaps and Dask arrays.

Sufficient-statistics estimators compute sums over rows (Gram matrices,
cross products, counts). A *block function* maps one block of rows to a
tuple of arrays; :func:`sum_over_row_blocks` adds the tuples over all
blocks. On NumPy input the blocks are slices of at most ``block_rows`` rows,
so temporaries stay bounded; on Dask input each block is one task on the
workers, the partial sums are added in a tree, and only the reduced
statistics reach the driver, where the estimator adds its noise once.
Nothing random ever runs on a worker.
"""

from functools import reduce

import numpy as np

from ._compat import validate_data

__all__ = [
    "BLOCK_ROWS",
    "is_dask_collection",
    "sum_over_row_blocks",
    "validate_blockwise_data",
    "check_block_finite",
    "set_dask_feature_names",
]

BLOCK_ROWS = 1 << 16


def is_dask_collection(obj):
    """True for Dask arrays and data frames (without importing Dask)."""
    return hasattr(obj, "__dask_graph__")


def check_block_finite(block, name="X"):
    """Raise sklearn's error for NaN or infinity in a block (runs on workers)."""
    if not np.isfinite(block).all():
        raise ValueError(f"Input {name} contains NaN or infinity.")


def _add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def _tree_sum(parts, combine):
    import dask

    while len(parts) > 1:
        parts = [
            dask.delayed(combine)(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    return parts[0]


def sum_over_row_blocks(block_function, X, Y=None, block_rows=BLOCK_ROWS, combine=_add):
    """``sum_b block_function(X_b, Y_b)`` over row blocks.

    Parameters
    ----------
    block_function : callable
        ``(X_block, Y_block_or_None) -> statistics``; must be a pure function
        of the block (it may run in another process).
    X : ndarray, memmap or dask array of shape (n, d)
    Y : same kind, shape (n, l), or None
    block_rows : int
        Rows per block on NumPy input (Dask input keeps its own chunks).
    combine : callable, default: elementwise sum of tuples
        Associative merge of two blocks' statistics.
    """
    if is_dask_collection(X):
        import dask

        X = X.rechunk({1: -1})
        x_blocks = X.to_delayed().ravel()
        if Y is None:
            y_blocks = [None] * len(x_blocks)
        else:
            Y = Y.rechunk((X.chunks[0], -1))
            y_blocks = Y.to_delayed().ravel()
        parts = [dask.delayed(block_function)(xb, yb) for xb, yb in zip(x_blocks, y_blocks)]
        result = _tree_sum(parts, combine).compute()
        return tuple(result) if combine is _add else result
    n = X.shape[0]
    partials = (
        block_function(
            np.asarray(X[start : start + block_rows], dtype=np.float64),
            None if Y is None else np.asarray(Y[start : start + block_rows], dtype=np.float64),
        )
        for start in range(0, n, block_rows)
    )
    return reduce(combine, partials)


def validate_blockwise_data(estimator, X, y, *, multi_output=True):
    """``validate_data`` for NumPy input; shape-only checks for Dask input.

    Dask input is not materialised: dimensions, dtypes and matching row
    counts are checked here, ``n_features_in_`` and ``feature_names_in_``
    are set as sklearn does, and finiteness is checked inside the block
    functions (:func:`check_block_finite`), before any noise is drawn.
    A Dask data frame becomes a Dask array (its partition lengths, which
    are public, are computed).
    """
    if not (is_dask_collection(X) or is_dask_collection(y)):
        return validate_data(
            estimator, X, y, dtype=np.float64, multi_output=multi_output, y_numeric=True
        )
    validate_data(estimator, X, y, skip_check_array=True)
    set_dask_feature_names(estimator, X, reset=True)
    X, y = (_as_dask_array(v) for v in (X, y))
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array for X, got {X.ndim}D.")
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
    if X.shape[0] < 2:
        raise ValueError(f"Found array with {X.shape[0]} sample(s); a minimum of 2 is required.")
    for name, value in (("X", X), ("y", y)):
        if not np.issubdtype(value.dtype, np.number):
            raise ValueError(f"{name} must be numeric, got dtype {value.dtype}.")
    return X.astype(np.float64), y.astype(np.float64)


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


def _as_dask_array(value):
    if hasattr(value, "to_dask_array"):
        return value.to_dask_array(lengths=True)
    return value
