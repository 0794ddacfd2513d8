"""ISSP: Insufficient Statistics Perturbation (Brown et al., COLT 2024), corrected constants.

The normative description is ``shared/specs/issp.md`` (§6 algorithm, §8 API,
§9 implementation, §14 review errata). Pure module-level functions do the
work: :func:`issp_plan` (public planning, no data), :func:`private_residual_scale`
(spec §6.7), :func:`_issp_core` (filters, PTR, release); :class:`ISSPRegressor`
validates, calls them and stores only DP outputs and public constants.
"""

import argparse
import math
import warnings
from dataclasses import asdict, dataclass, field
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from scipy.special import expit
from scipy.stats import beta as beta_dist
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import DataConversionWarning

from .._blockwise import is_dask_collection, validate_blockwise_data
from .._compat import Interval, StrOptions, fit_context, validate_data
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import ConfigurationError, PrivateTestFailed
from ..mechanisms import (
    gaussian_precision_shaped,
    gaussian_sigma,
    ptr_calibration,
    ptr_test,
    stability_mode,
)
from ._base import LinearPredictMixin, split_intercept
from ._issp_filters import (
    ArrayRowSource,
    DaskRowSource,
    RowWeights,
    _add_partials,
    cross_pass,
    gram_piece_add,
    magnitude,
    slf_engine,
    srf_engine,
    srf_weights,
)

__all__ = [
    "ISSPRegressor",
    "ISSPFailedError",
    "ISSPConfigurationError",
    "ISSPPlanningWarning",
    "ISSPFailureWarning",
    "ISSPPlan",
    "issp_plan",
    "private_residual_scale",
    "plan_command",
    "demo_case",
]

#: Sensitivity of max(SCORE1, SCORE2) under replace-one neighbours (spec §4.4).
SCORE_SENSITIVITY = 4.0
#: Claim 18 constant: ||S_v^{1/2}(b - b')||^2 <= 3136 e^{432 k^2 L0} L0 R0^2.
CLAIM18_CONSTANT = 3136.0
#: Largest 432 k^2 L0 allowed (the noise would overflow float64 beyond it).
MAX_LOG_BLOWUP = 700.0
#: Claim 19 holds for epsilon in the open interval (0, 1): cap at 0.999 (spec §14).
SHAPE_EPSILON_CAP = 0.999
#: The release sums ``X^T diag(v) y`` from scratch when the rounding error of
#: subtracting the removed rows could exceed this fraction of the noise scale c.
RELEASE_REBASE_TOL = 1e-9
_EPS = float(np.finfo(np.float64).eps)
#: Default streaming block (rows) when ``chunk_size=None``.
DEFAULT_BLOCK = 1 << 17
_FAIL_MESSAGE = (
    "ISSP's private propose-test-release step said FAIL: the data did not look "
    "stable enough for the requested privacy level. The privacy budget of this "
    "fit is spent (see privacy_spent_). This usually means too few rows for "
    "the guarantee; see python -m skprivreg plan issp."
)


class ISSPFailedError(PrivateTestFailed):
    """ISSP's private test (PTR) or its private residual scale said FAIL.

    The budget is spent and recorded on ``privacy_spent_`` before raising; the
    message is fixed and carries no data-dependent number.
    """


class ISSPConfigurationError(ConfigurationError):
    """The ISSP request is infeasible from public facts (n, d, parameters)."""


class ISSPPlanningWarning(UserWarning):
    """Data-independent warning: the plan predicts FAIL or a very large noise."""


class ISSPFailureWarning(UserWarning):
    """``on_fail='zero'``: the private test failed; zero coefficients were released."""


