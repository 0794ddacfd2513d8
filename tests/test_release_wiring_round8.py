"""Round 8: bounds never rounded down, and votes that cannot be ranked.

Each test fails on the code before its fix (checked by restoring the old file).
All are deterministic: exact rational arithmetic on released constants and
captured calibration arguments.
"""

import math
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from skprivreg.accounting import gdp_mu
from skprivreg.feature_selection import stable_mode
from skprivreg.label_dp import GaussianLabelNoiseRegressor, _llp_accountant
from skprivreg.label_dp._planning import plan_aggregation
from skprivreg.linear_model import AdaSSPRegressor, SSPRegressor
from skprivreg.linear_model._reusecov_plan import reusecov_plan
from skprivreg.linear_model._reusecov_stats import (
    association_sensitivity,
    covariance_sensitivity,
)
from skprivreg.mechanisms import (
    cross_sensitivity,
    gaussian_event_from_mu,
    gaussian_sigma,
    gram_upper_sensitivity,
    hypot_at_least,
    joint_gram_cross_calibration,
    joint_gram_cross_mu,
    quotient_at_least,
    sqrt_times_at_least,
    value_at_least,
)

F = Fraction


def _smallest_at_least(value, exact):
    """``value`` is the smallest float at least ``exact``."""
    below = math.nextafter(value, -math.inf)
    return F(value) >= exact and F(below) < exact


def _smallest_root_at_least(root, exact_square):
    below = math.nextafter(root, 0.0)
    return F(root) ** 2 >= exact_square and (root == 0 or F(below) ** 2 < exact_square)


def _fit_quietly(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


# -- the helpers ------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", [(2.0**-30, 1.0), (1.0, 1.0), (3.0, 4.0), (1e-200, 1e200),
                                  (0.1, 0.2), (1.3498382261231665, 1.0)])
def test_hypot_at_least_is_the_smallest_float_at_least_the_norm(a, b):
    assert _smallest_root_at_least(hypot_at_least(a, b), F(a) ** 2 + F(b) ** 2)


@pytest.mark.parametrize("k, v", [(3, 1.0), (101, 5.0), (6, 3.0), (10**6, 0.1), (2, 1e-300)])
def test_sqrt_times_at_least_is_the_smallest_float_at_least_the_product(k, v):
    assert _smallest_root_at_least(sqrt_times_at_least(k, v), k * F(v) ** 2)


@pytest.mark.parametrize("a, b", [(1.0, 3.0), (7.0, 0.1), (2.0, 7.0), (1e-300, 3e10)])
def test_quotient_at_least_is_the_smallest_float_at_least_the_quotient(a, b):
    assert _smallest_at_least(quotient_at_least(a, b), F(a) / F(b))


def test_value_at_least_beyond_the_floats():
    assert value_at_least(F(1e308) * 10) == math.inf
    assert value_at_least(-F(1e308) * 10) == -1.7976931348623157e308


# -- Gaussian calibration: sigma = sensitivity / mu, never an ulp short --------------------
@pytest.mark.parametrize("sens, mu", [(1.0, 3.0), (1.0, 0.1), (0.1, 0.7), (7.0, 3.0)])
def test_a_gdp_events_sigma_is_at_least_sensitivity_over_mu(sens, mu):
    event = gaussian_event_from_mu("x", sens, mu, 1e-6)
    assert _smallest_at_least(event.sigma, F(sens) / F(mu))


@pytest.mark.parametrize("sens, eps", [(7.0, 0.5), (1.0, 1.0), (3.0, 2.0), (1.0, 0.3), (0.1, 1.5)])
def test_the_analytic_sigma_is_at_least_sensitivity_over_mu(sens, eps):
    sigma = gaussian_sigma(sens, eps, 1e-6)
    assert _smallest_at_least(sigma, F(sens) / F(gdp_mu(eps, 1e-6)))


# -- sensitivities of the sums ----------------------------------------------------------------
@pytest.mark.parametrize("B, c", [(1.3498382261231665, 1.0), (2.0**-30, 1.0), (1.0, 0.0),
                                  (0.7, 0.3), (3.0, 7.0)])
