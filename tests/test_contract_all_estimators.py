"""Privacy contracts checked on EVERY public private estimator, selector and search.

``test_privacy_integrity.py`` and ``test_contract.py`` check these contracts
on subsets; here each one runs on one fast private configuration of every
public estimator (``skprivreg.__init__`` and the subpackages): SSP, AdaSSP,
BoostedAdaSSP, LinearRegression, IndependentSSP, ReuseCov, ISSP, TukeyEM,
WeightedLBA, GaussianLabelNoise, RROnBins, the Lasso support selector and
regressor, top-s, PrivateStandardScaler and PrivateGridSearchCV.

- SEED: two fits with the same ``random_state`` draw different noise (the
  released values differ; for selectors, whose support can coincide, the
  draws of the generators handed to the mechanism differ).
- TSTORE: every key of ``vars(est)`` after a fit, public or private, is an
  allow-listed name: a constructor parameter, a documented fitted attribute
  of that estimator, or a known bookkeeping name holding no data value.
- WARN1: replacing one row by an outlier changes no warning.
- SPEND1: an exception raised by the first secret draw never loses the spend.
- IS2: ISSP's propose-test-release runs at sensitivity 4 with the epsilon and
  delta of its ledger event.
"""

import warnings

import numpy as np
import pytest
from _privacy_harness import (
    issp_pass_data,
    lba_data,
    multi_output_data,
    regression_data,
    sparse_support_data,
)
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

import skprivreg.feature_selection._lasso_support as lasso_support_module
import skprivreg.feature_selection._top_s as top_s_module
import skprivreg.linear_model._issp_mechanism as issp_mechanism_module
import skprivreg.model_selection._search as search_module
from skprivreg import (
    AdaSSPRegressor,
    BoostedAdaSSPRegressor,
    BudgetAccountant,
    GaussianLabelNoiseRegressor,
    IndependentSSPRegressor,
    ISSPRegressor,
    LinearRegression,
    PrivateGridSearchCV,
    PrivateLassoRegressor,
    PrivateLassoSupportSelector,
    PrivateStandardScaler,
    PrivateTopSSelector,
    ReuseCovRegressor,
    RROnBinsRegressor,
    SSPRegressor,
    TukeyEMRegressor,
    WeightedLBARegressor,
)
from skprivreg.exceptions import BudgetExceededError

# ---------------------------------------------------------------------------
# Data (cached: every test reads, none writes)
# ---------------------------------------------------------------------------
_DATA = {"reg": regression_data, "multi": multi_output_data, "sparse": sparse_support_data,
         "lba": lba_data, "issp": issp_pass_data, "tukey": lambda: regression_data(20_000, d=1)}
_CACHE = {}


def _data(kind):
    if kind not in _CACHE:
        _CACHE[kind] = _DATA[kind]()
    return _CACHE[kind]


# ---------------------------------------------------------------------------
# One private configuration per public estimator
# ---------------------------------------------------------------------------
# Fitted attributes every private estimator may hold (public facts or releases).
_COMMON_FITTED = {"privacy_spent_", "noise_reproducible_", "n_features_in_",
                  "feature_names_in_"}
_REGRESSOR_FITTED = _COMMON_FITTED | {"coef_", "intercept_"}

# Underscore names set by DPEstimatorMixin while a fit runs (skprivreg/base.py).
# None holds a data value; they may survive a fit that raises.
KNOWN_INTERNAL = {
    "_reservation",  # a hold on the accountant's budget: the planned ledger only
    "_pending_spend",  # {"spent": bool}: whether the planned spend was recorded
    "_reproducible_draws",  # True when the testing facility seeded the noise
}

