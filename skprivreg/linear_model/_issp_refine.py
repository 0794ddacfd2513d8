"""Residual filtering again on labels minus a fit, computed in double-double arithmetic.

Residual filtering compares float64 residuals ``|y_i - x~_i^T beta_u|`` with a
ladder of thresholds whose consecutive ratios are
:data:`~._issp_filters.SCHEDULE_FLOAT_MARGIN` wider than the proofs need. The
rounding error of such a residual is about ``eps`` times the size of its
terms: with fitted values or labels ``1e10`` residual scales from 0 it reaches
that margin, and a row could fall on the other side of a threshold than in
exact arithmetic, where the score's sensitivity is proven.

The filter's output is the same in exact arithmetic for labels ``y`` and for
``y - X~ b`` with any vector ``b`` (residuals and scores are functions of the
residuals only). So when a bound on the rounding error of the residuals of a
run (:func:`residual_rounding_bound`) exceeds :data:`REFINE_TOL` times ``R_0``,
the filter is run again on ``y - X~ b``, ``b`` the weighted least-squares fit
``beta_u`` at the end of the run, each relabelled value computed in
double-double arithmetic (error about ``2^-104`` times the size of its terms,
the correctly rounded exact value where that is not small against ``R_0``). The rows the
run kept then have labels on the scale of their residuals, and the second
run's residuals are accurate to float64 precision relative to that scale.
A float fit errs by about the run's rounding bound, so when that bound is
above :data:`EXACT_FIT_FROM` residual scales (fitted values beyond about
``1e22`` residual scales), or a relabelled run still needs another, ``b`` is
instead the fit of the run's kept rows from exact sums (:func:`exact_fit`, one
pass, solved in exact rationals), an expansion of float64 vectors accurate to
the precision the labels need (``None`` for a singular design), and every row
is relabelled from its exact value. The same kept rows are not fitted twice
(a run that keeps rows far outside the ladder stands as computed).
Rows the first run removed keep large relabelled values; the second run
removes them again and, as any run does, sums the kept rows afresh instead of
subtracting such a row (the rebase rule). Whether a second run happens depends
on the data, but both runs compute the same function (the exact-arithmetic
filter, within the ladder's margin), so the choice reveals nothing.

When ``X~^T W y``, the fit or a residual overflows (labels near the float64
maximum, or far larger than the features), no residual is computable; the
filter runs again on the labels scaled by a power of two, exact above the
subnormal range.

Everything here is a secret intermediate value of
:class:`~skprivreg.linear_model.ISSPRegressor`.
"""

import fractions
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg

from .._blocks import is_file_backed
from ._issp_exact import (
    _bareiss,
    _dd_products,
    _exact_gram_add,
    _exact_matrix,
    exact_gram,
    exact_products,
)
from ._issp_filters import residual_thresholds, srf_engine
from ._issp_passes import (
    _EPS,
    RowWeights,
    _augment,
    _safe_norm,
    cross_pass,
    magnitude,
    rows_in,
)

__all__ = ["LABEL_EXPONENT_MAX", "OVERFLOW_STEP", "REFINE_TOL", "Relabel", "RelabelledSource",
           "measured_rounding_bound", "refined_srf", "residual_rounding_bound"]

#: A run of residual filtering is repeated on relabelled rows when the bound on
#: the rounding error of its residuals exceeds this fraction of ``R_0`` (a
#: hundredth of the ladder's margin, ``1e-6`` of a rung).
REFINE_TOL = 1e-8

#: At most this many runs (the first included): the filter runs again while the
#: bound is too large. Each relabelled run shrinks the fitted values by about
#: ``eps`` times the design's condition number, so a few runs suffice (a slope
#: of ``2^140`` residual scales took four).
MAX_RUNS = 8


