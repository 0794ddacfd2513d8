"""Scalers for private pipelines: a declared-range map and a private standard scaler."""

import math
from functools import partial

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin

from .._blocks import as_float64_block, workspace, workspace_like
from .._compat import Interval, Real, StrOptions, check_is_fitted, fit_context, validate_data
from .._gram import (
    cache_blocked,
    check_finite_extremes,
    reduce_threaded,
    source_block_rows,
    threads_for,
)
from .._rows import (
    RowSource,
    add_tuples,
    as_dask_array,
    block_map,
    check_block_finite,
    check_dask_dtype,
    check_dask_samples,
    is_dask_collection,
    set_dask_feature_names,
)
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..bounds import (
    check_private_bound_feasible,
    check_x_range,
    data_norm_bound,
    private_norm_bound,
)
from ..mechanisms import (
    add_gaussian,
    bound_bins,
    counts_above,
    difference_at_most,
    gaussian_event,
    moment_sums,
    moment_sums_sensitivity,
    product_at_most,
    released_mean_variance,
)

__all__ = ["BoundedScaler", "PrivateStandardScaler", "to_unit_box"]


# ---------------------------------------------------------------------------
# Pure functions
# ---------------------------------------------------------------------------
def to_unit_box(X, low, high):
    """Clip each column to ``[low_j, high_j]`` and map it affinely onto ``[-1, 1]``.

    .. math::
        u_{ij} = 2\\,\\frac{\\min(\\max(x_{ij}, l_j), h_j) - l_j}{h_j - l_j} - 1
    """
    X = np.clip(np.asarray(X, dtype=np.float64), low, high)
    return 2.0 * (X - low) / (high - low) - 1.0


#: Ranges whose moments may be summed before scaling: half-widths in
#: ``[1e-150, sqrt(1e300 / n)]``, so no square, sum or scale overflows or
#: underflows.
_UNSCALED_SQUARE_LIMIT = 1e300


def unscaled_moments(low, high, n_samples):
    """True when the moments may be summed from the clipped rows and scaled once.

    Public facts only: ranges symmetric about 0 whose half-widths keep
    every square and sum finite (:data:`_UNSCALED_SQUARE_LIMIT`).
    """
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    if not np.all(low == -high):
        return False
    top, bottom = float(high.max()), float(high.min())
    return bottom >= 1e-150 and top * top * max(int(n_samples), 1) <= _UNSCALED_SQUARE_LIMIT


def _moment_block(X_block, _unused, *, low, high, check, symmetric):
    """Moment sums of one block mapped to the unit box, in one block-sized float64 buffer.

    ``u = clip((x - mid) / half, -1, 1)``, the map of :func:`to_unit_box`.
    ``check``: refuse NaN or infinity (the block's max and min show them).

    ``symmetric`` (:func:`unscaled_moments`, public facts) gives
    ``u = clip(x, low, high) / half``: the sums of the clipped rows are
    taken and scaled, three sweeps fewer. A block inside its ranges (its
    max and min) is used as stored, otherwise it is clipped in a buffer:
    the same values either way, so whether a block needed clipping changes
    no released bit. Otherwise each entry is mapped first; an entry far
    outside its range may overflow there, silently, to an infinity that
    the clip maps to 1. The block is read once, as float64
    (:func:`~skprivreg._blocks.as_float64_block`: a piece of a file is
    copied), before it is checked: what is checked is what is summed.
    """
    X = as_float64_block(X_block, scratch="scaler rows")
    if (check or symmetric) and X.size:
        top, bottom = float(X.max()), float(X.min())
        if check and not (np.isfinite(top) and np.isfinite(bottom)):
            check_block_finite(X)
    if symmetric:
        reach = float(high.min())
        if X.size and not (-reach <= bottom and top <= reach):
            X = np.clip(X, low, high, out=workspace_like("scaler mapped", X))
        S1, S2 = moment_sums(X, overwrite=False, scratch="scaler squares")
        inv = 1.0 / high
        return S1 * inv, S2 * (inv * inv)
    with np.errstate(over="ignore"):
        U = np.subtract(X, (high + low) / 2.0,
                        out=workspace_like("scaler mapped", X))  # a reused buffer (a piece)
        U *= 2.0 / (high - low)
    np.clip(U, -1.0, 1.0, out=U)
    return moment_sums(U, overwrite=True)


