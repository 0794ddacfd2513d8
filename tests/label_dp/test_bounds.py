"""The label range of the label-DP estimators: declared, private, or read from data."""

import math
import warnings

import dask.array as da
import numpy as np
import pytest

from skprivreg.accounting import BudgetAccountant
from skprivreg.exceptions import BudgetExceededError, ConfigurationError, PrivacyLeakWarning
from skprivreg.label_dp import (
    GaussianLabelNoiseRegressor,
    RROnBinsRegressor,
    WeightedLBARegressor,
    aggregate,
)
from skprivreg.label_dp._label_bound import label_bound_counts
from skprivreg.mechanisms import bound_bins, upper_bound_margin


def _data(n=60_000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1))
    return X, 0.2 * X[:, 0] + rng.choice([-1.0, 1.0], size=n)


@pytest.mark.parametrize("cls", [WeightedLBARegressor, GaussianLabelNoiseRegressor])
def test_label_bounds_is_renamed_y_bound(cls):
    with pytest.raises(TypeError, match="'y_bound'"):
        cls(label_bounds=(0.0, 1.0))
    with pytest.raises(TypeError, match="keyword arguments only"):
        cls(1.0)
    assert cls().delta == 1e-6
    assert cls(y_bound=2.0).get_params()["y_bound"] == 2.0


def test_float_y_bound_means_symmetric_range():
    X, y = _data(20_000)
    est = GaussianLabelNoiseRegressor(epsilon=1.0, y_bound=0.5).fit(X, y)
    assert est.y_bound_ == (-0.5, 0.5)
    lba = WeightedLBARegressor(epsilon=8.0, y_bound=1.5, assumption="declared",
                               residual_var_lower_bound=0.5, bag_size=1000)
    assert lba.fit(X, y).y_bound_ == (-1.5, 1.5)


