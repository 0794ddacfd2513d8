"""Exact privacy accountant of noisy weighted LLP (pure accounting).

Bags and weights are released; given them, a bag's aggregate is a Gaussian
mechanism with a random sensitivity ratio: Student-t for a target outside
the noise set, ``sqrt(Beta(1/2, q/2))`` for a target inside it. The
expectation over that ratio of the tight Gaussian profile is bounded from
above (:func:`llp_privacy_profile`). Everything here is a function of public
quantities only.
"""

import math

import numpy as np
from scipy import special

from .._gdp import _log_gdp_delta_array, float_at_least
from ..mechanisms import quotient_at_least

__all__ = ["llp_log_privacy_profile", "llp_privacy_profile", "llp_min_bag_size"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_U = 2.0**-53  # unit round-off


# ---------------------------------------------------------------------------
# Noisy weighted LLP: expectation of the Gaussian profile over a random ratio
# ---------------------------------------------------------------------------
def _log_gdp_delta(mu, epsilon):
    """Vectorised log of ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``,
    never below the exact value (``-inf`` where ``mu <= 0``).

    The two terms cancel when mu and epsilon are small; this is the
    computation of :func:`skprivreg.accounting.gdp_delta`, which bounds its
    round-off and avoids the subtraction there.
    """
    return _log_gdp_delta_array(mu, epsilon)


# Both ratio laws are functions of one variable: with Y ~ Beta(1/2, q/2) and
# z = logit(Y), T^2 / (q + T^2) ~ Beta(1/2, q/2) for T ~ Student-t_q, so the
# ratio is mu = (Delta/sigma_g) e^{z/2} outside the noise set and
# mu = (Delta/sigma_g) sqrt(expit(z)) inside it. _log_expectation bounds the
# integral of F(z) = delta_G(eps; mu(z)) f(z), f the density of z.
_LLP_SCAN = 512  # cells of the scan that locates where F matters
_LLP_FIRST = 256  # cells of the first pass over that region
_LLP_TOL = 1e-7  # relative excess of the bound the refinement aims at
_LLP_MAX_CELLS = 40_000
_LLP_DROP = 60.0  # nats below the largest node value left to the scan's cells
_BETAINC_REL = 1e-12  # assumed relative accuracy of scipy.special.betainc
_LLP_SUM_MARGIN = 1e-10  # added to the log of the sum of the cell bounds


def _log_expm1_ratio(x):
    """``log((e^x - 1) / x)`` elementwise over a 1-d array (0 at ``x = 0``)."""
    out = np.zeros_like(x)
    pos, neg = x > 0, x < 0
    xp, xn = np.minimum(x[pos], 1e300), x[neg]
    out[pos] = xp + np.log(-np.expm1(-xp)) - np.log(xp)
    out[neg] = np.log(-np.expm1(xn)) - np.log(-xn)
    return out


class _RatioIntegrand:
    """``F(z) = delta_G(eps; mu(z)) f(z)`` of :func:`_log_expectation`."""

    def __init__(self, epsilon, ratio, q, inside):
        self.epsilon = epsilon
        self.q = q
        self.inside = inside
        self.log_ratio = math.log(ratio)
        self.log_norm = float(special.betaln(0.5, 0.5 * q))

    def parts(self, z):
        """``(log_y, log_1my, log_mu, mu, log_g, log_f)`` at the points ``z``, with
        ``log_g`` and ``log_f`` rounded up."""
        log_y = special.log_expit(z)
        log_1my = special.log_expit(-z)
        log_mu = self.log_ratio + (0.5 * log_y if self.inside else 0.5 * z)
        mu = np.exp(log_mu)
        # mu is within (2 |log mu| + |log ratio| + 4) u of the exact value, relative;
        # delta_G increases in mu, so it is evaluated at mu rounded up by more.
        mu_up = mu * (1.0 + 4.0 * _U * (np.abs(log_mu) + abs(self.log_ratio) + 8.0))
        log_g = _log_gdp_delta(mu_up, self.epsilon)
        log_f = 0.5 * log_y + 0.5 * self.q * log_1my - self.log_norm
        log_f = log_f + 64.0 * _U * (np.abs(log_f) + abs(self.log_norm) + 1.0)
        return log_y, log_1my, log_mu, mu, log_g, log_f

    def __call__(self, z):
        """Upper bounds on ``log F`` at the points ``z``."""
        *_, log_g, log_f = self.parts(z)
        return log_g + log_f

    def with_slope(self, z):
        """``(log F, s, err)``: upper bounds on ``log F``, the derivative ``s`` of
        ``log F`` and a bound ``err`` on the error of ``s``."""
        log_y, log_1my, log_mu, mu, log_g, log_f = self.parts(z)
        q = self.q
        y, ym = np.exp(log_y), np.exp(log_1my)
        # d/dz log f = (1 - y)/2 - q y/2, and d/dz log delta_G(eps; mu(z)) =
        # phi(eps/mu - mu/2) mu dlog(mu)/dz / delta_G (d delta_G / d mu is
        # phi(eps/mu - mu/2)), with dlog(mu)/dz = 1/2 outside, (1 - y)/2 inside.
        slope_f = 0.5 * ym - 0.5 * q * y
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            x = self.epsilon / mu - 0.5 * mu
            log_dmu = np.log(0.5 * ym) if self.inside else math.log(0.5)
            slope_g = np.exp(-0.5 * x * x - _LOG_SQRT_2PI - log_g + log_mu + log_dmu)
        # log_g exceeds the exact log profile by at most ~1e-9 (and ~1e-15 |log_g|
        # far in the tail); the other factors are rounded a few times.
        err = (1e-7 + 1e-13 * np.abs(log_g)) * slope_g + 1e-12 * (0.5 * ym + 0.5 * q * y)
        return log_g + log_f, slope_g + slope_f, err


def _log_tangent_cells(integrand, za, zb):
    """Upper bounds on ``log int_za^zb F(z) dz`` for the cells ``[za, zb]``, and
    the slopes of ``log F`` at their midpoints.

    ``log F`` is concave, so ``F(z) <= F(m) exp(s (z - m))`` with ``s`` its
    derivative at the midpoint ``m``: the slope's upper error bound is used
    right of ``m``, its lower one left of it, and the exponential is
    integrated exactly.
    """
    zm = 0.5 * (za + zb)
    value, s, err = integrand.with_slope(zm)
    right = (zb - zm) * (1.0 + 4.0 * _U)
    left = (zm - za) * (1.0 + 4.0 * _U)
    finite = np.isfinite(s) & np.isfinite(value)
    s_hi = np.where(finite, s + err, 0.0)
    s_lo = np.where(finite, s - err, 0.0)
    with np.errstate(divide="ignore"):
        span = np.logaddexp(np.log(right) + _log_expm1_ratio(s_hi * right),
                            np.log(left) + _log_expm1_ratio(-s_lo * left))
    # log F(m) = -inf (a profile below ~exp(-1e300), which _log_gdp_delta
    # returns as 0) counts the cell as empty; an infinite slope with F(m) > 0
    # gives no bound from the tangent (an infinite one).
    out = np.where(finite, value + span, np.where(value == -np.inf, -np.inf, np.inf))
    return out, np.where(finite, s, np.nan)


def _log_tails(integrand, z0, z1, log_g_sup):
    """Upper bounds on the log integrals of F over ``(-inf, z0]`` and ``[z1, inf)``.

    Each is the smaller of two bounds: the integral of a tangent of ``log F``
    (when its slope points the right way), and the supremum of the profile
    there (``delta_G`` at ``z0``, ``log_g_sup`` above ``z1``) times the
    probability of the tail (:func:`scipy.special.betainc`; where the upper
    one underflows, the tangent bound of the log-concave density of ``z``).
    """
    q = integrand.q
    value, s, err = integrand.with_slope(np.array([z0, z1]))
    log_g0 = float(integrand.parts(np.array([z0]))[4][0])
    first, last = [], []
    if np.isfinite(value[0]) and s[0] - err[0] > 0:
        first.append(float(value[0] - math.log(s[0] - err[0])))
    if np.isfinite(value[1]) and s[1] + err[1] < 0:
        last.append(float(value[1] - math.log(-(s[1] + err[1]))))
    low = float(special.betainc(0.5, 0.5 * q, special.expit(z0)))
    if low > 1e-300 or log_g0 == -math.inf:
        first.append(log_g0 + math.log(low) + _BETAINC_REL if low > 0 else -math.inf)
    high = float(special.betainc(0.5 * q, 0.5, special.expit(-z1)))
    if high > 1e-300:
        last.append(log_g_sup + math.log(high) + _BETAINC_REL)
    else:
        log_f1 = float(integrand.parts(np.array([z1]))[5][0])
        y = float(special.expit(z1))
        slope_f = 0.5 * (1.0 - y) - 0.5 * q * y
        if slope_f < 0:
            last.append(log_g_sup + log_f1 - math.log(-slope_f * (1.0 - 1e-12)))
    return min(first, default=0.0), min(last, default=0.0)


def _log_expectation(epsilon, ratio, q, inside):
    """Upper bound on ``log E[delta_G(eps; mu)]`` for the ratio law of ``q >= 1``
    noisy mates: ``mu = ratio |T| / sqrt(q)``, ``T ~ Student-t_q`` (outside) or
    ``mu = ratio sqrt(B)``, ``B ~ Beta(1/2, q/2)`` (inside).

    The expectation is the integral over ``z = logit(B)`` (outside: ``B = T^2 /
    (q + T^2)``, so ``mu = ratio e^{z/2}``; inside ``mu = ratio expit(z)^{1/2}``)
    of ``F(z) = delta_G(eps; mu(z)) f(z)``, where ``f(z) = y^{1/2} (1 - y)^{q/2}
    / B(1/2, q/2)``, ``y = expit(z)``, is the density of ``z``. ``F`` is
    log-concave in ``z``:

    - ``log f`` is concave (a sum of ``log expit(z)`` and ``log expit(-z)``);
    - ``delta_G(eps; mu)`` is ``int_0^mu phi(eps/m - m/2) dm`` (its derivative in
      ``mu`` is ``phi(eps/mu - mu/2) > 0``, and it is 0 at ``mu = 0`` for
      ``eps >= 0``), so ``delta_G(eps; e^s) = int_{-inf}^s k(r) dr`` with
      ``log k(r) = r - (eps e^{-r} - e^r/2)^2 / 2 + const``, whose second
      derivative ``-2 eps^2 e^{-2r} - e^{2r}/2`` is negative. The integral of a
      log-concave function over a half-line is log-concave, so
      ``s -> log delta_G(eps; e^s)`` is concave and increasing; ``log mu`` is
      affine in ``z`` outside and concave increasing inside, so
      ``log delta_G(eps; mu(z))`` is concave in ``z``.

    Hence on any cell ``F`` lies below the exponential of a tangent of
    ``log F`` (:func:`_log_tangent_cells`). A scan over a wide range of ``z``
    locates the nodes within ``_LLP_DROP`` nats of the largest. ``F`` is
    unimodal, and its mode lies between the first nodes below that level on
    either side (the node values exceed ``F`` by far less than a factor
    ``e^60``), so on the scan's cells beyond them ``F`` is monotone, below
    its larger end value. The region between them is cut into cells,
    refined where the tangent bound's excess (about ``F |(log F)''| h^3 / 24``
    for a cell of width ``h``) is largest, and the two tails beyond the
    scanned range are bounded by :func:`_log_tails`. The values of
    ``delta_G`` are upper bounds (:func:`_log_gdp_delta`) and every bound
    above increases with them; the sum of the cell bounds is rounded up.
    """
    if math.isinf(epsilon):
        return -math.inf
    integrand = _RatioIntegrand(epsilon, ratio, q, inside)
    # delta_G(eps; mu) >= 1 - 2e-23 for mu >= mu_big (eps/mu - mu/2 <= -10).
    mu_big = 10.0 + math.sqrt(100.0 + 2.0 * epsilon)
    log_ratio = math.log(ratio)
    mode_f = -math.log(q) if q > 1 else 0.0  # about the mode of f
    if inside:
        hi = 120.0 + 1600.0 / q  # 1 - y = e^{-hi}: mu = ratio to ~e^{-hi}
        if ratio > mu_big:
            log_y = 2.0 * (math.log(mu_big) - log_ratio)
            hi = min(hi, log_y - math.log(-math.expm1(log_y)))
        log_g_sup = float(_log_gdp_delta(ratio * (1.0 + 8.0 * _U), epsilon))
    else:
        hi = 2.0 * (math.log(mu_big) - log_ratio)
        log_g_sup = 0.0
    hi = max(hi, mode_f + 1.0)
    lo = min(-120.0 - math.log(q), hi - 10.0)

    # Scan: nodes within _LLP_DROP nats of the largest, and one more each side.
    nodes = np.linspace(lo, hi, _LLP_SCAN + 1)
    values = integrand(nodes)
    peak = int(np.argmax(values))
    if not np.isfinite(values[peak]):
        return -math.inf if values[peak] == -np.inf else 0.0
    keep = np.nonzero(values >= values[peak] - _LLP_DROP)[0]
    ia, ib = max(keep[0] - 1, 0), min(keep[-1] + 1, _LLP_SCAN)
    widths = np.diff(nodes)
    ends = np.maximum(values[:-1], values[1:])
    scan_cells = np.log(np.concatenate([widths[:ia], widths[ib:]])) + np.concatenate(
        [ends[:ia], ends[ib:]])

    # First pass over [nodes[ia], nodes[ib]], then each cell cut into n pieces
    # so that the estimated total excess is about _LLP_TOL of the sum.
    edges = np.linspace(nodes[ia], nodes[ib], _LLP_FIRST + 1)
    first, slopes = _log_tangent_cells(integrand, edges[:-1], edges[1:])
    h = np.diff(edges)
    change = np.abs(np.gradient(slopes)) if len(slopes) > 1 else np.zeros(1)
    top = np.max(first)
    if not np.isfinite(top):
        return float(top)
    weight = np.exp(first - top)
    excess = weight * np.minimum(np.where(np.isfinite(change), change, np.inf) * h / 24.0, 1.0)
    root = np.cbrt(excess)
    n = np.ceil(root * math.sqrt(root.sum() / (_LLP_TOL * weight.sum())))
    n = np.maximum(n, 1.0)
    if n.sum() > _LLP_MAX_CELLS:
        n = np.maximum(np.floor(n * (_LLP_MAX_CELLS / n.sum())), 1.0)
    n = n.astype(np.int64)
    pieces = [first[n == 1]]
    split = np.nonzero(n > 1)[0]
    if split.size:
        counts = n[split]
        cell = np.repeat(split, counts)
        parts = np.repeat(counts, counts)
        index = np.arange(cell.size) - np.repeat(np.cumsum(counts) - counts, counts)
        # piece i of a cell is [edge + h i/n, edge + h (i+1)/n]: the same
        # expression gives the end of one piece and the start of the next.
        starts = edges[cell] + h[cell] * (index / parts)
        stops = np.where(index + 1 == parts, edges[cell + 1],
                         edges[cell] + h[cell] * ((index + 1) / parts))
        pieces.append(_log_tangent_cells(integrand, starts, stops)[0])

    tails = _log_tails(integrand, lo, hi, log_g_sup)
    terms = np.concatenate(pieces + [scan_cells, np.array(tails)])
    return float(special.logsumexp(terms)) + _LLP_SUM_MARGIN


def _log_delta_inside(epsilon, ratio, q):
    """log E_B[delta_G(eps; ratio sqrt(B))], B ~ Beta(1/2, q/2) (target in the
    noise set), an upper bound (:func:`_log_expectation`)."""
    if q == 0:  # ratio (a quotient) rounded up: delta_G increases in mu
        return float(_log_gdp_delta(ratio * (1.0 + 8.0 * _U), epsilon))
    return _log_expectation(epsilon, ratio, q, inside=True)


def _log_delta_outside(epsilon, ratio, q):
    """log E_T[delta_G(eps; ratio |T| / sqrt(q))], T ~ Student-t_q (target
    outside the noise set), an upper bound (:func:`_log_expectation`)."""
    if q == 0:
        return 0.0
    return _log_expectation(epsilon, ratio, q, inside=False)


def _log_falling(top, count):
    """``[log(top (top - 1) ... (top - j + 1)) for j in 0..count]`` and a bound on their
    round-off: cumulative sums of ``log(top - i)`` (each log within an ulp, each of the
    ``count`` additions within an ulp of the partial sum)."""
    logs = np.log(float(top) - np.arange(count, dtype=np.float64))
    sums = np.concatenate([[0.0], np.cumsum(logs)])
    error = (count + 2) * _U * np.concatenate([[0.0], np.cumsum(np.abs(logs))])
    return sums, error


def _log_factorials(m):
    """``[log j! for j in 0..m]`` and a bound on their round-off (as :func:`_log_falling`)."""
    sums = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, m + 1, dtype=np.float64)))])
    return sums, (m + 2) * _U * sums


