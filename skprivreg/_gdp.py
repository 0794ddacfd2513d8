"""Gaussian DP <-> (epsilon, delta); re-exported by :mod:`skprivreg.accounting`."""

import math

from scipy.optimize import brentq
from scipy.special import log_ndtr

__all__ = ["gdp_delta", "gdp_mu", "gdp_epsilon"]


def gdp_delta(mu, epsilon):
    """Smallest delta such that mu-GDP implies (epsilon, delta)-DP.

    .. math::
        \\delta = \\Phi(-\\varepsilon/\\mu + \\mu/2)
            - e^{\\varepsilon}\\Phi(-\\varepsilon/\\mu - \\mu/2)

    computed in log space (Dong, Roth & Su 2022, Corollary 2.13; Balle &
    Wang 2018, Theorem 8, for the analytic Gaussian mechanism).

    Parameters
    ----------
    mu : float
        GDP parameter, > 0.
    epsilon : float
        >= 0.

    Returns
    -------
    delta : float
    """
    mu = float(mu)
    epsilon = float(epsilon)
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    if math.isinf(epsilon):
        return 0.0
    log_a = log_ndtr(-epsilon / mu + mu / 2)
    log_b = epsilon + log_ndtr(-epsilon / mu - mu / 2)
    if log_b >= log_a:  # only through round-off; delta is >= 0
        return 0.0
    return float(math.exp(log_a) * -math.expm1(log_b - log_a))


def _log_gdp_delta(mu, epsilon):
    """``log gdp_delta(mu, epsilon)``, ``-inf`` when delta is 0.

    Finite for deltas far below the smallest positive float, where
    :func:`gdp_delta` itself underflows to 0 or to an inexact subnormal.
    """
    if math.isnan(mu) or math.isnan(epsilon):
        raise ValueError("mu and epsilon must be numbers, not NaN.")
    if mu <= 0 or math.isinf(epsilon):
        return -math.inf
    if math.isinf(mu):
        return 0.0
    log_a = float(log_ndtr(-epsilon / mu + mu / 2))
    log_b = float(epsilon + log_ndtr(-epsilon / mu - mu / 2))
    if log_b >= log_a:  # only through round-off or underflow; delta is >= 0
        return -math.inf
    return log_a + math.log(-math.expm1(log_b - log_a))


_STEPS = 2000


def _root_or_below(f, lo, hi):
    """A root of the increasing or decreasing ``f`` between ``lo`` and ``hi``.

    Given ``f(lo)`` and ``f(hi)`` of opposite signs, either possibly
    infinite (delta 0 in log space): bisection moves an infinite end inward
    until ``f`` is finite at both ends, then Brent's method solves. If no
    finite bracket is found, returns the end where ``f <= 0``.
    """
    f_lo, f_hi = f(lo), f(hi)
    for _ in range(_STEPS):
        if math.isfinite(f_lo) and math.isfinite(f_hi):
            return brentq(f, lo, hi, xtol=1e-15, rtol=1e-14, maxiter=500)
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        f_mid = f(mid)
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi, f_hi = mid, f_mid
    return lo if f_lo <= 0 else hi


def gdp_mu(epsilon, delta):
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP.

    Solves :math:`\\log\\delta(\\varepsilon; \\mu) = \\log\\delta` for
    :math:`\\log\\mu` (the left side increases with :math:`\\mu`) with Brent's
    method on an expanding bracket, then rounds down so that the returned mu
    satisfies the inequality: calibrating ``sigma = sensitivity / mu`` is
    never too small. Working in log space keeps every positive delta in
    range, down to the smallest subnormal float.

    Reference values: ``gdp_mu(1, 1e-5) = 0.268051`` and
    ``gdp_mu(5, 1/5008**2) = 0.914623``.
    """
    epsilon = float(epsilon)
    delta = float(delta)
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0; got {epsilon!r}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1); got {delta!r}.")
    if math.isinf(epsilon):
        return math.inf
    log_delta = math.log(delta)

    def excess(log_mu):
        return _log_gdp_delta(math.exp(log_mu), epsilon) - log_delta

    # The root lies in [lo, hi]: excess(lo) <= 0 <= excess(hi). Each loop
    # ends: excess is -inf once exp(lo) underflows to 0, and delta(mu) tends
    # to 1 > delta as mu grows (exp(hi) stays finite within the steps).
    lo, hi = math.log(1e-3), math.log(1.0)
    for _ in range(_STEPS):
        if not excess(lo) > 0:
            break
        lo, hi = lo - 2.0, lo
    else:
        raise ValueError(f"No mu > 0 gives ({epsilon!r}, {delta!r})-DP.")
    for _ in range(_STEPS):
        if not excess(hi) < 0:
            break
        lo, hi = hi, hi + 1.0
        if hi > 700.0:
            raise ValueError(f"No finite mu found for ({epsilon!r}, {delta!r})-DP.")
    mu = math.exp(_root_or_below(excess, lo, hi))

    def too_large(mu):
        return _log_gdp_delta(mu, epsilon) > log_delta or gdp_delta(mu, epsilon) > delta

    for _ in range(_STEPS):
        if not too_large(mu):
            return mu
        mu *= 1 - 1e-13
    raise ValueError(f"No mu > 0 gives ({epsilon!r}, {delta!r})-DP.")


def gdp_epsilon(mu, delta):
    """Smallest epsilon such that mu-GDP implies (epsilon, delta)-DP.

    The inverse of :func:`gdp_delta` in epsilon (which decreases in epsilon),
    solved in log space and rounded up so that the returned epsilon is valid.
    """
    mu = float(mu)
    delta = float(delta)
    if not 0 < delta <= 1:
        raise ValueError(f"delta must lie in (0, 1]; got {delta!r}.")
    if math.isnan(mu):
        raise ValueError("mu must be a number, not NaN.")
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    log_delta = math.log(delta)

    def too_small(eps):
        return _log_gdp_delta(mu, eps) > log_delta or gdp_delta(mu, eps) > delta

    if not too_small(0.0):
        return 0.0
    hi = max(1.0, mu)
    while too_small(hi):
        hi *= 2.0
        if math.isinf(hi):
            return math.inf
    eps = _root_or_below(lambda e: _log_gdp_delta(mu, e) - log_delta, 0.0, hi)
    for _ in range(_STEPS):
        if not too_small(eps):
            return eps
        eps = max(eps * (1 + 1e-13), 5e-324)
    return hi
