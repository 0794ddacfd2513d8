"""Moments of bounded columns, a private validation score, randomised response on bins.

Part of :mod:`skprivreg.mechanisms` (import from there).
"""

import math

import numpy as np

from .._rows import workspace_like
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
    return 2.0 * math.sqrt(n_features)


def moment_sums(U, overwrite=False, scratch=None):
    """``(sum_i u_i, sum_i u_i**2)`` of one block of rows (column sums).

    Column sums as products with a ones vector (one read each; ``np.dot``,
    which releases the interpreter lock for threads);
    ``overwrite``: square ``U`` in place (a float64 block the caller owns);
    ``scratch``: else square it into that reused buffer
    (:func:`skprivreg._rows.workspace_like`).
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
    """
    if not y_high > y_low:
        raise ValueError("y_high must exceed y_low.")
    return (float(y_high) - float(y_low)) ** 2 / int(n_validation)


def private_neg_mse(y_true, y_pred, *, y_low, y_high, epsilon, rng):
    """Negative mean clipped squared error plus Laplace noise: epsilon-DP (replace-one).

    .. math::
        \\tilde s = -\\frac{1}{n}\\sum_i
            \\overline{(\\mathrm{clip}(y_i) - \\mathrm{clip}(\\hat y_i))^2}
            + \\mathrm{Laplace}\\left(\\frac{(h-l)^2}{n\\varepsilon}\\right)

    (Dwork & Roth 2014, Thm. 3.6, with the sensitivity of
    :func:`clipped_squared_error_sensitivity`). Returns the noisy score.
    """
    y_true = np.clip(np.asarray(y_true, dtype=np.float64), y_low, y_high)
    y_pred = np.clip(np.asarray(y_pred, dtype=np.float64).reshape(y_true.shape), y_low, y_high)
    losses = np.square(y_true - y_pred)
    if losses.ndim == 2:
        losses = losses.mean(axis=1)
    n = losses.shape[0]
    scale = clipped_squared_error_sensitivity(y_low, y_high, n) / float(epsilon)
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
    return 0.0 if math.isinf(epsilon) else 2.0 / float(epsilon)


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


def _change_probability(epsilon, n_outputs):
    """``(K - 1) / (e^eps + K - 1)``, the probability that an entry is changed.

    Computed as ``(K - 1) e^-eps / (1 + (K - 1) e^-eps)`` (no cancellation:
    positive where ``p`` rounds to 1) and raised by a relative ``1e-14``,
    above the few roundings of the formula, so the float is never below the
    exact value. Where ``e^-eps`` underflows (epsilon above about 708) the
    smallest positive float is returned: any value in ``(0, 2**-53]`` gives
    the same draw ``u < q`` on the uniform grid (probability ``2**-53``, above
    the exact value). 0 only for ``epsilon=inf`` or ``K = 1``.
    """
    if math.isinf(epsilon) or n_outputs == 1:
        return 0.0
    ratio = (n_outputs - 1) * math.exp(-float(epsilon))
    q_change = ratio / (1.0 + ratio) * (1.0 + 1e-14)
    return min(max(q_change, math.ulp(0.0)), 1.0)


def randomized_response(index, n_outputs, epsilon, rng):
    """K-ary randomised response applied to each entry of ``index`` independently.

    Each entry ``i`` in ``{0, ..., K-1}`` is changed when a uniform draw
    ``u`` in ``[0, 1)`` is below the change probability
    ``(K - 1) / (e^eps + K - 1)`` (computed without cancellation and never
    below its exact value), and then replaced by one of the ``K - 1`` other
    values chosen uniformly; otherwise it is kept. This is the law of
    :func:`randomized_response_probabilities`. The uniforms lie on the grid
    of multiples of ``2**-53``, so the realised change probability is the
    computed one rounded up to that grid: at least the exact value, which
    keeps the ratio of any two outputs' probabilities at most ``e^eps``.
    Every output depends on its own input only, so releasing the whole
    vector is epsilon-DP when inputs differ in one entry (replace-one), and
    row blocks can be randomised independently.
    """
    index = np.asarray(index, dtype=np.int64)
    randomized_response_probabilities(epsilon, n_outputs)  # checks the arguments
    q_change = _change_probability(epsilon, int(n_outputs))
    if q_change == 0.0:
        return index.copy()
    change = rng.random(index.shape) < q_change
    other = rng.integers(0, n_outputs - 1, size=index.shape)
    other += other >= index  # uniform over the K - 1 values != index
    return np.where(change, other, index)
