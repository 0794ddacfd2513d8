"""Perturbation stability of the Lasso support (Smith & Thakurta 2013, §3.4, §4.2; theoretical).

The test functions ``g_1..g_4`` of the paper's Table 1 certify that the
support of the full-data Lasso cannot change when a few rows are added or
removed; their slack-normalised minimum is a distance proxy for
propose-test-release. Two corrections to the paper:

1. ``g_1`` is the largest gradient over the **off-support** coordinates
   (the paper's "(s+1)-th largest gradient overall" leaves up to
   ``s - |support|`` near-entering coordinates untested; one added row can
   then change the support while the paper's proxy certifies stability,
   which breaks privacy);
2. no ``+1`` (with it the proxy is positive on unstable data).

A failed KKT polish returns ``-inf`` (a deterministic bottom).
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from sklearn.linear_model import Lasso

from ._rules import lambda_to_alpha

__all__ = [
    "PerturbationScores",
    "perturbation_scores",
    "perturbation_distance",
    "perturbation_penalty",
    "replace_one_calibration",
]


def perturbation_penalty(noise_level, max_features, y_bound, n_reference, n_features):
    """``Lambda = 4 sigma~ sqrt(n_ref ln p)`` with ``sigma~ = sigma s / y_bound`` (Theorem 39).

    ``sigma~`` is the noise level in the clipped units ``y~ = s clip(y/y_bound, -1, 1)``.
    """
    sigma_tilde = float(noise_level) * max_features / float(y_bound)
    return 4.0 * sigma_tilde * math.sqrt(float(n_reference) * math.log(n_features))


def minimum_penalty(max_features, rsc_constant):
    """The paper's Lemma 13 condition ``Lambda > 16 s^2 / Psi`` (the only one privacy needs)."""
    return 16.0 * max_features**2 / rsc_constant


def replace_one_calibration():
    """``(sensitivity, offset) = (2, 1)``: the distance test's calibration under replace-one.

    The proxy ``d_hat`` of :func:`perturbation_distance` (at a fixed public
    ``Lambda``) satisfies, under **add/remove** neighbours, (P1)
    ``|d_hat(D) - d_hat(D'')| <= 1`` and (P2) ``d_hat <= 0`` on both sides
    when the supports differ (the paper's Claims 32-34 with the corrected
    ``g_1`` and no ``+1``). A **replace-one** neighbour ``D'`` of ``D`` is
    two add/remove steps through ``D'' = D`` minus the replaced row, with the
    same ``Lambda`` (the mechanism evaluates ``D`` and ``D'`` at one
    ``Lambda``; ``D''`` is only an analysis device evaluated at that
    ``Lambda`` too). Hence

    * sensitivity: ``|d_hat(D) - d_hat(D')| <= 2`` (triangle inequality);
    * offset: if ``supp(D) != supp(D')`` then ``supp(D) != supp(D'')`` or
      ``supp(D'') != supp(D')``. In the first case ``d_hat(D) <= 0`` and
      ``d_hat(D'') <= 0``, so ``d_hat(D') <= 1``; the second is symmetric.
      Either way both ``d_hat(D) <= 1`` and ``d_hat(D') <= 1``.

    With noise ``Lap(2/epsilon)`` and threshold
    ``T = 1 + 2 ln(1/delta)/epsilon`` the noisy distance is an
    ``epsilon``-DP Laplace release of a sensitivity-2 value, and where the
    supports differ each side passes with probability at most
    ``Pr[Lap(2/epsilon) > T - 1] = delta/2``
    (:func:`skprivreg.mechanisms.laplace_distance_test`). The test is
    therefore ``(epsilon, delta/2)``-DP under replace-one neighbours, with
    no group-privacy conversion (which would give ``(2 epsilon,
    (1 + e^epsilon) delta/2)`` for the add/remove calibration).
    """
    return 2.0, 1.0


@dataclass(frozen=True)
class PerturbationScores:
    """Internal: the Table 1 quantities of one dataset (never released).

    ``support`` is the exact (untruncated) Lasso support; ``theta`` the
    polished coefficients on it; ``gradients`` ``|X_j^T (y - X theta)|`` for
    every column; ``g``, ``t``, ``slack`` the four test values, thresholds
    and slacks; ``polished`` whether the KKT polish succeeded.
    """

    support: tuple
    theta: np.ndarray
    gradients: np.ndarray
    g: tuple
    t: tuple
    slack: tuple
    polished: bool


