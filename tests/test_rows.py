"""The one row source (skprivreg._rows): NumPy, memmap and Dask give the same statistics."""

import numpy as np
import pytest

from skprivreg._rows import (
    RowSource,
    add_tuples,
    block_map,
    check_block_finite,
    fuse,
    sum_over_row_blocks,
)


def _data(n=1000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, X @ np.arange(1.0, d + 1) + rng.standard_normal(n)


def _gram(X, Y):
    return (X.T @ X,)


def _cross(X, Y):
    return (X.T @ Y,)


def _counts_above(X, Y, bins=(0.5, 1.0, 2.0)):
    norms = np.linalg.norm(X, axis=1)
    return (np.array([np.sum(norms > b) for b in bins], dtype=np.int64),)


class _Recorder:
    """Block function recording the (offset, rows) of the blocks it sees."""

    def __init__(self):
        self.seen = []

    def __call__(self, offset, X, Y, params, into=None):
        self.seen.append((offset, X.shape[0]))
        part = (X.sum(axis=0),)
        return part if into is None else add_tuples(into, part)


@pytest.mark.parametrize("block_rows", [1, 7, 256, 1000, None])
def test_blocks_cover_the_rows_once_in_order(block_rows):
    X, y = _data(n=1000)
    rec = _Recorder()
    (total,) = RowSource(X, y, block_rows=block_rows).reduce(rec)
    offsets = [o for o, _ in rec.seen]
    sizes = [m for _, m in rec.seen]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert sum(sizes) == 1000 and max(sizes) <= (block_rows or 1000)
    assert all(o + m == o2 for (o, m), (o2, _) in zip(rec.seen, rec.seen[1:]))
    np.testing.assert_allclose(total, X.sum(axis=0), rtol=1e-12)


def test_sum_over_row_blocks_equals_the_one_block_statistics():
    X, y = _data()
    (XtX,) = sum_over_row_blocks(_gram, X, block_rows=64)
    (Xty,) = sum_over_row_blocks(_cross, X, y, block_rows=64)
    np.testing.assert_allclose(XtX, X.T @ X, rtol=1e-12)
    np.testing.assert_allclose(Xty, X.T @ y, rtol=1e-12)


def test_a_fused_pass_reads_each_block_once_and_equals_separate_passes():
    X, y = _data()
    rec = _Recorder()
    source = RowSource(X, y, block_rows=100)
    gram, cross, counts, sums = source.reduce_many([
        (block_map(_gram), add_tuples), (block_map(_cross), add_tuples),
        (block_map(_counts_above), add_tuples), (rec, add_tuples),
    ])
    assert len(rec.seen) == 10  # one read of each of the 10 blocks, for all four
    assert gram[0] == pytest.approx(sum_over_row_blocks(_gram, X, block_rows=100)[0])
    np.testing.assert_allclose(cross[0], X.T @ y, rtol=1e-12)
    norms = np.linalg.norm(X, axis=1)
    np.testing.assert_array_equal(counts[0], [np.sum(norms > b) for b in (0.5, 1.0, 2.0)])
    np.testing.assert_allclose(sums[0], X.sum(axis=0), rtol=1e-12)
    # The fused function and combine are the same objects Dask runs on workers.
    fn, combine, params = fuse([(block_map(_gram), add_tuples)])
    assert params == (None,)
    both = combine(fn(0, X[:10], y[:10], params), fn(10, X[10:], y[10:], params))
    np.testing.assert_allclose(both[0][0], X.T @ X, rtol=1e-12)


def test_memmap_is_streamed_in_blocks(tmp_path):
    """A memmap is read one block at a time: the block function never sees more rows."""
    X, y = _data(n=5000)
    path = tmp_path / "X.dat"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=X.shape)
    rec = _Recorder()
    source = RowSource(mm, y, block_rows=512)
    ((total,), (XtX,)) = source.reduce_many([(rec, add_tuples), (block_map(_gram), add_tuples)])
    assert max(m for _, m in rec.seen) == 512 and len(rec.seen) == 10
    X32 = X.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(XtX, X32.T @ X32, rtol=1e-10)


def test_early_stop_and_the_pending_finiteness_check():
    X, y = _data(n=1000)
    X[900, 0] = np.nan
    source = RowSource(X, y, block_rows=100, check_finite=True)
    rec = _Recorder()
    source.reduce(rec, stop=lambda part: len(rec.seen) >= 3)
    assert len(rec.seen) == 3 and source.check_finite  # incomplete: still pending
    with pytest.raises(ValueError, match="Input X contains NaN"):
        source.reduce(_Recorder())


