"""Budget shares never sum above the budget, and a ledger reports at most what was declared.

A share of epsilon, delta or a GDP mu computed in floating point rounds to
nearest, so the shares of a split could sum (in exact arithmetic) an ulp or
two above the budget, and a GDP conversion that stepped by 1e-13 reported
``4.0000000000004`` for ``epsilon=4``. The shares are now each rounded down
from their exact values and the conversions land on adjacent floats: every
estimator's ``privacy_spent_`` is at most its declared ``(epsilon, delta)``.
"""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from _privacy_harness import (
    issp_pass_data,
    multi_output_data,
    regression_data,
    sparse_support_data,
)
from sklearn.base import clone

from skprivreg import (
    AdaSSPRegressor,
    BoostedAdaSSPRegressor,
    GaussianLabelNoiseRegressor,
    IndependentSSPRegressor,
    ISSPRegressor,
    LinearRegression,
    PrivateGridSearchCV,
    PrivateLassoRegressor,
    PrivateStandardScaler,
    PrivateTopSSelector,
    ReuseCovRegressor,
    RROnBinsRegressor,
    SSPRegressor,
)
from skprivreg.accounting import PrivacyEvent, PrivacyLedger, gdp_epsilon, gdp_mu
from skprivreg.label_dp import lba_plan
from skprivreg.mechanisms import (
    difference_at_most,
    gdp_split,
    hypot_at_least,
    product_at_most,
    shares_at_most,
    sqrt_at_most,
    value_at_least,
    value_at_most,
)


# ---------------------------------------------------------------------------
# The helpers: largest float at most the exact value
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("fraction, total", [(0.05, 9.9), (0.4, 5.7), (0.1, 0.3), (0.3, 4.0)])
def test_product_at_most_is_the_largest_float_below_the_exact_product(fraction, total):
    # 0.05 * 9.9 and 0.4 * 5.7 round up to nearest.
    exact = Fraction(fraction) * Fraction(total)
    share = product_at_most(fraction, total)
    assert Fraction(share) <= exact < Fraction(math.nextafter(share, math.inf))


@pytest.mark.parametrize("total, spent", [(1.0, 0.1), (1.1, 0.055), (4.0, 0.2), (5.7, 0.57)])
def test_difference_at_most_is_the_largest_float_below_the_exact_difference(total, spent):
    # 1.0 - 0.1 and 1.1 - 0.055 round up to nearest.
    exact = Fraction(total) - Fraction(spent)
    left = difference_at_most(total, spent)
    assert Fraction(left) <= exact < Fraction(math.nextafter(left, math.inf))
    assert difference_at_most(total, spent, spent) == value_at_most(exact - Fraction(spent))
    assert difference_at_most(math.inf, 1.0) == math.inf


def test_shares_at_most_sum_to_at_most_the_total():
    rng = np.random.default_rng(5)
    for _ in range(300):
        total = float(rng.uniform(0.01, 20.0))
        weights = list(rng.uniform(0.05, 1.0, size=int(rng.integers(2, 6))))
        shares = shares_at_most(total, weights)
        whole = sum(Fraction(w) for w in weights)
        for share, w in zip(shares, weights):
            exact = Fraction(total) * Fraction(w) / whole
            assert Fraction(share) <= exact < Fraction(math.nextafter(share, math.inf))
        assert sum(Fraction(s) for s in shares) <= Fraction(total)
    assert shares_at_most(math.inf, [1, 2]) == [math.inf, math.inf]
    with pytest.raises(ValueError):
        shares_at_most(1.0, [0, 0])


def test_sqrt_at_most_is_the_largest_float_below_the_root():
    for value in (2, 3, Fraction(1, 3), 0.7, 1e-300, 4, 0):
        root = sqrt_at_most(value)
        assert Fraction(root) ** 2 <= Fraction(value)
        assert Fraction(math.nextafter(root, math.inf)) ** 2 > Fraction(value)


def test_gdp_split_composes_to_at_most_mu():
    # mu / sqrt(3) three times composed (rounded up) above mu for these mu.
    for mu in (0.5, 0.2680511232112867, 0.9290997718791982, 1.5413031471764993):
        for weights in ([1, 1, 1], [1, 1], [0.2, 0.8], [1, 2, 3, 4, 5], [0.1, 0.35, 0.55]):
            shares = gdp_split(mu, weights)
            assert sum(Fraction(m) ** 2 for m in shares) <= Fraction(mu) ** 2
            assert hypot_at_least(*shares) <= mu
            assert all(m > mu * math.sqrt(w / sum(weights)) * (1 - 4e-16)
                       for m, w in zip(shares, weights))


