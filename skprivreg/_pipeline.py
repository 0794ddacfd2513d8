"""Pipelines inside the guarantee: composed accounting and a guard against leaking steps.

A scikit-learn :class:`~sklearn.pipeline.Pipeline` fits its steps one after
the other on the same rows. Each skprivreg step records its own ledger; a
step that learns from the data without a guarantee (a
:class:`~sklearn.preprocessing.StandardScaler` reads means and variances)
releases what it learned through the fitted pipeline, and no (epsilon, delta)
covers it.

- :func:`privacy_spent` composes the ledgers of every fitted step, and
  counts each step that learned without a guarantee as an event of infinite
  epsilon (with a :class:`~skprivreg.exceptions.PrivacyLeakWarning`), so the
  total it states is never smaller than the truth. It works on any fitted
  estimator, including a plain scikit-learn ``Pipeline``.
- :class:`PrivatePipeline` (and :func:`make_private_pipeline`) is a
  ``Pipeline`` that runs the guard when ``fit`` starts, before any step reads
  the data: every step that would learn without a guarantee is named in a
  :class:`~skprivreg.exceptions.PrivacyLeakWarning` with its replacement
  (``strict=True``: a :class:`~skprivreg.exceptions.ConfigurationError`).
  The guard looks only at the steps' classes and parameters, public facts,
  so whether it fires never depends on a record.

Why a pipeline class: an estimator's ``fit`` receives arrays, not the
pipeline that produced them, so a private estimator cannot tell that a
``StandardScaler`` ran before it. The pipeline can.

Sequential composition covers a pipeline because each step is fitted on rows
mapped by functions fixed by earlier (released) steps: replacing one input
row replaces one row at every step.
"""

import math
import warnings

from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline

from ._compat import check_is_fitted
from .accounting import PrivacyEvent, PrivacyLedger, compose_ledgers
from .base import DPEstimatorMixin
from .exceptions import ConfigurationError, PrivacyLeakWarning

__all__ = [
    "PrivatePipeline",
    "make_private_pipeline",
    "privacy_spent",
    "privacy_ledgers",
    "leaking_steps",
]

_SCALER_REPLACEMENT = (
    "skprivreg.preprocessing.BoundedScaler(x_range=...) with declared ranges, or "
    "skprivreg.preprocessing.PrivateStandardScaler(epsilon=..., x_range=...)"
)

#: scikit-learn transformers whose fit learns from the data -> the replacement to suggest.
_REPLACEMENTS = {
    "StandardScaler": _SCALER_REPLACEMENT,
    "RobustScaler": _SCALER_REPLACEMENT,
    "MinMaxScaler": "skprivreg.preprocessing.BoundedScaler(x_range=...) with declared ranges",
    "MaxAbsScaler": "skprivreg.preprocessing.BoundedScaler(x_range=...) with declared ranges",
    "QuantileTransformer": "skprivreg.preprocessing.BoundedScaler(x_range=...)",
    "PowerTransformer": "a FunctionTransformer with a fixed function (np.log1p, ...)",
    "OneHotEncoder": (
        "OneHotEncoder(categories=<declared list>, handle_unknown='ignore') with "
        "drop=None, min_frequency=None and max_categories=None"
    ),
    "OrdinalEncoder": (
        "OrdinalEncoder(categories=<declared list>, handle_unknown='use_encoded_value', "
        "unknown_value=-1)"
    ),
    "SimpleImputer": "SimpleImputer(strategy='constant', fill_value=...)",
    "SplineTransformer": (
        "SplineTransformer(knots=<declared array>) with extrapolation other than 'error'"
    ),
    "KBinsDiscretizer": "a FunctionTransformer with declared bin edges (np.digitize)",
    "MissingIndicator": "MissingIndicator(features='all')",
    "FunctionTransformer": "FunctionTransformer(..., check_inverse=False)",
    "TransformedTargetRegressor": (
        "a skprivreg estimator with a declared y_bound, or a target transform with fixed "
        "func/inverse_func and check_inverse=False"
    ),
    "GridSearchCV": "skprivreg.model_selection.PrivateGridSearchCV",
    "RandomizedSearchCV": "skprivreg.model_selection.PrivateGridSearchCV",
}
_GENERIC_REPLACEMENT = (
    "a step with declared parameters that reads nothing from the data, or a skprivreg "
    "transformer (BoundedScaler, PrivateStandardScaler)"
)

