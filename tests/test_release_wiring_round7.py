"""Round 7: release wiring found by this round's audits.

Each test fails on the code before its fix (checked by restoring the old file).
All are deterministic: exact rational arithmetic on released constants,
captured calibration arguments, refusals before any spend.
"""

import copy
import math
import warnings
from fractions import Fraction

import joblib
import numpy as np
import pytest

from skprivreg import BudgetAccountant
from skprivreg.linear_model import (
    BoostedAdaSSPRegressor,
    IndependentSSPRegressor,
    LinearRegression,
    ReuseCovRegressor,
    SSPRegressor,
    _boosted_adassp,
    _independent_ssp,
)
from skprivreg.mechanisms import sqrt_at_least


def _smallest_root_at_least(root, value):
    """``root`` is the smallest float whose exact square is at least ``value``."""
    exact = Fraction(value)
    below = math.nextafter(root, 0.0)
    return Fraction(root) ** 2 >= exact and (root == 0 or Fraction(below) ** 2 < exact)


# -- sqrt_at_least: exact arguments, far from 1 ---------------------------------------------
@pytest.mark.parametrize("value", [
    3, 10, 11, Fraction(11), Fraction(10) + 1, Fraction(1e-300) ** 2, Fraction(1e-170) ** 2 * 3,
    Fraction(1e200) ** 2 * 7, 5e-324, 1.7e308, Fraction(1, 3),
])
def test_sqrt_at_least_is_the_smallest_float_whose_square_is_at_least_the_exact_value(value):
    # Before: one step up from math.sqrt(float(value)); 1e-600 became 5e-324.
    assert _smallest_root_at_least(sqrt_at_least(value), value)


def test_sqrt_at_least_on_many_values():
    rng = np.random.default_rng(0)
    mantissas, exponents = rng.uniform(1.0, 10.0, 300), rng.integers(-300, 300, 300)
    for m, e in zip(mantissas, exponents):
        value = float(m) * 10.0 ** int(e)
        assert _smallest_root_at_least(sqrt_at_least(value), value)
        norm_squared = Fraction(value) ** 2 + 1
        assert _smallest_root_at_least(sqrt_at_least(norm_squared), norm_squared)


# -- the row norm of a mapped row with its intercept column --------------------------------
@pytest.mark.parametrize("d", [10, 17, 20, 25])
def test_linear_regression_xty_sensitivity_is_not_below_twice_the_norm_of_a_row_of_ones(d):
    # A mapped row z = (1, ..., 1) with u = 1, replaced by u = -1, changes A^T u by
    # exactly 2 sqrt(d + 1). math.hypot(sqrt_at_least(d), 1) is below sqrt(d + 1) for
    # these d.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (400, d))
    y = X.sum(axis=1) / d
    est = LinearRegression(x_range=(-1.0, 1.0), y_bound=(-1.0, 1.0), epsilon=1.0,
                           delta=1e-6, n_rounds=1).fit(X, y)
    event = {e.name: e for e in est.privacy_spent_.events}["Xty"]
    assert Fraction(event.sensitivity) ** 2 >= 4 * (d + 1)


def test_boosted_adassp_gradient_row_bound_is_not_rounded_down(monkeypatch):
    # R = hypot(B, c) rounds to nearest: below sqrt(B^2 + c^2) for B = 0.1, c = 1.
    seen = []
    real = _boosted_adassp.residual_gradient_sensitivity

    def spy(row_bound, residual_bound):
        seen.append(row_bound)
        return real(row_bound, residual_bound)

    monkeypatch.setattr(_boosted_adassp, "residual_gradient_sensitivity", spy)
    B = next(b for b in (0.1 * k for k in range(1, 200))
             if Fraction(math.hypot(b, 1.0)) ** 2 < Fraction(b) ** 2 + 1)
    X = np.random.default_rng(0).uniform(-B, B, (300, 2)) / math.sqrt(2)
    BoostedAdaSSPRegressor(x_bound=B, y_bound=1.0, epsilon=1.0, delta=1e-6,
                           n_rounds=2).fit(X, X.sum(axis=1))
    assert seen and all(Fraction(r) ** 2 >= Fraction(B) ** 2 + 1 for r in seen)