def _log_binomial_pmf(m, p):
    """``log Binomial(m, p)`` on ``0..m``, rounded up by its certified round-off."""
    q = np.arange(m + 1)
    falling, e_falling = _log_falling(m, m)  # log m!/(m-q)!
    factorial, e_factorial = _log_factorials(m)  # log q!
    log_p, log_1mp = math.log(p), math.log1p(-p)
    value = falling - factorial + q * log_p + (m - q) * log_1mp
    error = e_falling + e_factorial + 8 * _U * (
        falling + factorial + q * abs(log_p) + (m - q) * abs(log_1mp))
    return value + error


def _log_hypergeom_pmf(n_total, n_marked, m):
    """``log P(q marked among m draws without replacement from n_total with n_marked)`` on
    ``0..m``, rounded up by its certified round-off (``-inf`` where impossible).

    ``C(m, q) (K)_q (N-K)_{m-q} / (N)_m`` with falling factorials summed as logs:
    only ``m`` (the bag size) terms each, so the error stays near ``m^2`` ulps of
    ``log N`` however large ``N`` is (``scipy.stats.hypergeom.logpmf`` was off by up
    to 4e-7 in the log for ``N`` near 1e8).
    """
    q = np.arange(m + 1)
    marked, e_marked = _log_falling(n_marked, min(m, n_marked))
    other, e_other = _log_falling(n_total - n_marked, min(m, n_total - n_marked))
    total, e_total = _log_falling(n_total, m)
    fact, e_fact = _log_falling(m, m)
    factorial, e_factorial = _log_factorials(m)
    possible = (q <= n_marked) & (m - q <= n_total - n_marked)
    value = np.full(m + 1, -np.inf)
    a, b = q[possible], m - q[possible]
    value[possible] = (fact[a] - factorial[a] + marked[a] + other[b] - total[m])
    error = (e_fact[a] + e_factorial[a] + e_marked[a] + e_other[b] + e_total[m]
             + 8 * _U * (fact[a] + factorial[a] + marked[a] + other[b] + total[m]))
    value[possible] += error
    return value


