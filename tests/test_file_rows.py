"""A file's rows may change while a pass reads them: what is checked must be what is summed.

Another process may write to an ``np.memmap``'s file at any time. Each test
lets a "writer" change the file right after a block function has checked
a piece (its maximum and minimum, its labels, its range) and before it
sums the piece: the sums must still be those of checked (clipped) values,
which holds when a piece of a file is copied once and the copy is both
checked and summed (``as_float64_block``). Each test fails when a piece of
a file is used as a view of the file.
"""

import math
import sys
import warnings

import numpy as np
import pytest

from skprivreg._rows import RowSource
from skprivreg.exceptions import PrivacyLeakWarning


def _file(tmp_path, values, name="X.npy"):
    """``values`` in a file, opened read-only for the fit, and a writer's handle."""
    path = tmp_path / name
    np.save(path, values)
    return np.load(path, mmap_mode="r"), np.load(path, mmap_mode="r+")


def _write_once(writer, value):
    """A writer that overwrites every row of the file with ``value``, once."""
    done = []

    def write():
        if not done:
            writer[:] = value
            writer.flush()
            done.append(True)

    return write


def _nan_into(where, x_writer, y_writer, row):
    """Write NaN into the file of X (row ``row``, column 1) or of y (row ``row``)."""
    if where == "X":
        x_writer[row, 1] = np.nan
    else:
        y_writer[row] = np.nan


def _nan_after(monkeypatch, module, function, where, x_writer, y_writer, row=5):
    """Make ``module.function`` write NaN into the file of X or y right after it returns
    (``validate_data``: what another process may do once the data were checked)."""
    original = getattr(module, function)

    def called_then_written(*args, **kwargs):
        result = original(*args, **kwargs)
        _nan_into(where, x_writer, y_writer, row)
        return result

    monkeypatch.setattr(module, function, called_then_written)


def test_gram_pass_sums_the_rows_it_checked(tmp_path, monkeypatch):
    """SSP's pass: a row written huge after the block's max and min were read is not summed."""
    import skprivreg._gram as gram

    rng = np.random.default_rng(0)
    n, d, bound = 4000, 3, 1.0
    X, writer = _file(tmp_path, rng.uniform(-0.1, 0.1, size=(n, d)))
    y = rng.uniform(-1.0, 1.0, size=n)
    write = _write_once(writer, 100.0)
    check = gram.check_finite_extremes

    def checked_then_written(block, *args):
        top = check(block, *args)
        write()  # the file changes between the check and the product
        return top

    monkeypatch.setattr(gram, "check_finite_extremes", checked_then_written)
    source = RowSource(X, y, block_rows=None, raw_blocks=True)
    XtX, _ = gram.gram_statistics(source, x_bound=bound, y_bound=1.0)
    # Every summed row has norm at most the bound: the trace is at most n B^2.
    assert np.trace(XtX) <= n * bound**2 * (1 + 1e-12)


