"""The scalers pass scikit-learn's estimator checks (noise made reproducible for idempotence)."""

import warnings

import pytest
from sklearn.utils.estimator_checks import check_estimator

from skprivreg.preprocessing import BoundedScaler, PrivateStandardScaler
from skprivreg.testing import reproducible_noise


@pytest.mark.parametrize(
    "estimator",
    [BoundedScaler(x_range=(-100.0, 100.0)),
     PrivateStandardScaler(x_range=(-100.0, 100.0), random_state=0)],
    ids=lambda e: type(e).__name__,
)
def test_sklearn_estimator_checks(estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(0):
            results = check_estimator(estimator, on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:300]) for r in results
              if r["status"] == "failed"]
    assert failed == []