def _q_distribution(bag_size, noise_fraction, n_samples, allocation, inside):
    """``(q_values, log_pmf, log_excluded_mass)`` of the number of noisy bag-mates.

    The log pmf is rounded up by its certified round-off, so the mixture over
    ``q`` stays an upper bound. ``None`` when no target of this side exists (a
    global noise set of no row, or of every row).
    """
    k = int(bag_size)
    if allocation == "per_bag":
        q0 = math.ceil(noise_fraction * k)
        q = q0 - 1 if inside else q0
        return np.array([q]), np.array([0.0]), -math.inf
    support = np.arange(k)
    if n_samples is None:
        log_pmf = _log_binomial_pmf(k - 1, noise_fraction) if 0 < noise_fraction < 1 else (
            np.where(support == (k - 1 if noise_fraction == 1 else 0), 0.0, -np.inf))
    else:
        n = int(n_samples)
        if k > n:
            raise ValueError(f"bag_size={k} exceeds n_samples={n}.")
        n_noisy = math.floor(noise_fraction * n)
        if (inside and n_noisy == 0) or (not inside and n_noisy == n):
            return None  # no target on this side
        log_pmf = _log_hypergeom_pmf(n - 1, n_noisy - 1 if inside else n_noisy, k - 1)
    if np.any(np.isnan(log_pmf)):
        raise ValueError("The law of the noisy bag-mates could not be computed.")
    keep = log_pmf > math.log(1e-60)
    excluded = log_pmf[~keep & np.isfinite(log_pmf)]
    log_excluded = float(special.logsumexp(excluded)) if excluded.size else -math.inf
    return support[keep], log_pmf[keep], log_excluded


