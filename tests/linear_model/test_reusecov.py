"""Tests of ReuseCovRegressor (PRIMO) that can fail: reusecov spec §7."""

import dataclasses
import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, Ridge

from skprivreg import _cli, _demo
from skprivreg.accounting import BudgetAccountant, gdp_delta, gdp_mu, subsample_budget
from skprivreg.exceptions import (
    BudgetExceededError,
    ConfigurationError,
    PrivacyLeakWarning,
)
from skprivreg.linear_model import NoisyCovariance, ReuseCovRegressor, reusecov_plan
from skprivreg.linear_model._base import solve_psd_repaired
from skprivreg.linear_model._independent_ssp import IndependentSSPRegressor
from skprivreg.linear_model._reusecov_plan import optimal_cov_budget, plan_reusecov
from skprivreg.linear_model._reusecov_projection import (
    project_feature,
    project_label,
    spectral_basis,
)
from skprivreg.linear_model._reusecov_release import _reusecov_solve, psd_factor
from skprivreg.linear_model._reusecov_stats import (
    association_sensitivity,
    block_statistics,
    combine_statistics,
    covariance_sensitivity,
    sufficient_statistics,
)
from skprivreg.mechanisms import joint_gram_cross_calibration, primo_constant


def plan_command(argv):
    """``skprivreg plan reusecov ...``: the exit status; the plan is printed."""
    return _cli.main(["plan", "reusecov", *argv])


def demo_case():
    return next(_demo._simulated_multi_output())

pytestmark = pytest.mark.filterwarnings(
    "ignore::skprivreg.exceptions.PrivacyLeakWarning",
)


def _data(n=60, d=3, n_outputs=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(d, n_outputs))
    Y = X @ W + 0.5 * rng.normal(size=(n, n_outputs))
    return X, Y


def _upper(A):
    return A[np.triu_indices(A.shape[-1])]


# ---------------------------------------------------------------- 1. constants
def test_reference_constants():
    assert primo_constant(5, 1 / 5008**2) == pytest.approx(1.327783, abs=1e-6)
    assert primo_constant(2.5, 0.5 / 5008**2) == pytest.approx(2.544373, abs=1e-6)
    assert gdp_mu(5, 1 / 5008**2) == pytest.approx(0.914623, abs=1e-5)
    assert gdp_mu(1, 1e-5) == pytest.approx(0.268051, abs=1e-5)
    for eps, delta in [(0.3, 1e-6), (1.0, 1e-5), (5.0, 4e-8)]:
        assert gdp_delta(gdp_mu(eps, delta), eps) == pytest.approx(delta, rel=1e-10)
    eps_1, delta_1 = subsample_budget(2.5, 1e-7, 0.1)
    assert eps_1 == pytest.approx(4.725837, abs=1e-6)
    assert delta_1 == pytest.approx(1e-6, rel=1e-12)


def test_primo_constant_is_valid_dp():
    # sigma = c Delta must be at least the exact (analytic) requirement.
    for eps, delta in [(0.1, 1e-5), (1.0, 1e-6), (5.0, 4e-8), (20.0, 1e-9)]:
        assert 1 / primo_constant(eps, delta) <= gdp_mu(eps, delta)


# -------------------------------------------------------------- 2. sensitivity
def _random_rows(rng, k, dim, bound):
    """Rows in the L2 ball of radius bound; a third exactly on the sphere."""
    rows = rng.normal(size=(k, dim))
    rows *= (bound * rng.uniform(0, 1, size=(k, 1)) ** (1 / dim)) / np.linalg.norm(
        rows, axis=1, keepdims=True
    )
    sphere = rng.random(k) < 1 / 3
    rows[sphere] *= bound / np.linalg.norm(rows[sphere], axis=1, keepdims=True)
    return rows


