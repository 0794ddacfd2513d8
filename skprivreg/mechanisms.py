"""Every noise calibration and sampler of skprivreg, with its formula and reference.

Estimators call these functions; they never calibrate noise inline. Calibration
functions return :class:`~skprivreg.accounting.PrivacyEvent` objects (or plain
numbers for planning), and samplers take the calibrated scale from them, so the
event recorded in ``privacy_spent_`` is made from the same numbers that drove
the noise.

Floating point
--------------
Noise is float64 sampling from a :class:`numpy.random.Generator`. It is *not*
hardened against floating-point precision attacks (Mironov 2012, "On
significance of the least significant bits for differential privacy"); the
guarantees hold in exact arithmetic. A hardened sampler is future work.

References
----------
- Dwork & Roth (2014), *The Algorithmic Foundations of Differential Privacy*,
  Thm. A.1 (classical Gaussian mechanism), Thm. 3.6 (Laplace), Thm. 3.10
  (exponential mechanism, McSherry & Talwar 2007).
- Balle & Wang (2018), *Improving the Gaussian mechanism for differential
  privacy: analytical calibration and optimal denoising*, Thm. 8.
- Dong, Roth & Su (2022), *Gaussian differential privacy*.
- Geng, Ding, Guo & Kumar (2020), *Tight analysis of privacy and utility
  tradeoff in approximate differential privacy* (truncated Laplace).
- Karwa & Vadhan (2018), *Finite sample differentially private confidence
  intervals*, Lemma 2.3 (stability histogram).
"""

import math
from dataclasses import dataclass

import numpy as np

from .accounting import PrivacyEvent, gdp_epsilon, gdp_mu

__all__ = [
    "gaussian_sigma",
    "gaussian_event",
    "gaussian_event_from_mu",
    "add_gaussian",
    "add_laplace",
    "symmetric_gaussian_matrix",
    "truncated_laplace",
    "PTRCalibration",
    "ptr_calibration",
    "ptr_test",
    "stability_histogram",
    "stability_mode",
    "exponential_mechanism",
    "above_threshold",
    "bound_bins",
    "upper_bound_margin",
    "counts_above",
    "private_upper_bound",
    "laplace_distance_threshold",
    "laplace_distance_test",
    "laplace_release_probability",
    "gumbel_top_k",
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
    "histogram_laplace_scale",
    "noisy_histogram",
    "randomized_response_probabilities",
    "randomized_response",
]


# ---------------------------------------------------------------------------
# Gaussian mechanism
# ---------------------------------------------------------------------------
def gaussian_sigma(sensitivity, epsilon, delta, method="analytic"):
    """Noise standard deviation of an (epsilon, delta)-DP Gaussian mechanism.

    ``'analytic'`` (Balle & Wang 2018, Thm. 8): the smallest sigma with

    .. math::
        \\Phi\\left(\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\right)
        - e^{\\varepsilon}\\Phi\\left(-\\frac{\\Delta}{2\\sigma}
        - \\frac{\\varepsilon\\sigma}{\\Delta}\\right) \\le \\delta,

    i.e. ``sigma = sensitivity / gdp_mu(epsilon, delta)``; exact and valid
    for every epsilon > 0.

    ``'classical'`` (Dwork & Roth 2014, Thm. A.1):
    ``sigma = sensitivity * sqrt(2 ln(1.25/delta)) / epsilon``, valid only
    for epsilon < 1; raises ``ValueError`` otherwise. Kept for comparisons.

    ``epsilon=np.inf`` gives ``sigma = 0`` (no noise).
    """
    if sensitivity < 0:
        raise ValueError("sensitivity must be >= 0.")
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    if math.isinf(epsilon) or sensitivity == 0:
        return 0.0
    if method == "analytic":
        return sensitivity / gdp_mu(epsilon, delta)
    if method == "classical":
        if epsilon >= 1:
            raise ValueError(
                "The classical Gaussian mechanism is valid only for epsilon < 1; "
                "use method='analytic'."
            )
        return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    raise ValueError("method must be 'analytic' or 'classical'.")


