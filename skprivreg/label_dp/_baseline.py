"""Gaussian label noise: the label-DP baseline that weighted LBA must be compared with.

Each clipped label gets independent Gaussian noise calibrated to the label
range (analytic Gaussian mechanism, Balle & Wang 2018), and an ordinary
(linear) regressor is fitted on the noisy labels:

.. math::
    \\tilde y_i = \\operatorname{clip}(y_i, a, b) + N(0, \\sigma^2), \\qquad
    \\sigma = \\Delta / \\mu(\\varepsilon, \\delta),\\ \\Delta = b - a.

Changing one label moves the noisy-label vector by at most ``Delta`` in L2,
so the vector (and any model fitted on it with the public features) is
``(epsilon, delta)``-label-DP. Because the noise is independent of the
features, OLS stays unbiased and its excess risk is about
``sigma^2 p / n``: on the 1980 census data (spec §3.5 E1) this beats
weighted LBA at every epsilon.
"""

import math
import warnings
from numbers import Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, RegressorMixin

from .._compat import HasMethods, Interval, StrOptions, fit_context, validate_data
from ..accounting import PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import ClippingWarning, PrivacyLeakWarning
from ..linear_model._base import LinearPredictMixin
from ..mechanisms import add_gaussian, gaussian_event
from ._lba import fit_on_aggregates

__all__ = ["GaussianLabelNoiseRegressor"]


class GaussianLabelNoiseRegressor(
    DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator
):
    """Label-DP regression by Gaussian noise on every label, then a linear fit.

    **Privacy notion.** Label-DP with public features, replace-one-label
    neighbours, labels clipped to the public ``label_bounds`` (range
    ``Delta``). One Gaussian release of the label vector with
    L2-sensitivity ``Delta`` at ``(epsilon, delta)`` (analytic calibration,
    :func:`skprivreg.mechanisms.gaussian_event`); the fit is
    post-processing. No budget split, no data-dependent test, no failure
    mode, no minimum sample size (accuracy improves as ``sigma^2 p / n``).

    Parameters
    ----------
    epsilon : float, default=1.0
    delta : float, default=1e-6
    label_bounds : tuple (a, b) or None, default=None
        Public bounds. ``None`` reads ``(min y, max y)`` from the data with a
        :class:`~skprivreg.exceptions.PrivacyLeakWarning` (not private).
    estimator : 'ols', 'ridge' or an sklearn linear regressor, default='ols'
    alpha : float, default=0.0
        Ridge penalty for ``estimator='ridge'`` (intercept unpenalised).
    fit_intercept : bool, default=True
    accountant : BudgetAccountant or None
    random_state : None, int or Generator
        ``None`` on private data (a fixed seed reproduces the noise).

    Attributes
    ----------
    coef_, intercept_ : linear model
    noise_scale_ : float
        sigma (public: a function of epsilon, delta and the bounds).
    label_bounds_ : tuple
    epsilon_, delta_ : float
    privacy_spent_ : PrivacyLedger
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "label_bounds": ["array-like", None],
        "estimator": [StrOptions({"ols", "ridge"}), HasMethods(["fit"])],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        label_bounds=None,
        estimator="ols",
        alpha=0.0,
        fit_intercept=True,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.label_bounds = label_bounds
        self.estimator = estimator
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.accountant = accountant
        self.random_state = random_state

    def _planned_ledger(self, label_range, private):
        event = gaussian_event(
            "label_noise",
            label_range,
            self.epsilon if private else np.inf,
            self.delta,
            notion="label",
        )
        return PrivacyLedger([event]), event

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Add calibrated noise to the clipped labels and fit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        private = self._validate_privacy_params()
        if self.label_bounds is None:
            warnings.warn(
                "label_bounds were read from the labels: the result is not label-DP. "
                "Declare public bounds.",
                PrivacyLeakWarning,
                stacklevel=2,
            )
            a, b = float(np.min(y)), float(np.max(y))
            if b <= a:
                b = a + 1.0
        else:
            a, b = (float(v) for v in self.label_bounds)
            if not (math.isfinite(a) and math.isfinite(b) and a < b):
                raise ValueError("label_bounds must be finite (a, b) with a < b.")
        ledger, event = self._planned_ledger(b - a, private)
        self._check_budget(ledger)
        clipped = np.clip(y, a, b)
        if np.any(clipped != y):
            warnings.warn(
                "Some labels were clipped to the declared label_bounds.",
                ClippingWarning,
                stacklevel=2,
            )
        noisy = add_gaussian(clipped, event.sigma, self._rngs("noise")["noise"])
        self._charge(ledger)
        Z = np.column_stack([X, np.ones(X.shape[0])]) if self.fit_intercept else X
        if self.estimator == "ols":
            beta = linalg.lstsq(Z, noisy, lapack_driver="gelsd")[0]
        else:
            beta = fit_on_aggregates(
                Z, noisy, estimator=self.estimator, alpha=self.alpha,
                fit_intercept=self.fit_intercept,
            )
        if self.fit_intercept:
            self.coef_, self.intercept_ = beta[:-1].copy(), float(beta[-1])
        else:
            self.coef_, self.intercept_ = beta.copy(), 0.0
        self.noise_scale_ = float(event.sigma)
        self.label_bounds_ = (a, b)
        self.epsilon_ = float(ledger.epsilon) if private else math.inf
        self.delta_ = float(ledger.delta) if private else 1.0
        return self
