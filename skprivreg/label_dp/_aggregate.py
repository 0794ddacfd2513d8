"""Running weighted LBA and noisy weighted LLP: the private residual check and the release.

Noisy weighted LLP (Brahmbhatt et al. 2023, Fig. 2): labels of a noise set
get ``N(0, sigma_g^2)`` noise, only ``ybar_j`` is aggregated, and the bags,
features and weights are released. Weighted LBA (Fig. 1) releases the
weighted feature and label aggregates of every bag (:mod:`._bags`).

Randomness: the released partition comes from ``random_state``; the weights
(secret in LBA, released in LLP), the PTR draw and LLP's noise come from
fresh OS entropy in every call (:func:`aggregation_rngs`). Secret values are
local variables of :func:`run_aggregation` and are never returned or stored.
"""

import math
import warnings
from functools import partial

import numpy as np
from sklearn.utils import check_array

from .._random import noise_is_reproducible, public_generators, secret_generators
from .._rows import (
    check_block_finite,
    is_dask_collection,
    read_into_memory,
    sum_over_row_blocks,
)
from ..base import forget_secret_frames, quiet_floats, without_float_warnings
from ..bounds import check_private_bound_feasible, check_y_bound
from ..exceptions import PrivacyCheckFailedError, PrivacyLeakWarning
from ..mechanisms import bound_bins, product_at_most, ptr_calibration, ptr_test
from ._bags import (
    _bag_blocks,
    _compute,
    _design,
    _design_width,
    _group_aggregates,
    _group_full_rank,
    _group_llp_aggregates,
    _group_min_residual,
    _group_uncertifiable,
    _raise_full_rank,
    _raise_uncertifiable,
    bag_residual_norms,
    check_bag_conditioning,
    check_bag_ranks,
    lba_aggregate,
    llp_noise_mask,
    sample_bags,
    sample_lba_weights,
)
from ._datasets import AggregatedDataset, LLPDataset
from ._label_bound import data_bound_ledger, data_label_bound, private_label_bound
from ._planning import plan_aggregation, plan_warnings

__all__ = [
    "aggregate",
    "run_aggregation",
    "aggregation_rngs",
    "diagnose_lba_assumption",
    "resolve_y_bound",
    "RNG_PURPOSES",
]

RNG_PURPOSES = ("partition", "bounds", "weights", "ptr", "noise")
_RANGE_FROM_DATA = (
    "The label range was read from the labels (a run without a guarantee: "
    "assumption='none' or epsilon=inf): not private."
)


def resolve_y_bound(
    y, n_samples, *, y_bound, bounds, bounds_budget, epsilon, private, plan, check_budget=None
):
    """``(y_bound, bounds_epsilon)`` for :func:`plan_aggregation`, before any spend.

    A declared ``y_bound`` costs nothing (``(low, high), 0``). A missing one,
    in a private run: with ``bounds='private'`` it is estimated in the release
    with ``bounds_budget * epsilon`` (``None, bounds_budget * epsilon``);
    ``plan(None, epsilon_bound)`` is called first so that a mode that cannot
    work without a declared range raises
    :class:`~skprivreg.exceptions.ConfigurationError`, then
    :func:`~skprivreg.bounds.check_private_bound_feasible` names the
    ``n_samples`` needed. With ``bounds='data'`` the range ``(-B, B)`` is read
    from the labels now (``check_budget`` sees its infinite-epsilon event
    first; :class:`~skprivreg.exceptions.PrivacyLeakWarning`).
    """
    declared = check_y_bound(y_bound)
    if declared is not None or not private:
        return declared, 0.0
    if bounds == "private":
        epsilon_bound = product_at_most(bounds_budget, epsilon)
        plan(None, epsilon_bound)
        check_private_bound_feasible(n_samples, epsilon_bound, "y_bound")
        return None, epsilon_bound
    if check_budget is not None:
        check_budget(data_bound_ledger())
    bound, _ = data_label_bound(y)
    return (-bound, bound), math.inf


def _release_label_range(y, plan, rng):
    """The plan with its private label range ``(-B, B)`` (``B`` released on ``rng``).

    Its event (``bounds_epsilon``, label-DP, replace-one) is already in the
    plan's ledger; the first draw records the spend.
    """
    bound, _ = private_label_bound(y, plan.bounds_epsilon, rng)
    return plan.with_label_bounds((-bound, bound))


