"""Pins of ISSP's proven constants: every threshold array equals its formula,
computed here independently, and the production path behaves as the formula says.

Each test was checked to fail under the deliberate break named in its
docstring (the paper's printed leverage schedule; the leverage top threshold
without its 1/(1 + (k-1)L0) factor; the geometric spacing -ln(1 - L_top) replaced
by 1/k; the residual ladder's k + 1 replaced by k; the
release shaped by S_w instead of S_v; the residual-scale histogram's Laplace
scale halved).
"""

import math

import numpy as np
import pytest
from scipy import linalg, stats

from skprivreg._rows import RowSource
from skprivreg.linear_model import _issp_mechanism, issp_plan
from skprivreg.linear_model._issp_filters import (
    leverage_bound_for_base,
    leverage_thresholds,
    residual_thresholds,
)
from skprivreg.linear_model._issp_mechanism import _issp_core, private_residual_scale
from skprivreg.linear_model._issp_plan import issp_k
from skprivreg.linear_model._issp_reference import (
    _direct_leverages,
    stable_leverage_filtering,
    stable_residual_filtering,
)
from skprivreg.mechanisms import ptr_calibration, stability_histogram
from tests._privacy_harness import three_high_leverage_rows

pytestmark = pytest.mark.filterwarnings(
    "ignore::skprivreg.exceptions.PlanningWarning",
)


def _sphere(rng, n, p):
    X = rng.standard_normal((n, p))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _with_leverage(X, i, target):
    """Scale row ``i`` so that its leverage in ``X`` is exactly ``target``.

    With ``a = x^T S_{-i}^{-1} x`` (S without row i), scaling the row by ``t``
    gives leverage ``t^2 a / (1 + t^2 a)``.
    """
    X = X.copy()
    rest = np.delete(X, i, axis=0)
    a = X[i] @ np.linalg.solve(rest.T @ rest, X[i])
    X[i] *= math.sqrt(target / (1 - target) / a)
    return X


# ---------------------------------------------------------------------------
# (a), (b): leverage schedule L_j = L_top (1 - L_top)^{2k-j}, L_top = L0/(1+(k-1)L0)
# ---------------------------------------------------------------------------
MARGIN = 1e-6  # float margin of the schedules (relative), as documented


def _geometric(L0, k):
    top = L0 / (1 + (k - 1) * L0) * (1 - MARGIN)
    s = -math.log(1 - top) + MARGIN
    return np.array([top * math.exp(-(2 * k - j) * s) for j in range(2 * k + 1)])


@pytest.mark.parametrize("k, L0", [(1, 1e-3), (4, 1 / 384), (51, 1e-5), (320, 2e-8)])
def test_leverage_threshold_array_is_the_geometric_formula(k, L0):
    """Breaks caught: the printed schedule e^{j/k} L0; the top without 1/(1 + (k-1)L0);
    the spacing 1/k of the earlier exponential schedule."""
    L = leverage_thresholds(L0, k)
    np.testing.assert_allclose(L, _geometric(L0, k), rtol=1e-13, atol=0)
    # the two facts the proof uses, on the float values themselves:
    # L_{j+1} (1 - L_j) >= L_j (one removal), L_top / (1 - (k-1) L_top) <= L0 (Theorem 9(2))
    assert np.all(L[1:] * (1 - L[:-1]) >= L[:-1])
    assert L[-1] / (1 - (k - 1) * L[-1]) <= L0


def test_plan_leverage_top_and_base_are_the_geometric_formula():
    for n, d, eps in [(10**7, 3, 4.0), (10**9, 20, 1.0)]:
        plan = issp_plan(n_samples=n, n_features=d, epsilon=eps, delta=1e-6, residual_bound=1.0)
        k, L0 = plan.k, plan.leverage_bound
        L = _geometric(L0, k)
        assert plan.leverage_top == pytest.approx(L[-1], rel=1e-15)
        assert plan.leverage_base == pytest.approx(L[0], rel=1e-13)
        # the automatic L0 is the smallest one whose L_base is 1.25 times the
        # Gaussian-design quantile: L0 recovered from L_base
        assert leverage_bound_for_base(plan.leverage_base, k) == pytest.approx(L0, rel=1e-11)


@pytest.fixture(scope="module")
def leverage_case():
    rng = np.random.default_rng(41)
    n, p, k = 4000, 2, 4
    X = _sphere(rng, n, p) * math.sqrt(p)
    h, _ = _direct_leverages(X)
    L0 = leverage_bound_for_base(1.2 * h.max(), k)  # L_base = 1.2 max leverage: clean
    return X, k, L0


def test_a_row_between_the_top_threshold_and_L0_leaves_at_the_top_level(leverage_case):
    """Production engine: a row with L_top < h < L0 leaves at level 2k (w_i = 0), SCORE1 = 1.

    Printed schedule (thresholds >= L0): nothing leaves, SCORE1 = 0. Top without
    1/(1 + (k-1)L0) (L_2k = L0): the row leaves at level 2k - 1, so w_i = 1/k.
    """
    X, k, L0 = leverage_case
    L = _geometric(L0, k)
    top = L[-1]
    target = math.sqrt(top * L0)
    assert target < L0 * (1 - L0)  # the uncorrected top would catch it one level lower
    X2 = _with_leverage(X, 7, target)
    h, _ = _direct_leverages(X2)
    assert h[7] == pytest.approx(target, rel=1e-9) and np.sort(h)[-2] < L[0]
    score, W = stable_leverage_filtering(X2, L0, k)
    assert score == 1
    assert W[7] == 0 and np.all(np.delete(W, 7) == k)
    # the same through the core of ISSPRegressor (engine with its default schedule)
    src = RowSource(X2, X2 @ [1.0, 1.0], fit_intercept=False, block_rows=997)
    tr = _issp_core(src, k=k, L0=L0, R0=1.0, c=1.0, eps_ptr=1.0, delta_ptr=1e-6,
                    ptr_fail_prob=0.0, rng_ptr=np.random.default_rng(0),
                    rng_noise=np.random.default_rng(1), dense=True)
    assert tr.score1 == 1
    assert tr.W[7] == 0 and np.all(np.delete(tr.W, 7) == k)


def test_a_row_between_two_levels_leaves_at_the_lower_one(leverage_case):
    """L_{j0} < h < L_{j0+1} (geometric schedule): the row leaves at level j0."""
    X, k, L0 = leverage_case
    L = _geometric(L0, k)
    j0 = k + 1
    X2 = _with_leverage(X, 11, math.sqrt(L[j0] * L[j0 + 1]))
    score, W = stable_leverage_filtering(X2, L0, k)
    # removed at level j0 > k: SCORE1 = min_j (#{removed at >= j} + j) = 1 (at j = 0)
    assert score == 1
    assert W[11] == min(max(2 * k - j0, 0), k) and np.all(np.delete(W, 11) == k)


# ---------------------------------------------------------------------------
# (c): residual ladder R_j = R0 rho^j
# ---------------------------------------------------------------------------
def _rho(k, L0):
    """(1 + 2 L_1)/(1 - (k+1) sqrt(L_1 L_2)) of the intertwining lemma, written out."""
    L_u = L0 / (1 - k * L0)
    L_1 = L_u / (1 - 2 * L_u)
    L_w = L0 / (1 - (k + 1) * L0)
    L_2 = L_w / (1 - (k + 1) * L_w)
    return (1 + 2 * L_1) / (1 - (k + 1) * math.sqrt(L_1 * L_2))


@pytest.mark.parametrize("k, L0, R0", [(1, 1e-3, 1.0), (4, 1e-3, 2.5), (51, 1e-5, 6.5),
                                       (320, 2e-8, 1e-3), (213, 8.2e-6, 7.0)])
def test_residual_ladder_is_the_exact_intertwining_ratio(k, L0, R0):
    """R_{j+1}/R_j = rho(k, L0) (times e^{1e-6}), about e^{(k+3) L0}, far below e^{108 k L0}.

    Break caught: k + 1 replaced by k in rho (the ladder is the intertwining ratio).
    """
    rho = _rho(k, L0) * math.exp(MARGIN)
    expected = np.array([R0 * rho**j for j in range(2 * k + 1)])
    R = residual_thresholds(R0, L0, k)
    np.testing.assert_allclose(R, expected, rtol=1e-12, atol=0)
    assert np.all(R[1:] >= _rho(k, L0) * R[:-1])  # the float rungs keep the proven ratio
    assert rho <= math.exp(108 * k * L0)


def test_plan_blowup_and_sensitivity_use_the_exact_ladder():
    """c carries ((1 + k L_u) R_{2k}/R0)^2, R_{2k}/R0 = rho^{2k}; m = 5, L = L_u = L0/(1 - k L0).

    The location sensitivity is m^2 L R^2 (1 - mL)^{-3} with m = 5, L = L_u,
    R = (1 + k L_u) R_{2k}; the published constant 4 m^2 L R^2 = 3136 L0 R_{2k}^2
    stays reachable with constants='paper'. Breaks caught: m = 4; R without
    its (1 + k L_u).
    """
    plan = issp_plan(n_samples=10**8, n_features=5, epsilon=2.0, delta=1e-6, residual_bound=1.0)
    k, L0 = plan.k, plan.leverage_bound
    g = math.log(_rho(k, L0)) + MARGIN
    assert plan.log_blowup == pytest.approx(4 * k * g, rel=1e-12)
    assert plan.log_blowup < 432 * k * k * L0
    L_u = L0 / (1 - k * L0)
    # (the planner rounds the sensitivity up, by less than 1e-9 relative)
    assert plan.sensitivity_per_r0 == pytest.approx(
        math.sqrt(25 * L_u / (1 - 5 * L_u) ** 3) * (1 + k * L_u) * math.exp(2 * k * g),
        rel=1e-9)
    paper = issp_plan(n_samples=10**8, n_features=5, epsilon=0.9, delta=1e-6,
                      residual_bound=1.0, budget_split="paper", _constants="paper")
    assert paper.sensitivity_per_r0 == pytest.approx(
        math.sqrt(3136 * paper.leverage_bound)
        * math.exp(216 * paper.k**2 * paper.leverage_bound), rel=1e-9)
    R = residual_thresholds(1.0, L0, k)
    assert plan.log_blowup == pytest.approx(2 * math.log(R[-1]), rel=1e-12)


def test_a_residual_between_two_rungs_is_removed_at_the_lower_one():
    """Production engine (Algorithm 4): R_{j0} < |r_i| < R_{j0+1} -> removed at level j0.

    With a ratio half as large the same residual exceeds the top rung: removed at 2k (v_i = 0).
    """
    rng = np.random.default_rng(43)
    n, p, k, L0 = 3000, 2, 4, 1e-3
    X = rng.standard_normal((n, p))
    y = X @ np.array([1.0, -1.0]) + 0.1 * rng.standard_normal(n)
    i = 17
    R0 = 1.0
    eta = _rho(k, L0) * math.exp(MARGIN)
    R = [R0 * eta**j for j in range(2 * k + 1)]
    j0 = k + 2
    # residual of row i under the fit on all rows = (1 - h_i) * (y_i - x_i^T beta_{-i})
    keep = np.arange(n) != i
    b_rest = np.linalg.lstsq(X[keep], y[keep], rcond=None)[0]
    h_i = X[i] @ np.linalg.solve(X.T @ X, X[i])
    y[i] = X[i] @ b_rest + math.sqrt(R[j0] * R[j0 + 1]) / (1 - h_i)
    b_all = np.linalg.lstsq(X, y, rcond=None)[0]
    r = np.abs(y - X @ b_all)
    assert R[j0] < r[i] < R[j0 + 1] and np.delete(r, i).max() < 0.9 * R0
    W = np.full(n, k)
    score_num, V = stable_residual_filtering(X, y, W, L0, R0, k)
    assert score_num == k * 1  # deficit k at every score level j <= k: SCORE2 = 1
    assert V[i] == k * (2 * k - j0) and np.all(np.delete(V, i) == k * k)


