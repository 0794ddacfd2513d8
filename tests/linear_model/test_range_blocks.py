"""LinearRegression's block functions: the raw-row path equals the mapped, clipped rows."""

import numpy as np
import pytest

import skprivreg.linear_model._range_blocks as rb
from skprivreg.linear_model._linear import range_map

RANGES = [(-1.0, 1.0), (0.0, 1.0), (18.0, 90.0)]


def _reference(X, y, rmap, fit_intercept, theta, clip, u_mean, cap):
    """Every block statistic from the explicitly mapped and clipped rows (plain NumPy)."""
    Z = np.clip((X.astype(np.float64) - rmap.center) / rmap.half, -1.0, 1.0)
    u = np.clip((y - rmap.y_center) / rmap.y_half, -1.0, 1.0)
    A = np.column_stack([Z, np.ones(len(Z))]) if fit_intercept else Z
    r = u - A @ theta
    return {
        "first": (A.T @ A, A.T @ u, np.array([u.sum(), u @ u])),
        "gradient": (A.T @ np.clip(r, -clip, clip),),
        "moment": (np.array([np.minimum(r * r, 1.0).sum()]),),
        "selection": (np.array([np.minimum(r * r, cap).sum()
                                - np.minimum((u - u_mean) ** 2, cap).sum()]),),
    }


def _blocks(X, y, rmap, fit_intercept, theta, clip, u_mean, cap):
    common = dict(rmap=rmap, fit_intercept=fit_intercept)
    return {
        "first": rb.first_pass_stats(*rb.first_pass_block(X, y, **common), fit_intercept, rmap),
        "gradient": rb.gradient_block(X, y, theta=theta, clip=clip, **common),
        "moment": rb.residual_moment_block(X, y, theta=theta, **common),
        "selection": rb.selection_block(X, y, theta=theta, u_mean=u_mean, cap=cap, **common),
    }


def _assert_same(got, want):
    for name in want:
        for a, b in zip(got[name], want[name]):
            # Rounding only: the raw-space expansion loses about (1 + |center / half|)^2
            # machine epsilons of the largest sum (<= n = 3,000 on the mapped scale);
            # one clipped entry changes the sums by O(1).
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-9 * max(1.0, np.abs(b).max()),
                                       err_msg=name)


def _case(rng, low, high, d=4, n=3_000, fit_intercept=True, dtype=np.float64, y_bound=2.0):
    X = rng.uniform(low, high, size=(n, d)).astype(dtype)
    y = rng.normal(size=n)
    rmap = range_map((low, high), y_bound, d, fit_intercept)
    theta = rng.normal(size=d + fit_intercept)
    return X, y, rmap, (fit_intercept, theta, 0.7, 0.1, 0.5)


@pytest.mark.parametrize("low, high", RANGES)
def test_block_with_entries_outside_the_range_gives_the_clipped_statistics(low, high):
    """One entry above and one below the declared range: statistics of the clipped rows."""
    rng = np.random.default_rng(1)
    X, y, rmap, args = _case(rng, low, high)
    X[5, 1] = high + 3.0 * (high - low)
    X[17, 3] = low - 0.5 * (high - low)
    want = _reference(X, y, rmap, *args)
    _assert_same(_blocks(X, y, rmap, *args), want)
    # the clipped block (inside the ranges: the raw path) gives the same statistics
    _assert_same(_blocks(np.clip(X, low, high), y, rmap, *args), want)
    # and the clip matters on this block
    Z = (X - rmap.center) / rmap.half
    assert not np.allclose(Z.T @ Z, want["first"][0][:-1, :-1], rtol=1e-6)


