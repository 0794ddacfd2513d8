"""skprivreg: differentially private regression for scikit-learn."""

from . import diagnostics, testing
from .accounting import BudgetAccountant, Guarantee, PrivacyEvent, PrivacyLedger
from .exceptions import (
    BudgetExceededError,
    CompositionError,
    ConfigurationError,
    ISSPFailedError,
    PrivacyLeakWarning,
    PrivateTestFailed,
    UnstableSupportError,
)
from .feature_selection import (
    PrivateLassoRegressor,
    PrivateLassoSupportSelector,
    PrivateTopSSelector,
)
from .label_dp import GaussianLabelNoiseRegressor, WeightedLBARegressor
from .linear_model import (
    AdaSSPRegressor,
    BoostedAdaSSPRegressor,
    IndependentSSPRegressor,
    ISSPRegressor,
    LinearRegression,
    NoisyCovariance,
    ReuseCovRegressor,
    SSPRegressor,
    TukeyEMRegressor,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "LinearRegression",
    "BoostedAdaSSPRegressor",
    "TukeyEMRegressor",
    "ISSPRegressor",
    "ISSPFailedError",
    "PrivateLassoSupportSelector",
    "PrivateLassoRegressor",
    "PrivateTopSSelector",
    "UnstableSupportError",
    "AdaSSPRegressor",
    "SSPRegressor",
    "ReuseCovRegressor",
    "IndependentSSPRegressor",
    "NoisyCovariance",
    "WeightedLBARegressor",
    "GaussianLabelNoiseRegressor",
    "BudgetAccountant",
    "PrivacyEvent",
    "PrivacyLedger",
    "Guarantee",
    "BudgetExceededError",
    "CompositionError",
    "ConfigurationError",
    "PrivacyLeakWarning",
    "PrivateTestFailed",
    "__version__",
]