def gaussian_event(
    name,
    sensitivity,
    epsilon,
    delta,
    *,
    notion="full",
    neighbouring="replace-one",
    method="analytic",
):
    """Calibrate a Gaussian release at (epsilon, delta) and describe it as an event.

    The returned event's ``sigma`` is the noise to add (see
    :func:`gaussian_sigma`); its ``mu = sensitivity / sigma`` is what GDP
    composition uses (``None`` when the release is noiseless).
    """
    sigma = gaussian_sigma(sensitivity, epsilon, delta, method=method)
    mu = sensitivity / sigma if sigma > 0 else None
    if sigma > 0:
        event_epsilon, event_delta = float(epsilon), float(delta)
    elif sensitivity > 0:  # noiseless release of a non-constant statistic
        event_epsilon, event_delta = math.inf, 0.0
    else:  # a constant statistic reveals nothing
        event_epsilon, event_delta = 0.0, 0.0
    return PrivacyEvent(
        name=name,
        epsilon=event_epsilon,
        delta=event_delta,
        notion=notion,
        neighbouring=neighbouring,
        sensitivity=float(sensitivity),
        sigma=float(sigma),
        mu=mu,
    )


def gaussian_event_from_mu(
    name, sensitivity, mu, delta, *, notion="full", neighbouring="replace-one"
):
    """Calibrate a Gaussian release to be mu-GDP: ``sigma = sensitivity / mu``.

    Used when a total (epsilon, delta) is turned into a total mu and split
    among releases as ``mu_k`` with ``sum mu_k**2 = mu**2``. The event's own
    ``epsilon`` is the exact GDP conversion of ``mu`` at ``delta`` (its share
    of the ledger's delta); the ledger composes the ``mu``'s, not these.
    ``mu=np.inf`` means no noise.
    """
    if not mu > 0:
        raise ValueError("mu must be > 0.")
    if math.isinf(mu) or sensitivity == 0:
        return PrivacyEvent(
            name=name,
            epsilon=math.inf if sensitivity > 0 else 0.0,
            delta=0.0,
            notion=notion,
            neighbouring=neighbouring,
            sensitivity=float(sensitivity),
            sigma=0.0,
            mu=None,
        )
    return PrivacyEvent(
        name=name,
        epsilon=gdp_epsilon(mu, delta),
        delta=float(delta),
        notion=notion,
        neighbouring=neighbouring,
        sensitivity=float(sensitivity),
        sigma=float(sensitivity) / mu,
        mu=float(mu),
    )


def add_gaussian(value, sigma, rng):
    """``value + N(0, sigma^2)`` entrywise, as a new float64 array."""
    value = np.asarray(value, dtype=np.float64)
    if sigma == 0:
        return value.copy()
    return value + rng.normal(0.0, sigma, size=value.shape)


def add_laplace(value, scale, rng):
    """``value + Laplace(0, scale)`` entrywise (Dwork & Roth 2014, Thm. 3.6).

    For L1-sensitivity :math:`\\Delta_1`, ``scale = Delta_1/epsilon`` gives
    epsilon-DP.
    """
    value = np.asarray(value, dtype=np.float64)
    if scale == 0:
        return value.copy()
    return value + rng.laplace(0.0, scale, size=value.shape)


def symmetric_gaussian_matrix(d, sigma, rng):
    """A symmetric d x d matrix with i.i.d. N(0, sigma^2) on and above the diagonal.

    The upper triangle (diagonal included) is drawn and mirrored, as PRIMO's
    E1 and Wang's AdaSSP: releasing ``A + E`` for symmetric ``A`` is the
    Gaussian mechanism on the d(d+1)/2 upper-triangle vector, whose
    replace-one L2-sensitivity for ``A = X^T X`` with ``||x_i|| <= B`` is
    ``sqrt(2) B^2``.
    """
    upper = np.triu(rng.normal(0.0, sigma, size=(d, d))) if sigma > 0 else np.zeros((d, d))
    return upper + np.triu(upper, 1).T


# ---------------------------------------------------------------------------
# Truncated Laplace and propose-test-release
# ---------------------------------------------------------------------------
def truncated_laplace(scale, half_width, rng, size=None):
    """Laplace(0, scale) conditioned on ``[-half_width, half_width]``, by inverse CDF.

    With ``U ~ Unif(0, 1)`` and ``m = exp(-A/scale)``: ``Z = scale ln(2U(1-m) + m)``
    if ``U <= 1/2``, else ``Z = -scale ln(2(1-U)(1-m) + m)``; then clipped to
    ``[-A, A]`` as a floating-point guard (the inverse CDF can round just past ``A``).
    """
    if scale <= 0 or half_width <= 0:
        raise ValueError("scale and half_width must be > 0.")
    u = rng.random(size)
    m = math.exp(-half_width / scale)
    low = scale * np.log(2 * u * (1 - m) + m)
    high = -scale * np.log(2 * (1 - u) * (1 - m) + m)
    z = np.where(u <= 0.5, low, high)
    z = np.clip(z, -half_width, half_width)
    return float(z) if size is None else z


