"""Public planning for ISSP: every constant of a fit from (n, d, epsilon, delta) alone.

:func:`issp_plan` touches no data. It returns an :class:`ISSPPlan` whose
``str()`` is the text ``python -m skprivreg plan issp`` prints.
"""

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm

from ..accounting import PrivacyEvent, PrivacyLedger
from ..exceptions import ConfigurationError
from ..mechanisms import (
    difference_at_most,
    exact_fraction,
    gaussian_sigma,
    product_at_most,
    ptr_calibration,
    shares_at_most,
    value_at_least,
)
from ._issp_filters import (
    ladder_log_ratio,
    leverage_base,
    leverage_bound_for_base,
    leverage_thresholds,
    leverage_top,
    weights_leverage_bound,
)

__all__ = ["ISSPPlan", "issp_plan", "issp_k", "r0_groups"]

#: Sensitivity of max(SCORE1, SCORE2) under replace-one neighbours.
SCORE_SENSITIVITY = 4.0
# Privacy constants of the release (each proved on the ISSP privacy analysis page):
#: Mass bound m on ||v - v'||_1 over the union of two neighbouring datasets:
#: 2 (the replaced row, once in each dataset) + 3 (k - 1)/k < 5 (weight-stability lemma).
WEIGHT_MASS = 5.0
#: v is (L_u, (1 + k L_u) R_{2k})-good with L_u = L0/(1 - k L0) (weights_leverage_bound).
#: Location: ||S_v^{1/2}(b - b')||^2 <= m^2 L_u ((1 + k L_u) R_{2k})^2 (1 - m L_u)^{-3}.
#: Shape: d_PD(S_v, S_v') <= m L_u / (1 - m L_u).
#: The published location bound 4 m^2 L R^2 with m = 7, L = 4 L0, R = 2 R_{2k}
#: (Brown et al. 2024, location lemma): 3136 e^{432 k^2 L0} L0 R0^2.
PAPER_LOCATION_SENSITIVITY_CONSTANT = 3136.0
#: The published shape bound d_PD <= 56 L0 (Brown et al. 2024, shape-distance lemma).
PAPER_SHAPE_CONSTANT = 56.0
#: Shape-step shares of eps1 that budget_split='auto' tries (the rest after the PTR goes
#: to the location step).
AUTO_SHAPE_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
#: Largest log blow-up ln (R_{2k}/R0)^2 allowed (the noise would overflow float64 beyond it).
MAX_LOG_BLOWUP = 700.0
#: The covariance-shape bound holds for epsilon in the open interval (0, 1): cap at 0.999.
SHAPE_EPSILON_CAP = 0.999
# ---------------------------------------------------------------------------
# Public planning
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ISSPPlan:
    """Public constants of one ISSP fit; a function of (n, d, parameters) only.

    The budget is ``(eps_r0, delta_r0)`` for the private residual scale (0 when
    ``residual_bound`` is a number), then ``(eps_ptr, delta_ptr)`` for the PTR,
    ``(eps_loc, delta_loc)`` for the Gaussian location step and
    ``(eps_shape, delta_shape)`` for the covariance shape step,
    combined by the weak triangle inequality into ``delta_gauss``.
    ``eps_r0 + eps_ptr + eps_loc + eps_shape + eps_unused <= epsilon`` and
    ``delta_r0 + delta_ptr + delta_gauss <= delta`` (each share rounded down
    from its exact value, so equal up to an ulp or two). ``eps_unused`` is positive
    only at large epsilon, where more location budget would make the shape-step
    cap on L0 bind (:func:`_fractions_plan`); it is not spent.
    """

    n: int
    d: int
    p: int
    epsilon: float
    delta: float
    fit_intercept: bool
    budget_split: tuple
    eps_r0: float
    delta_r0: float
    eps_ptr: float
    delta_ptr: float
    eps_loc: float
    delta_loc: float
    eps_shape: float
    delta_shape: float
    delta_gauss: float
    eps_unused: float
    ptr_fail_prob: float
    ptr_scale: float
    ptr_half_width: float
    ptr_tau: float
    k: int
    leverage_bound: float
    leverage_top: float
    leverage_base: float
    log_blowup: float
    sensitivity_per_r0: float
    noise_per_r0: float
    constants: str
    residual_bound: object
    r0_groups: int
    r0_group_size: int
    clean_path_possible: bool
    fail_predicted: bool
    predicted_n_pass: float
    predicted_noise_ratio: float
    predicted_n_min: float
    warnings: tuple = field(default_factory=tuple)

    def noise_scale(self, R0):
        """``c``: the release is ``N(beta_v, c^2 S_v^{-1})``; the product
        ``(c / R0) R0`` rounded up (to nearest it may land an ulp below)."""
        return value_at_least(exact_fraction(self.noise_per_r0) * exact_fraction(float(R0)))

    def ledger(self):
        """The planned :class:`PrivacyLedger` (identical whether ISSP PASSes or FAILs)."""
        events = []
        if self.eps_r0 > 0:
            events.append(PrivacyEvent("issp_sigma2_histogram", self.eps_r0,
                                       self.delta_r0))
        events.append(PrivacyEvent("issp_ptr", self.eps_ptr, self.delta_ptr,
                                   sensitivity=SCORE_SENSITIVITY))
        events.append(PrivacyEvent("issp_location", self.eps_loc, self.delta_loc))
        events.append(PrivacyEvent("issp_shape", self.eps_shape, self.delta_shape))
        return PrivacyLedger(events, composition="basic",
                             delta=self.delta_r0 + self.delta_ptr + self.delta_gauss)

    def as_dict(self):
        """The plan as a plain dict (what ``ISSPRegressor.planning_`` holds)."""
        return asdict(self)

    def __str__(self):
        """The plan as ``python -m skprivreg plan issp`` prints it."""
        f_T, f_M, f_C = self.budget_split
        lines = [
            f"ISSP plan: n={self.n:.4g}, d={self.d}, p={self.p}, epsilon={self.epsilon:g}, "
            f"delta={self.delta:g}",
            f"  budget: residual scale (eps, delta) = ({self.eps_r0:.4g}, {self.delta_r0:.3g}); "
            f"split f_T/f_M/f_C = {f_T:.3g}/{f_M:.3g}/{f_C:.3g}",
            f"  PTR: eps={self.eps_ptr:.4g}, delta={self.delta_ptr:.3g}, "
            f"A={self.ptr_half_width:.4g}, tau={self.ptr_tau:.4g}",
            f"  k = {self.k}",
            f"  L0 (leverage_bound) = {self.leverage_bound:.4g}  (clean path needs every "
            f"leverage <= L_base = {self.leverage_base:.4g})",
            f"  residual blow-up (R_2k/R0)^2 = e^{self.log_blowup:.4g}",
            f"  c / R0 = {self.noise_per_r0:.4g}",
            "  predicted noise relative to the OLS error c/sigma = "
            f"{self.predicted_noise_ratio:.4g}",
            "  predicted minimum n (clean path, blow-up <= max_blowup) = "
            f"{self.predicted_n_min:.3g}",
            f"  clean path possible at this n: {'yes' if self.clean_path_possible else 'no'}",
            "  FAIL predicted at this n: "
            + (f"yes (PASS predicted from about n = {self.predicted_n_pass:.3g}; "
               "ISSPRegressor refuses unless predicted_fail='spend')"
               if self.fail_predicted else "no"),
        ]
        lines += [f"  warning: {note}" for note in self.warnings]
        return "\n".join(lines)