@pytest.mark.parametrize("neighbouring", ["replace-one", "zero-out"])
def test_gram_upper_sensitivity_is_the_smallest_float_at_least_the_exact_value(B, c, neighbouring):
    B2, c2 = F(B) ** 2, F(c) ** 2
    if neighbouring == "zero-out":
        exact_sq = B2 * B2 + B2 * c2 + c2 * c2
    else:
        t = max(-c2 / 2, -B2)
        exact_sq = 2 * B2 * B2 - 2 * t * t + c2 * (2 * B2 - 2 * t)
    assert _smallest_root_at_least(gram_upper_sensitivity(B, c, neighbouring), exact_sq)


@pytest.mark.parametrize("B, K, c", [(2.0**-30, 1.0, 1.0), (1.0, math.sqrt(3), 1.0),
                                     (0.3, 0.7, 0.0)])
def test_cross_sensitivity_is_the_smallest_float_at_least_the_exact_value(B, K, c):
    assert _smallest_root_at_least(cross_sensitivity(B, K, c),
                                   4 * F(K) ** 2 * (F(B) ** 2 + F(c) ** 2))
    assert _smallest_root_at_least(cross_sensitivity(B, K, c, "full", "zero-out"),
                                   F(K) ** 2 * (F(B) ** 2 + F(c) ** 2))
    assert _smallest_root_at_least(cross_sensitivity(B, K, c, "feature"), 4 * F(K) ** 2 * F(B) ** 2)


def test_reusecov_label_dp_sensitivities_are_not_rounded_down():
    # Label DP (X public) uses these two; old: sqrt(2) x^2 / m and 2 x y / n rounded to nearest.
    x, m = 2.220558632734762, 44
    assert _smallest_root_at_least(covariance_sensitivity(x, m), 2 * F(x) ** 4 / F(m) ** 2)
    x, y, n = 3.5095810471653732, 1.405019746240572, 3758
    assert _smallest_at_least(association_sensitivity(x, y, n), 2 * F(x) * F(y) / n)


def test_ssp_and_adassp_bounds_with_the_intercept_column_are_not_rounded_down():
    # hypot(2^-30, 1) rounds to 1.0, below the exact norm sqrt(1 + 2^-60) of a row (x, 1).
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (200, 3)), rng.uniform(-1, 1, 200)
    B = 2.0**-30
    row_sq = F(B) ** 2 + 1
    ssp = _fit_quietly(SSPRegressor(x_bound=B, y_bound=1.0), X, y)
    events = {e.name: e for e in ssp.privacy_spent_.events}
    assert F(events["XtY"].sensitivity) ** 2 >= 4 * row_sq  # 2 ||(x, c)|| y_bound
    ada = _fit_quietly(AdaSSPRegressor(x_bound=B, y_bound=1.0), X, y)
    events = {e.name: e for e in ada.privacy_spent_.events}
    assert F(events["lambda_min"].sensitivity) >= row_sq  # ||(x, c)||^2
    assert F(events["XtY"].sensitivity) ** 2 >= 4 * row_sq
    # the Gram with the intercept column, at a bound where the float formula rounds down
    B = 1.3498382261231665
    ssp = _fit_quietly(SSPRegressor(x_bound=B, y_bound=1.0), X, y)
    gram = next(e for e in ssp.privacy_spent_.events if e.name == "XtX")
    B2 = F(B) ** 2
    t = max(-F(1) / 2, -B2)
    assert F(gram.sensitivity) ** 2 >= 2 * B2 * B2 - 2 * t * t + (2 * B2 - 2 * t)


def test_ssp_cross_sensitivity_scales_by_sqrt_l_without_rounding_down():
    from skprivreg.linear_model._ssp import cross_sensitivity as ssp_cross

    assert F(ssp_cross(1.0, 1.0, 3)) ** 2 >= 4 * 3  # 2 sqrt(3): math.sqrt(3) is below
    assert F(ssp_cross(hypot_at_least(2.0**-30, 1.0), 1.0, 1)) ** 2 >= 4 * (F(2.0**-30) ** 2 + 1)


def test_reusecov_outcome_row_bound_is_not_rounded_down():
    # sqrt(3) * 1 rounds below the exact norm of a row of three labels at the bound.
    plan = reusecov_plan(n_samples=500, n_features=2, n_outputs=3, epsilon=1.0, delta=1e-6,
                         x_bound=1.0, y_bound=1.0, composition="basic", fit_intercept=False)
    assoc = next(e for e in plan.ledger.events if e.name.startswith("association"))
    assert (F(assoc.sensitivity) * 500) ** 2 >= 4 * 3 * 1  # 2 B sqrt(l) y_bound, per row sum


