"""WeightedLBARegressor: label-DP regression by randomly weighted bag aggregation."""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, RegressorMixin, clone

from .._compat import (
    HasMethods,
    Interval,
    StrOptions,
    check_is_fitted,
    fit_context,
    validate_data,
    validate_params,
)
from .._rows import (
    as_dask_array,
    is_dask_collection,
    read_into_memory,
    set_dask_feature_names,
    validate_blockwise_data,
)
from ..accounting import PrivacyLedger
from ..base import DPEstimatorMixin
from ..exceptions import ConfigurationError
from ..linear_model._base import LinearPredictMixin, solve_psd_repaired
from ._aggregate import resolve_y_bound, run_aggregation
from ._bag_mlp import MLP_PARAM_NAMES, _BagMLP
from ._datasets import AggregatedDataset, LLPDataset
from ._label_bound import data_bound_ledger
from ._planning import plan_aggregation, plan_warnings

__all__ = ["WeightedLBARegressor", "fit_on_aggregates"]


def _is_mlp(estimator):
    if isinstance(estimator, str):
        return estimator == "mlp"
    return type(estimator).__name__ == "MLPRegressor"


def _penalises(estimator):
    params = estimator.get_params(deep=False)
    return any(
        isinstance(params.get(name), Real) and params.get(name) > 0
        for name in ("alpha", "l1_ratio", "C")
    )


def fit_on_aggregates(Zbar, ybar, *, estimator="ols", alpha=0.0, fit_intercept=True):
    """Linear coefficients ``beta`` (p,) minimising ``sum_j (ybar_j - beta^T zbar_j)^2``.

    - ``'ols'``: the minimum-norm least-squares solution (LAPACK ``gelsd``):
      the exact unconstrained minimiser of the paper's loss on aggregates.
    - ``'ridge'``: ``(Zbar^T Zbar + alpha P) beta = Zbar^T ybar`` with
      ``P = diag(1, ..., 1, 0)`` when the last column is the intercept
      aggregate, which stays unpenalised. Since
      ``E[Zbar^T Zbar] = sum_{bagged} z z^T``, ``alpha`` means what
      ``Ridge(alpha)`` means on the ``m k`` bagged instances.
    - an sklearn linear regressor: cloned, ``fit_intercept=False``, fitted on
      ``(Zbar, ybar)``; the intercept aggregate is then an ordinary column,
      which a penalised model penalises too (a ``UserWarning`` says so).

    All of this is post-processing of the released aggregates.
    """
    Zbar = np.asarray(Zbar, dtype=np.float64)
    ybar = np.asarray(ybar, dtype=np.float64)
    if isinstance(estimator, str):
        if estimator == "ols":
            return linalg.lstsq(Zbar, ybar, lapack_driver="gelsd")[0]
        if estimator == "ridge":
            penalty = np.full(Zbar.shape[1], float(alpha))
            if fit_intercept:
                penalty[-1] = 0.0
            gram = Zbar.T @ Zbar + np.diag(penalty)
            return solve_psd_repaired(gram, Zbar.T @ ybar, 0.0)
        raise ValueError("estimator must be 'ols', 'ridge' or an sklearn regressor.")
    model = clone(estimator)
    if "fit_intercept" in model.get_params(deep=False):
        model.set_params(fit_intercept=False)
    if fit_intercept and _penalises(model):
        warnings.warn(
            f"{type(model).__name__} penalises the intercept aggregate column too; use "
            "estimator='ridge' for an unpenalised intercept.",
            UserWarning,
            stacklevel=3,
        )
    model.fit(Zbar, ybar)
    return np.ravel(model.coef_).astype(np.float64)


