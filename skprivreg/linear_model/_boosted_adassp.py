"""Boosted AdaSSP (Tang et al. 2023) with every release composed in GDP."""

import math
from functools import partial
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin

from .._compat import Interval, StrOptions, fit_context, validate_data
from .._rows import check_block_finite, sum_over_row_blocks
from ..accounting import PrivacyLedger, gdp_mu
from ..base import DPEstimatorMixin
from ..bounds import clip_threshold, row_norms
from ..mechanisms import (
    add_gaussian,
    difference_at_most,
    exact_fraction,
    gaussian_event_from_mu,
    gdp_split,
    intercept_gram_sensitivity,
    residual_gradient_sensitivity,
    sqrt_at_least,
    symmetric_gaussian_matrix,
    value_at_least,
)
from ._adassp import adassp_ridge
from ._base import LinearPredictMixin, solve_psd_repaired, split_intercept
from ._private_bounds import (
    bound_epsilons,
    check_bound_scales,
    check_bounds_feasible,
    label_magnitude,
    planned_bound_events,
    resolve_bounds,
)

__all__ = ["BoostedAdaSSPRegressor", "boosted_gradient_block", "clipped_design_block"]


def _clipped_design(X_block, x_bound, fit_intercept):
    X = np.asarray(X_block, dtype=np.float64)
    check_block_finite(X, "X")
    norms = row_norms(X)
    target = clip_threshold(x_bound, X.shape[1])
    X = X * np.minimum(1.0, target / np.where(norms > 0, norms, 1.0))[:, None]
    if fit_intercept:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
    return X


def clipped_design_block(X_block, y_block, *, x_bound, fit_intercept):
    """``A^T A`` of one block, ``A = [clip(X, x_bound), 1]``."""
    A = _clipped_design(X_block, x_bound, fit_intercept)
    y = np.asarray(y_block, dtype=np.float64)
    check_block_finite(y, "y")
    return (A.T @ A,)


def boosted_gradient_block(X_block, y_block, *, x_bound, y_bound, fit_intercept, theta):
    """``A^T clip(y - A theta, -y_bound, y_bound)`` of one block (one boosting round).

    The labels are checked for NaN or infinity in every round, as the rows
    are: those of a file may change between passes (NaN would pass the clip).
    """
    A = _clipped_design(X_block, x_bound, fit_intercept)
    y = np.asarray(y_block, dtype=np.float64).ravel()
    check_block_finite(y, "y")
    r = y - A @ theta
    return (A.T @ np.clip(r, -y_bound, y_bound),)