# ---------------------------------------------------------------------------
# Public planning (spec §6.1, §6.6, §7)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ISSPPlan:
    """Public constants of one ISSP fit; a function of (n, d, parameters) only.

    The budget is ``(eps_r0, delta_r0)`` for the private residual scale (0 when
    ``residual_bound`` is a number), then ``(eps_ptr, delta_ptr)`` for the PTR,
    ``(eps_loc, delta_loc)`` for the Gaussian location step and
    ``(eps_shape, delta_shape)`` for the covariance shape step (Claim 19),
    combined by the weak triangle inequality into ``delta_gauss``.
    ``eps_r0 + eps_ptr + eps_loc + eps_shape + eps_unused = epsilon`` and
    ``delta_r0 + delta_ptr + delta_gauss = delta``. ``eps_unused`` is positive
    only at large epsilon, where more location budget would make the Claim-19
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
        """``c``: the release is ``N(beta_v, c^2 S_v^{-1})``."""
        return self.noise_per_r0 * float(R0)

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
        return asdict(self)


def issp_k(eps_ptr, delta_ptr, fail_prob=0.0):
    """``k = floor(tau + A) + 1`` for the truncated-Laplace PTR (spec §4.4).

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
    enters the Claim-19 cap only through ``ln(2/delta_C)``) is kept as a
    logarithm, so nothing under- or overflows for any epsilon.

    Returns ``(delta_ptr, delta_loc, log_delta_shape, delta_gauss)``.
    """
    delta_ptr = delta1 / 3.0
    D = 2.0 * delta1 / 3.0
    log_delta_shape = math.log(D / 2.0) - eps_loc
    delta_shape = math.exp(log_delta_shape)
    delta_loc = min(D / 2.0, (D - delta_shape) * math.exp(-min(eps_shape, SHAPE_EPSILON_CAP)))
    return delta_ptr, delta_loc, log_delta_shape, D


def _shape_cap(eps_shape, log_delta_shape):
    """Largest L0 allowed by Claim 19: ``56 L0 <= min(eps_C, 0.999) / (3 ln(2/delta_C))``."""
    return min(eps_shape, SHAPE_EPSILON_CAP) / (3.0 * (math.log(2.0) - log_delta_shape)) / 56.0


def _location_epsilon_cap(L0, delta1, eps_shape):
    """Largest ``eps_M`` for which the Claim-19 cap still admits ``L0`` (may be <= 0).

    With ``ln(2/delta_C) = ln(4/D) + eps_M`` (:func:`_delta_shares`), the cap
    ``min(eps_C, 0.999) / (168 ln(2/delta_C)) >= L0`` holds iff
    ``eps_M <= min(eps_C, 0.999)/(168 L0) - ln(4/D)``.
    """
    D = 2.0 * delta1 / 3.0
    if not L0 > 0 or not math.isfinite(L0):
        return -math.inf
    return min(eps_shape, SHAPE_EPSILON_CAP) / (168.0 * L0) - math.log(4.0 / D)


def _leverage_quantile(n, p, eta):
    """Upper ``eta/n`` quantile of ``Beta(p/2, (n-p)/2)``: leverages of Gaussian rows."""
    return float(beta_dist.isf(eta / n, p / 2.0, (n - p) / 2.0))


def _auto_leverage_bound(n, p, k, slack, eta):
    """``L0`` with ``L_base = e^{-2} L0/(1+2kL0) = slack * q`` (spec §6.6); inf if impossible."""
    g = math.e**2 * slack * _leverage_quantile(n, p, eta)
    if 2.0 * k * g >= 1.0:
        return math.inf
    return g / (1.0 - 2.0 * k * g)


def _residual_bound_per_sigma(n, auto, slack, eta):
    """Predicted ``R0 / sigma`` for planning (Gaussian noise)."""
    if auto:
        # sigma2_up lies in [1, sqrt(2)] sigma^2; the middle is 2^(1/4).
        return slack * 2.0**0.125 * math.sqrt(2.0 * math.log(2.0 * n / eta))
    return float(norm.isf(eta / (2.0 * n)))


def _fractions_plan(n, p, eps1, delta1, fractions, leverage_bound, fail_prob, slack, eta,
                    constants, epsilon_paper):
    f_T, f_M, f_C = fractions
    eps_ptr, eps_loc, eps_shape = f_T * eps1, f_M * eps1, f_C * eps1
    k, cal = issp_k(eps_ptr, delta1 / 3.0, fail_prob)
    cap_lev, cap_over = 1.0 / (96.0 * k), MAX_LOG_BLOWUP / (432.0 * k * k)
    wanted = (_auto_leverage_bound(n, p, k, slack, eta) if leverage_bound == "auto"
              else float(leverage_bound))
    # The shape step's delta_C is e^{-eps_M} small (weak triangle inequality),
    # so a large location epsilon tightens the Claim-19 cap on L0 like
    # 1/eps_M. Spend on the location step only up to the epsilon at which the
    # cap still admits the L0 the other caps allow; the rest of the share is
    # left unspent (recorded as eps_unused). Public facts only.
    target = min(wanted, cap_lev, cap_over)
    eps_loc_max = _location_epsilon_cap(target, delta1, eps_shape) * (1.0 - 1e-12)
    eps_unused = 0.0
    if 0 < eps_loc_max < eps_loc:
        eps_unused, eps_loc = eps_loc - eps_loc_max, eps_loc_max
    delta_ptr, delta_loc, log_delta_shape, delta_gauss = _delta_shares(delta1, eps_loc,
                                                                       eps_shape)
    caps = (cap_lev, _shape_cap(eps_shape, log_delta_shape), cap_over)
    if leverage_bound == "auto":
        L0 = min(wanted, *caps)
        feasible = wanted <= min(caps)
    else:
        L0 = wanted
        feasible = L0 <= caps[0] and L0 <= caps[1] and L0 <= caps[2]
    log_blowup = 432.0 * k * k * L0
    sens = math.sqrt(CLAIM18_CONSTANT * L0) * math.exp(min(log_blowup, MAX_LOG_BLOWUP) / 2.0)
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
    Gaussian rows; spec §6.6). For large k the minimum runs over at most 257
    evenly spaced levels including 0 and k: ``N_j`` decreases in ``j``, so this
    overstates the minimum by at most the spacing ``k/256``.
    """
    top = L0 / (1.0 + 2.0 * k * L0)
    levels = np.unique(np.round(np.linspace(0, k, min(k + 1, 257)))).astype(np.float64)
    thresholds = np.exp((levels - 2 * k) / k) * top
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
    target = math.exp(-2.0) * L0 / (1.0 + 2.0 * k * L0) / slack

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
    n,
    d,
    epsilon=1.0,
    delta=1e-6,
    *,
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
    """Public planning for ISSP (spec §6.1, §6.6): k, L0, the budget split and c/R0.

    Uses only ``n``, ``d`` and the parameters; touches no data. Raises
    :class:`ISSPConfigurationError` when the request is infeasible from these
    public facts (n < p + 2, delta outside (0, 0.1], L0 above
    ``1/(96k)`` or the Claim-19 cap, ``432 k^2 L0 > 700``, too few rows for
    the private residual scale).

    Returns
    -------
    ISSPPlan
        ``k``, ``leverage_bound`` (L0), ``noise_per_r0`` (c/R0),
        ``predicted_noise_ratio`` (c/sigma on clean Gaussian data, i.e. the
        privacy error relative to the OLS error), ``predicted_n_min`` (the
        smallest n whose Gaussian design is on the clean path with blow-up
        ``e^{432k^2L0} <= max_blowup`` at this k) and data-independent
        warnings.
    """
    n, d = int(n), int(d)
    p = d + int(bool(fit_intercept))
    epsilon, delta = float(epsilon), float(delta)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ISSPConfigurationError("ISSP needs a finite epsilon > 0.")
    if not 0 < delta <= 0.1:
        raise ISSPConfigurationError("ISSP needs delta in (0, 0.1].")
    if n < p + 2:
        raise ISSPConfigurationError(
            f"ISSP needs n >= p + 2 = {p + 2} rows (p counts the intercept column); "
            f"got n_samples={n}."
        )
    if _constants not in ("proven", "paper"):
        raise ValueError("constants must be 'proven' or 'paper'.")
    auto_r0 = isinstance(residual_bound, str)
    if auto_r0:
        eps_r0, delta_r0 = r0_budget_fraction * epsilon, r0_budget_fraction * delta
    else:
        if not float(residual_bound) > 0:
            raise ISSPConfigurationError("residual_bound must be 'auto' or a number > 0.")
        eps_r0 = delta_r0 = 0.0
    eps1, delta1 = epsilon - eps_r0, delta - delta_r0
    if _constants == "paper" and epsilon > 1:
        raise ISSPConfigurationError("constants='paper' (classical Gaussian) needs epsilon <= 1.")

    def plan_for(fractions):
        return _fractions_plan(n, p, eps1, delta1, fractions, leverage_bound, ptr_fail_prob,
                               leverage_slack, design_failure_prob, _constants, (eps1, delta1))

    notes = []
    if budget_split == "auto":
        best = None
        for f_T in np.round(np.arange(0.10, 0.9001, 0.05), 2):
            cand = plan_for((float(f_T), round(0.95 - float(f_T), 2), 0.05))
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
            raise ISSPConfigurationError(
                "budget_split must be 'auto', 'paper' or three positive fractions summing to 1."
            )
        chosen = plan_for(fractions)

    k, L0 = chosen["k"], chosen["leverage_bound"]
    cap_lev, cap_shape, cap_over = chosen["caps"]
    if leverage_bound != "auto":
        if L0 > cap_lev:
            raise ISSPConfigurationError(
                f"leverage_bound={L0:.6g} exceeds 1/(96k) = {cap_lev:.6g} (k={k})."
            )
        if L0 > cap_shape:
            raise ISSPConfigurationError(
                f"leverage_bound={L0:.6g} exceeds the Claim-19 cap {cap_shape:.6g} "
                "(56 L0 <= min(eps_shape, 0.999)/(3 ln(2/delta_shape)))."
            )
        if L0 > cap_over:
            raise ISSPConfigurationError(
                f"leverage_bound={L0:.6g} gives 432 k^2 L0 > {MAX_LOG_BLOWUP:g} (k={k}): "
                "the noise would overflow."
            )
        if not L0 > 0:
            raise ISSPConfigurationError("leverage_bound must be > 0.")

    clean = bool(chosen["feasible"]) and chosen["log_blowup"] <= math.log(max_blowup)
    r0_per_sigma = _residual_bound_per_sigma(n, auto_r0, residual_slack, design_failure_prob)
    ratio = chosen["noise_per_r0"] * r0_per_sigma
    if leverage_bound == "auto":
        L0_blowup = math.log(max_blowup) / (432.0 * k * k)
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
            raise ISSPConfigurationError(
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
            f"Residual-ladder blow-up e^(432 k^2 L0) = e^{chosen['log_blowup']:.3g} exceeds "
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
        leverage_bound=L0, leverage_top=L0 / (1 + 2 * k * L0),
        leverage_base=math.exp(-2) * L0 / (1 + 2 * k * L0), log_blowup=chosen["log_blowup"],
        sensitivity_per_r0=chosen["sensitivity_per_r0"], noise_per_r0=chosen["noise_per_r0"],
        constants=_constants, residual_bound=residual_bound, r0_groups=m, r0_group_size=b,
        clean_path_possible=clean, fail_predicted=bool(fail_predicted), predicted_n_pass=n_pass,
        predicted_noise_ratio=ratio, predicted_n_min=n_min,
        warnings=tuple(notes),
    )


