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

import contextlib
import functools
import math
import numbers
import warnings

import joblib
import numpy as np
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor, make_column_selector
from sklearn.feature_extraction import FeatureHasher
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.kernel_approximation import PolynomialCountSketch, RBFSampler
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import (
    Binarizer,
    FunctionTransformer,
    KBinsDiscretizer,
    MaxAbsScaler,
    MinMaxScaler,
    Normalizer,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    PowerTransformer,
    QuantileTransformer,
    RobustScaler,
    SplineTransformer,
    StandardScaler,
)
from sklearn.random_projection import GaussianRandomProjection, SparseRandomProjection
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if

from ._compat import check_is_fitted
from .accounting import DetachedAccountant, PrivacyEvent, PrivacyLedger, compose_ledgers
from .base import DPEstimatorMixin, accountant_params
from .exceptions import ConfigurationError, PrivacyLeakWarning
from .preprocessing._rowwise import ROWWISE_MARK

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
_BOUNDED = "skprivreg.preprocessing.BoundedScaler(x_range=...) with declared ranges"
_FUNCTIONS = (
    "func and inverse_func that are None, element-wise ufuncs of NumPy or scipy.special "
    "(with no keyword but dtype and casting: out= keeps every row in the step's "
    "parameters), or functions declared with skprivreg.preprocessing.rowwise (a function "
    "of the whole batch reads other rows)"
)

#: scikit-learn classes whose fit learns from the data, or whose refused form is
#: used -> the replacement to suggest. Matched on the exact class: a subclass may
#: override anything and gets the generic replacement.
_REPLACEMENTS = {
    StandardScaler: _SCALER_REPLACEMENT,
    RobustScaler: _SCALER_REPLACEMENT,
    MinMaxScaler: _BOUNDED,
    MaxAbsScaler: _BOUNDED,
    QuantileTransformer: "skprivreg.preprocessing.BoundedScaler(x_range=...)",
    PowerTransformer: "a FunctionTransformer with a fixed function (np.log1p, ...)",
    OneHotEncoder: (
        "OneHotEncoder(categories=<declared list>, handle_unknown='ignore') with "
        "drop=None, min_frequency=None and max_categories=None"
    ),
    OrdinalEncoder: (
        "OrdinalEncoder(categories=<declared list>, handle_unknown='use_encoded_value', "
        "unknown_value=-1) with min_frequency=None and max_categories=None (an unknown_value "
        "of NaN makes a finite record non-finite)"
    ),
    SimpleImputer: (
        "SimpleImputer(strategy='constant', fill_value=..., keep_empty_features=True, "
        "add_indicator=False) (otherwise a column without observed values is dropped with a "
        "warning, and the indicator columns depend on which values are missing)"
    ),
    SplineTransformer: (
        "SplineTransformer(knots=<declared array>) with extrapolation other than 'error'"
    ),
    KBinsDiscretizer: "a FunctionTransformer with declared bin edges (np.digitize)",
    MissingIndicator: "MissingIndicator(features='all')",
    GaussianRandomProjection: (
        "GaussianRandomProjection(n_components=<int>, random_state=<int>)"
    ),
    SparseRandomProjection: "SparseRandomProjection(n_components=<int>, random_state=<int>)",
    RBFSampler: "RBFSampler(gamma=<number>, random_state=<int>)",
    PolynomialCountSketch: "PolynomialCountSketch(random_state=<int>)",
    TransformedTargetRegressor: (
        "a skprivreg estimator with a declared y_bound, or TransformedTargetRegressor(..., "
        "check_inverse=False) (the inverse check evaluates the target transform on labels "
        "and warns on a mismatch)"
    ),
    GridSearchCV: "skprivreg.model_selection.PrivateGridSearchCV",
    RandomizedSearchCV: "skprivreg.model_selection.PrivateGridSearchCV",
}
_GENERIC_REPLACEMENT = (
    "a step with declared parameters that reads nothing from the data, or a skprivreg "
    "transformer (BoundedScaler, PrivateStandardScaler)"
)

#: Stateless scikit-learn transformers: fit reads at most the shape.
_STATELESS = (Binarizer, Normalizer, PolynomialFeatures, FeatureHasher)


def _is_passthrough(step):
    return step is None or (isinstance(step, str) and step in ("passthrough", "drop"))


