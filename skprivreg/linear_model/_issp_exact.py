"""Exact Gram matrices and double-double products: ISSP on nearly collinear designs.

Whether the weighted Gram matrix ``S_A`` of the kept rows is singular decides
``SCORE1 = k`` (singular designs remove every row). A tolerance on a
floating-point factor puts a cut at some rank gap, and one ordinary row can
move a design across it. Instead the decision is exact: the Gram matrix of the
rows (float64 inputs) is summed exactly in integers and its leading principal
minors are computed exactly (Bareiss), so "singular" means singular in exact
arithmetic, the arithmetic of the privacy proof.

A design that is full rank but so close to singular that float64 cannot
certify it (columns that differ in the last few bits) has leverages that a
float64 factor gets wrong by O(1). Leverages, residuals and the release are
invariant under any invertible change of coordinates ``x~ -> T^T x~``; with
``T`` from the exact ``L D L^T`` factorisation of the exact Gram matrix
(:func:`exact_whitening_transform`, ``T^T S T`` within a factor 4 of the
identity) and the rows mapped in double-double arithmetic
(:func:`dd_matmul`, error about ``2^-106`` of the terms), the mapped rows are
well conditioned and float64 resolves their leverages again.
"""

import decimal
import fractions
import math

import numpy as np

__all__ = ["dd_matmul", "exact_dot", "exact_products", "exact_gram", "exact_gram_is_pd",
           "exact_whitening_transform"]

_LIMB = 18  # bits per limb: |limb| < 2^18, a block of < 2^35 rows sums exactly in float64


def _int_significands(v):
    """``v = M 2^e`` with integer ``|M| < 2^53`` (exact for every finite float)."""
    m, e = np.frexp(v)
    return (m * 2.0**53).astype(np.int64), e.astype(np.int64) - 53


def exact_dot(a, b):
    """``sum_i a_i b_i`` exactly, as ``(t, e)`` with value ``t 2^e`` (Python int ``t``).

    Each product of 53-bit significands is split into three partial
    products below 2^54 (26/27-bit halves) and each of those into 18-bit
    limbs; limbs are summed per product exponent with ``np.bincount`` in
    float64, exactly since every partial sum stays below 2^53.
    """
    Ma, ea = _int_significands(np.asarray(a, dtype=np.float64))
    Mb, eb = _int_significands(np.asarray(b, dtype=np.float64))
    if len(Ma) == 0:
        return 0, 0
    negative = (Ma < 0) != (Mb < 0)
    Ma, Mb = np.abs(Ma), np.abs(Mb)
    low = (1 << 26) - 1
    ha, la, hb, lb = Ma >> 26, Ma & low, Mb >> 26, Mb & low
    e = ea + eb
    base = int(e.min())
    group = e - base  # at most ~4200 distinct exponents: bincount, no sort
    size = int(group.max()) + 1
    total = 0
    mask = (1 << _LIMB) - 1
    for t, shift in ((ha * hb, 52), (ha * lb + la * hb, 26), (la * lb, 0)):
        np.negative(t, out=t, where=negative)
        for limb in range(3):
            # floor shifts of a negative t give limbs in [0, 2^18) of its two's
            # complement; the top limb (arithmetic shift) carries the sign.
            part = t >> (_LIMB * limb)
            if limb < 2:
                part = part & mask
            sums = np.bincount(group, weights=part.astype(np.float64), minlength=size)
            extra = shift + _LIMB * limb
            for g in np.flatnonzero(sums):
                total += int(sums[g]) << (int(g) + extra)
    return total, base


def _exact_add(u, v):
    (tu, eu), (tv, ev) = u, v
    e = min(eu, ev)
    return (tu << (eu - e)) + (tv << (ev - e)), e


def exact_gram(M):
    """Exact upper triangle of ``M^T M``: ``{(j, m): (t, e)}``, value ``t 2^e``."""
    q = M.shape[1]
    return {(j, m): exact_dot(M[:, j], M[:, m]) for j in range(q) for m in range(j, q)}


def _exact_gram_add(a, b):
    if a is None:
        return b
    return {key: _exact_add(a[key], b[key]) for key in a}


def _bareiss(A, p):
    """Fraction-free elimination of the integer symmetric matrix ``A`` (rows of ints).

    Returns ``(columns, minors)``: ``minors[k]`` is the k-th leading principal
    minor (``minors[0] = 1``), all exact; ``columns[i][r]`` (``r > i``) is the
    eliminated column at pivot ``i``, so the unit lower factor of
    ``A = L D L^T`` is ``L[r, i] = columns[i][r] / minors[i + 1]`` and
    ``D[i] = minors[i + 1] / minors[i]`` exactly (Bareiss 1968: each entry is
    the Gaussian-elimination entry times ``minors[i]``). Stops at the first
    pivot that is not positive (``A`` is then not PD); fewer than ``p``
    columns come back.
    """
    A = [row[:] for row in A]
    minors, columns = [1], []
    for i in range(p):
        pivot = A[i][i]
        if pivot <= 0:
            break
        minors.append(pivot)
        columns.append([A[r][i] for r in range(p)])
        for r in range(i + 1, p):
            for c in range(i + 1, p):
                A[r][c] = (A[r][c] * pivot - A[r][i] * A[i][c]) // minors[-2]
    return columns, minors


