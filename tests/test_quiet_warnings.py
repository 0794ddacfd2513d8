"""quiet_warnings: the warnings of a fit's inner computations stay hidden on every
thread, and the warnings state is restored exactly once the last thread leaves.

``warnings.catch_warnings`` saves and restores process-wide state (before Python
3.14), so concurrent blocks restore each other's filters: inner warnings escape
and an "ignore" filter can stay behind. Each test below records, in the main
thread and around everything, every warning that is shown.
"""

import sys
import threading
import warnings

import numpy as np
import pytest
from joblib import parallel_config

from skprivreg import PrivacyLeakWarning, PrivateLassoSupportSelector
from skprivreg import _warnings as quiet_module
from skprivreg._warnings import quiet_warnings
from skprivreg.feature_selection._stability import _evaluate_batch
from skprivreg.testing import reproducible_noise


class InnerWarning(UserWarning):
    """Stands for an inner warning that carries a value of the data."""


@pytest.fixture
def fast_switching():
    """Threads switch often, so that interleavings are many."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _hammer(n_threads=8, rounds=300):
    """``n_threads`` threads entering and leaving quiet blocks (some nested) and
    warning inside them; the exceptions of the threads, if any."""
    start = threading.Barrier(n_threads)
    errors = []

    def work(k):
        try:
            start.wait()
            for i in range(rounds):
                with quiet_warnings():
                    warnings.warn(f"inner value {k}.{i}", InnerWarning, stacklevel=1)
                    if i % 3 == 0:
                        with quiet_warnings():
                            warnings.warn(f"nested value {k}.{i}", InnerWarning, stacklevel=1)
                    warnings.warn(f"inner value again {k}.{i}", InnerWarning, stacklevel=1)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_no_inner_warning_escapes_under_threads(fast_switching):
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        filters = warnings.filters
        before = list(filters)
        for _ in range(3):
            assert _hammer() == []
            assert [str(w.message) for w in shown] == []
            # Exactly what was there before: the same list, the same entries.
            assert warnings.filters is filters
            assert warnings.filters == before
        assert quiet_module._depth == 0


def test_warnings_are_shown_again_after_the_threads(fast_switching):
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        showwarning, before = warnings.showwarning, list(warnings.filters)
        for _ in range(6):
            assert _hammer() == []
            shown.clear()
            warnings.warn("a later warning", UserWarning, stacklevel=1)
            assert [str(w.message) for w in shown] == ["a later warning"]
        assert warnings.showwarning is showwarning
        # No filter left behind (compared with the list, so a `-W ignore` of the
        # interpreter, further down the list, is no false alarm).
        assert warnings.filters == before


def test_nested_and_exception_restore():
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        filters, before = warnings.filters, list(warnings.filters)
        with pytest.raises(ValueError, match="inside"):
            with quiet_warnings():
                with quiet_warnings():
                    warnings.warn("nested", InnerWarning, stacklevel=1)
                warnings.warn("outer", InnerWarning, stacklevel=1)
                raise ValueError("raised inside")
        assert shown == []
        assert warnings.filters is filters and warnings.filters == before
        warnings.warn("after", UserWarning, stacklevel=1)
        assert [str(w.message) for w in shown] == ["after"]


def test_worker_function_is_quiet_itself():
    """The function a joblib worker runs (a thread or a process, whose warnings
    would print to its own stderr) hides the rule's warnings on its own."""

    def rule(X, y):
        warnings.warn(f"duality gap {float(y[0])}", InnerWarning, stacklevel=1)
        return (0,)

    X, y = np.ones((6, 2)), np.arange(6.0)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        votes = _evaluate_batch(X, y, [np.arange(3), np.arange(3, 6)], rule)
    assert votes == [(0,), (0,)]
    assert shown == []


