"""Exact privacy accountants of weighted LBA and noisy weighted LLP (pure accounting).

Everything here is a function of public quantities only (epsilon, delta,
bag size, label range, declared variance floors); nothing touches data.

Weighted LBA
------------
For one bag with released design ``Z`` (k x p) and secret weights
``w ~ N(0, I_k)``, the feature aggregate ``Z^T w`` does not depend on the
labels, and given it the label aggregate is ``N(xbar^T beta_hat, RSS)``
(Brahmbhatt et al. 2023, eqs. 4-5). Changing one label by at most
``Delta`` moves the conditional standard deviation by at most
``Delta sqrt(1 - h_i)`` and the mean by ``t u`` with ``u ~ N(0, h_i)``. When
every bag has ``RSS >= s^2`` the worst case is the pure variance change
``N(0, 1)`` vs ``N(0, (1 - c)^2)`` with ``c = Delta / s``, whose privacy
profile has the closed form of :func:`lba_privacy_profile`.

Noisy weighted LLP
------------------
Bags and weights are released; given them, a bag's aggregate is a Gaussian
mechanism with a random sensitivity ratio: Student-t for a target outside
the noise set, ``sqrt(Beta(1/2, q/2))`` for a target inside it. The
expectation over that ratio of the tight Gaussian profile is computed in log
space on an adaptive grid (:func:`llp_privacy_profile`).
"""

import math

import numpy as np
from scipy import special, stats

from .._gdp import _log_gdp_delta_array, float_at_least
from ..mechanisms import ptr_calibration

__all__ = [
    "lba_privacy_profile",
    "lba_c_star",
    "lba_epsilon",
    "lba_min_bag_size",
    "lba_ptr_margin",
    "lba_ptr_bag_size",
    "lba_ptr_pass_probability",
    "llp_privacy_profile",
    "llp_min_bag_size",
    "delta_for",
    "bag_size_for",
]


_LOG2 = math.log(2.0)


# ---------------------------------------------------------------------------
# Weighted LBA: the closed-form per-bag privacy profile
# ---------------------------------------------------------------------------
def _log_sf(x):
    """log(1 - Phi(x)), accurate in the far tail."""
    return float(special.log_ndtr(-x))


def _log_diff(log_a, log_b):
    """log(exp(log_a) - exp(log_b)), or -inf when the difference is <= 0."""
    if not log_a > log_b:
        return -math.inf
    return log_a + math.log(-math.expm1(log_b - log_a))


def _log_delta_shrink(epsilon, lo):
    """HS_eps(N(0,1) || N(0, lo^2)), lo < 1: the larger-variance output is P (term A)."""
    a = math.sqrt(2.0 * (epsilon - math.log(lo)) / (lo**-2 - 1.0))
    return _LOG2 + _log_diff(_log_sf(a), epsilon + _log_sf(a / lo))


def _log_delta_grow(epsilon, hi):
    """HS_eps(N(0, hi^2) || N(0,1)), hi > 1 (term B)."""
    b = math.sqrt(2.0 * (epsilon + math.log(hi)) / (1.0 - hi**-2))
    return _LOG2 + _log_diff(_log_sf(b / hi), epsilon + _log_sf(b))


def _delta_shrink_reverse(epsilon, lo):
    """HS_eps(N(0, lo^2) || N(0,1)) (term C); non-zero only if -ln lo > eps."""
    if not -math.log(lo) > epsilon:
        return 0.0
    x1 = math.sqrt(2.0 * (-math.log(lo) - epsilon) / (lo**-2 - 1.0))
    return (2.0 * special.ndtr(x1 / lo) - 1.0) - math.exp(epsilon) * (
        2.0 * special.ndtr(x1) - 1.0
    )