def exact_gram_is_pd(gram, p):
    """True iff the exact symmetric matrix ``gram`` (from :func:`exact_gram`) is PD.

    Bareiss fraction-free elimination on the integer matrix ``2^-e_min G``:
    the k-th pivot is the k-th leading principal minor, all positive iff PD.
    """
    return len(_bareiss(_exact_matrix(gram, p)[0], p)[0]) == p


def _exact_matrix(gram, p):
    """``(A, e)`` with ``A`` a list of Python-int rows and ``S = 2^e A`` exactly."""
    e_min = min(e for _, e in gram.values())
    A = [[0] * p for _ in range(p)]
    for (j, m), (t, e) in gram.items():
        A[j][m] = A[m][j] = t << (e - e_min)
    return A, e_min


def exact_whitening_transform(gram, p):
    """Upper-triangular ``T = T_hi + T_lo`` (double-double) with ``T^T S T ~ I``.

    ``S = L D L^T`` from the exact leading minors of the exact Gram matrix of
    :func:`exact_gram` (which must be PD; ``D`` exactly positive), rounded to
    120 digits, ``L^{-1}`` in 120-digit decimal arithmetic (relative error
    about ``1e-120 cond(S)``, far below double-double's ``2^-106`` for every
    ``cond(S)`` double-double can resolve), and
    ``T = L^{-T} diag(2^{-f_j})`` with powers of two ``2^{f_j} ~ sqrt(D_j)``, so
    ``T^T S T = diag(D_j 2^{-2 f_j})`` has entries in ``[1/4, 4]`` up to the
    rounding of ``T``. Any invertible ``T`` gives the same leverages and
    residuals in exact arithmetic; this one makes them well conditioned in
    float64. Cost ``O(p^3)`` decimal operations (only for designs that
    float64 cannot certify).
    """
    A, e_min = _exact_matrix(gram, p)
    # L and D from exact minors: D is exactly positive for every PD matrix, however
    # close to singular (a factorisation in rounded arithmetic could make a pivot
    # <= 0 for a rank gap below its precision, and fail on some PD designs only).
    columns, minors = _bareiss(A, p)
    if len(columns) < p:
        raise ValueError("the Gram matrix is not positive definite")
    with decimal.localcontext() as ctx:
        ctx.prec = 120
        ctx.Emax, ctx.Emin = decimal.MAX_EMAX, decimal.MIN_EMIN
        big = [decimal.Decimal(m) for m in minors]
        D = [big[j + 1] / big[j] for j in range(p)]  # in units of 2^e_min
        L = [[decimal.Decimal(int(i == j)) if i <= j else decimal.Decimal(columns[j][i])
              / big[j + 1] for j in range(p)] for i in range(p)]
        # Linv = L^{-1} (unit lower triangular), by forward substitution.
        Linv = [[decimal.Decimal(int(i == j)) for j in range(p)] for i in range(p)]
        for i in range(p):
            for j in range(i):
                Linv[i][j] = -sum((L[i][m] * Linv[m][j] for m in range(j, i)),
                                  decimal.Decimal(0))
        T_hi, T_lo = np.zeros((p, p)), np.zeros((p, p))
        for j in range(p):
            # 2^(2 f_j) within a factor 4 of D_j 2^e_min.
            f = (int(D[j].adjusted() * 3.321928094887362) + e_min) // 2
            while D[j] * decimal.Decimal(2) ** (e_min - 2 * f) > 2:
                f += 1
            while D[j] * decimal.Decimal(2) ** (e_min - 2 * f) < 0.5:
                f -= 1
            scale = decimal.Decimal(2) ** -f
            for i in range(j + 1):
                q = Linv[j][i] * scale  # T[i, j] = Linv[j, i] 2^-f_j
                hi = float(q)
                T_hi[i, j], T_lo[i, j] = hi, float(q - decimal.Decimal(hi))
    return T_hi, T_lo


def _split26(v):
    """``v = hi + lo`` exactly, each with at most 26 significant bits (no overflow)."""
    m, e = np.frexp(v)
    hi = np.ldexp(np.round(np.ldexp(m, 26)), e - 26)
    return hi, v - hi


