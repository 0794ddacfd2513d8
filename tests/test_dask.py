"""Estimators built on sufficient statistics run on Dask without collecting the data.

A LocalCluster with two worker processes; results must match the NumPy path
for the same random_state within float64 round-off (the blockwise sums add
in another order), and noise is drawn once, on the driver.
"""

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from skprivreg import BudgetAccountant  # noqa: E402
from skprivreg.datasets import make_linear_regression  # noqa: E402
from skprivreg.linear_model import AdaSSPRegressor, SSPRegressor  # noqa: E402

# Round-off of block sums in another order, propagated through the solve.
RTOL = 1e-9



# These tests compare two execution paths on the same noise.
pytestmark = pytest.mark.usefixtures("fixed_noise")

@pytest.fixture(scope="module")
def data():
    X, y = make_linear_regression(12_000, 5, intercept=1.0, random_state=0)
    return X, y


def _fit(estimator, X, y):
    with warnings.catch_warnings():
        pass  # clipping is never signalled
        return estimator.fit(X, y)


@pytest.mark.parametrize("Estimator", [AdaSSPRegressor, SSPRegressor])
@pytest.mark.parametrize("declared", [True, False])
def test_dask_matches_numpy(client, data, Estimator, declared):
    X, y = data
    bounds = dict(x_bound=3.0, y_bound=5.0) if declared else {}
    params = dict(epsilon=1.0, delta=1e-6, random_state=3, **bounds)
    ref = _fit(Estimator(**params), X, y)
    lazy = _fit(Estimator(**params), da.from_array(X, chunks=(2_500, 5)),
                da.from_array(y, chunks=2_500))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=RTOL)
    assert lazy.intercept_ == pytest.approx(ref.intercept_, rel=RTOL)
    assert lazy.x_bound_ == ref.x_bound_ and lazy.y_bound_ == ref.y_bound_
    assert lazy.privacy_spent_.epsilon == pytest.approx(ref.privacy_spent_.epsilon)
    assert lazy.n_features_in_ == 5


def test_dask_multi_output_and_lazy_predict(client, data):
    X, y = data
    Y = np.column_stack([y, -y])
    params = dict(epsilon=2.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=1)
    ref = _fit(AdaSSPRegressor(**params), X, Y)
    Xd = da.from_array(X, chunks=(3_000, 5))
    lazy = _fit(AdaSSPRegressor(**params), Xd, da.from_array(Y, chunks=(3_000, 2)))
    assert lazy.coef_.shape == (2, 5)
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=RTOL)
    pred = lazy.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), ref.predict(X), rtol=1e-8)


def test_dask_dataframe_keeps_feature_names(client, data):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    ddf = dd.from_pandas(frame, npartitions=4)
    dy = dd.from_pandas(pd.Series(y), npartitions=4)
    est = _fit(SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=0),
               ddf, dy)
    assert list(est.feature_names_in_) == list(frame.columns)
    ref = _fit(SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=0),
               frame, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=RTOL)


def test_nan_in_a_dask_block_fails_before_spending(client, data):
    X, y = data
    X = X.copy()
    X[9_000, 2] = np.nan
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match="NaN"):
        AdaSSPRegressor(epsilon=1.0, delta=1e-6, accountant=acc).fit(
            da.from_array(X, chunks=(2_500, 5)), da.from_array(y, chunks=2_500)
        )
    assert acc.n_spends == 0


@pytest.fixture
def no_collection(monkeypatch):
    """Converting a Dask array to NumPy on the driver (collecting it) fails the test."""

    def refuse(self, *args, **kwargs):
        raise AssertionError("a Dask array was collected on the driver")

    monkeypatch.setattr(da.Array, "__array__", refuse)


def _sufficient_statistics_fits():
    from skprivreg.linear_model import (
        IndependentSSPRegressor,
        LinearRegression,
        ReuseCovRegressor,
    )
    from skprivreg.preprocessing import PrivateStandardScaler

    declared = dict(x_bound=3.0, y_bound=5.0)
    return {
        "SSP": (SSPRegressor, declared),
        "AdaSSP": (AdaSSPRegressor, declared),
        "LinearRegression": (LinearRegression, dict(x_range=(-4.0, 4.0), y_bound=10.0,
                                                    n_rounds=2)),
        "IndependentSSP": (IndependentSSPRegressor, declared),
        "IndependentSSP, private bounds": (IndependentSSPRegressor, {}),
        "ReuseCov": (ReuseCovRegressor, declared),
        "PrivateStandardScaler": (PrivateStandardScaler, dict(x_range=(-4.0, 4.0))),
    }