@dataclass(frozen=True)
class PTRCalibration:
    """Public constants of a truncated-Laplace propose-test-release.

    Attributes
    ----------
    scale : float
        Laplace scale ``lambda = sensitivity / epsilon``.
    half_width : float
        Truncation ``A = lambda ln(1 + (e^epsilon - 1) / (2 delta))``.
    tau : float
        PASS iff ``score + Z <= tau``.
    fail_threshold : float
        ``tau + A``: every score above it FAILs with probability 1.
    """

    scale: float
    half_width: float
    tau: float
    fail_threshold: float


def ptr_calibration(sensitivity, epsilon, delta, fail_prob=0.0):
    """Calibrate a truncated-Laplace propose-test-release (as used by ISSP).

    .. math::
        \\lambda = \\Delta/\\varepsilon,\\quad
        A = \\lambda \\ln\\left(1 + \\frac{e^{\\varepsilon} - 1}{2\\delta}\\right),\\quad
        \\tau = A \\text{ if } \\beta = 0, \\text{ else }
        -\\lambda \\ln\\left(2\\beta(1 - e^{-A/\\lambda}) + e^{-A/\\lambda}\\right).

    ``score + Z`` with ``Z`` truncated Laplace on ``[-A, A]`` is the
    (epsilon, delta)-DP truncated Laplace mechanism (Geng et al. 2020) for
    scores of sensitivity ``Delta``; PASS/FAIL is post-processing. With
    ``fail_prob = beta = 0`` a score of 0 always PASSes; every score above
    ``tau + A`` always FAILs, and ``2A`` is optimal up to ``2 Delta`` for a
    test that always PASSes at 0.

    Requires ``delta <= 1/2`` (so that ``A >= Delta``) and ``0 <= beta < 1/2``.
    """
    if sensitivity <= 0 or not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("PTR needs sensitivity > 0 and a finite epsilon > 0.")
    if not 0 < delta <= 0.5:
        raise ValueError("PTR needs delta in (0, 1/2].")
    if not 0 <= fail_prob < 0.5:
        raise ValueError("fail_prob must lie in [0, 1/2).")
    scale = sensitivity / epsilon
    # ln(1 + (e^eps - 1)/(2 delta)) in log space: e^eps overflows float64 past
    # eps ~ 709, and the PTR of ISSP runs at any epsilon (up to 1e4 is tested).
    log_ratio = epsilon + math.log(-math.expm1(-epsilon)) - math.log(2 * delta)
    half_width = scale * float(np.logaddexp(0.0, log_ratio))
    if fail_prob == 0:
        tau = half_width
    else:
        m = math.exp(-half_width / scale)
        tau = -scale * math.log(2 * fail_prob * (1 - m) + m)
    return PTRCalibration(scale, half_width, tau, tau + half_width)


def ptr_test(score, sensitivity, epsilon, delta, rng, fail_prob=0.0):
    """Run the truncated-Laplace PTR on ``score``: ``(passed, fail_threshold)``.

    Only the PASS/FAIL bit may be released, never the noisy score (Mironov
    2012). See :func:`ptr_calibration` for the calibration and guarantee.
    """
    cal = ptr_calibration(sensitivity, epsilon, delta, fail_prob)
    z = truncated_laplace(cal.scale, cal.half_width, rng)
    return bool(score + z <= cal.tau), cal.fail_threshold


# ---------------------------------------------------------------------------
# Stability histogram (Karwa & Vadhan 2018, Lemma 2.3)
# ---------------------------------------------------------------------------
def stability_histogram(labels, epsilon, delta, rng):
    """Noisy counts of the occupied bins that survive the stability threshold.

    Each element of ``labels`` is the bin of one group (any hashable). Under
    replace-one neighbours one group changes bin, so one count goes down by 1
    and one goes up by 1 (L1 change 2). For each *occupied* bin,
    ``c~ = c + Lap(2/epsilon)``; the bin is kept iff
    ``c~ >= 1 + (2/epsilon) ln(2/delta)``. Unoccupied bins are never examined,
    so the domain may be infinite. A bin occupied in only one of two
    neighbours has count 1 and survives with probability ``delta/4``; at most
    two bins can do so, so the output is (epsilon, delta/2)-DP, which the
    caller records as (epsilon, delta), a conservative rounding up.

    Returns
    -------
    kept : dict
        ``{bin: noisy_count}`` for the surviving bins. Release at most the
        argmax (:func:`stability_mode`); the noisy counts are for tests.
    """
    if not epsilon > 0 or not 0 < delta < 1:
        raise ValueError("stability_histogram needs epsilon > 0 and delta in (0, 1).")
    counts = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    scale = 2.0 / epsilon
    threshold = 1.0 + scale * math.log(2.0 / delta)
    kept = {}
    # Sorted so that the noise each bin receives does not depend on the order
    # in which the groups were seen.
    for label in sorted(counts, key=repr):
        noisy = counts[label] + rng.laplace(0.0, scale)
        if noisy >= threshold:
            kept[label] = noisy
    return kept