@pytest.mark.parametrize(
    "privacy, neighbouring",
    [("full", "replace-one"), ("full", "zero-out"), ("feature", "replace-one"),
     ("label", "replace-one")],
)
def test_sensitivity_bounds_hold_and_are_tight(privacy, neighbouring):
    rng = np.random.default_rng(1)
    n, d, n_outputs, k = 7, 3, 4, 10_000
    x_bound, y_bound = rng.uniform(0.5, 3), rng.uniform(0.5, 3)
    X = _random_rows(rng, n, d, x_bound)
    Y = rng.uniform(-y_bound, y_bound, size=(n, n_outputs))
    est = ReuseCovRegressor(
        epsilon=1.0, delta=1e-3, privacy=privacy, neighbouring=neighbouring,
        x_bound=None if privacy == "label" else x_bound,
        y_bound=None if privacy == "feature" else y_bound,
        fit_intercept=False, random_state=0,
    ).fit(X, Y)
    sens_cov = est.sensitivity_["covariance"]
    sens_assoc = est.sensitivity_["association"]
    i = 2  # the row that changes
    if privacy == "feature":
        x_new, y_new = _random_rows(rng, k, d, x_bound), np.tile(Y[i], (k, 1))
        x_old, y_old = _random_rows(rng, k, d, x_bound), np.tile(Y[i], (k, 1))
    elif privacy == "label":
        x_new = x_old = np.tile(X[i], (k, 1))
        y_new = rng.uniform(-y_bound, y_bound, size=(k, n_outputs))
        y_old = rng.uniform(-y_bound, y_bound, size=(k, n_outputs))
        y_old[: k // 3] = y_bound * np.sign(y_old[: k // 3])
    else:
        x_new, x_old = _random_rows(rng, k, d, x_bound), _random_rows(rng, k, d, x_bound)
        y_new = rng.uniform(-y_bound, y_bound, size=(k, n_outputs))
        y_old = rng.uniform(-y_bound, y_bound, size=(k, n_outputs))
    if neighbouring == "zero-out":
        x_old, y_old = np.zeros_like(x_old), np.zeros_like(y_old)
    assoc = np.einsum("ki,kj->kij", x_new, y_new) - np.einsum("ki,kj->kij", x_old, y_old)
    assoc_norm = np.linalg.norm(assoc.reshape(k, -1), axis=1) / n
    assert assoc_norm.max() <= sens_assoc * (1 + 1e-12)
    if sens_cov is not None:
        outer = np.einsum("ki,kj->kij", x_new, x_new) - np.einsum("ki,kj->kij", x_old, x_old)
        iu = np.triu_indices(d)
        cov_norm = np.linalg.norm(outer[:, iu[0], iu[1]], axis=1) / n
        assert cov_norm.max() <= sens_cov * (1 + 1e-12)

    # Adversarial pairs reach the bounds.
    e1, e2 = np.eye(d)[0], np.eye(d)[1]
    if privacy == "full":
        xa = x_bound * e1
        ya = np.full(n_outputs, y_bound)
        if neighbouring == "replace-one":
            gap_assoc = np.linalg.norm(np.outer(xa, ya) - np.outer(-xa, ya)) / n
            gap_cov = np.linalg.norm(_upper(np.outer(xa, xa) - np.outer(x_bound * e2,
                                                                     x_bound * e2))) / n
        else:
            gap_assoc = np.linalg.norm(np.outer(xa, ya)) / n
            gap_cov = np.linalg.norm(_upper(np.outer(xa, xa))) / n
        assert gap_cov >= 0.999 * sens_cov
    elif privacy == "feature":
        j = np.argmax(np.linalg.norm(Y, axis=1))
        xa = x_bound * e1
        gap_assoc = np.linalg.norm(np.outer(xa, Y[j]) - np.outer(-xa, Y[j])) / n
        gap_cov = np.linalg.norm(_upper(np.outer(xa, xa) - np.outer(x_bound * e2,
                                                                 x_bound * e2))) / n
        assert gap_cov >= 0.999 * sens_cov
    else:
        j = np.argmax(np.linalg.norm(X, axis=1))
        ya = np.full(n_outputs, y_bound)
        gap_assoc = np.linalg.norm(np.outer(X[j], ya) - np.outer(X[j], -ya)) / n
    assert gap_assoc >= 0.999 * sens_assoc


def test_sensitivity_formulas():
    B, yb, n = 2.0, 3.0, 10
    assert covariance_sensitivity(B, n) == pytest.approx(math.sqrt(2) * 4 / 10, rel=1e-15)
    assert covariance_sensitivity(B, n, "zero-out") == pytest.approx(0.4, rel=1e-15)
    assert association_sensitivity(B, 3 * yb, n) == pytest.approx(2 * 2 * 3 * 3 / 10)


# ----------------------------------------------------- 3./4. noise calibration
def test_covariance_noise_calibration(fixed_noise):
    """800 releases, their noise seeded by ``random_state`` (the testing facility):
    with fresh noise the 4-sigma bound on 14 means failed about once in a
    thousand runs."""
    rng = np.random.default_rng(3)
    n, d = 50, 4
    X = _random_rows(rng, n, d, 2.0)
    Y = rng.uniform(-1, 1, size=(n, 3))
    base = dict(epsilon=1.0, delta=1e-4, x_bound=2.0, y_bound=1.0, ridge=0.5,
                keep_noisy_stats=True, cov_budget=0.5)
    Xa = np.hstack([X, np.ones((n, 1))])
    Sigma, G = Xa.T @ Xa / n, Xa.T @ Y / n
    N = 800
    E1 = np.empty((N, (d + 1) * (d + 2) // 2))
    E2 = np.empty((N, G.size))
    for seed in range(N):
        est = ReuseCovRegressor(random_state=seed, **base).fit(X, Y)
        M = est.covariance_.matrix
        assert np.array_equal(M, M.T)
        E1[seed] = _upper(M - Sigma)
        E2[seed] = (est.noisy_xty_ - G).ravel()
    sigma_1 = est.noise_std_["covariance"]
    mu = gdp_mu(1.0, 1e-4)
    # The tight intercept sensitivity sqrt(2)(B^2 + c^2/2), both scales
    # multiplied by the joint release's gain gamma (< 1).
    gamma = joint_gram_cross_calibration(
        "x", x_bound=2.0, y_row_bound=math.sqrt(3), n_rows=n, mu=mu, share=0.5,
        delta=1e-4, intercept=1.0)[3]
    assert 0.8 < gamma < 0.95
    assert sigma_1 == pytest.approx(gamma * math.sqrt(2) * 4.5 / n / (math.sqrt(0.5) * mu),
                                    rel=1e-12)
    # The corner c^2 = 1 of the intercept column is released exactly.
    assert np.all(E1[:, 14] == 0.0)
    E1 = E1[:, :14]
    assert np.all(np.abs(E1.mean(axis=0)) < 4 * sigma_1 / math.sqrt(N))
    ratio = E1.var(axis=0) / sigma_1**2
    assert 0.9 < ratio.mean() < 1.1
    assert np.all((ratio > 0.75) & (ratio < 1.25))
    diag = np.isin(np.arange(E1.shape[1]), [0, 5, 9, 12])  # diagonal of 5x5 upper
    assert 0.85 < ratio[diag].mean() / ratio[~diag].mean() < 1.15
    k = min(E1.shape[1], E2.shape[1])
    corr = np.corrcoef(E1[:, :k].ravel(), E2[:, :k].ravel())[0, 1]
    assert abs(corr) < 0.05
    sigma_2 = est.noise_std_["association"]
    ratio_2 = E2.var(axis=0).mean() / sigma_2**2
    assert 0.9 < ratio_2 < 1.1


@pytest.mark.parametrize("composition", ["gdp", "paper"])
@pytest.mark.parametrize(
    "privacy, neighbouring",
    [("full", "replace-one"), ("full", "zero-out"), ("feature", "replace-one"),
     ("label", "replace-one")],
)
def test_association_sigma_formula(privacy, neighbouring, composition):
    X, Y = _data(n=40, d=3, n_outputs=4)
    eps, delta, xb, yb = 2.0, 1e-5, 3.0, 4.0
    est = ReuseCovRegressor(
        epsilon=eps, delta=delta, privacy=privacy, neighbouring=neighbouring,
        composition=composition, x_bound=None if privacy == "label" else xb,
        y_bound=None if privacy == "feature" else yb, random_state=0, cov_budget=0.5,
    ).fit(X, Y)
    n, n_outputs = Y.shape
    B = math.hypot(xb, 1.0)
    factor = 2.0 if neighbouring == "replace-one" else 1.0
    gamma = 1.0
    if privacy == "label":
        x_scale = np.linalg.norm(np.hstack([X, np.ones((n, 1))]), axis=1).max()
        sens = factor * x_scale * math.sqrt(n_outputs) * yb / n
        share = 1.0
    elif privacy == "feature":
        # Y public: the constant column cancels, the raw row bound enters.
        K = np.linalg.norm(Y, axis=1).max()
        sens = factor * xb * K / n
        share = 0.5
    else:
        K = math.sqrt(n_outputs) * yb
        sens = factor * B * K / n
        share = 0.5
    if composition == "gdp" and privacy != "label" and neighbouring == "replace-one":
        gamma = joint_gram_cross_calibration(
            "x", x_bound=xb, y_row_bound=K, n_rows=n, mu=gdp_mu(eps, delta), share=0.5,
            delta=delta, intercept=1.0, notion=privacy)[3]
        assert gamma < 1.0
    if composition == "gdp":
        sigma = gamma * sens / (math.sqrt(share) * gdp_mu(eps, delta))
    else:
        sigma = primo_constant(share * eps, share * delta) * sens
    assert est.noise_std_["association"] == pytest.approx(sigma, rel=1e-12)
    assert est.sensitivity_["association"] == pytest.approx(sens, rel=1e-12)


def test_sigma_scaling_in_l():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    for privacy in ("full", "label"):
        kw = dict(epsilon=1.0, delta=1e-5, privacy=privacy, x_bound=2.0, y_bound=1.0,
                  random_state=0, cov_budget=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            small = ReuseCovRegressor(**kw).fit(X, rng.uniform(-1, 1, (30, 4)))
            large = ReuseCovRegressor(**kw).fit(X, rng.uniform(-1, 1, (30, 400)))
        ratio = large.noise_std_["association"] / small.noise_std_["association"]
        assert ratio == pytest.approx(10.0, rel=1e-12)
        # the same covariance noise for 4 and 400 outcomes (up to rounding of the calibration)
        assert large.noise_std_["covariance"] == pytest.approx(small.noise_std_["covariance"],
                                                              rel=1e-13)


# ------------------------------------------------------------------ 5. clipping
def test_statistics_clip_rows_and_values():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(20, 3)) * 3
    Y = rng.normal(size=(20, 2)) * 3
    X0, Y0 = X.copy(), Y.copy()
    stats = block_statistics(X, Y, x_bound=2.0, y_bound=1.5, fit_intercept=False)
    norms = np.linalg.norm(X, axis=1)
    over = norms > 2.0
    Xc = X.copy()
    Xc[over] *= (2.0 / norms[over])[:, None]
    clipped_norms = np.linalg.norm(Xc[over], axis=1)
    np.testing.assert_allclose(clipped_norms, 2.0, rtol=1e-12)
    np.testing.assert_allclose(stats.xtx, Xc.T @ Xc, rtol=1e-12)
    np.testing.assert_allclose(stats.xty, Xc.T @ np.clip(Y, -1.5, 1.5), rtol=1e-12)
    assert stats.x_clipped and stats.y_clipped
    assert np.array_equal(X, X0) and np.array_equal(Y, Y0)
    # Rows under the bound are unchanged bit for bit (single-row blocks).
    for i in np.flatnonzero(~over):
        s = block_statistics(X[i:i + 1], None, x_bound=2.0, fit_intercept=False)
        assert np.array_equal(s.xtx, np.outer(X[i], X[i]))


def test_blockwise_statistics_match_one_block():
    X, Y = _data(n=103, d=4, n_outputs=5)
    kw = dict(x_bound=2.0, y_bound=2.0, fit_intercept=True, intercept_scaling=0.7)
    one = block_statistics(X, Y, **kw)
    many = sufficient_statistics(X, Y, row_block=10, **kw)
    np.testing.assert_allclose(many.xtx, one.xtx, rtol=1e-12)
    np.testing.assert_allclose(many.xty, one.xty, rtol=1e-12)
    merged = combine_statistics(block_statistics(X[:50], Y[:50], **kw),
                                block_statistics(X[50:], Y[50:], **kw))
    assert merged.n == 103
    np.testing.assert_allclose(merged.xty, one.xty, rtol=1e-12)


def test_clipping_is_never_signalled():
    X, Y = _data()
    kw = dict(epsilon=1.0, x_bound=100.0, y_bound=100.0, random_state=0)
    for extra in ({}, {"x_bound": 0.5}, {"y_bound": 0.5}):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est = ReuseCovRegressor(**{**kw, **extra}).fit(X, Y)
        assert not [a for a in vars(est) if "clip" in a]


def test_public_side_never_clipped():
    X, Y = _data()
    X, Y = 10 * X, 10 * Y
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        label = ReuseCovRegressor(epsilon=1.0, privacy="label", y_bound=1000.0,
                                  random_state=0, keep_noisy_stats=True).fit(X, Y)
        ReuseCovRegressor(epsilon=1.0, privacy="feature", x_bound=1000.0,
                          random_state=0).fit(X, Y)
    Xa = np.hstack([X, np.ones((X.shape[0], 1))])
    np.testing.assert_allclose(label.covariance_.matrix, Xa.T @ Xa / X.shape[0],
                               rtol=1e-13)


def test_missing_private_bound_raises_before_spending():
    X, Y = _data()
    acc = BudgetAccountant(epsilon=10, delta=0.1)
    for kw in [dict(privacy="full", x_bound=1.0), dict(privacy="full", y_bound=1.0),
               dict(privacy="feature"), dict(privacy="label")]:
        with pytest.raises(ValueError, match="bound"):
            ReuseCovRegressor(epsilon=1.0, accountant=acc, **kw).fit(X, Y)
    assert acc.n_spends == 0
    with pytest.warns(UserWarning, match="ignored"):
        ReuseCovRegressor(epsilon=1.0, privacy="label", y_bound=5.0, x_bound=1.0,
                          random_state=0).fit(X, Y)


# -------------------------------------------------------- 6. non-private limit
def test_non_private_equals_ridge_and_ols():
    X, Y = _data(n=80, d=4, n_outputs=3)
    n = X.shape[0]
    est = ReuseCovRegressor(epsilon=np.inf, ridge=0.1, fit_intercept=False).fit(X, Y)
    ridge = Ridge(alpha=n * 0.1, fit_intercept=False).fit(X, Y)
    np.testing.assert_allclose(est.coef_, ridge.coef_, rtol=1e-10)

    c = 2.5
    est = ReuseCovRegressor(epsilon=np.inf, ridge=0.1, intercept_scaling=c).fit(X, Y)
    Xa = np.hstack([X, np.full((n, 1), c)])
    ridge = Ridge(alpha=n * 0.1, fit_intercept=False).fit(Xa, Y)
    np.testing.assert_allclose(est.coef_, ridge.coef_[:, :-1], rtol=1e-10)
    np.testing.assert_allclose(est.intercept_, c * ridge.coef_[:, -1], rtol=1e-10)

    est = ReuseCovRegressor(epsilon=np.inf, ridge=0).fit(X, Y)
    ols = LinearRegression().fit(X, Y)
    np.testing.assert_allclose(est.coef_, ols.coef_, rtol=1e-8)
    np.testing.assert_allclose(est.intercept_, ols.intercept_, rtol=1e-8, atol=1e-12)

    # Rank-deficient X: the minimum-norm solution.
    Xr = np.hstack([X, X[:, :1]])
    est = ReuseCovRegressor(epsilon=np.inf, ridge=0, fit_intercept=False).fit(Xr, Y)
    lstsq = np.linalg.lstsq(Xr, Y, rcond=None)[0].T
    np.testing.assert_allclose(est.coef_, lstsq, rtol=1e-8, atol=1e-10)


def test_huge_epsilon_close_to_ridge():
    # Gaussian noise shrinks only like Delta / sqrt(2 epsilon) for large epsilon
    # (mu(eps, delta) ~ sqrt(2 eps)), so the tolerance follows the released sigmas.
    X, Y = _data(n=80, d=4, n_outputs=3)
    est = ReuseCovRegressor(epsilon=1e8, delta=1e-5, x_bound=10.0, y_bound=20.0,
                            ridge=0.1, fit_intercept=False, random_state=0).fit(X, Y)
    ridge = Ridge(alpha=80 * 0.1, fit_intercept=False).fit(X, Y)
    sigma_1, sigma_2 = est.noise_std_["covariance"], est.noise_std_["association"]
    assert sigma_2 < 1e-3 * est.sensitivity_["association"] * 10
    lam_min = np.linalg.eigvalsh(X.T @ X / 80).min() + 0.1
    p = X.shape[1]
    tol = 6 * math.sqrt(p) * (sigma_2 + sigma_1 * np.abs(ridge.coef_).sum(axis=1).max())
    assert np.abs(est.coef_ - ridge.coef_).max() <= tol / lam_min
    far = ReuseCovRegressor(epsilon=1e14, delta=1e-5, x_bound=10.0, y_bound=20.0,
                            ridge=0.1, fit_intercept=False, random_state=0).fit(X, Y)
    np.testing.assert_allclose(far.coef_, ridge.coef_, atol=1e-5)


def test_non_private_mode_warns():
    X, Y = _data()
    with pytest.warns(PrivacyLeakWarning):
        ReuseCovRegressor(epsilon=np.inf).fit(X, Y)


# ------------------------------------------------------- 7./8. projection
def _feasible_points(rng, k, n, m, radius):
    Z = rng.normal(size=(k, n, m))
    scale = radius * rng.uniform(0, 1, size=(k, 1, 1)) / np.linalg.norm(
        Z.reshape(k, -1), axis=1
    )[:, None, None]
    return Z * scale


@pytest.mark.parametrize("active", [True, False])
def test_feature_projection_is_the_projection(active):
    rng = np.random.default_rng(7)
    n, d, n_outputs = 30, 3, 8
    Y = rng.normal(size=(n, n_outputs))
    V, s = spectral_basis(Y.T @ Y, n, n)
    kappa, R = s / n, math.sqrt(n) * 1.0
    U = Y @ V / s
    G_noisy = rng.normal(size=(d, n_outputs)) * (3.0 if active else 1e-3)
    G_hat, mu = project_feature(G_noisy, V, kappa, R)
    assert (mu > 0) == active
    B = G_noisy @ V
    A = B * (kappa / (kappa**2 + mu))
    Z = U @ A.T
    assert np.linalg.norm(Z) <= R * (1 + 1e-9)
    np.testing.assert_allclose(Z.T @ Y / n, G_hat, atol=1e-12)
    if not active:
        np.testing.assert_allclose(G_hat, G_noisy @ V @ V.T, atol=1e-13)
    K = np.einsum("kni,nj->kij", _feasible_points(rng, 1000, n, d, R), Y) / n
    inner = np.einsum("ij,kij->k", G_noisy - G_hat, K - G_hat)
    assert inner.max() <= 1e-9 * np.linalg.norm(G_noisy) ** 2


@pytest.mark.parametrize("active", [True, False])
def test_label_projection_is_the_projection(active):
    rng = np.random.default_rng(8)
    n, d, n_outputs = 30, 4, 6
    X = rng.normal(size=(n, d))
    V, s = spectral_basis(X.T @ X, n, n)
    kappa, R = s / n, math.sqrt(n * n_outputs) * 0.5
    U = X @ V / s
    G_noisy = rng.normal(size=(d, n_outputs)) * (5.0 if active else 1e-3)
    G_hat, mu = project_label(G_noisy, V, kappa, R)
    assert (mu > 0) == active
    A = (kappa / (kappa**2 + mu))[:, None] * (V.T @ G_noisy)
    Z = U @ A
    assert np.linalg.norm(Z) <= R * (1 + 1e-9)
    np.testing.assert_allclose(X.T @ Z / n, G_hat, atol=1e-12)
    if not active:
        np.testing.assert_allclose(G_hat, V @ V.T @ G_noisy, atol=1e-13)
    K = np.einsum("ni,knj->kij", X, _feasible_points(rng, 1000, n, n_outputs, R)) / n
    inner = np.einsum("ij,kij->k", G_noisy - G_hat, K - G_hat)
    assert inner.max() <= 1e-9 * np.linalg.norm(G_noisy) ** 2


def test_projection_rank_deficient_has_no_nan():
    rng = np.random.default_rng(9)
    n = 25
    Y = rng.normal(size=(n, 2)) @ rng.normal(size=(2, 10))  # rank 2
    V, s = spectral_basis(Y.T @ Y, n, n)
    assert V.shape[1] == 2
    G_hat, mu = project_feature(rng.normal(size=(3, 10)) * 10, V, s / n, 1.0)
    assert np.all(np.isfinite(G_hat)) and mu > 0
    X = np.hstack([rng.normal(size=(n, 2))] * 2)  # rank 2 of 4
    V, s = spectral_basis(X.T @ X, n, n)
    G_hat, mu = project_label(rng.normal(size=(4, 5)) * 10, V, s / n, 1.0)
    assert np.all(np.isfinite(G_hat))
    est = ReuseCovRegressor(epsilon=1.0, privacy="feature", mechanism="proj",
                            x_bound=3.0, random_state=0).fit(X, Y)
    assert np.all(np.isfinite(est.coef_))


def test_projection_never_hurts():
    rng = np.random.default_rng(10)
    n, d, n_outputs, xb, yb = 40, 3, 50, 1.0, 1.0
    X = _random_rows(rng, n, d, xb)
    Y = rng.uniform(-yb, yb, size=(n, n_outputs))
    G = X.T @ Y / n
    Vy, sy = spectral_basis(Y.T @ Y, n, n)
    Vx, sx = spectral_basis(X.T @ X, n, n)
    Ry, Rx = math.sqrt(n) * xb, math.sqrt(n * n_outputs) * yb
    for _ in range(200):
        z = rng.normal(size=G.shape) * 0.3
        for G_hat, bound in [
            (project_feature(G + z, Vy, sy / n, Ry)[0],
             2 * Ry * np.linalg.norm(Y @ z.T) / n),
            (project_label(G + z, Vx, sx / n, Rx)[0],
             2 * Rx * np.linalg.norm(X @ z) / n),
        ]:
            err = np.linalg.norm(G_hat - G)
            assert err <= np.linalg.norm(z) * (1 + 1e-12)
            assert err**2 <= bound * (1 + 1e-9)


# ------------------------------------------------------------- 9. l-scaling
def test_association_error_scaling_in_l():
    rng = np.random.default_rng(11)
    n, d, reps = 200, 5, 5
    grid = [16, 64, 256, 1024, 4096]
    X = _random_rows(rng, n, d, 1.0)
    Vx, sx = spectral_basis(X.T @ X, n, n)
    mse = {"gauss": [], "proj_y": [], "proj_x": []}
    for n_outputs in grid:
        Y = np.clip(X @ rng.normal(size=(d, n_outputs)) + 0.3 * rng.normal(
            size=(n, n_outputs)), -1, 1)
        G = X.T @ Y / n
        Vy, sy = spectral_basis(Y.T @ Y if n_outputs <= n else Y @ Y.T, n,
                                n if n_outputs <= n else n_outputs)
        if n_outputs > n:  # left vectors -> right vectors
            Vy = Y.T @ Vy / sy
        common = dict(n=n, d_eff=d, n_outputs=n_outputs, epsilon=2.0, delta=1e-5,
                      w_scale=1.0, ridge=0.0)
        feat = plan_reusecov(privacy="feature", x_scale=1.0,
                             y_row_scale=np.linalg.norm(Y, axis=1).max(), **common)
        lab = plan_reusecov(privacy="label", x_scale=np.linalg.norm(X, axis=1).max(),
                            y_row_scale=math.sqrt(n_outputs), **common)
        acc = {"gauss": 0.0, "proj_y": 0.0, "proj_x": 0.0}
        for _ in range(reps):
            z = rng.normal(size=G.shape)
            acc["gauss"] += np.mean((lab.sigma_assoc * z) ** 2)
            Gy = project_feature(G + feat.sigma_assoc * z, Vy, sy / n, math.sqrt(n))[0]
            acc["proj_y"] += np.mean((Gy - G) ** 2)
            Gx = project_label(G + lab.sigma_assoc * z, Vx, sx / n,
                               math.sqrt(n * n_outputs))[0]
            acc["proj_x"] += np.mean((Gx - G) ** 2)
        for key in mse:
            mse[key].append(acc[key] / reps)
    logl = np.log(grid)
    slope = {k: np.polyfit(logl, np.log(v), 1)[0] for k, v in mse.items()}
    slope_tail = {k: np.polyfit(logl[2:], np.log(v[2:]), 1)[0] for k, v in mse.items()}
    assert 0.85 <= slope["gauss"] <= 1.15
    assert slope_tail["proj_y"] <= 0.25
    assert slope_tail["proj_x"] <= 0.5
    assert mse["proj_y"][-1] < mse["gauss"][-1]
    assert mse["proj_x"][-1] < mse["gauss"][-1]


# ------------------------------------------------- 10. covariance dominance
def test_covariance_vs_association_noise_regime():
    rng = np.random.default_rng(12)
    n, d, lam = 20_000, 10, 0.1
    B = 1.5 * math.sqrt(d)
    X = rng.normal(size=(n, d))
    norms = np.linalg.norm(X, axis=1)
    X[norms > B] *= (B / norms[norms > B])[:, None]
    Sigma = X.T @ X / n
    eye = np.eye(d)
    ratios = {}
    for n_outputs in (1, 4, 16, 64, 256):
        W = rng.normal(size=(d, n_outputs))
        Y = np.clip(X @ W + rng.normal(size=(n, n_outputs)), -3, 3)
        G = X.T @ Y / n
        plan = plan_reusecov(n=n, d_eff=d, n_outputs=n_outputs, epsilon=1.0,
                             delta=1e-6, x_scale=B, y_row_scale=3 * math.sqrt(n_outputs),
                             w_scale=1.0, ridge=lam, cov_budget=0.2)
        W_lam = np.linalg.solve(Sigma + lam * eye, G)
        dev = {"cov": 0.0, "assoc": 0.0}
        for _ in range(200):
            E1 = rng.normal(size=(d, d)) * plan.sigma_cov
            E1 = np.triu(E1) + np.triu(E1, 1).T
            E2 = rng.normal(size=G.shape) * plan.sigma_assoc
            for key, (e1, e2) in {"cov": (E1, 0 * E2), "assoc": (0 * E1, E2)}.items():
                D = _reusecov_solve(Sigma, G, e1, e2, lam) - W_lam
                dev[key] += np.einsum("ij,ik,kj->", D, Sigma, D)
        measured = dev["assoc"] / dev["cov"]
        predicted = plan.sigma_assoc**2 / (
            plan.sigma_cov**2 * np.mean(np.sum(W_lam**2, axis=0))
        )
        assert predicted / 1.25 <= measured <= predicted * 1.25
        # l_0 solves sigma_2(l_0)^2 = sigma_1^2 mean ||w||^2 (sigma_2^2 is linear in l).
        l_zero = n_outputs / predicted
        ratios[n_outputs] = (measured, l_zero)
    l_zero = np.mean([v[1] for v in ratios.values()])
    assert 1 <= l_zero / 4 and 4 * l_zero <= 256
    for n_outputs, (measured, _) in ratios.items():
        if n_outputs <= l_zero / 4:
            assert measured < 1
        if n_outputs >= 4 * l_zero:
            assert measured > 1


# ---------------------------------------------------------------------- 11. PSD
def test_psd_clip_is_projection():
    rng = np.random.default_rng(13)
    d, lam = 6, 0.2
    A = rng.normal(size=(50, d))
    Sigma = A.T @ A / 50
    E1 = rng.normal(size=(d, d)) * 0.5
    E1 = np.triu(E1) + np.triu(E1, 1).T
    M = Sigma + E1 + lam * np.eye(d)
    V, inv = psd_factor(M, lam, noisy=True)
    clipped = V @ np.diag(1 / inv) @ V.T
    assert np.linalg.eigvalsh(clipped).min() >= lam - 1e-12
    target = Sigma + lam * np.eye(d)
    assert np.linalg.norm(clipped - target) <= np.linalg.norm(M - target) + 1e-12
    B = rng.normal(size=(d, 3))
    np.testing.assert_allclose(V @ (inv[:, None] * (V.T @ B)),
                               solve_psd_repaired(M, B, lam), rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError):
        psd_factor(np.diag([1.0, 0.0]), 0.0, noisy=True, psd="none")


# ------------------------------------------------------------------- 12. budget
def test_ledger_totals():
    X, Y = _data(n=100)
    kw = dict(epsilon=1.3, delta=1e-6, x_bound=2.0, y_bound=3.0, random_state=0)
    est = ReuseCovRegressor(**kw).fit(X, Y)
    assert est.privacy_spent_.epsilon == pytest.approx(1.3, rel=1e-9)
    assert est.privacy_spent_.delta == pytest.approx(1e-6, rel=1e-12)
    assert est.privacy_spent_.mu == pytest.approx(gdp_mu(1.3, 1e-6), rel=1e-12)
    est = ReuseCovRegressor(composition="paper", **kw).fit(X, Y)
    assert est.privacy_spent_.composition == "basic"
    assert est.privacy_spent_.epsilon == pytest.approx(1.3, rel=1e-15)
    assert sum(e.delta for e in est.privacy_spent_.events) == pytest.approx(1e-6, rel=1e-15)


def test_cov_budget_auto_closed_form_and_label():
    X, Y = _data(n=100)
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0,
                            w_bound=1.7, cov_budget="auto", random_state=0).fit(X, Y)
    # The joint release: f minimises sigma_1^2 w^2 + sigma_2^2 (both scaled by
    # the joint gain), here checked against neighbouring shares.
    def proxy(f):
        plan = plan_reusecov(n=100, d_eff=3, n_outputs=Y.shape[1], epsilon=1.0, delta=1e-6,
                             x_scale=math.hypot(2.0, 1.0), y_row_scale=3 * math.sqrt(Y.shape[1]),
                             w_scale=1.7, cov_budget=f, intercept=1.0)
        return (plan.sigma_cov * 1.7) ** 2 + plan.sigma_assoc**2

    f_star = est.cov_budget_
    assert proxy(f_star) <= min(proxy(f_star - 0.02), proxy(f_star + 0.02))
    # Composed (paper-free GDP without the joint release): the closed form.
    d1, d2 = est.sensitivity_["covariance"], est.sensitivity_["association"]
    assert optimal_cov_budget(d1, d2, 1.7) == pytest.approx(d1 * 1.7 / (d1 * 1.7 + d2),
                                                           rel=1e-12)
    paper = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0,
                              w_bound=1.7, cov_budget="auto", composition="paper",
                              random_state=0).fit(X, Y)
    assert 0.01 <= paper.cov_budget_ <= 0.99
    label = ReuseCovRegressor(epsilon=1.0, privacy="label", y_bound=3.0,
                              random_state=0).fit(X, Y)
    assert label.cov_budget_ == 0.0
    assert [e.name for e in label.privacy_spent_.events] == ["association[0]"]


def test_cov_subsample_calibration():
    rng = np.random.default_rng(14)
    n, s = 1000, 100
    X = _random_rows(rng, n, 3, 1.0)
    Y = rng.uniform(-1, 1, size=(n, 2))
    est = ReuseCovRegressor(epsilon=2.0, delta=1e-6, x_bound=1.0, y_bound=1.0,
                            cov_subsample=s, random_state=0, cov_budget=0.5).fit(X, Y)
    eps_1, delta_1 = subsample_budget(1.0, 0.5e-6, s / n)
    from skprivreg.mechanisms import gaussian_sigma

    # Tight intercept sensitivity sqrt(2)(B^2 + c^2/2) with raw B = 1, c = 1.
    expected = gaussian_sigma(math.sqrt(2) * 1.5 / s, eps_1, delta_1)
    assert est.noise_std_["covariance"] == pytest.approx(expected, rel=1e-12)
    assert est.privacy_spent_.composition == "basic"
    assert est.privacy_spent_.epsilon <= 2.0 * (1 + 1e-9)
    # No subsample indices anywhere on the estimator.
    for value in vars(est).values():
        if isinstance(value, np.ndarray):
            assert value.dtype.kind == "f"
    with pytest.raises(ValueError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ReuseCovRegressor(epsilon=2.0, delta=0.05, x_bound=1.0, y_bound=1.0,
                              cov_subsample=10).fit(X, Y)


def test_accountant_checked_before_data_and_charged():
    X, Y = _data()
    acc = BudgetAccountant(epsilon=1.5, delta=1e-3)
    ReuseCovRegressor(epsilon=1.0, delta=1e-4, x_bound=2.0, y_bound=2.0, accountant=acc,
                      random_state=0).fit(X, Y)
    assert acc.n_spends == 1
    with pytest.raises(BudgetExceededError):
        ReuseCovRegressor(epsilon=1.0, delta=1e-4, x_bound=2.0, y_bound=2.0,
                          accountant=acc).fit(X, Y)
    assert acc.n_spends == 1
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-4, x_bound=2.0, y_bound=2.0,
                            accountant=acc)
    assert clone(est).accountant is acc


# -------------------------------------------------------------------- 13. reuse
def _spent_events(accountant):
    return [e for ledger in accountant.ledgers for e in ledger.events]


def test_add_outcomes_reuses_covariance():
    X, Y = _data(n=200, n_outputs=6)
    kw = dict(delta=1e-6, x_bound=2.0, y_bound=5.0, random_state=0)
    acc = BudgetAccountant(epsilon=10, delta=1e-3, composition="gdp")
    est = ReuseCovRegressor(epsilon=1.0, accountant=acc, **kw).fit(X, Y[:, :4])
    cov = est.covariance_
    coef_new = est.add_outcomes(X, Y[:, 4:], epsilon=0.5, delta=1e-6)
    assert est.covariance_ is cov
    assert coef_new.shape == (2, 3) and est.coef_.shape == (6, 3)
    assert est.intercept_.shape == (6,)
    names = [e.name for e in est.privacy_spent_.events]
    assert names == ["covariance+association[0]", "association[1]"]
    mus = [e.mu for e in est.privacy_spent_.events]
    assert est.privacy_spent_.mu == pytest.approx(math.sqrt(sum(m * m for m in mus)))
    assert acc.n_spends == 2
    spent = _spent_events(acc)
    assert math.sqrt(sum(e.mu**2 for e in spent)) == pytest.approx(
        est.privacy_spent_.mu, rel=1e-12
    )
    assert [e.name for e in spent].count("covariance+association[0]") == 1
    # The released covariance carries its marginal (post-processing of the
    # joint release): mu = Delta_1 / sigma_1, below the joint mu.
    (marginal,) = cov.ledger.events
    assert marginal.mu == pytest.approx(est.sensitivity_["covariance"] / cov.sigma,
                                        rel=1e-12)
    assert marginal.mu < spent[0].mu
    with pytest.raises(ValueError):
        est.add_outcomes(X[:-1], Y[:-1, 4:], epsilon=0.5, delta=1e-6)


def test_batching_costs_the_same_mu_under_gdp():
    X, Y = _data(n=200, n_outputs=6)
    kw = dict(x_bound=2.0, y_bound=5.0, random_state=0)
    cov_est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, **kw).fit(X, Y[:, :1])
    cov = cov_est.export_covariance()
    # One batch of 6 at some mu, or batches of 2 + 4 with the same per-column sigma.
    mu_a = 0.5
    eps_for = lambda mu: __import__("skprivreg").accounting.gdp_epsilon(mu, 1e-6)  # noqa
    one = ReuseCovRegressor(epsilon=eps_for(mu_a), delta=1e-6, covariance=cov, **kw)
    one.fit(X, Y)
    sigma = one.noise_std_["association"]
    mu_2 = mu_a * math.sqrt(2 / 6)
    mu_4 = mu_a * math.sqrt(4 / 6)
    two = ReuseCovRegressor(epsilon=eps_for(mu_2), delta=1e-6, covariance=cov, **kw)
    two.fit(X, Y[:, :2])
    two.add_outcomes(X, Y[:, 2:], epsilon=eps_for(mu_4), delta=1e-6)
    assert two.association_releases_[0]["sigma"] == pytest.approx(sigma, rel=1e-6)
    assert two.association_releases_[1]["sigma"] == pytest.approx(sigma, rel=1e-6)
    mu_one = math.hypot(cov.ledger.mu, mu_a)
    assert one.privacy_spent_.mu == pytest.approx(mu_one, rel=1e-9)
    assert two.privacy_spent_.mu == pytest.approx(mu_one, rel=1e-6)


