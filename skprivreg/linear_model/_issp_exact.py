"""Exact Gram matrices: the numerical-rank decision of ISSP's filters.

Whether the weighted Gram matrix ``S_A`` of the kept rows is singular decides
``SCORE1 = k`` (singular designs remove every row). A tolerance on a
floating-point factor puts a cut at some rank gap, and one ordinary row can
move a design across it. Instead the decision is exact: the Gram matrix of the
rows (float64 inputs) is summed exactly in integers and its leading principal
minors are computed exactly (Bareiss), so "singular" means singular in exact
arithmetic, the arithmetic of the privacy proof.
"""

import numpy as np

__all__ = ["exact_dot", "exact_gram", "exact_gram_is_pd"]

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


def exact_gram_is_pd(gram, p):
    """True iff the exact symmetric matrix ``gram`` (from :func:`exact_gram`) is PD.

    Bareiss fraction-free elimination on the integer matrix ``2^-e_min G``:
    the k-th pivot is the k-th leading principal minor, all positive iff PD.
    """
    e_min = min(e for _, e in gram.values())
    A = [[0] * p for _ in range(p)]
    for (j, m), (t, e) in gram.items():
        A[j][m] = A[m][j] = t << (e - e_min)
    prev = 1
    for i in range(p):
        if A[i][i] <= 0:
            return False
        for r in range(i + 1, p):
            for c in range(i + 1, p):
                A[r][c] = (A[r][c] * A[i][i] - A[r][i] * A[i][c]) // prev
        prev = A[i][i]
    return True


