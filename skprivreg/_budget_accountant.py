"""The shared privacy budget: :class:`BudgetAccountant` (public in :mod:`skprivreg.accounting`)."""

import contextlib
import numbers
import os
import threading

import numpy as np

from ._budget_store import FileBudgetStore
from ._rounding import difference_at_most
from .accounting import (
    _BUDGET_RTOL,
    COMPOSITIONS,
    NEIGHBOURINGS,
    NOTIONS,
    Guarantee,
    PrivacyEvent,
    PrivacyLedger,
    compose_ledgers,
    group_privacy,
    text_at_least,
)
from .exceptions import BudgetExceededError, CompositionError, ConfigurationError

# ---------------------------------------------------------------------------
# A budget shared by many fits
# ---------------------------------------------------------------------------
# Relative slack of an amended ledger over its plan: the same guarantee computed
# again, a few roundings apart.
_AMEND_RTOL = 1e-12


class BudgetAccountant:
    """A privacy budget shared by many fits.

    Estimators take ``accountant=None``. When one is given, the estimator
    plans its ledger from public facts and spends it (:meth:`spend`, which
    checks first) before it reads any data value or draws any noise, so an
    exception inside a mechanism never loses a spend, and a failed private
    test is charged like any other fit.

    The accountant is a *handle*: :func:`sklearn.base.clone` (which deep-copies
    parameters) returns the same object, so every fit of a ``GridSearchCV``
    is charged to the same budget; so do :func:`copy.copy` and
    :func:`copy.deepcopy` of an estimator. It is thread-safe. A *fitted*
    estimator pickles without it: the loaded estimator holds a
    :class:`DetachedAccountant`, which refuses every fit until an accountant
    (or ``None``) is set again, so a saved model never refits outside the
    budget it was fitted under. (A ``PrivatePipeline`` whose ``memory`` cache
    hands back such a step gives it back its accountant.)

    Processes. By default the spends live in this object, and it refuses to
    be pickled: a copy in another process (joblib's workers under
    ``n_jobs > 1``) would record spends that never reach it. For the same
    reason it refuses to check or record a spend in a process forked from
    the one that created it (a ``fork`` multiprocessing pool). With
    ``processes=True`` the spends live in a lock-protected append-only file
    (created with mode 0600 in the temporary directory, removed when this
    object is garbage collected) and the accountant pickles as a handle to
    it: every copy, in any process of this machine, checks and records its
    spend in one atomic step under an exclusive file lock, so
    ``GridSearchCV(n_jobs=-1)`` records exactly the fits ``n_jobs=1``
    records, and no fit overspends. A fit's check before it reads the data
    sees the spends of every process, but budget held by fits still running
    in other processes only from their spends (reservations stay in their
    process): when two processes check at once, both may pass, and the
    second to spend is refused at its spend, after its data passes (which
    release nothing) and before any noise is drawn.

    A spend is accepted when the composed total stays within the budget up
    to a relative ``1e-9`` (totals are float sums and root-finding results,
    and a budget of 0.3 should take spends of 0.1 and 0.2, whose float sum is
    above 0.3): the total the accountant lets through is at most
    ``(1 + 1e-9)`` times the budget.

    Composition is typed: the total is a :class:`Guarantee` that states its
    notion and neighbouring relation, spends under different relations are
    converted to replace-one by group privacy, and label-DP spends never
    compose with feature-DP spends (:class:`~skprivreg.exceptions.CompositionError`,
    raised by :meth:`check` before any data is read).

    Parameters
    ----------
    epsilon : float, default=np.inf
        Total epsilon budget.
    delta : float, default=1.0
        Total delta budget.
    composition : {'basic', 'gdp'}, default='basic'
        How spends compose. ``'gdp'`` composes Gaussian events across fits
        by their mu, the rest by basic composition.
    notion : {'full', 'label', 'feature'} or None, default=None
        The notion the budget must guarantee. ``None`` accepts any spends
        whose composition is defined; ``'full'`` refuses label-DP and
        feature-DP spends (their total would only be label or feature DP);
        ``'label'`` and ``'feature'`` accept full-DP spends too (full DP
        implies both).
    neighbouring : {'replace-one', 'add-remove', 'zero-out'} or None, default=None
        The relation the total must be stated in. ``None``: the spends'
        common relation, or replace-one after conversion.
    processes : bool, default=False
        Share the budget with copies in other processes (joblib's ``loky``
        and ``multiprocessing`` backends) through a lock-protected file.

    Examples
    --------
    >>> from skprivreg import BudgetAccountant, AdaSSPRegressor
    >>> acc = BudgetAccountant(epsilon=3.0, delta=1e-4)
    >>> est = AdaSSPRegressor(epsilon=1.0, delta=1e-5, accountant=acc)
    >>> acc.spend(0.5, 1e-6)  # diffprivlib-style: a manual full-DP spend
    >>> epsilon_left, delta_left = acc.remaining()
    >>> print(f"{epsilon_left:g} {delta_left:g}")
    2.5 9.9e-05

    Across process workers:

    >>> from sklearn.model_selection import GridSearchCV
    >>> acc = BudgetAccountant(epsilon=20.0, delta=1e-3, processes=True)
    >>> search = GridSearchCV(AdaSSPRegressor(accountant=acc), {"epsilon": [0.5, 1.0]},
    ...                       cv=3, n_jobs=2)  # doctest: +SKIP
    """

    def __init__(self, epsilon=np.inf, delta=1.0, composition="basic", notion=None,
                 neighbouring=None, processes=False):
        if not (epsilon > 0):
            raise ValueError("epsilon must be > 0.")
        if not (0 < delta <= 1):
            raise ValueError("delta must lie in (0, 1].")
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}.")
        if notion is not None and notion not in NOTIONS:
            raise ValueError(f"notion must be None or one of {NOTIONS}.")
        if neighbouring is not None and neighbouring not in NEIGHBOURINGS:
            raise ValueError(f"neighbouring must be None or one of {NEIGHBOURINGS}.")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.composition = composition
        self.notion = notion
        self.neighbouring = neighbouring
        self.processes = bool(processes)
        self._spent = []
        self._reserved = []  # ledgers checked by fits in this process, not yet spent
        self._lock = threading.Lock()
        self._store = FileBudgetStore() if self.processes else None
        self._pid = os.getpid()

    def _check_process(self):
        """Refuse to check or record a spend in a forked process (``processes=False``):
        the child's copy of the spends never reaches the parent's budget."""
        if self._store is None and os.getpid() != self._pid:
            raise ConfigurationError(
                "This BudgetAccountant was created in another process and inherited by "
                "fork: spends recorded here would never reach its budget. Create it with "
                "BudgetAccountant(..., processes=True) to share it with other processes."
            )

    @contextlib.contextmanager
    def _locked(self):
        """Hold the thread lock (and the file lock); ``self._spent`` is up to date.

        Yields the open store file under ``processes=True``, else ``None``.
        """
        self._check_process()
        with self._lock:
            if self._store is None:
                yield None
                return
            with self._store.locked() as handle:
                self._spent = self._store.ledgers()
                yield handle

    def _record(self, handle, ledger):
        self._spent.append(ledger)
        if handle is not None:
            self._store.append_spend(handle, ledger)

    @staticmethod
    def _as_ledger(spend, delta):
        if isinstance(spend, PrivacyLedger):
            if delta is not None:
                raise TypeError("Pass either a PrivacyLedger or (epsilon, delta).")
            return spend
        if isinstance(spend, numbers.Real) and not isinstance(spend, bool):
            epsilon = float(spend)
            delta = 0.0 if delta is None else float(delta)
            return PrivacyLedger([PrivacyEvent("manual spend", epsilon, delta)])
        raise TypeError("Spend a PrivacyLedger or a pair (epsilon, delta).")

    def _total(self, extra=()):
        total = compose_ledgers([*self._spent, *extra], self.composition)
        # Full DP implies label DP and feature DP (each protects a part of a record).
        if self.notion is not None and total.notion not in (self.notion, "full"):
            raise CompositionError(
                f"This accountant guarantees {self.notion} DP; the spends would "
                f"compose to {total.notion} DP only."
            )
        if self.neighbouring is not None and total.neighbouring != self.neighbouring:
            if self.neighbouring != "replace-one":
                raise CompositionError(
                    f"This accountant states its total under {self.neighbouring} "
                    f"neighbours; the spends compose under {total.neighbouring} only."
                )
            eps, delta = group_privacy(total.epsilon, total.delta)
            total = Guarantee(eps, delta, total.notion, "replace-one", total.for_publication)
        return total

    def _raise_if_over(self, ledger):
        # Reserved ledgers count: a fit whose check passed may spend them.
        total = self._total([*(held.ledger for held in self._reserved), ledger])
        eps_over = total.epsilon > self.epsilon * (1 + _BUDGET_RTOL)
        delta_over = total.delta > self.delta * (1 + _BUDGET_RTOL)
        if eps_over or delta_over:
            spent = self._total()
            raise BudgetExceededError(
                "This fit would exceed the privacy budget: it plans "
                f"(epsilon={text_at_least(ledger.epsilon, 6)}, "
                f"delta={text_at_least(ledger.delta, 3)}) and the accountant has "
                f"(epsilon={self.epsilon:.6g}, delta={self.delta:.3g}) of which "
                f"(epsilon={text_at_least(spent.epsilon, 6)}, "
                f"delta={text_at_least(spent.delta, 3)}) is spent. Nothing was spent."
            )

    def check(self, spend, delta=None):
        """Raise if spending would exceed the budget or mix incompatible notions.

        ``spend`` is a :class:`PrivacyLedger`, or an epsilon with ``delta``
        (diffprivlib style, recorded as a full-DP replace-one spend).
        Budget held by fits in progress (:meth:`reserve`) counts as spent.
        Returns ``True`` when the spend fits.
        """
        ledger = self._as_ledger(spend, delta)
        with self._locked():
            self._raise_if_over(ledger)
        return True

    def spend(self, spend, delta=None, *, reservation=None):
        """Check, then record ``spend`` (a ledger, or epsilon and delta) atomically.

        ``reservation``: the token of :meth:`reserve` this spend takes the
        place of (released first, so its budget is available to it).
        """
        ledger = self._as_ledger(spend, delta)
        with self._locked() as handle:
            self._drop_reservation(reservation)
            self._raise_if_over(ledger)
            self._record(handle, ledger)

    def reserve(self, spend, delta=None):
        """Check ``spend`` and hold its budget for the caller; returns a token.

        Until the token is passed to :meth:`spend` or :meth:`release`, every
        other check and spend counts the reserved budget as spent, so two
        fits that share this accountant cannot both pass their checks, read
        the data, and then have one refused. Reservations are held in this
        process (with ``processes=True`` other processes see spends only).
        """
        ledger = self._as_ledger(spend, delta)
        with self._locked():
            self._raise_if_over(ledger)
            token = _Reservation(ledger)
            self._reserved.append(token)
        return token

    def release(self, reservation):
        """Give back the budget held by a :meth:`reserve` token (no spend)."""
        with self._locked():
            self._drop_reservation(reservation)

    def _drop_reservation(self, reservation):
        for index, held in enumerate(self._reserved):
            if held is reservation:
                del self._reserved[index]
                return

    def _amend(self, planned, final):
        """Replace a recorded ``planned`` ledger by its ``final`` form.

        Estimators spend their plan before reading data; noise scales that
        depend on privately released bounds are known only later. The final
        ledger must state the same notion and relation and at most the planned
        epsilon and delta (a tighter composition may lower them).
        """
        # The final ledger restates the plan's guarantee (recomputed: a few
        # roundings apart); the budget's own slack is not granted twice.
        same = (
            final.epsilon <= planned.epsilon * (1 + _AMEND_RTOL) + 1e-15
            and final.delta <= planned.delta * (1 + _AMEND_RTOL) + 1e-300
            and planned.notion == final.notion
            and planned.neighbouring == final.neighbouring
        )
        if not same:
            raise ValueError("A ledger may be amended only to one stating the same guarantee.")
        with self._locked() as handle:
            if handle is not None:
                if self._store.amend(handle, planned, final):
                    self._spent = self._store.ledgers()
                    return
            else:
                for index in range(len(self._spent) - 1, -1, -1):
                    if self._spent[index] is planned:
                        self._spent[index] = final
                        return
        raise ValueError("The planned ledger was not spent on this accountant.")

    def total(self):
        """The :class:`Guarantee` spent so far (iterates as ``(epsilon, delta)``)."""
        with self._locked():
            return self._total()

    def remaining(self):
        """``(epsilon, delta)`` left.

        Under ``'gdp'`` the remaining epsilon is the budget minus the composed
        total; a new spend may fit even when it exceeds this difference,
        because GDP composition is sub-additive. Each difference is rounded
        down, so spending all of it keeps the exact total within the budget.
        """
        total = self.total()
        return (max(difference_at_most(self.epsilon, total.epsilon), 0.0),
                max(difference_at_most(self.delta, total.delta), 0.0))

    @property
    def ledgers(self):
        """The ledgers spent so far, one per fit, in order."""
        with self._locked():
            return list(self._spent)

    @property
    def n_spends(self):
        """How many ledgers were spent (one per fit)."""
        with self._locked():
            return len(self._spent)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        if self._store is not None:
            return (
                _attach_accountant,
                (self._store.path, self.epsilon, self.delta, self.composition,
                 self.notion, self.neighbouring),
            )
        raise TypeError(
            "A BudgetAccountant cannot be pickled: a copy in another process would "
            "record spends that never reach this budget (with GridSearchCV or "
            "cross_val_score, every worker under n_jobs>1 gets a copy). Create it with "
            "BudgetAccountant(..., processes=True) to share it with process workers, "
            "or use n_jobs=1, or a thread backend (joblib.parallel_backend('threading')). "
            "A fitted estimator pickles without its accountant."
        )

    def __repr__(self):
        total = self.total()
        return (
            f"BudgetAccountant(epsilon={self.epsilon}, delta={self.delta}, "
            f"composition={self.composition!r}; spent {total} in {self.n_spends} fits)"
        )


