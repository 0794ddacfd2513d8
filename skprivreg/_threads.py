"""BLAS on one thread while a pass multiplies cache-sized pieces on several threads.

A pass reads its rows in pieces of about a megabyte (:mod:`skprivreg._gram`)
on one thread per core, or as Dask tasks, one per worker thread. A product
over one piece is too small for BLAS's own threads to pay: they wake, split
a few hundred kilobytes and meet again for every piece, and on a machine
whose cores are already busy with the pass's threads they compete with
them. Measured at n = 1e6, d = 10 on two cores: a one-round
``LinearRegression`` on a Dask array under Dask's threaded scheduler took
167 ms with BLAS on two threads and 83 ms on one. ``distributed`` starts
its worker processes with one BLAS thread already; Dask's local schedulers
and in-process workers share the driver's BLAS.
"""

import contextlib
import os
import threading

import threadpoolctl
from threadpoolctl import ThreadpoolController

__all__ = ["single_threaded_blas"]

_LIMIT = {"lock": threading.Lock(), "users": 0, "limiter": None}


def _reset_in_child():
    # A process forked while a pass ran in another thread would inherit its count
    # (BLAS never restored) or its held lock (the next pass waiting forever).
    # The passes did not fork with it: the child gets BLAS's own setting back.
    limiter = _LIMIT.get("limiter")
    _LIMIT.update(lock=threading.Lock(), users=0, limiter=None, pid=None)
    if limiter is not None:
        try:
            with _any_thread():
                limiter.restore_original_limits()
        except Exception:  # noqa: BLE001 (a fork handler must not raise)
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)


@contextlib.contextmanager
def single_threaded_blas():
    """BLAS on one thread while any threaded pass or pass task runs (reference-counted).

    The limit is process-wide: the first pass to enter sets it, the last to
    leave restores the previous setting, so concurrent fits (a threaded
    grid search, the tasks of one Dask pass) never leave BLAS limited after
    they finish.
    """
    with _LIMIT["lock"]:
        if _LIMIT["users"] == 0:
            if _LIMIT.get("pid") != os.getpid():  # finding the libraries costs milliseconds
                _LIMIT["controller"], _LIMIT["pid"] = ThreadpoolController(), os.getpid()
            with _any_thread():
                _LIMIT["limiter"] = _LIMIT["controller"].limit(limits=1, user_api="blas")
        _LIMIT["users"] += 1
    try:
        yield
    finally:
        with _LIMIT["lock"]:
            _LIMIT["users"] -= 1
            if _LIMIT["users"] == 0:
                with _any_thread():
                    _LIMIT["limiter"].restore_original_limits()
                _LIMIT["limiter"] = None


@contextlib.contextmanager
def _any_thread():
    """Let this thread set OpenBLAS's process-wide limit, and leave it to any thread after.

    threadpoolctl (3.8 and later) lets only one thread at a time set the
    limit of an OpenBLAS without OpenMP, and silently ignores the others;
    the first thread to set it keeps that role while it lives. The limit
    here is set by the first pass (or pass task) to enter and restored by
    the last to leave, which may run on another thread (two Dask tasks),
    and a Dask task's thread outlives the pass: without this, the restore
    (or every later pass on the fit's own thread) would be ignored. Called
    under the limiter's lock, so no two of our settings interleave.
    """
    clear = getattr(getattr(threadpoolctl, "OpenBLASController", None),
                    "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)
    try:
        yield
    finally:
        if clear is not None:
            clear(force=True)