class WeightedLBARegressor(DPEstimatorMixin, RegressorMixin, BaseEstimator):
    """Label-DP linear (or, for LLP, neural) regression from weighted bag aggregates.

    Brahmbhatt, Saket, Havaldar, Nasery & Raghuveer (2023), *Label
    Differential Privacy via Aggregation* (arXiv:2310.10092), with exact
    per-bag accountants (:func:`lba_privacy_profile`, :func:`llp_privacy_profile`)
    in place of the paper's asymptotic bounds.

    **Mechanism** (``mode='lba'``, paper Fig. 1). The rows are split into
    ``m`` disjoint uniformly random bags of size ``k`` (public); each bag is
    released as :math:`\\bar z_j = \\sum_r w_{jr} z_{i_{jr}}`,
    :math:`\\bar y_j = \\sum_r w_{jr} y_{i_{jr}}` with secret i.i.d.
    :math:`w_{jr}\\sim N(0,1)` (``z = [x, 1]`` with an intercept), and the
    model is fitted on the ``m`` aggregates: OLS, ridge with unpenalised
    intercept, or any sklearn linear regressor (``estimator``). Since
    :math:`E_w[(\\bar y_j - \\beta^\\top\\bar z_j)^2] = \\sum_{i\\in S_j}(y_i-\\beta^\\top z_i)^2`,
    this is least squares on an unbiased sketch; the relative excess loss
    is about ``p / (m - p - 1)``.

    ``mode='llp'`` (paper Fig. 2): a fraction ``noise_fraction`` of the
    labels gets ``N(0, noise_scale^2)`` noise, only the label sums are
    aggregated, bags and weights are released, and a linear model
    (identical to the LBA fit on ``Zbar``) or a small ReLU network
    (``estimator='mlp'``, trained on the bag loss) is fitted.

    **Privacy notion.** Label-DP (Chaudhuri & Hsu 2011): features are public,
    neighbouring datasets differ in one label (replace-one, labels clipped to
    the label range ``y_bound = (a, b)``, width ``Delta = b - a``). Reported as
    ``epsilon_, delta_`` (never above the target ``epsilon, delta``) and
    ``privacy_spent_``.

    **Missing label range.** Without ``y_bound`` and with
    ``bounds='private'`` (default), ``bounds_budget * epsilon`` is spent on a
    private bound ``B`` on ``|y|`` (pure label-DP under replace-one
    neighbours, its own ``'y_bound'`` event; above-threshold over public
    geometric bins, the same code as :class:`GaussianLabelNoiseRegressor`)
    and the labels are clipped to ``[-B, B]``; the rest of epsilon is split as
    below. The ``'ptr'`` guarantee does not depend on ``Delta`` (only the
    residual threshold ``s = Delta / c*`` scales with it), so the estimate
    fits there; ``mode='llp'``, ``assumption='declared'`` and
    ``expected_residual_var`` are calibrated in label units and need a
    declared ``y_bound``. When ``n_samples`` is too small for a useful private
    bound, or the mode needs a declared range,
    :class:`~skprivreg.exceptions.ConfigurationError` is raised before any
    spend (naming the ``n_samples`` needed). ``bounds='data'`` reads ``B``
    from the labels (rounded up to a public bin): not private, an
    infinite-epsilon event and a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`. ``epsilon=inf`` and
    ``assumption='none'`` need no range (read from the labels, with a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning`).

    **Guarantees** (``assumption``, LBA):

    - ``'ptr'`` (default): ``(epsilon, delta)`` for *every* dataset. Budget
      split: ``eps_test = ptr_epsilon_fraction * epsilon`` and ``delta/2``
      for a private propose-test-release check that every bag has least
      squares residual ``sqrt(RSS_j) >= s`` (truncated-Laplace PTR,
      sensitivity ``Delta``); ``eps_agg = epsilon - eps_test`` and
      ``delta_LBA(eps_agg; c*) <= delta/2`` for the aggregation, with
      ``s = Delta / c*`` and ``c* = lba_c_star(eps_agg, delta/2)``. On
      failure :class:`PrivacyCheckFailedError` is raised after the budget is
      recorded; nothing is released. The check certifies each bag's
      residual from its public design only: a bag design whose columns are
      exactly or nearly collinear (one-hot columns of every category with an
      intercept, a feature constant within a bag, a near-copy of another
      column) gets a certified residual of 0, so the check could not pass:
      such a design is refused with :class:`PrivacyInfeasibleError` before any
      spend. Drop one category, and drop or combine near-duplicate columns.

      Before any spend, the test's pass probability is computed from public
      facts (:func:`lba_plan`): no bag's residual sum of squares exceeds
      :math:`k\\Delta^2/4` (with an intercept), so the test passes with
      probability at most
      :math:`F(\\sqrt{k}/2 - 1/c^* - A)`, ``F`` the distribution function
      of its truncated-Laplace noise on ``[-A, A]``
      (:func:`lba_ptr_pass_probability`). With ``expected_residual_var``
      declared, the prediction at :math:`RSS_j = (k - p)\\,\\sigma^2_{exp}` is
      used instead. Below 5% :class:`~skprivreg.exceptions.InsufficientDataError`
      is raised and nothing is spent; its message states which
      ``n_samples``, ``epsilon`` or residual standard deviation would make the
      test pass with probability 95% (and ``bag_size`` only when a larger
      one is allowed).
    - ``'declared'`` (the paper's setting): the user asserts that every bag
      has ``RSS_j >= residual_var_lower_bound * k``; the guarantee is
      ``(epsilon, delta_LBA(epsilon; Delta/sqrt(alpha k)) + declared_failure_prob)``
      *if the assertion holds*. Not checked.
    - ``'none'``: no guarantee (``epsilon_ = inf``, ``delta_ = 1``), for
      utility studies and API checks.

    ``mode='llp'`` needs no assumption: ``(epsilon, delta_LLP)`` with the
    exact accountant :func:`llp_privacy_profile`.

    **Bag size.** ``bag_size='auto'`` solves the accountant for the smallest
    ``k`` (``'declared'``: :func:`lba_min_bag_size`; ``'ptr'``:
    :func:`lba_ptr_bag_size` from ``expected_residual_var``, a public utility
    guess, capped at the largest allowed ``n // n_bags_min``, which is also
    the default; LLP: :func:`llp_min_bag_size`).
    Roughly ``k ~ 4 Delta^2 ln^2(1/delta) / (alpha epsilon^2)``: meaningful
    privacy needs large ``n``, and ``m = n // k >= n_bags_min``
    (``max(20, 4p)``) bags, else :class:`InsufficientDataError` is raised
    from public facts before any label is read. The feature-only pre-check
    raises :class:`PrivacyInfeasibleError` when some bag's design has rank
    ``k``.

    **Secrecy.** The weights (LBA), label noise and PTR draw come from fresh
    OS entropy in every fit, whatever ``random_state`` is, and are never
    stored, logged or returned; ``random_state`` seeds only the released
    partition and the post-processing (MLP initialisation). Fitting inside
    ``GridSearchCV`` or cross-validation
    composes budgets and scores on raw labels: not private.

    **Dask.** ``fit`` accepts Dask arrays and data frames in both modes
    without collecting X or y on the driver: the partition, the secret
    weights (LBA) and the LLP noise and weights are drawn on the driver from
    the same streams as for NumPy input (same release up to float64
    round-off); the workers gather the rows of each bag and return only the
    per-bag aggregates (the cluster is trusted as the data owner's
    environment, see :func:`~skprivreg.label_dp._aggregate.run_aggregation`).
    For LLP the linear fit combines the public features on the workers too
    (:meth:`LLPDataset.design`). ``estimator='mlp'`` trains on the rows of
    every bag in memory and needs NumPy ``X``: it is refused on a Dask ``X``
    before anything is spent. ``predict`` on Dask input returns a lazy Dask
    array, row block by row block.

    Parameters
    ----------
    epsilon : float, default=1.0
    delta : float, default=1e-6
        Choose it well below 1/n_samples.
    mode : {'lba', 'llp'}, default='lba'
    bag_size : int or 'auto', default='auto'
    n_bags : int or None, default=None
        ``None`` means ``n // bag_size``; leftover rows are dropped at random.
    y_bound : float, (low, high) or None, default=None
        Public label range chosen without looking at the labels (a float
        ``B`` means ``[-B, B]``); labels are clipped to it. ``None``: see
        *Missing label range*.
    bounds : {'private', 'data'}, default='private'
        How a missing ``y_bound`` is obtained.
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on a private label range.
    assumption : {'ptr', 'declared', 'none'}, default='ptr'
    residual_var_lower_bound : float or None
        alpha of ``'declared'``.
    declared_failure_prob : float, default=0.0
        Probability that the random partition breaks the declared bound
        (``delta_partition``); added to ``delta_``.
    expected_residual_var : float or None
        Public guess of the residual variance used to plan ``k`` in
        ``'ptr'`` mode (utility only).
    ptr_epsilon_fraction : float, default=0.4
    ptr_target_failure : float, default=0.05
    n_bags_min : int or 'auto', default='auto'
    noise_fraction : float, default=0.1
        LLP: fraction rho of noised labels.
    noise_scale : float, default=1.0
        LLP: label noise standard deviation in label units.
    noise_allocation : {'per_bag', 'global'}, default='per_bag'
    estimator : 'ols', 'ridge', 'mlp' or an sklearn regressor, default='ols'
    alpha : float, default=0.0
        Ridge penalty of ``estimator='ridge'``.
    mlp_params : dict or None
        Overrides of the :class:`_BagMLP` defaults.
    fit_intercept : bool, default=True
    accountant : BudgetAccountant or None
    random_state : None, int or Generator, default=None

    Attributes
    ----------
    coef_ : ndarray (n_features,)
    intercept_ : float
    mlp_ : _BagMLP
        LLP with an MLP only.
    y_bound_ : tuple (low, high)
        The label range the labels were clipped to (declared, released
        privately, or a public bin edge).
    bag_size_, n_bags_, n_samples_used_, n_dropped_ : int
    bag_indices_ : ndarray of int (n_bags_, bag_size_)
        The public partition.
    epsilon_, delta_ : float
        The achieved guarantee.
    privacy_report_ : dict
    aggregated_ : AggregatedDataset or LLPDataset
        The released private dataset the model was fitted on (no weights
        for LBA).
    privacy_spent_ : PrivacyLedger
    n_features_in_, feature_names_in_

    See Also
    --------
    GaussianLabelNoiseRegressor : Label-DP by Gaussian noise on every label.
    RROnBinsRegressor : Label-DP (pure epsilon) by randomised response on bins.
    sklearn.linear_model.LinearRegression : The non-private least squares.

    References
    ----------
    A. Brahmbhatt, R. Saket, S. Havaldar, A. Nasery and A. Raghuveer, "Label
    differential privacy via aggregation", arXiv:2310.10092, 2023.

    K. Chaudhuri and D. Hsu, "Sample complexity bounds for differentially
    private learning", COLT 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.label_dp import WeightedLBARegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100_000, 3))
    >>> y = np.clip(X @ [1.0, -2.0, 0.5] + 3 * rng.normal(size=100_000), -10, 10)
    >>> est = WeightedLBARegressor(epsilon=4.0, delta=1e-6, y_bound=10.0,
    ...                            assumption='declared', residual_var_lower_bound=6.0)
    >>> est.fit(X, y).bag_size_, est.n_bags_
    (2908, 34)
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "mode": [StrOptions({"lba", "llp"})],
        "bag_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_bags": [Interval(Integral, 1, None, closed="left"), None],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "assumption": [StrOptions({"ptr", "declared", "none"})],
        "residual_var_lower_bound": [Interval(Real, 0, None, closed="neither"), None],
        "declared_failure_prob": [Interval(Real, 0, 1, closed="left")],
        "expected_residual_var": [Interval(Real, 0, None, closed="neither"), None],
        "ptr_epsilon_fraction": [Interval(Real, 0, 1, closed="neither")],
        "ptr_target_failure": [Interval(Real, 0, 0.5, closed="neither")],
        "n_bags_min": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "noise_fraction": [Interval(Real, 0, 1, closed="both")],
        "noise_scale": [Interval(Real, 0, None, closed="neither")],
        "noise_allocation": [StrOptions({"per_bag", "global"})],
        "estimator": [StrOptions({"ols", "ridge", "mlp"}), HasMethods(["fit"])],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "mlp_params": [dict, None],
        "fit_intercept": ["boolean"],
    }

    _renamed_parameters = {"label_bounds": "y_bound"}

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-6,
        mode="lba",
        bag_size="auto",
        n_bags=None,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        assumption="ptr",
        residual_var_lower_bound=None,
        declared_failure_prob=0.0,
        expected_residual_var=None,
        ptr_epsilon_fraction=0.4,
        ptr_target_failure=0.05,
        n_bags_min="auto",
        noise_fraction=0.1,
        noise_scale=1.0,
        noise_allocation="per_bag",
        estimator="ols",
        alpha=0.0,
        mlp_params=None,
        fit_intercept=True,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.mode = mode
        self.bag_size = bag_size
        self.n_bags = n_bags
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.assumption = assumption
        self.residual_var_lower_bound = residual_var_lower_bound
        self.declared_failure_prob = declared_failure_prob
        self.expected_residual_var = expected_residual_var
        self.ptr_epsilon_fraction = ptr_epsilon_fraction
        self.ptr_target_failure = ptr_target_failure
        self.n_bags_min = n_bags_min
        self.noise_fraction = noise_fraction
        self.noise_scale = noise_scale
        self.noise_allocation = noise_allocation
        self.estimator = estimator
        self.alpha = alpha
        self.mlp_params = mlp_params
        self.fit_intercept = fit_intercept
        self.accountant = accountant
        self.random_state = random_state

    # -- planning (public facts) ----------------------------------------
    def _plan(self, n_samples, n_features, y_bound=None, bounds_epsilon=0.0):
        if self.mode == "lba" and _is_mlp(self.estimator):
            raise ValueError(
                "mode='lba' fits linear models only: a nonlinear model cannot be fitted "
                "on aggregated features. Use mode='llp' for an MLP."
            )
        assumption = self.assumption
        if math.isinf(self.epsilon):
            assumption = "none"
        return plan_aggregation(
            n_samples,
            n_features,
            epsilon=self.epsilon,
            delta=self.delta,
            mode=self.mode,
            bag_size=self.bag_size,
            n_bags=self.n_bags,
            y_bound=y_bound,
            assumption=assumption,
            residual_var_lower_bound=self.residual_var_lower_bound,
            declared_failure_prob=self.declared_failure_prob,
            expected_residual_var=self.expected_residual_var,
            ptr_epsilon_fraction=self.ptr_epsilon_fraction,
            ptr_target_failure=self.ptr_target_failure,
            n_bags_min=self.n_bags_min,
            noise_fraction=self.noise_fraction,
            noise_scale=self.noise_scale,
            noise_allocation=self.noise_allocation,
            fit_intercept=self.fit_intercept,
            bounds_epsilon=bounds_epsilon,
        )

    def _resolve_y_bound(self, X, y, private):
        """``(y_bound, bounds_epsilon)`` before the plan (see :func:`resolve_y_bound`)."""
        if self.assumption == "none":
            private = False
        return resolve_y_bound(
            y, X.shape[0], y_bound=self.y_bound, bounds=self.bounds,
            bounds_budget=self.bounds_budget, epsilon=self.epsilon, private=private,
            plan=lambda y_bound, bounds_epsilon: self._plan(
                X.shape[0], X.shape[1], y_bound, bounds_epsilon),
            check_budget=self._check_budget,
        )

    # -- fit -----------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Aggregate (the private release) and fit on the aggregates.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Public features. A Dask array or data frame is aggregated on
            its workers: the driver draws the partition, the PTR noise and
            the secret weights (LBA) or the label noise and weights (LLP),
            and receives only the per-bag aggregates (see
            :func:`~skprivreg.label_dp._aggregate.run_aggregation`; the
            cluster is trusted as the data owner's environment). With
            ``estimator='mlp'`` X must be a NumPy array.
        y : array-like of shape (n_samples,)
            Private labels (clipped to ``y_bound``).

        Returns
        -------
        self : object

        Raises
        ------
        ValueError
            Bad or non-finite input, or ``estimator='mlp'`` with a Dask
            ``X``; before anything is spent.
        ConfigurationError, InsufficientDataError, PrivacyInfeasibleError
            From public facts (a missing range that cannot be estimated, too
            few samples, a residual test that would pass with probability
            below 5%, a bag design of full rank); nothing spent. With
            ``bounds='data'`` the label range is read from the labels first:
            an error of the plan then depends on it, and the read is recorded
            as spent (infinite epsilon).
        PrivacyCheckFailedError
            The private residual check refused; the budget is spent
            (``privacy_spent_``).
        """
        self._reset()
        if self.mode == "llp" and is_dask_collection(X):
            self._check_mlp_numpy_input()
        X, y = validate_blockwise_data(self, X, y, multi_output=False)
        # A file's rows are read once: the bag-rank and PTR checks and the
        # aggregation must see the same features and labels.
        X, y = read_into_memory(X, "X"), read_into_memory(y, "y")
        private = self._validate_privacy_params()
        y_bound, bounds_epsilon = self._resolve_y_bound(X, y, private)
        try:
            plan = self._plan(X.shape[0], X.shape[1], y_bound, bounds_epsilon)
        except ConfigurationError:
            if math.isinf(bounds_epsilon):
                # The range was read from the labels (bounds='data'): a plan it
                # makes infeasible refuses on a value of the data, so the read is
                # recorded as spent (infinite epsilon) before the error leaves.
                self._spend(data_bound_ledger())
            raise
        plan_warnings(plan, self.random_state)
        ledger = plan.ledger()
        self._check_budget(ledger)
        # The partition is released; the spend is recorded before the first
        # secret draw (private label range, PTR, weights, noise), after the
        # label scan that may still refuse bad Dask input.
        rngs = {**self._public_rngs("partition", "postprocess"),
                **self._secret_rngs("bounds", "weights", "ptr", "noise", spend=ledger)}
        dataset = run_aggregation(
            X, y, plan, rngs, feature_names=getattr(self, "feature_names_in_", None)
        )
        self._settle(ledger)
        self._fit_dataset(dataset, X, rngs["postprocess"])
        return self

    def _check_mlp_numpy_input(self):
        # fit_aggregated fits an MLP on any LLPDataset, whatever self.mode says.
        if _is_mlp(self.estimator):
            raise ValueError(
                "estimator='mlp' trains on the rows of every bag in memory and needs "
                "X as a NumPy array; pass X.compute() (the features are public) or use "
                "a linear estimator ('ols', 'ridge') on Dask input."
            )

    def fit_aggregated(self, dataset, X=None):
        """Fit from a released dataset (the analyst's side; no label is seen).

        Parameters
        ----------
        dataset : AggregatedDataset or LLPDataset
            From :func:`skprivreg.label_dp.aggregate` (or ``aggregated_``).
        X : array-like (n_samples, n_features) or None
            The public features; required for an ``LLPDataset``. A Dask
            array or data frame is combined on its workers (linear
            estimators only).

        Returns
        -------
        self : object
            ``epsilon_``, ``delta_`` and ``privacy_report_`` are copied from
            ``dataset.privacy``; nothing is spent (post-processing), so
            ``privacy_spent_`` is an empty ledger, not for publication (and
            ``noise_reproducible_`` set) when the dataset was released with
            the testing facility's noise (``dataset.privacy['for_publication']``).
        """
        self._reset()
        validate_params(self)
        if isinstance(dataset, LLPDataset):
            if X is None:
                raise ValueError("An LLPDataset needs the public features X.")
            if is_dask_collection(X):
                self._check_mlp_numpy_input()
                validate_data(self, X, skip_check_array=True)
                set_dask_feature_names(self, X, reset=True)
                X = as_dask_array(X)
                if X.ndim != 2:
                    raise ValueError(f"Expected a 2D array for X, got {X.ndim}D.")
            else:
                X = validate_data(self, X, dtype=np.float64)
            if X.shape[0] != dataset.n_samples:
                raise ValueError("X must have the dataset's n_samples rows.")
        elif isinstance(dataset, AggregatedDataset):
            self.n_features_in_ = dataset.X_agg.shape[1]
            if dataset.feature_names is not None:
                self.feature_names_in_ = np.asarray(dataset.feature_names, dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            raise TypeError("dataset must be an AggregatedDataset or an LLPDataset.")
        if isinstance(dataset, AggregatedDataset) and _is_mlp(self.estimator):
            raise ValueError("An MLP cannot be fitted on aggregated features (LBA).")
        self.privacy_spent_ = PrivacyLedger([])
        # A dataset released with the testing facility's noise marks its fits.
        self.privacy_spent_.for_publication = bool(dataset.privacy.get("for_publication", True))
        self.noise_reproducible_ = not self.privacy_spent_.for_publication
        self._fit_dataset(dataset, X, self._public_rngs("postprocess")["postprocess"])
        return self

    def _fit_dataset(self, dataset, X, rng):
        fit_intercept = dataset.fit_intercept
        self.aggregated_ = dataset
        self.y_bound_ = None if dataset.label_bounds is None else tuple(dataset.label_bounds)
        self.privacy_report_ = dict(dataset.privacy)
        self.epsilon_ = float(dataset.privacy.get("epsilon", math.inf))
        self.delta_ = float(dataset.privacy.get("delta", 1.0))
        self.bag_indices_ = dataset.bag_indices
        self.bag_size_ = int(dataset.bag_size)
        self.n_bags_ = int(dataset.n_bags)
        self.n_samples_used_ = self.bag_size_ * self.n_bags_
        self.n_dropped_ = int(dataset.n_samples) - self.n_samples_used_
        if hasattr(self, "mlp_"):
            del self.mlp_
        if isinstance(dataset, LLPDataset) and _is_mlp(self.estimator):
            self._fit_mlp(dataset, X, rng)
            return
        Zbar = dataset.design(X)
        beta = fit_on_aggregates(
            Zbar,
            dataset.y_agg,
            estimator=self.estimator,
            alpha=self.alpha,
            fit_intercept=fit_intercept,
        )
        if fit_intercept:
            self.coef_, self.intercept_ = beta[:-1].copy(), float(beta[-1])
        else:
            self.coef_, self.intercept_ = beta.copy(), 0.0

    def _fit_mlp(self, dataset, X, rng):
        params = {}
        if not isinstance(self.estimator, str):
            given = self.estimator.get_params(deep=False)
            params = {name: given[name] for name in MLP_PARAM_NAMES if name in given}
            if params.get("batch_size") == "auto":
                params["batch_size"] = "auto"
        params.update(self.mlp_params or {})
        label_range = None
        if dataset.label_bounds is not None:
            label_range = dataset.label_bounds[1] - dataset.label_bounds[0]
        # The generator is passed to fit only: the fitted network stores none.
        net = _BagMLP(**params)
        net.fit(
            X[dataset.bag_indices],
            dataset.weights,
            dataset.y_agg,
            label_scale=label_range if label_range else 1.0,
            rng=rng,
        )
        self.mlp_ = net
        # A network has no linear coefficients; predict() uses mlp_.
        self.coef_ = None
        self.intercept_ = None

    def __sklearn_is_fitted__(self):
        # Set last by a successful fit (None for a network): a fit that fails
        # after its spend leaves the estimator unfitted (one refused before any
        # spend gets the previous fit's attributes back).
        return hasattr(self, "coef_")

    # -- predict -------------------------------------------------------
    def predict(self, X):
        """Predict with the fitted model (post-processing; nothing is spent).

        Parameters
        ----------
        X : array-like or Dask array of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray or Dask array of shape (n_samples,)
            Lazy (one task per row block) for a Dask array or data frame:
            the prediction of a row depends on that row only.
        """
        check_is_fitted(self)
        if getattr(self, "mlp_", None) is None:
            return LinearPredictMixin.predict(self, X)
        if is_dask_collection(X):
            validate_data(self, X, skip_check_array=True, reset=False)
            set_dask_feature_names(self, X, reset=False)
            X = as_dask_array(X)
            return X.astype(np.float64).rechunk({1: -1}).map_blocks(
                self.mlp_.predict, drop_axis=1, dtype=np.float64, meta=np.empty(0)
            )
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.mlp_.predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags

