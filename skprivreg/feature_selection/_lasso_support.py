"""Private Lasso support selection and regression (Smith & Thakurta, COLT 2013)."""

import argparse
import math
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.feature_selection import SelectorMixin

from .._compat import HasMethods, Interval, StrOptions, check_is_fitted, fit_context, validate_data
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import ConfigurationError, PrivateTestFailed
from ..linear_model._base import LinearPredictMixin
from ..mechanisms import laplace_distance_threshold
from ._perturbation import (
    minimum_penalty,
    perturbation_distance,
    perturbation_penalty,
    replace_one_calibration,
)
from ._rules import LarsEntryRule, LassoSupportRule
from ._stability import (
    BOTTOM,
    _warn_if_release_unlikely,
    propose_test_release,
    run_stable_mode,
    stable_mode_ledger,
    subsample_plan,
)

__all__ = [
    "UnstableSupportError",
    "PrivateLassoSupportSelector",
    "PrivateLassoRegressor",
    "plan_command",
    "demo_case",
]

class UnstableSupportError(PrivateTestFailed):
    """The private stability test output bottom: no support is released.

    The budget of the call is spent and recorded before this is raised.
    The outcome is released as PASS/FAIL only: the message and the
    attributes hold public values alone, ``epsilon``, ``delta`` (the
    parameters) and ``threshold`` (the public threshold of the test; ``None``
    in the non-private mode ``epsilon=inf``). No noisy or noiseless distance
    is ever attached.
    """

    def __init__(self, epsilon, delta, threshold):
        self.epsilon = epsilon
        self.delta = delta
        self.threshold = threshold
        if math.isinf(epsilon):
            message = (
                "epsilon=inf (non-private mode): the selection rule could not be "
                "evaluated on the data (it needs at least 2 rows and a solver that "
                "converges), so no support is released."
            )
        else:
            message = (
                "The private Lasso support is not stable enough to release (bottom) at "
                f"epsilon={epsilon:.4g}, delta={delta:.3g}. The budget is spent. More data, "
                "a larger epsilon, sampling='partition', or a smaller max_features can help."
            )
        super().__init__(message)


_SELECTION_CONSTRAINTS = {
    "max_features": [Interval(Integral, 1, None, closed="left"), None],
    "method": [StrOptions({"subsample", "perturbation"})],
    "selection_rule": [StrOptions({"lasso", "lars"})],
    "alpha": [Interval(Real, 0, None, closed="neither"), None],
    "noise_level": [Interval(Real, 0, None, closed="neither"), None],
    "lambda_scale": [Interval(Real, 0, None, closed="neither")],
    "sampling": [StrOptions({"poisson", "partition"})],
    "subsample_rate": [Interval(Real, 0, 1, closed="neither"), None],
    "n_subsamples": [Interval(Integral, 1, None, closed="left"), StrOptions({"paper"})],
    "max_appearances": [Interval(Integral, 1, None, closed="left"), None],
    "fit_intercept": ["boolean"],
    "standardize": ["boolean"],
    "lasso_params": [dict, None],
    "rsc_constant": [Interval(Real, 0, 0.5, closed="neither"), None],
    "penalty": [Interval(Real, 0, None, closed="neither"), None],
    "n_reference": [Interval(Integral, 1, None, closed="left"), None],
    "on_failure": [StrOptions({"raise", "empty"})],
    "n_jobs": [Integral, None],
}


# Parameters that apply to one configuration only, with their defaults. A
# value other than the default where the parameter does not apply is refused
# before any spend: a parameter is used or rejected, never ignored.
_SUBSAMPLE_ONLY = {
    "selection_rule": "lasso",
    "alpha": None,
    "lambda_scale": 1.0,
    "sampling": "poisson",
    "subsample_rate": None,
    "n_subsamples": 1000,
    "max_appearances": None,
    "standardize": False,
    "lasso_params": None,
}
_PERTURBATION_ONLY = {
    "rsc_constant": None,
    "penalty": None,
    "n_reference": None,
    "x_bound": None,
    "y_bound": None,
}


def _differs(value, default):
    if default is None:
        return value is not None
    return bool(value != default)


def _check_applicable(estimator, names=None):
    """Refuse parameters that the chosen configuration would not use (public facts only).

    ``names`` restricts the check to the estimator's own parameter names
    (the regressor has no ``x_bound``/``y_bound``; its bounds serve stage 2).
    """
    params = estimator.get_params(deep=False)
    names = set(params) if names is None else set(names)
    unused = {}

    def refuse(keys, reason):
        for key, default in keys.items():
            if key in names and _differs(params[key], default):
                unused.setdefault(reason, []).append(key)

    if params["method"] == "perturbation":
        refuse(_SUBSAMPLE_ONLY, "method='perturbation'")
        if params["penalty"] is not None:
            refuse({"noise_level": None, "n_reference": None}, "an explicit penalty")
    else:
        refuse(_PERTURBATION_ONLY, "method='subsample'")
        if params["selection_rule"] == "lars":
            refuse(
                {"alpha": None, "noise_level": None, "lambda_scale": 1.0, "lasso_params": None},
                "selection_rule='lars'",
            )
        elif params["alpha"] is not None:
            refuse({"noise_level": None, "lambda_scale": 1.0}, "an explicit alpha")
        if params["sampling"] == "partition":
            refuse({"n_subsamples": 1000, "max_appearances": None}, "sampling='partition'")
    if unused:
        parts = [f"{', '.join(keys)} (not used with {why})" for why, keys in unused.items()]
        raise ConfigurationError(
            "Parameters that the chosen configuration does not use: "
            + "; ".join(parts)
            + ". Leave them at their defaults or choose the configuration that uses them."
        )


class PrivateLassoSupportSelector(DPEstimatorMixin, SelectorMixin, BaseEstimator):
    """Differentially private Lasso support selection (Smith & Thakurta, COLT 2013).

    Releases a set of columns on which the Lasso is *stable*, or nothing
    (``bottom``). The default ``method='subsample'`` is the paper's
    Algorithm 1 (``A_samp``): the selection rule ``f`` (the support of a
    Lasso, or the first ``s`` variables on the Lasso path) is evaluated on
    ``m`` random subsamples of the rows; the most frequent support is
    released iff its vote margin passes a Laplace distance test:

    .. math::
        \\hat d = \\frac{c_{(1)} - c_{(2)}}{2K} - 1, \\qquad
        \\text{release iff } \\hat d + \\mathrm{Lap}(1/\\varepsilon)
        > T = \\frac{\\ln(1/\\delta)}{\\varepsilon},

    where ``c_(1) >= c_(2)`` are the two largest vote counts and no row is
    in more than ``K`` subsamples. Each row joins each subsample with
    probability ``q = epsilon / (32 ln(1/delta))`` (the paper's rate); the
    default ``m = 1000`` replaces the paper's ``ln(n/delta)/q^2`` (millions of
    fits), which the privacy proof does not need.

    **Guarantee.** Full DP, privacy unit = one row ``(x_i, y_i)``,
    ``(epsilon, delta/2)``-DP under replace-one neighbours, recorded as one
    replace-one event ``(epsilon, delta/2)``; the whole budget goes to the
    one distance test. ``method='subsample'``: a replaced row keeps its
    inclusion pattern, so at most ``K`` votes move, the proxy moves by at
    most 1 and is at most 0 wherever the output could differ; the test passes
    there with probability at most ``delta/2`` (the same holds under
    add/remove). ``method='perturbation'``: its proxy moves by at most 1
    under add/remove at a fixed ``Lambda``; a replace-one neighbour is two
    such steps, so the proxy moves by at most 2 and is at most 1 wherever
    the support differs, and the test uses ``Lap(2/epsilon)`` with
    ``T = 1 + 2 ln(1/delta)/epsilon`` (see
    :func:`~skprivreg.feature_selection._perturbation.replace_one_calibration`).
    The spend is recorded before the data is read, and one ``fit`` spends
    the whole budget whatever the outcome; refitting until something is
    released costs the budget per attempt. The outcome of the test is
    released as PASS/FAIL only (no noisy distance). Choose
    ``delta <= 1/(10 n)``.

    **No data-dependent preprocessing before this step.** The proof needs
    every subsample's answer to depend on its own rows only: do not put a
    ``StandardScaler`` (fitted on all rows) before the selector in a
    ``Pipeline``; use ``standardize=True`` / ``fit_intercept=True``, which
    scale and centre inside each subsample. For the same reason the penalty
    is computed from each subsample's own size, and no solver is
    warm-started across subsamples.

    **Sample size.** If the non-private rule finds the support with
    probability about 0.75 at ``N_1`` rows, expect release at about
    ``n ~ 32 ln(1/delta) N_1 / epsilon`` (``442 N_1`` at ``epsilon=1``,
    ``delta=1e-6``; about half that with ``sampling='partition'``).
    ``python -m skprivreg plan lasso`` prints the planning numbers.

    **Failure.** ``bottom`` raises :class:`UnstableSupportError`
    (``on_failure='raise'``, the estimator stays unfitted) or gives an empty
    support with ``stable_=False`` (``on_failure='empty'``); the budget is
    recorded first in both cases. A *released* empty support
    (``stable_=True``, no column) is a different, legitimate answer: the rule
    stably selects nothing; with ``selection_rule='lasso'`` it is what tiny
    subsamples (about 10 rows) tend to release, so check the rows per
    subsample when planning. If the most frequent vote comes from degenerate
    subsamples (fewer than 2 rows, or a solver failure), the output is
    ``bottom``.

    ``method='perturbation'`` (paper §4.2) is **theoretical**: its
    worst-case slacks need ``Lambda > 16 s^2 / Psi`` and in practice return
    ``bottom`` except on toy data. It is implemented with the corrected test
    (the paper's version is not private, see the docs).

    **Parameters are used or refused.** A parameter that the chosen
    configuration does not use (``x_bound`` with ``method='subsample'``,
    ``alpha`` with ``selection_rule='lars'``, ``n_subsamples`` with
    ``sampling='partition'``, ...) raises :class:`ConfigurationError` before
    any spend instead of being ignored.

    Parameters
    ----------
    epsilon : float, default=1.0
        ``np.inf`` is the non-private test mode (the rule on the full data,
        :class:`PrivacyLeakWarning`).
    delta : float in (0, 1), default=1e-6
    max_features : int or None, default=None
        ``s``. Required for ``selection_rule='lars'`` and the perturbation
        method; for ``'lasso'`` it truncates each subsample's support to the
        ``s`` largest ``|coef|``.
    method : {'subsample', 'perturbation'}, default='subsample'
    selection_rule : {'lasso', 'lars'}, default='lasso'
        ``'lasso'``: support of ``Lasso(alpha_j)`` on the subsample;
        ``'lars'``: the first ``s`` variables to enter its Lasso path (no
        tuning, no noise level).
    alpha : float or None, default=None
        sklearn-scale penalty used on every subsample
        (``Lambda_j = alpha n_j`` in the paper's sum form).
    noise_level : float or None, default=None
        Public noise level ``sigma`` (y units). With ``alpha=None``:
        ``alpha_j = lambda_scale sigma sqrt(ln p / n_j)``. With both
        ``None`` (the default), each subsample estimates its own ``sigma``
        from its own rows by the scaled Lasso (Sun & Zhang 2012; see
        :func:`~skprivreg.feature_selection._rules.scaled_lasso`), which keeps
        the rule local to the subsample and needs no tuning. Under
        ``method='perturbation'`` it sets ``Lambda`` when ``penalty`` is None.
    lambda_scale : float, default=1.0
        8 is the paper's Theorem 38, 4 its Theorem 7; these proof constants
        zero realistic coefficients.
    sampling : {'poisson', 'partition'}, default='poisson'
        Capped Bernoulli subsamples (the paper) or ``floor(1/q)`` disjoint
        blocks (``K = 1``; about half the ``n`` of poisson, one full-data
        fit of work).
    subsample_rate : float in (0, 1) or None, default=None
        ``q``; ``None`` is ``epsilon / (32 ln(1/delta))``.
    n_subsamples : int or 'paper', default=1000
        ``m`` (poisson). ``'paper'`` is ``ceil(ln(n/delta)/q^2)``: it depends
        on ``n``, which is then public.
    max_appearances : int or None, default=None
        ``K`` (poisson); ``None`` is ``max(1, floor(2mq))``.
    fit_intercept : bool, default=False
        Centre inside each subsample (the paper has no intercept).
    standardize : bool, default=False
        Scale columns inside each subsample (never globally).
    lasso_params : dict or None, default=None
        ``tol`` (1e-6) and ``max_iter`` (5000) of the subsample Lasso.
    rsc_constant : float in (0, 1/2) or None, default=None
        ``Psi`` (perturbation only).
    penalty : float or None, default=None
        Sum-form ``Lambda`` (perturbation only); must exceed ``16 s^2 / Psi``.
    n_reference : int or None, default=None
        Public ``n`` for ``Lambda = 4 sigma~ sqrt(n_ref ln p)``
        (perturbation, when ``penalty`` is None); ``None`` uses the current
        ``n`` (n-public).
    x_bound, y_bound : float or None, default=None
        Perturbation only, and required there (public values you declare):
        entries are clipped to ``|x| <= x_bound``, ``|y| <= y_bound`` and
        rescaled to the paper's domain. Refused with ``method='subsample'``,
        which needs no bounds.
    on_failure : {'raise', 'empty'}, default='raise'
    n_jobs : int or None, default=None
        joblib workers over subsamples; results do not depend on it.
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None
        The subsample pattern and the Laplace draw use independent children.
        A fixed seed is for tests: anyone who knows it can remove the noise.

    Attributes
    ----------
    support_ : ndarray of bool, shape (n_features_in_,)
        The released support (all False on bottom with ``on_failure='empty'``).
    selected_features_ : ndarray of int
    stable_ : bool
        True iff a support was released (the test's PASS/FAIL).
    threshold_ : float or None
        ``T`` (public): ``ln(1/delta)/epsilon`` (subsample) or
        ``1 + 2 ln(1/delta)/epsilon`` (perturbation); ``None`` at
        ``epsilon=inf``.
    subsample_rate_, n_subsamples_, max_appearances_ : float, int, int
        ``q, m, K`` used (``nan``/0 for the perturbation method).
    penalty_ : float or None
        Sum-form ``Lambda`` (perturbation only; public).
    epsilon_, delta_ : float
        The guarantee of this fit (``delta_ = delta/2``).
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Notes
    -----
    Vote counts, the vote margin, the noiseless distance, per-subsample
    supports and the actual subsample sizes are never stored, logged or
    put in messages. The running time of ``f`` depends on the data; timing
    side channels are out of scope.

    References
    ----------
    A. Smith and A. G. Thakurta, "Differentially private model selection via
    stability arguments and the robustness of the Lasso", COLT 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.feature_selection import PrivateLassoSupportSelector
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40000, 20))
    >>> y = X[:, :3] @ np.array([0.5, -0.5, 0.5]) + rng.normal(size=40000)
    >>> sel = PrivateLassoSupportSelector(2.0, 1e-6, max_features=3, selection_rule="lars",
    ...                                   sampling="partition", random_state=0).fit(X, y)
    >>> sel.get_support(indices=True)
    array([0, 1, 2])
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        **_SELECTION_CONSTRAINTS,
        "x_bound": [Interval(Real, 0, None, closed="neither"), None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        epsilon=1.0,
        delta=1e-6,
        *,
        max_features=None,
        method="subsample",
        selection_rule="lasso",
        alpha=None,
        noise_level=None,
        lambda_scale=1.0,
        sampling="poisson",
        subsample_rate=None,
        n_subsamples=1000,
        max_appearances=None,
        fit_intercept=False,
        standardize=False,
        lasso_params=None,
        rsc_constant=None,
        penalty=None,
        n_reference=None,
        x_bound=None,
        y_bound=None,
        on_failure="raise",
        n_jobs=None,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.max_features = max_features
        self.method = method
        self.selection_rule = selection_rule
        self.alpha = alpha
        self.noise_level = noise_level
        self.lambda_scale = lambda_scale
        self.sampling = sampling
        self.subsample_rate = subsample_rate
        self.n_subsamples = n_subsamples
        self.max_appearances = max_appearances
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.lasso_params = lasso_params
        self.rsc_constant = rsc_constant
        self.penalty = penalty
        self.n_reference = n_reference
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.on_failure = on_failure
        self.n_jobs = n_jobs
        self.accountant = accountant
        self.random_state = random_state

    # -- public configuration ---------------------------------------------
    def _selection_rule(self):
        """The subsample rule ``f`` (a picklable callable), from public parameters."""
        if self.selection_rule == "lars":
            if self.max_features is None:
                raise ConfigurationError("selection_rule='lars' needs max_features.")
            return LarsEntryRule(self.max_features, self.fit_intercept, self.standardize)
        params = {"tol": 1e-6, "max_iter": 5000, **(self.lasso_params or {})}
        unknown = set(params) - {"tol", "max_iter"}
        if unknown:
            raise ConfigurationError(
                f"lasso_params accepts tol and max_iter only, got {sorted(unknown)}."
            )
        return LassoSupportRule(
            alpha=self.alpha,
            noise_level=self.noise_level,
            lambda_scale=self.lambda_scale,
            max_features=self.max_features,
            fit_intercept=self.fit_intercept,
            standardize=self.standardize,
            tol=params["tol"],
            max_iter=params["max_iter"],
        )

    def _perturbation_setup(self, n, p):
        """The sum-form penalty ``Lambda``, from public facts only (n-public without one)."""
        missing = [
            name
            for name in ("rsc_constant", "max_features", "x_bound", "y_bound")
            if getattr(self, name) is None
        ]
        if missing:
            raise ConfigurationError(
                f"method='perturbation' needs {', '.join(missing)} (public values you "
                "declare; the entries are clipped to the bounds)."
            )
        if self.fit_intercept:
            raise ConfigurationError(
                "method='perturbation' has no intercept (the analysis has none); centre "
                "y and X with public constants instead."
            )
        s, psi = self.max_features, self.rsc_constant
        if self.penalty is not None:
            Lambda = float(self.penalty)
        else:
            if self.noise_level is None:
                raise ConfigurationError("method='perturbation' needs penalty or noise_level.")
            if p < 2:
                raise ConfigurationError("method='perturbation' with noise_level needs p >= 2.")
            n_ref = n if self.n_reference is None else self.n_reference
            Lambda = perturbation_penalty(self.noise_level, s, self.y_bound, n_ref, p)
        if not Lambda > minimum_penalty(s, psi):
            raise ConfigurationError(
                "method='perturbation' needs Lambda > 16 s^2 / Psi = "
                f"{minimum_penalty(s, psi):.4g} "
                f"(got Lambda = {Lambda:.4g}); privacy is not proven otherwise."
            )
        return Lambda

    # -- fit ----------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Select the support privately.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input is accepted by ``method='subsample'`` (CSR).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object

        Raises
        ------
        UnstableSupportError
            On bottom with ``on_failure='raise'`` (after recording the budget).
        """
        self._reset()
        _check_applicable(self)
        subsample = self.method == "subsample"
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse="csr" if subsample else False,
            dtype=[np.float64, np.float32],
            y_numeric=True,
            multi_output=False,
        )
        if not sparse.issparse(X):
            X = np.asarray(X)
        y = np.asarray(y, dtype=np.float64)
        private = self._validate_privacy_params()
        n, p = X.shape

        # The plan and its ledger: public facts only.
        if subsample:
            rule = self._selection_rule()
            plan = None
            if private:
                plan = subsample_plan(
                    self.epsilon,
                    self.delta,
                    sampling=self.sampling,
                    subsample_rate=self.subsample_rate,
                    n_subsamples=self.n_subsamples,
                    max_appearances=self.max_appearances,
                    n_samples=n,
                )
                _warn_if_release_unlikely(plan, self.epsilon)
            ledger = self._ledger(private, "lasso_support_subsample")
        else:
            Lambda = self._perturbation_setup(n, p)
            ledger = self._ledger(private, "lasso_support_perturbation")
        # Checked and recorded before any noisy value is computed: an
        # exception inside the mechanism never loses the spend.
        self._spend(ledger)

        rngs = self._secret_rngs("subsamples", "noise")
        if subsample:
            released, threshold = self._fit_subsample(X, y, rule, plan, private, rngs)
        else:
            released, threshold = self._fit_perturbation(X, y, Lambda, private, rngs["noise"])

        if released is BOTTOM and self.on_failure == "raise":
            # Leave the estimator unfitted, but keep the ledger of the spend.
            raise UnstableSupportError(self.epsilon, self.delta, threshold)
        self.stable_ = released is not BOTTOM
        support = np.zeros(p, dtype=bool)
        if self.stable_:
            support[list(released)] = True
        self.support_ = support
        self.selected_features_ = np.flatnonzero(support)
        self.threshold_ = threshold
        if subsample and plan is not None:
            self.subsample_rate_ = plan.subsample_rate
            self.n_subsamples_ = plan.n_subsamples
            self.max_appearances_ = plan.max_appearances
        else:
            self.subsample_rate_, self.n_subsamples_, self.max_appearances_ = math.nan, 0, 0
        self.penalty_ = None if subsample else Lambda
        self.epsilon_ = ledger.epsilon
        self.delta_ = ledger.delta
        return self

    def _ledger(self, private, name):
        """One replace-one event: ``(epsilon, delta/2)`` (both methods; see the class docstring)."""
        if not private:
            return PrivacyLedger([PrivacyEvent(name=name, epsilon=math.inf, delta=0.0)])
        return stable_mode_ledger(self.epsilon, self.delta, name=name)

    def _fit_subsample(self, X, y, rule, plan, private, rngs):
        """``(released support or BOTTOM, threshold)``; the threshold is ``None`` when not private."""
        if not private:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                key = rule(X, y)
            return (BOTTOM if not isinstance(key, tuple) else key), None
        released = run_stable_mode(
            X,
            y,
            rule,
            plan,
            self.epsilon,
            self.delta,
            n_jobs=self.n_jobs,
            subsample_rng=rngs["subsamples"],
            noise_rng=rngs["noise"],
        )
        return released, plan.threshold

    def _fit_perturbation(self, X, y, Lambda, private, rng):
        s = self.max_features
        # Per-entry clipping after public scaling: a per-row map (spec §2.1).
        # No warning: whether some entry was clipped depends on one record.
        X_clip = np.clip(X / self.x_bound, -1.0, 1.0)
        y_clip = s * np.clip(y / self.y_bound, -1.0, 1.0)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            support, d_hat = perturbation_distance(X_clip, y_clip, s, Lambda, self.rsc_constant)
        if not private:
            return support, None
        # Replace-one calibration (derived in replace_one_calibration): the
        # proxy moves by at most 2 and is at most 1 where a replace-one
        # neighbour's support differs, so Lap(2/eps) and T = 1 + 2 ln(1/delta)/eps
        # give (eps, delta/2)-DP under replace-one.
        sensitivity, offset = replace_one_calibration()
        released = propose_test_release(
            support, d_hat, self.epsilon, self.delta, rng, sensitivity=sensitivity, offset=offset
        )
        threshold = laplace_distance_threshold(self.epsilon, self.delta, sensitivity, offset)
        return released, threshold

    def __sklearn_is_fitted__(self):
        return hasattr(self, "support_")

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self.method == "subsample"
        tags.target_tags.required = True
        return tags


