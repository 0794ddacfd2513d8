"""A ridge chosen by post-processing: minimise an estimate of the excess risk.

Given a released covariance :math:`\\tilde\\Sigma = \\Sigma + E_1` (symmetric
Gaussian noise, entries of standard deviation :math:`\\sigma_1`) and released
associations :math:`\\tilde g_j = g_j + z_j` (entries of standard deviation
:math:`\\sigma_2`) for outcomes :math:`j = 1..l`, the ridge estimate
:math:`\\hat w_j(\\lambda) = (\\tilde\\Sigma + \\lambda I)^{-1}\\tilde g_j` has, to
first order in the noise, the error
:math:`(\\tilde\\Sigma + \\lambda I)^{-1}(z_j - E_1 w_j - \\lambda w_j)` and the
in-sample excess risk

.. math::
    R(\\lambda) = \\sum_j \\sum_i \\frac{s_i A_j + \\lambda^2 s_i (u_i^\\top w_j)^2}
                 {(s_i + \\lambda)^2},
    \\qquad A_j = \\sigma_2^2 + \\sigma_1^2 \\lVert w_j\\rVert^2,

with :math:`(s_i, u_i)` the eigenpairs of :math:`\\tilde\\Sigma`. Every unknown
is estimated from released values: :math:`\\lVert w_j\\rVert^2` from a pilot
fit at the floor ridge, and :math:`\\sum_j s_i^2 (u_i^\\top w_j)^2` by
:math:`\\sum_j (c_{ij}^2 - A_j)` with :math:`c_{ij} = u_i^\\top \\tilde g_j`
(unbiased, since :math:`c_{ij}` is :math:`s_i u_i^\\top w_j` plus noise of
variance :math:`A_j`), clipped at 0 only after the sum over outcomes. The
ridge minimises :math:`R` over :math:`\\lambda \\ge` ``floor``, then takes the
second-order shift below.

**Second order.** For symmetric Gaussian :math:`E_1` (entries of variance
:math:`\\sigma_1^2`), :math:`E[E_1 B E_1] = \\sigma_1^2(\\operatorname{tr}(B) I + B)`, so
with :math:`M = \\Sigma + \\lambda I`,
:math:`E[(M + E_1)^{-1}] \\approx M^{-1} + \\sigma_1^2 M^{-1}(\\operatorname{tr}(M^{-1}) I
+ M^{-1})M^{-1} \\approx (M - \\kappa I)^{-1}`,
:math:`\\kappa(\\lambda) = \\sigma_1^2 \\operatorname{tr}(M^{-1})`: covariance noise
removes about :math:`\\kappa` from the ridge actually applied. The rule
therefore solves :math:`\\lambda - \\kappa(\\lambda) = \\lambda_1` for the
first-order minimiser :math:`\\lambda_1` (:math:`\\kappa` from the released
spectrum; the left side increases in :math:`\\lambda`, so the root is
unique). The shift is negligible when :math:`\\sigma_1 \\sqrt p` is far below
the eigenvalues (ReuseCov at ``n = 2e4``, ``d = 10``: :math:`\\kappa/\\lambda_1
< 10^{-2}`); for ``l`` independent SSP runs (covariance noise ``sqrt(l)``
times larger) it doubles the ridge and takes the error to within 1% of the
best fixed ridge (``benchmarks/bench_reusecov.py --targets``).

The rule reads the released statistics and public noise scales only: it is
post-processing and spends no budget.
"""

import math

import numpy as np
from scipy import linalg

__all__ = ["risk_minimising_ridge", "ridge_floor", "released_ridge", "second_order_ridge"]


def ridge_floor(sigma_cov, n_features, scale=1.0, min_eigval=None):
    """The smallest ridge considered.

    The first-order risk is trusted where every eigenvalue of
    :math:`\\tilde\\Sigma + \\lambda I` exceeds the spectral size
    :math:`\\sigma_1\\sqrt{p}` of the covariance noise, so the floor is
    :math:`\\max(\\sigma_1\\sqrt{p} - s_{\\min},\\ 0.01\\,\\sigma_1\\sqrt{p})` with
    :math:`s_{\\min}` the smallest released eigenvalue (``min_eigval``; without
    it, :math:`\\sigma_1\\sqrt{p}`), and ``1e-8 * scale`` when the covariance is
    exact.
    """
    spectral = float(sigma_cov) * math.sqrt(n_features)
    if spectral <= 0:
        return 1e-8 * float(scale)
    if min_eigval is None:
        return spectral
    return max(spectral - float(min_eigval), 0.01 * spectral)


def _risk(lam, s, s_pos, total_a, signal):
    """:math:`R(\\lambda)` at one ridge ``lam``."""
    den = np.maximum(s + lam, lam) ** 2
    # lam * lam, not lam**2: a scalar power calls libm's pow, which can differ
    # by an ulp from the product NumPy computes for an array (the grid below).
    return float(np.sum((s_pos * total_a + lam * lam * signal / s_pos) / den))


def _grid_risks(grid, s, s_pos, total_a, signal):
    """:func:`_risk` at every ridge of ``grid``: the terms at once, each row summed on its
    own (a sum along an axis of a 2-D array may add in another order, and the
    golden-section comparisons on a flat risk would then flip)."""
    lam = grid[:, None]
    terms = (s_pos * total_a + lam * lam * signal / s_pos) / np.maximum(s + lam, lam) ** 2
    return np.array([np.sum(row) for row in terms])


