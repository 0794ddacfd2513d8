"""Private hyperparameter search: the best of a random number of private runs."""

import math
from copy import deepcopy

import joblib
import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, RegressorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.pipeline import Pipeline
from sklearn.utils import check_array, check_consistent_length, get_tags
from sklearn.utils.validation import column_or_1d

from .._compat import (
    Interval,
    Real,
    check_is_fitted,
    fit_context,
    frame_like,
    validate_data,
    without_fit_callbacks,
)
from .._pipeline import leaking_steps, private_steps
from .._rdp import RDP_ORDERS, laplace_rdp, ledger_rdp, tnb_pmf
from .._rows import read_into_memory
from .._warnings import quiet_warnings
from ..accounting import DetachedAccountant, PrivacyEvent, PrivacyLedger
from ..base import (
    DPEstimatorMixin,
    accountant_params,
    charge_refits_to,
    refuse_uncharged_accountant,
)
from ..bounds import check_y_bound
from ..exceptions import ConfigurationError, PrivacyInfeasibleError, PrivateTestFailed
from ..mechanisms import (
    clipped_squared_error_sensitivity,
    difference_at_most,
    private_neg_mse,
    product_at_most,
)
from ._selection_plan import selection_plan

__all__ = ["PrivateGridSearchCV"]


def _dp_step(estimator):
    """``(prefix, step)`` of the one private estimator whose epsilon the search sets."""
    if isinstance(estimator, DPEstimatorMixin):
        return "", _predicting(estimator, estimator)
    if isinstance(estimator, Pipeline):
        leaks = leaking_steps(estimator)
        if leaks:
            path, cls, replacement = leaks[0]
            raise ConfigurationError(
                f"The candidate pipeline's step {path!r} ({cls}) learns from the data without "
                f"a privacy guarantee; replace it by {replacement}."
            )
        name, final = estimator.steps[-1]
        others = [path for path, step in private_steps(estimator) if step is not final]
        if others:
            raise ConfigurationError(
                f"The candidate pipeline's step {others[0]!r} is private: every run of the "
                "search would fit it again, a secret number of times, outside the search's "
                "guarantee (which covers the final estimator only). Fit it once outside the "
                "search, or use a data-independent step (BoundedScaler with declared ranges)."
            )
        if isinstance(final, DPEstimatorMixin):
            return f"{name}__", _predicting(final, estimator)
    raise ConfigurationError(
        f"PrivateGridSearchCV tunes a skprivreg estimator (or a pipeline of data-independent "
        f"steps ending in one), got {type(estimator).__name__}: its fits would not be private."
    )


def _predicting(step, estimator):
    """``step``, if it predicts: every run is scored on its validation rows (public facts;
    a transformer or selector would be refused after the spend)."""
    if not hasattr(step, "predict"):
        what = type(step).__name__ if step is estimator else (
            f"{type(estimator).__name__} ending in {type(step).__name__}")
        raise ConfigurationError(
            f"PrivateGridSearchCV scores each run by its predictions; {what} does not "
            "predict. Tune a regressor (or a pipeline ending in one). Nothing was spent."
        )
    return step


#: Synthetic data of the dry runs, ``name: (rng, X shape, y shape) -> (X, y)``: the plan
#: reads ledgers from ``"normal"``; the others check that they do not change
#: (:meth:`PrivateGridSearchCV._check_public_curves`).
_SYNTHETIC = {
    "normal": lambda rng, xs, ys: (rng.normal(size=xs), rng.normal(size=ys)),
    "scale 1e-3": lambda rng, xs, ys: (1e-3 * rng.normal(size=xs), 1e-3 * rng.normal(size=ys)),
    "scale 1e3": lambda rng, xs, ys: (1e3 * rng.normal(size=xs), 1e3 * rng.normal(size=ys)),
    "heavy tails": lambda rng, xs, ys: (rng.standard_t(2.0, size=xs),
                                        rng.standard_t(2.0, size=ys)),
}


def _above(curve, planned):
    """True when a Renyi curve exceeds the planned one (beyond float rounding)."""
    return bool(np.any(curve > planned * (1 + 1e-9) + 1e-12))


def _take(X, rows):
    """Rows of an array or a data frame."""
    return X.iloc[rows] if hasattr(X, "iloc") else X[rows]


