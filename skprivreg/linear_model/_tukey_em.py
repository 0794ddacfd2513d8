"""TukeyEM (Amin, Joseph, Ribero & Vassilvitskii 2023): private regression with no bounds."""

import math
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from .._compat import Interval, StrOptions, fit_context, validate_data
from .._rows import read_into_memory
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import ConfigurationError, PrivateTestFailed, PrivateTestFailedWarning
from ..mechanisms import (
    restricted_tukey_sample,
    tukey_log_volumes,
    tukey_ptr_test,
    tukey_safety_margin,
)
from ._base import LinearPredictMixin, split_intercept

__all__ = ["TukeyEMRegressor", "partition_models", "tukey_budget"]

# Width of the uniform jitter added to every model coordinate (a fixed,
# data-independent randomised map of each model) so that no two coordinates tie.
_JITTER = 1e-10


def tukey_budget(epsilon, delta):
    """``(epsilon_ptr, delta_ptr, epsilon_em, eta)`` of a TukeyEM fit at total ``(epsilon, delta)``.

    Half of each to the PTR check: ``epsilon_ptr = epsilon/2``,
    ``delta_ptr = delta/2``. The restricted exponential mechanism on a safe
    dataset is ``(epsilon_em + ln(1/(1-eta)), eta/(1-eta))``-DP
    (:func:`skprivreg.mechanisms.tukey_safety_margin`); ``eta/(1-eta) =
    delta/2`` and ``epsilon_em = epsilon/2 - ln(1/(1-eta))`` make it
    ``(epsilon/2, delta/2)``. PTR composition then gives ``(epsilon, delta)``.
    The safety margin's argument needs ``epsilon_em > 0``, that is
    ``delta/2 < e^{epsilon/2} - 1`` (the estimator refuses other budgets).
    """
    eta = (delta / 2.0) / (1.0 + delta / 2.0)
    return epsilon / 2.0, delta / 2.0, epsilon / 2.0 + math.log1p(-eta), eta


def partition_models(A, y, n_models, rng):
    """OLS models on a secret random partition into ``n_models`` groups of ``n // n_models`` rows.

    Replacing one row changes at most one model (the partition depends on
    row positions only). Leftover rows are not used. Returns shape
    ``(n_models, p)``; rank-deficient groups get the minimum-norm solution.
    """
    n, p = A.shape
    size = n // n_models
    order = rng.permutation(n)[: size * n_models].reshape(n_models, size)
    models = np.empty((n_models, p))
    for i, rows in enumerate(order):
        models[i] = np.linalg.lstsq(A[rows], y[rows], rcond=None)[0]
    return models


