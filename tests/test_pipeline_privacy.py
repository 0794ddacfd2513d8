"""Pipelines: composed accounting (privacy_spent) and the guard against leaking steps."""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MinMaxScaler,
    OneHotEncoder,
    PolynomialFeatures,
    SplineTransformer,
    StandardScaler,
)

from skprivreg import (
    AdaSSPRegressor,
    BoundedScaler,
    BudgetAccountant,
    ConfigurationError,
    PrivacyLeakWarning,
    PrivatePipeline,
    PrivateStandardScaler,
    leaking_steps,
    make_private_pipeline,
    privacy_ledgers,
    privacy_spent,
)
from skprivreg.accounting import compose_ledgers


def _data(n=3000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    return X, X @ np.arange(1.0, d + 1) + 0.1 * rng.normal(size=n)


def _regressor(**kw):
    return AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=7.0, **kw)


def test_pipeline_guarantee_is_the_composition_of_its_steps():
    X, y = _data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    pipe = make_private_pipeline(
        PrivateStandardScaler(epsilon=0.5, x_range=(-1.0, 1.0), accountant=acc),
        _regressor(accountant=acc),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing leaks: no warning at all
        pipe.fit(X, y)
        total = privacy_spent(pipe)
    steps = [pipe[0].privacy_spent_, pipe[-1].privacy_spent_]
    assert total == compose_ledgers(steps)
    assert total.epsilon == pytest.approx(1.5) and total.delta == pytest.approx(2e-6)
    assert pipe.privacy_spent_ == total
    assert tuple(acc.total()) == pytest.approx(tuple(total))
    assert list(privacy_ledgers(pipe)) == ["privatestandardscaler", "adasspregressor"]


def test_standard_scaler_before_a_private_step_warns_naming_it_and_its_replacement():
    X, y = _data()
    pipe = make_private_pipeline(StandardScaler(), _regressor())
    named = r"'standardscaler' \(StandardScaler\).*BoundedScaler"
    with pytest.warns(PrivacyLeakWarning, match=named):
        pipe.fit(X, y)
    # A plain scikit-learn Pipeline cannot be guarded at fit; privacy_spent
    # still counts the leak: the total is infinite, never understated.
    plain = make_pipeline(StandardScaler(), _regressor()).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="standardscaler"):
        total = privacy_spent(plain)
    assert math.isinf(total.epsilon)


def test_data_independent_steps_pass_silently():
    X, y = _data()
    Xc = np.column_stack([X, np.arange(len(X)) % 3])
    pipe = make_private_pipeline(
        ColumnTransformer([
            ("num", BoundedScaler(x_range=(-1.0, 1.0)), [0, 1, 2]),
            ("cat", OneHotEncoder(categories=[[0.0, 1.0, 2.0]], handle_unknown="ignore",
                                  sparse_output=False), [3]),
        ], sparse_threshold=0),
        FunctionTransformer(np.tanh),
        PolynomialFeatures(degree=1, include_bias=False),
        _regressor(),
    )
    assert leaking_steps(pipe) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe.fit(Xc, y)
        assert privacy_spent(pipe).epsilon == pytest.approx(1.0)


