"""The scalers pass scikit-learn's estimator checks, one test per check.

As in tests/test_sklearn_compat.py, the checks run under the ``fixed_noise``
fixture (:func:`skprivreg.testing.reproducible_noise`): the private scaler's
noise then follows ``random_state``, so refits on the same data agree.
"""

import warnings

from sklearn.utils.estimator_checks import parametrize_with_checks

from skprivreg import PrivacyLeakWarning
from skprivreg.preprocessing import BoundedScaler, PrivateStandardScaler


@parametrize_with_checks(
    [BoundedScaler(x_range=(-100.0, 100.0)),
     PrivateStandardScaler(epsilon=1.0, delta=1e-6, x_range=(-100.0, 100.0), random_state=0)],
)
def test_sklearn_estimator_checks(estimator, check, fixed_noise):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        check(estimator)
