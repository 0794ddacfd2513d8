"""The feature-only bag arithmetic does not depend on the units of the features.

The rank check and the residual norms of the private residual check (PTR)
must give the same decisions when a public column is measured in very
different units (e.g. a timestamp in nanoseconds): the column space of a
bag's design, hence its rank and its least-squares residual, is unchanged by
scaling a column.
"""

import warnings

import dask.array as da
import numpy as np
import pytest

from skprivreg.accounting import BudgetAccountant
from skprivreg.exceptions import (
    PrivacyCheckFailedError,
    PrivacyInfeasibleError,
    PrivacyLeakWarning,
)
from skprivreg.label_dp import WeightedLBARegressor
from skprivreg.label_dp._bags import (
    _design,
    _group_full_rank,
    _group_min_residual,
    _local_bags,
    bag_design_ranks,
    bag_residual_norms,
    check_bag_ranks,
)


def _timestamp_data(n=20_000, seed=1):
    """A column of size 1e18 next to a +-1 feature; labels exactly linear in it."""
    rng = np.random.default_rng(seed)
    t = 1e18 * rng.uniform(1, 2, n)
    x1 = rng.choice([-1.0, 1.0], n)
    return np.column_stack([t, x1]), x1.copy()


def _exact_residual_norms(Z, y, bags):
    """sqrt(RSS_j) by least squares on the column-scaled design (same column space)."""
    out = []
    for rows in bags:
        Zj, yj = Z[rows], y[rows]
        scale = np.abs(Zj).max(axis=0)
        Zs = Zj / np.where(scale > 0, scale, 1.0)
        beta = np.linalg.lstsq(Zs, yj, rcond=None)[0]
        out.append(np.linalg.norm(yj - Zs @ beta))
    return np.array(out)


def test_residual_norms_stay_below_the_exact_residual_with_a_huge_column():
    # Every bag's exact RSS is 0 (y = x1); the residual must not be overstated.
    X, y = _timestamp_data()
    Z = _design(X, True)
    bags = np.arange(20_000).reshape(20, 1000)
    exact = _exact_residual_norms(Z, y, bags)
    assert exact.max() < 1e-10
    got = bag_residual_norms(Z, y, bags, label_bound=1.0)
    assert np.all(got <= exact + 1e-12)
    assert got.max() == 0.0


@pytest.mark.parametrize("lazy", [False, True])
def test_ptr_refuses_labels_fitted_exactly_behind_a_huge_column(lazy):
    # Every bag's labels are an exact linear function of its features: one
    # changed label would be visible in the aggregates, so the private
    # residual check must fail (with certainty: its statistic is below zero).
    X, y = _timestamp_data()
    if lazy:
        X, y = da.from_array(X, chunks=(6_000, 2)), da.from_array(y, chunks=6_000)
    acc = BudgetAccountant(epsilon=100.0, delta=0.5)
    est = WeightedLBARegressor(
        epsilon=8.0, delta=1e-6, y_bound=(-1, 1), bag_size=1000, assumption="ptr",
        accountant=acc, random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PrivacyCheckFailedError):
            est.fit(X, y)
    assert acc.n_spends == 1  # the check's budget is spent; nothing is released
    assert not hasattr(est, "aggregated_")


def test_dask_block_residual_is_scale_safe():
    X, y = _timestamp_data(n=3000)
    low = _group_min_residual(X, y, True, 3, 1000, (-1.0, 1.0), 1.0)
    assert low == 0.0


