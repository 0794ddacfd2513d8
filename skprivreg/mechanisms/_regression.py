"""Calibrations of the regression estimators (PRIMO, ISSP, declared ranges, TukeyEM).

Part of :mod:`skprivreg.mechanisms` (import from there).
"""

import math

import numpy as np

from .._rounding import exact_fraction, quotient_at_least, sqrt_at_most, value_at_least
from ..accounting import PrivacyEvent
from ._gaussian import gaussian_sigma
from ._reusecov import gram_upper_sensitivity
from ._sampling import laplace

__all__ = [
    "primo_constant",
    "primo_gaussian_event",
    "subsampled_gaussian_event",
    "gaussian_precision_shaped",
    "intercept_gram_sensitivity",
    "residual_gradient_sensitivity",
    "gdp_split",
    "tukey_log_volumes",
    "tukey_safety_margin",
    "tukey_ptr_threshold",
    "tukey_ptr_test",
    "restricted_tukey_sample",
]


# ---------------------------------------------------------------------------
# PRIMO / ReuseCov calibrations (appended)
# ---------------------------------------------------------------------------
def primo_constant(epsilon, delta):
    """Neel's Gaussian-mechanism constant ``c(epsilon, delta)`` (PRIMO, Lemma 1).

    .. math::
        c(\\varepsilon, \\delta) = \\sqrt{2\\left(\\frac{1}{\\varepsilon}
            + \\frac{\\log(1/\\delta)}{\\varepsilon^2}\\right)},

    and ``sigma = c(epsilon, delta) * sensitivity`` is (epsilon, delta)-DP for
    every epsilon > 0: the Gaussian mechanism is
    :math:`(\\alpha, \\alpha/(2c^2))`-RDP (Mironov 2017), and converting at
    order :math:`\\alpha = 1 + 2\\log(1/\\delta)/\\varepsilon` gives
    :math:`\\varepsilon(\\varepsilon + 2\\log(1/\\delta)) / (4(\\varepsilon +
    \\log(1/\\delta))) + \\varepsilon/2 \\le \\varepsilon`. Looser than the
    analytic calibration (about 1.65x more noise at epsilon=5,
    delta=1/5008^2); kept to reproduce the paper.

    Reference values: ``c(5, 1/5008**2) = 1.327783``,
    ``c(2.5, 0.5/5008**2) = 2.544373``.
    """
    epsilon = float(epsilon)
    delta = float(delta)
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    if math.isinf(epsilon):
        return 0.0
    return math.sqrt(2.0 * (1.0 / epsilon + math.log(1.0 / delta) / epsilon**2))


def primo_gaussian_event(
    name, sensitivity, epsilon, delta, *, notion="full", neighbouring="replace-one"
):
    """A Gaussian release calibrated with PRIMO's Lemma 1: ``sigma = c(eps, delta) sensitivity``.

    The event's ``mu = sensitivity / sigma = 1/c`` is the exact GDP parameter
    of that Gaussian release, so a GDP ledger may compose it; a basic ledger
    adds its (epsilon, delta). ``epsilon=np.inf`` means no noise.
    """
    c = primo_constant(epsilon, delta)
    sigma = c * float(sensitivity)
    if math.isfinite(sigma):  # c times the sensitivity, rounded up
        sigma = value_at_least(exact_fraction(c) * exact_fraction(sensitivity))
    noiseless = sigma == 0
    return PrivacyEvent(
        name=name,
        epsilon=0.0 if noiseless else float(epsilon),
        delta=0.0 if noiseless else float(delta),
        notion=notion,
        neighbouring=neighbouring,
        sensitivity=float(sensitivity),
        sigma=float(sigma),
        mu=None if noiseless else quotient_at_least(float(sensitivity), sigma),
    )