def issp_k(eps_ptr, delta_ptr, fail_prob=0.0):
    """``k = floor(tau + A) + 1`` for the truncated-Laplace PTR.

    Bumped by one when ``k - (tau + A) < 1e-9`` (floating-point guard), so a
    capped score ``k`` always FAILs. Returns ``(k, PTRCalibration)``.
    """
    cal = ptr_calibration(SCORE_SENSITIVITY, eps_ptr, delta_ptr, fail_prob)
    k = math.floor(cal.fail_threshold) + 1
    if k - cal.fail_threshold < 1e-9:
        k += 1
    return int(k), cal


def _delta_shares(delta1, eps_loc, eps_shape):
    """``delta_T = delta1/3`` and a Gaussian pair combining to ``2 delta1/3`` at any epsilon.

    The weak triangle inequality (location step at ``(eps_M, delta_M)``, shape
    step at ``(eps_C', delta_C)`` with ``eps_C' = min(eps_C, 0.999)``) gives
    ``delta_G = max(delta_M + e^{eps_M} delta_C, delta_C + e^{eps_C'} delta_M)``.
    With ``D = 2 delta1/3``, ``delta_C = (D/2) e^{-eps_M}`` and
    ``delta_M = min(D/2, (D - delta_C) e^{-eps_C'})`` both terms are at most
    ``D``; ``delta_M >= D e^{-1}/2`` never collapses, and ``delta_C`` (which
    enters the shape-step cap only through ``ln(2/delta_C)``) is kept as a
    logarithm, so nothing under- or overflows for any epsilon.

    Returns ``(delta_ptr, delta_loc, log_delta_shape, delta_gauss)``.
    """
    delta_ptr, D = shares_at_most(delta1, [1, 2])
    # Rounded down, each by a few ulps of its terms (log and exp are within an
    # ulp), so that the exact delta_G of the recorded shares is at most D:
    # delta_C = e^{log_delta_shape} (the value the shape step uses) is at most
    # (D/2) e^{-eps_M}, and delta_M at most (D - delta_C) e^{-eps_C'}.
    log_half = math.log(D / 2.0)
    log_delta_shape = (log_half - eps_loc) - _SHARE_ULPS * (abs(log_half) + eps_loc + 1.0)
    delta_shape_up = math.exp(log_delta_shape) * (1.0 + _SHARE_ULPS)
    delta_loc = min(D / 2.0, (D - delta_shape_up)
                    * math.exp(-min(eps_shape, SHAPE_EPSILON_CAP)) * (1.0 - _SHARE_ULPS))
    return delta_ptr, delta_loc, log_delta_shape, D


