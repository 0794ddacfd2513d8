"""Passes over Dask chunks that the workers hold: one task per worker thread, no chunk moved.

A persisted array's chunks are read where they are held, each worker's in
row order; results match the NumPy path for the same noise within float64
round-off (the partials add in another order).
"""

import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import skprivreg._rows as rows_module  # noqa: E402
from skprivreg import BudgetAccountant  # noqa: E402
from skprivreg._dask_passes import worker_groups  # noqa: E402
from skprivreg.datasets import make_linear_regression  # noqa: E402
from skprivreg.label_dp import WeightedLBARegressor  # noqa: E402
from skprivreg.linear_model import (  # noqa: E402
    AdaSSPRegressor,
    IndependentSSPRegressor,
    ISSPRegressor,
    LinearRegression,
    ReuseCovRegressor,
    SSPRegressor,
)
from skprivreg.preprocessing import PrivateStandardScaler  # noqa: E402

RTOL = 1e-9
N_CHUNKS = 8

pytestmark = pytest.mark.usefixtures("fixed_noise")


@pytest.fixture(scope="module")
def data():
    return make_linear_regression(12_000, 5, intercept=1.0, random_state=0)


def _held(client, X, y=None):
    """``X`` (and ``y``) in ``N_CHUNKS`` row chunks, persisted on the workers.

    Fresh keys in every call (``name=False``): a test never persists keys
    that an earlier test's released arrays are still being freed under.
    """
    chunk = -(-X.shape[0] // N_CHUNKS)
    Xd = da.from_array(X, chunks=(chunk, X.shape[1]), name=False).persist()
    parts = [Xd]
    if y is not None:
        parts.append(da.from_array(y, chunks=chunk, name=False).persist())
    distributed.wait(parts)
    return parts if y is not None else Xd


@pytest.fixture
def count_passes(monkeypatch):
    calls = []
    reduce_chunks = rows_module.reduce_chunks

    def counted(*args, **kwargs):
        calls.append(1)
        return reduce_chunks(*args, **kwargs)

    monkeypatch.setattr(rows_module, "reduce_chunks", counted)
    return calls


def test_groups_are_the_chunks_each_worker_holds(client, data):
    Xd = _held(client, data[0])
    groups = worker_groups(Xd)
    assert sorted(i for group in groups for i in group) == list(range(N_CHUNKS))
    assert [group[0] for group in groups] == sorted(group[0] for group in groups)
    keys = [block.key for block in Xd.to_delayed().ravel()]
    held = client.who_has(Xd)
    holders = []
    for group in groups:
        assert group == sorted(group)
        workers = {min(held[keys[i]]) for i in group}
        assert len(workers) == 1  # every chunk of a task is on the worker that runs it
        holders.append(workers.pop())
    # Single-threaded workers: one task each.
    assert sorted(holders) == sorted({min(w) for w in held.values()})


def test_chunks_computed_on_the_fly_or_another_scheduler_get_one_task_each(client, data):
    X = data[0]
    assert worker_groups(da.from_array(X, chunks=(1_500, 5))) is None
    Xd = _held(client, X)
    with dask.config.set(scheduler="threads"):
        assert worker_groups(Xd) is None
    assert worker_groups(Xd[:, :3]) is None  # a view of held chunks is computed


def test_a_chunk_held_twice_goes_to_the_less_loaded_worker(client, data):
    Xd = _held(client, data[0])
    client.replicate(Xd)  # every chunk on both workers
    deadline = time.monotonic() + 30
    while any(len(w) < 2 for w in client.who_has(Xd).values()):
        assert time.monotonic() < deadline, "the chunks were not replicated"
        time.sleep(0.05)
    groups = worker_groups(Xd)
    assert sorted(len(group) for group in groups) == [N_CHUNKS // 2, N_CHUNKS // 2]


def test_a_worker_with_three_threads_gets_three_runs_of_its_chunks(data, count_passes):
    """Three groups: their partials are folded by a task on the worker (more
    than two never reach the driver)."""
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=1, threads_per_worker=3, processes=False,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            Xd, yd = _held(client, X, y)
            assert worker_groups(Xd) == [[0, 1, 2], [3, 4, 5], [6, 7]]
            params = dict(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=3)
            with distributed.get_task_stream(client) as stream:
                held = SSPRegressor(**params).fit(Xd, yd)
    keys = [str(t["key"]) for t in stream.data]
    assert sum(k.startswith("skprivreg-pass-") for k in keys) == 3 * len(count_passes)
    assert sum(k.startswith("skprivreg-fold-") for k in keys) == len(count_passes)
    ref = SSPRegressor(**params).fit(X, y)
    np.testing.assert_allclose(held.coef_, ref.coef_, rtol=RTOL)


def _fits():
    declared = dict(x_bound=3.0, y_bound=5.0)
    return {
        "SSP": (SSPRegressor, declared),
        "AdaSSP, private bounds": (AdaSSPRegressor, {}),
        "LinearRegression": (LinearRegression, dict(x_range=(-4.0, 4.0), y_bound=10.0,
                                                    n_rounds=3)),
        "ReuseCov": (ReuseCovRegressor, declared),
        "IndependentSSP, private bounds": (IndependentSSPRegressor, {}),
        "PrivateStandardScaler": (PrivateStandardScaler, dict(x_range=(-4.0, 4.0))),
    }


@pytest.mark.parametrize("name", list(_fits()))
def test_fits_on_held_chunks_match_numpy_with_one_task_per_worker_and_pass(
        client, data, count_passes, name):
    Estimator, params = _fits()[name]
    X, y = data
    Xd, yd = _held(client, X, y)
    groups = worker_groups(Xd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bounds read from the data, where asked
        ref = Estimator(epsilon=1.0, delta=1e-6, random_state=3, **params)
        held = Estimator(epsilon=1.0, delta=1e-6, random_state=3, **params)
        with distributed.get_task_stream(client) as stream:
            if name == "PrivateStandardScaler":
                ref.fit(X), held.fit(Xd)
            else:
                ref.fit(X, y), held.fit(Xd, yd)
    tasks = [t["key"] for t in stream.data if str(t["key"]).startswith("skprivreg-pass-")]
    assert count_passes and len(tasks) == len(count_passes) * len(groups)
    # Nothing else runs: the passes read the held chunks themselves (a 1-D y
    # as one column, with no reshaping task per chunk).
    assert [t["key"] for t in stream.data if not str(t["key"]).startswith("skprivreg-")] == []
    if name == "PrivateStandardScaler":
        np.testing.assert_allclose(held.scale_, ref.scale_, rtol=RTOL)
        np.testing.assert_allclose(held.mean_, ref.mean_, rtol=RTOL)
    else:
        np.testing.assert_allclose(held.coef_, ref.coef_, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(held.intercept_, ref.intercept_, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", list(_fits()))
@pytest.mark.parametrize("where", [0, 11_999])
def test_nan_in_a_held_chunk_fails_before_spending(client, data, name, where):
    Estimator, params = _fits()[name]
    X, y = data
    X = X.copy()
    X[where, 2] = np.nan
    Xd, yd = _held(client, X, y)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = Estimator(epsilon=1.0, delta=1e-6, accountant=acc, **params)
    with pytest.raises(ValueError, match="NaN"):
        est.fit(Xd) if name == "PrivateStandardScaler" else est.fit(Xd, yd)
    assert acc.n_spends == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_issp_refuses_nan_in_a_held_chunk_before_spending(client, bad):
    """ISSP's blocks are checked by the row source (not by its block functions)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200_000, 1))
    y = X[:, 0] + 0.1 * rng.normal(size=200_000)
    X[170_000, 0] = bad
    Xd, yd = _held(client, X, y)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match="NaN"):
        ISSPRegressor(epsilon=8.0, delta=1e-6, accountant=acc).fit(Xd, yd)
    assert acc.n_spends == 0


def test_a_fits_passes_share_one_optimised_graph_of_the_chunks(client, data, count_passes,
                                                               monkeypatch):
    """``to_delayed`` (which optimises the graph) runs once per array, not once per pass."""
    X, y = data
    calls = []
    to_delayed = da.Array.to_delayed

    def counted(self, *args, **kwargs):
        calls.append(1)
        return to_delayed(self, *args, **kwargs)

    monkeypatch.setattr(da.Array, "to_delayed", counted)
    LinearRegression(epsilon=1.0, delta=1e-6, x_range=(-4.0, 4.0), y_bound=10.0,
                     n_rounds=3).fit(*_held(client, X, y))
    assert len(count_passes) >= 4 and len(calls) == 2


def test_label_dp_aggregation_on_held_chunks_equals_numpy(client):
    """WeightedLBA's bounds pass (a min/max combine) and bags on held chunks."""
    rng = np.random.default_rng(47)
    X = rng.normal(size=(60_000, 2))
    y = rng.uniform(0, 1, size=60_000) + 0.1 * (X[:, 0] > 0)
    params = dict(epsilon=8.0, delta=1e-6, y_bound=(0.0, 1.1), assumption="declared",
                  residual_var_lower_bound=0.05, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = WeightedLBARegressor(**params).fit(X, y)
        held = WeightedLBARegressor(**params).fit(*_held(client, X, y))
    a, b = held.aggregated_, ref.aggregated_
    np.testing.assert_array_equal(a.bag_indices, b.bag_indices)
    assert a.label_bounds == b.label_bounds
    for name in ("X_agg", "w_sum", "y_agg"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-9)
    np.testing.assert_allclose(held.coef_, ref.coef_, rtol=1e-9)


_LOADS = []


def _load(path):
    _LOADS.append(path)  # the workers are threads of this process
    return np.load(path)


def test_features_and_labels_from_one_loader_read_each_file_once_a_pass(tmp_path, data,
                                                                         count_passes):
    """X and y sliced from one array read from files: each file is loaded once per pass."""
    import dask

    X, y = data
    rows = np.column_stack([X, y])
    pieces = []
    for i, part in enumerate(np.array_split(rows, 4)):
        path = tmp_path / f"rows{i}.npy"
        np.save(path, part)
        pieces.append(da.from_delayed(dask.delayed(_load)(str(path)), part.shape, float))
    table = da.concatenate(pieces)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster):
            params = dict(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=5.0, random_state=3)
            _LOADS.clear()
            held = SSPRegressor(**params).fit(table[:, :-1], table[:, -1])
    assert len(count_passes) == 1 and sorted(_LOADS) == sorted(set(_LOADS)) and len(_LOADS) == 4
    ref = SSPRegressor(**params).fit(X, y)
    np.testing.assert_allclose(held.coef_, ref.coef_, rtol=RTOL)


@pytest.mark.parametrize("held", [False, True])
def test_range_counts_on_dask_equal_the_direct_counts(client, data, held):
    """The counting pass of the private ranges: exact counts and maxima on any chunking."""
    from skprivreg.bounds import count_ranges
    from skprivreg.mechanisms import bound_bins, counts_above

    X, y = data
    wanted = {"x_range": 0.5, "y_bound": 0.5}
    if held:
        Xd, yd = _held(client, X, y)
    else:
        Xd, yd = da.from_array(X, chunks=(1_500, 5)), da.from_array(y, chunks=1_500)
    bins = bound_bins()
    for counts in (count_ranges(X, y, wanted), count_ranges(Xd, yd, wanted)):
        assert counts["rows"] == len(y) and counts["n_features"] == X.shape[1]
        for name, values in (("x_range", np.abs(X).max(axis=1)), ("y_bound", np.abs(y))):
            np.testing.assert_array_equal(counts[name][0], counts_above(values, bins))
            assert counts[name][1] == values.max()
    assert set(count_ranges(Xd, yd, {"y_bound": 1.0})) == {"rows", "y_bound", "n_features"}
    bad = X.copy()
    bad[7_000, 1] = np.inf
    with pytest.raises(ValueError, match="NaN"):
        count_ranges(da.from_array(bad, chunks=(1_500, 5)), yd, wanted)


@pytest.mark.parametrize("held", [False, True])
def test_marginal_scores_on_dask_are_the_clipped_correlations(client, data, held):
    """Top-s screening's one pass: entries and labels clipped, summed over any chunking."""
    from skprivreg.bounds import check_x_range
    from skprivreg.feature_selection._top_s import marginal_scores

    X, y = data
    x_range = check_x_range((-2.0, 0.5), X.shape[1])  # column magnitude 2
    y_range = (-2.0, 3.0)
    if held:
        Xd, yd = _held(client, X, y)
    else:
        Xd, yd = da.from_array(X, chunks=(1_500, 5)), da.from_array(y, chunks=1_500)
    expected = np.abs(np.clip(X, -2.0, 0.5).T @ np.clip(y, -2.0, 3.0)) / 2.0
    for scores in (marginal_scores(X, y, x_range, y_range),
                   marginal_scores(Xd, yd, x_range, y_range)):
        np.testing.assert_allclose(scores, expected, rtol=1e-12)


def test_a_pass_task_raises_no_floating_point_warning():
    """A worker's floating-point state is its own: the pass task silences it
    (whether a sum overflows depends on the labels)."""
    from skprivreg._gram import gram_statistics
    from skprivreg._rows import RowSource

    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(4_000, 3))
    y = np.full(4_000, 1e307)  # X^T y and 1^T y overflow
    source = RowSource(da.from_array(X, chunks=(1_000, 3)), da.from_array(y, chunks=1_000),
                       block_rows=None, raw_blocks=True, check_finite=True)
    with dask.config.set(scheduler="sync"), warnings.catch_warnings():
        warnings.simplefilter("error")
        gram_statistics(source, x_bound=3.0, y_bound=1e307)


def test_a_pass_task_multiplies_with_blas_on_one_thread_and_restores_it():
    """Under Dask's threaded scheduler the tasks share the driver's BLAS: each
    task holds it to one thread (a piece's product is too small for BLAS's
    threads to pay). The first task to enter and the last to leave run on
    different threads, which outlive the pass: the previous setting is back
    after it, and a threaded NumPy pass on this thread still limits BLAS."""
    import threading

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from skprivreg._gram import cache_blocked, reduce_threaded
    from skprivreg._rows import RowSource

    def blas_threads():
        info = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        if not info:
            pytest.skip("no BLAS library reported by threadpoolctl")
        return max(p["num_threads"] for p in info)

    seen, threads = [], set()
    both_in = threading.Barrier(2, timeout=30)

    def block(offset, X_b, Y_b, params=None, into=None):
        threads.add(threading.get_ident())
        if offset < 2_000:  # the first two tasks meet: they run on two threads at once
            both_in.wait()
        seen.append(blas_threads())
        part = np.dot(X_b.T, X_b)
        return (part,) if into is None else (into[0] + part,)

    X = np.random.default_rng(0).uniform(-1.0, 1.0, size=(4_000, 3))
    source = RowSource(da.from_array(X, chunks=(1_000, 3)), None, block_rows=None,
                       check_finite=True)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        with dask.config.set(scheduler="threads", num_workers=2):
            (gram,) = source.reduce(block)
        assert blas_threads() == 2
        numpy_seen = []

        def numpy_block(X_b, Y_b):
            numpy_seen.append(blas_threads())
            return (np.dot(X_b.T, X_b),)

        reduce_threaded(RowSource(X, None), cache_blocked(numpy_block, 3, 2), lambda a, b: a,
                        n_threads=2)
        assert blas_threads() == 2
    np.testing.assert_allclose(gram, X.T @ X, rtol=1e-12)
    assert len(threads) >= 2
    assert len(seen) == 4 and set(seen) == {1}
    assert numpy_seen and set(numpy_seen) == {1}


def test_an_in_memory_side_joins_a_dask_side_under_a_random_name():
    # Dask names from_array arrays by a hash of their values: every task key would carry
    # a fingerprint of the private rows to the scheduler, its dashboard and its logs.
    import dask.array as da

    from skprivreg._rows import same_row_chunks

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    y = da.from_array(rng.normal(size=100), chunks=50)
    first, _ = same_row_chunks(X, y)
    second, _ = same_row_chunks(X, y)
    assert first.name != second.name
    assert dask_tokenize(X) not in first.name


def dask_tokenize(value):
    from dask.base import tokenize

    return tokenize(value)