def _is_skprivreg(step):
    return type(step).__module__.split(".")[0] == "skprivreg"


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_nan(value):
    return isinstance(value, numbers.Real) and math.isnan(value)


def _library_ufunc(func):
    """Whether ``func`` is one of NumPy's or SciPy's (``scipy.special``) own ufuncs.

    Any Python function becomes a ufunc through :func:`numpy.frompyfunc` or
    :func:`numpy.vectorize`-like tools, and may keep state from one row to the
    next: only the libraries' own element-wise ufuncs are known to map each
    entry on its own.
    """
    name = getattr(func, "__name__", None)
    if not isinstance(name, str):
        return False
    if getattr(np, name, None) is func:
        return True
    try:
        import scipy.special
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return getattr(scipy.special, name, None) is func


#: Keywords an element-wise ufunc may be called with in a pipeline. ``out`` writes
#: every row into an array that is a parameter of the step (and is pickled with
#: it); ``where`` leaves entries of the output unwritten (whatever memory held).
_UFUNC_KEYWORDS = frozenset({"dtype", "casting"})


def _declared_rowwise(func, keywords=None):
    """Whether ``func`` maps rows on their own: ``None``, an element-wise ufunc of NumPy
    or ``scipy.special`` called with ``keywords`` among :data:`_UFUNC_KEYWORDS`, a
    function marked by :func:`~skprivreg.preprocessing.rowwise` (the mark covers its
    keywords), or a partial of one of these (its keywords count too)."""
    keywords = keywords or {}
    if func is None or getattr(func, ROWWISE_MARK, False) is True:
        return True
    if isinstance(func, np.ufunc):
        # a generalized ufunc (matmul) combines rows; another's may keep state
        return (func.signature is None and _library_ufunc(func)
                and set(keywords) <= _UFUNC_KEYWORDS)
    if isinstance(func, functools.partial):
        return _declared_rowwise(func.func, {**func.keywords, **keywords})
    return False


def _function_transformer(params):
    funcs = ((params.get("func"), params.get("kw_args")),
             (params.get("inverse_func"), params.get("inv_kw_args")))
    if not all(_declared_rowwise(func, keywords) for func, keywords in funcs):
        return f"a FunctionTransformer with {_FUNCTIONS}"
    funcs = [func for func, _ in funcs]
    # With both functions, check_inverse=True evaluates them on rows of the data
    # and warns on a mismatch: a warning one record can decide.
    if None not in funcs and params.get("check_inverse", True):
        return "FunctionTransformer(..., check_inverse=False)"
    return None


def _one_hot_encoder(params):
    # With a dropped category, an unknown one warns when it is met: a warning one
    # record can decide.
    return (
        not isinstance(params.get("categories"), str)
        and params.get("handle_unknown") in ("ignore", "infrequent_if_exist")
        and params.get("drop") is None
        and params.get("min_frequency") is None
        and params.get("max_categories") is None
    )


def _ordinal_encoder(params):
    # An unknown_value of NaN turns a finite record with an unknown category into NaN.
    return (
        not isinstance(params.get("categories"), str)
        and params.get("handle_unknown") == "use_encoded_value"
        and not _is_nan(params.get("unknown_value"))
        and params.get("min_frequency") is None
        and params.get("max_categories") is None
    )


#: Exact class -> predicate on its parameters: True when the step is data-independent.
_ACCEPTED_WHEN = {
    OneHotEncoder: _one_hot_encoder,
    OrdinalEncoder: _ordinal_encoder,
    # A column without observed values is dropped (with a warning) unless kept, and
    # the indicator columns are those with a missing value.
    SimpleImputer: lambda p: (p.get("strategy") == "constant"
                              and p.get("keep_empty_features") is True
                              and not p.get("add_indicator")),
    MissingIndicator: lambda p: p.get("features") == "all",
    # extrapolation='error' raises on a value outside the knots: one record decides.
    SplineTransformer: lambda p: (not isinstance(p.get("knots"), str)
                                  and p.get("extrapolation") != "error"),
    # Random feature maps: fit reads the shape only, the draw is fixed by an int seed.
    GaussianRandomProjection: lambda p: (_is_int(p.get("n_components"))
                                         and _is_int(p.get("random_state"))),
    SparseRandomProjection: lambda p: (_is_int(p.get("n_components"))
                                       and _is_int(p.get("random_state"))),
    RBFSampler: lambda p: (isinstance(p.get("gamma"), numbers.Real)
                           and not isinstance(p.get("gamma"), bool)
                           and _is_int(p.get("random_state"))),
    PolynomialCountSketch: lambda p: _is_int(p.get("random_state")),
}