#: Allowance for the rounding of a log or exp and a product: 8 units in the last place.
_SHARE_ULPS = 8 * 2.0**-53


def shape_distance_bound(L0, k, constants="proven"):
    """Bound on ``d_PD(S_v, S_v')`` for neighbouring datasets (both PTR scores below k).

    ``'proven'``: ``m L_u / (1 - m L_u)`` with ``m`` = :data:`WEIGHT_MASS` and
    ``L_u`` = :func:`weights_leverage_bound` (``inf`` unless ``m L_u < 1``):
    ``S_v' - S_v = sum_i (v'_i - v_i) x_i x_i^T`` on the union of the two
    datasets, so the trace norm of ``S_v^{-1/2} S_v' S_v^{-1/2} - I`` is at most
    ``sum_i |v_i - v'_i| h_i(v)``, with ``h_i(v) <= L_u`` on ``supp(v)`` and
    ``<= L_u/(1 - m L_u)`` elsewhere. ``'paper'``: ``56 L0``.
    """
    if constants == "paper":
        return PAPER_SHAPE_CONSTANT * L0
    mL = WEIGHT_MASS * weights_leverage_bound(L0, k)
    if not 0 <= mL < 1.0:
        return math.inf
    return mL / (1.0 - mL)


def _shape_cap(eps_shape, log_delta_shape, k, constants="proven"):
    """Largest L0 with ``shape_distance_bound(L0, k) <= min(eps_C, 0.999) / (3 ln(2/delta_C))``."""
    target = min(eps_shape, SHAPE_EPSILON_CAP) / (3.0 * (math.log(2.0) - log_delta_shape))
    if constants == "paper":
        return target / PAPER_SHAPE_CONSTANT
    # m L_u/(1 - m L_u) = t  <=>  L_u = t/(m (1 + t))  <=>  L0 = L_u/(1 + k L_u).
    L_u = target / (WEIGHT_MASS * (1.0 + target))
    L0 = L_u / (1.0 + k * L_u)
    while shape_distance_bound(L0, k) > target:
        L0 *= 1.0 - 1e-13
    return L0


def _location_epsilon_cap(L0, delta1, eps_shape, k, constants="proven"):
    """Largest ``eps_M`` for which the shape-step cap still admits ``L0`` (may be <= 0).

    With ``ln(2/delta_C) = ln(4/D) + eps_M`` (:func:`_delta_shares`), the cap
    ``b(L0) <= min(eps_C, 0.999) / (3 ln(2/delta_C))`` (``b`` =
    :func:`shape_distance_bound`) holds iff
    ``eps_M <= min(eps_C, 0.999)/(3 b(L0)) - ln(4/D)``.
    """
    D = shares_at_most(delta1, [1, 2])[1]  # as _delta_shares
    if not L0 > 0 or not math.isfinite(L0):
        return -math.inf
    b = shape_distance_bound(L0, k, constants)
    if not math.isfinite(b):
        return -math.inf
    return min(eps_shape, SHAPE_EPSILON_CAP) / (3.0 * b) - math.log(4.0 / D)


def weighted_ols_shift_bound(m, L, R):
    """Bound on ``||S_v^{1/2}(beta_v - beta_w)||^2`` for (L, R)-good ``v, w``, ``||v - w||_1 <= m``.

    ``m^2 L R^2 (1 - mL)^{-3}``, valid when ``mL < 1``; ``inf`` otherwise.
    Proof (normal equations; the ISSP privacy analysis page): with
    ``r^w = y - X beta_w`` and ``X^T W r^w = 0``,
    ``S_v(beta_v - beta_w) = sum_i (v_i - w_i) x_i r^w_i``; each term has
    ``||S_v^{-1/2} x_i|| <= sqrt(L/(1 - mL))`` and ``|r^w_i| <= R`` or
    ``<= R + sqrt(L) E``, which solves to ``E <= m sqrt(L) R (1 - mL)^{-3/2}``.
    """
    if not m * L < 1.0:
        return math.inf
    return m * m * L * R * R / (1.0 - m * L) ** 3


