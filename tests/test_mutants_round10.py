"""Round 10 of the mutation tests: each test kills a mutant that survived every other test.

Mutants of the full-DP LinearRegression (its documented budget weights, the
values it derives from released statistics: the residual clip, the
selection cap, the mean fallback), of its range blocks, of
BoostedAdaSSPRegressor, IndependentSSPRegressor and TukeyEMRegressor, of
ReuseCov's covariance reuse, and of the row source and the Gram pass. The
mutant is named in each test. Exact checks: the released values are
captured (reproducible noise, or a spy that calls the real mechanism) and
every quantity the estimator derives from them is recomputed here from the
docstring's formula; no statistical test here.
"""

import math

import numpy as np
import pytest

import skprivreg.linear_model._linear as lin
from skprivreg.accounting import gdp_mu
from skprivreg.mechanisms import gdp_split

from ._privacy_harness import capture_linear, quiet, regression_data


# -- LinearRegression: the documented budget split ----------------------------------------
def _documented_weights(n, mu, n_rounds):
    """The weights of the class docstring's **Budget split** (declared ranges)."""
    w_mean = min(max((100.0 / (n * mu)) ** 2, 0.02), 0.5)
    rest = 1.0 - w_mean
    weights = {"label_moments": w_mean, "XtX": 0.30 * rest}
    if n_rounds == 1:
        weights["Xty"] = 0.63 * rest
    else:
        weights["Xty"] = 0.15 * rest
        weights["residual_scale"] = 0.03 * rest
        for t in range(1, n_rounds):
            weights[f"gradient_{t}"] = 0.45 * rest / (n_rounds - 1)
    weights["selection"] = 0.07 * rest
    return weights


@pytest.mark.parametrize("n, n_rounds", [(6000, 4), (20000, 1), (400, 3)])
def test_linear_regression_releases_get_the_documented_shares_of_mu(n, n_rounds):
    # Kills L01 (rest = 1 instead of 1 - w_m: gdp_split normalises the weights, so
    # the label moments get w_m / (1 + w_m) of mu^2, not the documented w_m, and
    # every other release (1 - w_m)-times its documented share over (1 + w_m)).
    X, y = regression_data(n=n)
    epsilon, delta = 1.0, 1e-6
    est, captured = capture_linear(X, y, epsilon=epsilon, delta=delta, x_range=(-1.0, 1.0),
                                   y_bound=(-8.0, 8.0), n_rounds=n_rounds)
    mu = gdp_mu(epsilon, delta)
    weights = _documented_weights(n, mu, n_rounds)
    assert [name for name, _, _ in captured] == list(weights)
    expected = dict(zip(weights, gdp_split(mu, list(weights.values()))))
    for name, _, event in captured:
        assert event.mu == pytest.approx(expected[name], rel=1e-12), name
        assert event.mu == pytest.approx(mu * math.sqrt(weights[name]), rel=1e-12), name


# -- LinearRegression: values derived from released statistics only --------------------------
def _released(captured, name):
    (value,) = [v for nm, v, _ in captured if nm == name]
    return value


def _event(captured, name):
    (event,) = [e for nm, _, e in captured if nm == name]
    return event


def _linear_fit(**params):
    rng = np.random.default_rng(11)
    n = 20000
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + 2.0 * rng.normal(size=n)
    return n, *capture_linear(X, y, epsilon=2.0, delta=1e-6, x_range=(-1.0, 1.0),
                              y_bound=(-12.0, 12.0), **params)


def test_linear_regression_residual_clip_comes_from_the_released_second_moment():
    # Kills L16 (the clip C = 3 rms computed from the exact clipped residual second
    # moment, not its noisy release: the clip, and the gradients' sensitivity 2 C R,
    # then depend on the data through a value nobody paid for).
    n, est, captured = _linear_fit(n_rounds=3)
    noisy = float(_released(captured, "residual_scale")[0])
    floor = 2.0 * _event(captured, "residual_scale").sigma
    assert noisy > floor  # the floor does not decide here (it does only near 0)
    expected = min(3.0 * math.sqrt(max(noisy, floor, 1e-12) / n), 2.0)
    assert expected < 2.0
    assert est.residual_clip_ == expected