@dataclass
class Relabel:
    """``y -> fl(2^-exponent y - x~^T (b_hi + b_lo))``, rows in the original coordinates.

    ``R0`` and ``b`` are in the scaled units (``exponent > 0`` only for labels
    whose sums overflow; the scaling is exact above the subnormal range).

    A row whose terms exceed ``REFINE_TOL * R0 * 2^100`` in size is relabelled
    from its exact value (the double-double error, about ``2^-104`` of the
    terms, would not be small against ``REFINE_TOL * R0``).
    """

    intercept: bool
    b_hi: np.ndarray
    b_lo: np.ndarray
    R0: float
    exponent: int = 0
    #: Further terms of ``b`` (an expansion ``b_hi + b_lo + ...`` from :func:`exact_fit`);
    #: every row is then relabelled from its exact value.
    b_more: tuple = ()

    def apply(self, Xb, yb):
        """The relabelled labels of one block (float64, rounded once)."""
        d = Xb.shape[1]
        q = d + int(self.intercept) + 1
        A = np.empty((Xb.shape[0], q))
        A[:, :d] = Xb
        if self.intercept:
            A[:, d] = 1.0
        A[:, -1] = yb
        T_hi = np.append(-self.b_hi, math.ldexp(1.0, -self.exponent))[:, None]
        T_lo = np.append(-self.b_lo, 0.0)[:, None]
        if self.b_more:
            more = [np.append(-b, 0.0)[:, None] for b in self.b_more]
            out = np.full(A.shape[0], np.nan)
            finite = np.flatnonzero(np.all(np.isfinite(A), axis=1))
            out[finite] = exact_products(A[finite], T_hi, T_lo, *more)[:, 0]
            return out
        with np.errstate(over="ignore", invalid="ignore"):
            out = _dd_products(A, T_hi, T_lo)[:, 0]
            size = np.abs(A) @ (np.abs(T_hi[:, 0]) + np.abs(T_lo[:, 0]))
        limit = REFINE_TOL * self.R0 * 2.0**100
        redo = np.flatnonzero(~(np.isfinite(out) & (size <= limit))
                              & np.all(np.isfinite(A), axis=1))
        out[redo] = exact_products(A[redo], T_hi, T_lo)[:, 0]
        return out


