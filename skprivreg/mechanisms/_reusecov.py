"""Covariance and association of a multi-outcome regression: tight and joint Gaussian releases.

Part of :mod:`skprivreg.mechanisms` (import from there).

Setting
-------
Rows :math:`a = (x, c)` of the design augmented by a constant column
:math:`c \\ge 0` (``c = 0``: no intercept), :math:`\\lVert x\\rVert_2 \\le B`;
outcome rows :math:`y \\in \\mathbb R^l` with :math:`\\lVert y\\rVert_2 \\le K`
(a private Y clipped entrywise to :math:`[-b, b]` has :math:`K = \\sqrt l\\,b`;
a public Y has the public :math:`K = \\max_i \\lVert y^i\\rVert`). Released:
the upper triangle (diagonal included) of :math:`C = \\sum_i a_i a_i^\\top`
with i.i.d. :math:`N(0, \\sigma_1^2)` noise and :math:`A = \\sum_i a_i
y_i^\\top` with i.i.d. :math:`N(0, \\sigma_2^2)` noise (divide every
sensitivity below by ``n`` for the averages :math:`C/n`, :math:`A/n`). Under
replace-one neighbours the corner :math:`C_{pp} = n c^2` does not depend on
the data and is released exactly (no noise).

Write :math:`\\mathrm{up}(E)` for the upper-triangle vector of a symmetric
:math:`E`, so :math:`\\lVert\\mathrm{up}(E)\\rVert^2 = (\\lVert E\\rVert_F^2 +
\\sum_k E_{kk}^2)/2`. A joint Gaussian release with these noise scales is
:math:`\\mu`-GDP with :math:`\\mu^2 = \\sup J`, the supremum over neighbouring
pairs of the Mahalanobis sensitivity

.. math::
    J = \\lVert\\mathrm{up}(\\Delta C)\\rVert^2/\\sigma_1^2
        + \\lVert\\Delta A\\rVert_F^2/\\sigma_2^2

(the release divided by its noise scales is an isotropic Gaussian mechanism
of L2-sensitivity :math:`\\sqrt{\\sup J}`; Dong, Roth & Su 2022, Thm. 2.7).
Composing the two releases separately gives instead
:math:`\\sup\\lVert\\mathrm{up}(\\Delta C)\\rVert^2/\\sigma_1^2 +
\\sup\\lVert\\Delta A\\rVert_F^2/\\sigma_2^2`, which is larger because the
two suprema are attained at different pairs (nearly orthogonal rows for the
covariance, opposite rows for the association).

Replace-one
-----------
A row :math:`(x, y)` is replaced by :math:`(x', y')` (full notion), or
:math:`x` by :math:`x'` with :math:`y` public and unchanged (feature notion).
Let :math:`t = \\langle x, x'\\rangle \\in [-B^2, B^2]` and

.. math::
    J_C(t) &= 2B^4 - 2t^2 + c^2(2B^2 - 2t),\\\\
    J_A(t) &= K^2\\,(2B^2 + 2c^2 + 2|t + c^2|) \\quad\\text{(full)},\\qquad
    J_A(t) = K^2\\,(2B^2 - 2t) \\quad\\text{(feature)}.

**Theorem.** :math:`\\sup J = \\max_{t\\in[-B^2, B^2]} J_C(t)/\\sigma_1^2 +
J_A(t)/\\sigma_2^2` for ``d >= 2`` features (for ``d = 1`` the right side is
an upper bound).

*Lemma 1 (association).* For fixed :math:`a, a'` and
:math:`\\lVert y\\rVert, \\lVert y'\\rVert \\le K`,
:math:`\\lVert a y^\\top - a' y'^\\top\\rVert_F^2 = \\lVert a\\rVert^2\\lVert
y\\rVert^2 + \\lVert a'\\rVert^2\\lVert y'\\rVert^2 - 2\\langle a, a'\\rangle
\\langle y, y'\\rangle \\le K^2(\\lVert a\\rVert^2 + \\lVert a'\\rVert^2 +
2|\\langle a, a'\\rangle|)` by Cauchy-Schwarz, with equality at
:math:`y' = -\\mathrm{sign}\\langle a, a'\\rangle\\, y`, :math:`y = b(\\pm 1,
\\ldots, \\pm 1)` (a vertex of the clipping box, of norm :math:`K`). Here
:math:`\\langle a, a'\\rangle = t + c^2`. Under the feature notion
:math:`\\Delta A = (a - a') y^\\top` and :math:`a - a' = (x - x', 0)`: the
constant column cancels, :math:`\\lVert\\Delta A\\rVert_F^2 = \\lVert x -
x'\\rVert^2 \\lVert y\\rVert^2 \\le K^2\\lVert x - x'\\rVert^2`.

*Lemma 2 (covariance).* :math:`\\Delta C = a a^\\top - a' a'^\\top` has blocks
:math:`E = x x^\\top - x' x'^\\top`, the column :math:`c(x - x')` and the
corner 0, so :math:`\\lVert\\mathrm{up}(\\Delta C)\\rVert^2 =
\\lVert\\mathrm{up}(E)\\rVert^2 + c^2\\lVert x - x'\\rVert^2`, and
:math:`\\lVert\\mathrm{up}(E)\\rVert^2 \\le \\lVert E\\rVert_F^2 =
\\lVert x\\rVert^4 + \\lVert x'\\rVert^4 - 2t^2` with equality exactly when
:math:`E` is diagonal. :math:`E` has rank at most 2, so a rotation
:math:`Q` taking its eigenvectors to :math:`e_1, e_2` (``d >= 2``) makes it
diagonal; replacing :math:`(x, x')` by :math:`(Qx, Qx')` keeps the norms and
:math:`t`, hence every other term of :math:`J`.

*Proof of the theorem.* With :math:`r = \\lVert x\\rVert^2`,
:math:`r' = \\lVert x'\\rVert^2`, Lemmas 1 and 2 bound :math:`J` by
:math:`[r^2 + r'^2 - 2t^2 + c^2(r + r' - 2t)]/\\sigma_1^2 + K^2(r + r' +
2c^2 + 2|t + c^2|)/\\sigma_2^2` (full; feature: :math:`K^2(r + r' -
2t)/\\sigma_2^2`), attained for every feasible :math:`(r, r', t)`. For fixed
:math:`t` this increases in :math:`r` and :math:`r'`, and the constraint
:math:`|t| \\le \\sqrt{r r'}` only loosens as they grow, so the supremum is
at :math:`r = r' = B^2`, where the bound is :math:`J_C(t)/\\sigma_1^2 +
J_A(t)/\\sigma_2^2`. Every :math:`t \\in [-B^2, B^2]` is feasible there. QED.

:math:`J(t)` is a concave quadratic on each side of :math:`t = -c^2` (the
kink of :math:`|t + c^2|`), so its maximum is at one of the stationary points
clipped to its piece, or at :math:`-c^2` (:func:`joint_mahalanobis_sq`
evaluates these candidates exactly).

*Marginals.* :math:`\\max_t J_C(t) = 2(B^2 + c^2/2)^2` (at :math:`t = -c^2/2`;
if :math:`c^2 > 2B^2`, :math:`4B^2c^2` at :math:`t = -B^2`): the covariance
sensitivity with an intercept is :math:`\\sqrt 2 (B^2 + c^2/2)`, below the
:math:`\\sqrt 2 (B^2 + c^2)` of treating the constant column as a feature
(:math:`B^2 = 10`, :math:`c = 1`: 4.5% lower). :math:`\\max_t J_A(t) =
4K^2(B^2 + c^2)` (full, :math:`x' = x`, :math:`y' = -y`) and :math:`4K^2B^2`
(feature, :math:`x' = -x`): the feature-DP association sensitivity is
:math:`2BK` with the raw row bound.

Zero-out
--------
The row is replaced by a null row contributing nothing (``n`` public; full
notion): :math:`\\Delta C = a a^\\top`, :math:`\\Delta A = a y^\\top`.
:math:`\\lVert\\mathrm{up}(a a^\\top)\\rVert^2 = (\\lVert a\\rVert^4 + \\sum_k
a_k^4)/2 \\le ((r + c^2)^2 + r^2 + c^4)/2` (:math:`\\sum_k x_k^4 \\le r^2`,
equality at :math:`x = \\sqrt r\\, e_1`) and :math:`\\lVert a y^\\top
\\rVert_F^2 \\le (r + c^2)K^2`; both increase in :math:`r` and are attained
together at :math:`x = B e_1`, so :math:`\\sup J = (B^4 + B^2c^2 + c^4)/
\\sigma_1^2 + (B^2 + c^2)K^2/\\sigma_2^2`: joint and composed accounting
agree; the covariance sensitivity is :math:`\\sqrt{B^4 + B^2c^2 + c^4}`
(the corner changes by :math:`c^2` and carries noise).

Label notion
------------
X is public (the covariance needs no noise) and the association has the
sensitivity :math:`2 K \\max_i\\lVert a_i\\rVert` (Lemma 1 with
:math:`a = a'`); nothing here is joint.
"""

