"""Exact privacy accountant of weighted LBA, and the planners of both aggregations.

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

The profile of noisy weighted LLP is in :mod:`._llp_accountant`;
:func:`delta_for` and :func:`bag_size_for` serve both.

Both profiles are certified upper bounds: never below the exact delta,
round-off included, and within ~1e-7 (LLP) or ~1e-9 (LBA, c >= 1e-4)
relative of it.
"""

import math

import numpy as np
from scipy import special

from ..mechanisms import difference_at_most, product_at_most, ptr_calibration
from ._llp_accountant import _delta_from_log, llp_min_bag_size, llp_privacy_profile

__all__ = [
    "lba_privacy_profile",
    "lba_c_star",
    "lba_epsilon",
    "lba_min_bag_size",
    "lba_ptr_margin",
    "lba_ptr_bag_size",
    "lba_ptr_pass_probability",
    "delta_for",
    "bag_size_for",
]


_LOG2 = math.log(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_U = 2.0**-53  # unit round-off


# ---------------------------------------------------------------------------
# Weighted LBA: the closed-form per-bag privacy profile
# ---------------------------------------------------------------------------
# Each of the four terms of lba_privacy_profile is written as a function of
# the threshold of its optimal set, u (in units of the standard deviation of
# P), and of the ratio r < 1 of the two standard deviations. With the Mills
# ratio R(w) = Phi(-w) / phi(w) and K(w) = (Phi(w) - 1/2) / phi(w), the
# identity p = e^eps q at the threshold turns the terms into
#
#   outer (A, B):   F(u) = 2 phi(u) (R(u) - r R(u/r)),
#   central (C, D): G(v) = 2 phi(v) (K(v) - K(r v) / r),
#
# with F decreasing in u and G increasing in v (F'(u) = -2 (r^-2 - 1) u r
# phi(u) R(u/r), G'(v) = 2 (1 - r^2) v phi(v) K(r v) / r), so a threshold
# rounded down (F) or up (G) gives an upper bound. The differences cancel
# when 1 - r is small; there they are bounded without a subtraction:
#
#   R(u) - r R(u/r) = int_r^1 psi(u/l) dl <= (1 - r) psi(u),
#       psi(w) = R(w) + w S(w), S(w) = 1 - w R(w),
#   K(v) - K(r v)/r = int_r^1 chi(l v) / l^2 dl <= (1 - r) chi(v),
#       chi(w) = w + (w^2 - 1) K(w) = sum_{m>=1} 2m w^{2m+1} / (2m+1)!!,
#
# as psi is decreasing (psi' = w S', S = -R' is decreasing) and chi(w)/w^2
# is increasing (its derivative has the sign of w^3 - 2w + K(w)(w^4 - w^2 + 2)
# >= w^5, using K(w) >= w).
_SQRT2 = math.sqrt(2.0)
_SQRT_PI_2 = math.sqrt(math.pi / 2.0)
_LOG_SQRT_PI_2 = 0.5 * math.log(math.pi / 2.0)
# Assumed relative accuracies of scipy.special.erfcx and erf (within ~1e-15
# of high-precision values) and of S in _psi (~1e-14);
# the margins below add a few units of round-off per operation on top.
_ERF_REL = 1e-14
_SLOPE_REL = 1e-13
# Where the subtraction form's relative error bound is below this, it is used
# alone: the bound without subtraction overestimates by a relative ~(1 - r),
# better only for 1 - r below ~1e-7.
_CANCEL_OK = 1e-8


def _log_mills(w):
    """``log R(w)``, ``R(w) = Phi(-w) / phi(w)`` (``w >= 0``), from ``erfcx``."""
    return math.log(_SQRT_PI_2 * float(special.erfcx(w / _SQRT2)))


def _psi(w):
    """``psi(w) = R(w) + w S(w)``, ``S(w) = 1 - w R(w)`` (``w >= 0``).

    ``S`` comes from ``erfcx`` below 4 and from Laplace's continued fraction
    ``S = 1 / (1 + w s)``, ``s = w + 2 / (w + 3 / (w + ...))``, above (where
    the subtraction cancels), as in :func:`skprivreg._gdp._log_slope_array`.
    """
    mills = _SQRT_PI_2 * float(special.erfcx(w / _SQRT2))
    if w < 4.0:
        return mills + w * (1.0 - w * mills)
    s = w
    for n in range(60, 1, -1):
        s = w + n / s
    return mills + (w / (1.0 + w * s) if w < 1e150 else 1.0 / s)


def _log_outer(u2, one_minus_r, log_r, inv_r):
    """Upper bound on ``log F(u)``, ``F(u) = 2 phi(u) (R(u) - r R(u/r))``, at
    ``u = sqrt(u2)`` (see the comment above :func:`_log_mills`).

    ``r`` enters as ``1 - r``, ``log r`` and ``1 / r``, each computed
    without cancellation by the caller.
    """
    if not math.isfinite(u2):
        return -math.inf  # below the smallest float's log
    u = math.sqrt(u2)
    log_r_u = _log_mills(u)
    log_r_w = _log_mills(u * inv_r)
    # J = R(u) - r R(u/r) = R(u) (1 - e^d); d is rounded (d log R / d log w is
    # in [-1, 0], so a relative error in w moves log R by at most as much).
    d = log_r + log_r_w - log_r_u
    err_d = 2.0 * _ERF_REL + 8.0 * _U * (abs(log_r) + abs(log_r_u) + abs(log_r_w) + 4.0)
    log_j = math.inf
    if d - err_d < 0:
        log_term = math.log(-math.expm1(d - err_d))
        log_j = log_r_u + log_term + _ERF_REL + 8.0 * _U * (abs(log_r_u) + abs(log_term) + 2.0)
    if not (d < 0 and err_d <= _CANCEL_OK * -d):
        log_bound = math.log(one_minus_r) + math.log(_psi(u))
        log_bound += _ERF_REL + _SLOPE_REL + 8.0 * _U * (abs(log_bound) + 4.0)
        log_j = min(log_j, log_bound)
    value = _LOG2 - 0.5 * u2 - _LOG_SQRT_2PI + log_j
    return value + 8.0 * _U * (0.5 * u2 + abs(log_j) + 2.0)


def _log_chi(v):
    """``log chi(v)``, ``chi(v) = v + (v^2 - 1) K(v)`` (``v > 0``), rounded up."""
    if v < 2.0:
        # chi(v) / v^3 = sum_{m>=1} 2m v^{2m-2} / (2m+1)!!, positive terms; the
        # ratio of consecutive terms falls below 1/2 before the sum stops.
        v2 = v * v
        term = total = 2.0 / 3.0
        m = 1
        while term > 1e-17 * total:
            term *= (m + 1) / (m * (2 * m + 3)) * v2
            total += term
            m += 1
        return 3.0 * math.log(v) + math.log(total) + 64.0 * _U
    log_k = _LOG_SQRT_PI_2 + math.log(float(special.erf(v / _SQRT2))) + 0.5 * v * v
    value = log_k + math.log(v * v - 1.0 + v * math.exp(-log_k))
    return value + _ERF_REL + 16.0 * _U * (abs(value) + 2.0)


def _log_central(v2, one_minus_r, log_r, r, one_minus_r2):
    """Upper bound on ``log G(v)``, ``G(v) = 2 phi(v) (K(v) - K(r v) / r)``, at
    ``v = sqrt(v2)`` (see the comment above :func:`_log_mills`).

    ``r`` enters as ``1 - r``, ``log r``, ``r`` and ``1 - r^2``, each
    computed without cancellation by the caller.
    """
    if v2 <= 0:
        return -math.inf
    v = math.sqrt(v2)
    # 2 phi(v) K(v) = erf(v / sqrt 2); K(r v) / (r K(v)) = e^d.
    log_erf_v = math.log(float(special.erf(v / _SQRT2)))
    log_erf_w = math.log(float(special.erf(r * v / _SQRT2)))
    d = -0.5 * one_minus_r2 * v2 - log_r + log_erf_w - log_erf_v
    err_d = 2.0 * _ERF_REL + 8.0 * _U * (
        0.5 * one_minus_r2 * v2 + abs(log_r) + abs(log_erf_w) + abs(log_erf_v) + 4.0)
    value = math.inf
    if d - err_d < 0:
        log_term = math.log(-math.expm1(d - err_d))
        value = log_erf_v + log_term + _ERF_REL + 8.0 * _U * (
            abs(log_erf_v) + abs(log_term) + 2.0)
    if not (d < 0 and err_d <= _CANCEL_OK * -d):
        # chi(v) moves by at most (3 + v^2) times a relative change of v.
        log_bound = (_LOG2 - 0.5 * v2 - _LOG_SQRT_2PI + math.log(one_minus_r)
                     + _log_chi(v))
        log_bound += 8.0 * _U * (abs(log_bound) + v2 + 8.0)
        value = min(value, log_bound)
    return value


def _log_delta_shrink(epsilon, c):
    """Upper bound on log HS_eps(N(0,1) || N(0, lo^2)), lo = 1 - c (term A)."""
    log_lo = math.log1p(-c)
    # a^2 = 2 (eps - ln lo) / (lo^-2 - 1), lo^-2 - 1 = c (2 - c) / lo^2; rounded down.
    u2 = 2.0 * (epsilon - log_lo) * (1.0 - c) ** 2 / (c * (2.0 - c)) * (1.0 - 32.0 * _U)
    return _log_outer(u2, c, log_lo, 1.0 / (1.0 - c))


def _log_delta_grow(epsilon, c):
    """Upper bound on log HS_eps(N(0, hi^2) || N(0,1)), hi = 1 + c (term B)."""
    log_hi = math.log1p(c)
    # (b / hi)^2 = 2 (eps + ln hi) / (hi^2 - 1), hi^2 - 1 = c (2 + c); r = 1 / hi.
    u2 = 2.0 * (epsilon + log_hi) / (c * (2.0 + c)) * (1.0 - 32.0 * _U)
    return _log_outer(u2, c / (1.0 + c), -log_hi, 1.0 + c)


def _log_delta_shrink_reverse(epsilon, c):
    """Upper bound on log HS_eps(N(0, lo^2) || N(0,1)), lo = 1 - c (term C);
    ``-inf`` (0) unless ``-ln lo > eps``."""
    log_lo = math.log1p(-c)
    # (x1 / lo)^2 = 2 (-ln lo - eps) / (1 - lo^2), 1 - lo^2 = c (2 - c); the
    # numerator cancels, so it is rounded up by a bound on its error.
    num = -log_lo - epsilon
    num += 4.0 * _U * (abs(log_lo) + epsilon)
    if not num > 0:
        return -math.inf
    v2 = 2.0 * num / (c * (2.0 - c)) * (1.0 + 32.0 * _U)
    return _log_central(v2, c, log_lo, 1.0 - c, c * (2.0 - c))


def _log_delta_grow_reverse(epsilon, c):
    """Upper bound on log HS_eps(N(0,1) || N(0, hi^2)), hi = 1 + c (term D);
    ``-inf`` (0) unless ``ln hi > eps``."""
    log_hi = math.log1p(c)
    # x3^2 = 2 (ln hi - eps) hi^2 / (hi^2 - 1); r = 1 / hi, 1 - r^2 = c (2 + c) / hi^2.
    num = log_hi - epsilon
    num += 4.0 * _U * (log_hi + epsilon)
    if not num > 0:
        return -math.inf
    hi2 = (1.0 + c) ** 2
    v2 = 2.0 * num * hi2 / (c * (2.0 + c)) * (1.0 + 32.0 * _U)
    return _log_central(v2, c / (1.0 + c), -log_hi, 1.0 / (1.0 + c), c * (2.0 + c) / hi2)


def lba_log_privacy_profile(epsilon, c):
    """Natural log of :func:`lba_privacy_profile` (``-inf`` for 0), never below
    the log of the exact value."""
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
    logs = [_log_delta_shrink(epsilon, c), _log_delta_grow(epsilon, c),
            _log_delta_shrink_reverse(epsilon, c), _log_delta_grow_reverse(epsilon, c)]
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
    :math:`a = \\sqrt{2(\\varepsilon - \\ln lo)/(lo^{-2} - 1)}`). ``delta = 1``
    for ``c >= 1``.

    The value is an upper bound, never below the exact delta. Each term is
    computed in log space as a function of its threshold (rounded in the
    direction that increases the term) and cancellation-free forms of
    ``ln lo``, ``ln hi``, ``lo^{-2} - 1`` and ``hi^2 - 1`` (``log1p(-c)``,
    ``c (2 - c) / (1 - c)^2``, ...); where the two normal tails cancel (small
    ``c``: their relative difference is about ``2c``), the difference is
    bounded by an integral without subtraction, and the remaining round-off
    is bounded and added. The bound exceeds the exact value by at most ~1e-9
    relative for ``c >= 1e-4``; below, by ~1e-7 relative or ~1e-14 times
    ``|ln delta|``, whichever is larger (delta is then far below 1e-300).

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
    eps_test = product_at_most(fraction, epsilon)
    return eps_test, 0.5 * delta, difference_at_most(epsilon, eps_test), 0.5 * delta


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
    ``mode='llp'``: :func:`llp_privacy_profile`; with ``allocation='global'``
    pass the data's ``n_samples``: ``None`` uses the binomial law (n without
    bound), whose delta can be below the delta at a finite n.
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
    - ``mode='llp'``: :func:`llp_min_bag_size` (with ``allocation='global'``,
      pass the data's ``n_samples``: ``None`` uses the binomial law, which can
      understate delta at a finite n).

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
