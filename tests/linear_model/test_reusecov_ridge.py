"""ReuseCov's default ridge: a post-processing of the released statistics only.

The ridge is chosen by :func:`~skprivreg.linear_model._ridge_rule.risk_minimising_ridge`
from the released covariance, the released associations of every outcome and the
public noise scales. With the noise fixed by the testing facility:

- two data sets with the same sufficient statistics (rows mixed by an orthogonal
  map that keeps the intercept column) release the same statistics, hence the same
  ridge, although every row differs;
- the ridge equals the rule recomputed from the released values alone
  (``covariance_.matrix``, ``noisy_xty_``, ``noise_std_``);
- data with other statistics give another ridge (the check can fail).
"""

import warnings

import numpy as np
import pytest

from skprivreg.linear_model import IndependentSSPRegressor, ReuseCovRegressor
from skprivreg.linear_model._ridge_rule import released_ridge, risk_minimising_ridge
from skprivreg.testing import reproducible_noise


def _data(seed=0, n=2000, d=3, n_outputs=6):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    W = rng.uniform(-0.5, 0.5, (d, n_outputs))
    Y = X @ W + 0.1 * rng.standard_normal((n, n_outputs))
    return X, Y


def _mix_rows(X, Y, n_groups=100):
    """``(H X, H Y)`` with ``H`` orthogonal and ``H 1 = 1``.

    ``H`` reflects each of ``n_groups`` disjoint quadruples of rows ``(a, b, c,
    d)`` along ``v = (e_a + e_b - e_c - e_d)/2`` (orthogonal to the all-ones
    vector): ``H^T H = I`` keeps ``X^T X``, ``X^T Y`` and the intercept
    column's sums, while those rows change by O(1).
    """
    X, Y = X.copy(), Y.copy()
    for k in range(n_groups):
        rows = slice(4 * k, 4 * k + 4)
        v = np.array([0.5, 0.5, -0.5, -0.5])
        for A in (X, Y):
            A[rows] -= 2.0 * np.outer(v, v @ A[rows])
    return X, Y


def _fit(X, Y, seed=0, **kw):
    # Same integer random_state inside the testing facility: the same noise.
    params = dict(epsilon=2.0, delta=1e-6, x_bound=4.0, y_bound=5.0,
                  keep_noisy_stats=True, random_state=0)
    params.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(seed):
            return ReuseCovRegressor(**params).fit(X, Y)


@pytest.mark.parametrize("privacy", ["full", "label"])
def test_ridge_depends_on_data_only_through_released_statistics(privacy):
    X, Y = _data()
    if privacy == "full":
        X2, Y2 = _mix_rows(X, Y)
        assert np.abs(X2 - X).max() > 0.5
    else:
        # X is public (its largest row norm enters the sensitivity): change Y
        # only, by a perturbation orthogonal to the columns of [X, 1].
        Xa = np.column_stack([X, np.ones(len(X))])
        N = np.random.default_rng(2).standard_normal(Y.shape)
        X2, Y2 = X, Y + N - Xa @ np.linalg.lstsq(Xa, N, rcond=None)[0]
    assert np.abs(Y2 - Y).max() > 0.5
    # the bounds clip nothing on either data set
    assert np.linalg.norm(X2, axis=1).max() < 4 and np.abs(Y2).max() < 5
    kw = {} if privacy == "full" else {"x_bound": None}
    a = _fit(X, Y, privacy=privacy, **kw)
    b = _fit(X2, Y2, privacy=privacy, **kw)
    # Same released statistics up to float round-off of the sums ...
    np.testing.assert_allclose(a.noisy_xty_, b.noisy_xty_, atol=1e-9)
    np.testing.assert_allclose(a.covariance_.matrix, b.covariance_.matrix, atol=1e-9)
    # ... hence the same ridge.
    assert b.ridge_ == pytest.approx(a.ridge_, rel=1e-6)
    # The ridge is the rule applied to the released values and public scales.
    expected = released_ridge(a.covariance_.matrix, a.noisy_xty_,
                              a.noise_std_["covariance"], a.noise_std_["association"])
    assert a.ridge_ == pytest.approx(expected, rel=1e-12)
    # Other statistics (a different sample), same noise: another ridge.
    X3, Y3 = _data(seed=5)
    c = _fit(X3, 3.0 * Y3, privacy=privacy, **kw)
    assert abs(c.ridge_ - a.ridge_) > 1e-3 * a.ridge_