def test_linear_regression_residual_pass_sums_the_rows_it_checked(tmp_path, monkeypatch):
    """LinearRegression's later passes: a piece found inside its ranges, then overwritten."""
    import skprivreg.linear_model._range_blocks as rb

    rng = np.random.default_rng(1)
    n, d = 3000, 4
    values = rng.uniform(-0.5, 0.5, size=(n, d))
    X, writer = _file(tmp_path, values)
    y = rng.uniform(-1.0, 1.0, size=n)
    rmap = rb.RangeMap(np.zeros(d), np.ones(d), 0.0, 1.0, math.sqrt(d), True)
    theta = np.ones(d + 1)
    want = rb.residual_moment_block(values, y, rmap=rmap, fit_intercept=True, theta=theta)
    write = _write_once(writer, 1e6)
    inside = rb._inside

    def checked_then_written(block, *args, **kwargs):
        result = inside(block, *args, **kwargs)
        write()
        return result

    monkeypatch.setattr(rb, "_inside", checked_then_written)
    got = rb.residual_moment_block(X, y, rmap=rmap, fit_intercept=True, theta=theta)
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("when", ["after the check", "before the read"])
def test_scaler_moments_sum_the_entries_they_checked(tmp_path, monkeypatch, when):
    """PrivateStandardScaler's moments: a block overwritten after its max and min were
    taken is summed as checked; one overwritten just before it is read is checked as read
    (its max and min come from the copy, never from the file before it)."""
    import skprivreg.preprocessing._scalers as sc

    rng = np.random.default_rng(2)
    values = rng.uniform(-1.0, 1.0, size=(2000, 3))
    X, writer = _file(tmp_path, values)
    low, high = np.full(3, -2.0), np.full(3, 2.0)
    read = values if when == "after the check" else np.full_like(values, 1e6)
    want = sc._moment_block(read, None, low=low, high=high, check=True, symmetric=True)
    write = _write_once(writer, 1e6)
    name = "moment_sums" if when == "after the check" else "as_float64_block"
    function = getattr(sc, name)

    def written_then_called(*args, **kwargs):
        write()
        return function(*args, **kwargs)

    monkeypatch.setattr(sc, name, written_then_called)
    got = sc._moment_block(X, None, low=low, high=high, check=True, symmetric=True)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_reusecov_pass_sums_the_labels_it_scanned(tmp_path, monkeypatch):
    """ReuseCov's pass: labels found inside [-y_bound, y_bound], then overwritten."""
    import skprivreg.linear_model._reusecov_stats as rs

    rng = np.random.default_rng(3)
    n, d, l = 1500, 3, 4
    Xv = rng.uniform(-0.3, 0.3, size=(n, d))
    Yv = rng.uniform(-1.0, 1.0, size=(n, l))
    X, _ = _file(tmp_path, Xv)
    Y, writer = _file(tmp_path, Yv, name="Y.npy")
    kwargs = dict(x_bound=1.0, y_bound=1.0, fit_intercept=True)
    want = rs.block_statistics(Xv, Yv, **kwargs)
    write = _write_once(writer, 1e6)
    scan = rs.scan_labels

    def scanned_then_written(*args, **kw):
        result = scan(*args, **kw)
        write()
        return result

    monkeypatch.setattr(rs, "scan_labels", scanned_then_written)
    got = rs.block_statistics(X, Y, **kwargs)
    np.testing.assert_array_equal(got.xty, want.xty)


def test_pieces_of_a_file_are_copied(tmp_path):
    """Float64 pieces of a file are copied (pieces of another dtype always are)."""
    from skprivreg._blocks import as_float64_block

    X, _ = _file(tmp_path, np.ones((10, 3)))
    for block in (X, X[2:7], np.asarray(X)[2:7], np.asarray(X).ravel()):
        copy = as_float64_block(block)
        assert not np.shares_memory(copy, X)
        assert not np.shares_memory(as_float64_block(block, scratch="test file"), X)
    in_memory = np.ones((10, 3))
    assert as_float64_block(in_memory) is in_memory


def test_a_copy_of_a_memmap_is_in_memory(tmp_path):
    """A memmap's copy (or a pandas column made from one) owns its memory: read as stored."""
    from skprivreg._blocks import as_float64_block

    X, _ = _file(tmp_path, np.ones((10, 3)))
    copy = X.copy()
    assert isinstance(copy, np.memmap)
    assert RowSource(copy, np.ones(10)).in_memory and not RowSource(X, np.ones(10)).in_memory
    assert np.shares_memory(as_float64_block(copy), copy)  # used as stored


def test_mapped_labels_check_the_labels_they_map(tmp_path, monkeypatch):
    """A NaN label that the map read, gone from the file before the exact check: refused."""
    import skprivreg.linear_model._range_blocks as rb

    values = np.linspace(-1.0, 1.0, 500)
    values[7] = np.nan
    y, writer = _file(tmp_path, values, name="y.npy")
    rmap = rb.RangeMap(np.zeros(2), np.ones(2), 0.0, 1.0, math.sqrt(2), True)
    check = rb.check_block_finite

    def healed_then_checked(block, name="X"):
        writer[7] = 0.0
        return check(block, name)

    monkeypatch.setattr(rb, "check_block_finite", healed_then_checked)
    with pytest.raises(ValueError, match="NaN or infinity"):
        rb._mapped_labels(y, rmap, check=True)


