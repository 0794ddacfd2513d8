"""Private hyperparameter tuning."""

__all__ = []
