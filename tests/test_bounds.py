"""Per-column ranges, label ranges and their private estimates (skprivreg.bounds)."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from skprivreg import bounds as bounds_module
from skprivreg.bounds import (
    check_range_bounds_feasible,
    check_x_range,
    check_y_bound,
    clip_rows,
    estimate_ranges,
    min_samples_for_private_bound,
    range_bound_epsilons,
    x_range_magnitude,
    y_bound_magnitude,
)
from skprivreg.exceptions import ConfigurationError, PrivacyLeakWarning


def test_magnitudes_of_ranges():
    x_range = check_x_range(((-1.0, 0.0, 2.0), (3.0, 0.5, 4.0)), 3)
    assert x_range_magnitude(x_range).tolist() == [3.0, 0.5, 4.0]
    assert x_range_magnitude(check_x_range((-2.0, 1.0), 2)).tolist() == [2.0, 2.0]
    assert y_bound_magnitude(check_y_bound(5.0)) == 5.0
    assert y_bound_magnitude(check_y_bound((-7.0, 2.0))) == 7.0


def test_range_bound_epsilons_split_and_modes():
    kw = dict(epsilon=2.0, bounds="private", bounds_budget=0.1)
    assert range_bound_epsilons(["x_range", "y_bound"], private=True, **kw) == {
        "x_range": pytest.approx(0.1), "y_bound": pytest.approx(0.1)}
    assert range_bound_epsilons(["y_bound"], private=True, **kw) == {"y_bound": pytest.approx(0.2)}
    assert range_bound_epsilons([], private=True, **kw) == {}
    assert range_bound_epsilons(["x_range"], private=False, **kw) == {}
    data = range_bound_epsilons(["x_range"], private=True, **{**kw, "bounds": "data"})
    assert data == {"x_range": math.inf}


def test_feasibility_names_the_n_needed():
    needed = min_samples_for_private_bound(0.05)
    check_range_bounds_feasible(needed, {"x_range": 0.05, "y_bound": math.inf})
    with pytest.raises(ConfigurationError, match=f"at least {needed} samples"):
        check_range_bounds_feasible(needed - 1, {"x_range": 0.05})


def test_private_estimates_spend_the_recorded_epsilon(monkeypatch):
    # The epsilon handed to the mechanism is the epsilon of the event
    # (a halved or doubled budget in either place fails here).
    seen = []
    original = bounds_module.private_upper_bound

    def spy(counts, bins, epsilon, rng, n_above=None):
        seen.append(epsilon)
        return original(counts, bins, epsilon, rng, n_above=n_above)

    monkeypatch.setattr(bounds_module, "private_upper_bound", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 4)) * np.array([1.0, 2.0, 0.5, 1.0])
    y = 3.0 * rng.normal(size=5000)
    x_range, y_range, events = estimate_ranges(
        X, y, {"x_range": 0.3, "y_bound": 0.7}, np.random.default_rng(1),
        neighbouring="add-remove",
    )
    assert seen == [0.3, 0.7]
    assert [(e.name, e.epsilon, e.delta, e.neighbouring) for e in events] == [
        ("x_range", 0.3, 0.0, "add-remove"), ("y_bound", 0.7, 0.0, "add-remove")]
    # One symmetric range for every column, from the largest entry magnitude
    # of a row: about upper_bound_margin(0.3) = 152 of 5000 rows above it, so
    # it lies between the 90% quantile of max_j |x_ij| and its maximum (bins
    # are 9% apart).
    low, high = x_range
    row_max = np.max(np.abs(X), axis=1)
    assert np.all(low == -high) and np.all(high == high[0])
    assert np.quantile(row_max, 0.9) < high[0] <= 1.1 * row_max.max()
    assert y_range[0] == -y_range[1]
    assert np.quantile(np.abs(y), 0.9) < y_range[1] <= 1.1 * np.abs(y).max()


def test_data_bounds_warn_and_record_infinite_epsilon():
    X = np.array([[1.0, -3.0], [0.5, 2.0]])
    y = np.array([4.0, -1.0])
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        x_range, y_range, events = estimate_ranges(
            X, y, {"x_range": math.inf, "y_bound": math.inf}, None
        )
    assert x_range[1].tolist() == [3.0, 3.0] and y_range == (-4.0, 4.0)
    assert all(math.isinf(e.epsilon) for e in events)


def test_nothing_missing_reads_nothing():
    assert estimate_ranges(None, None, {}, None) == (None, None, [])


def test_x_range_of_the_wrong_shape_names_x_range():
    from skprivreg.bounds import check_x_range

    with pytest.raises(ValueError, match="x_range must be .* for 3 columns"):
        check_x_range([[0.0, 1.0], [0.0, 1.0]], 3)
    with pytest.raises(ValueError, match="x_range"):
        check_x_range(([0.0, 0.0], [1.0, 1.0]), 3)
    low, high = check_x_range(([0.0, 0.0, 0.0], 1.0), 3)
    assert low.shape == high.shape == (3,)


@pytest.mark.parametrize("layout", ["C", "F", "rows of F"])
def test_clip_rows_keeps_the_input_order_whether_or_not_a_row_was_clipped(layout):
    """A product rounds a Fortran-ordered operand differently: the layout of the clipped
    rows must not tell whether a row was clipped. It is the input's (a transposing copy
    of a data frame's rows would cost more than their products)."""
    from skprivreg.bounds import clip_rows

    rows = np.random.default_rng(0).uniform(-1.0, 1.0, size=(50, 4))
    wrap = {"C": np.ascontiguousarray, "F": np.asfortranarray,
            "rows of F": lambda A: np.asfortranarray(np.vstack([A, A]))[:50]}[layout]
    contiguous = "c_contiguous" if layout == "C" else "f_contiguous"
    X = wrap(rows)
    inside, clipped_any = clip_rows(X, 10.0)
    assert not clipped_any and getattr(inside.flags, contiguous)
    rows[3] = 20.0
    outside, clipped_any = clip_rows(wrap(rows), 10.0)
    assert clipped_any and getattr(outside.flags, contiguous)


