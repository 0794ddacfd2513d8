"""The label range of the label-DP estimators when ``y_bound`` is not declared.

One implementation for :class:`GaussianLabelNoiseRegressor` and
:class:`WeightedLBARegressor`: a bound ``B`` on ``|y|`` over the public
geometric bins of :func:`~skprivreg.mechanisms.bound_bins`, either released
privately (:func:`~skprivreg.bounds.private_norm_bound`, pure
``epsilon``-label-DP under replace-one neighbours: the counts of labels above
each bin change by at most one when one label changes) or, only with
``bounds='data'``, read from the labels (the smallest bin at or above
``max |y|``, an infinite-epsilon event and a
:class:`~skprivreg.exceptions.PrivacyLeakWarning`). The labels are then
clipped to ``[-B, B]``.
"""

import math

import numpy as np

from .._rows import check_block_finite, is_dask_collection, sum_over_row_blocks
from ..accounting import PrivacyEvent, PrivacyLedger
from ..bounds import data_norm_bound, private_norm_bound
from ..mechanisms import bound_bins, counts_above

__all__ = ["label_bound_counts", "private_label_bound", "data_label_bound",
           "data_bound_ledger"]

EVENT_NAME = "y_bound"


def data_bound_ledger():
    """The ledger of a label range read from the labels: one infinite-epsilon,
    label-DP event (checked before the read, and spent when a refusal then depends
    on what was read)."""
    return PrivacyLedger([PrivacyEvent(EVENT_NAME, math.inf, 0.0, notion="label")])


def _block_counts(y_b, _unused, bins):
    check_block_finite(y_b, "y")
    return (counts_above(np.abs(np.asarray(y_b, dtype=np.float64)), bins),)


def label_bound_counts(y, bins=None):
    """``#{i : |y_i| > bins[j]}`` for every public bin (NumPy, memmap or Dask ``y``).

    Refuses non-finite labels (``ValueError``); releases nothing by itself.
    """
    bins = bound_bins() if bins is None else bins
    if is_dask_collection(y):
        column = y.reshape((-1, 1)) if y.ndim == 1 else y
        return sum_over_row_blocks(lambda y_b, _: _block_counts(y_b, _, bins), column)[0]
    return _block_counts(np.asarray(y).reshape(-1), None, bins)[0]


def private_label_bound(y, epsilon, rng):
    """A private bound ``B`` on ``|y|`` and its label-DP event (``epsilon``, replace-one).

    Returns
    -------
    bound : float
    event : PrivacyEvent
    """
    bins = bound_bins()
    counts = label_bound_counts(y, bins)
    return private_norm_bound(
        counts, int(y.shape[0]), epsilon, rng, name=EVENT_NAME, notion="label", bins=bins
    )


def data_label_bound(y):
    """The smallest public bin at or above ``max |y|``: **not private** (``bounds='data'``).

    Warns :class:`~skprivreg.exceptions.PrivacyLeakWarning` and returns an
    infinite-epsilon event.
    """
    bins = bound_bins()
    counts = label_bound_counts(y, bins)
    if counts[-1] > 0:
        raise ValueError(f"|y| above {bins[-1]:.3g} is not supported.")
    return data_norm_bound(bins[np.argmax(counts == 0)], name=EVENT_NAME, notion="label")
