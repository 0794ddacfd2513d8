"""Round 6 of the release-wiring mutation tests: gaps left by the existing tests.

Each test names the mutant of this session's changes that it kills (the mutant
survived every existing test). All are deterministic: scripted uniforms, exact
ledgers, refusals before any spend, or captured output.
"""

import contextlib
import io
import math
import tempfile
import warnings

import joblib
import numpy as np
import pytest

from skprivreg import AdaSSPRegressor, BudgetAccountant, PrivatePipeline
from skprivreg.accounting import PrivacyEvent, PrivacyLedger
from skprivreg.exceptions import (
    BudgetExceededError,
    ConfigurationError,
    PrivateTestFailed,
    UnstableSupportError,
)
from skprivreg.feature_selection import PrivateLassoSupportSelector
from skprivreg.linear_model import ReuseCovRegressor
from skprivreg.mechanisms import above_threshold
from skprivreg.preprocessing import BoundedScaler


def _fitted_state(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("__")}


def _rows(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    return X, X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.normal(size=n)


def _adassp(acc):
    return AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0, accountant=acc)


# -- base.py: a refit refused before any spend -------------------------------------------
def test_a_refit_refused_before_any_spend_leaves_no_attribute_of_its_own():
    # Kills base.py mutant "restore without deleting the failed fit's attributes" (the
    # delattr loop dropped): the refused refit on a DataFrame set feature_names_in_
    # before the budget check; it stayed beside the previous (numpy-fitted) model.
    pd = pytest.importorskip("pandas")
    X, y = _rows()
    est = _adassp(BudgetAccountant(epsilon=1e3, delta=0.5)).fit(X, y)
    before = _fitted_state(est)
    assert "feature_names_in_" not in before
    small = BudgetAccountant(epsilon=1e-3, delta=1e-12)
    with pytest.raises(BudgetExceededError):
        est.set_params(accountant=small).fit(pd.DataFrame(X, columns=["a", "b", "c"]), y)
    assert small.n_spends == 0
    assert sorted(_fitted_state(est)) == sorted(before)
    assert not hasattr(est, "feature_names_in_")


def test_a_refit_interrupted_before_any_spend_keeps_the_previous_model():
    # Kills base.py mutant "except Exception" (instead of BaseException): an interrupt
    # while the new rows are read (before any spend) left the fitted model unfitted.
    class Interrupting:
        def __array__(self, *args, **kwargs):
            raise KeyboardInterrupt

    X, y = _rows()
    acc = BudgetAccountant(epsilon=1e3, delta=0.5)
    est = _adassp(acc).fit(X, y)
    before = _fitted_state(est)
    with pytest.raises(KeyboardInterrupt):
        est.fit(Interrupting(), y)
    assert acc.n_spends == 1
    after = _fitted_state(est)
    assert sorted(after) == sorted(before) and all(after[k] is before[k] for k in before)


# -- _pipeline.py: a quiet joblib.Memory in fit_transform and fit_predict ------------------
def _printed(call):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call()
        call()  # a cache hit too
    return out.getvalue()


@pytest.mark.parametrize("method", ["fit_transform", "fit_predict"])
def test_a_joblib_memory_prints_no_row_in_fit_transform_or_fit_predict(method):
    # Kills _pipeline.py mutants "fit_transform without _quiet_memory" and
    # "fit_predict without _quiet_memory": joblib's verbose=1 printed each cached call
    # with the rows in it (the existing test covers fit only).
    from sklearn.cluster import KMeans

    X, _ = _rows()
    X[0] = [0.314159, 0.271828, 0.161803]
    with tempfile.TemporaryDirectory() as location:
        memory = joblib.Memory(location, verbose=1)
        last = (BoundedScaler(x_range=(-1.0, 1.0)) if method == "fit_transform"
                else KMeans(n_clusters=2, n_init=1, random_state=0))
        pipe = PrivatePipeline([("s0", BoundedScaler(x_range=(-1.0, 1.0))), ("last", last)],
                               memory=memory)
        printed = _printed(lambda: getattr(pipe, method)(X))
        assert "0.314159" not in printed and "[Memory]" not in printed
        assert pipe.memory is memory


