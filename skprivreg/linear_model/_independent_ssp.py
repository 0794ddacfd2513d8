"""The naive PRIMO baseline: ``l`` independent SSP regressions with a composed budget.

Each outcome gets its own noisy covariance and its own noisy association, so
the covariance noise is paid ``l`` times. Under GDP each run is
``mu/sqrt(l)``-GDP (exact composition); under basic composition each run gets
``(epsilon/l, delta/l)``. PRIMO's Eq. (4) states the naive baseline with
``epsilon/sqrt(l)`` per run (advanced composition); GDP composition is at
least as tight and exact for Gaussian releases.
"""

import math
from dataclasses import replace
from fractions import Fraction
from numbers import Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin

from .._compat import Interval, StrOptions, fit_context
from ..accounting import PrivacyEvent, PrivacyLedger, gdp_mu
from ..base import DPEstimatorMixin
from ..mechanisms import (
    add_gaussian,
    cross_sensitivity,
    difference_at_most,
    gaussian_event_from_mu,
    gaussian_sigma,
    gdp_split,
    gram_upper_sensitivity,
    gram_with_exact_corner,
    joint_gram_cross_calibration,
    product_at_most,
    quotient_at_least,
    sqrt_times_at_least,
)
from ._base import LinearPredictMixin, split_intercept
from ._private_bounds import (
    LARGEST_BOUND_SCALE,
    bound_epsilons,
    check_bound_scales,
    check_bounds_feasible,
    check_data_bounds_supported,
    count_bounds,
    label_magnitude,
    planned_bound_events,
    release_bounds,
)
from ._reusecov_plan import theory_ridge
from ._reusecov_stats import (
    statistics_source,
    sufficient_statistics,
    validate_features_and_labels,
)
from ._ridge_rule import risk_minimising_ridge

__all__ = ["IndependentSSPRegressor"]

# Runs solved together in one batched eigendecomposition.
_RUN_BATCH = 64


def _eigh_each(M):
    """Eigenpairs of a stack of small symmetric matrices, one LAPACK call each.

    NumPy's batched ``eigh`` runs each small problem on its BLAS thread pool;
    right after the large products of the statistics pass, on a loaded
    machine, 64 matrices of size 51 took 5 s that way and 0.07 s this way.
    """
    eigvals = np.empty(M.shape[:2])
    eigvecs = np.empty_like(M)
    for k in range(M.shape[0]):
        eigvals[k], eigvecs[k] = linalg.eigh(M[k])
    return eigvals, eigvecs


def _noisy_covariances(k, Sigma, sigma, rng, exact_corner):
    """``k`` independent releases of ``Sigma`` (PRIMO's ``Sigma + E1``, one per run)."""
    return np.stack([gram_with_exact_corner(Sigma, sigma, rng, exact_corner=exact_corner)
                     for _ in range(k)])


