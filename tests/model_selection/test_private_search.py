"""PrivateGridSearchCV and the private-selection accounting (Papernot & Steinke 2022)."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize_scalar
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler

from skprivreg import (
    AdaSSPRegressor,
    BoundedScaler,
    BudgetAccountant,
    BudgetExceededError,
    ConfigurationError,
    PrivateGridSearchCV,
    PrivateStandardScaler,
    make_private_pipeline,
)
from skprivreg.accounting import (
    RDP_ORDERS,
    DetachedAccountant,
    laplace_rdp,
    private_selection_rdp,
    rdp_to_dp,
    tnb_gamma_for_mean,
    tnb_mean,
    tnb_pmf,
)


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    return X, X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=n)


def _search(**kw):
    params = dict(estimator=AdaSSPRegressor(x_bound=2.0, y_bound=6.5),
                  param_grid={"x_bound": [0.01, 2.0]}, epsilon=4.0, n_repetitions=3)
    params.update(kw)
    return PrivateGridSearchCV(**params)


# -- the accounting, checked independently --------------------------------
def _independent_total(mu, eps_score, eta, mean_k, delta):
    """Papernot & Steinke (2022) Thm. 2 + Canonne-Kamath-Steinke conversion, optimised
    over continuous orders, for Q = max(Gaussian mu-GDP, Laplace eps_score)."""

    def q(lam):
        lap = np.logaddexp(
            math.log(lam / (2 * lam - 1)) + (lam - 1) * eps_score,
            math.log((lam - 1) / (2 * lam - 1)) - lam * eps_score,
        ) / (lam - 1)
        return max(lam * mu**2 / 2, lap)

    if eta == 1:
        gamma = 1 / mean_k  # geometric: E[K] = 1/gamma
    else:
        gamma = tnb_gamma_for_mean(eta, mean_k)
    inner = minimize_scalar(
        lambda lh: (1 + eta) * (1 - 1 / lh) * q(lh) + (1 + eta) * math.log(1 / gamma) / lh,
        bounds=(1.0, 2000.0), method="bounded", options={"xatol": 1e-9},
    ).fun
    inner = min(inner, (1 + eta) * math.log(1 / gamma))

    def eps(lam):
        rdp = q(lam) + inner + math.log(mean_k) / (lam - 1)
        return rdp + math.log1p(-1 / lam) - (math.log(delta) + math.log(lam)) / (lam - 1)

    return minimize_scalar(eps, bounds=(1.01, 2000.0), method="bounded",
                           options={"xatol": 1e-9}).fun


def test_recorded_total_matches_the_papers_bound_computed_independently():
    X, y = _data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-4)
    search = _search(accountant=acc).fit(X, y)
    assert acc.ledgers == [search.privacy_spent_]
    recorded = search.privacy_spent_.epsilon
    assert recorded <= 4.0 * (1 + 1e-9) and recorded > 3.9  # the bisection uses the budget
    # The candidate's mu at the allotted per-run budget, from a real fit's ledger.
    n_train = X.shape[0] - round(0.25 * X.shape[0])
    run = AdaSSPRegressor(x_bound=2.0, y_bound=6.5, epsilon=search.candidate_epsilon_,
                          delta=1e-6).fit(X[:n_train], y[:n_train])
    # The cap on K costs at most a tenth of delta: the conversion runs at 0.9 delta or more.
    lower = _independent_total(run.privacy_spent_.mu, search.candidate_epsilon_, 1.0, 3.0, 1e-6)
    upper = _independent_total(run.privacy_spent_.mu, search.candidate_epsilon_, 1.0, 3.0, 0.9e-6)
    # The discrete orders give a valid bound a little above the continuous optimum.
    assert lower * (1 - 1e-6) <= recorded <= upper * 1.03


def test_pure_dp_limit_is_liu_and_talwar_three_epsilon():
    eps = 0.3
    flat = np.full(len(RDP_ORDERS), eps)  # an eps-DP base algorithm
    for eta in (0.0, 1.0, 2.0):
        gamma = tnb_gamma_for_mean(eta, 10.0)
        curve = private_selection_rdp(flat, eta, gamma)
        # (2 + eta) eps plus terms vanishing as the orders grow.
        assert curve[-1] == pytest.approx((2 + eta) * eps, abs=0.01)
        assert np.all(curve >= (1 + 1 / 2) * eps)


def test_bound_dominates_the_exact_renyi_divergence_of_best_of_k():
    # Q: randomized response on a binary score, eps0-DP. A releases max of K draws,
    # P[A = 1] = 1 - E[(1 - p)^K], computed exactly from the pmf of K.
    eps0, eta = 0.5, 1.0
    gamma = tnb_gamma_for_mean(eta, 8.0)
    pmf = tnb_pmf(eta, gamma, 20000)
    k = np.arange(1, pmf.size + 1)
    p, p2 = math.exp(eps0) / (1 + math.exp(eps0)), 1 / (1 + math.exp(eps0))
    a = 1 - np.sum(pmf * (1 - p) ** k)
    b = 1 - np.sum(pmf * (1 - p2) ** k)
    lam = RDP_ORDERS

    def renyi(x, y):
        return np.logaddexp(lam * math.log(x) + (1 - lam) * math.log(y),
                            lam * math.log1p(-x) + (1 - lam) * math.log1p(-y)) / (lam - 1)

    q = np.maximum(renyi(p, p2), renyi(p2, p))  # Q's exact curve
    bound = private_selection_rdp(q, eta, gamma)
    assert np.all(np.maximum(renyi(a, b), renyi(b, a)) <= bound + 1e-12)
    assert math.log(max(a / b, b / a, (1 - a) / (1 - b), (1 - b) / (1 - a))) <= 3 * eps0


def test_repetition_distribution_matches_its_stated_mean():
    for eta in (0.0, 0.5, 1.0, 3.0):
        gamma = tnb_gamma_for_mean(eta, 6.0)
        pmf = tnb_pmf(eta, gamma, 5000)
        assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
        assert np.sum(pmf * np.arange(1, 5001)) == pytest.approx(6.0, rel=1e-9)
        assert tnb_mean(eta, gamma) == pytest.approx(6.0)
    assert tnb_mean(1.0, 0.25) == pytest.approx(4.0)  # geometric: 1/gamma


def test_laplace_rdp_is_the_closed_form_and_below_epsilon():
    curve = laplace_rdp(1.0)
    assert np.all(curve <= 1.0) and np.all(np.diff(curve) >= 0)
    # A zero curve converts to the conversion's own floor, log(1/delta)/(lambda - 1) at the
    # largest order: (13.8 - log 1024) / 1023 + log(1 - 1/1024) = 0.0057.
    assert rdp_to_dp(np.full(len(RDP_ORDERS), 0.0), 1e-6) == pytest.approx(0.00575, abs=1e-4)


# -- the estimator ----------------------------------------------------------
def test_selection_picks_the_clear_winner_with_the_predicted_probability(monkeypatch):
    # The winner wins whenever it is drawn: its validation MSE is ~0.1 against ~4.7,
    # and the score's Laplace scale is 13^2 / (1000 * 1.5) ~ 0.11. With m = 2
    # candidates, P(pick it) = 1 - E[(1/2)^K] for the capped K of the plan.
    X, y = _data()
    plans = {}
    original = PrivateGridSearchCV._plan

    def cached(self, candidates, prefix, shape):  # the plan is public and deterministic
        if "plan" not in plans:
            plans["plan"] = original(self, candidates, prefix, shape)
        return plans["plan"]

    monkeypatch.setattr(PrivateGridSearchCV, "_plan", cached)
    trials = 320
    wins = sum(_search().fit(X, y).best_params_["x_bound"] == 2.0 for _ in range(trials))
    _, (_, gamma, cap, _, _, _) = plans["plan"]
    pmf = tnb_pmf(1.0, gamma, cap)
    pmf[-1] += 1 - pmf.sum()
    expected = 1 - np.sum(pmf * 0.5 ** np.arange(1, cap + 1))
    assert expected == pytest.approx(0.75, abs=1e-6)  # geometric, E[K] = 3
    # wins ~ Binomial(320, 0.75): exact bounds at 1e-7 per side, [198, 278], fail a
    # correct search with probability 1.3e-7 (80 trials within 0.17 failed in 5e-4
    # of runs); K = 1 always (rate 0.5) passes them with probability 1.3e-5.
    low, high = stats.binom.ppf(1e-7, trials, expected), stats.binom.isf(1e-7, trials, expected)
    assert low <= wins <= high, (wins, trials, expected)


def test_results_hold_released_values_only():
    X, y = _data()
    search = _search(param_grid={"x_bound": [0.5, 2.0], "fit_intercept": [True, False]}).fit(X, y)
    results = search.cv_results_
    assert len(results["params"]) == 4
    released = ~np.isnan(results["released_test_score"])
    assert released.sum() == 1 and results["rank_test_score"].sum() == 1
    assert results["released_test_score"][search.best_index_] == search.best_score_
    assert results["params"][search.best_index_] == search.best_params_
    assert search.best_estimator_.accountant is None
    assert search.predict(X).shape == y.shape


def test_pipelines_of_data_independent_steps_are_tuned():
    X, y = _data()
    pipe = make_private_pipeline(BoundedScaler(x_range=(-1.0, 1.0)),
                                 AdaSSPRegressor(x_bound=2.0, y_bound=6.5))
    search = PrivateGridSearchCV(estimator=pipe, epsilon=4.0, n_repetitions=3,
                                 param_grid={"adasspregressor__x_bound": [1.0, 2.0]}).fit(X, y)
    assert search.privacy_spent_.epsilon <= 4.0 * (1 + 1e-9)


@pytest.mark.parametrize(
    "kw, error, match",
    [
        ({"param_grid": {}}, ValueError, "empty"),
        ({"param_grid": []}, ValueError, "empty"),
        ({"estimator": Ridge(), "param_grid": {"alpha": [1.0]}}, ConfigurationError,
         "skprivreg estimator"),
        ({"estimator": make_private_pipeline(StandardScaler(), AdaSSPRegressor(y_bound=6.5)),
          "param_grid": {"adasspregressor__x_bound": [1.0]}}, ConfigurationError,
         "standardscaler"),
        ({"param_grid": {"epsilon": [0.5, 1.0]}}, ValueError, "may not set 'epsilon'"),
        ({"epsilon": 0.01, "n_repetitions": 50}, ConfigurationError,
         "too small for one repetition"),
        ({"estimator": AdaSSPRegressor(x_bound=2.0)}, ConfigurationError, "y_bound"),
        ({"estimator": PrivateStandardScaler(x_range=(-3.0, 3.0)),
          "param_grid": {"x_range": [(-3.0, 3.0), (-2.0, 2.0)]}}, ConfigurationError,
         "does not predict"),
        ({"estimator": make_private_pipeline(
            BoundedScaler(x_range=(-3.0, 3.0)), PrivateStandardScaler(x_range=(-1.0, 1.0))),
          "param_grid": {"privatestandardscaler__x_range": [(-1.0, 1.0)]}},
         ConfigurationError, "does not predict"),
    ],
    ids=["empty-dict", "empty-list", "not-skprivreg", "leaking-pipeline", "sets-epsilon",
         "budget-too-small", "no-label-range", "transformer", "pipeline-of-transformers"],
)
def test_bad_input_is_refused_before_any_spend(kw, error, match):
    X, y = _data(n=1000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(error, match=match):
        _search(accountant=acc, **kw).fit(X, y)
    assert acc.n_spends == 0


def test_budget_is_checked_before_any_run():
    X, y = _data(n=1000)
    acc = BudgetAccountant(epsilon=1.0, delta=1e-3)
    with pytest.raises(BudgetExceededError):
        _search(accountant=acc).fit(X, y)
    assert acc.n_spends == 0


def test_budget_is_checked_before_a_head_reads_the_rows(monkeypatch):
    # No row is read before the budget check (the search's stated total): the heads'
    # widths (two rows through each head) and the NaN check of every row come after.
    from sklearn.preprocessing import FunctionTransformer

    from skprivreg.preprocessing import rowwise

    seen = []

    @rowwise
    def record(Z):
        seen.append(len(Z))
        return Z

    X, y = _data(n=1000)
    pipe = make_private_pipeline(FunctionTransformer(record),
                                 AdaSSPRegressor(x_bound=2.0, y_bound=6.5))
    # 3.9 of 4.0: an early check of part of the total (half, say) let the heads read.
    for budget in (1.0, 3.9):
        small = BudgetAccountant(epsilon=budget, delta=1e-3)
        with pytest.raises(BudgetExceededError):
            _search(estimator=pipe, accountant=small,
                    param_grid={"adasspregressor__x_bound": [1.0, 2.0]}).fit(X, y)
        assert small.n_spends == 0 and not seen
    # With the budget, every row is read (checked) before the spend.
    seen.clear()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    _search(estimator=pipe, accountant=acc,
            param_grid={"adasspregressor__x_bound": [1.0, 2.0]}).fit(X, y)
    assert len(X) in seen and acc.n_spends == 1


def test_keyword_only_and_fresh_noise():
    with pytest.raises(TypeError, match="keyword"):
        PrivateGridSearchCV(AdaSSPRegressor(), {"x_bound": [1.0]})
    X, y = _data()
    one, two = _search(random_state=0).fit(X, y), _search(random_state=0).fit(X, y)
    assert one.best_score_ != two.best_score_


def test_validation_score_noise_matches_its_sensitivity():
    # Perfect predictions: the score is pure Laplace noise of scale (h - l)^2 / (n eps).
    # E|noise| = scale; over 4000 draws the mean has sd scale / sqrt(4000) = 1.6% of it:
    # 5 sd = 8% (halving the noise gives 50%).
    from skprivreg.mechanisms import private_neg_mse

    rng = np.random.default_rng(1)
    y = np.linspace(-2.0, 2.0, 500)
    draws = [private_neg_mse(y, y, y_low=-3.0, y_high=3.0, epsilon=0.5, rng=rng)
             for _ in range(4000)]
    scale = 36.0 / (500 * 0.5)
    assert np.mean(np.abs(draws)) == pytest.approx(scale, rel=0.08)


def test_a_nan_prediction_scores_as_the_top_of_the_range():
    # A finite validation row can make a prediction NaN (its product with the
    # coefficients overflows to infinities of both signs). Its loss must stay in
    # [0, (h - l)^2], as the score's sensitivity assumes: it counts as h.
    from skprivreg.mechanisms import private_neg_mse

    y = np.array([0.5, -1.0, 2.0])
    pred = np.array([np.nan, 0.0, np.inf])
    kw = dict(y_low=-3.0, y_high=3.0, epsilon=1.0)
    got = private_neg_mse(y, pred, rng=np.random.default_rng(3), **kw)
    want = private_neg_mse(y, [3.0, 0.0, 3.0], rng=np.random.default_rng(3), **kw)
    assert np.isfinite(got) and got == want


@pytest.mark.parametrize("y_bound", [(0.0, 3e-162), (-1e200, 1e200)])
def test_a_label_range_the_score_cannot_represent_is_refused_before_the_spend(y_bound):
    # (h - l)^2 / n below the normal range rounds the noise scale towards 0
    # (no noise); above it, the loss overflows. Both are public facts.
    X, y = _data(n=400)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = _search(accountant=acc, y_bound=y_bound)
    with pytest.raises(ValueError, match="cannot be scored"):
        search.fit(X, np.clip(y, *y_bound))
    assert acc.n_spends == 0


def test_privacy_spent_of_a_search_is_its_own_ledger():
    from skprivreg import privacy_spent

    X, y = _data()
    search = _search().fit(X, y)
    assert privacy_spent(search) == search.privacy_spent_.guarantee


def test_refit_on_all_rows_composes_with_the_selection():
    X, y = _data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = _search(refit_budget=0.25, accountant=acc).fit(X, y)
    selection, refit = search.privacy_spent_.events
    assert selection.epsilon <= 3.0 * (1 + 1e-9) and selection.delta == pytest.approx(5e-7)
    assert (refit.epsilon, refit.delta) == pytest.approx((1.0, 5e-7))
    assert search.privacy_spent_.epsilon <= 4.0 * (1 + 1e-9)
    assert acc.ledgers == [search.privacy_spent_]
    model = search.best_estimator_
    assert model.epsilon == pytest.approx(1.0) and model.accountant is acc
    model.fit(X, y)  # a refit of the released model is a new fit, charged to the budget
    assert acc.n_spends == 2 and acc.ledgers[1] is model.privacy_spent_
    assert model.privacy_spent_.epsilon == pytest.approx(1.0)
    assert search.candidate_epsilon_ < _search().fit(X, y).candidate_epsilon_


@pytest.mark.parametrize("eta", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("mean", [3.0, 10.0])
def test_selection_bound_matches_google_dp_accounting(eta, mean):
    # dp-accounting's RepeatAndSelectDpEvent implements Papernot & Steinke (2022)
    # independently; at the same orders our curve is never below its curve and
    # the (epsilon, delta) conversions agree.
    dp_event = pytest.importorskip("dp_accounting.dp_event")
    rdp_accountant = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    from skprivreg.accounting import gaussian_rdp

    mu = 0.5
    acc = rdp_accountant.RdpAccountant(orders=list(RDP_ORDERS))
    acc.compose(dp_event.RepeatAndSelectDpEvent(dp_event.GaussianDpEvent(1 / mu), mean, eta))
    ours = private_selection_rdp(gaussian_rdp(mu), eta, tnb_gamma_for_mean(eta, mean))
    assert np.all(ours >= acc._rdp * (1 - 1e-9))
    assert rdp_to_dp(ours, 1e-6) == pytest.approx(acc.get_epsilon(1e-6), rel=1e-8)
    laplace = rdp_accountant.RdpAccountant(orders=list(RDP_ORDERS))
    laplace.compose(dp_event.LaplaceDpEvent(1 / 0.7))
    # Ours adds a rounding allowance of a few ulps of its terms: never below.
    assert np.all(laplace_rdp(0.7) >= laplace._rdp)
    np.testing.assert_allclose(laplace_rdp(0.7), laplace._rdp, rtol=1e-11)


def test_verbose_prints_public_facts_only_and_no_line_per_run(capsys):
    # The number of runs is a fresh secret draw in every fit, and the data
    # differ in one row: the lines must not change.
    X, y = _data(n=3000)
    X2, y2 = X.copy(), y.copy()
    X2[5], y2[5] = [1.0, -1.0, 1.0], -6.0
    estimator = AdaSSPRegressor(x_bound=2.0, y_bound=6.5, verbose=1)  # runs stay silent
    outputs = []
    for data in ((X, y), (X2, y2), (X, y), (X2, y2)):
        _search(estimator=estimator, refit_budget=0.25, n_repetitions=5, verbose=1).fit(*data)
        outputs.append(capsys.readouterr().out)
    assert len(set(outputs)) == 1
    lines = outputs[0].splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("[PrivateGridSearchCV] 2 candidates, per-run epsilon")
    assert lines[1:3] == ["[PrivateGridSearchCV] selection done",
                          "[PrivateGridSearchCV] refit on 3,000 rows"]
    assert lines[3] == "[AdaSSPRegressor] pass 1 (XtX, XtY): 3,000 / 3,000 rows"


# -- the cap on the secret number of repetitions --------------------------
@pytest.mark.parametrize("epsilon, delta, mean_k", [(10.0, 1e-12, 10), (20.0, 1e-15, 10),
                                                    (1.0, 1e-6, 10), (5.0, 1e-14, 100),
                                                    # the pmf underflows; 1 + e^eps overflows
                                                    (600.0, 1e-100, 10), (400.0, 1e-200, 10),
                                                    (750.0, 1e-5, 10)])
def test_cap_tail_is_charged_exactly_at_small_delta(epsilon, delta, mean_k):
    # Geometric K (eta = 1): P[K > cap] = (1 - gamma)^cap exactly. Summing the tail as
    # 1 - cumsum(pmf) cancels to 0 below about 1e-16 and charged nothing for the cap.
    from skprivreg._rdp import tnb_log_pmf
    from skprivreg.model_selection._selection_plan import _cap_and_delta

    gamma = tnb_gamma_for_mean(1.0, mean_k)
    log_pmf = tnb_log_pmf(1.0, gamma, 100_000)  # the largest table the search uses
    cap, conversion_delta = _cap_and_delta(log_pmf, delta, epsilon, 1.0, gamma)
    log_charged = np.logaddexp(0.0, epsilon) + cap * math.log1p(-gamma)
    assert log_charged <= math.log(0.1 * delta)
    assert conversion_delta <= delta - math.exp(log_charged) * (1 - 1e-6)


@pytest.mark.parametrize("eta", [-0.5, 0.0, 0.5, 2.0])
def test_cap_tail_bounds_the_mass_beyond_the_table(eta):
    # The tail past the table's end is bounded by a geometric series; checked against a
    # table 20x longer, summed from its far end.
    from skprivreg._rdp import tnb_log_pmf
    from skprivreg.model_selection._selection_plan import _cap_and_delta

    gamma = tnb_gamma_for_mean(eta, 10)
    short, long_ = tnb_log_pmf(eta, gamma, 3000), tnb_pmf(eta, gamma, 60000)
    epsilon, delta = 2.0, 1e-3
    cap, conversion_delta = _cap_and_delta(short, delta, epsilon, eta, gamma)
    tail = float(np.cumsum(long_[::-1])[::-1][cap])  # P[K > cap], to 1e-300
    factor = 1 + math.exp(epsilon)
    assert factor * tail <= 0.1 * delta
    assert conversion_delta <= delta - factor * tail


def test_uncappable_repetitions_are_refused_before_any_spend():
    X, y = _data(n=1000)
    acc = BudgetAccountant(epsilon=100.0, delta=0.5)
    with pytest.raises(ConfigurationError, match="cannot be capped"):
        _search(accountant=acc, epsilon=50.0, delta=1e-30, n_repetitions=2000).fit(X, y)
    assert acc.n_spends == 0


def test_private_steps_nested_in_the_candidate_are_refused_before_any_spend():
    # The search allots its budget to the final estimator; a nested private step would be
    # fitted again in every secret run, outside the guarantee.
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline

    from skprivreg.preprocessing import PrivateStandardScaler

    X, y = _data(n=1000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    scaler = PrivateStandardScaler(epsilon=1.0, x_range=(-1.0, 1.0), accountant=acc)
    nested = [
        Pipeline([("inner", Pipeline([("scale", scaler)])),
                  ("reg", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))]),
        Pipeline([("cols", ColumnTransformer([("scale", scaler, [0, 1, 2])],
                                             sparse_threshold=0)),
                  ("reg", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))]),
        make_private_pipeline(scaler, AdaSSPRegressor(x_bound=2.0, y_bound=6.5)),
    ]
    for pipe in nested:
        with pytest.raises(ConfigurationError, match="is private"):
            _search(estimator=pipe, accountant=acc,
                    param_grid={"reg__x_bound" if "reg" in pipe.named_steps
                                else "adasspregressor__x_bound": [1.0, 2.0]}).fit(X, y)
    assert acc.n_spends == 0


def test_a_fitted_search_is_saved_without_the_accountants_it_holds():
    import pickle

    X, y = _data(n=1000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    template = AdaSSPRegressor(x_bound=2.0, y_bound=6.5, accountant=acc)
    search = _search(estimator=template, accountant=acc).fit(X, y)
    loaded = pickle.loads(pickle.dumps(search))
    assert isinstance(loaded.accountant, DetachedAccountant)
    assert isinstance(loaded.estimator.accountant, DetachedAccountant)
    assert search.estimator.accountant is acc  # the live object keeps its handle
    np.testing.assert_array_equal(loaded.predict(X), search.predict(X))
    assert loaded.privacy_spent_.epsilon == search.privacy_spent_.epsilon
    with pytest.raises(TypeError, match="cannot be pickled"):  # unfitted: still refused
        pickle.dumps(_search(estimator=template))


def test_param_grid_cannot_put_leaking_or_private_steps_into_the_pipeline():
    from sklearn.pipeline import Pipeline

    from skprivreg.preprocessing import PrivateStandardScaler

    X, y = _data(n=1000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    pipe = Pipeline([("scale", "passthrough"), ("reg", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))])
    for step, match in [(PrivateStandardScaler(epsilon=1.0, x_range=(-1.0, 1.0)), "is private"),
                        (StandardScaler(), "standardscaler|StandardScaler")]:
        with pytest.raises(ConfigurationError, match=match):
            _search(estimator=pipe, accountant=acc,
                    param_grid={"scale": ["passthrough", step]}).fit(X, y)
    assert acc.n_spends == 0


def test_nan_reaching_a_pipelines_estimator_is_refused_before_any_spend():
    from sklearn.impute import SimpleImputer

    X, y = _data(n=1000)
    X[5, 1] = np.nan
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    pipe = make_private_pipeline(BoundedScaler(x_range=(-1.0, 1.0)),
                                 AdaSSPRegressor(x_bound=2.0, y_bound=6.5))
    with pytest.raises(ValueError, match="NaN"):
        _search(estimator=pipe, accountant=acc,
                param_grid={"adasspregressor__x_bound": [1.0, 2.0]}).fit(X, y)
    assert acc.n_spends == 0
    # A head that fills missing values with a constant makes the rows finite: the search runs.
    imputing = make_private_pipeline(SimpleImputer(strategy="constant", fill_value=0.0,
                                                   keep_empty_features=True),
                                     AdaSSPRegressor(x_bound=2.0, y_bound=6.5))
    _search(estimator=imputing, accountant=acc,
            param_grid={"adasspregressor__x_bound": [1.0, 2.0]}).fit(X, y)
    assert acc.n_spends == 1


def test_runs_print_nothing_whichever_step_or_pipeline_is_verbose(capsys):
    # A verbose Pipeline printed a line per step per run: their count revealed the secret
    # number of runs.
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, y = _data(n=1000)
    pipe = Pipeline([("f", FunctionTransformer()),
                     ("reg", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))], verbose=True)
    _search(estimator=pipe, param_grid={"reg__x_bound": [1.0, 2.0]}).fit(X, y)
    out = capsys.readouterr()
    assert "[Pipeline]" not in out.out + out.err


def test_every_distinct_head_is_checked_for_nan_before_any_spend():
    # Two heads whose reprs are equal (numpy elides long arrays): the second, which makes
    # NaN from negative values, was skipped by a check keyed on the repr.
    from sklearn.preprocessing import FunctionTransformer

    from skprivreg.preprocessing import rowwise

    X, y = _data(n=1000)
    good = np.ones(2000)
    bad = np.ones(2000)
    bad[1000] = np.nan  # a long array: its repr is elided
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)

    @rowwise
    def scale(X, weights):
        return X * weights[1000]

    pipe = make_private_pipeline(FunctionTransformer(scale, kw_args={"weights": good}),
                                 AdaSSPRegressor(x_bound=2.0, y_bound=6.5))
    heads = [FunctionTransformer(scale, kw_args={"weights": good}),
             FunctionTransformer(scale, kw_args={"weights": bad})]
    assert repr(heads[0]) == repr(heads[1])
    with pytest.raises(ValueError, match="NaN"):
        _search(estimator=pipe, accountant=acc,
                param_grid={"functiontransformer": heads}).fit(X, y)
    assert acc.n_spends == 0


@pytest.mark.parametrize("eta", [-1e-12, -1e-9, 1e-12, 1e-9])
def test_repetition_law_sums_to_one_for_small_eta(eta):
    # gamma^-eta - 1 cancelled for small |eta|: the pmf summed to 1 - 1.3e-5 and the
    # search put the missing mass on its cap, a law it was not accounted under.
    gamma = tnb_gamma_for_mean(eta, 10)
    assert abs(tnb_pmf(eta, gamma, 20_000).sum() - 1.0) < 1e-12


def test_runs_leave_no_cache_entries_and_call_no_callbacks(tmp_path):
    # A pipeline's cache stored one entry per run (and printed rows when verbose);
    # fit callbacks were called with each run's rows: both counted the secret runs.
    from sklearn.pipeline import Pipeline

    X, y = _data(n=1000)
    pipe = Pipeline([("scale", BoundedScaler(x_range=(-1.0, 1.0))),
                     ("reg", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))],
                    memory=str(tmp_path / "cache"))
    calls = []

    class Count:
        def setup(self, estimator, context):
            calls.append("setup")

        def teardown(self, estimator, context):
            pass

        def on_fit_task_begin(self, estimator, context, **kwargs):
            calls.append("begin")

        def on_fit_task_end(self, estimator, context, **kwargs):
            return False

    if hasattr(pipe, "set_callbacks"):
        pipe.set_callbacks(Count())
    _search(estimator=pipe, param_grid={"reg__x_bound": [1.0, 2.0]}).fit(X, y)
    cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert cached == [] and calls == []


@pytest.mark.parametrize("refusal", ["infeasible", "configuration"])
def test_a_run_refused_after_the_spend_is_a_failed_run_not_an_escape(monkeypatch, refusal):
    # A candidate can refuse a run's training part from public facts (a label-DP bag
    # design: PrivacyInfeasibleError), or from a value the run released (the
    # perturbation Lasso's penalty on a privately estimated label bound:
    # ConfigurationError). Raised after the spend, the refusal escaped the search with
    # a chance that grows with the secret number of runs.
    from skprivreg.exceptions import PrivacyInfeasibleError, PrivateTestFailed

    error = {"infeasible": PrivacyInfeasibleError, "configuration": ConfigurationError}[refusal]
    X, y = _data(n=1000)
    original, calls = AdaSSPRegressor.fit, []

    def first_run_refused(self, X_run, y_run):
        if np.isin(X_run[:, 0], X[:, 0]).all():  # a run on the real rows, not a dry run
            calls.append(1)
            if len(calls) == 1:
                raise error("refused")
        return original(self, X_run, y_run)

    monkeypatch.setattr(AdaSSPRegressor, "fit", first_run_refused)
    for _ in range(3):
        calls.clear()
        try:
            _search(n_repetitions=4).fit(X, y)
        except PrivateTestFailed:
            assert calls == [1]  # one run, and it failed: the documented outcome
        assert calls


def test_text_or_sparse_rows_from_a_head_are_refused_before_any_spend():
    # The head's output was checked for NaN only: a text entry (one record) or a sparse
    # output was refused by the private estimator inside the first run, after the spend.
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

    X, y = _data(n=1000)
    text = X.astype(object)
    text[17, 0] = "n/a"
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    pipe = Pipeline([("id", FunctionTransformer(None)),
                     ("fit", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))])
    with pytest.raises(ValueError, match="could not convert"):
        _search(estimator=pipe, accountant=acc,
                param_grid={"fit__fit_intercept": [True, False]}).fit(text, y)
    assert acc.n_spends == 0
    codes = np.random.default_rng(0).integers(0, 3, size=(1000, 2)).astype(float)
    encoded = Pipeline([("enc", OneHotEncoder(categories=[[0.0, 1.0, 2.0]] * 2,
                                              handle_unknown="ignore")),
                        ("fit", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))])
    with pytest.raises(TypeError, match="[Ss]parse"):
        _search(estimator=encoded, accountant=acc,
                param_grid={"fit__fit_intercept": [True, False]}).fit(codes, y)
    assert acc.n_spends == 0
    # Numbers stored as objects are what the estimator reads too: the search runs.
    _search(estimator=pipe, accountant=acc,
            param_grid={"fit__fit_intercept": [True, False]}).fit(X.astype(object), y)
    assert acc.n_spends == 1


def test_a_nested_accountant_is_never_charged_by_the_runs():
    # Its count of fits revealed the secret number of runs.
    from skprivreg.label_dp import GaussianLabelNoiseRegressor

    X, y = _data(n=2000)
    inner = BudgetAccountant(epsilon=1e6, delta=0.5)
    est = GaussianLabelNoiseRegressor(
        y_bound=6.5, estimator=AdaSSPRegressor(epsilon=1.0, x_bound=3.0, y_bound=20.0,
                                               accountant=inner))
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = PrivateGridSearchCV(estimator=est, param_grid={"fit_intercept": [True, False]},
                                 epsilon=2.0, delta=1e-6, n_repetitions=5, accountant=acc)
    # Another accountant inside the private step would record nothing of the search:
    # refused before the spend (it was silently left out).
    with pytest.raises(ConfigurationError, match="not charged by a private search"):
        search.fit(X, y)
    assert inner.n_spends == 0 and acc.n_spends == 0
    # The search's own accountant there too: charged once, by the search.
    est.set_params(estimator__accountant=acc)
    search.fit(X, y)
    assert acc.n_spends == 1
    with pytest.raises(ValueError, match="may not set 'estimator__accountant'"):
        PrivateGridSearchCV(estimator=est, param_grid={"estimator__accountant": [None]},
                            epsilon=2.0, delta=1e-6).fit(X, y)


def test_a_pure_dp_candidate_without_delta_is_tuned():
    # The search set a delta on every candidate: one without that parameter (randomized
    # response on bins, pure epsilon-DP) could not be tuned at all.
    from skprivreg.label_dp import RROnBinsRegressor

    X, y = _data(n=20_000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = PrivateGridSearchCV(estimator=RROnBinsRegressor(y_bound=8.0),
                                 param_grid={"n_cells": [16, 64]}, epsilon=2.0, delta=1e-6,
                                 accountant=acc)
    search.fit(X, np.clip(y, -8.0, 8.0))
    assert acc.n_spends == 1 and 0 < search.candidate_epsilon_ < 2.0
    assert search.best_estimator_.privacy_spent_ is search.privacy_spent_
    assert "delta" not in search.best_estimator_.get_params()


def test_candidates_that_estimate_bounds_are_planned_from_a_feasible_epsilon():
    # The plan started at a per-run epsilon of 1e-4, where estimating a bound privately
    # needs tens of millions of rows: such candidates could not be tuned below that.
    X, y = _data(n=40_000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = PrivateGridSearchCV(estimator=AdaSSPRegressor(),
                                 param_grid={"fit_intercept": [True, False]},
                                 epsilon=4.0, delta=1e-6, y_bound=6.5, accountant=acc)
    search.fit(X, y)
    assert acc.n_spends == 1 and np.isfinite(search.best_estimator_.x_bound_)
    # Infeasible even at the whole budget per run: the candidate's own refusal, before
    # any spend.
    with pytest.raises(ConfigurationError, match="needs at least"):
        PrivateGridSearchCV(estimator=AdaSSPRegressor(),
                            param_grid={"fit_intercept": [True, False]}, epsilon=4.0,
                            delta=1e-6, y_bound=6.5, accountant=acc).fit(X[:300], y[:300])
    assert acc.n_spends == 1


def test_reusecov_with_the_papers_split_and_estimated_bounds_is_tuned_at_any_scale():
    # Its covariance share followed the estimated bounds: runs on data of another scale
    # than the synthetic planning data exceeded their planned curve after the spend.
    from skprivreg.linear_model import ReuseCovRegressor

    X, y = _data(n=40_000)
    for scale in (1.0, 0.1):
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        PrivateGridSearchCV(estimator=ReuseCovRegressor(composition="paper"),
                            param_grid={"fit_intercept": [True, False]}, epsilon=4.0,
                            delta=1e-6, y_bound=6.5, accountant=acc).fit(scale * X, y)
        assert acc.n_spends == 1


def test_each_run_gets_the_searchs_delta_whatever_the_template_declares():
    # The search allots (epsilon, delta): a candidate's own delta is replaced (the
    # selection's half with a refit budget), and only a pure-DP candidate has none.
    X, y = _data(n=2000)
    for refit_budget, share in ((0.0, 1.0), (0.2, 0.5)):
        search = PrivateGridSearchCV(
            estimator=AdaSSPRegressor(x_bound=2.0, y_bound=6.5, delta=1e-2),
            param_grid={"fit_intercept": [True, False]}, epsilon=2.0, delta=1e-6,
            refit_budget=refit_budget)
        search.fit(X, y)
        assert search.best_estimator_.delta == pytest.approx(share * 1e-6, rel=1e-12)


class _SpendsMoreOnLargeValues(AdaSSPRegressor):
    """A candidate whose spend follows the data: twice its epsilon when an entry of X
    exceeds 100 (what a budget split chosen from estimated bounds can do)."""

    def fit(self, X, y):
        epsilon = self.epsilon
        if np.max(np.abs(np.asarray(X))) > 100.0:
            self.epsilon = 2.0 * epsilon
        try:
            return super().fit(X, y)
        finally:
            self.epsilon = epsilon


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_a_candidate_whose_curve_follows_the_data_is_refused_before_any_spend(scale):
    # Planned from unit-scale synthetic data alone, runs on data of scale 1000 would
    # exceed the planned curve and stop the search after the spend. The refusal
    # comes from synthetic data only: the same at every scale of the real data.
    X, y = _data(n=2000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = PrivateGridSearchCV(
        estimator=_SpendsMoreOnLargeValues(x_bound=2.0 * scale, y_bound=6.5 * scale),
        param_grid={"fit_intercept": [True, False]}, epsilon=4.0, delta=1e-6,
        n_repetitions=2, accountant=acc)
    with pytest.raises(ConfigurationError, match="depends on the data"):
        search.fit(scale * X, scale * y)
    assert acc.n_spends == 0


def test_estimators_given_in_the_grid_are_cloned_for_every_run():
    # A run fitted the user's grid object in place: a model of a run that was not
    # selected was left on it (reachable from best_params_), later runs overwrote the
    # winner's model inside best_estimator_, and the object's parameters were changed.
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, y = _data(n=4000)
    acc = BudgetAccountant(epsilon=100.0, delta=1e-3)
    steps = [AdaSSPRegressor(x_bound=2.0, y_bound=6.5),
             AdaSSPRegressor(x_bound=2.0, y_bound=6.5, fit_intercept=False, verbose=1)]
    before = [step.get_params() for step in steps]
    pipe = Pipeline([("head", FunctionTransformer()),
                     ("reg", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))])
    search = _search(estimator=pipe, param_grid={"reg": steps}, accountant=acc,
                     n_repetitions=6).fit(X, y)
    for step, params in zip(steps, before):
        assert not hasattr(step, "coef_") and not hasattr(step, "privacy_spent_")
        assert step.get_params() == params
    final = search.best_estimator_[-1]
    assert all(final is not step for step in steps) and hasattr(final, "coef_")
    assert search.best_params_["reg"] is steps[search.best_index_]
    np.testing.assert_array_equal(search.predict(X[:5]), final.predict(X[:5]))


def test_an_accountant_on_the_tuned_estimator_must_be_the_searchs():
    # The runs are fitted without it, so a search with another accountant (or none)
    # recorded nothing on it: a budget the user attached was bypassed.
    import pickle

    X, y = _data(n=4000)
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5)
    template = AdaSSPRegressor(x_bound=2.0, y_bound=6.5, accountant=acc)
    for other in (None, BudgetAccountant(epsilon=10.0, delta=1e-3)):
        with pytest.raises(ConfigurationError, match="not charged by a private search"):
            _search(estimator=template, accountant=other).fit(X, y)
        assert other is None or other.n_spends == 0
    pipe = make_private_pipeline(BoundedScaler(x_range=(-1.0, 1.0)), template)
    with pytest.raises(ConfigurationError, match="not charged by a private search"):
        _search(estimator=pipe, param_grid={"adasspregressor__x_bound": [1.0, 2.0]}).fit(X, y)
    assert acc.n_spends == 0
    # Nor through an estimator that a candidate puts in place of the private step.
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    grid_pipe = Pipeline([("head", FunctionTransformer()),
                          ("reg", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))])
    with pytest.raises(ConfigurationError, match="not charged by a private search"):
        _search(estimator=grid_pipe,
                param_grid={"reg": [AdaSSPRegressor(x_bound=2.0, y_bound=6.5),
                                    AdaSSPRegressor(x_bound=1.0, y_bound=6.5,
                                                    accountant=acc)]}).fit(X, y)
    assert acc.n_spends == 0
    # The same accountant on both is charged once, by the search.
    big = BudgetAccountant(epsilon=10.0, delta=1e-3)
    fitted = _search(estimator=AdaSSPRegressor(x_bound=2.0, y_bound=6.5, accountant=big),
                     accountant=big).fit(X, y)
    assert big.n_spends == 1
    # A search loaded from a pickle: its template's accountant refuses the refit.
    loaded = pickle.loads(pickle.dumps(fitted))
    loaded.set_params(accountant=None)
    with pytest.raises(ConfigurationError, match="loaded from a pickle"):
        loaded.fit(X, y)


@pytest.mark.parametrize("refit_budget", [0.0, 0.3])
def test_the_selected_model_states_the_whole_searchs_ledger(refit_budget):
    # It was chosen by the noisy scores of every run: its own run's (or refit's)
    # ledger understated what releasing it costs.
    from skprivreg.pipeline import privacy_spent

    X, y = _data(n=4000)
    search = _search(refit_budget=refit_budget, epsilon=1.0, delta=1e-6).fit(X, y)
    assert search.best_estimator_.privacy_spent_ is search.privacy_spent_
    spent = privacy_spent(search.best_estimator_)
    assert (spent.epsilon, spent.delta) == (search.privacy_spent_.epsilon,
                                            search.privacy_spent_.delta)
    assert spent.epsilon > 0.9
