"""Projection mechanisms of PRIMO (Neel, Algorithm 2) in closed form.

A noisy association matrix :math:`\\tilde G = X^\\top Y/n + E_2` is projected
in Frobenius norm onto a convex set :math:`K` that is built from *public* data
and *declared* bounds only and that contains the true :math:`G`. The
projection is post-processing, so it costs no privacy, and because
:math:`G \\in K` it never moves :math:`\\tilde G` away from :math:`G`.

Two sets are used. With the thin SVD
:math:`P = U\\,\\mathrm{diag}(s)\\,V^\\top` of the public matrix and
:math:`\\kappa = s/n`:

- feature DP (Y public, X private): :math:`K_Y = \\{Z^\\top Y/n : \\|Z\\|_F \\le R\\}
  = \\{A\\,\\mathrm{diag}(\\kappa) V^\\top : \\|A\\|_F \\le R\\}`, ``R = sqrt(n) x_bound``;
- label DP (X public, Y private): :math:`K_X = \\{X^\\top Z/n : \\|Z\\|_F \\le R\\}
  = \\{V\\,\\mathrm{diag}(\\kappa) A : \\|A\\|_F \\le R\\}`,
  ``R = sqrt(n l) y_bound``.

With :math:`b_k` the k-th column of :math:`\\tilde G V` (``K_Y``) or the k-th
row of :math:`V^\\top \\tilde G` (``K_X``) and :math:`\\beta_k = \\|b_k\\|^2`,
the projection solves the diagonal trust-region problem
:math:`\\min \\sum_k \\|\\kappa_k a_k - b_k\\|^2` s.t.
:math:`\\sum_k \\|a_k\\|^2 \\le R^2`, whose solution is
:math:`a_k = \\kappa_k b_k / (\\kappa_k^2 + \\mu)` with :math:`\\mu = 0` if
:math:`\\sum_k \\beta_k/\\kappa_k^2 \\le R^2` and otherwise the root of the
strictly decreasing

.. math::
    \\varphi(\\mu) = \\sum_k \\frac{\\kappa_k^2 \\beta_k}{(\\kappa_k^2 + \\mu)^2} - R^2
    \\quad\\text{on}\\quad \\left[0, \\sqrt{\\textstyle\\sum_k \\kappa_k^2\\beta_k}/R\\right].

The projected matrix is :math:`\\hat G = B\\,\\mathrm{diag}(\\kappa^2/(\\kappa^2 + \\mu)) V^\\top`
(``K_Y``) or :math:`V\\,\\mathrm{diag}(\\kappa^2/(\\kappa^2+\\mu)) B` (``K_X``).
This replaces the paper's Kronecker-product SVD and Hager's secular equation.
"""

import math

import numpy as np
from scipy import linalg
from scipy.optimize import brentq

__all__ = [
    "spectral_basis",
    "trust_region_multiplier",
    "projection_shrinkage",
    "project_label",
    "project_feature",
]


def spectral_basis(gram, n_samples, n_other):
    """Nonzero singular directions of a public n x m matrix P from its Gram matrix.

    Parameters
    ----------
    gram : ndarray of shape (m, m)
        ``P^T P`` (or ``P P^T``; then the returned vectors are left singular
        vectors).
    n_samples : int
        ``n``, the normaliser of :math:`\\kappa = s/n`.
    n_other : int
        The other dimension of P; with ``gram.shape[0]`` it sets the cut-off.

    Returns
    -------
    vectors : ndarray of shape (m, r)
        Orthonormal eigenvectors of ``gram`` for the kept singular values.
    singular_values : ndarray of shape (r,)
        ``s_k`` (not normalised).

    Notes
    -----
    Eigenvalues of a Gram matrix carry an absolute error of about
    ``max(P.shape) eps s_max^2``; directions with
    ``s_k^2 <= max(P.shape) eps s_max^2`` are dropped (the Gram analogue of
    ``lstsq``'s cut-off). The set built from the kept directions is still
    public, so privacy never depends on this cut-off.
    """
    gram = 0.5 * (gram + gram.T)
    eigvals, eigvecs = linalg.eigh(gram)
    top = max(float(eigvals[-1]), 0.0)
    cutoff = max(gram.shape[0], n_other) * np.finfo(np.float64).eps * top
    keep = eigvals > cutoff
    if not keep.any():
        return np.zeros((gram.shape[0], 0)), np.zeros(0)
    return eigvecs[:, keep], np.sqrt(eigvals[keep])


def trust_region_multiplier(kappa, beta, radius):
    """The multiplier :math:`\\mu \\ge 0` of the diagonal trust-region projection.

    Parameters
    ----------
    kappa : ndarray of shape (r,)
        Positive normalised singular values of the public matrix.
    beta : ndarray of shape (r,)
        Squared norms :math:`\\beta_k` of the noisy coordinates.
    radius : float
        ``R``, the Frobenius radius of the feasible set.

    Returns
    -------
    mu : float
        ``0`` when the unconstrained (span) projection is feasible, otherwise
        the root of :math:`\\varphi` (brentq, ``rtol=1e-14``).
    """
    kappa = np.asarray(kappa, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if kappa.size == 0 or radius <= 0:
        return 0.0
    k2 = kappa**2
    if float(np.sum(beta / k2)) <= radius**2:
        return 0.0
    upper = math.sqrt(float(np.sum(k2 * beta))) / radius

    def phi(mu):
        return float(np.sum(k2 * beta / (k2 + mu) ** 2)) - radius**2

    return brentq(phi, 0.0, upper, xtol=1e-300, rtol=1e-14, maxiter=500)


def projection_shrinkage(kappa, mu):
    """Per-direction factors :math:`\\kappa_k^2/(\\kappa_k^2 + \\mu)`."""
    k2 = np.asarray(kappa, dtype=np.float64) ** 2
    return k2 / (k2 + mu)


def project_label(G_noisy, V, kappa, radius):
    """GaussProj_X: project a noisy ``X^T Y / n`` onto ``K_X`` (X public).

    Parameters
    ----------
    G_noisy : ndarray of shape (d, l)
    V : ndarray of shape (d, r)
        Right singular vectors of the public X.
    kappa : ndarray of shape (r,)
        ``s/n`` for the singular values ``s`` of X.
    radius : float
        ``sqrt(n l) y_bound``.

    Returns
    -------
    G_hat : ndarray of shape (d, l)
    mu : float
    """
    B = V.T @ G_noisy
    mu = trust_region_multiplier(kappa, np.einsum("ij,ij->i", B, B), radius)
    return V @ (projection_shrinkage(kappa, mu)[:, None] * B), mu


def project_feature(G_noisy, V, kappa, radius):
    """GaussProj_Y: project a noisy ``X^T Y / n`` onto ``K_Y`` (Y public).

    Parameters
    ----------
    G_noisy : ndarray of shape (d, l)
    V : ndarray of shape (l, r)
        Right singular vectors of the public Y.
    kappa : ndarray of shape (r,)
        ``s/n`` for the singular values ``s`` of Y.
    radius : float
        ``sqrt(n) x_bound_eff``.

    Returns
    -------
    G_hat : ndarray of shape (d, l)
    mu : float
    """
    B = G_noisy @ V
    mu = trust_region_multiplier(kappa, np.einsum("ij,ij->j", B, B), radius)
    return (B * projection_shrinkage(kappa, mu)) @ V.T, mu
