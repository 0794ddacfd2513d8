"""skprivreg: differentially private regression for scikit-learn."""

from .accounting import BudgetAccountant, PrivacyEvent, PrivacyLedger
from .exceptions import (
    BudgetExceededError,
    ClippingWarning,
    ConfigurationError,
    PrivacyLeakWarning,
    PrivateTestFailed,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "BudgetAccountant",
    "PrivacyEvent",
    "PrivacyLedger",
    "BudgetExceededError",
    "ClippingWarning",
    "ConfigurationError",
    "PrivacyLeakWarning",
    "PrivateTestFailed",
    "__version__",
]