def test_clip_applies_after_the_finiteness_check():
    X, y = _data(n=100)
    X[5, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        RowSource(X, y, clip=1.0, check_finite=True).reduce(_Recorder())
    (total,) = RowSource(X, y, clip=1.0).reduce(_Recorder())
    np.testing.assert_allclose(total, np.clip(X, -1, 1).sum(axis=0), rtol=1e-12)


def test_rows_returns_clipped_rows_with_the_ones_column():
    X, y = _data(n=50)
    Xr, yr = RowSource(X, y, fit_intercept=True, clip=0.5).rows([3, 10])
    np.testing.assert_array_equal(Xr[:, :-1], np.clip(X[[3, 10]], -0.5, 0.5))
    np.testing.assert_array_equal(Xr[:, -1], 1.0)
    np.testing.assert_array_equal(yr, y[[3, 10]])


def test_check_block_finite():
    check_block_finite(np.zeros(3))
    with pytest.raises(ValueError, match="Input y contains NaN or infinity"):
        check_block_finite(np.array([0.0, np.inf]), "y")


def test_dask_blocks_are_reduced_on_the_workers_like_numpy():
    da = pytest.importorskip("dask.array")
    X, y = _data(n=1000)
    Xd = da.from_array(X, chunks=(300, 1))
    yd = da.from_array(y, chunks=250)
    source = RowSource(Xd, yd, fit_intercept=True)
    np.testing.assert_array_equal(source.offsets, [0, 300, 600, 900])
    gram, cross = source.reduce_many([(block_map(_gram), add_tuples),
                                      (block_map(_cross), add_tuples)])
    np.testing.assert_allclose(gram[0], X.T @ X, rtol=1e-12)
    np.testing.assert_allclose(cross[0], X.T @ y, rtol=1e-12)
    (XtX,) = sum_over_row_blocks(_gram, Xd)
    np.testing.assert_allclose(XtX, X.T @ X, rtol=1e-12)
    Xr, yr = source.rows([1, 301, 999])
    np.testing.assert_array_equal(Xr[:, :3], X[[1, 301, 999]])
    np.testing.assert_array_equal(yr, y[[1, 301, 999]])
    bad = X.copy()
    bad[650, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        RowSource(da.from_array(bad, chunks=(300, 3)), yd, check_finite=True).reduce(
            block_map(_gram))


def _offsets(offset, X, Y, params=None, into=None):
    part = [int(offset)]
    return part if into is None else into + part


@pytest.mark.parametrize("n_chunks", [1, 2, 3, 9, 70])
def test_dask_partials_are_folded_in_row_order(n_chunks):
    """Few blocks are folded on the driver, more by a tree of tasks: both in row order."""
    da = pytest.importorskip("dask.array")
    import dask

    X = np.zeros((700, 2))
    source = RowSource(da.from_array(X, chunks=(-(-700 // n_chunks), 2)), raw_blocks=True)
    with dask.config.set(scheduler="synchronous"):
        folded = source.reduce(_offsets, lambda a, b: a + b)
    assert folded == source.offsets.tolist()
    assert len(folded) == n_chunks


def test_passes_are_counted_and_progress_lines_hold_public_facts_only(capsys):
    X = np.arange(1000.0).reshape(500, 2)
    source = RowSource(X, None, block_rows=100, verbose=2, name="demo")
    total = block_map(lambda X_b, _: (X_b.sum(axis=0),))
    source.reduce(total, label="sums")
    # a pass that may stop early prints before it starts, never the rows it read
    source.reduce(total, label="until", stop=lambda part: part[0][0] > 10_000)
    assert source.n_passes == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [f"[demo] pass 1 (sums): {k:,} / 500 rows" for k in range(100, 600, 100)]
    assert lines[5:] == ["[demo] pass 2 (until): 500 rows"]


def test_unaligned_blocks_are_copied_to_aligned_float64():
    """NumPy multiplies unaligned arrays without BLAS; blocks are made aligned first."""
    from skprivreg._blocks import as_float64_block

    raw = bytearray(8 * 600 + 1)
    X = np.frombuffer(raw, dtype=np.float64, offset=1, count=600).reshape(200, 3)
    assert not X.flags.aligned
    block = as_float64_block(X)
    assert block.flags.aligned and block.dtype == np.float64
    np.testing.assert_array_equal(block, X)
    aligned = np.ones((4, 3))
    assert as_float64_block(aligned) is aligned  # no copy when nothing is needed
    assert as_float64_block(aligned.astype(np.float32)).dtype == np.float64


def test_blocks_keep_their_memory_order():
    """Rows of a Fortran-ordered array (a data frame's) are copied column by column, not
    transposed; a clipped copy (:func:`workspace_like`) takes the same order."""
    from skprivreg._blocks import as_float64_block, memory_order, workspace_like

    F = np.asfortranarray(np.arange(60.0).reshape(20, 3))
    assert as_float64_block(F) is F  # contiguous already
    for rows in (F[5:15], F[5:15].astype(np.float32)):
        for scratch in (None, "test order"):
            block = as_float64_block(rows, scratch=scratch)
            assert block.flags.f_contiguous and not block.flags.c_contiguous
            np.testing.assert_array_equal(block, rows)
            assert memory_order(block) == "F"
            assert workspace_like("test clipped", block).flags.f_contiguous
    # A one-row piece is both C- and F-contiguous once copied: its clipped copy
    # must get the same strides as the copy used as stored.
    for rows in (F[7:8], F[7:8].astype(np.float32)):
        block = as_float64_block(rows, scratch="test order")
        assert workspace_like("test clipped", block).strides == block.strides
        assert workspace_like("test clipped", rows).strides == block.strides
    C = np.arange(60.0).reshape(20, 3)
    assert memory_order(C) == memory_order(C[:, :2]) == memory_order(C[:, :1]) == "C"
    assert as_float64_block(C[:, :2]).flags.c_contiguous
    assert workspace_like("test clipped", C[:, :2]).flags.c_contiguous


def test_add_tuples_is_silent_on_infinite_partials():
    """Partials of public, unclipped rows may be +inf and -inf: their sum must not warn."""
    import warnings

    from skprivreg._rows import add_tuples

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (total,) = add_tuples((np.array([np.inf, 1.0]),), (np.array([-np.inf, 2.0]),))
    assert np.isnan(total[0]) and total[1] == 3.0


def test_workspace_buffers_are_reused_per_key_and_per_thread():
    """Piece temporaries reuse one buffer per (thread, key); other keys and threads never do."""
    import threading

    from skprivreg._blocks import WORKSPACE_MAX_BYTES, as_float64_block, workspace

    a = workspace("test a", (100, 3))
    assert a.shape == (100, 3) and a.dtype == np.float64
    assert np.shares_memory(a, workspace("test a", (50, 3)))  # reused, smaller view
    assert not np.shares_memory(a, workspace("test b", (100, 3)))
    other = []
    thread = threading.Thread(target=lambda: other.append(workspace("test a", (100, 3))))
    thread.start()
    thread.join()
    assert not np.shares_memory(a, other[0])
    big = (WORKSPACE_MAX_BYTES // 8 + 1,)
    assert not np.shares_memory(workspace("test big", big), workspace("test big", big))
    # A conversion into the workspace equals the plain conversion.
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    converted = as_float64_block(X, scratch="test a")
    assert converted.dtype == np.float64 and np.shares_memory(converted, a)
    np.testing.assert_array_equal(converted, X)


def test_workspace_keeps_at_most_its_total_per_thread():
    """Buffers beyond the per-thread total are allocated for each call, not kept."""
    import threading

    from skprivreg._blocks import WORKSPACE_MAX_BYTES, WORKSPACE_TOTAL_BYTES, workspace

    def run(out):
        size = WORKSPACE_MAX_BYTES // 8
        kept = [workspace(f"cap {i}", size) for i in range(WORKSPACE_TOTAL_BYTES // (8 * size))]
        out.append(all(np.shares_memory(b, workspace(f"cap {i}", size))
                       for i, b in enumerate(kept)))
        extra = workspace("cap extra", size)
        out.append(np.shares_memory(extra, workspace("cap extra", size)))

    out = []
    thread = threading.Thread(target=run, args=(out,))  # a fresh thread: no buffers yet
    thread.start()
    thread.join()
    assert out == [True, False]


def test_one_side_on_dask_makes_a_dask_source_with_the_same_row_chunks():
    """NumPy X beside a Dask y (or the reverse): one Dask source, rows aligned, not in memory."""
    da = pytest.importorskip("dask.array")
    from skprivreg._rows import same_row_chunks

    X, y = _data(1_000)
    for Xa, ya in ((X, da.from_array(y, chunks=300)), (da.from_array(X, chunks=(250, 3)), y)):
        source = RowSource(Xa, ya)
        assert source.is_dask and not source.in_memory
        assert source.X.chunks[0] == source.Y.chunks[0]
        (total,) = source.reduce(block_map(_cross))
        np.testing.assert_allclose(total, X.T @ y, rtol=1e-12)
    Xd, yd = same_row_chunks(X.tolist(), da.from_array(y, chunks=400))
    assert Xd.chunks[0] == yd.chunks[0] == (400, 400, 200)


def test_a_dask_source_checks_its_blocks_unless_the_block_functions_do():
    """Dask blocks are never validated on the driver: the first complete pass refuses NaN."""
    da = pytest.importorskip("dask.array")
    from skprivreg._rows import sum_over_row_blocks

    X, y = _data(1_000)
    y = y.copy()
    y[700] = np.nan
    Xd, yd = da.from_array(X, chunks=(250, 3)), da.from_array(y, chunks=250)
    assert RowSource(Xd, yd).check_finite
    assert not RowSource(Xd, yd, raw_blocks=True).check_finite  # checked by the block functions
    assert not RowSource(X, y).check_finite  # NumPy: validated on the driver
    with pytest.raises(ValueError, match="NaN or infinity"):
        sum_over_row_blocks(_cross, Xd, yd)


def _counted_frame(loads, n_parts=4, rows=2_000, seed=0):
    """A Dask frame whose partitions are made by a loader that counts its calls."""
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    def load(part):
        _, i = part
        loads.append(i)
        rng = np.random.default_rng(seed + i)
        X = rng.normal(size=(rows, 3))
        return pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2],
                             "t": X @ [1.0, -2.0, 0.5] + rng.normal(size=rows)})

    import uuid

    # Fresh arguments: Dask caches expressions by name, and this loader's list is new.
    tag = uuid.uuid4().hex
    frame = dd.from_map(load, [(tag, i) for i in range(n_parts)])
    loads.clear()  # the meta may be read from a partition
    return frame


@pytest.mark.parametrize("rounds", [None, 1])
def test_features_and_labels_of_one_frame_load_each_partition_once_a_pass(fixed_noise, rounds):
    """X = frame[cols] and y = frame[label] were converted apart, so every pass loaded
    (parsed) each partition twice; as column slices of one array, once."""
    import dask

    from skprivreg.linear_model import LinearRegression, SSPRegressor

    loads = []
    frame = _counted_frame(loads)
    make = ((lambda: SSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0, random_state=0))
            if rounds is None else
            (lambda: LinearRegression(epsilon=1.0, x_range=(-5.0, 5.0), y_bound=10.0,
                                      n_rounds=rounds, random_state=0)))
    with dask.config.set(scheduler="synchronous"):
        lazy = make().fit(frame[["a", "b", "c"]], frame["t"])
        passes = 1 if rounds is None else 2
        assert len(loads) == 4 + 4 * passes  # the lengths, then each pass
        ref = make().fit(frame[["a", "b", "c"]].compute(), frame["t"].compute())
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9)
    assert list(lazy.feature_names_in_) == ["a", "b", "c"]


def test_features_and_labels_of_two_frames_are_not_paired_by_position(fixed_noise):
    """Selections of different frames keep their own conversions (the rows of two
    sources are never joined by position)."""
    import dask

    from skprivreg.linear_model import SSPRegressor

    loads = []
    one, two = _counted_frame(loads), _counted_frame(loads, seed=10)
    with dask.config.set(scheduler="synchronous"):
        lazy = SSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0, random_state=0).fit(
            one[["a", "b", "c"]], two["t"])
        ref = SSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0, random_state=0).fit(
            one[["a", "b", "c"]].compute(), two["t"].compute())
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9)


def test_a_boolean_label_of_the_features_frame_keeps_its_own_conversion(fixed_noise):
    """pandas joins booleans with numbers as objects: a boolean label selected from the
    features' frame must still fit as it does from pandas."""
    import dask
    import dask.dataframe as dd
    import pandas as pd

    from skprivreg.linear_model import SSPRegressor

    rng = np.random.default_rng(0)
    pdf = pd.DataFrame({"a": rng.normal(size=400), "b": rng.normal(size=400),
                        "flag": rng.random(400) > 0.5})
    frame = dd.from_pandas(pdf, npartitions=4)
    make = lambda: SSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0, random_state=0)  # noqa: E731
    with dask.config.set(scheduler="synchronous"):
        lazy = make().fit(frame[["a", "b"]], frame["flag"])
    ref = make().fit(pdf[["a", "b"]], pdf["flag"])
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9)