def test_covariance_parameter_spends_nothing_on_covariance():
    X, Y = _data(n=200)
    kw = dict(delta=1e-6, x_bound=2.0, y_bound=5.0)
    first = ReuseCovRegressor(epsilon=1.0, random_state=0, **kw).fit(X, Y)
    cov = first.export_covariance()
    assert isinstance(cov, NoisyCovariance)
    acc = BudgetAccountant(epsilon=10, delta=1e-3, composition="gdp")
    second = ReuseCovRegressor(epsilon=1.0, covariance=cov, accountant=acc,
                               random_state=1, **kw).fit(X, Y)
    assert second.covariance_ is cov
    spent = _spent_events(acc)
    assert [e.name for e in spent] == ["association[0]"]
    assert spent[0].mu == pytest.approx(gdp_mu(1.0, 1e-6), rel=1e-12)
    assert [e.name for e in second.privacy_spent_.events] == [
        "covariance[reused]", "association[0]"
    ]
    with pytest.raises(ValueError, match="x_bound"):
        ReuseCovRegressor(epsilon=1.0, covariance=cov, delta=1e-6, x_bound=3.0,
                          y_bound=5.0).fit(X, Y)
    with pytest.raises(ValueError, match="n="):
        ReuseCovRegressor(epsilon=1.0, covariance=cov, **kw).fit(X[:-1], Y[:-1])


