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
from fractions import Fraction

import numpy as np

from ._blocks import memory_order
from ._rows import RowSource, is_dask_collection
from .accounting import PrivacyEvent
from .exceptions import ConfigurationError, PrivacyLeakWarning
from .mechanisms import (
    bound_bins,
    counts_above,
    exact_fraction,
    private_upper_bound,
    product_at_most,
    shares_at_most,
    upper_bound_margin,
    value_at_least,
)

__all__ = [
    "clip_rows",
    "clip_threshold",
    "clip_entries",
    "computed_norm_bound",
    "clip_rows_l2",
    "clip_values",
    "data_norm_bound",
    "row_norms",
    "private_norm_bound",
    "min_samples_for_private_bound",
    "check_private_bound_feasible",
    "check_x_range",
    "check_y_bound",
    "x_range_magnitude",
    "y_bound_magnitude",
    "range_bound_epsilons",
    "check_range_bounds_feasible",
    "estimate_ranges",
    "count_ranges",
    "release_ranges",
    "BOUND_SOURCES",
]

BOUND_SOURCES = ("private", "data")


def clip_threshold(bound, n_columns):
    r"""The computed norm above which a row of ``n_columns`` entries is scaled down, and
    the norm it is scaled to: :math:`t = B\,(1 - (d + 4)\,2^{-52})` for ``bound`` :math:`B`.

    Clipping to ``bound`` itself leaves about half of the clipped rows a few
    units in the last place above it, and rows whose computed norm rounds
    down to ``bound`` above it too, while every sensitivity assumes
    :math:`\|x\| \le B` exactly. With :math:`u = 2^{-53}`: a computed norm
    :math:`\hat N` is within a factor :math:`1 \pm (\gamma_d / 2 + u)` of the
    exact one (:math:`\gamma_d = d u / (1 - d u)`: a sum of ``d`` rounded
    squares in any order, then a correctly rounded square root), and a scaled
    row :math:`x \cdot \mathrm{fl}(t / \hat N)` has entries within
    :math:`(1 + u)^2` of :math:`x\,t / \hat N`. So a row kept
    (:math:`\hat N \le t`) and a row scaled both have exact norm at most
    :math:`t\,(1 + u)^2 / (1 - \gamma_d / 2 - u) \le B`, with room to spare
    (the margin is :math:`(2d + 8) u`). Rounding is relative only in the
    normal range: a bound whose square is below :math:`2^{-960}` is not
    covered (such rows are not a regression's).
    """
    return float(bound) * (1.0 - (int(n_columns) + 4) * 2.0**-52)


def computed_norm_bound(norm, n_columns):
    r"""An upper bound of the exact norm of every row of ``n_columns`` entries whose
    computed norm (:func:`row_norms`) is at most ``norm``: the smallest float at
    least :math:`\hat N\,(1 + (d + 4)\,2^{-52})`.

    A computed norm is within a factor :math:`1 \pm (\gamma_d / 2 + u)` of the
    exact one (see :func:`clip_threshold`), so a side used as it is (a public
    side, not clipped) has sensitivities from this bound, never from the
    computed norm itself, which may lie a few units in the last place below
    the exact one. Valid when ``norm`` is at least about ``1e-140`` (squares in
    the normal range; a square that underflows then moves the sum by far less
    than the margin); callers refuse smaller scales.
    """
    if not math.isfinite(norm):
        return float(norm)
    return value_at_least(exact_fraction(norm) * (1 + Fraction(int(n_columns) + 4, 2**52)))


