"""ISSP's two filters: stable leverage filtering and stable residual filtering.

Everything here is a pure function of the data and public constants. Nothing in
this module is differentially private on its own: scores, weights, leverages and
residuals are secret intermediate values of
:class:`~skprivreg.linear_model.ISSPRegressor` and never leave ``fit``.

The engines (:func:`slf_engine`, :func:`srf_engine`) see the data only through
passes over a :class:`~skprivreg._rows.RowSource` (:mod:`._issp_passes`,
:mod:`._issp_scan`), keep a small candidate set in memory and apply low-rank
(rank-one) updates on it. Leverage filtering is order independent (each level
set is the largest stable subset), and residual filtering is Algorithm 4 of
Brown et al. (2024), so the engines return the same scores and weights as the
direct transcriptions in :mod:`._issp_reference`. A factor is never kept after
removing rows whose whitened Gram block ``Z_E Z_E^T`` has an eigenvalue above
1/2 (any removed row of leverage above 1/2 triggers this): the factor of the
kept rows is then recomputed from scratch in a new pass (a rebase) instead of
being downdated.

The leverage thresholds are the geometric schedule
:math:`L_j = L_{top}(1 - L_{top})^{2k-j}`, :math:`L_{top} = L_0/(1 + (k-1)L_0)`
(:func:`leverage_thresholds`): with the paper's printed schedule
:math:`e^{j/k} L_0` the returned weights can have leverage above ``L0``,
which breaks its Theorem 9(2).
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ._issp_passes import _EPS, RowWeights, _safe_norm, cross_pass, factor_pass, magnitude
from ._issp_scan import scan_pass

__all__ = [
    "leverage_base",
    "leverage_bound_for_base",
    "leverage_thresholds",
    "leverage_top",
    "weights_leverage_bound",
    "ladder_log_ratio",
    "residual_thresholds",
    "slf_engine",
    "srf_engine",
    "srf_weights",
    "slf_score",
]

#: Residual filtering recomputes ``X^T W y`` from scratch (one pass) instead of
#: subtracting removed rows when the cancellation error of the subtraction,
#: as a residual, could exceed this fraction of ``R_0``.
RESIDUAL_REBASE_TOL = 1e-9


# ---------------------------------------------------------------------------
# Public schedules
# ---------------------------------------------------------------------------
#: Relative margin by which consecutive leverage thresholds (and residual
#: rungs) are spaced wider than the proofs need, and by which ``L_top`` is
#: shaded down. The proofs assume exact arithmetic; the margin keeps the
#: proven ratios through the rounding of the schedules themselves and through
#: float leverages with relative error below 4e-7 (the factor passes switch
#: to exact whitening above a scaled condition number of 1e7, so float
#: leverage errors stay below about ``p eps 1e7``: within the margin for p <= 180).
#: It costs a factor ``e^{-2k 1e-6}`` on the lowest leverage threshold.
SCHEDULE_FLOAT_MARGIN = 1e-6


def leverage_top(L0, k):
    """Top leverage threshold ``L_top = L0 / (1 + (k - 1) L0)``.

    Theorem 9(2): ``A_{k+1}`` is ``A_{2k}`` minus at most ``k - 1`` rows, each
    of leverage at most ``L_top`` under ``S_{A_{2k}}``, so
    ``S_w >= S_{A_{k+1}} >= (1 - (k-1) L_top) S_{A_{2k}}`` and every kept row
    has ``h_i(w) <= L_top / (1 - (k-1) L_top) = L0`` (ISSP privacy analysis page).
    The value is shaded down by :data:`SCHEDULE_FLOAT_MARGIN`.
    """
    return L0 / (1.0 + (k - 1.0) * L0) * (1.0 - SCHEDULE_FLOAT_MARGIN)


def leverage_spacing(L0, k):
    """Log-spacing ``s = -ln(1 - L_top)`` of the geometric schedule.

    Plus :data:`SCHEDULE_FLOAT_MARGIN`.
    """
    return -math.log1p(-leverage_top(L0, k)) + SCHEDULE_FLOAT_MARGIN


def leverage_base(L0, k):
    """Lowest threshold ``L_top e^{-2k s}``: the clean path needs every leverage at most this."""
    return leverage_top(L0, k) * math.exp(-2.0 * k * leverage_spacing(L0, k))


def leverage_bound_for_base(L_base, k):
    """Smallest ``L0`` whose :func:`leverage_base` is at least ``L_base`` (inf if none).

    ``L_top e^{-2k s(L_top)}`` increases in ``L_top`` up to ``1/(2k+1)``; the
    ``L_top`` reaching ``L_base`` is found by bisection there, then ``L0`` is
    the inverse of :func:`leverage_top` (bumped up by rounding steps until
    :func:`leverage_base` reaches ``L_base``).
    """
    if not L_base > 0 or not math.isfinite(L_base):
        return math.inf

    def base_of(top):
        return top * math.exp(-2.0 * k * (-math.log1p(-top) + SCHEDULE_FLOAT_MARGIN))

    hi = 1.0 / (2.0 * k + 1.0)
    if base_of(hi) < L_base:
        return math.inf
    lo = L_base
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if base_of(mid) >= L_base:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-15 * hi:
            break
    # leverage_top(L0) = hi: L0/(1 + (k-1) L0) = t with t = hi/(1 - margin).
    t = hi / (1.0 - SCHEDULE_FLOAT_MARGIN)
    if not (k - 1.0) * t < 1.0:
        return math.inf
    L0 = t / (1.0 - (k - 1.0) * t)
    while leverage_base(L0, k) < L_base:  # rounding only: a few steps at most
        L0 *= 1.0 + 1e-14
    return L0


def leverage_thresholds(L0, k, schedule="geometric"):
    r"""Leverage thresholds ``L_j``, ``j = 0..2k``.

    ``'geometric'`` (used by ISSP): :math:`L_j = L_{top} e^{-(2k-j)s}` with
    :math:`L_{top} = L_0/(1 + (k-1)L_0)` and :math:`s = -\ln(1 - L_{top})`
    (:func:`leverage_spacing`), so :math:`L_{j+1} \ge L_j/(1 - L_j)`: removing
    one row of leverage at most ``L_j`` multiplies every other leverage by at
    most :math:`1/(1 - L_j)` (Sherman-Morrison), which is all the stability
    proof of Theorem 9 needs, and the returned weights have leverage at most
    ``L0`` (Theorem 9(2)). The earlier proven schedule
    :math:`e^{(j-2k)/k} L_0/(1 + 2kL_0)` is never tighter (its lowest threshold
    is below ``e^{-2}`` times the geometric one) and is not offered.
    ``'printed'`` is the paper's Algorithm 5, :math:`e^{j/k}L_0`, kept only to
    show in tests that it breaks Theorem 9(2).
    """
    j = np.arange(2 * k + 1, dtype=np.float64)
    if schedule == "geometric":
        return leverage_top(L0, k) * np.exp(-(2 * k - j) * leverage_spacing(L0, k))
    if schedule == "printed":
        return np.exp(j / k) * L0
    raise ValueError("schedule must be 'geometric' or 'printed'.")


def weights_leverage_bound(L0, k):
    """``L_u = L0 / (1 - k L0)``: leverage bound of every weight vector at most ``k`` below ``w``.

    ``w`` is ``(L0, inf)``-good (Theorem 9(2)); removing mass ``m <= k`` gives
    ``S_u >= (1 - m L0) S_w``, so ``h_i(u) <= L0/(1 - k L0)`` on ``supp(w)``.
    This bounds the residual-thresholded weights ``u^{(j)}`` and the final
    ``v`` (``||w - v||_1 < k``).
    """
    return L0 / (1.0 - k * L0)


def ladder_log_ratio(k, L0):
    r"""Log-ratio ``g`` of consecutive residual thresholds, ``R_{j+1} = e^g R_j``.

    .. math::

       g = \lnrac{1 + 2L_1}{1 - (k+1)\sqrt{L_1 L_2}},\quad
       L_1 = rac{L_u}{1 - 2L_u},\; L_u = rac{L_0}{1 - kL_0},\quad
       L_2 = rac{L_w}{1 - (k+1)L_w},\; L_w = rac{L_0}{1 - (k+1)L_0},

    plus :data:`SCHEDULE_FLOAT_MARGIN`; about ``(k + 3) L0``. The intertwining
    argument (Brown et al. 2024), redone without relaxations (ISSP privacy
    analysis page): the restricted weights are within ``l1`` distance ``< 2``
    of ``u`` (factor ``1 + 2 L_1`` on residuals), and at most ``k + 1`` rows
    outside them carry weight on the neighbour (factor
    ``1/(1 - (k+1) sqrt(L_1 L_2))``). The paper's ``108 k L0`` is an upper
    bound of it whenever ``k L0 <= 1/96`` (which the planner enforces);
    outside the range where the denominators are positive (hand-picked
    ``L0`` in engine tests, never a private fit) the published ``108 k L0``
    is returned, so the ladder stays finite.
    """
    relaxed = 108.0 * k * L0
    if not (k + 1.0) * L0 < 0.5:
        return relaxed
    L_u = weights_leverage_bound(L0, k)
    L_1 = L_u / (1.0 - 2.0 * L_u)
    L_w = L0 / (1.0 - (k + 1.0) * L0)
    if not (k + 1.0) * L_w < 1.0:
        return relaxed
    L_2 = L_w / (1.0 - (k + 1.0) * L_w)
    b = (k + 1.0) * math.sqrt(L_1 * L_2)
    if not b < 1.0:
        return relaxed
    return min(math.log1p(2.0 * L_1) - math.log1p(-b) + SCHEDULE_FLOAT_MARGIN, relaxed)


def residual_thresholds(R0, L0, k):
    """Residual ladder :math:`R_j = R_0 e^{g j}`, ``j = 0..2k``.

    ``g`` is :func:`ladder_log_ratio`.
    """
    g = ladder_log_ratio(k, L0)
    with np.errstate(over="ignore", invalid="ignore"):  # only hand-picked L0 can overflow
        return R0 * np.exp(g * np.arange(2 * k + 1, dtype=np.float64))


# ---------------------------------------------------------------------------
# Stable leverage filtering, engine
# ---------------------------------------------------------------------------
@dataclass
class SLFResult:
    """``score`` = SCORE1 (integer in 0..k); ``W`` = k * w (integers) or None when score = k.

    ``removed_idx`` / ``removed_level``: rows that left ``A`` and the level at
    which they left (levels at or below ``saturated_level`` were not
    completed). ``factor``/``scan``: the factor of all rows and its first
    scan, reused by residual filtering when nothing was removed.
    """

    score: int
    W: object
    removed_idx: np.ndarray
    removed_level: np.ndarray
    saturated_level: int
    n_passes: int
    factor: object = None
    scan: object = None


def slf_score(n_removed_by_level, k, sat):
    """SCORE1 = min(k, min over sat < j <= k of (#{removed at level >= j} + j))."""
    best = k
    for j in range(max(0, sat + 1), k + 1):
        best = min(best, n_removed_by_level(j) + j)
    return int(best)


def _slf_weights(n, k, removed_idx, removed_level):
    W = np.full(n, k, dtype=np.int64)
    W[removed_idx] = np.clip(2 * k - np.asarray(removed_level, dtype=np.int64), 0, k)
    return W


def slf_engine(source, L0, k, *, n_candidates=None, schedule="geometric", dense_weights=True,
               gram=None):
    """Corrected StableLeverageFiltering by passes over ``source``.

    Leverages under the current set ``A = [n] \\ E`` come from the base factor
    ``S_base = G G^T`` by the low-rank formula
    ``h_i = z_i^T (I - Z_E^T Z_E)^{-1} z_i`` (``z = G^{-1} x~``) on the candidate
    rows; the rows outside the candidates are bounded by
    ``h_outside / lambda_min(I - Z_E^T Z_E)``. When that bound could reach the
    current threshold, or when ``lambda_min < 1/2`` (a removed row had leverage
    above 1/2), the factor of the kept rows is recomputed from
    scratch (rebase). Each level set is the unique largest stable subset (so
    it does not depend on the removal order), and removing rows in these
    batches gives exactly the reference result.
    """
    n, p = source.n, source.p
    M = max(4 * k + 16, 32) if n_candidates is None else max(int(n_candidates), k + 1)
    thresholds = leverage_thresholds(L0, k, schedule)
    removed_idx, removed_level = [], []
    removed_set = set()
    passes = 0
    first = {}

    def rebase(level):
        nonlocal passes
        weights = RowWeights.from_pairs(removed_idx, np.zeros(len(removed_idx)))
        # The Gram matrix of all rows may come from an earlier pass (``gram``).
        given = gram if not removed_idx and not first else None
        factor = factor_pass(source, weights, n_exclude=k, gram=given)
        passes += int(given is None) + int(factor.robust) + factor.exact_passes
        if not factor.pd:
            return factor, None
        # Every row above L_level leaves in the next round of this level: once
        # k - |removed| of them are seen, the level saturates for certain.
        lev, res = scan_pass(
            source, beta=factor.beta, n_candidates=M, weights=weights, factor=factor,
            screen=0.5 * thresholds[0], saturate=(thresholds[level], k - len(removed_idx)),
        )
        passes += 1
        if not first:
            first["factor"], first["scan"] = factor, (lev, res)
        return factor, lev

    factor, lev = rebase(2 * k)
    sat = -1
    if factor.pd:
        Zc = linalg.solve_triangular(factor.G, lev.X.T, lower=True, check_finite=False).T
        alive = np.ones(len(lev.idx), dtype=bool)
        E_rows = []  # candidate positions removed since the last rebase
        fresh = True
    for j in range(2 * k, -1, -1):
        if sat >= 0:
            break
        L_j = thresholds[j]
        while True:
            if len(removed_idx) >= k or not factor.pd or lev.saturated:
                sat = j
                break
            if E_rows:
                ZE = Zc[E_rows]
                with np.errstate(over="ignore", invalid="ignore"):
                    K = np.eye(p) - ZE.T @ ZE
                # A removed row's whitened z has ||z||^2 = h <= 1 in exact
                # arithmetic; an overflowing one (float factor of an extreme
                # row) forces a rebase like any leverage above 1/2.
                lam_min = (linalg.eigvalsh(K, subset_by_index=[0, 0], check_finite=False)[0]
                           if np.all(np.isfinite(K)) else -math.inf)
                if not lam_min >= 0.5:
                    factor, lev = rebase(j)
                    if factor.pd:
                        Zc = linalg.solve_triangular(
                            factor.G, lev.X.T, lower=True, check_finite=False
                        ).T
                        alive = np.ones(len(lev.idx), dtype=bool)
                        E_rows, fresh = [], True
                    continue
                chol = linalg.cho_factor(K, lower=True, check_finite=False)
                live = np.flatnonzero(alive)
                Y = linalg.cho_solve(chol, Zc[live].T, check_finite=False)
                h = np.einsum("ij,ji->i", Zc[live], Y)
            else:
                lam_min = 1.0
                live = np.flatnonzero(alive)
                h = lev.key[live]
            outside = lev.outside_max / lam_min
            if outside > L_j:
                if not fresh:
                    factor, lev = rebase(j)
                    if factor.pd:
                        Zc = linalg.solve_triangular(
                            factor.G, lev.X.T, lower=True, check_finite=False
                        ).T
                        alive = np.ones(len(lev.idx), dtype=bool)
                        E_rows, fresh = [], True
                    continue
                # Fresh factor and a row outside the candidates above L_j: all
                # M >= k candidates are above it too, so the level saturates.
                sat = j
                break
            out = live[h > L_j]
            if len(out) == 0:
                break
            for pos in out:
                removed_idx.append(int(lev.idx[pos]))
                removed_level.append(j)
                removed_set.add(int(lev.idx[pos]))
            alive[out] = False
            E_rows.extend(int(pos) for pos in out)
            fresh = False
    removed_idx = np.asarray(removed_idx, dtype=np.int64)
    removed_level = np.asarray(removed_level, dtype=np.int64)
    score = slf_score(lambda j: int(np.sum(removed_level >= j)), k, sat)
    W = None
    if score < k:
        W = _slf_weights(n, k, removed_idx, removed_level) if dense_weights else True
    return SLFResult(
        score, W, removed_idx, removed_level, sat, passes,
        first.get("factor"), first.get("scan"),
    )


# ---------------------------------------------------------------------------
# Stable residual filtering, Algorithm 4 (engine)
# ---------------------------------------------------------------------------
class _Overflowed(Exception):
    """``X~^T W y`` over the kept rows, the fit ``beta_u`` or a residual is not finite.

    Labels near the float64 maximum, or labels far larger than the features
    (features of ``1e-150`` and labels of ``1e308`` give a fit of ``1e458``).
    """


@dataclass
class SRFResult:
    """``score_num`` = k * SCORE2 (integer); ``F_idx``/``F_level``: rows removed and the level.

    ``V`` (integers ``k^2 v_i``) is built on request from ``W`` and ``F``;
    ``factor`` is the factor of ``S_w`` used for the release. ``theta``: the
    final ``theta_u`` (``beta_u = G^{-T} theta_u``); ``h_bound``: the bound on
    the leverages over ``supp(w)`` the run used. ``relabel``: ``None``, or the
    :class:`~._issp_refine.Relabel` whose labels the run read (``Fy`` and
    ``factor.theta`` are then in those labels). ``overflowed``: the run stopped
    because ``X~^T W y``, the fit or a residual overflowed (its score is ``k^2``).
    """

    score_num: int
    F_idx: np.ndarray
    F_level: np.ndarray
    saturated_level: int
    n_passes: int
    factor: object = None
    Fz: object = None
    Fy: object = None
    Fw: object = None
    theta: object = None
    h_bound: object = None
    relabel: object = None
    overflowed: bool = False


def srf_engine(
    source, W_idx, W_val, L0, R0, k, *, n_candidates=None, base=None, base_scan=None,
    h_bound=None,
):
    """Algorithm 4 (StableResidualFiltering, rank-one updates) by passes over ``source``.

    ``W_idx``/``W_val``: rows with ``k w_i < k`` and their numerators (all other
    rows have ``w_i = 1``). ``base``/``base_scan``: factor of ``S_w`` and a
    residual scan under ``beta_w`` if already available (clean path: one
    factor for everything). ``h_bound``: an upper bound on ``h_i(w)`` over
    ``supp(w)`` (``L0`` by Theorem 9(2) when ``None``; a factor 2 of slack).

    Rows are removed greedily by the largest ``|y_i - x~_i^T beta_u|`` (ties to
    the smallest global index). Residuals of candidates are exact; the other
    rows are bounded by ``r_outside + sqrt(h_bound) ||theta_u - theta_scan||``
    (Cauchy-Schwarz in whitened coordinates); when the bound could change the
    argmax or the stop decision, a residual pass (``O(n p)``) rescans.
    Scores use integer arithmetic:
    ``k SCORE^(j) = min(k^2, sum_E (k - W_i) + sum_{F_j} W_i + k j)``.
    """
    p = source.p
    M = max(4 * k + 16, 32) if n_candidates is None else max(int(n_candidates), 2)
    W_idx = np.asarray(W_idx, dtype=np.int64)
    W_val = np.asarray(W_val, dtype=np.int64)
    weights = RowWeights.from_pairs(W_idx, W_val / k)
    w_of = dict(zip(W_idx.tolist(), W_val.tolist()))
    deficit_E = int(np.sum(k - W_val))
    R = residual_thresholds(R0, L0, k)
    passes = 0
    if base is None:
        base = factor_pass(source, weights, n_exclude=k)
        passes += 1 + int(base.robust) + base.exact_passes
    if not base.pd:
        # Impossible in exact arithmetic when SCORE1 < k (Theorem 9(2)); FAIL.
        return SRFResult(k * k, np.zeros(0, np.int64), np.zeros(0, np.int64), 2 * k, passes)
    if not np.all(np.isfinite(base.theta)):
        # X~^T W y overflowed (labels near the float64 maximum): no residual is
        # computable. The caller runs the filter again on labels scaled by a
        # power of two (the decisions are the same in exact arithmetic).
        return SRFResult(k * k, np.zeros(0, np.int64), np.zeros(0, np.int64), 2 * k, passes,
                         base, h_bound=h_bound, overflowed=True)
    G = base.G
    if h_bound is None:
        # Exact max leverage under S_w over supp(w), and the first residual
        # candidates under beta_w, from one whitening pass (rare path).
        supp = RowWeights.from_pairs(W_idx[W_val == 0], np.zeros(int(np.sum(W_val == 0))))
        lev, first_scan = scan_pass(source, beta=base.beta, n_candidates=M, weights=supp,
                                    factor=base)
        passes += 1
        h_bound = max(float(np.max(lev.key, initial=0.0)), lev.outside_max) * (1 + 1e-9)
        if base_scan is None:
            base_scan = first_scan
    hb = float(h_bound)
    F_idx, F_level, F_z, F_y, F_w = [], [], [], [], []
    # theta_u = K^{-1} b_u with K = I - Z_F^T diag(om) Z_F (well conditioned:
    # removed rows have leverage <= L0) and b_u = G^{-1} X~^T diag(u) y. b_u is
    # updated by subtracting the removed rows from a reference (b_ref, summed
    # over the rows kept at the time, the first n_ref of F removed). When the
    # subtraction could cancel (a removed label so large that the rounding error
    # of b_ref and of the subtracted terms, seen through sqrt(h_bound), reaches
    # RESIDUAL_REBASE_TOL * R_0), b_ref is recomputed from scratch over the kept
    # rows (cross_pass): one pass, the rebase rule for residual filtering.
    ref = {"b": base.theta.copy(), "n": 0, "mag": magnitude(base.theta)}

    def current_theta():
        nonlocal passes
        if not F_idx:
            return ref["b"].copy()
        Z = np.asarray(F_z)
        om = np.asarray(F_w, dtype=np.float64) / k
        new = slice(ref["n"], len(F_idx))
        Fy = np.asarray(F_y)
        terms = Z[new].T * (om[new] * Fy[new])
        mag = ref["mag"] + magnitude(terms)
        if _EPS * p * mag * math.sqrt(hb) > RESIDUAL_REBASE_TOL * R[0]:
            kept = RowWeights.from_pairs(
                np.concatenate([W_idx, np.asarray(F_idx, dtype=np.int64)]),
                np.concatenate([W_val / k, np.zeros(len(F_idx))]),
            )
            b_ref = linalg.solve_triangular(G, cross_pass(source, kept, base.T), lower=True,
                                            check_finite=False)
            passes += 1
            ref.update(b=b_ref, n=len(F_idx), mag=magnitude(b_ref))
            b = b_ref
        else:
            b = ref["b"] - terms.sum(axis=1)
        if not np.all(np.isfinite(b)):
            raise _Overflowed
        K = np.eye(p) - (Z.T * om) @ Z
        return linalg.cho_solve(linalg.cho_factor(K, lower=True, check_finite=False), b)

    def rescan(theta):
        nonlocal passes
        beta = linalg.solve_triangular(G.T, theta, lower=False, check_finite=False)
        drop = RowWeights.from_pairs(
            np.concatenate([W_idx[W_val == 0], np.asarray(F_idx, dtype=np.int64)]),
            np.zeros(int(np.sum(W_val == 0)) + len(F_idx)),
        )
        _, res = scan_pass(source, beta=beta, n_candidates=M, weights=drop, transform=base.T)
        passes += 1
        return res

    theta_u = base.theta.copy()
    if base_scan is not None:
        cand = base_scan
    else:
        cand = rescan(theta_u)
    theta_scan = theta_u.copy()
    fresh = True
    alive = np.ones(len(cand.idx), dtype=bool)
    level_deficit = {}
    count = 0
    sat = -1
    try:
        for j in range(2 * k, -1, -1):
            while True:
                if count >= k:
                    break
                live = np.flatnonzero(alive)
                beta_u = linalg.solve_triangular(G.T, theta_u, lower=False, check_finite=False)
                r = np.abs(cand.y[live] - cand.X[live] @ beta_u)
                if (not np.all(np.isfinite(beta_u)) or np.any(np.isnan(r))
                        or math.isnan(cand.outside_max)):
                    # The fit overflowed, or a residual is inf - inf: no
                    # comparison is exact. The caller scales the labels.
                    raise _Overflowed
                if len(live):
                    best = live[np.lexsort((cand.idx[live], -r))[0]]
                    r_best = float(np.abs(cand.y[best] - cand.X[best] @ beta_u))
                else:
                    best, r_best = -1, -np.inf
                if fresh:
                    bound = cand.outside_max
                else:
                    bound = cand.outside_max + math.sqrt(hb) * _safe_norm(theta_u - theta_scan)
                if r_best > R[j]:
                    certain = fresh or bound < r_best
                else:
                    certain = fresh or bound <= R[j]
                if not certain:
                    cand = rescan(theta_u)
                    theta_scan = theta_u.copy()
                    alive = np.ones(len(cand.idx), dtype=bool)
                    fresh = True
                    continue
                if r_best <= R[j] or best < 0:
                    break
                gi = int(cand.idx[best])
                x_best = cand.X[best]
                z = linalg.solve_triangular(G, x_best, lower=True, check_finite=False)
                F_idx.append(gi)
                F_level.append(j)
                F_z.append(z)
                F_y.append(float(cand.y[best]))
                F_w.append(w_of.get(gi, k))
                alive[best] = False
                count += 1
                theta_u = current_theta()
                fresh = False
            if count >= k:
                sat = j
                break
            level_deficit[j] = deficit_E + int(sum(F_w))
    except _Overflowed:
        # Sums of the kept rows, the fit or a residual overflowed: the caller
        # runs the filter again on labels scaled by a power of two.
        return SRFResult(k * k, np.zeros(0, np.int64), np.zeros(0, np.int64), 2 * k, passes,
                         base, h_bound=hb, overflowed=True)
    score_num = k * k
    for j in range(0, k + 1):
        if j <= sat:
            continue
        score_num = min(score_num, k * k, level_deficit[j] + k * j)
    return SRFResult(
        int(score_num),
        np.asarray(F_idx, dtype=np.int64),
        np.asarray(F_level, dtype=np.int64),
        sat,
        passes,
        base,
        np.asarray(F_z).reshape(len(F_idx), p),
        np.asarray(F_y),
        np.asarray(F_w, dtype=np.int64),
        theta_u,
        hb,
    )


def srf_weights(n, k, W, F_idx, F_level):
    """V = k^2 v: ``V_i = W_i c_i`` with ``c_i`` the surviving levels in k+1..2k."""
    V = np.asarray(W, dtype=np.int64) * k
    F_level = np.asarray(F_level, dtype=np.int64)
    V[np.asarray(F_idx, dtype=np.int64)] = np.asarray(W)[F_idx] * np.clip(
        2 * k - F_level, 0, k
    )
    return V


