"""Private linear regression estimators."""

from ._adassp import AdaSSPRegressor
from ._ssp import SSPRegressor

__all__ = ["AdaSSPRegressor", "SSPRegressor"]