def ladder_log_blowup(k, L0, constants="proven"):
    """``ln (R_{2k}/R0)^2``: ``4 k g(k, L0)`` (:func:`ladder_log_ratio`).

    ``'paper'``: ``432 k^2 L0``.
    """
    if constants == "paper":
        return 432.0 * k * k * L0
    return 4.0 * k * ladder_log_ratio(k, L0)


def _ladder_L0_for(k, log_blowup):
    """Largest ``L0 <= 1/(96k)`` with ``ladder_log_blowup(k, L0) <= log_blowup`` (bisection)."""
    hi = 1.0 / (96.0 * k)
    if ladder_log_blowup(k, hi) <= log_blowup:
        return hi
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if ladder_log_blowup(k, mid) <= log_blowup:
            lo = mid
        else:
            hi = mid
    return lo


def location_sensitivity_sq(L0, k, constants="proven"):
    """Squared location sensitivity per ``R0^2``: ``||S_v^{1/2}(b - b')||^2 / R0^2``.

    ``'proven'``: :func:`weighted_ols_shift_bound` at ``m = 5``
    (:data:`WEIGHT_MASS`), ``L = L_u = L0/(1 - k L0)`` and
    ``R = (1 + k L_u) R_{2k}``, that is
    ``25 L_u (1 + k L_u)^2 (1 - 5 L_u)^{-3} (R_{2k}/R0)^2`` (``v`` and ``v'``
    are ``(L_u, (1 + k L_u) R_{2k})``-good; the privacy analysis page).
    ``'paper'``: ``4 m^2 L (2 R_{2k}/R0)^2 = 3136 L0 e^{432 k^2 L0}`` (Brown et al.
    2024, location lemma, ``m = 7``, ``L = 4 L0``).
    ``(R_{2k}/R0)^2`` is ``e^{4 k g(k, L0)}`` (:func:`ladder_log_blowup`).
    Returns the square as a logarithm-safe pair ``(log_factor, log_blowup)``
    so that huge blow-ups stay finite: the value is ``e^{log_factor + log_blowup}``.
    """
    log_blowup = ladder_log_blowup(k, L0, constants)
    if not L0 > 0:
        return -math.inf, log_blowup
    if constants == "paper":
        return math.log(PAPER_LOCATION_SENSITIVITY_CONSTANT * L0), log_blowup
    if not k * L0 < 1.0:
        return math.inf, log_blowup
    L_u = weights_leverage_bound(L0, k)
    mL = WEIGHT_MASS * L_u
    if not mL < 1.0:
        return math.inf, log_blowup
    proven = (2.0 * math.log(WEIGHT_MASS) + math.log(L_u) + 2.0 * math.log1p(k * L_u)
              - 3.0 * math.log1p(-mL))
    return proven, log_blowup


#: Units of roundoff (2^-53 each, per unit of the terms' magnitude) by which
#: :func:`location_sensitivity` raises its exponent.
LOCATION_ROUNDING_UNITS = 32.0


def location_sensitivity(L0, k, constants="proven"):
    r"""Location sensitivity per ``R0``, :math:`e^{(\lambda_f + \lambda_b)/2}`, rounded up.

    :math:`\lambda_f` and :math:`\lambda_b` are the two logarithms of
    :func:`location_sensitivity_sq` (``log_blowup`` at most
    :data:`MAX_LOG_BLOWUP`, which the planner's caps ensure). Both are sums
    and products of floating-point logarithms; the exponential of their
    rounded sum can fall below the exact value (by about 1e-13, relative,
    near the largest blow-up ``e^700``), and the ladder's top rung
    ``R0 e^{2k g}``, whose square the bound covers, is itself rounded. The
    exponent is therefore raised by

    .. math::

       32\,u\,(1 + |\lambda_f| + 2|\ln L_0| + |\lambda_b|),\qquad u = 2^{-53},

    which exceeds the sum of those rounding errors: every computed term is
    within a few units of roundoff of its magnitude (the terms of
    :math:`\lambda_f` add up to at most :math:`|\lambda_f| + 2|\ln L_0|` in
    magnitude, its one negative term being :math:`\ln L_u` with
    :math:`L_0 \le L_u < 1`; under the cap :math:`k L_0 \le 1/96` no
    :math:`\log(1 - x)` is near its pole), the exponentials add two more. It
    moves the sensitivity by less than 1e-9, relative.
    """
    log_factor, log_blowup = location_sensitivity_sq(L0, k, constants)
    exponent = log_factor + min(log_blowup, MAX_LOG_BLOWUP)
    if not math.isfinite(exponent):
        return math.exp(exponent / 2.0)  # 0 (no leverage) or infinity (refused later)
    scale = 1.0 + abs(log_factor) + 2.0 * abs(math.log(L0)) + abs(log_blowup)
    return math.exp(exponent / 2.0 + LOCATION_ROUNDING_UNITS * 2.0**-53 * scale)


