"""A BudgetAccountant(processes=True) shared with joblib's process workers (loky)."""

import gc
import os
import pickle
import sys
import threading
import warnings

import numpy as np
import pytest
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import skprivreg.linear_model._ssp as ssp_module
from skprivreg import AdaSSPRegressor, BudgetAccountant, BudgetExceededError
from skprivreg.accounting import DetachedAccountant, PrivacyEvent, PrivacyLedger
from skprivreg.exceptions import ConfigurationError

cloudpickle = pytest.importorskip("cloudpickle")  # what loky pickles callables with

# The worker functions below travel to loky's processes by value (the suite
# imports test modules with importlib, so workers cannot import this module).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _data(n=600, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ np.arange(1.0, d + 1) + rng.normal(size=n)


def _estimator(acc, **kw):
    return AdaSSPRegressor(delta=1e-6, x_bound=5.0, y_bound=20.0, accountant=acc, **kw)


def _search(acc, n_jobs):
    X, y = _data()
    search = GridSearchCV(_estimator(acc), {"epsilon": [0.5, 1.0, 2.0]}, cv=3, n_jobs=n_jobs)
    search.fit(X, y)
    return search


def _spent_epsilons(acc):
    """Epsilons of the cross-validation fits (sorted) and of the refit (spent last)."""
    eps = [round(ledger.epsilon, 12) for ledger in acc.ledgers]
    return sorted(eps[:-1]), eps[-1]


def test_grid_search_with_loky_workers_records_what_one_process_records():
    one = BudgetAccountant(epsilon=100.0, delta=1e-2, processes=True)
    two = BudgetAccountant(epsilon=100.0, delta=1e-2, processes=True)
    search_one = _search(one, n_jobs=1)
    search_two = _search(two, n_jobs=2)  # joblib's default backend: loky processes
    # 3 candidates x 3 folds + 1 refit, in both runs, charged to one budget.
    assert one.n_spends == two.n_spends == 10
    folds_one, refit_one = _spent_epsilons(one)
    folds_two, refit_two = _spent_epsilons(two)
    assert folds_one == folds_two == [0.5] * 3 + [1.0] * 3 + [2.0] * 3
    # The noisy scores may pick different refits; each refit is the one selected.
    assert refit_one == search_one.best_params_["epsilon"]
    assert refit_two == search_two.best_params_["epsilon"]
    assert two.total().delta == pytest.approx(one.total().delta, rel=1e-12)
    assert two.total().epsilon == pytest.approx(3 * 3.5 + refit_two)
    # The refit ran in this process with this very accountant.
    assert search_two.best_estimator_.accountant is two


def _fit_in_worker(acc, X, y):
    """Fit in a worker; report whether the fit reached its data pass."""
    reads = []
    original = ssp_module.gram_statistics

    def counting(*args, **kwargs):
        reads.append(1)
        return original(*args, **kwargs)

    ssp_module.gram_statistics = counting
    try:
        _estimator(acc, epsilon=1.0).fit(X, y)
        outcome = "spent"
    except BudgetExceededError:
        outcome = "refused"
    finally:
        ssp_module.gram_statistics = original
    return outcome, len(reads), os.getpid()


def test_workers_see_the_spends_of_other_processes_before_reading_data():
    X, y = _data(n=200)
    acc = BudgetAccountant(epsilon=3.0, delta=1e-3, processes=True)
    acc.spend(2.5, 0.0)  # this process spends first: 0.5 is left, a fit needs 1.0
    results = Parallel(n_jobs=2, backend="loky")(
        delayed(_fit_in_worker)(acc, X, y) for _ in range(4)
    )
    assert [outcome for outcome, _, _ in results] == ["refused"] * 4
    assert [reads for _, reads, _ in results] == [0] * 4  # refused before the data pass
    assert all(pid != os.getpid() for _, _, pid in results)
    assert acc.n_spends == 1


def test_concurrent_workers_never_overspend():
    X, y = _data(n=200)
    acc = BudgetAccountant(epsilon=3.0, delta=1e-3, processes=True)
    results = Parallel(n_jobs=2, backend="loky")(
        delayed(_fit_in_worker)(acc, X, y) for _ in range(6)
    )
    outcomes = [outcome for outcome, _, _ in results]
    # Room for exactly three fits of epsilon 1: the check-and-spend is atomic.
    assert outcomes.count("spent") == 3 and outcomes.count("refused") == 3
    assert acc.n_spends == 3
    assert acc.total().epsilon == pytest.approx(3.0)
    assert len({pid for _, _, pid in results}) >= 1