def test_rule_is_applied_to_released_values_not_to_exact_ones(monkeypatch):
    """The rule receives the released association (exact + noise), never X^T Y / n."""
    from skprivreg.linear_model import _reusecov_fit as module

    seen = []

    def spy(covariance, associations, sigma_cov, sigma_assoc):
        seen.append((np.array(covariance), np.array(associations), sigma_cov, sigma_assoc))
        return released_ridge(covariance, associations, sigma_cov, sigma_assoc)

    monkeypatch.setattr(module, "released_ridge", spy)
    X, Y = _data()
    est = _fit(X, Y)
    (cov, assoc, s1, s2), = seen
    np.testing.assert_array_equal(assoc, est.noisy_xty_)
    np.testing.assert_array_equal(cov, est.covariance_.matrix)
    assert (s1, s2) == (est.noise_std_["covariance"], est.noise_std_["association"])
    Xa = np.column_stack([X, np.ones(len(X))])
    assert np.abs(assoc - Xa.T @ Y / len(X)).max() > 0.5 * s2  # noisy, not exact


def test_coefficients_use_the_chosen_ridge():
    X, Y = _data()
    est = _fit(X, Y)
    S, G, lam = est.covariance_.matrix, est.noisy_xty_, est.ridge_
    s, V = np.linalg.eigh(S)
    W = V @ ((1.0 / np.maximum(s + lam, lam))[:, None] * (V.T @ G))
    np.testing.assert_allclose(est.coef_, W[:-1].T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.intercept_, W[-1], rtol=1e-9, atol=1e-12)


def test_block_size_does_not_matter():
    X, Y = _data(n_outputs=9)
    auto = _fit(X, Y)
    blocked = _fit(X, Y, block_size=1)
    assert blocked.ridge_ == auto.ridge_
    np.testing.assert_allclose(blocked.coef_, auto.coef_)


def test_risk_rule_beats_theory_rule_on_a_regression():
    """The rule's point: on a standard problem its excess error is far smaller."""
    rng = np.random.default_rng(3)
    n, d, k = 20000, 5, 20
    X = rng.uniform(-1, 1, (n, d))
    W = rng.uniform(-0.3, 0.3, (d, k))
    Y = np.clip(X @ W + 0.1 * rng.standard_normal((n, k)), -1, 1)
    Xa = np.column_stack([X, np.ones(n)])
    mse_ols = np.mean((Y - Xa @ np.linalg.lstsq(Xa, Y, rcond=None)[0]) ** 2)
    kw = dict(x_bound=np.sqrt(d), y_bound=1.0, keep_noisy_stats=False, epsilon=1.0)
    fits = {r: _fit(X, Y, **kw, ridge=r) for r in ("auto", "theory")}
    excess = {r: np.mean((Y - f.predict(X)) ** 2) - mse_ols for r, f in fits.items()}
    # The bound-based rule is ~20x the risk-minimising ridge here and its
    # shrinkage bias dominates (excess ~3.5x OLS's MSE against ~0.5x for the
    # risk rule); a factor 2 leaves room for the noise of one fit.
    assert fits["theory"].ridge_ > 5 * fits["auto"].ridge_
    assert 2.0 * excess["auto"] < excess["theory"]


def test_independent_ssp_shares_a_ridge_from_released_values(monkeypatch):
    """IndependentSSP's default ridge: the rule on every run's released values."""
    from skprivreg.linear_model import _independent_ssp as module

    seen = []

    def spy(eigvals, coords, sigma_cov, sigma_assoc):
        seen.append((np.array(coords), sigma_cov, sigma_assoc))
        return risk_minimising_ridge(eigvals, coords, sigma_cov, sigma_assoc)

    monkeypatch.setattr(module, "risk_minimising_ridge", spy)
    X, Y = _data(n_outputs=3)
    n = len(X)

    def fit(X, Y, ridge):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with reproducible_noise(0):
                return IndependentSSPRegressor(epsilon=2.0, x_bound=50.0, y_bound=50.0,
                                               ridge=ridge, random_state=0).fit(X, Y)

    auto, theory = fit(X, Y, "auto"), fit(X, Y, "theory")
    assert np.ndim(auto.ridge_) == 0 and auto.ridge_ > 0 and auto.ridge_ != theory.ridge_
    (coords, s1, s2), = seen
    assert (s1, s2) == (auto.noise_std_["covariance"], auto.noise_std_["association"])
    # the coordinates are of the released (noisy) associations: their norms
    # differ from the exact ones by noise of scale sigma_2 sqrt(p)
    Xa = np.column_stack([X, np.ones(n)])
    exact = np.linalg.norm(Xa.T @ Y / n, axis=0)
    assert np.abs(np.linalg.norm(coords, axis=0) - exact).max() > 0.1 * s2
    # same released statistics (rows mixed, sums kept): same ridge
    X2, Y2 = _mix_rows(X, Y)
    assert fit(X2, Y2, "auto").ridge_ == pytest.approx(auto.ridge_, rel=1e-6)