class PrivateGridSearchCV(DPEstimatorMixin, MetaEstimatorMixin, RegressorMixin, BaseEstimator):
    """Private hyperparameter search with a total (epsilon, delta) stated in advance.

    The search repeats, a secret random number :math:`K` of times, a private
    base algorithm :math:`Q` and releases only its best run (Liu & Talwar,
    2019; Papernot & Steinke, 2022). One run of :math:`Q`:

    1. draw a candidate uniformly from ``param_grid`` and a random split of
       the rows into a training part and a validation part (of public sizes);
    2. fit the candidate with ``epsilon=candidate_epsilon_``,
       ``delta=candidate_delta_`` on the training part;
    3. score it on the validation part with the negative mean squared error,
       labels and predictions clipped to ``y_bound``, plus Laplace noise at
       ``candidate_epsilon_`` (:func:`skprivreg.mechanisms.private_neg_mse`).

    Each row is in one part only, so :math:`Q`'s Renyi-DP curve is the larger
    of the fit's (from its ledger: Gaussian and pure-DP releases) and the
    score's, maximised over candidates. :math:`K` follows the truncated
    negative binomial :math:`\\mathcal{D}_{\\eta,\\gamma}` with
    :math:`\\mathbb{E}[K]` = ``n_repetitions`` (``eta=1``: geometric, as in
    Liu & Talwar), capped at a public maximum whose tail probability costs at
    most a tenth of ``delta``. The whole search is
    :math:`(\\varepsilon, \\delta)`-DP by Papernot & Steinke (2022, Thm. 2)
    and the Renyi-DP conversion of Canonne, Kamath & Steinke (2020)
    (:func:`skprivreg.accounting.private_selection_rdp`);
    ``candidate_epsilon_`` is the largest per-run epsilon that keeps the total
    within ``epsilon`` (found by bisection on the public plan).

    Guarantee: (epsilon, delta)-DP, the candidates' notion, replace-one
    neighbours, n public, for everything released: ``best_estimator_``,
    ``best_params_``, ``best_score_`` and ``cv_results_``. The number of
    repetitions and the other runs' results stay secret (releasing them would
    void the analysis), and the warnings of the runs are not shown (their
    number would reveal :math:`K`); the running time still grows with
    :math:`K`, which the analysis does not cover: do not publish it.

    The candidates' ledgers are read from dry runs on synthetic data of the
    same shape before any budget is spent (a skprivreg ledger depends on
    public facts only; each candidate is also fitted on synthetic data of
    other scales and with heavy tails, and one that spends more there is
    refused), so bad input is refused first: an empty grid, a
    candidate that is not a skprivreg estimator, a grid that sets
    ``epsilon``/``delta``, a release without a Renyi bound, a budget too
    small for one repetition (planned from the smallest per-run epsilon, from
    ``1e-4`` up, at which every candidate can fit: one that estimates its
    bounds privately needs more rows at a smaller epsilon), a ``delta`` too
    small to cap the number of repetitions, or a pipeline with a private step before its final
    estimator (which every run would fit again, outside the guarantee)
    (:class:`~skprivreg.exceptions.ConfigurationError`). After the budget
    check and before the spend, the rows a pipeline's data-independent head
    makes are checked as its private estimator will read them (numeric and
    finite; dense unless it takes sparse input). Accountants of the
    candidates, nested ones included, are not charged by the runs: the
    search's own spend, on its ``accountant``, covers them, so any other
    accountant in the estimator is refused before the spend.

    ``best_estimator_`` is the model fitted in the winning run, on its
    training part; with ``refit_budget > 0`` the selection gets
    ``(1 - refit_budget) * epsilon`` and half of delta, and the selected
    candidate is refitted on all rows with the rest (basic composition).
    Either way it was chosen by the noisy scores of every run, so its
    ``privacy_spent_`` is the whole search's ledger. Estimators given as
    values of ``param_grid`` are cloned for each run, as
    :class:`~sklearn.model_selection.GridSearchCV` does: the objects in
    ``param_grid`` (and in ``best_params_``) are never fitted. An
    ``accountant`` anywhere in the estimator (nested ones included) must be
    the search's own (the runs do not charge it): another one is refused
    before anything is spent.
    As with :class:`~sklearn.model_selection.GridSearchCV`, a search fitted on a
    data frame fits every run on rows of a frame with the same column names,
    so ``best_estimator_`` (and ``predict``) checks the names of later input.

    Parameters
    ----------
    estimator : skprivreg estimator or Pipeline
        A skprivreg regressor, or a pipeline of data-independent steps ending in one.
    param_grid : dict or list of dicts
        As for :class:`sklearn.model_selection.GridSearchCV`; may not set
        ``epsilon``, ``delta`` or an ``accountant`` at any depth (the search
        allots them).
    epsilon : float, default=1.0
        Total epsilon of the search.
    delta : float, default=1e-6
        Total delta of the search. Choose it well below 1/n_samples.
    n_repetitions : float > 1, default=10
        Expected number of runs :math:`\\mathbb{E}[K]`.
    eta : float > -1, default=1.0
        Shape of the truncated negative binomial (1: geometric; 0: logarithmic).
    validation_fraction : float in (0, 1), default=0.25
        Share of rows used to score a run.
    y_bound : float or (low, high) or None, default=None
        Label range for the score; ``None`` takes the candidate's declared ``y_bound``.
    refit_budget : float in [0, 1), default=0.0
        Share of epsilon (and half of delta) spent to refit the selected
        candidate on all rows after the selection (basic composition). ``0``:
        no refit; ``best_estimator_`` is the winning run's model.
    accountant : BudgetAccountant or None, default=None
        Charged the whole search's (epsilon, delta) once, before any data is read.
    random_state : None, int or numpy.random.Generator, default=None
        Unused for the draws: the number of runs, each run's candidate and
        split, and the score noise are secret and come from fresh OS entropy
        in every fit, whatever this is; so is each run's own noise. Kept for
        scikit-learn compatibility. Inside
        :func:`skprivreg.testing.reproducible_noise` (tests only) the search's
        draws follow it, and each run's noise follows the ``random_state`` of
        ``estimator`` (set both for repeatable tests).
    verbose : int, default=0
        ``>= 1``: a line with the plan before the runs (candidates, per-run
        epsilon, the cap on the number of runs), a line when the selection
        ends, and the refit's own progress lines (its ``verbose`` is set when
        it has one). There is **no line per run**: the number of runs is a
        secret draw of the selection, and so is which candidate each run
        fits and whether its private test failed.

    Attributes
    ----------
    best_estimator_ : estimator
        The selected model; the ``privacy_spent_`` of its private estimator is
        the search's.
    best_params_ : dict
    best_score_ : float
        The winning run's noisy validation score (negative mean squared error).
    best_index_ : int
        Index of ``best_params_`` in ``ParameterGrid(param_grid)``.
    cv_results_ : dict
        The released values only: ``params`` (all candidates, public),
        ``released_test_score`` (the noisy score of the winner, NaN elsewhere),
        ``rank_test_score`` (1 for the winner, 0 elsewhere: unknown).
    candidate_epsilon_, candidate_delta_ : float
        Budget of each run's fit and score.
    privacy_spent_ : PrivacyLedger
        The whole search: the selection, and the refit if any.
    noise_reproducible_ : bool
        Whether the search ran inside
        :func:`skprivreg.testing.reproducible_noise` (then its ledger is not
        for publication).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during ``fit``; only when ``X`` has feature
        names that are all strings.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : Non-private exhaustive search; its
        cross-validation scores are computed on the data and not private.
    skprivreg.pipeline.PrivatePipeline : A pipeline that refuses to leak quietly;
        a candidate may be one of data-independent steps ending in a private
        estimator.
    skprivreg.accounting.private_selection_rdp : The Renyi-DP bound of the
        selection.

    References
    ----------
    J. Liu and K. Talwar, "Private selection from private candidates",
    STOC 2019.
    N. Papernot and T. Steinke, "Hyperparameter tuning with Renyi
    differential privacy", ICLR 2022.
    C. L. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for
    differential privacy", NeurIPS 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg import AdaSSPRegressor
    >>> from skprivreg.model_selection import PrivateGridSearchCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(20000, 3))
    >>> y = X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=20000)
    >>> search = PrivateGridSearchCV(
    ...     estimator=AdaSSPRegressor(x_bound=2.0, y_bound=6.5),
    ...     param_grid={"fit_intercept": [True, False]},
    ...     epsilon=2.0, delta=1e-6, n_repetitions=3,
    ... ).fit(X, y)
    >>> sorted(search.best_params_)
    ['fit_intercept']
    >>> search.predict(X[:2]).shape
    (2,)
    >>> [event.name for event in search.privacy_spent_.events]
    ['private selection']
    >>> search.privacy_spent_.epsilon <= 2.0
    True
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "estimator": "no_validation",
        "param_grid": [dict, list],
        "n_repetitions": [Interval(Real, 1, None, closed="neither")],
        "eta": [Interval(Real, -1, None, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "y_bound": [Real, tuple, list, np.ndarray, None],
        "refit_budget": [Interval(Real, 0, 1, closed="left")],
        "verbose": ["verbose"],
    }

    def __init__(self, *, estimator=None, param_grid=None, epsilon=1.0, delta=1e-6,
                 n_repetitions=10, eta=1.0, validation_fraction=0.25, y_bound=None,
                 refit_budget=0.0, accountant=None, random_state=None, verbose=0):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.n_repetitions = n_repetitions
        self.eta = eta
        self.validation_fraction = validation_fraction
        self.y_bound = y_bound
        self.refit_budget = refit_budget
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    # -- public planning --------------------------------------------------
    def _budgets(self):
        """``(selection epsilon, selection delta, refit epsilon, refit delta)``."""
        if self.refit_budget == 0:
            return self.epsilon, self.delta, 0.0, 0.0
        refit = product_at_most(self.refit_budget, self.epsilon)
        return (difference_at_most(self.epsilon, refit), self.delta / 2,
                refit, self.delta / 2)

    def __getstate__(self):
        state = super().__getstate__()
        template = state.get("estimator")
        if "privacy_spent_" in state and hasattr(template, "get_params"):
            # A fitted search is saved without accountants, its template's included
            # (handles to live budgets, which refuse to be pickled): the loaded
            # template refuses to fit until they are set again.
            held = {name: DetachedAccountant()
                    for name, value in accountant_params(template).items() if value is not None}
            if held:
                state = dict(state, estimator=clone(template).set_params(**held))
        return state

    def _candidates(self):
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates or candidates == [{}]:
            raise ValueError("param_grid is empty: give at least one candidate.")
        prefix, step = _dp_step(self.estimator)
        for params in candidates:
            for key in params:
                if (key.removeprefix(prefix) in ("epsilon", "delta")
                        or key.rsplit("__", 1)[-1] == "accountant"):
                    raise ValueError(
                        f"param_grid may not set {key!r}: the search allots each run's "
                        "budget from its total (epsilon, delta)."
                    )
        for params in [{}, *candidates]:
            configured = clone(self.estimator).set_params(**params) if params else self.estimator
            # A candidate's parameters may replace steps: each candidate is checked
            # as the template is (no leaking step, no private step before the last).
            if params and _dp_step(configured)[0] != prefix:
                raise ConfigurationError(
                    "param_grid may not change which step is the private final estimator."
                )
            # The runs are fitted without any accountant (their number is secret;
            # the search's one spend covers them): another one anywhere in the
            # estimator, nested ones and those of estimators a candidate puts in
            # place included, would record nothing of the search.
            for held in accountant_params(configured).values():
                refuse_uncharged_accountant(held, self.accountant, "a private search",
                                            type(self).__name__)
        return candidates, prefix, step

    def _y_range(self, step):
        y_bound = self.y_bound if self.y_bound is not None else getattr(step, "y_bound", None)
        y_range = check_y_bound(y_bound)
        if y_range is None:
            raise ConfigurationError(
                "PrivateGridSearchCV needs a declared label range to score runs privately: "
                "pass y_bound, or declare y_bound on the estimator."
            )
        return y_range

    def _candidate(self, params, prefix, epsilon, delta=None):
        # The grid's values are cloned too, as GridSearchCV does: a step given in
        # param_grid is the user's object, which a run would otherwise fit in place
        # (a model of a run that was not selected, reachable from best_params_).
        est = clone(self.estimator).set_params(**clone(params, safe=False))
        delta = self._budgets()[1] if delta is None else delta
        budget = {f"{prefix}epsilon": epsilon, f"{prefix}accountant": None}
        if f"{prefix}delta" in est.get_params():  # a pure-DP estimator has none
            budget[f"{prefix}delta"] = delta
        est.set_params(**budget)
        # Nor is any nested accountant charged (an estimator inside the private
        # step): its count of fits would reveal the secret number of runs. The
        # search's own spend covers them all.
        nested = {name: None for name, value in accountant_params(est).items()
                  if value is not None}
        if nested:
            est.set_params(**nested)
        # Runs print nothing: a line per run (of any step, or of the pipeline
        # itself) would reveal their secret number.
        # Nor does anything else that acts once per run: a pipeline's cache
        # (one entry per run, and its lines print rows) or fit callbacks (called
        # with each run's rows).
        params = est.get_params(deep=True)
        quiet = {name: False for name in params
                 if name == "verbose" or name.endswith("__verbose")}
        quiet.update({name: None for name in params
                      if (name == "memory" or name.endswith("__memory"))
                      and params[name] is not None})
        if quiet:
            est.set_params(**quiet)
        for step in [est, *(v for v in params.values() if hasattr(v, "get_params"))]:
            without_fit_callbacks(step)
        return est

    def _dry_ledgers(self, candidates, prefix, epsilon, shapes, variant="normal"):
        """Each candidate's ledger at ``epsilon``, from a fit on synthetic data.

        ``shapes[i] = (n_train, d, y_shape)`` is what candidate ``i``'s private
        estimator sees (after the data-independent steps of a pipeline).
        ``variant`` names the synthetic data (:data:`_SYNTHETIC`).
        """
        ledgers = []
        for params, (n_train, d, y_shape) in zip(candidates, shapes):
            rng = np.random.default_rng(0)  # public synthetic data, no secret involved
            X, y = _SYNTHETIC[variant](rng, (n_train, d), (n_train, *y_shape))
            est = self._candidate(params, prefix, epsilon)
            final = est[-1] if isinstance(est, Pipeline) else est
            with quiet_warnings():
                try:
                    final.fit(X, y)
                except PrivateTestFailed:
                    pass
            ledgers.append(final.privacy_spent_)
        return ledgers

    def _check_public_curves(self, candidates, prefix, epsilon, shapes, q_rdp):
        """Refuse, before the spend, a candidate whose Renyi curve follows the data.

        The plan's curve comes from synthetic data of unit scale. Each candidate
        is fitted again at the planned per-run epsilon on synthetic data of
        other scales and with heavy tails (:data:`_SYNTHETIC`); a ledger above
        the planned curve there would stop the search after the spend, with a
        chance that grows with the secret number of runs. Data a candidate
        refuses (values beyond what it supports) show nothing and are skipped.
        """
        for variant in _SYNTHETIC:
            if variant == "normal":
                continue
            for params, shape in zip(candidates, shapes):
                try:
                    (ledger,) = self._dry_ledgers([params], prefix, epsilon, [shape], variant)
                except (ValueError, PrivacyInfeasibleError):
                    continue
                if _above(ledger_rdp(ledger, RDP_ORDERS), q_rdp):
                    raise ConfigurationError(
                        f"The candidate {params!r} spends more on other data than on the "
                        f"synthetic data the search is planned from ({variant}): its Renyi-DP "
                        "curve depends on the data, so a run could exceed the plan. Declare "
                        "the bounds it estimates, or choose its budget split explicitly."
                    )

    def _check_finite_rows(self, X, candidates, prefix):
        """Refuse rows the private estimators would refuse, before the spend: the
        data-independent head of each distinct candidate pipeline is applied to all
        rows (releasing nothing; its warnings are not shown), and its output must be
        numeric and finite, and dense unless the private estimator takes sparse
        input, as every run's fit would require."""
        seen = set()
        for params in candidates:
            # Candidates that set the same head parameters have the same head
            # (a repr would not tell apart heads whose long parameters it elides).
            try:
                key = joblib.hash({k: v for k, v in params.items() if not k.startswith(prefix)})
            except Exception:  # a value joblib cannot hash: checked on its own
                key = object()
            if key in seen:
                continue
            seen.add(key)
            est = self._candidate(params, prefix, 1.0)
            head = est[:-1]
            with quiet_warnings():
                rows = head.fit_transform(X) if len(est.steps) > 1 else X
            # As the private estimator will read them: numbers (a text entry would
            # be refused inside a run, after the spend), sparse only if it takes it.
            sparse_ok = get_tags(est[-1]).input_tags.sparse
            check_array(rows, accept_sparse=["csr", "csc"] if sparse_ok else False,
                        dtype=np.float64, ensure_all_finite=True, input_name="X")

    def _stated_notion(self, candidates, prefix, n_features, n_train, y_shape):
        """The notion the candidates' runs compose to, from public facts only.

        Dry fits on synthetic data of the input's width (a notion never depends
        on the width). ``'full'`` (accepted by every accountant, so the precise
        check after the heads' widths decides) when a candidate cannot be
        fitted so, e.g. one whose parameters name the width its head produces.
        """
        if self.accountant is None or not (isinstance(self.estimator, Pipeline)
                                           and len(self.estimator.steps) > 1):
            return "full"  # nothing to check against, or no head reads rows before the check
        shapes = [(n_train, n_features, y_shape)] * len(candidates)
        try:
            ledgers = self._dry_ledgers(candidates, prefix, float(self.epsilon), shapes)
            return PrivacyLedger.concatenate(ledgers).notion
        except Exception:  # noqa: BLE001 - synthetic data only: nothing of the rows
            return "full"

    def _shapes(self, candidates, prefix, X, n_train, y_shape):
        """Input shape of each candidate's private estimator (public facts).

        A pipeline's earlier steps are data-independent (checked): their output
        width is found by fitting and transforming two rows.
        """
        shapes = []
        for params in candidates:
            est = self._candidate(params, prefix, 1.0)
            d = X.shape[1]
            if isinstance(est, Pipeline) and len(est.steps) > 1:
                head = _take(X, np.arange(min(2, X.shape[0])))
                with quiet_warnings():
                    d = est[:-1].fit(head).transform(head).shape[1]
            shapes.append((n_train, d, y_shape))
        return shapes

    def _q_rdp(self, ledgers, epsilon):
        curves = []
        for ledger in ledgers:
            if ledger.neighbouring != "replace-one":
                raise ConfigurationError(
                    "PrivateGridSearchCV tunes replace-one guarantees; a candidate states "
                    f"{ledger.neighbouring} neighbours."
                )
            try:
                curves.append(ledger_rdp(ledger, RDP_ORDERS))
            except ValueError as exc:
                raise ConfigurationError(str(exc)) from None
        return np.maximum(np.max(curves, axis=0), laplace_rdp(epsilon, RDP_ORDERS))

    def _plan(self, candidates, prefix, shapes):
        """Largest per-run epsilon whose selection total stays within ``epsilon``."""
        cache = {}
        budget, delta = self._budgets()[:2]

        def total(eps_c):
            if eps_c not in cache:
                ledgers = self._dry_ledgers(candidates, prefix, eps_c, shapes)
                q = self._q_rdp(ledgers, eps_c)
                cache[eps_c] = (*selection_plan(q, epsilon=budget, delta=delta,
                                                n_repetitions=self.n_repetitions,
                                                eta=self.eta), ledgers, q)
            return cache[eps_c]

        # The smallest per-run epsilon tried is the first, from 1e-4 up, at which
        # every candidate can fit (one that estimates its bounds privately
        # needs n above a multiple of 1 / epsilon): public facts only.
        lo = 1e-4
        while True:
            try:
                total(lo)
                break
            except (ConfigurationError, PrivacyInfeasibleError):
                if lo >= budget:
                    raise
                lo = min(4.0 * lo, budget)
        hi = max(1.0, 2.0 * lo)
        if total(lo)[0] > budget:
            raise ConfigurationError(
                f"The budget epsilon={budget:.4g} is too small for one repetition: with "
                f"n_repetitions={self.n_repetitions:g} and eta={self.eta:g} the selection alone "
                f"costs more (at a per-run epsilon of {lo:g} the total is "
                f"{total(lo)[0]:.4g}). Raise epsilon or lower n_repetitions."
            )
        while total(hi)[0] <= budget and hi < 1e4:
            lo, hi = hi, hi * 2.0
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            if total(mid)[0] <= budget:
                lo = mid
            else:
                hi = mid
            if hi / lo < 1 + 1e-4:
                break
        return lo, total(lo)

    # -- fit --------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Run the private search.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self : object
        """
        self._reset()
        candidates, prefix, step = self._candidates()
        y_low, y_high = self._y_range(step)
        # A column vector for a single-output estimator warns and is raveled, and
        # several outputs are refused, here (from y's shape, a public fact), as
        # GridSearchCV's estimator would; the runs' warnings are not shown.
        multi_output = get_tags(self.estimator).target_tags.multi_output
        if isinstance(self.estimator, Pipeline):  # its steps validate their own input
            validate_data(self, X, skip_check_array=True)
            y = check_array(y, ensure_2d=False, dtype=np.float64)
            if not multi_output:
                y = column_or_1d(y, warn=True)
            check_consistent_length(X, y)
        else:
            frame = X
            X, y = validate_data(self, X, y, multi_output=multi_output, y_numeric=True,
                                 dtype=np.float64)
            X = read_into_memory(X, "X")
            if hasattr(self, "feature_names_in_"):
                # The runs and the refit read the copy checked here, as a frame with
                # the same names: best_estimator_ keeps them, as in GridSearchCV.
                named = frame_like(X, frame, self.feature_names_in_)
                X = X if named is None else named
        # Labels of a file are read once: every run's validation score reads them.
        y = read_into_memory(y, "y")
        if not math.isfinite(self.epsilon):
            raise ConfigurationError(
                "PrivateGridSearchCV needs a finite epsilon; for non-private tuning use "
                "sklearn.model_selection.GridSearchCV."
            )
        n = len(y)
        n_val = int(round(self.validation_fraction * n))
        n_train = n - n_val
        if n_val < 1 or n_train < 2:
            raise ConfigurationError(
                f"n_samples={n} is too few: validation_fraction="
                f"{self.validation_fraction:g} leaves {n_train} for training and {n_val} for "
                "validation; the search needs at least 2 and 1."
            )
        # The score's scale must be representable (public facts), before the spend.
        clipped_squared_error_sensitivity(y_low, y_high, n_val)
        # The budget is checked before the heads read rows (for their widths): the
        # search spends at most (epsilon, delta) in all, under the candidates'
        # notion (an accountant of full DP refuses label-DP candidates here, not
        # after the heads read). Its ledger is checked below.
        self._check_budget(PrivacyLedger([PrivacyEvent(
            "private selection and refit (at most)", float(self.epsilon), float(self.delta),
            notion=self._stated_notion(candidates, prefix, X.shape[1], n_train,
                                       y.shape[1:]))]))
        shapes = self._shapes(candidates, prefix, X, n_train, y.shape[1:])
        eps_c, (total_eps, gamma, cap, _, planned_ledgers, q_rdp) = self._plan(
            candidates, prefix, shapes)
        self._check_public_curves(candidates, prefix, eps_c, shapes, q_rdp)
        notion = PrivacyLedger.concatenate(planned_ledgers).notion
        _, delta_sel, eps_refit, delta_refit = self._budgets()
        events = [PrivacyEvent("private selection", float(total_eps), float(delta_sel),
                               notion=notion)]
        if eps_refit > 0:
            events.append(PrivacyEvent("refit", float(eps_refit), float(delta_refit),
                                       notion=notion))
        ledger = PrivacyLedger(events)

        # The budget (public) is checked before the heads read every row; the rows
        # are checked before the spend.
        self._check_budget(ledger)
        if isinstance(self.estimator, Pipeline):
            self._check_finite_rows(X, candidates, prefix)
        rng = self._secret_rngs("selection", spend=ledger)["selection"]
        pmf = tnb_pmf(self.eta, gamma, cap)
        pmf[-1] += max(1.0 - pmf.sum(), 0.0)  # min(K, cap)
        n_runs = 1 + int(np.searchsorted(np.cumsum(pmf), rng.random() * pmf.sum()))
        n_runs = min(n_runs, cap)
        self._say(f"{len(candidates)} candidates, per-run epsilon {eps_c:.4g}, "
                  f"at most {cap} runs (their number is secret)")

        best = None
        for _ in range(n_runs):
            index = int(rng.integers(len(candidates)))
            order = rng.permutation(n)
            train, val = order[:n_train], order[n_train:]
            est = self._candidate(candidates[index], prefix, eps_c)
            with quiet_warnings():
                try:
                    est.fit(_take(X, train), y[train])
                except (PrivateTestFailed, ConfigurationError):
                    # A released failure, a run whose (secret) training part the
                    # candidate refuses from public facts, or a refusal from a
                    # value the run released (a privately estimated bound): the
                    # worst outcome of this run. Raised after the spend, it would
                    # escape with a chance that grows with the secret number of runs.
                    continue
                fitted = est[-1] if isinstance(est, Pipeline) else est
                self._check_run(fitted.privacy_spent_, q_rdp)
                score = private_neg_mse(y[val], est.predict(_take(X, val)), y_low=y_low,
                                        y_high=y_high, epsilon=eps_c, rng=rng)
            if best is None or score > best[0]:
                best = (score, index, est)
        self._settle(ledger)
        self._say("selection done")
        if best is None:
            raise PrivateTestFailed(
                "Every run of the private search failed its private test; the search's "
                "budget is spent and nothing else is released."
            )
        score, index, est = best
        if eps_refit > 0:
            est = self._candidate(candidates[index], prefix, eps_refit, delta_refit)
            if f"{prefix}verbose" in est.get_params():
                est.set_params(**{f"{prefix}verbose": self.verbose})
            self._say(f"refit on {n:,} rows")
            est.fit(X, y)  # a PrivateTestFailed propagates: the spend is recorded
        # Releasing the selected model costs the whole search (it was chosen by
        # the noisy scores of every run): its private step states that ledger,
        # not the one of its own fit.
        (est[-1] if isinstance(est, Pipeline) else est).privacy_spent_ = self.privacy_spent_
        self.best_estimator_ = est
        charge_refits_to(est, self.accountant)
        self.best_params_ = dict(candidates[index])
        self.best_score_ = float(score)
        self.best_index_ = index
        scores = np.full(len(candidates), np.nan)
        scores[index] = score
        ranks = np.zeros(len(candidates), dtype=int)
        ranks[index] = 1
        self.cv_results_ = {
            "params": [dict(p) for p in candidates],
            "released_test_score": scores,
            "rank_test_score": ranks,
        }
        self.candidate_epsilon_ = float(eps_c)
        self.candidate_delta_ = float(delta_sel)
        return self

    def _say(self, text):
        """A progress line of public facts (never a per-run line: their number is secret)."""
        if self.verbose:
            print(f"[{type(self).__name__}] {text}", flush=True)

    @staticmethod
    def _check_run(run_ledger, q_rdp):
        """A run's recorded ledger must stay within the planned curve.

        It holds for every candidate whose Renyi curve depends on public facts
        only, as every skprivreg estimator's does; a candidate whose curve
        changes with the scale or the tails of the data is refused before the
        spend (:meth:`_check_public_curves`). A run above it stops the search
        (after the spend) rather than release a result the selection's
        analysis does not cover."""
        if _above(ledger_rdp(run_ledger, RDP_ORDERS), q_rdp):
            raise RuntimeError(
                "A run spent more than its planned Renyi-DP curve; the search stops."
            )

    def predict(self, X):
        """Predict with ``best_estimator_``.

        As in :class:`~sklearn.model_selection.GridSearchCV`, ``best_estimator_``
        checks ``X``: after a fit on a data frame, it was fitted on one with the
        same feature names.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self.estimator is None:
            return tags
        # As GridSearchCV: the estimator's type, target and regressor tags, and
        # whether it takes pairwise input. The search needs y, and its noise is
        # fresh in every fit (it draws its own, and so do the runs).
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.target_tags = deepcopy(sub.target_tags)
        tags.target_tags.required = True
        tags.regressor_tags = deepcopy(sub.regressor_tags)
        tags.input_tags.pairwise = sub.input_tags.pairwise
        tags.non_deterministic = True
        return tags
