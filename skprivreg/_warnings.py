"""Hiding the warnings of a fit's inner computations, safely across threads."""

import os
import threading
import warnings

from .exceptions import PrivacyLeakWarning

__all__ = ["quiet_warnings"]

_IGNORE_ALL = ("ignore", None, Warning, None, 0)
#: Shown on every thread even while quiet: it says that a result is not
#: differentially private, a fact of the configuration, never of the data.
_ALWAYS_SHOWN = PrivacyLeakWarning
# What warnings.catch_warnings saves and restores.
_STATE = ("filters", "showwarning", "_showwarnmsg_impl")

# The depth counts the threads (and nested blocks) inside quiet_warnings; the
# first to enter saves the warnings state in _saved, the last to leave restores it.
_lock = threading.Lock()
_depth = 0
_saved = None
# The display hooks saved by the latest quiet period (kept after it ends, for
# a warning already on its way to _show_saved when the period ended).
_display = {}


def _reset_lock_in_child():
    # A process forked while another thread held the lock would wait forever.
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_in_child)


def _drop(*args, **kwargs):
    """Show nothing (``_showwarnmsg_impl`` while quiet)."""


def _quiet_filters(filters):
    """The filters of a quiet period: ``filters`` narrowed to :data:`_ALWAYS_SHOWN`, in
    their order, then Python's default action for it, then one that ignores the rest.

    A filter for a parent category (``Warning``, ``UserWarning``) applies to
    :data:`_ALWAYS_SHOWN` only, so an ``"error"`` filter of the user turns a
    privacy-leak warning into an exception as it would outside, but never an
    inner warning of a fit.
    """
    kept = []
    for action, message, category, module, lineno in filters:
        if issubclass(_ALWAYS_SHOWN, category):
            kept.append((action, message, _ALWAYS_SHOWN, module, lineno))
        elif issubclass(category, _ALWAYS_SHOWN):
            kept.append((action, message, category, module, lineno))
    return [*kept, (warnings.defaultaction, None, _ALWAYS_SHOWN, None, 0), _IGNORE_ALL]


def _show_saved(message, category, filename, lineno, file=None, line=None):
    """``showwarning`` while quiet: a warning the quiet filters let through
    (:data:`_ALWAYS_SHOWN`) goes to the display saved on entry, anything else nowhere."""
    saved = _display
    if not issubclass(category, _ALWAYS_SHOWN):
        return
    show = saved.get("showwarning")
    if show is not None and show is not getattr(warnings, "_showwarning_orig", None):
        show(message, category, filename, lineno, file, line)
    elif "_showwarnmsg_impl" in saved:
        saved["_showwarnmsg_impl"](
            warnings.WarningMessage(message, category, filename, lineno, file, line))


def _filters_mutated():
    """Tell the warnings machinery that the filters changed (as catch_warnings does),
    so the once/default registries of warnings seen before are not trusted."""
    mutated = getattr(warnings, "_filters_mutated", None)
    if mutated is not None:
        mutated()
        return
    mutated = getattr(warnings, "_filters_mutated_lock_held", None)
    if mutated is not None:
        with warnings._lock:
            mutated()


class quiet_warnings:  # noqa: N801 (used like a function)
    """Context manager: no warning but a privacy leak's is shown while any thread is inside it.

    A private fit hides the warnings of its inner computations (subsample
    fits, dry runs, the runs of a private search): such a warning can carry
    a value of the data (scikit-learn's ``ConvergenceWarning`` states the
    duality gap), and nothing that leaves a fit may depend on the data
    except through its privacy guarantee.

    ``warnings.catch_warnings`` cannot be used for this: before Python 3.14
    it saves and restores the process-wide filters, so blocks running at the
    same time on several threads (joblib's threading backend) restore each
    other's state. An inner warning then escapes while its own block still
    runs, and an "ignore" filter can be left behind after the fit, hiding
    later warnings the user should see.

    Here one lock and one count cover all threads: the first thread to enter
    saves ``warnings.filters``, ``warnings.showwarning`` and
    ``warnings._showwarnmsg_impl``, installs filters that ignore every
    warning but :class:`~skprivreg.exceptions.PrivacyLeakWarning` and
    display hooks that show nothing else; the last thread to leave restores
    exactly what was saved. Nested and concurrent blocks are fine, and an
    exception inside still restores. The price: while any thread is inside,
    the other warnings of *all* threads of the process are hidden, and
    filters added meanwhile are discarded on restore.

    A :class:`~skprivreg.exceptions.PrivacyLeakWarning` is shown on every
    thread, inside a block or not, as the saved filters and display say
    (an ``"error"`` filter raises it, an ``"ignore"`` filter hides it): it
    states that a result is not differentially private (``epsilon=inf``, a
    bound read from the data, reproducible noise), a fact of the
    configuration that no record decides, and a fit running on another
    thread must not hide it. Code that enters ``warnings.catch_warnings`` on another thread
    and stays in it across the start or the end of a quiet period can still
    restore an older state, as it would without this helper.

    The state is per process: a function run by a process worker (joblib's
    loky or multiprocessing backends, whose warnings print to the worker's
    stderr) must enter this block itself, inside the worker, not only around
    the ``Parallel`` call.
    """

    def __enter__(self):
        global _depth, _saved, _display
        with _lock:
            if _depth == 0:
                _saved = {name: getattr(warnings, name) for name in _STATE
                          if hasattr(warnings, name)}
                _display = {name: value for name, value in _saved.items() if name != "filters"}
                warnings.filters = _quiet_filters(_saved["filters"])
                if "showwarning" in _saved:
                    warnings.showwarning = _show_saved
                if "_showwarnmsg_impl" in _saved:
                    warnings._showwarnmsg_impl = _drop
                _filters_mutated()
            _depth += 1
        return self

    def __exit__(self, *exc_info):
        global _depth, _saved
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, value in _saved.items():
                    setattr(warnings, name, value)
                _saved = None
                _filters_mutated()
        return False