# ---------------------------------------------------------------------------
# Private residual scale (spec §6.7)
# ---------------------------------------------------------------------------
def r0_groups(n, eps0, delta0, zeta=0.01):
    """Number ``m = ceil(2 + (4/eps0)(ln(2/delta0) + ln(2/zeta)))`` and size ``b = floor(n/m)``."""
    m = int(math.ceil(2.0 + (4.0 / eps0) * (math.log(2.0 / delta0) + math.log(2.0 / zeta))))
    return m, n // m


#: Contiguous segments per residual-scale group (spreads each group over the file).
SEGMENTS_PER_GROUP = 8


def _segment_groups(m, b, rng):
    """Data-independent partition: segment ``i`` (rows ``[i s, (i+1) s)``) -> group.

    The first ``m b'`` rows (``b' = r floor(b/r)``, ``r`` segments per group) are
    cut into ``m r`` contiguous segments of ``s = b'/r`` rows, dealt to the ``m``
    groups by a uniformly random permutation from the public generator; the
    remaining rows are unused. Each group is ``r`` segments scattered over the
    data, and every per-group Gram matrix is a few BLAS calls on contiguous
    slices, so this pass costs about one Gram pass and also yields the Gram
    matrix of all rows (spec §6.7 uses a random permutation of rows; any
    data-independent partition is equally private, and for i.i.d. rows
    equally accurate).
    """
    r = SEGMENTS_PER_GROUP if b >= 2 * SEGMENTS_PER_GROUP else 1
    seg = b // r
    return np.repeat(np.arange(m), r)[rng.permutation(m * r)], seg, m * r * seg


def _group_rss(grams, p):
    """``RSS_j = min_beta ||y - X beta||^2`` of each group from its augmented Gram matrix.

    The last pivot of the Cholesky factor of ``[X y]^T [X y]`` squared is the
    Schur complement ``y^T y - t^T S^{-1} t`` = RSS; a group whose factor fails
    (rank-deficient design or an exact fit) uses a pseudo-inverse instead.
    ``RSS_j`` is a function of group ``j``'s Gram matrix alone, bit for bit:
    the stacked factorisation is LAPACK's per-matrix routine applied to each
    group, and when one group fails every group is redone on its own, so one
    degenerate group never changes the method (or the bits) of another. The
    histogram's sensitivity analysis needs exactly this.
    """
    try:
        return np.linalg.cholesky(grams)[:, p, p] ** 2
    except np.linalg.LinAlgError:
        pass
    return np.concatenate([_one_group_rss(grams[j:j + 1], p) for j in range(len(grams))])


def _one_group_rss(gram, p):
    """:func:`_group_rss` of a stack holding one group."""
    try:
        return np.linalg.cholesky(gram)[:, p, p] ** 2
    except np.linalg.LinAlgError:
        return _group_rss_pinv(gram, p)


def _group_rss_pinv(grams, p):
    """RSS by a pseudo-inverse of each (scaled) Gram matrix of the stack."""
    # Jacobi scaling first: the projection is invariant to column scales, and
    # eigh of the scaled matrix is accurate for badly scaled columns.
    diag = np.einsum("gii->gi", grams[:, :p, :p])
    scale = np.sqrt(np.where(diag > 0, diag, 1.0))
    S = grams[:, :p, :p] / (scale[:, :, None] * scale[:, None, :])
    t = grams[:, :p, p] / scale
    yy = grams[:, p, p]
    vals, vecs = np.linalg.eigh(S)
    proj = np.einsum("gij,gi->gj", vecs, t)
    cutoff = p * np.finfo(np.float64).eps * np.maximum(vals[:, -1:], 0.0)
    keep = vals > cutoff
    fitted = np.sum(np.where(keep, proj**2 / np.where(keep, vals, 1.0), 0.0), axis=1)
    return np.maximum(yy - fitted, 0.0)


def _group_gram_block(offset, Xb, yb, params, into=None, check_finite=False):
    """Block function of :func:`_group_grams`: upper triangles ``(grams, rest)`` of one block."""
    p, intercept, seg_group, seg, used, m = params
    if into is None:
        into = (np.zeros((m, p + 1, p + 1)), np.zeros((p + 1, p + 1)))
    grams, rest = into
    start, stop = offset, offset + Xb.shape[0]
    lo = start
    while lo < stop:
        if lo >= used:
            gram_piece_add(rest, Xb[lo - start:], yb[lo - start:], intercept,
                           check_finite=check_finite)
            break
        i = lo // seg
        hi = min(stop, (i + 1) * seg, used)
        gram_piece_add(grams[seg_group[i]], Xb[lo - start:hi - start],
                       yb[lo - start:hi - start], intercept, check_finite=check_finite)
        lo = hi
    return into


