"""Randomised response on bins: the optimal label randomiser for squared loss.

Ghazi, Kamath, Kumar, Leeman, Manurangsi, Varadarajan & Zhang (2023),
*Regression with Label Differential Privacy*, ICLR 2023 (arXiv:2212.06074).
Given a prior :math:`P` over label values :math:`s_1 < \\dots < s_k`, the
epsilon-DP label randomiser that minimises the expected squared loss
:math:`E(\\hat y - y)^2` is *randomised response on bins*: the label range is
cut into :math:`m` intervals of consecutive values, each with an output value
:math:`\\hat y_j`, and the label's interval index goes through
:math:`m`-ary randomised response (kept with probability
:math:`p = e^\\varepsilon / (e^\\varepsilon + m - 1)`, otherwise one of the
other indices uniformly, probability :math:`q = 1 / (e^\\varepsilon + m - 1)`
each). For a partition :math:`S_1, \\dots, S_m` the expected loss is

.. math::
    L = \\frac{1}{e^\\varepsilon + m - 1} \\sum_{j=1}^m c(S_j), \\quad
    c(S) = \\min_{\\hat y} \\Big[(e^\\varepsilon - 1) \\sum_{s \\in S} P(s)
        (\\hat y - s)^2 + \\sum_{s} P(s)(\\hat y - s)^2\\Big],

separable over the bins, so a dynamic program over (number of cells covered,
number of bins) finds the optimal interval partition for every :math:`m` at
once, in :math:`O(k^3)` time; the minimiser of :math:`c(S)` is

.. math::
    \\hat y(S) = \\frac{(e^\\varepsilon - 1) \\sum_{s \\in S} P(s) s + E_P[y]}
        {(e^\\varepsilon - 1) P(S) + 1},

which is the posterior mean :math:`E_P[y \\mid \\text{output } S]`: replacing the
outputs by posterior means changes nothing. Its regression targets shrink
towards the prior mean, which biases a linear fit. The debiased targets

.. math::
    z_j = \\frac{c_j - q \\sum_l c_l}{p - q}, \\qquad c_j = E_P[y \\mid y \\in S_j],

satisfy :math:`E[z \\mid y] = c_{j(y)}` for *every* label :math:`y` (not only
on average under the prior), so least squares on :math:`z` estimates the
regression of the bin means, at the price of a larger variance
(:func:`unbiased_targets`). The paper's bins minimise one label's loss; for
least squares on :math:`n` rows the variance of the targets counts only
about :math:`p/n` times, so :func:`rr_on_bins_for_regression` chooses more,
narrower bins (less quantisation bias) for the unbiased targets.
"""

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from .._compat import HasMethods, Interval, StrOptions, fit_context, validate_data
from .._rows import read_into_memory
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import DPEstimatorMixin
from ..bounds import (
    check_private_bound_feasible,
    check_y_bound,
    data_norm_bound,
    private_norm_bound,
)
from ..exceptions import ConfigurationError
from ..linear_model._base import LinearPredictMixin
from ..mechanisms import (
    bound_bins,
    counts_above,
    difference_at_most,
    noisy_histogram,
    product_at_most,
    randomized_response,
    randomized_response_probabilities,
)
from ._lba import fit_on_aggregates

__all__ = [
    "RROnBinsRegressor",
    "RROnBins",
    "rr_on_bins",
    "rr_on_bins_for_regression",
    "debiased_risk",
    "rr_expected_loss",
    "unbiased_targets",
    "label_cells",
    "cell_values",
    "prior_from_counts",
]

# e^eps beyond this is treated as e^700: the optimisation is then the
# non-private one up to float round-off.
_MAX_LOG = 700.0
# Majorise-minimise steps per number of bins in rr_on_bins_for_regression.
_MM_STEPS = 6


def cell_values(low, high, n_cells):
    """Midpoints of ``n_cells`` equal-width cells of ``[low, high]`` (public)."""
    edges = np.linspace(float(low), float(high), int(n_cells) + 1)
    return 0.5 * (edges[:-1] + edges[1:])