def _leverage_quantile(n, p, eta):
    """Upper ``eta/n`` quantile of ``Beta(p/2, (n-p)/2)``: leverages of Gaussian rows."""
    return float(beta_dist.isf(eta / n, p / 2.0, (n - p) / 2.0))


def _auto_leverage_bound(n, p, k, slack, eta):
    """``L0`` with ``L_base`` (:func:`leverage_base`) ``= slack * q``; inf if impossible."""
    return leverage_bound_for_base(slack * _leverage_quantile(n, p, eta), k)


def _residual_bound_per_sigma(n, auto, slack, eta):
    """Predicted ``R0 / sigma`` for planning (Gaussian noise)."""
    if auto:
        # sigma2_up lies in [1, sqrt(2)] sigma^2; the middle is 2^(1/4).
        return slack * 2.0**0.125 * math.sqrt(2.0 * math.log(2.0 * n / eta))
    return float(norm.isf(eta / (2.0 * n)))


def _fractions_plan(n, p, eps1, delta1, fractions, leverage_bound, fail_prob, slack, eta,
                    constants, epsilon_paper):
    f_T, f_M, f_C = fractions
    # Shares of eps1 whose exact sum is at most eps1 (the fractions' floats
    # may sum above 1, and each product may round up).
    eps_ptr, eps_loc, eps_shape = shares_at_most(eps1, fractions)
    k, cal = issp_k(eps_ptr, shares_at_most(delta1, [1, 2])[0], fail_prob)  # delta_ptr
    cap_lev = 1.0 / (96.0 * k)
    cap_over = (MAX_LOG_BLOWUP / (432.0 * k * k) if constants == "paper"
                else _ladder_L0_for(k, MAX_LOG_BLOWUP))
    wanted = (_auto_leverage_bound(n, p, k, slack, eta) if leverage_bound == "auto"
              else float(leverage_bound))
    # The shape step's delta_C is e^{-eps_M} small (weak triangle inequality),
    # so a large location epsilon tightens the shape-step cap on L0 like
    # 1/eps_M. Spend on the location step only up to the epsilon at which the
    # cap still admits the L0 the other caps allow; the rest of the share is
    # left unspent (recorded as eps_unused). Public facts only.
    target = min(wanted, cap_lev, cap_over)
    eps_loc_max = _location_epsilon_cap(target, delta1, eps_shape, k,
                                        constants) * (1.0 - 1e-12)
    eps_unused = 0.0
    if 0 < eps_loc_max < eps_loc:
        eps_unused, eps_loc = eps_loc - eps_loc_max, eps_loc_max
    delta_ptr, delta_loc, log_delta_shape, delta_gauss = _delta_shares(delta1, eps_loc,
                                                                       eps_shape)
    caps = (cap_lev, _shape_cap(eps_shape, log_delta_shape, k, constants), cap_over)
    if leverage_bound == "auto":
        L0 = min(wanted, *caps)
        feasible = wanted <= min(caps)
    else:
        L0 = wanted
        feasible = L0 <= caps[0] and L0 <= caps[1] and L0 <= caps[2]
    log_blowup = ladder_log_blowup(k, L0, constants)
    sens = location_sensitivity(L0, k, constants)
    if constants == "paper":
        # c^2 = 56448 e^{432k^2 L0} L0 R0^2 ln(12/delta) / eps^2 (classical constant).
        noise = sens * math.sqrt(18.0 * math.log(12.0 / epsilon_paper[1])) / epsilon_paper[0]
    else:
        noise = gaussian_sigma(sens, eps_loc, delta_loc)
    return dict(
        budget_split=(f_T, f_M, f_C), eps_ptr=eps_ptr, delta_ptr=delta_ptr, eps_loc=eps_loc,
        delta_loc=delta_loc, eps_shape=eps_shape, delta_shape=math.exp(log_delta_shape),
        delta_gauss=delta_gauss, eps_unused=eps_unused, ptr_scale=cal.scale,
        ptr_half_width=cal.half_width,
        ptr_tau=cal.tau, k=k, leverage_bound=L0, caps=caps, feasible=feasible,
        log_blowup=log_blowup, sensitivity_per_r0=sens, noise_per_r0=noise,
    )


