"""Gaussian DP <-> (epsilon, delta); re-exported by :mod:`skprivreg.accounting`."""

import functools
import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import erfcx, log_ndtr

__all__ = ["gdp_delta", "gdp_mu", "gdp_epsilon"]


def gdp_delta(mu, epsilon):
    """Smallest delta such that mu-GDP implies (epsilon, delta)-DP.

    .. math::
        \\delta = \\Phi(-\\varepsilon/\\mu + \\mu/2)
            - e^{\\varepsilon}\\Phi(-\\varepsilon/\\mu - \\mu/2)

    computed in log space (Dong, Roth & Su 2022, Corollary 2.13; Balle &
    Wang 2018, Theorem 8, for the analytic Gaussian mechanism). The value is
    rounded up by a bound on its round-off, so it is not below the exact
    delta. Where the two terms cancel (their ratio is within 1e-3 of 1, e.g.
    small epsilon and smaller mu), delta is computed without the
    subtraction, as an upper bound within ~1e-10 relative of the exact value.
    Below the smallest normal float (~2.2e-308) the value is rounded up to
    the next float, so a positive delta too small for any float is returned
    as the smallest one, 5e-324.

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
    if math.isnan(mu) or math.isnan(epsilon):
        return math.nan
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    if math.isinf(epsilon):
        return 0.0
    log_a, diff, slack = _log_terms(mu, epsilon)
    if diff <= _DIRECT_MAX:
        delta = min(1.0, float(math.exp(log_a) * -math.expm1(diff) * (1 + slack)))
    else:
        delta = float(math.exp(_log_delta_bound(mu, epsilon)))
    if delta < _TINY:
        delta = float_at_least(_log_gdp_delta(mu, epsilon))
    return delta


def float_at_least(log_value):
    """``exp(log_value)`` as a float, never below it in the subnormal range.

    Below the normal range floats are spaced 2**-1074 apart, so rounding to
    a float is no longer within a relative bound: the value is stepped up
    to the next float unless its log is already at or above ``log_value``
    (the log of a float is within ~2e-13 of exact there, ``|log| < 745``).
    A positive value too small for any float gives the smallest one, 5e-324;
    ``-inf`` gives 0.
    """
    if log_value == -math.inf:
        return 0.0
    value = math.exp(log_value)
    if value < _TINY and not (value > 0 and math.log(value) >= log_value + 1e-12):
        value = math.nextafter(value, math.inf)
    return value


# The direct formula delta = A - B = A (1 - B / A) is used while
# log(B / A) <= _DIRECT_MAX: there its round-off (a few units in the last place
# of log A and log B, up to ~1e-13 absolute) is at most ~1e-9 of delta, and
# delta is rounded up by a bound on it. Closer to 0, A and B cancel, and delta
# comes from a cancellation-free upper bound instead.
_DIRECT_MAX = -1e-3
_TINY = 2.2250738585072014e-308  # the smallest positive normal float
_ULPS = 8 * 2.0**-53
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_SQRT_PI_2 = math.sqrt(math.pi / 2)
# Margin added to the upper bound in log space; it covers the round-off of
# the bound, so that the bound stays above the exact delta. The round-off is
# below ~1e-12 wherever delta is above the smallest float; far in the tail it
# is dominated by that of x^2 / 2 (x = epsilon/mu - mu/2, rounded itself),
# a few units in the last place of log delta, hence the relative part.
_BOUND_MARGIN = 1e-10
_BOUND_REL_MARGIN = 8 * 2.0**-52
_CF_FROM = 4.0
_CF_TERMS = 60


def _argument_error(mu, epsilon):
    """A bound on the rounding error of ``-epsilon/mu +- mu/2`` (and of
    ``epsilon/mu - mu/2``): the quotient and the sum each round once, by at
    most half a unit in the last place of their magnitude, so the error is at
    most ``3 u (|epsilon/mu| + mu/2)`` with ``u = 2**-53`` (one more unit for
    a halving that rounds in the subnormal range). Where the two terms cancel
    (``epsilon`` near ``mu^2/2``) it is large against the argument itself:
    at ``mu = 3e8`` it moved ``log delta`` by about 1e-7.
    Works elementwise on arrays.
    """
    return 3 * 2.0**-53 * (abs(epsilon / mu) + mu / 2)


def _log_ndtr_slope_bound(x, err):
    """A bound on ``|d/dx log Phi(x)|`` over ``[x - err, x + err]``: ``phi/Phi``
    is at most ``|x| + 1`` for ``x < 0`` (Birnbaum's bound on the Mills ratio)
    and at most ``phi(0)/Phi(0) < 1`` for ``x >= 0``. Elementwise."""
    return abs(x) + err + 1


def _log_terms(mu, epsilon):
    """``log A``, ``log(B / A)`` and a bound on the relative round-off of
    ``A (1 - B / A)`` for ``delta = A - B``, where
    ``A = Phi(-epsilon/mu + mu/2)`` and ``B = e^epsilon Phi(-epsilon/mu - mu/2)``.
    """
    a, b = -epsilon / mu + mu / 2, -epsilon / mu - mu / 2
    log_a = float(log_ndtr(a))
    log_phi_b = float(log_ndtr(b))
    diff = epsilon + log_phi_b - log_a
    if log_a == -math.inf:  # A underflowed in log space: delta is 0 in range
        return log_a, -math.inf, 0.0
    if not diff <= _DIRECT_MAX:
        return log_a, diff, math.inf
    # Round-off of log A and of log(B / A), the latter amplified by the
    # derivative of log(1 - e^diff), 1 / (e^-diff - 1). (B = 0 has none.)
    # Each log carries the rounding of its argument times its slope.
    arg = _argument_error(mu, epsilon)
    err_a = arg * _log_ndtr_slope_bound(a, arg)
    slack = _ULPS * (abs(log_a) + 1) + err_a
    if math.isfinite(log_phi_b):
        err_diff = (_ULPS * (abs(log_a) + abs(log_phi_b) + epsilon + 1)
                    + err_a + arg * _log_ndtr_slope_bound(b, arg))
        # 1 / (e^-diff - 1) = e^diff / (1 - e^diff): no overflow at diff << 0
        slack += err_diff * math.exp(diff) / -math.expm1(diff)
    return log_a, diff, slack


def _log_delta_bound(mu, epsilon):
    """:func:`_log_delta_bound_array` of one ``mu`` and ``epsilon``."""
    return float(_log_delta_bound_array(np.array([float(mu)]), np.array([float(epsilon)]))[0])


def _log_gdp_delta(mu, epsilon):
    """``log gdp_delta(mu, epsilon)``, ``-inf`` when delta is 0.

    Never below the exact value: the direct formula is rounded up by a bound
    on its round-off, and where it cancels :func:`_log_delta_bound_array` is
    used (one computation with :func:`_log_gdp_delta_array`).

    Finite for deltas far below the smallest positive float, where
    :func:`gdp_delta` itself underflows to 0 or to an inexact subnormal.

    The direct formula is evaluated on Python floats (the calibrations call
    this a few dozen times per release; the array path costs ~0.1 ms per
    call); every other case goes through the array path.
    """
    mu, epsilon = float(mu), float(epsilon)
    if 0.0 < mu < math.inf and -math.inf < epsilon < math.inf:
        try:
            a, b = -epsilon / mu + mu / 2, -epsilon / mu - mu / 2
            log_a = float(log_ndtr(a))
            log_phi_b = float(log_ndtr(b))
            arg = _argument_error(mu, epsilon)
        except (OverflowError, ZeroDivisionError):
            pass
        else:
            if log_a == -math.inf:
                return -math.inf  # A underflowed in log space: delta is 0 in range
            diff = epsilon + log_phi_b - log_a
            if diff <= _DIRECT_MAX and math.isfinite(arg):
                # The array path's round-off bound (:func:`_log_terms`), elementwise.
                err_a = arg * _log_ndtr_slope_bound(a, arg)
                slack = _ULPS * (abs(log_a) + 1) + err_a
                if math.isfinite(log_phi_b):
                    err_diff = (_ULPS * (abs(log_a) + abs(log_phi_b) + epsilon + 1)
                                + err_a + arg * _log_ndtr_slope_bound(b, arg))
                    slack += err_diff * math.exp(diff) / -math.expm1(diff)
                return min(0.0, log_a + math.log(-math.expm1(diff)) + slack)
    return float(_log_gdp_delta_array(mu, epsilon))


def _log_slope_array(t):
    """``log(1 - t R(t))`` elementwise over a 1-d array ``t``, for the Mills
    ratio ``R(t) = Phi(-t) / phi(t)``.

    ``1 - t R(t) = -R'(t)`` is positive, decreasing and convex on the whole
    real line. Below ``_CF_FROM`` it is computed from ``erfcx`` (relative
    error below ~1e-14); from there on, where ``1 - t R(t)`` cancels, from
    Laplace's continued fraction ``1 - t R(t) = 1 / (1 + t s)`` with
    ``s = t + 2 / (t + 3 / (t + 4 / ...))``, converged to the last place.
    """
    out = np.empty_like(t)
    neg = t < 0
    mid = (t >= 0) & (t < _CF_FROM)
    far = t >= _CF_FROM
    tn = t[neg]
    log_r = log_ndtr(-tn) + 0.5 * tn * tn + _LOG_SQRT_2PI
    out[neg] = np.logaddexp(0.0, np.log(-tn) + log_r)
    tm = t[mid]
    out[mid] = np.log1p(-tm * _SQRT_PI_2 * erfcx(tm / math.sqrt(2)))
    tf = t[far]
    s = tf.copy()
    for n in range(_CF_TERMS, 1, -1):  # s = t + n / s, in place
        np.divide(n, s, out=s)
        s += tf
    huge = tf > 1e100  # t * s would overflow; the 1 is negligible
    out[far] = np.where(huge, -(np.log(tf) + np.log(s)),
                        -np.log1p(np.where(huge, 0.0, tf * s)))
    return out


def _log_delta_bound_array(mu, epsilon):
    """An upper bound on ``log gdp_delta(mu, epsilon)`` (1-d arrays of positive
    finite ``mu`` and finite ``epsilon``), free of cancellation
    and within ~1e-10 of it where the direct formula cancels.

    With ``x = epsilon/mu - mu/2`` and the Mills ratio ``R``, the identity
    ``e^epsilon phi(x + mu) = phi(x)`` gives

    .. math::
        \\delta = \\phi(x)\\,(R(x) - R(x + \\mu))
            = \\phi(x) \\int_x^{x+\\mu} (1 - tR(t))\\,dt.

    The integrand ``-R'(t) = int_0^inf u exp(-tu - u^2/2) du`` has a positive
    fourth derivative, so Simpson's rule overestimates the integral (its
    error term is ``-(mu/2)^5/90`` times that derivative). When the direct
    formula cancels, mu is small against the scale on which the integrand
    varies, and the rule is accurate far beyond float precision.

    ``x`` and the rule's points are rounded: the bound adds their rounding
    times a bound on the value's slope in ``x``. With ``g(t) = 1 - tR(t)``
    (positive, decreasing and convex), ``g(x) - g(x + mu) <= mu |g'(x)|`` and
    the integral is at least ``mu g(x + mu)``, so the slope of
    ``log int_x^{x+mu} g`` is at most ``|g'(x)/g(x)| g(x)/g(x + mu)``; the
    ratio comes from the rule's own values of ``log g``, and
    ``|g'/g| = |t - R/g| <= 2 + max(0, -t)`` (``sqrt(pi/2)`` at ``t = 0``,
    tending to 0 as ``t`` grows and to ``|t|`` as it falls; checked with
    60-digit arithmetic on a fine grid: at most 1.2534 for ``t >= 0`` and
    ``|t| + 1.242`` below). The slope of ``-x^2/2`` is ``|x|``.
    """
    x = epsilon / mu - mu / 2
    out = np.where(x > 0, -math.inf, 0.0)  # |x| > 1e150: delta is 0 in range, or at most 1
    keep = np.abs(x) <= 1e150
    arg = _argument_error(mu[keep], epsilon[keep])
    x, mu = x[keep], mu[keep]
    logs = np.split(_log_slope_array(np.concatenate([x, x + mu / 2, x + mu])), 3)
    # g(x) / g(x + mu), with a relative margin for the rounding of the logs
    ratio = np.exp(np.minimum(logs[0] - logs[2], 700.0)) * (1 + 1e-6)
    rounding = (arg + 2 * 2.0**-53 * (np.abs(x) + mu)) * (
        np.abs(x) + arg + (2 + np.maximum(0.0, -x) + arg) * ratio)
    top = np.maximum(np.maximum(logs[0], logs[1]), logs[2])
    mean = (np.exp(logs[0] - top) + 4.0 * np.exp(logs[1] - top) + np.exp(logs[2] - top)) / 6.0
    log_phi = -0.5 * x * x - _LOG_SQRT_2PI
    value = log_phi + np.log(mu) + top + np.log(mean)
    # delta <= 1 (a rounding margin that large leaves no information)
    out[keep] = np.minimum(
        0.0, value + (_BOUND_MARGIN + _BOUND_REL_MARGIN * np.abs(value)) + rounding)
    return out


def _log_gdp_delta_array(mu, epsilon):
    """:func:`_log_gdp_delta` elementwise over broadcast arrays ``mu`` and
    ``epsilon``: the same computation, in numpy, and equally never below the
    exact value.

    Returns an array of the broadcast shape (0-d for scalar inputs).
    """
    mu, epsilon = np.broadcast_arrays(np.asarray(mu, dtype=np.float64),
                                      np.asarray(epsilon, dtype=np.float64))
    if np.isnan(mu).any() or np.isnan(epsilon).any():
        raise ValueError("mu and epsilon must be numbers, not NaN.")
    out = np.full(mu.shape, -math.inf)
    out[np.isinf(mu) & (mu > 0) & np.isfinite(epsilon)] = 0.0
    todo = (mu > 0) & np.isfinite(mu) & np.isfinite(epsilon)
    m, e = (mu.ravel(), epsilon.ravel()) if todo.all() else (mu[todo], epsilon[todo])
    res = np.full(m.shape, -math.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        a, b = -e / m + m / 2, -e / m - m / 2
        log_a = log_ndtr(a)
        log_phi_b = log_ndtr(b)
        arg = _argument_error(m, e)
        diff = e + log_phi_b - log_a
        alive = log_a > -math.inf  # else A underflowed in log space: delta is 0 in range
        direct = alive & (diff <= _DIRECT_MAX) & np.isfinite(arg)
        la, d, lb, ed = log_a[direct], diff[direct], log_phi_b[direct], e[direct]
        ar = arg[direct]
        # The round-off bound of _log_terms.
        err_a = ar * _log_ndtr_slope_bound(a[direct], ar)
        slack = _ULPS * (np.abs(la) + 1) + err_a
        err_diff = (_ULPS * (np.abs(la) + np.abs(lb) + ed + 1)
                    + err_a + ar * _log_ndtr_slope_bound(b[direct], ar))
        slack = slack + np.where(np.isfinite(lb),
                                 err_diff * np.exp(d) / -np.expm1(d), 0.0)
        res[direct] = np.minimum(0.0, la + np.log(-np.expm1(d)) + slack)
        bound = alive & ~direct
        if bound.any():
            res[bound] = _log_delta_bound_array(m[bound], e[bound])
    out[todo] = res
    return out


_STEPS = 2000


def _root_or_below(f, lo, hi):
    """A root of the increasing or decreasing ``f`` between ``lo`` and ``hi``.

    Given ``f(lo)`` and ``f(hi)`` of opposite signs, either possibly
    infinite (delta 0 in log space): bisection moves an infinite end inward
    until ``f`` is finite at both ends, then Brent's method solves. If no
    finite bracket with a sign change is found, returns the end where
    ``f <= 0`` (else ``hi``).
    """
    f_lo, f_hi = f(lo), f(hi)
    for _ in range(_STEPS):
        if math.isfinite(f_lo) and math.isfinite(f_hi):
            if (f_lo > 0) == (f_hi > 0) or 0.0 in (f_lo, f_hi):
                # No sign change left (round-off at extreme arguments): an end;
                # the callers then step to the valid side.
                break
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


def _float_boundary(valid, x, factor):
    """The valid float next to an invalid one, from ``x`` near the boundary.

    ``valid`` holds on the side that multiplying by ``factor`` moves to. Steps
    from ``x`` by ``factor`` until ``valid`` holds (``None`` if it never does),
    then bisects between that float and the last invalid one (or one step
    back, when ``x`` was valid) down to adjacent floats: the result is valid,
    and within an ulp of the boundary of ``valid`` where ``valid`` changes
    once there.
    """
    bad = None
    for _ in range(_STEPS):
        if valid(x):
            break
        bad, x = x, x * factor
    else:
        return None
    if bad is None:
        bad = x / factor
        if valid(bad):
            return x  # not at the boundary (the solver's root was inside): keep it
    while True:
        mid = x + (bad - x) / 2
        if mid in (x, bad):
            return x
        if valid(mid):
            x = mid
        else:
            bad = mid


def gdp_mu(epsilon, delta):
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP.

    Solves :math:`\\log\\delta(\\varepsilon; \\mu) = \\log\\delta` for
    :math:`\\log\\mu` (the left side increases with :math:`\\mu`) with Brent's
    method on an expanding bracket, then moves to the largest float at
    which the inequality holds (bisecting between floats): calibrating
    ``sigma = sensitivity / mu`` is never too small, and ``gdp_epsilon`` of
    the result gives back at most ``epsilon`` (a few ulps lower when the
    conversion back needs it). Working in log space keeps
    every positive delta in range, down to the smallest subnormal float.

    Reference values: ``gdp_mu(1, 1e-5) = 0.268051`` and
    ``gdp_mu(5, 1/5008**2) = 0.914623``.

    Results are cached: a function of two public numbers, and fits call it
    several times with the same budget.
    """
    return _gdp_mu(float(epsilon), float(delta))


