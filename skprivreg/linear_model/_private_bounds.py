"""Bounds the user did not declare, for the sufficient-statistics estimators.

One rule for SSP, AdaSSP, IndependentSSP and ReuseCov: a missing bound is
estimated privately with ``bounds_budget * epsilon`` (split equally between
the missing bounds; a pure-DP event of the fit's notion and neighbouring
relation) when n allows it, otherwise
:class:`~skprivreg.exceptions.ConfigurationError` before any spend, naming
the n needed. ``bounds='data'`` reads the bound from the data: an event of
infinite epsilon and a :class:`~skprivreg.exceptions.PrivacyLeakWarning`.

The functions are pure (public facts in, public facts or released values
out) so each estimator calls them in the same order: plan the bound epsilons,
check feasibility, check the budget, then one counting pass over row blocks.
"""

import math
from dataclasses import replace
from functools import partial

import numpy as np

from .._blocks import workspace
from .._gram import cache_blocked, reduce_threaded, streamed_piece_rows, threads_for
from .._rows import RowSource, add_tuples, check_block_finite
from ..accounting import PrivacyEvent
from ..bounds import (
    check_private_bound_feasible,
    check_y_bound,
    data_norm_bound,
    private_norm_bound,
    row_norms,
)
from ..mechanisms import bound_bins, counts_above, product_at_most, shares_at_most

__all__ = [
    "LARGEST_BOUND_SCALE",
    "check_bound_scales",
    "label_magnitude",
    "bound_epsilons",
    "check_bounds_feasible",
    "check_data_bounds_supported",
    "planned_bound_events",
    "bound_block_counts",
    "count_bounds",
    "release_bounds",
    "resolve_bounds",
]

BOUND_NAMES = ("x_bound", "y_bound")

#: Largest declared scale of a row of X (``x_bound``) or of Y (``sqrt(l) y_bound``)
#: the calibration takes: it multiplies up to four such scales (the joint
#: Gram-cross bound has ``x_bound^4``), which must stay finite in float64.
LARGEST_BOUND_SCALE = 1e60
#: Smallest declared scale (``x_bound``, ``y_bound``) the calibration takes: a
#: product of four such scales must stay in float64's normal range, where
#: rounding is relative; below it a sensitivity, and the noise scale made from
#: it, round towards 0 (no noise) while the ledger states a finite epsilon.
SMALLEST_BOUND_SCALE = 1e-60


def check_bound_scales(x_bound, y_bound, n_outputs):
    """Refuse declared bounds whose calibration would leave float64 (before any spend).

    ``x_bound`` and ``sqrt(n_outputs) y_bound`` (``None``: not declared) must
    be at most :data:`LARGEST_BOUND_SCALE`: larger bounds would give noise
    beyond any float anyway. ``x_bound`` and ``y_bound`` must be at least
    :data:`SMALLEST_BOUND_SCALE` (0 excepted, a statistic that is released
    exactly because it is constant): smaller bounds make sensitivities round
    towards 0. Data in such units should be rescaled.
    """
    root = math.sqrt(max(int(n_outputs), 1))
    for name, scale, value in (("x_bound", x_bound, x_bound),
                               ("y_bound", None if y_bound is None else root * y_bound, y_bound)):
        if scale is not None and not scale <= LARGEST_BOUND_SCALE:
            raise ValueError(
                f"{name}={value:g} is too large: the noise calibration multiplies up to "
                f"four bound-sized factors, which overflow float64; x_bound and "
                f"sqrt(n_outputs) * y_bound must be at most {LARGEST_BOUND_SCALE:g} "
                f"(n_outputs={int(n_outputs)})."
            )
        if value is not None and 0 < value < SMALLEST_BOUND_SCALE:
            raise ValueError(
                f"{name}={value:g} is too small: the noise calibration multiplies up to "
                "four bound-sized factors, which would round towards 0 in float64 (and "
                f"the noise with them); it must be at least {SMALLEST_BOUND_SCALE:g}. "
                "Rescale the data."
            )


def label_magnitude(y_bound):
    """``B = max(|low|, |high|)`` of a declared label range ``y_bound`` (None passes).

    Labels in ``[low, high]`` satisfy ``|y| <= B``; the estimators whose
    sensitivity needs a bound on ``|y|`` use this ``B``. Raises
    ``ValueError`` for an invalid ``y_bound`` (before any spend).
    """
    pair = check_y_bound(y_bound)
    if pair is None:
        return None
    return max(abs(pair[0]), abs(pair[1]))


