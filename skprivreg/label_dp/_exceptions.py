"""Errors of the label-DP aggregation mechanisms (subclasses of the shared ones)."""

from ..exceptions import ConfigurationError, PrivateTestFailed

__all__ = ["InsufficientDataError", "PrivacyInfeasibleError", "PrivacyCheckFailedError"]


class InsufficientDataError(ConfigurationError):
    """The requested (epsilon, delta) needs more samples than there are.

    Raised from public facts only (n, d, epsilon, delta, bounds, declared
    variance floors) before any label is read; nothing is spent. The message
    cites ``n_samples=<n>``, the required bag size and the best achievable
    epsilon.
    """


class PrivacyInfeasibleError(ConfigurationError):
    """Some bag's released design has rank >= its size (features only).

    Then the bag's labels lie in the column space of its design (RSS = 0)
    and the aggregate reveals a label change with certainty (paper App. J).
    Raised before any label is read; nothing is spent.
    """


class PrivacyCheckFailedError(PrivateTestFailed):
    """The private residual check (propose-test-release) refused to release.

    The budget of the call is spent (recorded before raising). The message is
    fixed: it carries no data-dependent number. Increase ``bag_size`` or
    ``epsilon``; a retry is a new mechanism run that spends a new budget.
    """
