"""The per-bag residual of the private residual check is a lower bound for any design.

The check's statistic ``min_j sqrt(RSS_j)`` must never exceed the exact
least-squares residual of a bag, also when the bag's public columns are
nearly collinear: the computed singular vectors span the column space only
up to an angle of about (backward error) / (smallest singular value).
"""

import warnings

import dask.array as da
import numpy as np
import pytest

import skprivreg.label_dp._aggregate as aggregate_module
from skprivreg.exceptions import PrivacyCheckFailedError, PrivacyInfeasibleError
from skprivreg.label_dp._aggregate import aggregation_rngs, run_aggregation
from skprivreg.label_dp._bags import (
    _design,
    _group_min_residual,
    _local_bags,
    bag_residual_norms,
)
from skprivreg.label_dp._planning import plan_aggregation

T_VALUES = (30, 40, 45, 50)


def _near_copy_data(n, t, seed=0):
    """X = [1 + 2^-t v, noise] with an intercept; labels y = v lie in the column space.

    ``v = (x_0 - 1) 2^t`` exactly, so every bag's exact residual is 0 (the
    design's columns ``1`` and ``1 + 2^-t v`` span ``v``).
    """
    rng = np.random.default_rng(seed)
    v = rng.choice([-1.0, 1.0], size=n)
    X = np.column_stack([1.0 + 2.0**-t * v, rng.normal(size=n)])
    assert np.array_equal((X[:, 0] - 1.0) * 2.0**t, v)
    return X, v


@pytest.mark.parametrize("t", T_VALUES)
def test_residual_of_a_near_copy_column_is_not_overstated(t):
    k = 40
    X, y = _near_copy_data(10 * k, t)
    Z = _design(X, True)
    bags = np.arange(10 * k).reshape(10, k)
    got = bag_residual_norms(Z, y, bags, label_bound=1.0)
    assert np.all(got <= 1e-12)  # the exact residual is 0
    # The per-block function of the Dask path gives the same.
    assert _group_min_residual(X, y, True, 10, k, (-1.0, 1.0), 1.0) <= 1e-12


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("t", T_VALUES)
def test_ptr_statistic_of_a_near_copy_column_is_not_overstated(monkeypatch, t, lazy):
    # The whole release path (random partition, clipping, PTR) on NumPy and
    # Dask input: the minimum residual the PTR draws on is at most the exact 0.
    k, m = 40, 25
    X, y = _near_copy_data(k * m, t, seed=t)
    if lazy:
        X, y = da.from_array(X, chunks=(300, 2)), da.from_array(y, chunks=300)
    plan = plan_aggregation(k * m, 2, epsilon=8.0, y_bound=(-1.0, 1.0), bag_size=k,
                            n_bags_min=1, check_pass_probability=False)
    seen = []

    def record(min_residual_norm, plan, rng):
        seen.append(min_residual_norm)
        return False

    monkeypatch.setattr(aggregate_module, "_ptr_decision", record)
    with pytest.raises((PrivacyCheckFailedError, PrivacyInfeasibleError)) as info:
        run_aggregation(X, y, plan, aggregation_rngs(0))
    if info.type is PrivacyInfeasibleError:
        # Collinear up to rounding: refused from the public design, before the check.
        assert seen == [] and t >= 45
    else:
        assert len(seen) == 1 and seen[0] <= 1e-12


def test_all_categories_with_an_intercept_give_a_zero_residual():
    # One-hot columns of every category next to the intercept are exactly
    # collinear: the residual cannot be certified, so it is reported as 0.
    rng = np.random.default_rng(1)
    k = 200
    cat = rng.integers(0, 3, k)
    X = np.column_stack([np.eye(3)[cat], rng.normal(size=k)])
    y = rng.uniform(-1, 1, k)
    bags = _local_bags(1, k)
    assert bag_residual_norms(_design(X, True), y, bags, label_bound=1.0)[0] == 0.0
    # Dropping one category gives the exact residual (up to the allowance).
    Z = _design(X[:, 1:], True)
    got = bag_residual_norms(Z, y, bags, label_bound=1.0)[0]
    exact = np.linalg.norm(y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0])
    assert got <= exact
    assert got == pytest.approx(exact, rel=1e-9)