def test_mapped_rows_check_the_rows_they_map(tmp_path, monkeypatch):
    """Private ranges: a NaN entry that the map read, gone before the exact check: refused."""
    import skprivreg.linear_model._range_blocks as rb

    values = np.random.default_rng(8).uniform(-1.0, 1.0, size=(500, 2))
    values[7, 1] = np.nan
    X, writer = _file(tmp_path, values)
    rmap = rb.RangeMap(np.zeros(2), np.ones(2), 0.0, 1.0, 1.0, False)
    check = rb.check_block_finite

    def healed_then_checked(block, name="X"):
        writer[7, 1] = 0.0
        return check(block, name)

    monkeypatch.setattr(rb, "check_block_finite", healed_then_checked)
    with pytest.raises(ValueError, match="NaN or infinity"):
        rb._mapped(X, None, rmap, x_clip=None, check=True)


def test_reusecov_checks_the_rows_it_sums(tmp_path, monkeypatch):
    """ReuseCov's X: NaN written after its finiteness check never reaches the sums."""
    import skprivreg.linear_model._reusecov_stats as rs

    rng = np.random.default_rng(9)
    X, writer = _file(tmp_path, rng.uniform(-1.0, 1.0, size=(500, 3)))
    Y = rng.uniform(-1.0, 1.0, size=(500, 2))
    check = rs.check_block_finite

    def checked_then_written(block, name="X"):
        result = check(block, name)
        writer[7, 1] = np.nan
        return result

    monkeypatch.setattr(rs, "check_block_finite", checked_then_written)
    stats = rs.block_statistics(X, Y, x_bound=2.0, y_bound=1.0, fit_intercept=True,
                                check_finite=True)
    assert np.isfinite(stats.xtx).all() and np.isfinite(stats.xty).all()


def test_feature_mean_pass_scales_the_rows_it_measured(tmp_path, monkeypatch):
    """Rows written huge after their norms were taken are not summed unscaled."""
    import skprivreg.linear_model._range_blocks as rb

    n = 400
    X, writer = _file(tmp_path, np.full((n, 3), 0.1))
    norms = rb.row_norms
    write = _write_once(writer, 1e6)

    def measured_then_written(A, **kwargs):
        result = norms(A, **kwargs)
        write()
        return result

    monkeypatch.setattr(rb, "row_norms", measured_then_written)
    (total,) = rb.feature_sum_block(X, None, x_clip=1.0)
    assert np.linalg.norm(total) <= n * 1.0 * (1 + 1e-12)


# -- a file that gains NaN after the pass that checked it ------------------------
@pytest.mark.parametrize("where", ["X", "y"])
@pytest.mark.parametrize("x_range", [(-1.0, 1.0), None])
def test_linear_regression_refuses_nan_written_after_the_first_pass(
        tmp_path, monkeypatch, fixed_noise, where, x_range):
    """Later passes over a file check for NaN again (on the copy they sum), in raw space
    (declared ranges) and on mapped rows (private ranges)."""
    import skprivreg.linear_model._linear as lin
    from skprivreg.linear_model import LinearRegression

    rng = np.random.default_rng(5)
    values = rng.uniform(-1.0, 1.0, size=(3000, 3))
    labels = values @ np.array([0.5, -0.2, 0.1]) + 0.1 * rng.standard_normal(3000)
    X, x_writer = _file(tmp_path, values)
    y, y_writer = _file(tmp_path, labels, name="y.npy")
    original = lin._data_pass

    def data_pass(source, block, label, streamed=False):
        result = original(source, block, label, streamed=streamed)
        if label.startswith("label_moments"):  # the first pass is over: the file changes
            _nan_into(where, x_writer, y_writer, 7)
        return result

    monkeypatch.setattr(lin, "_data_pass", data_pass)
    est = LinearRegression(epsilon=1.0, x_range=x_range, y_bound=3.0, n_rounds=3)
    with pytest.raises(ValueError, match="NaN or infinity"):
        est.fit(X, y)