class DetachedAccountant(BudgetAccountant):
    """The accountant of an estimator loaded from a pickle: it refuses every fit.

    A fitted estimator is saved without its accountant (a handle to a live
    budget in the process that fitted it). Refitting the loaded estimator, or
    a clone of it (a pipeline's ``memory`` cache hands back loaded steps),
    would otherwise run outside that budget unnoticed: set ``accountant`` to
    a :class:`BudgetAccountant`, or to ``None`` for a fit that no budget
    records, first. Predicting needs no accountant.
    """

    def __init__(self):
        super().__init__()

    def _refuse(self, *args, **kwargs):
        raise ConfigurationError(
            "This estimator was loaded from a pickle (or from a pipeline's memory cache), "
            "which does not save its accountant (a live budget of the process that "
            "fitted it). Set "
            "set_params(accountant=BudgetAccountant(...)), or accountant=None for a fit "
            "that no budget records, before fitting it again. Nothing was spent."
        )

    check = reserve = spend = _refuse

    def __reduce__(self):
        return (DetachedAccountant, ())

    def __repr__(self):
        return "DetachedAccountant()"


class _Reservation:
    """Token of :meth:`BudgetAccountant.reserve`: the ledger whose budget is held."""

    __slots__ = ("ledger",)

    def __init__(self, ledger):
        self.ledger = ledger


def _attach_accountant(path, epsilon, delta, composition, notion, neighbouring):
    """A copy of a ``processes=True`` accountant, attached to its store ``path``."""
    acc = BudgetAccountant.__new__(BudgetAccountant)
    acc.epsilon, acc.delta, acc.composition = epsilon, delta, composition
    acc.notion, acc.neighbouring, acc.processes = notion, neighbouring, True
    acc._spent = []
    acc._reserved = []
    acc._lock = threading.Lock()
    acc._store = FileBudgetStore(path)
    return acc
