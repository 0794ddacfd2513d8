"""ReuseCovRegressor and the LBA aggregation on Dask, against the NumPy path.

A LocalCluster with two worker processes (as in tests/test_dask.py). The
noise is drawn once, on the driver, from the same seeds as for NumPy input,
so a Dask fit differs from the NumPy fit only by the float64 round-off of
block sums added in another order. That round-off is ~1e-16 relative on
X^T X / n and X^T Y / n; the ridge-repaired solve amplifies it by the
condition number of (Sigma_tilde + lambda I) (below 1e3 here) and the
projections' multiplier by a bounded root-finding, so RTOL = 1e-9 (relative,
with an absolute floor ATOL_REL * max |coef|) leaves a margin of 1e4 and
still fails for any difference in the noise (which is O(1e-2) here).
Measured: at most 3e-15 relative to max |coef| (1.3e-13 entrywise).
The LBA aggregates use the NumPy per-bag arithmetic on the same gathered
rows (measured: bit-identical); RTOL_AGG = 1e-12 only allows a different
einsum summation order.
"""

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from skprivreg import BudgetAccountant  # noqa: E402
from skprivreg.exceptions import ConfigurationError  # noqa: E402
from skprivreg.linear_model._reusecov import ReuseCovRegressor  # noqa: E402

RTOL = 1e-9
ATOL_REL = 1e-12
RTOL_AGG = 1e-12

N, D, L = 12_000, 4, 6
CHUNK = 2_500



# These tests compare two execution paths on the same noise.
pytestmark = pytest.mark.usefixtures("fixed_noise")

@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, D))
    W = rng.normal(scale=0.5, size=(D, 2 * L))
    Y = X @ W + 0.3 + rng.normal(size=(N, 2 * L))
    return X, Y[:, :L], Y[:, L:]


def _lazy(A, chunk=CHUNK):
    return da.from_array(A, chunks=(chunk,) + A.shape[1:])


def _quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        pass  # clipping is never signalled
        warnings.simplefilter("ignore", UserWarning)
        return call(*args, **kwargs)


def _assert_same_fit(lazy, ref):
    scale = np.max(np.abs(ref.coef_))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=RTOL, atol=ATOL_REL * scale)
    np.testing.assert_allclose(
        lazy.intercept_, ref.intercept_, rtol=RTOL, atol=ATOL_REL * scale
    )
    np.testing.assert_allclose(
        lazy.covariance_.matrix, ref.covariance_.matrix, rtol=RTOL, atol=1e-13
    )
    assert lazy.ridge_ == pytest.approx(ref.ridge_, rel=RTOL)
    assert lazy.noise_std_ == pytest.approx(ref.noise_std_, rel=RTOL)
    assert lazy.privacy_spent_.epsilon == pytest.approx(ref.privacy_spent_.epsilon)
    assert lazy.privacy_spent_.delta == pytest.approx(ref.privacy_spent_.delta)
    assert lazy.n_features_in_ == ref.n_features_in_


CONFIGS = {
    "full-gauss-gdp": dict(privacy="full", x_bound=3.0, y_bound=5.0),
    "full-auto-split": dict(privacy="full", x_bound=3.0, y_bound=5.0, cov_budget="auto",
                            w_bound=1.0),
    "full-paper": dict(privacy="full", x_bound=3.0, y_bound=5.0, composition="paper"),
    "full-zero-out": dict(privacy="full", x_bound=3.0, y_bound=5.0,
                            neighbouring="zero-out"),
    "full-subsample": dict(privacy="full", x_bound=3.0, y_bound=5.0, cov_subsample=3_001),
    "feature-gauss": dict(privacy="feature", x_bound=3.0),
    "feature-proj": dict(privacy="feature", mechanism="proj", x_bound=3.0),
    "feature-subsample": dict(privacy="feature", x_bound=3.0, cov_subsample=0.3),
    "label-gauss": dict(privacy="label", y_bound=5.0),
    "label-proj": dict(privacy="label", mechanism="proj", y_bound=5.0),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_reusecov_dask_matches_numpy(client, data, name):
    X, Y, _ = data
    params = dict(epsilon=1.0, delta=1e-6, random_state=5, **CONFIGS[name])
    ref = _quiet(ReuseCovRegressor(**params).fit, X, Y)
    lazy = _quiet(ReuseCovRegressor(**params).fit, _lazy(X), _lazy(Y))
    _assert_same_fit(lazy, ref)
    assert lazy.proj_mu_ == pytest.approx(ref.proj_mu_, rel=1e-6, abs=1e-12)
    # The noise is really there: another seed gives another fit.
    other = _quiet(ReuseCovRegressor(**{**params, "random_state": 6}).fit, X, Y)
    assert np.max(np.abs(other.coef_ - ref.coef_)) > 1e3 * RTOL * np.max(np.abs(ref.coef_))


def test_reusecov_dask_single_output_and_lazy_predict(client, data):
    X, Y, _ = data
    params = dict(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=2)
    ref = _quiet(ReuseCovRegressor(**params).fit, X, Y[:, 0])
    Xd = _lazy(X)
    lazy = _quiet(ReuseCovRegressor(**params).fit, Xd, _lazy(Y[:, 0]))
    assert lazy.coef_.shape == (D,)
    _assert_same_fit(lazy, ref)
    pred = lazy.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), ref.predict(X), rtol=1e-8, atol=1e-10)


