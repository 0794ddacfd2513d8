"""Exponential mechanism, AboveThreshold, private quantiles, the Laplace distance test, top-k.

Part of :mod:`skprivreg.mechanisms` (import from there).
"""

import math

import numpy as np

from .._rounding import exact_fraction, quotient_at_least, value_at_least
from ._gaussian import normal_noise_scale
from ._sampling import laplace

__all__ = [
    "exponential_mechanism",
    "above_threshold",
    "bound_bins",
    "upper_bound_margin",
    "counts_above",
    "private_upper_bound",
    "laplace_distance_threshold",
    "laplace_distance_test",
    "laplace_release_probability",
    "gumbel_top_k",
]


# ---------------------------------------------------------------------------
# Exponential mechanism and private quantiles on geometric bins
# ---------------------------------------------------------------------------
def exponential_mechanism(utilities, sensitivity, epsilon, rng):
    """Index drawn with probability proportional to ``exp(eps u / (2 Delta_u))``.

    McSherry & Talwar (2007); Dwork & Roth (2014), Thm. 3.10: epsilon-DP when
    every utility changes by at most ``sensitivity`` between neighbours.
    Sampled with the Gumbel-max trick in log space.
    """
    utilities = np.asarray(utilities, dtype=np.float64)
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("exponential_mechanism needs a finite epsilon > 0.")
    logits = epsilon * utilities / (2.0 * sensitivity)
    return int(np.argmax(logits + rng.gumbel(size=logits.shape)))


def above_threshold(queries, threshold, epsilon, rng):
    """Index of the first query whose noisy value reaches the noisy threshold.

    The sparse vector technique's AboveThreshold (Dwork & Roth 2014,
    Algorithm 1 and Theorem 3.23): with ``rho ~ Lap(2/epsilon)`` once and
    ``nu_i ~ Lap(4/epsilon)`` per query, return the first ``i`` with
    ``q_i + nu_i >= threshold + rho`` (``None`` if there is none). It is
    epsilon-DP for any number of queries whose values each change by at most
    1 between neighbours; only the index is released.
    """
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("above_threshold needs a finite epsilon > 0.")
    queries = np.asarray(queries, dtype=np.float64)
    noisy_threshold = threshold + laplace(quotient_at_least(2.0, epsilon), rng)
    noisy_queries = queries + laplace(quotient_at_least(4.0, epsilon), rng, size=queries.shape)
    hits = np.flatnonzero(noisy_queries >= noisy_threshold)
    return int(hits[0]) if hits.size else None


def bound_bins(lower=2.0**-20, upper=2.0**40, per_octave=8):
    """Public candidate bounds ``lower * 2^(j/per_octave)`` up to ``upper``."""
    n_bins = int(round(per_octave * math.log2(upper / lower))) + 1
    return lower * 2.0 ** (np.arange(n_bins) / per_octave)


def upper_bound_margin(epsilon, failure_prob=1e-3):
    """Rows allowed above a private upper bound: ``(6/epsilon) ln(2/failure_prob)``.

    With this many values left above the target, the noise of
    :func:`private_upper_bound` (``nu - rho``, Laplace of scales 4/epsilon
    and 2/epsilon) carries the bound past the data's maximum with
    probability at most ``failure_prob``. Public.
    """
    return (6.0 / epsilon) * math.log(2.0 / failure_prob)


def counts_above(values, bins, *, overwrite=False):
    """``#{i : values_i > b}`` for each public candidate ``b`` in ``bins``.

    Counts of row blocks add up, so this is the per-block statistic of
    :func:`private_upper_bound` on data processed in chunks. ``overwrite``:
    ``values`` (a contiguous float64 vector, a scratch buffer) may be sorted
    in place instead of copied.
    """
    values = np.asarray(values, dtype=np.float64)
    if overwrite and values.ndim == 1 and values.flags.c_contiguous and values.flags.writeable:
        values.sort()
    else:
        values = np.sort(values.ravel())
    return values.size - np.searchsorted(values, bins, side="right")


def private_upper_bound(counts, bins, epsilon, rng, n_above=None):
    """A private bound that all but about ``n_above`` values lie below.

    :func:`above_threshold` over the public increasing candidates ``bins``
    (:func:`bound_bins`) with queries ``-counts[j]``, where
    ``counts[j] = #{i : values_i > bins[j]}`` (:func:`counts_above`), and
    threshold ``-n_above``: the first candidate whose noisy count of values
    above it drops to ``n_above``. Each count changes by at most 1 when one
    value is replaced, so the result is epsilon-DP (replace-one, n public).
    Counts are exact at any scale and with ties (one-hot rows all have the
    same norm), so the bound stays within one bin (9%) of the value it
    targets; it overshoots the data maximum only with probability
    ``failure_prob`` when ``n_above = upper_bound_margin(epsilon,
    failure_prob)`` (the default). If no candidate stops, the top candidate
    is returned.
    """
    bins = np.asarray(bins, dtype=np.float64)
    if n_above is None:
        n_above = upper_bound_margin(epsilon)
    index = above_threshold(-np.asarray(counts, dtype=np.float64), -float(n_above), epsilon, rng)
    return float(bins[-1] if index is None else bins[index])


