"""Hiding the warnings of a fit's inner computations, safely across threads."""

import os
import threading
import warnings

__all__ = ["quiet_warnings"]

_IGNORE_ALL = ("ignore", None, Warning, None, 0)
# What warnings.catch_warnings saves and restores.
_STATE = ("filters", "showwarning", "_showwarnmsg_impl")

# The depth counts the threads (and nested blocks) inside quiet_warnings; the
# first to enter saves the warnings state in _saved, the last to leave restores it.
_lock = threading.Lock()
_depth = 0
_saved = None


def _reset_lock_in_child():
    # A process forked while another thread held the lock would wait forever.
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_in_child)


def _drop(*args, **kwargs):
    """Show nothing (``showwarning`` and ``_showwarnmsg_impl`` while quiet)."""


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
    """Context manager: no warning is shown while any thread is inside it.

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
    ``warnings._showwarnmsg_impl``, installs a filter that ignores every
    warning and replaces both display hooks by functions that show nothing;
    the last thread to leave restores exactly what was saved. Nested and
    concurrent blocks are fine, and an exception inside still restores.
    The price: while any thread is inside, the warnings of *all* threads of
    the process are hidden, and filters added meanwhile are discarded on
    restore. Code that enters ``warnings.catch_warnings`` on another thread
    and stays in it across the start or the end of a quiet period can still
    restore an older state, as it would without this helper.

    The state is per process: a function run by a process worker (joblib's
    loky or multiprocessing backends, whose warnings print to the worker's
    stderr) must enter this block itself, inside the worker, not only around
    the ``Parallel`` call.
    """

    def __enter__(self):
        global _depth, _saved
        with _lock:
            if _depth == 0:
                _saved = {name: getattr(warnings, name) for name in _STATE
                          if hasattr(warnings, name)}
                warnings.filters = [_IGNORE_ALL]
                for name in _saved:
                    if name != "filters":
                        setattr(warnings, name, _drop)
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