def subsampled_gaussian_event(
    name,
    sensitivity,
    epsilon,
    delta,
    sampling_ratio,
    *,
    method="analytic",
    notion="full",
    neighbouring="replace-one",
):
    """A Gaussian release computed on a secret uniform subsample (without replacement).

    ``sensitivity`` is the replace-one sensitivity of the statistic *on the
    subsample* (for ``X_S^T X_S / s``: ``sqrt(2) B^2 / s``). The subsample
    release is calibrated at the amplified budget
    ``(epsilon_1, delta_1) = accounting.subsample_budget(epsilon, delta, q)``,
    ``q = s/n`` (Balle, Barthe & Gaboardi 2018, Thm. 9), with the analytic
    Gaussian mechanism (``method='analytic'``) or PRIMO's Lemma 1 constant
    (``method='primo'``). The event records the guarantee on the full data,
    ``(epsilon, delta)``, and ``mu=None``: a subsampled Gaussian is not
    ``Delta/sigma``-GDP, so ledgers compose it by basic composition.
    """
    from ..accounting import subsample_budget

    if method not in ("analytic", "primo"):
        raise ValueError("method must be 'analytic' or 'primo'.")
    eps_1, delta_1 = subsample_budget(epsilon, delta, sampling_ratio)
    if method == "analytic":
        sigma = gaussian_sigma(sensitivity, eps_1, delta_1)
    else:
        c = primo_constant(eps_1, delta_1)
        sigma = c * float(sensitivity)
        if math.isfinite(sigma):  # c times the sensitivity, rounded up
            sigma = value_at_least(exact_fraction(c) * exact_fraction(sensitivity))
    noiseless = sigma == 0
    return PrivacyEvent(
        name=name,
        epsilon=0.0 if noiseless else float(epsilon),
        delta=0.0 if noiseless else float(delta),
        notion=notion,
        neighbouring=neighbouring,
        sensitivity=float(sensitivity),
        sigma=float(sigma),
        mu=None,
    )


# ---------------------------------------------------------------------------
# ISSP: Gaussian release shaped by a precision matrix (appended for ISSP)
# ---------------------------------------------------------------------------
def gaussian_precision_shaped(mean, precision_factor, scale, rng, size=None):
    """Draw ``N(mean, scale^2 (G G^T)^{-1})`` without forming an inverse.

    ``precision_factor`` is a lower-triangular ``G`` with ``G G^T = S`` (for
    ISSP, ``S = S_v = X~^T diag(v) X~``, Brown et al. 2024, Algorithm 1). With
    ``xi ~ N(0, I_p)``, ``mean + scale G^{-T} xi`` has covariance
    ``scale^2 G^{-T} G^{-1} = scale^2 S^{-1}`` (one triangular solve). The
    scale ``c`` is calibrated by the caller through :func:`gaussian_sigma`
    (analytic Gaussian mechanism on the ``S``-metric sensitivity).

    ``size=None`` returns one draw of shape (p,), else ``size`` draws as rows.
    """
    from scipy.linalg import solve_triangular

    mean = np.asarray(mean, dtype=np.float64)
    p = mean.shape[0]
    m = 1 if size is None else int(size)
    xi = rng.standard_normal((p, m))
    noise = solve_triangular(
        np.asarray(precision_factor, dtype=np.float64), xi, lower=True, trans="T",
        check_finite=False,
    )
    out = mean[None, :] + float(scale) * noise.T
    return out[0] if size is None else out