#: Stateless scikit-learn transformers: fit reads at most the shape.
_STATELESS = {"Binarizer", "Normalizer", "PolynomialFeatures"}


def _is_passthrough(step):
    return step is None or (isinstance(step, str) and step in ("passthrough", "drop"))


def _is_skprivreg(step):
    return type(step).__module__.split(".")[0] == "skprivreg"


def _learns_without_guarantee(step):
    """``None`` if ``step`` is data-independent or private; else the replacement to suggest.

    Reads the class and parameters only (public facts).
    """
    if _is_passthrough(step) or _is_skprivreg(step):
        return None
    name = type(step).__name__
    params = step.get_params(deep=False) if hasattr(step, "get_params") else {}
    if name in _STATELESS:
        return None
    if name == "FunctionTransformer":
        # With both functions, check_inverse=True evaluates them on rows of the data
        # and warns on a mismatch: a warning one record can decide.
        both = params.get("func") is not None and params.get("inverse_func") is not None
        return _REPLACEMENTS[name] if both and params.get("check_inverse", True) else None
    if name == "OneHotEncoder":
        declared = not (isinstance(params.get("categories"), str))
        # With a dropped category, an unknown one warns when it is met: a
        # warning one record can decide.
        ok = (
            declared
            and params.get("handle_unknown") in ("ignore", "infrequent_if_exist")
            and params.get("drop") is None
            and params.get("min_frequency") is None
            and params.get("max_categories") is None
        )
        return None if ok else _REPLACEMENTS[name]
    if name == "OrdinalEncoder":
        declared = not (isinstance(params.get("categories"), str))
        ok = (
            declared
            and params.get("handle_unknown") == "use_encoded_value"
            and params.get("min_frequency") is None
            and params.get("max_categories") is None
        )
        return None if ok else _REPLACEMENTS[name]
    if name == "SimpleImputer":
        return None if params.get("strategy") == "constant" else _REPLACEMENTS[name]
    if name == "MissingIndicator":
        return None if params.get("features") == "all" else _REPLACEMENTS[name]
    if name == "SplineTransformer":
        # extrapolation='error' raises on a value outside the knots: one record decides.
        ok = not isinstance(params.get("knots"), str) and params.get("extrapolation") != "error"
        return None if ok else _REPLACEMENTS[name]
    return _REPLACEMENTS.get(name, _GENERIC_REPLACEMENT)


def _children(step, fitted):
    """``[(name, child)]`` of a composite estimator, ``None`` for a leaf."""
    if isinstance(step, Pipeline):
        return list(step.steps)
    if isinstance(step, FeatureUnion):
        return list(step.transformer_list)
    if isinstance(step, ColumnTransformer):
        if fitted and hasattr(step, "transformers_"):
            return [(name, trans) for name, trans, _ in step.transformers_]
        children = [(name, trans) for name, trans, _ in step.transformers]
        return children + [("remainder", step.remainder)]
    if isinstance(step, TransformedTargetRegressor):
        if fitted and hasattr(step, "regressor_"):
            children = [("regressor", step.regressor_), ("transformer", step.transformer_)]
        else:
            children = [("regressor", step.regressor), ("transformer", step.transformer)]
        if step.transformer is None and step.func is None:
            children = children[:1]  # the identity: nothing is learned
        elif step.transformer is None and not fitted:
            # func/inverse_func are wrapped in a FunctionTransformer(check_inverse=...)
            children[1] = ("transformer", _FunctionCheck(step))
        return children
    return None


