"""The fused statistics pass (skprivreg._gram) and the fits built on it.

Exact statistics against a direct computation, bad input refused before any
spend (NumPy and Dask), NumPy = Dask on the same noise, one pass per release,
no copy of X (tracemalloc), and verbose output that carries public facts only.
"""

import math
import tracemalloc
import warnings

import numpy as np
import pytest

from skprivreg import BudgetAccountant
from skprivreg._gram import (
    FUSED_MAX_COLUMNS,
    cache_block_rows,
    fused_layout,
    gram_statistics,
    source_block_rows,
)
from skprivreg._rows import RowSource
from skprivreg.bounds import clip_rows
from skprivreg.linear_model import AdaSSPRegressor, LinearRegression, SSPRegressor
from skprivreg.linear_model._base import augment_intercept
from skprivreg.preprocessing import PrivateStandardScaler

ESTIMATORS = [SSPRegressor, AdaSSPRegressor]
BOUNDS = dict(x_bound=3.0, y_bound=4.0)


def _data(n=3000, d=4, l=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.choice([0.5, 4.0], size=(n, 1))  # some rows over 3
    shape = (n,) if l is None else (n, l)
    return X, rng.normal(size=shape) * 3


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def _traced_peak(function, *args):
    """``(function(*args), peak bytes it allocated)`` (tracemalloc; warnings silenced)."""
    tracemalloc.start()
    try:
        result = _quiet(function, *args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("intercept", [None, 2.0])
def test_statistics_equal_the_direct_computation(monkeypatch, dtype, intercept):
    import skprivreg._gram as gram

    monkeypatch.setattr(gram, "CACHE_BYTES", 4096)  # many small blocks (1,024 rows)
    X, Y = _data(3001, 4, l=2)
    X = X.astype(dtype)
    XtX, XtY = gram_statistics(RowSource(X, Y, raw_blocks=True, block_rows=1000),
                               x_bound=3.0, y_bound=4.0, intercept_scaling=intercept)
    Xc = clip_rows(X.astype(np.float64), 3.0)[0]
    if intercept is not None:
        Xc = augment_intercept(Xc, intercept)
    Yc = np.clip(Y, -4.0, 4.0)
    np.testing.assert_allclose(XtX, Xc.T @ Xc, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(XtY, Xc.T @ Yc, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("label_run_bytes", [8, 8 * 3 * 2500, None])
def test_labels_prepared_per_run_of_pieces_give_the_same_statistics(monkeypatch,
                                                                     label_run_bytes):
    """Labels are clipped per run of pieces (each piece alone; runs of two or
    three pieces; a thread's whole share): the statistics are those of the
    clipped copy, and a NaN label in any run's last piece is refused."""
    import skprivreg._gram as gram

    monkeypatch.setattr(gram, "CACHE_BYTES", 4096)  # pieces of 1,024 rows
    if label_run_bytes is not None:
        monkeypatch.setattr(gram, "LABEL_RUN_BYTES", label_run_bytes)
    X, Y = _data(6001, 4, l=2)
    Y[-5:] = 40.0  # labels outside the range in the last piece of the last run
    source = RowSource(X, Y, raw_blocks=True, block_rows=3000)
    XtX, XtY = gram_statistics(source, x_bound=3.0, y_bound=4.0, intercept_scaling=2.0)
    Xc = augment_intercept(clip_rows(X, 3.0)[0], 2.0)
    Yc = np.clip(Y, -4.0, 4.0)
    np.testing.assert_allclose(XtX, Xc.T @ Xc, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(XtY, Xc.T @ Yc, rtol=1e-12, atol=1e-9)
    for row in (2999, 5999):
        Y_bad = Y.copy()
        Y_bad[row, 1] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            gram_statistics(RowSource(X, Y_bad, raw_blocks=True, block_rows=3000),
                            x_bound=3.0, y_bound=4.0)


@pytest.mark.parametrize("top_radius", [0.9, 1.2, 3.0])
def test_rows_just_over_the_bound_are_clipped(top_radius):
    """Blocks whose rows are at most ``top_radius`` x the bound, entries spread evenly.

    With ``top_radius <= 1`` no row is over (the max-entry shortcut applies);
    above it, some rows are over while sqrt(d) max|x_ij| is below 2x the
    bound, so a shortcut looser than ``sqrt(d) max|x_ij| <= bound`` skips them.
    """
    rng = np.random.default_rng(3)
    n, d, bound = 5000, 4, 3.0
    radius = rng.uniform(0.5, top_radius, size=(n, 1)) * bound
    X = radius * rng.choice([-1.0, 1.0], size=(n, d)) / np.sqrt(d)
    y = rng.normal(size=(n, 1))
    XtX, XtY = gram_statistics(RowSource(X, y, raw_blocks=True), x_bound=bound,
                               y_bound=None)
    Xc = clip_rows(X, bound)[0]
    np.testing.assert_allclose(XtX, Xc.T @ Xc, rtol=1e-12)
    np.testing.assert_allclose(XtY, Xc.T @ y, rtol=1e-12, atol=1e-9)


def test_a_finite_row_whose_norm_overflows_is_clipped_not_refused():
    X, y = _data(500, 3)
    X[7] = 1e200
    XtX, _ = gram_statistics(RowSource(X, y[:, None], raw_blocks=True), x_bound=3.0,
                             y_bound=None)
    assert np.isfinite(XtX).all()


def test_block_rows_follow_the_cache_and_d():
    assert cache_block_rows(10, 1 << 20) == (1 << 20) // 80
    assert cache_block_rows(100_000, 1 << 20) == 1024
    assert cache_block_rows(1, 1 << 30) == 1 << 16


@pytest.mark.parametrize("n_threads", [1, 2, 3, 8])
@pytest.mark.parametrize("d", [1, 3, 10, 100, 1000])
def test_blocks_and_streamed_pieces_give_every_thread_an_equal_share(monkeypatch, n_threads, d):
    import skprivreg._gram as gram
    from skprivreg._blocks import WORKSPACE_MAX_BYTES

    monkeypatch.setattr(gram, "N_THREADS", n_threads)
    block = gram.source_block_rows(d + 2)
    piece = cache_block_rows(d + 2)
    assert block % piece == 0 and (block // piece) % n_threads == 0
    streamed = gram.streamed_piece_rows(block, d, n_threads)
    assert streamed >= min(piece, -(-block // n_threads))
    assert 8 * streamed * d <= max(WORKSPACE_MAX_BYTES, 8 * piece * d)
    pieces = -(-block // streamed)
    assert pieces % n_threads == 0  # each thread gets the same number of pieces
    assert block - (pieces - 1) * streamed > 0  # the last piece is not empty


def _bad_inputs():
    X, y = _data(2000, 3)
    nan, inf, y_inf = X.copy(), X.copy(), y.copy()
    nan[1500, 2] = np.nan
    inf[3, 0] = -np.inf
    y_inf[1999] = np.inf
    return [(nan, y, "NaN"), (inf, y, "infinity"), (X, y_inf, "infinity")]


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("declared", [True, False])
def test_bad_input_raises_before_any_spend(Estimator, lazy, declared):
    """Declared bounds: the statistics pass refuses; private bounds: the counting pass does."""
    params = dict(epsilon=1.0, **BOUNDS) if declared else dict(epsilon=4.0, bounds_budget=0.5)
    for X, y, message in _bad_inputs():
        if lazy:
            da = pytest.importorskip("dask.array")
            X, y = da.from_array(X, chunks=(500, 3)), da.from_array(y, chunks=500)
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        est = Estimator(delta=1e-6, accountant=acc, **params)
        with pytest.raises(ValueError, match=message):
            _quiet(est.fit, X, y)
        assert acc.n_spends == 0 and not hasattr(est, "privacy_spent_")


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_wrong_dtype_raises_before_any_spend(Estimator):
    X, y = _data(300, 3)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError):
        Estimator(accountant=acc, **BOUNDS).fit(X.astype(str).astype(object) + "x", y)
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match="numeric"):
        Estimator(accountant=acc, **BOUNDS).fit(da.from_array(X.astype(str)), da.from_array(y))
    assert acc.n_spends == 0


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("declared", [True, False])
def test_numpy_and_dask_agree_on_the_same_noise(fixed_noise, Estimator, dtype, declared):
    da = pytest.importorskip("dask.array")
    X, y = _data(12_000, 4, seed=2)
    X = X.astype(dtype)
    bounds = BOUNDS if declared else {}
    ref = Estimator(epsilon=2.0, delta=1e-6, random_state=1, **bounds).fit(X, y)
    lazy = Estimator(epsilon=2.0, delta=1e-6, random_state=1, **bounds).fit(
        da.from_array(X, chunks=(2_500, 4)), da.from_array(y, chunks=2_500))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    assert lazy.intercept_ == pytest.approx(ref.intercept_, rel=1e-9, abs=1e-12)
    assert lazy.x_bound_ == ref.x_bound_ and lazy.y_bound_ == ref.y_bound_


@pytest.fixture
def passes(monkeypatch):
    """Labels of every pass over the rows (each RowSource.reduce call reads them once)."""
    labels = []
    reduce = RowSource.reduce

    def counted(self, *args, **kwargs):
        labels.append(kwargs.get("label", ""))
        return reduce(self, *args, **kwargs)

    monkeypatch.setattr(RowSource, "reduce", counted)
    return labels


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("lazy", [False, True])
def test_one_pass_per_release(passes, Estimator, lazy):
    X, y = _data(8000, 3)
    if lazy:
        da = pytest.importorskip("dask.array")
        X, y = da.from_array(X, chunks=(3000, 3)), da.from_array(y, chunks=3000)
    _quiet(Estimator(**BOUNDS).fit, X, y)
    assert passes == ["XtX, XtY"]
    passes.clear()
    _quiet(Estimator(epsilon=4.0, bounds_budget=0.5).fit, X, y)  # + the private bounds
    assert passes == ["bound counts", "XtX, XtY"]


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_makes_no_copy_of_x(Estimator, dtype):
    X, y = _data(1_000_000, 10)  # a copy of X: 40 MB (float32) or 80 MB
    X = np.ascontiguousarray(X, dtype=dtype)
    est = Estimator(**BOUNDS)
    _quiet(est.fit, X[:1000], y[:1000])  # imports and first-time allocations
    _, peak = _traced_peak(est.fit, X, y)
    assert peak < 0.25 * X.nbytes, (peak, X.nbytes)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("verbose", [1, 2])
def test_verbose_lines_are_the_same_for_neighbouring_datasets(capsys, Estimator, verbose):
    X, y = _data(300_000, 3, seed=4)
    X2, y2 = X.copy(), y.copy()
    X2[123_456], y2[123_456] = [100.0, -5.0, 1e6], -40.0  # one row replaced
    outputs = []
    for data in ((X, y), (X2, y2)):
        for bounds in (BOUNDS, {}):
            _quiet(Estimator(epsilon=4.0, bounds_budget=0.5, verbose=verbose, **bounds).fit,
                   *data)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    lines = outputs[0].splitlines()
    assert lines[0].startswith(f"[{Estimator.__name__}] pass 1 (XtX, XtY)")
    assert lines[-1] == f"[{Estimator.__name__}] pass 2 (XtX, XtY): 300,000 / 300,000 rows"
    # verbose=1: one line per pass; verbose=2: one per block (the blocks are
    # whole numbers of cache-sized pieces, about 262,144 rows: a public size)
    blocks = math.ceil(300_000 / source_block_rows(3 + 2))
    per_pass = len({round(k * (blocks - 1) / 10) for k in range(11)})
    assert len(lines) == 3 * (1 if verbose == 1 else per_pass)


# -- the full-DP LinearRegression: every pass, rounds included ----------------
LINEAR_DECLARED = dict(x_range=(-4.0, 4.0), y_bound=(-6.0, 6.0))


@pytest.mark.parametrize("declared", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_linear_regression_numpy_and_dask_agree_on_the_same_noise(fixed_noise, declared, dtype):
    da = pytest.importorskip("dask.array")
    X, y = _data(12_000, 3, seed=5)
    X = X.astype(dtype)
    ranges = LINEAR_DECLARED if declared else {}
    params = dict(epsilon=4.0, delta=1e-6, n_rounds=3, bounds_budget=0.5, random_state=2,
                  **ranges)
    ref = LinearRegression(**params).fit(X, y)
    lazy = LinearRegression(**params).fit(da.from_array(X, chunks=(2_500, 3)),
                                          da.from_array(y, chunks=2_500))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    assert lazy.intercept_ == pytest.approx(ref.intercept_, rel=1e-8, abs=1e-10)
    assert lazy.mean_fallback_ == ref.mean_fallback_


@pytest.mark.parametrize("outside_rows", [[], [7_000], [0, 11_999]])
@pytest.mark.parametrize("lazy", [False, True])
def test_linear_regression_every_pass_clips_as_the_first_found(fixed_noise, outside_rows, lazy):
    """The later passes skip the range check only when the first pass clipped nothing.

    With a few entries outside the declared ranges (one block, or the first
    and the last), every pass must use the clipped rows: the fit equals the
    fit on the clipped copy, with the same noise.
    """
    rng = np.random.default_rng(9)
    low, high = LINEAR_DECLARED["x_range"]
    X = rng.uniform(low, high, size=(12_000, 3))
    y = np.clip(X @ [0.8, -0.5, 0.3] + rng.normal(size=12_000), -6.0, 6.0)
    for row in outside_rows:
        X[row] = [3.0 * high, 2.0 * low, 0.5 * high]
    params = dict(epsilon=4.0, delta=1e-6, n_rounds=3, random_state=3, **LINEAR_DECLARED)
    ref = LinearRegression(**params).fit(np.clip(X, low, high), y)
    data = (X, y)
    if lazy:
        da = pytest.importorskip("dask.array")
        data = (da.from_array(X, chunks=(2_500, 3)), da.from_array(y, chunks=2_500))
    got = LinearRegression(**params).fit(*data)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    assert got.intercept_ == pytest.approx(ref.intercept_, rel=1e-9, abs=1e-12)
    assert not got.mean_fallback_


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("outside_rows", [[7_000], [0, 299_999]])
def test_linear_regression_long_pieces_clip_as_the_clipped_copy(fixed_noise, order, outside_rows):
    """Over two blocks of long pieces shared by threads, C- and Fortran-ordered (a data
    frame's rows, read as stored by the residual passes), the fit with entries outside
    the ranges equals the fit on the rows clipped beforehand, with the same noise (bit
    for bit on C-ordered rows, whose clipped pieces are multiplied as stored ones)."""
    rng = np.random.default_rng(9)
    n = 400_000
    X = rng.uniform(-4.0, 4.0, size=(n, 3))
    y = np.clip(X @ [0.8, -0.5, 0.3] + rng.normal(size=n), -6.0, 6.0)
    for row in outside_rows:
        X[row] = [12.0, -8.0, 2.0]
    wrap = np.asfortranarray if order == "F" else np.ascontiguousarray
    params = dict(epsilon=4.0, delta=1e-6, n_rounds=3, random_state=3, **LINEAR_DECLARED)
    ref = LinearRegression(**params).fit(wrap(np.clip(X, -4.0, 4.0)), y)
    got = LinearRegression(**params).fit(wrap(X), y)
    assert [e.name for e in got.privacy_spent_] == [e.name for e in ref.privacy_spent_]
    tol = 0.0 if order == "C" else 1e-12
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=tol, atol=0.0)
    assert got.intercept_ == pytest.approx(ref.intercept_, rel=tol, abs=0.0)
    assert got.mean_fallback_ == ref.mean_fallback_


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("n_rows", [2, 3, 5, 4_099])
def test_a_row_outside_its_range_changes_no_other_residual(order, n_rows):
    """One record outside its range decides whether a piece is clipped: that must change
    no other row's residual, bit for bit. Fortran-ordered rows are multiplied as stored
    and only the outside rows again from their clipped copy (a whole clipped copy has
    another leading dimension, which OpenBLAS rounds otherwise for pieces of 2-3 rows)."""
    from skprivreg.linear_model._range_blocks import RangeMap, _residuals, raw_space
    from skprivreg.mechanisms import sqrt_at_least

    rng = np.random.default_rng(11)
    d = 6
    rmap = RangeMap(np.zeros(d), np.full(d, 4.0), 0.0, 6.0, sqrt_at_least(d), True)
    assert raw_space(rmap, None)  # the passes sum the raw rows
    wrap = np.asfortranarray if order == "F" else np.ascontiguousarray
    wide = rng.uniform(-4.0, 4.0, size=(n_rows + 5_000, d))
    wide[:, 4], wide[:, 5] = -4.0, 4.0  # entries on their bounds are inside
    y = rng.normal(size=n_rows)
    k = n_rows // 2  # the row of the piece that moves outside its range
    others = np.arange(n_rows) != k
    for start, value in zip((0, 1, 4, 7, 1_000, 2, 9), (40.0, -40.0) * 4):
        # products round differently at other offsets; above or below the range
        theta = rng.normal(size=d + 1) * 10.0
        neighbour = wide.copy()
        neighbour[start + k, 1] = value
        kwargs = dict(rmap=rmap, fit_intercept=True, theta=theta, x_clip=None,
                      column_strided=True)
        base = _residuals(wrap(wide)[start:start + n_rows], y, **kwargs)[0].copy()
        moved = _residuals(wrap(neighbour)[start:start + n_rows], y, **kwargs)[0].copy()
        np.testing.assert_array_equal(moved[others], base[others])
        # the outside row's residual is the clipped row's
        clipped = np.clip(neighbour[start + k], -4.0, 4.0)
        want = np.clip(y[k] / 6.0, -1.0, 1.0) - (clipped / 4.0) @ theta[:d] - theta[d]
        assert moved[k] == pytest.approx(want, rel=1e-12, abs=1e-12)
        # Rows already outside their ranges in both neighbours keep their values too
        # (the record joins 1, 2 or 3 of them: BLAS would round the group differently).
        for stay_out in ([0], [0, n_rows - 1], [0, 1, n_rows - 1]):
            if k in stay_out or len(set(stay_out)) < len(stay_out):
                continue
            both, both_moved = wide.copy(), neighbour.copy()
            for row in stay_out:
                both[start + row, 3] = both_moved[start + row, 3] = -9.0
            base = _residuals(wrap(both)[start:start + n_rows], y, **kwargs)[0].copy()
            moved = _residuals(wrap(both_moved)[start:start + n_rows], y, **kwargs)[0].copy()
            np.testing.assert_array_equal(moved[others], base[others])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_fortran_rows_read_again_refuse_nan_and_infinity(bad):
    """Rows that may have changed since the first pass (a file's piece, copied in
    Fortran order) are checked again by the residual passes: NaN or infinity is
    refused, not summed or clipped."""
    from skprivreg.linear_model._range_blocks import (
        RangeMap,
        residual_moment_block,
        selection_block,
    )
    from skprivreg.mechanisms import sqrt_at_least

    d = 4
    rmap = RangeMap(np.zeros(d), np.full(d, 4.0), 0.0, 6.0, sqrt_at_least(d), True)
    rows = np.asfortranarray(np.random.default_rng(3).uniform(-4.0, 4.0, size=(100, d)))
    rows[17, 2] = bad
    y = np.zeros(50)
    common = dict(rmap=rmap, fit_intercept=True, theta=np.ones(d + 1), check=True)
    for block in (lambda X: residual_moment_block(X, y, **common),
                  lambda X: selection_block(X, y, u_mean=0.0, cap=1.0, **common)):
        with pytest.raises(ValueError, match="NaN|infinity"):
            block(rows[:50])


def test_linear_regression_residual_passes_read_fortran_rows_as_stored(monkeypatch):
    """A data frame's rows (Fortran order) are read by the residual passes in long
    pieces as stored, as C-ordered rows are, not copied piece by piece; rows of
    another float type are still converted piece by piece."""
    import skprivreg.linear_model._linear as lin
    import skprivreg.linear_model._range_blocks as rb

    seen = []
    real = rb.as_float64_block

    def spy(block, *args, **kwargs):
        out = real(block, *args, **kwargs)
        if np.ndim(block) == 2:  # the rows (labels are read as a vector)
            seen.append((len(block), out is block))
        return out

    monkeypatch.setattr(rb, "as_float64_block", spy)
    passes = []
    real_pass = lin._data_pass

    def spy_pass(source, block, label, streamed=False):
        seen.clear()
        out = real_pass(source, block, label, streamed)
        passes.append((label, list(seen)))
        return out

    monkeypatch.setattr(lin, "_data_pass", spy_pass)
    X, y = _data(300_000, 3)
    for dtype, as_stored in ((np.float64, True), (np.float32, False)):
        passes.clear()
        _quiet(LinearRegression(n_rounds=2, **LINEAR_DECLARED).fit,
               np.asfortranarray(X, dtype=dtype), y)
        by_label = dict(passes)
        for label in ("residual_scale", "selection"):
            reads = by_label[label]
            assert reads and all(kept == as_stored for _, kept in reads), (dtype, label)
            if as_stored:  # long pieces: a block's share per thread
                assert min(rows for rows, _ in reads) > cache_block_rows(3 + 2)


def test_linear_regression_gradient_pieces_fit_the_shared_cache(monkeypatch):
    """A gradient pass reads each piece twice (a product, then the transposed product
    of its residuals): its pieces are a block's share per thread in equal pieces that
    fill at most a quarter of the shared cache together, longer than cache-sized ones,
    so the second read comes from the cache (half as long a pass at d = 100)."""
    import skprivreg._gram as gram
    import skprivreg.linear_model._linear as lin
    from skprivreg._blocks import WORKSPACE_MAX_BYTES
    from skprivreg._gram import reread_piece_bytes, source_block_rows

    monkeypatch.setattr(gram, "SHARED_CACHE_BYTES", 64 << 20)  # a public machine fact
    lengths = []
    real = lin.gradient_block

    def spy(X_block, y_block, **kwargs):
        lengths.append(len(X_block))
        return real(X_block, y_block, **kwargs)

    monkeypatch.setattr(lin, "gradient_block", spy)
    d = 30
    X, y = _data(400_000, d)
    _quiet(LinearRegression(n_rounds=2, **LINEAR_DECLARED).fit, X, y)
    n_threads = gram.threads_for(RowSource(X, y))
    cap = reread_piece_bytes(n_threads) // (8 * (d + 2))
    assert reread_piece_bytes(n_threads) == max(
        gram.CACHE_BYTES, min((64 << 20) // (4 * n_threads), WORKSPACE_MAX_BYTES))
    assert sum(lengths) == 400_000
    assert max(lengths) <= cap and max(lengths) > 2 * cache_block_rows(d + 2)
    first_block = np.cumsum(lengths) <= source_block_rows(d + 2)
    assert len(set(np.asarray(lengths)[first_block])) == 1  # equal shares of a block
    assert first_block.sum() % n_threads == 0


def test_reread_pieces_stay_between_a_cache_piece_and_the_reused_buffer(monkeypatch):
    """A quarter of the shared cache per thread, but never above the reused-buffer
    size (a huge shared cache) nor below a cache-sized piece (a small one)."""
    import skprivreg._gram as gram
    from skprivreg._blocks import WORKSPACE_MAX_BYTES
    from skprivreg._gram import reread_piece_bytes

    monkeypatch.setattr(gram, "SHARED_CACHE_BYTES", 1 << 30)
    assert reread_piece_bytes(1) == reread_piece_bytes(4) == WORKSPACE_MAX_BYTES
    monkeypatch.setattr(gram, "SHARED_CACHE_BYTES", 1 << 20)
    assert reread_piece_bytes(2) == gram.CACHE_BYTES
    monkeypatch.setattr(gram, "SHARED_CACHE_BYTES", 24 << 20)
    assert reread_piece_bytes(3) == max(gram.CACHE_BYTES, 2 << 20)


def test_column_strided_rows_are_read_as_stored_only_when_asked():
    """Slices of two or more rows of a Fortran-ordered float64 array are used as stored
    with ``column_strided=True`` only; one row, other strides and other types are copied."""
    from skprivreg._blocks import as_float64_block, is_column_strided

    F = np.asfortranarray(np.random.default_rng(4).uniform(size=(50, 4)))
    for rows in (F[5:20], F[5:7], F[:, 1:3][5:20]):
        assert is_column_strided(rows)
        assert as_float64_block(rows, column_strided=True) is rows
        copy = as_float64_block(rows)
        assert not np.shares_memory(copy, F) and copy.flags.f_contiguous
        np.testing.assert_array_equal(copy, rows)
    windows = np.lib.stride_tricks.sliding_window_view(np.arange(20.0), 3)  # overlapping
    assert not is_column_strided(windows) and not is_column_strided(windows.T)
    for rows in (F[5:6], F[::2], np.ascontiguousarray(F)[5:20, :2], F[5:20].astype(np.float32)):
        assert not is_column_strided(rows) or rows.dtype != np.float64
        assert not np.shares_memory(as_float64_block(rows, column_strided=True), F)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("n_rounds", [1, 4])
def test_linear_regression_one_pass_per_release(passes, lazy, n_rounds):
    X, y = _data(8000, 3)
    if lazy:
        da = pytest.importorskip("dask.array")
        X, y = da.from_array(X, chunks=(3000, 3)), da.from_array(y, chunks=3000)
    est = _quiet(LinearRegression(n_rounds=n_rounds, **LINEAR_DECLARED).fit, X, y)
    releases = [e.name for e in est.privacy_spent_]
    rounds = [f"gradient_{t}" for t in range(1, n_rounds)]
    middle = ["residual_scale", *rounds] if n_rounds > 1 else []
    assert passes == ["label_moments, XtX, Xty", *middle, "selection"]
    assert len(passes) <= len(releases)


@pytest.mark.parametrize("lazy", [False, True])
def test_linear_regression_bad_input_raises_before_any_spend(lazy):
    for X, y, message in _bad_inputs():
        if lazy:
            da = pytest.importorskip("dask.array")
            X, y = da.from_array(X, chunks=(500, 3)), da.from_array(y, chunks=500)
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        est = LinearRegression(accountant=acc, **LINEAR_DECLARED)
        with pytest.raises(ValueError, match=message):
            _quiet(est.fit, X, y)
        assert acc.n_spends == 0 and not hasattr(est, "privacy_spent_")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_linear_regression_makes_no_copy_of_x(dtype):
    X, y = _data(1_000_000, 10)  # a copy of X: 40 MB (float32) or 80 MB
    X = np.ascontiguousarray(X, dtype=dtype)
    est = LinearRegression(n_rounds=2, **LINEAR_DECLARED)
    _quiet(est.fit, X[:1000], y[:1000])
    _, peak = _traced_peak(est.fit, X, y)
    assert peak < 0.25 * X.nbytes, (peak, X.nbytes)


def test_linear_regression_verbose_is_the_same_for_neighbouring_datasets(capsys):
    X, y = _data(150_000, 3, seed=6)
    X2, y2 = X.copy(), y.copy()
    X2[77], y2[77] = [50.0, 50.0, -50.0], 1e4
    outputs = []
    for data in ((X, y), (X2, y2)):
        for ranges in (LINEAR_DECLARED, {}):
            _quiet(LinearRegression(epsilon=4.0, n_rounds=3, bounds_budget=0.5, verbose=2,
                                    **ranges).fit, *data)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert "[LinearRegression] pass 5 (selection): 150,000 / 150,000 rows" in outputs[0]


# -- PrivateStandardScaler ----------------------------------------------------
@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("x_range", [(-5.0, 5.0), None])
def test_scaler_bad_input_raises_before_any_spend(lazy, x_range):
    for X, _, message in _bad_inputs()[:2]:
        X = np.vstack([X] * 3)  # enough rows for a private range
        if lazy:
            da = pytest.importorskip("dask.array")
            X = da.from_array(X, chunks=(500, 3))
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        scaler = PrivateStandardScaler(epsilon=2.0, x_range=x_range, accountant=acc)
        with pytest.raises(ValueError, match=message):
            _quiet(scaler.fit, X)
        assert acc.n_spends == 0 and not hasattr(scaler, "privacy_spent_")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scaler_numpy_dask_agree_and_no_copy_of_x(fixed_noise, dtype):
    da = pytest.importorskip("dask.array")
    X, _ = _data(1_000_000, 10, seed=7)
    X = np.ascontiguousarray(X, dtype=dtype)
    scaler = PrivateStandardScaler(epsilon=1.0, random_state=0)
    _quiet(scaler.fit, X[:20_000])
    ref, peak = _traced_peak(PrivateStandardScaler(epsilon=1.0, random_state=0).fit, X)
    assert peak < 0.25 * X.nbytes, (peak, X.nbytes)
    lazy = _quiet(PrivateStandardScaler(epsilon=1.0, random_state=0).fit,
                  da.from_array(X, chunks=(100_000, 10)))
    np.testing.assert_allclose(lazy.mean_, ref.mean_, rtol=1e-9)
    np.testing.assert_allclose(lazy.var_, ref.var_, rtol=1e-9)


def test_scaler_range_read_from_the_data_copies_at_most_a_piece():
    """bounds='data' (a non-private range, which warns) reads its blocks in cache-sized pieces."""
    X, _ = _data(1_000_000, 10, seed=7)
    _, peak = _traced_peak(_quiet, PrivateStandardScaler(epsilon=1.0, bounds="data").fit, X)
    assert peak < 0.05 * X.nbytes, (peak, X.nbytes)


# -- the Lasso's SSP refit on a public support ---------------------------------
def test_ssp_refit_on_columns_equals_the_fit_on_the_clipped_copy(fixed_noise):
    X, y = _data(5000, 6, seed=8)
    columns = np.array([1, 4, 5])
    x_range = (np.full(3, -2.0), np.array([2.0, 1.5, 3.0]))
    y_range = (-3.0, 5.0)
    params = dict(epsilon=2.0, delta=1e-6, x_bound=4.0, y_bound=5.0, random_state=4)
    ref = SSPRegressor(**params).fit(np.clip(X[:, columns], *x_range), np.clip(y, *y_range))
    fused = SSPRegressor(**params)._fit_columns(X, y, columns, x_range, y_range)
    np.testing.assert_allclose(fused.coef_, ref.coef_, rtol=1e-10)
    assert fused.intercept_ == pytest.approx(ref.intercept_, rel=1e-10)
    assert fused.n_features_in_ == 3


def test_lasso_refit_reads_the_support_inside_one_pass(monkeypatch, passes):
    from skprivreg import PrivateLassoRegressor

    rng = np.random.default_rng(9)
    X = rng.normal(size=(4000, 8))
    y = X[:, :2] @ [1.0, -1.0] + 0.1 * rng.normal(size=4000)
    calls = []
    original = SSPRegressor._fit_columns
    monkeypatch.setattr(SSPRegressor, "_fit_columns",
                        lambda self, *a: calls.append(a[2]) or original(self, *a))
    est = _quiet(PrivateLassoRegressor(epsilon=4.0, max_features=2, selection_rule="lars",
                                       x_range=(-4.0, 4.0), y_bound=6.0).fit, X, y)
    assert calls and list(calls[0]) == list(np.flatnonzero(est.support_))
    assert passes[-1] == "XtX, XtY"


def test_concurrent_fits_restore_the_blas_threads():
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    def blas_threads():
        return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    before = blas_threads()
    X, y = _data(200_000, 5)
    with ThreadPoolExecutor(4) as pool:
        fits = [pool.submit(_quiet, SSPRegressor(**BOUNDS).fit, X, y) for _ in range(8)]
        coefs = [f.result().coef_ for f in fits]
    assert blas_threads() == before
    assert all(np.isfinite(c).all() for c in coefs)


# -- ReuseCov's pass: cache-sized pieces shared by threads ---------------------
def _reusecov_pass(X, Y, **kwargs):
    from skprivreg.linear_model._reusecov_stats import sufficient_statistics

    return sufficient_statistics(X, Y, x_bound=3.0, y_bound=4.0, fit_intercept=True,
                                 intercept_scaling=1.5, check_finite=False, **kwargs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_reusecov_pass_equals_the_direct_computation(monkeypatch, dtype, n_threads):
    import skprivreg._gram as gram

    monkeypatch.setattr(gram, "N_THREADS", n_threads)
    X, Y = _data(3001, 4, l=7)
    X, Y = X.astype(dtype), Y.astype(dtype)
    stats = _reusecov_pass(X, Y, row_block=97)  # 31 pieces, the last one short
    Xc = augment_intercept(clip_rows(X.astype(np.float64), 3.0)[0], 1.5)
    Yc = np.clip(Y.astype(np.float64), -4.0, 4.0)
    assert stats.n == 3001 and stats.x_clipped and stats.y_clipped
    np.testing.assert_allclose(stats.xtx, Xc.T @ Xc, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(stats.xty, Xc.T @ Yc, rtol=1e-12, atol=1e-9)


def test_reusecov_pass_refuses_nan_in_any_piece(monkeypatch):
    import skprivreg._gram as gram

    monkeypatch.setattr(gram, "N_THREADS", 2)
    X, Y = _data(3001, 4, l=7)
    for row in (0, 1500, 3000):  # first piece, a piece of the second thread, the last row
        bad = Y.copy()
        bad[row, 3] = np.inf if row else np.nan
        with pytest.raises(ValueError, match="NaN or infinity"):
            _reusecov_pass(X, bad, row_block=97)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reusecov_pass_makes_no_copy_of_y(monkeypatch, dtype):
    import skprivreg.linear_model._reusecov_stats as stats_module

    # An 8 MiB shared cache (a common size): pieces of about 2 MiB per thread.
    monkeypatch.setattr(stats_module, "SHARED_CACHE_BYTES", 8 << 20)
    X, Y = _data(100_000, 10, l=100)  # Y: 80 MB (float64) or 40 MB (float32)
    Y = np.ascontiguousarray(Y, dtype=dtype)
    _reusecov_pass(X[:1000], Y[:1000])
    stats, peak = _traced_peak(_reusecov_pass, X, Y)
    assert stats.n == 100_000
    assert peak < 0.25 * Y.nbytes, (peak, Y.nbytes)


@pytest.mark.parametrize("declared", [True, False])
def test_reusecov_fit_makes_no_copy_of_y(monkeypatch, declared):
    """The whole fit, private bounds' counting pass included, holds no copy of Y."""
    import skprivreg.linear_model._reusecov_stats as stats_module
    from skprivreg.linear_model import ReuseCovRegressor

    monkeypatch.setattr(stats_module, "SHARED_CACHE_BYTES", 8 << 20)
    X, Y = _data(100_000, 10, l=100)  # Y: 80 MB; |y| > 4 in about 18% of entries
    bounds = dict(x_bound=3.0, y_bound=4.0) if declared else {}
    est = ReuseCovRegressor(epsilon=1.0, **bounds)
    _quiet(est.fit, X[:20_000], Y[:20_000])
    _, peak = _traced_peak(est.fit, X, Y)
    assert est.coef_.shape == (100, 10)
    assert peak < 0.25 * Y.nbytes, (peak, Y.nbytes)


@pytest.mark.parametrize("name", ["ReuseCovRegressor", "IndependentSSPRegressor"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_few_outcomes_make_no_copy_of_x(name, dtype, n_outputs):
    """With few outcomes the pieces are cache-sized, whatever the shared cache the
    machine reports, and a piece is copied (converted, clipped, given its
    intercept column) only into a reused piece-sized buffer."""
    from skprivreg import linear_model

    X, y = _data(1_000_000, 10, l=n_outputs)  # a copy of X: 40 MB (float32) or 80 MB
    X = np.ascontiguousarray(X, dtype=dtype)  # some rows over the bound 3
    est = getattr(linear_model, name)(epsilon=1.0, **BOUNDS)
    _quiet(est.fit, X[:1000], y[:1000])
    _, peak = _traced_peak(est.fit, X, y)
    assert peak < 0.25 * X.nbytes, (peak, X.nbytes)


@pytest.mark.parametrize("name", ["ReuseCovRegressor", "IndependentSSPRegressor",
                                  "PrivateStandardScaler"])
@pytest.mark.parametrize("lazy", [False, True])
def test_verbose_passes_of_the_other_estimators(capsys, name, lazy):
    """One line per pass, numbered in order, the same for neighbouring datasets."""
    from skprivreg.linear_model import IndependentSSPRegressor, ReuseCovRegressor

    X, Y = _data(40_000, 3, l=4, seed=11)
    X2, Y2 = X.copy(), Y.copy()
    X2[9_999], Y2[9_999] = [80.0, -5.0, 1e5], -400.0  # one row replaced
    make = {
        "ReuseCovRegressor": lambda **kw: ReuseCovRegressor(epsilon=2.0, cov_subsample=0.5,
                                                            **kw),
        "IndependentSSPRegressor": lambda **kw: IndependentSSPRegressor(epsilon=2.0, **kw),
        "PrivateStandardScaler": lambda **kw: PrivateStandardScaler(epsilon=2.0, **kw),
    }[name]
    outputs = []
    for data in ((X, Y), (X2, Y2)):
        if name == "PrivateStandardScaler":
            data = data[:1]
        if lazy:
            da = pytest.importorskip("dask.array")
            data = tuple(da.from_array(v, chunks=(7_000,) + v.shape[1:]) for v in data)
        _quiet(make(verbose=1).fit, *data)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    lines = outputs[0].splitlines()
    assert lines and all(line.startswith(f"[{name}] pass ") for line in lines)
    numbers = [int(line.split()[2]) for line in lines]
    assert numbers == sorted(numbers) and numbers[0] == 1
    assert len(set(numbers)) >= 2  # the private bounds' counts, then the statistics
    assert "40,000" in outputs[0]
    _quiet(make().fit, *data)
    assert capsys.readouterr().out == ""


# -- edge cases found in review -------------------------------------------------
@pytest.mark.parametrize("Estimator", ["SSPRegressor", "LinearRegression", "ReuseCovRegressor"])
@pytest.mark.parametrize("declared", [True, False])
def test_dask_chunks_without_rows(fixed_noise, Estimator, declared):
    """An empty chunk (as from a filtered Dask data frame) is a block with a zero partial."""
    da = pytest.importorskip("dask.array")
    from skprivreg.linear_model import ReuseCovRegressor

    rng = np.random.default_rng(12)
    X = rng.uniform(-2.0, 2.0, size=(8000, 3))
    y = np.clip(X @ [1.0, -1.0, 0.5] + rng.normal(size=8000), -6.0, 6.0)
    make, bounds = {
        "SSPRegressor": (SSPRegressor, dict(x_bound=4.0, y_bound=6.0)),
        "LinearRegression": (LinearRegression, LINEAR_DECLARED),
        "ReuseCovRegressor": (ReuseCovRegressor, dict(x_bound=4.0, y_bound=6.0)),
    }[Estimator]
    params = dict(epsilon=4.0, delta=1e-6, random_state=1, **(bounds if declared else {}))
    ref = _quiet(make(**params).fit, X, y)
    chunks = (3000, 0, 5000)
    lazy = _quiet(make(**params).fit, da.from_array(X, chunks=(chunks, (3,))),
                  da.from_array(y, chunks=(chunks,)))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, bool])
def test_bound_counts_of_integer_and_boolean_labels(dtype):
    """max |y| of a row is taken in float64 (an integer -y would wrap, a boolean -y fails)."""
    from skprivreg.linear_model._private_bounds import bound_block_counts
    from skprivreg.mechanisms import bound_bins

    rng = np.random.default_rng(13)
    info = np.iinfo(dtype) if dtype is not bool else None
    low, high = (0, 2) if info is None else (info.min, info.max)
    Y = rng.integers(low, high, size=(500, 2), endpoint=True).astype(dtype)
    X = rng.normal(size=(500, 3))
    bins = bound_bins()
    got = bound_block_counts(X, Y, bins)
    want = bound_block_counts(X, Y.astype(np.float64), bins)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_bound_counts_pass_shares_long_pieces_between_threads(monkeypatch, n_threads):
    """The counts behind private bounds are read in long pieces (a block's share per
    thread) by every thread of a NumPy pass, with the counts of one direct reading,
    NaN refused in any piece; on Dask the pieces of a chunk are cache-sized."""
    import threading

    import skprivreg.linear_model._private_bounds as pb
    from skprivreg.mechanisms import bound_bins, counts_above

    monkeypatch.setattr(pb, "threads_for", lambda source: 1 if source.is_dask else n_threads)
    seen = []
    real = pb.bound_block_counts

    def spy(X, Y, *args, **kwargs):
        seen.append((len(X), threading.get_ident()))
        return real(X, Y, *args, **kwargs)

    monkeypatch.setattr(pb, "bound_block_counts", spy)
    X, y = _data(300_000, 4)
    counts = pb.count_bounds(X, y, RowSource(X, y, block_rows=source_block_rows(5)))
    bins = bound_bins()
    np.testing.assert_array_equal(counts["x_bound"],
                                  counts_above(np.linalg.norm(X, axis=1), bins))
    np.testing.assert_array_equal(counts["y_bound"], counts_above(np.abs(y), bins))
    assert min(rows for rows, _ in seen[:-1]) > cache_block_rows(5)
    # the calling thread runs the first run, pool threads the others (an idle one may run two)
    assert min(n_threads, 2) <= len({ident for _, ident in seen}) <= n_threads
    X[123_456, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        pb.count_bounds(X, y, RowSource(X, y, block_rows=source_block_rows(5)))
    da = pytest.importorskip("dask.array")
    seen.clear()
    lazy = RowSource(da.from_array(X[:100_000], chunks=(50_000, 4)),
                     da.from_array(y[:100_000], chunks=50_000))
    pb.count_bounds(None, None, lazy)
    assert sum(rows for rows, _ in seen) == 100_000
    assert max(rows for rows, _ in seen) <= cache_block_rows(5)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_adding_infinite_partials_of_public_rows_is_silent(monkeypatch, n_threads):
    """Under label DP the rows are not clipped: +inf and -inf partials add without a warning.

    One thread adds the pieces' partials in place; two combine their runs.
    """
    import skprivreg._gram as gram
    from skprivreg.linear_model._reusecov_stats import sufficient_statistics

    monkeypatch.setattr(gram, "N_THREADS", n_threads)
    X = np.full((4, 1), 1e308)
    for y in ([1.0, 1.0, -1.0, -1.0], [1.0, 1.0, 1.0, -1.0]):  # neighbours
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sufficient_statistics(X, np.array(y)[:, None], row_block=2, y_bound=1.0,
                                  x_public=True, fit_intercept=False, compute_xtx=False)


def test_dask_folds_of_infinite_partials_are_silent():
    """The same on Dask: the partials of chunks are folded without a warning."""
    da = pytest.importorskip("dask.array")
    import dask

    from skprivreg.linear_model._reusecov_stats import sufficient_statistics

    X = da.from_array(np.full((4, 1), 1e308), chunks=(1, 1))
    for y in ([1.0, 1.0, -1.0, -1.0], [1.0, 1.0, 1.0, -1.0]):  # neighbours
        Y = da.from_array(np.array(y)[:, None], chunks=(1, 1))
        with warnings.catch_warnings(), dask.config.set(scheduler="synchronous"):
            warnings.simplefilter("error")
            sufficient_statistics(X, Y, y_bound=1.0, x_public=True, fit_intercept=False,
                                  compute_xtx=False)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_threaded_passes_equal_the_single_threaded_ones(monkeypatch, fixed_noise, n_threads):
    """Pieces shared by threads give the one-thread statistics up to summation order."""
    import skprivreg._gram as gram

    rng = np.random.default_rng(14)
    X = rng.uniform(-4.5, 4.5, size=(30_000, 4))  # some entries outside the ranges
    y = np.clip(X @ [1.0, -1.0, 0.5, 0.2] + rng.normal(size=30_000), -6.0, 6.0)
    monkeypatch.setattr(gram, "CACHE_BYTES", 1 << 16)  # many pieces
    fits = []
    for threads in (1, n_threads):
        monkeypatch.setattr(gram, "N_THREADS", threads)
        fits.append([
            SSPRegressor(epsilon=4.0, random_state=0, x_bound=6.0, y_bound=6.0).fit(X, y),
            LinearRegression(epsilon=4.0, n_rounds=3, random_state=0,
                             **LINEAR_DECLARED).fit(X, y),
            PrivateStandardScaler(epsilon=4.0, random_state=0, x_range=(-4.0, 4.0)).fit(X),
        ])
    for one, many in zip(fits[0][:2], fits[1][:2]):
        np.testing.assert_allclose(many.coef_, one.coef_, rtol=1e-10, atol=1e-12)
        assert many.intercept_ == pytest.approx(one.intercept_, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(fits[1][2].mean_, fits[0][2].mean_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fits[1][2].var_, fits[0][2].var_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_the_calling_thread_runs_the_first_run_of_a_pass(n_threads):
    """The caller works instead of waiting (a scheduler places a thread woken by a
    waiting one on its core), and the partials are combined in row order."""
    import threading

    from skprivreg._gram import run_pieces

    bounds = [(10 * i, 10 * i + 10) for i in range(6)]
    seen = {}

    def run(pieces, acc):
        seen[pieces[0]] = threading.get_ident()
        return [pieces]

    total = run_pieces(bounds, run, n_threads, None, lambda a, b: a + b)
    runs = [bounds[i * 6 // n_threads:(i + 1) * 6 // n_threads] for i in range(n_threads)]
    assert total == runs
    assert seen[bounds[0]] == threading.get_ident()
    assert all(seen[r[0]] != threading.get_ident() for r in runs[1:])


@pytest.mark.parametrize("failing", [0, 1])
def test_a_failing_run_of_a_pass_raises_after_every_run_ended(failing):
    """A refused piece (NaN, say) ends the pass with its error, from any thread,
    and no thread still reads the rows after the error has left."""
    import threading
    import time

    from skprivreg._gram import run_pieces

    ended = []

    def run(pieces, acc):
        index = pieces[0][0] // 10
        if index == failing:
            raise ValueError(f"run {index} refused")
        time.sleep(0.05)
        ended.append(index)
        return [index]

    before = threading.active_count()
    with pytest.raises(ValueError, match=f"run {failing} refused"):
        run_pieces([(0, 10), (10, 20)], run, 2, None, lambda a, b: a + b)
    assert ended == [1 - failing]
    assert threading.active_count() <= before + 1  # the pool's thread, idle


def test_numpy_passes_run_threads_and_dask_passes_one(monkeypatch):
    """Narrow rows too: their products release the interpreter lock (``np.dot``)."""
    import skprivreg._gram as gram

    monkeypatch.setattr(gram, "N_THREADS", 3)
    assert gram.threads_for(RowSource(np.zeros((10, 1)), np.zeros(10))) == 3
    da = pytest.importorskip("dask.array")
    dask_source = RowSource(da.zeros((10, 1), chunks=5), da.zeros(10, chunks=5))
    assert gram.threads_for(dask_source) == 1


@pytest.mark.parametrize("block_rows", [1, 2, 4])
def test_gram_pass_over_unclipped_huge_rows_is_silent(block_rows):
    """Without a row bound (public rows), +inf and -inf sums add without a warning."""
    X = np.full((4, 1), 1e308)
    for y in ([1.0, 1.0, -1.0, -1.0], [1.0, 1.0, 1.0, -1.0]):  # neighbours
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            gram_statistics(RowSource(X, np.array(y)[:, None], raw_blocks=True,
                                      block_rows=block_rows), x_bound=None, y_bound=1.0)


@pytest.mark.parametrize("lazy", [False, True])
def test_a_subsample_pass_sums_the_selected_rows_without_copying_them(lazy):
    """The covariance subsample's pass equals the pass over ``X[rows]``: rows
    located by each block's first row (Dask chunks) and each piece's start."""
    from skprivreg.linear_model._reusecov_stats import sufficient_statistics

    X, _ = _data(10_000, 4, seed=3)
    rows = np.sort(np.random.default_rng(5).choice(10_000, size=3_001, replace=False))
    kwargs = dict(x_bound=3.0, fit_intercept=True, intercept_scaling=1.5)
    ref = sufficient_statistics(X[rows], row_block=10_000, **kwargs)
    source = X
    if lazy:
        source = pytest.importorskip("dask.array").from_array(X, chunks=(2_500, 4))
    got = sufficient_statistics(source, rows=rows, row_block=97, **kwargs)
    assert got.n == ref.n == 3_001
    np.testing.assert_allclose(got.xtx, ref.xtx, rtol=1e-12)


def test_a_covariance_subsample_makes_no_copy_of_x():
    from skprivreg.linear_model import ReuseCovRegressor

    X, y = _data(1_000_000, 10)  # the old X[rows] copy: 72 MB of an 80 MB X
    est = ReuseCovRegressor(epsilon=1.0, cov_subsample=0.9, **BOUNDS)
    _quiet(est.fit, X[:20_000], y[:20_000])
    _, peak = _traced_peak(est.fit, X, y)
    assert peak < 0.25 * X.nbytes, (peak, X.nbytes)


def test_the_no_norms_shortcut_never_skips_a_row_the_norms_would_clip():
    """Rows of d equal entries just at B / sqrt(d), nudged up by 0-3 ulps: whenever
    the computed norm (or squared norm) is over the bound, the shortcut must
    say the block may exceed it (without a margin about 3% of such rows slipped
    through, over by an ulp, and a row's clip depended on its neighbours)."""
    import math

    from skprivreg._gram import rows_may_exceed
    from skprivreg.bounds import row_norms
    from skprivreg.linear_model._reusecov_stats import block_statistics

    rng = np.random.default_rng(0)
    missed = []
    for _ in range(5_000):
        d, B = int(rng.integers(1, 12)), float(rng.uniform(0.5, 100.0))
        t = B / math.sqrt(d)
        for _ in range(int(rng.integers(0, 4))):
            t = math.nextafter(t, math.inf)
        row = np.full((1, d), t)
        over = row_norms(row)[0] > B or float(np.einsum("ij,ij->i", row, row)[0]) > B * B
        if over and not rows_may_exceed(d, t, B):
            missed.append((d, B, t))
    assert not missed, missed[:3]
    # The reported case, through the statistics pass: the row is clipped.
    B, t = 99.51210227091475, 44.50316505233532
    stats = block_statistics(np.full((3, 5), t), np.zeros((3, 1)), x_bound=B, y_bound=1.0,
                             fit_intercept=False)
    assert stats.x_clipped
    assert np.trace(stats.xtx) / 3 <= B * B
    # A bound whose square overflows: the norms decide.
    assert rows_may_exceed(3, 1.0, 1e160)


@pytest.mark.parametrize("layout", ["C", "F", "float32", "memmap"])
def test_wide_labels_long_pieces_clip_without_changing_other_bits(layout, tmp_path):
    """Wide labels are summed in long pieces (at least 16 p rows, so the p x l sum
    is not re-read for every cache-sized piece). A piece with one entry over the
    bound is clipped as a whole copy and multiplied in the same shape: the sums
    equal, bit for bit, those of the labels clipped beforehand, and the pass keeps
    no buffer of a long piece after it ends."""
    from skprivreg._blocks import _WORKSPACE, WORKSPACE_MAX_BYTES
    from skprivreg.linear_model._reusecov_stats import piece_rows, sufficient_statistics

    n, d, l = 1_200, 20, 8_000
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (n, d))
    Y = rng.uniform(-0.9, 0.9, (n, l))
    step = piece_rows(d + l + 1, 2, d + 1)
    assert step >= 16 * (d + 1) and 8 * step * (d + l + 1) > WORKSPACE_MAX_BYTES
    assert n > step + 7
    clean = Y.copy()
    Y[step + 7, 11] = 40.0  # one entry in the second piece
    clean[step + 7, 11] = 1.0

    def stored(A, name):
        if layout == "F":
            return np.asfortranarray(A)
        if layout == "float32":
            return A.astype(np.float32)
        if layout == "memmap":
            path = tmp_path / f"{name}.npy"
            np.save(path, A)
            return np.load(path, mmap_mode="r")
        return A

    given = stored(Y, "y")
    got = sufficient_statistics(X, given, x_bound=3.0, y_bound=1.0)
    assert given[step + 7, 11] == 40.0  # the caller's labels are never clipped in place
    want = sufficient_statistics(X, stored(clean, "clean"), x_bound=3.0, y_bound=1.0)
    assert got.y_clipped and not want.y_clipped
    np.testing.assert_array_equal(got.xty, want.xty)
    np.testing.assert_array_equal(got.xtx, want.xtx)
    kept = getattr(_WORKSPACE, "buffers", {})
    assert all(8 * b.size <= WORKSPACE_MAX_BYTES for b in kept.values())


def test_pass_workspace_keeps_large_buffers_only_within_it():
    from skprivreg._blocks import WORKSPACE_MAX_BYTES, pass_workspace, workspace

    big = WORKSPACE_MAX_BYTES // 8 + 1
    assert not np.shares_memory(workspace("t big", big), workspace("t big", big))
    with pass_workspace(16 * WORKSPACE_MAX_BYTES):
        a = workspace("t big", big)
        assert np.shares_memory(a, workspace("t big", big))
    assert not np.shares_memory(a, workspace("t big", big))


def test_one_product_pieces_only_for_narrow_fortran_rows_with_few_outputs():
    """``X^T [X, Y, 1]`` in one product: a data frame's rows (Fortran-ordered) of at most
    12 features with one output (one feature fewer per further output); never C-ordered
    rows (used as stored, no copy) nor many outputs (Y would be copied once more per
    piece). The layout alone decides."""
    F = np.asfortranarray(np.zeros((100, FUSED_MAX_COLUMNS)))
    assert fused_layout(F, FUSED_MAX_COLUMNS, 1)
    assert fused_layout(F[10:50], 10, 3)
    assert not fused_layout(F[10:50], 10, 4)
    assert not fused_layout(F, FUSED_MAX_COLUMNS, 2)
    assert not fused_layout(np.asfortranarray(np.zeros((100, 13))), 13, 1)
    assert not fused_layout(np.zeros((100, 10)), 10, 1)
    assert not fused_layout(F, FUSED_MAX_COLUMNS, 1000)


def test_one_product_pieces_clip_their_entries_to_the_declared_ranges():
    """The Gram pass over a data frame's rows with a column selection and per-entry ranges
    (the Lasso's refit) clips in the one-product buffer: the sums equal, bit for bit,
    those of rows clipped beforehand, and an entry far outside its range counts as its
    range's end."""
    rng = np.random.default_rng(5)
    X = np.asfortranarray(rng.uniform(-1.0, 1.0, size=(30_000, 9)))
    X[17, 2], X[29_000, 5] = 50.0, -1e6
    y = rng.uniform(-1.0, 1.0, size=30_000)
    columns = np.array([0, 2, 5, 8])
    low, high = np.full(4, -1.0), np.full(4, 1.0)
    clipped = np.asfortranarray(np.clip(X[:, columns], low, high))
    stats = [gram_statistics(RowSource(Z, y, raw_blocks=True), x_bound=None, y_bound=1.0,
                             intercept_scaling=1.0, **extra)
             for Z, extra in [(X, {"columns": columns, "x_range": (low, high)}),
                              (clipped, {})]]
    for a, b in zip(*stats):
        np.testing.assert_array_equal(a, b)
