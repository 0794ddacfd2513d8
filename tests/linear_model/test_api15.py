"""Public API of the linear estimators: keyword-only signatures, one delta default,
withdrawn names, label ranges, and the bounds rule for every estimator with bounds."""

import inspect
import math

import numpy as np
import pytest

from skprivreg import BudgetAccountant, BudgetExceededError
from skprivreg.exceptions import ConfigurationError, PrivacyLeakWarning
from skprivreg.linear_model import (
    AdaSSPRegressor,
    BoostedAdaSSPRegressor,
    IndependentSSPRegressor,
    LinearRegression,
    ReuseCovRegressor,
    SSPRegressor,
    TukeyEMRegressor,
)

ESTIMATORS = [SSPRegressor, AdaSSPRegressor, IndependentSSPRegressor, ReuseCovRegressor,
              LinearRegression, BoostedAdaSSPRegressor, TukeyEMRegressor]


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_signature_is_keyword_only_with_one_delta_default(Estimator):
    params = inspect.signature(Estimator.__init__).parameters
    kinds = {name: p.kind for name, p in params.items() if name != "self"}
    assert set(kinds.values()) == {inspect.Parameter.KEYWORD_ONLY}
    assert params["epsilon"].default == 1.0
    assert params["delta"].default == 1e-6
    with pytest.raises(TypeError, match="keyword arguments only"):
        Estimator(1.0)


@pytest.mark.parametrize("Estimator, old, new", [
    (LinearRegression, "feature_bounds", "x_range"),
    (LinearRegression, "label_bounds", "y_bound"),
    (TukeyEMRegressor, "on_failure", "on_fail"),
])
def test_withdrawn_parameter_names_the_new_one(Estimator, old, new):
    with pytest.raises(TypeError, match=f"it is called '{new}'"):
        Estimator(**{old: None})
    assert new in inspect.signature(Estimator.__init__).parameters


def _single(n=3000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.5
    return X, X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)


def _multi(n=3000, d=3, l=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.5
    return X, X @ rng.normal(size=(d, l)) + 0.3 * rng.normal(size=(n, l))


@pytest.mark.parametrize("make, data", [
    (lambda yb: SSPRegressor(x_bound=2.0, y_bound=yb, random_state=0), _single),
    (lambda yb: AdaSSPRegressor(x_bound=2.0, y_bound=yb, random_state=0), _single),
    (lambda yb: BoostedAdaSSPRegressor(x_bound=2.0, y_bound=yb, random_state=0), _single),
    (lambda yb: IndependentSSPRegressor(x_bound=2.0, y_bound=yb, random_state=0), _multi),
    (lambda yb: ReuseCovRegressor(x_bound=2.0, y_bound=yb, random_state=0), _multi),
])
def test_label_range_pair_uses_its_largest_magnitude(fixed_noise, make, data):
    """``y_bound=(low, high)`` is ``y_bound=max(|low|, |high|)``: same ledger, same fit."""
    X, y = data()
    pair = make((-1.5, 3.0)).fit(X, y)
    scalar = make(3.0).fit(X, y)
    assert [e.sigma for e in pair.privacy_spent_.events] == [
        e.sigma for e in scalar.privacy_spent_.events]
    np.testing.assert_array_equal(pair.coef_, scalar.coef_)
    with pytest.raises(ValueError, match="y_bound"):
        make((3.0, -1.0)).fit(X, y)


# ---------------------------------------------------------------------------
# The bounds rule for the estimators that used to refuse missing bounds
# ---------------------------------------------------------------------------
# name -> (factory, data, {bound: notion of its event})
BOUND_CASES = {
    "reusecov-full": (lambda **kw: ReuseCovRegressor(**kw), _multi,
                      {"x_bound": "full", "y_bound": "full"}),
    "reusecov-feature": (lambda **kw: ReuseCovRegressor(privacy="feature", **kw), _multi,
                         {"x_bound": "feature"}),
    "reusecov-label": (lambda **kw: ReuseCovRegressor(privacy="label", **kw), _multi,
                       {"y_bound": "label"}),
    "reusecov-zero-out": (lambda **kw: ReuseCovRegressor(neighbouring="zero-out", **kw),
                          _multi, {"x_bound": "full", "y_bound": "full"}),
    "independent-ssp": (lambda **kw: IndependentSSPRegressor(**kw), _multi,
                        {"x_bound": "full", "y_bound": "full"}),
    "boosted-adassp": (lambda **kw: BoostedAdaSSPRegressor(n_rounds=3, **kw), _single,
                       {"x_bound": "full", "y_bound": "full"}),
    "linear-regression": (lambda **kw: LinearRegression(n_rounds=2, **kw), _single,
                          {"x_bound": "full", "y_bound": "full"}),
}


@pytest.mark.parametrize("case", sorted(BOUND_CASES))
def test_missing_bounds_are_estimated_privately_and_recorded(case):
    make, data, notions = BOUND_CASES[case]
    X, Y = data(n=20_000)
    acc = BudgetAccountant()
    est = make(epsilon=1.0, bounds_budget=0.2, accountant=acc).fit(X, Y)
    events = {e.name: e for e in est.privacy_spent_.events}
    assert acc.ledgers == [est.privacy_spent_]
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-9)
    for name, notion in notions.items():
        # each missing bound gets an equal share of bounds_budget * epsilon
        assert events[name].epsilon == pytest.approx(0.2 / len(notions))
        assert events[name].notion == notion
        assert events[name].neighbouring == est.privacy_spent_.neighbouring
        assert 0 < getattr(est, f"{name}_") < math.inf
    assert not set(events) & ({"x_bound", "y_bound"} - set(notions))


