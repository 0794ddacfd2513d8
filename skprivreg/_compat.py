"""The one place where skprivreg touches private scikit-learn names.

scikit-learn keeps its parameter-validation classes and ``_fit_context`` in
private modules. Everything else in skprivreg imports them from here, so a
scikit-learn release that moves them breaks one file, not the package
(diffprivlib broke on nearly every release by importing private symbols all
over and subclassing concrete estimators).
"""

from numbers import Integral, Real

from sklearn.utils.validation import check_is_fitted, validate_data

try:  # scikit-learn >= 1.3
    from sklearn.utils._param_validation import (
        HasMethods,
        Interval,
        Options,
        StrOptions,
    )
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "skprivreg needs scikit-learn >= 1.6 (parameter validation API)."
    ) from exc

try:
    from sklearn.base import _fit_context as fit_context
except ImportError:  # pragma: no cover - fallback for a release that moves it

    def fit_context(prefer_skip_nested_validation):
        def decorator(fit_method):
            def wrapper(estimator, *args, **kwargs):
                estimator._validate_params()
                return fit_method(estimator, *args, **kwargs)

            wrapper.__name__ = fit_method.__name__
            wrapper.__doc__ = fit_method.__doc__
            return wrapper

        return decorator


def without_fit_callbacks(estimator):
    """Detach the fit callbacks (scikit-learn >= 1.9) set on ``estimator`` itself.

    ``clone`` shares them by reference; a fresh empty list on the clone leaves
    the original's untouched. A no-op where callbacks do not exist.
    """
    if getattr(estimator, "_skl_callbacks", None):
        estimator._skl_callbacks = []
    return estimator


def validate_params(estimator):
    """Check ``estimator``'s parameters against its ``_parameter_constraints``.

    What ``fit`` does first (scikit-learn's ``_validate_params``), for entry
    points that are not ``fit``: a planner, ``fit_aggregated``.
    """
    estimator._validate_params()
    return estimator


__all__ = [
    "HasMethods",
    "Integral",
    "Interval",
    "Options",
    "Real",
    "StrOptions",
    "check_is_fitted",
    "fit_context",
    "frame_like",
    "validate_data",
    "validate_params",
    "without_fit_callbacks",
]


def frame_like(values, like, columns):
    """``values`` (a 2-D ndarray) as a data frame of ``like``'s library, named ``columns``.

    Built by scikit-learn's ``set_output`` container adapters (pandas,
    polars) with a default index (``like``'s index is not carried over),
    without copying ``values`` where the library allows. Returns ``None``
    for a container scikit-learn has no adapter for.
    """
    try:
        from sklearn.utils._set_output import _get_adapter_from_container

        adapter = _get_adapter_from_container(like)
    except (ImportError, ValueError):  # pragma: no cover - a moved API or another library
        return None
    return adapter.create_container(values, None, columns=list(columns), inplace=True)