def stability_mode(labels, epsilon, delta, rng, tie_key=None):
    """The surviving bin with the largest noisy count, or ``None`` (bottom).

    Ties (probability zero) go to the smaller ``tie_key(bin)``.
    """
    kept = stability_histogram(labels, epsilon, delta, rng)
    if not kept:
        return None
    key = tie_key if tie_key is not None else repr
    return max(kept, key=lambda b: (kept[b], _negate(key(b))))


def _negate(value):
    try:
        return -value
    except TypeError:
        return value


# ---------------------------------------------------------------------------
# Exponential mechanism and private quantiles on geometric bins
# ---------------------------------------------------------------------------
def exponential_mechanism(utilities, sensitivity, epsilon, rng):
    """Index drawn with probability proportional to ``exp(eps u / (2 Delta_u))``.

    McSherry & Talwar (2007); Dwork & Roth (2014), Thm. 3.10: epsilon-DP when
    every utility changes by at most ``sensitivity`` between neighbours.
    Sampled with the Gumbel-max trick in log space.
    """
    utilities = np.asarray(utilities, dtype=np.float64)
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("exponential_mechanism needs a finite epsilon > 0.")
    logits = epsilon * utilities / (2.0 * sensitivity)
    return int(np.argmax(logits + rng.gumbel(size=logits.shape)))


def above_threshold(queries, threshold, epsilon, rng):
    """Index of the first query whose noisy value reaches the noisy threshold.

    The sparse vector technique's AboveThreshold (Dwork & Roth 2014,
    Algorithm 1 and Theorem 3.23): with ``rho ~ Lap(2/epsilon)`` once and
    ``nu_i ~ Lap(4/epsilon)`` per query, return the first ``i`` with
    ``q_i + nu_i >= threshold + rho`` (``None`` if there is none). It is
    epsilon-DP for any number of queries whose values each change by at most
    1 between neighbours; only the index is released.
    """
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("above_threshold needs a finite epsilon > 0.")
    queries = np.asarray(queries, dtype=np.float64)
    noisy_threshold = threshold + rng.laplace(0.0, 2.0 / epsilon)
    noisy_queries = queries + rng.laplace(0.0, 4.0 / epsilon, size=queries.shape)
    hits = np.flatnonzero(noisy_queries >= noisy_threshold)
    return int(hits[0]) if hits.size else None


def bound_bins(lower=2.0**-20, upper=2.0**40, per_octave=8):
    """Public candidate bounds ``lower * 2^(j/per_octave)`` up to ``upper``."""
    n_bins = int(round(per_octave * math.log2(upper / lower))) + 1
    return lower * 2.0 ** (np.arange(n_bins) / per_octave)


def upper_bound_margin(epsilon, failure_prob=1e-3):
    """Rows allowed above a private upper bound: ``(6/epsilon) ln(2/failure_prob)``.

    With this many values left above the target, the noise of
    :func:`private_upper_bound` (``nu - rho``, Laplace of scales 4/epsilon
    and 2/epsilon) carries the bound past the data's maximum with
    probability at most ``failure_prob``. Public.
    """
    return (6.0 / epsilon) * math.log(2.0 / failure_prob)


def counts_above(values, bins):
    """``#{i : values_i > b}`` for each public candidate ``b`` in ``bins``.

    Counts of row blocks add up, so this is the per-block statistic of
    :func:`private_upper_bound` on data processed in chunks.
    """
    values = np.sort(np.asarray(values, dtype=np.float64).ravel())
    return values.size - np.searchsorted(values, bins, side="right")