def _spend_many(acc, k):
    ledger = PrivacyLedger([PrivacyEvent("a", 0.1, 0.0)])
    for _ in range(k):
        acc.spend(ledger)
    return os.getpid()


def test_many_small_spends_from_two_processes_are_all_recorded():
    acc = BudgetAccountant(epsilon=1000.0, processes=True)
    pids = Parallel(n_jobs=2, backend="loky")(delayed(_spend_many)(acc, 100) for _ in range(4))
    assert acc.n_spends == 400
    assert acc.total().epsilon == pytest.approx(40.0)
    assert os.getpid() not in pids


def test_a_pickled_copy_charges_the_same_budget():
    acc = BudgetAccountant(epsilon=2.0, delta=1e-3, processes=True)
    copy = pickle.loads(pickle.dumps(acc))
    assert copy is not acc
    copy.spend(1.5, 1e-4)
    assert acc.n_spends == 1 and acc.total().epsilon == pytest.approx(1.5)
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        acc.spend(1.0, 0.0)
    with pytest.raises(BudgetExceededError):
        copy.spend(1.0, 0.0)
    assert acc.n_spends == copy.n_spends == 1


def test_amended_ledgers_replace_their_spend_in_every_process():
    X, y = _data(n=3000)
    acc = BudgetAccountant(epsilon=20.0, delta=1e-2, processes=True)
    copy = pickle.loads(pickle.dumps(acc))
    est = AdaSSPRegressor(epsilon=2.0, delta=1e-6, x_bound=5.0, accountant=copy)
    est.fit(X, y)  # y_bound estimated privately: the plan is settled to the final ledger
    assert acc.n_spends == 1
    assert acc.ledgers[0].epsilon == pytest.approx(est.privacy_spent_.epsilon)
    assert [e.name for e in acc.ledgers[0].events] == [
        e.name for e in est.privacy_spent_.events
    ]


def test_estimators_pickle_with_the_handle_and_fitted_ones_without_it():
    X, y = _data()
    acc = BudgetAccountant(epsilon=20.0, delta=1e-2, processes=True)
    est = _estimator(acc, epsilon=1.0)
    unfitted = pickle.loads(pickle.dumps(est))  # what a worker receives
    assert unfitted.accountant is not None and unfitted.accountant.processes
    unfitted.fit(X, y)
    assert acc.n_spends == 1
    fitted = pickle.loads(pickle.dumps(unfitted))
    assert isinstance(fitted.accountant, DetachedAccountant)
    assert fitted.privacy_spent_.epsilon == pytest.approx(1.0)
    assert clone(est).accountant is acc


def test_the_default_accountant_still_refuses_to_be_pickled():
    with pytest.raises(TypeError, match="processes=True"):
        pickle.dumps(BudgetAccountant())


def test_a_copy_outliving_its_budget_refuses_to_spend():
    acc = BudgetAccountant(epsilon=2.0, processes=True)
    blob = pickle.dumps(acc)
    path = acc._store.path
    del acc
    gc.collect()
    assert not os.path.exists(path)
    with pytest.raises(FileNotFoundError, match="no longer exists"):
        pickle.loads(blob)


def test_grid_search_budget_runs_out_in_workers_with_a_clear_error():
    X, y = _data()
    acc = BudgetAccountant(epsilon=2.0, delta=1e-2, processes=True)
    search = GridSearchCV(_estimator(acc), {"epsilon": [0.5, 1.0]}, cv=3, n_jobs=2,
                          error_score="raise")
    with warnings.catch_warnings(), pytest.raises(BudgetExceededError):
        search.fit(X, y)
    assert acc.total().epsilon <= 2.0 * (1 + 1e-9)


def test_a_spend_waits_while_another_holder_has_the_file_lock():
    # flock conflicts between two open file descriptions even in one process,
    # so a copy (its own thread lock, its own handle) stands for another process.
    acc = BudgetAccountant(epsilon=2.0, processes=True)
    copy = pickle.loads(pickle.dumps(acc))
    done = threading.Event()
    worker = threading.Thread(target=lambda: (copy.spend(1.0, 0.0), done.set()))
    with acc._store.locked():
        worker.start()
        assert not done.wait(0.5)  # blocked: check-and-spend is one atomic step
    worker.join(5.0)
    assert done.is_set() and acc.n_spends == 1