def aggregation_rngs(random_state, extra_public=()):
    """The generators of one aggregation.

    The bag partition is released, so it comes from ``random_state``
    (with ``extra_public`` purposes, e.g. post-processing); the weights,
    the PTR draw and the label noise are secret draws from fresh OS entropy.
    """
    return {
        **public_generators(random_state, ("partition", *extra_public)),
        **secret_generators(("bounds", "weights", "ptr", "noise"), random_state),
    }


def _data_label_range(low, high):
    """``(-B, B)`` with ``B`` the smallest public bin at or above ``max(|low|, |high|)``.

    For the non-private mode that reads the label range from the data: the
    reported range is a public grid point, never an exact data extreme.
    """
    bins = bound_bins()
    top = max(abs(float(low)), abs(float(high)))
    bound = float(bins[min(np.searchsorted(bins, top), len(bins) - 1)])
    return -max(bound, top), max(bound, top)


def run_aggregation(X, y, plan, rngs, feature_names=None):
    """Run the planned mechanism on validated ``X`` (n, d) and 1-D ``y``.

    Order: partition (released stream); feature-only rank check; label
    clipping; the private residual check (``'ptr'``); secret aggregation.
    Raises :class:`PrivacyInfeasibleError` before any label is touched, and
    :class:`PrivacyCheckFailedError` (fixed message) when the PTR refuses;
    the caller must record the budget first (the plan's ledger).

    Dask arrays (both modes) are aggregated on the cluster by
    :func:`_run_aggregation_dask`, with the same streams, the same rank and PTR
    decisions, the same partition (and LLP weights), and the same aggregates
    up to float64 round-off. The secret weights (LBA) and label noise (LLP)
    are sent to the workers inside the compute (the cluster is trusted as
    the data owner's environment) and are never stored, logged or returned.

    Returns
    -------
    dataset : AggregatedDataset or LLPDataset
    """
    if is_dask_collection(X) or is_dask_collection(y):
        return _run_aggregation_dask(X, y, plan, rngs, feature_names)
    n = X.shape[0]
    Z = _design(X, plan.fit_intercept)
    bags, _ = sample_bags(n, plan.bag_size, plan.n_bags, rngs["partition"])
    if plan.private and plan.mode == "lba":
        check_bag_ranks(Z, bags)
        if plan.assumption == "ptr":
            check_bag_conditioning(Z, bags)
    if plan.bound_pending:
        plan = _release_label_range(y, plan, rngs["bounds"])

    label_bounds = plan.label_bounds
    if label_bounds is None:
        label_bounds = _data_label_range(np.min(y), np.max(y))
        warnings.warn(
            _RANGE_FROM_DATA,
            PrivacyLeakWarning,
            stacklevel=3,
        )
    else:
        y = np.clip(y, *label_bounds)

    ptr_passed = None
    if plan.private and plan.mode == "lba" and plan.assumption == "ptr":
        ptr_passed = _ptr_check(Z, y, bags, plan, rngs["ptr"])
    _raise_if_ptr_failed(ptr_passed, plan)
    report = _release_report(plan, ptr_passed, label_bounds)
    names = None if feature_names is None else tuple(str(v) for v in feature_names)

    if plan.mode == "lba":
        weights = sample_lba_weights(plan.n_bags, plan.bag_size, rngs["weights"])
        Zbar, ybar = lba_aggregate(Z, y, bags, weights)
        del weights
        return _lba_dataset(Zbar, ybar, X.shape[1], bags, n, plan, names, label_bounds, report)

    slot_noise = _llp_slot_noise(bags, n, plan, rngs["noise"])
    weights = rngs["weights"].standard_normal((plan.n_bags, plan.bag_size))
    ybar = _group_llp_aggregates(y[bags.ravel()], weights, slot_noise, tuple(label_bounds))
    del slot_noise
    return _llp_dataset(weights, ybar, bags, n, plan, names, label_bounds, report)


