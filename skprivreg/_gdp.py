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


def gdp_mu(epsilon, delta):
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP.

    Solves :math:`\\delta(\\varepsilon; \\mu) = \\delta` for :math:`\\mu`
    (the left side increases with :math:`\\mu`) with Brent's method on an
    expanding bracket, then rounds down so that the returned mu satisfies the
    inequality: calibrating ``sigma = sensitivity / mu`` is never too small.

    Reference values: ``gdp_mu(1, 1e-5) = 0.268051`` and
    ``gdp_mu(5, 1/5008**2) = 0.914623``.
    """
    epsilon = float(epsilon)
    delta = float(delta)
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    if math.isinf(epsilon):
        return math.inf

    def excess(log_mu):
        return math.log(max(gdp_delta(math.exp(log_mu), epsilon), 1e-300)) - math.log(
            delta
        )

    lo, hi = math.log(1e-3), math.log(1.0)
    while excess(lo) > 0:
        lo -= 2.0
    while excess(hi) < 0:
        hi += 1.0
    log_mu = brentq(excess, lo, hi, xtol=1e-15, rtol=1e-14, maxiter=500)
    mu = math.exp(log_mu)
    while gdp_delta(mu, epsilon) > delta:
        mu *= 1 - 1e-13
    return mu


def gdp_epsilon(mu, delta):
    """Smallest epsilon such that mu-GDP implies (epsilon, delta)-DP.

    The inverse of :func:`gdp_delta` in epsilon (which decreases in epsilon),
    rounded up so that the returned epsilon is valid.
    """
    mu = float(mu)
    delta = float(delta)
    if not 0 < delta <= 1:
        raise ValueError("delta must lie in (0, 1].")
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
    eps = brentq(
        lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14, maxiter=500
    )
    while gdp_delta(mu, eps) > delta:
        eps *= 1 + 1e-13
    return eps