# ---------------------------------------------------------------------------
# Rows another process can change, and chunks that are not what they declare
# ---------------------------------------------------------------------------
def _shared_rows(n, d, rng):
    import multiprocessing

    raw = multiprocessing.RawArray("d", n * d)
    X = np.frombuffer(raw, dtype=np.float64).reshape(n, d)
    X[:] = rng.uniform(-1.0, 1.0, (n, d))
    return X


def test_only_memory_numpy_allocated_counts_as_in_memory():
    rng = np.random.default_rng(0)
    owned = rng.uniform(size=(50, 2))
    y = owned[:, 0]
    assert RowSource(owned, y).in_memory and RowSource(owned[::2, :1], y[::2]).in_memory
    shared = _shared_rows(50, 2, rng)
    assert not RowSource(shared, y).in_memory
    assert not RowSource(owned, np.frombuffer(bytearray(400))).in_memory


def test_rows_in_shared_memory_are_clipped_and_checked_in_every_pass(monkeypatch):
    """A first pass that found every entry inside its range let LinearRegression's
    later passes skip the range clip and the NaN check: for an array over shared
    memory, a value another process wrote after the first pass (here 1e12) entered
    the released gradients unclipped, 3e11 against a sensitivity of 1.15."""
    import skprivreg.linear_model._linear as lin
    from skprivreg.linear_model import LinearRegression

    rng = np.random.default_rng(1)
    X = _shared_rows(4000, 2, rng)
    y = X @ np.array([0.5, -0.5]) + 0.05 * rng.standard_normal(4000)
    real = lin._data_pass
    written = {"at": (7, 0), "value": 1e12}

    def another_process_writes(source, block, label, streamed=False):
        out = real(source, block, label, streamed=streamed)
        if label.startswith("label_moments"):
            X[written["at"]] = written["value"]
        return out

    monkeypatch.setattr(lin, "_data_pass", another_process_writes)
    captured = []
    monkeypatch.setattr(lin, "_CAPTURE", captured)
    LinearRegression(epsilon=1.0, delta=1e-6, x_range=(-1, 1), y_bound=3.0,
                     n_rounds=3).fit(X, y)
    gradients = [(value, event) for name, value, event in captured if name.startswith("gradient")]
    assert len(gradients) == 2
    for value, event in gradients:  # within 8 noise sd + the clipped statistic's scale
        assert np.abs(value).max() < 8 * event.sigma + 4000 * event.sensitivity
    X[7, 0] = 0.0
    written.update(at=(8, 1), value=np.nan)  # after the first pass: refused, not summed
    with pytest.raises(ValueError, match="NaN"):
        LinearRegression(epsilon=1.0, delta=1e-6, x_range=(-1, 1), y_bound=3.0,
                         n_rounds=3).fit(X, y)