def _learns_without_guarantee(step):
    """``None`` if ``step`` is data-independent or private; else the replacement to suggest.

    Reads the class and parameters only (public facts). Classes are matched
    exactly: a subclass of an accepted class may override anything.
    """
    if _is_passthrough(step) or _is_skprivreg(step):
        return None
    cls = type(step)
    if cls in _STATELESS:
        return None
    params = step.get_params(deep=False) if hasattr(step, "get_params") else {}
    if cls is FunctionTransformer:
        return _function_transformer(params)
    if cls in _ACCEPTED_WHEN:
        return None if _ACCEPTED_WHEN[cls](params) else _REPLACEMENTS[cls]
    return _REPLACEMENTS.get(cls, _GENERIC_REPLACEMENT)


def _columns_read_no_values(columns):
    """Whether a ColumnTransformer column specification selects without reading values.

    Names, indices, slices, boolean masks (and lists or arrays of them) pass, and
    ``make_column_selector(pattern=...)`` without dtypes (the dtypes a reader infers
    can depend on the values); any other callable may read the values.
    """
    if type(columns) is make_column_selector:
        return (columns.pattern is not None and columns.dtype_include is None
                and columns.dtype_exclude is None)
    if isinstance(columns, (str, numbers.Integral, slice)):
        return True
    array_like = isinstance(columns, (list, tuple)) or hasattr(columns, "__array__")
    if callable(columns) or not array_like:
        return False
    values = np.asarray(columns, dtype=object).ravel()
    return all(isinstance(v, (str, numbers.Integral, np.bool_)) for v in values)


def _own_leaks(step):
    """Replacements for what a composite decides from the data by its own parameters."""
    found = []
    if type(step) in (ColumnTransformer, FeatureUnion) and step.n_jobs not in (None, 1):
        found.append(
            f"{type(step).__name__}(..., n_jobs=None) (worker processes do not inherit the "
            "pipeline's floating-point settings, and print the warnings of the steps)"
        )
    if type(step) is ColumnTransformer:
        if step.sparse_threshold != 0:
            found.append(
                "ColumnTransformer(..., sparse_threshold=0) (with a nonzero threshold the "
                "output is sparse or dense depending on the density of the data)"
            )
        for name, _, columns in step.transformers:
            if not _columns_read_no_values(columns):
                found.append(
                    f"a ColumnTransformer whose columns for {name!r} are names, indices, "
                    "slices or boolean masks, or make_column_selector(pattern=...) without "
                    "dtype_include and dtype_exclude (a callable may read the values, and "
                    "inferred dtypes can depend on them)"
                )
    elif type(step) is TransformedTargetRegressor:
        transforms = (step.transformer, step.func, step.inverse_func)
        if step.check_inverse and any(t is not None for t in transforms):
            found.append(_REPLACEMENTS[TransformedTargetRegressor])
    return found


def _children(step, fitted):
    """``[(name, child)]`` of a composite estimator, ``None`` for a leaf.

    Composites are matched on their exact class: a subclass may combine its
    children differently, and is checked as a leaf.
    """
    cls = type(step)
    if cls is Pipeline or cls is PrivatePipeline:
        return list(step.steps)
    if cls is FeatureUnion:
        return list(step.transformer_list)
    if cls is ColumnTransformer:
        if fitted and hasattr(step, "transformers_"):
            return [(name, trans) for name, trans, _ in step.transformers_]
        children = [(name, trans) for name, trans, _ in step.transformers]
        return children + [("remainder", step.remainder)]
    if cls is TransformedTargetRegressor:
        regressor = step.regressor_ if fitted and hasattr(step, "regressor_") else step.regressor
        # regressor=None is scikit-learn's LinearRegression, which is not private.
        children = [("regressor", LinearRegression() if regressor is None else regressor)]
        if step.transformer is not None:
            fitted_transformer = fitted and hasattr(step, "transformer_")
            children.append(("transformer",
                             step.transformer_ if fitted_transformer else step.transformer))
        elif step.func is not None or step.inverse_func is not None:
            # func/inverse_func run in a FunctionTransformer; the inverse check is the
            # target transformer's own (see _own_leaks).
            children.append(("transformer", FunctionTransformer(
                func=step.func, inverse_func=step.inverse_func, check_inverse=False)))
        return children
    return None


