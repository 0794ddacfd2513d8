"""Baseline: private top-s marginal screening (report-noisy-max on correlations)."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin

from .._compat import Interval, StrOptions, check_is_fitted, fit_context
from .._random import secret_generators
from .._rows import (
    RowSource,
    add_tuples,
    is_dask_collection,
    read_into_memory,
    validate_blockwise_data,
)
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..bounds import (
    check_range_bounds_feasible,
    check_x_range,
    check_y_bound,
    count_ranges,
    range_bound_epsilons,
    release_ranges,
    x_range_magnitude,
    y_bound_magnitude,
)
from ..linear_model._private_bounds import LARGEST_BOUND_SCALE
from ..mechanisms import difference_at_most, gumbel_top_k
from ._params import X_BOUND_WITHDRAWN

__all__ = ["private_top_s_correlations", "PrivateTopSSelector"]


class _MarginalSums:
    """Block function of :func:`marginal_scores` (picklable, for Dask workers).

    :math:`\\sum_i \\mathrm{clip}(x_{ij}) \\mathrm{clip}(y_i)` over one block of
    rows, the entries clipped in a block-sized copy.
    """

    def __init__(self, x_range, y_range):
        self.x_range, self.y_range = x_range, y_range

    def __call__(self, offset, X, Y, params=None, into=None):
        with np.errstate(all="ignore"):
            if self.x_range is not None:
                X = np.clip(X, self.x_range[0], self.x_range[1])
            yc = np.asarray(Y, dtype=np.float64).reshape(-1)
            if self.y_range is not None:
                yc = np.clip(yc, self.y_range[0], self.y_range[1])
            part = np.dot(X.T, yc)
            if into is not None:
                part += into[0]
        return (part,)


def marginal_scores(X, y, x_range=None, y_range=None):
    """Scores :math:`u_j = |\\sum_i \\mathrm{clip}(x_{ij}) \\mathrm{clip}(y_i)| / m_j`.

    ``x_range`` is a checked ``(low, high)`` pair of arrays
    (:func:`~skprivreg.bounds.check_x_range`): entries are clipped to
    :math:`[l_j, h_j]` and each score is divided by the column magnitude
    :math:`m_j = \\max(|l_j|, |h_j|)`, so it is in the units of the declared
    range. ``y_range`` is a checked ``(low, high)``: labels are clipped to it.
    Clipping is a per-row map. ``None`` leaves that side unclipped (and
    unscaled): the non-private mode only. One pass over the rows (NumPy,
    memmap or Dask), clipped block by block: no copy of ``X``. Every block is
    checked for NaN and infinity first (scikit-learn's error): a NaN would
    make its column's score NaN, a column no noise could then select.
    """
    source = RowSource(X, y, check_finite=True)
    (sums,) = source.reduce(_MarginalSums(x_range, y_range), add_tuples,
                            label="marginal sums")
    with np.errstate(all="ignore"):
        scores = np.abs(sums)
        if x_range is not None:
            scores = scores / x_range_magnitude(x_range)
    return scores


def score_sensitivity(y_magnitude, neighbouring="replace-one"):
    """l_inf sensitivity of the scaled scores: :math:`B_y` (add/remove) or :math:`2 B_y` (replace).

    One row contributes :math:`\\mathrm{clip}(x_{ij}) \\mathrm{clip}(y_i) / m_j
    \\in [-B_y, B_y]` to each scaled sum (:math:`|\\mathrm{clip}(x_{ij})| \\le
    m_j`, :math:`|\\mathrm{clip}(y_i)| \\le B_y = \\max(|l_y|, |h_y|)`), and
    :math:`|\\cdot|` is 1-Lipschitz: adding or removing the row moves each
    :math:`u_j` by at most :math:`B_y`; replacing it removes one contribution
    and adds another, at most :math:`2 B_y`.
    """
    factor = 2.0 if neighbouring == "replace-one" else 1.0
    return factor * float(y_magnitude)


def private_top_s_correlations(
    X, y, s, *, epsilon, x_range, y_bound, neighbouring="replace-one", random_state=None
):
    """Private top-``s`` marginal screening: ``(indices, event)``.

    One-shot Gumbel top-``s`` (:func:`skprivreg.mechanisms.gumbel_top_k`) on
    the scaled, clipped marginal scores (:func:`marginal_scores`), noise
    scale :math:`2 s \\Delta / \\varepsilon` with :math:`\\Delta` from
    :func:`score_sensitivity`: pure :math:`\\varepsilon`-DP (Durfee & Rogers
    2019). Marginal screening fails when correlations cancel (a true feature
    can be uncorrelated with ``y``); the Lasso-based selector does not.

    Parameters
    ----------
    x_range : pair or array
        Declared per-column range (:func:`~skprivreg.bounds.check_x_range`).
    y_bound : float or pair
        Declared label range (:func:`~skprivreg.bounds.check_y_bound`).
    neighbouring : {'replace-one', 'add-remove'}, default='replace-one'
    random_state : None or int, default=None
        Ignored outside :func:`skprivreg.testing.reproducible_noise`: the
        Gumbel noise is secret and drawn from fresh OS entropy on every call
        (inside the facility, an int gives the same noise on every call).
        An event carries no mark of the facility (estimators mark their
        ledgers themselves): a ledger built from an event returned inside it
        is not fit for publication, and the caller sets
        ``ledger.for_publication = False``.

    Returns
    -------
    indices : ndarray of int, sorted
    event : PrivacyEvent
    """
    if not (is_dask_collection(X) or is_dask_collection(y)):
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x_range = check_x_range(x_range, X.shape[1])
    y_range = check_y_bound(y_bound)
    if x_range is None or y_range is None:
        raise ValueError("private_top_s_correlations needs a declared x_range and y_bound.")
    _check_score_scales(x_range, y_range)
    rng = secret_generators(("selection",), random_state)["selection"]
    return _top_s_release(marginal_scores(X, y, x_range, y_range), s, epsilon, y_range, rng,
                          neighbouring)


def _check_score_scales(x_range, y_range):
    """Refuse declared ranges whose score sums could overflow float64 (before any spend).

    A score sums ``clip(x_ij) clip(y_i)``, each at most ``m_j B_y``: with both
    magnitudes at most :data:`LARGEST_BOUND_SCALE` the sums stay finite
    (an infinite score would win whatever noise is added).
    """
    for name, magnitude in (
        ("x_range", None if x_range is None else float(np.max(x_range_magnitude(x_range),
                                                              initial=0.0))),
        ("y_bound", None if y_range is None else y_bound_magnitude(y_range)),
    ):
        if magnitude is not None and not magnitude <= LARGEST_BOUND_SCALE:
            raise ValueError(
                f"{name} has a magnitude of {magnitude:g}: the scores sum products of "
                f"clipped entries and labels, which must stay finite; declared magnitudes "
                f"must be at most {LARGEST_BOUND_SCALE:g}."
            )


def _top_s_release(scores, s, epsilon, y_range, rng, neighbouring):
    """Gumbel top-``s`` of the scaled, clipped scores: ``(sorted indices, event)``."""
    sens = score_sensitivity(y_bound_magnitude(y_range), neighbouring)
    chosen = gumbel_top_k(scores, s, sens, epsilon, rng)
    event = PrivacyEvent(
        name="top_s_marginal", epsilon=float(epsilon), delta=0.0, neighbouring=neighbouring
    )
    return np.sort(chosen), event


class PrivateTopSSelector(DPEstimatorMixin, SelectorMixin, BaseEstimator):
    """Private top-s marginal screening (baseline for the private Lasso selector).

    Scores each column by its clipped marginal correlation with the target,
    in the units of its declared range,

    .. math::
        u_j = \\frac{1}{m_j}\\Big|\\sum_i \\mathrm{clip}_{[l_j, h_j]}(x_{ij})\\,
        \\mathrm{clip}_{[l_y, h_y]}(y_i)\\Big|, \\qquad m_j = \\max(|l_j|, |h_j|),

    and selects ``s`` columns by the one-shot Gumbel mechanism of Durfee &
    Rogers (2019) (equivalent to ``s`` rounds of the exponential mechanism of
    McSherry & Talwar (2007) at ``epsilon/s`` each). Always
    releases ``s`` columns. With the same range for every column the ranking
    is that of the raw clipped sums.

    **Guarantee.** Pure ``epsilon``-DP (no delta), full DP (one row),
    replace-one (default) or add/remove neighbours (``neighbouring``). The
    scores have sensitivity :math:`2 B_y` under replace-one and :math:`B_y`
    under add/remove, :math:`B_y = \\max(|l_y|, |h_y|)`; Gumbel noise of
    scale :math:`2 s \\Delta / \\varepsilon_{sel}`. Budget: the selection gets
    ``epsilon`` when both bounds are declared, otherwise
    ``(1 - bounds_budget) * epsilon``; every release is recorded as its own
    event (pure DP, same notion and relation) before its noise is drawn.

    **Bounds.** ``x_range`` and ``y_bound`` are public values you declare;
    entries beyond them are clipped (a per-row map, so the guarantee holds
    for any data). A bound you do not declare is estimated privately with
    ``bounds_budget * epsilon`` split equally over the missing bounds (pure
    DP, :func:`skprivreg.bounds.estimate_ranges`): ``x_range`` becomes
    :math:`[-\\hat B_x, \\hat B_x]` in every column with :math:`\\hat B_x` a
    private upper bound on :math:`\\max_j |x_{ij}|`, ``y_bound`` becomes
    :math:`[-\\hat B_y, \\hat B_y]`. If ``n`` is too small for that estimate
    (:func:`skprivreg.bounds.min_samples_for_private_bound`),
    :class:`~skprivreg.exceptions.ConfigurationError` is raised before any
    spend, naming the ``n`` needed. ``bounds='data'`` reads the missing
    bounds from the data instead: not private, recorded as an event of
    infinite epsilon, with a :class:`~skprivreg.exceptions.PrivacyLeakWarning`.
    At ``epsilon=inf`` (non-private test mode) missing bounds mean no
    clipping. Do not derive the bounds, or centre the data, with statistics
    of the data before this step (use public constants).

    **Data.** The scores are sums over rows, clipped block by block (no
    clipped copy of ``X``; a memory-mapped file is read into memory once, so
    that what is checked is what is summed). A Dask array
    or data frame is read chunk by chunk on its workers, never collected.
    The first pass releases nothing and runs before the spend (the counts of
    the missing bounds, or the scores when both are declared), so NaN or
    infinity raises ``ValueError`` before any budget is spent, on NumPy and
    on Dask alike.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total budget of one fit; ``np.inf`` is the non-private test mode.
    n_features_to_select : int, default=1
    x_range : tuple, array of shape (n_features, 2) or None, default=None
        Per-column range ``(low, high)``: floats (the same range for every
        column) or arrays of shape ``(n_features,)``. A per-entry bound
        ``b`` is ``x_range=(-b, b)``. Magnitudes above 1e60 are refused
        (the score sums would overflow float64).
    y_bound : float, (low, high) or None, default=None
        Label range: ``B`` means ``[-B, B]``; magnitudes above 1e60 are refused.
    bounds : {'private', 'data'}, default='private'
        How missing bounds are obtained (see **Bounds**).
    bounds_budget : float in (0, 1), default=0.1
        Share of ``epsilon`` spent on missing bounds.
    neighbouring : {'replace-one', 'add-remove'}, default='replace-one'
        Under ``'add-remove'`` the number of rows is private, so the fit
        does not check that it suffices for privately estimated bounds
        (with too few rows they clip most of them).
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None
        Seeds released randomness only; the noise is fresh in every fit.

    Attributes
    ----------
    support_ : ndarray of bool
    x_range_ : (ndarray, ndarray) or None
        The range used (declared or estimated; public after the fit).
    y_bound_ : (float, float) or None
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    PrivateLassoSupportSelector : Private Lasso support by subsampling stability.
    sklearn.feature_selection.SelectKBest : Non-private top-k univariate selection.

    References
    ----------
    D. Durfee and R. Rogers, "Practical differentially private top-k
    selection with pay-what-you-get composition", NeurIPS 2019.

    F. McSherry and K. Talwar, "Mechanism design via differential privacy",
    FOCS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.feature_selection import PrivateTopSSelector
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40000, 20))
    >>> y = X[:, :3] @ np.array([0.5, -0.5, 0.5]) + rng.normal(size=40000)
    >>> sel = PrivateTopSSelector(epsilon=1.0, n_features_to_select=3,
    ...                           x_range=(-5.0, 5.0), y_bound=10.0).fit(X, y)
    >>> sel.transform(X).shape  # always s columns
    (40000, 3)
    >>> [(e.name, e.epsilon, e.delta) for e in sel.privacy_spent_.events]
    [('top_s_marginal', 1.0, 0.0)]
    """

    _renamed_parameters = {"x_bound": X_BOUND_WITHDRAWN}

    _parameter_constraints = {
        "epsilon": DPEstimatorMixin._privacy_parameter_constraints["epsilon"],
        "accountant": DPEstimatorMixin._privacy_parameter_constraints["accountant"],
        "random_state": DPEstimatorMixin._privacy_parameter_constraints["random_state"],
        "n_features_to_select": [Interval(Integral, 1, None, closed="left")],
        "x_range": ["array-like", None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "neighbouring": [StrOptions({"replace-one", "add-remove"})],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        n_features_to_select=1,
        x_range=None,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        neighbouring="replace-one",
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.n_features_to_select = n_features_to_select
        self.x_range = x_range
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.random_state = random_state

    def _plan(self, n, p, private):
        """Checked ranges, the epsilon of each missing bound and the ledger (public facts only)."""
        x_range = check_x_range(self.x_range, p)
        y_range = check_y_bound(self.y_bound)
        missing = [name for name, v in (("x_range", x_range), ("y_bound", y_range)) if v is None]
        bound_eps = range_bound_epsilons(
            missing, epsilon=self.epsilon, bounds=self.bounds,
            bounds_budget=self.bounds_budget, private=private,
        )
        _check_score_scales(x_range, y_range)
        if self.neighbouring == "replace-one":
            # Under add/remove the number of rows is private: no check may read it.
            check_range_bounds_feasible(n, bound_eps)
        bound_events = [
            PrivacyEvent(name=name, epsilon=eps, delta=0.0, neighbouring=self.neighbouring)
            for name, eps in bound_eps.items()
        ]
        eps_sel = difference_at_most(self.epsilon,
                                     *(e for e in bound_eps.values() if math.isfinite(e)))
        selection = PrivacyEvent(
            name="top_s_marginal", epsilon=float(eps_sel) if private else math.inf,
            delta=0.0, neighbouring=self.neighbouring,
        )
        return x_range, y_range, bound_eps, PrivacyLedger([*bound_events, selection])

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Select ``n_features_to_select`` columns privately.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._reset()
        X, y = validate_blockwise_data(self, X, y, multi_output=False)
        if not (is_dask_collection(X) or is_dask_collection(y)):
            X, y = read_into_memory(X, "X"), read_into_memory(y, "y")  # read once
        private = self._validate_privacy_params()
        n, p = X.shape
        s = min(self.n_features_to_select, p)
        x_range, y_range, bound_eps, ledger = self._plan(n, p, private)
        self._check_budget(ledger)
        # Passes that release nothing and refuse NaN or infinity (on Dask, on
        # the workers) before the spend: the counts of the missing ranges, or,
        # with every range declared, the scores themselves.
        counts = count_ranges(X, y, bound_eps)
        scores = None if bound_eps else marginal_scores(X, y, x_range, y_range)
        # Checked and recorded before any data value reaches a mechanism.
        self._spend(ledger)
        rngs = self._secret_rngs("bounds", "noise")
        est_x, est_y, _ = release_ranges(counts, bound_eps, rngs["bounds"],
                                         neighbouring=self.neighbouring)
        x_range = est_x if x_range is None else x_range
        y_range = est_y if y_range is None else y_range
        if scores is None:
            scores = marginal_scores(X, y, x_range, y_range)
        if private:
            chosen, _ = _top_s_release(scores, s, ledger.events[-1].epsilon, y_range,
                                       rngs["noise"], self.neighbouring)
        else:
            chosen = np.argsort(-scores, kind="stable")[:s]
        support = np.zeros(p, dtype=bool)
        support[chosen] = True
        self.support_ = support
        self.x_range_ = x_range
        self.y_bound_ = y_range
        return self

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
