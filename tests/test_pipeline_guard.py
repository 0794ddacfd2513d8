"""The pipeline guard: a step before the private estimator is a fixed row-wise function.

Its fitted state and output width may not depend on the data, and it may not
warn or raise depending on one record's value (NaN or infinity, refused as
bad input before any spend, is the one exception). Each refused form is
shown to differ between neighbouring data sets D and D' (one row apart), and
its replacement to behave identically on both.
"""

import functools
import io
import os
import pickle
import warnings

import numpy as np
import pytest
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor, make_column_selector
from sklearn.feature_extraction import FeatureHasher
from sklearn.impute import SimpleImputer
from sklearn.kernel_approximation import PolynomialCountSketch, RBFSampler
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    SplineTransformer,
    StandardScaler,
    scale,
)
from sklearn.random_projection import GaussianRandomProjection, SparseRandomProjection

from skprivreg import (
    AdaSSPRegressor,
    BoundedScaler,
    BudgetAccountant,
    ConfigurationError,
    PrivacyLeakWarning,
    PrivatePipeline,
    PrivateStandardScaler,
    leaking_steps,
    privacy_spent,
)
from skprivreg.preprocessing import rowwise


@rowwise
def _row_share(X):
    """A module-level row-wise function (picklable)."""
    return X / (1.0 + np.abs(X).sum(axis=1, keepdims=True))


def _regressor(acc=None, **kw):
    kw.setdefault("x_bound", 3.0)
    kw.setdefault("y_bound", 1.0)
    return AdaSSPRegressor(epsilon=1.0, delta=1e-6, accountant=acc, **kw)


def _strict(*steps):
    return PrivatePipeline([(f"s{i}", step) for i, step in enumerate(steps)], strict=True)


