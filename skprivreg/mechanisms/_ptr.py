"""Truncated Laplace, propose-test-release and the stability histogram.

Part of :mod:`skprivreg.mechanisms` (import from there).
"""

import math
from dataclasses import dataclass

import numpy as np

from .._rounding import quotient_at_least
from ._sampling import laplace

__all__ = [
    "truncated_laplace",
    "PTRCalibration",
    "ptr_calibration",
    "ptr_test",
    "stability_histogram",
    "stability_mode",
]


# ---------------------------------------------------------------------------
# Truncated Laplace and propose-test-release
# ---------------------------------------------------------------------------
def truncated_laplace(scale, half_width, rng, size=None):
    """Laplace(0, scale) conditioned on ``[-half_width, half_width]``.

    Drawn by :func:`~skprivreg.mechanisms.laplace` with ``half_width``: a fair
    sign times ``scale M``, ``M ~ Exp(1)`` conditioned on ``[0, A/scale]``.
    Not by the inverse CDF of one uniform: a double lies on the grid
    ``k 2^-53``, so that CDF put probability ``2^-53`` on ``-A`` and reached
    no value above about ``36.04 scale``. Where ``A`` lies beyond (``delta <
    2^-53 (e^epsilon - 1)``), neighbouring scores near ``A`` PASSed (or
    FAILed) with probability 0 on one side only: at ``epsilon = 30, delta =
    1e-5`` the realised delta was 116 times the declared one.
    """
    return laplace(scale, rng, size=size, half_width=half_width)


@dataclass(frozen=True)
class PTRCalibration:
    """Public constants of a truncated-Laplace propose-test-release.

    Attributes
    ----------
    scale : float
        Laplace scale ``lambda = sensitivity / epsilon``.
    half_width : float
        Truncation ``A = lambda ln(1 + (e^epsilon - 1) / (2 delta))``.
    tau : float
        PASS iff ``score + Z <= tau``.
    fail_threshold : float
        ``tau + A``: every score above it FAILs with probability 1.
    """

    scale: float
    half_width: float
    tau: float
    fail_threshold: float


def ptr_calibration(sensitivity, epsilon, delta, fail_prob=0.0):
    """Calibrate a truncated-Laplace propose-test-release (as used by ISSP).

    .. math::
        \\lambda = \\Delta/\\varepsilon,\\quad
        A = \\lambda \\ln\\left(1 + \\frac{e^{\\varepsilon} - 1}{2\\delta}\\right),\\quad
        \\tau = A \\text{ if } \\beta = 0, \\text{ else }
        -\\lambda \\ln\\left(2\\beta(1 - e^{-A/\\lambda}) + e^{-A/\\lambda}\\right).

    ``score + Z`` with ``Z`` truncated Laplace on ``[-A, A]`` is the
    (epsilon, delta)-DP truncated Laplace mechanism (Geng et al. 2020) for
    scores of sensitivity ``Delta``; PASS/FAIL is post-processing. With
    ``fail_prob = beta = 0`` a score of 0 always PASSes; every score above
    ``tau + A`` always FAILs, and ``2A`` is optimal up to ``2 Delta`` for a
    test that always PASSes at 0.

    Requires ``delta <= 1/2`` (so that ``A >= Delta``) and ``0 <= beta < 1/2``.
    """
    if sensitivity <= 0 or not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("PTR needs sensitivity > 0 and a finite epsilon > 0.")
    if not 0 < delta <= 0.5:
        raise ValueError("PTR needs delta in (0, 1/2].")
    if not 0 <= fail_prob < 0.5:
        raise ValueError("fail_prob must lie in [0, 1/2).")
    scale = quotient_at_least(sensitivity, epsilon)
    # ln(1 + (e^eps - 1)/(2 delta)) in log space: e^eps overflows float64 past
    # eps ~ 709, and the PTR of ISSP runs at any epsilon (up to 1e4 is tested).
    log_ratio = epsilon + math.log(-math.expm1(-epsilon)) - math.log(2 * delta)
    # Rounded up by a few ulps (a log, an exp and a product): a narrower width
    # would let the test pass with a probability above delta.
    half_width = scale * float(np.logaddexp(0.0, log_ratio)) * (1.0 + 2.0**-49)
    if fail_prob == 0:
        tau = half_width
    else:
        m = math.exp(-half_width / scale)
        tau = -scale * math.log(2 * fail_prob * (1 - m) + m)
    return PTRCalibration(scale, half_width, tau, tau + half_width)


def ptr_test(score, sensitivity, epsilon, delta, rng, fail_prob=0.0):
    """Run the truncated-Laplace PTR on ``score``: ``(passed, fail_threshold)``.

    Only the PASS/FAIL bit may be released, never the noisy score (Mironov
    2012). See :func:`ptr_calibration` for the calibration and guarantee.
    """
    cal = ptr_calibration(sensitivity, epsilon, delta, fail_prob)
    z = truncated_laplace(cal.scale, cal.half_width, rng)
    return bool(score + z <= cal.tau), cal.fail_threshold


# ---------------------------------------------------------------------------
# Stability histogram (Karwa & Vadhan 2018, Lemma 2.3)
# ---------------------------------------------------------------------------
def stability_histogram(labels, epsilon, delta, rng):
    """Noisy counts of the occupied bins that survive the stability threshold.

    Each element of ``labels`` is the bin of one group (any hashable). Under
    replace-one neighbours one group changes bin, so one count goes down by 1
    and one goes up by 1 (L1 change 2). For each *occupied* bin,
    ``c~ = c + Lap(2/epsilon)``; the bin is kept iff
    ``c~ >= 1 + (2/epsilon) ln(2/delta)``. Unoccupied bins are never examined,
    so the domain may be infinite. A bin occupied in only one of two
    neighbours has count 1 and survives with probability ``delta/4``; at most
    two bins can do so, so the output is (epsilon, delta/2)-DP, which the
    caller records as (epsilon, delta), a conservative rounding up.

    Returns
    -------
    kept : dict
        ``{bin: noisy_count}`` for the surviving bins. Release at most the
        argmax (:func:`stability_mode`); the noisy counts are for tests.
    """
    if not epsilon > 0 or not 0 < delta < 1:
        raise ValueError("stability_histogram needs epsilon > 0 and delta in (0, 1).")
    counts = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    scale = quotient_at_least(2.0, epsilon)
    threshold = 1.0 + scale * math.log(2.0 / delta)
    kept = {}
    # Sorted so that the noise each bin receives does not depend on the order
    # in which the groups were seen.
    for label in sorted(counts, key=repr):
        noisy = counts[label] + laplace(scale, rng)
        if noisy >= threshold:
            kept[label] = noisy
    return kept


def stability_mode(labels, epsilon, delta, rng, tie_key=None):
    """The surviving bin with the largest noisy count, or ``None`` (bottom).

    Ties (probability zero) go to the smaller ``tie_key(bin)``.
    """
    kept = stability_histogram(labels, epsilon, delta, rng)
    if not kept:
        return None
    key = tie_key if tie_key is not None else repr
    return max(kept, key=lambda b: (kept[b], _negate(key(b))))


def _negate(value):
    try:
        return -value
    except TypeError:
        return value
