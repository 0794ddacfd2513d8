"""The shared mixin of every skprivreg estimator: privacy parameters, accounting, randomness."""

import math
import numbers
import warnings

import numpy as np

from ._compat import Interval, Options, Real
from .accounting import BudgetAccountant, PrivacyLedger
from .exceptions import PrivacyLeakWarning

__all__ = ["DPEstimatorMixin", "get_rng", "seed_sequence"]


def seed_sequence(random_state):
    """A :class:`numpy.random.SeedSequence` from ``random_state``.

    - ``None``: fresh OS entropy (128 bits or more), never a 32-bit seed.
    - ``int``: that seed (reproducible; anyone who knows it can reproduce the
      noise, so never publish a seed used on private data).
    - ``numpy.random.Generator``: 256 bits drawn from it (the generator advances,
      so repeated fits get fresh noise).
    - legacy ``numpy.random.RandomState``: accepted only as a source of a seed,
      for reproducible tests; secret draws never use MT19937 itself.
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(
            [int(v) for v in random_state.integers(0, 2**63, size=4)]
        )
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(
            [int(v) for v in random_state.randint(0, 2**31, size=8)]
        )
    raise ValueError(
        "random_state must be None, an int, a numpy.random.Generator or a "
        "numpy.random.RandomState."
    )


def get_rng(random_state, purposes=None):
    """Independent PCG64 generators, one per purpose, from ``random_state``.

    Released values (a public partition, a subsample pattern) and secret
    values (noise, secret weights, a PTR draw) must never come from one
    stream: pass one purpose for each and use each generator for one thing.

    Parameters
    ----------
    random_state : None, int, Generator or RandomState
        See :func:`seed_sequence`.
    purposes : sequence of str or None
        ``None`` returns a single generator; otherwise a dict
        ``{purpose: Generator}`` of independent children of one
        :class:`~numpy.random.SeedSequence` (spawned in the given order).
    """
    seq = seed_sequence(random_state)
    if purposes is None:
        return np.random.Generator(np.random.PCG64(seq))
    purposes = list(purposes)
    children = seq.spawn(len(purposes))
    return {
        purpose: np.random.Generator(np.random.PCG64(child))
        for purpose, child in zip(purposes, children)
    }


class DPEstimatorMixin:
    """Validation and accounting shared by every skprivreg estimator.

    Put it first in the bases:
    ``class ISSPRegressor(DPEstimatorMixin, RegressorMixin, BaseEstimator)``.

    Subclasses merge :attr:`_privacy_parameter_constraints` into their
    ``_parameter_constraints`` and follow this order in ``fit``:

    1. validate parameters and data (errors before any budget is spent);
    2. build the planned :class:`~skprivreg.accounting.PrivacyLedger` from
       public facts only (n, d, hyperparameters) and call
       :meth:`_check_budget` before the data is used by any mechanism;
    3. run the mechanisms with the noise scales recorded in that ledger;
    4. :meth:`_charge` the ledger (also before raising
       :class:`~skprivreg.exceptions.PrivateTestFailed`).

    ``fit`` never writes to a constructor parameter; resolved values go to
    attributes ending in ``_``.
    """

    _privacy_parameter_constraints = {
        # np.inf is the non-private test mode (with a PrivacyLeakWarning).
        "epsilon": [Interval(Real, 0, None, closed="neither"), Options(Real, {np.inf})],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "accountant": [BudgetAccountant, None],
        "random_state": ["random_state", np.random.Generator],
    }

    def _validate_privacy_params(self):
        """Warn for the non-private test mode; return ``True`` when private."""
        if math.isinf(self.epsilon):
            warnings.warn(
                f"{type(self).__name__}(epsilon=inf) adds no noise: the result is not "
                "differentially private (non-private test mode).",
                PrivacyLeakWarning,
                stacklevel=3,
            )
            return False
        return True

    def _check_budget(self, ledger):
        """Raise ``BudgetExceededError`` before data access if the plan does not fit."""
        if self.accountant is not None:
            self.accountant.check(ledger)

    def _charge(self, ledger):
        """Record ``ledger`` on the accountant and on ``privacy_spent_``."""
        if not isinstance(ledger, PrivacyLedger):
            raise TypeError("_charge expects a PrivacyLedger.")
        if self.accountant is not None:
            self.accountant.spend(ledger)
        self.privacy_spent_ = ledger

    def _rngs(self, *purposes):
        """Independent generators for ``purposes`` from ``self.random_state``."""
        return get_rng(self.random_state, purposes)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if tags.regressor_tags is not None:
            # DP noise makes sklearn's toy-data score thresholds meaningless.
            tags.regressor_tags.poor_score = True
        return tags
