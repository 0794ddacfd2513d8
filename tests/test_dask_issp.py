"""ISSPRegressor on Dask: every pass runs on the workers, results match the NumPy path.

A LocalCluster with two worker processes. The NumPy path uses the Dask chunk
size as its ``chunk_size``; the Dask path adds block partials in a tree instead
of in order, so statistics differ by float64 summation round-off only: every
integer output (scores, weights, PTR bit, pass count) is identical, and real
outputs agree to ``RTOL``.
"""

import math
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from skprivreg import BudgetAccountant  # noqa: E402
from skprivreg._dask_passes import worker_groups  # noqa: E402
from skprivreg._rows import RowSource  # noqa: E402
from skprivreg.linear_model import ISSPRegressor  # noqa: E402
from skprivreg.linear_model._issp import _issp_trace  # noqa: E402
from skprivreg.linear_model._issp_filters import leverage_bound_for_base  # noqa: E402
from skprivreg.linear_model._issp_mechanism import _issp_core  # noqa: E402
from skprivreg.linear_model._issp_reference import _direct_leverages  # noqa: E402

# Test data are NumPy arrays wrapped by da.from_array (embedded in the graph).
pytestmark = pytest.mark.filterwarnings("ignore:Sending large graph:UserWarning")

# Summation order of (p+1)^2 Gram entries over n <= 1e6 rows: relative error
# of order n eps ~ 2e-10 in the statistics, amplified by cond(S) ~ 1 here.
RTOL = 1e-8



# These tests compare two execution paths on the same noise.
pytestmark = pytest.mark.usefixtures("fixed_noise")

@pytest.fixture(scope="module")
def clean_data():
    """n = 1e6, d = 1, epsilon = 8, bounded X: the clean path (no row filtered), PASS."""
    rng = np.random.default_rng(5)
    n = 1_000_000
    X = rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), (n, 1))  # every leverage <= 4/n
    y = 2 * X[:, 0] + 1 + rng.standard_normal(n)
    return X, y


CHUNK = 125_000
CLEAN = dict(epsilon=8.0, delta=1e-5, random_state=0)


def _lazy(X, y, chunk):
    return da.from_array(X, chunks=(chunk, X.shape[1])), da.from_array(y, chunks=chunk)


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


@pytest.mark.parametrize("residual_bound", [6.5, "auto"])
def test_clean_pass_matches_numpy_in_two_passes(client, clean_data, residual_bound,
                                                monkeypatch):
    X, y = clean_data
    ref = _fit(ISSPRegressor(chunk_size=CHUNK, residual_bound=residual_bound, **CLEAN), X, y)
    calls = []
    reduce = RowSource._reduce_dask

    def counted(self, fn, *args, **kwargs):
        calls.append(fn.__name__)
        return reduce(self, fn, *args, **kwargs)

    monkeypatch.setattr(RowSource, "_reduce_dask", counted)
    # chunk_size is ignored on Dask (its own chunks are the blocks)
    lazy = _fit(ISSPRegressor(chunk_size=4096, residual_bound=residual_bound, **CLEAN),
                *_lazy(X, y, CHUNK))
    assert ref.ptr_passed_ and lazy.ptr_passed_
    # residual scale (group Grams, which also give the Gram matrix) or Gram, then one scan
    assert len(calls) == 2, calls
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=RTOL)
    assert lazy.intercept_ == pytest.approx(ref.intercept_, rel=RTOL)
    assert lazy.residual_bound_ == ref.residual_bound_
    assert lazy.sigma2_upper_ == ref.sigma2_upper_
    assert lazy.privacy_spent_.epsilon == pytest.approx(ref.privacy_spent_.epsilon)
    Xd = da.from_array(X[:1000], chunks=(300, 1))
    pred = lazy.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), ref.predict(X[:1000]), rtol=RTOL)