def test_add_outcomes_noise_is_fresh():
    X, Y = _data(n=200, n_outputs=2)
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=5.0,
                            keep_noisy_stats=True, random_state=0).fit(X, Y)
    est.add_outcomes(X, Y, epsilon=1.0, delta=1e-6)
    first, second = est.noisy_xty_[:, :2], est.noisy_xty_[:, 2:]
    assert not np.allclose(first, second)  # same data, same seed: noise must differ


# ----------------------------------------------------------- 14. invalid configs
@pytest.mark.parametrize(
    "params",
    [
        dict(privacy="full", mechanism="proj"),
        dict(privacy="feature", neighbouring="zero-out"),
        dict(privacy="label", neighbouring="zero-out"),
        dict(delta=1.5),
        dict(delta=0.0),
        dict(epsilon=0.0),
        dict(epsilon=-1.0),
        dict(cov_budget=1.0),
        dict(cov_budget=0.0),
        dict(cov_subsample=60),
        dict(cov_subsample=500),
        dict(cov_subsample=10, delta=0.5),
        dict(ridge=-1.0),
    ],
)
@pytest.mark.filterwarnings("ignore:delta >= 1/n")
def test_invalid_configurations_raise(params):
    X, Y = _data(n=60)
    acc = BudgetAccountant(epsilon=100, delta=0.9)
    base = dict(epsilon=1.0, x_bound=2.0, y_bound=2.0, accountant=acc)
    with pytest.raises(ValueError):
        ReuseCovRegressor(**{**base, **params}).fit(X, Y)
    assert acc.n_spends == 0


def test_configuration_errors_are_typed():
    X, Y = _data()
    with pytest.raises(ConfigurationError):
        ReuseCovRegressor(privacy="full", mechanism="proj", x_bound=1.0,
                          y_bound=1.0).fit(X, Y)


# ------------------------------------------------------- 15. shapes and sklearn
def test_shapes_follow_linear_regression():
    X, Y = _data(n=100, n_outputs=3)
    kw = dict(epsilon=1.0, x_bound=2.0, y_bound=5.0, random_state=0)
    est = ReuseCovRegressor(**kw).fit(X, Y[:, 0])
    assert est.coef_.shape == (3,) and isinstance(est.intercept_, float)
    assert est.predict(X).shape == (100,)
    est = ReuseCovRegressor(**kw).fit(X, Y[:, :1])
    assert est.coef_.shape == (1, 3) and est.intercept_.shape == (1,)
    assert est.predict(X).shape == (100, 1)
    est = ReuseCovRegressor(**kw).fit(X, Y)
    assert est.coef_.shape == (3, 3) and est.predict(X).shape == (100, 3)
    assert np.isfinite(est.score(X, Y))
    tags = est.__sklearn_tags__()
    assert tags.target_tags.multi_output and tags.target_tags.single_output


# ----------------------------------------------------------- 16. reproducibility
@pytest.mark.parametrize("privacy, mechanism", [("full", "gauss"), ("label", "proj"),
                                                ("feature", "proj")])