def _selection_cap(noisy_moments, n):
    u_mean = float(np.clip(noisy_moments[0] / n, -1.0, 1.0))
    u_var = float(np.clip(noisy_moments[1] / n - u_mean**2, 1e-6, 4.0))
    return u_mean, float(min(max(9.0 * u_var, 1e-4), 4.0))


def test_linear_regression_selection_cap_comes_from_the_released_label_moments():
    # Kills L19 (the label variance behind the selection cap K read from the exact
    # label moments: the selection's sensitivity 2K, its noise scale and the clip of
    # each term then depend on the data through an unreleased value).
    n, est, captured = _linear_fit(n_rounds=2)
    _, cap = _selection_cap(_released(captured, "label_moments"), n)
    assert 1e-4 < cap < 4.0  # neither clip of K decides here
    assert _event(captured, "selection").sensitivity == 2.0 * cap


def test_linear_regression_mean_fallback_intercept_is_the_released_mean():
    # Kills L20 (the mean predictor's intercept computed from the exact label sum,
    # not from its noisy release: a fit that degrades to the mean published the
    # exact mean of the clipped labels).
    rng = np.random.default_rng(5)
    n = 3000
    X = rng.uniform(-1.0, 1.0, size=(n, 2))
    y = 1.0 + rng.normal(size=n)  # no signal: the model has no advantage
    est, captured = capture_linear(X, y, epsilon=1.0, delta=1e-6, x_range=(-1.0, 1.0),
                                   y_bound=(-6.0, 10.0), n_rounds=2)
    assert est.mean_fallback_
    assert np.all(est.coef_ == 0.0)
    u_mean, _ = _selection_cap(_released(captured, "label_moments"), n)
    assert est.intercept_ == 2.0 + 8.0 * u_mean


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_linear_regression_ridge_is_twice_the_gram_noise_norm_bound(fit_intercept):
    # Kills L22 (a ridge that also depends on the exact A^T u: the docstring's
    # lambda = 2 sigma_G sqrt(p) is a function of public numbers only, and no
    # budget is spent on it).
    n, est, captured = _linear_fit(n_rounds=2, fit_intercept=fit_intercept)
    p = 3 + int(fit_intercept)
    assert est.ridge_ == 2.0 * _event(captured, "XtX").sigma * math.sqrt(p)


def test_linear_regression_settled_events_keep_the_planned_delta_shares():
    # Kills L21 (each release's event recorded at the whole delta instead of its
    # share delta / k: the settled ledger's events no longer match the planned
    # ledger spent before the first draw, and their (epsilon, delta) pairs, which a
    # basic composition of the events adds, sum to k times the fit's delta).
    n, est, captured = _linear_fit(n_rounds=3)
    events = est.privacy_spent_.events
    plan = lin._plan(est, n, 3)
    planned = lin.planned_ledger(plan, est.delta, est.fit_intercept).events
    assert [e.name for e in events] == [e.name for e in planned]
    for settled, spent in zip(events, planned):
        assert settled.delta == spent.delta == est.delta / len(events)
        assert settled.mu == spent.mu
    assert sum(e.delta for e in events) <= est.delta * (1 + 1e-12)


@pytest.mark.parametrize("x_range, y_bound", [(None, None), (None, (-12.0, 12.0)),
                                              ((-1.0, 1.0), None)])
def test_linear_regression_private_bounds_use_their_recorded_epsilon(monkeypatch, x_range,
                                                                      y_bound):
    # Kills L26 (the missing ranges released with twice the epsilon their pure-DP
    # events record: half the noise of the bound each ledger says was spent). Each
    # missing range gets bounds_budget * epsilon / (number missing). Also kills L37
    # (the rows clipped to 1.5 times the released row bound: x_bound_ is then not
    # the released value; a behaviour change only, the clip and the mean's
    # sensitivity 2 x_clip move together).
    import skprivreg.linear_model._linear as lin_module

    seen = []
    real = lin_module.private_norm_bound

    def spy(counts, n, epsilon, rng, **kwargs):
        out = real(counts, n, epsilon, rng, **kwargs)
        seen.append((kwargs.get("name"), epsilon, out[0]))
        return out

    monkeypatch.setattr(lin_module, "private_norm_bound", spy)
    X, y = regression_data(n=20000)
    epsilon = 2.0
    est, _ = capture_linear(X, y, epsilon=epsilon, x_range=x_range, y_bound=y_bound,
                            n_rounds=2)
    missing = [name for name, v in (("x_bound", x_range), ("y_bound", y_bound)) if v is None]
    recorded = {e.name: e.epsilon for e in est.privacy_spent_.events if e.name in missing}
    assert [name for name, _, _ in seen] == missing
    for name, eps, bound in seen:
        assert eps == recorded[name]
        assert eps == pytest.approx(0.1 * epsilon / len(missing), rel=1e-12)
        assert getattr(est, name + "_") == bound