# name -> (factory, data kind, fitted attributes allowed beyond the parameters)
CASES = {
    "ssp": (lambda: SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0), "reg",
            {"n_outputs_", "ridge_", "x_bound_", "y_bound_"}),
    "adassp": (lambda: AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0),
               "reg", {"n_outputs_", "ridge_", "x_bound_", "y_bound_"}),
    "boosted-adassp": (
        lambda: BoostedAdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0),
        "reg", {"ridge_", "x_bound_", "y_bound_"}),
    "linear": (
        lambda: LinearRegression(epsilon=1.0, x_range=(-1.0, 1.0), y_bound=(-8.0, 8.0)),
        "reg", {"mean_fallback_", "residual_clip_", "ridge_", "x_bound_", "y_bound_"}),
    "independent-ssp": (
        lambda: IndependentSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0),
        "multi", {"n_outputs_", "noise_std_", "ridge_", "x_bound_", "y_bound_"}),
    "reusecov": (
        lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0), "multi",
        {"association_releases_", "cov_budget_", "covariance_", "n_outputs_", "noise_std_",
         "proj_active_", "proj_mu_", "ridge_", "sensitivity_", "x_bound_", "x_bound_eff_",
         "y_bound_"}),
    "issp": (lambda: ISSPRegressor(epsilon=4.0, delta=1e-6), "issp",
             {"budget_split_", "k_", "leverage_bound_", "noise_scale_", "planning_",
              "ptr_passed_", "residual_bound_", "sigma2_upper_"}),
    "tukey-em": (lambda: TukeyEMRegressor(epsilon=8.0), "tukey", {"n_models_", "ptr_passed_"}),
    "weighted-lba": (
        lambda: WeightedLBARegressor(epsilon=8.0, delta=1e-6, y_bound=(0.0, 1.0),
                                     assumption="declared", residual_var_lower_bound=0.05),
        "lba", {"aggregated_", "bag_indices_", "bag_size_", "delta_", "epsilon_", "n_bags_",
                "n_dropped_", "n_samples_used_", "privacy_report_", "y_bound_"}),
    "label-noise": (
        lambda: GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-6, y_bound=(-8.0, 8.0)),
        "reg", {"delta_", "epsilon_", "noise_scale_", "y_bound_"}),
    "rr-on-bins": (lambda: RROnBinsRegressor(epsilon=4.0, y_bound=(-8.0, 8.0)), "reg",
                   {"bin_edges_", "epsilon_", "keep_probability_", "n_bins_", "outputs_",
                    "prior_", "targets_", "y_bound_"}),
    "lasso-support": (
        lambda: PrivateLassoSupportSelector(epsilon=2.0, max_features=3, selection_rule="lars",
                                            sampling="partition", fit_intercept=True),
        "sparse", {"delta_", "epsilon_", "max_appearances_", "n_subsamples_", "penalty_",
                   "selected_features_", "stable_", "subsample_rate_", "support_",
                   "threshold_", "x_range_", "y_bound_"}),
    "lasso-regressor": (
        lambda: PrivateLassoRegressor(epsilon=2.0, max_features=3, selection_rule="lars",
                                      sampling="partition"),
        "sparse", {"delta_", "epsilon_", "selector_", "stable_", "stage2_", "support_",
                   "x_range_", "y_bound_"}),
    "top-s": (lambda: PrivateTopSSelector(epsilon=1.0, n_features_to_select=2,
                                          x_range=(-4.0, 4.0), y_bound=4.0),
              "sparse", {"support_", "x_range_", "y_bound_"}),
    "standard-scaler": (
        lambda: PrivateStandardScaler(epsilon=1.0, delta=1e-6, x_range=(-1.0, 1.0)), "reg",
        {"mean_", "n_samples_seen_", "output_range_", "scale_", "var_", "x_range_"}),
    "grid-search": (
        lambda: PrivateGridSearchCV(estimator=AdaSSPRegressor(x_bound=2.0, y_bound=8.0),
                                    param_grid={"x_bound": [0.5, 2.0]}, epsilon=4.0,
                                    n_repetitions=3),
        "reg", {"best_estimator_", "best_index_", "best_params_", "best_score_",
                "candidate_delta_", "candidate_epsilon_", "cv_results_"}),
}
NAMES = sorted(CASES)
SELECTORS = {"lasso-support", "top-s"}

# The mechanism functions each estimator calls with its secret generators, in
# the estimator's own module namespace: spied on to compare the draws.
SPIES = {
    "lasso-support": [(lasso_support_module, "run_stable_mode"),
                      (lasso_support_module, "propose_test_release")],
    "lasso-regressor": [(lasso_support_module, "run_stable_mode"),
                        (lasso_support_module, "propose_test_release")],
    "top-s": [(top_s_module, "gumbel_top_k")],
    "grid-search": [(search_module, "private_neg_mse")],
}


def _make(name):
    factory, kind, _ = CASES[name]
    return factory(), _data(kind)


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


def _released(name, est):
    """The released values of a fit (empty for selectors: see the spies)."""
    if name in SELECTORS:
        return np.array([])
    if name == "standard-scaler":
        return np.concatenate([est.mean_, est.scale_])
    if name == "grid-search":
        best = est.best_estimator_
        return np.concatenate([np.ravel(best.coef_), np.ravel(best.intercept_),
                               [est.best_score_]])
    return np.concatenate([np.ravel(est.coef_), np.ravel(est.intercept_)])


# ---------------------------------------------------------------------------
# Spies on the generators handed to mechanisms
# ---------------------------------------------------------------------------
def _is_generator(value):
    return isinstance(value, np.random.Generator) or type(value).__name__ == "SpendFirstGenerator"