class PrivateLassoRegressor(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Private sparse linear regression: private Lasso support, then SSP on it.

    Stage 1 runs :class:`PrivateLassoSupportSelector` with
    ``epsilon_1 = selection_fraction * epsilon``: ``(epsilon_1, delta/2)``-DP
    under replace-one neighbours for both methods (threshold
    ``ln(1/delta)/epsilon_1`` for ``'subsample'``,
    ``1 + 2 ln(1/delta)/epsilon_1`` with ``Lap(2/epsilon_1)`` for
    ``'perturbation'``). Stage 2 fits
    :class:`~skprivreg.linear_model.SSPRegressor` (sufficient statistics
    perturbation, analytic Gaussian mechanism, GDP composition of its two
    releases) on the selected columns with ``(epsilon_2, delta/2)``,
    ``epsilon_2 = epsilon - epsilon_1``, replace-one. By adaptive sequential
    composition of two replace-one guarantees the whole fit is
    ``(epsilon, delta)``-DP, full DP (one row), replace-one neighbours. Stage 2
    may use the released support: it is public after stage 1. The plan of
    both stages is checked and recorded on the accountant before the data is
    read; after the fit it is replaced by the stages' own ledgers (the same
    guarantee, at most the plan), or by the selection's alone when stage 2
    does not run.

    Stage 2 clips the selected entries to ``|x| <= feature_bound`` (so rows
    have norm ``<= feature_bound sqrt(k)``) and ``|y| <= target_bound``.
    Missing bounds are estimated privately by SSP inside ``epsilon_2``
    (``bounds='private'``, with SSP's stated budget share). With an
    intercept, the selection centres inside each subsample and SSP appends a
    constant column. ``method='perturbation'`` also clips its test to
    ``feature_bound``/``target_bound`` and requires both (refused before any
    spend otherwise). With every parameter at its default the regressor fits:
    the selection estimates its noise level inside each subsample and stage 2
    estimates its bounds privately.

    **Failure.** On bottom with ``on_failure='raise'``,
    :class:`UnstableSupportError` is raised with the stage-1 spend recorded
    (stage 2 does not run, and its planned share is released back). With ``on_failure='empty'`` stage 2 runs
    on the empty support: an intercept-only DP model (a DP mean through the
    constant column) if ``fit_intercept``, else all zeros (nothing more
    spent).

    **Sample size.** Selection dominates: see
    :class:`PrivateLassoSupportSelector` (``n ~ 32 ln(1/delta) N_1 /
    epsilon_1``). The default ``selection_fraction=0.75`` reflects that the
    SSP error at that ``n`` is already small.

    Parameters
    ----------
    epsilon, delta : float
        Total budget of one fit.
    max_features, method, selection_rule, alpha, noise_level, lambda_scale, \
sampling, subsample_rate, n_subsamples, max_appearances, standardize, \
lasso_params, rsc_constant, penalty, n_reference, on_failure, n_jobs
        Passed to the selector (see :class:`PrivateLassoSupportSelector`);
        the perturbation method uses ``feature_bound``/``target_bound`` as
        its ``x_bound``/``y_bound``.
    selection_fraction : float in (0, 1), default=0.75
    estimator : 'ssp' or a skprivreg regressor, default='ssp'
        Stage 2. An instance is cloned and given ``epsilon_2``, ``delta/2``,
        the bounds, ``fit_intercept`` and its own random generator.
    feature_bound, target_bound : float or None, default=None
        ``B_x`` (per entry) and ``B_y``.
    fit_intercept : bool, default=True
    ridge : float or None, default=None
        SSP ridge; ``None`` is SSP's ``'auto'``.
    accountant : BudgetAccountant or None
    random_state : None, int or numpy.random.Generator
        Stage 1 and stage 2 get independent children.

    Attributes
    ----------
    selector_ : PrivateLassoSupportSelector
    support_ : ndarray of bool
    stable_ : bool
    coef_ : ndarray of shape (n_features_in_,)
        Zero off the support.
    intercept_ : float
    stage2_ : fitted stage-2 estimator or None
    epsilon_, delta_ : float
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        **_SELECTION_CONSTRAINTS,
        "selection_fraction": [Interval(Real, 0, 1, closed="neither")],
        "estimator": [StrOptions({"ssp"}), HasMethods(["fit", "predict", "set_params"])],
        "feature_bound": [Interval(Real, 0, None, closed="neither"), None],
        "target_bound": [Interval(Real, 0, None, closed="neither"), None],
        "ridge": [Interval(Real, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        epsilon=1.0,
        delta=1e-6,
        *,
        max_features=None,
        method="subsample",
        selection_rule="lasso",
        alpha=None,
        noise_level=None,
        lambda_scale=1.0,
        sampling="poisson",
        subsample_rate=None,
        n_subsamples=1000,
        max_appearances=None,
        fit_intercept=True,
        standardize=False,
        lasso_params=None,
        rsc_constant=None,
        penalty=None,
        n_reference=None,
        selection_fraction=0.75,
        estimator="ssp",
        feature_bound=None,
        target_bound=None,
        ridge=None,
        on_failure="raise",
        n_jobs=None,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.max_features = max_features
        self.method = method
        self.selection_rule = selection_rule
        self.alpha = alpha
        self.noise_level = noise_level
        self.lambda_scale = lambda_scale
        self.sampling = sampling
        self.subsample_rate = subsample_rate
        self.n_subsamples = n_subsamples
        self.max_appearances = max_appearances
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.lasso_params = lasso_params
        self.rsc_constant = rsc_constant
        self.penalty = penalty
        self.n_reference = n_reference
        self.selection_fraction = selection_fraction
        self.estimator = estimator
        self.feature_bound = feature_bound
        self.target_bound = target_bound
        self.ridge = ridge
        self.on_failure = on_failure
        self.n_jobs = n_jobs
        self.accountant = accountant
        self.random_state = random_state

    def _budget_split(self, private):
        if not private:
            return math.inf, math.inf
        eps1 = self.selection_fraction * self.epsilon
        return eps1, self.epsilon - eps1

    def _make_selector(self, eps1, rng):
        perturbation = self.method == "perturbation"
        return PrivateLassoSupportSelector(
            epsilon=eps1,
            delta=self.delta,
            max_features=self.max_features,
            method=self.method,
            selection_rule=self.selection_rule,
            alpha=self.alpha,
            noise_level=self.noise_level,
            lambda_scale=self.lambda_scale,
            sampling=self.sampling,
            subsample_rate=self.subsample_rate,
            n_subsamples=self.n_subsamples,
            max_appearances=self.max_appearances,
            fit_intercept=False if perturbation else self.fit_intercept,
            standardize=self.standardize,
            lasso_params=self.lasso_params,
            rsc_constant=self.rsc_constant,
            penalty=self.penalty,
            n_reference=self.n_reference,
            # The bounds of the perturbation test are the regressor's bounds;
            # the subsample method uses none.
            x_bound=self.feature_bound if perturbation else None,
            y_bound=self.target_bound if perturbation else None,
            on_failure=self.on_failure,
            n_jobs=self.n_jobs,
            # The regressor records the whole plan itself, before either stage.
            accountant=None,
            random_state=rng,
        )

    def _make_stage2(self, eps2, delta2, n_selected, fit_intercept, rng):
        from ..linear_model import SSPRegressor  # noqa: PLC0415 - avoids an import cycle

        x_bound = None
        if self.feature_bound is not None and n_selected > 0:
            x_bound = self.feature_bound * math.sqrt(n_selected)
        if n_selected == 0:
            x_bound = 1.0  # the constant column alone (intercept-only model)
        if self.estimator == "ssp":
            return SSPRegressor(
                epsilon=eps2,
                delta=delta2,
                x_bound=x_bound,
                y_bound=self.target_bound,
                fit_intercept=fit_intercept,
                ridge="auto" if self.ridge is None else self.ridge,
                random_state=rng,
            )
        stage2 = clone(self.estimator)
        known = stage2.get_params(deep=False)
        updates = {"epsilon": eps2, "delta": delta2, "random_state": rng}
        optional = {
            "x_bound": x_bound,
            "y_bound": self.target_bound,
            "fit_intercept": fit_intercept,
            "accountant": None,
        }
        updates.update({k: v for k, v in optional.items() if k in known})
        return stage2.set_params(**updates)

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Select the support privately, then fit private coefficients on it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._reset()
        _check_applicable(self, names=set(self.get_params(deep=False)) - {"x_bound", "y_bound"})
        if self.method == "perturbation":
            missing = [n for n in ("feature_bound", "target_bound") if getattr(self, n) is None]
            if missing:
                raise ConfigurationError(
                    f"method='perturbation' needs {', '.join(missing)} (public bounds you "
                    "declare; the perturbation test clips to them)."
                )
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, multi_output=False)
        private = self._validate_privacy_params()
        eps1, eps2 = self._budget_split(private)
        delta2 = self.delta / 2.0
        # The plan of both stages (public facts only) is checked and recorded
        # before the data is read; the nested estimators have no accountant.
        planned = PrivacyLedger(
            [
                PrivacyEvent("lasso_support", eps1, self.delta / 2.0 if private else 0.0),
                PrivacyEvent("stage2", eps2, delta2 if private else 0.0),
            ]
        )
        self._spend(planned)
        rngs = self._public_rngs("selection", "estimation")

        selector = self._make_selector(eps1, rngs["selection"])
        try:
            with warnings.catch_warnings():
                if not private:
                    warnings.simplefilter("ignore", category=UserWarning)
                selector.fit(X, y)
        except UnstableSupportError:
            # Stage 2 never runs: only the selection's spend remains recorded
            # (the plan was recorded before the data was read).
            self._settle(selector.privacy_spent_)
            raise
        self.selector_ = selector
        support = selector.support_
        k = int(support.sum())
        p = X.shape[1]
        coef = np.zeros(p)
        intercept = 0.0
        ledgers = [selector.privacy_spent_]
        self.stage2_ = None
        if k > 0 or self.fit_intercept:
            if k > 0:
                Z = X[:, support]
                if self.feature_bound is not None:
                    # Per-entry clipping (a per-row map); no warning, as
                    # whether an entry was clipped depends on one record.
                    Z = np.clip(Z, -self.feature_bound, self.feature_bound)
                fit_intercept = self.fit_intercept
            else:
                Z = np.ones((X.shape[0], 1))
                fit_intercept = False
            stage2 = self._make_stage2(eps2, delta2, k, fit_intercept, rngs["estimation"])
            with warnings.catch_warnings():
                if not private:
                    warnings.simplefilter("ignore", category=UserWarning)
                stage2.fit(Z, y)
            self.stage2_ = stage2
            ledgers.append(stage2.privacy_spent_)
            if k > 0:
                coef[support] = np.ravel(stage2.coef_)
                intercept = float(np.ravel(stage2.intercept_)[0])
            else:
                intercept = float(np.ravel(stage2.coef_)[0])
        # The final ledger replaces the plan (same guarantee, at most the plan).
        ledger = PrivacyLedger.concatenate(ledgers, composition="gdp" if private else "basic")
        self._settle(ledger)
        self.coef_ = coef
        self.intercept_ = intercept
        self.support_ = support
        self.stable_ = selector.stable_
        self.epsilon_ = ledger.epsilon
        self.delta_ = ledger.delta
        return self

    def __sklearn_is_fitted__(self):
        return hasattr(self, "coef_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


# ---------------------------------------------------------------------------
# Planning (public numbers only) and demo
# ---------------------------------------------------------------------------
def plan_command(argv):
    """``python -m skprivreg plan lasso``: public planning numbers of ``A_samp``.

    Touches no data. Prints ``q, m, K``, the threshold, the largest possible
    distance, the vote margin needed for a 95% release probability, the
    number of fits and the rough sample size ``32 ln(1/delta) N_1/epsilon``.
    """
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg plan lasso",
        description="Planning numbers of the private Lasso support selector (no data used).",
    )
    parser.add_argument("--n", type=int, default=None, help="number of rows (n-public planning)")
    parser.add_argument("--p", "--d", dest="p", type=int, default=None, help="number of features")
    parser.add_argument("--s", type=int, default=None, help="target support size")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--sampling", choices=("poisson", "partition"), default="poisson")
    parser.add_argument("--subsample-rate", type=float, default=None)
    parser.add_argument("--n-subsamples", default="1000", help="int or 'paper'")
    parser.add_argument("--max-appearances", type=int, default=None)
    parser.add_argument(
        "--n1",
        type=float,
        default=None,
        help="rows at which the non-private rule finds the support w.p. ~0.75",
    )
    parser.add_argument("--rsc", type=float, default=None, help="Psi, for the perturbation method")
    args = parser.parse_args(argv)
    m_arg = args.n_subsamples if args.n_subsamples == "paper" else int(args.n_subsamples)
    try:
        plan = subsample_plan(
            args.epsilon,
            args.delta,
            sampling=args.sampling,
            subsample_rate=args.subsample_rate,
            n_subsamples=m_arg,
            max_appearances=args.max_appearances,
            n_samples=args.n,
        )
    except ValueError as exc:
        parser.error(str(exc))
    q, m, K = plan.subsample_rate, plan.n_subsamples, plan.max_appearances
    rows = [
        ("sampling", plan.sampling),
        ("subsample rate q", f"{q:.6g}"),
        ("subsamples m (Lasso fits)", f"{m}"),
        ("max appearances K", f"{K}"),
        ("threshold T = ln(1/delta)/eps", f"{plan.threshold:.4g}"),
        ("max distance m/(2K) - 1", f"{plan.max_distance:.4g}"),
        ("release prob. of a perfectly stable f", f"{plan.max_release_probability:.4f}"),
        (
            "vote margin (c1-c2)/m for 95% release",
            f"{plan.required_gap_fraction(args.epsilon):.4f}",
        ),
        ("recorded guarantee", f"({args.epsilon:g}, {args.delta / 2:.3g})"),
    ]
    if args.n is not None:
        rows.append(("expected rows per subsample ~ n q", f"{args.n * q:.1f}"))
        if args.delta > 1.0 / (10 * args.n):
            rows.append(("WARNING", "delta > 1/(10 n): choose a smaller delta"))
    if args.n1 is not None:
        rows.append(("rough n needed ~ N1/q (poisson)", f"{args.n1 / q:.4g}"))
        rows.append(("rough n needed ~ N1/(2q) (partition)", f"{args.n1 / (2 * q):.4g}"))
    if args.rsc is not None and args.s is not None:
        rows.append(
            (
                "perturbation: Lambda must exceed 16 s^2/Psi",
                f"{minimum_penalty(args.s, args.rsc):.4g}",
            )
        )
    if plan.max_distance < plan.threshold + math.log(20.0) / args.epsilon:
        rows.append(("WARNING", "even a perfectly stable f is released w.p. < 0.95"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


def demo_case():
    """A configuration where private Lasso regression works: n = 60000, p = 30, s = 3."""
    rng = np.random.default_rng(20130601)
    n, p, s = 60_000, 30, 3
    theta = np.zeros(p)
    theta[[2, 11, 23]] = [0.8, -0.6, 0.5]
    X = rng.normal(size=(n + 5000, p))
    y = 1.0 + X @ theta + rng.normal(size=n + 5000)
    estimator = PrivateLassoRegressor(
        epsilon=2.0,
        delta=1e-6,
        max_features=s,
        selection_rule="lars",
        sampling="partition",
        feature_bound=3.0,
        target_bound=6.0,
        on_failure="empty",
        random_state=0,
    )
    return {
        "name": "PrivateLasso (lars), n=6e4 p=30 s=3",
        "estimator": estimator,
        "notion": "full",
        "X_train": X[:n],
        "y_train": y[:n],
        "X_test": X[n:],
        "y_test": y[n:],
    }