class IndependentSSPRegressor(
    DPEstimatorMixin, LinearPredictMixin, MultiOutputMixin, RegressorMixin, BaseEstimator
):
    """``l`` independent private SSP regressions (the baseline PRIMO improves on, Neel 2023).

    Outcome ``j`` gets :math:`w_j = \\Pi_{\\succeq\\lambda}(X^\\top X/n + E_1^{(j)}
    + \\lambda I)^{-1}(X^\\top y_j/n + e_2^{(j)})` with fresh covariance noise
    for every outcome.

    **Guarantee.** Full DP, replace-one neighbouring (one record ``(x_i,
    y^i)`` replaced), ``(epsilon, delta)``-DP over all ``l`` outcomes.
    **Budget split.** ``composition='gdp'``: ``mu = mu(epsilon, delta)`` for
    the ``2 l`` Gaussian releases taken as one joint Gaussian release
    (:func:`~skprivreg.mechanisms.joint_gram_cross_calibration`: ``l`` copies
    of the covariance with noise ``sigma_1`` are, for privacy, one with
    ``sigma_1/sqrt(l)``); the ratio of the scales is that of giving the
    covariances ``sqrt(f) mu`` and the associations ``sqrt(1-f) mu``
    (``f = cov_budget``), and both scales are then lowered until the joint
    release is exactly ``mu``-GDP. ``composition='basic'``: run ``j`` gets
    ``(epsilon/l, delta/l)``, split ``f``/``1-f``, analytic Gaussian
    calibration (Balle & Wang 2018). Sensitivities per run (normalised, ``B`` the raw row bound,
    ``c = intercept_scaling``): ``sqrt(2)(B^2 + c^2/2)/n`` for the covariance
    (its constant corner ``c^2`` is released exactly) and
    ``2 sqrt(B^2 + c^2) y_bound/n``; clipping as in
    :class:`ReuseCovRegressor`.

    **Bounds.** A bound you do not declare is estimated privately with
    ``bounds_budget * epsilon`` (split equally between the missing bounds;
    pure DP, full notion, its own event in ``privacy_spent_``) when n allows
    it; otherwise :class:`~skprivreg.exceptions.ConfigurationError` is
    raised before any budget is spent, naming the n needed.
    ``bounds='data'`` reads it from the data instead: not private, an event
    of infinite epsilon and a :class:`PrivacyLeakWarning`. ``epsilon=np.inf``
    needs no bounds. No private test; never fails.
    Meant for comparisons: its covariance noise is ``sqrt(l)`` times larger
    than ReuseCov's.

    Parameters
    ----------
    epsilon : float, default=1.0
    delta : float, default=1e-6
        Total delta, in (0, 1). Choose it well below ``1/n_samples``.
    x_bound : float or None, default=None
        Bound on the L2 norm of a raw row of X (rows above are scaled down).
        Declared bounds must lie in ``[1e-60, 1e60]`` (rescale the data
        otherwise): the calibration multiplies up to four bound-sized
        factors, which must stay in float64's normal range.
    y_bound : float, (low, high) or None, default=None
        Label range: a float ``B`` (labels in ``[-B, B]``) or a pair
        ``(low, high)``; entries are clipped to ``[-B, B]`` with
        ``B = max(|low|, |high|)`` (the range is not re-centred).
    w_bound : float or None
    bounds : {'private', 'data'}, default='private'
        How a missing bound is obtained (see **Bounds**).
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on missing bounds.
    ridge : float >= 0, 'auto' or 'theory', default='auto'
        ``'auto'``: one ridge for all runs, minimising a first-order estimate of
        the in-sample excess risk computed from the released covariances and
        associations of every run and the public noise scales
        (:func:`~skprivreg.linear_model._ridge_rule.risk_minimising_ridge` on
        the runs' mean released spectrum, each association in its own run's
        eigenbasis): post-processing, no budget; it keeps every run's
        eigendecomposition until the ridge is chosen (memory ``l p^2``).
        ``'theory'``: per run,
        :func:`~skprivreg.linear_model._reusecov_plan.theory_ridge` with that
        run's noise scales (a high-probability bound, which over-shrinks).
        Both are 0 in the non-private mode.
    cov_budget : float in (0, 1), default=0.5
    composition : {'gdp', 'basic'}, default='gdp'
    fit_intercept : bool, default=True
    intercept_scaling : float in (0, 1e60], default=1.0
        Value of the constant column (at most 1e60, as a declared bound: the
        calibration would overflow).
    accountant : BudgetAccountant or None
    random_state : None, int or Generator
        Unused for the noise, which comes from fresh OS entropy in every fit.
    verbose : int, default=0
        ``1`` or more: one line per pass over the rows (the pass's name and
        ``n``). Lines carry public facts only (pass number, ``n``), never a
        value computed from the data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    n_outputs_ : int
    ridge_ : float
        The ridge of every run (normalised scale; released).
    noise_std_ : dict
        Per-run ``{'covariance': sigma_1, 'association': sigma_2}``.
    x_bound_, y_bound_ : float or None
        The bounds used (declared, or released privately).
    privacy_spent_ : PrivacyLedger
        The bound estimates (if any), then the composition of the ``l``
        per-run releases: one joint event under GDP composition (covariance
        and association calibrated together), else two events, one per kind.
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    ReuseCovRegressor : Many outcomes on one noisy covariance (less noise).
    SSPRegressor : Sufficient statistics perturbation for one outcome.
    sklearn.linear_model.Ridge : The non-private (multi-output) ridge.

    References
    ----------
    S. Neel, "PRIMO: Private Regression in Multiple Outcomes",
    arXiv:2303.04195, 2023.

    B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
    differential privacy: analytical calibration and optimal denoising",
    ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.linear_model import IndependentSSPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 3)); W = rng.normal(size=(3, 4))
    >>> Y = X @ W + rng.normal(size=(20000, 4))
    >>> est = IndependentSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=6.0,
    ...                               y_bound=15.0).fit(X, Y)
    >>> est.coef_.shape
    (4, 3)
    >>> [(e.name, e.notion, e.neighbouring) for e in est.privacy_spent_.events]
    [('covariance+association x l', 'full', 'replace-one')]
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "x_bound": [Interval(Real, 0, None, closed="neither"), None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "w_bound": [Interval(Real, 0, None, closed="neither"), None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "ridge": [Interval(Real, 0, None, closed="left"), StrOptions({"auto", "theory"})],
        "cov_budget": [Interval(Real, 0, 1, closed="neither")],
        "composition": [StrOptions({"gdp", "basic"})],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, LARGEST_BOUND_SCALE, closed="right")],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        x_bound=None,
        y_bound=None,
        w_bound=None,
        bounds="private",
        bounds_budget=0.1,
        ridge="auto",
        cov_budget=0.5,
        composition="gdp",
        fit_intercept=True,
        intercept_scaling=1.0,
        accountant=None,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.w_bound = w_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.ridge = ridge
        self.cov_budget = cov_budget
        self.composition = composition
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    def _events(self, n, n_outputs, x_raw, y_bound, epsilon, delta, private,
                bound_events=()):
        """The bound estimates, then two events, each the composition of the l
        per-run releases of one kind. ``x_raw``: the row bound of X without the
        intercept column (never rebuilt from the augmented bound, whose square
        rounds to ``c^2`` when ``c >> x_raw``)."""
        c = float(self.intercept_scaling) if self.fit_intercept else 0.0
        x_raw = float(x_raw)
        sens_cov = quotient_at_least(gram_upper_sensitivity(x_raw, c), n)
        sens_assoc = quotient_at_least(cross_sensitivity(x_raw, y_bound or 0.0, c), n)
        f = float(self.cov_budget)

        def root_l(value):
            """``sqrt(l) * value`` never rounded down: a label row of ``l`` bounds attains it."""
            return sqrt_times_at_least(n_outputs, value)

        if not private:
            # Non-private test mode: no noise, no guarantee (the ledger says inf).
            events = [
                PrivacyEvent("covariance x l", math.inf, 0.0, sensitivity=root_l(sens_cov),
                             sigma=0.0),
                PrivacyEvent("association x l", math.inf, 0.0,
                             sensitivity=root_l(sens_assoc), sigma=0.0),
            ]
            return events, 0.0, 0.0, PrivacyLedger(events, delta=0.0)
        if self.composition == "gdp" and sens_cov > 0 and sens_assoc > 0:
            # The l runs released jointly: l noisy copies of the covariance
            # (sigma_1 each) are, for privacy, one copy with sigma_1/sqrt(l), and
            # the l associations one release with the row bound sqrt(l) y_bound;
            # calibrated as one joint release of ReuseCov's shape.
            joint, sigma_gram, sigma_assoc, _ = joint_gram_cross_calibration(
                "covariance+association x l", x_bound=x_raw,
                y_row_bound=root_l(y_bound), n_rows=n, mu=gdp_mu(epsilon, delta),
                share=f, delta=delta, intercept=c,
            )
            sigma_cov = root_l(sigma_gram)
            joint = replace(joint, components=(("covariance", sigma_cov),
                                               ("association", sigma_assoc)))
            ledger = PrivacyLedger([*bound_events, joint], composition="gdp", delta=delta,
                                   gaussian_epsilon=epsilon)
            return [joint], sigma_cov, sigma_assoc, ledger
        if self.composition == "gdp":
            mu = gdp_mu(epsilon, delta)
            # l independent releases of sigma with sensitivity Delta each are one
            # Gaussian release of sensitivity sqrt(l) Delta (a row changes all).
            mu_cov, mu_assoc = gdp_split(mu, [f, 1 - f])
            cov = gaussian_event_from_mu("covariance x l", root_l(sens_cov), mu_cov, f * delta)
            assoc = gaussian_event_from_mu("association x l", root_l(sens_assoc), mu_assoc,
                                           (1 - f) * delta)
            ledger = PrivacyLedger([*bound_events, cov, assoc], composition="gdp", delta=delta,
                                   gaussian_epsilon=epsilon)
            return [cov, assoc], cov.sigma, assoc.sigma, ledger
        # Totals of the l runs, each at most its exact share (they sum to at
        # most (epsilon, delta)), and per-run shares at most 1/l of them.
        eps_cov, delta_cov = product_at_most(f, epsilon), product_at_most(f, delta)
        eps_assoc = difference_at_most(epsilon, eps_cov)
        delta_assoc = difference_at_most(delta, delta_cov)
        per_run = Fraction(1, int(n_outputs))
        sigma_cov = gaussian_sigma(sens_cov, product_at_most(per_run, eps_cov),
                                   product_at_most(per_run, delta_cov))
        sigma_assoc = gaussian_sigma(sens_assoc, product_at_most(per_run, eps_assoc),
                                     product_at_most(per_run, delta_assoc))
        cov = PrivacyEvent("covariance x l", eps_cov, delta_cov,
                           sensitivity=sens_cov, sigma=sigma_cov)
        assoc = PrivacyEvent("association x l", eps_assoc, delta_assoc,
                             sensitivity=sens_assoc, sigma=sigma_assoc)
        ledger = PrivacyLedger([*bound_events, cov, assoc], composition="basic", delta=delta)
        return [cov, assoc], sigma_cov, sigma_assoc, ledger

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit ``l`` independent private regressions.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self : object
        """
        self._reset()
        X, y = validate_features_and_labels(self, X, y)
        private = self._validate_privacy_params()
        single_output = y.ndim == 1
        Y = y[:, None] if single_output else y
        n, d = X.shape
        n_outputs = Y.shape[1]
        p = d + int(self.fit_intercept)
        y_bound = label_magnitude(self.y_bound)  # invalid input refused before any spend
        missing = [name for name, value in (("x_bound", self.x_bound), ("y_bound", y_bound))
                   if value is None]
        bound_eps = bound_epsilons(missing, private=private, bounds=self.bounds,
                                   bounds_budget=self.bounds_budget, epsilon=self.epsilon)
        check_bounds_feasible(n, bound_eps)
        delta = float(self.delta)
        epsilon = float(self.epsilon) if private else math.inf
        epsilon = difference_at_most(epsilon,
                                     *(eps for eps in bound_eps.values() if math.isfinite(eps)))
        # The planned (epsilon, delta) does not depend on the bounds' values.
        planned = self._events(n, n_outputs, 1.0, 1.0, epsilon, delta, private,
                               planned_bound_events(bound_eps))[3]
        check_bound_scales(self.x_bound, y_bound, n_outputs)
        self._check_budget(planned)
        x_bound = self.x_bound
        bound_events = []
        source = statistics_source(X, y, verbose=self.verbose, name=type(self).__name__)
        if bound_eps:
            counts = count_bounds(None, None, source)  # releases nothing; refuses NaN
            check_data_bounds_supported(counts, bound_eps)
            self._spend(planned)
            rng_bounds = self._secret_rngs("bounds")["bounds"]
            estimated, bound_events = release_bounds(counts, bound_eps, rng_bounds,
                                                     n_samples=n)
            x_bound = estimated.get("x_bound", x_bound)
            y_bound = estimated.get("y_bound", y_bound)
        x_eff = 0.0
        if x_bound is not None:
            x_eff = (math.hypot(x_bound, self.intercept_scaling)
                     if self.fit_intercept else float(x_bound))
        _, sigma_cov, sigma_assoc, ledger = self._events(
            n, n_outputs, 0.0 if x_bound is None else x_bound, y_bound, epsilon, delta,
            private, bound_events,
        )
        # The statistics pass releases nothing and refuses NaN/inf in X and
        # y (validate_data leaves finiteness to it): it runs before the spend
        # unless the bounds were estimated (their counting pass refused bad
        # input first).
        stats = sufficient_statistics(
            None, source=source, x_bound=x_bound, y_bound=y_bound,
            fit_intercept=self.fit_intercept, intercept_scaling=self.intercept_scaling,
        )
        if bound_eps:
            self._settle(ledger)
        else:
            self._spend(ledger)
        Sigma = stats.xtx / n
        G = stats.xty / n
        if self.ridge == "theory" or (self.ridge == "auto" and not private):
            w_scale = self.w_bound if self.w_bound is not None else (
                (y_bound / x_eff) if (y_bound and x_eff) else 1.0
            )
            lam = 0.0 if not private else theory_ridge(p, sigma_cov, sigma_assoc, w_scale)
        elif self.ridge == "auto":
            lam = None  # chosen below from the released statistics of all runs
        else:
            lam = float(self.ridge)

        rng = self._secret_rngs("noise")["noise"]
        # Pass 1: every run's released covariance (its eigendecomposition) and
        # released association (its coordinates in that eigenbasis).
        eigvals = np.empty((n_outputs, p))
        eigvecs = np.empty((n_outputs, p, p))
        coords = np.empty((n_outputs, p))
        shift = 0.0 if lam is None else lam
        eye = np.eye(p)
        for start in range(0, n_outputs, _RUN_BATCH):
            stop = min(start + _RUN_BATCH, n_outputs)
            k = stop - start
            M = _noisy_covariances(k, Sigma, sigma_cov, rng, self.fit_intercept) + shift * eye
            g = add_gaussian(G[:, start:stop].T, sigma_assoc, rng)
            eigvals[start:stop], eigvecs[start:stop] = _eigh_each(M)
            coords[start:stop] = np.einsum("kji,kj->ki", eigvecs[start:stop], g)
        if lam is None:
            # One ridge shared by the runs (post-processing of their released
            # values): the risk rule on the runs' mean spectrum, every run's
            # association in its own eigenbasis.
            lam = risk_minimising_ridge(eigvals.mean(axis=0), coords.T, sigma_cov,
                                        sigma_assoc)
            eigvals += lam
        # Pass 2: the solves, eigenvalues repaired as in every SSP solve.
        if lam > 0:
            inv = 1.0 / np.maximum(eigvals, lam)
        else:
            top = np.abs(eigvals).max(axis=1, keepdims=True)
            floor = (1e-10 * np.maximum(top, 1.0) if sigma_cov > 0
                     else p * np.finfo(float).eps * top)
            keep = eigvals > floor
            inv = np.where(keep, 1.0 / np.where(keep, eigvals, 1.0), 0.0)
        W = np.einsum("kij,kj->ik", eigvecs, coords * inv)

        self.coef_, self.intercept_ = split_intercept(
            W, self.fit_intercept, self.intercept_scaling, single_output
        )
        self.n_outputs_ = n_outputs
        self.ridge_ = lam
        self.noise_std_ = {"covariance": sigma_cov, "association": sigma_assoc}
        self.x_bound_, self.y_bound_ = x_bound, y_bound
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The non-private mode adds no noise: refits agree.
        tags.non_deterministic = not math.isinf(self.epsilon)
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags
