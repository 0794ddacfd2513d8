"""BoostedAdaSSPRegressor and TukeyEMRegressor."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.utils.estimator_checks import parametrize_with_checks

import skprivreg.linear_model._boosted_adassp as boosted
from skprivreg import (
    BoostedAdaSSPRegressor,
    BudgetAccountant,
    ConfigurationError,
    PrivacyLeakWarning,
    PrivateTestFailed,
    TukeyEMRegressor,
)
from skprivreg.accounting import gdp_mu
from skprivreg.linear_model._tukey_em import tukey_budget
from skprivreg.mechanisms import (
    restricted_tukey_sample,
    tukey_log_volumes,
    tukey_ptr_test,
    tukey_ptr_threshold,
    tukey_safety_margin,
)


def _data(n, d=2, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ np.linspace(1.0, -0.5, d) + 0.5 + noise * rng.normal(size=n)


# -- Boosted AdaSSP -------------------------------------------------------------
def test_boosted_composes_all_releases():
    """T + 2 Gaussian releases of mu/sqrt(T+2) each compose to gdp_mu(epsilon, delta)."""
    X, y = _data(3_000)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    est = BoostedAdaSSPRegressor(epsilon=1.0, x_bound=4.0, y_bound=5.0, n_rounds=20,
                                 accountant=acc).fit(X, y)
    ledger = est.privacy_spent_
    assert acc.ledgers == [ledger]
    assert len(ledger.events) == 22 and all(e.is_gaussian for e in ledger.events)
    mu = gdp_mu(1.0, 1e-6)
    for e in ledger.events:
        assert e.mu == pytest.approx(mu / math.sqrt(22), rel=1e-12)
        assert e.sigma == pytest.approx(e.sensitivity / e.mu)
        assert e.notion == "full" and e.neighbouring == "replace-one"
    assert ledger.epsilon == pytest.approx(1.0, rel=1e-9)
    grad = ledger.events[-1]
    assert grad.sensitivity == pytest.approx(2 * math.hypot(4.0, 1.0) * 5.0)


def test_boosted_noise_matches_ledger(monkeypatch):
    """Every gradient's noise, (noisy - exact)/sigma_ledger, is N(0, 1): chi-square(k).

    k = 3 entries x 10 rounds x 10 fits = 300; stat must lie in
    [chi2.ppf(1e-9, 300), chi2.isf(1e-9, 300)] = [176, 471] (a correct release
    fails with probability 2e-9; |stat - k| < 5 sqrt(2k) failed in 3.9e-6), and
    halved noise gives stat ~ 75. The exact gradient is recomputed here from
    its definition (rows clipped to
    x_bound, residuals to y_bound; 4% outliers beyond y_bound, and epsilon=20
    so that a skipped clip is many sigmas away), at the released theta_t.
    """
    X, y = _data(2_000)
    y[::25] = 9.0
    x_bound, y_bound = 3.0, 4.0
    real_add, real_solve = boosted.add_gaussian, boosted.solve_psd_repaired
    norms = np.linalg.norm(X, axis=1)
    A = np.hstack([X * np.minimum(1, x_bound / norms)[:, None], np.ones((len(X), 1))])
    stat, k = 0.0, 0
    for seed in range(10):
        noisy_values, steps = [], []

        def add_spy(value, sigma, rng, noisy_values=noisy_values):
            noisy = real_add(value, sigma, rng)
            noisy_values.append(noisy)
            return noisy

        def solve_spy(M, B, floor, steps=steps):
            step = real_solve(M, B, floor)
            steps.append(step)
            return step

        monkeypatch.setattr(boosted, "add_gaussian", add_spy)
        monkeypatch.setattr(boosted, "solve_psd_repaired", solve_spy)
        est = BoostedAdaSSPRegressor(epsilon=20.0, x_bound=x_bound, y_bound=y_bound,
                                     random_state=seed).fit(X, y)
        grad_events = est.privacy_spent_.events[2:]
        theta = np.zeros(3)
        for noisy, event, step in zip(noisy_values[1:], grad_events, steps):
            exact = A.T @ np.clip(y - A @ theta, -y_bound, y_bound)
            z = (noisy - exact) / event.sigma
            stat, k = stat + float(z @ z), k + z.size
            theta = theta + step
    assert k == 300
    assert stats.chi2.ppf(1e-9, k) <= stat <= stats.chi2.isf(1e-9, k), stat


def test_boosted_missing_bound_on_too_few_rows_is_refused_before_any_spend():
    X, y = _data(500)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-4)
    with pytest.raises(ConfigurationError, match=r"y_bound privately .* needs at least \d+"):
        BoostedAdaSSPRegressor(x_bound=3.0, accountant=acc).fit(X, y)
    assert acc.n_spends == 0


def test_boosted_accuracy_anchor(fixed_noise):
    X, y = _data(20_000, d=3, noise=0.5)
    est = BoostedAdaSSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=6.0, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.coef_, np.linspace(1.0, -0.5, 3), atol=0.1)


# -- TukeyEM mechanisms ----------------------------------------------------------
def test_ptr_laplace_scale_is_one_over_epsilon_ptr():
    """P(PASS | k_hat = tau - 2/eps) = exp(-2)/2 = 0.0677 for Laplace scale 1/eps.

    20,000 draws: binomial sd 0.0018, tolerance 5 sd = 0.009. With the scale
    eps/2 (epsilon = 1) the rate would be exp(-8)/2 = 1.7e-4.
    """
    eps_ptr, delta_ptr = 0.5, 5e-6
    tau = tukey_ptr_threshold(eps_ptr, delta_ptr)
    assert tau == pytest.approx(2 * math.log(1 / (2 * delta_ptr)))
    rng = np.random.default_rng(0)
    rate = np.mean([tukey_ptr_test(tau - 2 / eps_ptr, eps_ptr, delta_ptr, rng)
                    for _ in range(20_000)])
    assert abs(rate - 0.5 * math.exp(-2)) < 0.009


def test_safety_margin_has_sensitivity_one():
    rng = np.random.default_rng(1)
    for _ in range(40):
        models = rng.standard_t(3, size=(200, 2))
        other = models.copy()
        other[rng.integers(200)] = rng.normal(scale=50, size=2)
        ks = [tukey_safety_margin(tukey_log_volumes(np.sort(m.T, axis=1)), 50, 1.0, 1e-3)
              for m in (models, other)]
        assert abs(ks[0] - ks[1]) <= 1


def test_restricted_sample_depth_law():
    """Depth levels are drawn with probability prop. to (V_j - V_{j+1}) exp(eps j / 2).

    m = 16 one-dimensional models, t = 4, eps = 1: 4,000 draws, chi-square
    over 5 levels (4 dof); 30 is beyond the 1e-5 quantile (25.4). A density
    exp(eps j) (twice the exponent) gives a statistic in the hundreds. Every
    sampled point has the approximate depth that was drawn.
    """
    s = np.sort(np.random.default_rng(2).normal(size=(1, 16)), axis=1)
    V = np.exp(tukey_log_volumes(s))
    levels = np.arange(4, 9)
    V_next = np.append(V[4:], 0.0)
    w = (V[3:] - V_next) * np.exp(0.5 * levels)
    p = w / w.sum()
    rng = np.random.default_rng(3)
    counts = np.zeros(5)
    for _ in range(4_000):
        point, depth = restricted_tukey_sample(s, 4, 1.0, rng)
        counts[depth - 4] += 1
        below = np.sum(s[0] <= point[0])
        assert min(below, 16 - below) == depth
    expected = 4_000 * p
    assert np.sum((counts - expected) ** 2 / expected) < 30


# -- TukeyEM estimator -----------------------------------------------------------
def test_tukey_ledger_and_success(fixed_noise):
    X, y = _data(40_000, d=1, noise=0.3)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    est = TukeyEMRegressor(epsilon=1.0, accountant=acc, random_state=0).fit(X, y)
    assert est.ptr_passed_ and acc.ledgers == [est.privacy_spent_]
    eps_ptr, delta_ptr, eps_em, eta = tukey_budget(1.0, 1e-6)
    assert [(e.name, e.epsilon, e.delta) for e in est.privacy_spent_.events] == [
        ("tukey_ptr", 0.5, 5e-7), ("tukey_em", 0.5, 5e-7)]
    assert eps_em - math.log1p(-eta) == pytest.approx(0.5)
    assert eta / (1 - eta) == pytest.approx(5e-7)
    assert est.privacy_spent_.epsilon == pytest.approx(1.0)
    assert est.coef_[0] == pytest.approx(1.0, abs=0.05)
    assert est.intercept_ == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("epsilon, delta", [(0.05, 0.1), (0.2, 0.5), (0.1, 0.1026)])
def test_tukey_budget_without_a_positive_sampling_epsilon_is_refused_before_any_spend(
        epsilon, delta):
    # epsilon/2 - ln(1 + delta/2) <= 0: the safety margin's argument needs a positive
    # sampling epsilon (a negative one favours shallow points). 0.1026: just past zero.
    assert tukey_budget(epsilon, delta)[2] <= 0.0
    X, y = _data(40_000, d=1, noise=0.3)
    acc = BudgetAccountant(epsilon=5.0, delta=0.9)
    with pytest.raises(ConfigurationError, match="exponential mechanism"):
        TukeyEMRegressor(epsilon=epsilon, delta=delta, accountant=acc).fit(X, y)
    assert acc.n_spends == 0


def test_tukey_budget_with_a_small_positive_sampling_epsilon_fits():
    assert 0.0 < tukey_budget(0.1, 0.1024)[2] < 1e-4
    X, y = _data(40_000, d=1, noise=0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TukeyEMRegressor(epsilon=0.1, delta=0.1024, on_fail="zero").fit(X, y)


def test_tukey_ptr_failure_spends_then_raises(fixed_noise):
    X, y = _data(2_000, d=3, noise=3.0)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    est = TukeyEMRegressor(epsilon=1.0, accountant=acc, random_state=0)
    with pytest.raises(PrivateTestFailed):
        est.fit(X, y)
    assert acc.n_spends == 1 and acc.ledgers[0] is est.privacy_spent_
    assert est.ptr_passed_ is False and not hasattr(est, "coef_")


def test_tukey_failure_fallback_warns(fixed_noise):
    X, y = _data(2_000, d=3, noise=3.0)
    with pytest.warns(UserWarning, match="safety check failed"):
        est = TukeyEMRegressor(epsilon=1.0, on_fail="zero", random_state=0).fit(X, y)
    assert est.ptr_passed_ is False and np.all(est.coef_ == 0)


def test_tukey_too_few_rows_refused_before_any_spend():
    X, y = _data(50, d=9)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    with pytest.raises(ConfigurationError, match="= 80 rows"):
        TukeyEMRegressor(accountant=acc).fit(X, y)
    assert acc.n_spends == 0


# -- scikit-learn compatibility -----------------------------------------------------
@parametrize_with_checks(
    [BoostedAdaSSPRegressor(epsilon=1.0, x_bound=10.0, y_bound=10.0, random_state=0)],
)
def test_boosted_sklearn_compatible(estimator, check, fixed_noise):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        check(estimator)


def test_tukey_releases_the_point_only(fixed_noise):
    # The depth level the point was drawn at is its depth among the private models,
    # not a function of the point alone: releasing it is not covered by the guarantee.
    # Every fitted attribute must be one the docstring documents (all public facts or
    # the released point).
    X, y = _data(40_000, d=1, noise=0.3)
    est = TukeyEMRegressor(epsilon=1.0, random_state=0).fit(X, y)
    documented = {"coef_", "intercept_", "ptr_passed_", "n_models_", "privacy_spent_",
                  "n_features_in_", "feature_names_in_"}
    fitted = {name for name in vars(est) if name.endswith("_") and not name.startswith("_")}
    fitted -= {"noise_reproducible_"}
    assert fitted <= documented
    doc = TukeyEMRegressor.__doc__.split("Attributes")[1]
    assert all(f"{name} :" in doc for name in fitted)


@pytest.mark.parametrize("bounds", [dict(x_bound=1e200, y_bound=1.0),
                                    dict(x_bound=1.0, y_bound=1e200)])
def test_boosted_bound_too_large_for_the_calibration_is_refused_before_any_spend(bounds):
    X, y = _data(2_000)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match="too large"):
        BoostedAdaSSPRegressor(epsilon=1.0, accountant=acc, **bounds).fit(X, y)
    assert acc.n_spends == 0