class TukeyEMRegressor(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """TukeyEM: a deep point among OLS models on disjoint subsets, chosen privately.

    Needs **no bounds** on the data. The rows are split at random into ``m``
    groups; OLS is fitted on each (``m`` models in :math:`\\mathbb{R}^p`); a
    propose-test-release check asks whether the models are concentrated
    enough; if it passes, the restricted exponential mechanism draws a model
    of high approximate Tukey depth (the depth of a point ``y`` is
    :math:`\\min_k \\min(\\#\\{i: \\beta_{ik} \\le y_k\\}, \\#\\{i: \\beta_{ik} \\ge y_k\\})`)
    with density :math:`\\propto \\exp(\\varepsilon_{em} T(y)/2)` on
    :math:`\\{T \\ge t\\}`, ``t = m/4`` (Amin, Joseph, Ribero & Vassilvitskii 2023).

    **Guarantee.** ``(epsilon, delta)``-DP, full notion, replace-one
    neighbouring (one row changes at most one model, and each model's depth
    counts by at most one). Budget: the PTR check gets ``(epsilon/2,
    delta/2)``: it releases only the bit
    :math:`[\\hat k + \\mathrm{Lap}(2/\\varepsilon) \\ge 2\\ln(1/\\delta)/\\varepsilon]`,
    where :math:`\\hat k` (sensitivity 1) lower-bounds the distance to a
    dataset on which the restricted mechanism is not private. Note the
    Laplace **scale 2/epsilon** (a scale of ``epsilon/2`` would add far too
    little noise). The restricted mechanism gets ``(epsilon/2, delta/2)``
    (:func:`tukey_budget`). The ledger composes the two by basic composition.
    Its sampling epsilon ``epsilon/2 - ln(1 + delta/2)`` must be positive: a
    ``delta`` of the order of ``epsilon`` or above is refused before any spend.

    **Failure.** If the check FAILs, the whole budget is spent and recorded
    (on the accountant and on ``privacy_spent_``) and
    :class:`~skprivreg.exceptions.PrivateTestFailed` is raised
    (``on_fail='raise'``). The check typically passes once
    ``n >= ~1000 p``. The documented fallback ``on_fail='zero'`` instead
    emits a :class:`~skprivreg.exceptions.PrivateTestFailedWarning` (it
    depends only on the released bit), sets
    ``ptr_passed_ = False`` and fits the constant-zero predictor, which
    releases nothing more; use it only when a failed fit must still return an
    estimator (e.g. in a pipeline), and check ``ptr_passed_``.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total budget. ``np.inf`` is the non-private test mode: ordinary least
        squares on all rows (no partition into models, no check; works on any
        n >= 1), with a :class:`~skprivreg.exceptions.PrivacyLeakWarning`.
    delta : float, default=1e-6
        Total delta, in (0, 1). Choose it well below ``1/n_samples``.
    n_models : int >= 8 or 'auto', default='auto'
        Number of models ``m``. ``'auto'``: ``min(1000, n // p)`` where ``p``
        counts the intercept (the paper's experiments use ``m`` in 1000-2000).
    fit_intercept : bool, default=True
        Append a constant column before fitting the models.
    on_fail : {'raise', 'zero'}, default='raise'
        What a failed private check does: raise
        :class:`~skprivreg.exceptions.PrivateTestFailed`, or fit the
        constant-zero predictor with a warning (the budget is spent either way).
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    ptr_passed_ : bool
    n_models_ : int
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    ISSPRegressor : Another private least squares that needs no norm bounds.
    AdaSSPRegressor : Private ridge from declared or private norm bounds.
    sklearn.linear_model.LinearRegression : The non-private least squares.

    References
    ----------
    K. Amin, M. Joseph, M. Ribero, S. Vassilvitskii, "Easy differentially
    private linear regression", ICLR 2023, arXiv:2208.07353.
    G. Brown, M. Gaboardi, A. Smith, J. Ullman, L. Zakynthinou,
    "Covariance-aware private mean estimation without private covariance
    estimation", NeurIPS 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.linear_model import TukeyEMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 3)); y = X @ [1.0, -2.0, 0.5] + rng.normal(size=20000)
    >>> est = TukeyEMRegressor(epsilon=1.0, delta=1e-6).fit(X, y)  # no bounds needed
    >>> est.coef_.shape
    (3,)
    >>> [(event.name, event.epsilon, event.delta) for event in est.privacy_spent_.events]
    [('tukey_ptr', 0.5, 5e-07), ('tukey_em', 0.5, 5e-07)]
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "n_models": [Interval(Integral, 8, None, closed="left"), StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "on_fail": [StrOptions({"raise", "zero"})],
    }

    _renamed_parameters = {"on_failure": "on_fail"}

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        n_models="auto",
        fit_intercept=True,
        on_fail="raise",
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.n_models = n_models
        self.fit_intercept = fit_intercept
        self.on_fail = on_fail
        self.accountant = accountant
        self.random_state = random_state

    def _ledger(self):
        eps_ptr, delta_ptr, _, _ = tukey_budget(self.epsilon, self.delta)
        return PrivacyLedger(
            [PrivacyEvent(name="tukey_ptr", epsilon=eps_ptr, delta=delta_ptr),
             PrivacyEvent(name="tukey_em", epsilon=self.epsilon - eps_ptr,
                          delta=self.delta - delta_ptr)],
            composition="basic",
        )

    def _fit_nonprivate(self, X, y):
        """``epsilon=inf``: ordinary least squares on all rows (no partition, no test)."""
        self._spend(PrivacyLedger(
            [PrivacyEvent(name="ols", epsilon=math.inf, delta=0.0)],
            composition="basic", delta=0.0,
        ))
        A = np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X
        theta = np.linalg.lstsq(A, y, rcond=None)[0]
        self.n_models_ = 1
        self.ptr_passed_ = True
        self.coef_, self.intercept_ = split_intercept(theta, self.fit_intercept)
        return self

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit TukeyEM.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._reset()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        X, y = read_into_memory(X, "X"), read_into_memory(y, "y")  # read once
        n, d = X.shape
        p = d + int(self.fit_intercept)
        if not self._validate_privacy_params():
            return self._fit_nonprivate(X, y)
        eps_ptr, delta_ptr, eps_em, eta = tukey_budget(self.epsilon, self.delta)
        if not eps_em > 0.0:
            raise ConfigurationError(
                f"TukeyEMRegressor with epsilon={self.epsilon:g} and delta={self.delta:g} leaves "
                f"the exponential mechanism epsilon/2 - ln(1/(1-eta)) = {eps_em:.3g} <= 0 "
                f"(eta = {eta:.3g}), where its guarantee does not hold: lower delta "
                "(well below epsilon) or raise epsilon. Nothing was spent."
            )
        m = min(1000, n // p) if self.n_models == "auto" else int(self.n_models)
        if m < 8 or n < m * p:
            needed = max(8, m) * p
            raise ConfigurationError(
                f"TukeyEMRegressor needs at least n_models * p = {needed} rows "
                f"(n_models >= 8, p = {p} columns with the intercept); got n={n}. "
                "Nothing was spent."
            )
        ledger = self._ledger()
        self._check_budget(ledger)
        rngs = self._secret_rngs("partition", "noise", spend=ledger)
        A = np.hstack([X, np.ones((n, 1))]) if self.fit_intercept else X
        models = partition_models(A, y, m, rngs["partition"])
        models = models + rngs["partition"].uniform(0.0, _JITTER, size=models.shape)
        projections = np.sort(models.T, axis=1)
        t = (m // 2) // 2
        k_hat = tukey_safety_margin(tukey_log_volumes(projections), t, eps_em, eta)
        passed = tukey_ptr_test(k_hat, eps_ptr, delta_ptr, rngs["noise"])
        self.n_models_ = m
        if not passed:
            self._settle(ledger)
            self.ptr_passed_ = False
            if self.on_fail == "raise":
                raise PrivateTestFailed(
                    "TukeyEM's private safety check failed: the budget is spent and nothing "
                    "else was released. More rows per column (n >= ~1000 p), a larger "
                    "epsilon, or on_fail='zero' may help."
                )
            warnings.warn(
                "TukeyEM's private safety check failed; the fitted model predicts 0 "
                "(on_fail='zero').", PrivateTestFailedWarning, stacklevel=2)
            self.coef_, self.intercept_ = np.zeros(d), 0.0
            return self
        # Only the point is released: the depth level it was drawn at is its depth
        # among these models, a function of the data that no neighbour shares.
        theta, _ = restricted_tukey_sample(projections, t, eps_em, rngs["noise"])
        self._settle(ledger)
        self.ptr_passed_ = True
        self.coef_, self.intercept_ = split_intercept(theta, self.fit_intercept)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The non-private mode adds no noise: refits agree.
        tags.non_deterministic = not math.isinf(self.epsilon)
        return tags