# ---------------------------------------------------------------------------
# Linear regression on declared ranges, boosted refinement, Tukey depth
# (appended for LinearRegression, BoostedAdaSSPRegressor, TukeyEMRegressor)
# ---------------------------------------------------------------------------
def intercept_gram_sensitivity(x_bound, intercept_value):
    """Replace-one L2-sensitivity of the upper triangle of ``A^T A``, ``A = [X, c 1]``.

    .. math::
        \\Delta_G = \\sqrt 2\\,(B^2 + c^2/2) \\quad (c^2 \\le 2B^2), \\qquad
        \\Delta_G = 2Bc \\quad (c^2 > 2B^2), \\qquad \\|x_i\\|_2 \\le B,

    where ``B`` bounds the rows of ``X`` *without* the constant column ``c``.

    Proof. Replacing row ``x`` by ``x'`` changes ``A^T A`` by
    ``D = a a^T - a' a'^T`` with ``a = (x, c)``, ``a' = (x', c)``:

    .. math::
        D = \\begin{pmatrix} x x^\\top - x' x'^\\top & c (x - x') \\\\
                             c (x - x')^\\top & 0 \\end{pmatrix}.

    The corner is ``c^2 - c^2 = 0`` and the last column appears once in the
    upper triangle, so ``||upper(D)||^2 = ||upper(E)||^2 + c^2 ||x - x'||^2``
    with ``E = x x^T - x' x'^T`` and ``||upper(E)||^2 <= ||E||_F^2 = ||x||^4 +
    ||x'||^4 - 2t^2``, ``t = x.x'``. At ``||x|| = ||x'|| = B`` (the worst
    case for every ``t``) this is ``J(t) = 2B^4 - 2t^2 + c^2(2B^2 - 2t)``,
    maximised at ``t = max(-c^2/2, -B^2)``: ``2 (B^2 + c^2/2)^2``, or
    ``4B^2c^2`` when ``c^2 > 2B^2``. It is attained for two or more features
    (rotate so that ``E`` is diagonal); the full derivation is in
    :func:`skprivreg.mechanisms.gram_upper_sensitivity`, which this returns.
    It is below the ``sqrt(2B^4 + 4B^2c^2)`` of bounding the two terms
    separately and the ``sqrt(2)(B^2 + c^2)`` of treating the constant column
    as a feature.
    """
    x_bound = float(x_bound)
    c = float(intercept_value)
    if x_bound < 0 or c < 0:
        raise ValueError("x_bound and intercept_value must be >= 0.")
    return gram_upper_sensitivity(x_bound, c, neighbouring="replace-one")


def residual_gradient_sensitivity(row_bound, residual_bound):
    """Replace-one L2-sensitivity of ``A^T r`` with ``||a_i|| <= R`` and ``|r_i| <= C``: ``2RC``.

    ``||a r - a' r'|| <= ||a|| |r| + ||a'|| |r'| <= 2RC``. With the constant
    column ``c`` in ``a``, ``R = sqrt(B^2 + c^2)`` (attained at ``x' = x``,
    ``r' = -r``). Used for ``A^T y`` and for every boosting round's
    ``A^T clip(y - A theta)``, where ``theta`` is a released value.
    """
    if row_bound < 0 or residual_bound < 0:
        raise ValueError("bounds must be >= 0.")
    if math.isinf(row_bound) or math.isinf(residual_bound):
        return math.inf
    return value_at_least(2 * exact_fraction(row_bound) * exact_fraction(residual_bound))