def private_upper_bound(counts, bins, epsilon, rng, n_above=None):
    """A private bound that all but about ``n_above`` values lie below.

    :func:`above_threshold` over the public increasing candidates ``bins``
    (:func:`bound_bins`) with queries ``-counts[j]``, where
    ``counts[j] = #{i : values_i > bins[j]}`` (:func:`counts_above`), and
    threshold ``-n_above``: the first candidate whose noisy count of values
    above it drops to ``n_above``. Each count changes by at most 1 when one
    value is replaced, so the result is epsilon-DP (replace-one, n public).
    Counts are exact at any scale and with ties (one-hot rows all have the
    same norm), so the bound stays within one bin (9%) of the value it
    targets; it overshoots the data maximum only with probability
    ``failure_prob`` when ``n_above = upper_bound_margin(epsilon,
    failure_prob)`` (the default). If no candidate stops, the top candidate
    is returned.
    """
    bins = np.asarray(bins, dtype=np.float64)
    if n_above is None:
        n_above = upper_bound_margin(epsilon)
    index = above_threshold(-np.asarray(counts, dtype=np.float64), -float(n_above), epsilon, rng)
    return float(bins[-1] if index is None else bins[index])


# ---------------------------------------------------------------------------
# Laplace distance test (propose-test-release with a distance proxy) and
# one-shot Gumbel top-k (appended for the private Lasso support selector)
# ---------------------------------------------------------------------------
def laplace_distance_threshold(epsilon, delta, sensitivity=1.0, offset=0.0):
    """Threshold ``T = offset + sensitivity * ln(1/delta) / epsilon`` of the Laplace distance test.

    Smith & Thakurta (2013), Prop. 3 and Alg. 1 use ``sensitivity = 1`` and
    ``offset = 0``. A distance proxy that may be as large as ``offset`` on a
    dataset whose output differs from a neighbour's (``offset = 1`` for a
    replace-one neighbour built from two add/remove steps) needs the offset
    so that the release probability there stays below ``delta / 2``.
    """
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("The distance test needs a finite epsilon > 0.")
    if not 0 < delta < 1:
        raise ValueError("The distance test needs delta in (0, 1).")
    if not sensitivity > 0:
        raise ValueError("sensitivity must be > 0.")
    return float(offset) + float(sensitivity) * math.log(1.0 / delta) / float(epsilon)


def laplace_distance_test(distance, epsilon, delta, rng, sensitivity=1.0, offset=0.0):
    """Propose-test-release on a distance proxy: ``(passed, noisy_distance, threshold)``.

    .. math::
        \\tilde d = \\hat d + \\mathrm{Lap}(\\Delta/\\varepsilon), \\qquad
        \\text{PASS} \\iff \\tilde d > T, \\qquad
        T = c + \\Delta \\ln(1/\\delta)/\\varepsilon

    (strict inequality; ``Delta = sensitivity``, ``c = offset``). If the
    proxy ``d_hat`` has global sensitivity ``Delta`` and is ``<= c`` on both
    sides of every neighbouring pair whose proposed outputs differ, releasing
    the proposal on PASS (and ``bottom`` otherwise), together with
    ``noisy_distance``, is ``(epsilon, delta/2)``-DP: the noisy distance
    alone is a Laplace mechanism, and where the outputs differ each side
    passes with probability at most ``Pr[Lap(Delta/eps) > T - c] = delta/2``
    (Smith & Thakurta 2013, Prop. 3; Dwork & Roth 2014, Sec. 7.3). Callers
    record ``(epsilon, delta/2)``.

    ``distance = -inf`` (a deterministic failure) never passes.
    """
    threshold = laplace_distance_threshold(epsilon, delta, sensitivity, offset)
    noisy = float(distance) + float(rng.laplace(0.0, float(sensitivity) / float(epsilon)))
    return bool(noisy > threshold), noisy, threshold


def laplace_release_probability(distance, epsilon, delta, sensitivity=1.0, offset=0.0):
    """Exact PASS probability of :func:`laplace_distance_test` for proxy value ``distance``.

    With ``b = Delta/epsilon`` and threshold ``T``:
    ``1 - exp(-(d - T)/b)/2`` if ``d >= T``, else ``exp(-(T - d)/b)/2``.
    """
    threshold = laplace_distance_threshold(epsilon, delta, sensitivity, offset)
    if distance == -math.inf:
        return 0.0
    scale = float(sensitivity) / float(epsilon)
    gap = (float(distance) - threshold) / scale
    if gap >= 0:
        return 1.0 - 0.5 * math.exp(-gap)
    return 0.5 * math.exp(gap)


