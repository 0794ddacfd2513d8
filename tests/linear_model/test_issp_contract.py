"""ISSPRegressor's scikit-learn contract in the private mode, on data large enough to PASS.

scikit-learn's check suite (tests/test_sklearn_compat.py) runs ISSP in the
non-private mode (``epsilon=np.inf``): its check data have at most a few
hundred rows, far below the n at which the private test can PASS. Here the
private mode is fitted for real (the propose-test-release step PASSes and a
noisy non-zero model is released) and used as scikit-learn users do: fit,
predict, clone, pickle, Pipeline, GridSearchCV.

Choice of the data (kept fast: each ISSP fit here takes a few tenths of a
second): d = 1, epsilon = 4, delta = 1e-6, the default
``residual_bound='auto'``, N_FIT = 500,000 rows (the one GridSearchCV training
split uses 450,000). ``issp_plan`` predicts a PASS at both sizes, with privacy
noise about twice the OLS error (``predicted_noise_ratio`` 1.9 and 2.1).
Measured: 40 of 40 fits PASSed at these sizes with fresh noise, with a
median coefficient error of 0.002 (true coefficient 2).
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skprivreg.exceptions import PlanningWarning
from skprivreg.linear_model import ISSPRegressor, issp_plan

EPSILON, DELTA, N_FEATURES = 4.0, 1e-6, 1
N_FIT, N_TRAIN_SPLIT = 500_000, 450_000

pytestmark = pytest.mark.filterwarnings(
    "ignore::skprivreg.exceptions.PlanningWarning",
)


def _private(**params):
    return ISSPRegressor(epsilon=EPSILON, delta=DELTA, **params)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_FIT, N_FEATURES))
    y = 2.0 * X[:, 0] + 0.5 + rng.standard_normal(N_FIT)
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return _private(random_state=0).fit(*data)


def test_the_chosen_sizes_are_the_planners_pass_sizes():
    """The documented choice: PASS predicted at both sizes, privacy noise below 3x OLS."""
    for n in (N_FIT, N_TRAIN_SPLIT):
        plan = issp_plan(n_samples=n, n_features=N_FEATURES, epsilon=EPSILON, delta=DELTA)
        assert not plan.fail_predicted and plan.clean_path_possible
        assert 1.5 < plan.predicted_noise_ratio < 2.5


def test_private_fit_passes_and_releases_a_model(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlanningWarning)  # c/sigma < 10: no planning note
        est = _private().fit(X, y)
    assert est.ptr_passed_
    # the release is accurate: |coef - 2| within 12 standard errors of OLS
    # plus privacy noise (about 3 / sqrt(n) for c/sigma ~ 2)
    assert abs(est.coef_[0] - 2.0) < 12 * 3 / np.sqrt(N_FIT)
    assert est.coef_.shape == (N_FEATURES,) and np.all(est.coef_ != 0)
    assert np.isfinite(est.intercept_) and est.intercept_ != 0
    plan = issp_plan(n_samples=N_FIT, n_features=N_FEATURES, epsilon=EPSILON, delta=DELTA)
    assert est.privacy_spent_.epsilon == pytest.approx(plan.ledger().epsilon)
    assert est.privacy_spent_.epsilon <= EPSILON * (1 + 1e-12)
    assert est.privacy_spent_.delta <= DELTA * (1 + 1e-12)
    assert est.k_ == plan.k and est.n_features_in_ == N_FEATURES


def test_predict_is_the_released_linear_model(fitted, data):
    X = data[0][:1000]
    pred = fitted.predict(X)
    assert pred.shape == (1000,)
    np.testing.assert_allclose(pred, X @ fitted.coef_ + fitted.intercept_, rtol=1e-12)


def test_clone_keeps_parameters_and_draws_fresh_noise(fitted, data):
    """A clone has the same parameters and no fitted state; with the same
    random_state its noise is still fresh (noise never comes from the seed)."""
    twin = clone(fitted)
    assert twin.get_params() == fitted.get_params()
    assert not hasattr(twin, "coef_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        twin.fit(*data)
    assert fitted.random_state == twin.random_state == 0
    assert fitted.ptr_passed_ and twin.ptr_passed_
    assert fitted.coef_[0] != twin.coef_[0]


def test_pickle_round_trip_keeps_the_released_model(fitted, data):
    restored = pickle.loads(pickle.dumps(fitted))
    X = data[0][:100]
    np.testing.assert_array_equal(restored.predict(X), fitted.predict(X))
    assert restored.ptr_passed_ and restored.privacy_spent_.epsilon == fitted.privacy_spent_.epsilon


def test_pipeline_with_a_public_per_row_map(data):
    """A fixed per-row map before ISSP keeps the guarantee (it reads no statistics of the data)."""
    X, y = data
    pipe = make_pipeline(FunctionTransformer(np.negative), _private())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        pipe.fit(X, y)
    est = pipe[-1]
    assert est.ptr_passed_ and np.all(est.coef_ != 0)
    np.testing.assert_allclose(pipe.predict(X[:10]), est.predict(-X[:10]), rtol=1e-12)


def test_grid_search_fits_every_candidate_privately(data):
    """One train/test split (each training set has N_TRAIN_SPLIT rows), two candidates, refit.

    Model selection on the same data is not private by itself: every fit
    spends its own budget (3 fits here), which an accountant would charge.
    """
    X, y = data
    split = [(np.arange(N_TRAIN_SPLIT), np.arange(N_TRAIN_SPLIT, N_FIT))]
    search = GridSearchCV(_private(), {"residual_slack": [1.0, 1.5]}, cv=split,
                          error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    best = search.best_estimator_
    assert best.ptr_passed_ and np.all(best.coef_ != 0)
    assert best.residual_slack in (1.0, 1.5)
