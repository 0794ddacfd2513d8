"""AdaSSP: sufficient statistics perturbation with a private adaptive ridge (Wang 2018)."""

import math
import warnings
from dataclasses import dataclass
from numbers import Real

import numpy as np
from scipy import linalg
from scipy.stats import norm

from .._compat import Interval, StrOptions
from ..accounting import PrivacyEvent
from ..exceptions import PrivacyLeakWarning
from ..mechanisms import add_gaussian, exact_fraction, shares_at_most, value_at_least
from ._base import solve_psd_repaired
from ._ssp import SSPPlan, _BaseSSP, _ssp_family_plan, cross_sensitivity

__all__ = ["AdaSSPRegressor", "AdaSSPPlan", "adassp_plan", "adassp_ridge"]


def adassp_ridge(noisy_lambda_min, gram_sigma, n_columns, failure_prob):
    """Wang's adaptive ridge: ``max(0, sigma_XX sqrt(p ln(2 p^2 / rho)) - lambda~_min)``.

    ``sigma_XX sqrt(p ln(2p^2/rho))`` bounds the operator norm of the
    symmetric Gram noise with probability ``1 - rho/3`` or so (Wang 2018,
    Algorithm 2); the ridge tops the private smallest eigenvalue up to it.
    """
    eta = gram_sigma * math.sqrt(n_columns * math.log(2 * n_columns**2 / failure_prob))
    return max(0.0, eta - noisy_lambda_min)


def _published_multiplier(epsilon, delta):
    """Wang (2018)'s noise multiplier ``sqrt(ln(6/delta)) / (epsilon/3)``."""
    # At each release's share (epsilon/3, delta/3), rounded down as the ledger
    # records it: log(2 / (delta/3)) = log(6 / delta).
    eps_share = shares_at_most(epsilon, [1, 1, 1])[0]
    delta_share = shares_at_most(delta, [1, 1, 1])[0]
    return math.sqrt(math.log(2.0 / delta_share)) / eps_share


