"""Non-private diagnostics for the data curator.

Everything here reads the private data **without any privacy guarantee** and
returns exact, data-dependent numbers. Use it on your own data, before a
release, to choose bounds; never publish its output, never let it decide what
is released, and never run it inside a release pipeline: acting on an exact
count (re-declaring a bound until nothing is clipped, say) makes the bound a
function of the data and voids the guarantee of the fit that uses it.

Private estimators never report clipping themselves: whether some record
exceeds a bound is a fact about that record, so ``fit`` emits no warning,
message or attribute about it.
"""

import numpy as np
from sklearn.utils import check_array

from .bounds import check_x_range, check_y_bound, clip_threshold, row_norms

__all__ = ["clipping_report"]


def clipping_report(X=None, y=None, *, x_bound=None, x_range=None, y_bound=None):
    """Exact counts of rows and labels that the declared bounds would clip.

    **Not private**: the counts are exact functions of the data.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or None
    y : array-like of shape (n_samples,) or (n_samples, n_outputs), or None
    x_bound : float or None
        A bound on the L2 norm of each row of X, as the estimators'
        ``x_bound``. A row counts as clipped when the estimators would scale
        it: when its computed norm exceeds
        :func:`~skprivreg.bounds.clip_threshold` of the bound, a few units in
        the last place below it (rows on the bound are scaled by that much).
    x_range : (low, high), array of shape (n_features, 2), or None
        Per-column ranges, as the estimators' ``x_range``.
    y_bound : float, (low, high), or None
        The label range, as the estimators' ``y_bound`` (a float ``B`` means
        ``[-B, B]``).

    Returns
    -------
    report : dict
        ``n_samples`` and, for each bound given, the number (``*_clipped``)
        and fraction (``*_clipped_fraction``) of rows that would be clipped.
    """
    report = {}
    with np.errstate(all="ignore"):
        if X is not None:
            X = check_array(X, dtype=np.float64)
            report["n_samples"] = X.shape[0]
            if x_bound is not None:
                # As the estimators clip: a row is scaled when its computed norm
                # exceeds the clip threshold, a few ulps below x_bound (so a row on
                # the bound, a one-hot or unit-normalised row, is scaled too).
                over = row_norms(X) > clip_threshold(x_bound, X.shape[1])
                report["rows_clipped"] = int(over.sum())
            if x_range is not None:
                low, high = check_x_range(x_range, X.shape[1])
                outside = (X < low) | (X > high)
                report["rows_with_feature_clipped"] = int(outside.any(axis=1).sum())
                report["feature_values_clipped"] = outside.sum(axis=0).astype(int)
        if y is not None and y_bound is not None:
            y = np.asarray(y, dtype=np.float64)
            y = y.reshape(y.shape[0], -1)
            report.setdefault("n_samples", y.shape[0])
            low, high = check_y_bound(y_bound)
            report["labels_clipped"] = int(((y < low) | (y > high)).any(axis=1).sum())
    n = report.get("n_samples", 0)
    for key in ("rows_clipped", "rows_with_feature_clipped", "labels_clipped"):
        if key in report:
            report[key.replace("clipped", "clipped_fraction")] = report[key] / n if n else 0.0
    return report