@pytest.mark.parametrize(
    "step, path",
    [
        (OneHotEncoder(), "onehotencoder"),  # categories read from the data
        (OneHotEncoder(categories=[[0.0, 1.0]]), "onehotencoder"),  # raises on unknown ones
        (MinMaxScaler(), "minmaxscaler"),
        (FunctionTransformer(np.exp, inverse_func=np.log), "functiontransformer"),
        (ColumnTransformer([("s", StandardScaler(), [0])], remainder="passthrough",
                           sparse_threshold=0), "columntransformer__s"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_learning_steps_are_found_by_path(step, path):
    pipe = make_private_pipeline(step, _regressor())
    assert [found[0] for found in leaking_steps(pipe)] == [path]


def test_target_transformer_that_learns_is_found():
    ttr = TransformedTargetRegressor(regressor=_regressor(), transformer=StandardScaler(),
                                     check_inverse=False)
    assert [p for p, _, _ in leaking_steps(make_private_pipeline(ttr))] == [
        "transformedtargetregressor__transformer"
    ]
    # With the inverse check (the default), the target transformer itself is found too.
    ttr.set_params(check_inverse=True)
    assert [p for p, _, _ in leaking_steps(make_private_pipeline(ttr))] == [
        "transformedtargetregressor", "transformedtargetregressor__transformer"
    ]
    fixed = TransformedTargetRegressor(regressor=_regressor(), func=np.tanh,
                                       inverse_func=np.arctanh, check_inverse=False)
    assert leaking_steps(make_private_pipeline(fixed)) == []


def test_strict_mode_refuses_before_any_step_is_fitted_or_any_budget_spent():
    X, y = _data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    pipe = make_private_pipeline(
        PrivateStandardScaler(x_range=(-1.0, 1.0), accountant=acc), StandardScaler(),
        _regressor(accountant=acc), strict=True,
    )
    with pytest.raises(ConfigurationError, match="'standardscaler'.*nothing was fitted"):
        pipe.fit(X, y)
    # As Pipeline: no fit_predict when the last step has none (a regressor).
    assert not hasattr(pipe, "fit_predict")
    head = make_private_pipeline(
        PrivateStandardScaler(x_range=(-1.0, 1.0), accountant=acc), StandardScaler(),
        strict=True,
    )
    with pytest.raises(ConfigurationError, match="nothing was fitted"):
        head.fit_transform(X, y)
    assert acc.n_spends == 0


def test_the_guard_reads_no_data():
    # Static: the same warnings whatever the data, raised before any step reads it.
    pipe = make_private_pipeline(StandardScaler(), _regressor(), strict=True)
    with pytest.raises(ConfigurationError):
        pipe.fit(object(), object())


def test_private_pipeline_clones_and_tunes_like_a_pipeline():
    X, y = _data()
    pipe = PrivatePipeline([("scale", BoundedScaler(x_range=(-1.0, 1.0))),
                            ("reg", _regressor())], strict=True)
    copy = clone(pipe)
    assert copy.get_params()["strict"] is True
    search = GridSearchCV(copy, {"reg__epsilon": [0.5, 1.0]}, cv=2).fit(X, y)
    assert isinstance(search.best_estimator_, PrivatePipeline)
    # sklearn's selection itself is not private: privacy_spent says so.
    with pytest.warns(PrivacyLeakWarning, match="PrivateGridSearchCV"):
        assert math.isinf(privacy_spent(search).epsilon)


@pytest.mark.parametrize(
    "step",
    [
        # an unknown category warns when a category is dropped
        OneHotEncoder(categories=[[0.0, 1.0]], handle_unknown="ignore", drop="first"),
        OneHotEncoder(categories=[[0.0, 1.0]], handle_unknown="ignore", drop="if_binary"),
        # a value outside the knots raises
        SplineTransformer(knots=np.array([[0.0], [0.5], [1.0]]), extrapolation="error"),
    ],
    ids=["drop-first", "drop-if-binary", "spline-error"],
)
def test_steps_whose_warning_or_error_one_record_decides_are_found(step):
    pipe = make_private_pipeline(step, _regressor())
    assert [found[0] for found in leaking_steps(pipe)] == [type(step).__name__.lower()]
    # ... and why: one record outside what was declared makes the step warn or raise.
    X = np.array([[0.0], [1.0], [1.0]])
    X_one = np.array([[0.0], [1.0], [7.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step.fit_transform(X)
        with pytest.raises((UserWarning, ValueError)):
            step.fit_transform(X_one)


def test_declared_steps_that_never_warn_pass_the_guard():
    for step in [OneHotEncoder(categories=[[0.0, 1.0]], handle_unknown="ignore"),
                 SplineTransformer(knots=np.array([[0.0], [0.5], [1.0]]))]:
        assert leaking_steps(make_private_pipeline(step, _regressor())) == []


def test_private_pipeline_is_non_deterministic_when_any_step_is():
    from sklearn.linear_model import Ridge
    from sklearn.utils import get_tags

    tags = get_tags(PrivatePipeline([("scale", BoundedScaler(x_range=(-1.0, 1.0))),
                                     ("fit", _regressor())]))
    assert tags.non_deterministic
    # A private step before a deterministic final estimator (and a passthrough step).
    first = PrivatePipeline([("scale", PrivateStandardScaler(x_range=(-1.0, 1.0))),
                             ("skip", "passthrough"), ("fit", Ridge())])
    assert get_tags(first).non_deterministic
    nested = PrivatePipeline([("inner", make_private_pipeline(_regressor()))])
    assert get_tags(nested).non_deterministic
    plain = PrivatePipeline([("scale", BoundedScaler(x_range=(-1.0, 1.0))), ("fit", Ridge())])
    assert not get_tags(plain).non_deterministic


def test_a_failed_refit_leaves_no_step_of_the_previous_model_beside_a_new_one():
    """The scaler refits on the new rows and spends; the regressor is refused by the
    budget and got its previous coefficients back: the pipeline then predicted
    silently from a model of other scaled features. It is unfitted now; a refit
    refused before any step spends keeps the whole previous model."""
    import warnings

    from sklearn.exceptions import NotFittedError

    import skprivreg as sp

    rng = np.random.default_rng(0)
    X1 = rng.normal(size=(5000, 3))
    y1 = X1 @ np.array([1.0, -2.0, 0.5])
    X2 = 100 * rng.normal(size=(5000, 3)) + 50
    y2 = X2 @ np.array([1.0, -2.0, 0.5]) / 100
    acc = sp.BudgetAccountant(epsilon=3.0, delta=1e-5)
    pipe = sp.make_private_pipeline(
        sp.PrivateStandardScaler(epsilon=1.0, delta=1e-6, accountant=acc),
        sp.AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=5.0, y_bound=10.0,
                           accountant=acc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X1, y1)
        with pytest.raises(sp.BudgetExceededError):
            pipe.fit(X2, y2)  # the scaler spends 1, the regressor is refused
        with pytest.raises(NotFittedError):
            pipe.predict(X2[:5])
        scaler, regressor = pipe.steps[0][1], pipe.steps[1][1]
        assert hasattr(scaler, "privacy_spent_") and not hasattr(regressor, "coef_")

    acc2 = sp.BudgetAccountant(epsilon=2.5, delta=1e-5)
    pipe.set_params(privatestandardscaler__accountant=acc2, adasspregressor__accountant=acc2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X1, y1)
        kept = pipe.predict(X1[:5])
        with pytest.raises(sp.BudgetExceededError):
            pipe.fit(X2, y2)  # the scaler is refused first: nothing spent
    np.testing.assert_array_equal(pipe.predict(X1[:5]), kept)