def _lba_dataset(Zbar, ybar, d, bags, n, plan, names, label_bounds, report):
    """The released :class:`AggregatedDataset` (NumPy and Dask paths)."""
    return AggregatedDataset(
        X_agg=Zbar[:, :d].copy(),
        w_sum=Zbar[:, -1].copy() if plan.fit_intercept else None,
        y_agg=ybar,
        bag_indices=bags,
        n_samples=n,
        bag_size=plan.bag_size,
        feature_names=names,
        label_bounds=tuple(label_bounds),
        fit_intercept=plan.fit_intercept,
        privacy=report,
    )


def _llp_dataset(weights, ybar, bags, n, plan, names, label_bounds, report):
    """The released :class:`LLPDataset` (NumPy and Dask paths)."""
    return LLPDataset(
        bag_indices=bags,
        weights=weights,
        y_agg=ybar,
        n_samples=n,
        bag_size=plan.bag_size,
        feature_names=names,
        label_bounds=tuple(label_bounds),
        fit_intercept=plan.fit_intercept,
        privacy=report,
    )


def _ptr_check(Z, y, bags, plan, rng):
    """Truncated-Laplace PTR on ``L = (min_j sqrt(RSS_j) - s) / Delta`` (sensitivity 1).

    PASS iff ``L >= A + Z`` with ``Z`` truncated Laplace on ``[-A, A]``
    (:func:`~skprivreg.mechanisms.ptr_test` on the score ``2A - L``): an
    unsafe dataset (``L <= 0``) never passes, the PASS/FAIL bit is
    (eps_test, delta_test)-DP, and on PASS every bag has ``RSS_j >= s^2``.
    Only the bit leaves this function: releasing the noisy statistic would
    void the guarantee.
    """
    norms = bag_residual_norms(Z, y, bags, label_bound=_label_bound(plan))
    return _ptr_decision(float(np.min(norms)), plan, rng)


def _label_bound(plan):
    return max(abs(plan.label_bounds[0]), abs(plan.label_bounds[1]))


