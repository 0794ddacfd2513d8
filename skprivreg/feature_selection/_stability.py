"""Subsampling stability: the generic ``A_samp`` of Smith & Thakurta (2013, Alg. 1).

Private model selection for *any* function ``f`` with a discrete output
(a support, a hyperparameter from a finite grid, a number of components):

1. draw ``m`` random subsamples of the rows, each row appearing in at most
   ``K`` of them (the pattern is public: it is drawn independently of the data);
2. evaluate ``f`` on every subsample, using **only the rows of that subsample**;
3. let ``c1 >= c2`` be the two largest vote counts and
   ``d_hat = (c1 - c2) / (2K) - 1``;
4. release the most frequent value iff ``d_hat + Lap(1/epsilon) > ln(1/delta)/epsilon``,
   else release ``bottom``.

Why this is private: give
the rows shared by two neighbouring datasets the same inclusion rows. One
added, removed or replaced row then changes at most ``K`` of the ``m`` votes,
every count by at most ``K`` and the gap ``c1 - c2`` by at most ``2K``; so
``d_hat`` has sensitivity 1, and when the mode changes the gap was at most
``2K`` on both sides, so ``d_hat <= 0`` there. The Laplace distance test
(:func:`skprivreg.mechanisms.laplace_distance_test`) is then
``(epsilon, delta/2)``-DP for every fixed pattern, under add/remove and
replace-one neighbours alike. Nothing in the argument depends on ``m``,
``q`` or ``K``, provided they do not depend on the data (nor on ``n``).

The argument needs ``f(D_j)`` to depend on the rows of ``D_j`` alone:
no global standardisation, no penalty computed from the full ``n``, no warm
start from another subsample's solution, no preprocessing fitted on all rows
placed before the selector in a Pipeline.
"""

import math
import numbers
import struct
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy import sparse
from scipy.stats import binom

from .._random import noise_is_reproducible, secret_generators
from .._warnings import quiet_warnings
from ..accounting import PrivacyEvent, PrivacyLedger
from ..base import quiet_floats
from ..exceptions import PlanningWarning
from ..mechanisms import (
    laplace_distance_test,
    laplace_distance_threshold,
    laplace_release_probability,
)

__all__ = [
    "BOTTOM",
    "SENTINEL",
    "SubsamplePlan",
    "StableModeResult",
    "subsample_plan",
    "paper_subsample_rate",
    "propose_test_release",
    "stable_mode",
]

# Above this many rows of a per-row column draw, redraws fall back to
# rng.choice per row (keeps the expected cost linear when c is close to m).
_MAX_VECTOR_REDRAWS = 20


