"""ReuseCovRegressor inside Pipeline, GridSearchCV and cross_val_score."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skprivreg.accounting import BudgetAccountant
from skprivreg.linear_model._reusecov import ReuseCovRegressor

pytestmark = pytest.mark.filterwarnings(
    "ignore::skprivreg.exceptions.PrivacyLeakWarning",
)

# parametrize_with_checks for these estimators: tests/test_sklearn_compat.py


def test_pipeline_gridsearch_charges_every_fit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    Y = X @ rng.normal(size=(4, 3)) + rng.normal(size=(400, 3))
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    pipe = make_pipeline(
        FunctionTransformer(np.tanh),  # data-independent: keeps the guarantee
        ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=5.0, y_bound=10.0,
                          accountant=acc, random_state=0),
    )
    search = GridSearchCV(pipe, {"reusecovregressor__cov_budget": [0.3, 0.5]}, cv=3)
    search.fit(X, Y)
    assert acc.n_spends == 2 * 3 + 1
    scores = cross_val_score(pipe, X, Y, cv=3)
    assert np.all(np.isfinite(scores))