def test_reusecov_dask_mixed_numpy_target(client, data):
    X, Y, _ = data
    params = dict(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=4)
    ref = _quiet(ReuseCovRegressor(**params).fit, X, Y)
    lazy = _quiet(ReuseCovRegressor(**params).fit, _lazy(X), Y)
    _assert_same_fit(lazy, ref)


@pytest.mark.parametrize("privacy", ["full", "feature", "label"])
def test_reusecov_add_outcomes_on_dask(client, data, privacy):
    X, Y, Y_new = data
    bounds = {"full": dict(x_bound=3.0, y_bound=5.0), "feature": dict(x_bound=3.0),
              "label": dict(y_bound=5.0)}[privacy]
    params = dict(epsilon=1.0, delta=1e-6, privacy=privacy, random_state=8, **bounds)
    acc_ref = BudgetAccountant(epsilon=10.0, delta=1e-3)
    acc_lazy = BudgetAccountant(epsilon=10.0, delta=1e-3)
    ref = _quiet(ReuseCovRegressor(**params, accountant=acc_ref).fit, X, Y)
    lazy = _quiet(ReuseCovRegressor(**params, accountant=acc_lazy).fit, _lazy(X), _lazy(Y))
    new_ref = _quiet(ref.add_outcomes, X, Y_new, epsilon=0.5, delta=1e-6)
    new_lazy = _quiet(lazy.add_outcomes, _lazy(X), _lazy(Y_new), epsilon=0.5, delta=1e-6)
    scale = np.max(np.abs(new_ref))
    np.testing.assert_allclose(new_lazy, new_ref, rtol=RTOL, atol=ATOL_REL * scale)
    _assert_same_fit(lazy, ref)
    assert lazy.coef_.shape == (2 * L, D)
    assert acc_lazy.n_spends == acc_ref.n_spends == 2


def test_reusecov_reused_covariance_on_dask(client, data):
    X, Y, Y_new = data
    params = dict(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0)
    first = _quiet(ReuseCovRegressor(**params, random_state=1).fit, _lazy(X), _lazy(Y))
    cov = first.export_covariance()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ReuseCovRegressor(**params, covariance=cov, random_state=9).fit(X, Y_new)
        lazy = ReuseCovRegressor(**params, covariance=cov, random_state=9).fit(
            _lazy(X), _lazy(Y_new)
        )
    _assert_same_fit(lazy, ref)


@pytest.mark.parametrize("where", ["X", "Y"])
def test_reusecov_nan_in_a_dask_block_fails_before_spending(client, data, where):
    X, Y, _ = data
    X, Y = X.copy(), Y.copy()
    (X if where == "X" else Y)[9_000, 1] = np.nan
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, accountant=acc,
                            random_state=0)
    with pytest.raises(ValueError, match="NaN"):
        _quiet(est.fit, _lazy(X), _lazy(Y))
    assert acc.n_spends == 0
    assert not hasattr(est, "coef_")