def row_norms(X, *, out=None):
    """Euclidean norm of each row (float64).

    One read of ``X`` without an ``n x d`` temporary of squares
    (``einsum``); a row whose squared norm overflows has norm ``inf``, as
    with :func:`numpy.linalg.norm`. ``out``: a float64 array of shape
    ``(n,)`` to write the norms into (a reused buffer), or None.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        return np.abs(X, out=out)
    with np.errstate(over="ignore"):
        norms = np.einsum("ij,ij->i", X, X, out=out)
        return np.sqrt(norms, out=norms)


def clip_rows(X, bound):
    """``(X * min(1, t/||x||) row by row, whether any row changed)``, ``t`` the
    :func:`clip_threshold` of ``bound`` (each row's exact norm is then at most ``bound``).

    The flag is for non-private diagnostics only; ``fit`` never reports it.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    norms = row_norms(X)
    target = clip_threshold(bound, X.shape[1])
    over = norms > target
    # The input's memory order either way: a product rounds a Fortran-ordered
    # operand differently, and whether a row was clipped must change no bit of it.
    order = memory_order(X)
    if not over.any():
        return np.array(X, order=order), False
    scale = np.ones_like(norms)
    scale[over] = target / norms[over]
    return np.multiply(X, scale[:, None], order=order), True


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


def check_y_bound(y_bound):
    """The declared label range ``y_bound`` as a pair ``(low, high)`` of floats.

    ``y_bound`` is a float ``B > 0`` (labels in :math:`[-B, B]`) or a pair
    ``(low, high)`` with ``low < high``; ``None`` (not declared) passes
    through. Raises ``ValueError`` for anything else (before any spend).
    """
    if y_bound is None:
        return None
    if np.ndim(y_bound) == 0:
        bound = float(y_bound)
        if not (math.isfinite(bound) and bound > 0 and _scalable(-bound, bound)):
            raise ValueError(
                f"y_bound must be a positive finite float or (low, high), whose "
                f"half-width has a finite reciprocal; got {y_bound!r}."
            )
        return (-bound, bound)
    pair = np.asarray(y_bound, dtype=float)
    if (pair.shape != (2,) or not np.all(np.isfinite(pair)) or not pair[0] < pair[1]
            or not _scalable(pair[0], pair[1])):
        raise ValueError(
            f"y_bound must be a positive finite float B (labels in [-B, B]) or a pair "
            f"(low, high) with low < high, whose half-width has a finite reciprocal; "
            f"got {y_bound!r}."
        )
    return (float(pair[0]), float(pair[1]))


def _scalable(low, high):
    """True when ``(low, high)`` maps to ``[-1, 1]`` by a finite scale: the width
    ``high - low`` and the reciprocal of the half-width are finite (a half-width
    below about 5.6e-309 would scale a value at the centre to ``0 * inf = NaN``)."""
    with np.errstate(over="ignore", divide="ignore"):
        width = np.subtract(high, low, dtype=np.float64)
        scale = np.divide(2.0, width)
    return bool(np.all(np.isfinite(width)) and np.all(np.isfinite(scale)))


def check_x_range(x_range, n_features):
    """The declared per-column range ``x_range`` as arrays ``(low, high)``.

    ``x_range`` is a pair ``(low, high)`` whose entries are floats (the same
    range for every column) or arrays of shape ``(n_features,)``, or an array
    of shape ``(n_features, 2)``; ``low < high`` in every column. ``None``
    passes through. Raises ``ValueError`` for anything else, and for a 2 x 2
    array or nested list with two columns, which reads either way (pass the
    tuple ``(low, high)``).
    """
    if x_range is None:
        return None
    arr = np.asarray(x_range, dtype=float) if not isinstance(x_range, tuple) else None
    if arr is not None and arr.shape == (2, 2) and n_features == 2:
        raise ValueError(
            f"x_range={x_range!r} is ambiguous for 2 columns: a row per column or "
            f"(low, high)? Pass the tuple (low, high), e.g. "
            f"(np.array([low_0, low_1]), np.array([high_0, high_1]))."
        )
    if arr is not None and arr.shape == (n_features, 2):
        low, high = arr[:, 0], arr[:, 1]
    else:
        if len(x_range) != 2:
            raise ValueError(
                f"x_range must be (low, high) (floats or arrays of shape ({n_features},)) "
                f"or an array of shape ({n_features}, 2); got {x_range!r}."
            )
        try:
            low = np.broadcast_to(np.asarray(x_range[0], dtype=float), (n_features,)).copy()
            high = np.broadcast_to(np.asarray(x_range[1], dtype=float), (n_features,)).copy()
        except ValueError:
            raise ValueError(
                f"x_range must be (low, high) with floats or arrays of shape ({n_features},), "
                f"or an array of shape ({n_features}, 2), for {n_features} columns; "
                f"got {x_range!r}."
            ) from None
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)
            and _scalable(low, high)):
        raise ValueError(f"x_range needs finite low < high, with a finite width high - low "
                         f"and a finite reciprocal of the half-width, in every column; "
                         f"got {x_range!r}.")
    return low, high


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