class _Symbol:
    """A named singleton that survives pickling (joblib workers return it)."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name

    def __reduce__(self):
        return self._name


BOTTOM = _Symbol("BOTTOM")
"""The failure output of propose-test-release (the paper's ``⊥``)."""

SENTINEL = _Symbol("SENTINEL")
"""The vote of a degenerate subsample (too few rows, or ``f`` raised).

It is counted like any value; if it is the mode, the output is ``BOTTOM``
(post-processing). Without it, tiny subsamples can stably vote for a
meaningless answer (an empty support) that would then be released.
"""


# ---------------------------------------------------------------------------
# Public planning numbers
# ---------------------------------------------------------------------------
def paper_subsample_rate(epsilon, delta):
    """The paper's subsampling rate ``q = epsilon / (32 ln(1/delta))`` (Alg. 1, line 1)."""
    return float(epsilon) / (32.0 * math.log(1.0 / float(delta)))


@dataclass(frozen=True)
class SubsamplePlan:
    """Public constants of one ``A_samp`` run (no data involved).

    Attributes
    ----------
    sampling : {'poisson', 'partition'}
    subsample_rate : float
        ``q``: each row is in a given subsample with probability ``q``.
    n_subsamples : int
        ``m``.
    max_appearances : int
        ``K``: no row is in more than ``K`` subsamples.
    threshold : float
        ``T = ln(1/delta) / epsilon``.
    max_distance : float
        ``m / (2K) - 1``, the proxy when every subsample agrees.
    max_release_probability : float
        Release probability of a perfectly stable ``f``.
    """

    sampling: str
    subsample_rate: float
    n_subsamples: int
    max_appearances: int
    threshold: float
    max_distance: float
    max_release_probability: float

    def required_gap_fraction(self, epsilon, release_probability=0.95):
        """``(c1 - c2)/m`` needed for the given release probability (planning aid).

        From ``d_hat >= T + ln(1/(2(1 - P)))/epsilon`` with
        ``d_hat = gap/(2K) - 1``.
        """
        extra = math.log(1.0 / (2.0 * (1.0 - release_probability))) / epsilon
        gap = 2.0 * self.max_appearances * (self.threshold + extra + 1.0)
        return gap / self.n_subsamples


def subsample_plan(
    epsilon,
    delta,
    *,
    sampling="poisson",
    subsample_rate=None,
    n_subsamples=1000,
    max_appearances=None,
    n_samples=None,
):
    """Resolve ``(q, m, K)`` and the test threshold from public parameters.

    Parameters
    ----------
    epsilon, delta : float
        Budget of the distance test (finite epsilon > 0, delta in (0, 1)).
    sampling : {'poisson', 'partition'}, default='poisson'
        ``'poisson'``: the paper's capped bootstrap (each row in each subsample
        independently with probability ``q``, rows appearing more than ``K``
        times redrawn). ``'partition'``: classic subsample-and-aggregate,
        ``m = floor(1/q)`` disjoint blocks, ``K = 1``.
    subsample_rate : float in (0, 1) or None
        ``q``; ``None`` is the paper's ``epsilon / (32 ln(1/delta))``.
    n_subsamples : int or 'paper', default=1000
        ``m`` for ``'poisson'``. ``'paper'`` is Alg. 1's
        ``ceil(ln(n/delta)/q^2)`` (with ``K = floor(2mq)`` unless ``max_appearances``
        is given); it depends on ``n``
        (``n_samples`` must be given and ``n`` is then treated as public).
        Ignored for ``'partition'``.
    max_appearances : int or None
        ``K`` for ``'poisson'``; ``None`` is ``max(1, floor(2mq))``.
    n_samples : int or None
        Only for ``n_subsamples='paper'``.

    Returns
    -------
    plan : SubsamplePlan
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError("A_samp needs a finite epsilon > 0.")
    if not 0 < delta < 1:
        raise ValueError("A_samp needs delta in (0, 1).")
    if sampling not in ("poisson", "partition"):
        raise ValueError("sampling must be 'poisson' or 'partition'.")
    q = paper_subsample_rate(epsilon, delta) if subsample_rate is None else float(subsample_rate)
    if not 0 < q < 1:
        raise ValueError(
            f"The subsampling rate q = {q:.4g} must lie in (0, 1); "
            "give subsample_rate explicitly or lower epsilon."
        )
    if sampling == "partition":
        # The relative guard keeps floor(1/q) exact when 1/q is an integer.
        m = max(1, math.floor((1.0 / q) * (1.0 + 1e-12)))
        K = 1
    else:
        if isinstance(n_subsamples, str):
            if n_subsamples != "paper":
                raise ValueError("n_subsamples must be an int >= 1 or 'paper'.")
            if n_samples is None:
                raise ValueError("n_subsamples='paper' needs n_samples (n-public mode).")
            m = math.ceil(math.log(n_samples / delta) / q**2)
            if m > 100_000:
                warnings.warn(
                    f"n_subsamples='paper' asks for m = {m} subsample fits.",
                    UserWarning,
                    stacklevel=2,
                )
        else:
            m = _positive_int(n_subsamples, "n_subsamples")
        if max_appearances is None:
            K = max(1, math.floor(2 * m * q))
        else:
            K = _positive_int(max_appearances, "max_appearances")
        # A row cannot appear in more than m subsamples.
        K = min(K, m)
    threshold = laplace_distance_threshold(epsilon, delta)
    max_distance = m / (2.0 * K) - 1.0
    return SubsamplePlan(
        sampling=sampling,
        subsample_rate=q,
        n_subsamples=int(m),
        max_appearances=int(K),
        threshold=threshold,
        max_distance=max_distance,
        max_release_probability=laplace_release_probability(max_distance, epsilon, delta),
    )


def _positive_int(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1.")
    return int(value)


def _warn_if_release_unlikely(plan, epsilon):
    """PlanningWarning (public numbers only) when even a constant ``f`` rarely releases."""
    if plan.max_distance < plan.threshold + math.log(20.0) / epsilon:
        warnings.warn(
            f"With m = {plan.n_subsamples} subsamples and K = {plan.max_appearances} the "
            f"largest possible distance m/(2K) - 1 = {plan.max_distance:.3g} is below "
            f"T + ln(20)/epsilon = {plan.threshold + math.log(20.0) / epsilon:.3g}: even a "
            "perfectly stable function is released with probability "
            f"{plan.max_release_probability:.3g} < 0.95. Increase n_subsamples, "
            "lower subsample_rate, or use sampling='partition'.",
            PlanningWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------
# Subsample patterns (public randomness, drawn before the data is read)
# ---------------------------------------------------------------------------
def _truncated_binomial_cdf(m, q, K):
    pmf = binom.pmf(np.arange(K + 1), m, q)
    cdf = np.cumsum(pmf / pmf.sum())
    cdf[-1] = 1.0
    return cdf


def _distinct_columns(counts, m, K, rng):
    """Per row ``i``, ``counts[i]`` distinct uniform columns in ``[0, m)``.

    Draws ``counts[i]`` i.i.d. uniform columns and redraws the row's columns
    (never its count: redrawing counts would change their distribution) while
    they contain a duplicate: conditioned on being distinct, the set is a
    uniform ``counts[i]``-subset.
    """
    n = counts.shape[0]
    cols = rng.integers(0, m, size=(n, K))
    used = np.arange(K)[None, :] < counts[:, None]
    todo = np.arange(n)
    for _ in range(_MAX_VECTOR_REDRAWS):
        block = np.where(used[todo], cols[todo], -1 - np.arange(K)[None, :])
        block.sort(axis=1)
        dup = np.any(block[:, 1:] == block[:, :-1], axis=1)
        todo = todo[dup]
        if todo.size == 0:
            return cols, used
        cols[todo] = rng.integers(0, m, size=(todo.size, K))
    for i in todo:
        cols[i, : counts[i]] = rng.choice(m, size=counts[i], replace=False)
    return cols, used


def _capped_poisson_subsamples(n, m, q, K, rng):
    """``m`` index arrays: row ``i`` joins each independently w.p. ``q``, at most ``K`` times.

    Exactly the paper's capped Bernoulli(q) ``n x m`` inclusion matrix
    (rejection of rows whose sum exceeds ``K``), sampled in ``O(nK)``:
    each row's count from the truncated ``Bin(m, q | c <= K)`` by inverse
    CDF, then that many distinct uniform columns.

    Returns
    -------
    subsamples : list of m sorted int64 arrays
    """
    K = min(int(K), int(m))
    counts = np.searchsorted(_truncated_binomial_cdf(m, q, K), rng.random(n), side="right")
    # Rows in chunks keep the column draws at O(chunk K) memory.
    chunk = max(1, 2_000_000 // K)
    flat_cols = []
    for start in range(0, n, chunk):
        cols, used = _distinct_columns(counts[start : start + chunk], m, K, rng)
        flat_cols.append(cols[used])
    flat_cols = np.concatenate(flat_cols) if flat_cols else np.zeros(0, dtype=np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), counts)
    # Stable sort by column keeps the rows of each subsample increasing.
    order = np.argsort(flat_cols, kind="stable")
    bounds = np.searchsorted(flat_cols[order], np.arange(m + 1))
    members = rows[order]
    return [members[bounds[j] : bounds[j + 1]] for j in range(m)]


def _partition_subsamples(n, m, rng):
    """``m`` disjoint blocks: each row gets an i.i.d. uniform label in ``[0, m)``."""
    labels = rng.integers(0, m, size=n)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(m + 1))
    return [order[bounds[j] : bounds[j + 1]].astype(np.int64) for j in range(m)]


def _draw_subsamples(n, plan, rng):
    if plan.sampling == "partition":
        return _partition_subsamples(n, plan.n_subsamples, rng)
    return _capped_poisson_subsamples(
        n, plan.n_subsamples, plan.subsample_rate, plan.max_appearances, rng
    )


# ---------------------------------------------------------------------------
# Evaluating f and counting votes
# ---------------------------------------------------------------------------
def canonical_key(value):
    """A hashable vote for ``value``.

    Sets and integer arrays become sorted tuples (so ``{1, 2}``, ``{2, 1}``
    and ``array([2, 1])`` are one vote); boolean arrays become the sorted
    tuple of their ``True`` positions; numpy scalars become Python scalars.
    Any other value must be hashable.
    """
    if value is SENTINEL:
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return tuple(int(i) for i in np.flatnonzero(value))
        if np.issubdtype(value.dtype, np.integer):
            return tuple(sorted({int(i) for i in value.ravel()}))
        return tuple(value.ravel().tolist())
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(value))
    if isinstance(value, np.generic):
        return value.item()
    hash(value)
    return value


def _take_rows(X, idx):
    if X is None:
        return None
    if hasattr(X, "iloc"):
        return X.iloc[idx]
    if isinstance(X, np.ndarray) and X.ndim == 2:
        # One Fortran-ordered copy (what coordinate descent wants): rows of
        # X are the columns of X.T.
        return X.T[:, idx].T
    return X[idx]


def _vote(f, X_j, y_j):
    """``f``'s canonical vote on one subsample; ``SENTINEL`` if it raises.

    Exceptions are not propagated: whether ``f`` fails on some subsample is
    data-dependent and must not leave the mechanism except through the vote.
    A value that cannot be counted (its vote class cannot be hashed, as a
    signalling ``Decimal('sNaN')``) is the same kind of failure: decided for
    this vote alone, so the counts keep their sensitivity.
    """
    try:
        key = canonical_key(f(X_j, y_j))
        hash(_vote_class(key))
        return key
    except Exception:  # noqa: BLE001 - any failure of f is one vote, never a message
        return SENTINEL


def _evaluate_batch(X, y, batch, f):
    # Warnings raised inside f (e.g. ConvergenceWarning with a duality gap)
    # carry data-dependent numbers: never let them out. Entered here, in the
    # worker (a joblib thread or process), not only around the Parallel call.
    with quiet_warnings():
        return [_vote(f, _take_rows(X, idx), _take_rows(y, idx)) for idx in batch]


def _evaluate_subsamples(X, y, subsamples, f, n_jobs=None):
    """``[f(X[idx], y[idx]) for idx in subsamples]`` (canonical votes), optionally in parallel.

    The subsample index lists are drawn by the caller, so the votes do not
    depend on ``n_jobs``. ``f`` sees the rows of one subsample only, and each
    call is a fresh computation (no warm start across subsamples).
    """
    workers = effective_n_jobs(n_jobs)
    if workers == 1 or len(subsamples) <= 1:
        return _evaluate_batch(X, y, subsamples, f)
    batch_size = max(1, math.ceil(len(subsamples) / (4 * workers)))
    batches = [subsamples[i : i + batch_size] for i in range(0, len(subsamples), batch_size)]
    evaluate = quiet_floats(_evaluate_batch)  # a worker's floating-point state is its own
    results = Parallel(n_jobs=n_jobs)(delayed(evaluate)(X, y, b, f) for b in batches)
    return [key for batch in results for key in batch]


def _vote_class(key):
    """The class a vote is counted in: votes that are equal *and* indistinguishable.

    ``0.0 == -0.0`` and ``1 == 1.0 == True``, but the released mode is one of
    the votes: were they counted together, which of them is released would
    depend on which subsample voted first, and one row could change it with
    every count unchanged. Floats, complex numbers and NumPy scalars are
    classed by their type and bits, other values by type and equality
    (recursively inside tuples): values that ``f`` returns equal must then be
    indistinguishable.
    """
    if key is SENTINEL:
        return key
    kind = (type(key).__module__, type(key).__qualname__)
    if isinstance(key, np.generic):  # a NumPy scalar inside a tuple: its type and bytes
        return (*kind, key.tobytes())
    if isinstance(key, float):  # float and its subclasses, by their bits
        return (*kind, struct.pack("<d", key))
    if isinstance(key, complex):
        return (*kind, struct.pack("<dd", key.real, key.imag))
    if isinstance(key, tuple):
        return ("tuple", tuple(_vote_class(item) for item in key))
    return (*kind, key)


def _ranked_counts(keys):
    """``[(key, count), ...]`` by decreasing count; ties broken by a fixed key order.

    Votes are counted by :func:`_vote_class`; each class is represented by its
    first vote (all of its votes are the same value). ``SENTINEL`` sorts first
    among equal counts; other classes by their natural order when comparable,
    else by ``repr``. Comparing two votes may raise anything (``f``'s values
    are arbitrary: ``Decimal('NaN') < x`` raises ``InvalidOperation``), and
    whether two votes are compared at all depends on tied counts, so on the
    data: no such error leaves (the order among tied counts changes the
    release only with probability below ``delta``, as a tie fails the test
    unless the noise exceeds the threshold).
    """
    first = {}
    for key in keys:
        first.setdefault(_vote_class(key), key)
    counts = Counter(_vote_class(key) for key in keys)
    items = list(counts.items())

    def natural(kv):
        key, count = kv
        return (-count, key is not SENTINEL, 0 if key is SENTINEL else key)

    def by_repr(kv):
        key, count = kv
        return (-count, key is not SENTINEL, _safe_repr(key))

    try:
        ranked = sorted(items, key=natural)
    except Exception:  # noqa: BLE001 - see the docstring
        ranked = sorted(items, key=by_repr)
    return [(first[vote], count) for vote, count in ranked]


def _safe_repr(value):
    """``repr(value)``, or its type's name when that raises (never an error)."""
    try:
        return repr(value)
    except Exception:  # noqa: BLE001
        return type(value).__qualname__


def _mode_gap_distance(keys, max_appearances):
    """``(mode, d_hat, c1, c2)`` with ``d_hat = (c1 - c2) / (2K) - 1``.

    ``c1 >= c2`` are the two largest counts (``c2 = 0`` with a single
    distinct value). Internal: ``c1``, ``c2`` and ``d_hat`` are never
    released.
    """
    keys = [canonical_key(k) for k in keys]
    if not keys:
        return SENTINEL, -1.0, 0, 0
    ranked = _ranked_counts(keys)
    mode, c1 = ranked[0]
    c2 = ranked[1][1] if len(ranked) > 1 else 0
    d_hat = (c1 - c2) / (2.0 * max_appearances) - 1.0
    return mode, d_hat, c1, c2


def propose_test_release(value, d_hat, epsilon, delta, rng, *, sensitivity=1.0, offset=0.0):
    """Propose-test-release: ``value`` on PASS, ``BOTTOM`` on FAIL.

    Passes iff ``d_hat + Lap(sensitivity/epsilon) > T`` with
    ``T = offset + sensitivity ln(1/delta)/epsilon`` (strict). The caller
    guarantees that ``d_hat`` has global sensitivity ``sensitivity`` and is
    ``<= offset`` on both sides of any neighbouring pair whose ``value``
    differs; the output is then ``(epsilon, delta/2)``-DP
    (:func:`skprivreg.mechanisms.laplace_distance_test`). The noisy distance
    itself is not returned: the test is released as PASS/FAIL only (a full
    floating-point noisy value is open to precision attacks, Mironov 2012).

    Exact release probability, ``b = sensitivity/epsilon``:
    ``1 - exp(-(d_hat - T)/b)/2`` if ``d_hat >= T``, else ``exp(-(T - d_hat)/b)/2``
    (:func:`skprivreg.mechanisms.laplace_release_probability`).
    """
    passed, _, _ = laplace_distance_test(d_hat, epsilon, delta, rng, sensitivity, offset)
    return value if passed else BOTTOM


# ---------------------------------------------------------------------------
# The generic mechanism
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StableModeResult:
    """Output of :func:`stable_mode`; every field is covered by the guarantee or public.

    Attributes
    ----------
    value : object or None
        The released value (canonical form), ``None`` on ``bottom``.
    stable : bool
        ``True`` iff a value was released (the test's PASS/FAIL, the only
        form in which it is released).
    plan : SubsamplePlan
        The public constants used.
    privacy_spent : PrivacyLedger
        One event, ``(epsilon, delta/2)``.
    """

    value: object
    stable: bool
    plan: SubsamplePlan
    privacy_spent: PrivacyLedger


def stable_mode_ledger(epsilon, delta, *, name="stable_mode", notion="full"):
    """The ledger of one distance test: ``(epsilon, delta/2)``.

    Valid under replace-one and add/remove neighbours alike (a replaced row
    keeps its inclusion row); recorded as replace-one, the house relation.
    """
    return PrivacyLedger(
        [PrivacyEvent(name=name, epsilon=float(epsilon), delta=float(delta) / 2.0, notion=notion)]
    )


def run_stable_mode(X, y, f, plan, epsilon, delta, *, n_jobs, subsample_rng, noise_rng):
    """``A_samp`` for a resolved :class:`SubsamplePlan`: the released value or ``BOTTOM``.

    ``subsample_rng`` (the secret subsample pattern) and ``noise_rng`` (the
    secret Laplace draw) must be independent generators.
    """
    n = _n_rows(X) if X is not None else len(y)
    subsamples = _draw_subsamples(n, plan, subsample_rng)
    keys = _evaluate_subsamples(X, y, subsamples, f, n_jobs)
    mode, d_hat, _, _ = _mode_gap_distance(keys, plan.max_appearances)
    released = propose_test_release(mode, d_hat, epsilon, delta, noise_rng)
    if released is SENTINEL:
        # Degenerate subsamples won the vote: post-processed to bottom.
        released = BOTTOM
    return released


def stable_mode(
    X,
    y,
    f,
    epsilon,
    delta,
    *,
    sampling="poisson",
    subsample_rate=None,
    n_subsamples=1000,
    max_appearances=None,
    n_jobs=None,
    random_state=None,
    notion="full",
):
    """Private mode of ``f`` over random subsamples (``A_samp``, Smith & Thakurta 2013).

    Releases ``f``'s most frequent value over ``m`` subsamples when its vote
    margin is large enough, otherwise ``bottom`` (``stable=False``). Use it
    for any model-selection function with a discrete output, e.g. choosing a
    hyperparameter privately::

        def best_alpha(X_j, y_j):  # uses only the rows it is given
            return int(np.argmax([cross_val_score(Ridge(a), X_j, y_j).mean() for a in grid]))

        res = stable_mode(X, y, best_alpha, epsilon=1.0, delta=1e-6)

    **Guarantee.** ``(epsilon, delta/2)``-DP (recorded as such) for every
    ``f`` and every public ``(q, m, K)``, under add/remove and replace-one
    neighbours (one row), provided ``f(X_j, y_j)`` depends **only** on the
    rows it is given and public constants: no statistics of the full data
    (global scaling, a penalty from the full ``n``), no state shared between
    calls (warm starts, caches). Choose ``delta <= 1/(10 n)``.

    **Utility.** If one subsample's ``f`` equals the full-data answer with
    probability ``rho`` and the most frequent wrong answer has ``rho_2``,
    release is likely once ``(rho - rho_2)/(4q) - 1 >= T + 3/epsilon``
    (poisson, ``K ~ 2mq``) or ``(rho - rho_2)/(2q) - 1 >= T + 3/epsilon``
    (partition), ``T = ln(1/delta)/epsilon``. Rough sample size:
    ``n ~ 32 ln(1/delta) N_1 / epsilon`` where ``f`` is right with
    probability ~0.75 at ``N_1`` rows.

    Parameters
    ----------
    X : ndarray, sparse CSR matrix or DataFrame of shape (n, ...)
        Rows are the privacy unit.
    y : ndarray of shape (n,) or None
        Passed row-aligned to ``f`` (``None`` for unsupervised ``f``).
    f : callable ``f(X_j, y_j) -> hashable``
        Sets and integer arrays are canonicalised to sorted tuples. Votes
        are counted apart unless they are the same value: ``0.0`` and
        ``-0.0``, or ``1``, ``1.0`` and ``True``, are different votes (the
        released mode is one of the votes). Values of other types that
        compare equal must be indistinguishable. If ``f`` raises, the
        subsample votes ``SENTINEL``; warnings inside ``f`` are suppressed
        (they may carry data-dependent numbers).
    epsilon : float
        Finite, > 0.
    delta : float in (0, 1)
    sampling, subsample_rate, n_subsamples, max_appearances
        See :func:`subsample_plan`.
    n_jobs : int or None
        joblib workers over subsamples; results do not depend on it.
    random_state : None, int or numpy.random.Generator
        Unused outside :func:`skprivreg.testing.reproducible_noise`: the
        subsample pattern and the Laplace draw are secret, from independent
        children of fresh OS entropy in every call (inside that facility
        they are seeded, and the ledger is marked not for publication).
    notion : {'full', 'label', 'feature'}, default='full'
        Recorded on the privacy event.

    Returns
    -------
    result : StableModeResult
        Never contains vote counts, the noiseless distance or per-subsample
        results.

    References
    ----------
    A. Smith and A. G. Thakurta, "Differentially private model selection
    via stability arguments and the stability of the Lasso", COLT 2013,
    Algorithm 1 and Theorem 6.
    """
    plan = subsample_plan(
        epsilon,
        delta,
        sampling=sampling,
        subsample_rate=subsample_rate,
        n_subsamples=n_subsamples,
        max_appearances=max_appearances,
        n_samples=None if X is None else _n_rows(X),
    )
    _warn_if_release_unlikely(plan, epsilon)
    # Whether the secret draws are seeded by the testing facility is decided
    # with the generators; such a run's ledger is not for publication.
    reproducible = noise_is_reproducible()
    rngs = secret_generators(("subsamples", "noise"), random_state)
    if y is not None:
        y = np.asarray(y)
    released = run_stable_mode(
        X,
        y,
        f,
        plan,
        epsilon,
        delta,
        n_jobs=n_jobs,
        subsample_rng=rngs["subsamples"],
        noise_rng=rngs["noise"],
    )
    stable = released is not BOTTOM
    ledger = stable_mode_ledger(epsilon, delta, notion=notion)
    if reproducible:
        ledger.for_publication = False
    return StableModeResult(
        value=released if stable else None,
        stable=stable,
        plan=plan,
        privacy_spent=ledger,
    )


def _n_rows(X):
    if sparse.issparse(X) or hasattr(X, "shape"):
        return X.shape[0]
    return len(X)