def bound_epsilons(missing, *, private, bounds, bounds_budget, epsilon):
    """Epsilon of each missing bound: an equal share of ``bounds_budget * epsilon``.

    ``inf`` for every missing bound when ``bounds='data'``; ``{}`` in the
    non-private mode (no bound is needed) or when nothing is missing.
    """
    missing = list(missing)
    if not private or not missing:
        return {}
    if bounds == "data":
        return {name: math.inf for name in missing}
    shares = shares_at_most(product_at_most(bounds_budget, epsilon), [1] * len(missing))
    return dict(zip(missing, shares))


def check_bounds_feasible(n_samples, bound_eps, quantile="auto"):
    """:class:`ConfigurationError` (before any spend) when n is too small for a private bound."""
    if quantile != "auto":
        return
    for name, eps in bound_eps.items():
        if math.isfinite(eps):
            check_private_bound_feasible(n_samples, eps, name)


def planned_bound_events(bound_eps, *, notions=None, neighbouring="replace-one"):
    """The pure-DP events of the planned bound estimates (data-free)."""
    notions = notions or {}
    return [
        PrivacyEvent(name=name, epsilon=eps, delta=0.0, notion=notions.get(name, "full"),
                     neighbouring=neighbouring)
        for name, eps in bound_eps.items()
    ]


def bound_block_counts(X_block, Y_block, bins, public=None, public_limit=None, intercept=0.0,
                       public_floor=None):
    """Block statistic of the private bounds: rows whose norm (max |y|) exceeds each bin.

    One value per row, so replacing a row (or zeroing it out) changes each
    count by at most 1. Also checks the block for NaN or infinity (this is
    the first pass). With ``public`` (``'X'`` or ``'Y'``, the side a fit uses
    unclipped because it is public), a third array counts that side's rows
    above ``public_limit``: the augmented norm :math:`\\lVert (x, c) \\rVert`
    (``c`` the ``intercept`` column) or the label row norm
    :math:`\\lVert y \\rVert`, and with ``public_floor`` its rows at or above that
    floor and its rows not all 0. The private side is never counted so.
    """
    # Vectors of the piece go to this thread's reused buffers (a fresh array
    # per piece costs page faults on Dask workers) and are sorted in place.
    with np.errstate(all="ignore"):
        X = np.asarray(X_block)
        x_norms = row_norms(X, out=workspace("bound x norms", len(X)))
        if not np.isfinite(np.add.reduce(x_norms)):  # NaN or inf, or norms that overflowed
            check_block_finite(X_block, "X")
        Y = np.asarray(Y_block)
        n_rows = Y.shape[0]
        y_max = workspace("bound y max", n_rows)
        if n_rows:
            Y = Y.reshape(n_rows, -1)
            # max |y_ij| of each row from its max and min (no copy of the
            # block); NaN or an infinity shows in one of them. In float64: an
            # integer or boolean -low would wrap or fail.
            low = workspace("bound y min", n_rows)
            np.maximum.reduce(Y, axis=1, out=y_max)
            np.minimum.reduce(Y, axis=1, out=low)
            if not np.isfinite(np.add.reduce(y_max) + np.add.reduce(low)):
                check_block_finite(Y, "y")  # NaN or infinity, or only sums that overflowed
            np.negative(low, out=low)
            np.maximum(y_max, low, out=y_max)
        over = None
        if public == "X":
            public_norms = np.hypot(x_norms, intercept)
        elif public == "Y":
            public_norms = row_norms(Y.reshape(n_rows, -1), out=workspace("bound y norms", n_rows))
        if public is not None:
            over = [np.count_nonzero(public_norms > public_limit)]
            if public_floor is not None:
                over.append(np.count_nonzero(public_norms >= public_floor))
                # rows not all 0 (a side of zeros is used as it is)
                nonzero = (y_max > 0 if public == "Y"
                           else np.ones(n_rows, bool) if intercept else X.any(axis=1))
                over.append(np.count_nonzero(nonzero))
            over = np.array(over)
        counts = (counts_above(x_norms, bins, overwrite=True),
                  counts_above(y_max, bins, overwrite=True))
        return counts if over is None else (*counts, over)