def risk_minimising_ridge(eigvals, coords, sigma_cov, sigma_assoc, *, floor=None,
                          n_grid=64):
    """The ridge minimising the estimated first-order excess risk.

    Parameters
    ----------
    eigvals : ndarray of shape (p,)
        Eigenvalues of the released covariance (may be negative).
    coords : ndarray of shape (p, l)
        Released associations in the eigenbasis, :math:`U^\\top \\tilde G`.
    sigma_cov, sigma_assoc : float
        Public noise standard deviations :math:`\\sigma_1` (0 when the
        covariance is exact) and :math:`\\sigma_2` (per association entry).
    floor : float or None
        Smallest ridge; default :func:`ridge_floor` of the released spectrum.
    n_grid : int
        Points of the logarithmic grid, refined by golden-section search.

    Returns
    -------
    ridge : float
    """
    s = np.asarray(eigvals, dtype=float)
    C = np.asarray(coords, dtype=float)
    if C.ndim == 1:
        C = C[:, None]
    p = s.shape[0]
    top = max(float(np.max(np.abs(s))), 1e-300)
    if floor is None:
        floor = ridge_floor(sigma_cov, p, scale=top, min_eigval=float(np.min(s)))
    floor = float(floor)
    # Up to 1e4 times the top eigenvalue: coefficients shrunk to ~1e-4 of the
    # least-squares ones, the right answer when the released signal is noise.
    upper = max(floor * 1e4, 1e4 * top)
    grid = np.geomspace(floor, upper, n_grid)
    s_pos = np.maximum(s, 1e-12 * top)
    norms = np.einsum("ij,ij->i", C, C)
    # Pilot at the spectral noise size, then one refit of the pilot at the
    # chosen ridge (the estimate of ||w_j||^2 sharpens with a better pilot).
    # (Summed outcome by outcome: the closed form sum_i norms_i / m_i^2 rounds
    # differently, and on a flat risk that moved the ridge by up to 1% in
    # about 1 problem in 150.)
    lam = max(floor, ridge_floor(sigma_cov, p, scale=top))
    for _ in range(2):
        pilot = C / np.maximum(s + lam, lam)[:, None]
        a = sigma_assoc**2 + sigma_cov**2 * np.einsum("ij,ij->j", pilot, pilot)
        total_a = float(a.sum())
        signal = np.maximum(norms - total_a, 0.0)
        k = int(np.argmin(_grid_risks(grid, s, s_pos, total_a, signal)))
        lam = float(grid[k])
    lam1 = floor
    if k > 0:
        # Golden-section search on log(lambda) between the grid neighbours.
        lo = math.log(grid[k - 1])
        hi = math.log(grid[min(k + 1, n_grid - 1)])
        ratio = (math.sqrt(5.0) - 1.0) / 2.0
        for _ in range(40):
            x1 = hi - ratio * (hi - lo)
            x2 = lo + ratio * (hi - lo)
            if _risk(math.exp(x1), s, s_pos, total_a, signal) <= _risk(
                math.exp(x2), s, s_pos, total_a, signal
            ):
                hi = x2
            else:
                lo = x1
        # Rounded before the shift too, so the shift starts from the same value
        # on every summation order (see the rounding note below).
        lam1 = max(floor, float(f"{math.exp(0.5 * (lo + hi)):.4g}"))
    lam = second_order_ridge(lam1, s, sigma_cov)
    # The risk is flat at its minimum, so the minimiser is determined only to
    # about sqrt(machine epsilon) (the golden-section comparisons there can
    # flip with the summation order, moving it by ~1e-8 relative): rounding
    # to 4 significant digits makes the ridge (and the fit) reproducible
    # across summation orders (NumPy vs Dask blocks) except with probability
    # ~1e-4, without moving it measurably (at most 5e-5 relative).
    return max(floor, float(f"{lam:.4g}"))


def second_order_ridge(first_order, eigvals, sigma_cov):
    """The ridge ``lam`` with ``lam - sigma_1^2 sum_i 1/max(s_i + lam, lam) = first_order``.

    Covariance noise acts, to second order, as a negative ridge
    :math:`\\kappa(\\lambda) = \\sigma_1^2 \\operatorname{tr}((\\tilde\\Sigma + \\lambda I)^{-1})`
    (see the module docstring); the root is found by bisection (the left
    side increases in ``lam``). Post-processing of released eigenvalues.
    """
    lam1 = float(first_order)
    var = float(sigma_cov) ** 2
    if var <= 0 or lam1 <= 0:
        return lam1
    s = np.asarray(eigvals, dtype=float)

    def excess(lam):
        return lam - var * float(np.sum(1.0 / np.maximum(s + lam, lam))) - lam1

    lo, hi = lam1, lam1 + var * s.shape[0] / lam1
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if excess(mid) < 0:
            lo = mid
        else:
            hi = mid
    return hi


def released_ridge(covariance, associations, sigma_cov, sigma_assoc):
    """:func:`risk_minimising_ridge` of a released covariance and associations.

    Parameters
    ----------
    covariance : ndarray of shape (p, p)
        The released :math:`\\tilde\\Sigma` (ridge not included).
    associations : ndarray of shape (p, l)
        The released :math:`\\tilde G`, every outcome.
    sigma_cov, sigma_assoc : float
        Public noise standard deviations.

    Returns
    -------
    ridge : float
        Post-processing of the released values and public constants only.
    """
    # SciPy's LAPACK: NumPy's eigh of a small matrix right after the large
    # products of the statistics pass took 0.14 s instead of under 1 ms on a
    # loaded machine (its BLAS thread pool).
    eigvals, eigvecs = linalg.eigh(0.5 * (covariance + covariance.T))
    return risk_minimising_ridge(eigvals, eigvecs.T @ associations, sigma_cov, sigma_assoc)
