"""Private feature selection: the Lasso support (Smith & Thakurta 2013) and baselines."""

from ._lasso_plan import LassoPlan, lasso_plan
from ._lasso_regressor import PrivateLassoRegressor
from ._lasso_support import PrivateLassoSupportSelector
from ._rules import LarsEntryRule, LassoSupportRule, alpha_to_lambda, lambda_to_alpha
from ._stability import (
    BOTTOM,
    SENTINEL,
    StableModeResult,
    SubsamplePlan,
    propose_test_release,
    stable_mode,
    subsample_plan,
)
from ._top_s import PrivateTopSSelector, private_top_s_correlations

__all__ = [
    "BOTTOM",
    "SENTINEL",
    "LarsEntryRule",
    "LassoPlan",
    "LassoSupportRule",
    "PrivateLassoRegressor",
    "PrivateLassoSupportSelector",
    "PrivateTopSSelector",
    "StableModeResult",
    "SubsamplePlan",
    "alpha_to_lambda",
    "lambda_to_alpha",
    "lasso_plan",
    "private_top_s_correlations",
    "propose_test_release",
    "stable_mode",
    "subsample_plan",
]
