"""Moments of bounded columns, a private validation score, randomised response on bins.

Part of :mod:`skprivreg.mechanisms` (import from there).
"""

import math

import numpy as np

from .._blocks import workspace_like
from .._rounding import (
    exact_fraction,
    quotient_at_least,
    sqrt_at_least,
    value_at_least,
)
from ._gaussian import add_laplace

__all__ = [
    "moment_sums_sensitivity",
    "moment_sums",
    "released_mean_variance",
    "clipped_squared_error_sensitivity",
    "private_neg_mse",
    "histogram_laplace_scale",
    "noisy_histogram",
    "randomized_response_probabilities",
    "randomized_response",
]


# ---------------------------------------------------------------------------
# Moments of bounded columns (appended for the private standard scaler)
# ---------------------------------------------------------------------------
def moment_sums_sensitivity(n_features):
    """L2-sensitivity of the sums :math:`(\\sum_i u_i, \\sum_i u_i^2)` of rows in :math:`[-1, 1]^d`.

    Replacing one row :math:`u` by :math:`u'` changes coordinate :math:`j` of
    the joint vector by :math:`(u_j - u'_j,\\ u_j^2 - u_j'^2)`, whose squared
    norm is :math:`t^2 (1 + s^2)` with :math:`t = u_j - u'_j`,
    :math:`s = u_j + u'_j` and :math:`|s| + |t| \\le 2`. On the boundary
    :math:`g(t) = t^2 (1 + (2 - t)^2)` increases on :math:`[0, 2]`
    (:math:`g'(t) = 2t(1 + (2-t)^2) - 2t^2(2-t) > 0` there), so its maximum is
    :math:`g(2) = 4` (at :math:`u_j = 1, u'_j = -1`). Summed over the
    :math:`d` columns:

    .. math::
        \\Delta_2 = 2\\sqrt{d},

    the sensitivity of the sums alone: the squares ride along for free
    (replace-one, n public).
    """
    if n_features < 1:
        raise ValueError("n_features must be >= 1.")
    return 2.0 * sqrt_at_least(n_features)  # times 2: exact


def moment_sums(U, overwrite=False, scratch=None):
    """``(sum_i u_i, sum_i u_i**2)`` of one block of rows (column sums).

    Column sums as products with a ones vector (one read each; ``np.dot``,
    which releases the interpreter lock for threads);
    ``overwrite``: square ``U`` in place (a float64 block the caller owns);
    ``scratch``: else square it into that reused buffer
    (:func:`skprivreg._blocks.workspace_like`).
    """
    U = np.asarray(U, dtype=np.float64)
    ones = np.ones(U.shape[0])
    sums = np.dot(ones, U)
    if overwrite:
        out = U
    else:
        out = None if scratch is None else workspace_like(scratch, U)
    return sums, np.dot(ones, np.multiply(U, U, out=out))


def released_mean_variance(noisy_sum, noisy_square_sum, n_samples, sigma):
    """Mean and variance of ``[-1, 1]``-valued columns from their noisy sums.

    Post-processing of the release: ``mean = clip(S_1/n, -1, 1)`` and
    ``var = clip(S_2/n - mean^2, floor, 1)`` with the public floor
    ``max(sigma/n, 1e-12)`` (the noise's standard deviation on ``S_2/n``:
    a smaller variance cannot be told from zero).
    """
    n = float(n_samples)
    mean = np.clip(np.asarray(noisy_sum, dtype=np.float64) / n, -1.0, 1.0)
    floor = max(float(sigma) / n, 1e-12)
    var = np.clip(np.asarray(noisy_square_sum, dtype=np.float64) / n - mean**2, floor, 1.0)
    return mean, var




# ---------------------------------------------------------------------------
# A private bounded validation score (appended for private tuning)
# ---------------------------------------------------------------------------
def clipped_squared_error_sensitivity(y_low, y_high, n_validation):
    """Replace-one sensitivity of the mean clipped squared error: ``(h - l)^2 / n``.

    Labels and predictions are clipped to the public range :math:`[l, h]`, so
    each row's loss (averaged over outputs) lies in :math:`[0, (h-l)^2]`;
    replacing one of the ``n`` (public) validation rows moves the mean by at
    most :math:`(h-l)^2/n`.

    Raises ``ValueError`` when :math:`(h-l)^2` overflows or the sensitivity
    falls below the normal floating-point range: the loss could not be
    computed, or the noise scale would round to zero (no noise at all).
    """
    if not y_high > y_low:
        raise ValueError("y_high must exceed y_low.")
    # Exact, rounded up once (inf on overflow, never an error).
    sensitivity = math.inf
    if math.isfinite(y_low) and math.isfinite(y_high):
        width = exact_fraction(y_high) - exact_fraction(y_low)
        sensitivity = value_at_least(width * width / int(n_validation))
    if not np.finfo(np.float64).tiny <= sensitivity < np.inf:
        raise ValueError(
            f"The label range [{float(y_low):g}, {float(y_high):g}] cannot be scored in "
            f"float64 over {int(n_validation)} rows: its squared width over the rows "
            "overflows or underflows. Rescale the labels."
        )
    return sensitivity


