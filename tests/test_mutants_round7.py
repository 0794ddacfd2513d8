"""Round 7 of the mutation tests: each test kills a mutant that survived every other test.

The mutant is named in each test. Exact checks where the estimator passes a
budget, a threshold or a partition to a mechanism (spies that call the real
functions); one binomial check with a band of P_FALSE (see the harness).
"""

import math

import numpy as np
import pytest
from scipy.special import erfcinv

from skprivreg import BudgetAccountant
from skprivreg._gdp import gdp_epsilon
from skprivreg.accounting import PrivacyLedger, subsample_budget, subsampled_guarantee
from skprivreg.linear_model import (
    BoostedAdaSSPRegressor,
    IndependentSSPRegressor,
    ReuseCovRegressor,
    TukeyEMRegressor,
    _independent_ssp,
    _tukey_em,
)
from skprivreg.linear_model._tukey_em import partition_models, tukey_budget
from skprivreg.mechanisms import (
    cross_sensitivity,
    gaussian_event,
    gaussian_sigma,
    gram_upper_sensitivity,
    restricted_tukey_sample,
)

from ._privacy_harness import P_FALSE


def _line(n, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X.sum(axis=1) + 0.5 + 0.3 * rng.normal(size=n)


# -- TukeyEM: what the estimator hands to its mechanisms ---------------------------------
def test_tukey_em_passes_its_recorded_budget_and_threshold_to_each_mechanism(monkeypatch):
    # Kills m68 (sampling at epsilon, not epsilon_em), m82 (PTR test at delta, not
    # delta / 2) and m94 (sampling at threshold t - 1 with the margin computed at t).
    seen = {}
    real_margin, real_sample = _tukey_em.tukey_safety_margin, _tukey_em.restricted_tukey_sample

    def margin(log_volumes, t, epsilon_em, eta):
        seen["margin"] = (t, epsilon_em, eta)
        return real_margin(log_volumes, t, epsilon_em, eta)

    def ptr(k_hat, epsilon_ptr, delta_ptr, rng):
        seen["ptr"] = (epsilon_ptr, delta_ptr)
        return True  # the sampler is reached whatever the draw

    def sample(sorted_models, t, epsilon_em, rng):
        seen["sample"] = (t, epsilon_em, sorted_models.shape[1])
        return real_sample(sorted_models, t, epsilon_em, rng)

    monkeypatch.setattr(_tukey_em, "tukey_safety_margin", margin)
    monkeypatch.setattr(_tukey_em, "tukey_ptr_test", ptr)
    monkeypatch.setattr(_tukey_em, "restricted_tukey_sample", sample)
    X, y = _line(4_000)
    TukeyEMRegressor(epsilon=1.0, delta=1e-4, n_models=40).fit(X, y)
    eps_ptr, delta_ptr, eps_em, eta = tukey_budget(1.0, 1e-4)
    t = (40 // 2) // 2
    assert seen["ptr"] == (eps_ptr, delta_ptr)
    assert seen["margin"] == (t, eps_em, eta)
    assert seen["sample"] == (t, eps_em, 40)


def test_tukey_partition_groups_are_disjoint_and_equal(monkeypatch):
    # Kills m101 (groups drawn with replacement: one row in several models, so a
    # neighbour moves several and the depth's sensitivity is no longer 1).
    groups = []
    real = np.linalg.lstsq

    def spy(A, b, rcond=None):
        groups.append(A[:, 0].astype(int).tolist())
        return real(A, b, rcond=rcond)

    monkeypatch.setattr(np.linalg, "lstsq", spy)
    n, m = 1_003, 10
    A = np.column_stack([np.arange(n, dtype=float), np.ones(n)])  # row i marked i
    partition_models(A, np.zeros(n), m, np.random.default_rng(0))
    rows = [r for g in groups for r in g]
    assert len(groups) == m and all(len(g) == n // m for g in groups)
    assert len(set(rows)) == len(rows) == m * (n // m)


def test_restricted_tukey_sample_is_uniform_within_its_depth_level():
    # Kills m110 (coordinates before the first exact-depth one drawn at depth >= j
    # instead of >= j + 1: the draw is not uniform on {T = j}). For p = 2 and a level
    # j, the share of {T = j} whose first coordinate has depth >= j + 1 is
    # w_{j+1,0} (w_{j,1} - w_{j+1,1}) / (w_{j,0} w_{j,1} - w_{j+1,0} w_{j+1,1}), with
    # w_{j,k} the width of coordinate k's interval at depth >= j. Unmodified 0.0983,
    # mutant 0.0143; the band is a P_FALSE binomial interval.
    s = np.sort(np.random.default_rng(3).normal(size=(2, 8)), axis=1)
    m, j = 8, 2

    def w(k, level):
        return max(s[k, m - level] - s[k, level - 1], 0.0)

    p = w(0, j + 1) * (w(1, j) - w(1, j + 1)) / (w(0, j) * w(1, j) - w(0, j + 1) * w(1, j + 1))
    rng = np.random.default_rng(4)
    hits = draws = 0
    for _ in range(20_000):
        point, depth = restricted_tukey_sample(s, j, 0.5, rng)
        if depth != j:
            continue
        draws += 1
        below = int(np.sum(s[0] <= point[0]))
        hits += min(below, m - below) >= j + 1
    z = math.sqrt(2.0) * erfcinv(P_FALSE)  # two-sided: |Z| > z with probability P_FALSE
    assert draws > 5_000
    assert abs(hits / draws - p) <= z * math.sqrt(p * (1 - p) / draws)


# -- IndependentSSP -----------------------------------------------------------------------
def _outputs(n=2_000, n_outputs=4, d=2):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (n, d))
    return X, np.clip(X @ rng.normal(size=(d, n_outputs)), -1.0, 1.0)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_independent_ssp_keeps_the_corner_exact_only_for_an_intercept(monkeypatch,
                                                                      fit_intercept):
    # Kills m95 (exact_corner=True without an intercept: sum x_{i,d}^2 / n released
    # without noise in every run).
    seen = []
    real = _independent_ssp.gram_with_exact_corner

    def spy(gram, sigma, rng, *, exact_corner):
        seen.append(exact_corner)
        return real(gram, sigma, rng, exact_corner=exact_corner)

    monkeypatch.setattr(_independent_ssp, "gram_with_exact_corner", spy)
    X, Y = _outputs()
    IndependentSSPRegressor(x_bound=math.sqrt(2), y_bound=1.0, epsilon=1.0, delta=1e-6,
                            fit_intercept=fit_intercept).fit(X, Y)
    assert seen and set(seen) == {fit_intercept}


@pytest.mark.parametrize("cov_budget", [0.2, 0.8])
def test_independent_ssp_basic_composition_gives_each_release_its_own_share(cov_budget):
    # Kills m80 (the association calibrated at f epsilon instead of (1 - f) epsilon:
    # the same at the default f = 0.5).
    X, Y = _outputs()
    n, n_outputs = X.shape[0], Y.shape[1]
    x_bound, eps, delta, f = math.sqrt(2), 1.0, 1e-6, cov_budget
    est = IndependentSSPRegressor(x_bound=x_bound, y_bound=1.0, epsilon=eps, delta=delta,
                                  cov_budget=f, composition="basic").fit(X, Y)
    cov = gaussian_sigma(gram_upper_sensitivity(x_bound, 1.0) / n, f * eps / n_outputs,
                         f * delta / n_outputs)
    assoc = gaussian_sigma(cross_sensitivity(x_bound, 1.0, 1.0) / n,
                           (1 - f) * eps / n_outputs, (1 - f) * delta / n_outputs)
    assert est.noise_std_["covariance"] == pytest.approx(cov, rel=1e-12)
    assert est.noise_std_["association"] == pytest.approx(assoc, rel=1e-12)


# -- BoostedAdaSSP with a bound estimated privately ---------------------------------------
def test_boosted_adassp_spends_its_epsilon_with_a_private_bound():
    # Kills m83 (the Gaussian part calibrated at the whole epsilon, the bound's share
    # added on top: a ledger of 1.1 for epsilon = 1).
    X, y = _line(40_000, d=2)
    est = BoostedAdaSSPRegressor(epsilon=1.0, delta=1e-6, y_bound=10.0, n_rounds=2).fit(X, y)
    assert any(e.name == "x_bound" for e in est.privacy_spent_.events)
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-9)


# -- ReuseCov under zero-out neighbours: the bound events keep the relation ---------------
def test_reusecov_bound_events_state_the_estimators_relation():
    # Kills m85 / m86 (planned or released bound events recorded as replace-one: the
    # ledger became replace-one at epsilon 2.007 instead of zero-out at 1).
    X, Y = _outputs(n=20_000, n_outputs=3)
    # A budget of exactly the fit's, under its relation: the planned ledger (checked
    # before the spend) must state it too.
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6, neighbouring="zero-out")
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, y_bound=1.0, neighbouring="zero-out",
                            accountant=acc)
    est.fit(X, Y)
    ledger = est.privacy_spent_
    assert acc.ledgers == [ledger]
    assert any(e.name == "x_bound" for e in ledger.events)
    assert {e.neighbouring for e in ledger.events} == {"zero-out"}
    assert ledger.neighbouring == "zero-out"
    assert ledger.epsilon == pytest.approx(1.0, rel=1e-9)