def test_reusecov_nan_in_dask_new_outcomes_fails_before_spending(client, data):
    X, Y, Y_new = data
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = _quiet(ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0,
                                   accountant=acc,
                                   random_state=0).fit, _lazy(X), _lazy(Y))
    Y_bad = Y_new.copy()
    Y_bad[100, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        _quiet(est.add_outcomes, _lazy(X), _lazy(Y_bad), epsilon=0.5, delta=1e-6)
    assert acc.n_spends == 1
    assert est.coef_.shape == (L, D)


def test_reusecov_dask_feature_proj_with_more_outcomes_than_rows_is_refused(client):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 3)), rng.normal(size=(30, 40))
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-3, privacy="feature", mechanism="proj",
                            x_bound=3.0,
                            accountant=acc)
    with pytest.raises(ConfigurationError, match="Dask"):
        _quiet(est.fit, da.from_array(X, chunks=(10, 3)), da.from_array(Y, chunks=(10, 40)))
    assert acc.n_spends == 0


def test_reusecov_dask_dataframe_feature_names(client, data):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, Y, Y_new = data
    columns = [f"f{i}" for i in range(D)]
    frame = pd.DataFrame(X, columns=columns)
    ddf = dd.from_pandas(frame, npartitions=4)
    dY = dd.from_pandas(pd.DataFrame(Y), npartitions=4)
    params = dict(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=0)
    est = _quiet(ReuseCovRegressor(**params).fit, ddf, dY)
    ref = _quiet(ReuseCovRegressor(**params).fit, frame, Y)
    assert list(est.feature_names_in_) == columns
    _assert_same_fit(est, ref)
    new = _quiet(est.add_outcomes, ddf, dd.from_pandas(pd.DataFrame(Y_new), npartitions=4),
                 epsilon=0.5, delta=1e-6)
    assert new.shape == (L, D)
    renamed = dd.from_pandas(frame.rename(columns={"f0": "g0"}), npartitions=4)
    with pytest.raises(ValueError, match="feature names"):
        est.add_outcomes(renamed, _lazy(Y_new), epsilon=0.5, delta=1e-6)


# ---------------------------------------------------------------------------
# WeightedLBARegressor: the aggregation step on Dask
# ---------------------------------------------------------------------------
from skprivreg.exceptions import PrivacyLeakWarning  # noqa: E402

# The bags gather rows across all blocks (an all-to-all shuffle on the
# workers, O(blocks^2) tasks): few, large blocks keep the tests fast.
LBA_CHUNK = 16_000
from skprivreg.exceptions import (  # noqa: E402
    PrivacyCheckFailedError,
    PrivacyInfeasibleError,
)
from skprivreg.label_dp import WeightedLBARegressor  # noqa: E402
from skprivreg.label_dp._aggregate import aggregate  # noqa: E402


@pytest.fixture(scope="module")
def label_data():
    rng = np.random.default_rng(47)
    n = 60_000
    X = rng.normal(size=(n, 2))
    y = rng.uniform(0, 1, size=n) + 0.1 * (X[:, 0] > 0)
    return X, y


def _lba_quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        pass  # clipping is never signalled
        return call(*args, **kwargs)


def _assert_same_dataset(lazy, ref):
    np.testing.assert_array_equal(lazy.bag_indices, ref.bag_indices)
    for name in ("X_agg", "w_sum", "y_agg"):
        a, b = getattr(lazy, name), getattr(ref, name)
        if b is None:
            assert a is None
            continue
        np.testing.assert_allclose(a, b, rtol=RTOL_AGG, atol=RTOL_AGG * np.max(np.abs(b)))
    assert lazy.privacy == ref.privacy
    assert lazy.label_bounds == ref.label_bounds and lazy.n_samples == ref.n_samples


LBA_CONFIGS = {
    "ptr": dict(epsilon=8.0, delta=1e-6, y_bound=(0.0, 1.1),
                expected_residual_var=1 / 12),
    "declared": dict(epsilon=8.0, delta=1e-6, y_bound=(0.0, 1.1),
                     assumption="declared", residual_var_lower_bound=0.05),
    "none-no-intercept": dict(assumption="none", bag_size=200, fit_intercept=False),
}


