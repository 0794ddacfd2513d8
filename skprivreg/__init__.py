"""skprivreg: differentially private regression for scikit-learn."""

from . import diagnostics, testing  # noqa: F401  (public submodules)
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
from .label_dp import GaussianLabelNoiseRegressor, RROnBinsRegressor, WeightedLBARegressor
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
    "RROnBinsRegressor",
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

from . import model_selection, pipeline, preprocessing  # noqa: E402, F401
from .model_selection import PrivateGridSearchCV  # noqa: E402
from .pipeline import (  # noqa: E402
    PrivatePipeline,
    leaking_steps,
    make_private_pipeline,
    privacy_ledgers,
    privacy_spent,
)
from .preprocessing import BoundedScaler, PrivateStandardScaler  # noqa: E402

# Private workflows: preprocessing, pipelines, tuning.
__all__ += [
    "BoundedScaler",
    "PrivateStandardScaler",
    "PrivatePipeline",
    "make_private_pipeline",
    "privacy_spent",
    "privacy_ledgers",
    "leaking_steps",
    "PrivateGridSearchCV",
]
