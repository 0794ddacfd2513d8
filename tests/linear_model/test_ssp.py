"""AdaSSPRegressor and SSPRegressor."""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.utils._param_validation import InvalidParameterError

from skprivreg import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from skprivreg.linear_model import AdaSSPRegressor, SSPRegressor
from skprivreg.linear_model._ssp import cross_sensitivity, gram_sensitivity
from skprivreg.mechanisms import intercept_gram_sensitivity

ESTIMATORS = [AdaSSPRegressor, SSPRegressor]


def _simulate(n, d, seed, noise=1.0):
    rng = np.random.default_rng(seed)
    beta = np.linspace(-1.5, 1.5, d)
    X = rng.normal(size=(n, d))
    return X, X @ beta + 0.5 + noise * rng.normal(size=n)


def _mse(est, X, y):
    return float(np.mean((est.predict(X) - y) ** 2))


def test_adassp_accuracy_anchor():
    """eps=1, delta=1e-5, X ~ N(0, I_10), n=1e4: close to OLS, far below the mean."""
    X, y = _simulate(10_000, 10, seed=0)
    Xt, yt = _simulate(20_000, 10, seed=1)
    ols = _mse(LinearRegression().fit(X, y), Xt, yt)
    mean = float(np.mean((yt - y.mean()) ** 2))
    errors = []
    for seed in range(5):
        with warnings.catch_warnings():
            pass  # clipping is never signalled
            est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, random_state=seed).fit(X, y)
        errors.append(_mse(est, Xt, yt))
    assert np.median(errors) < 1.5 * ols
    assert np.median(errors) < 0.25 * mean


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_non_private_mode_is_ols_on_clipped_data(Estimator):
    """epsilon=inf adds no noise, so the statistics must be exactly those of the clipped data."""
    X, y = _simulate(500, 3, seed=2)
    x_bound, y_bound = 1.5, 2.0
    with pytest.warns(PrivacyLeakWarning):
        est = Estimator(epsilon=np.inf, x_bound=x_bound, y_bound=y_bound).fit(X, y)
    norms = np.linalg.norm(X, axis=1)
    Xc = X * np.minimum(1, x_bound / norms)[:, None]
    yc = np.clip(y, -y_bound, y_bound)
    ref = LinearRegression().fit(Xc, yc)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8)
    assert est.intercept_ == pytest.approx(ref.intercept_, rel=1e-8)
    assert math.isinf(est.privacy_spent_.epsilon)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_rows_beyond_the_bound_act_exactly_as_their_clipped_versions(Estimator, fixed_noise):
    """Clipping happens before any statistic: the noisy output depends only on clipped data."""
    X, y = _simulate(400, 3, seed=3)
    X[:20] *= 50
    y[:10] *= 40
    x_bound, y_bound = 3.0, 5.0
    Xc = X * np.minimum(1, x_bound / np.linalg.norm(X, axis=1))[:, None]
    yc = np.clip(y, -y_bound, y_bound)
    params = dict(epsilon=1.0, delta=1e-5, x_bound=x_bound, y_bound=y_bound, random_state=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # clipping is never signalled
        a = Estimator(**params).fit(X, y)
        b = Estimator(**params).fit(Xc, yc)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10)
    assert a.intercept_ == pytest.approx(b.intercept_, rel=1e-10)


@pytest.mark.parametrize("layout", ["column slice", "Fortran"])
@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_row_beyond_the_bound_changes_no_released_bit(Estimator, layout, fixed_noise):
    """Whether a row needed clipping is private, even through rounding.

    X is a column slice of a wider array, or Fortran-ordered (what
    scikit-learn makes of a data frame): a block used as stored is read
    contiguous, in the order of a clipped block (``np.dot`` rounds a strided
    or a Fortran-ordered operand differently).
    """
    rng = np.random.default_rng(3)
    wide = rng.uniform(-0.3, 0.3, size=(20_000, 12))
    y = rng.uniform(-1.0, 1.0, size=20_000)
    wide[0] = 0.0
    wide[0, 0] = 1.0  # norm exactly x_bound: not clipped
    beyond = wide.copy()
    beyond[0, 0] = 2.0  # clipped to the same row
    coefs = []
    for W in (wide, beyond):
        X = W[:, :10] if layout == "column slice" else np.asfortranarray(W[:, :10])
        est = Estimator(epsilon=1.0, x_bound=1.0, y_bound=1.0, random_state=0).fit(X, y)
        coefs.append(np.append(est.coef_, est.intercept_))
    np.testing.assert_array_equal(coefs[0], coefs[1])