def _max_abs_counts_block(X_block, _unused, *, bins, check):
    if check:
        check_block_finite(X_block)
    # |X| and the row maxima in this thread's reused buffers (a fresh array
    # per piece costs page faults on Dask workers), sorted in place.
    X = as_float64_block(X_block, scratch="scaler rows")
    magnitudes = np.abs(X, out=workspace_like("scaler magnitudes", X))
    top = np.maximum.reduce(magnitudes, axis=1, out=workspace("scaler row maxima", len(X)))
    return (counts_above(top, bins, overwrite=True),)


def _max_abs_entry(X_block, _unused):
    """Largest ``|entry|`` of one block, from its max and min; NaN or infinity raises."""
    return check_finite_extremes(np.asarray(X_block))


def _validate_X(estimator, X, *, reset, allow_nan=False, finite_in_pass=False):
    """``validate_data`` for NumPy/pandas input; shape-only checks for Dask input.

    ``finite_in_pass``: float32 stays float32 and NaN or infinity is left to
    the first pass over the rows (which refuses it before any spend), so no
    whole-array copy or extra read is made.
    """
    if not is_dask_collection(X):
        if finite_in_pass:
            return validate_data(estimator, X, dtype=[np.float64, np.float32], reset=reset,
                                 ensure_all_finite=False)
        return validate_data(estimator, X, dtype=np.float64, reset=reset,
                             ensure_all_finite="allow-nan" if allow_nan else True)
    validate_data(estimator, X, skip_check_array=True, reset=reset)
    set_dask_feature_names(estimator, X, reset=reset)
    X = as_dask_array(X)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array for X, got {X.ndim}D.")
    if np.isnan(X.shape[0]):
        raise ValueError("Dask input needs known chunk sizes: call .compute_chunk_sizes() first.")
    check_dask_samples(X, estimator)
    check_dask_dtype("X", X.dtype)
    if finite_in_pass and X.dtype == np.float32:
        return X
    return X.astype(np.float64)


def _apply(X, function):
    """``function(X)`` on NumPy input, block by block on Dask input."""
    if is_dask_collection(X):
        return X.map_blocks(function, dtype=np.float64)
    return function(X)


