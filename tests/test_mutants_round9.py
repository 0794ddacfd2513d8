"""Round 9 of the mutation tests: each test kills a mutant that survived every other test.

Mutants of the ledgers and their composition, the Renyi-DP accounting of
the private search and its plan, privacy_spent of a pipeline, the private bound
estimates and PRIMO's events. The mutant is named in each test. Exact checks
where a calibration or a search hands a scale, a budget or a notion on (spies
that call the real functions, rational arithmetic on recorded numbers) and
exact checks of public planning numbers; no statistical test here. The last
two tests fail on the library before this round: a composition of several
ledgers and the subsampled PRIMO sigma were rounded to nearest, not up.
"""

from fractions import Fraction

import numpy as np
import pytest

from skprivreg.accounting import PrivacyEvent, PrivacyLedger, compose_ledgers
from skprivreg.linear_model import AdaSSPRegressor
from skprivreg.mechanisms import (
    primo_constant,
    primo_gaussian_event,
    subsampled_gaussian_event,
    value_at_least,
)

F = Fraction


# -- PRIMO: the mu an event records ---------------------------------------------------------
def test_primo_events_record_mu_rounded_up_exactly():
    # Kills q03 (mu = sensitivity / sigma rounded to nearest: a ledger composing it
    # reports less than was spent whenever the quotient rounds down). The case is
    # searched among public numbers so that the float quotient rounds down.
    cases = [(s / 10, e) for s in range(1, 60) for e in (0.3, 0.5, 1.0, 2.0)]
    found = 0
    for sens, eps in cases:
        event = primo_gaussian_event("x", sens, eps, 1e-6)
        exact = F(sens) / F(event.sigma)
        assert event.mu == value_at_least(exact)
        found += F(sens / event.sigma) < exact
    assert found > 0  # the float quotient rounds down in some case checked here


# -- a GDP ledger with a declared delta: what group privacy adds -------------------------------
def test_a_gdp_ledgers_declared_delta_gains_nothing_from_converting_gaussian_events():
    # Kills a07 (the delta that group privacy adds to an add/remove Gaussian event
    # counted on top of the declared delta although the event is composed by its
    # mu, where 2 mu is the exact conversion: the ledger reported a larger delta,
    # and converted the Gaussian part at the wrong delta).
    from skprivreg.accounting import gdp_epsilon
    from skprivreg.mechanisms import gaussian_event_from_mu

    gauss = gaussian_event_from_mu("g", 1.0, 0.5, 1e-6, neighbouring="add-remove")
    ledger = PrivacyLedger([gauss, PrivacyEvent("pure", 0.3, 0.0)], composition="gdp",
                           delta=1e-5)
    assert ledger.neighbouring == "replace-one" and ledger.mu == 1.0
    assert ledger.delta == 1e-5
    assert ledger.epsilon == value_at_least(F(gdp_epsilon(1.0, 1e-5)) + F(0.3))


# -- a GDP ledger's composed mu ------------------------------------------------------------------
def _hypot_rounds_down_pairs():
    """Pairs of public mus whose float ``math.hypot`` lies below the exact norm."""
    import math

    pairs = [(0.1 * i + 0.0137, 0.07 * j + 0.011) for i in range(1, 30) for j in range(1, 30)]
    return [(a, b) for a, b in pairs if F(math.hypot(a, b)) ** 2 < F(a) ** 2 + F(b) ** 2]


def _smallest_at_least_root(value, exact_square):
    import math

    return F(value) ** 2 >= exact_square and F(math.nextafter(value, 0.0)) ** 2 < exact_square


def test_a_gdp_ledgers_mu_and_the_mu_it_converts_are_rounded_up(monkeypatch):
    # Kills a11 (the ledger's reported mu composed by math.hypot) and a12 (the mu
    # handed to the mu-to-epsilon conversion composed by math.hypot): each rounds
    # to nearest, below the exact sqrt(mu_1^2 + mu_2^2) for the pairs used here.
    from skprivreg import accounting
    from skprivreg.mechanisms import gaussian_event_from_mu

    pairs = _hypot_rounds_down_pairs()[:5]
    assert pairs  # math.hypot rounds down for some of the pairs searched
    seen = []
    original = accounting.gdp_epsilon
    monkeypatch.setattr(accounting, "gdp_epsilon",
                        lambda mu, delta: seen.append(mu) or original(mu, delta))
    for m1, m2 in pairs:
        ledger = PrivacyLedger([gaussian_event_from_mu("g1", 1.0, m1, 1e-7),
                                gaussian_event_from_mu("g2", 1.0, m2, 1e-7)], composition="gdp")
        exact = F(m1) ** 2 + F(m2) ** 2
        assert _smallest_at_least_root(ledger.mu, exact)
        seen.clear()
        assert ledger.epsilon > 0
        assert seen and _smallest_at_least_root(seen[0], exact)


# -- compose_ledgers: typed and delta-checked --------------------------------------------------
def test_composing_ledgers_by_gdp_keeps_the_basic_total_when_the_joint_one_needs_more_delta():
    # Kills a15 (the joint GDP total taken whenever it is smaller, without checking
    # that it holds at the composed delta). Re-composing a ledger that converted an
    # add/remove event counts that conversion's delta again, so the joint total
    # holds only at a larger delta than the one stated: the basic sum must stand.
    from skprivreg.mechanisms import gaussian_event_from_mu

    first = PrivacyLedger([gaussian_event_from_mu("g1", 1.0, 1.0, 1e-6),
                           PrivacyEvent("p", 0.2, 1e-6, neighbouring="add-remove")],
                          composition="gdp")
    second = PrivacyLedger([gaussian_event_from_mu("g2", 1.0, 1.0, 1e-6)], composition="gdp")
    joint = PrivacyLedger.concatenate([first, second], composition="gdp")
    total = compose_ledgers([first, second], composition="gdp")
    assert total.delta == pytest.approx(first.delta + second.delta, rel=1e-12)
    assert joint.delta > 1.2 * total.delta and joint.epsilon < 0.8 * total.epsilon
    assert total.epsilon == pytest.approx(first.epsilon + second.epsilon, rel=1e-12)


def test_composing_ledgers_of_different_relations_converts_each_to_replace_one():
    # Kills a16 (ledgers of different relations added as they are: an add/remove
    # ledger's (eps, delta) counted as a replace-one guarantee, half its epsilon).
    from skprivreg.accounting import group_privacy

    add_remove = PrivacyLedger([PrivacyEvent("a", 0.5, 1e-6, neighbouring="add-remove")])
    replace = PrivacyLedger([PrivacyEvent("r", 0.3, 2e-6)])
    eps_ar, delta_ar = group_privacy(0.5, 1e-6)
    for composition in ("basic", "gdp"):
        total = compose_ledgers([add_remove, replace], composition=composition)
        assert total.neighbouring == "replace-one"
        assert total.epsilon == pytest.approx(eps_ar + 0.3, rel=1e-12)
        assert total.delta == pytest.approx(delta_ar + 2e-6, rel=1e-12)


# -- Renyi-DP curves of the private selection ----------------------------------------------------
ORDERS = np.array([1.5, 2.0, 4.0, 10.0, 64.0])


def test_the_selection_bound_takes_lambda_hat_one_when_it_is_smallest():
    # Kills e07 (the inner minimum of Papernot & Steinke's Thm. 2 over the orders
    # only, without lambda_hat = 1, whose term (1 + eta) log(1/gamma) is the
    # smallest when Q's curve is steep: a valid but larger total).
    from skprivreg.accounting import gaussian_rdp, private_selection_rdp, tnb_mean

    eta, gamma = 1.0, 0.5
    q = gaussian_rdp(5.0, ORDERS)
    inner = (1 + eta) * np.log(1 / gamma)
    others = (1 + eta) * (1 - 1 / ORDERS) * q + (1 + eta) * np.log(1 / gamma) / ORDERS
    assert inner < others.min()
    expected = q + inner + np.log(tnb_mean(eta, gamma)) / (ORDERS - 1)
    assert private_selection_rdp(q, eta, gamma, ORDERS) == pytest.approx(expected, rel=1e-14)