def test_feature_mean_pass_refuses_nan():
    """The pass for the feature means refuses NaN (it may come first, from a file)."""
    from skprivreg.linear_model._range_blocks import feature_sum_block

    X = np.ones((50, 3))
    X[4, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        feature_sum_block(X, None, x_clip=1.0)
    X[4, 2] = 1e300  # finite, with a norm that overflows: within the bound after scaling
    (total,) = feature_sum_block(X, None, x_clip=1.0)
    assert np.all(np.isfinite(total))


@pytest.mark.parametrize("bounds", ["private", "data"])
def test_scaler_moments_pass_refuses_nan_written_after_the_bound_pass(
        tmp_path, monkeypatch, bounds):
    import skprivreg.preprocessing._scalers as sc
    from skprivreg.preprocessing import PrivateStandardScaler

    values = np.random.default_rng(6).uniform(-1.0, 1.0, size=(4000, 3))
    X, writer = _file(tmp_path, values)
    name = {"private": "private_norm_bound", "data": "data_norm_bound"}[bounds]
    bound = getattr(sc, name)

    def bound_then_written(*args, **kwargs):
        result = bound(*args, **kwargs)
        writer[11, 0] = np.nan  # between the bound's pass and the moments pass
        return result

    monkeypatch.setattr(sc, name, bound_then_written)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # bounds read from the data
        with pytest.raises(ValueError, match="NaN or infinity"):
            PrivateStandardScaler(epsilon=1.0, bounds=bounds).fit(X)


def test_linear_regression_refuses_infinity_written_later_without_a_warning(
        tmp_path, monkeypatch):
    """Private ranges: an infinite entry in a later pass is refused, silently before that
    (a warning would depend on the data)."""
    import skprivreg.linear_model._linear as lin
    from skprivreg.linear_model import LinearRegression

    rng = np.random.default_rng(10)
    values = rng.uniform(-1.0, 1.0, size=(3000, 3))
    X, writer = _file(tmp_path, values)
    y = values @ np.array([0.5, -0.2, 0.1])
    original = lin._data_pass

    def data_pass(source, block, label, streamed=False):
        result = original(source, block, label, streamed=streamed)
        if label.startswith("label_moments"):
            writer[7, 1] = np.inf
        return result

    monkeypatch.setattr(lin, "_data_pass", data_pass)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="NaN or infinity"):
            LinearRegression(epsilon=1.0, y_bound=3.0, n_rounds=3).fit(X, y)


