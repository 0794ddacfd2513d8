"""Warnings and errors shared by every skprivreg estimator.

None of these carries a data-dependent number in its message: messages may cite
public quantities only (n, d, epsilon, delta, hyperparameters).
"""

import math

__all__ = [
    "PrivacyLeakWarning",
    "PlanningWarning",
    "PrivateTestFailedWarning",
    "BudgetExceededError",
    "ConfigurationError",
    "InsufficientDataError",
    "PrivacyInfeasibleError",
    "CompositionError",
    "PrivateTestFailed",
    "ISSPFailedError",
    "PrivacyCheckFailedError",
    "UnstableSupportError",
]


class PrivacyLeakWarning(UserWarning):
    """Something is released or derived without the stated privacy guarantee.

    Raised for example when bounds are read from the data (``bounds='data'``)
    or when ``epsilon=np.inf`` switches an estimator to its non-private mode.
    skprivreg never installs a global warnings filter for it.
    """


class PlanningWarning(UserWarning):
    """The public plan of a fit predicts a failed private test or a very large noise.

    Emitted before any data access, from public facts only (n, d, epsilon,
    delta, hyperparameters); it never depends on the data.
    """


class PrivateTestFailedWarning(UserWarning):
    """A private test failed and the documented default was released instead.

    Emitted with ``on_fail='zero'`` (zero coefficients) or ``on_fail='empty'``
    (an empty support). The budget is spent. Whether it fires is the outcome
    of the private test, which is released anyway (the default output says
    the same); the message is fixed.
    """


class BudgetExceededError(ValueError):
    """A :class:`~skprivreg.BudgetAccountant` would go over its budget.

    Raised before any data is accessed; nothing is spent.
    """


class ConfigurationError(ValueError):
    """The requested guarantee is infeasible from public facts alone.

    Raised before any data access; spends nothing. The message may cite
    public numbers (for example the minimum sample size). One exception,
    stated in its message: a condition that needs a privately released bound
    (the perturbation Lasso's penalty with an estimated ``y_bound``) is
    checked after that release, whose spend stays recorded.
    """


class InsufficientDataError(ConfigurationError):
    """The requested (epsilon, delta) needs more samples than there are.

    Raised from public facts only (n, d, epsilon, delta, bounds, declared
    variance floors) before any label is read; nothing is spent. The message
    cites ``n_samples=<n>``, the required bag size and the best achievable
    epsilon. One exception: with a label range read from the data
    (``bounds='data'``, no privacy for that range) the plan uses that range,
    which the message may cite; an estimator then records the read as spent
    (infinite epsilon).
    """


class PrivacyInfeasibleError(ConfigurationError):
    """Some bag's released design has rank >= its size (features only).

    Then the bag's labels lie in the column space of its design (RSS = 0)
    and the aggregate reveals a label change with certainty. Raised before
    any label is read; nothing is spent.
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


class ISSPFailedError(PrivateTestFailed):
    """ISSP's private test (PTR) or its private residual scale said FAIL.

    The budget is spent and recorded on ``privacy_spent_`` before raising; the
    message is fixed and carries no data-dependent number.
    """


class PrivacyCheckFailedError(PrivateTestFailed):
    """The private residual check (propose-test-release) refused to release.

    The budget of the call is spent (recorded before raising). The message is
    fixed: it carries no data-dependent number. Increase ``bag_size`` or
    ``epsilon``; a retry is a new mechanism run that spends a new budget.
    """


class UnstableSupportError(PrivateTestFailed):
    """The private stability test output bottom: no support is released.

    The budget of the call is spent and recorded before this is raised.
    The outcome is released as PASS/FAIL only: the message and the
    attributes hold public values alone, ``epsilon``, ``delta`` (the
    recorded guarantee of the call) and ``threshold`` (the public threshold of the test; ``None``
    in the non-private mode ``epsilon=inf``). No noisy or noiseless distance
    is ever attached.
    """

    def __init__(self, epsilon, delta, threshold):
        self.epsilon = epsilon
        self.delta = delta
        self.threshold = threshold
        if math.isinf(epsilon):
            message = (
                "epsilon=inf (non-private mode): the selection rule could not be "
                "evaluated on the data (it needs at least 2 rows and a solver that "
                "converges), so no support is released."
            )
        else:
            from .accounting import text_at_least as _text_at_least  # (a cycle at import)

            message = (
                "The private Lasso support is not stable enough to release (bottom) at "
                f"epsilon={_text_at_least(epsilon, 4)}, delta={_text_at_least(delta, 3)}. "
                "The budget is spent. More data, "
                "a larger epsilon, sampling='partition', or a smaller max_features can help."
            )
        super().__init__(message)