def test_the_selection_total_is_converted_at_the_delta_left_after_the_cap():
    # Kills f06 (the Renyi curve converted at the whole delta although a share of
    # it pays for capping the number of runs: the total is then valid at
    # delta + (1 + e^eps) P[K > cap] only).
    from skprivreg.accounting import gaussian_rdp, private_selection_rdp, rdp_to_dp
    from skprivreg.model_selection._selection_plan import selection_plan

    q = gaussian_rdp(0.3)
    total, gamma, cap, conversion_delta = selection_plan(q, epsilon=2.0, delta=1e-6,
                                                         n_repetitions=10, eta=1.0)
    assert 0.9e-6 <= conversion_delta < 1e-6 and cap > 10
    assert total == rdp_to_dp(private_selection_rdp(q, 1.0, gamma), conversion_delta)
    assert total > rdp_to_dp(private_selection_rdp(q, 1.0, gamma), 1e-6)


# -- PrivateGridSearchCV: each run's delta and the selection's notion -----------------------------
class _RecordsItsBudget(AdaSSPRegressor):
    """AdaSSP that records the (epsilon, delta) of every fit."""

    budgets = []

    def fit(self, X, y):
        type(self).budgets.append((self.epsilon, self.delta))
        return super().fit(X, y)


def test_with_a_refit_each_run_fits_at_the_selections_half_of_delta():
    # Kills h11 (each run, dry runs included, fitted at the search's whole delta
    # while the selection is given half of it and the refit the other half: the
    # runs' curves are planned at a delta the selection does not have).
    from skprivreg.model_selection import PrivateGridSearchCV

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 2))
    y = X @ [1.0, -1.0] + 0.1 * rng.normal(size=2000)
    _RecordsItsBudget.budgets = []
    search = PrivateGridSearchCV(
        estimator=_RecordsItsBudget(x_bound=2.0, y_bound=3.0, delta=1e-2),
        param_grid={"fit_intercept": [True, False]}, epsilon=2.0, delta=1e-6,
        n_repetitions=3, refit_budget=0.2).fit(X, y)
    assert search.candidate_delta_ == 5e-7
    refit = [b for b in _RecordsItsBudget.budgets if b == (0.4, 5e-7)]
    runs = [b for b in _RecordsItsBudget.budgets if b[0] != 0.4]
    assert len(refit) == 1 and runs and all(delta == 5e-7 for _, delta in runs)
    assert (search.candidate_epsilon_, 5e-7) in runs