def leaking_steps(estimator):
    """``[(path, class name, replacement)]`` of the steps that would learn without a guarantee.

    A static check of classes and parameters (public facts), for use before
    ``fit``. Nested pipelines, column transformers, feature unions and
    target transformers are searched, and their own parameters checked. A
    step before the private estimator must be a fixed row-wise function: its
    fitted state and output width may not depend on the data, and it may
    not warn or raise depending on one record's value. Classes are matched
    exactly (a subclass is refused). These pass:

    - skprivreg estimators, ``'passthrough'`` and ``'drop'``;
    - ``FunctionTransformer`` whose ``func`` and ``inverse_func`` are
      ``None``, element-wise NumPy ufuncs, functions declared with
      :func:`~skprivreg.preprocessing.rowwise` or ``functools.partial`` of
      those, without an inverse check (``check_inverse=False`` or one
      function only);
    - ``OneHotEncoder`` with declared categories that never raises or warns
      on an unknown one (``handle_unknown='ignore'``, ``drop=None``, no
      ``min_frequency`` or ``max_categories``);
    - ``OrdinalEncoder`` with declared categories,
      ``handle_unknown='use_encoded_value'`` and an ``unknown_value`` other
      than NaN;
    - ``SimpleImputer(strategy='constant', keep_empty_features=True,
      add_indicator=False)``, ``MissingIndicator(features='all')``;
    - ``SplineTransformer`` with declared knots and an extrapolation other
      than ``'error'``;
    - ``PolynomialFeatures``, ``Normalizer``, ``Binarizer``,
      ``FeatureHasher``;
    - ``GaussianRandomProjection`` and ``SparseRandomProjection`` with int
      ``n_components`` and ``random_state``, ``RBFSampler`` with a numeric
      ``gamma`` and an int ``random_state``, ``PolynomialCountSketch`` with
      an int ``random_state``;
    - ``ColumnTransformer`` with ``sparse_threshold=0`` whose columns are
      names, indices, slices or boolean masks, or
      ``make_column_selector(pattern=...)`` without dtypes;
      ``ColumnTransformer`` and ``FeatureUnion`` with ``n_jobs=None``;
    - ``TransformedTargetRegressor`` with ``check_inverse=False`` (or no
      target transform), and a private regressor.

    Element-wise functions must be finite on the data's domain (clip first):
    a non-finite value they produce is refused as bad input by the private
    estimator, before any budget is spent.
    """
    found = []

    def visit(path, step):
        children = _children(step, fitted=False)
        if children is not None:
            for replacement in _own_leaks(step):
                found.append((path, type(step).__name__, replacement))
            for name, child in children:
                visit(f"{path}{name}" if not path else f"{path}__{name}", child)
            return
        replacement = _learns_without_guarantee(step)
        if replacement is not None:
            found.append((path, type(step).__name__, replacement))

    visit("", estimator)
    return found


def private_steps(estimator, fitted=False):
    """``[(path, step)]`` of the private steps (``DPEstimatorMixin``) of ``estimator``.

    Nested pipelines, column transformers, feature unions and target
    transformers are searched, as by :func:`leaking_steps`. ``fitted``: the
    steps as fitted (the clones scikit-learn fits inside a
    ``ColumnTransformer`` or with ``memory``), where there are any.
    """
    found = []

    def visit(path, step):
        if isinstance(step, DPEstimatorMixin):
            found.append((path or type(step).__name__, step))
        children = _children(step, fitted=fitted)
        for name, child in children or ():
            visit(f"{path}__{name}" if path else name, child)

    visit("", estimator)
    return found


def _ledgers(estimator):
    return [step.__dict__["privacy_spent_"] for _, step in private_steps(estimator, fitted=True)
            if "privacy_spent_" in step.__dict__]