def private_neg_mse(y_true, y_pred, *, y_low, y_high, epsilon, rng):
    """Negative mean clipped squared error plus Laplace noise: epsilon-DP (replace-one).

    .. math::
        \\tilde s = -\\frac{1}{n}\\sum_i
            \\overline{(\\mathrm{clip}(y_i) - \\mathrm{clip}(\\hat y_i))^2}
            + \\mathrm{Laplace}\\left(\\frac{(h-l)^2}{n\\varepsilon}\\right)

    (Dwork & Roth 2014, Thm. 3.6, with the sensitivity of
    :func:`clipped_squared_error_sensitivity`). Returns the noisy score.

    A NaN prediction (a finite row can make one, when its product with the
    coefficients overflows to infinities of both signs) counts as ``h``:
    every row's loss stays in :math:`[0, (h-l)^2]` whatever the model
    predicts.
    """
    y_true = np.clip(np.asarray(y_true, dtype=np.float64), y_low, y_high)
    y_pred = np.asarray(y_pred, dtype=np.float64).reshape(y_true.shape)
    y_pred = np.clip(np.where(np.isnan(y_pred), y_high, y_pred), y_low, y_high)
    losses = np.square(y_true - y_pred)
    if losses.ndim == 2:
        losses = losses.mean(axis=1)
    n = losses.shape[0]
    scale = quotient_at_least(clipped_squared_error_sensitivity(y_low, y_high, n), epsilon)
    return float(add_laplace(-losses.mean(), scale, rng))




# ---------------------------------------------------------------------------
# Label histograms and randomised response (appended for RR on bins)
# ---------------------------------------------------------------------------
def histogram_laplace_scale(epsilon):
    """Laplace scale ``2 / epsilon`` of an epsilon-DP histogram under replace-one.

    Replacing one record moves it from one cell to another: two counts change
    by one, so the L1-sensitivity of the count vector is 2 and Laplace noise
    of scale :math:`2/\\varepsilon` on every count is epsilon-DP (Dwork &
    Roth 2014, Thm. 3.6). Under add/remove the sensitivity would be 1.
    ``epsilon=np.inf`` gives 0.
    """
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    return 0.0 if math.isinf(epsilon) else quotient_at_least(2.0, epsilon)


def noisy_histogram(counts, epsilon, rng):
    """``counts + Laplace(0, 2/epsilon)`` per cell: epsilon-DP, replace-one.

    The scale is :func:`histogram_laplace_scale`; the cells must be public
    (fixed before the data is read).
    """
    return add_laplace(counts, histogram_laplace_scale(epsilon), rng)


def randomized_response_probabilities(epsilon, n_outputs):
    """``(p, q)`` of K-ary randomised response with ``K = n_outputs``.

    .. math::
        p = \\frac{e^{\\varepsilon}}{e^{\\varepsilon} + K - 1}, \\qquad
        q = \\frac{1}{e^{\\varepsilon} + K - 1}:

    the true value is kept with probability :math:`p` and each of the
    :math:`K - 1` other values is reported with probability :math:`q`. The
    ratio of the probabilities of any output under two inputs is at most
    :math:`p / q = e^{\\varepsilon}`, so the randomiser is pure
    epsilon-DP for its one input (Warner 1965; Kairouz, Oh & Viswanath 2016,
    for K outputs). ``epsilon=np.inf`` gives ``(1, 0)``; ``K = 1`` gives
    ``(1, 0)`` (a constant output reveals nothing). At large epsilon ``p``
    rounds to 1.0 while ``q`` stays positive;
    :func:`randomized_response` draws with the probability of a change,
    ``(K - 1) q``, which it keeps positive for every finite epsilon.
    """
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    n_outputs = int(n_outputs)
    if n_outputs < 1:
        raise ValueError("randomized response needs at least one output.")
    if math.isinf(epsilon) or n_outputs == 1:
        return 1.0, 0.0
    # e^eps / (e^eps + K - 1) = 1 / (1 + (K - 1) e^-eps), stable for large eps.
    q_over_p = math.exp(-float(epsilon))
    p = 1.0 / (1.0 + (n_outputs - 1) * q_over_p)
    return p, p * q_over_p