def test_the_joint_release_is_at_most_mu_gdp_after_rounding():
    # The joint scales carry a 2^-40 relative margin over the float evaluation of J.
    for B, K, c, f, n in [(1.0, math.sqrt(3), 1.0, 0.3, 1000), (2.0, 5.0, 0.0, 0.5, 77),
                          (0.3, 1.0, 1.0, 0.2, 5008)]:
        mu = 0.7
        _, s1, s2, _ = joint_gram_cross_calibration(
            "joint", x_bound=B, y_row_bound=K, n_rows=n, mu=mu, share=f, delta=1e-6,
            intercept=c)
        assert joint_gram_cross_mu(B, K, s1, s2, n, c) <= mu * (1 - 2.0**-42)


# -- label DP: the label range b - a -------------------------------------------------------------
def test_the_label_range_is_not_rounded_down():
    a, b = -(2.0**-60), 1.0
    exact = F(b) - F(a)  # 1 + 2^-60: b - a rounds to 1.0
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 2)), rng.uniform(a, b, 300)
    est = _fit_quietly(GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-5, y_bound=(a, b)), X, y)
    assert F(est.privacy_spent_.events[-1].sensitivity) >= exact
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_aggregation(200_000, 2, epsilon=4.0, delta=1e-6, mode="llp", y_bound=(a, b),
                                noise_fraction=0.5, noise_scale=0.5)
    assert F(plan.label_range) >= exact


def test_the_llp_ratio_of_range_to_noise_is_not_rounded_down(monkeypatch):
    seen = []
    original = _llp_accountant._log_llp_side

    def spy(epsilon, k, noise_fraction, ratio, *args, **kwargs):
        seen.append(ratio)
        return original(epsilon, k, noise_fraction, ratio, *args, **kwargs)

    monkeypatch.setattr(_llp_accountant, "_log_llp_side", spy)
    _llp_accountant.llp_log_privacy_profile(1.0, bag_size=10, noise_fraction=0.5,
                                            label_range=1.0, noise_scale=3.0, n_samples=1000)
    assert seen and all(F(r) >= F(1) / 3 for r in seen)  # 1/3 rounds down in float


# -- stable_mode: votes whose comparison raises --------------------------------------------------
def _nan_vote(X_j, y_j):
    return Decimal("NaN") if y_j.max() > 100 else Decimal(1)


