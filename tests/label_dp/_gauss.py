"""Exact hockey-stick divergences between 1-D Gaussians (test helpers)."""

import math

import numpy as np
from scipy.special import ndtr


def _interval_prob(z1, z2):
    """P(z1 < Z < z2) for Z ~ N(0, 1), accurate in both tails."""
    if z1 > 0:
        return ndtr(-z1) - ndtr(-z2)
    return ndtr(z2) - ndtr(z1)


def _region_prob(intervals, mean, sd):
    total = 0.0
    for lo, hi in intervals:
        total += _interval_prob((lo - mean) / sd, (hi - mean) / sd)
    return total


def hs_gauss(m1, s1, m2, s2, eps):
    """HS_eps(N(m1, s1^2) || N(m2, s2^2)) = sup_S P(S) - e^eps Q(S), exactly.

    The optimal S is {log p - log q > eps}, a set where a quadratic
    A x^2 + B x + C is positive: one or two intervals with closed-form ends.
    """
    A = -0.5 / s1**2 + 0.5 / s2**2
    B = m1 / s1**2 - m2 / s2**2
    C = -0.5 * m1**2 / s1**2 + 0.5 * m2**2 / s2**2 + math.log(s2 / s1) - eps
    inf = math.inf
    if abs(A) < 1e-14 * (abs(B) + abs(C) + 1.0):
        if B == 0:
            intervals = [(-inf, inf)] if C > 0 else []
        else:
            root = -C / B
            intervals = [(root, inf)] if B > 0 else [(-inf, root)]
    else:
        disc = B * B - 4 * A * C
        if disc <= 0:
            intervals = [(-inf, inf)] if A > 0 else []
        else:
            sq = math.sqrt(disc)
            r1, r2 = sorted(((-B - sq) / (2 * A), (-B + sq) / (2 * A)))
            intervals = [(-inf, r1), (r2, inf)] if A > 0 else [(r1, r2)]
    if not intervals:
        return 0.0
    value = _region_prob(intervals, m1, s1) - math.exp(eps) * _region_prob(intervals, m2, s2)
    return max(value, 0.0)


def configuration_delta(eps, h, rho, tau, n_nodes=80):
    """Exact delta of one bag configuration (spec §1.4), both directions.

    Normalised sigma = sqrt(RSS) = 1; the neighbour moves the target label by
    ``tau`` (in units of sigma), its residual is ``rho``, its leverage ``h``:
    ``ybar | xbar ~ N(0, 1)`` vs ``N(tau u, 1 + 2 tau rho + tau^2 (1 - h))``
    with ``u ~ N(0, h)``; the expectation over u by Gauss-Hermite.
    """
    var2 = 1.0 + 2.0 * tau * rho + tau**2 * (1.0 - h)
    if var2 <= 0:
        return 1.0
    s2 = math.sqrt(var2)
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_nodes)
    weights = weights / weights.sum()
    us = nodes * math.sqrt(h) if h > 0 else np.zeros(1)
    ws = weights if h > 0 else np.ones(1)
    fwd = sum(w * hs_gauss(0.0, 1.0, tau * u, s2, eps) for u, w in zip(us, ws))
    bwd = sum(w * hs_gauss(tau * u, s2, 0.0, 1.0, eps) for u, w in zip(us, ws))
    return max(fwd, bwd)
