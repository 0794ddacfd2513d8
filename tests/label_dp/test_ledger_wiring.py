"""Ledger wiring of label-DP releases: what the ledger states is what ran.

Each test pins one number a release's guarantee depends on (the PTR check's
delta, the declared partition's failure probability, the residual threshold
from a released label range, the noisy-LLP profile with every slot noised,
the epsilon the label-bound release runs at) against an independent
computation; each fails when that number is halved, dropped or recomputed.
"""

import math
import warnings

import numpy as np
import pytest

import skprivreg.label_dp._aggregate as agg_mod
from skprivreg.accounting import gdp_delta
from skprivreg.label_dp import aggregate
from skprivreg.label_dp._accountant import lba_privacy_profile
from skprivreg.label_dp._llp_accountant import llp_privacy_profile
from skprivreg.label_dp._planning import plan_aggregation


def _declared(**kw):
    return dict(y_bound=(0.0, 1.0), assumption="declared", residual_var_lower_bound=0.05,
                epsilon=8.0, delta=1e-6, **kw)


def test_ptr_ledger_charges_the_whole_delta():
    plan = plan_aggregation(200_000, 2, epsilon=4.0, delta=1e-6, y_bound=(0.0, 1.0),
                            check_pass_probability=False)
    ledger = plan.ledger()
    ptr = [e for e in ledger.events if e.name == "lba_ptr_check"][0]
    assert ptr.delta == pytest.approx(0.5e-6, rel=1e-12)
    assert ledger.delta == pytest.approx(1e-6, rel=1e-12)


def test_declared_failure_probability_is_charged():
    plan = plan_aggregation(60_000, 1, declared_failure_prob=1e-7, **_declared())
    assert plan.delta_aggregation == pytest.approx(
        lba_privacy_profile(8.0, plan.c) + 1e-7, rel=1e-12)
    assert plan.ledger().delta >= 1e-7 + lba_privacy_profile(8.0, plan.c) - 1e-18


def test_private_range_threshold_uses_the_full_width():
    plan = plan_aggregation(200_000, 2, epsilon=4.0, delta=1e-6, bounds_epsilon=0.4,
                            check_pass_probability=False)
    released = plan.with_label_bounds((-3.0, 3.0))
    assert released.rss_threshold == pytest.approx((6.0 / plan.c) ** 2, rel=1e-12)


@pytest.mark.parametrize("k", [5, 12])
def test_llp_all_noisy_profile_matches_k_minus_one_noisy_mates(k):
    """With every slot noised, a target inside the noisy set has k - 1 noisy
    bag-mates (per bag and under the global law): the profile matches a Monte
    Carlo of its privacy loss within 5 standard errors (it is an upper bound,
    within 1e-3 of the exact value)."""
    eps, ratio = 1.0, 2.0
    per_bag = llp_privacy_profile(eps, k, 1.0, ratio, 1.0, allocation="per_bag")
    glob = llp_privacy_profile(eps, k, 1.0, ratio, 1.0, n_samples=50 * k, allocation="global")
    # Monte Carlo of the inside target: mu = ratio |w_t| / sqrt(w_t^2 + sum_{k-1} w_r^2)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((20_000, k))
    mu = ratio * np.abs(w[:, 0]) / np.sqrt(np.sum(w * w, axis=1))
    vals = np.array([gdp_delta(m, eps) for m in mu])
    mc, se = vals.mean(), vals.std() / math.sqrt(vals.size)
    assert per_bag >= mc - 5 * se and per_bag <= mc + 5 * se + 1e-3 * mc
    assert glob == pytest.approx(per_bag, rel=1e-6)


def test_private_label_bound_runs_at_the_recorded_epsilon(monkeypatch):
    seen = []
    orig = agg_mod.private_label_bound
    monkeypatch.setattr(agg_mod, "private_label_bound",
                        lambda y, eps, rng: (seen.append(eps), orig(y, eps, rng))[1])
    rng = np.random.default_rng(1)
    n = 200_000
    X = rng.normal(size=(n, 2))
    y = X @ [1.0, -1.0] + 3.0 * rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _, ledger = aggregate(X, y, epsilon=4.0, delta=1e-6, bounds_budget=0.1)
        except Exception as exc:  # a failed PTR still ran the bound first
            ledger = getattr(exc, "ledger", None)
    assert seen and ledger is not None
    y_event = [e for e in ledger.events if e.name == "y_bound"][0]
    assert seen == [pytest.approx(y_event.epsilon, rel=1e-12)]
