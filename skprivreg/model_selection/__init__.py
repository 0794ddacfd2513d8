"""Private hyperparameter tuning: the best of a random number of private runs."""

from ._search import PrivateGridSearchCV
from ._selection_plan import selection_plan

__all__ = ["PrivateGridSearchCV", "selection_plan"]
