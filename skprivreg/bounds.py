"""Declared bounds, clipping, and private bound estimates.

Sensitivities need bounds on the data (row norms of X, magnitudes of y). A
bound comes from the user (public, declared), from a private estimate that
spends budget, or, only when the user asks with ``bounds='data'``, from the
data itself with a :class:`~skprivreg.exceptions.PrivacyLeakWarning`.
Clipping to a bound is a fixed per-row map, so neighbouring datasets stay
neighbours and the guarantee computed with the bound holds.
"""

import math
import warnings

import numpy as np

from .accounting import PrivacyEvent
from .exceptions import ClippingWarning, ConfigurationError, PrivacyLeakWarning
from .mechanisms import private_upper_bound, upper_bound_margin

__all__ = [
    "clip_rows_l2",
    "clip_values",
    "row_norms",
    "private_norm_bound",
    "min_samples_for_private_bound",
    "check_private_bound_feasible",
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


def min_samples_for_private_bound(epsilon):
    """Smallest n at which a private bound leaves at most a quarter of the rows above it.

    ``4 * upper_bound_margin(epsilon)``; below it the bound would sit at or
    under the median and clipping would dominate the fit. Public.
    """
    return math.ceil(4.0 * upper_bound_margin(epsilon))


def check_private_bound_feasible(n_samples, epsilon, name):
    """Raise :class:`ConfigurationError` (public facts only) if n is too small."""
    needed = min_samples_for_private_bound(epsilon)
    if n_samples < needed:
        raise ConfigurationError(
            f"Estimating {name} privately with epsilon={epsilon:.4g} needs at least "
            f"{needed} samples (got n={n_samples}): the bound would clip most rows. "
            f"Declare {name}, raise bounds_budget, or use bounds='data' (not private)."
        )


def private_norm_bound(
    values,
    epsilon,
    rng,
    *,
    name,
    quantile="auto",
    notion="full",
    source="private",
):
    """Resolve a missing bound on non-negative ``values`` (norms or |labels|).

    ``source='private'`` releases a private upper bound of the values
    (:func:`~skprivreg.mechanisms.private_upper_bound`, epsilon-DP under
    replace-one) and returns it with its
    :class:`~skprivreg.accounting.PrivacyEvent`. With ``quantile='auto'``
    about ``upper_bound_margin(epsilon) = (6/epsilon) ln(2000)`` values are
    left above the bound, the fewest that keep it below the data maximum
    with probability 0.999; a float ``quantile`` leaves ``(1 - quantile) n``.
    Rows above the bound are clipped later, which biases the fit and is what
    makes the sensitivity finite.

    ``source='data'`` returns ``max(values)`` with a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning` and an event of
    infinite epsilon: the bound, and everything computed from it, is then
    *not* private, and the ledger says so.

    Returns
    -------
    bound : float
    event : PrivacyEvent
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
        # Recorded as an infinite-epsilon release, so no ledger understates it.
        event = PrivacyEvent(name=name, epsilon=math.inf, delta=0.0, notion=notion)
        return (bound if bound > 0 else 1.0), event
    if source != "private":
        raise ValueError(f"bounds must be one of {BOUND_SOURCES}.")
    if quantile == "auto":
        n_above = None
    else:
        n_above = (1.0 - quantile) * values.shape[0]
    bound = private_upper_bound(values, epsilon, rng, n_above=n_above)
    event = PrivacyEvent(
        name=name, epsilon=float(epsilon), delta=0.0, notion=notion
    )
    return bound, event