def test_mapped_rows_norm_clip_is_exact_at_the_row_bound():
    # Kills R04 (rows scaled to the row bound itself instead of its clip threshold:
    # about half of the scaled rows then lie a few ulps above the bound that every
    # sensitivity of the private-range path assumes, checked here in exact arithmetic).
    from fractions import Fraction

    from skprivreg.linear_model._range_blocks import RangeMap, _mapped

    rng = np.random.default_rng(0)
    d = 5
    X = rng.uniform(-3.0, 3.0, size=(2000, d))
    rmap = RangeMap(np.zeros(d), np.ones(d), 0.0, 1.0, 1.0, False)
    Z, _ = _mapped(X, None, rmap)
    norms_squared = [sum(Fraction(float(v)) ** 2 for v in row) for row in Z]
    assert min(norms_squared) > Fraction(1, 2)  # every row was scaled
    assert max(norms_squared) <= 1


@pytest.mark.parametrize("x_range", [(100.0, 101.0), (-1e120, 1e120)])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_mapped_first_pass_refuses_nan_or_inf_before_any_spend(x_range, bad):
    # Kills R23 (the first pass of a map that is not summed in raw space -- a far
    # offset |center| > 16 half, or a vast range -- mapped its rows unchecked: NaN
    # went into every released sum, an infinity was clipped to the range's edge,
    # and the later in-memory passes do not check again).
    from skprivreg.accounting import BudgetAccountant
    from skprivreg.linear_model import LinearRegression
    from skprivreg.linear_model._linear import range_map

    assert range_map(x_range, (-1.0, 1.0), 2).raw_affine is None  # the mapped path
    rng = np.random.default_rng(2)
    n = 3000
    low, high = x_range
    X = rng.uniform(max(low, -10.0), min(high, 110.0), size=(n, 2))
    y = rng.uniform(-1.0, 1.0, size=n)
    X[1234, 1] = bad
    acc = BudgetAccountant(epsilon=5.0, delta=1e-4)
    with pytest.raises(ValueError, match="NaN|infinity"):
        LinearRegression(epsilon=1.0, x_range=x_range, y_bound=(-1.0, 1.0),
                         accountant=acc).fit(X, y)
    assert acc.n_spends == 0


# -- BoostedAdaSSPRegressor: the adaptive ridge from the released smallest eigenvalue ---------
def test_boosted_adassp_ridge_comes_from_the_released_smallest_eigenvalue(monkeypatch):
    # Kills B09 (lambda_min used without its noise: the ridge, and every solve after
    # it, then depend on the exact smallest eigenvalue, while the ledger records a
    # release of it) and B17 (the shifted eigenvalue max(lambda~ - sigma z, 0) taken
    # from the exact lambda_min instead of the released lambda~). Also kills B15 (one
    # boosting round more than the ledger records: every noisy draw must be one
    # event's, at that event's sigma).
    from scipy.stats import norm

    import skprivreg.linear_model._boosted_adassp as boosted
    from skprivreg.linear_model import BoostedAdaSSPRegressor

    draws, ridges = [], []
    real_add, real_ridge = boosted.add_gaussian, boosted.adassp_ridge

    def add_spy(value, sigma, rng):
        noisy = real_add(value, sigma, rng)
        draws.append((np.shape(value), sigma, noisy))
        return noisy

    def ridge_spy(shifted, gram_sigma, p, failure_prob):
        ridges.append((shifted, gram_sigma, p, failure_prob))
        return real_ridge(shifted, gram_sigma, p, failure_prob)

    monkeypatch.setattr(boosted, "add_gaussian", add_spy)
    monkeypatch.setattr(boosted, "adassp_ridge", ridge_spy)
    X, y = regression_data(n=20000, d=2)
    est = BoostedAdaSSPRegressor(epsilon=1.0, x_bound=2.0, y_bound=6.0, n_rounds=3,
                                 failure_prob=0.05).fit(X, y)
    lam_event, gram_event = est.privacy_spent_.events[:2]
    assert len(draws) == 1 + 3  # lambda_min, then one gradient per round
    gradient_events = est.privacy_spent_.events[2:]
    assert [sigma for _, sigma, _ in draws[1:]] == [e.sigma for e in gradient_events]
    shape, sigma, noisy = draws[0]
    assert shape == () and sigma == lam_event.sigma
    expected = max(float(noisy) - lam_event.sigma * norm.ppf(1 - 0.05 / 3), 0.0)
    assert expected > 0.0  # the shift does not clip to 0 here
    assert ridges == [(expected, gram_event.sigma, 3, 0.05)]