import math
from dataclasses import replace

import numpy as np

from .._rounding import exact_fraction, sqrt_at_least
from ._gaussian import gaussian_event_from_mu, symmetric_gaussian_matrix

__all__ = [
    "gram_upper_sensitivity",
    "cross_sensitivity",
    "joint_mahalanobis_sq",
    "joint_gram_cross_mu",
    "joint_gram_cross_calibration",
    "gram_with_exact_corner",
]


def _check(x_bound, y_row_bound, intercept, notion, neighbouring):
    if x_bound < 0 or y_row_bound < 0 or intercept < 0:
        raise ValueError("x_bound, y_row_bound and intercept must be >= 0.")
    if notion not in ("full", "feature"):
        raise ValueError("notion must be 'full' or 'feature' (label DP releases no covariance).")
    if neighbouring not in ("replace-one", "zero-out"):
        raise ValueError("neighbouring must be 'replace-one' or 'zero-out'.")
    if neighbouring == "zero-out" and notion != "full":
        raise ValueError("zero-out neighbours are defined for the full notion only.")


def gram_upper_sensitivity(x_bound, intercept=0.0, neighbouring="replace-one"):
    """L2-sensitivity of the upper triangle of ``A^T A``, ``A = [X, c 1]``, ``||x_i|| <= B``.

    Replace-one: ``sqrt(2) (B^2 + c^2/2)`` (``2 B c`` if ``c^2 > 2 B^2``);
    zero-out: ``sqrt(B^4 + B^2 c^2 + c^4)``. ``c = 0`` gives ``sqrt(2) B^2``
    and ``B^2``. Tight for two or more features; proof in the docstring of
    ``skprivreg.mechanisms._reusecov`` (Lemma 2, *Marginals*). Divide by
    ``n`` for ``A^T A / n``.
    """
    if x_bound < 0 or intercept < 0:
        raise ValueError("x_bound and intercept must be >= 0.")
    if neighbouring not in ("replace-one", "zero-out"):
        raise ValueError("neighbouring must be 'replace-one' or 'zero-out'.")
    if math.isinf(x_bound) or math.isinf(intercept):
        return math.inf
    # Exact rational arithmetic, one rounding up at the end (a sensitivity
    # rounded to nearest can fall an ulp below the exact one).
    B2, c2 = exact_fraction(x_bound) ** 2, exact_fraction(intercept) ** 2
    if neighbouring == "zero-out":
        return sqrt_at_least(B2 * B2 + B2 * c2 + c2 * c2)
    t = max(-c2 / 2, -B2)
    return sqrt_at_least(_gram_sq(t, B2, c2))