def count_bounds(X, Y, source=None, *, public=None, public_limit=None, intercept=0.0,
                 public_floor=None):
    """One pass over the row blocks: the counts behind every private bound.

    Releases nothing (the counts stay secret until :func:`release_bounds`
    adds noise) and refuses NaN or infinity, so it may run before the spend.
    Returns ``{'x_bound': counts of raw row norms of X, 'y_bound': counts of
    max_j |y_ij|}`` over :func:`~skprivreg.mechanisms.bound_bins`.
    ``source``: the :class:`~skprivreg._rows.RowSource` of ``(X, Y)`` to read
    (it counts the pass and prints its progress); ``X`` and ``Y`` are then unused.
    With ``public`` (``'X'`` or ``'Y'``: a side the fit uses unclipped
    because it is public), also ``'over'``: the number of that side's rows
    (of ``(X, intercept)``, or of ``Y``) whose norm exceeds ``public_limit``,
    and with ``public_floor`` the number at or above it and the number of
    rows not all 0.
    """
    bins = bound_bins()
    if source is None:
        source = RowSource(X, Y)
    width = source.d + (1 if source.Y is None or source.Y.ndim == 1 else source.Y.shape[1])
    if public not in (None, "X", "Y"):
        raise ValueError(f"public must be None, 'X' or 'Y', got {public!r}.")
    # The pieces of a block are shared by threads (counts are integers: the
    # sum does not depend on the split) and read once into vectors (row
    # norms, max |y|), so they are long: a block's share per thread in equal
    # pieces of at most a few MiB (on Dask, cache-sized pieces of a chunk).
    # Measured at n = 1e6 on two cores: 47 -> 30 ms (d = 10), 182 -> 72 ms
    # (d = 100) against one thread over cache-sized pieces (7 interleaved runs).
    n_threads = threads_for(source)
    piece_rows = None
    if source.block_rows is not None:
        piece_rows = streamed_piece_rows(min(source.block_rows, source.n), width, n_threads)
    block = cache_blocked(partial(bound_block_counts, bins=bins, public=public,
                                  public_limit=public_limit, intercept=float(intercept),
                                  public_floor=public_floor),
                          width, n_threads, piece_rows)
    counts = reduce_threaded(source, block, add_tuples, label="bound counts",
                             n_threads=n_threads)
    return dict(zip((*BOUND_NAMES, "over"), counts))


def check_data_bounds_supported(counts, bound_eps):
    """Refuse a bound read from the data (infinite epsilon) above the largest bin.

    Call it on :func:`count_bounds`'s counts before the spend: the refusal
    depends on the data, as the bound read from it does (an infinite-epsilon
    release), and must come before anything is charged, as any refusal of
    the input does.
    """
    bins = bound_bins()
    for name, eps in bound_eps.items():
        # No bin lies above every row (argmax would give the first).
        if math.isinf(eps) and counts[name][-1] > 0:
            raise ValueError(f"{name}: values above {bins[-1]:.3g} are not supported.")


def release_bounds(counts, bound_eps, rng, *, n_samples, quantile="auto", notions=None,
                   neighbouring="replace-one"):
    """The missing bounds from :func:`count_bounds`: ``({name: bound}, [events])``.

    A finite share of ``bound_eps`` gives a private estimate
    (:func:`~skprivreg.bounds.private_norm_bound`); ``inf`` the smallest
    public bin at or above the data maximum
    (:func:`~skprivreg.bounds.data_norm_bound`, which warns). Each event
    carries ``notions[name]`` (default ``'full'``) and ``neighbouring``.
    """
    notions = notions or {}
    check_data_bounds_supported(counts, bound_eps)
    bins = bound_bins()
    resolved, events = {}, []
    for name, eps in bound_eps.items():
        notion = notions.get(name, "full")
        if math.isinf(eps):
            bound, event = data_norm_bound(
                bins[np.argmax(counts[name] == 0)], name=name, notion=notion
            )
        else:
            bound, event = private_norm_bound(
                counts[name], n_samples, eps, rng, name=name, quantile=quantile,
                notion=notion, bins=bins,
            )
        resolved[name] = bound
        events.append(replace(event, neighbouring=neighbouring))
    return resolved, events


def resolve_bounds(X, Y, bound_eps, rng, *, n_samples, quantile="auto", notions=None,
                   neighbouring="replace-one", source=None):
    """:func:`count_bounds` then :func:`release_bounds` (``({}, [])`` if nothing is missing).

    ``x_bound`` bounds the raw row norm of X, ``y_bound`` the largest
    ``|y_ij|`` of a row. ``source``: as in :func:`count_bounds`.
    """
    if not bound_eps:
        return {}, []
    return release_bounds(
        count_bounds(X, Y, source), bound_eps, rng, n_samples=n_samples, quantile=quantile,
        notions=notions, neighbouring=neighbouring,
    )
