"""WeightedLBA's private residual test: its pass probability from public facts.

Before any label is read, the estimator computes the best possible pass
probability of the test (every bag at its largest possible RSS) and refuses
below 5% with remedies that each reach a 95% pass; the formula is checked
against a Monte Carlo of the actual test.
"""

import math
import warnings

import numpy as np
import pytest

from skprivreg import _cli
from skprivreg.accounting import BudgetAccountant
from skprivreg.exceptions import InsufficientDataError, PrivacyLeakWarning, PrivateTestFailed
from skprivreg.label_dp import WeightedLBARegressor, lba_plan, lba_ptr_pass_probability
from skprivreg.label_dp._aggregate import _ptr_decision
from skprivreg.label_dp._bags import bag_residual_norms
from skprivreg.label_dp._planning import plan_aggregation, ptr_pass_probability


def plan_command(argv):
    """``skprivreg plan lba ...``: the exit status; the plan is printed."""
    return _cli.main(["plan", "lba", *argv])


def _earnings_facts(**params):
    """The 49k-row earnings setting: n=49000, d=6, labels in (0, 100), epsilon=8."""
    n, d = 49_000, 6
    X = np.zeros((n, d))
    params = {"epsilon": 8.0, "delta": 1e-6, "y_bound": (0.0, 100.0), **params}
    return X, WeightedLBARegressor(**params)


def _refuse(X, est):
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    est.set_params(accountant=acc)
    y = np.zeros(X.shape[0])
    with pytest.raises(InsufficientDataError) as info:
        est.fit(X, y)
    assert acc.n_spends == 0 and acc.total()[0] == 0.0
    assert not hasattr(est, "privacy_spent_")
    return str(info.value)


def test_earnings_setting_refuses_before_any_spend():
    # epsilon=8 with the residual variance the issue measured (sd ~ 9 per label):
    # predicted pass probability ~ 0; the message names the sd, n and epsilon
    # that would reach 95%, and no bag_size (already at its maximum n // 28).
    X, est = _earnings_facts(expected_residual_var=81.0)
    message = _refuse(X, est)
    assert "bag_size=1750 (the largest allowed" in message
    assert "bag_size >=" not in message
    assert "residual standard deviation of at least 29 (label units)" in message
    assert "n_samples >= " in message and "epsilon >= " in message
    # epsilon=2 needs no declaration: even labels at the largest possible
    # spread pass with probability <= 3.5e-6 (the figure).
    X, est = _earnings_facts(epsilon=2.0)
    message = _refuse(X, est)
    assert "at most 3.4e-06" in message
    assert "No residual standard deviation suffices" in message


def test_refusal_comes_before_the_release_and_ignores_the_labels(monkeypatch):
    def release(*args, **kwargs):
        raise AssertionError("the release ran")

    monkeypatch.setattr("skprivreg.label_dp._lba.run_aggregation", release)
    messages = set()
    for seed in range(3):
        X, est = _earnings_facts(epsilon=1.0)
        y = np.random.default_rng(seed).uniform(0, 100, X.shape[0])
        with pytest.raises(InsufficientDataError) as info:
            est.fit(X, y)
        messages.add(str(info.value))
    assert len(messages) == 1


def test_remedies_each_reach_95_percent():
    # Explicit small bag_size: the bag_size remedy is possible here (at most
    # n // n_bags_min); each remedy, applied alone, gives >= 95% best case.
    n, d, k = 49_000, 6, 300
    base = dict(epsilon=8.0, delta=1e-6, y_bound=(0.0, 100.0))
    plan = plan_aggregation(n, d, bag_size=k, check_pass_probability=False, **base)
    assert ptr_pass_probability(plan) < 0.05
    with pytest.raises(InsufficientDataError) as info:
        plan_aggregation(n, d, bag_size=k, **base)
    message = str(info.value)
    k_need = int(message.split("bag_size >= ")[1].split(" ")[0])
    assert k_need <= n // 28
    assert ptr_pass_probability(plan_aggregation(n, d, bag_size=k_need, **base)) >= 0.95
    short = plan_aggregation(n, d, bag_size=k_need - 1, check_pass_probability=False, **base)
    assert ptr_pass_probability(short) < 0.95
    eps_need = float(message.split("epsilon >= ")[1].split(" ")[0])
    at_eps = plan_aggregation(n, d, bag_size=k, **{**base, "epsilon": eps_need})
    assert ptr_pass_probability(at_eps) >= 0.95
    n_need = int(message.split("n_samples >= ")[1].split(" ")[0])
    auto = plan_aggregation(n_need, d, **base)  # bag_size='auto': n // 28
    assert ptr_pass_probability(auto) >= 0.95