# ---------------------------------------------------------------------------
# Laplace distance test (propose-test-release with a distance proxy) and
# one-shot Gumbel top-k (appended for the private Lasso support selector)
# ---------------------------------------------------------------------------
def laplace_distance_threshold(epsilon, delta, sensitivity=1.0, offset=0.0):
    """Threshold ``T = offset + sensitivity * ln(1/delta) / epsilon`` of the Laplace distance test.

    Smith & Thakurta (2013), Prop. 3 and Alg. 1 use ``sensitivity = 1`` and
    ``offset = 0``. A distance proxy that may be as large as ``offset`` on a
    dataset whose output differs from a neighbour's (``offset = 1`` for a
    replace-one neighbour built from two add/remove steps) needs the offset
    so that the release probability there stays below ``delta / 2``.
    """
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("The distance test needs a finite epsilon > 0.")
    if not 0 < delta < 1:
        raise ValueError("The distance test needs delta in (0, 1).")
    if not sensitivity > 0:
        raise ValueError("sensitivity must be > 0.")
    return float(offset) + float(sensitivity) * math.log(1.0 / delta) / float(epsilon)


def laplace_distance_test(distance, epsilon, delta, rng, sensitivity=1.0, offset=0.0):
    """Propose-test-release on a distance proxy: ``(passed, noisy_distance, threshold)``.

    .. math::
        \\tilde d = \\hat d + \\mathrm{Lap}(\\Delta/\\varepsilon), \\qquad
        \\text{PASS} \\iff \\tilde d > T, \\qquad
        T = c + \\Delta \\ln(1/\\delta)/\\varepsilon

    (strict inequality; ``Delta = sensitivity``, ``c = offset``). If the
    proxy ``d_hat`` has global sensitivity ``Delta`` and is ``<= c`` on both
    sides of every neighbouring pair whose proposed outputs differ, releasing
    the proposal on PASS (and ``bottom`` otherwise), together with
    ``noisy_distance``, is ``(epsilon, delta/2)``-DP: the noisy distance
    alone is a Laplace mechanism, and where the outputs differ each side
    passes with probability at most ``Pr[Lap(Delta/eps) > T - c] = delta/2``
    (Smith & Thakurta 2013, Prop. 3; Dwork & Roth 2014, Sec. 7.3). Callers
    record ``(epsilon, delta/2)``.

    ``distance = -inf`` (a deterministic failure) never passes.
    """
    threshold = laplace_distance_threshold(epsilon, delta, sensitivity, offset)
    scale = normal_noise_scale(quotient_at_least(float(sensitivity), epsilon), sensitivity)
    noisy = float(distance) + laplace(scale, rng)
    return bool(noisy > threshold), noisy, threshold


def laplace_release_probability(distance, epsilon, delta, sensitivity=1.0, offset=0.0):
    """Exact PASS probability of :func:`laplace_distance_test` for proxy value ``distance``.

    With ``b = Delta/epsilon`` and threshold ``T``:
    ``1 - exp(-(d - T)/b)/2`` if ``d >= T``, else ``exp(-(T - d)/b)/2``.
    """
    threshold = laplace_distance_threshold(epsilon, delta, sensitivity, offset)
    if distance == -math.inf:
        return 0.0
    scale = float(sensitivity) / float(epsilon)
    gap = (float(distance) - threshold) / scale
    if gap >= 0:
        return 1.0 - 0.5 * math.exp(-gap)
    return 0.5 * math.exp(gap)


def gumbel_top_k(utilities, k, sensitivity, epsilon, rng):
    """Indices of the ``k`` largest ``u_j + Gumbel(2 k Delta / epsilon)``, in selection order.

    One-shot top-k (Durfee & Rogers 2019, "Practical differentially private
    top-k selection with pay-what-you-get composition", Lemma 4.2): its output
    has the distribution of ``k`` rounds of peeling exponential mechanism,
    each ``(epsilon/k)``-DP for utilities that change by at most ``Delta``
    (in l_inf) between neighbours (McSherry & Talwar 2007). By basic
    composition the ordered set is ``epsilon``-DP (pure; monotonicity is not
    assumed).
    """
    utilities = np.asarray(utilities, dtype=np.float64)
    k = int(k)
    if not 1 <= k <= utilities.shape[0]:
        raise ValueError("k must lie in [1, len(utilities)].")
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("gumbel_top_k needs a finite epsilon > 0.")
    if not sensitivity > 0:
        raise ValueError("sensitivity must be > 0.")
    scale = normal_noise_scale(
        value_at_least(2 * k * exact_fraction(sensitivity) / exact_fraction(epsilon)), sensitivity)
    noisy = utilities + rng.gumbel(0.0, scale, size=utilities.shape)
    order = np.argsort(-noisy, kind="stable")
    return order[:k]
