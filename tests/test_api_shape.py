"""The public API has one shape: keyword-only constructors, one name per concept."""

import inspect

import numpy as np
import pytest
from sklearn.pipeline import Pipeline

import skprivreg
from skprivreg import feature_selection, label_dp, linear_model, model_selection, preprocessing

# Withdrawn names: each must raise a TypeError that names its replacement.
WITHDRAWN = {"label_bounds": "y_bound", "target_bound": "y_bound", "feature_bound": "x_range",
             "feature_bounds": "x_range", "on_failure": "on_fail"}
# Names that must not appear in any signature (two meanings or replaced).
FORBIDDEN = set(WITHDRAWN) | {"row_norm_bound", "label_range", "bounds_X", "bounds_y"}


def _public_estimators():
    seen = {}
    for module in (skprivreg, linear_model, label_dp, feature_selection, preprocessing,
                   model_selection):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and hasattr(obj, "fit") and hasattr(obj, "get_params"):
                seen[obj.__name__] = obj
    return sorted(seen.values(), key=lambda cls: cls.__name__)


ESTIMATORS = _public_estimators()
DP_ESTIMATORS = [cls for cls in ESTIMATORS if "epsilon" in inspect.signature(cls).parameters]


def test_every_estimator_is_found():
    names = {cls.__name__ for cls in ESTIMATORS}
    assert {"LinearRegression", "AdaSSPRegressor", "ISSPRegressor", "ReuseCovRegressor",
            "WeightedLBARegressor", "RROnBinsRegressor", "PrivateLassoSupportSelector",
            "PrivateTopSSelector", "PrivateStandardScaler"} <= names


@pytest.mark.parametrize(
    "cls", [cls for cls in ESTIMATORS if not issubclass(cls, Pipeline)],
    ids=lambda cls: cls.__name__,
)
def test_constructor_is_keyword_only(cls):
    # (A Pipeline takes its steps positionally, as scikit-learn's does.)
    params = list(inspect.signature(cls).parameters.values())
    assert params, cls
    positional = [p.name for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert not positional, f"{cls.__name__}: positional parameters {positional}"


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_no_withdrawn_or_ambiguous_names(cls):
    names = set(inspect.signature(cls).parameters)
    assert not names & FORBIDDEN, names & FORBIDDEN


@pytest.mark.parametrize("cls", DP_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_one_default_rule(cls):
    params = inspect.signature(cls).parameters
    assert params["epsilon"].default == 1.0
    if "delta" in params:  # pure-DP estimators have none
        assert params["delta"].default == 1e-6, cls.__name__
    if "bounds_budget" in params:
        assert params["bounds_budget"].default == 0.1
    if "bounds" in params:
        assert params["bounds"].default == "private"


@pytest.mark.parametrize("cls", DP_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_positional_and_withdrawn_arguments_raise_naming_the_fix(cls):
    with pytest.raises(TypeError, match="keyword arguments only"):
        cls(1.0)
    for old, new in getattr(cls, "_renamed_parameters", {}).items():
        with pytest.raises(TypeError, match=new):
            cls(**{old: None})


def test_x_bound_means_a_row_norm_everywhere():
    # Selectors bound entries per column: they take x_range, and refuse x_bound
    # with an explanation of what x_bound means here.
    for cls in (feature_selection.PrivateTopSSelector,
                feature_selection.PrivateLassoSupportSelector):
        assert "x_bound" not in inspect.signature(cls).parameters
        with pytest.raises(TypeError, match="x_range"):
            cls(x_bound=1.0)


@pytest.mark.parametrize("cls", DP_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_sample_weight_is_refused_with_the_reason(cls):
    X = np.zeros((4, 2))
    y = np.zeros(4)
    with pytest.raises(TypeError, match="sample_weight"):
        cls().fit(X, y, sample_weight=np.ones(4))


def test_errors_and_warnings_live_in_one_module():
    import skprivreg.exceptions as exc

    defined = {name for name, obj in vars(exc).items()
               if inspect.isclass(obj) and issubclass(obj, Exception)
               and obj.__module__ == exc.__name__}
    assert defined == set(exc.__all__)
    for module in (linear_model, label_dp, feature_selection, preprocessing, model_selection):
        for name in module.__all__:
            obj = getattr(module, name)
            assert not (inspect.isclass(obj) and issubclass(obj, Exception)), name