def test_a_search_of_label_dp_candidates_records_a_label_dp_selection():
    # Kills h12 (the selection event recorded with the default full notion: a search
    # of label-DP candidates then claimed full DP, and a feature-DP budget took it).
    import warnings

    from skprivreg import BudgetAccountant
    from skprivreg.exceptions import CompositionError
    from skprivreg.label_dp import GaussianLabelNoiseRegressor
    from skprivreg.model_selection import PrivateGridSearchCV

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (1000, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.3 * rng.normal(size=1000)

    def search(accountant):
        return PrivateGridSearchCV(estimator=GaussianLabelNoiseRegressor(y_bound=6.5),
                                   param_grid={"fit_intercept": [True, False]}, epsilon=2.0,
                                   delta=1e-6, n_repetitions=3, accountant=accountant)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = search(None).fit(X, y)
        assert fitted.privacy_spent_.notion == "label"
        assert [e.notion for e in fitted.privacy_spent_.events] == ["label"]
        feature = BudgetAccountant(epsilon=100.0, delta=1e-3, notion="feature")
        with pytest.raises(CompositionError):
            search(feature).fit(X, y)
    assert feature.n_spends == 0


# -- privacy_spent of a pipeline: the composition asked for ---------------------------------------
def test_privacy_spent_of_a_pipeline_composes_as_asked():
    # Kills i09 (privacy_spent ignored its composition argument and always added the
    # steps' totals: a GDP total asked for was reported as the basic one).
    from skprivreg.pipeline import make_private_pipeline, privacy_ledgers, privacy_spent
    from skprivreg.preprocessing import PrivateStandardScaler

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (2000, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.3 * rng.normal(size=2000)
    pipe = make_private_pipeline(
        PrivateStandardScaler(epsilon=1.0, delta=1e-6, x_range=(-1.0, 1.0)),
        AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=8.0, y_bound=10.0)).fit(X, y)
    ledgers = list(privacy_ledgers(pipe).values())
    gdp = privacy_spent(pipe, composition="gdp")
    assert gdp == compose_ledgers(ledgers, composition="gdp")
    assert gdp.epsilon < 0.95 * privacy_spent(pipe).epsilon


# -- private bounds: public feasibility and the quantile left above -------------------------------
def test_a_private_bound_needs_four_times_the_margin_of_rows():
    # Kills l04 (2 * margin: a bound estimated from that few rows can sit at the
    # median, and clipping then dominates the fit; the refusal is public).
    import math

    from skprivreg.bounds import check_private_bound_feasible, min_samples_for_private_bound
    from skprivreg.exceptions import ConfigurationError

    for eps in (0.1, 0.5, 1.0):
        needed = math.ceil(4 * 6 / eps * math.log(2000))
        assert min_samples_for_private_bound(eps) == needed
        check_private_bound_feasible(needed, eps, "x_bound")
        with pytest.raises(ConfigurationError):
            check_private_bound_feasible(needed - 1, eps, "x_bound")


def test_a_float_quantile_leaves_its_complement_of_rows_above_the_bound(monkeypatch):
    # Kills l06 (n_above = quantile * n: a 0.99 quantile left 99% of the rows above
    # the released bound instead of 1%). The spy calls the real mechanism.
    from skprivreg import bounds as bounds_module
    from skprivreg.mechanisms import bound_bins, counts_above

    seen = []
    real = bounds_module.private_upper_bound

    def spy(counts, bins, epsilon, rng, n_above=None):
        seen.append((epsilon, n_above))
        return real(counts, bins, epsilon, rng, n_above=n_above)

    monkeypatch.setattr(bounds_module, "private_upper_bound", spy)
    values = np.abs(np.random.default_rng(0).normal(size=5000))
    counts = counts_above(values, bound_bins())
    bound, event = bounds_module.private_norm_bound(
        counts, 5000, 0.5, np.random.default_rng(1), name="y_bound", quantile=0.99)
    assert seen == [(0.5, pytest.approx(50.0, rel=1e-12))]
    assert event.epsilon == 0.5 and bound in bound_bins()


# -- library findings: values that were rounded to nearest --------------------------
def test_composed_totals_of_several_ledgers_are_not_rounded_down():
    from skprivreg import BudgetAccountant

    a, b = 0.5708573103554107, 1.5140503662728757  # a + b rounds below the exact sum
    d1, d2 = 1.430206016712772e-06, 8.489593995678605e-06  # so does d1 + d2
    ledgers = [PrivacyLedger([PrivacyEvent("a", a, d1)]), PrivacyLedger([PrivacyEvent("b", b, d2)])]
    acc = BudgetAccountant()
    for ledger in ledgers:
        acc.spend(ledger)
    for total in (compose_ledgers(ledgers), acc.total()):
        assert F(total.epsilon) >= F(a) + F(b)
        assert F(total.delta) >= F(d1) + F(d2)


def test_a_subsampled_primo_sigma_is_not_rounded_down():
    from skprivreg.accounting import subsample_budget

    eps_1, delta_1 = subsample_budget(1.0, 1e-6, 0.25)
    c = primo_constant(eps_1, delta_1)
    for sens in (0.3, 0.7, 2.9):  # c * sens rounds below the exact product for each
        event = subsampled_gaussian_event("cov", sens, 1.0, 1e-6, 0.25, method="primo")
        assert F(event.sigma) >= F(c) * F(sens)