def test_trace_matches_numpy(client, clean_data):
    """The test hook on Dask: identical scores, weights and pass count; same beta_hat."""
    X, y = clean_data
    params = dict(residual_bound=6.5, chunk_size=CHUNK, **CLEAN)
    ref = _issp_trace(X, y, **params)
    lazy = _issp_trace(*_lazy(X, y, CHUNK), **params)
    assert ref.n_passes == lazy.n_passes == 2
    assert (lazy.score1, lazy.score2_num, lazy.passed) == (0, 0, True)
    assert (ref.score1, ref.score2_num) == (0, 0)
    np.testing.assert_allclose(lazy.beta_hat, ref.beta_hat, rtol=1e-10)
    np.testing.assert_allclose(lazy.beta_tilde, ref.beta_tilde, rtol=RTOL)


def _core(source, seed=0, **kw):
    return _issp_core(source, c=1.0, eps_ptr=1.0, delta_ptr=1e-6, ptr_fail_prob=0.0,
                      rng_ptr=np.random.default_rng(seed),
                      rng_noise=np.random.default_rng(seed + 1), dense=True, **kw)


def _dirty_case():
    """Unit-sphere rows (clean: PASS), then an extreme row and k/2 large residuals."""
    rng = np.random.default_rng(9)
    n, k = 6000, 10
    X = rng.standard_normal((n, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = X @ np.array([1.0, 2.0]) + 0.3 * rng.standard_normal(n)
    h, _ = _direct_leverages(np.column_stack([X, np.ones(n)]))
    L0 = leverage_bound_for_base(1.2 * h.max(), k)
    X[4321] = [3e7, -4e7]  # leverage ~ 1: removed, factor rebased by TSQR
    y[4321] = 1e9
    y[[17, 2500, 5999]] += [30.0, -25.0, 40.0]  # residual filtering removes them
    return X, y, dict(k=k, L0=L0, R0=1.2)


@pytest.mark.parametrize("far", [False, True])
def test_dirty_data_removals_rescans_and_fail_match_numpy(client, far):
    X, y, kw = _dirty_case()
    if far:
        X[: kw["k"]] = [40.0, -35.0]  # k copies of a far point: SCORE1 = k, FAIL
    chunk = 1024
    ref = _core(RowSource(X, y, fit_intercept=True, block_rows=chunk), **kw)
    lazy = _core(RowSource(*_lazy(X, y, chunk), fit_intercept=True, check_finite=True), **kw)
    if far:
        assert ref.score1 == kw["k"] and not ref.passed
    else:
        # removals happened (weights below k) and more than the clean two passes
        assert ref.passed and np.any(ref.W < ref.k) and np.any(ref.V < ref.k**2)
        assert ref.n_passes > 2
    assert (lazy.score1, lazy.score2_num, lazy.passed) == (ref.score1, ref.score2_num,
                                                           ref.passed)
    assert lazy.n_passes == ref.n_passes
    np.testing.assert_array_equal(lazy.W, ref.W)
    if ref.V is None:
        assert lazy.V is None
    else:
        np.testing.assert_array_equal(lazy.V, ref.V)
    if ref.passed:
        np.testing.assert_allclose(lazy.beta_hat, ref.beta_hat, rtol=1e-9)
        np.testing.assert_allclose(lazy.beta_tilde, ref.beta_tilde, rtol=1e-9)


def test_dirty_data_on_chunks_the_workers_hold_matches_numpy(client):
    """Persisted chunks: each worker's task reads chunks that are not adjacent,
    and ISSP's block functions locate rows by each chunk's own offset."""
    X, y, kw = _dirty_case()
    chunk = 1024
    ref = _core(RowSource(X, y, fit_intercept=True, block_rows=chunk), **kw)
    # Fresh keys (``name=False``): not the keys an earlier test's graphs just released.
    Xd = da.from_array(X, chunks=(chunk, X.shape[1]), name=False).persist()
    yd = da.from_array(y, chunks=chunk, name=False).persist()
    distributed.wait([Xd, yd])
    assert max(len(group) for group in worker_groups(Xd)) > 1
    lazy = _core(RowSource(Xd, yd, fit_intercept=True, check_finite=True), **kw)
    assert ref.passed and ref.n_passes > 2
    assert (lazy.score1, lazy.score2_num, lazy.passed, lazy.n_passes) == (
        ref.score1, ref.score2_num, ref.passed, ref.n_passes)
    np.testing.assert_array_equal(lazy.W, ref.W)
    np.testing.assert_array_equal(lazy.V, ref.V)
    np.testing.assert_allclose(lazy.beta_hat, ref.beta_hat, rtol=1e-9)
    np.testing.assert_allclose(lazy.beta_tilde, ref.beta_tilde, rtol=1e-9)


def test_fail_path_matches_numpy(client):
    rng = np.random.default_rng(14)
    X = rng.standard_normal((2000, 2))
    y = X @ [1.0, 1.0] + rng.standard_normal(2000)
    kw = dict(epsilon=1.0, delta=1e-6, residual_bound=3.0, on_fail="zero", random_state=0,
              predicted_fail="spend")
    ref = _fit(ISSPRegressor(chunk_size=1024, **kw), X, y)
    acc = BudgetAccountant(epsilon=100, delta=1e-2)
    lazy = _fit(ISSPRegressor(accountant=acc, **kw), *_lazy(X, y, 1024))
    assert ref.ptr_passed_ is False and lazy.ptr_passed_ is False
    assert np.all(lazy.coef_ == 0) and lazy.intercept_ == 0.0
    assert lazy.privacy_spent_.epsilon == pytest.approx(ref.privacy_spent_.epsilon)
    assert acc.n_spends == 1


@pytest.mark.parametrize("residual_bound", [3.0, "auto"])
def test_nan_in_a_dask_block_fails_before_spending(client, clean_data, residual_bound):
    X, y = clean_data
    X, y = X[:200_000].copy(), y[:200_000]
    X[150_123, 0] = np.nan
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    est = ISSPRegressor(accountant=acc, residual_bound=residual_bound, predicted_fail="spend",
                        **CLEAN)
    with pytest.raises(ValueError, match="Input X contains NaN or infinity"):
        _fit(est, *_lazy(X, y, 50_000))
    assert acc.n_spends == 0
    assert not hasattr(est, "privacy_spent_") and not hasattr(est, "coef_")


def test_dask_dataframe_keeps_feature_names(client, clean_data):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = clean_data
    frame = pd.DataFrame(X, columns=["height"])
    ddf = dd.from_pandas(frame, npartitions=4)
    dy = dd.from_pandas(pd.Series(y), npartitions=4)
    est = _fit(ISSPRegressor(residual_bound=6.5, **CLEAN), ddf, dy)
    assert list(est.feature_names_in_) == ["height"]
    assert est.ptr_passed_
    ref = _fit(ISSPRegressor(residual_bound=6.5, chunk_size=CHUNK, **CLEAN), frame, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=RTOL)
    with warnings.catch_warnings():
        # sklearn does not see a Dask frame's column names (LinearPredictMixin checks them)
        warnings.filterwarnings("ignore", "X does not have valid feature names")
        pred = est.predict(ddf.head(100, compute=False))
    np.testing.assert_allclose(np.asarray(pred.compute()), ref.predict(frame.head(100)),
                               rtol=RTOL)


def test_rows_by_global_index_read_only_their_blocks():
    import dask

    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((5000, 3)), rng.standard_normal(5000)

    def poison(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 4:
            raise RuntimeError("block 4 was read")
        return block

    Xd = da.from_array(X, chunks=(1000, 3)).map_blocks(poison, dtype=np.float64)
    lazy = RowSource(Xd, da.from_array(y, chunks=1000), fit_intercept=True, clip=1.5)
    idx = np.array([3, 999, 1000, 3999])
    with dask.config.set(scheduler="synchronous"):  # the closure stays in this process
        Xr, yr = lazy.rows(idx)
        with pytest.raises(RuntimeError, match="block 4 was read"):
            lazy.rows([4000])
    Xn, yn = RowSource(X, y, fit_intercept=True, clip=1.5, block_rows=None).rows(idx)
    np.testing.assert_array_equal(Xr, Xn)
    np.testing.assert_array_equal(yr, yn)
    assert Xr.shape == (4, 4) and np.all(Xr[:, 3] == 1.0) and np.abs(Xr).max() <= 1.5