def label_cells(y, low, high, n_cells):
    """Index of the equal-width cell of ``[low, high]`` holding each clipped label."""
    y = np.clip(np.asarray(y, dtype=np.float64), low, high)
    index = np.floor((y - low) / (high - low) * n_cells).astype(np.int64)
    return np.clip(index, 0, n_cells - 1)


def prior_from_counts(counts):
    """A probability vector from (noisy) counts: negatives set to 0, then normalised.

    Post-processing of the counts; uniform if nothing positive remains.
    """
    prior = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    total = prior.sum()
    if not total > 0:
        return np.full(prior.shape, 1.0 / prior.size)
    return prior / total


@dataclass(frozen=True)
class RROnBins:
    """An RR-on-bins randomiser: interval bins of the cells, outputs, RR probabilities.

    Attributes
    ----------
    cell_to_bin : ndarray of shape (k,)
        Bin of each cell (non-decreasing, values ``0..m-1``).
    outputs : ndarray of shape (m,)
        Loss-optimal output of each bin (the posterior mean of the label given
        that output, under the prior).
    bin_means : ndarray of shape (m,)
        :math:`c_j = E_P[y \\mid y \\in S_j]` (mean of the bin's cell values
        when the bin has no prior mass).
    p, q : float
        Probability of keeping the bin, and of each other bin.
    expected_loss : float
        :math:`E_P (\\hat y - y)^2` of the randomiser under the prior.
    """

    cell_to_bin: np.ndarray
    outputs: np.ndarray
    bin_means: np.ndarray
    p: float
    q: float
    expected_loss: float

    @property
    def n_bins(self):
        return int(self.outputs.size)


def _interval_costs(prior, values, growth):
    """``cost[a, b] = c(cells a..b)`` and its minimiser, ``inf`` for ``a > b``."""
    cum = lambda v: np.concatenate([[0.0], np.cumsum(v)])  # noqa: E731
    c0, c1, c2 = cum(prior), cum(prior * values), cum(prior * values**2)
    mass = c0[None, 1:] - c0[:-1, None]
    first = c1[None, 1:] - c1[:-1, None]
    second = c2[None, 1:] - c2[:-1, None]
    m0, m1, m2 = c0[-1], c1[-1], c2[-1]
    with np.errstate(invalid="ignore", over="ignore"):
        output = (growth * first + m1) / (growth * mass + m0)
        within = np.maximum(second - 2.0 * output * first + output**2 * mass, 0.0)
        overall = np.maximum(m2 - 2.0 * output * m1 + output**2 * m0, 0.0)
        cost = growth * within + overall
    cost[np.tril_indices(prior.size, -1)] = np.inf
    return cost, output