def _lasso_coef(X, y, Lambda):
    n = X.shape[0]
    model = Lasso(
        alpha=lambda_to_alpha(Lambda, n),
        fit_intercept=False,
        tol=1e-10,
        max_iter=100_000,
        selection="cyclic",
    )
    model.fit(X, y)
    return model.coef_


def _kkt_polish(X, y, support, signs, Lambda):
    """Exact minimiser on ``support`` from the KKT system; ``None`` if it is not one.

    ``theta_G = (X_G^T X_G)^{-1} (X_G^T y - Lambda sign_G)``, accepted iff the
    signs agree and every off-support gradient is at most ``Lambda (1 + 1e-9)``.
    """
    p = X.shape[1]
    theta = np.zeros(p)
    if support.size:
        XG = X[:, support]
        try:
            theta_G = linalg.solve(XG.T @ XG, XG.T @ y - Lambda * signs, assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            return None
        if not np.all(np.sign(theta_G) == signs):
            return None
        theta[support] = theta_G
    gradients = np.abs(X.T @ (y - X @ theta))
    off = np.setdiff1d(np.arange(p), support)
    if off.size and gradients[off].max() > Lambda * (1.0 + 1e-9):
        return None
    return theta, gradients


def perturbation_scores(X, y, max_features, Lambda, rsc_constant):
    """The paper's Table 1 tests on ``(X, y)`` (already clipped: ``|x| <= 1``, ``|y| <= s``).

    Returns
    -------
    scores : PerturbationScores
    """
    n, p = X.shape
    s, psi = int(max_features), float(rsc_constant)
    coef = _lasso_coef(X, y, Lambda)
    support = np.flatnonzero(coef)
    slack = (12.0 * s**2 / psi, float(s), 4.0 * s**1.5 / psi, 4.0 * s**1.5 / psi)
    t = (-Lambda / 2.0, 2.0 * psi * n, 8.0 * s**1.5 / psi, 8.0 * s**1.5 / psi - n)
    polished = _kkt_polish(X, y, support, np.sign(coef[support]), Lambda)
    if polished is None:
        nan = (math.nan,) * 4
        return PerturbationScores(
            tuple(int(j) for j in support), coef, np.full(p, np.nan), nan, t, slack, False
        )
    theta, gradients = polished
    off = np.setdiff1d(np.arange(p), support)
    g1 = -gradients[off].max() if off.size else math.inf
    if support.size:
        XG = X[:, support]
        g2 = float(linalg.eigvalsh(XG.T @ XG)[0])
        g3 = n * float(np.abs(theta[support]).min())
        g4 = -n * float(np.abs(theta[support]).max())
    else:
        g2 = g3 = g4 = math.inf
    return PerturbationScores(
        tuple(int(j) for j in support), theta, gradients, (g1, g2, g3, g4), t, slack, True
    )


def perturbation_distance(X, y, max_features, Lambda, rsc_constant):
    """``(support, d_hat)``: the corrected distance proxy (see the module docstring).

    .. math::
        \\hat d = \\max\\{\\min_i (g_i - t_i)/\\Delta_i,\\ 0\\}

    with ``d_hat = 0`` when ``|support| > s`` or some ``|theta_j| >= 1``, and
    ``d_hat = -inf`` (never released) when the KKT polish fails. ``d_hat``
    has global sensitivity 1 under add/remove neighbours at a fixed
    ``Lambda > 16 s^2 / Psi`` and is 0 on every dataset whose support a
    neighbour does not share (Claims 32-34 of the paper, with two
    corrections: ``g_1`` is the largest gradient over the off-support
    coordinates, not the ``(s+1)``-th largest overall, and the proxy has no
    ``+1``, which would make it positive on unstable data).
    """
    scores = perturbation_scores(X, y, max_features, Lambda, rsc_constant)
    if not scores.polished:
        return scores.support, -math.inf
    if len(scores.support) > max_features:
        return scores.support, 0.0
    if scores.support and np.abs(scores.theta[list(scores.support)]).max() >= 1.0:
        return scores.support, 0.0
    ratios = [(g - t) / d for g, t, d in zip(scores.g, scores.t, scores.slack)]
    return scores.support, max(min(ratios), 0.0)