def _delta_grow_reverse(epsilon, hi):
    """HS_eps(N(0,1) || N(0, hi^2)) (term D); non-zero only if ln hi > eps."""
    if not math.log(hi) > epsilon:
        return 0.0
    x3 = math.sqrt(2.0 * (math.log(hi) - epsilon) / (1.0 - hi**-2))
    return (2.0 * special.ndtr(x3) - 1.0) - math.exp(epsilon) * (
        2.0 * special.ndtr(x3 / hi) - 1.0
    )


def lba_log_privacy_profile(epsilon, c):
    """Natural log of :func:`lba_privacy_profile` (``-inf`` for 0)."""
    epsilon = float(epsilon)
    c = float(c)
    if not epsilon >= 0:
        raise ValueError("epsilon must be >= 0.")
    if not c >= 0:
        raise ValueError("c must be >= 0.")
    if c >= 1.0:
        return 0.0
    if c == 0.0 or math.isinf(epsilon):
        return -math.inf
    lo, hi = 1.0 - c, 1.0 + c
    logs = [_log_delta_shrink(epsilon, lo), _log_delta_grow(epsilon, hi)]
    for value in (_delta_shrink_reverse(epsilon, lo), _delta_grow_reverse(epsilon, hi)):
        if value > 0:
            logs.append(math.log(value))
    return min(max(logs), 0.0)


def lba_privacy_profile(epsilon, c):
    """Exact per-bag delta of weighted LBA at ``epsilon`` for ``c = Delta / s``.

    With ``lo = 1 - c`` and ``hi = 1 + c``:

    .. math::
        \\delta_{LBA}(\\varepsilon; c) = \\max(\\delta_A, \\delta_B, \\delta_C, \\delta_D),

    where :math:`\\delta_A = HS_\\varepsilon(N(0,1)\\|N(0,lo^2))`,
    :math:`\\delta_B = HS_\\varepsilon(N(0,hi^2)\\|N(0,1))`,
    :math:`\\delta_C = HS_\\varepsilon(N(0,lo^2)\\|N(0,1))` and
    :math:`\\delta_D = HS_\\varepsilon(N(0,1)\\|N(0,hi^2))`, each in closed form
    through the normal CDF (e.g.
    :math:`\\delta_A = 2\\bar\\Phi(a) - 2e^\\varepsilon\\bar\\Phi(a/lo)` with
    :math:`a = \\sqrt{2(\\varepsilon - \\ln lo)/(lo^{-2} - 1)}`), computed in log
    space with :func:`scipy.special.log_ndtr`. ``delta = 1`` for ``c >= 1``.

    Valid for every epsilon > 0 (the paper's lemmas assume epsilon < 1).
    Rule of thumb: ``delta ~ exp(-epsilon / (2c))`` up to polynomial factors.

    Parameters
    ----------
    epsilon : float >= 0
    c : float >= 0
        Label range over the per-bag residual floor: ``Delta / s`` where
        every bag has least-squares residual sum of squares ``>= s^2``.

    Returns
    -------
    delta : float in [0, 1]
    """
    return _delta_from_log(lba_log_privacy_profile(epsilon, c))