# -- IndependentSSP: sqrt(l) times a bound or a noise scale -----------------------------
def _outputs_rows(n_outputs, n=300):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (n, 2))
    return X, np.clip(X @ rng.normal(size=(2, n_outputs)), -1.0, 1.0)


def test_independent_ssp_joint_release_scales_by_sqrt_l_without_rounding_down(monkeypatch):
    # l = 3: math.sqrt(3) is below the exact root, so the label row bound sqrt(l) y_bound
    # of the joint release and the covariance copies' scale sqrt(l) sigma were short.
    seen = {}
    real = _independent_ssp.joint_gram_cross_calibration

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen["y_row_bound"], seen["sigma_gram"] = kwargs["y_row_bound"], out[1]
        return out

    monkeypatch.setattr(_independent_ssp, "joint_gram_cross_calibration", spy)
    X, Y = _outputs_rows(3)
    est = IndependentSSPRegressor(x_bound=math.sqrt(2), y_bound=1.0, epsilon=1.0,
                                  delta=1e-6).fit(X, Y)
    assert Fraction(seen["y_row_bound"]) ** 2 >= 3
    components = dict(est.privacy_spent_.events[-1].components)
    assert Fraction(components["covariance"]) ** 2 >= 3 * Fraction(seen["sigma_gram"]) ** 2


# -- a bound read from the data above the largest bin: refused before the spend ---------
@pytest.mark.parametrize("make", [
    lambda acc: IndependentSSPRegressor(epsilon=1.0, delta=1e-6, y_bound=20.0, bounds="data",
                                        accountant=acc),
    lambda acc: ReuseCovRegressor(epsilon=1.0, delta=1e-6, y_bound=20.0, bounds="data",
                                  accountant=acc),
    lambda acc: LinearRegression(epsilon=1.0, delta=1e-6, y_bound=(-20.0, 20.0), bounds="data",
                                 accountant=acc),
    lambda acc: SSPRegressor(epsilon=1.0, delta=1e-6, y_bound=20.0, bounds="data",
                             accountant=acc),
    lambda acc: BoostedAdaSSPRegressor(epsilon=1.0, delta=1e-6, y_bound=20.0, bounds="data",
                                       n_rounds=1, accountant=acc),
], ids=["independent_ssp", "reusecov", "linear_regression", "ssp", "boosted_adassp"])
def test_a_data_bound_above_the_largest_bin_is_refused_before_the_spend(make):
    # IndependentSSP and ReuseCov recorded the spend, then refused: the accountant was
    # charged and the previous model dropped for input that is refused as bad.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + rng.normal(size=2000)
    bad = X.copy()
    bad[0, 0] = 1e13  # above the largest public bin, 2^40
    acc = BudgetAccountant(epsilon=math.inf, delta=1e-3)  # a data bound spends inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the data bound warns that it leaks
        est = make(acc).fit(X, y)
        spends, coef = acc.n_spends, est.coef_.copy()
        with pytest.raises(ValueError, match="not supported"):
            est.fit(bad, y)
    assert acc.n_spends == spends
    np.testing.assert_array_equal(est.coef_, coef)