# ---------------------------------------------------------------------------
# GDP conversions: the planner's mu converts back to at most epsilon
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon, delta", [(4.0, 1.1e-5), (0.3, 3e-6), (5.0, 1 / 5008**2),
                                            (0.7, 7e-7), (9.9, 1.1e-5), (1.0, 1e-5)])
def test_gdp_mu_converts_back_to_at_most_epsilon(epsilon, delta):
    mu = gdp_mu(epsilon, delta)
    back = gdp_epsilon(mu, delta)
    assert back <= epsilon
    # and not far below: the planner gives away no more than a few ulps of mu.
    assert back >= epsilon * (1 - 1e-13)


def test_gaussian_ledger_converts_at_the_delta_left_rounded_down(monkeypatch):
    # 1.1e-5 - 5.5e-7 and 1.1 - 0.055 round up to nearest: the Gaussian events
    # must be converted at a delta at most the exact remainder.
    import skprivreg.accounting as accounting

    seen = []

    def spy(mu, delta):
        seen.append(delta)
        return gdp_epsilon(mu, delta)

    monkeypatch.setattr(accounting, "gdp_epsilon", spy)
    for delta, other in ((1.1e-5, 5.5e-7), (1.1e-6, 5.5e-8), (1.0, 0.1)):
        if not Fraction(delta - other) > Fraction(delta) - Fraction(other):
            continue  # rounded down already: nothing to see
        seen.clear()
        ledger = PrivacyLedger(
            [PrivacyEvent("pure", 0.1, other),
             PrivacyEvent("g", 1.0, 0.0, sensitivity=0.7, sigma=1.0, mu=0.7)],
            composition="gdp", delta=delta)
        assert ledger.epsilon >= 0.1
        assert seen and Fraction(seen[-1]) <= Fraction(delta) - Fraction(other)
        assert seen[-1] == difference_at_most(delta, other)


# ---------------------------------------------------------------------------
# Every estimator: privacy_spent_ <= the declared (epsilon, delta)
# ---------------------------------------------------------------------------
def _reg_big():
    return regression_data(n=40_000)


_DATA = {"reg": regression_data, "big": _reg_big, "multi": multi_output_data,
         "sparse": sparse_support_data, "issp": issp_pass_data}
_CACHE = {}