def test_sensitivities_are_attained():
    B, yb = 2.0, 3.0
    x, x2 = B * np.eye(2)[0], B * np.eye(2)[1]
    diff = np.outer(x, x) - np.outer(x2, x2)
    upper = diff[np.triu_indices(2)]
    assert np.linalg.norm(upper) == pytest.approx(gram_sensitivity(B))
    assert np.linalg.norm(np.outer(x, [yb, yb]) - np.outer(-x, [yb, yb])) == pytest.approx(
        cross_sensitivity(B, yb, 2)
    )


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("composition", ["gdp", "basic"])
@pytest.mark.parametrize("declared", [True, False])
def test_ledger_totals_equal_the_budget(Estimator, composition, declared):
    X, y = _simulate(6000, 4, seed=4)
    bounds = dict(x_bound=4.0, y_bound=8.0) if declared else {}
    with warnings.catch_warnings():
        pass  # clipping is never signalled
        est = Estimator(epsilon=0.7, delta=1e-6, composition=composition, random_state=0,
                        **bounds).fit(X, y)
    ledger = est.privacy_spent_
    assert ledger.epsilon == pytest.approx(0.7, rel=1e-6)
    assert ledger.delta == pytest.approx(1e-6)
    assert ledger.epsilon <= 0.7 * (1 + 1e-9)
    names = [event.name for event in ledger]
    assert ("x_bound" in names) == (not declared)
    for event in ledger:
        if event.sigma:
            assert event.mu == pytest.approx(event.sensitivity / event.sigma)


def test_ledger_sigmas_use_the_released_bounds():
    X, y = _simulate(4000, 4, seed=5)
    with warnings.catch_warnings():
        pass  # clipping is never signalled
        est = SSPRegressor(epsilon=1.0, delta=1e-6, random_state=0).fit(X, y)
    gram = next(e for e in est.privacy_spent_ if e.name == "XtX")
    cross = next(e for e in est.privacy_spent_ if e.name == "XtY")
    B = math.hypot(est.x_bound_, 1.0)
    assert gram.sensitivity == pytest.approx(intercept_gram_sensitivity(est.x_bound_, 1.0))
    assert cross.sensitivity == pytest.approx(cross_sensitivity(B, est.y_bound_))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_multi_output_shapes(Estimator):
    X, y = _simulate(3000, 4, seed=6)
    Y = np.column_stack([y, -y, 2 * y])
    est = Estimator(epsilon=2.0, delta=1e-6, x_bound=4.0, y_bound=20.0, random_state=0)
    with warnings.catch_warnings():
        pass  # clipping is never signalled
        est.fit(X, Y)
    assert est.coef_.shape == (3, 4)
    assert est.intercept_.shape == (3,)
    assert est.predict(X).shape == (3000, 3)
    single = Estimator(epsilon=2.0, delta=1e-6, x_bound=4.0, y_bound=20.0, random_state=0).fit(X, y)
    assert single.coef_.shape == (4,)
    assert isinstance(single.intercept_, float)
    cross = next(e for e in est.privacy_spent_ if e.name == "XtY")
    assert cross.sensitivity == pytest.approx(
        cross_sensitivity(math.hypot(4.0, 1.0), 20.0, n_outputs=3)
    )


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_psd_repair_keeps_tiny_samples_near_the_mean_predictor(Estimator):
    """Noise dominates at n=100, eps=0.1; the repaired solve must not explode."""
    X, y = _simulate(100, 10, seed=8)
    Xt, yt = _simulate(5000, 10, seed=9)
    mean_mse = float(np.mean((yt - y.mean()) ** 2))
    ratios = []
    for seed in range(10):
        with warnings.catch_warnings():
            pass  # clipping is never signalled
            est = Estimator(epsilon=0.1, delta=1e-5, x_bound=5.0, y_bound=10.0,
                            random_state=seed).fit(X, y)
        ratios.append(_mse(est, Xt, yt) / mean_mse)
    assert max(ratios) < 5.0


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_private_bounds_on_too_few_rows_raise_before_spending(Estimator):
    from skprivreg import ConfigurationError
    from skprivreg.bounds import min_samples_for_private_bound

    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    needed = min_samples_for_private_bound(0.05)
    X, y = _simulate(needed - 1, 3, seed=15)
    with pytest.raises(ConfigurationError, match=str(needed)):
        Estimator(epsilon=1.0, delta=1e-5, accountant=acc).fit(X, y)
    assert acc.n_spends == 0
    X, y = _simulate(needed, 3, seed=15)
    with warnings.catch_warnings():
        pass  # clipping is never signalled
        Estimator(epsilon=1.0, delta=1e-5, accountant=acc, random_state=0).fit(X, y)
    assert acc.n_spends == 1


def test_bounds_from_data_warn():
    X, y = _simulate(500, 3, seed=10)
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, bounds="data", random_state=0).fit(X, y)
    assert math.isinf(est.privacy_spent_.epsilon)
    with pytest.raises(BudgetExceededError):
        AdaSSPRegressor(epsilon=1.0, delta=1e-5, bounds="data",
                        accountant=BudgetAccountant(5.0, 1e-3)).fit(X, y)