@pytest.mark.parametrize("case", sorted(BOUND_CASES))
def test_too_few_rows_for_a_private_bound_refuses_before_any_spend(case):
    make, data, _ = BOUND_CASES[case]
    X, Y = data(n=500)
    acc = BudgetAccountant()
    est = make(epsilon=1.0, accountant=acc)
    with pytest.raises(ConfigurationError, match=r"needs at least \d+ samples \(got n=500\)"):
        est.fit(X, Y)
    assert acc.n_spends == 0 and not hasattr(est, "privacy_spent_")


@pytest.mark.parametrize("case", sorted(BOUND_CASES))
def test_budget_is_checked_before_the_bound_pass(monkeypatch, case):
    """The counting pass of the private bounds is never reached without budget."""
    import skprivreg.linear_model._private_bounds as pb

    make, data, _ = BOUND_CASES[case]
    X, Y = data(n=20_000)

    class DataRead(Exception):
        pass

    def read(*args, **kwargs):
        raise DataRead

    monkeypatch.setattr(pb, "bound_block_counts", read)  # the counting pass, on any row source
    acc = BudgetAccountant(epsilon=0.5, delta=1e-3)
    with pytest.raises(BudgetExceededError):
        make(epsilon=1.0, accountant=acc).fit(X, Y)
    assert acc.n_spends == 0
    # positive control: with budget, fit does reach the pass
    with pytest.raises(DataRead):
        make(epsilon=1.0, accountant=BudgetAccountant()).fit(X, Y)


@pytest.mark.parametrize("case", sorted(BOUND_CASES))
def test_bounds_from_data_are_an_infinite_epsilon_event(case):
    make, data, notions = BOUND_CASES[case]
    X, Y = data(n=600)
    acc = BudgetAccountant(epsilon=np.inf, delta=0.5)
    with pytest.warns(PrivacyLeakWarning, match="read from the data"):
        est = make(epsilon=1.0, bounds="data", accountant=acc).fit(X, Y)
    events = {e.name: e for e in est.privacy_spent_.events}
    for name, notion in notions.items():
        assert math.isinf(events[name].epsilon) and events[name].notion == notion
    assert math.isinf(est.privacy_spent_.epsilon)
    assert acc.ledgers == [est.privacy_spent_]