class _RecordingGenerator:
    """Forwards to a generator and records every value it draws."""

    def __init__(self, rng, log):
        self._rng, self._log = rng, log

    def __getattr__(self, name):
        attr = getattr(self._rng, name)
        if not callable(attr):
            return attr

        def draw(*args, **kwargs):
            out = attr(*args, **kwargs)
            if isinstance(out, np.ndarray | float | int | np.generic):
                self._log.append((name, np.array(out, dtype=np.float64, copy=True)))
            else:
                self._log.append((name, repr(type(out))))
            return out

        return draw


def _spy_on_draws(monkeypatch, name):
    """Record the draws of every generator passed to the spied functions of ``name``."""
    log = []
    for module, fn_name in SPIES.get(name, []):
        real = getattr(module, fn_name)

        def spy(*args, _real=real, **kwargs):
            args = [_RecordingGenerator(a, log) if _is_generator(a) else a for a in args]
            kwargs = {k: _RecordingGenerator(v, log) if _is_generator(v) else v
                      for k, v in kwargs.items()}
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, fn_name, spy)
    return log


def _same_draws(a, b):
    if len(a) != len(b):
        return False
    for (name_a, va), (name_b, vb) in zip(a, b):
        if name_a != name_b:
            return False
        if isinstance(va, str) or isinstance(vb, str):
            if va != vb:
                return False
        elif not np.array_equal(va, vb):
            return False
    return True


# ---------------------------------------------------------------------------
# SEED
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_two_fits_with_the_same_seed_draw_different_noise(name, monkeypatch):
    """``random_state`` never seeds secret noise: same seed, same data, new noise."""
    est, (X, y) = _make(name)
    est.set_params(random_state=0)
    log = _spy_on_draws(monkeypatch, name)
    first = _fit(clone(est), X, y)
    draws_first, log[:] = list(log), []
    second = _fit(clone(est), X, y)
    draws_second = list(log)
    if name in SPIES:
        assert draws_first, f"{name}: the spied mechanisms drew nothing"
        assert not _same_draws(draws_first, draws_second), (
            f"{name}: two fits with random_state=0 drew the same secret values")
    if name not in SELECTORS:
        assert not np.array_equal(_released(name, first), _released(name, second)), (
            f"{name}: two fits with random_state=0 released the same values")
    assert not first.noise_reproducible_ and first.privacy_spent_.for_publication


# ---------------------------------------------------------------------------
# TSTORE
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_every_attribute_after_fit_is_allow_listed(name):
    """Public or underscore: no name outside the parameters, the estimator's
    documented fitted attributes and the known bookkeeping names."""
    est, (X, y) = _make(name)
    allowed = (set(est.get_params(deep=False)) | _REGRESSOR_FITTED | KNOWN_INTERNAL
               | CASES[name][2])
    for accountant in (None, BudgetAccountant(epsilon=1e3, delta=0.5)):
        fitted = _fit(clone(est).set_params(random_state=0, accountant=accountant), X, y)
        unknown = sorted(set(vars(fitted)) - allowed)
        assert not unknown, f"{name}: attributes outside the allow-list: {unknown}"


# ---------------------------------------------------------------------------
# WARN1
# ---------------------------------------------------------------------------
def _warnings_of(est, X, y):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        clone(est).fit(X, y)
    return sorted({(w.category.__name__, str(w.message)) for w in record})


@pytest.mark.parametrize("name", NAMES)
def test_one_record_outside_the_bounds_changes_no_warning(name):
    est, (X, y) = _make(name)
    X2, y2 = X.copy(), y.copy()
    X2[17] = 1e6  # far outside every declared or private bound
    y2[17] = -1e6
    base = _warnings_of(est, X, y)
    assert base == _warnings_of(est, X2, y2), name
    X3 = X.copy()
    X3[3] = 1e200  # finite, but its square overflows: no floating-point warning either
    assert base == _warnings_of(est, X3, y), name


# ---------------------------------------------------------------------------
# SPEND1
# ---------------------------------------------------------------------------
class _Boom(RuntimeError):
    pass


def _exploding(purposes, random_state=None):
    class Exploding:
        def __getattr__(self, attr):
            raise _Boom

    return {p: Exploding() for p in purposes}