# -- LinearRegression without an intercept releases no feature mean ----------------------
def test_linear_regression_without_intercept_or_ranges_spends_nothing_on_a_mean():
    # The released mean was discarded (rows are not centred without an intercept), yet
    # 5% of mu^2 was charged to it and taken from the other releases.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = X @ np.array([1.0, -1.0, 0.5])
    kwargs = dict(y_bound=(-5.0, 5.0), epsilon=1.0, delta=1e-6, n_rounds=1)
    without = LinearRegression(fit_intercept=False, **kwargs).fit(X, y)
    names = [e.name for e in without.privacy_spent_.events]
    assert "feature_mean" not in names and "x_bound" in names
    with_intercept = LinearRegression(fit_intercept=True, **kwargs).fit(X, y)
    assert "feature_mean" in [e.name for e in with_intercept.privacy_spent_.events]
    # the Gram matrix gets 30% of what the moments and the mean leave
    mus = {e.name: e.mu for e in without.privacy_spent_.events if e.mu is not None}
    total = math.sqrt(sum(m * m for m in mus.values()))
    w_mean = (mus["label_moments"] / total) ** 2
    assert (mus["XtX"] / total) ** 2 == pytest.approx(0.30 * (1.0 - w_mean), rel=1e-9)


# -- a refused fit's spend-first generators, left in its traceback -----------------------
def _generators_in(exc):
    from skprivreg._random import SpendFirstGenerator

    found, tb = [], exc.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            values = value.values() if isinstance(value, dict) else [value]
            found += [g for g in values if isinstance(g, SpendFirstGenerator)]
        tb = tb.tb_next
    return found


def test_a_refused_fits_generators_never_spend_after_it_ended():
    # A refit refused before its spend (NaN in the first pass) gives the previous model
    # back, but its generators stayed live in the traceback: a hasattr probe (a
    # pretty-printer's) or deepcopy ran the one-shot spend, charging the refused plan and
    # writing it over the previous model's privacy_spent_.
    from skprivreg.preprocessing import PrivateStandardScaler

    X = np.random.default_rng(0).uniform(-1.0, 1.0, (5000, 3))
    acc = BudgetAccountant(epsilon=50.0, delta=1e-2)
    scaler = PrivateStandardScaler(epsilon=5.0, x_range=(-1.0, 1.0), accountant=acc).fit(X)
    spent, mean = scaler.privacy_spent_, scaler.mean_.copy()
    bad = X.copy()
    bad[123, 0] = np.nan
    with pytest.raises(ValueError) as info:
        scaler.set_params(epsilon=0.1).fit(bad)
    generators = _generators_in(info.value)
    assert generators  # the frames still hold them (a refused fit's locals are kept)
    for generator in generators:
        assert not hasattr(generator, "__rich_repr__")
        with pytest.raises(TypeError, match="never pickled"):
            copy.deepcopy(generator)  # no __deepcopy__: refused, and nothing spent
        with pytest.raises(RuntimeError, match="ended"):
            generator.normal()
    assert acc.n_spends == 1
    assert scaler.privacy_spent_ is spent
    np.testing.assert_array_equal(scaler.mean_, mean)


# -- PrivatePipeline: steps that scikit-learn clones before fitting ----------------------
def _two_fits(kind, tmp_path):
    from sklearn.compose import ColumnTransformer

    from skprivreg import AdaSSPRegressor, PrivatePipeline
    from skprivreg.preprocessing import PrivateStandardScaler

    rng = np.random.default_rng(0)
    X1 = rng.uniform(-1.0, 1.0, (4000, 3))
    X2 = 0.2 * rng.uniform(-1.0, 1.0, (4000, 3)) + 0.5
    y1, y2 = X1 @ np.array([1.0, 2.0, 3.0]), X2 @ np.array([1.0, 2.0, 3.0])
    acc = BudgetAccountant(epsilon=1.5, delta=1e-3)  # room for one regressor fit only
    scaler = PrivateStandardScaler(epsilon=1.0, x_range=(-1.0, 1.0))
    regressor = AdaSSPRegressor(epsilon=1.0, x_bound=6.0, y_bound=7.0, accountant=acc)
    if kind == "column_transformer":
        first = ColumnTransformer([("s", scaler, [0, 1, 2])], sparse_threshold=0)
        pipe = PrivatePipeline([("ct", first), ("r", regressor)])
    else:
        pipe = PrivatePipeline([("s", scaler), ("r", regressor)],
                               memory=joblib.Memory(str(tmp_path), verbose=0))
    return pipe.fit(X1, y1), X2, y2