def dd_matmul(X, T_hi, T_lo):
    """``fl(X (T_hi + T_lo))``: products with ``T_hi`` exact, sums in double-double.

    ``X`` and ``T_hi`` are split into 26-bit halves, so each partial product
    is exact in float64, and the partial products are summed with Knuth's
    TwoSum; ``X T_lo`` (``|T_lo| <= 2^-53 |T_hi|``) enters the correction term
    directly. The result is the float64 rounding of the exact product up to
    an absolute error of about ``2^-104`` times the sum of the terms'
    magnitudes. Zero entries of ``T_hi`` (a triangular ``T``) are skipped.
    """
    X = np.asarray(X, dtype=np.float64)
    T_hi = np.asarray(T_hi, dtype=np.float64)
    T_lo = np.asarray(T_lo, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # such rows are redone exactly
        out = _dd_products(X, T_hi, T_lo)
    # A row whose terms are huge (an entry near the float64 maximum, or of
    # opposite signs that cancel) has an error of about 2^-104 of them, not
    # small against its unit-scale image, or overflowed: it is mapped in exact
    # rational arithmetic instead (one record must not make a full-rank design
    # look singular).
    with np.errstate(over="ignore", invalid="ignore"):
        magnitude = np.abs(X) @ (np.abs(T_hi) + np.abs(T_lo))
    inexact = ~(np.all(np.isfinite(out), axis=1) & np.all(magnitude <= _DD_TERMS_MAX, axis=1))
    rows = np.flatnonzero(inexact & np.all(np.isfinite(X), axis=1))
    out[rows] = exact_products(X[rows], T_hi, T_lo)
    return out


def _dd_products(X, T_hi, T_lo):
    """The double-double product of :func:`dd_matmul`, before exact rows."""
    m, q = X.shape
    Xh, Xl = _split26(X)
    th, tl = _split26(T_hi)
    s = np.zeros((m, T_hi.shape[1]))
    c = X @ T_lo
    for j in range(q):
        cols = np.flatnonzero(T_hi[j])
        if len(cols) == 0:
            continue
        lo_c, hi_c = cols[0], cols[-1] + 1
        sv, cv = s[:, lo_c:hi_c], c[:, lo_c:hi_c]
        for xa in (Xh[:, j:j + 1], Xl[:, j:j + 1]):
            for t in (th[j, lo_c:hi_c], tl[j, lo_c:hi_c]):
                prod = xa * t
                total = sv + prod
                back = total - sv
                cv += (sv - (total - back)) + (prod - back)
                sv[...] = total
    return s + c


# Largest sum of term magnitudes a double-double row product is trusted with:
# its error, about 2^-104 of it, stays below 2^-40 of a unit-scale result.
_DD_TERMS_MAX = 2.0**64


def exact_products(X, *T):
    """``X (T_1 + T_2 + ...)``, each entry the float64 rounding of its exact value
    (within ``2^-1075`` per partial product where partial products fall below the
    normal range).

    ``T``: one or more ``(q, cols)`` float64 arrays (a double-double
    ``T_hi, T_lo``, or a longer expansion). Every term ``x_k t_k`` is split into
    four partial products of 26-bit halves (:func:`_split26`) per array, each
    exact in float64, and each entry is their correctly rounded sum
    (:func:`math.fsum`): one vectorised split and one ``fsum`` per entry, some
    microseconds per row. Halves or partial products below the normal range
    round by at most ``2^-1075`` each (the entry may then differ from the
    correctly rounded one by that much). Rows where a partial product
    overflows, or whose sum overflows on the way, are computed in exact
    rational arithmetic (:func:`_exact_row_product`; infinite when the exact
    value is beyond the float64 range).
    """
    X = np.asarray(X, dtype=np.float64)
    cols = T[0].shape[1]
    out = np.empty((X.shape[0], cols))
    if X.shape[0] == 0:
        return out
    with np.errstate(over="ignore", invalid="ignore"):  # such rows are done in rationals
        Xh, Xl = _split26(X)  # a half of an entry near the float64 maximum can overflow
        halves = np.stack([h for t in T for h in _split26(np.asarray(t, np.float64))])
        # partial products (rows, q, 2, halves, cols): x halves by t halves
        parts = np.stack([Xh, Xl], axis=-1)[:, :, :, None, None] * np.moveaxis(
            halves, 0, 1)[None, :, None, :, :]
    parts = np.moveaxis(parts, -1, 1).reshape(X.shape[0], cols, -1)
    finite = np.all(np.isfinite(parts), axis=2)
    for i, j in zip(*np.nonzero(finite)):
        try:
            out[i, j] = math.fsum(parts[i, j].tolist())
        except OverflowError:
            finite[i, j] = False
    for i in np.flatnonzero(~np.all(finite, axis=1)):
        out[i] = _exact_row_product(X[i], *T)
    return out


def _exact_row_product(x, *T):
    """``x (T_1 + T_2 + ...)`` in exact rationals, each entry rounded once to float64."""
    xs = [fractions.Fraction(float(v)) for v in x]
    out = np.empty(T[0].shape[1])
    for j in range(T[0].shape[1]):
        exact = sum((xs[k] * sum(fractions.Fraction(float(t[k, j])) for t in T)
                     for k in range(len(xs)) if any(t[k, j] for t in T)),
                    fractions.Fraction(0))
        try:
            out[j] = float(exact)
        except OverflowError:
            out[j] = math.inf if exact > 0 else -math.inf
    return out