def gumbel_top_k(utilities, k, sensitivity, epsilon, rng):
    """Indices of the ``k`` largest ``u_j + Gumbel(2 k Delta / epsilon)``, in selection order.

    One-shot top-k (Durfee & Rogers 2019, "Practical differentially private
    top-k selection with pay-what-you-get composition", Lemma 4.2): its output
    has the distribution of ``k`` rounds of peeling exponential mechanism,
    each ``(epsilon/k)``-DP for utilities that change by at most ``Delta``
    (in l_inf) between neighbours (McSherry & Talwar 2007). By basic
    composition the ordered set is ``epsilon``-DP (pure; monotonicity is not
    assumed).
    """
    utilities = np.asarray(utilities, dtype=np.float64)
    k = int(k)
    if not 1 <= k <= utilities.shape[0]:
        raise ValueError("k must lie in [1, len(utilities)].")
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("gumbel_top_k needs a finite epsilon > 0.")
    if not sensitivity > 0:
        raise ValueError("sensitivity must be > 0.")
    scale = 2.0 * k * float(sensitivity) / float(epsilon)
    noisy = utilities + rng.gumbel(0.0, scale, size=utilities.shape)
    order = np.argsort(-noisy, kind="stable")
    return order[:k]


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
    noiseless = sigma == 0
    return PrivacyEvent(
        name=name,
        epsilon=0.0 if noiseless else float(epsilon),
        delta=0.0 if noiseless else float(delta),
        notion=notion,
        neighbouring=neighbouring,
        sensitivity=float(sensitivity),
        sigma=float(sigma),
        mu=None if noiseless else float(sensitivity) / sigma,
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
    from .accounting import subsample_budget

    if method not in ("analytic", "primo"):
        raise ValueError("method must be 'analytic' or 'primo'.")
    eps_1, delta_1 = subsample_budget(epsilon, delta, sampling_ratio)
    if method == "analytic":
        sigma = gaussian_sigma(sensitivity, eps_1, delta_1)
    else:
        sigma = primo_constant(eps_1, delta_1) * float(sensitivity)
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
        \\Delta_G = \\sqrt{2B^4 + 4B^2c^2}, \\qquad \\|x_i\\|_2 \\le B,

    where ``B`` bounds the rows of ``X`` *without* the constant column ``c``.

    Proof. Replacing row ``x`` by ``x'`` changes ``A^T A`` by
    ``D = a a^T - a' a'^T`` with ``a = (x, c)``, ``a' = (x', c)``:

    .. math::
        D = \\begin{pmatrix} x x^\\top - x' x'^\\top & c (x - x') \\\\
                             c (x - x')^\\top & 0 \\end{pmatrix}.

    The corner is ``c^2 - c^2 = 0`` and the last column appears once in the
    upper triangle, so ``||upper(D)||^2 = ||upper(x x^T - x' x'^T)||^2 +
    c^2 ||x - x'||^2``. The first term is ``(||E||_F^2 + sum_i E_ii^2)/2``
    for ``E = x x^T - x' x'^T``, with ``||E||_F^2 = ||x||^4 + ||x'||^4 -
    2 (x.x')^2 <= 2B^4`` and ``sum_i E_ii^2 <= sum_i x_i^4 + x_i'^4 <= 2B^4``;
    the second is at most ``c^2 (2B)^2``. Hence ``||upper(D)||^2 <= 2B^4 +
    4B^2c^2``, below the ``2 (B^2 + c^2)^2`` obtained by treating the constant
    column as a feature (``sqrt(2)(B^2 + c^2)``).
    """
    x_bound = float(x_bound)
    c = float(intercept_value)
    if x_bound < 0 or c < 0:
        raise ValueError("x_bound and intercept_value must be >= 0.")
    return math.sqrt(2.0 * x_bound**4 + 4.0 * x_bound**2 * c**2)


def residual_gradient_sensitivity(row_bound, residual_bound):
    """Replace-one L2-sensitivity of ``A^T r`` with ``||a_i|| <= R`` and ``|r_i| <= C``: ``2RC``.

    ``||a r - a' r'|| <= ||a|| |r| + ||a'|| |r'| <= 2RC``. With the constant
    column ``c`` in ``a``, ``R = sqrt(B^2 + c^2)`` (attained at ``x' = x``,
    ``r' = -r``). Used for ``A^T y`` and for every boosting round's
    ``A^T clip(y - A theta)``, where ``theta`` is a released value.
    """
    if row_bound < 0 or residual_bound < 0:
        raise ValueError("bounds must be >= 0.")
    return 2.0 * float(row_bound) * float(residual_bound)


def gdp_split(mu, weights):
    """Split a total GDP parameter ``mu`` into per-release ``mu_k = mu sqrt(w_k / sum w)``.

    Gaussian releases compose as ``sqrt(sum mu_k^2)`` (Dong, Roth & Su 2022,
    Cor. 3.3), so these ``mu_k`` compose exactly to ``mu``. ``mu=inf``
    (non-private mode) gives ``inf`` for every release.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 1 or weights.size == 0 or np.any(weights <= 0):
        raise ValueError("weights must be a non-empty sequence of positive numbers.")
    if math.isinf(mu):
        return [math.inf] * weights.size
    return [float(mu * math.sqrt(w / weights.sum())) for w in weights]


def tukey_log_volumes(sorted_models):
    """``log V_j`` for ``j = 1..floor(m/2)``: log-volume of the approximate-Tukey region of depth >= j.

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
    top = log_v.size  # V_j for j = 1..top; V_j = +inf for j <= 0, 0 for j > top
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
    return bool(k_hat + rng.laplace(0.0, 1.0 / epsilon_ptr) >= threshold)


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


# ---------------------------------------------------------------------------
# Moments of bounded columns (appended for the private standard scaler)
# ---------------------------------------------------------------------------
def moment_sums_sensitivity(n_features):
    """L2-sensitivity of the sums :math:`(\\sum_i u_i, \\sum_i u_i^2)` of rows in :math:`[-1, 1]^d`.

    Replacing one row :math:`u` by :math:`u'` changes coordinate :math:`j` of
    the joint vector by :math:`(u_j - u'_j,\\ u_j^2 - u_j'^2)`, whose squared
    norm is :math:`t^2 (1 + s^2)` with :math:`t = u_j - u'_j`,
    :math:`s = u_j + u'_j` and :math:`|s| + |t| \\le 2`. On the boundary
    :math:`g(t) = t^2 (1 + (2 - t)^2)` increases on :math:`[0, 2]`
    (:math:`g'(t) = 2t(1 + (2-t)^2) - 2t^2(2-t) > 0` there), so its maximum is
    :math:`g(2) = 4` (at :math:`u_j = 1, u'_j = -1`). Summed over the
    :math:`d` columns:

    .. math::
        \\Delta_2 = 2\\sqrt{d},

    the sensitivity of the sums alone: the squares ride along for free
    (replace-one, n public).
    """
    if n_features < 1:
        raise ValueError("n_features must be >= 1.")
    return 2.0 * math.sqrt(n_features)


def moment_sums(U):
    """``(sum_i u_i, sum_i u_i**2)`` of one block of rows already mapped to ``[-1, 1]``."""
    U = np.asarray(U, dtype=np.float64)
    return U.sum(axis=0), np.square(U).sum(axis=0)


def released_mean_variance(noisy_sum, noisy_square_sum, n_samples, sigma):
    """Mean and variance of ``[-1, 1]``-valued columns from their noisy sums.

    Post-processing of the release: ``mean = clip(S_1/n, -1, 1)`` and
    ``var = clip(S_2/n - mean^2, floor, 1)`` with the public floor
    ``max(sigma/n, 1e-12)`` (the noise's standard deviation on ``S_2/n``:
    a smaller variance cannot be told from zero).
    """
    n = float(n_samples)
    mean = np.clip(np.asarray(noisy_sum, dtype=np.float64) / n, -1.0, 1.0)
    floor = max(float(sigma) / n, 1e-12)
    var = np.clip(np.asarray(noisy_square_sum, dtype=np.float64) / n - mean**2, floor, 1.0)
    return mean, var


__all__ += ["moment_sums_sensitivity", "moment_sums", "released_mean_variance"]


# ---------------------------------------------------------------------------
# A private bounded validation score (appended for private tuning)
# ---------------------------------------------------------------------------
def clipped_squared_error_sensitivity(y_low, y_high, n_validation):
    """Replace-one sensitivity of the mean clipped squared error: ``(h - l)^2 / n``.

    Labels and predictions are clipped to the public range :math:`[l, h]`, so
    each row's loss (averaged over outputs) lies in :math:`[0, (h-l)^2]`;
    replacing one of the ``n`` (public) validation rows moves the mean by at
    most :math:`(h-l)^2/n`.
    """
    if not y_high > y_low:
        raise ValueError("y_high must exceed y_low.")
    return (float(y_high) - float(y_low)) ** 2 / int(n_validation)


def private_neg_mse(y_true, y_pred, *, y_low, y_high, epsilon, rng):
    """Negative mean clipped squared error plus Laplace noise: epsilon-DP (replace-one).

    .. math::
        \\tilde s = -\\frac{1}{n}\\sum_i \\overline{(\\mathrm{clip}(y_i) - \\mathrm{clip}(\\hat y_i))^2}
            + \\mathrm{Laplace}\\left(\\frac{(h-l)^2}{n\\varepsilon}\\right)

    (Dwork & Roth 2014, Thm. 3.6, with the sensitivity of
    :func:`clipped_squared_error_sensitivity`). Returns the noisy score.
    """
    y_true = np.clip(np.asarray(y_true, dtype=np.float64), y_low, y_high)
    y_pred = np.clip(np.asarray(y_pred, dtype=np.float64).reshape(y_true.shape), y_low, y_high)
    losses = np.square(y_true - y_pred)
    if losses.ndim == 2:
        losses = losses.mean(axis=1)
    n = losses.shape[0]
    scale = clipped_squared_error_sensitivity(y_low, y_high, n) / float(epsilon)
    return float(add_laplace(-losses.mean(), scale, rng))


__all__ += ["clipped_squared_error_sensitivity", "private_neg_mse"]


# Label histograms and randomised response (appended for RR on bins)
# ---------------------------------------------------------------------------
def histogram_laplace_scale(epsilon):
    """Laplace scale ``2 / epsilon`` of an epsilon-DP histogram under replace-one.

    Replacing one record moves it from one cell to another: two counts change
    by one, so the L1-sensitivity of the count vector is 2 and Laplace noise
    of scale :math:`2/\\varepsilon` on every count is epsilon-DP (Dwork &
    Roth 2014, Thm. 3.6). Under add/remove the sensitivity would be 1.
    ``epsilon=np.inf`` gives 0.
    """
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    return 0.0 if math.isinf(epsilon) else 2.0 / float(epsilon)


def noisy_histogram(counts, epsilon, rng):
    """``counts + Laplace(0, 2/epsilon)`` per cell: epsilon-DP, replace-one.

    The scale is :func:`histogram_laplace_scale`; the cells must be public
    (fixed before the data is read).
    """
    return add_laplace(counts, histogram_laplace_scale(epsilon), rng)


def randomized_response_probabilities(epsilon, n_outputs):
    """``(p, q)`` of K-ary randomised response with ``K = n_outputs``.

    .. math::
        p = \\frac{e^{\\varepsilon}}{e^{\\varepsilon} + K - 1}, \\qquad
        q = \\frac{1}{e^{\\varepsilon} + K - 1}:

    the true value is kept with probability :math:`p` and each of the
    :math:`K - 1` other values is reported with probability :math:`q`. The
    ratio of the probabilities of any output under two inputs is at most
    :math:`p / q = e^{\\varepsilon}`, so the randomiser is pure
    epsilon-DP for its one input (Warner 1965; Kairouz, Oh & Viswanath 2016,
    for K outputs). ``epsilon=np.inf`` gives ``(1, 0)``; ``K = 1`` gives
    ``(1, 0)`` (a constant output reveals nothing).
    """
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    n_outputs = int(n_outputs)
    if n_outputs < 1:
        raise ValueError("randomized response needs at least one output.")
    if math.isinf(epsilon) or n_outputs == 1:
        return 1.0, 0.0
    # e^eps / (e^eps + K - 1) = 1 / (1 + (K - 1) e^-eps), stable for large eps.
    q_over_p = math.exp(-float(epsilon))
    p = 1.0 / (1.0 + (n_outputs - 1) * q_over_p)
    return p, p * q_over_p


def randomized_response(index, n_outputs, epsilon, rng):
    """K-ary randomised response applied to each entry of ``index`` independently.

    Each entry ``i`` in ``{0, ..., K-1}`` is kept with probability ``p`` and
    otherwise replaced by one of the ``K - 1`` other values chosen uniformly
    (:func:`randomized_response_probabilities`). Every output depends on its
    own input only, so releasing the whole vector is epsilon-DP when inputs
    differ in one entry (replace-one), and row blocks can be randomised
    independently.
    """
    index = np.asarray(index, dtype=np.int64)
    p, _ = randomized_response_probabilities(epsilon, n_outputs)
    if p == 1.0:
        return index.copy()
    keep = rng.random(index.shape) < p
    other = rng.integers(0, n_outputs - 1, size=index.shape)
    other += other >= index  # uniform over the K - 1 values != index
    return np.where(keep, index, other)