@pytest.mark.parametrize("name", list(LBA_CONFIGS))
def test_lba_aggregates_on_dask_equal_numpy(client, label_data, name):
    X, y = label_data
    params = dict(random_state=3, **LBA_CONFIGS[name])
    ref = _lba_quiet(WeightedLBARegressor(**params).fit, X, y)
    lazy = _lba_quiet(WeightedLBARegressor(**params).fit, _lazy(X, LBA_CHUNK), _lazy(y, LBA_CHUNK))
    _assert_same_dataset(lazy.aggregated_, ref.aggregated_)
    scale = np.max(np.abs(ref.coef_))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9, atol=1e-12 * scale)
    assert lazy.intercept_ == pytest.approx(ref.intercept_, rel=1e-9, abs=1e-12 * scale)
    if name == "ptr":
        assert lazy.privacy_report_["ptr_passed"] is True


def test_lba_clipping_is_silent_and_public_aggregate_on_dask(client, label_data, fixed_noise):
    X, y = label_data
    kwargs = dict(epsilon=8.0, delta=1e-6, y_bound=(0.0, 0.9),
                  expected_residual_var=1 / 12, random_state=5)
    Xd, yd = _lazy(X, LBA_CHUNK), _lazy(y, LBA_CHUNK)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        lazy, _ = aggregate(Xd, yd, **kwargs)
    assert not [w for w in record if "clip" in str(w.message).lower()]
    X_bad = X.copy()
    X_bad[5, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        _lba_quiet(aggregate, _lazy(X_bad, LBA_CHUNK), yd, **kwargs)
    ref, _ = _lba_quiet(aggregate, X, y, **kwargs)
    _assert_same_dataset(lazy, ref)


def test_lba_ptr_failure_is_the_same_on_dask(client):
    rng = np.random.default_rng(46)
    X = rng.normal(size=(2000, 1))
    y = 0.5 + 0.05 * X[:, 0]  # RSS_j = 0 in every bag: the check must refuse
    outcomes = []
    for lazy in (False, True):
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        est = WeightedLBARegressor(epsilon=4.0, delta=1e-6, y_bound=(0.0, 1.0),
                                   bag_size=1500, n_bags_min=1, accountant=acc,
                                   random_state=0)
        data = (da.from_array(X, chunks=(300, 1)), da.from_array(y, chunks=300)) if lazy \
            else (X, y)
        with pytest.raises(PrivacyCheckFailedError):
            _lba_quiet(est.fit, *data)
        outcomes.append((acc.n_spends, est.privacy_spent_.epsilon, hasattr(est, "coef_")))
    assert outcomes[0] == outcomes[1] == (1, pytest.approx(4.0), False)


def test_lba_rank_precheck_on_dask_fires_before_spending(client):
    rng = np.random.default_rng(51)
    X = rng.normal(size=(4000, 10))
    y = rng.uniform(0, 1, 4000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = WeightedLBARegressor(y_bound=(0, 1), assumption="declared",
                               residual_var_lower_bound=1e7, bag_size=5, n_bags_min=1,
                               accountant=acc)
    with pytest.raises(PrivacyInfeasibleError, match="rank"):
        _lba_quiet(est.fit, _lazy(X, LBA_CHUNK), _lazy(y, LBA_CHUNK))
    assert acc.n_spends == 0 and not hasattr(est, "privacy_spent_")
    # Identical design rows: rank 1 < k, the pre-check passes as on NumPy.
    X_low = np.repeat(rng.normal(size=(1, 10)), 4000, axis=0)
    fitted = _lba_quiet(WeightedLBARegressor(y_bound=(0, 1), assumption="declared",
                                             residual_var_lower_bound=1e7, bag_size=5,
                                             n_bags_min=1, random_state=0).fit,
                        _lazy(X_low, 1_000), _lazy(y, LBA_CHUNK))
    assert fitted.n_bags_ > 0


@pytest.mark.parametrize("where", ["X", "y"])
def test_lba_nan_in_a_dask_block_fails_before_spending(client, label_data, where):
    X, y = label_data
    X, y = X.copy(), y.copy()
    if where == "X":
        X[51_000, 1] = np.nan
    else:
        y[51_000] = np.nan
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = WeightedLBARegressor(accountant=acc, random_state=0, **LBA_CONFIGS["ptr"])
    with pytest.raises(ValueError, match="NaN"):
        _lba_quiet(est.fit, _lazy(X, LBA_CHUNK), _lazy(y, LBA_CHUNK))
    assert acc.n_spends == 0 and not hasattr(est, "coef_")


def test_lba_dask_dataframe_feature_names(client, label_data):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = label_data
    frame = pd.DataFrame(X, columns=["a", "b"])
    params = dict(random_state=2, **LBA_CONFIGS["declared"])
    lazy = _lba_quiet(WeightedLBARegressor(**params).fit, dd.from_pandas(frame, npartitions=5),
                      dd.from_pandas(pd.Series(y), npartitions=5))
    ref = _lba_quiet(WeightedLBARegressor(**params).fit, frame, y)
    assert list(lazy.feature_names_in_) == ["a", "b"]
    assert lazy.aggregated_.feature_names == ("a", "b")
    _assert_same_dataset(lazy.aggregated_, ref.aggregated_)


# ---------------------------------------------------------------------------
# WeightedLBARegressor(mode='llp') on Dask
# ---------------------------------------------------------------------------
# The partition, noise set, noise values and weights are drawn on the driver
# from the same streams as on NumPy input, so bag_indices and weights are
# bit-identical; y_agg uses the NumPy per-bag arithmetic on the gathered
# labels, and the features' weighted bag sums likewise (measured over the
# five configurations below x 3 seeds x row chunks of 16000 and 7000:
# bit-identical, max relative difference 0 on y_agg, design and coef_).
# RTOL_AGG (1e-12) only allows another einsum summation order; coef_ within
# 1e-9 as for LBA.
LLP_BASE = dict(mode="llp", epsilon=8.0, delta=1e-6, y_bound=(0.0, 1.1))
LLP_CONFIGS = {
    "per-bag": {},
    "global": dict(noise_allocation="global", noise_fraction=0.3),
    "clipped-no-intercept": dict(y_bound=(0.0, 0.9), fit_intercept=False,
                                 noise_scale=0.5, bag_size=300),
    "ridge-bags-not-covering": dict(estimator="ridge", alpha=10.0, n_bags=150),
    "none": dict(assumption="none", bag_size=120, y_bound=None, noise_fraction=0.0),
}


def _fit_recording_warnings(est, *data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(*data)
    return est, sorted((w.category.__name__, str(w.message)) for w in caught)


def _assert_same_llp(lazy, ref):
    a, b = lazy.aggregated_, ref.aggregated_
    assert type(a).__name__ == "LLPDataset"
    np.testing.assert_array_equal(a.bag_indices, b.bag_indices)
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_allclose(a.y_agg, b.y_agg, rtol=RTOL_AGG,
                               atol=RTOL_AGG * np.max(np.abs(b.y_agg)))
    assert a.privacy == b.privacy
    assert (a.label_bounds, a.n_samples, a.bag_size, a.fit_intercept) == (
        b.label_bounds, b.n_samples, b.bag_size, b.fit_intercept)
    scale = np.max(np.abs(ref.coef_))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9, atol=1e-12 * scale)
    assert lazy.intercept_ == pytest.approx(ref.intercept_, rel=1e-9, abs=1e-12 * scale)
    assert (lazy.epsilon_, lazy.delta_) == (ref.epsilon_, ref.delta_)


@pytest.mark.parametrize("name", list(LLP_CONFIGS))
def test_llp_on_dask_equals_numpy(client, label_data, name):
    X, y = label_data
    params = dict(random_state=3, **{**LLP_BASE, **LLP_CONFIGS[name]})
    ref, ref_warnings = _fit_recording_warnings(WeightedLBARegressor(**params), X, y)
    lazy, lazy_warnings = _fit_recording_warnings(
        WeightedLBARegressor(**params), _lazy(X, LBA_CHUNK), _lazy(y, LBA_CHUNK)
    )
    _assert_same_llp(lazy, ref)
    assert lazy_warnings == ref_warnings
    assert not [w for w in lazy_warnings if "clip" in w[1].lower()]
    # The label noise is really there (except without privacy).
    agg = lazy.aggregated_
    clean = np.einsum("jr,jr->j", agg.weights,
                      np.clip(y, *agg.label_bounds)[agg.bag_indices])
    gap = np.max(np.abs(agg.y_agg - clean))
    assert gap == 0.0 if name == "none" else gap > 1e-2


def test_llp_dask_dataframe_and_fit_aggregated(client, label_data):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = label_data
    frame = pd.DataFrame(X, columns=["a", "b"])
    ddf = dd.from_pandas(frame, npartitions=5)
    params = dict(random_state=2, **LLP_BASE)
    lazy = _lba_quiet(WeightedLBARegressor(**params).fit, ddf,
                      dd.from_pandas(pd.Series(y), npartitions=5))
    ref = _lba_quiet(WeightedLBARegressor(**params).fit, frame, y)
    assert list(lazy.feature_names_in_) == ["a", "b"]
    assert lazy.aggregated_.feature_names == ("a", "b")
    _assert_same_llp(lazy, ref)
    # The analyst's side: the released dataset with the public features on Dask.
    Zbar = ref.aggregated_.design(_lazy(X, 7_000))
    assert isinstance(Zbar, np.ndarray)
    np.testing.assert_allclose(Zbar, ref.aggregated_.design(X), rtol=RTOL_AGG,
                               atol=RTOL_AGG * np.max(np.abs(Zbar)))
    refit = WeightedLBARegressor(mode="llp").fit_aggregated(ref.aggregated_, ddf)
    assert list(refit.feature_names_in_) == ["a", "b"]
    np.testing.assert_allclose(refit.coef_, ref.coef_, rtol=1e-9)
    assert refit.privacy_spent_.epsilon == 0


@pytest.mark.parametrize("where", ["X", "y"])
def test_llp_nan_in_a_dask_block_fails_before_spending(client, label_data, where):
    X, y = label_data
    X, y = X.copy(), y.copy()
    if where == "X":
        X[51_000, 1] = np.inf
    else:
        y[51_000] = np.nan
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = WeightedLBARegressor(accountant=acc, random_state=0, **LLP_BASE)
    with pytest.raises(ValueError, match=f"Input {where} contains NaN or infinity"):
        _lba_quiet(est.fit, _lazy(X, LBA_CHUNK), _lazy(y, LBA_CHUNK))
    assert acc.n_spends == 0 and not hasattr(est, "coef_")
    assert not hasattr(est, "privacy_spent_")


def test_llp_mlp_on_dask_features_refused_before_spending(client, label_data):
    X, y = label_data
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = WeightedLBARegressor(estimator="mlp", accountant=acc, random_state=0, **LLP_BASE)
    with pytest.raises(ValueError, match="estimator='mlp'.*NumPy"):
        _lba_quiet(est.fit, _lazy(X, LBA_CHUNK), _lazy(y, LBA_CHUNK))
    assert acc.n_spends == 0 and not hasattr(est, "privacy_spent_")
    released = _lba_quiet(WeightedLBARegressor(random_state=0, **LLP_BASE).fit, X, y)
    for mode in ("llp", "lba"):  # fit_aggregated follows the dataset, not mode
        with pytest.raises(ValueError, match="estimator='mlp'.*NumPy"):
            WeightedLBARegressor(mode=mode, estimator="mlp").fit_aggregated(
                released.aggregated_, _lazy(X, LBA_CHUNK))


def test_llp_lazy_predict_equals_numpy(client, label_data):
    X, y = label_data
    params = dict(random_state=4, **LLP_BASE)
    ref = _lba_quiet(WeightedLBARegressor(**params).fit, X, y)
    Xd = _lazy(X, LBA_CHUNK)
    lazy = _lba_quiet(WeightedLBARegressor(**params).fit, Xd, _lazy(y, LBA_CHUNK))
    pred = lazy.predict(Xd)
    assert isinstance(pred, da.Array) and pred.shape == (X.shape[0],)
    np.testing.assert_allclose(pred.compute(), ref.predict(X), rtol=1e-9, atol=1e-12)
    # MLP: NumPy features (the rows of every bag in memory), labels on Dask;
    # its prediction is lazy on Dask input too.
    mlp_params = dict(hidden_layer_sizes=(8,), max_iter=3, early_stopping=False)
    mlp = _lba_quiet(WeightedLBARegressor(estimator="mlp", mlp_params=mlp_params,
                                          **params).fit, X, _lazy(y, LBA_CHUNK))
    mlp_ref = _lba_quiet(WeightedLBARegressor(estimator="mlp", mlp_params=mlp_params,
                                              **params).fit, X, y)
    np.testing.assert_allclose(mlp.aggregated_.y_agg, mlp_ref.aggregated_.y_agg,
                               rtol=RTOL_AGG, atol=1e-12)
    pred = mlp.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), mlp_ref.predict(X), rtol=1e-9, atol=1e-12)