def test_boosted_adassp_gram_noise_is_drawn_at_the_recorded_sigma_and_added(monkeypatch):
    # Kills B16 (the Gram matrix released with half its recorded noise scale: the
    # existing noise tests check the gradients' noise only). The preconditioner every
    # round solves with must be the exact clipped A^T A plus the drawn symmetric noise
    # plus the ridge.
    import skprivreg.linear_model._boosted_adassp as boosted
    from skprivreg.linear_model import BoostedAdaSSPRegressor

    drawn, solved = [], []
    real_matrix, real_solve = boosted.symmetric_gaussian_matrix, boosted.solve_psd_repaired

    def matrix_spy(p, sigma, rng):
        E = real_matrix(p, sigma, rng)
        drawn.append((p, sigma, E.copy()))
        return E

    def solve_spy(M, b, floor):
        solved.append(np.array(M))
        return real_solve(M, b, floor)

    monkeypatch.setattr(boosted, "symmetric_gaussian_matrix", matrix_spy)
    monkeypatch.setattr(boosted, "solve_psd_repaired", solve_spy)
    X, y = regression_data(n=3000, d=2)
    est = BoostedAdaSSPRegressor(epsilon=1.0, x_bound=1.5, y_bound=6.0, n_rounds=2).fit(X, y)
    gram_event = est.privacy_spent_.events[1]
    ((p, sigma, E),) = drawn
    assert (p, sigma) == (3, gram_event.sigma)
    (AtA,) = boosted.clipped_design_block(X, y, x_bound=1.5, fit_intercept=True)
    assert len(solved) == 2
    for M in solved:
        noise = M - est.ridge_ * np.eye(3) - AtA
        np.testing.assert_allclose(noise, E, rtol=0, atol=1e-9 * np.abs(AtA).max())


# -- IndependentSSPRegressor: ridge='auto' reads released covariances only ----------------
def test_independent_ssp_auto_ridge_reads_the_released_spectra(monkeypatch):
    # Kills I14 (the risk rule handed the exact spectrum of X^T X / n instead of the
    # runs' mean released spectrum: the shared ridge, and so every run's
    # coefficients, then depend on the data through an unreleased value).
    from scipy import linalg

    import skprivreg.linear_model._independent_ssp as indep
    from skprivreg.linear_model import IndependentSSPRegressor

    released, seen = [], []
    real_cov, real_rule = indep._noisy_covariances, indep.risk_minimising_ridge

    def cov_spy(k, Sigma, sigma, rng, exact_corner):
        M = real_cov(k, Sigma, sigma, rng, exact_corner)
        released.append(M.copy())
        return M

    def rule_spy(spectrum, coords, sigma_cov, sigma_assoc):
        seen.append((np.array(spectrum), sigma_cov, sigma_assoc))
        return real_rule(spectrum, coords, sigma_cov, sigma_assoc)

    monkeypatch.setattr(indep, "_noisy_covariances", cov_spy)
    monkeypatch.setattr(indep, "risk_minimising_ridge", rule_spy)
    X, y = regression_data(n=2000)
    Y = np.stack([y, -y, 0.5 * y], axis=1)
    est = IndependentSSPRegressor(epsilon=1.0, x_bound=2.0, y_bound=8.0, ridge="auto").fit(X, Y)
    (M,) = released
    assert M.shape == (3, 4, 4)
    spectra = np.stack([linalg.eigh(m)[0] for m in M])
    (spectrum, sigma_cov, sigma_assoc), = seen
    np.testing.assert_allclose(spectrum, spectra.mean(axis=0), rtol=1e-12, atol=0)
    assert (sigma_cov, sigma_assoc) == (est.noise_std_["covariance"],
                                        est.noise_std_["association"])