def test_a_log_removed_after_the_check_is_not_recreated_empty(monkeypatch):
    # Another process's spend is in the log; the log is removed just before a
    # spend opens it. Opening must not create an empty log that forgets it.
    acc = BudgetAccountant(epsilon=2.0, processes=True)
    other = pickle.loads(pickle.dumps(acc))
    other.spend(1.5, 0.0)
    path = acc._store.path
    os.remove(path)
    monkeypatch.setattr(os.path, "exists", lambda p: True)
    with pytest.raises(FileNotFoundError, match="no longer exists"):
        acc.spend(1.0, 0.0)
    assert not os.path.lexists(path)


def test_a_log_cut_short_is_refused():
    acc = BudgetAccountant(epsilon=2.0, processes=True)
    acc.spend(0.5, 0.0)
    with open(acc._store.path, "w"):
        pass  # truncated: the record of the spend is gone
    with pytest.raises(RuntimeError, match="cut short"):
        acc.spend(1.0, 0.0)


def test_budget_store_keeps_the_reproducible_mark():
    """A handle reading the shared file keeps the not-for-publication mark of a
    fit run with the testing facility's noise."""
    from skprivreg.testing import reproducible_noise

    acc = BudgetAccountant(epsilon=10.0, delta=1e-3, processes=True)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 2))
    y = X.sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(0):
            AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=2.0,
                            accountant=acc, random_state=0).fit(X, y)
    other = pickle.loads(pickle.dumps(acc))  # another handle: reads the spends from the file
    assert not other.total().for_publication
    assert all(not ledger.for_publication for ledger in other.ledgers)


def test_an_accountant_pickled_under_its_former_module_still_loads(monkeypatch):
    """Pickles made when the accountant lived in skprivreg.accounting name its
    attachment function there; they still load and share the same store."""
    import skprivreg._budget_accountant as module

    acc = BudgetAccountant(epsilon=3.0, delta=1e-4, processes=True)
    acc.spend(PrivacyLedger([PrivacyEvent("a", 0.5, 0.0)]))
    monkeypatch.setattr(module._attach_accountant, "__module__", "skprivreg.accounting")
    data = pickle.dumps(acc)
    monkeypatch.undo()
    assert b"skprivreg.accounting" in data and b"_attach_accountant" in data
    other = pickle.loads(data)
    assert other.total() == pytest.approx((0.5, 0.0))


# -- copies, saved models and forked processes ---------------------------------
@pytest.mark.parametrize("make", ["copy", "deepcopy"])
def test_copies_of_a_fitted_estimator_are_charged_to_its_accountant(make):
    # The copies dropped the accountant (the pickle state was used), so refitting
    # a copy spent nothing on the budget.
    import copy

    X, y = _data()
    acc = BudgetAccountant(epsilon=1.5, delta=1e-2)
    est = _estimator(acc, epsilon=1.0).fit(X, y)
    twin = getattr(copy, make)(est)
    assert twin.accountant is acc
    with pytest.raises(BudgetExceededError):
        twin.fit(X, y)
    assert acc.n_spends == 1


def test_a_loaded_model_refuses_to_fit_until_an_accountant_is_set():
    X, y = _data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-2)
    est = _estimator(acc, epsilon=1.0).fit(X, y)
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    for candidate in (loaded, clone(loaded)):
        with pytest.raises(ConfigurationError, match="loaded from a pickle"):
            candidate.fit(X, y)
    assert acc.n_spends == 1
    # the refused fit left the loaded model as it was
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    loaded.set_params(accountant=acc).fit(X, y)
    assert acc.n_spends == 2
    pickle.loads(pickle.dumps(loaded)).set_params(accountant=None).fit(X, y)