def test_per_column_ranges_clip_each_column_to_its_own_range():
    """An entry outside its column's range but inside another column's is still clipped."""
    rng = np.random.default_rng(5)
    low, high = np.array([-1.0, 0.0, 10.0]), np.array([1.0, 5.0, 20.0])
    X = rng.uniform(low, high, size=(2_000, 3))
    y = rng.normal(size=2_000)
    rmap = range_map((low, high), 2.0, 3, True)
    args = (True, rng.normal(size=4), 0.7, 0.1, 0.5)
    assert rb._inside(X, rmap)
    _assert_same(_blocks(X, y, rmap, *args), _reference(X, y, rmap, *args))
    X[9, 0] = 4.0  # inside [0, 5] and [-1, 20], outside [-1, 1]
    assert not rb._inside(X, rmap)
    _assert_same(_blocks(X, y, rmap, *args), _reference(X, y, rmap, *args))


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("low, high", RANGES)
def test_raw_path_equals_the_mapped_copy(low, high, dtype, fit_intercept):
    rng = np.random.default_rng(2)
    X, y, rmap, args = _case(rng, low, high, fit_intercept=fit_intercept, dtype=dtype)
    assert rb._inside(X, rmap)  # the block is used as stored
    _assert_same(_blocks(X, y, rmap, *args), _reference(X, y, rmap, *args))


@pytest.mark.parametrize("y_bound", [(-1.0, 3.0), (0.5, 2.5), 0.5])
def test_labels_are_centred_scaled_and_clipped(y_bound):
    """Label ranges centred away from 0 (and a narrow one: many labels clipped)."""
    rng = np.random.default_rng(6)
    X, y, rmap, args = _case(rng, -1.0, 1.0, y_bound=y_bound)
    assert (rmap.y_center != 0.0) == (not isinstance(y_bound, float))
    _assert_same(_blocks(X, y, rmap, *args), _reference(X, y, rmap, *args))