def test_a_dask_chunk_holding_other_rows_than_declared_is_refused():
    """The number of rows is public in every guarantee: a graph whose chunks hold
    fewer rows than their metadata (a filter in map_blocks) was summed as it was,
    and LinearRegression released the true row count."""
    da = pytest.importorskip("dask.array")
    from skprivreg.linear_model import LinearRegression

    rng = np.random.default_rng(2)
    X = rng.uniform(-1.0, 1.0, (4000, 2))
    y = X @ np.array([0.5, -0.5])
    Xd = da.from_array(X, chunks=(1000, 2))
    filtered = Xd.map_blocks(lambda b: b[b[:, 0] > -0.5], dtype=np.float64)
    assert filtered.shape == Xd.shape  # the metadata still says 4000 rows
    yd = da.from_array(y, chunks=1000)
    est = LinearRegression(epsilon=1.0, x_range=(-1, 1), y_bound=3.0, n_rounds=1)
    with pytest.raises(ValueError, match="the 1000 rows its metadata declares") as refused:
        est.fit(filtered, yd)
    for start in range(0, 4000, 1000):  # no chunk's filtered count (a data value) is named
        assert str(int(np.sum(X[start:start + 1000, 0] > -0.5))) not in str(refused.value)
    est.fit(Xd, yd)  # the same graph without the filter fits


def test_rows_of_a_file_are_checked_for_nan_in_every_pass(tmp_path):
    """A file (or a recomputed Dask graph) may change between passes: only the
    first complete pass was checked, and NaN reached the sums of the next (ISSP's
    PTR score then failed with certainty, after the spend)."""
    X = np.memmap(tmp_path / "rows.dat", dtype=np.float64, mode="w+", shape=(100, 2))
    X[:] = 1.0
    source = RowSource(X, None, block_rows=10, check_finite=True)
    (gram,) = source.reduce(block_map(_gram), add_tuples)
    assert gram[0, 0] == 100.0
    X[37, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        source.reduce(block_map(_gram), add_tuples)
    owned = np.ones((100, 2))
    source = RowSource(owned, None, block_rows=10, check_finite=True)
    source.reduce(block_map(_gram), add_tuples)
    assert not source.check_finite  # memory NumPy owns: checked once