class _FunctionCheck:
    """Stands for the FunctionTransformer a TransformedTargetRegressor builds from func."""

    def __init__(self, ttr):
        self._params = {
            "func": ttr.func,
            "inverse_func": ttr.inverse_func,
            "check_inverse": ttr.check_inverse,
        }

    def get_params(self, deep=False):
        return dict(self._params)


_FunctionCheck.__name__ = "FunctionTransformer"


def leaking_steps(estimator):
    """``[(path, class name, replacement)]`` of the steps that would learn without a guarantee.

    A static check of classes and parameters (public facts), for use before
    ``fit``. Nested pipelines, column transformers, feature unions and
    target transformers are searched; skprivreg estimators and known
    data-independent steps (``'passthrough'``, ``FunctionTransformer``
    without an inverse check, ``OneHotEncoder``/``OrdinalEncoder`` with
    declared categories that never raise or warn on unknown ones,
    ``SplineTransformer`` with declared knots that never raises on a value
    outside them,
    ``SimpleImputer(strategy='constant')``, ``PolynomialFeatures``,
    ``Normalizer``, ``Binarizer``) pass.
    """
    found = []

    def visit(path, step):
        children = _children(step, fitted=False)
        if children is not None:
            for name, child in children:
                visit(f"{path}{name}" if not path else f"{path}__{name}", child)
            return
        replacement = _learns_without_guarantee(step)
        if replacement is not None:
            found.append((path, type(step).__name__, replacement))

    visit("", estimator)
    return found


def private_steps(estimator):
    """``[(path, step)]`` of the private steps (``DPEstimatorMixin``) of an unfitted estimator.

    Nested pipelines, column transformers, feature unions and target
    transformers are searched, as by :func:`leaking_steps`.
    """
    found = []

    def visit(path, step):
        if isinstance(step, DPEstimatorMixin):
            found.append((path or type(step).__name__, step))
        children = _children(step, fitted=False)
        for name, child in children or ():
            visit(f"{path}__{name}" if path else name, child)

    visit("", estimator)
    return found


def _leak_message(path, cls, replacement):
    return (
        f"Step {path!r} ({cls}) learns from the data without a privacy guarantee; "
        f"what it learns is released through the fitted pipeline and no (epsilon, delta) "
        f"covers it. Replace it by {replacement}."
    )


def privacy_ledgers(estimator):
    """``{step path: PrivacyLedger}`` of a fitted estimator, pipeline or search.

    A step with ``privacy_spent_`` contributes its ledger (a search's covers
    all of its fits). A fitted step that learned without a guarantee
    contributes one event of infinite epsilon named after it (and a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`). Data-independent
    steps contribute nothing.
    """
    ledgers = {}

    def visit(path, step):
        if _is_passthrough(step):
            return
        children = _children(step, fitted=True)
        if children is not None:
            for name, child in children:
                visit(name if not path else f"{path}__{name}", child)
            return
        spent = getattr(step, "privacy_spent_", None)
        if isinstance(spent, PrivacyLedger):
            ledgers[path or type(step).__name__] = spent
            return
        replacement = _learns_without_guarantee(step)
        if replacement is not None:
            name = path or type(step).__name__
            warnings.warn(_leak_message(name, type(step).__name__, replacement),
                          PrivacyLeakWarning, stacklevel=3)
            ledgers[name] = PrivacyLedger([PrivacyEvent(f"{name} (not private)", math.inf, 0.0)])

    visit("", estimator)
    return ledgers