def _raise_if_ptr_failed(ptr_passed, plan):
    if ptr_passed is not None and not ptr_passed:
        # Public facts only: the plan, never a data-dependent number.
        k_max = max(plan.n_samples // plan.n_bags_min, 1)
        larger_bags = (
            f"bag_size (now {plan.bag_size}, at most {k_max} here), "
            if plan.bag_size < k_max else ""
        )
        raise PrivacyCheckFailedError(
            "The private residual check failed: some bag's least-squares residual "
            "may be too small for the requested guarantee, so nothing was released. "
            f"A larger {larger_bags}epsilon or n_samples raises the pass probability "
            "(lba_plan shows the residual standard deviation a 95% pass needs); a "
            "retry spends a new budget."
        )


def _release_report(plan, ptr_passed, label_bounds):
    report = plan.privacy_report(ptr_passed=ptr_passed)
    report["label_bounds"] = list(label_bounds) if plan.label_bounds is not None else None
    # The released dataset says whether its secret draws were the testing
    # facility's (decided in this context, as for the generators of the run).
    report["for_publication"] = not noise_is_reproducible()
    return report


def _ptr_decision(min_residual_norm, plan, rng):
    """The PTR bit from ``min_j sqrt(RSS_j)`` (secret; drawn on the driver)."""
    s = math.sqrt(plan.rss_threshold)
    stat = (min_residual_norm - s) / plan.label_range
    cal = ptr_calibration(1.0, plan.epsilon_ptr, plan.delta_ptr)
    passed, _ = ptr_test(cal.fail_threshold - stat, 1.0, plan.epsilon_ptr, plan.delta_ptr, rng)
    return passed


def _label_scan_block(X_b, y_b, label_bounds):
    """Finiteness of a row block, and whether clipping changes any label."""
    check_block_finite(X_b, "X")
    check_block_finite(y_b, "y")
    y_b = np.asarray(y_b, dtype=np.float64)
    low = float(y_b.min(initial=np.inf))
    high = float(y_b.max(initial=-np.inf))
    clipped = label_bounds is not None and (low < label_bounds[0] or high > label_bounds[1])
    return low, high, clipped


def _merge_label_scans(a, b):
    return min(a[0], b[0]), max(a[1], b[1]), a[2] or b[2]


def _llp_slot_noise(bags, n_samples, plan, rng):
    """The secret per-slot noise (m, k) of LLP (NumPy and Dask paths alike).

    From the ``'noise'`` stream: the noise set :func:`llp_noise_mask`, then
    ``|N|`` standard normals assigned to the members of ``N`` in increasing
    row order. Rows outside the bags (possible with ``'global'`` allocation)
    get their draw but are unused.
    """
    mask = llp_noise_mask(bags, n_samples, plan.noise_fraction, plan.noise_allocation, rng)
    per_row = np.zeros(n_samples)
    per_row[mask] = plan.noise_scale * rng.standard_normal(int(mask.sum()))
    slot_noise = per_row[bags]
    del per_row, mask
    return slot_noise


def _run_aggregation_dask(X, y, plan, rngs, feature_names=None):
    """:func:`run_aggregation` for Dask arrays, without collecting X or y on the driver.

    Both modes, with the same order, the same streams and the same per-bag
    arithmetic as the NumPy path. The partition is drawn on the driver from
    the released stream; a first pass over the row blocks checks finiteness
    and the label range (NaN or infinity fails here, before anything is
    spent; the :class:`PrivacyLeakWarning` of the non-private mode is that of
    the NumPy path); then the used rows are gathered on the workers into
    blocks of whole bags (:func:`_bag_blocks`).

    ``mode='lba'``: the feature-only rank check and the per-bag residual
    norms (``'ptr'``) run on the gathered blocks with the NumPy code, so the
    rank decision and ``min_j sqrt(RSS_j)`` are bit-identical; the PTR draw
    happens on the driver. The secret N(0, 1) weights are drawn on the
    driver from the secret stream and shipped, one slice per block of bags;
    only the ``(m, p)`` aggregates come back.

    ``mode='llp'``: only the labels are gathered. The noise set, the noise
    values (``'noise'``) and the released weights (``'weights'``) are drawn
    on the driver exactly as on NumPy input; the weights and the secret
    per-slot noise (zero on slots outside the noise set) are shipped, one
    slice per block of bags, and the workers return only the ``(m,)`` noisy
    aggregates of the clipped labels. The features are not moved: the
    analyst's :meth:`LLPDataset.design` combines them on the workers later.

    Secrets travel inside tasks with random keys (``pure=False``; no hash of
    them is computed), and nothing random runs on a worker. Trust
    assumption: the cluster's workers and scheduler are the data owner's
    environment (they see the labels anyway); the secret weights (LBA) and
    the label noise (LLP) live in task memory only during the compute and
    are never stored, logged or returned.
    """
    import dask
    import dask.array as da

    # A random name: Dask's default hashes the values into every task key.
    X, y = (v if is_dask_collection(v) else da.from_array(np.asarray(v), name=False)
            for v in (X, y))
    n = X.shape[0]
    k, m, fit_intercept = plan.bag_size, plan.n_bags, plan.fit_intercept
    lba = plan.mode == "lba"
    bags, _ = sample_bags(n, k, m, rngs["partition"])

    low, high, clipped = sum_over_row_blocks(
        partial(_label_scan_block, label_bounds=plan.label_bounds), X, y,
        combine=_merge_label_scans,
    )
    if lba:
        x_blocks, y_blocks, groups = _bag_blocks(X, y, bags)
    else:
        # LLP aggregates the labels only; blocks sized by X's row chunks.
        _, y_blocks, groups = _bag_blocks(None, y, bags, chunk_rows=max(X.chunks[0]))
    sizes = [g.stop - g.start for g in groups]

    if lba and plan.private and k <= _design_width(X.shape[1], fit_intercept):
        flags = _compute(
            dask.delayed(quiet_floats(_group_full_rank))(xb, fit_intercept, g, k)
            for xb, g in zip(x_blocks, sizes)
        )
        if any(flags):
            _raise_full_rank(k, _design_width(X.shape[1], fit_intercept))
    if lba and plan.private and plan.assumption == "ptr":
        flags = _compute(
            dask.delayed(quiet_floats(_group_uncertifiable))(xb, fit_intercept, g, k)
            for xb, g in zip(x_blocks, sizes)
        )
        if any(flags):
            _raise_uncertifiable()
    if plan.bound_pending:
        plan = _release_label_range(y, plan, rngs["bounds"])

    label_bounds = plan.label_bounds
    if label_bounds is None:
        label_bounds = _data_label_range(low, high)
        warnings.warn(
            _RANGE_FROM_DATA,
            PrivacyLeakWarning,
            stacklevel=3,
        )

    ptr_passed = None
    if lba and plan.private and plan.assumption == "ptr":
        lows = _compute(
            dask.delayed(quiet_floats(_group_min_residual))(
                xb, yb, fit_intercept, g, k, tuple(label_bounds), _label_bound(plan)
            )
            for xb, yb, g in zip(x_blocks, y_blocks, sizes)
        )
        ptr_passed = _ptr_decision(min(lows), plan, rngs["ptr"])
        del lows
    _raise_if_ptr_failed(ptr_passed, plan)
    report = _release_report(plan, ptr_passed, label_bounds)
    names = None if feature_names is None else tuple(str(v) for v in feature_names)

    if not lba:
        slot_noise = _llp_slot_noise(bags, n, plan, rngs["noise"])
        weights = rngs["weights"].standard_normal((m, k))
        parts = _compute(
            dask.delayed(quiet_floats(_group_llp_aggregates), pure=False)(
                yb, weights[g], slot_noise[g], tuple(label_bounds)
            )
            for yb, g in zip(y_blocks, groups)
        )
        del slot_noise
        ybar = np.concatenate(parts)
        del parts
        return _llp_dataset(weights, ybar, bags, n, plan, names, label_bounds, report)

    weights = sample_lba_weights(m, k, rngs["weights"])
    parts = _compute(
        dask.delayed(quiet_floats(_group_aggregates), pure=False)(
            xb, yb, weights[g], fit_intercept, tuple(label_bounds)
        )
        for xb, yb, g in zip(x_blocks, y_blocks, groups)
    )
    del weights
    Zbar = np.concatenate([p[0] for p in parts])
    ybar = np.concatenate([p[1] for p in parts])
    del parts
    return _lba_dataset(Zbar, ybar, X.shape[1], bags, n, plan, names, label_bounds, report)


@without_float_warnings
def aggregate(
    X,
    y,
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
    fit_intercept=True,
    random_state=None,
    **withdrawn,
):
    """Release a label-DP aggregated dataset (the data owner's step).

    Runs weighted LBA (``mode='lba'``) or noisy weighted LLP
    (``mode='llp'``) and returns the private dataset with its ledger; an
    analyst fits on it with
    :meth:`WeightedLBARegressor.fit_aggregated` without seeing any label.

    Privacy: label-DP under replace-one-label neighbours (features public),
    ``(epsilon, delta)`` as reported in ``dataset.privacy`` and the ledger
    (never above the target). See :class:`WeightedLBARegressor` for the
    three assumptions and the budget split.

    Parameters
    ----------
    X : array-like (n, d)
        Public features. Dask arrays or data frames (both modes) are
        aggregated on their cluster without collecting X or y (see
        :func:`run_aggregation` for the trust assumption).
    y : array-like (n,)
        Private labels, clipped to ``y_bound``.
    epsilon, delta, mode, bag_size, y_bound, bounds, bounds_budget, ... :
        As in :class:`WeightedLBARegressor` (a missing ``y_bound`` is
        estimated privately with ``bounds_budget * epsilon``, or read from
        the labels with ``bounds='data'``, not private).
    random_state : None, int or Generator
        Seeds the released bag partition only; the weights, the PTR draw and
        the label noise come from fresh OS entropy in every call (inside
        :func:`skprivreg.testing.reproducible_noise` they are seeded, and
        the ledger is marked not for publication).

    Returns
    -------
    dataset : AggregatedDataset or LLPDataset
        Contains no weights (LBA), no labels and no noise.
    ledger : PrivacyLedger

    Raises
    ------
    ConfigurationError, InsufficientDataError, PrivacyInfeasibleError
        Before any label is read; nothing is spent. With ``bounds='data'``
        the label range is read first (no privacy for it): a refusal of the
        plan then depends on that range, which its message may cite.
    PrivacyCheckFailedError
        The residual check refused; the budget is spent (the exception's
        ``ledger`` attribute holds it).
    """
    if withdrawn:
        name = next(iter(withdrawn))
        raise TypeError(
            f"aggregate() has no parameter {name!r}"
            + (": it is called 'y_bound'." if name == "label_bounds" else ".")
        )
    feature_names = None
    if is_dask_collection(X) or is_dask_collection(y):
        # Shapes and dtypes only; finiteness is checked on the workers.
        X, y, feature_names = _validate_dask_free(X, y)
    else:
        # A file's rows are read once: the checks (finiteness, bag ranks) and
        # the aggregation must see the same values.
        X = read_into_memory(validate_data_free(X), "X")
        y = read_into_memory(np.asarray(y, dtype=np.float64), "y")
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError("y must be 1-D with one label per row of X.")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity.")
    def make_plan(y_bound, bounds_epsilon):
        return plan_aggregation(
            X.shape[0], X.shape[1], y_bound=y_bound, bounds_epsilon=bounds_epsilon, **options
        )

    options = dict(
        epsilon=epsilon,
        delta=delta,
        mode=mode,
        bag_size=bag_size,
        n_bags=n_bags,
        assumption=assumption,
        residual_var_lower_bound=residual_var_lower_bound,
        declared_failure_prob=declared_failure_prob,
        expected_residual_var=expected_residual_var,
        ptr_epsilon_fraction=ptr_epsilon_fraction,
        ptr_target_failure=ptr_target_failure,
        n_bags_min=n_bags_min,
        noise_fraction=noise_fraction,
        noise_scale=noise_scale,
        noise_allocation=noise_allocation,
        fit_intercept=fit_intercept,
    )
    private = assumption != "none" and math.isfinite(epsilon)
    plan = make_plan(*resolve_y_bound(
        y, X.shape[0], y_bound=y_bound, bounds=bounds, bounds_budget=bounds_budget,
        epsilon=epsilon, private=private, plan=make_plan,
    ))
    plan_warnings(plan, random_state)
    # Whether the secret draws are seeded by the testing facility is decided
    # with the generators; such a run's ledger is not for publication.
    reproducible = noise_is_reproducible()
    rngs = aggregation_rngs(random_state)
    ledger = plan.ledger()
    if reproducible:
        ledger.for_publication = False
    try:
        dataset = run_aggregation(X, y, plan, rngs, feature_names=feature_names)
    except BaseException as exc:
        if isinstance(exc, PrivacyCheckFailedError):
            exc.ledger = ledger
        forget_secret_frames(exc)  # the secret generators and draws of this run
        del rngs  # this frame's own (it is still running)
        raise
    return dataset, ledger


def _validate_dask_free(X, y):
    """Dask X, y as float64 Dask arrays (no compute) and the frame's column names."""
    from sklearn.base import BaseEstimator

    from .._rows import validate_blockwise_data

    holder = BaseEstimator()
    X, y = validate_blockwise_data(holder, X, y, multi_output=False)
    return X, y, getattr(holder, "feature_names_in_", None)


def validate_data_free(X):
    """float64, 2-D, finite features (outside an estimator)."""
    return check_array(X, dtype=np.float64, ensure_2d=True)


def diagnose_lba_assumption(X, y, bag_indices, s=None, fit_intercept=True):
    """Per-bag least-squares RSS of a partition: a NON-PRIVATE curator diagnostic.

    Returns ``RSS_j`` for every bag (and, when ``s`` is given, whether all
    bags satisfy ``RSS_j >= s^2``, the ``'declared'`` assumption A(s)).

    Never call this inside a release pipeline: the values depend on the
    private labels, and acting on them (aborting, re-drawing the partition,
    choosing the bag size, telling an analyst) voids the label-DP guarantee.
    Use ``assumption='ptr'`` for a private check.
    """
    X = validate_data_free(X)
    y = np.asarray(y, dtype=np.float64)
    bags = np.asarray(bag_indices)
    rss = bag_residual_norms(_design(X, fit_intercept), y, bags) ** 2
    if s is None:
        return rss
    return rss, bool(np.all(rss >= float(s) ** 2))