def rr_on_bins(prior, values, epsilon):
    """The optimal RR-on-bins randomiser for squared loss under ``prior``.

    The dynamic program of Ghazi et al. (2023): ``F[j, b]``, the least sum of
    bin costs :math:`c(S)` covering cells ``0..b-1`` with ``j`` interval bins,
    is ``min_a F[j-1, a] + c(a..b-1)``; the number of bins is the ``m``
    minimising :math:`F[m, k] / (e^\\varepsilon + m - 1)`. Ties go to the
    fewest bins and the leftmost cut. A pure function of the (released)
    prior and public values: post-processing.

    Parameters
    ----------
    prior : ndarray of shape (k,)
        Probabilities of the cells (sum 1).
    values : ndarray of shape (k,)
        Increasing label value of each cell.
    epsilon : float
        Epsilon of the randomiser (``np.inf``: no randomisation).

    Returns
    -------
    RROnBins
    """
    prior = np.asarray(prior, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    k = prior.size
    if values.shape != (k,) or k < 1:
        raise ValueError("prior and values must be 1-d arrays of the same length >= 1.")
    log_growth = min(float(epsilon), _MAX_LOG)
    growth = math.expm1(log_growth)
    cost, output = _interval_costs(prior, values, growth)
    best = np.full((k + 1, k + 1), np.inf)
    best[0, 0] = 0.0
    cut = np.zeros((k + 1, k + 1), dtype=np.int64)
    for j in range(1, k + 1):
        total = best[j - 1, :k, None] + cost
        cut[j, 1:] = np.argmin(total, axis=0)
        best[j, 1:] = total[cut[j, 1:], np.arange(k)]
    # L_m = F[m, k] / (e^eps + m - 1), computed as F e^-eps / (1 + (m - 1) e^-eps).
    shrink = math.exp(-log_growth)
    sizes = np.arange(1, k + 1)
    losses = best[1:, k] / (growth + sizes) if growth < 1e300 else best[1:, k] * shrink
    m = int(np.argmin(losses)) + 1
    cell_to_bin = np.zeros(k, dtype=np.int64)
    outputs = np.zeros(m)
    bin_means = np.zeros(m)
    end = k
    for j in range(m, 0, -1):
        start = int(cut[j, end])
        cell_to_bin[start:end] = j - 1
        outputs[j - 1] = output[start, end - 1]
        mass = prior[start:end].sum()
        bin_means[j - 1] = (
            (prior[start:end] * values[start:end]).sum() / mass
            if mass > 0 else values[start:end].mean()
        )
        end = start
    p, q = randomized_response_probabilities(float(epsilon), m)
    return RROnBins(cell_to_bin, outputs, bin_means, p, q, float(losses[m - 1]))


def rr_expected_loss(prior, values, cell_to_bin, outputs, epsilon):
    """:math:`E_P(\\hat y - y)^2` of RR over ``outputs`` with bins ``cell_to_bin``.

    Any map from cells to bins (not only intervals); used to check
    :func:`rr_on_bins` against a brute-force search.
    """
    outputs = np.asarray(outputs, dtype=np.float64)
    p, q = randomized_response_probabilities(epsilon, outputs.size)
    sq = (outputs[None, :] - np.asarray(values, dtype=np.float64)[:, None]) ** 2
    own = sq[np.arange(len(values)), np.asarray(cell_to_bin)]
    return float(np.dot(prior, (p - q) * own + q * sq.sum(axis=1)))


def debiased_risk(prior, values, cell_to_bin, epsilon, variance_weight):
    """Quantisation error plus weighted variance of the unbiased targets, under ``prior``.

    .. math::
        J = E_P\\big[(c_{j(y)} - y)^2\\big]
            + \\lambda\\, E_P\\big[\\operatorname{Var}(z \\mid y)\\big],

    with :math:`z` the unbiased targets of the bins (:func:`unbiased_targets`)
    and :math:`\\lambda` = ``variance_weight``. For least squares with
    :math:`p` coefficients on :math:`n` rows, label noise of variance
    :math:`v` independent of the features adds about :math:`v p / n` to the
    test MSE, so :math:`\\lambda = p/n`; the quantisation error counts in
    full (an upper bound on the bias it can cause).
    """
    prior = np.asarray(prior, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    cell_to_bin = np.asarray(cell_to_bin)
    m = int(cell_to_bin.max()) + 1
    mass = np.bincount(cell_to_bin, weights=prior, minlength=m)
    first = np.bincount(cell_to_bin, weights=prior * values, minlength=m)
    counts = np.bincount(cell_to_bin, minlength=m)
    plain = np.bincount(cell_to_bin, weights=values, minlength=m) / np.maximum(counts, 1)
    means = np.where(mass > 0, first / np.where(mass > 0, mass, 1.0), plain)
    quantisation = float(prior @ (values - means[cell_to_bin]) ** 2)
    p, q = randomized_response_probabilities(epsilon, m)
    z = unbiased_targets(means, p, q)
    second = (p - q) * z**2 + q * np.sum(z**2)  # E[z^2 | bin]
    variance = float(mass @ np.maximum(second - means**2, 0.0))
    return quantisation + variance_weight * variance


def rr_on_bins_for_regression(prior, values, epsilon, variance_weight):
    """Interval bins for the unbiased targets: fewer shrinkage, more bins than the paper's.

    For each number of bins :math:`m`, the dynamic program of
    :func:`rr_on_bins` minimises a separable surrogate of
    :func:`debiased_risk`: the exact risk is separable except for a term
    :math:`-\\lambda (q C / (p - q))^2`, :math:`C = \\sum_l (c_l - \\mu)`,
    :math:`\\mu = E_P[y]`, which equals :math:`\\lambda \\min_t (t^2 - 2 t q C / (p - q))`
    and is linear in the bins for fixed :math:`t`; alternating the partition
    and :math:`t` (majorise-minimise) never increases the risk. Every
    candidate, and the paper's bins (:func:`rr_on_bins`), is scored by the
    exact :func:`debiased_risk` and the best is kept. Not guaranteed
    globally optimal: on random 8-cell priors it matched a brute-force search
    over all interval partitions in 29 of 30 cases, worst gap 0.4%.
    The outputs and probabilities are those of the chosen bins (as in
    :func:`rr_on_bins`). Post-processing of the prior.
    """
    prior = np.asarray(prior, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    k = prior.size
    mean = float(prior @ values)
    shifted = values - mean
    cum = lambda v: np.concatenate([[0.0], np.cumsum(v)])  # noqa: E731
    c0, c1, c2 = cum(prior), cum(prior * shifted), cum(prior * shifted**2)
    mass = c0[None, 1:] - c0[:-1, None]
    first = c1[None, 1:] - c1[:-1, None]
    second = c2[None, 1:] - c2[:-1, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = np.where(mass > 0, first / np.where(mass > 0, mass, 1.0), 0.0)
    within = np.maximum(second - centre * first, 0.0)
    invalid = np.tril_indices(k, -1)
    # The paper's bins are a candidate too: the search below is not exact.
    best_map = rr_on_bins(prior, values, epsilon).cell_to_bin
    best_score = debiased_risk(prior, values, best_map, epsilon, variance_weight)
    for m in range(1, k + 1):
        p, q = randomized_response_probabilities(epsilon, m)
        gap = p - q
        if gap <= 0:
            break
        base = within + variance_weight * centre**2 * (mass / gap + q / gap**2 - mass)
        shift, previous = 0.0, None
        for _ in range(_MM_STEPS):
            # -(q C'/gap)^2 = min_t t^2 - 2 t (q/gap) sum_l c'_l: linear per bin.
            cost = base - variance_weight * 2.0 * shift * (q / gap) * centre
            cost[invalid] = np.inf
            cell_to_bin = _interval_dp(cost, m)
            if cell_to_bin is None or (previous is not None
                                       and np.array_equal(cell_to_bin, previous)):
                break
            previous = cell_to_bin
            score = debiased_risk(prior, values, cell_to_bin, epsilon, variance_weight)
            if score < best_score:
                best_score, best_map = score, cell_to_bin
            bin_mass = np.bincount(cell_to_bin, weights=prior, minlength=m)
            bin_first = np.bincount(cell_to_bin, weights=prior * shifted, minlength=m)
            if np.any(bin_mass <= 0):
                break
            shift = q / gap * float(np.sum(bin_first / bin_mass))
        if previous is None:
            break
    return _design_for_bins(prior, values, best_map, epsilon)


def _interval_dp(cost, m):
    """Least-cost partition of the cells into exactly ``m`` intervals (``None`` if none)."""
    k = cost.shape[0]
    table = np.full((m + 1, k + 1), np.inf)
    table[0, 0] = 0.0
    cut = np.zeros((m + 1, k + 1), dtype=np.int64)
    for j in range(1, m + 1):
        total = table[j - 1, :k, None] + cost
        cut[j, 1:] = np.argmin(total, axis=0)
        table[j, 1:] = total[cut[j, 1:], np.arange(k)]
    if not np.isfinite(table[m, k]):
        return None
    cell_to_bin = np.zeros(k, dtype=np.int64)
    end = k
    for j in range(m, 0, -1):
        start = int(cut[j, end])
        cell_to_bin[start:end] = j - 1
        end = start
    return cell_to_bin


def _design_for_bins(prior, values, cell_to_bin, epsilon):
    """The RROnBins of a given interval binning, with loss-optimal outputs."""
    m = int(cell_to_bin.max()) + 1
    growth = math.expm1(min(float(epsilon), _MAX_LOG))
    mass = np.bincount(cell_to_bin, weights=prior, minlength=m)
    first = np.bincount(cell_to_bin, weights=prior * values, minlength=m)
    counts = np.bincount(cell_to_bin, minlength=m)
    plain = np.bincount(cell_to_bin, weights=values, minlength=m) / np.maximum(counts, 1)
    means = np.where(mass > 0, first / np.where(mass > 0, mass, 1.0), plain)
    outputs = (growth * first + prior @ values) / (growth * mass + prior.sum())
    p, q = randomized_response_probabilities(float(epsilon), m)
    loss = rr_expected_loss(prior, values, cell_to_bin, outputs, epsilon)
    return RROnBins(cell_to_bin, outputs, means, p, q, loss)


def unbiased_targets(bin_means, p, q):
    """Debiased regression targets :math:`z_j = (c_j - q \\sum_l c_l) / (p - q)`.

    For a label in bin :math:`i` the randomised index is :math:`i` with
    probability :math:`p` and each other index with probability :math:`q`, so
    :math:`E[z \\mid y] = (p - q) z_i + q \\sum_l z_l = c_i` (using
    :math:`p + (m - 1) q = 1`, hence :math:`\\sum_l z_l = \\sum_l c_l`). The
    inverse of the RR channel applied to the bin means: post-processing.
    """
    bin_means = np.asarray(bin_means, dtype=np.float64)
    if bin_means.size == 1 or q == 0.0:
        return bin_means.copy()
    return (bin_means - q * bin_means.sum()) / (p - q)


class RROnBinsRegressor(DPEstimatorMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """Label-DP linear regression on labels randomised by RR on bins.

    Ghazi et al. (2023), *Regression with Label Differential Privacy*, ICLR
    (arXiv:2212.06074). The fit

    1. clips the labels to the label range ``[low, high]`` (declared, or
       released privately) and counts them on ``n_cells`` public equal-width
       cells; a Laplace histogram (scale :math:`2/\\varepsilon_{prior}`) gives
       a private prior over the cells;
    2. computes, from that prior only, interval bins and their outputs:
       with ``bins='loss'`` those that minimise the expected squared loss of
       the randomised label (:func:`rr_on_bins`, the paper's dynamic
       program); with ``bins='regression'`` (default) those that minimise the
       quantisation error plus :math:`p/n` times the variance of the unbiased
       targets (:func:`rr_on_bins_for_regression`: least squares averages
       label noise over :math:`n` rows, so it can afford more bins, hence less
       quantisation bias, than one label's loss suggests);
    3. replaces each label's bin index by :math:`m`-ary randomised response
       at :math:`\\varepsilon_{RR}` (:func:`skprivreg.mechanisms.randomized_response`);
    4. fits a linear model (OLS by default) of the public features on the
       regression targets of the released indices: with ``debias=True``
       (default) the unbiased targets :math:`z_j = (c_j - q\\sum_l c_l)/(p - q)`
       (:func:`unbiased_targets`: :math:`E[z \\mid y]` equals the prior mean of
       the label's bin, so least squares is not shrunk), with
       ``debias=False`` the paper's outputs :math:`\\hat y_j` (posterior means,
       which shrink the fitted slopes by about :math:`p - q`).

    **Guarantee.** Pure epsilon label-DP: features public, neighbouring
    datasets differ in one label (replace-one, n public); no delta. Budget
    split (basic composition, each part a separate event): the label bound,
    if not declared, :math:`\\varepsilon_{bound} = ` ``bounds_budget *
    epsilon`` (two halves: upper bounds of the positive and negative parts
    of the labels); the prior :math:`\\varepsilon_{prior} = ` ``prior_budget *
    epsilon``; the randomiser gets the rest,
    :math:`\\varepsilon_{RR} = \\varepsilon - \\varepsilon_{bound} -
    \\varepsilon_{prior}`. Each randomised index depends on one label, so the
    released vector is :math:`\\varepsilon_{RR}`-DP given the prior; steps 2
    and 4 are post-processing.

    **Missing bounds.** Without ``y_bound`` and with ``bounds='private'``
    (default), ``bounds_budget * epsilon`` buys a private range
    ``(-B_-, B_+)``: :math:`B_+` bounds :math:`\\max(y, 0)` and :math:`B_-`
    bounds :math:`\\max(-y, 0)` (each an AboveThreshold on public geometric
    bins, :func:`skprivreg.bounds.private_norm_bound`, at half the share). If
    n is too small for that, :class:`~skprivreg.exceptions.ConfigurationError`
    is raised before any spend, naming the n needed. ``bounds='data'`` reads
    the range from the labels (rounded outwards to the public bin grid): not
    private, a :class:`~skprivreg.exceptions.PrivacyLeakWarning` and an
    infinite-epsilon event. ``epsilon=np.inf`` (non-private mode) fits the
    linear model on the labels themselves (clipped to ``y_bound`` if
    declared) and needs no bound.

    **Dask.** Dask arrays and data frames are collected to the driver (the
    features and labels as NumPy arrays) before the spend; the randomiser
    then runs there on fresh secret generators.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total label-DP budget (``np.inf``: non-private test mode).
    y_bound : float or (low, high), default=None
        Public label range: a float ``B`` means ``[-B, B]``. Labels are
        clipped to it. ``None``: see *Missing bounds*.
    bounds : {'private', 'data'}, default='private'
        How a missing ``y_bound`` is obtained.
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon spent on a missing label range.
    prior_budget : float in (0, 1), default=0.05
        Share of epsilon spent on the private prior.
    n_cells : int, default=64
        Public equal-width cells of the label range on which the prior is
        estimated; the bins are unions of consecutive cells and a label is
        represented by its cell (midpoint) in the bin means.
    debias : bool, default=True
        Regress on the unbiased targets (``True``) or on the paper's
        loss-optimal outputs (``False``).
    bins : {'regression', 'loss'}, default='regression'
        How the bins are chosen from the prior: for the variance of the
        least-squares fit on the unbiased targets (``'regression'``, with
        :math:`\\lambda = p / n`, :math:`p` the number of coefficients), or
        for the expected squared loss of one randomised label (``'loss'``,
        the paper's optimal randomiser).
    estimator : 'ols', 'ridge' or an sklearn linear regressor, default='ols'
    alpha : float, default=0.0
        Ridge penalty for ``estimator='ridge'`` (intercept unpenalised).
    fit_intercept : bool, default=True
    accountant : BudgetAccountant or None
    random_state : None, int or Generator
        Unused for the private draws, which come from fresh OS entropy.

    Attributes
    ----------
    coef_, intercept_ : linear model
    y_bound_ : tuple (low, high)
        The label range used.
    prior_ : ndarray of shape (n_cells,)
        The private prior (released).
    bin_edges_ : ndarray of shape (n_bins_ + 1,)
        Edges of the bins in label units.
    outputs_ : ndarray of shape (n_bins_,)
        Loss-optimal outputs of the bins.
    targets_ : ndarray of shape (n_bins_,)
        Regression targets of the released indices (``outputs_`` or the
        unbiased targets).
    n_bins_ : int
    keep_probability_ : float
        :math:`p` of the randomised response.
    epsilon_ : float
    privacy_spent_ : PrivacyLedger

    See Also
    --------
    GaussianLabelNoiseRegressor : Label-DP by Gaussian noise on every label.
    WeightedLBARegressor : Label-DP by weighted bag aggregation.
    sklearn.linear_model.LinearRegression : The non-private least squares.

    References
    ----------
    B. Ghazi, P. Kamath, R. Kumar, E. Leeman, P. Manurangsi, A. Varadarajan
    and C. Zhang, "Regression with label differential privacy", ICLR 2023,
    arXiv:2212.06074.

    Examples
    --------
    >>> import numpy as np
    >>> from skprivreg.label_dp import RROnBinsRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 3)); y = X @ [1.0, -2.0, 0.5] + rng.normal(size=20000)
    >>> est = RROnBinsRegressor(epsilon=2.0, y_bound=(-10.0, 10.0)).fit(X, y)
    >>> est.coef_.shape
    (3,)
    >>> [(e.name, e.notion, e.epsilon, e.delta) for e in est.privacy_spent_.events]
    [('label_prior', 'label', 0.1, 0.0), ('label_rr', 'label', 1.9, 0.0)]
    """

    _parameter_constraints = {
        "epsilon": DPEstimatorMixin._privacy_parameter_constraints["epsilon"],
        "accountant": DPEstimatorMixin._privacy_parameter_constraints["accountant"],
        "random_state": DPEstimatorMixin._privacy_parameter_constraints["random_state"],
        "y_bound": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bounds": [StrOptions({"private", "data"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
        "prior_budget": [Interval(Real, 0, 1, closed="neither")],
        "n_cells": [Interval(Integral, 2, None, closed="left")],
        "debias": ["boolean"],
        "bins": [StrOptions({"regression", "loss"})],
        "estimator": [StrOptions({"ols", "ridge"}), HasMethods(["fit"])],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        y_bound=None,
        bounds="private",
        bounds_budget=0.1,
        prior_budget=0.05,
        n_cells=64,
        debias=True,
        bins="regression",
        estimator="ols",
        alpha=0.0,
        fit_intercept=True,
        accountant=None,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.y_bound = y_bound
        self.bounds = bounds
        self.bounds_budget = bounds_budget
        self.prior_budget = prior_budget
        self.n_cells = n_cells
        self.debias = debias
        self.bins = bins
        self.estimator = estimator
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.accountant = accountant
        self.random_state = random_state

    def _budget_split(self, private):
        """``(epsilon_bound, epsilon_prior, epsilon_rr)`` from public facts."""
        if not private:
            return 0.0, 0.0, math.inf
        if self.y_bound is not None:
            eps_bound = 0.0
        elif self.bounds == "data":
            eps_bound = math.inf
        else:
            eps_bound = product_at_most(self.bounds_budget, self.epsilon)
        # Each share at most its exact value: the three sum to at most epsilon
        # (the halves of eps_bound are exact).
        eps_prior = product_at_most(self.prior_budget, self.epsilon)
        eps_rr = difference_at_most(self.epsilon, eps_prior,
                                    eps_bound if math.isfinite(eps_bound) else 0)
        if not eps_rr > 0:
            raise ConfigurationError(
                "bounds_budget + prior_budget must stay below 1: nothing is left for "
                "the randomised response."
            )
        return eps_bound, eps_prior, eps_rr

    def _planned_ledger(self, private):
        eps_bound, eps_prior, eps_rr = self._budget_split(private)
        events = []
        if math.isinf(eps_bound):
            pass  # the data-read event comes from bounds.data_norm_bound
        elif eps_bound > 0:
            events += [
                PrivacyEvent("y_bound_high", eps_bound / 2, 0.0, notion="label"),
                PrivacyEvent("y_bound_low", eps_bound / 2, 0.0, notion="label"),
            ]
        if private:
            events.append(PrivacyEvent("label_prior", eps_prior, 0.0, notion="label"))
        events.append(PrivacyEvent("label_rr", eps_rr, 0.0, notion="label"))
        return events

    @staticmethod
    def _counts_above(y, bins):
        with np.errstate(all="ignore"):
            return counts_above(np.maximum(y, 0.0), bins), counts_above(np.maximum(-y, 0.0), bins)

    def _data_label_range(self, y):
        """Public bin edges beyond the data (``bounds='data'``): not private.

        Runs before the spend, so labels out of the supported range are
        refused before anything is spent.
        """
        bins = bound_bins()
        above_pos, above_neg = self._counts_above(y, bins)
        if above_pos[-1] > 0 or above_neg[-1] > 0:
            raise ValueError(f"|y| above {bins[-1]:.3g} is not supported.")
        high = bins[np.argmax(above_pos == 0)] if y.max() > 0 else 0.0
        low = -bins[np.argmax(above_neg == 0)] if y.min() < 0 else 0.0
        _, event = data_norm_bound(max(high, -low), name="y_bound", notion="label")
        if not low < high:
            high = low + 1.0
        return (float(low), float(high)), [event]

    def _label_range(self, y, private, rng):
        """Declared range or a private range (the data range is read before the spend)."""
        declared = check_y_bound(self.y_bound)
        if declared is not None:
            return declared, []
        bins = bound_bins()
        above_pos, above_neg = self._counts_above(y, bins)
        eps_half = self._budget_split(private)[0] / 2
        n = y.shape[0]
        high, _ = private_norm_bound(above_pos, n, eps_half, rng, name="y_bound_high",
                                     notion="label", bins=bins)
        low, _ = private_norm_bound(above_neg, n, eps_half, rng, name="y_bound_low",
                                    notion="label", bins=bins)
        return (-float(low), float(high)), []

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Randomise the labels by RR on bins and fit the linear model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Public features.
        y : array-like of shape (n_samples,)
            Private labels.

        Returns
        -------
        self : object
        """
        self._reset()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        X, y = read_into_memory(X, "X"), read_into_memory(y, "y")  # read once
        private = self._validate_privacy_params()
        check_y_bound(self.y_bound)
        eps_bound = self._budget_split(private)[0]
        if private and self.y_bound is None and self.bounds == "private":
            check_private_bound_feasible(X.shape[0], eps_bound / 2, "y_bound")
        planned = self._planned_ledger(private)
        ledger = PrivacyLedger(planned)
        if math.isinf(eps_bound):
            # bounds='data': the infinite-epsilon event is known before the read.
            ledger = PrivacyLedger(
                [PrivacyEvent("y_bound", math.inf, 0.0, notion="label"), *planned]
            )
        self._check_budget(ledger)
        data_range = None
        if math.isinf(eps_bound):
            # bounds='data': read (and refused if out of range) before the spend.
            data_range = self._data_label_range(y)
        self._spend(ledger)  # recorded before any label reaches a mechanism
        rngs = self._secret_rngs("bounds", "prior", "rr")
        if not private:
            declared = check_y_bound(self.y_bound)
            targets = y if declared is None else np.clip(y, *declared)
            self._finish_linear(X, targets)
            self.y_bound_ = declared if declared is not None else (float(y.min()), float(y.max()))
            self.epsilon_ = math.inf
            return self
        if data_range is None:
            data_range = self._label_range(y, private, rngs["bounds"])
        (low, high), _ = data_range
        eps_prior, eps_rr = self._budget_split(private)[1:]
        cells = label_cells(y, low, high, self.n_cells)
        counts = np.bincount(cells, minlength=self.n_cells).astype(np.float64)
        prior = prior_from_counts(noisy_histogram(counts, eps_prior, rngs["prior"]))
        values = cell_values(low, high, self.n_cells)
        if self.bins == "loss":
            design = rr_on_bins(prior, values, eps_rr)
        else:
            n_coef = X.shape[1] + int(self.fit_intercept)
            design = rr_on_bins_for_regression(prior, values, eps_rr, n_coef / X.shape[0])
        released = randomized_response(
            design.cell_to_bin[cells], design.n_bins, eps_rr, rngs["rr"]
        )
        targets = (
            unbiased_targets(design.bin_means, design.p, design.q)
            if self.debias else design.outputs
        )
        self._finish_linear(X, targets[released])
        edges = np.linspace(low, high, self.n_cells + 1)
        starts = np.flatnonzero(np.diff(np.concatenate([[-1], design.cell_to_bin])))
        self.bin_edges_ = np.append(edges[starts], high)
        self.y_bound_ = (float(low), float(high))
        self.prior_ = prior
        self.outputs_ = design.outputs
        self.targets_ = targets
        self.n_bins_ = design.n_bins
        self.keep_probability_ = float(design.p)
        self.epsilon_ = float(ledger.epsilon)
        return self

    def _finish_linear(self, X, targets):
        Z = np.column_stack([X, np.ones(X.shape[0])]) if self.fit_intercept else X
        beta = fit_on_aggregates(
            Z, targets, estimator=self.estimator, alpha=self.alpha,
            fit_intercept=self.fit_intercept,
        )
        if self.fit_intercept:
            self.coef_, self.intercept_ = beta[:-1].copy(), float(beta[-1])
        else:
            self.coef_, self.intercept_ = beta.copy(), 0.0
