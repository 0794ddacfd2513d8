"""Declared bounds, clipping, and private bound estimates.

Sensitivities need bounds on the data (row norms of X, magnitudes of y). A
bound comes from the user (public, declared), from a private estimate that
spends budget, or, only when the user asks with ``bounds='data'``, from the
data itself with a :class:`~skprivreg.exceptions.PrivacyLeakWarning`.
Clipping to a bound is a fixed per-row map, so neighbouring datasets stay
neighbours and the guarantee computed with the bound holds. Clipping is
documented behaviour and never signalled from ``fit`` (whether some row
exceeded its bound is a fact about one record); the data curator counts
clipped rows with :mod:`skprivreg.diagnostics`, outside any release.
"""

import math
import warnings

import numpy as np

from .accounting import PrivacyEvent
from .exceptions import ConfigurationError, PrivacyLeakWarning
from .mechanisms import bound_bins, private_upper_bound, upper_bound_margin

__all__ = [
    "clip_rows",
    "clip_entries",
    "clip_rows_l2",
    "clip_values",
    "data_norm_bound",
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


def clip_rows(X, bound):
    """``(X * min(1, bound/||x||) row by row, whether any row changed)``.

    The flag is for non-private diagnostics only; ``fit`` never reports it.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    norms = row_norms(X)
    over = norms > bound
    if not over.any():
        return X.copy(), False
    scale = np.ones_like(norms)
    scale[over] = bound / norms[over]
    return X * scale[:, None], True


def clip_entries(y, bound):
    """``(clip(y, -bound, bound), whether any entry changed)``.

    The flag is for non-private diagnostics only; ``fit`` never reports it.
    """
    y = np.asarray(y, dtype=np.float64)
    clipped = np.clip(y, -bound, bound)
    return clipped, bool(np.any(clipped != y))


def clip_rows_l2(X, bound):
    """Scale every row to L2 norm at most ``bound``: ``x <- x min(1, bound/||x||)``."""
    return clip_rows(X, bound)[0]


def clip_values(y, bound):
    """Clip entries to ``[-bound, bound]`` (a new float64 array)."""
    return clip_entries(y, bound)[0]


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
    counts, n_samples, epsilon, rng, *, name, quantile="auto", notion="full", bins=None
):
    """A private bound on non-negative per-row values (norms or max |label|).

    ``counts[j]`` is the number of rows whose value exceeds ``bins[j]``
    (:func:`~skprivreg.mechanisms.counts_above`, summed over row blocks);
    the bound is :func:`~skprivreg.mechanisms.private_upper_bound`,
    epsilon-DP under replace-one, returned with its
    :class:`~skprivreg.accounting.PrivacyEvent`. With ``quantile='auto'``
    about ``upper_bound_margin(epsilon) = (6/epsilon) ln(2000)`` rows are
    left above the bound, the fewest that keep it below the data maximum
    with probability 0.999; a float ``quantile`` leaves
    ``(1 - quantile) n``. Rows above the bound are clipped later, which
    biases the fit and is what makes the sensitivity finite.

    Returns
    -------
    bound : float
    event : PrivacyEvent
    """
    bins = bound_bins() if bins is None else bins
    n_above = None if quantile == "auto" else (1.0 - quantile) * n_samples
    bound = private_upper_bound(counts, bins, epsilon, rng, n_above=n_above)
    return bound, PrivacyEvent(name=name, epsilon=float(epsilon), delta=0.0, notion=notion)


def data_norm_bound(maximum, *, name, notion="full"):
    """The data maximum as a bound (``bounds='data'``): **not private**.

    Emits a :class:`~skprivreg.exceptions.PrivacyLeakWarning` and returns an
    event of infinite epsilon, so no ledger or accountant understates it.
    """
    warnings.warn(
        f"{name} was read from the data (bounds='data'): the result is not "
        "differentially private. Declare the bound, or let it be estimated "
        "privately (bounds='private').",
        PrivacyLeakWarning,
        stacklevel=3,
    )
    bound = float(maximum) if maximum > 0 else 1.0
    return bound, PrivacyEvent(name=name, epsilon=math.inf, delta=0.0, notion=notion)
