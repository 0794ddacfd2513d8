"""Pinned calibration constants and the wiring of releases.

Every test here pins a number or a step that the rest of the suite did not
constrain: each was checked to fail on a deliberately broken variant (a
sensitivity missing its intercept or its factor 2, a budget not split over
the runs of basic composition, a score at the wrong epsilon or on
overlapping rows, a subsample drawn from ``random_state``, a test threshold
without its offset, a clip of the wrong width). The tolerances of the
statistical tests are binomial quantiles at 1e-9.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import skprivreg.feature_selection._lasso_support as ls_mod
import skprivreg.linear_model._linear as lin
import skprivreg.linear_model._reusecov_fit as rcf
import skprivreg.model_selection._search as search_mod
import skprivreg.preprocessing._scalers as sc
from skprivreg import (
    AdaSSPRegressor,
    BoostedAdaSSPRegressor,
    IndependentSSPRegressor,
    LinearRegression,
    PrivateGridSearchCV,
    PrivateLassoSupportSelector,
    ReuseCovRegressor,
)
from skprivreg.linear_model._tukey_em import tukey_budget
from skprivreg.mechanisms import (
    gaussian_sigma,
    gram_upper_sensitivity,
    gumbel_top_k,
    private_neg_mse,
)


def test_gumbel_top_k_first_pick_is_exp_mech_at_eps_over_k():
    rng = np.random.default_rng()
    N, k, eps = 20000, 2, 2.0
    first = np.array([gumbel_top_k([0.0, 1.0, -50.0], k, 1.0, eps, rng)[0] for _ in range(N)])
    p = math.exp(eps / (2 * k)) / (1 + math.exp(eps / (2 * k)))
    lo, hi = stats.binom.ppf(1e-9, N, p), stats.binom.isf(1e-9, N, p)
    assert lo <= np.sum(first == 1) <= hi


def test_private_neg_mse_clips_the_true_labels():
    y = np.array([0.0, 100.0, -100.0])
    pred = np.array([0.0, 1.0, -1.0])
    s = private_neg_mse(y, pred, y_low=-1.0, y_high=1.0, epsilon=1e15, rng=np.random.default_rng())
    assert s == pytest.approx(0.0, abs=1e-9)


def _lin_events(**kw):
    captured = []
    lin._CAPTURE = captured
    try:
        rng = np.random.default_rng(1)
        X = rng.normal(size=(20000, 3))
        y = X @ [1.0, 2.0, 3.0] + rng.normal(size=20000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = LinearRegression(epsilon=4.0, **kw).fit(X, y)
    finally:
        lin._CAPTURE = None
    return est, {name: ev for name, _, ev in captured}


def test_linear_release_sensitivities():
    est, ev = _lin_events()  # private ranges: feature_mean released
    assert ev["label_moments"].sensitivity == 2.0
    assert ev["feature_mean"].sensitivity == pytest.approx(2.0 * est.x_bound_)
    # Selection sum: each term lies in [-cap, cap], so its sensitivity is 2 cap.
    sel = ev["selection"]
    assert sel.sigma == pytest.approx(sel.sensitivity / sel.mu)
    cap_seen = []
    orig = lin.selection_block

    def spy(*a, **k):
        cap_seen.append(k["cap"])
        return orig(*a, **k)

    lin.selection_block = spy
    try:
        est, ev = _lin_events(x_range=(-5.0, 5.0), y_bound=(-20.0, 20.0))
    finally:
        lin.selection_block = orig
    assert ev["selection"].sensitivity == pytest.approx(2.0 * cap_seen[0])


def test_adassp_lambda_min_sensitivity_includes_intercept():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(5000, 3))
    y = X.sum(axis=1)
    est = AdaSSPRegressor(epsilon=1.0, x_bound=2.0, y_bound=4.0, intercept_scaling=1.5).fit(X, y)
    lam = [e for e in est.privacy_spent_.events if e.name == "lambda_min"][0]
    assert lam.sensitivity == pytest.approx(2.0**2 + 1.5**2)


def test_search_scores_at_candidate_epsilon_on_disjoint_rows(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(4000, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.3 * rng.normal(size=4000)
    eps_seen, takes = [], []
    orig_mse, orig_take = search_mod.private_neg_mse, search_mod._take
    monkeypatch.setattr(search_mod, "private_neg_mse",
                        lambda *a, **k: (eps_seen.append(k["epsilon"]), orig_mse(*a, **k))[1])
    monkeypatch.setattr(search_mod, "_take",
                        lambda Xa, rows: (takes.append(np.asarray(rows)), orig_take(Xa, rows))[1])
    s = PrivateGridSearchCV(estimator=AdaSSPRegressor(x_bound=2.0, y_bound=6.5),
                            param_grid={"x_bound": [0.01, 2.0]}, epsilon=4.0,
                            n_repetitions=3).fit(X, y)
    assert eps_seen and all(e == s.candidate_epsilon_ for e in eps_seen)
    runs = [t for t in takes if len(t) < len(X)]  # (train, val) per run
    for train, val in zip(runs[::2], runs[1::2]):
        assert len(np.intersect1d(train, val)) == 0 and len(train) + len(val) == len(X)


def test_perturbation_test_uses_replace_one_offset(monkeypatch):
    # d_hat forced to the offset 1: a support released with probability delta/2 exactly.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(500, 4))
    y = X[:, 0]
    monkeypatch.setattr(ls_mod, "perturbation_distance", lambda X, y, s, L, psi: ((0,), 1.0))
    eps, delta, N = 2.0, 0.2, 600
    passed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(N):
            sel = PrivateLassoSupportSelector(
                method="perturbation", max_features=1, epsilon=eps, delta=delta,
                rsc_constant=0.25, penalty=100.0, x_range=(-1.0, 1.0), y_bound=1.0,
                on_fail="empty").fit(X, y)
            passed += sel.stable_
    lo, hi = stats.binom.ppf(1e-9, N, delta / 2), stats.binom.isf(1e-9, N, delta / 2)
    assert lo <= passed <= hi


def test_independent_ssp_basic_splits_the_budget_over_runs():
    rng = np.random.default_rng(0)
    n, l = 4000, 3
    X = rng.uniform(-1, 1, size=(n, 2))
    Y = rng.uniform(-1, 1, size=(n, l))
    est = IndependentSSPRegressor(epsilon=2.0, delta=1e-6, x_bound=1.5, y_bound=1.0,
                                  composition="basic", cov_budget=0.5).fit(X, Y)
    want = gaussian_sigma(gram_upper_sensitivity(1.5, 1.0) / n, 0.5 * 2.0 / l, 0.5 * 1e-6 / l)
    assert est.noise_std_["covariance"] == pytest.approx(want, rel=1e-9)


def test_boosted_lambda_min_sensitivity_includes_intercept():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 2))
    y = X.sum(axis=1)
    est = BoostedAdaSSPRegressor(epsilon=2.0, x_bound=2.0, y_bound=3.0).fit(X, y)
    lam = [e for e in est.privacy_spent_.events if e.name == "lambda_min"][0]
    assert lam.sensitivity == pytest.approx(2.0**2 + 1.0)


def test_symmetric_moment_path_clips_each_column_to_its_own_range():
    low, high = np.array([-1.0, -10.0]), np.array([1.0, 10.0])
    X = np.array([[5.0, 0.0], [0.5, -5.0], [-3.0, 3.0]])
    S1, S2 = sc._moment_block(X, None, low=low, high=high, check=True, symmetric=True)
    U = sc.to_unit_box(X, low, high)
    np.testing.assert_allclose(S1, U.sum(axis=0))
    np.testing.assert_allclose(S2, (U * U).sum(axis=0))


def test_tukey_budget_composes_exactly():
    for eps, delta in [(1.0, 1e-6), (0.3, 0.05)]:
        eps_ptr, delta_ptr, eps_em, eta = tukey_budget(eps, delta)
        assert eps_em + math.log(1 / (1 - eta)) == pytest.approx(eps / 2, rel=1e-12, abs=0)
        assert eta / (1 - eta) == pytest.approx(delta / 2, rel=1e-12)


def test_cov_subsample_is_secret_whatever_the_seed(monkeypatch):
    seen = []
    orig = rcf.sufficient_statistics
    def spy(*a, **k):
        if k.get("rows") is not None:
            seen.append(np.array(k["rows"]))
        return orig(*a, **k)
    monkeypatch.setattr(rcf, "sufficient_statistics", spy)
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(2000, 3))
    Y = rng.uniform(-1, 1, size=(2000, 2))
    for _ in range(2):
        ReuseCovRegressor(epsilon=2.0, delta=1e-6, x_bound=2.0, y_bound=1.0,
                          cov_subsample=200, random_state=0).fit(X, Y)
    assert len(seen) == 2 and not np.array_equal(seen[0], seen[1])
