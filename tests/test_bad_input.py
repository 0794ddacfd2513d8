"""Bad input is refused the same way on NumPy and on Dask, before any budget is spent.

Every estimator that reads its data through sums: NaN or infinity in X or y
raises scikit-learn's error, complex data and strings are refused, and a
boolean X is converted to float64 as scikit-learn converts it (the Dask fit
then equals the NumPy fit for the same noise).
"""

import warnings

import numpy as np
import pytest

from skprivreg import BudgetAccountant
from skprivreg.linear_model import (
    AdaSSPRegressor,
    IndependentSSPRegressor,
    LinearRegression,
    ReuseCovRegressor,
    SSPRegressor,
)
from skprivreg.preprocessing import PrivateStandardScaler

DECLARED = dict(x_bound=3.0, y_bound=4.0)
ESTIMATORS = {
    "SSP": lambda acc: SSPRegressor(accountant=acc, **DECLARED),
    "AdaSSP": lambda acc: AdaSSPRegressor(accountant=acc, **DECLARED),
    "LinearRegression": lambda acc: LinearRegression(accountant=acc, x_range=(-4.0, 4.0),
                                                     y_bound=4.0, n_rounds=2),
    "IndependentSSP": lambda acc: IndependentSSPRegressor(accountant=acc, **DECLARED),
    "ReuseCov": lambda acc: ReuseCovRegressor(accountant=acc, **DECLARED),
    # X public: no row clip, so the finiteness of X is checked on its own.
    "ReuseCov, label DP": lambda acc: ReuseCovRegressor(accountant=acc, privacy="label",
                                                        y_bound=4.0),
    "PrivateStandardScaler": lambda acc: PrivateStandardScaler(accountant=acc,
                                                               x_range=(-4.0, 4.0)),
}
CHUNK = 500


def _data(n=2_000, d=3):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), rng.normal(size=n)


def _as(lazy, X, y):
    if not lazy:
        return X, y
    da = pytest.importorskip("dask.array")
    return (da.from_array(X, chunks=(CHUNK, X.shape[1])),
            da.from_array(y, chunks=(CHUNK,) + y.shape[1:]))


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X) if isinstance(est, PrivateStandardScaler) else est.fit(X, y)


def _refused(name, lazy, X, y, match):
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    est = ESTIMATORS[name](acc)
    with pytest.raises(ValueError, match=match):
        _fit(est, *_as(lazy, X, y))
    assert acc.n_spends == 0
    assert not hasattr(est, "privacy_spent_")


def _bad_values():
    X, y = _data()
    cases = []
    for where, value in (((1_503, 2), np.nan), ((3, 0), -np.inf)):
        bad = X.copy()
        bad[where] = value
        cases.append(("X", bad, y))
    for where, value in ((1_999, np.inf), (700, np.nan)):
        bad = y.copy()
        bad[where] = value
        cases.append(("y", X, bad))
    return cases


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_nan_or_infinity_raises_before_any_spend(name, lazy):
    for side, X, y in _bad_values():
        if side == "y" and name == "PrivateStandardScaler":
            continue  # the scaler reads no labels
        _refused(name, lazy, X, y, f"Input {side} contains (NaN|infinity)")


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_complex_data_and_strings_are_refused_before_any_spend(name, lazy):
    X, y = _data()
    _refused(name, lazy, X.astype(complex), y, "Complex data not supported")
    if name != "PrivateStandardScaler":
        _refused(name, lazy, X, y.astype(complex), "Complex data not supported")
    words = np.where(X > 0, "up", "down")
    _refused(name, lazy, words, y, "(?i)string|could not convert")


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_boolean_x_is_read_as_floats_on_both_paths(name, fixed_noise):
    X, y = _data()
    X = X > 0
    fitted = {}
    for lazy in (False, True):
        acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
        est = ESTIMATORS[name](acc).set_params(random_state=0)  # the same noise in both fits
        fitted[lazy] = _fit(est, *_as(lazy, X, y))
        assert acc.n_spends == 1
    attribute = "scale_" if name == "PrivateStandardScaler" else "coef_"
    np.testing.assert_allclose(getattr(fitted[True], attribute),
                               getattr(fitted[False], attribute), rtol=1e-9)


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_complex_new_outcomes_are_refused_before_any_spend(lazy):
    """``add_outcomes`` checks its labels as ``fit`` does (a cast would drop the
    imaginary part and release the real one)."""
    X, y = _data(400, 2)
    acc = BudgetAccountant(epsilon=100.0, delta=0.5)
    est = _fit(ReuseCovRegressor(accountant=acc, **DECLARED), X, y)
    X_new, Y_new = _as(lazy, X, (y + 1j * y)[:, None])
    with pytest.raises(ValueError, match="Complex data not supported"):
        est.add_outcomes(X_new, Y_new, epsilon=1.0, delta=1e-6)
    assert acc.n_spends == 1