def _group_grams(source, seg_group, seg, used, m):
    """One pass: augmented Gram ``[X~ y]^T [X~ y]`` of each group and of the unused rows.

    Group ``j`` is the union of the segments ``i`` with ``seg_group[i] == j``
    (rows ``[i seg, (i+1) seg)``, all below ``used``); ``grams[j]`` depends on
    those rows only. Returns ``(grams, rest)``, symmetric, shapes
    ``(m, p+1, p+1)`` and ``(p+1, p+1)``; ``grams.sum(0) + rest`` is the Gram
    matrix of all rows. ``seg_group`` is public (drawn on the driver); on Dask
    it is shipped to the workers with the block function.
    """
    p = source.p
    params = (p, source.fit_intercept, np.asarray(seg_group), int(seg), int(used), int(m))
    grams, rest = source.reduce(_group_gram_block, _add_partials, params)
    grams = np.triu(grams)
    grams += np.swapaxes(np.triu(grams, 1), 1, 2)
    rest = np.triu(rest)
    rest += np.triu(rest, 1).T
    return grams, rest


def _residual_scale_label(psi):
    """Histogram bin of one group's ``psi``: ``floor(4 log2 psi)``, ``'zero'`` or ``'overflow'``.

    A group whose Gram matrix overflowed float64 (a finite row above about
    1e154) has a non-finite ``psi``; it gets its own public label, which is a
    function of that group's rows only like every other label.
    """
    if not math.isfinite(psi):
        return "overflow"
    return "zero" if psi <= 0 else int(math.floor(4.0 * math.log2(psi)))


def _residual_scale_tie_key(label):
    return {"zero": -math.inf, "overflow": math.inf}.get(label, label)


def private_residual_scale(source, eps0, delta0, rng_partition, rng_noise, *,
                           residual_slack=1.0, eta=0.01, zeta=0.01, return_gram=False):
    """Private residual bound R0 (spec §6.7): ``(R0, sigma2_up)`` or ``None`` (bottom).

    Groups of ``b' <= floor(n/m)`` rows from a data-independent partition
    (:func:`_segment_groups`); ``psi_j = RSS_j/(b' - p)``; geometric bins
    ``[2^{t/4}, 2^{(t+1)/4})``; the Karwa-Vadhan stability histogram at
    ``(eps0, delta0)`` (:func:`~skprivreg.mechanisms.stability_mode`). With
    ``t*`` the released bin, ``sigma2_up = 2^{(2t*+3)/8}`` and
    ``R0 = slack sigma_up sqrt(2 ln(2n/eta))``. One row changes one ``psi_j``,
    hence one bin count by -1 and one by +1.

    With ``return_gram=True`` the result also carries the augmented Gram
    matrix ``[X~ y]^T [X~ y]`` of all rows (sum of the group matrices and of
    the unused rows), which the leverage filter reuses: no extra pass.

    Privacy: the partition depends only on ``n`` and the public generator, and
    ``psi_j`` is a function of group ``j``'s rows only (its Gram matrix is
    accumulated from those rows alone; the shared pass changes floating-point
    summation order, not this dependence), so the histogram analysis is unchanged.
    """
    n, p = source.n, source.p
    m, b = r0_groups(n, eps0, delta0, zeta)
    seg_group, seg, used = _segment_groups(m, b, rng_partition)
    b_eff = used // m
    grams, rest = _group_grams(source, seg_group, seg, used, m)
    psi = _group_rss(grams, p) / (b_eff - p)
    labels = [_residual_scale_label(v) for v in psi]
    mode = stability_mode(labels, eps0, delta0, rng_noise, tie_key=_residual_scale_tie_key)
    total = grams.sum(axis=0) + rest if return_gram else None
    if mode is None or mode in ("zero", "overflow"):
        return None
    sigma2_up = 2.0 ** ((2 * mode + 3) / 8.0)
    R0 = residual_slack * math.sqrt(sigma2_up) * math.sqrt(2.0 * math.log(2.0 * n / eta))
    return (R0, sigma2_up, total) if return_gram else (R0, sigma2_up)


# ---------------------------------------------------------------------------
# The core mechanism (spec §6.4) and the test hook
# ---------------------------------------------------------------------------
@dataclass
class ISSPTrace:
    """Everything the core computed. NOT differentially private: tests only.

    ``score1`` (integer), ``score2_num`` (= k SCORE2, integer), ``score``
    (= max, a multiple of 1/k), ``passed`` (the PTR bit), ``beta_hat`` (the
    weighted OLS on ``v``), ``precision_factor`` (``G_v`` with
    ``G_v G_v^T = S_v``), ``beta_tilde`` (the release), ``W``/``V`` (dense
    integer weights ``k w`` and ``k^2 v``, only with ``dense=True``),
    ``n_passes`` (data passes).
    """

    k: int
    score1: int
    score2_num: int
    score: float
    passed: bool
    beta_hat: object = None
    precision_factor: object = None
    beta_tilde: object = None
    W: object = None
    V: object = None
    n_passes: int = 0
    noise_scale: float = 0.0


def _issp_core(source, *, k, L0, R0, c, eps_ptr, delta_ptr, ptr_fail_prob, rng_ptr,
               rng_noise, n_candidates=None, dense=False, gram=None):
    """Filters, PTR and Gaussian release on a row source, with explicit constants.

    Calls with hand-picked (small) constants are mechanics tests, not private
    runs; :class:`ISSPRegressor` passes the constants of :func:`issp_plan`.
    """
    n, p = source.n, source.p
    slf = slf_engine(source, L0, k, n_candidates=n_candidates, dense_weights=False,
                     gram=gram)
    passes = slf.n_passes
    srf = None
    W_idx = slf.removed_idx
    W_val = np.clip(2 * k - slf.removed_level, 0, k).astype(np.int64)
    if slf.score >= k:
        score2_num = k * k
    else:
        if len(W_idx) == 0:
            lev, res = slf.scan
            h_max = max(float(np.max(lev.key, initial=0.0)), lev.outside_max)
            srf = srf_engine(source, W_idx, W_val, L0, R0, k, n_candidates=n_candidates,
                             base=slf.factor, base_scan=res, h_bound=h_max * (1 + 1e-9))
        else:
            srf = srf_engine(source, W_idx, W_val, L0, R0, k, n_candidates=n_candidates)
        score2_num = srf.score_num
        passes += srf.n_passes
    score_num = max(k * slf.score, score2_num)
    score = score_num / k
    passed, _ = ptr_test(score, SCORE_SENSITIVITY, eps_ptr, delta_ptr, rng_ptr, ptr_fail_prob)
    # With k = floor(tau + A) + 1 a capped score FAILs with probability 1 anyway;
    # the explicit rule also covers mechanics runs with hand-picked k.
    passed = passed and score_num < k * k
    trace = ISSPTrace(k, int(slf.score), int(score2_num), score, bool(passed), n_passes=passes,
                      noise_scale=float(c))
    if dense:
        W = np.full(n, k, dtype=np.int64)
        W[slf.removed_idx] = np.clip(2 * k - slf.removed_level, 0, k)
        trace.W = W
        if srf is not None and score2_num < k * k:
            trace.V = srf_weights(n, k, W, srf.F_idx, srf.F_level)
    if not passed:
        return trace
    # Release: S_v = G (I - Z_F^T diag(w_F - v_F) Z_F) G^T in the basis of S_w = G G^T.
    G = srf.factor.G
    if len(srf.F_idx):
        survive = np.clip(2 * k - srf.F_level, 0, k) / k
        omega = (srf.Fw / k) * (1.0 - survive)
        K = np.eye(p) - (srf.Fz.T * omega) @ srf.Fz
        terms = srf.Fz.T * (omega * srf.Fy)
        mag = magnitude(srf.factor.theta) + magnitude(terms)
        if _EPS * p * mag > RELEASE_REBASE_TOL * c:
            # Subtracting the removed rows could cancel (a huge label): sum
            # X~^T diag(v) y over the rows again instead (rebase rule).
            v_of = dict(zip(W_idx.tolist(), (W_val / k).tolist()))
            v_of.update(zip(srf.F_idx.tolist(), ((srf.Fw / k) * survive).tolist()))
            weights = RowWeights.from_pairs(list(v_of), list(v_of.values()))
            b = linalg.solve_triangular(G, cross_pass(source, weights), lower=True,
                                        check_finite=False)
            trace.n_passes += 1
        else:
            b = srf.factor.theta - terms.sum(axis=1)
    else:
        K = np.eye(p)
        b = srf.factor.theta
    Lk = linalg.cholesky(K, lower=True, check_finite=False)
    theta_hat = linalg.cho_solve((Lk, True), b, check_finite=False)
    trace.beta_hat = linalg.solve_triangular(G.T, theta_hat, lower=False, check_finite=False)
    trace.precision_factor = G @ Lk
    trace.beta_tilde = gaussian_precision_shaped(trace.beta_hat, trace.precision_factor, c,
                                                 rng_noise)
    return trace