@pytest.mark.parametrize("kind", ["column_transformer", "memory"])
def test_a_refit_refused_after_a_cloned_step_spent_leaves_no_previous_model(kind, tmp_path):
    # The guard compared the template steps, whose ledgers never change when
    # scikit-learn fits clones: the refitted scaler (new rows) stayed beside the
    # regressor given back its previous model.
    from skprivreg.exceptions import BudgetExceededError

    pipe, X2, y2 = _two_fits(kind, tmp_path)
    with pytest.raises(BudgetExceededError):
        pipe.fit(X2, y2)
    assert not hasattr(pipe[-1], "coef_")


def test_a_nested_pipelines_memory_prints_nothing(tmp_path):
    # joblib.Memory prints each call it computes, rows included (verbose=1 by default):
    # only the outer pipeline's memory was quieted.
    import contextlib
    import io

    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    from skprivreg import AdaSSPRegressor, PrivatePipeline
    from skprivreg.preprocessing import BoundedScaler

    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (2000, 3))
    X[0] = [0.123456, -0.654321, 0.999999]
    memory = joblib.Memory(str(tmp_path))
    inner = Pipeline([("b", BoundedScaler(x_range=(-1.0, 1.0))),
                      ("t", FunctionTransformer(np.tanh))], memory=memory)
    pipe = PrivatePipeline([("pre", inner),
                            ("r", AdaSSPRegressor(epsilon=1.0, x_bound=2.0, y_bound=7.0))])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        pipe.fit(X, X.sum(axis=1))
    assert out.getvalue() == ""
    assert inner.memory is memory  # given back


# -- reproducible_noise does not reach a process forked inside the block -----------------
def _child_reproducible_and_draw(_):
    from skprivreg._random import noise_is_reproducible, secret_generators

    return noise_is_reproducible(), float(secret_generators(["noise"])["noise"].normal())


def test_a_process_forked_inside_reproducible_noise_draws_fresh_entropy():
    # A forked worker inherited the block's seed and call counter: the first fit of every
    # worker drew the same "fresh" noise (random_state=None), contrary to the docs.
    import multiprocessing

    from skprivreg.testing import reproducible_noise

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(0):
            with multiprocessing.get_context("fork").Pool(2) as pool:
                results = pool.map(_child_reproducible_and_draw, range(4), chunksize=1)
    assert [flag for flag, _ in results] == [False] * 4
    assert len({draw for _, draw in results}) == 4


def test_a_nested_private_pipeline_with_memory_fits_and_refuses_as_alone(tmp_path):
    # The originals were kept on the pipelines themselves: the inner PrivatePipeline
    # restored (and removed) the outer's record, which then raised KeyError after every
    # step had spent, hiding a refit's BudgetExceededError.
    from skprivreg import AdaSSPRegressor, PrivatePipeline
    from skprivreg.exceptions import BudgetExceededError
    from skprivreg.preprocessing import BoundedScaler

    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (2000, 3))
    y = X @ np.array([1.0, 2.0, 3.0])
    acc = BudgetAccountant(epsilon=1.5, delta=1e-3)
    memory = joblib.Memory(str(tmp_path), verbose=1)
    inner = PrivatePipeline([("scale", BoundedScaler(x_range=(-1.0, 1.0))),
                             ("fit", AdaSSPRegressor(epsilon=1.0, x_bound=2.0, y_bound=6.5,
                                                     accountant=acc))], memory=memory)
    outer = PrivatePipeline([("model", inner)]).fit(X, y)
    assert inner.memory is memory and acc.n_spends == 1
    with pytest.raises(BudgetExceededError):
        outer.fit(X, y)
    assert inner.memory is memory and acc.n_spends == 1