@pytest.mark.parametrize("name", NAMES)
def test_an_exception_at_the_first_secret_draw_never_loses_the_spend(name, monkeypatch):
    """Every secret draw happens after the spend is recorded."""
    est, (X, y) = _make(name)
    generators = _exploding
    if name == "grid-search":
        # The search first fits each candidate on public synthetic data to
        # price it (no secret involved): only its own "selection" draws explode.
        import skprivreg.base as base_module

        real = base_module.secret_generators

        def generators(purposes, random_state=None):
            if tuple(purposes) == ("selection",):
                return _exploding(purposes, random_state)
            return real(purposes, random_state)

    monkeypatch.setattr("skprivreg.base.secret_generators", generators)
    monkeypatch.setattr("skprivreg.linear_model._reusecov_fit.secret_seed_sequence",
                        lambda random_state=None: (_ for _ in ()).throw(_Boom()))
    acc = BudgetAccountant(epsilon=1e3, delta=0.5)
    est.set_params(accountant=acc)
    with warnings.catch_warnings(), pytest.raises(_Boom):
        warnings.simplefilter("ignore")
        est.fit(X, y)
    assert acc.n_spends == 1, f"{name}: {acc.n_spends} spends recorded"
    assert est.privacy_spent_ is acc.ledgers[0]


# ---------------------------------------------------------------------------
# IS2
# ---------------------------------------------------------------------------
def test_issp_ptr_runs_at_sensitivity_4_with_the_ledgers_budget(monkeypatch):
    calls = []
    real = issp_mechanism_module.ptr_test

    def spy(score, sensitivity, epsilon, delta, rng, *args, **kwargs):
        calls.append((sensitivity, epsilon, delta))
        return real(score, sensitivity, epsilon, delta, rng, *args, **kwargs)

    monkeypatch.setattr(issp_mechanism_module, "ptr_test", spy)
    est, (X, y) = _make("issp")
    _fit(est, X, y)
    assert len(calls) == 1, calls
    sensitivity, epsilon, delta = calls[0]
    assert sensitivity == 4
    (ptr_event,) = [e for e in est.privacy_spent_.events if e.name == "issp_ptr"]
    assert epsilon == ptr_event.epsilon and delta == ptr_event.delta
    assert ptr_event.sensitivity == 4
    assert 0 < epsilon < est.epsilon and 0 < delta < est.delta


def test_lasso_regressor_bound_noise_is_secret_whatever_the_seed(monkeypatch):
    """The range estimate's noise comes from fresh entropy: two fits with the
    same random_state start its generator in different states."""
    import skprivreg.feature_selection._lasso_regressor as lr_mod
    draws = []
    orig = lr_mod.estimate_ranges

    def spy(X, y, eps, rng, **kw):
        draws.append(repr(rng.bit_generator.state))
        return orig(X, y, eps, rng, **kw)

    monkeypatch.setattr(lr_mod, "estimate_ranges", spy)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(20_000, 5))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=20_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            try:
                PrivateLassoRegressor(epsilon=4.0, delta=1e-6, x_range=(-1.0, 1.0),
                                      max_features=2, random_state=0).fit(X, y)
            except Exception:
                pass
    assert len(draws) >= 2 and draws[0] != draws[1]


# ---------------------------------------------------------------------------
# A refit refused before any spend keeps the previous model
# ---------------------------------------------------------------------------
def _fitted_state(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("__")}


@pytest.mark.parametrize("name", NAMES)
def test_a_refit_refused_before_any_spend_keeps_the_previous_model(name):
    """Bad input or an exceeded budget releases nothing of the new rows: the
    fitted model (its attributes, its ledger) stays whole and usable."""
    est, (X, y) = _make(name)
    fitted = _fit(est.set_params(accountant=BudgetAccountant(epsilon=1e3, delta=0.5)), X, y)
    before = _fitted_state(fitted)
    assert "privacy_spent_" in before

    X_bad = X.copy()
    X_bad[5, 0] = np.nan
    with pytest.raises(ValueError):
        _fit(fitted, X_bad, y)
    small = BudgetAccountant(epsilon=1e-3, delta=1e-12)
    with pytest.raises(BudgetExceededError):
        _fit(fitted.set_params(accountant=small), X, y)
    assert small.n_spends == 0
    after = _fitted_state(fitted)
    assert sorted(after) == sorted(before)
    assert all(after[k] is before[k] for k in before), name
    check_is_fitted(fitted)


def test_a_refit_that_fails_after_its_spend_keeps_no_previous_attribute(monkeypatch):
    """The ledger of the failed fit is recorded; nothing of the previous fit
    stays beside it (coef_ of one fit with privacy_spent_ of another)."""
    est, (X, y) = _make("adassp")
    fitted = _fit(est, X, y)
    first_ledger = fitted.privacy_spent_

    class Boom(RuntimeError):
        pass

    def exploding(*args, **kwargs):
        raise Boom

    monkeypatch.setattr("skprivreg.linear_model._adassp.add_gaussian", exploding)
    with pytest.raises(Boom):
        _fit(fitted, X, y)
    assert fitted.privacy_spent_ is not first_ledger
    assert not hasattr(fitted, "coef_") and not hasattr(fitted, "intercept_")