# ---------------------------------------------------------------------------
# BoundedScaler
# ---------------------------------------------------------------------------
class BoundedScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Map declared per-column ranges onto ``[-1, 1]``; reads nothing but the shape.

    Each column :math:`j` is clipped to its declared range :math:`[l_j, h_j]`
    and mapped affinely onto :math:`[-1, 1]`:

    .. math::
        u_{ij} = 2\\,\\frac{\\min(\\max(x_{ij}, l_j), h_j) - l_j}{h_j - l_j} - 1 .

    Privacy. ``fit`` checks the input's type and shape and records the number
    of columns (and the column names of a data frame); no value is inspected
    (NaN passes through to ``transform``, as in
    :class:`~sklearn.preprocessing.MinMaxScaler`) and Dask input is never
    computed. It releases nothing about the data, so it spends nothing
    (``privacy_spent_`` is an empty ledger) and it can precede a private
    estimator in a pipeline without leaking. The transformed rows lie in
    :math:`[-1, 1]^d`, so their L2 norm is at most :math:`\\sqrt{d}`: declare
    ``x_bound=sqrt(d)`` (or ``x_range=(-1, 1)``) to the estimator that follows.

    Clipping. Values outside the declared range are clipped to it, silently:
    whether one record lies outside is a fact about that record. Count clipped
    values as the data curator with :mod:`skprivreg.diagnostics`, outside any
    release.

    Parameters
    ----------
    x_range : tuple or array-like
        Public per-column range: ``(low, high)`` with floats (the same range
        for every column) or arrays of shape ``(n_features,)``, or an array of
        shape ``(n_features, 2)``. It must come from outside the data (domain
        knowledge, a codebook), never from the data being protected.

    Attributes
    ----------
    data_min_, data_max_ : ndarray of shape (n_features,)
        The declared ranges (named as in :class:`sklearn.preprocessing.MinMaxScaler`;
        they are the declared ones, not read from the data).
    privacy_spent_ : PrivacyLedger
        Empty: nothing is released about the data.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, if X had string column names.

    See Also
    --------
    PrivateStandardScaler : Standardise with private means and variances.
    sklearn.preprocessing.MinMaxScaler : The non-private map from data ranges.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.preprocessing import BoundedScaler
    >>> BoundedScaler(x_range=(0, 10)).fit_transform(np.array([[0.0, 5.0], [10.0, 20.0]]))
    array([[-1.,  0.],
           [ 1.,  1.]])
    """

    _parameter_constraints = {"x_range": ["array-like", tuple, None]}

    def __init__(self, *, x_range=None):
        self.x_range = x_range

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Record the number of columns and check ``x_range`` (reads no value).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : object
        """
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)
        if is_dask_collection(X):
            _validate_X(self, X, reset=True)  # shape and dtype only, nothing computed
        else:
            # Type and shape checks as in every scikit-learn estimator; no value is
            # inspected (NaN passes through to transform) and no attribute depends on one.
            validate_data(self, X, reset=True, dtype=np.float64, ensure_all_finite=False)
        if self.x_range is None:
            raise ValueError(
                "BoundedScaler needs a declared x_range=(low, high): it reads no value of "
                "the data. To estimate ranges privately use PrivateStandardScaler."
            )
        self.data_min_, self.data_max_ = check_x_range(self.x_range, self.n_features_in_)
        self.privacy_spent_ = PrivacyLedger([])
        return self

    def transform(self, X):
        """Clip to the declared ranges and map onto ``[-1, 1]`` (NaN stays NaN)."""
        check_is_fitted(self)
        X = _validate_X(self, X, reset=False, allow_nan=True)
        return _apply(X, partial(to_unit_box, low=self.data_min_, high=self.data_max_))

    def inverse_transform(self, X):
        """Map ``[-1, 1]`` back onto the declared ranges."""
        check_is_fitted(self)
        X = _validate_X(self, X, reset=False, allow_nan=True)
        low, high = self.data_min_, self.data_max_
        return _apply(
            X, lambda U: (np.asarray(U, dtype=np.float64) + 1.0) * (high - low) / 2.0 + low
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        tags.input_tags.allow_nan = True
        return tags


# ---------------------------------------------------------------------------
# PrivateStandardScaler
# ---------------------------------------------------------------------------
class PrivateStandardScaler(
    DPEstimatorMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator
):
    """Standardise features with privately released means and variances.

    Each column is clipped to its range :math:`[l_j, h_j]` and mapped onto
    :math:`[-1, 1]` (:func:`to_unit_box`); the sums
    :math:`S_1 = \\sum_i u_i` and :math:`S_2 = \\sum_i u_i^2` are released
    together by one Gaussian mechanism of L2-sensitivity
    :math:`2\\sqrt{d}` (:func:`skprivreg.mechanisms.moment_sums_sensitivity`)
    with the analytic calibration of Balle & Wang (2018). Then, by
    post-processing (:func:`skprivreg.mechanisms.released_mean_variance`),
    :math:`\\hat m = \\mathrm{clip}(\\tilde S_1/n, -1, 1)`,
    :math:`\\hat v = \\mathrm{clip}(\\tilde S_2/n - \\hat m^2, \\sigma/n, 1)`,
    and on the original scale ``mean_ = mid + half * m``,
    ``var_ = half**2 * v``, ``scale_ = sqrt(var_)``.

    Guarantee: (epsilon, delta)-DP, full notion, replace-one neighbours
    (n public). Budget: all of (epsilon, delta) to the moments when
    ``x_range`` is declared; otherwise ``bounds_budget * epsilon`` (pure DP)
    to a private bound :math:`B` on :math:`\\max_j |x_{ij}|` (then
    ``x_range = (-B, B)`` for every column) and the rest with all of delta
    to the moments; basic composition.

    Bounds. A declared ``x_range`` is used as given. A missing one is
    estimated privately with ``bounds_budget * epsilon`` when n allows (else
    :class:`~skprivreg.exceptions.ConfigurationError` before any spend, naming
    the n needed); ``bounds='data'`` reads it from the data (not private: an
    infinite-epsilon event and a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`). ``epsilon=np.inf``
    (non-private test mode) releases exact moments of the clipped data.

    Clipping. ``fit`` clips to the range (documented, never signalled). With
    ``clip=True`` (default) ``transform`` clips to the same range first, so
    every output column lies in ``[(l_j - mean_j)/scale_j, (h_j - mean_j)/scale_j]``,
    a public interval (``output_range_``) to declare to the estimator that follows.

    Parameters
    ----------
    epsilon : float, default=1.0
    delta : float, default=1e-6
        Choose it well below 1/n_samples.
    x_range : tuple or array-like or None, default=None
        Public per-column range ``(low, high)`` (floats or arrays of shape
        ``(n_features,)``) or an array of shape ``(n_features, 2)``.
    bounds : {'private', 'data'}, default='private'
        How a missing ``x_range`` is found.
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on a missing range.
    clip : bool, default=True
        Clip to the range in ``transform`` too.
    accountant : BudgetAccountant or None, default=None
    random_state : ignored for noise
        Noise always comes from fresh OS entropy.
    verbose : int, default=0
        ``1`` or more: one line per pass over the rows (the pass's name and
        ``n``). Lines carry public facts only (pass number, ``n``), never a
        value computed from the data.

    Attributes
    ----------
    mean_, var_, scale_ : ndarray of shape (n_features,)
        Released (noisy) means, variances and standard deviations.
    x_range_ : tuple of ndarray
        The range used (declared or privately released).
    output_range_ : ndarray of shape (n_features, 2)
        Public range of the transformed columns (with ``clip=True``).
    n_samples_seen_ : int
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str, if X had string column names.

    See Also
    --------
    BoundedScaler : Map declared ranges onto ``[-1, 1]``; spends nothing.
    sklearn.preprocessing.StandardScaler : The non-private standard scaler.

    References
    ----------
    B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
    differential privacy: analytical calibration and optimal denoising",
    ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.preprocessing import PrivateStandardScaler
    >>> X = np.random.default_rng(0).uniform(0, 10, size=(5000, 2))
    >>> scaler = PrivateStandardScaler(epsilon=1.0, x_range=(0, 10)).fit(X)
    >>> np.round(scaler.mean_, 0)
    array([5., 5.])
    """

    _renamed_parameters = {"feature_bounds": "x_range"}

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "x_range": ["array-like", tuple, None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "clip": ["boolean"],
        "verbose": ["verbose"],
    }

    def __init__(self, *, epsilon=1.0, delta=1e-6, x_range=None, bounds="private",
                 bounds_budget=0.1, clip=True, accountant=None, random_state=None,
                 verbose=0):
        self.epsilon = epsilon
        self.delta = delta
        self.x_range = x_range
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.clip = clip
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    def _plan(self, n_features, private):
        """``(ledger, bound epsilon or None, moments event)`` from public facts only."""
        events = []
        bound_epsilon = None
        moments_epsilon = self.epsilon
        if self.x_range is None and private:
            if self.bounds == "private":
                bound_epsilon = product_at_most(self.bounds_budget, self.epsilon)
                moments_epsilon = difference_at_most(self.epsilon, bound_epsilon)
                events.append(PrivacyEvent("x_range", bound_epsilon, 0.0))
            else:
                events.append(PrivacyEvent("x_range", math.inf, 0.0))
        moments = gaussian_event(
            "moments", moment_sums_sensitivity(n_features), moments_epsilon, self.delta
        )
        events.append(moments)
        return PrivacyLedger(events), bound_epsilon, moments

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Release private means and variances of ``X``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : object
        """
        self._reset()
        # Shapes and dtypes only: the first pass over the rows refuses NaN or
        # infinity, before any noise is drawn.
        X = _validate_X(self, X, reset=True, finite_in_pass=True)
        private = self._validate_privacy_params()
        n, d = X.shape
        declared = check_x_range(self.x_range, d)
        ledger, bound_epsilon, moments = self._plan(d, private)
        if bound_epsilon is not None:
            check_private_bound_feasible(n, bound_epsilon, "x_range")
        self._check_budget(ledger)
        rngs = self._secret_rngs("bounds", "noise", spend=ledger)
        # One pass per release, each block read in cache-sized pieces shared
        # by threads; the first pass checks for NaN or infinity.
        source = RowSource(X, raw_blocks=True, verbose=self.verbose, name=type(self).__name__,
                           block_rows=source_block_rows(2 * d))
        n_threads = threads_for(source)

        check = True
        if declared is not None:
            low, high = declared
        elif self.bounds == "private" and private:
            bins = bound_bins()
            block = cache_blocked(partial(_max_abs_counts_block, bins=bins, check=True), d)
            (counts,) = source.reduce(block, add_tuples, label="x_range counts")
            bound, _ = private_norm_bound(counts, n, bound_epsilon, rngs["bounds"], name="x_range")
            low, high = np.full(d, -bound), np.full(d, bound)
            check = not source.in_memory  # a file may have changed since the first pass
        else:
            # max and min of each block (no temporary); NaN or infinity raises
            block = block_map(_max_abs_entry, max)
            maximum = source.reduce(block, max, label="x_range maximum")
            bound, _ = data_norm_bound(float(maximum), name="x_range")
            low, high = np.full(d, -bound), np.full(d, bound)
            check = not source.in_memory  # a file may have changed since the first pass

        block = cache_blocked(partial(_moment_block, low=low, high=high, check=check,
                                      symmetric=unscaled_moments(low, high, n)), 2 * d, n_threads)
        S1, S2 = reduce_threaded(source, block, add_tuples, label="moments", n_threads=n_threads)
        noisy = add_gaussian(np.concatenate([S1, S2]), moments.sigma, rngs["noise"])
        self._settle(ledger)
        mean_u, var_u = released_mean_variance(noisy[:d], noisy[d:], n, moments.sigma)
        mid, half = (high + low) / 2.0, (high - low) / 2.0
        self.mean_ = mid + half * mean_u
        with np.errstate(over="ignore"):  # a range beyond 1e154 has an infinite variance
            self.var_ = half**2 * var_u
        self.scale_ = np.sqrt(self.var_)
        self.x_range_ = (low, high)
        self.output_range_ = np.column_stack(
            [(low - self.mean_) / self.scale_, (high - self.mean_) / self.scale_]
        )
        self.n_samples_seen_ = int(n)
        return self

    def transform(self, X):
        """Standardise with the released moments (clipping first if ``clip``)."""
        check_is_fitted(self)
        X = _validate_X(self, X, reset=False)
        low, high = self.x_range_
        mean, scale, clip = self.mean_, self.scale_, self.clip

        def standardise(block):
            block = np.asarray(block, dtype=np.float64)
            if clip:
                block = np.clip(block, low, high)
            return (block - mean) / scale

        return _apply(X, standardise)

    def inverse_transform(self, X):
        """Undo the standardisation (clipped values stay clipped)."""
        check_is_fitted(self)
        X = _validate_X(self, X, reset=False)
        mean, scale = self.mean_, self.scale_
        return _apply(X, lambda Z: np.asarray(Z, dtype=np.float64) * scale + mean)