# name -> (factory, data, (epsilon, delta) pairs at which a share or a
# conversion rounded above the budget before; delta ignored without one)
A, B, C, D = 1e-6, 3e-6, 7e-7, 1.1e-5
CASES = {
    "ssp": (lambda: SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0), "reg",
            ((8.0, C),)),
    "ssp-bounds": (lambda: SSPRegressor(epsilon=1.0, delta=1e-6), "big",
                   ((1.87, B), (2.03, B))),
    "adassp": (lambda: AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0),
               "reg", ((0.3, B), (2.9, B), (4.0, D), (5.7, A))),
    "adassp-basic": (lambda: AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0,
                                             composition="basic"), "reg",
                     ((0.3, B), (4.0, D), (5.7, A), (9.9, D))),
    "boosted-adassp": (lambda: BoostedAdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0,
                                                      y_bound=8.0), "reg",
                       ((5.7, A), (9.9, D), (4.02, B), (8.98, B))),
    "boosted-adassp-bounds": (lambda: BoostedAdaSSPRegressor(epsilon=1.0, delta=1e-6), "big",
                              ((3.0, D),)),
    "independent-ssp-bounds": (lambda: IndependentSSPRegressor(epsilon=1.0, delta=1e-6),
                               "multi", ((3.0, D),)),
    "linear": (lambda: LinearRegression(epsilon=1.0, x_range=(-1.0, 1.0), y_bound=(-8.0, 8.0)),
               "reg", ((0.3, B), (4.0, D), (5.7, A))),
    "linear-bounds": (lambda: LinearRegression(epsilon=1.0), "big",
                      ((0.7, B), (5.61, C), (9.53, D))),
    "independent-ssp": (lambda: IndependentSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0,
                                                        y_bound=8.0), "multi",
                        ((0.3, B), (4.0, D))),
    "reusecov-bounds": (lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6), "multi",
                        ((5.61, C), (9.53, D))),
    "issp": (lambda: ISSPRegressor(epsilon=4.0, delta=1e-6), "issp",
             ((3.3, C), (7.7, B), (9.9, D))),
    "label-noise-bounds": (lambda: GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-6), "reg",
                           ((0.7, B), (1.1, C), (4.0, C))),
    "rr-on-bins": (lambda: RROnBinsRegressor(epsilon=4.0, y_bound=(-8.0, 8.0)), "reg",
                   ((7.7, A), (9.9, A))),
    "lasso-regressor": (lambda: PrivateLassoRegressor(epsilon=2.0, max_features=3,
                                                      selection_rule="lars",
                                                      sampling="partition"), "sparse",
                        ((0.7, C), (2.9, B), (3.63, B), (9.51, C))),
    "top-s-bounds": (lambda: PrivateTopSSelector(epsilon=1.0, n_features_to_select=2), "sparse",
                     ((0.3, A), (0.7, A), (1.1, A), (4.0, A))),
    "scaler-bounds": (lambda: PrivateStandardScaler(epsilon=1.0, delta=1e-6), "big",
                      ((0.7, B), (1.1, C), (4.0, C))),
    "grid-search": (lambda: PrivateGridSearchCV(
        estimator=AdaSSPRegressor(x_bound=2.0, y_bound=8.0), param_grid={"x_bound": [0.5, 2.0]},
        epsilon=4.0, delta=1e-6, refit_budget=0.1, n_repetitions=2), "reg", ((0.7, A), (4.0, D))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_privacy_spent_is_at_most_the_declared_budget(name):
    factory, kind, budgets = CASES[name]
    if kind not in _CACHE:
        _CACHE[kind] = _DATA[kind]()
    X, y = _CACHE[kind]
    template = factory()
    has_delta = template.get_params().get("delta") not in (None, 0, 0.0)
    for epsilon, delta in budgets:
        params = {"epsilon": epsilon, **({"delta": delta} if has_delta else {})}
        est = clone(template).set_params(**params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        spent = est.privacy_spent_
        assert spent.epsilon <= epsilon, (epsilon, spent.epsilon)
        if has_delta:
            assert spent.delta <= delta, (delta, spent.delta)


@pytest.mark.parametrize("y_bound", [None, (0.0, 1.0)])
def test_weighted_lba_plan_shares_sum_to_at_most_epsilon(y_bound):
    # The label range's share, the residual test's and the aggregation's: at
    # epsilon 0.7, 0.9, 1.1, 2.3 and 4.0 their exact sum exceeded epsilon.
    for epsilon in (0.7, 0.9, 1.1, 2.3, 4.0):
        plan = lba_plan(n_samples=1_000_000, n_features=3, epsilon=epsilon, delta=1e-6,
                        assumption="ptr", y_bound=y_bound)
        shares = (plan.epsilon_y_bound, plan.epsilon_test, plan.epsilon_aggregation)
        assert sum(Fraction(s) for s in shares) <= Fraction(epsilon), (epsilon, shares)
        assert Fraction(plan.delta_test) + Fraction(plan.delta_aggregation) <= Fraction(1e-6)


# ---------------------------------------------------------------------------
# Planned splits, checked exactly at budgets where rounding to nearest went over
# ---------------------------------------------------------------------------
def _exact_sum(values):
    return sum(Fraction(v) for v in values)


@pytest.mark.parametrize("epsilon, delta, f", [(0.11, 3e-6, 0.3), (0.11, 3e-6, 0.35),
                                               (0.13, 1.1e-5, 0.2), (0.13, 1.1e-5, 0.7)])
def test_reusecov_and_independent_ssp_splits(epsilon, delta, f):
    from skprivreg.linear_model._reusecov_plan import _split_events

    cov, assoc = _split_events("paper", epsilon, delta, f, 1.0, 1.0, "full", "replace-one")
    assert _exact_sum([cov.epsilon, assoc.epsilon]) <= Fraction(epsilon)
    assert _exact_sum([cov.delta, assoc.delta]) <= Fraction(delta)
    cov, assoc = _split_events("gdp", epsilon, delta, f, 1.0, 1.0, "full", "replace-one")
    assert hypot_at_least(cov.mu, assoc.mu) <= gdp_mu(epsilon, delta)
    est = IndependentSSPRegressor(epsilon=epsilon, delta=delta, cov_budget=f,
                                  composition="basic", x_bound=1.0, y_bound=1.0)
    events, sigma_cov, sigma_assoc, _ = est._events(1000, 3, 1.0, 1.0, epsilon, delta, True)
    assert _exact_sum(e.epsilon for e in events) <= Fraction(epsilon)
    assert _exact_sum(e.delta for e in events) <= Fraction(delta)


@pytest.mark.parametrize("epsilon", [0.11, 0.13, 0.22])
def test_bound_shares_search_and_lasso_splits(epsilon):
    from skprivreg.label_dp._aggregate import resolve_y_bound
    from skprivreg.linear_model._private_bounds import bound_epsilons

    for budget in (0.05, 0.1):
        for k in (1, 2, 3):
            shares = bound_epsilons(["a", "b", "c"][:k], private=True, bounds="private",
                                    bounds_budget=budget, epsilon=epsilon)
            assert _exact_sum(shares.values()) <= Fraction(budget) * Fraction(epsilon)
    for refit in (0.1, 0.2):
        search = PrivateGridSearchCV(estimator=AdaSSPRegressor(), param_grid={"x_bound": [1.0]},
                                     epsilon=epsilon, delta=1e-6, refit_budget=refit)
        selection, _, refit_eps, _ = search._budgets()
        assert _exact_sum([selection, refit_eps]) <= Fraction(epsilon)
    for fraction in (0.25, 0.5, 0.7):
        lasso = PrivateLassoRegressor(epsilon=epsilon, delta=1.1e-5, selection_fraction=fraction)
        planned = lasso._plan(10**6, 8, True)[-1]
        assert _exact_sum(e.epsilon for e in planned.events) <= Fraction(epsilon)
    seen = []
    resolve_y_bound(None, 10**7, y_bound=None, bounds="private", bounds_budget=0.1,
                    epsilon=epsilon, private=True, plan=lambda _, eps: seen.append(eps))
    assert seen and Fraction(seen[0]) <= Fraction(0.1) * Fraction(epsilon)
    plan = lba_plan(n_samples=10**7, n_features=3, epsilon=epsilon, delta=1e-6,
                    assumption="ptr", bounds_budget=0.1)
    assert Fraction(plan.epsilon_y_bound) <= Fraction(0.1) * Fraction(epsilon)


@pytest.mark.parametrize("epsilon", [0.55, 0.57, 0.61, 0.73])
def test_lasso_support_test_gets_what_the_bounds_leave(epsilon):
    from skprivreg import PrivateLassoSupportSelector

    selector = PrivateLassoSupportSelector(epsilon=epsilon, delta=1e-6, method="perturbation",
                                           max_features=3)
    ledger = selector._ledger(True, "test", {"x_range": 0.05 * epsilon})
    assert _exact_sum(e.epsilon for e in ledger.events) <= Fraction(epsilon)


@pytest.mark.parametrize("epsilon", [0.19, 0.29, 0.37, 0.61])
def test_adassp_published_constants_split_in_thirds(epsilon):
    est = AdaSSPRegressor(epsilon=epsilon, delta=1e-6, constants="paper", x_bound=1.0,
                          y_bound=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ledger = est._plan_ledger(True, 1)
    assert _exact_sum(e.epsilon for e in ledger.events) <= Fraction(epsilon)
    assert _exact_sum(e.delta for e in ledger.events) <= Fraction(1e-6)


def test_a_gdp_ledger_reports_at_most_the_planned_epsilon_of_its_gaussian_part():
    # gdp_epsilon is not monotone in mu in its last ulps: 12 ulps below
    # gdp_mu(0.9, 1e-5) it gives 0.9000000000000006. A ledger told the planned
    # epsilon checks that mu-GDP implies it and reports at most it.
    epsilon, delta = 0.9, 1e-5
    mu = gdp_mu(epsilon, delta)
    lower = mu
    for _ in range(12):
        lower = math.nextafter(lower, 0.0)
    assert gdp_epsilon(lower, delta) > epsilon  # the case is real

    def ledger(mu_, hint):
        event = PrivacyEvent("g", 1.0, 0.0, sensitivity=mu_, sigma=1.0, mu=mu_)
        return PrivacyLedger([event], composition="gdp", delta=delta, gaussian_epsilon=hint)

    assert ledger(lower, None).epsilon > epsilon
    assert ledger(lower, epsilon).epsilon == epsilon
    # A hint the composed mu does not support is ignored.
    above = gdp_mu(0.5, delta) * 1.001
    assert ledger(above, 0.5).epsilon == gdp_epsilon(above, delta) > 0.5
    # The hint survives a concatenation with pure events and the budget store.
    from skprivreg._budget_store import _ledger_from_json, _ledger_to_json

    combined = PrivacyLedger.concatenate(
        [PrivacyLedger([PrivacyEvent("pure", 0.1, 0.0)]), ledger(lower, epsilon)],
        composition="gdp")
    assert combined.epsilon == value_at_least(Fraction(0.1) + Fraction(epsilon))
    assert _ledger_from_json(_ledger_to_json(ledger(lower, epsilon))).epsilon == epsilon


def test_range_bound_shares_are_rounded_down():
    # 0.1 * 3.0 / 2 rounded to nearest gave 0.15000000000000002 for each bound.
    from skprivreg.bounds import range_bound_epsilons

    for epsilon in (3.0, 0.7, 1.1):
        shares = range_bound_epsilons(["x_range", "y_bound"], epsilon=epsilon,
                                      bounds="private", bounds_budget=0.1, private=True)
        assert _exact_sum(shares.values()) <= Fraction(0.1) * Fraction(epsilon)


@pytest.mark.parametrize("delta", [1e-5, 3e-6, 1.1e-5])
def test_issp_ptr_is_calibrated_at_the_delta_its_event_records(delta):
    # delta1 / 3 rounded to nearest is 3.3333333333333337e-06 at delta1 = 1e-5,
    # above the recorded share 3.3333333333333333e-06.
    from skprivreg.linear_model._issp_plan import issp_k, issp_plan

    plan = issp_plan(n_samples=500_000, n_features=1, epsilon=4.0, delta=delta,
                     residual_bound=3.0)
    event = {e.name: e for e in plan.ledger().events}["issp_ptr"]
    k, cal = issp_k(event.epsilon, event.delta, plan.ptr_fail_prob)
    assert (k, cal.scale, cal.tau) == (plan.k, plan.ptr_scale, plan.ptr_tau)


@pytest.mark.parametrize("epsilon", [0.296, 0.19, 0.37])
def test_adassp_published_noise_is_calibrated_at_the_recorded_shares(epsilon):
    est = AdaSSPRegressor(epsilon=epsilon, delta=1e-5, constants="paper", x_bound=1.0,
                          y_bound=1.0, fit_intercept=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ledger = est._plan_ledger(True, 1)
    first = ledger.events[0]
    multiplier = math.sqrt(math.log(2.0 / first.delta)) / first.epsilon
    assert first.sigma == multiplier * 1.0  # lambda_min's B^2 = 1


def test_spending_what_an_accountant_says_remains_stays_within_its_budget():
    # 1.0 - 0.1 rounds up to 0.9: spending it brought the total to 1.0000000000000002.
    from skprivreg import BudgetAccountant

    acc = BudgetAccountant(epsilon=1.0, delta=1e-5)
    acc.spend(PrivacyLedger([PrivacyEvent("first", 0.1, 1e-6)]))
    eps_left, delta_left = acc.remaining()
    assert Fraction(eps_left) <= Fraction(1.0) - Fraction(0.1)
    acc.spend(PrivacyLedger([PrivacyEvent("rest", eps_left, delta_left)]))
    assert acc.total().epsilon <= 1.0 and acc.total().delta <= 1e-5


def test_basic_composition_of_gaussian_events_needs_their_exact_delta_sum():
    # 8.459776330097977e-06 + 7.603748589108994e-06 rounds to nearest below the
    # exact sum: at that delta basic composition of the two does not hold, so a
    # GDP ledger must not report their (here tiny) basic sum.
    d1, d2 = 8.459776330097977e-06, 7.603748589108994e-06
    assert Fraction(d1) + Fraction(d2) > Fraction(d1 + d2)  # the case is real
    events = [PrivacyEvent("g1", 0.01, d1, sensitivity=0.5, sigma=1.0, mu=0.5),
              PrivacyEvent("g2", 0.01, d2, sensitivity=0.5, sigma=1.0, mu=0.5)]
    ledger = PrivacyLedger(events, composition="gdp", delta=d1 + d2)
    assert ledger.epsilon == gdp_epsilon(hypot_at_least(0.5, 0.5), d1 + d2) > 0.02
