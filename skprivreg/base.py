"""The shared mixin of every skprivreg estimator: privacy parameters, accounting, randomness."""

import copy
import functools
import math
import traceback
import warnings

import numpy as np

from ._compat import Interval, Options, Real
from ._random import (
    SpendFirstGenerator,
    noise_is_reproducible,
    public_generators,
    secret_generators,
)
from .accounting import BudgetAccountant, DetachedAccountant, PrivacyLedger
from .exceptions import ConfigurationError, PrivacyLeakWarning

__all__ = ["DPEstimatorMixin", "SAMPLE_WEIGHT_MESSAGE"]

SAMPLE_WEIGHT_MESSAGE = (
    "{name}.fit does not accept sample_weight: a weight multiplies one record's "
    "contribution to the released statistics, so the noise calibrated to one "
    "record's bounded contribution would no longer cover it. Repeat or aggregate "
    "rows before fitting, and account for the records each row stands for."
)


def _keyword_only_init(cls, init):
    """Wrap ``init`` so positional or withdrawn parameters raise a clear error."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        name = type(self).__name__
        if args:
            raise TypeError(
                f"{name} takes keyword arguments only, as scikit-learn's estimators "
                f"do: write {name}(epsilon=..., delta=...), got {len(args)} positional "
                "argument(s)."
            )
        renamed = getattr(type(self), "_renamed_parameters", {})
        for old in kwargs:
            if old in renamed:
                raise TypeError(
                    f"{name} has no parameter {old!r}: it is called {renamed[old]!r}. "
                    "See the user guide's table of bound parameters."
                )
        init(self, **kwargs)

    return __init__


class quiet_floats:  # noqa: N801 (used like a function)
    """``function`` called with NumPy's floating-point warnings off (picklable).

    Whether a sum overflows, or an entry's square underflows, depends on the
    records: such a warning would tell one record apart. Every private fit
    runs under this, and so does each function that a fit hands to another
    thread or process (a thread pool, a Dask worker, a joblib worker), whose
    floating-point state is its own. Non-finite input is refused explicitly
    instead, before any budget is spent.
    """

    def __init__(self, function):
        self.function = function
        functools.update_wrapper(self, function)

    def __call__(self, *args, **kwargs):
        with np.errstate(all="ignore"):
            return self.function(*args, **kwargs)


def without_float_warnings(method):
    """``method`` (a function or method that releases values) run under
    :class:`quiet_floats`, as a plain function with the same signature."""
    quiet = quiet_floats(method)

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        return quiet(*args, **kwargs)

    return wrapper


def accountant_params(estimator):
    """``{name: accountant}`` of every ``accountant`` parameter of ``estimator``, nested
    ones included (``get_params(deep=True)`` names), whatever its value."""
    if not hasattr(estimator, "get_params"):
        return {}
    return {name: value for name, value in estimator.get_params(deep=True).items()
            if name.rsplit("__", 1)[-1] == "accountant"}


def refuse_uncharged_accountant(held, accountant, owner, name):
    """Refuse an accountant ``held`` by a sub-estimator that ``owner`` fits without it.

    The outer estimator records the whole spend on its own ``accountant``
    once; another accountant on the sub-estimator would record nothing of the
    fits it was meant to limit. ``None`` or the outer accountant itself
    passes. The accountant of an estimator loaded from a pickle refuses with
    its own message. Before any spend.
    """
    if held is None or held is accountant:
        return
    if isinstance(held, DetachedAccountant):
        held.check(0.0)
    raise ConfigurationError(
        f"The estimator's accountant is not charged by {owner}: its fits run without it "
        f"and {owner} records one spend of its own. Pass that accountant to "
        f"{name}(accountant=...), or set the estimator's accountant to None. Nothing was "
        "spent."
    )


def charge_refits_to(estimator, accountant):
    """Give a fitted sub-estimator (a search's ``best_estimator_``, a Lasso's stage 2)
    the outer estimator's ``accountant`` wherever it has none.

    Sub-estimators are fitted with ``accountant=None``: their spend is part of
    the outer estimator's, recorded once. Refitting one directly is a new
    private fit, which is then charged to the same budget.
    """
    if accountant is None:
        return
    held = {name: accountant for name, value in accountant_params(estimator).items()
            if value is None}
    if held:
        estimator.set_params(**held)


def _refuse_sample_weight(fit):
    """Wrap ``fit`` so ``sample_weight`` is refused with the reason, and the fit
    runs without floating-point warnings (:func:`without_float_warnings`)."""
    quiet_fit = without_float_warnings(fit)

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        if kwargs.get("sample_weight") is not None or "sample_weight" in kwargs:
            raise TypeError(SAMPLE_WEIGHT_MESSAGE.format(name=type(self).__name__))
        accountant = self.__dict__.get("accountant")
        if isinstance(accountant, DetachedAccountant):
            # Refused before fit resets anything: the loaded model keeps working.
            accountant.check(0.0)
        return keeping(self, *args, **kwargs)

    keeping = _keeping_previous_model(_releasing_budget(quiet_fit))
    return wrapper


def _keeping_previous_model(fit):
    """Wrap a fitting method so that, refused before any spend (bad input, an exceeded
    budget), it gives the estimator back its previous fitted attributes: nothing of
    the new rows was released. A fit that fails after its spend keeps none."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        previous = _fitted_attributes(self)
        try:
            return fit(self, *args, **kwargs)
        except BaseException as exc:
            if "privacy_spent_" in self.__dict__:
                forget_secret_frames(exc)
            elif previous:
                for name in _fitted_attributes(self):
                    delattr(self, name)
                self.__dict__.update(previous)
            raise
        finally:
            _close_pending_spend(self)

    return wrapper