def _row_source(X, y, *, fit_intercept, chunk_size, clip, check_finite):
    """The row source of a fit: Dask blocks on the workers, or in-order blocks here.

    Dask input keeps its own row chunks (``chunk_size`` is ignored) and is
    checked for NaN or infinity by the block functions of the first pass.
    """
    if is_dask_collection(X):
        return DaskRowSource(X, y, fit_intercept=fit_intercept, clip=clip, check_finite=True)
    return ArrayRowSource(X, y, fit_intercept=fit_intercept,
                          chunk_size=chunk_size or DEFAULT_BLOCK, clip=clip,
                          check_finite=check_finite)


def _issp_trace(X, y, *, n_candidates=None, dense=True, _constants="proven", **params):
    """Run ISSP with the public planning and return its full trace.

    **NOT differentially private — for testing and research only.** The
    trace holds the scores, the weights and the non-private weighted OLS
    ``beta_hat``. Parameters are those of :class:`ISSPRegressor`.
    """
    est = ISSPRegressor(**params)
    est._validate_params()
    if is_dask_collection(X):
        X, y = validate_blockwise_data(est, X, y, multi_output=False)
    else:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
    plan = est._plan(X.shape[0], X.shape[1], constants=_constants)
    est._refuse_predicted_fail(plan)
    rngs = {**est._public_rngs("partition"), **est._secret_rngs("histogram", "ptr", "noise")}
    source = _row_source(X, y, fit_intercept=est.fit_intercept, chunk_size=est.chunk_size,
                         clip=est.feature_clip, check_finite=False)
    if isinstance(est.residual_bound, str):
        r0 = private_residual_scale(source, plan.eps_r0, plan.delta_r0, rngs["partition"],
                                    rngs["histogram"], residual_slack=est.residual_slack,
                                    eta=est.design_failure_prob, return_gram=True)
        if r0 is None:
            return None
        R0, gram = r0[0], r0[2]
    else:
        R0, gram = float(est.residual_bound), None
    return _issp_core(source, k=plan.k, L0=plan.leverage_bound, R0=R0,
                      c=plan.noise_scale(R0), eps_ptr=plan.eps_ptr, delta_ptr=plan.delta_ptr,
                      ptr_fail_prob=plan.ptr_fail_prob, rng_ptr=rngs["ptr"],
                      rng_noise=rngs["noise"], n_candidates=n_candidates, dense=dense,
                      gram=gram)