def test_rule_floor_and_exact_covariance():
    s = np.array([1.0, 0.5])
    C = np.array([[1.0], [0.5]])
    assert risk_minimising_ridge(s, C, 0.0, 0.0) <= 1e-7


def test_auto_cov_budget_is_a_function_of_public_facts():
    """Default split: f = Delta_1 w / (Delta_1 w + Delta_2), bounds, n and l only."""
    from skprivreg.linear_model._reusecov_plan import optimal_cov_budget
    from skprivreg.mechanisms import (
        cross_sensitivity,
        gram_upper_sensitivity,
        hypot_at_least,
        quotient_at_least,
        sqrt_times_at_least,
    )

    X, Y = _data(n_outputs=6)
    X2, Y2 = _data(seed=7, n_outputs=6)
    a = _fit(X, Y, x_bound=2.0, y_bound=3.0)
    b = _fit(X2, 5.0 * Y2, x_bound=2.0, y_bound=3.0)
    assert a.cov_budget_ == b.cov_budget_  # other data, same public facts
    # Every bound rounded up (sqrt(6) * 3, hypot(2, 1), the divisions by n).
    n, B, K = len(X), hypot_at_least(2.0, 1.0), sqrt_times_at_least(6, 3.0)
    expected = optimal_cov_budget(
        quotient_at_least(gram_upper_sensitivity(2.0, 1.0), n),
        quotient_at_least(cross_sensitivity(2.0, K, 1.0), n), 3.0 / B,
        joint=dict(x_bound=2.0, y_row_bound=K, n_rows=n, intercept=1.0, notion="full"),
    )
    assert a.cov_budget_ == pytest.approx(expected, rel=1e-12)
    assert 0 < a.cov_budget_ < 0.5  # more outcomes: less for the covariance
    more = _fit(np.vstack([X] * 1), np.hstack([Y] * 4), x_bound=2.0, y_bound=3.0)
    assert more.cov_budget_ < a.cov_budget_


def test_feature_projection_rule_uses_the_projected_noise_level():
    """GaussProj_Y: sigma_a^2 = sigma_2^2 sum_k h_k^2 / l, public Y and released mu."""
    from skprivreg.linear_model._reusecov_projection import projection_shrinkage
    from skprivreg.linear_model._reusecov_release import _feature_projection

    X, Y = _data(n=300, n_outputs=400)
    est = _fit(X, Y, privacy="feature", mechanism="proj", y_bound=None)
    n, n_outputs = Y.shape
    proj, _ = _feature_projection(Y, n, est.x_bound_eff_)
    h = projection_shrinkage(proj.kappa, est.proj_mu_)
    sigma_a = est.noise_std_["association"] * np.sqrt(np.sum(h**2) / n_outputs)
    assert sigma_a < 0.9 * est.noise_std_["association"]  # l > n: rank <= n < l
    expected = released_ridge(est.covariance_.matrix, est.noisy_xty_,
                              est.noise_std_["covariance"], sigma_a)
    assert est.ridge_ == pytest.approx(expected, rel=1e-9)


def test_label_projection_uses_the_risk_rule_while_inactive():
    # An inactive GaussProj_X (multiplier 0, full-rank X) releases the Gaussian
    # association itself, so with the same noise it must choose the same ridge
    # and coefficients as Gauss under label DP (it used the bound-based
    # ridge, a different one, before).
    X, Y = _data(n_outputs=6)
    kw = dict(epsilon=2.0, privacy="label", y_bound=10.0, random_state=0)
    fits = {}
    for mechanism in ("gauss", "proj"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with reproducible_noise(3):
                fits[mechanism] = ReuseCovRegressor(mechanism=mechanism, **kw).fit(X, Y)
    assert fits["proj"].proj_mu_ == 0.0
    assert fits["proj"].ridge_ == pytest.approx(fits["gauss"].ridge_, rel=1e-3)
    np.testing.assert_allclose(fits["proj"].coef_, fits["gauss"].coef_, rtol=1e-3, atol=1e-9)
    theory = ReuseCovRegressor(mechanism="proj", ridge="theory", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(3):
            theory.fit(X, Y)
        assert abs(theory.ridge_ - fits["proj"].ridge_) > 0.5 * fits["proj"].ridge_