def _close_pending_spend(estimator):
    """End the fit's spend-first generators (:meth:`DPEstimatorMixin._secret_rngs`).

    A generator that outlives its fit (held by a refused fit's traceback, which
    an error tracker or a pretty-printer may walk) must never record that fit's
    plan later: it would be charged to the accountant and written over the
    model the estimator holds (the previous one, given back). Once closed, a
    draw from it raises instead.
    """
    state = estimator.__dict__.pop("_pending_spend", None)
    if state is not None:
        state["closed"] = True


def forget_secret_frames(exc):
    """Clear the local variables of the finished frames in ``exc``'s traceback.

    An exception raised after a spend (a failed private test) would keep the
    fit's frames alive, and with them its secret generators, whose draws can
    be replayed from their seeds, and secret intermediate values: any code
    that stores the traceback's variables (an error tracker) would hold them.
    The exception, its message and the frames' names and lines stay.
    """
    traceback.clear_frames(exc.__traceback__)


def _fitted_attributes(estimator):
    """``{name: value}`` of ``estimator``'s fitted attributes (names ending in ``_``)."""
    return {key: value for key, value in vars(estimator).items()
            if key.endswith("_") and not key.startswith("__")}


def _releasing_budget(method):
    """Wrap a method that may check the budget so that budget it held but did not
    spend is given back when it ends, whether it returns or raises."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            self._release_budget()

    wrapper._releases_budget = True
    return wrapper


class DPEstimatorMixin:
    """Validation, accounting and randomness shared by every skprivreg estimator.

    Put it first in the bases:
    ``class ISSPRegressor(DPEstimatorMixin, RegressorMixin, BaseEstimator)``.

    Subclasses merge :attr:`_privacy_parameter_constraints` into their
    ``_parameter_constraints`` and follow this order in ``fit``:

    1. :meth:`_reset` (no attribute of a previous fit survives a fit that
       fails after its spend; a fit refused before any spend, for bad input
       or an exceeded budget, gets the previous fit's attributes back), then
       validate parameters and data (errors before any budget is spent);
    2. plan the :class:`~skprivreg.accounting.PrivacyLedger` from public facts
       only (n, d, hyperparameters) and :meth:`_spend` it: the accountant
       checks and records it, and ``privacy_spent_`` is set, before any data
       value reaches a mechanism and before any noise is drawn;
    3. run the mechanisms with the noise scales recorded in that ledger and
       generators from :meth:`_secret_rngs`; when a noise scale depends on a
       privately released bound, :meth:`_settle` replaces the plan by the
       final ledger (same guarantee, so nothing more is spent);
    4. raise :class:`~skprivreg.exceptions.PrivateTestFailed` after a failed
       private test: the spend stays recorded.

    Randomness: every secret draw comes from :meth:`_secret_rngs` (fresh OS
    entropy in every fit, whatever ``random_state`` is); only randomness that
    is released anyway comes from :meth:`_public_rngs` (``random_state``).

    ``fit`` never writes to a constructor parameter; resolved values go to
    attributes ending in ``_``.

    Every constructor parameter is keyword-only. A subclass lists withdrawn
    parameter names in ``_renamed_parameters`` (old name -> new name): passing
    one raises a ``TypeError`` that names the new parameter. ``fit`` refuses
    ``sample_weight`` with the reason (:data:`SAMPLE_WEIGHT_MESSAGE`).
    """

    #: Withdrawn constructor parameter -> the parameter that replaces it.
    _renamed_parameters = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _keyword_only_init(cls, cls.__dict__["__init__"])
        if "fit" in cls.__dict__:
            cls.fit = _refuse_sample_weight(cls.__dict__["fit"])
        if "fit_aggregated" in cls.__dict__:  # a fit from released data
            cls.fit_aggregated = _keeping_previous_model(cls.__dict__["fit_aggregated"])
        outcomes = getattr(cls, "add_outcomes", None)  # from a mixin, too
        if outcomes is not None and not getattr(outcomes, "_releases_budget", False):
            cls.add_outcomes = _releasing_budget(outcomes)

    _privacy_parameter_constraints = {
        # np.inf is the non-private test mode (with a PrivacyLeakWarning).
        "epsilon": [Interval(Real, 0, None, closed="neither"), Options(Real, {np.inf})],
        # At least 1e-300: an estimator splits delta into a few parts, which
        # must not round to 0 (at 5e-324 they did, with a confusing error).
        "delta": [Interval(Real, 1e-300, 1, closed="left")],
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

    def _reset(self):
        """Delete every fitted attribute, so a refit that fails after its spend leaves
        none behind (``fit`` restores them when it is refused before any spend)."""
        for name in _fitted_attributes(self):
            delattr(self, name)
        self.__dict__.pop("_pending_spend", None)
        self.__dict__.pop("_reproducible_draws", None)
        self._release_budget()

    def _check_budget(self, ledger):
        """Raise ``BudgetExceededError`` if ``ledger`` does not fit; spend nothing.

        The budget is held for this fit (:meth:`BudgetAccountant.reserve`)
        until it spends or ends: a fit on another thread sharing the
        accountant cannot pass its own check in between, read the data, and
        then be refused.
        """
        if self.accountant is not None:
            self._release_budget()
            self._reservation = self.accountant.reserve(ledger)

    def _release_budget(self):
        """Give back budget held by :meth:`_check_budget` and not spent."""
        held = self.__dict__.pop("_reservation", None)
        if held is not None and self.accountant is not None:
            self.accountant.release(held)

    def _spend(self, ledger):
        """Record ``ledger`` on the accountant and on ``privacy_spent_``.

        Called before any data value reaches a mechanism and before any noise
        is drawn, so nothing that happens afterwards (an exception, a failed
        private test) can lose the spend.

        The fit is marked reproducible (``noise_reproducible_``, a ledger not
        for publication) if :meth:`_secret_rngs` seeded any of its
        generators from the testing facility, or if the facility is active
        in this context now (for secret draws seeded after the spend).
        """
        if not isinstance(ledger, PrivacyLedger):
            raise TypeError("_spend expects a PrivacyLedger.")
        reproducible = self.__dict__.get("_reproducible_draws", False)
        ledger.for_publication = not (reproducible or noise_is_reproducible())
        if self.accountant is not None:
            self.accountant.spend(ledger, reservation=self.__dict__.pop("_reservation", None))
        self.privacy_spent_ = ledger
        self.noise_reproducible_ = not ledger.for_publication

    def _settle(self, ledger):
        """Make ``ledger`` the final ledger of this fit.

        If the plan was already spent, replace it (same notion and relation,
        at most the planned epsilon and delta: nothing more is spent);
        otherwise spend ``ledger`` now (a fit that drew no noise).
        """
        pending = self.__dict__.pop("_pending_spend", None)
        if pending is not None and not pending["spent"]:
            pending["spent"] = True
            self._spend(ledger)
            return
        planned = self.privacy_spent_
        ledger.for_publication = planned.for_publication
        if self.accountant is not None:
            self.accountant._amend(planned, ledger)
        self.privacy_spent_ = ledger

    def _secret_rngs(self, *purposes, spend=None):
        """Independent generators for secret draws, from fresh OS entropy.

        With ``spend`` (the planned ledger, already checked with
        :meth:`_check_budget`), the generators record that spend before
        their first draw: data passes that release nothing (and may still
        refuse bad input) can run first, and no noise is ever drawn before
        the spend is recorded. Finish such a fit with :meth:`_settle`.

        Whether the generators are seeded by the testing facility
        (:func:`skprivreg.testing.reproducible_noise`) is decided here, and
        that decision marks the fit in :meth:`_spend`. The setting is local
        to this thread's context, so it reads the same here and inside
        :func:`~skprivreg._random.secret_generators` just below.
        """
        reproducible = noise_is_reproducible()
        rngs = secret_generators(purposes, self.random_state)
        if reproducible:
            self._reproducible_draws = True
            spent = self.__dict__.get("privacy_spent_")
            if spent is not None:  # generators seeded after the spend
                spent.for_publication = False
                self.noise_reproducible_ = True
        if spend is None:
            return rngs
        state = {"spent": False}
        self._pending_spend = state

        def before():
            if state.get("closed"):
                raise RuntimeError("This fit has ended: its secret generators draw nothing more.")
            if not state["spent"]:
                state["spent"] = True
                self._spend(spend)

        return {purpose: SpendFirstGenerator(rng, before) for purpose, rng in rngs.items()}

    def _public_rngs(self, *purposes):
        """Independent generators for released randomness, from ``random_state``."""
        return public_generators(self.random_state, purposes)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_reservation", None)  # a hold on a live budget, of this process only
        if "privacy_spent_" in state and state.get("accountant") is not None:
            # A fitted estimator is saved without its accountant (a handle to a
            # live budget); its privacy_spent_ stays. The loaded estimator (and
            # its clones) refuse to fit until an accountant is set again.
            state = dict(state, accountant=DetachedAccountant())
        return state

    def __copy__(self):
        """A copy that shares the accountant (a handle: its fits are charged to it)."""
        new = type(self).__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_reservation"})
        return new

    def __deepcopy__(self, memo):
        """A deep copy that shares the accountant (which deep-copies to itself); a pickle
        saves none (:meth:`__getstate__`)."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            if key != "_reservation":
                new.__dict__[key] = copy.deepcopy(value, memo)
        return new

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Noise is fresh in every fit: refits on the same data differ.
        tags.non_deterministic = True
        if tags.regressor_tags is not None:
            # DP noise makes sklearn's toy-data score thresholds meaningless.
            tags.regressor_tags.poor_score = True
        return tags