class _RelabelledBlock:
    """A block function reading relabelled labels (picklable, for Dask workers)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, offset, Xb, yb, params, into=None):
        inner, relabel, cache = params
        if cache is None:
            labels = relabel.apply(Xb, yb)
        else:
            key = (offset, Xb.shape[0])
            labels = cache.get(key)
            if labels is None:
                labels = cache[key] = relabel.apply(Xb, yb)
        return self.fn(offset, Xb, labels, inner, into)


#: A relabelled source over rows in memory keeps their relabelled labels (8
#: bytes a row) up to this size, so the passes of a run relabel each row once
#: (rows of exact terms cost microseconds each, in every pass). Never for Dask
#: or a file (whose values may change between passes; each pass reads them).
RELABEL_CACHE_BYTES = 256 << 20


class RelabelledSource:
    """A row source whose passes read ``(X, relabel(X, y))`` (rows clipped as the source's)."""

    def __init__(self, source, relabel):
        self.source = source
        self.relabel = relabel
        self.n, self.d, self.p = source.n, source.d, source.p
        self.fit_intercept = source.fit_intercept
        X = getattr(source, "X", None)
        in_memory = (not getattr(source, "is_dask", True) and isinstance(X, np.ndarray)
                     and not is_file_backed(X))
        self._cache = {} if in_memory and 8 * self.n <= RELABEL_CACHE_BYTES else None

    def reduce(self, fn, combine, params=None, *, stop=None, label=""):
        return self.source.reduce(_RelabelledBlock(fn), combine,
                                  (params, self.relabel, self._cache), stop=stop, label=label)


def residual_rounding_bound(result, R_top):
    r"""A bound on the rounding error of the residuals a run of residual filtering compared.

    For a row in :math:`\mathrm{supp}(w)` (leverage :math:`h_i \le h`, the
    run's ``h_bound``) with a residual near the ladder (at most ``2 R_top``, as
    :func:`measured_rounding_bound` counts them),
    :math:`\sum_j |\tilde x_{ij}\beta_j| \le \sqrt{p h}\,\|D\beta_u\|` with
    :math:`D` the column norms of :math:`S_w` (the scaled Gram matrix has
    eigenvalues at most ``p``), and :math:`|y_i| \le 2 R_{top}` plus that. A
    float64 dot product errs by at most ``(p + 1) u`` times the size of its
    terms (``u = eps/2``), and ``beta_u`` carries the summation error of
    ``X~^T W y`` through ``sqrt(h)`` (as the rebase rule measures it).
    No pass over the rows; :func:`measured_rounding_bound` is tighter.
    """
    p = result.factor.G.shape[0]
    col = _column_norms(result.factor.G)
    with np.errstate(over="ignore", invalid="ignore"):
        fitted = math.sqrt(p * float(result.h_bound)) * _safe_norm(col * _fit(result))
        bound = 0.5 * _EPS * (p + 2) * (2.0 * R_top + 2.0 * fitted) + _theta_error(result, col)
    return bound if math.isfinite(bound) else math.inf


def _fit(result):
    """``beta_u = G^{-T} theta_u`` of a run, in its factor's coordinates."""
    return linalg.solve_triangular(result.factor.G.T, result.theta, lower=False,
                                   check_finite=False)


def _column_norms(G):
    """Column norms of ``S_w = G G^T`` (the row norms of ``G``), without overflow."""
    return np.array([_safe_norm(row) for row in G])


def _theta_error(result, col):
    """The summation error of ``theta_u`` seen in a residual.

    The rebase rule's measure ``eps p sqrt(h) |theta|``, times the condition
    number of the column-scaled factor: the rounding of ``X~^T W y`` reaches
    ``beta_u`` through ``G^{-1}``, and a nearly collinear design amplifies it in
    its weak direction by up to that factor.
    """
    G = result.factor.G
    p = G.shape[0]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        kappa = float(np.linalg.cond(G / col[:, None]))
        return _EPS * p * kappa * math.sqrt(float(result.h_bound)) * magnitude(result.theta)


def _size_block(offset, Xb, yb, params, into=None):
    """Largest ``|y_i| + sum_j |x~_ij beta_j|`` over the block's rows whose comparisons matter."""
    intercept, weights, transform, beta, r_cap, ratio = params
    wb = weights.block(offset, offset + Xb.shape[0])
    if wb is not None:
        keep = wb > 0
        Xb, yb = Xb[keep], yb[keep]
    if transform is not None:
        Xb, intercept = rows_in(Xb, intercept, transform), False
    d = Xb.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        fit = Xb @ beta[:d]
        size = np.abs(yb) + np.abs(Xb) @ np.abs(beta[:d])
        if intercept:
            fit += beta[d]
            size += abs(beta[d])
        r = np.abs(yb - fit)
        # A row far above every rung (r > r_cap) whose rounding is small against
        # its residual was compared safely; every other row counts (NaN included).
        safe = (r > r_cap) & (ratio * size <= r)
    top = float(np.max(size[~safe], initial=0.0))
    if math.isnan(top):
        top = math.inf
    return (top if into is None else max(top, into[0]),)


def _max_tuples(a, b):
    return (max(a[0], b[0]),)


def measured_rounding_bound(source, result, W_idx, W_val, R_top):
    """:func:`residual_rounding_bound` with the sizes of the rows' terms read in one pass.

    Over the rows of positive weight whose final residual is not far above the
    ladder (every row within ``2 R_top``, and any row whose rounding could be a
    quarter of its residual), the largest ``|y_i| + sum_j |x~_ij beta_j|``.
    """
    factor = result.factor
    p = factor.G.shape[0]
    W_idx, W_val = np.asarray(W_idx), np.asarray(W_val)
    support = RowWeights.from_pairs(W_idx[W_val == 0], np.zeros(int(np.sum(W_val == 0))))
    rounding = 0.5 * _EPS * (p + 2)
    (top,) = source.reduce(_size_block, _max_tuples,
                           (source.fit_intercept, support, factor.T, _fit(result), 2.0 * R_top,
                            4.0 * rounding))
    with np.errstate(over="ignore", invalid="ignore"):
        bound = rounding * top + _theta_error(result, _column_norms(factor.G))
    return bound if math.isfinite(bound) else math.inf


def _two_sum(a, b):
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


def _label_max_block(offset, Xb, yb, params, into=None):
    (weights,) = params
    wb = weights.block(offset, offset + Xb.shape[0])
    if wb is not None:
        Xb, yb = Xb[wb > 0], yb[wb > 0]
    # 2^-1024 |y_i| max(1, max_j |x_ij|) bounds every term of X~^T W y in row i
    # (each factor halved in exponent first, so the product cannot overflow).
    size = (np.ldexp(np.abs(yb), -512)
            * np.ldexp(np.maximum(np.max(np.abs(Xb), axis=1, initial=0.0), 1.0), -512))
    top = float(np.max(size, initial=0.0))
    return (top if into is None else max(top, into[0]),)


#: Labels whose sums overflow are scaled so that the largest term
#: ``|y_i x~_ij|`` is at most ``2^LABEL_EXPONENT_MAX`` (sums of up to ``2^100``
#: such terms stay finite), and never so far that ``R0`` would fall below
#: ``2^-960``.
LABEL_EXPONENT_MAX = 900

#: When the scaled labels overflow again (the fit ``beta_u`` of labels far
#: larger than the features), the scaling grows by this power of two.
OVERFLOW_STEP = 256


def _label_exponent(source, weights):
    """The power of two making the terms of ``X~^T W y`` at most ``2^900`` (one pass)."""
    (top,) = source.reduce(_label_max_block, _max_tuples, (weights,))
    return math.frexp(top)[1] + 1024 - LABEL_EXPONENT_MAX


def _exact_fit_block(offset, Xb, yb, params, into=None):
    """Exact ``sum_i W_i a_i a_i^T``, ``a_i = (x~_i, 2^-exponent y_i)``, integers ``W_i``."""
    intercept, weights, k, exponent = params
    wb = weights.block(offset, offset + Xb.shape[0])
    A = np.column_stack([_augment(Xb, intercept), np.ldexp(np.asarray(yb, np.float64), -exponent)])
    numer = np.full(A.shape[0], k) if wb is None else np.rint(wb * k).astype(np.int64)
    total, top = (None, np.zeros(A.shape[1])) if into is None else into
    for W in np.unique(numer[numer > 0]).tolist():
        rows = A[numer == W]
        gram = {key: (t * W, e) for key, (t, e) in exact_gram(rows).items()}
        total = gram if total is None else _exact_gram_add(total, gram)
        top = np.maximum(top, np.max(np.abs(rows), axis=0))
    return total, top


def _exact_fit_combine(a, b):
    if a[0] is None or b[0] is None:
        total = b[0] if a[0] is None else a[0]
    else:
        total = _exact_gram_add(a[0], b[0])
    return total, np.maximum(a[1], b[1])


#: The expansion of :func:`exact_fit` stops when a term moves no kept row's fit
#: by more than this fraction of ``R_0``.
EXACT_FIT_TOL = 2.0**-40 * REFINE_TOL

#: A run whose rounding bound exceeds this many ``R_0`` is followed by an exact
#: fit (a run on labels minus its float fit would still be about that large,
#: and its bound about ``1e-15`` of that, above ``REFINE_TOL``); so is every
#: relabelled run whose bound is still too large.
EXACT_FIT_FROM = 1e6

#: At most this many terms in the expansion of :func:`exact_fit`.
FIT_TERMS_MAX = 60


def _solve_augmented(total, p):
    """``S b = c`` exactly, from the exact sums of ``[X~, y]`` (``None`` if ``S`` is singular).

    The exact ``L D L^T`` of the augmented matrix ``[[S, c], [c^T, y^T y]]``
    (:func:`~._issp_exact._bareiss`, as the exact rank decision uses) has last
    row ``l^T = c^T L_S^{-T} D_S^{-1}``, so ``b = L_S^{-T} l`` by back substitution.
    """
    columns, minors = _bareiss(_exact_matrix(total, p + 1)[0], p + 1)
    if len(columns) < p:
        return None
    b = [fractions.Fraction(0)] * p
    for i in range(p - 1, -1, -1):
        b[i] = (fractions.Fraction(columns[i][p], minors[i + 1])
                - sum(fractions.Fraction(columns[i][j], minors[i + 1]) * b[j]
                      for j in range(i + 1, p)))
    return b


def exact_fit(source, weights, k, exponent, tol):
    """The weighted least-squares fit of ``2^-exponent y`` as a float64 expansion (one pass).

    ``weights``: the run's weights ``u_i = W_i / k`` (integers ``W_i``). The
    sums ``X~^T U X~`` and ``X~^T U y`` are exact (:func:`~._issp_exact.exact_gram`)
    and the normal equations are solved in exact rationals (whatever their
    condition number); the solution is written as a sum of float64 vectors,
    each the rounding of what the previous ones leave, until the rest moves no
    kept row's fit by more than ``tol``. Returns the terms (original
    coordinates), or ``None`` when ``X~^T U X~`` is singular, a term is beyond
    the float64 range, or :data:`FIT_TERMS_MAX` terms do not reach ``tol``.
    """
    p = source.p
    total, top = source.reduce(_exact_fit_block, _exact_fit_combine,
                               (source.fit_intercept, weights, k, exponent))
    if total is None:
        return None
    solution = _solve_augmented(total, p)
    if solution is None:
        return None
    terms, rest = [], solution
    for _ in range(FIT_TERMS_MAX):
        try:
            term = np.array([float(v) for v in rest])
        except OverflowError:
            return None
        if not np.any(term):
            return terms
        terms.append(term)
        rest = [v - fractions.Fraction(t) for v, t in zip(rest, term.tolist())]
        if sum(float(abs(v)) * t for v, t in zip(rest, top[:p].tolist())) <= tol:
            return terms
    return None


def refined_srf(source, first, W_idx, W_val, L0, R0, k, *, n_candidates=None):
    """Residual filtering, run again on relabelled rows while its rounding bound is too large.

    ``first`` is the run on ``source`` itself. When a run overflows (its sums,
    its fit or a residual), the labels are scaled by a power of two (the first
    time from one pass reading the largest term ``|y_i x~_ij|``, then
    :data:`OVERFLOW_STEP` more each time) and the run is repeated; scaling is
    exact above the subnormal range, so the decisions are those of the
    unscaled labels in exact arithmetic. A run that still overflows when ``R0``
    would fall below ``2^-960`` is returned as it is (score ``k^2``, FAIL).
    Returns the last run (its ``relabel`` set when it read relabelled rows) and
    the passes of the extra runs.
    """
    p, intercept = source.p, source.fit_intercept
    weights = RowWeights.from_pairs(W_idx, np.asarray(W_val) / k)
    b_hi, b_lo, b_more, exponent = np.zeros(p), np.zeros(p), (), 0
    exponent_cap = math.frexp(R0)[1] + 959
    result, passes, fitted = first, 0, None

    def rescale():
        """Scale the labels further after an overflow; False when no further scaling is allowed."""
        nonlocal b_hi, b_lo, b_more, exponent, passes
        new = exponent + OVERFLOW_STEP
        if exponent == 0:
            new = max(new, _label_exponent(source, weights))
            passes += 1
        new = min(new, exponent_cap)
        if new <= exponent:
            return False
        b_hi, b_lo = np.ldexp(b_hi, exponent - new), np.ldexp(b_lo, exponent - new)
        b_more = tuple(np.ldexp(b, exponent - new) for b in b_more)
        exponent = new
        return True

    def run():
        nonlocal passes
        scale = math.ldexp(R0, -exponent)
        out, extra = _relabelled_run(source, result, weights, W_idx, W_val, L0, scale, k,
                                     Relabel(intercept, b_hi, b_lo, scale, exponent, b_more),
                                     n_candidates, h_bound=first.h_bound)
        passes += extra
        return out

    while result.overflowed and rescale():
        result = run()
    for _ in range(MAX_RUNS - 1):
        if result.theta is None or result.overflowed:  # FAIL: S_w singular, overflowed
            break
        scale = math.ldexp(R0, -exponent)
        R_top = float(residual_thresholds(scale, L0, k)[-1])
        if not residual_rounding_bound(result, R_top) > REFINE_TOL * scale:
            break
        current = source if result.relabel is None else RelabelledSource(source, result.relabel)
        passes += 1
        bound = measured_rounding_bound(current, result, W_idx, W_val, R_top)
        if not bound > REFINE_TOL * scale:
            break
        terms = None
        kept_key = (exponent, tuple(result.F_idx.tolist()))
        if kept_key == fitted:
            # The exact fit of these kept rows was subtracted already: another
            # run would repeat this one (rows far outside the ladder that the
            # filter keeps, beyond its k removals). The run stands.
            break
        if result.relabel is not None or bound > EXACT_FIT_FROM * scale:
            # A float fit errs by about the bound, so the relabelled rows would
            # be about that large: a run gains about -log10(eps cond) digits.
            # Fit the run's kept rows from exact sums instead (one pass), to the
            # precision the labels need.
            kept = RowWeights.from_pairs(
                np.concatenate([W_idx, result.F_idx]),
                np.concatenate([np.asarray(W_val) / k, np.zeros(len(result.F_idx))]))
            passes += 1
            terms = exact_fit(source, kept, k, exponent, EXACT_FIT_TOL * scale)
            fitted = kept_key
        if terms is not None:
            b_hi, b_lo, b_more = (*terms, np.zeros(p), np.zeros(p))[:2] + (tuple(terms[2:]),)
        else:
            beta_u = result.factor.to_original(_fit(result))
            if not np.all(np.isfinite(beta_u)):
                # A fit that overflowed cannot be subtracted; the run stands as it is.
                break
            if b_more:
                b_more = (*b_more, beta_u)
            else:
                with np.errstate(over="ignore", invalid="ignore"):
                    new_hi, low = _two_sum(b_hi, beta_u)
                    new_lo = b_lo + low
                if not (np.all(np.isfinite(new_hi)) and np.all(np.isfinite(new_lo))):
                    break
                b_hi, b_lo = new_hi, new_lo
        result = run()
        while result.overflowed and rescale():
            result = run()
    return result, passes


def _relabelled_run(source, result, weights, W_idx, W_val, L0, R0, k, relabel, n_candidates,
                    h_bound=None):
    """Residual filtering on ``relabel``'s labels, from the factor of ``result`` (whose
    ``S_w`` does not depend on the labels; only ``theta`` does)."""
    factor = result.factor
    current = RelabelledSource(source, relabel)
    theta = linalg.solve_triangular(
        factor.G, cross_pass(current, weights, factor.T), lower=True, check_finite=False)
    base = replace(factor, theta=theta, beta=linalg.solve_triangular(
        factor.G.T, theta, lower=False, check_finite=False))
    run = srf_engine(current, W_idx, W_val, L0, R0, k, n_candidates=n_candidates, base=base,
                     h_bound=h_bound)
    run.relabel = relabel
    return run, 1 + run.n_passes