def test_a_column_that_is_zero_in_a_bag_does_not_zero_its_residual():
    # A rare indicator is 0 throughout some bags: exact zero columns add
    # nothing to the column space and do not make the check fail.
    rng = np.random.default_rng(2)
    k = 300
    X = np.column_stack([rng.normal(size=2 * k), np.zeros(2 * k)])
    X[k:, 1] = rng.integers(0, 2, k)  # the second bag uses it
    y = rng.uniform(-1, 1, 2 * k)
    Z = _design(X, True)
    bags = _local_bags(2, k)
    got = bag_residual_norms(Z, y, bags, label_bound=1.0)
    for j, rows in enumerate(bags):
        Zj = Z[rows][:, np.any(Z[rows] != 0, axis=0)]
        exact = np.linalg.norm(y[rows] - Zj @ np.linalg.lstsq(Zj, y[rows], rcond=None)[0])
        assert got[j] <= exact
        # The zero column's singular vector is one more direction projected
        # off (a smaller value), not a zero.
        assert got[j] >= 0.9 * exact


def test_allowance_is_negligible_on_well_conditioned_designs():
    # k = 2000, p = 11 standard normal columns and an intercept: the
    # allowance is far below any residual threshold (of order label_bound).
    rng = np.random.default_rng(3)
    k, d = 2000, 10
    X = rng.normal(size=(3 * k, d))
    y = rng.uniform(-1, 1, 3 * k)
    Z = _design(X, True)
    bags = _local_bags(3, k)
    got = bag_residual_norms(Z, y, bags, label_bound=1.0)
    for j, rows in enumerate(bags):
        Zj, yj = Z[rows], y[rows]
        exact = np.linalg.norm(yj - Zj @ np.linalg.lstsq(Zj, yj, rcond=None)[0])
        assert exact - 1e-7 <= got[j] <= exact


@pytest.mark.parametrize("backend", ["numpy", "dask"])
def test_a_design_the_check_cannot_certify_is_refused_before_any_spend(backend):
    # One-hot columns of every category with an intercept: every bag's residual is
    # certified as 0, so the check would fail whatever the labels, after the spend.
    from skprivreg import BudgetAccountant
    from skprivreg.exceptions import PrivacyInfeasibleError
    from skprivreg.label_dp import WeightedLBARegressor

    rng = np.random.default_rng(0)
    n = 200_000
    cat = rng.integers(0, 3, n)
    numeric = rng.normal(size=(n, 2))
    y = np.clip(numeric @ [1.0, -1.0] + 0.5 * cat + rng.normal(0, 2.5, n), -5, 5)
    X = np.column_stack([np.eye(3)[cat], numeric])
    if backend == "dask":
        import dask.array as da

        X, y = da.from_array(X, chunks=(50_000, 5)), da.from_array(y, chunks=50_000)
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    est = WeightedLBARegressor(epsilon=8.0, delta=1e-5, y_bound=(-5, 5), accountant=acc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PrivacyInfeasibleError, match="collinear"):
            est.fit(X, y)
    assert acc.n_spends == 0


def test_a_feature_constant_within_a_bag_is_not_refused_and_changes_no_residual():
    # A rare binary flag that is 1 in every row of some bag is an exact multiple of the
    # intercept there: the column space is the same without it, so the bag's residual is
    # certified as without the flag (it was refused as collinear).
    from skprivreg.label_dp._bags import _some_bag_uncertifiable

    rng = np.random.default_rng(5)
    k, m = 500, 4
    numeric = rng.normal(size=(k * m, 2))
    flag = np.ones(k * m)
    flag[k:] = rng.random(k * (m - 1)) < 0.5  # constant in the first bag only
    y = rng.uniform(-1, 1, k * m)
    bags = _local_bags(m, k)
    with_flag = _design(np.column_stack([numeric, flag]), True)
    assert not _some_bag_uncertifiable(with_flag, bags)
    got = bag_residual_norms(with_flag, y, bags, label_bound=1.0)
    # the first bag: at most the residual without the flag (the zeroed column's extra
    # singular direction removes a little more), and close to it; the others positive
    without = bag_residual_norms(_design(numeric, True), y, bags, label_bound=1.0)
    assert 0.99 * without[0] <= got[0] <= without[0] + 1e-9
    assert np.all(got[1:] > 0)