def test_a_dask_frame_of_nullable_numbers_fits_as_pandas_does_and_na_is_refused():
    """Nullable ``Float64`` / ``Int64`` columns (whose Dask arrays would have dtype
    object) are read as float64, as scikit-learn reads them; a missing value
    is NaN, refused before any spend."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y = _data()
    frame = pd.DataFrame({"a": pd.array(X[:, 0], dtype="Float64"),
                          "b": pd.array(np.round(10 * X[:, 1]).astype(int), dtype="Int64"),
                          "c": X[:, 2]})
    labels = pd.Series(y).astype("Float64")
    params = dict(epsilon=np.inf, x_bound=40.0, y_bound=4.0)
    ref = _fit(SSPRegressor(**params), frame, labels)
    lazy = _fit(SSPRegressor(**params), dd.from_pandas(frame, npartitions=3),
                dd.from_pandas(labels, npartitions=3))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9)
    assert list(lazy.feature_names_in_) == ["a", "b", "c"]
    frame.loc[1_234, "b"] = pd.NA
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ValueError, match="NaN"):
        _fit(SSPRegressor(accountant=acc, **DECLARED), dd.from_pandas(frame, npartitions=3),
             dd.from_pandas(labels, npartitions=3))
    # Only the extension columns are converted: a complex column is still refused.
    frame["b"], frame["c"] = frame["b"].fillna(0), X[:, 2] + 1j * X[:, 0]
    with pytest.raises(ValueError, match="Complex data not supported"):
        _fit(SSPRegressor(accountant=acc, **DECLARED), dd.from_pandas(frame, npartitions=3),
             dd.from_pandas(labels, npartitions=3))
    assert acc.n_spends == 0


@pytest.mark.parametrize("Estimator", [ReuseCovRegressor, IndependentSSPRegressor,
                                       SSPRegressor, AdaSSPRegressor])
@pytest.mark.parametrize("bound", ["x_bound", "y_bound"])
def test_bounds_too_large_for_the_calibration_are_refused_before_any_spend(Estimator, bound):
    """The calibration multiplies up to four bound-sized factors: a bound of 1e154
    spent the budget and then failed inside it (OverflowError, "mu must be > 0",
    a non-finite noisy Gram matrix)."""
    X, y = _data()
    for value in (1e61, 1e154, 1e300):
        acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
        params = {**DECLARED, bound: value}
        with pytest.raises(ValueError, match="too large"):
            _fit(Estimator(accountant=acc, **params), X, y)
        assert acc.n_spends == 0
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    _fit(Estimator(accountant=acc, **{**DECLARED, bound: 1e60}), X, y)  # the largest taken
    assert acc.n_spends == 1


@pytest.mark.parametrize("Estimator", [ReuseCovRegressor, IndependentSSPRegressor,
                                       SSPRegressor, AdaSSPRegressor])
@pytest.mark.parametrize("bound", ["x_bound", "y_bound"])
def test_bounds_too_small_for_the_calibration_are_refused_before_any_spend(Estimator, bound):
    """Sensitivities are products of up to four bound-sized factors: with a bound of
    2.2e-162 a sensitivity rounded to 5e-324 and its noise scale to 0, so a statistic
    was released exactly under a finite epsilon."""
    X, y = _data()
    for value in (9e-61, 2.2e-162, 1e-300):
        acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
        params = {**DECLARED, bound: value}
        with pytest.raises(ValueError, match="too small"):
            _fit(Estimator(accountant=acc, **params), X, y)
        assert acc.n_spends == 0
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    _fit(Estimator(accountant=acc, **{**DECLARED, bound: 1e-60}), X, y)  # the smallest taken
    assert acc.n_spends == 1


@pytest.mark.parametrize("declared", [
    dict(x_range=(-1e61, 1e61)),
    dict(y_bound=1e61),
    # Each column is within the limit; a support of three is not.
    dict(x_range=(-7e59, 7e59)),
])
def test_lasso_ranges_too_large_for_its_ssp_fit_are_refused_before_the_selection(declared):
    """The Lasso regressor's SSP fit on the support refuses bounds above 1e60; the
    selection had already spent its budget when it did."""
    from skprivreg.feature_selection import PrivateLassoRegressor

    X, y = _data()
    params = {"x_range": (-4.0, 4.0), "y_bound": 4.0, **declared}
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ValueError, match="too large for the fit"):
        PrivateLassoRegressor(epsilon=4.0, delta=1e-6, accountant=acc, **params).fit(X, y)
    assert acc.n_spends == 0
    if declared.get("x_range") == (-7e59, 7e59):
        # At most one column selected: its norm bound 7e59 is taken.
        acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
        PrivateLassoRegressor(epsilon=4.0, delta=1e-6, accountant=acc, max_features=1,
                              selection_rule="lars", on_fail="empty", **params).fit(X, y)
        assert acc.n_spends == 1


def _bounds_whose_norm_rounds_by_order():
    """Seven magnitudes whose norm in column order rounds above 1e60 and, largest
    first, to at most 1e60 (found on this machine: the rounding of np.linalg.norm
    depends on its SIMD code)."""
    rng = np.random.default_rng(0)
    for _ in range(5000):
        m = rng.uniform(2e59, 4.6e59, 7)
        m *= 1e60 / np.linalg.norm(np.sort(m)[::-1])
        for k in range(-3, 4):
            mm = m * (1 + k * 1e-16)
            if float(np.linalg.norm(mm)) > 1e60 >= float(np.linalg.norm(np.sort(mm)[::-1])):
                return mm
    pytest.skip("no such magnitudes under this machine's rounding")


def test_lasso_stage2_bounds_checked_with_a_rounding_margin_and_for_an_estimator_instance():
    """The check's norm (largest magnitudes first) rounded to exactly 1e60 while stage 2's
    (column order) gave 1.0000000000000001e60, after the spend; and an estimator
    instance (not the string 'ssp') was not checked at all."""
    from skprivreg.feature_selection import PrivateLassoRegressor

    m = _bounds_whose_norm_rounds_by_order()
    assert float(np.linalg.norm(m)) > 1e60 >= float(np.linalg.norm(np.sort(m)[::-1]))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2_000, 7))
    y = X @ np.full(7, 3.0)
    for params in (dict(x_range=(-m, m), y_bound=100.0),
                   dict(x_range=(-1e61, 1e61), y_bound=100.0, estimator=SSPRegressor()),
                   dict(x_range=(-1.0, 1.0), y_bound=1e61, estimator=AdaSSPRegressor())):
        acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
        with pytest.raises(ValueError, match="too large for the fit"):
            PrivateLassoRegressor(epsilon=20.0, delta=1e-5, accountant=acc, **params).fit(X, y)
        assert acc.n_spends == 0


def test_lasso_ranges_whose_stage2_bound_underflows_are_refused_before_the_selection():
    """A range magnitude of 1e-200 made stage 2's x_bound 0.0, which SSP refused after the
    selection had spent."""
    from skprivreg.feature_selection import PrivateLassoRegressor

    X, y = _data()
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ValueError, match="x_range is too small"):
        PrivateLassoRegressor(epsilon=4.0, delta=1e-6, accountant=acc, y_bound=4.0,
                              x_range=(-1e-200, 1e-200)).fit(X, y)
    assert acc.n_spends == 0


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "estimated"])
@pytest.mark.parametrize("privacy", ["label", "feature"])
def test_reusecov_public_side_too_large_for_the_calibration_is_refused_before_any_spend(
        privacy, declared):
    """Under label DP a public row of X at 1e200 made X^T X overflow, and the solve failed
    after the spend (feature DP: a public row of Y, in the association's scale). With
    the private side's bound estimated, the counting pass before its spend counts the
    public rows above the limit."""
    X, y = _data()
    big_X, big_y = X.copy(), y.copy()
    if privacy == "label":
        big_X[5] = 1e200
        params = dict(privacy="label", y_bound=4.0 if declared else None)
    else:
        big_y[5] = 1e200
        params = dict(privacy="feature", x_bound=3.0 if declared else None)
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ValueError, match="too large for the noise calibration"):
        _fit(ReuseCovRegressor(accountant=acc, **params), big_X, big_y)
    assert acc.n_spends == 0
    _fit(ReuseCovRegressor(accountant=acc, **params), X * 1e20, y * 1e20)  # large but usable
    assert acc.n_spends == 1


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "estimated"])
@pytest.mark.parametrize("privacy", ["label", "feature"])
def test_reusecov_public_side_too_small_for_the_calibration_is_refused_before_any_spend(
        privacy, declared):
    """A public side of tiny entries (1e-170) had row norms whose squares underflowed to
    0: the association's sensitivity and noise were 0 while X^T Y / n, a data-dependent
    float, was released (a row of the private side could be read off two fits)."""
    X, y = _data()
    if privacy == "label":
        X = X * 1e-170
        params = dict(privacy="label", y_bound=4.0 if declared else None,
                      fit_intercept=False)
    else:
        y = y * 1e-170
        params = dict(privacy="feature", x_bound=3.0 if declared else None)
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ValueError, match="too small for the noise calibration"):
        _fit(ReuseCovRegressor(accountant=acc, **params), X, y)
    assert acc.n_spends == 0
    # Small but usable: the scale is above the floor.
    _fit(ReuseCovRegressor(accountant=acc, **params), X * 1e120, y * 1e120)
    assert acc.n_spends == 1
    # A side of zeros is used as it is (its product with the private side is 0).
    zeros = (np.zeros_like(X), y) if privacy == "label" else (X, np.zeros_like(y))
    est = _fit(ReuseCovRegressor(accountant=acc, **params), *zeros)
    assert acc.n_spends == 2 and np.all(np.isfinite(est.coef_))


def test_reusecov_public_scale_bounds_every_exact_row_norm():
    """The public side's computed largest norm may lie a few ulps below the exact one:
    the sensitivity takes a bound of it (computed_norm_bound), never the computed norm."""
    from fractions import Fraction

    from skprivreg.bounds import computed_norm_bound, row_norms
    from skprivreg.mechanisms import sqrt_at_least

    rng = np.random.default_rng(3)
    below = 0
    for d in (1, 2, 3, 7, 50):
        rows = rng.normal(size=(400, d)) * 10.0 ** rng.uniform(-50, 50, size=(400, 1))
        computed = row_norms(rows)
        for row, norm in zip(rows, computed):
            exact_square = sum(Fraction(float(v)) ** 2 for v in row)
            exact = sqrt_at_least(exact_square)  # smallest float >= the exact norm
            below += Fraction(float(norm)) ** 2 < exact_square
            assert computed_norm_bound(norm, d) >= exact
    assert below > 0  # computed norms do fall below the exact ones


@pytest.mark.parametrize("privacy", ["label", "feature"])
def test_reusecov_sensitivity_takes_the_bound_of_the_public_norms(monkeypatch, privacy):
    import skprivreg.linear_model._reusecov_fit as fit_module

    X, y = _data()
    params = (dict(privacy="label", y_bound=4.0) if privacy == "label"
              else dict(privacy="feature", x_bound=3.0))
    bounded = _fit(ReuseCovRegressor(**params), X, y).sensitivity_["association"]
    monkeypatch.setattr(fit_module, "computed_norm_bound", lambda norm, d: norm)
    computed = _fit(ReuseCovRegressor(**params), X, y).sensitivity_["association"]
    assert bounded > computed
    assert bounded <= computed * (1 + 1e-14)


def test_lasso_checks_the_stage2_bounds_only_where_stage2_limits_them():
    """LinearRegression takes ranges and has no 1e60 limit: a label bound of 1e70 is
    fitted, as LinearRegression itself fits it."""
    from skprivreg.feature_selection import PrivateLassoRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3_000, 3))
    y = 3.0 * X[:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = PrivateLassoRegressor(epsilon=8.0, delta=1e-5, estimator=LinearRegression(),
                                    x_range=(-5.0, 5.0), y_bound=1e70, on_fail="empty",
                                    random_state=0).fit(X, y)
    assert reg.privacy_spent_.epsilon <= 8.0


@pytest.mark.parametrize("params, match", [
    (dict(), "needs rsc_constant, max_features"),
    (dict(max_features=2, rsc_constant=0.25), "needs penalty or noise_level"),
    (dict(max_features=2, rsc_constant=0.25, noise_level=1.0), "needs Lambda > 16"),
])
def test_lasso_perturbation_settings_are_refused_before_the_regressors_spend(params, match):
    """The selection refused these settings inside its fit, after the regressor had
    recorded its plan."""
    from skprivreg.exceptions import ConfigurationError
    from skprivreg.feature_selection import PrivateLassoRegressor

    X, y = _data()
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ConfigurationError, match=match):
        PrivateLassoRegressor(epsilon=4.0, delta=1e-6, accountant=acc, method="perturbation",
                              x_range=(-5.0, 5.0), y_bound=10.0, **params).fit(X, y)
    assert acc.n_spends == 0


def _stage2_of_another_guarantee():
    from skprivreg.label_dp import GaussianLabelNoiseRegressor

    return [ReuseCovRegressor(privacy="label"), ReuseCovRegressor(privacy="feature"),
            ReuseCovRegressor(neighbouring="zero-out"), GaussianLabelNoiseRegressor(),
            AdaSSPRegressor(constants="paper")]  # stated under add/remove


@pytest.mark.parametrize("estimator", _stage2_of_another_guarantee(),
                         ids=["label", "feature", "zero-out", "label-noise", "paper-adassp"])
def test_lasso_stage2_of_another_guarantee_is_refused_before_any_spend(estimator):
    """Its ledger could not amend the regressor's full-DP plan, which raised after the
    selection had spent."""
    from skprivreg.exceptions import ConfigurationError
    from skprivreg.feature_selection import PrivateLassoRegressor

    X, y = _data()
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ConfigurationError, match="Use a full-DP stage 2"):
        PrivateLassoRegressor(epsilon=8.0, delta=1e-5, accountant=acc, estimator=estimator,
                              x_range=(-5.0, 5.0), y_bound=20.0).fit(X, y)
    assert acc.n_spends == 0


@pytest.mark.parametrize("name", ["LinearRegression", "HuberRegressor"])
def test_lasso_stage2_that_is_not_private_is_refused_before_any_spend(name):
    """scikit-learn's regressors (Huber's has an unrelated ``epsilon``) were refused only
    when stage 2 was built, after the whole plan was spent."""
    import sklearn.linear_model

    from skprivreg.exceptions import ConfigurationError
    from skprivreg.feature_selection import PrivateLassoRegressor

    X, y = _data()
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ConfigurationError, match="not a skprivreg regressor"):
        PrivateLassoRegressor(epsilon=8.0, delta=1e-5, accountant=acc,
                              estimator=getattr(sklearn.linear_model, name)(),
                              x_range=(-5.0, 5.0), y_bound=20.0).fit(X, y)
    assert acc.n_spends == 0


@pytest.mark.parametrize("Estimator", [SSPRegressor, AdaSSPRegressor, IndependentSSPRegressor,
                                       ReuseCovRegressor])
def test_intercept_scaling_too_large_for_the_calibration_is_refused_before_any_spend(Estimator):
    """intercept_scaling=1e200 raised a bare OverflowError from the planning."""
    X, y = _data()
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    with pytest.raises(ValueError, match="intercept_scaling"):
        _fit(Estimator(accountant=acc, intercept_scaling=1e200, **DECLARED), X, y)
    assert acc.n_spends == 0
    _fit(Estimator(accountant=acc, intercept_scaling=1e60, **DECLARED), X, y)
    assert acc.n_spends == 1
