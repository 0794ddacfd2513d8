"""Warnings and errors shared by every skprivreg estimator.

None of these carries a data-dependent number in its message: messages may cite
public quantities only (n, d, epsilon, delta, hyperparameters).
"""

__all__ = [
    "PrivacyLeakWarning",
    "BudgetExceededError",
    "ConfigurationError",
    "PrivateTestFailed",
    "CompositionError",
]


class PrivacyLeakWarning(UserWarning):
    """Something is released or derived without the stated privacy guarantee.

    Raised for example when bounds are read from the data (``bounds='data'``)
    or when ``epsilon=np.inf`` switches an estimator to its non-private mode.
    skprivreg never installs a global warnings filter for it.
    """


class BudgetExceededError(ValueError):
    """A :class:`~skprivreg.BudgetAccountant` would go over its budget.

    Raised before any data is accessed; nothing is spent.
    """


class ConfigurationError(ValueError):
    """The requested guarantee is infeasible from public facts alone.

    Raised before any data access; spends nothing. The message may cite
    public numbers (for example the minimum sample size).
    """


class PrivateTestFailed(RuntimeError):
    """A data-dependent private test said FAIL (or bottom).

    The budget of the whole call *is* spent and recorded on the estimator's
    ``privacy_spent_`` before this is raised. The message is fixed and carries
    no data-dependent number.
    """


class CompositionError(ValueError):
    """Privacy spends whose guarantees cannot be composed into one.

    Raised, before any data is read, when label-DP and feature-DP spends would
    be composed (together they protect neither), or when an accountant
    declared for one notion or relation receives a spend that composes only
    to a weaker one.
    """