def _stable_mode_on_neighbours(f, scale=1.0):
    """stable_mode on data and on its neighbour with y[12] = 1000: both return a result."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(2000, 2)), scale * rng.normal(size=2000)
    y2 = y.copy()
    y2[12] = 1000.0
    for labels in (y, y2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stable_mode(X, labels, f, epsilon=1.0, delta=1e-6, sampling="poisson",
                              n_subsamples=100, subsample_rate=0.05)
        assert res.privacy_spent.epsilon == 1.0


def test_stable_mode_never_raises_on_votes_that_cannot_be_compared():
    # Each NaN vote is a class of its own; two tie at count 1 and ranking them compared
    # Decimal('NaN') < Decimal('NaN'), which raises InvalidOperation: one record
    # (y[12] = 1000) decided whether the call raised.
    _stable_mode_on_neighbours(_nan_vote)


def _list_vote(X_j, y_j):
    if np.max(y_j) > 3:
        vote = np.empty(1, dtype=object)
        vote[0] = [1, 2]  # an object array holding a list: its vote cannot be hashed
        return vote
    return (0,)


def test_a_vote_that_cannot_be_hashed_is_a_failure_of_f():
    # The old code raised TypeError (unhashable type: 'list') while counting, decided by
    # the one record y[12] = 1000.
    from skprivreg.feature_selection._stability import SENTINEL, _vote

    assert _vote(_list_vote, None, np.array([5.0])) is SENTINEL
    _stable_mode_on_neighbours(_list_vote, scale=0.1)


def test_adassp_lambda_sensitivity_is_not_rounded_down():
    # B * B rounds below the exact square at this bound (no intercept column).
    B = 2.160800746071141
    rng = np.random.default_rng(1)
    X, y = rng.uniform(-1, 1, (200, 3)), rng.uniform(-1, 1, 200)
    ada = _fit_quietly(AdaSSPRegressor(x_bound=B, y_bound=1.0, fit_intercept=False), X, y)
    lam = next(e for e in ada.privacy_spent_.events if e.name == "lambda_min")
    assert F(lam.sensitivity) >= F(B) ** 2


def test_reusecov_fit_scales_by_sqrt_l_without_rounding_down():
    from skprivreg.linear_model import ReuseCovRegressor

    rng = np.random.default_rng(2)
    # sqrt(23) rounds down, and the rounded-up products after it do not make up for it.
    n, l = 200, 23
    X, Y = rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, (n, l))
    est = _fit_quietly(ReuseCovRegressor(x_bound=1.0, y_bound=1.0, epsilon=1.0,
                                         composition="paper"), X, Y)
    assoc = next(e for e in est.privacy_spent_.events if e.name.startswith("association"))
    assert (F(assoc.sensitivity) * n) ** 2 >= 4 * l * 2  # 2 sqrt(l) y ||(x, c)||


def test_independent_ssp_per_row_sensitivities_are_not_rounded_down_by_the_division():
    from skprivreg.linear_model import IndependentSSPRegressor

    rng = np.random.default_rng(3)
    n = 160  # sqrt(8) / 160 rounds below the exact quotient
    X, y = rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, n)
    est = _fit_quietly(IndependentSSPRegressor(x_bound=1.0, y_bound=1.0, composition="basic"),
                       X, y)
    assoc = next(e for e in est.privacy_spent_.events if e.name.startswith("association"))
    assert (F(assoc.sensitivity) * n) ** 2 >= 8  # 2 y ||(x, c)|| = 2 sqrt(2)


# -- the search's first budget check states the candidates' notion ---------------------------
def test_a_search_of_label_dp_candidates_is_refused_by_a_full_dp_accountant_before_any_row():
    # The first check (before the heads read two rows each for their widths) stated full
    # DP, which every accountant accepts: the refusal of the label-DP runs came after.
    from sklearn.preprocessing import FunctionTransformer

    from skprivreg import BudgetAccountant
    from skprivreg.exceptions import CompositionError
    from skprivreg.model_selection import PrivateGridSearchCV
    from skprivreg.pipeline import make_private_pipeline
    from skprivreg.preprocessing import rowwise

    seen = []

    @rowwise
    def record(Z):
        seen.append(len(Z))
        return Z

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (1000, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.3 * rng.normal(size=1000)
    pipe = make_private_pipeline(FunctionTransformer(record),
                                 GaussianLabelNoiseRegressor(y_bound=6.5))
    grid = {"gaussianlabelnoiseregressor__fit_intercept": [True, False]}
    acc = BudgetAccountant(epsilon=100.0, delta=1e-3, notion="full")
    with pytest.raises(CompositionError, match="label DP only"):
        PrivateGridSearchCV(estimator=pipe, param_grid=grid, epsilon=2.0, delta=1e-6,
                            accountant=acc).fit(X, y)
    assert not seen and acc.n_spends == 0
    # An accountant of label DP takes it, and the heads read the rows.
    label = BudgetAccountant(epsilon=100.0, delta=1e-3, notion="label")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        PrivateGridSearchCV(estimator=pipe, param_grid=grid, epsilon=2.0, delta=1e-6,
                            accountant=label).fit(X, y)
    assert seen and label.n_spends == 1


# -- review of the rounding: NumPy scalars, the sites the first pass missed ---------------------
def test_numpy_scalars_are_exact_in_the_rounding_helpers():
    # Fraction(np.int64(k)) kept an int64 numerator whose products overflowed silently:
    # gaussian_sigma(np.int64(193), 0.1, 1e-6) was 193 times too small.
    assert gaussian_sigma(np.int64(193), 0.1, 1e-6) == gaussian_sigma(193, 0.1, 1e-6)
    assert gaussian_sigma(np.int32(3), 1.0, 1e-5) == gaussian_sigma(3, 1.0, 1e-5)
    assert gaussian_sigma(np.float32(1), 1.0, 1e-5) == gaussian_sigma(1.0, 1.0, 1e-5)
    assert _smallest_at_least(quotient_at_least(0.1, np.int64(1000003)), F(0.1) / 1000003)
    assert sqrt_times_at_least(np.int64(3), 2.0) == sqrt_times_at_least(3, 2.0)
    assert hypot_at_least(1.5e308, 1.5e308) == math.inf  # beyond the floats, not an error


def test_linear_regression_without_intercept_gram_sensitivity_is_not_rounded_down():
    from skprivreg.linear_model import LinearRegression

    d = 199  # sqrt(2) * 199 rounds below sqrt(2) * R^2 with R^2 = 199
    rng = np.random.default_rng(4)
    X, y = rng.uniform(-1, 1, (400, d)), rng.uniform(-1, 1, 400)
    est = _fit_quietly(LinearRegression(x_range=(-1, 1), y_bound=(-1, 1), fit_intercept=False,
                                        n_rounds=1), X, y)
    gram = next(e for e in est.privacy_spent_.events if e.name == "XtX")
    R2 = F(est_row_bound(d)) ** 2
    assert F(gram.sensitivity) ** 2 >= 2 * R2 * R2


def est_row_bound(d):
    from skprivreg.mechanisms import sqrt_at_least

    return sqrt_at_least(d)


def test_residual_gradient_sensitivity_is_not_rounded_down():
    from skprivreg.mechanisms import residual_gradient_sensitivity

    R, C = 2.160800746071141, 1.3686920764355206
    assert _smallest_at_least(residual_gradient_sensitivity(R, C), 2 * F(R) * F(C))


@pytest.mark.parametrize("eps", [3.0, 0.7])
def test_laplace_and_gumbel_scales_are_not_rounded_down(eps, monkeypatch):
    from skprivreg.mechanisms import (
        _selection,
        clipped_squared_error_sensitivity,
        gumbel_top_k,
        histogram_laplace_scale,
    )

    assert F(histogram_laplace_scale(eps)) >= F(2) / F(eps)  # 2/3 rounds down
    width_sq_over_n = (1 + F(2) ** -60) ** 2 / 3
    assert F(clipped_squared_error_sensitivity(-(2.0**-60), 1.0, 3)) >= width_sq_over_n
    seen = []
    rng = np.random.default_rng(0)

    class Spy:
        def gumbel(self, loc, scale, size):
            seen.append(scale)
            return rng.gumbel(loc, scale, size)

    gumbel_top_k(np.zeros(4), 1, 1.0, eps, Spy())
    assert F(seen[0]) >= 2 * F(1) / F(eps)
    scales = []
    monkeypatch.setattr(_selection, "laplace",
                        lambda scale, rng, size=None: scales.append(scale) or np.zeros(size or ()))
    _selection.above_threshold(np.zeros(3), 0.0, eps, rng)
    assert F(scales[0]) >= F(2) / F(eps) and F(scales[1]) >= F(4) / F(eps)


def test_primo_events_round_sigma_and_mu_up():
    from skprivreg.mechanisms import primo_constant, primo_gaussian_event

    for sens in (0.1, 0.7, 3.0):
        event = primo_gaussian_event("x", sens, 0.5, 1e-6)
        assert F(event.sigma) >= F(primo_constant(0.5, 1e-6)) * F(sens)
        assert F(event.mu) * F(event.sigma) >= F(sens)  # mu never below sensitivity / sigma


@pytest.mark.parametrize("sens, eps", [(0.1, 2.0), (0.7, 1.0), (1.0, 0.3), (7.0, 0.5)])
def test_a_gaussian_events_mu_is_not_rounded_down(sens, eps):
    # The ledger composes mu = sensitivity / sigma: rounded down, it reported less than spent.
    from skprivreg.mechanisms import gaussian_event

    event = gaussian_event("x", sens, eps, 1e-6)
    assert _smallest_at_least(event.mu, F(sens) / F(event.sigma))


@pytest.mark.parametrize("eps", [3.0, 0.7])
def test_ptr_and_stability_histogram_scales_are_not_rounded_down(eps, monkeypatch):
    from skprivreg.mechanisms import _ptr, ptr_calibration

    assert F(ptr_calibration(1.0, eps, 1e-6).scale) >= F(1) / F(eps)
    scales = []
    monkeypatch.setattr(_ptr, "laplace", lambda scale, rng, **kw: scales.append(scale) or 0.0)
    _ptr.stability_histogram([0, 0, 1], eps, 1e-6, np.random.default_rng(0))
    assert scales and all(F(s) >= F(2) / F(eps) for s in scales)


def test_the_lba_planners_baseline_sigma_is_the_gaussian_label_noise_fits():
    # The preview used b - a rounded to nearest, the fit the range rounded up.
    from skprivreg.label_dp import lba_plan

    a, b = -(2.0**-60), 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = lba_plan(n_samples=100_000, n_features=3, epsilon=1.0, delta=1e-5, y_bound=(a, b))
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.uniform(a, b, 300)
    est = _fit_quietly(GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-5, y_bound=(a, b)), X, y)
    assert plan.baseline_sigma == est.noise_scale_


# -- ledger totals: never reported below what was spent -------------------------------------------
def test_a_ledgers_totals_are_not_rounded_down():
    from skprivreg.accounting import PrivacyEvent, PrivacyLedger

    a, b = 0.5708573103554107, 1.5140503662728757  # a + b rounds below the exact sum
    basic = PrivacyLedger([PrivacyEvent("a", a, 1e-7), PrivacyEvent("b", b, 1e-7)])
    assert F(basic.epsilon) >= F(a) + F(b)
    m1, m2 = 1.24055430338391, 0.5085076193112567  # hypot rounds below the exact norm
    gdp = PrivacyLedger([gaussian_event_from_mu("g1", 1.0, m1, 1e-7),
                         gaussian_event_from_mu("g2", 1.0, m2, 1e-7)], composition="gdp")
    assert F(gdp.mu) ** 2 >= F(m1) ** 2 + F(m2) ** 2


# -- final read: each remaining rounded site, checked where it is used -----------------------------
def test_the_search_scores_laplace_scale_is_not_rounded_down(monkeypatch):
    from skprivreg.mechanisms import _moments, clipped_squared_error_sensitivity, private_neg_mse

    scales = []
    monkeypatch.setattr(_moments, "add_laplace",
                        lambda value, scale, rng: scales.append(scale) or value)
    y = np.array([0.5, -0.5, 0.0])
    private_neg_mse(y, y, y_low=-1.0, y_high=1.0, epsilon=3.0, rng=np.random.default_rng(0))
    sens = clipped_squared_error_sensitivity(-1.0, 1.0, 3)  # 4/3 rounded up; / 3 rounds down
    assert F(scales[0]) >= F(sens) / 3


def test_tukey_ptr_and_distance_test_laplace_scales_are_not_rounded_down(monkeypatch):
    from skprivreg.mechanisms import _regression, _selection

    scales = []
    spy = lambda scale, rng, **kw: scales.append(scale) or 0.0  # noqa: E731
    monkeypatch.setattr(_regression, "laplace", spy)
    monkeypatch.setattr(_selection, "laplace", spy)
    _regression.tukey_ptr_test(10.0, 3.0, 1e-6, np.random.default_rng(0))
    _selection.laplace_distance_test(5.0, 3.0, 1e-6, np.random.default_rng(0))
    assert len(scales) == 2 and all(F(s) >= F(1) / 3 for s in scales)  # 1/3 rounds down


def test_a_ledgers_delta_and_mixed_totals_are_not_rounded_down(monkeypatch):
    from skprivreg import accounting
    from skprivreg.accounting import PrivacyEvent, PrivacyLedger

    d1, d2 = 1.430206016712772e-06, 8.489593995678605e-06  # d1 + d2 rounds down
    ledger = PrivacyLedger([PrivacyEvent("a", 0.5, d1), PrivacyEvent("b", 0.5, d2)])
    assert F(ledger.delta) >= F(d1) + F(d2)
    # GDP ledger with a pure event: the Gaussian part's epsilon plus the other's.
    g = gaussian_event_from_mu("g", 1.0, 0.7, 1e-6)
    eps_gauss = PrivacyLedger([g], composition="gdp").epsilon
    other = next(e for e in (0.1 * k + 0.0123 for k in range(1, 200))
                 if F(eps_gauss + e) < F(eps_gauss) + F(e))
    mixed = PrivacyLedger([g, PrivacyEvent("pure", other, 0.0)], composition="gdp")
    assert F(mixed.epsilon) >= F(eps_gauss) + F(other)
    # The composed mu handed to the conversion.
    seen = []
    original = accounting.gdp_epsilon
    monkeypatch.setattr(accounting, "gdp_epsilon",
                        lambda mu, delta: seen.append(mu) or original(mu, delta))
    m1, m2 = 1.24055430338391, 0.5085076193112567
    total = PrivacyLedger([gaussian_event_from_mu("g1", 1.0, m1, 1e-7),
                           gaussian_event_from_mu("g2", 1.0, m2, 1e-7)], composition="gdp")
    assert total.epsilon == original(seen[-1], total.delta)
    assert seen and F(seen[0]) ** 2 >= F(m1) ** 2 + F(m2) ** 2
