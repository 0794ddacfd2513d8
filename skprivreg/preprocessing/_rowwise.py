"""Declare a function row-wise, so a ``FunctionTransformer`` of it passes the pipeline guard."""

import functools

__all__ = ["rowwise"]

#: The attribute :func:`rowwise` sets; the pipeline guard reads it.
ROWWISE_MARK = "__skprivreg_rowwise__"


def rowwise(func):
    """Declare that ``func`` maps each row of its input on its own; returns ``func``, marked.

    A :class:`~sklearn.preprocessing.FunctionTransformer` before a private
    estimator is data-independent only if each row of its output depends on
    the same input row and on no other value: a function of the whole batch
    (:func:`sklearn.preprocessing.scale` subtracts the column means) moves
    every row when one record changes, and nothing accounts for that. The
    pipeline guard (:func:`~skprivreg.pipeline.leaking_steps`) accepts
    ``func`` and ``inverse_func`` that are ``None``, element-wise ufuncs of
    NumPy or ``scipy.special`` (a ufunc made from a Python function by
    :func:`numpy.frompyfunc` may keep state from row to row: it needs the
    mark), functions marked by ``rowwise``, or :func:`functools.partial`
    objects of those. It cannot read a function's code: by marking
    ``func`` you assert that each output row depends only on the same input
    row (and on parameters fixed before the data is seen), and on no other
    value. The function must also be finite on the data's domain (clip
    first, with :class:`~skprivreg.preprocessing.BoundedScaler`): a
    non-finite output is refused as bad input.

    Usable as a decorator. A module-level function keeps its mark through
    pickling when it is decorated where it is defined. An object that takes
    no attributes (a bound method, a built-in) is returned wrapped in a
    :func:`functools.partial`, which carries the mark and pickles with it.

    Parameters
    ----------
    func : callable
        The function to declare row-wise.

    Returns
    -------
    callable
        ``func`` itself with the mark set, or a ``functools.partial`` of it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.preprocessing import FunctionTransformer
    >>> from skprivreg.preprocessing import rowwise
    >>> @rowwise
    ... def row_share(X):
    ...     return X / (1.0 + np.abs(X).sum(axis=1, keepdims=True))
    >>> step = FunctionTransformer(row_share)
    """
    if not callable(func):
        raise TypeError(f"rowwise declares a function; got {type(func).__name__}.")
    try:
        setattr(func, ROWWISE_MARK, True)
    except (AttributeError, TypeError):
        func = functools.partial(func)
        setattr(func, ROWWISE_MARK, True)
    return func