# -- _reusecov_fit.py: the covariance carries the x_bound event only ----------------------
def test_a_covariance_ledger_carries_its_row_bound_and_not_the_label_bound():
    # Kills _reusecov_fit.py mutant "cov_events = list(bound_events)": the released
    # y_bound is no part of the covariance (X only); a fit reusing it was charged for it.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(5000, 3))
    Y = X @ rng.normal(size=(3, 2)) + rng.normal(size=(5000, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ReuseCovRegressor(epsilon=1.0, delta=1e-6).fit(X, Y)
    names = [e.name for e in model.privacy_spent_.events]
    assert "x_bound" in names and "y_bound" in names
    cov_names = [e.name for e in model.export_covariance().ledger.events]
    assert cov_names == ["x_bound", "covariance"]


# -- _lasso_support.py: lasso_params values ---------------------------------------------
@pytest.mark.parametrize("params", [{"tol": math.inf}, {"tol": True}, {"max_iter": True}],
                         ids=["tol=inf", "tol=True", "max_iter=True"])
def test_lasso_params_values_refused_before_any_spend(params):
    # Kills _lasso_support.py mutants "0 <= tol (inf allowed)", "tol: bool allowed" and
    # "max_iter: bool allowed". tol=inf makes scikit-learn's Lasso fail on every
    # subsample: the failures were released as a stable (empty) vote.
    X, y = _rows(n=3000)
    acc = BudgetAccountant(epsilon=1000.0, delta=0.5)
    selector = PrivateLassoSupportSelector(epsilon=1.0, delta=1e-6, noise_level=1.0,
                                           n_subsamples=50, lasso_params=params,
                                           accountant=acc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConfigurationError, match="lasso_params"):
            selector.fit(X, y)
    assert acc.n_spends == 0


def test_lasso_params_tol_zero_is_accepted():
    # Kills _lasso_support.py mutant "0 < tol" (tol=0 refused): scikit-learn's Lasso
    # takes tol=0, and the error message says tol >= 0.
    X, y = _rows(n=3000)
    selector = PrivateLassoSupportSelector(epsilon=1.0, delta=1e-6, noise_level=1.0,
                                           n_subsamples=50,
                                           lasso_params={"tol": 0.0, "max_iter": 5})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            selector.fit(X, y)
        except (UnstableSupportError, PrivateTestFailed):
            pass  # the fit ran (and spent): a failed private test, not a refusal of tol=0


# -- _selection.py: above_threshold's Laplace draws reach the whole support ------------
class _ScriptedUniforms:
    """A generator whose uniforms are given in order (one per value drawn)."""

    def __init__(self, values):
        self.values = list(values)

    def random(self, size=None):
        n = 1 if size is None else int(np.prod(size))
        out, self.values = np.array(self.values[:n]), self.values[n:]
        return out if size is not None else float(out[0])


def test_above_threshold_draws_reach_beyond_the_uniform_grid():
    # Kills _selection.py mutants "noisy_threshold with rng.laplace" and "noisy_queries
    # with rng.laplace": NumPy's Laplace stops near 36.7 scales; the threshold noise is
    # 0 here (no e^-1 success, fraction 0) and the query's is 50.47 scales (50
    # successes, a stop, the fraction, a positive sign), above a threshold at 45.
    epsilon = 1.0
    threshold_noise = [0.9, 0.0, 0.75]
    query_noise = [0.1] * 50 + [0.9] + [0.5] + [0.75]
    rng = _ScriptedUniforms(threshold_noise + query_noise)
    assert above_threshold([0.0], 45.0 * 4.0 / epsilon, epsilon, rng) == 0
    assert rng.values == []


# -- _budget_accountant.py: the amendment's delta slack --------------------------------
def test_an_amended_ledger_restates_its_delta_within_the_amend_tolerance():
    # Kills _budget_accountant.py mutant "delta compared with _BUDGET_RTOL": a plan at
    # the budget's edge in delta could be amended 2e-9 above it (the existing test
    # checks epsilon only).
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    edge = 1e-6 * (1 + 9e-10)
    planned = PrivacyLedger([PrivacyEvent("release", 1.0, edge)])
    acc.spend(planned)
    above = PrivacyLedger([PrivacyEvent("release", 1.0, edge * (1 + 9e-10))])
    with pytest.raises(ValueError):
        acc._amend(planned, above)
    restated = PrivacyLedger([PrivacyEvent("release", 1.0, edge * (1 + 1e-15))])
    acc._amend(planned, restated)
    assert acc.total().delta <= 1e-6 * (1 + 1e-9)


# -- base.py: fit_aggregated keeps the previous model when refused ------------------------
def test_a_refused_fit_aggregated_keeps_the_previous_model():
    # fit_aggregated (a fit from released data) reset the estimator before checking its
    # arguments: a refused call destroyed a charged model and its privacy_spent_.
    from skprivreg.label_dp import WeightedLBARegressor, aggregate

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_011, 3))
    y = np.clip(0.1 * X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=20_011), -1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = WeightedLBARegressor(epsilon=20.0, delta=1e-5, y_bound=(-1, 1),
                                   assumption="declared", residual_var_lower_bound=0.05,
                                   accountant=BudgetAccountant(epsilon=100, delta=1e-3))
        est.fit(X, y)
        llp, _ = aggregate(X, y, mode="llp", epsilon=20.0, delta=1e-5, y_bound=(-1, 1),
                           noise_fraction=0.5)
    before = _fitted_state(est)
    for call in (lambda: est.fit_aggregated(llp), lambda: est.fit_aggregated(llp, X[:10]),
                 lambda: est.fit_aggregated("not a dataset")):
        with pytest.raises((ValueError, TypeError)):
            call()
        after = _fitted_state(est)
        assert sorted(after) == sorted(before) and all(after[k] is before[k] for k in before)


# -- base.py / aggregate: an exception after the spend keeps no secret generator ----------
def _generators_in_traceback(exc):
    from skprivreg._random import SpendFirstGenerator

    found, tb = [], exc.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            values = value.values() if isinstance(value, dict) else [value]
            found += [v for v in values
                      if isinstance(v, (np.random.Generator, SpendFirstGenerator))]
        tb = tb.tb_next
    return found


def _lba_rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_011, 3))
    return X, np.clip(0.1 * X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=20_011),
                      -1, 1)


def test_a_failed_private_check_keeps_no_secret_generator_in_its_traceback():
    # PrivacyCheckFailedError kept fit's (and aggregate's) frames alive with the secret
    # generators, whose seeds replay the private check's draw: an error tracker that
    # stores a traceback's variables would hold them.
    from skprivreg.exceptions import PrivacyCheckFailedError
    from skprivreg.label_dp import WeightedLBARegressor, aggregate

    X, y = _lba_rows()  # (this frame holds no generator of its own)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PrivacyCheckFailedError) as fit_failure:
            WeightedLBARegressor(epsilon=20.0, delta=1e-5, y_bound=(-1, 1)).fit(X, y)
        with pytest.raises(PrivacyCheckFailedError) as aggregate_failure:
            aggregate(X, y, epsilon=20.0, delta=1e-5, y_bound=(-1, 1))
    assert _generators_in_traceback(fit_failure.value) == []
    assert _generators_in_traceback(aggregate_failure.value) == []
