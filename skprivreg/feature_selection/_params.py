"""Parameter names shared by the feature-selection estimators."""

__all__ = ["RenamedTo", "X_BOUND_WITHDRAWN"]


class RenamedTo(str):
    """The name of the parameter that replaces a withdrawn one, with the reason.

    It compares equal to the new name (``_renamed_parameters`` maps old name
    -> new name); its ``repr``, which the constructor's ``TypeError`` shows,
    adds the reason.
    """

    def __new__(cls, name, reason):
        obj = super().__new__(cls, name)
        obj.reason = reason
        return obj

    def __reduce__(self):
        return (RenamedTo, (str(self), self.reason))

    def __repr__(self):
        return f"{str.__repr__(self)} ({self.reason})"


X_BOUND_WITHDRAWN = RenamedTo(
    "x_range",
    "a per-column range (low, high): a per-entry bound b is x_range=(-b, b); in this "
    "library x_bound means a bound on the L2 norm of each feature row, which this "
    "estimator does not use",
)