def cross_sensitivity(x_bound, y_row_bound, intercept=0.0, notion="full",
                      neighbouring="replace-one"):
    """Frobenius sensitivity of ``A^T Y``, ``A = [X, c 1]``, ``||x_i|| <= B``, ``||y^i|| <= K``.

    Full, replace-one: ``2 K sqrt(B^2 + c^2)``; feature (Y public, ``K`` its
    largest row norm): ``2 K B`` (the constant column cancels); zero-out:
    ``K sqrt(B^2 + c^2)``. Proof: docstring of ``skprivreg.mechanisms._reusecov``
    (Lemma 1).
    """
    _check(x_bound, y_row_bound, intercept, notion, neighbouring)
    if any(math.isinf(v) for v in (x_bound, y_row_bound, intercept)):
        return math.inf
    B2, c2 = exact_fraction(x_bound) ** 2, exact_fraction(intercept) ** 2
    K2 = exact_fraction(y_row_bound) ** 2
    if neighbouring == "zero-out":
        return sqrt_at_least(K2 * (B2 + c2))
    if notion == "feature":
        return sqrt_at_least(4 * K2 * B2)
    return sqrt_at_least(4 * K2 * (B2 + c2))


def _gram_sq(t, B2, c2):
    return 2 * B2 * B2 - 2 * t * t + c2 * (2 * B2 - 2 * t)