def test_boosted_adassp_rounds_refuse_nan_labels_written_later(tmp_path, monkeypatch):
    import skprivreg.linear_model._boosted_adassp as ba

    rng = np.random.default_rng(11)
    X = rng.uniform(-1.0, 1.0, size=(3000, 3))
    y, writer = _file(tmp_path, X @ np.array([0.5, -0.2, 0.1]), name="y.npy")
    original = ba.sum_over_row_blocks
    calls = []

    def first_pass_then_written(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            writer[7] = np.nan
        return result

    monkeypatch.setattr(ba, "sum_over_row_blocks", first_pass_then_written)
    with pytest.raises(ValueError, match="NaN or infinity"):
        ba.BoostedAdaSSPRegressor(epsilon=1.0, x_bound=2.0, y_bound=2.0).fit(X, y)


@pytest.mark.parametrize("name, module", [("ReuseCovRegressor", "_reusecov_fit"),
                                          ("IndependentSSPRegressor", "_independent_ssp")])
def test_statistics_pass_refuses_nan_written_after_validation(tmp_path, monkeypatch, name, module):
    """X of a file is checked again by the statistics pass (validate_data read it before)."""
    import skprivreg.linear_model._reusecov_stats as rs
    from skprivreg import linear_model

    rng = np.random.default_rng(7)
    values = rng.uniform(-1.0, 1.0, size=(2000, 3))
    X, writer = _file(tmp_path, values)
    Y = rng.uniform(-1.0, 1.0, size=(2000, 2))
    original = rs.sufficient_statistics

    def written_then_read(*args, **kwargs):
        writer[9, 1] = np.nan
        return original(*args, **kwargs)

    monkeypatch.setattr(sys.modules[f"skprivreg.linear_model.{module}"], "sufficient_statistics",
                        written_then_read)
    est = getattr(linear_model, name)(epsilon=1.0, x_bound=2.0, y_bound=1.0)
    with pytest.raises(ValueError, match="NaN or infinity"):
        est.fit(X, Y)


# -- fits that keep their data in memory read a file once ------------------------
def _in_memory_fits():
    from skprivreg.feature_selection import (
        PrivateLassoRegressor,
        PrivateLassoSupportSelector,
        PrivateTopSSelector,
    )
    from skprivreg.label_dp import GaussianLabelNoiseRegressor, RROnBinsRegressor
    from skprivreg.linear_model import TukeyEMRegressor

    return {
        "tukey-em": lambda: TukeyEMRegressor(epsilon=8.0),
        "label-noise": lambda: GaussianLabelNoiseRegressor(epsilon=8.0, y_bound=(-20.0, 20.0)),
        "rr-on-bins": lambda: RROnBinsRegressor(epsilon=4.0, y_bound=(-20.0, 20.0)),
        "top-s": lambda: PrivateTopSSelector(epsilon=4.0, n_features_to_select=2,
                                             x_range=(-3.0, 3.0), y_bound=20.0),
        "lasso-regressor": lambda: PrivateLassoRegressor(
            epsilon=4.0, max_features=2, selection_rule="lars", x_range=(-3.0, 3.0),
            y_bound=20.0),
        "lasso-support": lambda: PrivateLassoSupportSelector(epsilon=4.0, max_features=2),
    }


def _in_memory_case(tmp_path, name, seed):
    """The estimator ``name``, its module, and a regression problem in two files."""
    estimator = _in_memory_fits()[name]()
    rng = np.random.default_rng(seed)
    values = rng.uniform(-3.0, 3.0, size=(4000, 4))
    labels = values @ np.array([2.0, -1.0, 0.0, 0.0]) + rng.standard_normal(4000)
    X, x_writer = _file(tmp_path, values)
    y, y_writer = _file(tmp_path, labels, name="y.npy")
    return estimator, sys.modules[type(estimator).__module__], X, y, x_writer, y_writer


@pytest.mark.parametrize("where", ["X", "y"])
@pytest.mark.parametrize("name", sorted(_in_memory_fits()))
def test_in_memory_fits_read_a_file_once(tmp_path, monkeypatch, name, where):
    """A file that gains NaN after validate_data checked it: the fit uses what it read
    (refused), never the file again (a NaN, or a released test flipped by it)."""
    estimator, module, X, y, x_writer, y_writer = _in_memory_case(tmp_path, name, 12)
    validator = ("validate_blockwise_data" if hasattr(module, "validate_blockwise_data")
                 else "validate_data")
    _nan_after(monkeypatch, module, validator, where, x_writer, y_writer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # planning warnings of small data, if any
        with pytest.raises(ValueError, match="NaN or infinity"):
            estimator.fit(X, y)


@pytest.mark.parametrize("name", sorted(_in_memory_fits()))
def test_in_memory_fits_use_the_copy_they_checked(tmp_path, monkeypatch, name):
    """A file that gains NaN right after the fit copied and checked it: the fit runs on
    its copy, with no NaN in what it releases."""
    estimator, module, X, y, x_writer, y_writer = _in_memory_case(tmp_path, name, 13)
    read = module.read_into_memory

    def read_then_written(array, name="X"):
        result = read(array, name)
        if name == "X":  # the file just copied changes
            x_writer[:, 1] = np.nan
        else:
            y_writer[:] = np.nan
        return result

    monkeypatch.setattr(module, "read_into_memory", read_then_written)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X, y)
    released = getattr(estimator, "coef_", None)
    if released is None:
        released = estimator.get_support().astype(float)
    assert np.all(np.isfinite(released))


@pytest.mark.parametrize("where", ["X", "y"])
def test_grid_search_reads_a_file_once(tmp_path, monkeypatch, where):
    """PrivateGridSearchCV scores every run on its validation rows: from a copy."""
    import skprivreg.model_selection._search as search
    from skprivreg.linear_model import AdaSSPRegressor
    from skprivreg.model_selection import PrivateGridSearchCV

    rng = np.random.default_rng(14)
    values = rng.uniform(-1.0, 1.0, size=(4000, 3))
    X, x_writer = _file(tmp_path, values)
    y, y_writer = _file(tmp_path, values @ np.array([1.0, 2.0, 3.0]), name="y.npy")
    _nan_after(monkeypatch, search, "validate_data", where, x_writer, y_writer)
    grid = PrivateGridSearchCV(estimator=AdaSSPRegressor(x_bound=2.0, y_bound=6.5),
                               param_grid={"x_bound": [0.01, 2.0]}, epsilon=4.0,
                               n_repetitions=3)
    with pytest.raises(ValueError, match="NaN or infinity"):
        grid.fit(X, y)


@pytest.mark.parametrize("where", ["X", "y"])
def test_label_aggregation_reads_a_file_once(tmp_path, monkeypatch, where):
    """aggregate(): its checks (finite labels, bag ranks) and its sums see one read."""
    import skprivreg.label_dp._aggregate as agg

    rng = np.random.default_rng(15)
    values = rng.normal(size=(600, 2))
    X, x_writer = _file(tmp_path, values)
    y, y_writer = _file(tmp_path, rng.uniform(0.0, 1.0, size=600), name="y.npy")
    _nan_after(monkeypatch, agg, "validate_data_free", where, x_writer, y_writer)
    with pytest.raises(ValueError, match="NaN or infinity"):
        agg.aggregate(X, y, assumption="none", bag_size=30, y_bound=(0, 1), epsilon=1.0)


def test_views_of_a_file_are_recognised(tmp_path):
    """Through a memoryview, and a sparse matrix over a file's arrays (copied, checked)."""
    import mmap as mmap_module

    from scipy import sparse

    from skprivreg._blocks import is_file_backed
    from skprivreg._rows import read_into_memory

    X, writer = _file(tmp_path, np.eye(4))
    with open(tmp_path / "raw.bin", "wb") as handle:
        handle.write(np.ones(8).tobytes())
    with open(tmp_path / "raw.bin", "r+b") as handle:
        mapped = mmap_module.mmap(handle.fileno(), 0)
        view = np.frombuffer(memoryview(mapped), dtype=np.float64)
        assert is_file_backed(view)
        del view
        mapped.close()
    data = np.load(tmp_path / "X.npy", mmap_mode="r")[0]  # a file-backed data array
    matrix = sparse.csr_matrix((data, np.arange(4), np.array([0, 1, 2, 3, 4])), shape=(4, 4))
    assert is_file_backed(matrix) and not is_file_backed(matrix.copy())
    copy = read_into_memory(matrix)
    assert not is_file_backed(copy)
    writer[0, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        read_into_memory(matrix)
    assert not is_file_backed(X.copy()) and is_file_backed(X)


@pytest.mark.parametrize("where", ["X", "y"])
def test_weighted_lba_reads_a_file_once(tmp_path, monkeypatch, where):
    """WeightedLBA's bag-rank and PTR checks and its aggregation see one read of a file
    (features written full-rank between them would release a bag's labels exactly)."""
    import skprivreg.label_dp._lba as lba
    from skprivreg.label_dp import WeightedLBARegressor

    rng = np.random.default_rng(16)
    values = rng.normal(size=(2000, 2))
    X, x_writer = _file(tmp_path, values)
    y, y_writer = _file(tmp_path, values @ np.array([1.0, 2.0]), name="y.npy")
    _nan_after(monkeypatch, lba, "validate_blockwise_data", where, x_writer, y_writer)
    est = WeightedLBARegressor(epsilon=8.0, y_bound=(-10.0, 10.0))
    with pytest.raises(ValueError, match="NaN or infinity"):
        est.fit(X, y)


def test_issp_checks_a_view_of_a_file_in_its_first_pass(tmp_path, monkeypatch):
    """A plain ndarray over a file (``np.asarray(memmap)``) is streamed like a memmap: NaN
    written after validation is refused by the first pass, before anything is spent."""
    import skprivreg.linear_model._issp as issp

    rng = np.random.default_rng(17)
    values = rng.standard_normal((60_000, 3))
    X, writer = _file(tmp_path, values)
    y = values @ np.array([1.0, -1.0, 0.5]) + rng.standard_normal(60_000)
    _nan_after(monkeypatch, issp, "validate_data", "X", writer, None)
    est = issp.ISSPRegressor(epsilon=8.0, delta=1e-6, residual_bound=6.0, on_fail="zero")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="NaN or infinity"):
            est.fit(np.asarray(X), y)
    assert not hasattr(est, "privacy_spent_") or est.privacy_spent_.epsilon == 0


def test_label_aggregation_uses_the_features_it_checked(tmp_path, monkeypatch):
    """aggregate(): features written after its copy never reach the released aggregates."""
    import skprivreg.label_dp._aggregate as agg

    rng = np.random.default_rng(18)
    values = rng.normal(size=(600, 2))
    X, writer = _file(tmp_path, values)
    y = rng.uniform(0.0, 1.0, size=600)
    read = agg.read_into_memory

    def read_then_written(array, name="X"):
        result = read(array, name)
        if name == "X":
            writer[:, 0] = np.nan
        return result

    monkeypatch.setattr(agg, "read_into_memory", read_then_written)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dataset, _ = agg.aggregate(X, y, assumption="none", bag_size=30, y_bound=(0, 1),
                                   epsilon=1.0)
    assert np.all(np.isfinite(dataset.X_agg)) and np.all(np.isfinite(dataset.y_agg))