def test_paper_constants_warn_and_record_add_remove():
    X, y = _simulate(2000, 3, seed=11)
    with pytest.warns(PrivacyLeakWarning, match="could not verify"):
        est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=4.0, y_bound=8.0, constants="paper",
                              random_state=0).fit(X, y)
    releases = [e for e in est.privacy_spent_ if e.name in ("lambda_min", "XtX", "XtY")]
    assert all(e.neighbouring == "add-remove" for e in releases)
    assert est.privacy_spent_.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_bad_input_fails_before_spending(Estimator):
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    X, y = _simulate(200, 3, seed=12)
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    # Public configuration errors come first; NaN is refused by the first pass.
    bounds = dict(x_bound=3.0, y_bound=5.0)
    with pytest.raises(ValueError, match="NaN"):
        Estimator(epsilon=1.0, delta=1e-5, accountant=acc, **bounds).fit(X_nan, y)
    X_inf = X.copy()
    X_inf[-1, 1] = -np.inf
    with pytest.raises(ValueError, match="infinity"):
        Estimator(epsilon=1.0, delta=1e-5, accountant=acc, **bounds).fit(X_inf, y)
    with pytest.raises(ValueError):
        Estimator(epsilon=1.0, delta=1e-5, accountant=acc).fit(X, y[:-1])
    for bad in (dict(epsilon=0.0), dict(epsilon=-1.0), dict(delta=1.0), dict(delta=0.0)):
        with pytest.raises(InvalidParameterError):
            Estimator(**{"epsilon": 1.0, "delta": 1e-5, **bad}, accountant=acc).fit(X, y)
    assert acc.n_spends == 0


def test_budget_exceeded_spends_nothing():
    acc = BudgetAccountant(epsilon=1.5, delta=1e-4)
    X, y = _simulate(500, 3, seed=13)
    AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=3.0, y_bound=5.0, accountant=acc).fit(X, y)
    with pytest.raises(BudgetExceededError):
        AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=3.0, y_bound=5.0, accountant=acc).fit(X, y)
    assert acc.n_spends == 1
    assert acc.total()[0] == pytest.approx(1.0)


def test_same_seed_gives_fresh_noise_and_fit_does_not_touch_params():
    """random_state never fixes the noise: refits and clones draw independent noise."""
    X, y = _simulate(4000, 3, seed=14)
    est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=3.0, y_bound=5.0, random_state=3)
    params = est.get_params()
    a = est.fit(X, y).coef_.copy()
    b = est.fit(X, y).coef_.copy()
    c = clone(est).fit(X, y).coef_.copy()
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    assert est.get_params() == params


def test_same_seed_same_output_under_the_testing_facility(fixed_noise):
    X, y = _simulate(4000, 3, seed=14)
    est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=3.0, y_bound=5.0, random_state=3)
    a = est.fit(X, y).coef_.copy()
    np.testing.assert_array_equal(a, clone(est).fit(X, y).coef_)
    assert est.noise_reproducible_ and not est.privacy_spent_.for_publication


@pytest.mark.parametrize("Estimator", [SSPRegressor, AdaSSPRegressor])
@pytest.mark.parametrize("c", [3.0, 1.0])
def test_intercept_gram_sensitivity_brute_force(Estimator, c):
    # The Gram sensitivity the estimator records for [X, c 1] must bound
    # ||upper(a a^T - a' a'^T)|| over all row pairs with ||x|| <= B (random
    # pairs on the sphere: the maximum is on the boundary), and a pair attains
    # it: x' = -x when c^2 > 2 B^2; otherwise x = B (cos f, sin f),
    # x' = B (sin f, cos f) (x x^T - x' x'^T diagonal) with x.x' = -c^2/2.
    B, d = 1.7, 3
    est = Estimator(epsilon=1.0, delta=1e-5, x_bound=B, y_bound=1.0, intercept_scaling=c)
    sens = est._gram_sensitivity(B)
    rng = np.random.default_rng(0)
    iu = np.triu_indices(d + 1)

    def change(x, x2):
        a, a2 = np.append(x, c), np.append(x2, c)
        return np.linalg.norm((np.outer(a, a) - np.outer(a2, a2))[iu])

    u = rng.normal(size=(2000, 2, d))
    u *= B / np.linalg.norm(u, axis=2, keepdims=True)
    worst = max(change(x, x2) for x, x2 in u)
    if c * c > 2 * B * B:
        x = B * np.eye(d)[0]
        attained = change(x, -x)
        assert sens == pytest.approx(2 * B * c)
    else:
        f = 0.5 * math.asin(-c * c / (2 * B * B))
        attained = change(B * np.array([math.cos(f), math.sin(f), 0.0]),
                          B * np.array([math.sin(f), math.cos(f), 0.0]))
        assert sens == pytest.approx(math.sqrt(2) * (B**2 + c**2 / 2))
    assert worst <= sens * (1 + 1e-12)
    assert attained == pytest.approx(sens, rel=1e-12)  # tight: no smaller value is valid
    assert sens < math.sqrt(2 * B**4 + 4 * B**2 * c**2)