def _cross_sq(t, B2, c2, K2, notion):
    if notion == "feature":
        return K2 * (2.0 * B2 - 2.0 * t)
    return K2 * (2.0 * B2 + 2.0 * c2 + 2.0 * abs(t + c2))


def joint_mahalanobis_sq(x_bound, y_row_bound, sigma_gram, sigma_cross, intercept=0.0,
                         notion="full", neighbouring="replace-one"):
    """``sup J`` over neighbouring pairs, and the ``t = <x, x'>`` attaining it.

    ``J = ||up(Delta C)||^2 / sigma_1^2 + ||Delta A||_F^2 / sigma_2^2`` on the
    sums ``C = A^T A``, ``A^T Y`` (Theorem in the docstring of
    ``skprivreg.mechanisms._reusecov``): the maximum of the piecewise
    concave quadratic ``J(t)`` over ``[-B^2, B^2]``, from its
    clipped stationary points and the kink ``t = -c^2``. Zero-out has no
    ``t`` (returns ``None`` for it).

    Returns
    -------
    sup_j : float
    t : float or None
    """
    _check(x_bound, y_row_bound, intercept, notion, neighbouring)
    if not (sigma_gram > 0 and sigma_cross > 0):
        raise ValueError("sigma_gram and sigma_cross must be > 0.")
    B2, c2, K2 = float(x_bound) ** 2, float(intercept) ** 2, float(y_row_bound) ** 2
    v1, v2 = float(sigma_gram) ** 2, float(sigma_cross) ** 2
    if neighbouring == "zero-out":
        return (B2 * B2 + B2 * c2 + c2 * c2) / v1 + (B2 + c2) * K2 / v2, None

    def J(t):
        return _gram_sq(t, B2, c2) / v1 + _cross_sq(t, B2, c2, K2, notion) / v2

    # dJ/dt = (-4t - 2c^2)/v1 + s 2K^2/v2 with s the slope sign of the cross
    # term: +1 for t > -c^2 (full), -1 for t < -c^2 and for the feature notion.
    def stationary(sign):
        return (sign * 2.0 * K2 / v2 - 2.0 * c2 / v1) * v1 / 4.0

    lo, hi = -B2, B2
    if notion == "feature":
        pieces = [(lo, hi, -1.0)]
    else:
        kink = min(max(-c2, lo), hi)
        pieces = [(lo, kink, -1.0), (kink, hi, 1.0)]
    candidates = [lo, hi]
    for a, b, sign in pieces:
        candidates += [a, b, min(max(stationary(sign), a), b)]
    values = [(J(t), t) for t in candidates]
    best = max(values)
    return best[0], best[1]