def privacy_spent(estimator, *, composition="basic"):
    """The composed :class:`~skprivreg.accounting.Guarantee` of a fitted estimator or pipeline.

    Every step's ledger (see :func:`privacy_ledgers`) composes with
    :func:`~skprivreg.accounting.compose_ledgers`: basic composition by
    default (each ledger keeps its own internal composition), typed (unlike
    relations are converted by group privacy, label-DP and feature-DP steps
    together raise :class:`~skprivreg.exceptions.CompositionError`). A step
    that learned without a guarantee makes the total infinite.

    Parameters
    ----------
    estimator : fitted estimator, Pipeline, or search
    composition : {'basic', 'gdp'}, default='basic'

    Returns
    -------
    Guarantee
        Iterates as ``(epsilon, delta)``; ``str()`` states notion and relation.
    """
    return compose_ledgers(list(privacy_ledgers(estimator).values()), composition)


class PrivatePipeline(Pipeline):
    """A :class:`~sklearn.pipeline.Pipeline` that refuses to leak quietly.

    When ``fit`` (or ``fit_transform``, ``fit_predict``) starts, before any
    step reads the data, every step that would learn from the data without a
    privacy guarantee (see :func:`leaking_steps`) is named in a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning` with its replacement;
    with ``strict=True`` the fit is refused with a
    :class:`~skprivreg.exceptions.ConfigurationError` instead, before any
    step is fitted and so before any budget is spent. The guard reads the
    steps' classes and parameters only.

    After ``fit``, ``privacy_spent_`` is the composed guarantee of all steps
    (:func:`privacy_spent`).

    Parameters
    ----------
    steps : list of (name, estimator)
        As for :class:`~sklearn.pipeline.Pipeline`.
    strict : bool, default=False
        Refuse leaking steps instead of warning.
    memory, verbose, transform_input
        As for :class:`~sklearn.pipeline.Pipeline`.
    """

    _parameter_constraints = {**Pipeline._parameter_constraints, "strict": ["boolean"]}

    def __init__(self, steps, *, strict=False, transform_input=None, memory=None, verbose=False):
        super().__init__(steps, transform_input=transform_input, memory=memory, verbose=verbose)
        self.strict = strict

    def _guard(self):
        leaks = leaking_steps(self)
        for path, cls, replacement in leaks:
            message = _leak_message(path, cls, replacement)
            if self.strict:
                raise ConfigurationError(message + " (strict=True: nothing was fitted.)")
            warnings.warn(message, PrivacyLeakWarning, stacklevel=4)

    def fit(self, X, y=None, **params):
        """Run the leak guard, then fit every step as :class:`~sklearn.pipeline.Pipeline` does.

        The guard reads only the steps' classes and parameters, before any
        step sees the data (see the class docstring).
        """
        self._guard()
        return super().fit(X, y, **params)

    def fit_transform(self, X, y=None, **params):
        """Run the leak guard, then fit and transform as :class:`~sklearn.pipeline.Pipeline` does.

        The guard reads only the steps' classes and parameters, before any
        step sees the data (see the class docstring).
        """
        self._guard()
        return super().fit_transform(X, y, **params)

    def fit_predict(self, X, y=None, **params):
        """Run the leak guard, then fit and predict as :class:`~sklearn.pipeline.Pipeline` does.

        The guard reads only the steps' classes and parameters, before any
        step sees the data (see the class docstring).
        """
        self._guard()
        return super().fit_predict(X, y, **params)

    @property
    def privacy_spent_(self):
        """The composed guarantee of the fitted steps (:func:`privacy_spent`)."""
        check_is_fitted(self)
        return privacy_spent(self)


def make_private_pipeline(*steps, strict=False, memory=None, verbose=False):
    """A :class:`PrivatePipeline` whose step names are made as by ``make_pipeline``.

    Parameters
    ----------
    *steps : estimators
    strict : bool, default=False
        Refuse steps that learn without a guarantee instead of warning.
    memory, verbose
        As for :func:`sklearn.pipeline.make_pipeline`.

    Returns
    -------
    PrivatePipeline
    """
    named = make_pipeline(*steps).steps
    return PrivatePipeline(named, strict=strict, memory=memory, verbose=verbose)
