import copy
import math
import pickle
import threading

import numpy as np
import pytest
from sklearn.base import clone

from skprivreg import BudgetAccountant, BudgetExceededError, PrivacyEvent, PrivacyLedger
from skprivreg.accounting import gdp_delta, gdp_epsilon, gdp_mu
from skprivreg.linear_model import AdaSSPRegressor


def test_gdp_reference_values():
    assert gdp_mu(1.0, 1e-5) == pytest.approx(0.268051, abs=5e-7)
    assert gdp_mu(5.0, 1 / 5008**2) == pytest.approx(0.914623, abs=5e-7)


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 4.0, 16.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3, 0.1])
def test_gdp_conversions_are_tight_and_valid(epsilon, delta):
    mu = gdp_mu(epsilon, delta)
    # valid: mu-GDP implies (epsilon, delta)
    assert gdp_delta(mu, epsilon) <= delta
    # tight: a slightly larger mu violates it
    assert gdp_delta(mu * (1 + 1e-9), epsilon) > delta * (1 - 1e-6)
    eps_back = gdp_epsilon(mu, delta)
    assert gdp_delta(mu, eps_back) <= delta
    assert eps_back == pytest.approx(epsilon, rel=1e-8)


def test_gdp_delta_matches_direct_formula():
    from scipy.stats import norm

    mu, eps = 0.7, 1.3
    direct = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert gdp_delta(mu, eps) == pytest.approx(direct, rel=1e-12)


def _gauss(name, mu, delta):
    return PrivacyEvent(name, gdp_epsilon(mu, delta), delta, sensitivity=1.0, sigma=1 / mu, mu=mu)


def test_ledger_basic_and_gdp_composition():
    events = [_gauss("a", 0.3, 1e-6), _gauss("b", 0.4, 1e-6)]
    basic = PrivacyLedger(events, "basic")
    assert basic.epsilon == pytest.approx(sum(e.epsilon for e in events))
    assert basic.delta == pytest.approx(2e-6)
    gdp = PrivacyLedger(events, "gdp")
    assert gdp.mu == pytest.approx(0.5)
    assert gdp.epsilon == pytest.approx(gdp_epsilon(0.5, 2e-6))
    assert gdp.epsilon < basic.epsilon


def test_ledger_gdp_adds_non_gaussian_events_basically():
    laplace = PrivacyEvent("bound", 0.1, 0.0)
    gauss = _gauss("g", 0.5, 1e-5)
    ledger = PrivacyLedger([laplace, gauss], "gdp", delta=1e-5)
    assert ledger.epsilon == pytest.approx(0.1 + gdp_epsilon(0.5, 1e-5))
    assert "total" in repr(ledger)


def test_ledger_gdp_leaves_the_gaussian_part_the_delta_others_do_not_spend():
    """A PTR-like event with delta 4e-6 next to Gaussian events: their mu converts
    at the delta that remains (1e-5 - 4e-6), not at the ledger's whole delta."""
    ptr = PrivacyEvent("ptr", 0.2, 4e-6)
    gauss = _gauss("g", 0.5, 6e-6)
    ledger = PrivacyLedger([ptr, gauss], "gdp", delta=1e-5)
    assert ledger.delta == pytest.approx(1e-5)
    assert ledger.epsilon == pytest.approx(0.2 + gdp_epsilon(0.5, 6e-6), rel=1e-12)
    assert ledger.epsilon > 0.2 + gdp_epsilon(0.5, 1e-5) * (1 + 1e-6)


def test_event_validation():
    with pytest.raises(ValueError):
        PrivacyEvent("x", 1.0, 0.0, notion="everything")
    with pytest.raises(ValueError):
        PrivacyEvent("x", -1.0, 0.0)


def test_accountant_checks_before_spending():
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5)
    half = PrivacyLedger([PrivacyEvent("a", 0.5, 4e-6)])
    acc.spend(half)
    acc.spend(half)
    assert acc.total() == pytest.approx((1.0, 8e-6))
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        acc.spend(PrivacyLedger([PrivacyEvent("b", 0.01, 0.0)]))
    assert acc.n_spends == 2
    assert acc.remaining() == pytest.approx((0.0, 2e-6))


def test_accountant_gdp_composition_across_fits():
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5, composition="gdp")
    mu = gdp_mu(1.0, 1e-5)
    one = PrivacyLedger([_gauss("g", mu / math.sqrt(4), 2.5e-6)], "gdp")
    for _ in range(4):
        acc.spend(one)
    eps, delta = acc.total()
    assert eps == pytest.approx(1.0, rel=1e-6)
    assert delta == pytest.approx(1e-5)
    with pytest.raises(BudgetExceededError):
        acc.spend(one)


def test_accountant_is_a_handle_under_copy_and_clone():
    acc = BudgetAccountant(epsilon=5.0)
    assert copy.deepcopy(acc) is acc
    assert copy.copy(acc) is acc
    est = AdaSSPRegressor(accountant=acc)
    assert clone(est).accountant is acc


def test_accountant_refuses_pickling_with_the_fix_in_the_message():
    with pytest.raises(TypeError, match="n_jobs=1"):
        pickle.dumps(BudgetAccountant())


def test_accountant_is_thread_safe():
    acc = BudgetAccountant(epsilon=1000.0)
    ledger = PrivacyLedger([PrivacyEvent("a", 0.1, 0.0)])

    def spend_many():
        for _ in range(200):
            acc.spend(ledger)

    threads = [threading.Thread(target=spend_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert acc.n_spends == 800
    assert acc.total()[0] == pytest.approx(80.0)


def test_accountant_rejects_bad_budgets():
    with pytest.raises(ValueError):
        BudgetAccountant(epsilon=0)
    with pytest.raises(ValueError):
        BudgetAccountant(delta=0)
    with pytest.raises(ValueError):
        BudgetAccountant(composition="advanced")


def test_ledger_concatenate_adds_deltas():
    a = PrivacyLedger([PrivacyEvent("a", 0.5, 1e-6)])
    b = PrivacyLedger([PrivacyEvent("b", 0.25, 2e-6)])
    both = PrivacyLedger.concatenate([a, b])
    assert both.epsilon == pytest.approx(0.75)
    assert both.delta == pytest.approx(3e-6)
    assert len(both) == 2
    assert np.isfinite(both.epsilon)