# -- the public accounting API ------------------------------------------------------------
def test_a_gdp_ledger_reports_basic_composition_only_where_it_holds():
    # Kills m15: with a declared delta below the Gaussian events' own deltas, the sum of
    # their epsilons (2.0) holds at no delta the ledger states; the GDP epsilon does.
    events = [gaussian_event(f"g{i}", 1.0, 1.0, 1e-5) for i in range(2)]
    ledger = PrivacyLedger(events, composition="gdp", delta=1e-9)
    assert ledger.epsilon == pytest.approx(gdp_epsilon(ledger.mu, 1e-9), rel=1e-12)
    assert ledger.epsilon > 2.0


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("q", [0.01, 0.1, 0.5, 1.0])
def test_subsampled_guarantee_is_the_exact_amplification_and_inverts_the_budget(epsilon, q):
    # Kills m16 (first-order q epsilon: 0.1 instead of 0.1586 at epsilon = 1, q = 0.1).
    eps, delta = subsampled_guarantee(epsilon, 1e-6, q)
    assert eps == pytest.approx(math.log(1 + q * (math.exp(epsilon) - 1)), rel=1e-14)
    assert delta == pytest.approx(q * 1e-6, rel=1e-15)
    eps_1, delta_1 = subsample_budget(epsilon, 1e-6 * q, q)
    back, back_delta = subsampled_guarantee(eps_1, delta_1, q)
    assert epsilon * (1 - 1e-12) <= back <= epsilon
    assert back_delta <= 1e-6 * q