def test_row_norms_into_a_given_buffer():
    """The passes write the norms of each piece into a reused buffer (a fresh one per
    piece cost page faults on Dask workers): same values, overflow gives inf."""
    from skprivreg.bounds import row_norms

    X = np.array([[3.0, 4.0], [1e200, 1e200], [0.0, 0.0]])
    out = np.full(3, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = row_norms(X, out=out)
    assert got is out
    np.testing.assert_array_equal(out, [5.0, np.inf, 0.0])
    np.testing.assert_array_equal(row_norms(X), out)


@pytest.mark.parametrize("kind", ["1d", "2d", "int", "bool"])
def test_bound_counts_count_rows_above_each_bin(kind):
    """The counts behind the private bounds: rows whose norm (largest |y_ij|) exceeds
    each bin, negative labels by their magnitude, in pieces of any size."""
    from skprivreg.linear_model._private_bounds import count_bounds
    from skprivreg.mechanisms import bound_bins, counts_above

    rng = np.random.default_rng(4)
    X = rng.normal(size=(3_000, 3)) * rng.uniform(0.01, 100.0, size=(3_000, 1))
    Y = {"1d": -rng.exponential(5.0, 3_000),
         "2d": rng.normal(size=(3_000, 2)) * [1.0, 50.0],
         "int": -rng.integers(0, 1_000, 3_000),
         "bool": rng.random(3_000) < 0.5}[kind]
    counts = count_bounds(X, Y)
    bins = bound_bins()
    magnitudes = np.abs(np.asarray(Y, dtype=np.float64).reshape(3_000, -1)).max(axis=1)
    np.testing.assert_array_equal(counts["y_bound"], counts_above(magnitudes, bins))
    np.testing.assert_array_equal(counts["x_bound"],
                                  counts_above(np.linalg.norm(X, axis=1), bins))


def test_bound_counts_count_the_public_rows_above_a_limit():
    """ReuseCov refuses a public side too large for its calibration before the spend of
    an estimated bound: the counting pass counts the rows of (X, c) and of Y above it."""
    from skprivreg.linear_model._private_bounds import count_bounds

    rng = np.random.default_rng(5)
    X = rng.normal(size=(2_000, 3)) * rng.uniform(0.1, 10.0, size=(2_000, 1))
    Y = rng.normal(size=(2_000, 4)) * rng.uniform(0.1, 10.0, size=(2_000, 1))
    limit, c = 12.0, 5.0
    over = [count_bounds(X, Y, public=side, public_limit=limit, intercept=c)["over"][0]
            for side in ("X", "Y")]
    x_norms = np.sqrt(np.sum(X**2, axis=1) + c * c)
    np.testing.assert_array_equal(over, [np.sum(x_norms > limit),
                                         np.sum(np.linalg.norm(Y, axis=1) > limit)])
    assert 0 < over[0] < 2_000 and 0 < over[1] < 2_000
    assert "over" not in count_bounds(X, Y)


def test_a_two_by_two_x_range_for_two_columns_is_refused_as_ambiguous():
    # [[-1, 1], [0, 5]] reads as a row per column ([-1, 1] and [0, 5]) or as
    # (low, high) = ([-1, 1], [0, 5]); it was silently read the second way.
    from skprivreg.bounds import check_x_range

    with pytest.raises(ValueError, match="ambiguous"):
        check_x_range(np.array([[-1.0, 1.0], [0.0, 5.0]]), 2)
    with pytest.raises(ValueError, match="ambiguous"):
        check_x_range([[-1.0, 1.0], [0.0, 5.0]], 2)
    low, high = check_x_range((np.array([-1.0, 0.0]), np.array([1.0, 5.0])), 2)
    assert low.tolist() == [-1.0, 0.0] and high.tolist() == [1.0, 5.0]
    low, high = check_x_range(np.array([[-1.0, 1.0], [0.0, 5.0], [2.0, 3.0]]), 3)
    assert low.tolist() == [-1.0, 0.0, 2.0] and high.tolist() == [1.0, 5.0, 3.0]


def _rows_near_and_beyond(bound, d, seed):
    """Rows of norm just below, at and just above ``bound`` (as floats compute it),
    and far beyond it: where rounding decides whether a clipped row stays inside."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(400, d))
    unit = v / np.linalg.norm(v, axis=1, keepdims=True)
    near = unit * bound * (1.0 + rng.integers(-8, 9, size=(400, 1)) * 2.0**-52)
    far = unit * bound * rng.uniform(1.5, 1e3, size=(400, 1))
    return np.vstack([near, far])


def _exact_squared_norms(rows):
    return [sum(Fraction(float(v)) ** 2 for v in row) for row in rows]


def _clipped_by_each_site(X, bound):
    """The rows each row-clipping function of the library makes of ``X``."""
    from skprivreg._gram import GramParams, _empty_partial, _gram_of_block
    from skprivreg.linear_model._boosted_adassp import _clipped_design
    from skprivreg.linear_model._range_blocks import RangeMap, _clip_scales, _mapped
    from skprivreg.linear_model._reusecov_stats import _prepare_rows

    d = X.shape[1]
    sites = {"clip_rows": clip_rows(X, bound)[0]}
    gram = []
    for row in X:  # one row: the column sums X^T 1 are the clipped row, exactly
        acc = _empty_partial(d, 1)
        _gram_of_block(row[None, :].copy(), np.array([[0.0, 1.0]]), GramParams(bound, None, 1),
                       acc)
        gram.append(acc[1][:, -1].copy())
    sites["SSP / AdaSSP pass"] = np.array(gram)
    sites["IndependentSSP / ReuseCov pass"] = np.array(
        _prepare_rows(X.copy(), bound, False, None, True)[0])
    sites["BoostedAdaSSP"] = _clipped_design(X, bound, False)
    with np.errstate(divide="ignore"):
        sites["LinearRegression, released bound"] = X * _clip_scales(X, bound)[:, None]
    identity = RangeMap(np.zeros(d), np.ones(d), 0.0, 1.0, bound, False)
    sites["LinearRegression, row bound"] = np.array(_mapped(X, None, identity)[0])
    return sites


@pytest.mark.parametrize("d", [3, 50])
@pytest.mark.parametrize("bound", [1.0, 0.7, 3e5])
def test_every_row_clip_leaves_each_exact_norm_within_the_bound(d, bound):
    # The sensitivities assume ||x|| <= bound exactly. Clipping to the bound itself
    # left about half of the clipped rows a few ulps above it (exact arithmetic).
    X = _rows_near_and_beyond(bound, d, seed=d)
    limit = Fraction(bound) ** 2
    above = {}
    for site, rows in _clipped_by_each_site(X, bound).items():
        assert rows.shape == X.shape, site
        above[site] = sum(s > limit for s in _exact_squared_norms(rows))
    assert not any(above.values()), f"rows above the bound: {above}"


def test_clip_threshold_moves_rows_by_a_few_ulps_only():
    X = _rows_near_and_beyond(2.0, 10, seed=1)
    clipped = clip_rows(X, 2.0)[0]
    norms = np.linalg.norm(X, axis=1)
    kept = norms <= 2.0 * (1 - 20 * 2.0**-52)
    np.testing.assert_array_equal(clipped[kept], X[kept])
    np.testing.assert_allclose(np.linalg.norm(clipped[~kept], axis=1), 2.0, rtol=1e-14)


def test_a_replaced_row_moves_each_label_count_by_at_most_one_with_several_outputs():
    # The counts of several outputs counted every entry: one replaced row moved a
    # count by up to the number of outputs, where AboveThreshold is calibrated for 1.
    from skprivreg.bounds import count_ranges

    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(4000, 3)), rng.normal(size=(4000, 8))
    counts = count_ranges(X, Y, {"y_bound": 1.0})["y_bound"]
    assert counts[2] == 4000
    for value in (1e6, 0.0, 3.0):
        replaced = Y.copy()
        replaced[0] = value
        moved = count_ranges(X, replaced, {"y_bound": 1.0})["y_bound"][0]
        assert np.abs(moved - counts[0]).max() <= 1
    # Each row counts with its largest |label|: the 1-D labels of those maxima agree.
    rows = count_ranges(X, np.abs(Y).max(axis=1), {"y_bound": 1.0})["y_bound"]
    np.testing.assert_array_equal(rows[0], counts[0])
    assert rows[1] == counts[1]