@pytest.mark.parametrize("name", list(_sufficient_statistics_fits()))
def test_fits_from_sums_never_collect_dask_input(client, data, no_collection, name):
    """Every fit that reads the rows through sums runs on the workers, as NumPy does."""
    Estimator, params = _sufficient_statistics_fits()[name]
    X, y = data
    Xd, yd = da.from_array(X, chunks=(2_500, 5)), da.from_array(y, chunks=2_500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bounds read from the data, where asked
        ref = Estimator(epsilon=1.0, delta=1e-6, random_state=3, **params)
        lazy = Estimator(epsilon=1.0, delta=1e-6, random_state=3, **params)
        if name == "PrivateStandardScaler":
            ref.fit(X), lazy.fit(Xd)
            np.testing.assert_allclose(lazy.scale_, ref.scale_, rtol=RTOL)
            np.testing.assert_allclose(lazy.mean_, ref.mean_, rtol=RTOL)
            return
        ref.fit(X, y), lazy.fit(Xd, yd)
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(lazy.intercept_, ref.intercept_, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("bounds", [{}, dict(x_bound=3.0, y_bound=5.0)])
def test_nan_in_a_dask_block_of_independent_ssp_fails_before_spending(client, data, bounds):
    """With declared bounds no counting pass reads X first: the statistics pass checks it."""
    from skprivreg.linear_model import IndependentSSPRegressor

    X, y = data
    X = X.copy()
    X[9_000, 2] = np.nan
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match="NaN"):
        IndependentSSPRegressor(epsilon=1.0, delta=1e-6, accountant=acc, **bounds).fit(
            da.from_array(X, chunks=(2_500, 5)), da.from_array(y, chunks=2_500)
        )
    assert acc.n_spends == 0


@pytest.mark.parametrize("mix", ["frame X, Dask y", "list X, Dask y", "Dask X, list y"])
@pytest.mark.parametrize("name", ["SSP", "AdaSSP", "LinearRegression", "IndependentSSP",
                                  "ReuseCov"])
def test_one_side_in_memory_the_other_on_dask(client, data, mix, name):
    """A list or a data frame beside a Dask array: checked in memory, fitted on the workers.

    NaN on either side is refused before any spend.
    """
    pd = pytest.importorskip("pandas")
    Estimator, params = _sufficient_statistics_fits()[name]
    X, y = data
    Xd, yd = da.from_array(X, chunks=(2_500, 5)), da.from_array(y, chunks=2_500)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    Xa, ya = {"frame X, Dask y": (frame, yd), "list X, Dask y": (X.tolist(), yd),
              "Dask X, list y": (Xd, y.tolist())}[mix]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = Estimator(epsilon=1.0, delta=1e-6, random_state=3, **params).fit(X, y)
        est = Estimator(epsilon=1.0, delta=1e-6, random_state=3, **params).fit(Xa, ya)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-12)
    if mix.startswith("frame"):
        assert list(est.feature_names_in_) == list(frame.columns)
    bad_X, bad_y = X.copy(), y.copy()
    bad_X[3, 1] = np.nan
    bad_y[7_000] = np.inf
    for Xb, yb in ((bad_X, yd), (Xd, bad_y), (X, da.from_array(bad_y, chunks=2_500))):
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        with pytest.raises(ValueError, match="NaN|infinity"):
            Estimator(epsilon=1.0, delta=1e-6, accountant=acc, **params).fit(Xb, yb)
        assert acc.n_spends == 0


def test_issp_with_labels_on_dask_checks_them_before_spending(client):
    """ISSP with X in memory and y on Dask: NaN or infinity in y raises before the spend."""
    from skprivreg.linear_model import ISSPRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200_000, 1))
    y = X[:, 0] + 0.1 * rng.normal(size=200_000)
    for bad in (np.nan, np.inf):
        y_bad = y.copy()
        y_bad[150_000] = bad
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        with pytest.raises(ValueError, match="NaN"):
            ISSPRegressor(epsilon=8.0, delta=1e-6, accountant=acc).fit(
                X, da.from_array(y_bad, chunks=50_000))
        assert acc.n_spends == 0


def test_a_column_vector_y_beside_dask_is_raveled_with_sklearns_warning(client, data):
    """A (n, 1) y for a single-output estimator: flattened with a warning, as on NumPy."""
    from sklearn.exceptions import DataConversionWarning

    from skprivreg.linear_model import LinearRegression

    X, y = data
    params = dict(epsilon=1.0, delta=1e-6, random_state=3, x_range=(-4.0, 4.0), y_bound=10.0,
                  n_rounds=2)
    ref = LinearRegression(**params).fit(X, y)
    for column in (y[:, None], da.from_array(y[:, None], chunks=(2_500, 1))):
        with pytest.warns(DataConversionWarning):
            est = LinearRegression(**params).fit(da.from_array(X, chunks=(2_500, 5)), column)
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("ranges", [dict(x_range=(-4.0, 4.0), y_bound=8.0), {}])
def test_top_s_selector_on_dask_matches_numpy_without_collecting(client, data, no_collection,
                                                                 ranges):
    """Marginal screening reads the rows through sums (and counts, for missing ranges)."""
    from skprivreg.feature_selection import PrivateTopSSelector

    X, y = data
    params = dict(epsilon=2.0, n_features_to_select=2, random_state=3, **ranges)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = PrivateTopSSelector(**params).fit(X, y)
        lazy = PrivateTopSSelector(**params).fit(da.from_array(X, chunks=(2_500, 5)),
                                                 da.from_array(y, chunks=2_500))
    np.testing.assert_array_equal(lazy.support_, ref.support_)
    np.testing.assert_array_equal(lazy.x_range_[1], ref.x_range_[1])
    assert lazy.y_bound_ == ref.y_bound_
    assert lazy.privacy_spent_.epsilon == pytest.approx(ref.privacy_spent_.epsilon)


