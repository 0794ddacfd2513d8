"""The scalers pass scikit-learn's estimator checks, one test per check.

As in tests/test_sklearn_compat.py, the checks run under the ``fixed_noise``
fixture (:func:`skprivreg.testing.reproducible_noise`): the private scaler's
noise then follows ``random_state``, so refits on the same data agree.
"""

import math
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from skprivreg import PrivacyLeakWarning
from skprivreg.preprocessing import BoundedScaler, PrivateStandardScaler

CHECKED = [
    BoundedScaler(x_range=(-100.0, 100.0)),
    PrivateStandardScaler(epsilon=1.0, delta=1e-6, x_range=(-100.0, 100.0), random_state=0),
]


@parametrize_with_checks(CHECKED)
def test_sklearn_estimator_checks(estimator, check, fixed_noise):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        check(estimator)


def test_the_checked_private_scaler_spends_a_finite_budget():
    """The configuration under the checks is a private one: its fit records
    (1, 1e-6), not the non-private (inf, 0) of epsilon=inf."""
    X = np.random.default_rng(0).uniform(-50.0, 50.0, size=(500, 3))
    scaler = clone(CHECKED[1]).fit(X)
    ledger = scaler.privacy_spent_
    assert math.isfinite(ledger.epsilon)
    assert ledger.epsilon <= 1.0 + 1e-12 and ledger.delta <= 1e-6
    assert scaler.mean_.shape == (3,)