# The computed (K - 1) e^-eps / (1 + (K - 1) e^-eps) is within a relative 1e-15
# of the exact value (a few roundings) wherever it is above 2**-53; it is
# raised by this relative margin so that it is never below the exact value.
_CHANGE_MARGIN = 1e-14
_GRID = 2.0**-53  # spacing of the uniforms of numpy's Generator.random


def _change_probability(epsilon, n_outputs):
    """The probability ``c`` that randomised response changes an entry, or None.

    With ``c`` the realised probability of a change, the ratio of any
    output's probabilities under two inputs is at most ``e^eps`` exactly
    when

    .. math::
        c^* = \\frac{K - 1}{e^{\\varepsilon} + K - 1} \\le c \\le
        c_{max} = \\frac{(K - 1) e^{\\varepsilon}}{1 + (K - 1) e^{\\varepsilon}}

    (keep: ``1 - c``; each other value: ``c / (K - 1)``). The draw
    ``u < c`` with ``u`` uniform on the multiples of ``2**-53`` in
    ``[0, 1)`` realises ``c`` rounded up to that grid, i.e. less than
    ``c + 2**-53``. ``c*`` is computed as ``(K - 1) e^-eps / (1 + (K - 1)
    e^-eps)`` (no cancellation), within a relative ``1e-15`` of its exact
    value, and raised by a relative ``1e-14``: never below ``c*``. Where
    ``e^-eps`` is tiny or underflows, the smallest positive float is the
    floor: the realised probability is then ``2**-53``, above ``c*``.

    The upper end holds when the relative width of the interval,
    ``c_max / c* - 1 = 2 sinh(eps) / (e^-eps + K - 1)``, leaves room for
    the margin and the grid step, checked with a factor 2 to spare. At
    tiny ``epsilon`` (below about ``1.1e-14 K``) it does not, and None is
    returned: the output is then a uniform draw over the ``K`` values that
    ignores the input (ratio exactly 1). Returns 0 for ``epsilon=inf`` or
    ``K = 1``.
    """
    if math.isinf(epsilon) or n_outputs == 1:
        return 0.0
    epsilon = float(epsilon)
    ratio = (n_outputs - 1) * math.exp(-epsilon)
    c_star = ratio / (1.0 + ratio)
    q_change = min(max(c_star * (1.0 + _CHANGE_MARGIN), math.ulp(0.0)), 1.0)
    if epsilon > 700.0:
        # c* < (K - 1) e^-700 and c_max > 1/2: the realised probability,
        # at most q_change + 2**-53, is far inside the interval.
        return q_change
    rel_width = 2.0 * math.sinh(epsilon) / (math.exp(-epsilon) + n_outputs - 1)
    needed = 1.2 * _CHANGE_MARGIN * c_star + _GRID
    if not c_star * rel_width >= 2.0 * needed:
        return None
    return q_change


def randomized_response(index, n_outputs, epsilon, rng):
    """K-ary randomised response applied to each entry of ``index`` independently.

    Each entry ``i`` in ``{0, ..., K-1}`` is changed when a uniform draw
    ``u`` in ``[0, 1)`` is below the change probability
    ``(K - 1) / (e^eps + K - 1)`` (computed without cancellation and
    slightly raised), and then replaced by one of the ``K - 1`` other
    values chosen uniformly; otherwise it is kept. This is the law of
    :func:`randomized_response_probabilities` up to that raise and the
    grid of the uniforms: they lie on the multiples of ``2**-53``, so the
    realised change probability is the computed one rounded up to that
    grid; it lies between ``(K - 1) / (e^eps + K - 1)`` and
    ``(K - 1) e^eps / (1 + (K - 1) e^eps)``, which keeps the ratio of any
    two inputs' probabilities of an output at most ``e^eps``. At tiny
    epsilon (below about ``1.1e-14 K``), where that interval is too narrow
    for the grid, every entry is drawn uniformly from the ``K`` values
    whatever its input (ratio 1; its probabilities differ from those of
    :func:`randomized_response_probabilities` by less than ``eps / K``).
    Every output depends on its own input only, so releasing the whole
    vector is epsilon-DP when inputs differ in one entry (replace-one), and
    row blocks can be randomised independently.
    """
    index = np.asarray(index, dtype=np.int64)
    randomized_response_probabilities(epsilon, n_outputs)  # checks the arguments
    q_change = _change_probability(epsilon, int(n_outputs))
    if q_change is None:
        return rng.integers(0, n_outputs, size=index.shape)
    if q_change == 0.0:
        return index.copy()
    change = rng.random(index.shape) < q_change
    other = rng.integers(0, n_outputs - 1, size=index.shape)
    other += other >= index  # uniform over the K - 1 values != index
    return np.where(change, other, index)