def test_reproducible_across_block_sizes(privacy, mechanism, fixed_noise):
    rng = np.random.default_rng(16)
    X = rng.normal(size=(50, 3))
    Y = rng.normal(size=(50, 1300))
    kw = dict(epsilon=1.0, privacy=privacy, mechanism=mechanism, x_bound=2.0,
              y_bound=2.0 if privacy != "feature" else None, random_state=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = [ReuseCovRegressor(block_size=b, **kw).fit(X, Y) for b in (7, 4096, None)]
        again = ReuseCovRegressor(block_size=7, **kw).fit(X, Y)
        other = ReuseCovRegressor(**{**kw, "random_state": 6}).fit(X, Y)
    assert np.array_equal(fits[0].coef_, again.coef_)
    for est in fits[1:]:
        np.testing.assert_allclose(est.coef_, fits[0].coef_, rtol=1e-12, atol=1e-14)
    assert not np.allclose(other.coef_, fits[0].coef_)


# -------------------------------------------------------------- 17. public view
def test_public_view_has_no_private_diagnostics():
    X, Y = _data()
    est = ReuseCovRegressor(epsilon=1.0, x_bound=0.5, y_bound=0.5, random_state=0)
    est.fit(X, Y)
    view = est.public_view()
    assert not [k for k in view if "clip" in k]
    fitted = [k for k in vars(est) if k.endswith("_")]
    assert not [k for k in fitted if "clip" in k or "rows" in k or "seed" in k]
    assert not any(isinstance(v, np.random.Generator) for v in vars(est).values())


# ------------------------------------------------------- IndependentSSP baseline
def test_independent_ssp_budget_and_noise():
    X, Y = _data(n=300, n_outputs=9)
    kw = dict(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=5.0, random_state=0)
    ind = IndependentSSPRegressor(**kw).fit(X, Y)
    reuse = ReuseCovRegressor(cov_budget=0.5, **kw).fit(X, Y)
    assert ind.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-9)
    # Per outcome, the covariance noise is sqrt(l) = 3 times ReuseCov's; the
    # association noise is the same (sensitivity sqrt(l) smaller, mu sqrt(l) smaller).
    assert ind.noise_std_["covariance"] == pytest.approx(
        3 * reuse.noise_std_["covariance"], rel=1e-12
    )
    assert ind.noise_std_["association"] == pytest.approx(
        reuse.noise_std_["association"], rel=1e-12
    )
    basic = IndependentSSPRegressor(composition="basic", **kw).fit(X, Y)
    assert basic.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-12)
    ols = IndependentSSPRegressor(epsilon=np.inf, ridge=0).fit(X, Y)
    np.testing.assert_allclose(ols.coef_, LinearRegression().fit(X, Y).coef_, rtol=1e-8)


# ---------------------------------------------------------------- CLI and demo
def test_planner_is_the_plan_of_fit_and_prints_it(capsys):
    from skprivreg.mechanisms import hypot_at_least, sqrt_times_at_least

    plan = reusecov_plan(n_samples=5008, n_features=25, n_outputs=101, epsilon=5.0,
                         delta=1 / 5008**2, x_bound=5.0, y_bound=5.0, cov_budget="auto")
    release = plan_reusecov(n=5008, d_eff=26, n_outputs=101, epsilon=5.0,
                            delta=1 / 5008**2, x_scale=hypot_at_least(5, 1),
                            y_row_scale=sqrt_times_at_least(101, 5.0),
                            w_scale=5 / hypot_at_least(5, 1),
                            cov_budget="auto", intercept=1.0, x_raw=5.0)
    assert plan.sigma_assoc == release.sigma_assoc and plan.sigma_cov == release.sigma_cov
    assert plan.ledger.epsilon == pytest.approx(5.0, rel=1e-9)
    text = str(plan)
    assert "sigma_1" in text and "sigma_2" in text and f"{plan.sigma_assoc:.6g}" in text
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.ridge = 0.0
    # the command prints the same plan
    assert plan_command(["--n", "5008", "--d", "25", "--l", "101", "--epsilon", "5",
                         "--delta", str(1 / 5008**2), "--x-bound", "5", "--y-bound", "5",
                         "--cov-budget", "auto"]) == 0
    assert capsys.readouterr().out.strip() == text
    with pytest.raises(ValueError, match="proj"):
        reusecov_plan(n_samples=100, n_features=3, epsilon=1.0, mechanism="proj",
                      x_bound=1.0, y_bound=1.0)
    # the command refuses the same request with exit status 2 and the reason
    assert plan_command(["--n", "100", "--d", "3", "--privacy", "full", "--mechanism",
                         "proj", "--x-bound", "1", "--y-bound", "1"]) == 2
    assert "proj" in capsys.readouterr().out


def test_planner_charges_missing_bounds_like_fit():
    """A missing bound is planned as a private estimate with its notion (as fit does)."""
    plan = reusecov_plan(n_samples=20_000, n_features=3, n_outputs=4, epsilon=1.0,
                         privacy="label", bounds_budget=0.2, x_max_norm=2.0)
    X, Y = _data(n=20_000, n_outputs=4)
    est = ReuseCovRegressor(epsilon=1.0, privacy="label", bounds_budget=0.2).fit(X, Y)
    assert [(e.name, e.notion, e.epsilon) for e in plan.ledger.events] == [
        (e.name, e.notion, e.epsilon) for e in est.privacy_spent_.events]
    assert plan.unit_scales == ("y_bound",)


def test_demo_case_fits_and_beats_zero():
    case = demo_case()
    assert case["notion"] == "full"
    est = clone(case["estimator"]).fit(case["X_train"], case["y_train"])
    assert est.score(case["X_test"], case["y_test"]) > 0.2


def test_plan_command_label_and_feature(capsys):
    assert plan_command(["--n", "5008", "--d", "25", "--l", "1000", "--epsilon", "5",
                         "--privacy", "label", "--mechanism", "proj", "--y-bound", "5",
                         "--x-max-norm", "2.7"]) == 0
    out = capsys.readouterr().out
    assert "covariance share f         0.0000" in out
    assert plan_command(["--n", "5008", "--d", "25", "--l", "1000", "--privacy",
                         "feature", "--x-bound", "5", "--y-max-norm", "60"]) == 0
    # a public scale that is not given is taken as 1, and the plan says so
    assert plan_command(["--n", "100", "--d", "3", "--privacy", "label", "--y-bound", "1"]) == 0
    assert "taken as 1: x_max_norm" in capsys.readouterr().out