class AdaSSPRegressor(_BaseSSP):
    """Private linear regression by AdaSSP (Wang 2018, Algorithm 2).

    Three releases: a private smallest eigenvalue of :math:`X^\\top X`, the
    noisy Gram matrix and the noisy :math:`X^\\top Y`; then a ridge that
    adapts to the private eigenvalue:

    .. math::
        \\tilde\\lambda_{\\min} &= \\max\\{\\lambda_{\\min}(X^\\top X) + \\sigma_\\lambda Z
            - \\sigma_\\lambda \\Phi^{-1}(1 - \\rho/3),\\ 0\\}, \\\\
        \\lambda &= \\max\\{0,\\ \\sigma_{XX}\\sqrt{p \\ln(2p^2/\\rho)}
            - \\tilde\\lambda_{\\min}\\}, \\\\
        \\hat W &= \\Pi_{\\succeq \\lambda}\\left(X^\\top X + E + \\lambda I\\right)^{-1}
            (X^\\top Y + Z),

    where :math:`E` is symmetric Gaussian noise, :math:`\\Pi_{\\succeq \\lambda}`
    clips eigenvalues at :math:`\\lambda` (at least :math:`\\sigma_{XX}`), and
    ``p`` counts the columns including the intercept. Rows are clipped to the
    bounds before any statistic is computed.

    **Guarantee** (``constants='agm'``, the default). Full DP (the whole row
    is protected) under replace-one neighbouring: ``(epsilon, delta)``-DP.
    Replace-one sensitivities with ``B = sqrt(x_bound^2 + intercept_scaling^2)``:
    ``B^2`` for :math:`\\lambda_{\\min}` (Weyl),
    ``sqrt(2) (x_bound^2 + intercept_scaling^2 / 2)`` for the upper triangle of
    :math:`X^\\top X` (``2 x_bound intercept_scaling`` when
    ``intercept_scaling^2 > 2 x_bound^2``; ``sqrt(2) x_bound^2`` without an
    intercept), ``2 B sqrt(l) y_bound`` for
    :math:`X^\\top Y`. Budget split: ``bounds_budget * epsilon`` for any
    missing bound (``bounds='private'``); the rest ``(epsilon', delta)`` is
    shared by the three Gaussian releases, ``mu'/sqrt(3)`` each under
    ``composition='gdp'``, or ``(epsilon'/3, delta/3)`` each under
    ``'basic'`` (every share rounded down, so the three compose to at most
    the budget), all calibrated by the analytic Gaussian mechanism.

    ``constants='paper'`` reproduces the published calibration, noise
    multiplier ``sqrt(ln(6/delta))/(epsilon/3)`` and shift
    ``ln(6/delta)/(epsilon/3) B^2``, for comparisons. The paper states it
    under add/remove neighbouring and we could not re-verify it (it is about
    ``sqrt(2)`` below the classical Gaussian mechanism's constant), so this
    mode emits a :class:`PrivacyLeakWarning` and its ledger records the
    *claimed* ``(epsilon/3, delta/3)`` per release under ``'add-remove'``.

    **Sample size.** AdaSSP's excess risk (Wang 2018, Thm. 3) is of order
    ``p B^2 ||theta||^2 sqrt(ln(1/delta)) / (n epsilon)`` plus the OLS error;
    the fit approaches OLS once ``n lambda_min(Sigma)`` is well above
    ``sigma_XX sqrt(p ln(2p^2/rho))``. ``python -m skprivreg plan adassp``
    prints the noise scales for given public numbers.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total privacy budget; ``np.inf`` is the non-private test mode.
    delta : float, default=1e-6
        Total delta, in (0, 1). Choose it well below ``1/n_samples``.
    x_bound : float or None, default=None
        Public bound on the L2 norm of a raw row of X (without the intercept
        column); rows above are scaled down to it.
        Declared bounds must lie in ``[1e-60, 1e60]`` (rescale the data
        otherwise): the calibration multiplies up to four bound-sized
        factors, which must stay in float64's normal range.
    y_bound : float, (low, high) or None, default=None
        Public label range: a float ``B`` (labels in ``[-B, B]``) or a pair
        ``(low, high)``. The sensitivity uses ``B = max(|low|, |high|)`` and
        labels are clipped to ``[-B, B]`` (the range is not re-centred).
    bounds : {'private', 'data'}, default='private'
        How a missing bound is obtained: privately (spends
        ``bounds_budget * epsilon``; if n is too small,
        :class:`~skprivreg.exceptions.ConfigurationError` before any spend,
        naming the n needed) or from the data (**not private**, an event of
        infinite epsilon and a :class:`PrivacyLeakWarning`).
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon for the missing bounds.
        A private bound needs ``n >= 4 (6/epsilon_b) ln(2000)`` rows,
        ``epsilon_b`` its share of the budget (3,649 rows for each of two
        missing bounds at ``epsilon=1``); fewer raise
        :class:`~skprivreg.exceptions.ConfigurationError` before any budget
        is spent (:func:`~skprivreg.bounds.min_samples_for_private_bound`).
    bounds_quantile : float in (0, 1] or 'auto', default='auto'
        Quantile of the row norms (of ``|y|``) that a private bound targets;
        rows above it are clipped. ``'auto'`` leaves about
        ``(6/epsilon_b) ln(2000)`` rows above the bound (``epsilon_b`` the
        bound's budget): the fewest that keep the bound below the data
        maximum with probability 0.999
        (:func:`~skprivreg.mechanisms.upper_bound_margin`; public).
    fit_intercept : bool, default=True
        Append a constant column of value ``intercept_scaling``.
    intercept_scaling : float, default=1.0
        Value of the constant column.
    failure_prob : float in (0, 1), default=0.05
        Wang's rho: the ridge keeps the noisy Gram matrix positive definite
        with probability about ``1 - rho``.
    constants : {'agm', 'paper'}, default='agm'
        Our replace-one, analytic-Gaussian calibration, or the published one.
    composition : {'gdp', 'basic'}, default='gdp'
        How the three Gaussian releases share the budget
        (``constants='agm'`` only).
    accountant : BudgetAccountant or None, default=None
        A shared budget charged by every fit.
    random_state : None, int or numpy.random.Generator, default=None
        Unused for the noise: every fit draws its noise from fresh OS
        entropy, whatever this is, so clones fitted with the same seed still
        draw independent noise. Kept for scikit-learn compatibility; see
        :mod:`skprivreg.testing` for reproducible noise in tests.

    verbose : int, default=0
        ``1``: one line per pass over the rows (the pass's name and ``n``);
        ``2``: also about every tenth of a pass. Lines carry public facts
        only (pass number, rows read so far, ``n``), never a value computed
        from the data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    ridge_ : float
        The adaptive ridge (a DP output: computed from the private
        eigenvalue).
    x_bound_, y_bound_ : float or None
        The bounds used (declared, or released privately).
    privacy_spent_ : PrivacyLedger
    n_outputs_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    SSPRegressor : The same releases with a fixed, public ridge.
    BoostedAdaSSPRegressor : Gradient boosting of AdaSSP on one noisy Gram matrix.
    LinearRegression : The package's default private linear regression.
    sklearn.linear_model.Ridge : The non-private ridge regression.

    References
    ----------
    Y.-X. Wang, "Revisiting differentially private linear regression: optimal
    and adaptive prediction & estimation in unbounded domain", UAI 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg import AdaSSPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 5)); y = X @ np.ones(5) + rng.normal(size=20000)
    >>> est = AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=6.0, y_bound=12.0).fit(X, y)
    >>> est.coef_.shape
    (5,)
    >>> [event.name for event in est.privacy_spent_.events]
    ['lambda_min', 'XtX', 'XtY']
    """

    _parameter_constraints = {
        **_BaseSSP._parameter_constraints,
        "failure_prob": [Interval(Real, 0, 1, closed="neither")],
        "constants": [StrOptions({"agm", "paper"})],
    }
    _release_names = ("lambda_min", "XtX", "XtY")

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        x_bound=None,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        bounds_quantile="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        failure_prob=0.05,
        constants="agm",
        composition="gdp",
        accountant=None,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.bounds_quantile = bounds_quantile
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.failure_prob = failure_prob
        self.constants = constants
        self.composition = composition
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    def _sensitivities(self, x_bound_eff, y_bound, n_outputs, x_bound):
        gram = self._gram_sensitivity(x_bound)
        return (
            value_at_least(exact_fraction(x_bound_eff) ** 2),
            gram,
            cross_sensitivity(x_bound_eff, y_bound, n_outputs),
        )

    def _release_events(self, sensitivities, epsilon, delta):
        if self.constants == "agm" or math.isinf(epsilon):
            return super()._release_events(sensitivities, epsilon, delta)
        warnings.warn(
            "AdaSSPRegressor(constants='paper') uses the published noise calibration, "
            "which we could not verify; its guarantee is the paper's claim, under "
            "add/remove neighbouring. Use constants='agm' for a verified guarantee.",
            PrivacyLeakWarning,
            stacklevel=4,
        )
        multiplier = _published_multiplier(epsilon, delta)
        # The published scales per release: B^2, B^2 and B*y_bound times the
        # multiplier, with the unit-sensitivity conventions of the paper.
        lambda_sens, _, cross_sens = sensitivities
        x_scale = math.sqrt(lambda_sens)
        y_scale = cross_sens / (2.0 * x_scale)  # sqrt(n_outputs) * y_bound
        sigmas = (
            multiplier * lambda_sens,
            multiplier * lambda_sens,
            multiplier * x_scale * y_scale,
        )
        return [
            PrivacyEvent(
                name=name,
                epsilon=shares_at_most(epsilon, [1, 1, 1])[0],
                delta=shares_at_most(delta, [1, 1, 1])[0],
                neighbouring="add-remove",
                sensitivity=None,
                sigma=sigma,
                mu=None,
            )
            for name, sigma in zip(self._release_names, sigmas)
        ]

    def _release_and_solve(self, XtX, XtY, ledger, rng):
        lambda_event, gram_event, cross_event = ledger.events[-3:]
        p = XtX.shape[0]
        noisy_lambda_min = self._private_lambda_min(XtX, lambda_event, ledger, rng)
        noisy_XtX, noisy_XtY = self._noisy_statistics(XtX, XtY, gram_event, cross_event, rng)
        if lambda_event.sigma == 0:
            self.ridge_ = 0.0
            return solve_psd_repaired(noisy_XtX, noisy_XtY, floor=0.0)
        if self.constants == "paper":
            eta = math.sqrt(p * math.log(6 / self.delta) * math.log(2 * p**2 / self.failure_prob))
            eta *= lambda_event.sigma / math.sqrt(math.log(6 / self.delta))
            self.ridge_ = max(0.0, eta - noisy_lambda_min)
        else:
            self.ridge_ = adassp_ridge(noisy_lambda_min, gram_event.sigma, p, self.failure_prob)
        M = noisy_XtX + self.ridge_ * np.eye(p)
        return solve_psd_repaired(M, noisy_XtY, floor=max(self.ridge_, gram_event.sigma))

    def _private_lambda_min(self, XtX, event, ledger, rng):
        """Release ``lambda_min(X^T X)``, shifted down so it is an underestimate w.h.p."""
        lambda_min = float(linalg.eigvalsh(XtX, subset_by_index=[0, 0])[0])
        if event.sigma == 0:
            return lambda_min
        if self.constants == "paper":
            shift = event.sigma * math.sqrt(math.log(6 / self.delta))
        else:
            shift = event.sigma * norm.ppf(1 - self.failure_prob / 3)
        noisy = float(add_gaussian(lambda_min, event.sigma, rng))
        return max(noisy - shift, 0.0)


@dataclass(frozen=True)
class AdaSSPPlan(SSPPlan):
    """Public planning numbers of an :class:`AdaSSPRegressor` fit (see :class:`SSPPlan`).

    ``str(plan)`` is the text ``python -m skprivreg plan adassp`` prints.
    """


def adassp_plan(*, n_samples, n_features, epsilon, delta=1e-6, n_outputs=1, x_bound=None,
                y_bound=None, bounds_budget=0.1, fit_intercept=True, composition="gdp"):
    """Noise scales of :class:`AdaSSPRegressor` for public numbers; reads no data.

    Parameters are those of :func:`~skprivreg.linear_model.ssp_plan`.

    Returns
    -------
    AdaSSPPlan
    """
    return _ssp_family_plan(
        AdaSSPRegressor, AdaSSPPlan, n_samples=n_samples, n_features=n_features,
        n_outputs=n_outputs, epsilon=epsilon, delta=delta, x_bound=x_bound, y_bound=y_bound,
        bounds_budget=bounds_budget, fit_intercept=fit_intercept, composition=composition,
    )