def test_reused_covariance_fixes_the_row_bound():
    """With a reused covariance only the label bound is estimated; x_bound comes with it."""
    X, Y = _multi(n=20_000)
    first = ReuseCovRegressor(x_bound=2.0, y_bound=4.0).fit(X, Y)
    second = ReuseCovRegressor(covariance=first.export_covariance()).fit(X, Y[:, :2])
    names = [e.name for e in second.privacy_spent_.events]
    assert "x_bound" not in names and "y_bound" in names
    assert second.x_bound_ == pytest.approx(2.0)


# ---------------------------------------------------------------------------
# Planners
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("planner, Estimator, command", [
    ("ssp_plan", SSPRegressor, "ssp"),
    ("adassp_plan", AdaSSPRegressor, "adassp"),
])
def test_ssp_planners_match_the_fit_and_print_their_plan(capsys, planner, Estimator, command):
    import dataclasses

    import skprivreg.linear_model as lm
    from skprivreg import _cli

    X, y = _single(n=5000)
    plan = getattr(lm, planner)(n_samples=5000, n_features=3, epsilon=1.0, x_bound=2.0,
                                y_bound=(-3.0, 1.0))
    est = Estimator(epsilon=1.0, x_bound=2.0, y_bound=3.0).fit(X, y)
    assert [(e.name, e.sigma) for e in plan.ledger.events] == [
        (e.name, e.sigma) for e in est.privacy_spent_.events]
    assert plan.y_bound == 3.0 and plan.min_samples is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.epsilon = 2.0
    assert _cli.main(["plan", command, "--n", "5000", "--d", "3", "--epsilon", "1",
                      "--x-bound", "2", "--y-bound", "3"]) == 0
    assert capsys.readouterr().out.strip() == str(plan).strip()
    small = getattr(lm, planner)(n_samples=1000, n_features=3, epsilon=1.0)
    assert small.min_samples > 1000 and "fit refuses" in str(small)


def test_tukey_nonprivate_mode_is_ols_on_any_n():
    """epsilon=inf: plain least squares (even with fewer rows than n_models * p), a
    PrivacyLeakWarning and a ledger of infinite epsilon."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.7 + 0.1 * rng.normal(size=12)
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        est = TukeyEMRegressor(epsilon=np.inf).fit(X, y)
    A = np.hstack([X, np.ones((12, 1))])
    theta = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(est.coef_, theta[:3], rtol=1e-10)
    assert est.intercept_ == pytest.approx(theta[3], rel=1e-10)
    assert math.isinf(est.privacy_spent_.epsilon)
    with pytest.raises(ConfigurationError, match="n_models"):
        TukeyEMRegressor(epsilon=1.0).fit(X, y)


def test_reusecov_private_bounds_on_dask_equal_numpy(fixed_noise):
    """The counting pass runs blockwise on Dask input and releases the same bounds."""
    da = pytest.importorskip("dask.array")
    X, Y = _multi(n=20_000)
    ref = ReuseCovRegressor(random_state=1).fit(X, Y)
    lazy = ReuseCovRegressor(random_state=1).fit(da.from_array(X, chunks=5000),
                                                 da.from_array(Y, chunks=5000))
    assert (lazy.x_bound_, lazy.y_bound_) == (ref.x_bound_, ref.y_bound_)
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: LinearRegression(epsilon=np.inf),
    lambda: BoostedAdaSSPRegressor(epsilon=np.inf),
    lambda: SSPRegressor(epsilon=np.inf),
    lambda: IndependentSSPRegressor(epsilon=np.inf),
    lambda: ReuseCovRegressor(epsilon=np.inf),
])
def test_nonprivate_mode_needs_no_bounds(make):
    """epsilon=inf on 30 rows without any bound: the least-squares fit, no refusal."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 3))
    y = X @ [1.0, -2.0, 0.5] + 1.0
    with pytest.warns(PrivacyLeakWarning):
        est = make().fit(X, y)
    np.testing.assert_allclose(est.coef_, [1.0, -2.0, 0.5], atol=1e-6)
    assert est.intercept_ == pytest.approx(1.0, abs=1e-6)
