"""Private Lasso support selection (Smith & Thakurta, COLT 2013): the selector."""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin

from .._compat import Interval, StrOptions, check_is_fitted, fit_context, validate_data
from .._rows import read_into_memory
from .._warnings import quiet_warnings
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..bounds import (
    check_range_bounds_feasible,
    check_x_range,
    check_y_bound,
    estimate_ranges,
    range_bound_epsilons,
    x_range_magnitude,
    y_bound_magnitude,
)
from ..exceptions import ConfigurationError, PrivateTestFailedWarning, UnstableSupportError
from ..mechanisms import difference_at_most, laplace_distance_threshold
from ._params import X_BOUND_WITHDRAWN
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

__all__ = ["UnstableSupportError", "PrivateLassoSupportSelector"]

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
    "on_fail": [StrOptions({"raise", "empty"})],
    "n_jobs": [Integral, None],
}

_BOUND_CONSTRAINTS = {
    "x_range": ["array-like", None],
    "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
    "bounds": [StrOptions({"private", "data"})],
    "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
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
    "x_range": None,
    "y_bound": None,
    "bounds": "private",
    "bounds_budget": 0.1,
}


def _differs(value, default):
    if default is None:
        return value is not None
    if isinstance(value, str) or isinstance(default, str):
        return value != default
    return bool(np.any(np.asarray(value) != np.asarray(default)))