def _log_llp_side(epsilon, bag_size, noise_fraction, ratio, n_samples, allocation, inside):
    law = _q_distribution(bag_size, noise_fraction, n_samples, allocation, inside)
    if law is None:
        return -math.inf
    qs, log_pmf, log_excluded = law
    side = _log_delta_inside if inside else _log_delta_outside
    terms = [lp + side(epsilon, ratio, int(q)) for q, lp in zip(qs, log_pmf)]
    # q values of negligible probability are bounded by delta <= 1 (conservative).
    terms.append(log_excluded)
    total = float(special.logsumexp(terms))
    if not math.isfinite(total):
        return total
    # logsumexp's own rounding: a few ulps per term, relative to the sum.
    return total + 8 * (len(terms) + 2) * _U * (1.0 + abs(total))


def llp_log_privacy_profile(
    epsilon,
    bag_size,
    noise_fraction,
    label_range,
    noise_scale=1.0,
    n_samples=None,
    allocation="per_bag",
):
    """Natural log of :func:`llp_privacy_profile`."""
    if allocation not in ("per_bag", "global"):
        raise ValueError("allocation must be 'per_bag' or 'global'.")
    if not 0 <= noise_fraction <= 1:
        raise ValueError("noise_fraction must lie in [0, 1].")
    if not noise_scale > 0 or not label_range > 0:
        raise ValueError("noise_scale and label_range must be > 0.")
    epsilon = float(epsilon)
    if not epsilon >= 0:
        raise ValueError("epsilon must be >= 0.")
    k = int(bag_size)
    if k < 1:
        raise ValueError("bag_size must be >= 1.")
    if noise_fraction == 0:
        return 0.0
    ratio = quotient_at_least(label_range, noise_scale)  # never rounded down
    args = (epsilon, k, noise_fraction, ratio, n_samples, allocation)
    logs = []
    per_bag_all_noisy = allocation == "per_bag" and math.ceil(noise_fraction * k) >= k
    if noise_fraction < 1 and not per_bag_all_noisy:
        logs.append(_log_llp_side(*args, inside=False))
    logs.append(_log_llp_side(*args, inside=True))
    return min(max(logs), 0.0)


def llp_privacy_profile(
    epsilon,
    bag_size,
    noise_fraction,
    label_range,
    noise_scale=1.0,
    n_samples=None,
    allocation="per_bag",
):
    """Exact delta of noisy weighted LLP at ``epsilon``.

    Given the released bags and weights, a bag's aggregate is
    ``N(sum_r w_r y_r, sigma_g^2 sum_{r in N} w_r^2)``; one label change by
    at most ``Delta`` shifts only the mean, so with the tight Gaussian profile
    :math:`\\delta_G(\\varepsilon;\\mu)` (:func:`skprivreg.accounting.gdp_delta`):

    - target outside the noise set with ``q`` noisy bag-mates:
      :math:`\\mu = (\\Delta/\\sigma_g)|T|/\\sqrt q`, ``T ~ Student-t_q``
      (``delta = 1`` when ``q = 0``);
    - target inside with ``q`` noisy mates:
      :math:`\\mu = (\\Delta/\\sigma_g)\\sqrt B`, ``B ~ Beta(1/2, q/2)``;

    and ``delta = max(E[delta_out], E[delta_in])`` over the law of ``q``:
    ``'per_bag'`` (exactly ``ceil(rho k)`` noisy members per bag) or
    ``'global'`` (a uniformly random ``floor(rho n)``-subset: hypergeometric,
    binomial when ``n_samples`` is None). q values of probability below
    1e-60 are counted with delta 1 (an upper bound).

    The value is a certified upper bound: never below the exact delta,
    round-off included, and about 1e-7 relative above it. Each expectation
    is an integral over ``z = logit(B)`` (outside, ``B = T^2 / (q + T^2)``,
    which is ``Beta(1/2, q/2)`` too) of ``F(z) = delta_G(eps; mu(z)) f(z)``,
    ``f`` the density of ``z``; ``mu`` increases in ``z``. The exact
    ``delta_G(eps; mu)`` increases in ``mu``: its derivative is
    ``phi(eps/mu - mu/2) > 0``. ``F`` is log-concave: ``log f`` is concave,
    and ``log delta_G(eps; e^s)`` is concave and increasing in ``s``
    (``delta_G`` is the integral from 0 of that derivative, which is
    log-concave in ``log mu``). These are facts about the exact profile; the
    values evaluated (:func:`skprivreg.accounting.gdp_delta`'s computation)
    are never below it, and every bound below increases with them.

    The line of ``z`` is cut into cells. On each cell of the region that
    matters, ``F`` lies below the exponential of its tangent at the midpoint
    (slope rounded outwards), integrated exactly; these cells are refined
    where that bound's excess is largest. Beyond that region ``F`` is
    monotone, and each cell is bounded by its width times the larger end
    value. The two infinite end cells are bounded by the supremum of
    ``delta_G`` there times the exact tail probability of ``z``
    (:func:`scipy.special.betainc`), or by the integral of a tangent when
    smaller. The sum is rounded up. The integration range follows the
    ratio, so that far tails (a tiny ``label_range / noise_scale`` with a
    Cauchy ratio, ``q = 1``) are integrated, not dropped.

    Parameters
    ----------
    epsilon : float > 0
    bag_size : int
    noise_fraction : float in [0, 1]
        rho; ``0`` gives delta = 1 (weighted LLP without noise is not private).
    label_range : float
        Delta = b - a.
    noise_scale : float
        sigma_g, the label noise standard deviation in label units.
    n_samples : int or None
        n for the ``'global'`` hypergeometric law; None means n -> infinity
        (the binomial law), which can be below the delta at a finite n (a
        noise set of ``floor(rho n)`` rows): pass the data's n for a
        guarantee. ``bag_size`` above ``n_samples`` raises ``ValueError``.
    allocation : {'per_bag', 'global'}

    Returns
    -------
    delta : float
    """
    log_delta = llp_log_privacy_profile(
        epsilon, bag_size, noise_fraction, label_range, noise_scale, n_samples, allocation
    )
    return _delta_from_log(log_delta)


def _delta_from_log(log_delta):
    """``exp(log_delta)``, never rounded down to 0 or below a subnormal's value."""
    return float_at_least(log_delta)


def llp_min_bag_size(
    epsilon,
    delta,
    noise_fraction,
    label_range,
    noise_scale=1.0,
    n_samples=None,
    allocation="per_bag",
    k_max=10**7,
):
    """Smallest bag size with ``llp_privacy_profile(...) <= delta`` (bisection on integer k).

    Returns ``inf`` when no ``k <= k_max`` is enough (with the ``'global'``
    law of ``n_samples`` rows, no ``k <= n_samples``).
    """
    if allocation == "global" and n_samples is not None:
        k_max = min(k_max, int(n_samples))

    def ok(k):
        if k > k_max:
            return False
        return (
            llp_privacy_profile(
                epsilon, k, noise_fraction, label_range, noise_scale, n_samples, allocation
            )
            <= delta
        )

    if ok(1):
        return 1
    hi = 2
    while not ok(hi):
        if hi >= k_max:
            return math.inf
        hi = min(2 * hi, k_max)
    lo = hi // 2
    if lo >= 1 and ok(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


