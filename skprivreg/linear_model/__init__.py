"""Private linear regression estimators."""

from ._adassp import AdaSSPRegressor
from ._independent_ssp import IndependentSSPRegressor
from ._issp import ISSPRegressor, issp_plan
from ._reusecov import NoisyCovariance, ReuseCovRegressor
from ._ssp import SSPRegressor

__all__ = [
    "AdaSSPRegressor",
    "IndependentSSPRegressor",
    "ISSPRegressor",
    "issp_plan",
    "NoisyCovariance",
    "ReuseCovRegressor",
    "SSPRegressor",
]