# ---------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------
class ISSPRegressor(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Private least squares by Insufficient Statistics Perturbation (Brown et al. 2024).

    ISSP down-weights high-leverage and high-residual rows with two
    deterministic, stability-engineered filters, tests privately (PTR) that
    few rows were filtered, and releases

    .. math::
        \\tilde\\beta \\sim N\\big(\\hat\\beta_v,\\ c^2 S_v^{-1}\\big),\\qquad
        S_v = \\tilde X^\\top \\mathrm{diag}(v)\\tilde X,\\quad
        \\hat\\beta_v = S_v^{-1}\\tilde X^\\top \\mathrm{diag}(v) y .

    The noise has the shape of :math:`S_v^{-1}`, so the error does not depend
    on the condition number of :math:`X^\\top X`; no norm bounds on rows or
    labels are needed. On clean data (every leverage at most
    ``L_base = e^{-2} L0/(1+2kL0)`` and every OLS residual at most ``R0``) the
    output is exactly :math:`N(\\beta_{ols}, c^2 (\\tilde X^\\top\\tilde X)^{-1})`.

    **Guarantee.** Full DP (the whole row ``(x_i, y_i)`` is protected) under
    replace-one neighbouring (n public): ``(epsilon, delta)``-DP for every
    ``epsilon > 0`` and ``delta in (0, 0.1]``, in exact arithmetic (float
    caveats below). **Corrected constants** (spec §4-§5): the paper's PTR
    lemma (Claim 16) is false, so ``k = floor(tau + A) + 1`` for a
    truncated-Laplace PTR of sensitivity 4 (about 1.7 times the paper's k);
    the printed leverage schedule breaks Theorem 9, so the thresholds are
    ``L_j = e^{(j-2k)/k} L0/(1+2kL0)``; the Claim-19 cap is
    ``56 L0 <= min(eps_C, 0.999)/(3 ln(2/delta_C))``; the location step uses
    the analytic Gaussian mechanism so any epsilon is allowed.

    **Budget split inside fit.** ``r0_budget_fraction`` of (epsilon, delta)
    for the private residual scale (``residual_bound='auto'``, Karwa-Vadhan
    stability histogram), then the rest ``(eps1, delta1)`` as
    ``budget_split = (f_T, f_M, f_C)`` of eps1 for PTR / location / shape and
    ``delta1/3`` for the PTR, ``D = 2 delta1/3`` for the two Gaussian steps
    combined by the weak triangle inequality
    (``delta_C = (D/2) e^{-eps_M}``, ``delta_M = min(D/2, (D - delta_C)
    e^{-min(eps_C, 0.999)})``; valid and overflow-free for every epsilon).
    At large epsilon the location step spends only up to the epsilon at which
    the Claim-19 cap still admits L0; the rest is not spent
    (``planning_['eps_unused']``, and ``privacy_spent_`` says so).
    ``budget_split='auto'`` picks f_T from public facts to minimise the
    predicted noise.

    **Required bounds.** None. ``leverage_bound`` (L0) and ``residual_bound``
    (R0) are public tuning constants; ``'auto'`` uses a data-independent
    Gaussian-design rule for L0 and a private estimate for R0. Never tune
    them on the same data without charging budget.

    **Failure behaviour.** Infeasible requests (from n, d and parameters
    only) raise :class:`ISSPConfigurationError` before any data access, and
    so, by default, does a request the public planner predicts to FAIL at
    this n (the message states the n from which a PASS is predicted;
    ``predicted_fail='spend'`` runs anyway). A
    data-dependent FAIL (PTR, or no stable residual scale) spends the whole
    budget, records ``privacy_spent_`` and ``ptr_passed_ = False``, then
    raises :class:`ISSPFailedError` (``on_fail='raise'``) or releases zeros
    with :class:`ISSPFailureWarning` (``on_fail='zero'``). There is never a
    non-private fallback.

    **Minimum sample size.** With the proven constants ISSP is practical only
    for very large n: for d = 20, delta = 1e-6 (equal split, blow-up e) the
    clean path needs about 7.8e8 / 3.4e10 / 1.2e11 rows at epsilon = 8 / 1 /
    0.5. Below about 1e8 rows it FAILs or adds noise at least 1e3 times the
    OLS error. ``python -m skprivreg plan issp --n N --d D --epsilon E --delta DL``
    (or :func:`issp_plan`) prints the numbers; ``planning_`` holds them.

    **Dask.** ``X`` and ``y`` may be a Dask array or Dask DataFrame/Series
    (with known chunk sizes). Every data pass is one task per row chunk on
    the workers (Gram matrices, TSQR, leverage and residual scans, the
    residual-scale group Grams), reduced in a tree; only small statistics and
    candidate rows reach the driver, where all filtering decisions, the PTR
    and the noise happen (nothing random runs on a worker; the residual-scale
    partition is drawn on the driver). Finiteness is checked on the workers in
    the first pass, before any noise. Same ``random_state`` gives the NumPy
    result up to float64 summation order (and the same number of passes: 2
    on clean data). ``predict`` accepts Dask input and returns a Dask array.

    **Floating point.** Exact arithmetic is assumed (Mironov 2012 attacks and
    timing channels are out of scope). Extreme rows are handled by a
    certified Gram factor with a row-sorted TSQR fallback and by recomputing
    factors from scratch after removing a row of leverage above 1/2; whether
    a design is singular is decided in exact arithmetic (a backward-error
    certificate, else an exact integer Gram matrix and exact minors), so no
    tolerance cut exists for one row to cross; residual filtering and the
    release sum the kept rows again instead of subtracting a removed row
    whose label could cancel. Rows and labels up to 1e300 change the scores
    within their proven sensitivity (tested on every neighbouring pair of a
    brute-force harness). Exactly collinear columns (including a constant
    column with ``fit_intercept=True``) make ISSP FAIL. Remaining caveat:
    columns that differ only in the last few bits give inaccurate leverages.
    ``feature_clip`` adds a public per-entry clip of X that bounds the
    dynamic range.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total epsilon, including the residual-scale estimate.
    delta : float, default=1e-6
        Total delta, in (0, 0.1]; a warning is emitted if delta >= 1/n.
    leverage_bound : 'auto' or float, default='auto'
        L0, at most ``1/(96k)`` and the Claim-19 cap.
    residual_bound : 'auto' or float, default='auto'
        R0 in units of y; ``'auto'`` estimates it privately.
    fit_intercept : bool, default=True
        Append a ones column (a per-row map; data-mean centering is never used).
    budget_split : 'auto', 'paper' or tuple of 3 floats, default='auto'
        Shares of eps1 for PTR, location and shape.
    r0_budget_fraction : float in (0, 0.5), default=0.05
        Share of (epsilon, delta) for the private residual scale.
    ptr_fail_prob : float in [0, 0.5), default=0.0
        beta: probability of FAIL on clean data, traded for a smaller k.
    leverage_slack : float >= 1, default=1.25
        gamma_L in the automatic L0 rule.
    residual_slack : float >= 1, default=1.0
        gamma_R in the automatic R0 rule (raise for non-Gaussian noise).
    design_failure_prob : float in (0, 0.5), default=0.01
        Tail probabilities of the automatic rules.
    max_blowup : float >= 1, default=10.0
        Planning-warning threshold on ``e^{432 k^2 L0}``.
    on_fail : {'raise', 'zero'}, default='raise'
        Behaviour on a data-dependent FAIL.
    predicted_fail : {'refuse', 'spend'}, default='refuse'
        What to do when the public planner predicts that ISSP FAILs at this
        ``n`` (Gaussian-design leverages above the clean-path bound, a fact of
        ``n``, ``d`` and the parameters only). ``'refuse'`` raises
        :class:`ISSPConfigurationError` before any budget is spent, stating the
        number of rows the clean path needs; ``'spend'`` runs anyway (the
        private test then most likely FAILs and the budget is spent).
    chunk_size : int >= 1024 or None, default=None
        Rows per block of the streaming passes; ``None`` streams an in-memory
        array in blocks of 131072 rows. ``np.memmap`` inputs are never loaded
        whole. Ignored for Dask input, whose own row chunks are the blocks.
    feature_clip : float > 0 or None, default=None
        Public per-entry clip of X to ``[-feature_clip, feature_clip]``
        (part of the guarantee: it is a fixed per-row map).
    accountant : BudgetAccountant or None, default=None
        Checked before any data access, charged on PASS and on FAIL.
    random_state : None, int or numpy.random.Generator, default=None
        Never publish a seed used on private data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        DP output.
    intercept_ : float
        DP output (0.0 if ``fit_intercept=False``).
    ptr_passed_ : bool
        The PTR bit (DP output).
    k_, leverage_bound_, budget_split_ : int, float, tuple
        Public constants of the plan.
    noise_scale_ : float
        c (public given R0).
    residual_bound_, sigma2_upper_ : float
        R0 and the private sigma^2 upper estimate (DP outputs; sigma2_upper_
        is None when R0 was given).
    privacy_spent_ : PrivacyLedger
    planning_ : dict
        Public planning numbers (:class:`ISSPPlan` as a dict).
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    References
    ----------
    G. Brown, J. Hayase, S. Hopkins, W. Kong, X. Liu, S. Oh, J. C. Perdomo,
    A. Smith, "Insufficient Statistics Perturbation: Stable Estimators for
    Private Least Squares", COLT 2024 (arXiv 2404.15409).
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "leverage_bound": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="neither")],
        "residual_bound": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "budget_split": [StrOptions({"auto", "paper"}), tuple, list],
        "r0_budget_fraction": [Interval(Real, 0, 0.5, closed="neither")],
        "ptr_fail_prob": [Interval(Real, 0, 0.5, closed="left")],
        "leverage_slack": [Interval(Real, 1, None, closed="left")],
        "residual_slack": [Interval(Real, 1, None, closed="left")],
        "design_failure_prob": [Interval(Real, 0, 0.5, closed="neither")],
        "max_blowup": [Interval(Real, 1, None, closed="left")],
        "on_fail": [StrOptions({"raise", "zero"})],
        "predicted_fail": [StrOptions({"refuse", "spend"})],
        "chunk_size": [Interval(Integral, 1024, None, closed="left"), None],
        "feature_clip": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        leverage_bound="auto",
        residual_bound="auto",
        fit_intercept=True,
        budget_split="auto",
        r0_budget_fraction=0.05,
        ptr_fail_prob=0.0,
        leverage_slack=1.25,
        residual_slack=1.0,
        design_failure_prob=0.01,
        max_blowup=10.0,
        on_fail="raise",
        predicted_fail="refuse",
        chunk_size=None,
        feature_clip=None,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.leverage_bound = leverage_bound
        self.residual_bound = residual_bound
        self.fit_intercept = fit_intercept
        self.budget_split = budget_split
        self.r0_budget_fraction = r0_budget_fraction
        self.ptr_fail_prob = ptr_fail_prob
        self.leverage_slack = leverage_slack
        self.residual_slack = residual_slack
        self.design_failure_prob = design_failure_prob
        self.max_blowup = max_blowup
        self.on_fail = on_fail
        self.predicted_fail = predicted_fail
        self.chunk_size = chunk_size
        self.feature_clip = feature_clip
        self.accountant = accountant
        self.random_state = random_state

    def _plan(self, n, d, constants="proven"):
        return issp_plan(
            n, d, self.epsilon, self.delta, fit_intercept=self.fit_intercept,
            leverage_bound=self.leverage_bound, residual_bound=self.residual_bound,
            budget_split=self.budget_split, r0_budget_fraction=self.r0_budget_fraction,
            ptr_fail_prob=self.ptr_fail_prob, leverage_slack=self.leverage_slack,
            residual_slack=self.residual_slack, design_failure_prob=self.design_failure_prob,
            max_blowup=self.max_blowup, _constants=constants,
        )

    def __sklearn_is_fitted__(self):
        return hasattr(self, "coef_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        tags.input_tags.sparse = False
        return tags

    @staticmethod
    def _single_target(y):
        if y.ndim == 2 and y.shape[1] > 1:
            raise ValueError(
                "ISSPRegressor supports a single target. q targets need q fits, each with "
                "a share of (epsilon, delta) (basic composition); k then grows about "
                "linearly in q and the required n about quadratically."
            )
        if y.ndim == 2:
            warnings.warn("A column-vector y was passed when a 1d array was expected; "
                          "it was raveled.", DataConversionWarning, stacklevel=4)
        return y.reshape(-1)

    def _streamed(self, X):
        return isinstance(X, np.memmap) or (self.chunk_size is not None and hasattr(X, "dtype"))

    def _validate_input(self, X, y):
        if is_dask_collection(X) or is_dask_collection(y):
            # Shapes and dtypes only; finiteness is checked on the workers in the
            # first pass, before any noise (DaskRowSource).
            return validate_blockwise_data(self, X, y, multi_output=False)
        if self._streamed(X):
            # Streamed input: never load X whole; check finiteness block by block.
            validate_data(self, X, skip_check_array=True)
            if np.ndim(X) != 2:
                raise ValueError("X must be a 2-D array.")
            y = self._single_target(np.asarray(y, dtype=np.float64))
            if y.shape[0] != X.shape[0]:
                raise ValueError("X and y have inconsistent numbers of rows.")
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity.")
            # X itself is checked block by block during the first data pass,
            # which releases nothing (ArrayRowSource(check_finite=True)).
            return X, y
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=True,
                             y_numeric=True, accept_sparse=False, multi_output=True)
        return X, self._single_target(y)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit privately; see the class docstring for the guarantee.

        Parameters
        ----------
        X : array-like, np.memmap, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : array-like or Dask array/Series of shape (n_samples,)

        Returns
        -------
        self
        """
        self._reset()
        private = self._validate_privacy_params()
        X, y = self._validate_input(X, y)
        n, d = X.shape
        p = d + int(self.fit_intercept)
        if n < p + 2:
            raise ISSPConfigurationError(
                f"ISSP needs n >= p + 2 = {p + 2} rows (p counts the intercept column); "
                f"got n_samples={n}."
            )
        source = _row_source(X, y, fit_intercept=self.fit_intercept,
                             chunk_size=self.chunk_size, clip=self.feature_clip,
                             check_finite=self._streamed(X))
        if not private:
            return self._fit_non_private(source)
        plan = self._plan(n, d)
        self._refuse_predicted_fail(plan)
        ledger = plan.ledger()
        self._check_budget(ledger)
        for note in plan.warnings:
            warnings.warn(note, ISSPPlanningWarning, stacklevel=3)
        if self.delta >= 1.0 / n:
            warnings.warn(f"delta={self.delta:g} >= 1/n = {1.0 / n:.3g}: a weak guarantee.",
                          UserWarning, stacklevel=3)
        if self.epsilon > 10:
            warnings.warn(f"epsilon={self.epsilon:g} > 10 is a weak guarantee.", UserWarning,
                          stacklevel=3)
        self.k_ = plan.k
        self.leverage_bound_ = plan.leverage_bound
        self.budget_split_ = plan.budget_split
        self.planning_ = plan.as_dict()
        # The group partition of the residual-scale histogram is public (the
        # guarantee holds for every fixed partition); every other draw is secret.
        # The spend is recorded before the first secret draw (after passes that
        # release nothing and may refuse non-finite streamed or Dask input).
        rngs = {**self._public_rngs("partition"),
                **self._secret_rngs("histogram", "ptr", "noise", spend=ledger)}
        sigma2_up = None
        if isinstance(self.residual_bound, str):
            r0 = private_residual_scale(source, plan.eps_r0, plan.delta_r0, rngs["partition"],
                                        rngs["histogram"], residual_slack=self.residual_slack,
                                        eta=self.design_failure_prob, return_gram=True)
            if r0 is None:
                return self._fail(ledger)
            R0, sigma2_up, gram = r0
        else:
            R0, gram = float(self.residual_bound), None
        c = plan.noise_scale(R0)
        trace = _issp_core(source, k=plan.k, L0=plan.leverage_bound, R0=R0, c=c,
                           eps_ptr=plan.eps_ptr, delta_ptr=plan.delta_ptr,
                           ptr_fail_prob=plan.ptr_fail_prob, rng_ptr=rngs["ptr"],
                           rng_noise=rngs["noise"], gram=gram)
        self.residual_bound_ = R0
        self.sigma2_upper_ = sigma2_up
        self.noise_scale_ = c
        self._settle(ledger)
        if not trace.passed:
            return self._fail(ledger)
        self.ptr_passed_ = True
        self.coef_, self.intercept_ = split_intercept(trace.beta_tilde, self.fit_intercept)
        return self

    def _refuse_predicted_fail(self, plan):
        """Refuse before any spend when the public plan predicts FAIL (unless told to spend)."""
        if not plan.fail_predicted or self.predicted_fail == "spend":
            return
        raise ISSPConfigurationError(
            f"ISSP is predicted to FAIL at n={plan.n} rows (d={plan.d}, "
            f"epsilon={plan.epsilon:g}, delta={plan.delta:g}): a Gaussian design of this "
            "size is expected to have too many rows above the leverage thresholds (top "
            f"{plan.leverage_top:.3g} at k={plan.k}) for the private test to pass. ISSP "
            f"is predicted to PASS from about n = {plan.predicted_n_pass:.3g} rows at "
            "these settings (python -m skprivreg plan "
            "issp shows the numbers). Nothing was spent; pass predicted_fail='spend' to "
            "spend the budget anyway."
        )

    def _fail(self, ledger):
        self._settle(ledger)  # spent at the first secret draw
        self.ptr_passed_ = False
        if self.on_fail == "raise":
            raise ISSPFailedError(_FAIL_MESSAGE)
        warnings.warn(_FAIL_MESSAGE + " on_fail='zero': zero coefficients were released.",
                      ISSPFailureWarning, stacklevel=3)
        d = self.n_features_in_
        self.coef_, self.intercept_ = np.zeros(d), 0.0
        return self

    def _fit_non_private(self, source):
        """epsilon=inf: ordinary least squares (non-private test mode, warned)."""
        from ._issp_filters import factor_pass

        # No noise, no guarantee: the ledger says so.
        self._spend(PrivacyLedger([PrivacyEvent("ols (non-private)", math.inf, 0.0)]))
        factor = factor_pass(source)
        beta = factor.beta if factor.pd else np.zeros(source.p)
        self.coef_, self.intercept_ = split_intercept(beta, self.fit_intercept)
        self.ptr_passed_ = True
        self.noise_scale_ = 0.0
        return self


# ---------------------------------------------------------------------------
# CLI planner and demo
# ---------------------------------------------------------------------------
def _split_arg(text):
    if text in ("auto", "paper"):
        return text
    parts = tuple(float(v) for v in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("budget split: 'auto', 'paper' or 'fT,fM,fC'.")
    return parts


def _bound_arg(text):
    return text if text == "auto" else float(text)


def plan_command(argv):
    """``python -m skprivreg plan issp --n N --d D --epsilon E --delta DL``: public numbers only."""
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg plan issp",
        description="Public planning numbers of ISSPRegressor (no data is read).",
    )
    parser.add_argument("--n", type=float, required=True, help="number of rows")
    parser.add_argument("--d", type=int, required=True, help="number of features")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--no-intercept", action="store_true")
    parser.add_argument("--leverage-bound", type=_bound_arg, default="auto")
    parser.add_argument("--residual-bound", type=_bound_arg, default="auto")
    parser.add_argument("--budget-split", type=_split_arg, default="auto")
    parser.add_argument("--r0-budget-fraction", type=float, default=0.05)
    parser.add_argument("--ptr-fail-prob", type=float, default=0.0)
    parser.add_argument("--max-blowup", type=float, default=10.0)
    args = parser.parse_args(argv)
    try:
        plan = issp_plan(
            int(args.n), args.d, args.epsilon, args.delta, fit_intercept=not args.no_intercept,
            leverage_bound=args.leverage_bound, residual_bound=args.residual_bound,
            budget_split=args.budget_split, r0_budget_fraction=args.r0_budget_fraction,
            ptr_fail_prob=args.ptr_fail_prob, max_blowup=args.max_blowup,
        )
    except ConfigurationError as exc:
        print(f"infeasible: {exc}")
        return 2
    f_T, f_M, f_C = plan.budget_split
    lines = [
        f"ISSP plan: n={plan.n:.4g}, d={plan.d}, p={plan.p}, epsilon={plan.epsilon:g}, "
        f"delta={plan.delta:g}",
        f"  budget: residual scale (eps, delta) = ({plan.eps_r0:.4g}, {plan.delta_r0:.3g}); "
        f"split f_T/f_M/f_C = {f_T:.2f}/{f_M:.2f}/{f_C:.2f}",
        f"  PTR: eps={plan.eps_ptr:.4g}, delta={plan.delta_ptr:.3g}, A={plan.ptr_half_width:.4g},"
        f" tau={plan.ptr_tau:.4g}",
        f"  k = {plan.k}",
        f"  L0 (leverage_bound) = {plan.leverage_bound:.4g}  (clean path needs every leverage "
        f"<= L_base = {plan.leverage_base:.4g})",
        f"  residual blow-up e^(432 k^2 L0) = e^{plan.log_blowup:.4g}",
        f"  c / R0 = {plan.noise_per_r0:.4g}",
        f"  predicted noise relative to the OLS error c/sigma = {plan.predicted_noise_ratio:.4g}",
        f"  predicted minimum n (clean path, blow-up <= max_blowup) = {plan.predicted_n_min:.3g}",
        f"  clean path possible at this n: {'yes' if plan.clean_path_possible else 'no'}",
        f"  FAIL predicted at this n: "
        + (f"yes (PASS predicted from about n = {plan.predicted_n_pass:.3g}; "
           "ISSPRegressor refuses unless predicted_fail='spend')"
           if plan.fail_predicted else "no"),
    ]
    lines += [f"  warning: {note}" for note in plan.warnings]
    print("\n".join(lines))
    return 0


def demo_case():
    """ISSP at n = 2e6, d = 2, epsilon = 8: it PASSes, and its noise shows the n it needs."""
    rng = np.random.default_rng(20240415)
    n, d = 2_000_000, 2
    coef = np.array([1.5, -2.0])
    X = rng.standard_normal((n + 20_000, d))
    y = X @ coef + 0.5 + rng.standard_normal(n + 20_000)
    est = ISSPRegressor(epsilon=8.0, delta=1e-5, residual_bound=5.5, on_fail="zero",
                        random_state=0)
    return {
        "name": "ISSP, n=2e6 d=2 (far below its minimum n)",
        "estimator": est,
        "notion": "full",
        "X_train": X[:n],
        "y_train": y[:n],
        "X_test": X[n:],
        "y_test": y[n:],
    }