def _check_applicable(estimator, names=None):
    """Refuse parameters that the chosen configuration would not use (public facts only).

    ``names`` restricts the check to those parameter names (the regressor's
    ``x_range``, ``y_bound``, ``bounds`` and ``bounds_budget`` serve stage 2
    as well, so it leaves them out).
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
    ``delta <= 1/(10 n)``. With ``method='perturbation'`` and a bound not
    declared, ``bounds_budget * epsilon`` goes to its private estimate (pure
    DP, its own replace-one event, see **Bounds**) and the test gets the
    rest: ``(epsilon, delta/2)`` in total.

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
    :func:`lasso_plan` (``python -m skprivreg plan lasso``) gives the
    planning numbers.

    **Failure.** ``bottom`` raises :class:`~skprivreg.exceptions.UnstableSupportError`
    (``on_fail='raise'``, the estimator stays unfitted) or gives an empty
    support with ``stable_=False`` (``on_fail='empty'``); the budget is
    recorded first in both cases; with ``'empty'`` a
    :class:`~skprivreg.exceptions.PrivateTestFailedWarning` says so (the
    test's outcome is released, so the warning is too). The message states
    the recorded guarantee of the fit, ``(epsilon, delta/2)``. A *released* empty support
    (``stable_=True``, no column) is a different, legitimate answer: the rule
    stably selects nothing; with ``selection_rule='lasso'`` it is what tiny
    subsamples (about 10 rows) tend to release, so check the rows per
    subsample when planning. If the most frequent vote comes from degenerate
    subsamples (fewer than 2 rows, or a solver failure), the output is
    ``bottom``.

    ``method='perturbation'`` (paper §4.2) is **theoretical**: its
    worst-case slacks need ``Lambda > 16 s^2 / Psi`` and in practice return
    ``bottom`` except on toy data. It is implemented with a corrected test:
    the paper's test is not private as stated (see the user guide).

    **Bounds.** ``method='subsample'`` needs no bounds. ``method='perturbation'``
    clips each entry to its declared column range ``x_range`` and divides it
    by the column magnitude :math:`m_j = \\max(|l_j|, |h_j|)` (so entries lie
    in :math:`[-1, 1]`, the paper's domain), and clips the labels to
    ``y_bound`` and maps them to :math:`s\\,\\mathrm{clip}(y)/B_y`,
    :math:`B_y = \\max(|l_y|, |h_y|)`. A bound not declared is estimated
    privately with ``bounds_budget * epsilon`` split equally over the missing
    bounds (:func:`skprivreg.bounds.estimate_ranges`: ``x_range`` becomes
    :math:`[-\\hat B_x, \\hat B_x]` in every column, :math:`\\hat B_x` a
    private upper bound on :math:`\\max_j |x_{ij}|`; ``y_bound`` becomes
    :math:`[-\\hat B_y, \\hat B_y]`). If ``n`` is too small for that
    estimate, :class:`~skprivreg.exceptions.ConfigurationError` is raised before any spend, naming
    the ``n`` needed. ``bounds='data'`` reads the missing bounds from the data
    instead (not private: an event of infinite epsilon and a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`). When ``penalty`` is not given, ``Lambda``
    depends on :math:`B_y`; if the estimated :math:`\\hat B_y` (released)
    makes ``Lambda <= 16 s^2/Psi``, the test does not run,
    :class:`~skprivreg.exceptions.ConfigurationError` is raised and only the bound estimates stay
    spent. At ``epsilon=inf`` missing bounds mean no clipping and unit scale.

    **Parameters are used or refused.** A parameter that the chosen
    configuration does not use (``x_range`` with ``method='subsample'``,
    ``alpha`` with ``selection_rule='lars'``, ``n_subsamples`` with
    ``sampling='partition'``, ...) raises :class:`~skprivreg.exceptions.ConfigurationError` before
    any spend instead of being ignored.

    Parameters
    ----------
    epsilon : float, default=1.0
        ``np.inf`` is the non-private test mode (the rule on the full data,
        :class:`~skprivreg.exceptions.PrivacyLeakWarning`).
    delta : float in (0, 1), default=1e-6
        Choose it well below ``1/n_samples``.
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
    x_range : tuple, array of shape (n_features, 2) or None, default=None
        Perturbation only: per-column range ``(low, high)`` (floats, the same
        for every column, or arrays of shape ``(n_features,)``). A per-entry
        bound ``b`` is ``x_range=(-b, b)``. Refused with
        ``method='subsample'``, which needs no bounds.
    y_bound : float, (low, high) or None, default=None
        Perturbation only: label range (``B`` means ``[-B, B]``).
    bounds : {'private', 'data'}, default='private'
        Perturbation only: how missing bounds are obtained (see **Bounds**).
    bounds_budget : float in (0, 1), default=0.1
        Perturbation only: share of ``epsilon`` spent on missing bounds.
    on_fail : {'raise', 'empty'}, default='raise'
        What ``bottom`` gives (see **Failure**).
    n_jobs : int or None, default=None
        joblib workers over subsamples; results do not depend on it.
    accountant : BudgetAccountant or None, default=None
    random_state : None, int or numpy.random.Generator, default=None
        Seeds released randomness only, and this estimator draws none: the
        subsample pattern and the Laplace draw are secret, from independent
        children of fresh OS entropy in every fit (seeded only inside
        :func:`skprivreg.testing.reproducible_noise`).

    Attributes
    ----------
    support_ : ndarray of bool, shape (n_features_in_,)
        The released support (all False on bottom with ``on_fail='empty'``).
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
    x_range_, y_bound_ : tuple or None
        Ranges used by the perturbation test (declared or estimated); None
        for ``method='subsample'``.
    epsilon_, delta_ : float
        The guarantee of this fit (``delta_ = delta/2``).
    privacy_spent_ : PrivacyLedger
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    See Also
    --------
    PrivateLassoRegressor : This selection, then a private fit on the support.
    PrivateTopSSelector : Private top-s marginal screening (a baseline).
    lasso_plan : Public planning numbers for this selector.
    sklearn.feature_selection.SelectFromModel : Non-private selection, e.g. by a Lasso.

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
    >>> sel = PrivateLassoSupportSelector(epsilon=2.0, delta=1e-6, max_features=3,
    ...                                   selection_rule="lars",
    ...                                   sampling="partition", on_fail="empty",
    ...                                   random_state=0).fit(X, y)
    >>> sel.transform(X).shape[1] <= 3  # the released support: usually columns 0, 1, 2
    True
    """

    _renamed_parameters = {"x_bound": X_BOUND_WITHDRAWN, "on_failure": "on_fail"}

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        **_SELECTION_CONSTRAINTS,
        **_BOUND_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
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
        x_range=None,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        on_fail="raise",
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
        self.x_range = x_range
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.on_fail = on_fail
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
        # Checked here, as scikit-learn's Lasso would: an invalid value made every
        # subsample's fit fail, and the failures were released as a stable vote.
        tol, max_iter = params["tol"], params["max_iter"]
        if not (isinstance(tol, Real) and not isinstance(tol, bool) and 0 <= tol < math.inf):
            raise ConfigurationError(f"lasso_params['tol'] must be a real >= 0, got {tol!r}.")
        if not (isinstance(max_iter, Integral) and not isinstance(max_iter, bool)
                and max_iter >= 1):
            raise ConfigurationError(
                f"lasso_params['max_iter'] must be an integer >= 1, got {max_iter!r}.")
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

    def _subsample_config(self, n, private):
        """``(rule, plan)`` of the subsample method from public facts (``plan`` is
        ``None`` when not private); refuses what it cannot run with (``n_jobs=0``,
        the rule's parameters, a subsampling rate of 1 or more) before any spend."""
        effective_n_jobs(self.n_jobs)  # raises for n_jobs=0
        rule = self._selection_rule()
        if not private:
            return rule, None
        return rule, subsample_plan(
            self.epsilon,
            self.delta,
            sampling=self.sampling,
            subsample_rate=self.subsample_rate,
            n_subsamples=self.n_subsamples,
            max_appearances=self.max_appearances,
            n_samples=n,
        )

    def _check_perturbation_params(self, p):
        """Refuse parameters the perturbation method cannot run with (public facts only)."""
        missing = [name for name in ("rsc_constant", "max_features") if getattr(self, name) is None]
        if missing:
            raise ConfigurationError(
                f"method='perturbation' needs {', '.join(missing)} (public values you declare)."
            )
        if self.fit_intercept:
            raise ConfigurationError(
                "method='perturbation' has no intercept (the analysis has none); centre "
                "y and X with public constants instead."
            )
        if self.penalty is None:
            if self.noise_level is None:
                raise ConfigurationError("method='perturbation' needs penalty or noise_level.")
            if p < 2:
                raise ConfigurationError("method='perturbation' with noise_level needs p >= 2.")

    def _perturbation_setup(self, n, p, private):
        """Checked ranges, the epsilon of each missing bound, and ``Lambda`` if already known.

        Public facts only; everything that can be refused is refused here,
        before any spend. ``Lambda`` is ``None`` when it depends on a
        ``y_bound`` still to be estimated.
        """
        self._check_perturbation_params(p)
        x_range = check_x_range(self.x_range, p)
        y_range = check_y_bound(self.y_bound)
        bound_eps = range_bound_epsilons(
            [name for name, v in (("x_range", x_range), ("y_bound", y_range)) if v is None],
            epsilon=self.epsilon, bounds=self.bounds, bounds_budget=self.bounds_budget,
            private=private,
        )
        check_range_bounds_feasible(n, bound_eps)
        Lambda = None
        if self.penalty is not None or y_range is not None or not private:
            Lambda = self._penalty(n, p, y_range)
            self._check_penalty(Lambda)
        return x_range, y_range, bound_eps, Lambda

    def _penalty(self, n, p, y_range):
        """Sum-form ``Lambda``: ``penalty``, or the paper's rule at ``B_y`` (1 without a bound)."""
        if self.penalty is not None:
            return float(self.penalty)
        n_ref = n if self.n_reference is None else self.n_reference
        y_mag = 1.0 if y_range is None else y_bound_magnitude(y_range)
        return perturbation_penalty(self.noise_level, self.max_features, y_mag, n_ref, p)

    def _check_penalty(self, Lambda, estimated=False):
        s, psi = self.max_features, self.rsc_constant
        if not Lambda > minimum_penalty(s, psi):
            spent = (
                " (with the privately estimated y_bound; its estimate stays spent, the "
                "test did not run: declare y_bound or penalty)" if estimated else ""
            )
            raise ConfigurationError(
                "method='perturbation' needs Lambda > 16 s^2 / Psi = "
                f"{minimum_penalty(s, psi):.4g} "
                f"(got Lambda = {Lambda:.4g}){spent}; privacy is not proven otherwise."
            )

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
            On bottom with ``on_fail='raise'`` (after recording the budget).
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
            # No selection rule can be evaluated on one row (n is public).
            ensure_min_samples=2,
        )
        X, y = read_into_memory(X, "X"), read_into_memory(y, "y")  # read once
        if not sparse.issparse(X):
            X = np.asarray(X)
        y = np.asarray(y, dtype=np.float64)
        private = self._validate_privacy_params()
        n, p = X.shape

        # The plan and its ledger: public facts only.
        if subsample:
            rule, plan = self._subsample_config(n, private)
            if private:
                _warn_if_release_unlikely(plan, self.epsilon)
            ledger = self._ledger(private, "lasso_support_subsample")
            x_range = y_range = None
        else:
            x_range, y_range, bound_eps, Lambda = self._perturbation_setup(n, p, private)
            ledger = self._ledger(private, "lasso_support_perturbation", bound_eps)
        # Checked and recorded before any data value reaches a mechanism: an
        # exception inside the mechanism never loses the spend.
        self._spend(ledger)

        rngs = self._secret_rngs("subsamples", "noise", "bounds")
        if subsample:
            released, threshold = self._fit_subsample(X, y, rule, plan, private, rngs)
        else:
            est_x, est_y, bound_events = estimate_ranges(X, y, bound_eps, rngs["bounds"])
            x_range = est_x if x_range is None else x_range
            y_range = est_y if y_range is None else y_range
            if Lambda is None:
                Lambda = self._penalty(n, p, y_range)
                try:
                    self._check_penalty(Lambda, estimated=True)
                except ConfigurationError:
                    # The test does not run: only the bound estimates were spent.
                    self._settle(PrivacyLedger(bound_events))
                    raise
            released, threshold = self._fit_perturbation(
                X, y, Lambda, x_range, y_range, ledger.events[-1].epsilon, rngs["noise"]
            )

        if released is BOTTOM:
            # The message states the recorded guarantee of this fit, (epsilon,
            # delta/2), not the delta parameter.
            error = UnstableSupportError(ledger.epsilon, ledger.delta, threshold)
            if self.on_fail == "raise":
                # Leave the estimator unfitted, but keep the ledger of the spend.
                raise error
            # The outcome (PASS/FAIL) is released, so this warning is too.
            warnings.warn(f"{error} on_fail='empty': an empty support was released.",
                          PrivateTestFailedWarning, stacklevel=4)
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
        self.x_range_ = x_range
        self.y_bound_ = y_range
        self.epsilon_ = ledger.epsilon
        self.delta_ = ledger.delta
        return self

    def _ledger(self, private, name, bound_eps=None):
        """The replace-one events of one fit (public facts only).

        The test's ``(epsilon_test, delta/2)`` (both methods; see the class
        docstring), after one pure event per missing bound of the
        perturbation method; ``epsilon_test`` is ``epsilon`` less the finite
        bound shares.
        """
        if not private:
            return PrivacyLedger([PrivacyEvent(name=name, epsilon=math.inf, delta=0.0)])
        bound_eps = bound_eps or {}
        bound_events = [PrivacyEvent(name=k, epsilon=e, delta=0.0) for k, e in bound_eps.items()]
        eps_test = difference_at_most(self.epsilon,
                                      *(e for e in bound_eps.values() if math.isfinite(e)))
        test = stable_mode_ledger(eps_test, self.delta, name=name)
        return PrivacyLedger([*bound_events, *test.events])

    def _fit_subsample(self, X, y, rule, plan, private, rngs):
        """``(released support or BOTTOM, threshold)``; threshold ``None`` when not private."""
        if not private:
            with quiet_warnings():
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

    def _fit_perturbation(self, X, y, Lambda, x_range, y_range, epsilon, rng):
        """``(released support or BOTTOM, threshold)`` at the test's ``epsilon`` (inf: no noise)."""
        s = self.max_features
        private = math.isfinite(epsilon)
        # Per-entry clipping to the ranges, then public scaling into [-1, 1]
        # and [-s, s]: a per-row map. No warning: whether some entry was
        # clipped depends on one record. Without a range (epsilon=inf only):
        # no clipping, unit scale.
        X_clip = np.asarray(X, dtype=np.float64)
        if x_range is not None:
            X_clip = np.clip(X_clip, x_range[0], x_range[1]) / x_range_magnitude(x_range)
        y_clip = np.asarray(y, dtype=np.float64)
        if y_range is not None:
            y_clip = np.clip(y_clip, y_range[0], y_range[1]) / y_bound_magnitude(y_range)
        y_clip = s * y_clip
        with quiet_warnings(), np.errstate(all="ignore"):
            support, d_hat = perturbation_distance(X_clip, y_clip, s, Lambda, self.rsc_constant)
        if not private:
            return support, None
        # Replace-one calibration (derived in replace_one_calibration): the
        # proxy moves by at most 2 and is at most 1 where a replace-one
        # neighbour's support differs, so Lap(2/eps) and T = 1 + 2 ln(1/delta)/eps
        # give (eps, delta/2)-DP under replace-one.
        sensitivity, offset = replace_one_calibration()
        released = propose_test_release(
            support, d_hat, epsilon, self.delta, rng, sensitivity=sensitivity, offset=offset
        )
        threshold = laplace_distance_threshold(epsilon, self.delta, sensitivity, offset)
        return released, threshold

    def __sklearn_is_fitted__(self):
        return hasattr(self, "support_")

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The non-private mode (epsilon=inf) draws nothing: the same data give
        # the same selection.
        tags.non_deterministic = not (isinstance(self.epsilon, Real) and math.isinf(self.epsilon))
        tags.input_tags.sparse = self.method == "subsample"
        tags.target_tags.required = True
        return tags