# ---------------------------------------------------------------------------
# (d): the release is N(beta_v, c^2 S_v^{-1}), shaped by S_v (not S_w)
# ---------------------------------------------------------------------------
def test_release_noise_is_shaped_by_S_v():
    """Capture the noise with an explicit generator: beta~ = beta_v + c chol(S_v)^{-T} xi.

    ``S_v`` and ``beta_v`` are computed here from X, y and v directly. Break
    caught: the release shaped by ``S_w`` (the weights before residual
    filtering), which differs from ``S_v`` on the partly removed row.
    """
    rng = np.random.default_rng(44)
    n, p, k = 20_000, 2, 4
    X = _sphere(rng, n, p) * math.sqrt(p)
    i = 5
    y = X @ np.array([1.0, 2.0]) + 0.1 * rng.standard_normal(n)
    h, _ = _direct_leverages(X)
    L0 = leverage_bound_for_base(1.05 * h.max(), k)
    R0 = 1.0
    R = residual_thresholds(R0, L0, k)
    j0 = k + 1  # removed at level k+1: survives k-1 of the k weight levels
    keep = np.arange(n) != i
    b_rest = np.linalg.lstsq(X[keep], y[keep], rcond=None)[0]
    y[i] = X[i] @ b_rest + math.sqrt(R[j0] * R[j0 + 1]) / (1 - h[i])
    c = 30.0
    seed = 123
    src = RowSource(X, y, fit_intercept=False, block_rows=997)
    tr = _issp_core(src, k=k, L0=L0, R0=R0, c=c, eps_ptr=1.0, delta_ptr=1e-6,
                    ptr_fail_prob=0.0, rng_ptr=np.random.default_rng(0),
                    rng_noise=np.random.default_rng(seed), dense=True)
    assert tr.passed and tr.score1 == 0
    v = tr.V / k**2
    assert v[i] == pytest.approx((k - 1) / k) and np.all(np.delete(v, i) == 1)
    S_v = (X * v[:, None]).T @ X
    beta_v = np.linalg.solve(S_v, X.T @ (v * y))
    np.testing.assert_allclose(tr.beta_hat, beta_v, rtol=1e-9)
    xi = np.random.default_rng(seed).standard_normal((p, 1))[:, 0]
    L_v = np.linalg.cholesky(S_v)
    noise = tr.beta_tilde - tr.beta_hat
    expected = c * linalg.solve_triangular(L_v, xi, lower=True, trans="T")
    error = np.max(np.abs(noise - expected))
    assert error < 1e-9 * np.max(np.abs(expected))
    # the S_w-shaped draw differs far beyond that (the test has power)
    L_w = np.linalg.cholesky(X.T @ X)
    wrong = c * linalg.solve_triangular(L_w, xi, lower=True, trans="T")
    assert np.max(np.abs(wrong - expected)) > 1e3 * error
    # and the factor's law: whitened by S_v, many draws are N(0, I) (Wishart LRT,
    # p-value > 1e-4); whitened by S_w, the same draws are rejected.
    from skprivreg.mechanisms import gaussian_precision_shaped

    M = 20000
    draws = gaussian_precision_shaped(tr.beta_hat, tr.precision_factor, c,
                                      np.random.default_rng(7), size=M)

    def lrt_p(L):
        U = (draws - tr.beta_hat) @ L / c
        C = U.T @ U / M
        stat = M * (np.trace(C) - np.linalg.slogdet(C)[1] - p)
        return stats.chi2.sf(stat, p * (p + 1) // 2)

    assert lrt_p(L_v) > 1e-4


# ---------------------------------------------------------------------------
# (e): residual-scale histogram: Lap(2/eps0) noise and threshold 1 + (2/eps0) ln(2/delta0)
# ---------------------------------------------------------------------------
def test_stability_histogram_noise_is_laplace_two_over_epsilon():
    """KS test of the noise added to each occupied bin against Lap(0, 2/eps).

    Each bin gets count 200 (always kept: 157 above the threshold, 55 Laplace
    scales), so noisy - count is one Laplace draw per bin; 4000 bins give a KS
    test with power against a halved scale (the KS distance between Lap(b) and
    Lap(b/2) is 0.25, far above the 1.95/sqrt(4000) = 0.031 of a 1e-4 test).
    Break caught: scale 1/eps.
    """
    eps, delta = 0.7, 1e-6
    labels = np.repeat(np.arange(4000), 200).tolist()
    kept = stability_histogram(labels, eps, delta, np.random.default_rng(5))
    assert len(kept) == 4000
    noise = np.array([kept[b] - 200 for b in range(4000)])
    assert stats.kstest(noise, stats.laplace(scale=2 / eps).cdf).pvalue > 1e-4
    assert stats.kstest(noise, stats.laplace(scale=1 / eps).cdf).pvalue < 1e-4


def _fixed_laplace(monkeypatch, value):
    """Laplace draws of the histogram fixed at ``value`` (threshold pinning)."""
    monkeypatch.setattr("skprivreg.mechanisms._ptr.laplace",
                        lambda scale, rng, size=None, half_width=math.inf: value)


def test_stability_histogram_threshold_is_one_plus_two_over_eps_ln_two_over_delta(monkeypatch):
    eps, delta = 0.3, 1e-5
    thr = 1 + (2 / eps) * math.log(2 / delta)
    count = 5
    _fixed_laplace(monkeypatch, thr - count + 1e-9)
    above = stability_histogram(["a"] * count, eps, delta, None)
    _fixed_laplace(monkeypatch, thr - count - 1e-9)
    below = stability_histogram(["a"] * count, eps, delta, None)
    assert list(above) == ["a"] and below == {}


def test_private_residual_scale_runs_the_histogram_at_its_budget(monkeypatch):
    """The residual-scale step calls the histogram with exactly (eps_r0, delta_r0)
    and maps the released bin t* to R0 = sigma_up sqrt(2 ln(2n/eta)), sigma_up^2 = 2^{(2t*+3)/8}."""
    seen = []

    def spy(labels, epsilon, delta, rng, tie_key=None):
        seen.append((epsilon, delta, len(labels)))
        return 3  # the released bin

    monkeypatch.setattr(_issp_mechanism, "stability_mode", spy)
    rng = np.random.default_rng(2)
    n = 200_000
    X = rng.standard_normal((n, 2))
    y = X @ [1.0, 1.0] + rng.standard_normal(n)
    plan = issp_plan(n_samples=n, n_features=2, epsilon=8.0, delta=1e-5)
    src = RowSource(X, y, fit_intercept=True, block_rows=None)
    R0, s2 = private_residual_scale(src, plan.eps_r0, plan.delta_r0, np.random.default_rng(0),
                                    np.random.default_rng(1), eta=0.01)
    m = math.ceil(2 + (4 / plan.eps_r0) * (math.log(2 / plan.delta_r0) + math.log(2 / 0.01)))
    assert seen == [(plan.eps_r0, plan.delta_r0, m)]
    assert s2 == 2 ** ((2 * 3 + 3) / 8)
    assert R0 == pytest.approx(math.sqrt(s2) * math.sqrt(2 * math.log(2 * n / 0.01)), rel=1e-14)


# ---------------------------------------------------------------------------
# PTR: lambda = 4/eps_T, A, tau, k = floor(tau + A) + 1
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("eps, delta, beta", [(0.05, 1e-10, 0.0), (1 / 3, 1e-6 / 3, 0.0),
                                              (8.0, 1e-5, 1e-3), (900.0, 1e-7, 0.0)])
def test_ptr_calibration_is_its_formula(eps, delta, beta):
    from mpmath import exp, log, mp, mpf

    mp.dps = 50
    lam = mpf(4) / mpf(eps)
    A = lam * log(1 + (exp(mpf(eps)) - 1) / (2 * mpf(delta)))
    if beta == 0:
        tau = A
    else:
        m = exp(-A / lam)
        tau = -lam * log(2 * mpf(beta) * (1 - m) + m)
    cal = ptr_calibration(4.0, eps, delta, beta)
    assert cal.scale == pytest.approx(float(lam), rel=1e-15)
    assert cal.half_width == pytest.approx(float(A), rel=1e-13)
    assert cal.tau == pytest.approx(float(tau), rel=1e-12)
    k, _ = issp_k(eps, delta, beta)
    assert k == math.floor(float(tau + A)) + 1


def test_issp_score_is_the_max_of_both_filters():
    """The privacy test's score is the larger of the two filters' scores: rows
    removed by the leverage filter alone score 3, which must not be dropped."""

    k = 20
    X, y, L0 = three_high_leverage_rows(k)  # three rows leave at level k/2
    tr = _issp_core(RowSource(X, y, fit_intercept=False), k=k, L0=L0, R0=1.0, c=1.0,
                    eps_ptr=1.0, delta_ptr=1e-6, ptr_fail_prob=0.0,
                    rng_ptr=np.random.default_rng(1), rng_noise=np.random.default_rng(2),
                    dense=True)
    assert tr.score1 == 3 and tr.score2_num < k * tr.score1
    assert tr.score == max(tr.score1, tr.score2_num / k)