# -- ReuseCov: a reused covariance must match the fit ---------------------------------------
@pytest.mark.parametrize("released, refit, field", [
    (dict(privacy="label"), dict(privacy="full", x_bound=2.0), "privacy"),
    (dict(neighbouring="zero-out", x_bound=2.0), dict(x_bound=2.0), "neighbouring"),
    (dict(x_bound=2.0), dict(neighbouring="zero-out", x_bound=2.0), "neighbouring"),
    (dict(x_bound=2.0, intercept_scaling=1.0), dict(x_bound=2.0, intercept_scaling=3.0),
     "intercept_scaling"),
])
def test_reusecov_refuses_a_covariance_released_under_another_setting(released, refit, field):
    # Kills U02 (the privacy notion not compared: an exact label-DP covariance was then
    # refused only by the x_bound comparison, with a message about clipping), U03 (the
    # neighbouring relation not compared: a zero-out covariance reused in a
    # replace-one fit, or the reverse, was accepted) and U04 (intercept_scaling not
    # compared: the released constant corner c^2 then belongs to another column).
    # Each refusal comes before any spend and names the setting.
    from skprivreg.accounting import BudgetAccountant
    from skprivreg.linear_model import ReuseCovRegressor

    X, y = regression_data()
    Y = np.stack([y, -y], axis=1)
    cov = ReuseCovRegressor(epsilon=1.0, y_bound=20.0, **released).fit(X, Y).export_covariance()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match=field):
        ReuseCovRegressor(epsilon=1.0, y_bound=20.0, covariance=cov, accountant=acc,
                          **refit).fit(X, Y)
    assert acc.n_spends == 0


@pytest.mark.parametrize("privacy, bounds", [("full", dict(x_bound=2.0)), ("label", {})])
def test_reusecov_add_outcomes_refuses_other_rows_and_other_clipping(privacy, bounds):
    # Kills U07 (add_outcomes not comparing n with the fit's: under label DP nothing
    # else does, and new outcomes were released for rows that are not the fit's; under
    # full DP only the covariance comparison then refuses them, with its own message)
    # and U06 (add_outcomes not comparing its settings with the covariance it reuses:
    # an x_bound changed by set_params clipped the new association's rows to another
    # bound than the covariance's). Each refusal comes before any spend.
    from skprivreg.accounting import BudgetAccountant
    from skprivreg.linear_model import ReuseCovRegressor

    X, y = regression_data()
    Y = np.stack([y, -y], axis=1)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = ReuseCovRegressor(epsilon=1.0, privacy=privacy, y_bound=20.0, accountant=acc,
                            **bounds).fit(X, Y)
    spent = acc.n_spends
    with pytest.raises(ValueError, match="needs the rows of fit: n=6000, got 5999"):
        est.add_outcomes(X[:-1], y[:-1], epsilon=1.0, delta=1e-6)
    if privacy == "full":
        est.set_params(x_bound=3.0)
        with pytest.raises(ValueError, match="another x_bound"):
            est.add_outcomes(X, y, epsilon=1.0, delta=1e-6)
    assert acc.n_spends == spent


def test_reusecov_add_outcomes_with_reproducible_noise_marks_the_whole_ledger():
    # Kills U11 (the joined ledger publishable whenever the fit's was: an association
    # released with the testing facility's reproducible noise -- not private -- was
    # then published as part of a private ledger). It also fails on U13
    # (noise_reproducible_ not following the joined ledger), which an existing test kills.
    from skprivreg.linear_model import ReuseCovRegressor
    from skprivreg.testing import reproducible_noise

    X, y = regression_data()
    Y = np.stack([y, -y], axis=1)
    est = ReuseCovRegressor(epsilon=1.0, x_bound=2.0, y_bound=20.0).fit(X, Y)
    assert est.privacy_spent_.for_publication and not est.noise_reproducible_
    with quiet(), reproducible_noise(seed=1):
        est.add_outcomes(X, y, epsilon=1.0, delta=1e-6)
    assert not est.privacy_spent_.for_publication
    assert est.noise_reproducible_