def test_lba_estimates_a_missing_range_privately(fixed_noise):
    # Seeded (random_state=0, the testing facility): the private residual check
    # FAILs (an error) with probability about 6e-6 on fresh draws.
    X, y = _data()
    acc = BudgetAccountant(epsilon=8.0, delta=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # nothing read from data
        est = WeightedLBARegressor(epsilon=8.0, accountant=acc, random_state=0).fit(X, y)
    first = est.privacy_spent_.events[0]
    assert (first.name, first.notion, first.neighbouring) == ("y_bound", "label", "replace-one")
    assert first.epsilon == pytest.approx(0.8) and first.delta == 0.0
    # The rest of epsilon goes to the test and the aggregation (0.4 / 0.6).
    eps = [event.epsilon for event in est.privacy_spent_.events[1:]]
    assert eps == pytest.approx([0.4 * 7.2, 0.6 * 7.2])
    recorded = [s.epsilon for s in acc.ledgers[0].events]
    assert recorded == [e.epsilon for e in est.privacy_spent_.events]
    low, high = est.y_bound_
    assert low == -high and high in bound_bins()
    # |y| <= 1.2 + 0.2*4.5: the private bound clips at most about
    # upper_bound_margin(0.8) labels, so it lies near max |y| (within 2 bins).
    assert 1.0 <= high <= 2.0 * 2 ** (2 / 8)
    assert est.privacy_report_["ptr_passed"] is True


def test_lba_private_range_on_dask_matches_numpy_counts():
    _, y = _data(5_000)
    assert np.array_equal(label_bound_counts(y), label_bound_counts(da.from_array(y, chunks=700)))
    with pytest.raises(ValueError, match="NaN|infinity|finite"):
        label_bound_counts(da.from_array(np.array([1.0, np.nan]), chunks=1))


def test_too_few_samples_for_a_private_range_refuse_before_spend():
    # bounds_budget=0.001: the private range would leave about
    # upper_bound_margin(0.008) labels above it, too many for n=20000.
    X, y = _data(20_000)
    acc = BudgetAccountant(epsilon=8.0, delta=1e-6)
    needed = math.ceil(4 * upper_bound_margin(0.008))
    assert needed > 20_000
    with pytest.raises(ConfigurationError, match=f"at least {needed} samples"):
        WeightedLBARegressor(epsilon=8.0, bounds_budget=0.001, accountant=acc).fit(X, y)
    assert acc.n_spends == 0
    with pytest.raises(ConfigurationError, match=f"at least {needed} samples"):
        GaussianLabelNoiseRegressor(epsilon=8.0, bounds_budget=0.001, accountant=acc).fit(X, y)
    assert acc.n_spends == 0


@pytest.mark.parametrize("params", [
    dict(mode="llp", bag_size=10),
    dict(assumption="declared", residual_var_lower_bound=0.5, bag_size=1000),
    dict(expected_residual_var=1.0),
])
def test_modes_whose_guarantee_needs_the_range_refuse_before_spend(params):
    X, y = _data(20_000)
    acc = BudgetAccountant(epsilon=8.0, delta=1e-5)
    with pytest.raises(ConfigurationError, match="y_bound"):
        WeightedLBARegressor(epsilon=8.0, delta=1e-6, accountant=acc, **params).fit(X, y)
    assert acc.n_spends == 0


def test_bounds_data_is_an_explicit_infinite_epsilon_opt_in():
    X, y = _data(20_000)
    limited = BudgetAccountant(epsilon=8.0, delta=1e-5)
    with pytest.raises(Exception, match="budget|exceed"):
        WeightedLBARegressor(epsilon=8.0, bounds="data", assumption="declared",
                             residual_var_lower_bound=0.5, bag_size=1000,
                             accountant=limited).fit(X, y)
    assert limited.n_spends == 0
    with pytest.warns(PrivacyLeakWarning, match="read from the data"):
        est = WeightedLBARegressor(epsilon=8.0, bounds="data", assumption="declared",
                                   residual_var_lower_bound=0.5, bag_size=1000).fit(X, y)
    assert est.privacy_spent_.events[0].name == "y_bound"
    assert math.isinf(est.privacy_spent_.epsilon)
    high = est.y_bound_[1]
    assert high >= np.max(np.abs(y)) and high in bound_bins()


def test_aggregate_accepts_a_missing_range(fixed_noise):  # seeded: see above
    X, y = _data()
    dataset, ledger = aggregate(X, y, epsilon=8.0, random_state=0)
    assert ledger.events[0].name == "y_bound" and ledger.epsilon == pytest.approx(8.0)
    assert dataset.label_bounds[0] == -dataset.label_bounds[1]


def test_private_range_is_the_same_on_dask(fixed_noise):
    # Same reproducible noise: the NumPy and Dask paths release the same range
    # and the same partition (threaded scheduler; no cluster needed).
    X, y = _data(60_000)
    params = dict(epsilon=8.0, random_state=0)
    ref = WeightedLBARegressor(**params).fit(X, y)
    lazy = WeightedLBARegressor(**params).fit(
        da.from_array(X, chunks=(13_000, 1)), da.from_array(y, chunks=13_000)
    )
    assert lazy.y_bound_ == ref.y_bound_
    np.testing.assert_array_equal(lazy.bag_indices_, ref.bag_indices_)
    assert [e.name for e in lazy.privacy_spent_.events][0] == "y_bound"


def test_aggregate_names_the_new_parameter():
    X, y = _data(1_000)
    with pytest.raises(TypeError, match="'y_bound'"):
        aggregate(X, y, label_bounds=(0.0, 1.0))


@pytest.mark.parametrize("make", [
    lambda acc: GaussianLabelNoiseRegressor(epsilon=2.0, bounds="data", accountant=acc),
    lambda acc: GaussianLabelNoiseRegressor(epsilon=np.inf, accountant=acc),
    lambda acc: RROnBinsRegressor(epsilon=2.0, bounds="data", accountant=acc),
    lambda acc: WeightedLBARegressor(epsilon=8.0, bounds="data", assumption="declared",
                                     residual_var_lower_bound=0.5, bag_size=1000,
                                     accountant=acc),
])
def test_labels_out_of_the_data_range_are_refused_before_any_spend(make):
    # The label range read from the data (bounds='data' or epsilon=inf) is
    # resolved before the spend: a label beyond the supported range is refused
    # with nothing spent, and a limited budget is refused before it is read.
    X, y = _data(20_000)
    y = y.copy()
    y[7] = 1e13
    acc = BudgetAccountant(epsilon=math.inf, delta=1.0)
    est = make(acc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        with pytest.raises(ValueError, match="above .* is not supported"):
            est.fit(X, y)
    assert acc.n_spends == 0
    assert not hasattr(est, "privacy_spent_")
    limited = BudgetAccountant(epsilon=8.0, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        with pytest.raises(BudgetExceededError):
            make(limited).fit(X, y)
    assert limited.n_spends == 0
    # The same labels with an ordinary value fit and spend once.
    y[7] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        make(acc).fit(X, y)
    assert acc.n_spends == 1


def test_a_plan_refused_for_a_range_read_from_the_labels_records_the_read():
    # With bounds='data' the plan uses the range read from the labels: one label
    # decides whether the plan is feasible (and the message cites the range), so the
    # read must be on the accountant (infinite epsilon) even when the fit refuses.
    from skprivreg.exceptions import InsufficientDataError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 2))
    y = X @ np.array([1.0, -1.0]) + rng.normal(size=5000)
    spent = []
    for label in (3.0, 3000.0):  # neighbours: one label differs
        y[0] = label
        acc = BudgetAccountant()
        est = WeightedLBARegressor(epsilon=4.0, delta=1e-5, assumption="declared",
                                   residual_var_lower_bound=50.0, bounds="data",
                                   accountant=acc)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            try:
                est.fit(X, y)
            except InsufficientDataError:
                spent.append("refused")
            else:
                spent.append("fitted")
        assert acc.n_spends == 1 and math.isinf(acc.total()[0])
        assert math.isinf(est.privacy_spent_.epsilon)
    assert spent == ["fitted", "refused"]