def joint_gram_cross_mu(x_bound, y_row_bound, sigma_gram, sigma_cross, n_rows, intercept=0.0,
                        notion="full", neighbouring="replace-one"):
    """GDP ``mu`` of releasing ``up(A^T A)/n + N(0, sigma_1^2)`` and ``A^T Y/n + N(0, sigma_2^2)``.

    ``mu = sqrt(sup J) / n`` with ``J`` on the sums (see
    :func:`joint_mahalanobis_sq`); the
    noise scales are those on the averages.
    """
    sup_j, _ = joint_mahalanobis_sq(x_bound, y_row_bound, sigma_gram, sigma_cross,
                                    intercept, notion, neighbouring)
    return math.sqrt(sup_j) / float(n_rows)


def joint_gram_cross_calibration(name, *, x_bound, y_row_bound, n_rows, mu, share, delta,
                                 intercept=0.0, notion="full", neighbouring="replace-one"):
    """Noise scales of a joint release that is exactly ``mu``-GDP, and its event.

    The ratio of the scales is that of the composed split with covariance
    share ``f = share``, ``sigma_1^0 = Delta_1/(sqrt(f) mu)`` and ``sigma_2^0
    = Delta_2/(sqrt(1 - f) mu)`` (whose composed mu is ``mu``); both are
    multiplied by ``gamma = mu_joint(sigma^0)/mu <= 1``, after which the
    joint release is exactly ``mu``-GDP (:func:`joint_gram_cross_mu` scales
    as ``1/sigma``).

    The event describes the whitened release (each statistic divided by its
    noise scale: an isotropic Gaussian mechanism): ``sigma = 1``,
    ``sensitivity = mu``; ``components`` holds ``('covariance', sigma_1)``
    and ``('association', sigma_2)``, the noise actually added.

    Returns
    -------
    event : PrivacyEvent
    sigma_gram, sigma_cross : float
    gamma : float
    """
    f = float(share)
    if not 0 < f < 1:
        raise ValueError("share must lie in (0, 1).")
    if not mu > 0 or math.isinf(mu):
        raise ValueError("mu must be finite and > 0.")
    d1 = gram_upper_sensitivity(x_bound, intercept, neighbouring) / n_rows
    d2 = cross_sensitivity(x_bound, y_row_bound, intercept, notion, neighbouring) / n_rows
    if d1 <= 0 or d2 <= 0:
        raise ValueError("A joint release needs positive sensitivities.")
    s1, s2 = d1 / (math.sqrt(f) * mu), d2 / (math.sqrt(1.0 - f) * mu)
    gamma = joint_gram_cross_mu(x_bound, y_row_bound, s1, s2, n_rows, intercept, notion,
                                neighbouring) / mu
    # J is evaluated in floating point (tens of roundings, each within half
    # an ulp): the scales are widened by 2^-40 relative, far above that error,
    # so the release is at most mu-GDP however the roundings fell.
    sigma_gram, sigma_cross = (gamma * s * (1.0 + _JOINT_MARGIN) for s in (s1, s2))
    # A unit-sensitivity Gaussian event of the joint mu (sigma = mu / mu = 1);
    # the two actual noise scales are its components.
    event = replace(
        gaussian_event_from_mu(name, mu, mu, delta, notion=notion, neighbouring=neighbouring),
        components=(("covariance", sigma_gram), ("association", sigma_cross)),
    )
    return event, sigma_gram, sigma_cross, gamma


#: Relative widening of the joint release's noise scales (floating-point error of J).
_JOINT_MARGIN = 2.0**-40


def gram_with_exact_corner(gram, sigma, rng, *, exact_corner):
    """``gram`` plus symmetric Gaussian noise (i.i.d. on and above the diagonal).

    With ``exact_corner`` the last diagonal entry (the constant ``c^2`` of an
    intercept column under replace-one neighbours, which no row change
    moves) gets no noise.
    """
    gram = np.asarray(gram, dtype=np.float64)
    noise = symmetric_gaussian_matrix(gram.shape[0], sigma, rng)
    if exact_corner:
        noise[-1, -1] = 0.0
    return gram + noise