class BoostedAdaSSPRegressor(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Boosted AdaSSP: gradient boosting of AdaSSP on one noisy Gram matrix (Tang et al. 2023).

    Rows are clipped to ``||x|| <= x_bound`` and a constant column ``c = 1``
    is appended (``A = [X, 1]``). Two releases fix the preconditioner, then
    each of ``n_rounds`` boosting rounds releases one noisy gradient:

    .. math::
        \\tilde\\lambda &= \\max\\{\\lambda_{\\min}(A^\\top A) + N(0,\\sigma_\\lambda^2)
            - \\sigma_\\lambda\\Phi^{-1}(1-\\rho/3), 0\\}, \\qquad
        \\tilde G = A^\\top A + E, \\\\
        \\lambda &= \\max\\{0, \\sigma_G\\sqrt{p\\ln(2p^2/\\rho)} - \\tilde\\lambda\\}
            \\quad\\text{(Wang 2018)}, \\\\
        \\theta_{t+1} &= \\theta_t + \\eta\\, \\Pi_{\\succeq\\lambda}(\\tilde G + \\lambda I)^{-1}
            \\left(A^\\top \\mathrm{clip}_{y_b}(y - A\\theta_t) + N(0, \\sigma_g^2 I)\\right).

    **Guarantee.** ``(epsilon, delta)``-DP, full notion, replace-one
    neighbouring. Replace-one sensitivities: ``B^2 + c^2`` for
    :math:`\\lambda_{\\min}` (Weyl), :math:`\\sqrt 2 (B^2 + c^2/2)` for the
    upper triangle of :math:`A^\\top A` (constant column; proof in
    :func:`skprivreg.mechanisms.intercept_gram_sensitivity`),
    :math:`2\\sqrt{B^2+c^2}\\,y_b` for each gradient. **All
    ``n_rounds + 2`` releases are composed** in Gaussian DP: with
    :math:`\\mu` = ``gdp_mu(epsilon, delta)``, each release gets
    :math:`\\mu/\\sqrt{T+2}` (an implementation that calibrates every
    release at the full budget spends about ``sqrt(T+2)`` times the stated
    budget; at ``T = 100`` and ``epsilon = 1`` that is ~10x too little noise
    per release). Without an intercept, ``c = 0``.

    **Bounds.** A bound you do not declare is estimated privately with
    ``bounds_budget * epsilon`` (split equally between the missing bounds;
    pure DP, full notion, its own event in ``privacy_spent_``, composed with
    the GDP part by basic composition) when n allows it; otherwise
    :class:`~skprivreg.exceptions.ConfigurationError` is raised before any
    budget is spent, naming the n needed. ``bounds='data'`` reads it from
    the data instead: not private, an event of infinite epsilon and a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`. ``epsilon=np.inf``
    needs no bounds (nothing is clipped).

    Parameters
    ----------
    epsilon : float, default=1.0
    delta : float, default=1e-6
        Total delta, in (0, 1). Choose it well below ``1/n_samples``.
    x_bound : float or None, default=None
        Public bound on the L2 norm of a raw row of X (rows above are scaled
        down to it).
    y_bound : float, (low, high) or None, default=None
        Public label range: a float ``B`` (labels in ``[-B, B]``) or a pair
        ``(low, high)``. Residuals are clipped to ``[-B, B]`` in every round,
        ``B = max(|low|, |high|)`` (the range is not re-centred).
    bounds : {'private', 'data'}, default='private'
        How a missing bound is obtained (see **Bounds**).
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on missing bounds.
    n_rounds : int >= 1, default=10
        Boosting rounds ``T``.
    shrinkage : float in (0, 1], default=1.0
        Step ``eta`` of each round (the paper's constant schedule).
    failure_prob : float in (0, 1), default=0.05
        Wang's ``rho`` for the adaptive ridge.
    fit_intercept : bool, default=True
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    ridge_ : float
    x_bound_, y_bound_ : float or None
        The bounds used (declared, or released privately).
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    AdaSSPRegressor : One AdaSSP fit, without boosting.
    LinearRegression : The package's default private regression (also boosted).
    sklearn.ensemble.GradientBoostingRegressor : Non-private gradient boosting.

    References
    ----------
    S. Tang et al., "Improved differentially private regression via gradient
    boosting", arXiv:2303.03451, 2023.

    Y.-X. Wang, "Revisiting differentially private linear regression: optimal
    and adaptive prediction & estimation in unbounded domain", UAI 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.linear_model import BoostedAdaSSPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 5)); y = X @ np.ones(5) + rng.normal(size=20000)
    >>> est = BoostedAdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=6.0, y_bound=12.0,
    ...                              n_rounds=10).fit(X, y)
    >>> est.coef_.shape
    (5,)
    >>> len(est.privacy_spent_.events)  # lambda_min, the Gram matrix, 10 gradients
    12
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "x_bound": [Interval(Real, 0, None, closed="neither"), None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "shrinkage": [Interval(Real, 0, 1, closed="right")],
        "failure_prob": [Interval(Real, 0, 1, closed="neither")],
        "fit_intercept": ["boolean"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        x_bound=None,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        n_rounds=10,
        shrinkage=1.0,
        failure_prob=0.05,
        fit_intercept=True,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.n_rounds = n_rounds
        self.shrinkage = shrinkage
        self.failure_prob = failure_prob
        self.fit_intercept = fit_intercept
        self.accountant = accountant
        self.random_state = random_state

    def _events(self, x_bound, y_bound, epsilon, bound_events=()):
        """The bound estimates, then the ``n_rounds + 2`` Gaussian events (public facts only).

        ``epsilon`` is what the Gaussian releases share (the total minus the
        bound estimates); their (epsilon, delta) does not depend on the bounds.
        """
        private = not math.isinf(self.epsilon)
        c = 1.0 if self.fit_intercept else 0.0
        B = float(x_bound)
        R = sqrt_at_least(exact_fraction(B) ** 2 + exact_fraction(c) ** 2)  # never rounded down
        names = ["lambda_min", "XtX"] + [f"gradient_{t}" for t in range(self.n_rounds)]
        sens = [value_at_least(exact_fraction(B) ** 2 + exact_fraction(c) ** 2),
                intercept_gram_sensitivity(B, c)] + [
            residual_gradient_sensitivity(R, y_bound)
        ] * self.n_rounds
        mu = gdp_mu(epsilon, self.delta) if private else math.inf
        mus = gdp_split(mu, [1.0] * len(names))
        share = self.delta / len(names)
        events = [gaussian_event_from_mu(nm, s, m, share) for nm, s, m in zip(names, sens, mus)]
        if not private:  # noiseless events of infinite epsilon
            return PrivacyLedger(events, composition="basic", delta=0.0)
        return PrivacyLedger([*bound_events, *events], composition="gdp", delta=self.delta,
                             gaussian_epsilon=epsilon)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit Boosted AdaSSP.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._reset()
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=False,
                             y_numeric=True)
        private = self._validate_privacy_params()
        n = X.shape[0]
        y_bound = label_magnitude(self.y_bound)  # an invalid y_bound is refused first
        x_bound = self.x_bound
        check_bound_scales(x_bound, y_bound, 1)  # before the calibration, which would overflow
        missing = [name for name, value in (("x_bound", x_bound), ("y_bound", y_bound))
                   if value is None]
        bound_eps = bound_epsilons(missing, private=private, bounds=self.bounds,
                                   bounds_budget=self.bounds_budget, epsilon=self.epsilon)
        check_bounds_feasible(n, bound_eps)
        epsilon = difference_at_most(self.epsilon,
                                     *(e for e in bound_eps.values() if math.isfinite(e)))
        planned = self._events(1.0, 1.0, epsilon, planned_bound_events(bound_eps))
        self._check_budget(planned)
        # The spend is recorded before the first secret draw.
        rngs = self._secret_rngs("bounds", "noise", spend=planned)
        rng = rngs["noise"]
        estimated, bound_events = resolve_bounds(X, y[:, None], bound_eps, rngs["bounds"],
                                                 n_samples=n)
        x_bound = estimated.get("x_bound", x_bound)
        y_bound = estimated.get("y_bound", y_bound)
        # Non-private mode without bounds: nothing is clipped, no noise is added.
        ledger = self._events(1.0 if x_bound is None else x_bound,
                              1.0 if y_bound is None else y_bound, epsilon, bound_events)
        x_clip = math.inf if x_bound is None else float(x_bound)
        y_clip = math.inf if y_bound is None else float(y_bound)
        lam_event, gram_event, *grad_events = ledger.events[len(bound_events):]
        common = dict(x_bound=x_clip, fit_intercept=self.fit_intercept)
        (AtA,) = sum_over_row_blocks(partial(clipped_design_block, **common), X, y)
        p = AtA.shape[0]
        lam_min = float(linalg.eigvalsh(AtA, subset_by_index=[0, 0])[0])
        noisy_lam = float(add_gaussian(lam_min, lam_event.sigma, rng))
        noisy_gram = AtA + symmetric_gaussian_matrix(p, gram_event.sigma, rng)
        if gram_event.sigma > 0:
            shifted = max(noisy_lam - lam_event.sigma * norm.ppf(1 - self.failure_prob / 3), 0.0)
            ridge = adassp_ridge(shifted, gram_event.sigma, p, self.failure_prob)
            floor = max(ridge, gram_event.sigma)
        else:
            ridge, floor = 0.0, 0.0
        M = noisy_gram + ridge * np.eye(p)
        theta = np.zeros(p)
        for event in grad_events:
            (grad,) = sum_over_row_blocks(
                partial(boosted_gradient_block, y_bound=y_clip, theta=theta,
                        **common), X, y)
            noisy_grad = add_gaussian(grad, event.sigma, rng)
            theta = theta + self.shrinkage * solve_psd_repaired(M, noisy_grad, floor)
        self._settle(ledger)
        self.coef_, self.intercept_ = split_intercept(theta, self.fit_intercept)
        self.ridge_ = float(ridge)
        self.x_bound_, self.y_bound_ = x_bound, y_bound
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The non-private mode adds no noise: refits agree.
        tags.non_deterministic = not math.isinf(self.epsilon)
        return tags