def _fit_quietly(pipe, X, y):
    """Fit; return the fitted pipeline and the messages of every warning it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipe.fit(X, y)
    return pipe, [str(w.message) for w in caught]


def _assert_refused_before_fitting(pipe, X, y, path, match):
    """leaking_steps names ``path``; strict=True refuses before any step is fitted."""
    assert any(p == path and match in r for p, _, r in leaking_steps(pipe)), leaking_steps(pipe)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    pipe.steps[-1][1].set_params(accountant=acc)
    with pytest.raises(ConfigurationError, match="nothing was fitted"):
        pipe.fit(X, y)
    assert acc.n_spends == 0
    assert not hasattr(pipe.steps[0][1], "n_features_in_")


def _rows(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=(n, d)), rng.uniform(-1.0, 1.0, n)


# -- 1. ColumnTransformer's sparse_threshold ---------------------------------------------


def _one_hot_columns(sparse_threshold=0.3):
    # 2 numeric columns + 8 one-hot ones: density exactly 0.3 when no category is unknown.
    return ColumnTransformer(
        [("num", BoundedScaler(x_range=(-1.0, 1.0)), [0, 1]),
         ("cat", OneHotEncoder(categories=[list(range(8))], handle_unknown="ignore"), [2])],
        sparse_threshold=sparse_threshold,
    )


def _one_hot_data():
    X, y = _rows()
    X[:, 2] = np.arange(len(X)) % 8
    X_one = X.copy()
    X_one[3, 2] = 99.0  # one record with an unknown category
    return X, X_one, y


def test_a_nonzero_sparse_threshold_is_refused():
    X, X_one, y = _one_hot_data()
    _assert_refused_before_fitting(_strict(_one_hot_columns(), _regressor()), X, y,
                                   "s0", "sparse_threshold=0")
    # ... and why: the output format is decided by one record.
    formats = {type(_one_hot_columns().fit(Z).transform(Z)).__name__ for Z in (X, X_one)}
    assert len(formats) == 2


def test_sparse_threshold_zero_behaves_identically_on_neighbours():
    X, X_one, y = _one_hot_data()
    assert leaking_steps(_strict(_one_hot_columns(0.0), _regressor())) == []
    fitted = [_fit_quietly(_strict(_one_hot_columns(0.0), _regressor()), Z, y) for Z in (X, X_one)]
    for pipe, messages in fitted:
        assert messages == []
        assert pipe[0].sparse_output_ is False and pipe[-1].n_features_in_ == 10
    assert leaking_steps(_strict(_one_hot_columns(), _regressor()))  # the default is refused


# -- 2. SimpleImputer(strategy='constant') ------------------------------------------------


def _imputer_data():
    X, y = _rows()
    X[:, 2] = np.nan  # a column missing everywhere ...
    X_one = X.copy()
    X_one[5, 2] = 0.5  # ... but for one record
    return X, X_one, y


@pytest.mark.parametrize("params", [{}, {"keep_empty_features": True, "add_indicator": True}],
                         ids=["drops-empty-columns", "indicator"])
def test_constant_imputer_that_drops_columns_or_adds_indicators_is_refused(params):
    X, X_one, y = _imputer_data()
    imputer = SimpleImputer(strategy="constant", fill_value=0.0, **params)
    _assert_refused_before_fitting(_strict(imputer, _regressor()), X, y, "s0",
                                   "keep_empty_features=True")
    # ... and why: the output width (and a warning) is decided by one record.
    if params:  # indicators: one missing cell adds a column
        X[:, 2] = 0.25
        X_one = X.copy()
        X_one[7, 1] = np.nan
    widths = set()
    for Z in (X, X_one):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            widths.add(SimpleImputer(strategy="constant", **params).fit_transform(Z).shape[1])
    assert len(widths) == 2


def test_constant_imputer_keeping_empty_columns_behaves_identically_on_neighbours():
    X, X_one, y = _imputer_data()

    def pipe():
        imputer = SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True)
        return _strict(imputer, BoundedScaler(x_range=(-1.0, 1.0)), _regressor())

    assert leaking_steps(pipe()) == []
    fitted = [_fit_quietly(pipe(), Z, y) for Z in (X, X_one)]
    for fitted_pipe, messages in fitted:
        assert messages == []
        assert fitted_pipe[0].statistics_.tolist() == [0.0, 0.0, 0.0]
        assert fitted_pipe[-1].n_features_in_ == 3
    # The default, which drops the empty column on D only, is refused.
    assert leaking_steps(_strict(SimpleImputer(strategy="constant"), _regressor()))


# -- 3. TransformedTargetRegressor's inverse check ----------------------------------------


def _ttr(check_inverse=True, **transform):
    transform = transform or {"transformer": BoundedScaler(x_range=(0.0, 10.0))}
    return TransformedTargetRegressor(regressor=_regressor(x_bound=1.5),
                                      check_inverse=check_inverse, **transform)


def _label_data():
    X, _ = _rows(n=50, d=2)
    y = np.random.default_rng(1).uniform(0.0, 10.0, 50)
    y_one = y.copy()
    y_one[0] = 25.0  # one label outside the declared range, in the checked subsample
    return X, y, y_one


@pytest.mark.parametrize("transform", [{}, {"func": np.log1p, "inverse_func": np.expm1}],
                         ids=["transformer", "func"])
def test_target_transform_with_inverse_check_is_refused(transform):
    X, y, _ = _label_data()
    ttr = _ttr(**transform)
    assert [p for p, _, _ in leaking_steps(_strict(ttr))] == ["s0"]
    with pytest.raises(ConfigurationError, match="check_inverse=False"):
        _strict(ttr).fit(X, y)
    assert not hasattr(ttr, "regressor_")


def test_target_transform_without_inverse_check_behaves_identically_on_neighbours():
    X, y, y_one = _label_data()
    # The refused form warns on D' only.
    messages = [_fit_quietly(Pipeline([("t", _ttr())]), X, labels)[1] for labels in (y, y_one)]
    assert messages[0] == [] and any("inverse" in m for m in messages[1])
    assert leaking_steps(_strict(_ttr())) != []
    assert leaking_steps(_strict(_ttr(check_inverse=False))) == []
    for labels in (y, y_one):
        pipe, messages = _fit_quietly(_strict(_ttr(check_inverse=False)), X, labels)
        assert messages == [] and pipe[0].regressor_.n_features_in_ == 2


def test_target_regressor_left_to_its_default_is_refused():
    # regressor=None is scikit-learn's LinearRegression, which is not private.
    ttr = TransformedTargetRegressor(check_inverse=False)
    assert [(p, c) for p, c, _ in leaking_steps(ttr)] == [("regressor", "LinearRegression")]


# -- 4. OrdinalEncoder(unknown_value=np.nan) ----------------------------------------------


def _ordinal_pipe(unknown_value):
    encoder = OrdinalEncoder(categories=[[0.0, 1.0, 2.0]], handle_unknown="use_encoded_value",
                             unknown_value=unknown_value)
    columns = ColumnTransformer([("num", BoundedScaler(x_range=(-1.0, 1.0)), [0]),
                                 ("cat", encoder, [1])], sparse_threshold=0)
    return _strict(columns, _regressor())


def _ordinal_data():
    X, y = _rows(d=2)
    X[:, 1] = np.arange(len(X)) % 3
    X_one = X.copy()
    X_one[4, 1] = 7.0  # a finite record with a category that was not declared
    return X, X_one, y


def test_ordinal_encoder_with_a_nan_unknown_value_is_refused():
    X, X_one, y = _ordinal_data()
    _assert_refused_before_fitting(_ordinal_pipe(np.nan), X, y, "s0__cat", "unknown_value=-1")
    # ... and why: one finite record makes the encoded rows non-finite.
    _fit_quietly(Pipeline(_ordinal_pipe(np.nan).steps), X, y)
    with pytest.raises(ValueError, match="NaN"):
        Pipeline(_ordinal_pipe(np.nan).steps).fit(X_one, y)


def test_ordinal_encoder_with_a_finite_unknown_value_behaves_identically_on_neighbours():
    X, X_one, y = _ordinal_data()
    assert leaking_steps(_ordinal_pipe(-1)) == []
    for Z in (X, X_one):
        pipe, messages = _fit_quietly(_ordinal_pipe(-1), Z, y)
        assert messages == [] and pipe[-1].n_features_in_ == 2
    assert leaking_steps(_ordinal_pipe(np.nan)) != []


# -- 5. ColumnTransformer column specifications --------------------------------------------


def _columns(spec):
    return ColumnTransformer([("f", BoundedScaler(x_range=(-1.0, 1.0)), spec)],
                             sparse_threshold=0)


@pytest.mark.parametrize(
    "spec",
    [lambda Z: [j for j in range(Z.shape[1]) if np.max(Z[:, j]) < 10],
     make_column_selector(dtype_include="float"),
     make_column_selector(pattern="^a", dtype_exclude=object)],
    ids=["callable", "selector-dtype-include", "selector-dtype-exclude"],
)
def test_column_specs_that_may_read_values_are_refused(spec):
    X, y = _rows()
    _assert_refused_before_fitting(_strict(_columns(spec), _regressor()), X, y, "s0",
                                   "make_column_selector(pattern=...)")


def test_inferred_dtypes_can_depend_on_one_record():
    pd = pytest.importorskip("pandas")
    csv = "a,b\n" + "\n".join(f"0.{i},{i % 5}" for i in range(30))
    D = pd.read_csv(io.StringIO(csv))
    D_one = pd.read_csv(io.StringIO(csv.replace("0.0,0", "0.0,2.5", 1)))
    selector = make_column_selector(dtype_include="float")
    assert selector(D) != selector(D_one)
    assert leaking_steps(_strict(_columns(selector), _regressor()))
    # Selection by name reads the header only.
    by_name = make_column_selector(pattern="^[ab]$")
    assert by_name(D) == by_name(D_one) == ["a", "b"]
    assert leaking_steps(_strict(_columns(by_name), _regressor())) == []


def test_column_specs_that_read_no_values_pass():
    for spec in [[0, 1], 2, "a", ["a", "b"], slice(0, 2), np.array([0, 2]),
                 [True, False, True], np.array([True, True, False]), [],
                 make_column_selector(pattern="^a")]:
        assert leaking_steps(_strict(_columns(spec), _regressor())) == [], spec
    for spec in [make_column_selector(), np.array([0.5, 1.5]), [None]]:
        assert leaking_steps(_strict(_columns(spec), _regressor())) != [], spec


# -- 6. FunctionTransformer functions ------------------------------------------------------


def test_functions_of_the_whole_batch_are_refused():
    X, y = _rows()
    X_one = X.copy()
    X_one[0, 2] = 50.0
    # scale standardises with the batch's means: replacing one row moves every row.
    moved = np.any(scale(X) != scale(X_one), axis=1)
    assert moved.all()
    for step in [FunctionTransformer(scale), FunctionTransformer(np.tanh, inverse_func=scale,
                                                                 check_inverse=False),
                 FunctionTransformer(functools.partial(np.matmul, np.ones((40, 40))))]:
        _assert_refused_before_fitting(_strict(step, _regressor()), X, y, "s0", "rowwise")
    ttr = TransformedTargetRegressor(regressor=_regressor(), func=scale, inverse_func=np.tanh,
                                     check_inverse=False)
    assert [p for p, _, _ in leaking_steps(ttr)] == ["transformer"]


def test_a_ufunc_made_from_any_python_function_is_not_taken_as_elementwise():
    # np.frompyfunc makes a ufunc (signature None) of any function, one that keeps
    # state from row to row included: a running maximum passed strict=True, and the
    # fitted transform then gave one training record's value exactly.
    import scipy.special

    seen = {"max": 0.0}

    def running_max_scale(v):
        seen["max"] = max(seen["max"], abs(v))
        return v / seen["max"]

    made = np.frompyfunc(running_max_scale, 1, 1)
    assert isinstance(made, np.ufunc) and made.signature is None
    assert leaking_steps(_strict(FunctionTransformer(made), _regressor()))
    assert leaking_steps(_strict(FunctionTransformer(rowwise(made)), _regressor())) == []
    for library in (np.exp, scipy.special.expit, functools.partial(scipy.special.erf)):
        assert leaking_steps(_strict(FunctionTransformer(library), _regressor())) == []


def test_a_ufunc_writing_into_a_parameter_is_refused():
    # out= (in kw_args or in a partial) writes every transformed row into an array
    # that is a parameter of the step: the fitted, pickled pipeline held the
    # private rows (recovered exactly by expm1). where= leaves entries unwritten.
    X, y = _rows()
    buf = np.empty_like(X)
    refused = [FunctionTransformer(np.log1p, kw_args={"out": buf}),
               FunctionTransformer(functools.partial(np.log1p, out=buf)),
               FunctionTransformer(functools.partial(functools.partial(np.log1p), out=buf)),
               FunctionTransformer(np.tanh, kw_args={"where": X > 0}),
               FunctionTransformer(np.tanh, inverse_func=np.arctanh, check_inverse=False,
                                   inv_kw_args={"out": buf})]
    for step in refused:
        _assert_refused_before_fitting(_strict(step, _regressor()), X, y, "s0", "rowwise")
        assert not np.array_equal(buf, np.log1p(X))
    for step in [FunctionTransformer(np.log1p, kw_args={"dtype": np.float64}),
                 FunctionTransformer(functools.partial(np.log1p, casting="same_kind"))]:
        assert leaking_steps(_strict(step, _regressor())) == [], step


def test_a_joblib_memory_prints_no_row():
    # joblib.Memory(verbose=1), joblib's default, printed every call it computed
    # with the rows and labels in it.
    import contextlib
    import tempfile

    import joblib

    X, y = _rows(n=400)
    X[0] = [0.314159, 0.271828, 0.161803]
    with tempfile.TemporaryDirectory() as location:
        memory = joblib.Memory(location, verbose=1)
        pipe = PrivatePipeline([("s0", BoundedScaler(x_range=(-1.0, 1.0))),
                                ("fit", _regressor())], memory=memory)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            pipe.fit(X, y)
            pipe.fit(X, y)  # a cache hit
        assert "0.314159" not in printed.getvalue() and "[Memory]" not in printed.getvalue()
        assert pipe.memory is memory
        assert len(os.listdir(os.path.join(location, "joblib"))) > 0  # the same cache


def test_ufuncs_and_functions_declared_rowwise_pass():
    def local(X):
        return X * 2.0

    def undeclared(X):
        return X * 2.0

    accepted = [
        FunctionTransformer(),
        FunctionTransformer(np.tanh),
        FunctionTransformer(np.log1p, inverse_func=np.expm1, check_inverse=False),
        FunctionTransformer(functools.partial(np.add, 1.0)),
        FunctionTransformer(_row_share),
        FunctionTransformer(functools.partial(_row_share)),
        FunctionTransformer(rowwise(local)),
        FunctionTransformer(rowwise(functools.partial(np.clip, a_min=-1.0, a_max=1.0))),
    ]
    for step in accepted:
        assert leaking_steps(_strict(step, _regressor())) == [], step
    assert leaking_steps(_strict(FunctionTransformer(undeclared), _regressor()))
    # The mark survives pickling of a module-level function and of a partial.
    for func in (_row_share, rowwise(functools.partial(np.clip, a_min=0.0, a_max=1.0))):
        step = pickle.loads(pickle.dumps(FunctionTransformer(func)))
        assert leaking_steps(_strict(step, _regressor())) == []
    # An object that takes no attribute is wrapped in a marked partial.
    bound = rowwise(np.ones((1, 3)).__mul__)
    assert isinstance(bound, functools.partial)
    assert leaking_steps(_strict(FunctionTransformer(bound), _regressor())) == []
    with pytest.raises(TypeError, match="rowwise"):
        rowwise(3.0)


# -- 7. Floating-point warnings of element-wise steps --------------------------------------


@pytest.mark.parametrize(
    "step, value",
    [(FunctionTransformer(np.log1p), -2.0),
     (PolynomialFeatures(2), 1e200),
     (SplineTransformer(knots=np.linspace(0.0, 1.0, 5)[:, None].repeat(2, 1),
                        extrapolation="linear"), 1.7e308),
     (SplineTransformer(knots=np.linspace(0.0, 1.0, 5)[:, None].repeat(2, 1),
                        extrapolation="continue"), 1e120)],
    ids=["log1p", "polynomial", "spline-linear", "spline-continue"],
)
@pytest.mark.parametrize("method", ["fit", "fit_transform"])
def test_a_step_leaving_its_domain_warns_nothing_and_is_refused_before_any_spend(
        step, value, method):
    X, y = _rows(d=2)
    X = (X + 1.0) / 2.0
    X[0, 0] = value
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    last = (PrivateStandardScaler(epsilon=1.0, x_range=(-1.0, 1.0), accountant=acc)
            if method == "fit_transform" else _regressor(acc, x_bound=50.0))
    pipe = _strict(step, last)
    assert leaking_steps(pipe) == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="NaN|infinity"):
            getattr(pipe, method)(X, y)
    assert [str(w.message) for w in caught] == []
    assert acc.n_spends == 0


def test_composites_running_steps_in_worker_processes_are_refused():
    # Worker processes do not inherit np.errstate: their steps' warnings are printed.
    from sklearn.pipeline import FeatureUnion

    X, y = _rows()
    for n_jobs, expected in [(None, []), (1, []), (2, ["s0"])]:
        for step in [FeatureUnion([("f", FunctionTransformer(np.log1p))], n_jobs=n_jobs),
                     ColumnTransformer([("f", FunctionTransformer(np.log1p), [0])],
                                       sparse_threshold=0, n_jobs=n_jobs)]:
            pipe = _strict(step, _regressor())
            assert [p for p, _, _ in leaking_steps(pipe)] == expected
    _assert_refused_before_fitting(pipe, X, y, "s0", "n_jobs=None")


# -- 8. Classes are matched exactly --------------------------------------------------------


def test_subclasses_of_accepted_classes_are_refused():
    class Normalizer(StandardScaler):
        pass

    class Columns(ColumnTransformer):
        pass

    class Steps(Pipeline):
        pass

    X, y = _rows()
    for step in [Normalizer(), Columns([("f", "passthrough", [0])], sparse_threshold=0),
                 Steps([("f", "passthrough")])]:
        pipe = _strict(step, _regressor())
        assert [(p, c) for p, c, _ in leaking_steps(pipe)] == [("s0", type(step).__name__)]
        _assert_refused_before_fitting(pipe, X, y, "s0", "declared parameters")
    # skprivreg's own pipeline is still searched as one.
    inner = PrivatePipeline([("b", BoundedScaler(x_range=(-1.0, 1.0)))])
    assert leaking_steps(_strict(inner, _regressor())) == []
    assert leaking_steps(_strict(PrivatePipeline([("s", StandardScaler())]), _regressor()))


# -- privacy_spent counts what a composite decides from the data ---------------------------


def test_privacy_spent_counts_a_composites_own_leak():
    X, X_one, y = _one_hot_data()
    pipe = Pipeline([("ct", _one_hot_columns()), ("reg", _regressor())]).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="'ct'.*sparse_threshold=0"):
        assert np.isinf(privacy_spent(pipe).epsilon)
    fixed = Pipeline([("ct", _one_hot_columns(0.0)), ("reg", _regressor())]).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert privacy_spent(fixed).epsilon == pytest.approx(1.0)


# -- Random feature maps and the feature hasher --------------------------------------------


@pytest.mark.parametrize(
    "step, refused",
    [(GaussianRandomProjection(n_components=2, random_state=0),
      GaussianRandomProjection(n_components="auto", random_state=0)),
     (SparseRandomProjection(n_components=2, random_state=0),
      SparseRandomProjection(n_components=2)),
     (RBFSampler(gamma=0.5, n_components=4, random_state=0),
      RBFSampler(gamma="scale", random_state=0)),
     (PolynomialCountSketch(n_components=4, random_state=0), PolynomialCountSketch()),
     (FeatureHasher(n_features=4, input_type="string"), None)],
    ids=lambda v: type(v).__name__,
)
def test_random_feature_maps_with_declared_seeds_pass_and_read_only_the_shape(step, refused):
    assert leaking_steps(step) == []
    if refused is not None:
        assert leaking_steps(refused)
    X, _ = _rows()
    X_one = X.copy()
    X_one[0] = 1e6
    if isinstance(step, FeatureHasher):
        X, X_one = [["a"], ["b"]], [["a"], ["zz"]]
    states = []
    for Z in (X, X_one):
        fitted = pickle.loads(pickle.dumps(step)).fit(Z)
        states.append({k: (v.toarray() if hasattr(v, "toarray") else np.asarray(v)).tolist()
                       for k, v in vars(fitted).items()
                       if k.endswith("_") and not k.startswith("_")})
    assert states[0] == states[1]
