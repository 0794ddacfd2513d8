"""Baseline: private top-s marginal screening (report-noisy-max on correlations)."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin

from .._compat import Interval, StrOptions, check_is_fitted, fit_context, validate_data
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import ConfigurationError
from ..mechanisms import gumbel_top_k

__all__ = ["private_top_s_correlations", "PrivateTopSSelector"]


def marginal_scores(X, y, x_bound, y_bound):
    """``u_j = |sum_i clip(x_ij, +-B_x) clip(y_i, +-B_y)|`` (clipping is a per-row map).

    A bound of ``None`` leaves that side unclipped (the non-private mode only).
    """
    Xc = np.asarray(X, dtype=np.float64)
    yc = np.asarray(y, dtype=np.float64)
    if x_bound is not None:
        Xc = np.clip(Xc, -x_bound, x_bound)
    if y_bound is not None:
        yc = np.clip(yc, -y_bound, y_bound)
    with np.errstate(all="ignore"):
        return np.abs(Xc.T @ yc)


def score_sensitivity(x_bound, y_bound, neighbouring="replace-one"):
    """l_inf sensitivity of the scores: ``B_x B_y`` (add/remove) or ``2 B_x B_y`` (replace-one).

    One row contributes ``clip(x_ij) clip(y_i)`` in ``[-B_x B_y, B_x B_y]`` to
    each sum, and ``|.|`` is 1-Lipschitz: adding or removing it moves each
    ``u_j`` by at most ``B_x B_y``; replacing it removes one contribution and
    adds another, at most ``2 B_x B_y``.
    """
    factor = 2.0 if neighbouring == "replace-one" else 1.0
    return factor * float(x_bound) * float(y_bound)


def private_top_s_correlations(X, y, s, epsilon, x_bound, y_bound, rng, neighbouring="replace-one"):
    """Private top-``s`` marginal screening: ``(indices, event)``.

    One-shot Gumbel top-``s`` (:func:`skprivreg.mechanisms.gumbel_top_k`) on
    the clipped marginal scores, noise scale ``2 s Delta / epsilon``: pure
    ``epsilon``-DP (Durfee & Rogers 2019). Marginal screening fails when
    correlations cancel (a true feature can be uncorrelated with ``y``); the
    Lasso-based selector does not.

    Returns
    -------
    indices : ndarray of int, sorted
    event : PrivacyEvent
    """
    for name, bound in (("x_bound", x_bound), ("y_bound", y_bound)):
        if bound is None or not (0 < bound < math.inf):
            raise ConfigurationError(f"{name} must be a declared finite bound > 0.")
    scores = marginal_scores(X, y, x_bound, y_bound)
    sens = score_sensitivity(x_bound, y_bound, neighbouring)
    chosen = gumbel_top_k(scores, s, sens, epsilon, rng)
    event = PrivacyEvent(
        name="top_s_marginal", epsilon=float(epsilon), delta=0.0, neighbouring=neighbouring
    )
    return np.sort(chosen), event


class PrivateTopSSelector(DPEstimatorMixin, SelectorMixin, BaseEstimator):
    """Private top-s marginal screening (baseline for the private Lasso selector).

    Scores ``u_j = |sum_i clip(x_ij) clip(y_i)|`` and selects ``s`` columns by
    the one-shot Gumbel mechanism (equivalent to ``s`` rounds of the
    exponential mechanism at ``epsilon/s`` each). Always releases ``s``
    columns.

    **Guarantee.** Pure ``epsilon``-DP, full DP (one row); score sensitivity
    ``2 B_x B_y`` under replace-one (default) or ``B_x B_y`` under add/remove
    neighbours (``neighbouring``); Gumbel noise of scale
    ``2 s Delta / epsilon``. The whole budget goes to the one selection,
    recorded as one event before the noise is drawn.

    **Bounds.** ``x_bound`` and ``y_bound`` are public values you declare;
    entries beyond them are clipped (a per-row map, so the guarantee holds
    for any data). There are no defaults: a bound that does not fit the data's
    scale would silently clip it, so a private fit without both bounds is
    refused with :class:`~skprivreg.exceptions.ConfigurationError` before any
    spend. Do not derive them, or centre, with statistics of the data before
    this step (use public constants). At ``epsilon=inf`` (non-private test
    mode) missing bounds mean no clipping.

    Parameters
    ----------
    epsilon : float, default=1.0
    n_features_to_select : int, default=1
    x_bound, y_bound : float or None, default=None
        Public per-entry bounds ``B_x``, ``B_y`` (required when private).
    neighbouring : {'replace-one', 'add-remove'}, default='replace-one'
    accountant : BudgetAccountant or None
    random_state : None, int or numpy.random.Generator

    Attributes
    ----------
    support_ : ndarray of bool
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    """

    _parameter_constraints = {
        "epsilon": DPEstimatorMixin._privacy_parameter_constraints["epsilon"],
        "accountant": DPEstimatorMixin._privacy_parameter_constraints["accountant"],
        "random_state": DPEstimatorMixin._privacy_parameter_constraints["random_state"],
        "n_features_to_select": [Interval(Integral, 1, None, closed="left")],
        "x_bound": [Interval(Real, 0, None, closed="neither"), None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), None],
        "neighbouring": [StrOptions({"replace-one", "add-remove"})],
    }

    def __init__(
        self,
        epsilon=1.0,
        *,
        n_features_to_select=1,
        x_bound=None,
        y_bound=None,
        neighbouring="replace-one",
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.n_features_to_select = n_features_to_select
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Select ``n_features_to_select`` columns privately."""
        self._reset()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, multi_output=False)
        private = self._validate_privacy_params()
        if private:
            missing = [name for name in ("x_bound", "y_bound") if getattr(self, name) is None]
            if missing:
                raise ConfigurationError(
                    f"PrivateTopSSelector needs {' and '.join(missing)}: declare public "
                    "per-entry bounds on the features and the target (entries beyond "
                    "them are clipped). Nothing was spent."
                )
        p = X.shape[1]
        s = min(self.n_features_to_select, p)
        ledger = PrivacyLedger(
            [
                PrivacyEvent(
                    name="top_s_marginal",
                    epsilon=float(self.epsilon) if private else math.inf,
                    delta=0.0,
                    neighbouring=self.neighbouring,
                )
            ]
        )
        # Checked and recorded before the noise is drawn.
        self._spend(ledger)
        if private:
            chosen, _ = private_top_s_correlations(
                X,
                y,
                s,
                self.epsilon,
                self.x_bound,
                self.y_bound,
                self._secret_rngs("noise")["noise"],
                self.neighbouring,
            )
        else:
            scores = marginal_scores(X, y, self.x_bound, self.y_bound)
            chosen = np.argsort(-scores, kind="stable")[:s]
        support = np.zeros(p, dtype=bool)
        support[chosen] = True
        self.support_ = support
        return self

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