def _predicted_score1(n, p, k, L0):
    """Leverage score SCORE1 predicted for a Gaussian design of ``n`` rows (public).

    Rows with leverage above ``L_j`` leave at level ``j`` or above, so SCORE1
    is about ``min_{0<=j<=k} (N_j + j)`` with ``N_j = n P[h > L_j]`` the
    expected number of such rows, ``h ~ Beta(p/2, (n-p)/2)`` (leverage of
    Gaussian rows). For large k the minimum runs over at most 257
    evenly spaced levels including 0 and k: ``N_j`` decreases in ``j``, so this
    overstates the minimum by at most the spacing ``k/256``.
    """
    levels = np.unique(np.round(np.linspace(0, k, min(k + 1, 257)))).astype(np.int64)
    thresholds = leverage_thresholds(L0, k)[levels]
    counts = n * beta_dist.sf(thresholds, p / 2.0, (n - p) / 2.0)
    return float(min(k, np.min(counts + levels)))


def _min_n_to_pass(p, k, L0, tau, n_max=1e16):
    """Smallest n whose predicted SCORE1 is at most ``tau`` (PASS more likely than not)."""
    def ok(n):
        return _predicted_score1(n, p, k, L0) <= tau

    lo, hi = math.log(p + 2.0), math.log(n_max)
    if not ok(math.exp(hi)):
        return math.inf
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if ok(math.exp(mid)):
            hi = mid
        else:
            lo = mid
    return float(math.ceil(math.exp(hi)))


def _min_n_for_clean_path(p, k, L0, slack, eta, n_max=1e16):
    """Smallest n whose Gaussian-design max leverage is <= L_base(L0) (bisection on log n)."""
    L0 = min(L0, 1.0 / (96.0 * k))
    target = leverage_base(L0, k) / slack

    def ok(n):
        return _leverage_quantile(n, p, eta) <= target

    lo, hi = math.log(p + 2.0), math.log(n_max)
    if not ok(math.exp(hi)):
        return math.inf
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if ok(math.exp(mid)):
            hi = mid
        else:
            lo = mid
    return float(math.ceil(math.exp(hi)))


