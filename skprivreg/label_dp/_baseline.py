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
``sigma^2 p / n``: on the 1980 census data this beats weighted LBA at every
epsilon.
"""

import math
from numbers import Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, RegressorMixin

from .._compat import HasMethods, Interval, StrOptions, fit_context, validate_data
from .._rows import read_into_memory
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..bounds import check_private_bound_feasible, check_y_bound
from ..linear_model._base import LinearPredictMixin
from ..mechanisms import (
    add_gaussian,
    difference_at_most,
    gaussian_event,
    product_at_most,
    width_at_least,
)
from ._label_bound import EVENT_NAME, data_label_bound, private_label_bound
from ._lba import fit_on_aggregates

__all__ = ["GaussianLabelNoiseRegressor"]


class GaussianLabelNoiseRegressor(
    DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator
):
    """Label-DP regression by Gaussian noise on every label, then a linear fit.

    Each label is clipped to the label range :math:`[a, b]` and gets
    independent Gaussian noise; the linear model (OLS by default) is fitted
    on the noisy labels and the public features:

    .. math::
        \\tilde y_i = \\operatorname{clip}(y_i, a, b) + N(0, \\sigma^2), \\qquad
        \\sigma = \\frac{\\Delta}{\\mu(\\varepsilon', \\delta)}, \\quad \\Delta = b - a,

    where :math:`\\mu(\\varepsilon', \\delta)` is the Gaussian-DP parameter
    equivalent to :math:`(\\varepsilon', \\delta)`-DP
    (:func:`skprivreg.accounting.gdp_mu`; this is the analytic Gaussian
    mechanism of Balle & Wang 2018) and :math:`\\varepsilon'` is ``epsilon``
    less the share spent on a missing label bound.

    **Privacy notion.** Label-DP with public features, replace-one-label
    neighbours, labels clipped to the public ``y_bound`` (range
    ``Delta = high - low``). One Gaussian release of the label vector with
    L2-sensitivity ``Delta`` at ``(epsilon, delta)`` (analytic calibration,
    :func:`skprivreg.mechanisms.gaussian_event`); the fit is
    post-processing. No data-dependent test, no failure mode; accuracy
    improves as ``sigma^2 p / n``.

    **Missing bounds.** Without ``y_bound`` and with ``bounds='private'``
    (default), a share ``bounds_budget * epsilon`` is spent on a private bound
    ``B`` on ``|y|`` (pure label-DP under replace-one neighbours, its own
    event in ``privacy_spent_``; above-threshold on public geometric bins,
    :func:`skprivreg.bounds.private_norm_bound`) and the labels are clipped to
    ``[-B, B]``; the rest of epsilon goes to the Gaussian release. When
    ``n_samples`` is too small for a useful private bound,
    :class:`~skprivreg.exceptions.ConfigurationError` is raised before any
    spend, naming the ``n_samples`` needed. ``bounds='data'`` reads ``B``
    from the labels (rounded up to the public bin grid, never the exact
    extreme): not private, a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning` and an infinite-epsilon
    event. ``epsilon=inf`` (non-private mode) reads it from the data too.

    Parameters
    ----------
    epsilon : float, default=1.0
    delta : float, default=1e-6
        Choose it well below 1/n_samples.
    y_bound : float, (low, high) or None, default=None
        Public label range, chosen without looking at the labels: a float
        ``B`` means ``[-B, B]``. Labels are clipped to it. ``None``: see
        *Missing bounds*.
    bounds : {'private', 'data'}, default='private'
        How a missing ``y_bound`` is obtained.
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on a private label bound.
    estimator : 'ols', 'ridge' or an sklearn linear regressor, default='ols'
    alpha : float, default=0.0
        Ridge penalty for ``estimator='ridge'`` (intercept unpenalised).
    fit_intercept : bool, default=True
    accountant : BudgetAccountant or None
    random_state : None, int or Generator
        Unused for the noise, which comes from fresh OS entropy in every fit.

    Attributes
    ----------
    coef_, intercept_ : linear model
    noise_scale_ : float
        sigma (public: a function of epsilon, delta and the bounds).
    y_bound_ : tuple (low, high)
        The label range used: declared, or ``(-B, B)`` with ``B`` released
        privately (or, with ``bounds='data'``, a public bin edge).
    epsilon_, delta_ : float
    privacy_spent_ : PrivacyLedger

    See Also
    --------
    RROnBinsRegressor : Label-DP (pure epsilon) by randomised response on bins.
    WeightedLBARegressor : Label-DP by weighted bag aggregation.
    sklearn.linear_model.LinearRegression : The non-private least squares.

    References
    ----------
    B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
    differential privacy: analytical calibration and optimal denoising",
    ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.accounting import gdp_mu
    >>> from skprivreg.label_dp import GaussianLabelNoiseRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 3)); y = X @ [1.0, -2.0, 0.5] + rng.normal(size=20000)
    >>> est = GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-6,
    ...                                   y_bound=(-10.0, 10.0)).fit(X, y)
    >>> est.coef_.shape
    (3,)
    >>> round(est.noise_scale_, 2), round(20.0 / gdp_mu(1.0, 1e-6), 2)  # public sigma
    (84.49, 84.49)
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "estimator": [StrOptions({"ols", "ridge"}), HasMethods(["fit"])],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
    }

    _renamed_parameters = {"label_bounds": "y_bound"}

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        estimator="ols",
        alpha=0.0,
        fit_intercept=True,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.estimator = estimator
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.accountant = accountant
        self.random_state = random_state

    def _bound_epsilon(self, private):
        """Epsilon of the label bound: 0 when declared, inf when read from data."""
        if self.y_bound is not None:
            return 0.0
        if not private or self.bounds == "data":
            return math.inf
        return product_at_most(self.bounds_budget, self.epsilon)

    def _planned_ledger(self, label_range, private):
        bound_eps = self._bound_epsilon(private)
        events = []
        if bound_eps > 0:
            events.append(PrivacyEvent(EVENT_NAME, bound_eps, 0.0, notion="label"))
        eps_noise = difference_at_most(self.epsilon, bound_eps if math.isfinite(bound_eps) else 0)
        event = gaussian_event(
            "label_noise",
            label_range,
            eps_noise if private else np.inf,
            self.delta,
            notion="label",
        )
        return PrivacyLedger([*events, event]), event

    def _reads_bound_from_data(self, private):
        return self.y_bound is None and (not private or self.bounds == "data")

    def _resolve_bounds(self, y, private, rng, data_bound=None):
        """Declared bounds, or a private bound on |y|, or a public bin above max |y|.

        ``data_bound``: the ``(bound, event)`` already read from the labels
        (``bounds='data'`` or the non-private mode), before the spend.
        """
        if self.y_bound is not None:
            a, b = check_y_bound(self.y_bound)
            return a, b, []
        if data_bound is not None:
            bound, event = data_bound
        else:
            bound, event = private_label_bound(y, self._bound_epsilon(private), rng)
        return -bound, bound, [event]

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
        self._reset()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        X, y = read_into_memory(X, "X"), read_into_memory(y, "y")  # read once
        private = self._validate_privacy_params()
        planned = self._planned_ledger(1.0, private)[0]
        data_bound = None
        if self.y_bound is not None:
            check_y_bound(self.y_bound)
        elif private and self.bounds == "private":
            check_private_bound_feasible(X.shape[0], self._bound_epsilon(private), "y_bound")
        if self._reads_bound_from_data(private):
            # Read (and refused if out of range) before the spend; the budget
            # is checked first, so a refused budget reads no label.
            self._check_budget(planned)
            data_bound = data_label_bound(y)
        self._spend(planned)
        rngs = self._secret_rngs("bounds", "noise")
        a, b, bound_events = self._resolve_bounds(y, private, rngs["bounds"], data_bound)
        ledger, event = self._planned_ledger(width_at_least(a, b), private)
        if bound_events:
            ledger = PrivacyLedger([*bound_events, event])
        self._settle(ledger)
        noisy = add_gaussian(np.clip(y, a, b), event.sigma, rngs["noise"])
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
        self.y_bound_ = (a, b)
        self.epsilon_ = float(ledger.epsilon)
        self.delta_ = float(ledger.delta)
        return self