def lba_c_star(epsilon, delta):
    """Largest ``c`` with ``lba_privacy_profile(epsilon, c) <= delta``.

    Bisection on ``log c`` over ``[1e-8, 1 - 1e-12]`` (the profile increases
    in ``c``); the result always satisfies the inequality. Returns 0.0 when
    even ``c = 1e-8`` does not.
    """
    epsilon = float(epsilon)
    delta = float(delta)
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    if math.isinf(epsilon):
        return 1.0 - 1e-12
    log_target = math.log(delta)
    lo, hi = math.log(1e-8), math.log1p(-1e-12)
    if lba_log_privacy_profile(epsilon, math.exp(lo)) > log_target:
        return 0.0
    if lba_log_privacy_profile(epsilon, math.exp(hi)) <= log_target:
        return math.exp(hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if lba_log_privacy_profile(epsilon, math.exp(mid)) <= log_target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    c = math.exp(lo)
    # The comparison above is in log space; make the returned value satisfy
    # the inequality as callers check it.
    while c > 0 and lba_privacy_profile(epsilon, c) > delta:
        c *= 1.0 - 1e-12
    return c


def lba_epsilon(delta, c, epsilon_max=100.0):
    """Smallest epsilon in ``[0, epsilon_max]`` with ``lba_privacy_profile(epsilon, c) <= delta``.

    ``inf`` when even ``epsilon_max`` does not reach ``delta``.
    """
    delta = float(delta)
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    log_target = math.log(delta)
    if lba_log_privacy_profile(epsilon_max, c) > log_target:
        return math.inf
    if lba_log_privacy_profile(0.0, c) <= log_target:
        return 0.0
    lo, hi = 0.0, float(epsilon_max)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if lba_log_privacy_profile(mid, c) <= log_target:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    while lba_privacy_profile(hi, c) > delta:
        hi *= 1.0 + 1e-12
    return hi


def lba_ratio(label_range, residual_var_lower_bound, k):
    """``c = Delta / sqrt(alpha k)``, the ratio the LBA guarantee is calibrated to.

    When ``alpha k`` overflows (a huge label scale) it is computed as
    ``Delta / (sqrt(alpha) sqrt(k))``: the same ratio, where the direct
    formula gave 0 (every bag size passed, and the reported delta was that
    of ``c = 0``).
    """
    floor = residual_var_lower_bound * k
    if math.isfinite(floor):
        return label_range / math.sqrt(floor)
    return label_range / (math.sqrt(residual_var_lower_bound) * math.sqrt(k))


def _lba_bag_ok(epsilon, delta, label_range, residual_var_lower_bound, k):
    c = lba_ratio(label_range, residual_var_lower_bound, k)
    return lba_privacy_profile(epsilon, c) <= delta


def lba_min_bag_size(epsilon, delta, label_range, residual_var_lower_bound, n_columns=None):
    """Smallest bag size ``k`` of ``'declared'`` weighted LBA.

    With a public per-point residual-variance floor ``alpha`` (every bag has
    ``RSS_j >= alpha k``), ``k = ceil((r / c*)^2)`` with ``r = Delta/sqrt(alpha)``
    and ``c* = lba_c_star(epsilon, delta)``; the result is then moved so that
    ``k`` satisfies the accountant and ``k - 1`` does not (a bracket grown by
    doubling steps from that estimate, then bisection: the check is monotone
    in ``k``; unit steps took minutes for huge label ranges, where neighbouring
    ``k`` round to the same check). ``n_columns`` (p, intercept included) adds
    the requirement ``k >= 2p``.
    """
    if not label_range > 0 or not residual_var_lower_bound > 0:
        raise ValueError("label_range and residual_var_lower_bound must be > 0.")
    c_star = lba_c_star(epsilon, delta)
    if c_star <= 0:
        return math.inf
    args = (epsilon, delta, label_range, residual_var_lower_bound)
    ratio = label_range / (c_star * math.sqrt(residual_var_lower_bound))
    if not math.isfinite(ratio * ratio):
        return math.inf  # more rows per bag than a float counts: no feasible bag size
    k = max(1, math.ceil(ratio * ratio))
    # Bracket: ok(hi) holds and ok(lo) does not (lo = 0: no bag size below 1).
    step = 1
    if _lba_bag_ok(*args, k):
        hi, lo = k, k - 1
        while lo >= 1 and _lba_bag_ok(*args, lo):
            hi, step = lo, 2 * step
            lo = max(0, k - step)
    else:
        lo, hi = k, k + 1
        while not _lba_bag_ok(*args, hi):
            lo, step = hi, 2 * step
            hi = k + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _lba_bag_ok(*args, mid):
            hi = mid
        else:
            lo = mid
    k = hi
    if n_columns is not None:
        k = max(k, 2 * int(n_columns))
    return int(k)


def lba_ptr_margin(epsilon_test, delta_test, target_failure):
    """Margin (in units of the label range) the PTR needs to pass w.p. ``1 - beta``.

    The test of :mod:`skprivreg.label_dp` is the truncated-Laplace PTR of
    :func:`skprivreg.mechanisms.ptr_test` (sensitivity 1, ``epsilon_test``,
    ``delta_test``): it PASSes iff ``L >= A + Z`` with ``Z`` truncated
    Laplace on ``[-A, A]``, so it passes with probability ``>= 1 - beta`` iff
    ``L >= A + tau_beta``, both read from
    :func:`~skprivreg.mechanisms.ptr_calibration`.
    """
    cal_beta = ptr_calibration(1.0, epsilon_test, delta_test, fail_prob=target_failure)
    return cal_beta.half_width + cal_beta.tau


def lba_ptr_pass_probability(margin, epsilon_test, delta_test):
    """Probability that the private residual test PASSes at statistic ``L = margin``.

    The test (:func:`lba_ptr_margin`) PASSes iff :math:`L \\ge A + Z` with
    :math:`Z` Laplace of scale :math:`\\lambda = 1/\\varepsilon_{test}`
    truncated to :math:`[-A, A]` (:func:`~skprivreg.mechanisms.ptr_calibration`),
    so with :math:`z = L - A` and :math:`q = e^{-A/\\lambda}`

    .. math::
        P(\\text{PASS}) = F(z) = \\begin{cases}
        0 & z < -A,\\\\
        \\dfrac{e^{z/\\lambda} - q}{2(1 - q)} & -A \\le z \\le 0,\\\\
        1 - \\dfrac{e^{-z/\\lambda} - q}{2(1 - q)} & 0 < z \\le A,\\\\
        1 & z > A,
        \\end{cases}

    the distribution function of :math:`Z` (the inverse of the sampler
    :func:`~skprivreg.mechanisms.truncated_laplace`). A function of public
    quantities only; ``margin`` may be an array.
    """
    cal = ptr_calibration(1.0, epsilon_test, delta_test)
    lam, half = cal.scale, cal.half_width
    z = np.clip(np.asarray(margin, dtype=np.float64) - half, -half, half)
    q = math.exp(-half / lam)
    low = (np.exp(np.minimum(z, 0.0) / lam) - q) / (2.0 * (1.0 - q))
    high = 1.0 - (np.exp(-np.maximum(z, 0.0) / lam) - q) / (2.0 * (1.0 - q))
    prob = np.clip(np.where(z <= 0, low, high), 0.0, 1.0)
    return float(prob) if prob.ndim == 0 else prob


def lba_ptr_split(epsilon, delta, fraction=0.4):
    """``(eps_test, delta_test, eps_agg, delta_agg)`` of the ``'ptr'`` mode.

    ``eps_test = f epsilon``, ``eps_agg = (1 - f) epsilon``; delta is split in
    halves between the test and the aggregation.
    """
    eps_test = fraction * epsilon
    return eps_test, 0.5 * delta, epsilon - eps_test, 0.5 * delta


def lba_ptr_bag_size(
    epsilon,
    delta,
    label_range,
    expected_residual_var,
    n_columns,
    fraction=0.4,
    beta=0.05,
    safety=0.8,
    n_iter=3,
):
    """Bag size at which the ``'ptr'`` check passes with probability about ``1 - beta``.

    ``k = ceil((Delta^2 / alpha_exp) (1/c* + M)^2)`` with
    ``c* = lba_c_star(eps_agg, delta_agg)``, ``M = lba_ptr_margin(...)`` and
    ``alpha_exp = safety * expected_residual_var * (1 - p/k)`` (a public
    *utility guess*, not a privacy assumption), iterated ``n_iter`` times
    Also ``k >= 2p``.
    """
    eps_test, delta_test, eps_agg, delta_agg = lba_ptr_split(epsilon, delta, fraction)
    c_star = lba_c_star(eps_agg, delta_agg)
    if c_star <= 0:
        return math.inf
    margin = lba_ptr_margin(eps_test, delta_test, beta)
    factor = (1.0 / c_star + margin) ** 2 * label_range**2
    alpha_exp = safety * expected_residual_var
    k = math.ceil(factor / alpha_exp)
    for _ in range(n_iter):
        shrink = max(1.0 - n_columns / max(k, 1), 1e-3)
        k = math.ceil(factor / (alpha_exp * shrink))
    return int(max(k, 2 * n_columns))


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


def _log_integral(log_f, lo, hi, coarse=2001, fine=4001, drop=60.0):
    """log of the integral of exp(log_f) over [lo, hi], on an adaptive grid.

    A coarse grid locates where the integrand is within ``drop`` nats of its
    maximum; a fine trapezoid grid integrates there (the integrands here are
    smooth and unimodal in the chosen variables).
    """
    grid = np.linspace(lo, hi, coarse)
    values = log_f(grid)
    peak = np.max(values)
    if not np.isfinite(peak):
        return -math.inf
    keep = np.nonzero(values >= peak - drop)[0]
    step = grid[1] - grid[0]
    a = grid[max(keep[0] - 1, 0)] - step
    b = grid[min(keep[-1] + 1, coarse - 1)] + step
    a, b = max(a, lo), min(b, hi)
    fine_grid = np.linspace(a, b, fine)
    fine_values = log_f(fine_grid)
    peak = np.max(fine_values)
    weights = np.exp(fine_values - peak)
    integral = np.trapezoid(weights, fine_grid)
    return float(peak + math.log(integral)) if integral > 0 else -math.inf


def _log_delta_inside(epsilon, ratio, q):
    """log E_B[delta_G(eps; ratio sqrt(B))], B ~ Beta(1/2, q/2) (target in the noise set)."""
    if q == 0:
        return _log_gdp_delta(ratio, epsilon).item()
    log_beta = special.betaln(0.5, 0.5 * q)

    # b = expit(z): log b = log_expit(z), log(1 - b) = log_expit(-z), db = b(1-b) dz.
    def log_f(z):
        log_b = special.log_expit(z)
        log_1mb = special.log_expit(-z)
        mu = ratio * np.exp(0.5 * log_b)
        return _log_gdp_delta(mu, epsilon) + 0.5 * log_b + 0.5 * q * log_1mb - log_beta

    return _log_integral(log_f, -120.0, 120.0 + 1600.0 / max(q, 1))


def _log_delta_outside(epsilon, ratio, q):
    """log E_T[delta_G(eps; ratio |T| / sqrt(q))], T ~ Student-t_q (target outside)."""
    if q == 0:
        return 0.0
    scale = ratio / math.sqrt(q)
    dist = stats.t(q)

    # |T| = exp(u): density 2 f_t(e^u) e^u du.
    def log_f(u):
        t = np.exp(u)
        return _LOG2 + _log_gdp_delta(scale * t, epsilon) + dist.logpdf(t) + u

    return _log_integral(log_f, -60.0, 60.0)


def _q_distribution(bag_size, noise_fraction, n_samples, allocation, inside):
    """``(q_values, log_pmf, log_excluded_mass)`` of the number of noisy bag-mates."""
    k = int(bag_size)
    if allocation == "per_bag":
        q0 = math.ceil(noise_fraction * k)
        q = q0 - 1 if inside else q0
        return np.array([q]), np.array([0.0]), -math.inf
    support = np.arange(k)
    if n_samples is None:
        log_pmf = stats.binom.logpmf(support, k - 1, noise_fraction)
    else:
        n = int(n_samples)
        n_noisy = math.floor(noise_fraction * n)
        log_pmf = stats.hypergeom.logpmf(
            support, n - 1, n_noisy - 1 if inside else n_noisy, k - 1
        )
    keep = log_pmf > math.log(1e-60)
    excluded = log_pmf[~keep & np.isfinite(log_pmf)]
    log_excluded = float(special.logsumexp(excluded)) if excluded.size else -math.inf
    return support[keep], log_pmf[keep], log_excluded


def _log_llp_side(epsilon, bag_size, noise_fraction, ratio, n_samples, allocation, inside):
    qs, log_pmf, log_excluded = _q_distribution(
        bag_size, noise_fraction, n_samples, allocation, inside
    )
    side = _log_delta_inside if inside else _log_delta_outside
    terms = [lp + side(epsilon, ratio, int(q)) for q, lp in zip(qs, log_pmf)]
    # q values of negligible probability are bounded by delta <= 1 (conservative).
    terms.append(log_excluded)
    return float(special.logsumexp(terms))


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
    k = int(bag_size)
    if k < 1:
        raise ValueError("bag_size must be >= 1.")
    if noise_fraction == 0:
        return 0.0
    ratio = label_range / noise_scale
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

    The expectations are integrals over ``log|T|`` and ``logit B`` on an
    adaptive grid in log space (plain quadrature underestimates the Beta
    integral by orders of magnitude near the origin of ``B``).

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
        n for the ``'global'`` hypergeometric law; None means n -> infinity.
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

    Returns ``inf`` when no ``k <= k_max`` is enough.
    """
    def ok(k):
        return (
            llp_privacy_profile(
                epsilon, k, noise_fraction, label_range, noise_scale, n_samples, allocation
            )
            <= delta
        )

    hi = 2
    while not ok(hi):
        hi *= 2
        if hi > k_max:
            return math.inf
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


# ---------------------------------------------------------------------------
# Convenience entry points
# ---------------------------------------------------------------------------
def delta_for(
    epsilon,
    *,
    bag_size,
    label_range,
    mode="lba",
    residual_var_lower_bound=None,
    noise_fraction=0.1,
    noise_scale=1.0,
    n_samples=None,
    allocation="per_bag",
):
    """The delta guaranteed at ``epsilon`` for a bag size (public planning).

    ``mode='lba'``: ``lba_privacy_profile(epsilon, Delta / sqrt(alpha k))``
    for a declared per-point residual-variance floor ``alpha``
    (``residual_var_lower_bound``): every bag has ``RSS_j >= alpha k``.
    ``mode='llp'``: :func:`llp_privacy_profile`.
    """
    if mode == "lba":
        if residual_var_lower_bound is None:
            raise ValueError("mode='lba' needs residual_var_lower_bound.")
        return lba_privacy_profile(
            epsilon, lba_ratio(label_range, residual_var_lower_bound, bag_size))
    if mode == "llp":
        return llp_privacy_profile(
            epsilon, bag_size, noise_fraction, label_range, noise_scale, n_samples, allocation
        )
    raise ValueError("mode must be 'lba' or 'llp'.")


def bag_size_for(
    epsilon,
    delta,
    *,
    label_range,
    mode="lba",
    assumption="declared",
    residual_var_lower_bound=None,
    expected_residual_var=None,
    n_columns=1,
    ptr_epsilon_fraction=0.4,
    ptr_target_failure=0.05,
    declared_failure_prob=0.0,
    noise_fraction=0.1,
    noise_scale=1.0,
    n_samples=None,
    allocation="per_bag",
):
    """The bag size ``bag_size='auto'`` would use (public planning).

    - ``mode='lba', assumption='declared'``: :func:`lba_min_bag_size` at
      ``delta - declared_failure_prob``;
    - ``mode='lba', assumption='ptr'``: :func:`lba_ptr_bag_size` (needs
      ``expected_residual_var``);
    - ``mode='llp'``: :func:`llp_min_bag_size`.

    ``inf`` when no bag size reaches the target.
    """
    if mode == "llp":
        return llp_min_bag_size(
            epsilon, delta, noise_fraction, label_range, noise_scale, n_samples, allocation
        )
    if mode != "lba":
        raise ValueError("mode must be 'lba' or 'llp'.")
    if assumption == "declared":
        if residual_var_lower_bound is None:
            raise ValueError("assumption='declared' needs residual_var_lower_bound.")
        if not declared_failure_prob < delta:
            raise ValueError("declared_failure_prob must be < delta.")
        return lba_min_bag_size(
            epsilon,
            delta - declared_failure_prob,
            label_range,
            residual_var_lower_bound,
            n_columns,
        )
    if assumption == "ptr":
        if expected_residual_var is None:
            raise ValueError("assumption='ptr' needs expected_residual_var to plan k.")
        return lba_ptr_bag_size(
            epsilon,
            delta,
            label_range,
            expected_residual_var,
            n_columns,
            fraction=ptr_epsilon_fraction,
            beta=ptr_target_failure,
        )
    raise ValueError("assumption must be 'declared' or 'ptr' for planning.")


# ---------------------------------------------------------------------------
# The paper's bounds (reference only: NOT a guarantee)
# ---------------------------------------------------------------------------
def _paper_theorem_1_2_delta(
    epsilon, k, m, d, gamma, lambda_star, B1, B2, constants=(1, 1, 1, 1, 1, 1)
):
    """The shape of Theorem 1.2's delta with user-chosen constants. NOT a guarantee.

    ``exp(-min(C1 eps^2 gamma sqrt(k) / B1^2, C2 sqrt(k) - C3 d))
    + exp(-C4 k lambda*^2 gamma^2 / (B1^4 B2^4) + C5 d ln(B1 B2/(gamma lambda*)) + C6 ln m)``.
    The theorem's Omega/O constants are unspecified, so no choice of
    ``constants`` turns this into a certified number; use the exact
    accountant (:func:`lba_privacy_profile`) instead.
    """
    c1, c2, c3, c4, c5, c6 = constants
    delta1 = math.exp(
        -min(c1 * epsilon**2 * gamma * math.sqrt(k) / B1**2, c2 * math.sqrt(k) - c3 * d)
    )
    exponent2 = (
        -c4 * k * lambda_star**2 * gamma**2 / (B1**4 * B2**4)
        + c5 * d * math.log(B1 * B2 / (gamma * lambda_star))
        + c6 * math.log(m)
    )
    return min(delta1, 1.0) + (math.exp(exponent2) if exponent2 < 700 else math.inf)


def _paper_delta2_explicit(k, m, d, gamma, lambda_star, B1, B2):
    """The paper's eq. (24) for delta_2 with the first exponent corrected.

    The paper rewrites ``d' (2/e)^{k lambda*/(2 B2^2)}`` as
    ``d exp(-k lambda* ln 2/(2 B2^2))``; the correct form is
    ``d exp(-(1 - ln 2) k lambda*/(2 B2^2))`` (the paper's version overstates
    the decay by a factor of about 2.3 in the exponent).

    ``m [d exp(-(1 - ln 2) k lambda*/(2 B2^2))
    + (192 B1^2 B2^2/(gamma lambda*))^d exp(-k lambda*^2 gamma^2/(128 B1^4 B2^4))]``:
    the probability that the random partition yields a bag with least-squares
    loss below ``k gamma / 4``. Reference only.
    """
    term1 = d * math.exp(-(1.0 - math.log(2.0)) * k * lambda_star / (2.0 * B2**2))
    log_term2 = d * math.log(192.0 * B1**2 * B2**2 / (gamma * lambda_star)) - (
        k * lambda_star**2 * gamma**2 / (128.0 * B1**4 * B2**4)
    )
    return m * (term1 + math.exp(min(log_term2, 700.0)))
