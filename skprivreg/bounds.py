"""Declared bounds, clipping, and private bound estimates.

Sensitivities need bounds on the data (row norms of X, magnitudes of y). A
bound comes from the user (public, declared), from a private estimate that
spends budget, or, only when the user asks with ``bounds='data'``, from the
data itself with a :class:`~skprivreg.exceptions.PrivacyLeakWarning`.
Clipping to a bound is a fixed per-row map, so neighbouring datasets stay
neighbours and the guarantee computed with the bound holds.
"""

import warnings

import numpy as np

from .accounting import PrivacyEvent
from .exceptions import ClippingWarning, PrivacyLeakWarning
from .mechanisms import geometric_bins, private_quantile_bin, reliable_quantile

__all__ = [
    "clip_rows_l2",
    "clip_values",
    "row_norms",
    "private_norm_bound",
    "BOUND_SOURCES",
]

BOUND_SOURCES = ("private", "data")


def row_norms(X):
    """Euclidean norm of each row (float64), without squaring overflow."""
    return np.linalg.norm(np.asarray(X, dtype=np.float64), axis=1)


def clip_rows_l2(X, bound, *, warn=True):
    """Scale every row to L2 norm at most ``bound``: ``x <- x min(1, bound/||x||)``.

    Returns a new array; emits a :class:`ClippingWarning` without any count
    when some row was clipped (``warn=True``).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    norms = row_norms(X)
    over = norms > bound
    if not over.any():
        return X.copy()
    scale = np.ones_like(norms)
    scale[over] = bound / norms[over]
    if warn:
        warnings.warn(
            "Some rows of X were clipped to the row-norm bound x_bound.",
            ClippingWarning,
            stacklevel=3,
        )
    return X * scale[:, None]


def clip_values(y, bound, *, name="y", warn=True):
    """Clip entries to ``[-bound, bound]``; :class:`ClippingWarning` without a count."""
    y = np.asarray(y, dtype=np.float64)
    clipped = np.clip(y, -bound, bound)
    if warn and np.any(clipped != y):
        warnings.warn(
            f"Some entries of {name} were clipped to the bound {name}_bound.",
            ClippingWarning,
            stacklevel=3,
        )
    return clipped


def private_norm_bound(
    values,
    epsilon,
    rng,
    *,
    name,
    quantile="auto",
    notion="full",
    source="private",
    bins=None,
):
    """Resolve a missing bound on non-negative ``values`` (norms or |labels|).

    ``source='private'`` releases a private upper ``quantile`` of the values
    (``'auto'``: :func:`~skprivreg.mechanisms.reliable_quantile`)
    on public geometric bins (:func:`~skprivreg.mechanisms.private_quantile_bin`,
    epsilon-DP under replace-one) and returns it with its
    :class:`~skprivreg.accounting.PrivacyEvent`. Rows above the bound are
    clipped later, which biases the fit slightly and is what makes the
    sensitivity finite.

    ``source='data'`` returns ``max(values)`` with a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning` and no event: the
    bound, and everything computed from it, is then *not* private.

    Returns
    -------
    bound : float
    event : PrivacyEvent or None
    """
    values = np.asarray(values, dtype=np.float64)
    if source == "data":
        warnings.warn(
            f"{name} was read from the data (bounds='data'): the result is not "
            "differentially private. Declare the bound, or let it be estimated "
            "privately (bounds='private').",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        bound = float(values.max()) if values.size else 1.0
        return (bound if bound > 0 else 1.0), None
    if source != "private":
        raise ValueError(f"bounds must be one of {BOUND_SOURCES}.")
    bins = geometric_bins() if bins is None else np.asarray(bins, dtype=np.float64)
    if quantile == "auto":
        quantile = reliable_quantile(values.shape[0], epsilon, bins.shape[0])
    bound = private_quantile_bin(values, quantile, epsilon, rng, bins=bins)
    event = PrivacyEvent(
        name=name, epsilon=float(epsilon), delta=0.0, notion=notion
    )
    return bound, event