def test_reusecov_ledgers_of_other_compositions_join_by_basic_composition():
    # Kills U10 (the joined ledger composed as the later release's: after a fit under
    # composition='paper' (basic) and add_outcomes under 'gdp', the documented join is
    # basic composition of every event).
    from skprivreg.linear_model import ReuseCovRegressor

    X, y = regression_data()
    Y = np.stack([y, -y], axis=1)
    est = ReuseCovRegressor(epsilon=1.0, x_bound=2.0, y_bound=20.0,
                            composition="paper").fit(X, Y)
    assert est.privacy_spent_.composition == "basic"
    est.set_params(composition="gdp")
    est.add_outcomes(X, y, epsilon=1.0, delta=1e-6)
    assert est.privacy_spent_.composition == "basic"


# -- RowSource: a fused pass hands the finiteness check on --------------------------------
def test_a_fused_pass_hands_the_finiteness_check_to_its_checking_function():
    # Kills W09 (a fused pass never handing check_finite=True to the function that
    # checks: the block runner leaves the check to the fused function, which then
    # skipped it, so NaN or infinity passed a pass that must refuse it before any
    # release).
    from skprivreg._rows import RowSource, add_tuples, block_map, check_block_finite

    calls = []

    def checking(offset, X, Y, params, into=None, check_finite=False):
        calls.append(check_finite)
        if check_finite:
            check_block_finite(X, "X")
        part = (X.sum(axis=0),)
        return part if into is None else add_tuples(into, part)

    checking.checks_finite = True
    X = np.arange(40.0).reshape(20, 2)
    total = RowSource(X, block_rows=8, check_finite=True).reduce_many(
        [(checking, add_tuples, None), (block_map(lambda Xb, Yb: (len(Xb),)), add_tuples, None)])
    assert calls == [True] * 3 and np.array_equal(total[0][0], X.sum(axis=0))
    for bad in (np.nan, np.inf):
        Xb = X.copy()
        Xb[13, 1] = bad
        with pytest.raises(ValueError, match="NaN or infinity"):
            RowSource(Xb, block_rows=8, check_finite=True).reduce_many(
                [(block_map(lambda Xb, Yb: (len(Xb),)), add_tuples, None),
                 (checking, add_tuples, None)])


# -- the Gram pass: the no-norms shortcut ------------------------------------------------
def test_the_no_norms_shortcut_never_skips_a_row_over_the_clip_threshold():
    # Kills G01 (the shortcut's comparison without its rounding margin, d m^2 >
    # t^2): rows of d equal entries at t / sqrt(d) nudged up by a few ulps, for the
    # clip threshold t the norms are compared with (not the bound B, which the
    # round-8 test uses): whenever the computed norm or squared norm is over t, the
    # block must be sent to the norms, or its statistics depend on the path taken.
    from skprivreg._gram import rows_may_exceed
    from skprivreg.bounds import clip_threshold, row_norms

    rng = np.random.default_rng(1)
    missed = []
    for _ in range(5_000):
        d, B = int(rng.integers(1, 12)), float(rng.uniform(0.5, 100.0))
        t = clip_threshold(B, d)
        m = t / math.sqrt(d)
        for _ in range(int(rng.integers(0, 6))):
            m = math.nextafter(m, math.inf)
        row = np.full((1, d), m)
        over = row_norms(row)[0] > t or float(np.einsum("ij,ij->i", row, row)[0]) > t * t
        if over and not rows_may_exceed(d, m, B):
            missed.append((d, B, m))
    assert not missed, missed[:3]


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_gram_pass_with_entry_ranges_refuses_infinity_before_the_clip(bad):
    # Kills G10 (the per-entry range clip run before the finiteness check: an infinite
    # entry became the range's edge and the pass summed it as a finite row; NaN, which
    # the clip keeps, was still refused by the later check).
    from skprivreg._gram import gram_statistics
    from skprivreg._rows import RowSource

    X = np.random.default_rng(0).uniform(-2.0, 2.0, size=(3000, 3))
    Y = np.ones((3000, 1))
    X[1717, 2] = bad
    x_range = (np.full(3, -1.0), np.full(3, 1.0))
    source = RowSource(X, Y, raw_blocks=True, block_rows=1024)
    with pytest.raises(ValueError, match="NaN|infinity"):
        gram_statistics(source, x_bound=2.0, y_bound=1.0, x_range=x_range)