def test_lasso_support_selector_threading_backend_shows_no_inner_warning():
    # Two iterations of coordinate descent at a tiny tolerance: every subsample
    # fit raises scikit-learn's ConvergenceWarning, which states its duality gap.
    rng = np.random.default_rng(0)
    n, p = 20_000, 30
    X = rng.normal(size=(n, p))
    y = X[:, :3] @ [1.0, -1.0, 1.0] + rng.normal(size=n)
    selector = PrivateLassoSupportSelector(
        epsilon=2.0, max_features=3, alpha=1e-4, lasso_params={"max_iter": 2, "tol": 1e-12},
        n_subsamples=400, on_fail="empty", n_jobs=4,
    )
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        filters, before = warnings.filters, list(warnings.filters)
        for _ in range(6):
            with parallel_config(backend="threading", n_jobs=4):
                selector.fit(X, y)
            assert [f"{w.category.__name__}: {w.message}" for w in shown] == []
            assert warnings.filters is filters and warnings.filters == before
        warnings.warn("a later warning", UserWarning, stacklevel=1)
        assert [str(w.message) for w in shown] == ["a later warning"]


class _QuietElsewhere:
    """Another thread stays inside a quiet block while the body of ``with`` runs."""

    def __enter__(self):
        self._inside, self._leave = threading.Event(), threading.Event()

        def hold():
            with quiet_warnings():
                self._inside.set()
                self._leave.wait(30)

        self._thread = threading.Thread(target=hold)
        self._thread.start()
        assert self._inside.wait(30)
        return self

    def __exit__(self, *exc_info):
        self._leave.set()
        self._thread.join()
        return False


def test_privacy_leak_warning_of_another_thread_is_shown_while_quiet():
    """A fit on one thread cannot hide that a result on another is not private;
    the other warnings of the period stay hidden, as documented."""
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with _QuietElsewhere():
            warnings.warn("not private: epsilon=inf", PrivacyLeakWarning, stacklevel=1)
            warnings.warn("an inner value 0.123", InnerWarning, stacklevel=1)
        assert [(w.category, str(w.message)) for w in shown] == [
            (PrivacyLeakWarning, "not private: epsilon=inf")]
        assert quiet_module._depth == 0


def test_reproducible_noise_warns_while_another_thread_is_quiet():
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with _QuietElsewhere():
            with reproducible_noise(3):
                pass
        assert [w.category for w in shown] == [PrivacyLeakWarning]
        assert "reproduced" in str(shown[0].message)


def test_privacy_leak_warning_follows_the_saved_filters_while_quiet():
    with warnings.catch_warnings(record=True) as shown:
        # An "error" filter for every warning raises a privacy leak as it would
        # outside a quiet period, but never an inner warning of the period.
        warnings.simplefilter("error")
        with _QuietElsewhere():
            with pytest.raises(PrivacyLeakWarning, match="not private"):
                warnings.warn("not private", PrivacyLeakWarning, stacklevel=1)
            with quiet_warnings():
                warnings.warn("an inner value", InnerWarning, stacklevel=1)
        # An "ignore" filter for the category hides it.
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=PrivacyLeakWarning)
        with _QuietElsewhere():
            warnings.warn("not private", PrivacyLeakWarning, stacklevel=1)
        assert shown == []


def test_privacy_leak_warning_reaches_a_replaced_showwarning_while_quiet():
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, *args: seen.append(category)
        with _QuietElsewhere():
            warnings.warn("not private", PrivacyLeakWarning, stacklevel=1)
            warnings.warn("an inner value", InnerWarning, stacklevel=1)
    assert seen == [PrivacyLeakWarning]


def test_privacy_leak_warning_without_a_filter_takes_the_default_action_while_quiet():
    with warnings.catch_warnings(record=True) as shown:
        warnings.resetwarnings()  # no filter: Python's default action ("default")
        with _QuietElsewhere():
            for _ in range(2):  # "default": once per location
                warnings.warn("not private", PrivacyLeakWarning, stacklevel=1)
            warnings.warn("an inner value", InnerWarning, stacklevel=1)
        assert [w.category for w in shown] == [PrivacyLeakWarning]
