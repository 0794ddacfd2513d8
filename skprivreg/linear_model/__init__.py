"""Private linear regression estimators and their planners."""

from ._adassp import AdaSSPPlan, AdaSSPRegressor, adassp_plan
from ._boosted_adassp import BoostedAdaSSPRegressor
from ._independent_ssp import IndependentSSPRegressor
from ._issp import ISSPRegressor, issp_plan
from ._linear import LinearRegression
from ._reusecov import ReuseCovRegressor
from ._reusecov_plan import ReuseCovPlan, reusecov_plan
from ._reusecov_release import NoisyCovariance
from ._ssp import SSPPlan, SSPRegressor, ssp_plan
from ._tukey_em import TukeyEMRegressor

__all__ = [
    "AdaSSPPlan",
    "AdaSSPRegressor",
    "adassp_plan",
    "BoostedAdaSSPRegressor",
    "IndependentSSPRegressor",
    "ISSPRegressor",
    "issp_plan",
    "LinearRegression",
    "NoisyCovariance",
    "ReuseCovPlan",
    "ReuseCovRegressor",
    "reusecov_plan",
    "SSPPlan",
    "SSPRegressor",
    "ssp_plan",
    "TukeyEMRegressor",
]