def test_far_offset_and_private_ranges_use_the_mapped_copy():
    """Public conditions: a range far from the origin, or rows clipped to a released bound."""
    rng = np.random.default_rng(3)
    X, y, rmap, args = _case(rng, 1990.0, 2025.0)
    assert not rb.raw_space(rmap, None)
    _assert_same(_blocks(X, y, rmap, *args), _reference(X, y, rmap, *args))
    X, y, rmap, _ = _case(rng, -1.0, 1.0)
    assert rb.raw_space(rmap, None) and not rb.raw_space(rmap, x_clip=1.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_entry_is_refused_by_the_first_pass(bad):
    rng = np.random.default_rng(4)
    X, y, rmap, _ = _case(rng, -1.0, 1.0)
    X[7, 2] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        rb.first_pass_block(X, y, rmap=rmap, fit_intercept=True)


@pytest.mark.parametrize("cap", [2.0, 3.0, 0.1, 1e-4, 4.0, 9.0 * 0.123])
def test_selection_terms_never_exceed_the_cap(cap):
    """Each term of the selection sum lies in [0, K] in floating point (sensitivity 2K).

    The terms are clip(w, -s, s)^2; s = sqrt(K) rounds above for some K (sqrt(2)^2 > 2).
    """
    root = rb._root_within(cap)
    assert root * root <= cap < np.nextafter(root, np.inf) ** 2
    # Every residual far outside the cap, every label at the mean: the sum is n s^2 <= n K.
    d, n = 3, 1_000
    rmap = range_map((-1.0, 1.0), 1.0, d, True)
    X = np.zeros((n, d))
    y = np.ones(n)  # u = 1
    theta = np.array([0.0, 0.0, 0.0, -50.0])  # r = 1 + 50
    (total,) = rb.selection_block(X, y, rmap=rmap, fit_intercept=True, theta=theta,
                                  u_mean=1.0, cap=cap)
    # The sum of n terms in [0, K] is at most n K up to its own rounding, (n - 1) u of
    # it (how NumPy's sum groups the terms, and so its last bit, depends on the
    # machine's SIMD code).
    assert total[0] <= n * cap * (1 + (n - 1) * 2.0**-53)
    assert total[0] == pytest.approx(n * root * root, rel=1e-12)


@pytest.mark.parametrize("x_clip", [0.5, 1.5, 40.0])
def test_private_ranges_clip_each_row_to_the_released_bound(x_clip):
    """Private ranges: each row is scaled by min(1, x_clip / ||x||) (a zero row and a
    row inside the bound unchanged), then mapped with the released centre and
    clipped to the mapped row bound; the feature sum adds the scaled rows."""
    from skprivreg.bounds import clip_rows

    rng = np.random.default_rng(3)
    X = rng.normal(size=(700, 4)) * rng.uniform(0.01, 5.0, size=(700, 1))
    X[5] = 0.0
    y = rng.normal(size=700)
    scaled = clip_rows(X, x_clip)[0]
    (total,) = rb.feature_sum_block(X, y, x_clip=x_clip)
    np.testing.assert_allclose(total, scaled.sum(axis=0), rtol=1e-12, atol=1e-12 * x_clip)

    center = np.array([0.3, -0.2, 0.1, 0.9]) * x_clip
    rmap = rb.RangeMap(center, np.full(4, x_clip), 0.0, 2.0, 1.0, False)
    Z, u = rb._mapped(X, y, rmap, x_clip, check=True)
    expected = clip_rows((scaled - center) / x_clip, 1.0)[0]
    np.testing.assert_allclose(Z, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(u, np.clip(y / 2.0, -1.0, 1.0))


def test_vast_ranges_use_the_mapped_copy_so_no_sum_overflows():
    """Entries within a declared range of 1.34e154: the raw X^T X of 2,000 such rows is
    infinite (one row decided whether the fit raised after the spend); mapped, |z| <= 1."""
    import warnings

    from skprivreg import BudgetAccountant, LinearRegression

    rng = np.random.default_rng(0)
    B = 1.34e154
    X, y, rmap, args = _case(rng, -1e152, 1e152, d=2, n=2_000)
    rmap = range_map((-B, B), 2.0, 2, True)
    assert not rb.raw_space(rmap, None)
    X[0] = [B, 0.0]
    got = _blocks(X, y, rmap, *args)
    assert all(np.all(np.isfinite(part)) for value in got.values() for part in value)
    _assert_same(got, _reference(X, y, rmap, *args))
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LinearRegression(epsilon=1.0, x_range=(-B, B), y_bound=1.0, accountant=acc)
        est.fit(X, np.clip(y, -1.0, 1.0))
    assert np.all(np.isfinite(est.coef_)) and acc.n_spends == 1


def test_tiny_ranges_use_the_mapped_copy_so_one_row_moves_the_gram_within_its_bound():
    """A half-width whose square is subnormal: the raw X^T X rounds to multiples of the
    smallest subnormal before its 1 / h^2 rescaling, and one row moved the mapped Gram
    matrix by about twice its stated sensitivity. Mapped first, |z| <= 1 holds."""
    h = np.sqrt(0.51) * np.sqrt(5e-324)  # h * h is 0.51 of the smallest subnormal
    d = 2
    rmap = range_map((-h, h), (-1.0, 1.0), d, fit_intercept=False)
    assert not rb.raw_space(rmap, None)

    def gram(X):
        stats = rb.first_pass_block(X, np.zeros(len(X)), rmap=rmap, fit_intercept=False)
        return rb.first_pass_stats(*stats, False, rmap)[0]

    X = np.zeros((10, d))
    X2 = X.copy()
    X2[0] = [h, h]
    change = (gram(X2) - gram(X))[np.triu_indices(d)]
    # The mapped row is (1, 1) up to rounding: each upper entry moves by 1.
    np.testing.assert_allclose(change, 1.0, rtol=1e-12)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("low, high", RANGES)
def test_first_pass_over_a_run_of_pieces_equals_the_mapped_copy(monkeypatch, low, high, order):
    """The first pass maps a run's labels at once and reads its rows in cache-sized
    pieces (here 1,024 rows): each piece meets its own labels, and an entry outside
    its range in the last piece is clipped."""
    import skprivreg._gram as gram

    monkeypatch.setattr(gram, "CACHE_BYTES", 4096)
    rng = np.random.default_rng(8)
    X, y, rmap, args = _case(rng, low, high)
    y[:1024] *= 0.25  # the pieces' labels differ in scale
    X = np.asarray(X, order=order)
    inside = _blocks(X, y, rmap, *args)["first"]
    _assert_same({"first": inside}, {"first": _reference(X, y, rmap, *args)["first"]})
    X[2_900, 2] = high + 2.0 * (high - low)
    _assert_same({"first": _blocks(X, y, rmap, *args)["first"]},
                 {"first": _reference(X, y, rmap, *args)["first"]})