def _pipelines(estimator):
    """``estimator`` and every ``Pipeline`` nested in it (as given and as fitted)."""
    found = {}

    def visit(step):
        if isinstance(step, Pipeline):
            found.setdefault(id(step), step)
        for fitted in (False, True):
            for _, child in _children(step, fitted=fitted) or ():
                visit(child)

    visit(estimator)
    return list(found.values())


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
            if _own_leaks(step):
                leak(path, step, _own_leaks(step)[0])
            for name, child in children:
                visit(name if not path else f"{path}__{name}", child)
            return
        spent = getattr(step, "privacy_spent_", None)
        if isinstance(spent, PrivacyLedger):
            ledgers[path or type(step).__name__] = spent
            return
        replacement = _learns_without_guarantee(step)
        if replacement is not None:
            leak(path, step, replacement)

    def leak(path, step, replacement):
        name = path or type(step).__name__
        warnings.warn(_leak_message(name, type(step).__name__, replacement),
                      PrivacyLeakWarning, stacklevel=4)
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


def _final_step_has(*methods):
    """``available_if`` check: the last step is ``'passthrough'`` or has one of
    ``methods`` (as :class:`~sklearn.pipeline.Pipeline` offers ``fit_predict``
    and ``fit_transform`` only then)."""

    def check(pipeline):
        final = pipeline.steps[-1][1]
        return final in (None, "passthrough") or any(hasattr(final, m) for m in methods)

    return check


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

    The steps are fitted with NumPy's floating-point warnings off
    (``np.errstate(all='ignore')``): whether an element-wise step overflows
    or leaves its domain (``np.log1p`` of a value below -1, a polynomial or
    spline feature of a huge value) is a fact about one record. Such a step
    produces NaN or infinity instead, which the private estimator refuses as
    bad input before any budget is spent, as it refuses NaN in the raw data.
    So the functions must be finite on the data's domain: clip first, with
    :class:`~skprivreg.preprocessing.BoundedScaler` and declared ranges.

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

    Attributes
    ----------
    privacy_spent_ : Guarantee
        The composed guarantee of the fitted steps, by basic composition
        (:func:`privacy_spent`); iterates as ``(epsilon, delta)``. Infinite
        when a step learned without a guarantee.
    named_steps : :class:`~sklearn.utils.Bunch`
        The steps by name, as for :class:`~sklearn.pipeline.Pipeline`.
    n_features_in_ : int
        Number of features seen by the first step during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen by the first step during ``fit``; only when
        it records them.

    See Also
    --------
    skprivreg.pipeline.make_private_pipeline : Build a PrivatePipeline from
        unnamed steps.
    skprivreg.pipeline.privacy_spent : The composed guarantee of any fitted
        estimator or pipeline.
    skprivreg.pipeline.leaking_steps : The steps the guard names, with their
        replacements.
    sklearn.pipeline.Pipeline : The pipeline this class extends.
    skprivreg.preprocessing.BoundedScaler : A data-independent scaler for the
        steps before the private estimator.

    References
    ----------
    C. Dwork and A. Roth, "The algorithmic foundations of differential
    privacy", Foundations and Trends in Theoretical Computer Science 9(3-4),
    2014 (basic composition, Sec. 3.5).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skprivreg import AdaSSPRegressor, BoundedScaler
    >>> from skprivreg.pipeline import PrivatePipeline
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(20000, 3))
    >>> y = X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=20000)
    >>> pipe = PrivatePipeline([
    ...     ("scale", BoundedScaler(x_range=(-1.0, 1.0))),
    ...     ("fit", AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=6.5)),
    ... ]).fit(X, y)
    >>> pipe.predict(X[:2]).shape
    (2,)
    >>> print(pipe.privacy_spent_)
    (1, 1e-06)-DP, full notion, replace-one neighbours

    A step that learns without a guarantee is refused before anything is
    fitted with ``strict=True`` (and named in a warning otherwise):

    >>> PrivatePipeline([("scale", StandardScaler()),
    ...                  ("fit", AdaSSPRegressor(x_bound=2.0, y_bound=6.5))],
    ...                 strict=True).fit(X, y)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    skprivreg.exceptions.ConfigurationError: Step 'scale' (StandardScaler) learns ...
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

    @contextlib.contextmanager
    def _cached_steps_keep_accountants(self):
        """With ``memory``, a cache hit hands back a fitted step as loaded from its pickle,
        holding a :class:`~skprivreg.accounting.DetachedAccountant` (its release was
        charged when it was first fitted). The step then gets back the accountants it
        was given, so its later fits (of clones) are charged to them again."""
        held = [(index, key, value) for index, (_, step) in enumerate(self.steps)
                for key, value in accountant_params(step).items()
                if value is not None and not isinstance(value, DetachedAccountant)]
        yield
        for index, key, value in held:
            step = self.steps[index][1]
            if isinstance(accountant_params(step).get(key), DetachedAccountant):
                step.set_params(**{key: value})

    @contextlib.contextmanager
    def _fitting(self):
        """The context every fitting method runs its steps in (see the class docstring)."""
        with np.errstate(all="ignore"), self._cached_steps_keep_accountants(), \
                self._quiet_memory(), self._whole_or_unfitted():
            yield

    @contextlib.contextmanager
    def _whole_or_unfitted(self):
        """A refit that fails after a private step released something leaves no private
        step with its previous model: a step refused before its own spend gets its
        previous attributes back (:class:`~skprivreg.base.DPEstimatorMixin`), which
        beside an earlier step refitted on the new rows would predict silently from
        a mixed model. Those steps are reset; the steps that spent keep their ledger.

        The fitted steps are compared, not the templates: scikit-learn fits
        clones of the steps of a ``ColumnTransformer`` (and of every
        transformer when ``memory`` is set), which replace the previous
        fitted clones. A step spent in this fit when its ledger is one that
        no step held before."""
        held = {id(ledger): ledger for ledger in _ledgers(self)}  # kept alive: ids stay unique
        try:
            yield
        except BaseException:
            steps = [step for _, step in private_steps(self, fitted=True)]
            spent = [step.__dict__.get("privacy_spent_") is not None
                     and id(step.__dict__["privacy_spent_"]) not in held for step in steps]
            if any(spent):
                for step, its_own in zip(steps, spent):
                    if not its_own:
                        step._reset()
            raise

    @contextlib.contextmanager
    def _quiet_memory(self):
        """A ``joblib.Memory`` given as ``memory`` prints each call it computes, with
        the rows and labels in it (``verbose=1`` is joblib's default): this pipeline and
        every pipeline nested in it run with a copy that prints nothing (the same cache)."""
        # The originals are kept here, not on the pipelines: a nested PrivatePipeline
        # quiets (and restores) its own memory again inside this block.
        saved = []
        try:
            for pipe in _pipelines(self):
                memory = pipe.memory
                if isinstance(memory, joblib.Memory):
                    saved.append((pipe, memory))
                    pipe.memory = joblib.Memory(
                        location=memory.location, backend=memory.backend,
                        mmap_mode=memory.mmap_mode, compress=memory.compress, verbose=0,
                        backend_options=memory.backend_options)
            yield
        finally:
            for pipe, memory in reversed(saved):
                pipe.memory = memory

    def fit(self, X, y=None, **params):
        """Run the leak guard, then fit every step as :class:`~sklearn.pipeline.Pipeline` does.

        The guard reads only the steps' classes and parameters, before any
        step sees the data; the steps run without floating-point warnings
        (see the class docstring).
        """
        self._guard()
        with self._fitting():
            return super().fit(X, y, **params)

    @available_if(_final_step_has("fit_transform", "transform"))
    def fit_transform(self, X, y=None, **params):
        """Run the leak guard, then fit and transform as :class:`~sklearn.pipeline.Pipeline` does.

        The guard reads only the steps' classes and parameters, before any
        step sees the data; the steps run without floating-point warnings
        (see the class docstring).
        """
        self._guard()
        with self._fitting():
            return super().fit_transform(X, y, **params)

    @available_if(_final_step_has("fit_predict"))
    def fit_predict(self, X, y=None, **params):
        """Run the leak guard, then fit and predict as :class:`~sklearn.pipeline.Pipeline` does.

        The guard reads only the steps' classes and parameters, before any
        step sees the data; the steps run without floating-point warnings
        (see the class docstring).
        """
        self._guard()
        with self._fitting():
            return super().fit_predict(X, y, **params)

    @property
    def privacy_spent_(self):
        """The composed guarantee of the fitted steps (:func:`privacy_spent`)."""
        check_is_fitted(self)
        return privacy_spent(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Pipeline's tags follow its first and last steps; a private step anywhere
        # draws fresh noise in every fit, so refits of the pipeline differ.
        tags.non_deterministic = tags.non_deterministic or any(
            get_tags(step).non_deterministic
            for _, step in self.steps if step is not None and not isinstance(step, str)
        )
        return tags


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