# ---------------------------------------------------------------------------
# Per-column ranges and label ranges: magnitudes and private estimates
# ---------------------------------------------------------------------------
def x_range_magnitude(x_range):
    """Per-column magnitude :math:`m_j = \\max(|l_j|, |h_j|)` of a checked ``x_range``.

    ``x_range`` is the ``(low, high)`` pair of arrays returned by
    :func:`check_x_range`; an entry clipped to :math:`[l_j, h_j]` has
    :math:`|x_{ij}| \\le m_j`, which is what a sensitivity needs.
    """
    low, high = x_range
    return np.maximum(np.abs(np.asarray(low, dtype=float)), np.abs(np.asarray(high, dtype=float)))


def y_bound_magnitude(y_range):
    """:math:`B = \\max(|l|, |h|)` of a checked label range ``(low, high)``.

    After clipping to the range, :math:`|y| \\le B`.
    """
    low, high = y_range
    return max(abs(float(low)), abs(float(high)))


def range_bound_epsilons(missing, *, epsilon, bounds, bounds_budget, private):
    """Epsilon of each missing range bound, from public facts only.

    ``{}`` when the fit is not private (``epsilon=inf`` needs no bounds) or
    nothing is missing; ``inf`` for each missing bound with
    ``bounds='data'`` (read from the data, not private); otherwise the share
    ``bounds_budget * epsilon`` split equally over the missing bounds (each
    share rounded down, so they sum to at most it).
    """
    missing = list(missing)
    if not private or not missing:
        return {}
    if bounds == "data":
        return {name: math.inf for name in missing}
    shares = shares_at_most(product_at_most(bounds_budget, epsilon), [1] * len(missing))
    return dict(zip(missing, shares))


def check_range_bounds_feasible(n_samples, bound_epsilons):
    """:func:`check_private_bound_feasible` for each bound estimated privately (before a spend)."""
    for name, eps in bound_epsilons.items():
        if math.isfinite(eps):
            check_private_bound_feasible(n_samples, eps, name)


