"""ISSP's private steps on a row source: the residual scale, the filters' test and the release.

:func:`private_residual_scale` estimates the residual bound ``R0`` with a
stability histogram; :func:`_issp_core` runs both filters, the
propose-test-release step and the Gaussian release with the constants of an
:class:`~._issp_plan.ISSPPlan`. Both are pure functions of a
:class:`~skprivreg._rows.RowSource`, the public constants and the random
generators they are given (Brown et al. 2024, with the corrected constants
stated in :class:`~skprivreg.linear_model.ISSPRegressor`).
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .._rows import add_tuples
from ..mechanisms import gaussian_precision_shaped, ptr_test, stability_mode
from ._issp_filters import slf_engine, srf_engine, srf_weights
from ._issp_passes import RowWeights, cross_pass, gram_piece_add, magnitude
from ._issp_plan import SCORE_SENSITIVITY, SEGMENTS_PER_GROUP, r0_groups
from ._issp_refine import Relabel, RelabelledSource, refined_srf

__all__ = ["ISSPTrace", "private_residual_scale"]

#: The release sums ``X^T diag(v) y`` from scratch when the rounding error of
#: subtracting the removed rows could exceed this fraction of the noise scale c.
RELEASE_REBASE_TOL = 1e-9
_EPS = float(np.finfo(np.float64).eps)


def _segment_groups(m, b, rng):
    """Data-independent partition: segment ``i`` (rows ``[i s, (i+1) s)``) -> group.

    The first ``m b'`` rows (``b' = r floor(b/r)``, ``r`` segments per group) are
    cut into ``m r`` contiguous segments of ``s = b'/r`` rows, dealt to the ``m``
    groups by a uniformly random permutation from the public generator; the
    remaining rows are unused. Each group is ``r`` segments scattered over the
    data, and every per-group Gram matrix is a few BLAS calls on contiguous
    slices, so this pass costs about one Gram pass and also yields the Gram
    matrix of all rows (Brown et al. use a random permutation of rows; any
    data-independent partition is equally private, and for i.i.d. rows
    equally accurate).
    """
    r = SEGMENTS_PER_GROUP if b >= 2 * SEGMENTS_PER_GROUP else 1
    seg = b // r
    return np.repeat(np.arange(m), r)[rng.permutation(m * r)], seg, m * r * seg


def _group_rss(grams, p):
    """``RSS_j = min_beta ||y - X beta||^2`` of each group from its augmented Gram matrix.

    The last pivot of the Cholesky factor of ``[X y]^T [X y]`` squared is the
    Schur complement ``y^T y - t^T S^{-1} t`` = RSS; a group whose factor fails
    (rank-deficient design or an exact fit) uses a pseudo-inverse instead.
    ``RSS_j`` is a function of group ``j``'s Gram matrix alone, bit for bit:
    the stacked factorisation is LAPACK's per-matrix routine applied to each
    group, and when one group fails every group is redone on its own, so one
    degenerate group never changes the method (or the bits) of another. The
    histogram's sensitivity analysis needs exactly this.
    """
    try:
        return np.linalg.cholesky(grams)[:, p, p] ** 2
    except np.linalg.LinAlgError:
        pass
    return np.concatenate([_one_group_rss(grams[j:j + 1], p) for j in range(len(grams))])


def _one_group_rss(gram, p):
    """:func:`_group_rss` of a stack holding one group."""
    try:
        return np.linalg.cholesky(gram)[:, p, p] ** 2
    except np.linalg.LinAlgError:
        return _group_rss_pinv(gram, p)


def _group_rss_pinv(grams, p):
    """RSS by a pseudo-inverse of each (scaled) Gram matrix of the stack."""
    # Jacobi scaling first: the projection is invariant to column scales, and
    # eigh of the scaled matrix is accurate for badly scaled columns.
    diag = np.einsum("gii->gi", grams[:, :p, :p])
    scale = np.sqrt(np.where(diag > 0, diag, 1.0))
    S = grams[:, :p, :p] / (scale[:, :, None] * scale[:, None, :])
    t = grams[:, :p, p] / scale
    yy = grams[:, p, p]
    vals, vecs = np.linalg.eigh(S)
    proj = np.einsum("gij,gi->gj", vecs, t)
    cutoff = p * np.finfo(np.float64).eps * np.maximum(vals[:, -1:], 0.0)
    keep = vals > cutoff
    fitted = np.sum(np.where(keep, proj**2 / np.where(keep, vals, 1.0), 0.0), axis=1)
    return np.maximum(yy - fitted, 0.0)


def _group_gram_block(offset, Xb, yb, params, into=None, check_finite=False):
    """Block function of :func:`_group_grams`: upper triangles ``(grams, rest)`` of one block."""
    p, intercept, seg_group, seg, used, m = params
    if into is None:
        into = (np.zeros((m, p + 1, p + 1)), np.zeros((p + 1, p + 1)))
    grams, rest = into
    start, stop = offset, offset + Xb.shape[0]
    lo = start
    while lo < stop:
        if lo >= used:
            gram_piece_add(rest, Xb[lo - start:], yb[lo - start:], intercept,
                           check_finite=check_finite)
            break
        i = lo // seg
        hi = min(stop, (i + 1) * seg, used)
        gram_piece_add(grams[seg_group[i]], Xb[lo - start:hi - start],
                       yb[lo - start:hi - start], intercept, check_finite=check_finite)
        lo = hi
    return into


#: The group Gram pass checks finiteness itself, fused with its read of each piece.
_group_gram_block.checks_finite = True


def _group_grams(source, seg_group, seg, used, m):
    """One pass: augmented Gram ``[X~ y]^T [X~ y]`` of each group and of the unused rows.

    Group ``j`` is the union of the segments ``i`` with ``seg_group[i] == j``
    (rows ``[i seg, (i+1) seg)``, all below ``used``); ``grams[j]`` depends on
    those rows only. Returns ``(grams, rest)``, symmetric, shapes
    ``(m, p+1, p+1)`` and ``(p+1, p+1)``; ``grams.sum(0) + rest`` is the Gram
    matrix of all rows. ``seg_group`` is public (drawn on the driver); on Dask
    it is shipped to the workers with the block function.
    """
    p = source.p
    params = (p, source.fit_intercept, np.asarray(seg_group), int(seg), int(used), int(m))
    grams, rest = source.reduce(_group_gram_block, add_tuples, params)
    grams = np.triu(grams)
    grams += np.swapaxes(np.triu(grams, 1), 1, 2)
    rest = np.triu(rest)
    rest += np.triu(rest, 1).T
    return grams, rest


def _residual_scale_label(psi):
    """Histogram bin of one group's ``psi``: ``floor(4 log2 psi)``, ``'zero'`` or ``'overflow'``.

    A group whose Gram matrix overflowed float64 (a finite row above about
    1e154) has a non-finite ``psi``; it gets its own public label, which is a
    function of that group's rows only like every other label.
    """
    if not math.isfinite(psi):
        return "overflow"
    return "zero" if psi <= 0 else int(math.floor(4.0 * math.log2(psi)))


def _residual_scale_tie_key(label):
    return {"zero": -math.inf, "overflow": math.inf}.get(label, label)


def private_residual_scale(source, eps0, delta0, rng_partition, rng_noise, *,
                           residual_slack=1.0, eta=0.01, zeta=0.01, return_gram=False):
    """Private residual bound R0: ``(R0, sigma2_up)`` or ``None`` (bottom).

    Groups of ``b' <= floor(n/m)`` rows from a data-independent partition
    (:func:`_segment_groups`); ``psi_j = RSS_j/(b' - p)``; geometric bins
    ``[2^{t/4}, 2^{(t+1)/4})``; the Karwa-Vadhan stability histogram at
    ``(eps0, delta0)`` (:func:`~skprivreg.mechanisms.stability_mode`). With
    ``t*`` the released bin, ``sigma2_up = 2^{(2t*+3)/8}`` and
    ``R0 = slack sigma_up sqrt(2 ln(2n/eta))``. One row changes one ``psi_j``,
    hence one bin count by -1 and one by +1.

    With ``return_gram=True`` the result also carries the augmented Gram
    matrix ``[X~ y]^T [X~ y]`` of all rows (sum of the group matrices and of
    the unused rows), which the leverage filter reuses: no extra pass.

    Privacy: the partition depends only on ``n`` and the public generator, and
    ``psi_j`` is a function of group ``j``'s rows only (its Gram matrix is
    accumulated from those rows alone; the shared pass changes floating-point
    summation order, not this dependence), so the histogram analysis is unchanged.
    """
    n, p = source.n, source.p
    m, b = r0_groups(n, eps0, delta0, zeta)
    seg_group, seg, used = _segment_groups(m, b, rng_partition)
    b_eff = used // m
    grams, rest = _group_grams(source, seg_group, seg, used, m)
    psi = _group_rss(grams, p) / (b_eff - p)
    labels = [_residual_scale_label(v) for v in psi]
    mode = stability_mode(labels, eps0, delta0, rng_noise, tie_key=_residual_scale_tie_key)
    total = grams.sum(axis=0) + rest if return_gram else None
    if mode is None or mode in ("zero", "overflow"):
        return None
    sigma2_up = 2.0 ** ((2 * mode + 3) / 8.0)
    R0 = residual_slack * math.sqrt(sigma2_up) * math.sqrt(2.0 * math.log(2.0 * n / eta))
    return (R0, sigma2_up, total) if return_gram else (R0, sigma2_up)


# ---------------------------------------------------------------------------
# The core mechanism
# ---------------------------------------------------------------------------
@dataclass
class ISSPTrace:
    """Everything the core computed. NOT differentially private: tests only.

    ``score1`` (integer), ``score2_num`` (= k SCORE2, integer), ``score``
    (= max, a multiple of 1/k), ``passed`` (the PTR bit), ``beta_hat`` (the
    weighted OLS on ``v``), ``precision_factor`` (``G_v`` with
    ``G_v G_v^T = S_v``), ``beta_tilde`` (the release), ``W``/``V`` (dense
    integer weights ``k w`` and ``k^2 v``, only with ``dense=True``),
    ``n_passes`` (data passes).
    """

    k: int
    score1: int
    score2_num: int
    score: float
    passed: bool
    beta_hat: object = None
    precision_factor: object = None
    beta_tilde: object = None
    W: object = None
    V: object = None
    n_passes: int = 0
    noise_scale: float = 0.0


def _issp_core(source, *, k, L0, R0, c, eps_ptr, delta_ptr, ptr_fail_prob, rng_ptr,
               rng_noise, n_candidates=None, dense=False, gram=None):
    """Filters, PTR and Gaussian release on a row source, with explicit constants.

    Calls with hand-picked (small) constants are mechanics tests, not private
    runs; :class:`ISSPRegressor` passes the constants of :func:`issp_plan`.
    """
    n, p = source.n, source.p
    slf = slf_engine(source, L0, k, n_candidates=n_candidates, dense_weights=False,
                     gram=gram)
    passes = slf.n_passes
    srf = None
    W_idx = slf.removed_idx
    W_val = np.clip(2 * k - slf.removed_level, 0, k).astype(np.int64)
    if slf.score >= k:
        score2_num = k * k
    else:
        if len(W_idx) == 0:
            lev, res = slf.scan
            h_max = max(float(np.max(lev.key, initial=0.0)), lev.outside_max)
            srf = srf_engine(source, W_idx, W_val, L0, R0, k, n_candidates=n_candidates,
                             base=slf.factor, base_scan=res, h_bound=h_max * (1 + 1e-9))
        else:
            srf = srf_engine(source, W_idx, W_val, L0, R0, k, n_candidates=n_candidates)
        passes += srf.n_passes
        srf, extra = refined_srf(source, srf, W_idx, W_val, L0, R0, k,
                                 n_candidates=n_candidates)
        score2_num = srf.score_num
        passes += extra
    score_num = max(k * slf.score, score2_num)
    score = score_num / k
    passed, _ = ptr_test(score, SCORE_SENSITIVITY, eps_ptr, delta_ptr, rng_ptr, ptr_fail_prob)
    # With k = floor(tau + A) + 1 a capped score FAILs with probability 1 anyway;
    # the explicit rule also covers mechanics runs with hand-picked k.
    passed = passed and score_num < k * k
    trace = ISSPTrace(k, int(slf.score), int(score2_num), score, bool(passed), n_passes=passes,
                      noise_scale=float(c))
    if dense:
        W = np.full(n, k, dtype=np.int64)
        W[slf.removed_idx] = np.clip(2 * k - slf.removed_level, 0, k)
        trace.W = W
        if srf is not None and score2_num < k * k:
            trace.V = srf_weights(n, k, W, srf.F_idx, srf.F_level)
    if not passed:
        return trace
    # Release: S_v = G (I - Z_F^T diag(w_F - v_F) Z_F) G^T in the basis of S_w = G G^T.
    # It reads the labels themselves: a run of residual filtering on relabelled
    # rows (srf.relabel) left srf.factor.theta and srf.Fy in those labels, so
    # X~^T diag(v) y is summed again.
    G = srf.factor.G
    survive = np.clip(2 * k - srf.F_level, 0, k) / k
    omega = (srf.Fw / k) * (1.0 - survive)
    K = np.eye(p) - (srf.Fz.T * omega) @ srf.Fz
    terms = srf.Fz.T * (omega * srf.Fy)
    mag = magnitude(srf.factor.theta) + magnitude(terms)
    if srf.relabel is not None or (len(srf.F_idx) and _EPS * p * mag > RELEASE_REBASE_TOL * c):
        # Subtracting the removed rows could cancel (a huge label): sum
        # X~^T diag(v) y over the rows again instead (rebase rule).
        v_of = dict(zip(W_idx.tolist(), (W_val / k).tolist()))
        v_of.update(zip(srf.F_idx.tolist(), ((srf.Fw / k) * survive).tolist()))
        weights = RowWeights.from_pairs(list(v_of), list(v_of.values()))
        # Labels whose sums overflowed are summed scaled by the run's power of
        # two (exact), and the estimate scaled back once.
        exponent = 0 if srf.relabel is None else srf.relabel.exponent
        rows = source if not exponent else RelabelledSource(
            source, Relabel(source.fit_intercept, np.zeros(p), np.zeros(p), srf.relabel.R0,
                            exponent))
        b = linalg.solve_triangular(G, cross_pass(rows, weights, srf.factor.T), lower=True,
                                    check_finite=False)
        trace.n_passes += 1
    else:
        exponent = 0
        b = srf.factor.theta - terms.sum(axis=1)
    Lk = linalg.cholesky(K, lower=True, check_finite=False)
    theta_hat = linalg.cho_solve((Lk, True), b, check_finite=False)
    beta_hat = linalg.solve_triangular(G.T, theta_hat, lower=False, check_finite=False)
    with np.errstate(over="ignore"):  # an estimate beyond the float64 range is infinite
        beta_hat = np.ldexp(beta_hat, exponent)
    precision_factor = G @ Lk
    beta_tilde = gaussian_precision_shaped(beta_hat, precision_factor, c, rng_noise)
    factor = srf.factor
    if factor.T is not None:
        # The factor lives in exact whitening coordinates b = T^{-1} beta: the
        # release N(b_hat, c^2 S_T^-1) maps to N(T b_hat, c^2 S^-1) exactly.
        beta_hat, beta_tilde = factor.to_original(beta_hat), factor.to_original(beta_tilde)
        precision_factor = linalg.solve_triangular(
            (factor.T[0] + factor.T[1]).T, precision_factor, lower=True, check_finite=False)
    trace.beta_hat, trace.precision_factor, trace.beta_tilde = (
        beta_hat, precision_factor, beta_tilde)
    return trace