def test_rank_is_counted_whatever_the_column_scale():
    rng = np.random.default_rng(2)
    n, k = 30, 3
    Z = np.column_stack([1e18 * rng.uniform(1, 2, n), rng.normal(size=n), np.ones(n)])
    bags = np.arange(n).reshape(n // k, k)
    assert np.all(bag_design_ranks(Z, bags) == 3)
    with pytest.raises(PrivacyInfeasibleError, match="rank equal to bag_size"):
        check_bag_ranks(Z, bags)
    assert _group_full_rank(Z[:, :2], True, n // k, k)
    # A zero column stays zero, an exact multiple adds no rank.
    zero = Z.copy()
    zero[:, 1] = 0.0
    assert np.all(bag_design_ranks(zero, bags) == 2)
    multiple = np.column_stack([Z[:, 0], 3.0 * Z[:, 0], Z[:, 2]])
    assert np.all(bag_design_ranks(multiple, bags) == 2)
    # Tiny units as well as huge ones.
    tiny = Z * np.array([1e-300, 1e-150, 1.0])
    assert np.all(bag_design_ranks(tiny, bags) == 3)


@pytest.mark.parametrize("lazy", [False, True])
def test_full_rank_bags_behind_a_huge_column_are_refused_before_any_spend(lazy):
    rng = np.random.default_rng(3)
    n = 3000
    X = np.column_stack([1e18 * rng.uniform(1, 2, n), rng.normal(size=n)])
    y = rng.uniform(-1, 1, n)
    if lazy:
        X, y = da.from_array(X, chunks=(700, 2)), da.from_array(y, chunks=700)
    acc = BudgetAccountant(epsilon=100.0, delta=0.5)
    est = WeightedLBARegressor(
        epsilon=8.0, y_bound=1.0, bag_size=3, assumption="declared",
        residual_var_lower_bound=100.0, accountant=acc,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # bag_size < 2p
        with pytest.raises(PrivacyInfeasibleError, match="rank equal to bag_size"):
            est.fit(X, y)
    assert acc.n_spends == 0


def _unscaled_residual_norms(Z, y, bags, label_bound):
    """The residual norms as computed before column scaling (ordinary data only)."""
    U, s, _ = np.linalg.svd(Z[bags], full_matrices=False)
    keep = (s > s[:, :1] * np.finfo(np.float64).eps)[:, None, :]
    yb = y[bags]
    coords = np.einsum("jkr,jk->jr", U, yb)
    resid = yb - np.einsum("jkr,jr->jk", U * keep, coords)
    allowance = 1e-12 * np.sqrt(bags.shape[1]) * label_bound
    return np.maximum(np.linalg.norm(resid, axis=1) - allowance, 0.0)


def test_random_labels_give_the_same_residuals_on_ordinary_data():
    rng = np.random.default_rng(4)
    n, d, k = 6000, 4, 300
    X = rng.normal(size=(n, d)) * np.array([1.0, 5.0, 0.1, 20.0])
    Z = _design(X, True)
    y = rng.uniform(-2, 2, n)
    bags = rng.permutation(n).reshape(n // k, k)
    got = bag_residual_norms(Z, y, bags, label_bound=2.0)
    # The allowance for the SVD's rounding (about 2e-10 here, against
    # residual norms near 20) is the only difference.
    unscaled = _unscaled_residual_norms(Z, y, bags, 2.0)
    assert np.all(got <= unscaled)
    np.testing.assert_allclose(got, unscaled, rtol=1e-10)
    exact = _exact_residual_norms(Z, y, bags)
    assert np.all(got <= exact)
    np.testing.assert_allclose(got, exact, rtol=1e-10)
    # The Dask per-block computation gives the same minimum.
    order = bags.ravel()
    low = _group_min_residual(X[order], y[order], True, n // k, k, (-2.0, 2.0), 2.0)
    assert low == got.min()


def test_residual_norms_are_lower_bounds_under_random_column_units():
    rng = np.random.default_rng(5)
    for _ in range(50):
        k, p = int(rng.integers(8, 60)), int(rng.integers(1, 6))
        units = 10.0 ** rng.uniform(-15, 15, p)
        X = rng.normal(size=(k, p)) * units
        Z = _design(X, True)
        # Labels in the column space plus a small residual.
        y = (X / units) @ rng.normal(size=p) + 1e-3 * rng.normal(size=k)
        bags = _local_bags(1, k)
        got = bag_residual_norms(Z, y, bags, label_bound=float(np.abs(y).max()))[0]
        exact = _exact_residual_norms(Z, y, bags)[0]
        assert got <= exact + 1e-12
        assert got == pytest.approx(exact, rel=1e-6, abs=1e-10)


def test_residual_norms_of_labels_near_the_float_limit_are_finite():
    # Rows in pairs with equal x and labels +B / -B: every bag's residual is the label
    # vector itself, of norm sqrt(k) B, while its sum of squares k B^2 overflows. An
    # infinite norm passed the residual test whatever its noise; the neighbour with one
    # label set to 0 (sum of squares just below the limit) passed about half the time.
    k, m = 150, 4
    B = np.sqrt(np.finfo(float).max / k) * (1 + 1e-9)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k // 2))
    X = np.repeat(a.reshape(-1), 2)[:, None]
    y = np.tile([B, -B], m * k // 2)
    bags = np.arange(m * k).reshape(m, k)
    got = bag_residual_norms(_design(X, True), y, bags, label_bound=B)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, np.sqrt(k) * B, rtol=1e-9)