def test_a_private_or_special_name_never_reaches_the_spend():
    # Only double-underscore names were refused: a pretty-printer's _repr_pretty_ probe
    # during a fit ran the spend (and after the fit raised RuntimeError from hasattr).
    from skprivreg._random import SpendFirstGenerator

    calls = []
    generator = SpendFirstGenerator(np.random.default_rng(0), lambda: calls.append(1))
    for name in ("_repr_pretty_", "_repr_html_", "__rich_repr__", "__deepcopy__"):
        assert not hasattr(generator, name)
    assert calls == []
    generator.normal()
    assert calls == [1]


def _child_enters_a_pass(queue):
    from skprivreg import _threads

    with _threads.single_threaded_blas():
        pass
    queue.put(_threads._LIMIT["users"])


def _fork_during_a_threaded_pass(target, check_inside=None):
    """Run ``target(queue)`` in a process forked while another thread holds a pass's
    BLAS limit; returns ``(what the child put on the queue, its exit code)``."""
    import multiprocessing
    import threading

    from skprivreg import _threads

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    inside, leave = threading.Event(), threading.Event()

    def a_pass():
        with _threads.single_threaded_blas():
            inside.set()
            leave.wait(30)

    runner = threading.Thread(target=a_pass)
    runner.start()
    try:
        assert inside.wait(30)
        if check_inside is not None:
            check_inside()
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=target, args=(queue,))
        child.start()
        reported = queue.get(timeout=60)
        child.join(60)
    finally:
        leave.set()
        runner.join(30)
    return reported, child.exitcode


def test_a_process_forked_during_a_threaded_pass_starts_with_no_pass_of_its_own():
    # The child inherited the parent's count of passes running: its own passes never
    # restored BLAS, and a lock held at the fork would have blocked them for ever.
    from skprivreg import _threads

    users, exitcode = _fork_during_a_threaded_pass(_child_enters_a_pass)
    assert users == 0 and exitcode == 0
    assert _threads._LIMIT["users"] == 0


def _blas_threads():
    from threadpoolctl import threadpool_info

    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def _child_reports_blas_threads(queue):
    queue.put(_blas_threads())


def test_a_process_forked_during_a_threaded_pass_gets_blas_threads_back():
    # The pass that limited BLAS to one thread runs on in the parent, not in the
    # child: the child kept BLAS on one thread for the rest of its life.
    before = _blas_threads()
    if not before or max(before) < 2:
        pytest.skip("BLAS runs one thread here: nothing to restore")

    def limited():
        assert max(_blas_threads()) == 1  # the pass holds the limit

    in_child, exitcode = _fork_during_a_threaded_pass(_child_reports_blas_threads, limited)
    assert in_child == before and exitcode == 0
    assert _blas_threads() == before


def test_boosted_adassp_lambda_min_sensitivity_is_not_rounded_down():
    # B^2 + c^2 in floating point rounds to nearest: 1.36 for B = 0.6000000000000001,
    # c = 1, below the exact sum a row of norm B with its intercept column attains.
    from skprivreg.mechanisms import value_at_least

    B = 0.6000000000000001
    assert Fraction(B * B + 1.0) < Fraction(B) ** 2 + 1  # the case is real
    X = np.random.default_rng(0).uniform(-B, B, (300, 2)) / math.sqrt(2)
    est = BoostedAdaSSPRegressor(x_bound=B, y_bound=1.0, epsilon=1.0, delta=1e-6,
                                 n_rounds=1).fit(X, X.sum(axis=1))
    event = {e.name: e for e in est.privacy_spent_.events}["lambda_min"]
    assert Fraction(event.sensitivity) >= Fraction(B) ** 2 + 1
    assert value_at_least(Fraction(1, 3)) == math.nextafter(1 / 3, 1.0)
    assert value_at_least(Fraction(1, 2)) == 0.5