@functools.lru_cache(maxsize=4096)
def _gdp_mu(epsilon, delta):
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

    def valid(mu):
        return not (_log_gdp_delta(mu, epsilon) > log_delta or gdp_delta(mu, epsilon) > delta)

    mu = _float_boundary(valid, mu, 1.0 - 1e-13)
    if mu is None:
        raise ValueError(f"No mu > 0 gives ({epsilon!r}, {delta!r})-DP.")
    # The conversion back evaluates the same bound with its own round-off:
    # step down until it gives at most epsilon too. (It is not monotone in
    # mu in the last ulps; a ledger told the planned epsilon reports at most
    # it for any mu up to this one, see PrivacyLedger.)
    for j in range(40):  # steps of 2^-52 up to 2^-13 relative
        if _gdp_epsilon(mu, delta) <= epsilon:
            return mu
        mu *= 1.0 - 2.0 ** (j - 52)
    raise ValueError(f"No mu > 0 gives ({epsilon!r}, {delta!r})-DP.")


def gdp_epsilon(mu, delta):
    """Smallest epsilon such that mu-GDP implies (epsilon, delta)-DP.

    The inverse of :func:`gdp_delta` in epsilon (which decreases in epsilon),
    solved in log space, then moved to the smallest float at which the
    conversion holds (bisecting between floats): the returned epsilon is
    valid, and not 1e-13 above the exact one as a fixed step would leave it.

    Results are cached: a function of two public numbers, and fits call it
    several times with the same budget.
    """
    return _gdp_epsilon(float(mu), float(delta))


@functools.lru_cache(maxsize=4096)
def _gdp_epsilon(mu, delta):
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
    # Solved for epsilon / mu, which is of order 1 at the root even when mu
    # is tiny, so that the tolerance of the solver is relative to epsilon.
    # delta <= Phi(-epsilon/mu + mu/2) and Phi(-t) < exp(-t^2 / 2) for t >= 0,
    # so epsilon/mu = mu/2 + sqrt(-2 log delta) (+ 10, for the round-off of
    # the bound) is large enough: a bracket of that size keeps the solver's
    # iterations few even where hi / mu is astronomically large.
    s_hi = min(hi / mu, mu / 2 + math.sqrt(-2.0 * log_delta) + 10.0)
    if math.isfinite(s_hi):
        s = _root_or_below(lambda s: _log_gdp_delta(mu, mu * s) - log_delta, 0.0, s_hi)
        eps = mu * s
    else:
        eps = _root_or_below(lambda e: _log_gdp_delta(mu, e) - log_delta, 0.0, hi)
    eps = _float_boundary(lambda e: not too_small(e), max(eps, 5e-324), 1.0 + 1e-13)
    return hi if eps is None else eps
