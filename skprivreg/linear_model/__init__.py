"""Private linear regression estimators."""

from ._adassp import AdaSSPRegressor
from ._boosted_adassp import BoostedAdaSSPRegressor
from ._independent_ssp import IndependentSSPRegressor
from ._issp import ISSPRegressor, issp_plan
from ._linear import LinearRegression
from ._reusecov import NoisyCovariance, ReuseCovRegressor
from ._ssp import SSPRegressor
from ._tukey_em import TukeyEMRegressor

__all__ = [
    "AdaSSPRegressor",
    "BoostedAdaSSPRegressor",
    "IndependentSSPRegressor",
    "ISSPRegressor",
    "issp_plan",
    "LinearRegression",
    "NoisyCovariance",
    "ReuseCovRegressor",
    "SSPRegressor",
    "TukeyEMRegressor",
]