def _row_abs_max(X):
    """``max_j |x_ij|`` for each row (the L-infinity norm of the row)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        return np.abs(X)
    if X.shape[1] == 0:
        return np.zeros(X.shape[0])
    return np.max(np.abs(X), axis=1)


class _RangeCounts:
    """Block function of :func:`count_ranges` (picklable, for Dask workers).

    Per block: for the entry magnitudes of X's rows (``max_j |x_ij|``) and
    of the labels' rows (``|y_i|``, or ``max_k |y_ik|`` with several
    outputs), the number of rows above each bin and the largest
    value; partials add the counts and keep the larger maximum.
    """

    def __init__(self, bins, want_x, want_y):
        self.bins, self.want_x, self.want_y = bins, want_x, want_y

    def __call__(self, offset, X, Y, params=None, into=None):
        part = {"rows": X.shape[0]}
        if self.want_x:
            values = _row_abs_max(X)
            part["x_range"] = (counts_above(values, self.bins),
                               float(np.max(values, initial=0.0)), values.size)
        if self.want_y:
            # One value per row (its largest |label| over the outputs): one
            # replaced row moves each count by at most one, as the mechanism needs.
            values = _row_abs_max(Y)
            part["y_bound"] = (counts_above(values, self.bins),
                               float(np.max(values, initial=0.0)), values.size)
        return part if into is None else _combine_range_counts(into, part)


def _combine_range_counts(a, b):
    """Merge the :func:`count_ranges` partials of two disjoint sets of rows."""
    out = {"rows": a["rows"] + b["rows"]}
    for name in ("x_range", "y_bound"):
        if name in a:
            out[name] = (a[name][0] + b[name][0], max(a[name][1], b[name][1]),
                         a[name][2] + b[name][2])
    return out


def count_ranges(X, y, bound_epsilons):
    """One pass over the rows for :func:`estimate_ranges` (releases nothing).

    Reads the rows through the library's row source (NumPy, memmap or Dask,
    whose blocks, labels included, are checked for NaN and infinity on the
    workers): the counts of values above each public bin and the data maxima
    of the bounds named in ``bound_epsilons``. ``None`` when no bound is
    missing. ``y`` (when given) is read even when only ``x_range`` is
    missing, so that a Dask fit refuses bad labels before it spends.

    Returns
    -------
    counts : dict or None
        ``'rows'``, ``'n_features'`` and, per missing bound, the counts above
        :func:`~skprivreg.mechanisms.bound_bins` and the data maximum (secret:
        for :func:`release_ranges` only).
    """
    want_x, want_y = "x_range" in bound_epsilons, "y_bound" in bound_epsilons
    if not (want_x or want_y):
        return None
    X = X if is_dask_collection(X) else np.asarray(X, dtype=np.float64)
    if y is not None and not is_dask_collection(y):
        y = np.asarray(y, dtype=np.float64)
    if X.ndim == 1:
        X = X.reshape(-1, 1)
    source = RowSource(X, y)
    counts = source.reduce(_RangeCounts(bound_bins(), want_x, want_y), _combine_range_counts,
                           label="range counts")
    counts["n_features"] = int(X.shape[1])
    return counts


def estimate_ranges(X, y, bound_epsilons, rng, *, notion="full", neighbouring="replace-one"):
    """Missing ``x_range`` / ``y_bound`` from one pass over the rows.

    :func:`count_ranges` then :func:`release_ranges` (see there for the
    estimates and their guarantee). A fit that must refuse bad input before
    it spends calls the two itself, with the spend in between.

    Returns
    -------
    x_range : (ndarray, ndarray) or None
    y_range : (float, float) or None
    events : list of PrivacyEvent
    """
    return release_ranges(count_ranges(X, y, bound_epsilons), bound_epsilons, rng,
                          notion=notion, neighbouring=neighbouring)


def release_ranges(counts, bound_epsilons, rng, *, notion="full", neighbouring="replace-one"):
    """Missing ``x_range`` / ``y_bound`` from :func:`count_ranges`: private estimates, or data
    maxima with ``bounds='data'``.

    A mechanism: call it only after the spend of ``bound_epsilons`` is
    recorded.

    ``bound_epsilons`` maps ``'x_range'`` and/or ``'y_bound'`` to an epsilon
    (:func:`range_bound_epsilons`). For a finite epsilon the bound is
    :func:`private_norm_bound` on one value per row, so the estimate is pure
    epsilon-DP (replace-one and add/remove alike: each row moves each count
    of values above a public candidate by at most 1):

    - ``x_range``: :math:`B_x`, a private upper bound on the largest entry
      magnitude of a row, :math:`\\max_j |x_{ij}|`; the range is
      :math:`[-B_x, B_x]` in every column (symmetric about the public centre
      0, one bound for all columns, so the budget is not split over columns);
    - ``y_bound``: :math:`B_y`, a private upper bound on :math:`|y_i|`; the
      range is :math:`[-B_y, B_y]`.

    About ``upper_bound_margin(epsilon)`` rows are left above each bound and
    are clipped by the caller. An infinite epsilon reads the data maximum
    (:func:`data_norm_bound`: a :class:`PrivacyLeakWarning` and an event of
    infinite epsilon).

    Returns
    -------
    x_range : (ndarray, ndarray) or None
        ``(low, high)`` of shape ``(n_features,)`` each, or None if not estimated.
    y_range : (float, float) or None
    events : list of PrivacyEvent
        One per estimated bound, with the given notion and relation.
    """
    if counts is None:
        return None, None, []
    bins = bound_bins()
    resolved, events = {}, []
    for name in ("x_range", "y_bound"):
        if name not in bound_epsilons:
            continue
        if name not in counts:
            raise ValueError(f"{name} was not counted: pass the same bound_epsilons to "
                             "count_ranges.")
        above, maximum, n_values = counts[name]
        eps = bound_epsilons[name]
        if math.isinf(eps):
            bound, event = data_norm_bound(maximum, name=name, notion=notion)
        else:
            bound, event = private_norm_bound(
                above, n_values, eps, rng, name=name, notion=notion, bins=bins
            )
        events.append(
            PrivacyEvent(name=event.name, epsilon=event.epsilon, delta=0.0,
                         notion=notion, neighbouring=neighbouring)
        )
        resolved[name] = bound
    x_range = None
    if "x_range" in resolved:
        p = counts["n_features"]
        b = resolved["x_range"]
        x_range = (np.full(p, -b), np.full(p, b))
    y_range = None
    if "y_bound" in resolved:
        y_range = (-resolved["y_bound"], resolved["y_bound"])
    return x_range, y_range, events