@pytest.mark.parametrize("ranges", [dict(x_range=(-4.0, 4.0), y_bound=8.0), {},
                                    dict(y_bound=8.0), dict(x_range=(-4.0, 4.0)),
                                    dict(y_bound=8.0, bounds="data")])
@pytest.mark.parametrize("side", ["X", "y"])
def test_nan_in_a_dask_block_of_top_s_fails_before_spending(client, data, ranges, side):
    from skprivreg.feature_selection import PrivateTopSSelector

    X, y = data
    X, y = X.copy(), y.copy()
    if side == "X":
        X[9_000, 2] = np.nan
    else:
        y[9_000] = np.inf
    # bounds='data' plans an infinite epsilon: an accountant without a limit
    acc = (BudgetAccountant() if ranges.get("bounds") == "data"
           else BudgetAccountant(epsilon=10.0, delta=1e-3))
    with pytest.raises(ValueError, match="NaN"):
        PrivateTopSSelector(epsilon=2.0, n_features_to_select=2, accountant=acc,
                            **ranges).fit(da.from_array(X, chunks=(2_500, 5)),
                                          da.from_array(y, chunks=2_500))
    assert acc.n_spends == 0


def test_a_frame_s_features_and_labels_load_each_partition_once_for_their_lengths():
    """``frame[cols]`` and ``frame[label]``: one computation of the partition
    lengths for both sides, then the pass (4 partitions: 8 loads, not 12)."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import dask

    loads = []

    def load(i):
        loads.append(i)
        rng = np.random.default_rng(i)
        X = rng.normal(size=(2_500, 3))
        return pd.DataFrame(np.column_stack([X, X.sum(axis=1)]), columns=list("abcy"))

    meta = pd.DataFrame({c: pd.Series(dtype=float) for c in "abcy"})
    frame = dd.from_delayed([dask.delayed(load)(i) for i in range(4)], meta=meta)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=8.0)
        est.fit(frame[["a", "b", "c"]], frame["y"])
    assert sorted(loads) == sorted(2 * list(range(4)))
    assert list(est.feature_names_in_) == ["a", "b", "c"]


def _blockwise_fits():
    """Every estimator that validates NumPy and Dask input alike (``validate_blockwise_data``)."""
    from skprivreg.feature_selection import PrivateTopSSelector
    from skprivreg.linear_model import ISSPRegressor

    fits = dict(_sufficient_statistics_fits())
    fits["PrivateTopSSelector"] = (PrivateTopSSelector,
                                   dict(x_range=(-4.0, 4.0), y_bound=8.0,
                                        n_features_to_select=2))
    fits["ISSP"] = (ISSPRegressor, {})
    return fits


def _outcome(Estimator, params, X, y):
    """``("fitted", values)`` or ``("raised", type, message)`` of one fit; a fit that
    raises has spent nothing."""
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = Estimator(epsilon=1.0, random_state=3, accountant=acc, **params)
    if "delta" in est.get_params():
        est.set_params(delta=1e-6)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X) if y is None else est.fit(X, y)
    except ValueError as exc:
        assert acc.n_spends == 0
        return ("raised", type(exc), str(exc))
    fitted = [np.asarray(getattr(est, name)) for name in ("coef_", "intercept_", "support_",
                                                          "mean_", "scale_")
              if hasattr(est, name)]
    return ("fitted", fitted)


@pytest.mark.parametrize("n_rows", [1, 0])
@pytest.mark.parametrize("name", list(_blockwise_fits()))
def test_few_rows_give_the_same_outcome_on_dask_and_numpy(client, data, name, n_rows):
    """One row fits on Dask whenever it fits on NumPy (scikit-learn's minimum is one
    sample), with the same result for the same noise; no rows is refused on both, with
    scikit-learn's message."""
    Estimator, params = _blockwise_fits()[name]
    X, y = data[0][:n_rows], data[1][:n_rows]
    labels = name != "PrivateStandardScaler"
    ref = _outcome(Estimator, params, X, y if labels else None)
    lazy = _outcome(Estimator, params, da.from_array(X, chunks=(2_500, 5)),
                    da.from_array(y, chunks=2_500) if labels else None)
    assert ref[0] == lazy[0], (ref, lazy)
    if ref[0] == "raised":
        assert ref[1] is lazy[1]
        if n_rows == 0:
            assert ref[2] == lazy[2], (ref, lazy)
        return
    assert len(ref[1]) == len(lazy[1]) > 0
    for a, b in zip(ref[1], lazy[1]):
        np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-12)