def test_setting_that_can_pass_still_fits(fixed_noise):
    # Labels +-1 (residual sd 1) and a private label range: the test passes
    # (with probability 1 - 6e-6 on fresh draws; seeded here by random_state=0).
    rng = np.random.default_rng(3)
    n = 60_000
    X = rng.normal(size=(n, 1))
    y = 0.2 * X[:, 0] + rng.choice([-1.0, 1.0], size=n)
    acc = BudgetAccountant(epsilon=8.0, delta=1e-6)
    est = WeightedLBARegressor(epsilon=8.0, accountant=acc, random_state=0).fit(X, y)
    names = [event.name for event in est.privacy_spent_.events]
    assert names == ["y_bound", "lba_ptr_check", "lba_aggregate"]
    assert acc.total()[0] == pytest.approx(8.0)
    assert est.privacy_report_["ptr_passed"] is True


def _worst_case_bag(k, low, high):
    """A bag with RSS = k Delta^2 / 4: labels alternate low/high, x orthogonal to both."""
    assert k % 4 == 0
    x = np.tile([1.0, 1.0, -1.0, -1.0], k // 4)
    y = np.tile([low, high], k // 2)
    Z = np.column_stack([x, np.ones(k)])
    return Z, y, np.arange(k)[None, :]


def test_pass_probability_matches_monte_carlo_of_the_test():
    k, epsilon = 512, 8.0
    plan = plan_aggregation(k, 1, epsilon=epsilon, y_bound=(0.0, 1.0), bag_size=k,
                            n_bags_min=1, check_pass_probability=False)
    Z, y, bags = _worst_case_bag(k, 0.0, 1.0)
    norm = float(bag_residual_norms(Z, y, bags, label_bound=1.0)[0])
    assert norm == pytest.approx(math.sqrt(k) / 2, rel=1e-9)  # the bound is attained
    rng = np.random.default_rng(12)
    draws = 8000
    for scale in (1.0, 0.97, 1.03):
        predicted = lba_ptr_pass_probability(
            scale * norm / plan.label_range - 1.0 / plan.c, plan.epsilon_ptr, plan.delta_ptr
        )
        if scale == 1.0:
            # The norm is the bound minus a 1e-12 rounding allowance.
            assert predicted == pytest.approx(ptr_pass_probability(plan), rel=1e-6)
        assert 0.05 < predicted < 0.95  # a point where the test is informative
        passes = sum(_ptr_decision(scale * norm, plan, rng) for _ in range(draws))
        # Binomial: |freq - p| <= 5 sd, sd = sqrt(p (1 - p) / draws) <= 0.0056;
        # a false alarm has probability < 1e-6 per point.
        tolerance = 5.0 * math.sqrt(predicted * (1.0 - predicted) / draws)
        assert abs(passes / draws - predicted) <= tolerance


def test_planner_prints_pass_probability_and_residual_sd(capsys):
    plan = lba_plan(n_samples=49_000, n_features=6, epsilon=8.0, y_bound=(0.0, 100.0),
                    expected_residual_var=81.0)
    assert plan.best_pass_probability > 0.99
    assert plan.predicted_pass_probability < 1e-6
    assert plan.residual_sd_for_target == pytest.approx(28.93, abs=0.01)
    assert plan.refusal is not None
    text = str(plan)
    assert "residual sd for 95%" in text and "REFUSED" in text
    assert plan_command(["--n", "49000", "--d", "6", "--epsilon", "2",
                         "--y-bound", "0", "100"]) == 2
    out = capsys.readouterr().out
    assert "at most 3.4e-06" in out and "REFUSED" in out
    ok = lba_plan(n_samples=1_000_000, n_features=5, epsilon=4.0, y_bound=12.0)
    assert ok.refusal is None and ok.best_pass_probability > 0.95
    assert "guarantee            epsilon=4" in str(ok)


def test_private_range_plan_is_in_units_of_the_range():
    plan = lba_plan(n_samples=100_000, n_features=3, epsilon=4.0)
    assert plan.y_bound is None and plan.epsilon_y_bound == pytest.approx(0.4)
    assert plan.epsilon == pytest.approx(4.0)
    assert "* Delta" in str(plan)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        assert plan.best_pass_probability == pytest.approx(1.0)


def test_failed_test_message_never_suggests_an_impossible_bag_size():
    # bag_size='auto' is already the largest allowed (n // n_bags_min): the
    # message after a failed test must not ask for a larger one.
    rng = np.random.default_rng(46)
    X = rng.normal(size=(2000, 1))
    y = 0.5 + 0.05 * X[:, 0]  # RSS_j = 0: the test fails
    est = WeightedLBARegressor(epsilon=8.0, y_bound=(0.0, 1.0), n_bags_min=2)
    with pytest.raises(PrivateTestFailed) as info:
        est.fit(X, y)
    assert "bag_size" not in str(info.value)
    small = WeightedLBARegressor(epsilon=8.0, y_bound=(0.0, 1.0), n_bags_min=2, bag_size=800)
    with pytest.raises(PrivateTestFailed) as info:
        small.fit(X, y)
    assert "bag_size (now 800, at most 1000 here)" in str(info.value)