def test_a_pipeline_step_from_a_memory_cache_is_charged_when_refitted(tmp_path):
    # A cache hit hands back the fitted private step as unpickled; the pipeline keeps
    # it, and its next fit (of a clone) on new data ran with no accountant. The step
    # now gets its accountant back: a cache hit releases nothing new, a fit on new
    # data is charged in full.
    from joblib import Memory

    from skprivreg.pipeline import PrivatePipeline
    from skprivreg.preprocessing import PrivateStandardScaler

    acc = BudgetAccountant(epsilon=10.0, delta=1e-4)
    pipe = PrivatePipeline(
        [("scale", PrivateStandardScaler(epsilon=1.0, x_range=(-5, 5), accountant=acc)),
         ("fit", _estimator(acc, epsilon=0.5))], memory=Memory(str(tmp_path), verbose=0))
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X, y)
        assert acc.total().epsilon == pytest.approx(1.5)
        pipe.fit(X, y)  # the scaler comes from the cache: only the model is refitted
        assert acc.total().epsilon == pytest.approx(2.0)
        assert pipe.named_steps["scale"].accountant is acc
        pipe.fit(*_data(seed=1))  # new rows: both steps are charged
        assert acc.total().epsilon == pytest.approx(3.5)
        loaded = pickle.loads(pickle.dumps(pipe))
        with pytest.raises(ConfigurationError, match="loaded from a pickle"):
            loaded.fit(*_data(seed=2))  # a saved pipeline still refuses
    assert acc.total().epsilon == pytest.approx(3.5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_cannot_spend_a_budget_of_its_parent():
    # The child's copy of the spends never reached the parent: four forked fits at
    # epsilon 1 each were accepted against a budget of 1.
    import multiprocessing

    acc = BudgetAccountant(epsilon=1.0, delta=1e-2)
    _INHERITED["acc"] = acc  # what a forked child inherits, unpickled
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            outcomes = pool.map(_spend_inherited, range(2))
    finally:
        _INHERITED.clear()
    assert outcomes == ["refused", "refused"]
    assert acc.n_spends == 0
    acc.spend(1.0, 0.0)  # the parent's own budget is whole


_INHERITED = {}


def _spend_inherited(_):
    try:
        _INHERITED["acc"].spend(0.5, 0.0)
    except ConfigurationError:
        return "refused"
    return "spent"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_shared_budget_survives_a_forked_child_and_counts_its_spends():
    # A child's exit ran the store's finalizer, removing the parent's budget file.
    acc = BudgetAccountant(epsilon=5.0, delta=1e-5, processes=True)
    acc.spend(1.0, 0.0)
    pid = os.fork()
    if pid == 0:  # the child spends, then runs what its exit would run
        try:
            acc.spend(0.5, 0.0)
            acc._store._finalizer()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.path.exists(acc._store.path)
    assert acc.total().epsilon == pytest.approx(1.5)
    acc.spend(0.5, 0.0)


@pytest.mark.parametrize("notion", ["label", "feature"])
def test_a_label_or_feature_budget_accepts_a_full_dp_spend_first(notion):
    acc = BudgetAccountant(epsilon=3.0, notion=notion)
    acc.spend(1.0, 0.0)  # full DP implies label and feature DP
    acc.spend(PrivacyLedger([PrivacyEvent("x", 1.0, 0.0, notion=notion)]))
    assert acc.total().notion == notion


def test_refits_of_a_lasso_s_fitted_stages_are_charged_to_its_accountant():
    # The stages are fitted with accountant=None (their spend is the regressor's);
    # refitting one directly was a private fit no budget recorded, and a loaded
    # model's stages could be refitted even though the model itself refuses.
    from skprivreg.feature_selection import PrivateLassoRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 5))
    y = X[:, :2] @ [2.0, -2.0] + 0.1 * rng.normal(size=20_000)
    acc = BudgetAccountant(epsilon=20.0, delta=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = PrivateLassoRegressor(epsilon=4.0, delta=1e-6, max_features=2, alpha=0.1,
                                    sampling="partition", x_range=(-5.0, 5.0), y_bound=20.0,
                                    accountant=acc).fit(X, y)
        assert reg.stage2_.accountant is acc and reg.selector_.accountant is acc
        reg.stage2_.fit(X[:, reg.support_], y)
        assert acc.n_spends == 2
        loaded = pickle.loads(pickle.dumps(reg))
        for stage in (loaded.stage2_, loaded.selector_):
            with pytest.raises(ConfigurationError, match="loaded from a pickle"):
                stage.fit(X[:, reg.support_] if stage is loaded.stage2_ else X, y)
    assert acc.n_spends == 2