def test_add_outcomes_label_and_proj_warning():
    X, Y = _data(n=200, n_outputs=6)
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, privacy="label", mechanism="proj",
                            y_bound=5.0, random_state=0).fit(X, Y[:, :3])
    with pytest.warns(UserWarning, match="batch"):
        est.add_outcomes(X, Y[:, 3:], epsilon=1.0, delta=1e-6)
    assert est.coef_.shape == (6, 3)
    assert est.privacy_spent_.epsilon == pytest.approx(
        __import__("skprivreg").accounting.gdp_epsilon(
            math.sqrt(2) * gdp_mu(1.0, 1e-6), 2e-6), rel=1e-9)
    # The exact covariance of label DP is recomputed from the public X, never noised.
    assert est.covariance_.sigma == 0.0


def test_float32_input_accumulates_in_float64():
    X, Y = _data(n=120, n_outputs=3)
    est64 = ReuseCovRegressor(epsilon=np.inf, ridge=0.1).fit(X.astype(np.float32),
                                                             Y.astype(np.float32))
    ref = ReuseCovRegressor(epsilon=np.inf, ridge=0.1).fit(
        X.astype(np.float32).astype(np.float64), Y.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(est64.coef_, ref.coef_, rtol=1e-12)
    assert est64.coef_.dtype == np.float64


# ------------------------------------------------- one read of Y for the clip test
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_labels_nan_or_inf_refused_before_any_spend(bad):
    # validate_data no longer reads y for finiteness: the clipping scan does,
    # in every chunk (the bad entry sits in the last row), before the spend.
    X, Y = _data(n=200, n_outputs=5)
    Y = Y.copy()
    Y[-1, 3] = bad
    for cls in (ReuseCovRegressor, IndependentSSPRegressor):
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        with pytest.raises(ValueError, match="Input y contains NaN or infinity"):
            cls(epsilon=1.0, x_bound=2.0, y_bound=3.0, accountant=acc).fit(X, Y)
        assert acc.n_spends == 0
    est = ReuseCovRegressor(epsilon=1.0, x_bound=2.0, y_bound=3.0).fit(X, Y[:, :3])
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est.accountant = acc
    with pytest.raises(ValueError, match="Input y contains NaN or infinity"):
        est.add_outcomes(X, Y[:, 3:], epsilon=0.5, delta=1e-6)
    assert acc.n_spends == 0


def test_label_scan_chunks_find_every_clip_and_nan(monkeypatch):
    import skprivreg.linear_model._reusecov_stats as stats_module

    # 3 rows of 4 labels per chunk: the scan must look at every chunk.
    monkeypatch.setattr(stats_module, "_CACHE_CHUNK_BYTES", 3 * 4 * 8)
    Y = np.zeros((10, 4))
    assert not stats_module.scan_labels(Y, 1.0)
    Y[9, 0] = -1.5  # last (partial) chunk
    assert stats_module.scan_labels(Y, 1.0)
    assert not stats_module.scan_labels(Y, None)
    Y[9, 0] = 0.0
    Y[4, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        stats_module.scan_labels(Y, 1.0)
    # A clipped block gives X^T clip(Y).
    X = np.ones((10, 2))
    Y = np.linspace(-3, 3, 40).reshape(10, 4)
    out = stats_module.block_statistics(X, Y, y_bound=1.0, fit_intercept=False)
    np.testing.assert_allclose(out.xty, X.T @ np.clip(Y, -1, 1))
    assert out.y_clipped


@pytest.mark.parametrize("layout", ["C", "F", "frame"])
@pytest.mark.parametrize("Estimator", [ReuseCovRegressor, IndependentSSPRegressor])
def test_a_row_beyond_x_bound_changes_no_released_bit_in_any_layout(
        Estimator, layout, fixed_noise):
    """Whether a row was clipped is private, even through rounding.

    A scaled row and an unscaled one leave the pass in the same (C) order:
    a product rounds a Fortran-ordered operand, which scikit-learn makes of
    a data frame, differently.
    """
    pd = pytest.importorskip("pandas")
    from skprivreg.bounds import clip_rows, row_norms

    rng = np.random.default_rng(1)
    base = rng.standard_normal((4000, 7))
    y = base @ np.arange(1.0, 8.0) * 0.1 + rng.standard_normal(4000)
    bound = 1.01 * float(row_norms(base).max())
    beyond = base.copy()
    for k in range(100):  # a row whose clipped copy is not clipped again
        beyond[5] = base[5] * (1.5 + k * 1e-3) * bound / float(np.linalg.norm(base[5]))
        clipped_row = clip_rows(beyond[5:6], bound)[0][0]
        if not clip_rows(clipped_row[None, :], bound)[1]:
            break
    inside = beyond.copy()
    inside[5] = clipped_row
    wrap = {"C": np.ascontiguousarray, "F": np.asfortranarray, "frame": pd.DataFrame}[layout]
    coefs = [Estimator(epsilon=1.0, x_bound=bound, y_bound=10.0, random_state=0)
             .fit(wrap(X), y).coef_ for X in (beyond, inside)]
    np.testing.assert_array_equal(coefs[0], coefs[1])


@pytest.mark.parametrize("x_bound, c, privacy", [(1.0, 1e8, "full"), (1e-8, 1.0, "full"),
                                                 (1.0, 1e8, "feature"), (1.0, 1e7, "full")])
def test_sensitivities_use_the_raw_row_bound_even_when_the_intercept_dominates(x_bound, c,
                                                                              privacy):
    # sqrt(hypot(B, c)^2 - c^2) rounds to 0 (or below B) when c >> B: the statistics were
    # released with no noise (sensitivity 0) while the ledger claimed a normal spend.
    from skprivreg.linear_model import IndependentSSPRegressor
    from skprivreg.mechanisms import cross_sensitivity, gram_upper_sensitivity

    rng = np.random.default_rng(0)
    n = 400
    X = rng.uniform(-1, 1, (n, 3)) * x_bound / 2
    Y = rng.uniform(-1, 1, (n, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=x_bound, y_bound=1.0,
                                intercept_scaling=c, privacy=privacy).fit(X, Y)
    gram = gram_upper_sensitivity(x_bound, c) / n
    assert est.sensitivity_["covariance"] >= gram * (1 - 1e-12) > 0
    assert est.noise_std_["covariance"] > 0
    assert est.covariance_.x_bound == x_bound
    if privacy == "feature":
        assert est.sensitivity_["association"] > 0 and est.noise_std_["association"] > 0
    else:
        cross = cross_sensitivity(x_bound, math.sqrt(2), c) / n
        assert est.sensitivity_["association"] >= cross * (1 - 1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ind = IndependentSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=x_bound,
                                          y_bound=1.0, intercept_scaling=c).fit(X, Y)
        assert all(event.sigma is None or event.sigma > 0
                   for event in ind.privacy_spent_.events)
        sigmas = [s for e in ind.privacy_spent_.events for _, s in (e.components or ())]
        assert sigmas and all(s > 0 for s in sigmas)


@pytest.mark.parametrize("kw", [dict(neighbouring="zero-out", w_bound=1e20),
                                dict(privacy="feature", y_is_zero=True)])
def test_an_extreme_budget_split_leaves_each_release_some_budget(kw):
    # The closed-form split gave exactly 1.0 (w_bound far above 1, or a public Y of
    # zeros): the association's calibration then refused mu = 0 after the spend.
    from skprivreg import BudgetAccountant

    kw = dict(kw)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 3))
    Y = np.zeros((500, 2)) if kw.pop("y_is_zero", False) else rng.normal(size=(500, 2))
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ReuseCovRegressor(epsilon=1.0, x_bound=2.0, y_bound=3.0, accountant=acc,
                                **kw).fit(X, Y)
    assert est.cov_budget_ == pytest.approx(0.99)
    assert acc.n_spends == 1 and np.all(np.isfinite(est.coef_))


def test_a_failed_add_outcomes_after_its_spend_keeps_every_release_in_the_ledger():
    # The new release records its spend, then the solve fails (a rank-deficient public X
    # with no ridge): the ledger had lost the fit's own release.
    from skprivreg import BudgetAccountant

    rng = np.random.default_rng(1)
    X = rng.normal(size=(1000, 3))
    Y = X @ rng.normal(size=(3, 2)) + rng.normal(size=(1000, 2))
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ReuseCovRegressor(epsilon=1.0, privacy="label", y_bound=3.0, psd="none",
                                ridge=0.0, accountant=acc).fit(X, Y)
        before = [e.name for e in est.privacy_spent_.events]
        before_epsilon = est.privacy_spent_.epsilon
        X_rank_deficient = X.copy()
        X_rank_deficient[:, 2] = X_rank_deficient[:, 1]
        with pytest.raises(np.linalg.LinAlgError):
            est.add_outcomes(X_rank_deficient, Y, epsilon=1.0, delta=1e-6)
    names = [e.name for e in est.privacy_spent_.events]
    assert names == before + ["association[1]"]
    assert acc.n_spends == 2
    assert est.privacy_spent_.epsilon > before_epsilon


def test_reused_covariance_without_a_row_bound_is_refused_before_any_spend():
    from skprivreg import BudgetAccountant

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    Y = rng.normal(size=(300, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cov = ReuseCovRegressor(epsilon=np.inf, y_bound=3.0).fit(X, Y).export_covariance()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match="no row bound"):
        ReuseCovRegressor(epsilon=1.0, y_bound=3.0, covariance=cov, accountant=acc).fit(X, Y)
    assert acc.n_spends == 0


def test_add_outcomes_updates_the_attributes_of_the_last_release():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 3))
    Y = rng.normal(size=(500, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ReuseCovRegressor(epsilon=1.0, x_bound=3.0, y_bound=3.0).fit(X, Y)
        first = dict(est.sensitivity_)
        est.add_outcomes(X, rng.normal(size=(500, 8)), epsilon=2.0, delta=1e-6)
    last = est.association_releases_[-1]
    assert est.sensitivity_["association"] == last["sensitivity"] != first["association"]
    assert est.noise_std_["association"] == last["sigma"]
    assert est.ridge_ == last["ridge"]
    assert est.sensitivity_["covariance"] == first["covariance"]


def test_raw_bound_from_an_augmented_one_is_never_below_it():
    from skprivreg.linear_model._reusecov_plan import _raw_bound_above

    rng = np.random.default_rng(7)
    B = 10.0 ** rng.uniform(-300, 300, 100_000)
    c = 10.0 ** rng.uniform(-300, 300, 100_000)
    # subnormal bounds, and augmented bounds near the largest float
    B = np.concatenate([B, 10.0 ** rng.uniform(-323, -300, 20_000), [1.7e308, 1e308]])
    c = np.concatenate([c, 10.0 ** rng.uniform(-323, -300, 20_000), [1e308, 1.7e308]])
    below = [(b, cc) for b, cc in zip(B, c)
             if not _raw_bound_above(math.hypot(b, cc), cc) >= b]
    assert below == []


def test_reproducible_noise_marks_every_release_that_carries_it():
    # The testing facility's noise makes a ledger not for publication; add_outcomes, a
    # reused covariance and the exported covariance dropped the mark.
    from skprivreg.testing import reproducible_noise

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (2000, 3))
    Y = np.clip(X @ rng.normal(size=(3, 2)), -3, 3)
    kw = dict(epsilon=1.0, x_bound=math.sqrt(3), y_bound=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(0):
            inside = ReuseCovRegressor(random_state=1, **kw).fit(X, Y)
            assert not inside.covariance_.ledger.for_publication
            reused = ReuseCovRegressor(covariance=inside.export_covariance(), **kw).fit(X, -Y)
        inside.add_outcomes(X, -Y[:, :1], epsilon=0.5, delta=1e-6)  # outside the block
        outside = ReuseCovRegressor(covariance=inside.export_covariance(), **kw).fit(X, -Y)
        fresh = ReuseCovRegressor(**kw).fit(X, Y)
    for est in (inside, reused, outside):
        assert not est.privacy_spent_.for_publication and est.noise_reproducible_
    assert fresh.privacy_spent_.for_publication and fresh.covariance_.ledger.for_publication


@pytest.mark.parametrize("kw", [dict(composition="paper"),
                                dict(composition="gdp", cov_subsample=0.5)],
                         ids=["paper", "subsampled"])
def test_estimated_bounds_leave_the_renyi_curve_of_a_basic_split_unchanged(kw):
    # Under basic composition the covariance's share sets the Renyi curve of the
    # releases; chosen from estimated bounds it followed the data, so a search's
    # run could exceed the curve planned on synthetic data and stop after the spend.
    from skprivreg.accounting import ledger_rdp

    orders = np.array([1.5, 2.0, 4.0, 8.0, 32.0])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40_000, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + rng.normal(size=40_000)
    ledgers = [ReuseCovRegressor(epsilon=2.0, delta=1e-6, **kw).fit(scale * X, y)
               .privacy_spent_ for scale in (1.0, 0.1)]
    # The same events; a mu is a ratio of the released bounds' sensitivities and
    # scales, equal up to its last bits (a search allows 1e-9 of its curve).
    events = [[(e.name, e.epsilon, e.delta) for e in ledger.events] for ledger in ledgers]
    assert events[0] == events[1]
    mus = [[e.mu or 0.0 for e in ledger.events] for ledger in ledgers]
    np.testing.assert_allclose(mus[0], mus[1], rtol=1e-12)
    if "cov_subsample" not in kw:  # an amplified release has no Renyi bound
        np.testing.assert_allclose(ledger_rdp(ledgers[0], orders),
                                   ledger_rdp(ledgers[1], orders), rtol=1e-12)


@pytest.mark.parametrize("privacy, declared, missing", [
    ("full", {"x_bound": 5.0}, "y_bound"),
    ("full", {"y_bound": 5.0}, "x_bound"),
    ("feature", {"y_bound": 5.0}, "x_bound"),
    ("label", {"x_bound": 5.0}, "y_bound"),
])
def test_add_outcomes_refuses_a_private_release_without_the_bound_it_clips_to(
        privacy, declared, missing):
    """A model fitted with epsilon=inf holds no bound it was not given; a private
    add_outcomes then clipped to a scale of 0 and released the exact association
    with no noise, charging epsilon 0. Refused before any spend now."""
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(500, 3)), rng.normal(size=(500, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ReuseCovRegressor(epsilon=np.inf, privacy=privacy, **declared).fit(X, Y)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    est.set_params(accountant=acc)
    coef = est.coef_
    with pytest.raises(ConfigurationError, match=missing):
        est.add_outcomes(X, rng.normal(size=(500, 1)) * 1e3, epsilon=1.0, delta=1e-6)
    assert acc.n_spends == 0 and est.coef_ is coef


def test_a_reused_covariance_carries_the_event_of_its_released_row_bound():
    """A covariance whose row bound was released by its fit keeps that release in
    its ledger: a fit reusing it reports it (a bound read from the data makes the
    reusing fit's epsilon infinite)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(20_000, 3))
    Y = X @ rng.normal(size=(3, 2)) + rng.normal(size=(20_000, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = ReuseCovRegressor(epsilon=1.0, delta=1e-6, y_bound=10.0).fit(X, Y)
        (bound_event,) = [e for e in first.privacy_spent_.events if e.name == "x_bound"]
        cov = first.export_covariance()
        assert bound_event in cov.ledger.events
        reuse = ReuseCovRegressor(epsilon=1.0, delta=1e-6, y_bound=10.0, covariance=cov)
        reuse.fit(X, Y[:, ::-1])
        names = [e.name for e in reuse.privacy_spent_.events]
        assert names[0] == "x_bound[reused]"
        assert reuse.privacy_spent_.epsilon > bound_event.epsilon + 1.0
        data = ReuseCovRegressor(epsilon=1.0, delta=1e-6, y_bound=10.0, bounds="data")
        cov = data.fit(X, Y).export_covariance()
        assert math.isinf(cov.ledger.epsilon)
        reuse = ReuseCovRegressor(epsilon=1.0, delta=1e-6, y_bound=10.0, covariance=cov)
        assert math.isinf(reuse.fit(X, Y).privacy_spent_.epsilon)


def test_the_feature_dp_plan_splits_the_budget_as_the_fit_does():
    """Under feature DP the fit's coefficient scale is max |y_ij| / x_scale (the labels
    are public); the planner used the largest row norm of Y, so an 'auto' split
    differed from the fit's (0.395 against 0.366). With y_abs_max they agree."""
    rng = np.random.default_rng(0)
    n, d, l = 20_000, 3, 3
    X = rng.normal(size=(n, d))
    Y = X @ rng.normal(size=(d, l)) + rng.normal(size=(n, l))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = ReuseCovRegressor(epsilon=1.0, delta=1e-6, privacy="feature",
                                x_bound=4.0).fit(X, Y)
    plan = reusecov_plan(n_samples=n, n_features=d, n_outputs=l, epsilon=1.0, delta=1e-6,
                         privacy="feature", x_bound=4.0,
                         y_max_norm=float(np.linalg.norm(Y, axis=1).max()),
                         y_abs_max=float(np.abs(Y).max()))
    assert plan.cov_budget == pytest.approx(fit.cov_budget_, rel=1e-12)
    assert plan.sigma_cov == pytest.approx(fit.noise_std_["covariance"], rel=1e-12)
    assert plan.sigma_assoc == pytest.approx(fit.noise_std_["association"], rel=1e-12)