def issp_plan(
    *,
    n_samples,
    n_features,
    epsilon=1.0,
    delta=1e-6,
    fit_intercept=True,
    leverage_bound="auto",
    residual_bound="auto",
    budget_split="auto",
    r0_budget_fraction=0.05,
    ptr_fail_prob=0.0,
    leverage_slack=1.25,
    residual_slack=1.0,
    design_failure_prob=0.01,
    max_blowup=10.0,
    _constants="proven",
):
    """Public planning for ISSP: k, L0, the budget split and c/R0.

    Uses only ``n_samples``, ``n_features`` and the parameters; touches no
    data. Raises
    :class:`ConfigurationError` when the request is infeasible from these
    public facts (n < p + 2, delta outside (0, 0.1], L0 above
    ``1/(96k)`` or the shape-step cap, a residual blow-up
    ``ln (R_2k/R0)^2 > 700``, too few rows for the private residual scale).

    Parameters
    ----------
    n_samples : int
        Number of training rows n (public).
    n_features : int
        Number of features d (without the intercept column).
    epsilon : float, default=1.0
        Total epsilon of the fit, including the residual-scale estimate.
    delta : float, default=1e-6
        Total delta, in (0, 0.1]. Choose it well below 1/n_samples.
    fit_intercept, leverage_bound, residual_bound, budget_split, r0_budget_fraction, \
ptr_fail_prob, leverage_slack, residual_slack, design_failure_prob, max_blowup
        As in :class:`~skprivreg.linear_model.ISSPRegressor`.

    Returns
    -------
    ISSPPlan
        ``k``, ``leverage_bound`` (L0), ``noise_per_r0`` (c/R0),
        ``predicted_noise_ratio`` (c/sigma on clean Gaussian data, i.e. the
        privacy error relative to the OLS error), ``predicted_n_min`` (the
        smallest n whose Gaussian design is on the clean path with blow-up
        ``(R_2k/R0)^2 <= max_blowup`` at this k) and data-independent
        warnings. The constants are proved on the ISSP privacy analysis page.
    """
    n, d = int(n_samples), int(n_features)
    p = d + int(bool(fit_intercept))
    epsilon, delta = float(epsilon), float(delta)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigurationError("ISSP needs a finite epsilon > 0.")
    if not 0 < delta <= 0.1:
        raise ConfigurationError("ISSP needs delta in (0, 0.1].")
    if n < p + 2:
        raise ConfigurationError(
            f"ISSP needs n >= p + 2 = {p + 2} rows (p counts the intercept column); "
            f"got n_samples={n}."
        )
    if _constants not in ("proven", "paper"):
        raise ValueError("constants must be 'proven' or 'paper'.")
    auto_r0 = isinstance(residual_bound, str)
    if auto_r0:
        eps_r0 = product_at_most(r0_budget_fraction, epsilon)
        delta_r0 = product_at_most(r0_budget_fraction, delta)
    else:
        if not float(residual_bound) > 0:
            raise ConfigurationError("residual_bound must be 'auto' or a number > 0.")
        eps_r0 = delta_r0 = 0.0
    eps1, delta1 = difference_at_most(epsilon, eps_r0), difference_at_most(delta, delta_r0)
    if _constants == "paper" and epsilon > 1:
        raise ConfigurationError("constants='paper' (classical Gaussian) needs epsilon <= 1.")

    def plan_for(fractions):
        return _fractions_plan(n, p, eps1, delta1, fractions, leverage_bound, ptr_fail_prob,
                               leverage_slack, design_failure_prob, _constants, (eps1, delta1))

    notes = []
    if budget_split == "auto":
        best = None
        # A public grid over the PTR share f_T and the shape share f_C; the
        # location step gets the rest. A smaller f_C is kept only when the
        # shape-step cap still admits the automatic L0 (``feasible``).
        for f_C in AUTO_SHAPE_FRACTIONS:
            for f_T in np.round(np.arange(0.05, 0.9001, 0.05), 2):
                cand = plan_for((float(f_T), round(1.0 - f_C - float(f_T), 4), f_C))
                if not cand["feasible"]:
                    continue
                objective = 2 * math.log(cand["noise_per_r0"])
                if best is None or objective < best[0] - 1e-12:
                    best = (objective, cand)
        if best is None:
            chosen = plan_for((0.90, 0.05, 0.05))
            notes.append(
                "budget_split='auto' found no split with a predicted clean path at this n; "
                "using (0.90, 0.05, 0.05)."
            )
        else:
            chosen = best[1]
    elif budget_split == "paper":
        chosen = plan_for((1 / 3, 1 / 3, 1 / 3))
    else:
        fractions = tuple(float(f) for f in budget_split)
        if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-9:
            raise ConfigurationError(
                "budget_split must be 'auto', 'paper' or three positive fractions summing to 1."
            )
        chosen = plan_for(fractions)

    k, L0 = chosen["k"], chosen["leverage_bound"]
    cap_lev, cap_shape, cap_over = chosen["caps"]
    if leverage_bound != "auto":
        if L0 > cap_lev:
            raise ConfigurationError(
                f"leverage_bound={L0:.6g} exceeds 1/(96k) = {cap_lev:.6g} (k={k})."
            )
        if L0 > cap_shape:
            raise ConfigurationError(
                f"leverage_bound={L0:.6g} exceeds the shape-step cap {cap_shape:.6g} "
                "(d_PD bound 5 L_u/(1 - 5 L_u), L_u = L0/(1 - k L0), at most "
                "min(eps_shape, 0.999)/(3 ln(2/delta_shape)))."
            )
        if L0 > cap_over:
            raise ConfigurationError(
                f"leverage_bound={L0:.6g} gives a residual blow-up ln (R_2k/R0)^2 > "
                f"{MAX_LOG_BLOWUP:g} (k={k}): "
                "the noise would overflow."
            )
        if not L0 > 0:
            raise ConfigurationError("leverage_bound must be > 0.")

    clean = bool(chosen["feasible"]) and chosen["log_blowup"] <= math.log(max_blowup)
    r0_per_sigma = _residual_bound_per_sigma(n, auto_r0, residual_slack, design_failure_prob)
    ratio = chosen["noise_per_r0"] * r0_per_sigma
    if leverage_bound == "auto":
        L0_blowup = (math.log(max_blowup) / (432.0 * k * k) if _constants == "paper"
                     else _ladder_L0_for(k, math.log(max_blowup)))
        n_min = _min_n_for_clean_path(p, k, L0_blowup, leverage_slack, design_failure_prob)
        L0_max = min(chosen["caps"])
    else:
        n_min = _min_n_for_clean_path(p, k, L0, leverage_slack, design_failure_prob)
        L0_max = L0
    # FAIL is predicted when Gaussian-design leverages alone give a score above
    # tau, where the PTR PASSes with probability below 1/2 (public facts only).
    fail_predicted = _predicted_score1(n, p, k, L0) > chosen["ptr_tau"]
    n_pass = _min_n_to_pass(p, k, L0_max, chosen["ptr_tau"]) if fail_predicted else float(n)

    m = b = 0
    if auto_r0:
        m, b = r0_groups(n, eps_r0, delta_r0)
        if b >= 2 * SEGMENTS_PER_GROUP:
            b = SEGMENTS_PER_GROUP * (b // SEGMENTS_PER_GROUP)
        if b < p + 2 or not delta_r0 < 1.0 / m:
            raise ConfigurationError(
                f"residual_bound='auto' cannot run at n={n}: it splits the rows into m={m} "
                f"groups (from epsilon and delta), which leaves {b} rows per group, and it "
                f"needs at least p + 2 = {p + 2} rows per group and delta_r0 < 1/m. "
                + (f"ISSP itself is predicted to FAIL below about n = {n_pass:.3g} rows at "
                   "these settings, so a numeric residual_bound would not help."
                   if fail_predicted else
                   "Give residual_bound as a public number, or raise epsilon or "
                   "r0_budget_fraction.")
            )

    if leverage_bound == "auto" and not chosen["feasible"]:
        notes.append(
            f"At n={n}, d={d}, epsilon={epsilon:g}, delta={delta:g} a privacy cap on L0 binds "
            "below the automatic rule: the clean path is not predicted and ISSP is likely to "
            "FAIL on Gaussian-like data. Predicted minimum n for the clean path with blow-up "
            f"<= {max_blowup:g}: about {n_min:.2g}."
        )
    if chosen["log_blowup"] > math.log(max_blowup):
        notes.append(
            f"Residual-ladder blow-up (R_2k/R0)^2 = e^{chosen['log_blowup']:.3g} exceeds "
            f"max_blowup={max_blowup:g}; predicted noise c/sigma = {ratio:.3g}. Rows needed "
            f"for blow-up <= {max_blowup:g}: about {n_min:.2g}."
        )
    elif ratio > 10:
        notes.append(
            f"Predicted privacy noise c/sigma = {ratio:.3g} (> 10 times the OLS error). Rows "
            f"needed for the clean path with blow-up <= {max_blowup:g}: about {n_min:.2g}."
        )
    return ISSPPlan(
        n=n, d=d, p=p, epsilon=epsilon, delta=delta, fit_intercept=bool(fit_intercept),
        budget_split=chosen["budget_split"], eps_r0=eps_r0, delta_r0=delta_r0,
        eps_ptr=chosen["eps_ptr"], delta_ptr=chosen["delta_ptr"], eps_loc=chosen["eps_loc"],
        delta_loc=chosen["delta_loc"], eps_shape=chosen["eps_shape"],
        delta_shape=chosen["delta_shape"], delta_gauss=chosen["delta_gauss"],
        eps_unused=chosen["eps_unused"], ptr_fail_prob=float(ptr_fail_prob),
        ptr_scale=chosen["ptr_scale"],
        ptr_half_width=chosen["ptr_half_width"], ptr_tau=chosen["ptr_tau"], k=k,
        leverage_bound=L0, leverage_top=leverage_top(L0, k),
        leverage_base=leverage_base(L0, k), log_blowup=chosen["log_blowup"],
        sensitivity_per_r0=chosen["sensitivity_per_r0"], noise_per_r0=chosen["noise_per_r0"],
        constants=_constants, residual_bound=residual_bound, r0_groups=m, r0_group_size=b,
        clean_path_possible=clean, fail_predicted=bool(fail_predicted), predicted_n_pass=n_pass,
        predicted_noise_ratio=ratio, predicted_n_min=n_min,
        warnings=tuple(notes),
    )


# ---------------------------------------------------------------------------
# Private residual scale: group count
# ---------------------------------------------------------------------------
def r0_groups(n, eps0, delta0, zeta=0.01):
    """Number ``m = ceil(2 + (4/eps0)(ln(2/delta0) + ln(2/zeta)))`` and size ``b = floor(n/m)``."""
    m = int(math.ceil(2.0 + (4.0 / eps0) * (math.log(2.0 / delta0) + math.log(2.0 / zeta))))
    return m, n // m


#: Contiguous segments per residual-scale group (spreads each group over the file).
SEGMENTS_PER_GROUP = 8