def gdp_split(mu, weights):
    """Split a total GDP parameter ``mu`` into per-release ``mu_k = mu sqrt(w_k / sum w)``.

    Gaussian releases compose as ``sqrt(sum mu_k^2)`` (Dong, Roth & Su 2022,
    Cor. 3.3). Each ``mu_k`` is the largest float at most its exact value
    (:func:`sqrt_at_most`), so the releases compose to at most ``mu``
    (rounded to nearest, their composition can exceed it by an ulp).
    ``mu=inf`` (non-private mode) gives ``inf`` for every release.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 1 or weights.size == 0 or np.any(weights <= 0):
        raise ValueError("weights must be a non-empty sequence of positive numbers.")
    if math.isinf(mu):
        return [math.inf] * weights.size
    square, whole = exact_fraction(mu) ** 2, sum(exact_fraction(w) for w in weights)
    return [sqrt_at_most(square * exact_fraction(w) / whole) for w in weights]


def tukey_log_volumes(sorted_models):
    """``log V_j``, ``j = 1..floor(m/2)``: log-volume of the approximate-Tukey region of depth >= j.

    The approximate Tukey depth of ``y`` in models ``beta_1..beta_m``
    (Amin, Joseph, Ribero & Vassilvitskii 2023, Def. 3.2) is
    ``min_k min(#{i: beta_ik <= y_k}, #{i: beta_ik >= y_k})``; its region of
    depth ``>= j`` is the box ``prod_k [s_k(j), s_k(m - j + 1)]`` where
    ``s_k(1) <= ... <= s_k(m)`` are the sorted k-th coordinates
    (``sorted_models``, shape (p, m), each row sorted). Entry ``j - 1`` of
    the result is ``log V_j``; ``-inf`` where a box has zero width.
    """
    s = np.asarray(sorted_models, dtype=np.float64)
    m = s.shape[1]
    half = m // 2
    widths = s[:, ::-1][:, :half] - s[:, :half]  # s(m-j+1) - s(j), j = 1..half
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(widths, 0.0)).sum(axis=0)


def tukey_safety_margin(log_volumes, depth_threshold, epsilon_em, eta):
    """Lower bound ``k_hat`` on the distance to an unsafe dataset for the restricted Tukey EM.

    ``k_hat`` is the largest ``k >= 0`` such that for some ``g >= 1``

    .. math::
        \\frac{V_{t-k-1}}{V_{t+k+g+1}}\\, e^{-\\varepsilon_{em} g / 2} \\le \\eta,

    and ``-1`` if there is none (``V_j = +inf`` for ``j <= 0``, ``0`` above the
    deepest level). Brown, Gaboardi, Smith, Ullman & Zakynthinou (2021,
    Lemma 3.8, with our constants):

    *Safety.* If the condition holds at ``k = 0`` for dataset ``x``, then for
    every neighbour ``x'`` (depths within 1 of those of ``x``) the restricted
    exponential mechanism (density ``prop. to exp(eps_em T(y)/2)`` on
    ``{T >= t}``) gives outputs that are
    ``(eps_em + ln(1/(1-eta)), eta/(1-eta))``-indistinguishable in both
    directions. (The mass that the restriction moves between ``x`` and ``x'``
    lies at depth ``t`` or ``t-1`` of ``x`` and is at most
    ``e^{eps t/2} V_{t-1}``, while the normaliser is at least
    ``e^{eps (t+g+1)/2} V_{t+g+1}``.)

    *Distance.* A dataset ``k`` changes away has ``V_{t-1} <= V_{t-k-1}(x)``
    and ``V_{t+g+1} >= V_{t+k+g+1}(x)``, so it satisfies the condition at 0:
    every dataset within distance ``k_hat`` of ``x`` is safe. And ``k_hat``
    has sensitivity 1: the condition at ``k`` for ``x`` implies it at
    ``k - 1`` for a neighbour.
    """
    log_v = np.asarray(log_volumes, dtype=np.float64)
    # V_j for j = 1..m with m = log_v.size; V_j = +inf for j <= 0, 0 for j > m
    t = int(depth_threshold)
    log_eta = math.log(eta)
    best = -1
    for k in range(0, max(t - 1, 0)):  # t - k - 1 >= 1
        low = log_v[t - k - 2]  # log V_{t-k-1}
        highs = log_v[t + k + 1:]  # log V_{t+k+g+1}, g = 1, 2, ...
        g = np.arange(1, highs.size + 1)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(highs) & (low - highs - epsilon_em * g / 2.0 <= log_eta)
        if not math.isfinite(low) or not ok.any():
            break
        best = k
    return best


def tukey_ptr_threshold(epsilon_ptr, delta_ptr):
    """PASS iff ``k_hat + Lap(1/epsilon_ptr) >= ln(1/(2 delta_ptr)) / epsilon_ptr``.

    ``k_hat`` (:func:`tukey_safety_margin`) has sensitivity 1, so the bit is
    ``epsilon_ptr``-DP with Laplace **scale 1/epsilon_ptr** (``2/epsilon``
    when ``epsilon_ptr = epsilon/2``; an implementation that draws with scale
    ``epsilon/2`` adds far too little noise at ``epsilon`` of order 1). An
    unsafe dataset has ``k_hat = -1`` and passes with probability
    ``exp(-epsilon_ptr) delta_ptr <= delta_ptr``.
    """
    if not epsilon_ptr > 0 or math.isinf(epsilon_ptr) or not 0 < delta_ptr < 0.5:
        raise ValueError("The PTR check needs a finite epsilon > 0 and delta in (0, 1/2).")
    return math.log(1.0 / (2.0 * delta_ptr)) / epsilon_ptr


def tukey_ptr_test(k_hat, epsilon_ptr, delta_ptr, rng):
    """The PTR bit of :func:`tukey_ptr_threshold`; only the bit may be released."""
    threshold = tukey_ptr_threshold(epsilon_ptr, delta_ptr)
    return bool(k_hat + laplace(quotient_at_least(1.0, epsilon_ptr), rng) >= threshold)


def restricted_tukey_sample(sorted_models, depth_threshold, epsilon_em, rng):
    """One draw of the restricted exponential mechanism on approximate Tukey depth.

    Density ``prop. to exp(epsilon_em * T(y) / 2)`` on ``{y : T(y) >= t}``
    (the exponential mechanism with a score of sensitivity 1; its guarantee
    on safe datasets is in :func:`tukey_safety_margin`). A depth level
    ``j >= t`` is drawn with probability ``prop. to (V_j - V_{j+1})
    e^{eps j / 2}`` (Gumbel-max in log space), then a point uniformly in
    ``{T = j}``: that set is split by the first coordinate ``i`` at depth
    exactly ``j`` (coordinates before it at depth ``>= j+1``, after it at
    ``>= j``), ``i`` is drawn in proportion to the volume of its piece, and
    each coordinate uniformly in its interval(s) (Amin et al. 2023, Sec. 3).
    """
    s = np.asarray(sorted_models, dtype=np.float64)
    p, m = s.shape
    half = m // 2
    t = int(depth_threshold)
    log_v = tukey_log_volumes(s)  # log V_j, j = 1..half
    levels = np.arange(t, half + 1)
    log_upper = log_v[levels - 1]
    log_next = np.array([log_v[j] if j < half else -np.inf for j in levels])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_exact = log_upper + np.log1p(-np.exp(log_next - log_upper))
    logits = log_exact + epsilon_em * levels / 2.0
    logits[~np.isfinite(logits)] = -np.inf
    depth = int(levels[np.argmax(logits + rng.gumbel(size=logits.shape))])

    def interval(k, j):  # coordinates of dimension k at depth >= j
        return s[k, j - 1], s[k, m - j]

    def width(k, j):
        if j > half:
            return 0.0
        lo, hi = interval(k, j)
        return max(hi - lo, 0.0)

    geq_j = np.array([width(k, depth) for k in range(p)])
    geq_j1 = np.array([width(k, depth + 1) for k in range(p)])
    with np.errstate(divide="ignore"):
        log_exact_k = np.log(np.maximum(geq_j - geq_j1, 0.0))
        log_left = np.concatenate([[0.0], np.cumsum(np.log(geq_j1))[:-1]])
        log_right = np.concatenate([np.cumsum(np.log(geq_j)[::-1])[::-1][1:], [0.0]])
    log_pieces = log_exact_k + log_left + log_right
    log_pieces[~np.isfinite(log_pieces)] = -np.inf
    first = int(np.argmax(log_pieces + rng.gumbel(size=p)))
    point = np.empty(p)
    for k in range(p):
        if k < first:
            lo, hi = interval(k, depth + 1)
            point[k] = rng.uniform(lo, hi)
        elif k > first:
            lo, hi = interval(k, depth)
            point[k] = rng.uniform(lo, hi)
        else:
            lo, hi = interval(k, depth)
            if depth + 1 <= half:
                inner_lo, inner_hi = interval(k, depth + 1)
            else:
                inner_lo = inner_hi = 0.5 * (lo + hi)
            left, right = inner_lo - lo, hi - inner_hi
            if rng.random() * (left + right) < left:
                point[k] = lo + rng.random() * left
            else:
                point[k] = inner_hi + rng.random() * right
    return point, depth
