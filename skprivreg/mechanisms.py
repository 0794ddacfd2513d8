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
    "exponential_mechanism",
    "private_quantile_bin",
    "reliable_quantile",
    "geometric_bins",
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
    ``[-A, A]`` as a floating-point guard (ISSP spec §4.3).
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
    """Calibrate the truncated-Laplace PTR of the ISSP spec §4.3.

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
    test that always PASSes at 0 (ISSP spec §4.2).

    Requires ``delta <= 1/2`` (so that ``A >= Delta``) and ``0 <= beta < 1/2``.
    """
    if sensitivity <= 0 or not epsilon > 0 or math.isinf(epsilon):
        raise ValueError("PTR needs sensitivity > 0 and a finite epsilon > 0.")
    if not 0 < delta <= 0.5:
        raise ValueError("PTR needs delta in (0, 1/2].")
    if not 0 <= fail_prob < 0.5:
        raise ValueError("fail_prob must lie in [0, 1/2).")
    scale = sensitivity / epsilon
    half_width = scale * math.log1p(math.expm1(epsilon) / (2 * delta))
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
    caller records as (epsilon, delta) (ISSP spec §6.7 and §14).

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


def geometric_bins(low=2.0**-20, high=2.0**40, per_octave=4):
    """Public, data-independent candidate bounds ``low * 2^(j/per_octave)``."""
    n_bins = int(round(per_octave * math.log2(high / low))) + 1
    return low * 2.0 ** (np.arange(n_bins) / per_octave)


def reliable_quantile(n, epsilon, n_bins, failure_prob=0.01):
    """The highest quantile :func:`private_quantile_bin` can target reliably.

    The exponential mechanism returns a bin whose rank is within
    ``r = (2/epsilon)(ln(n_bins) + ln(1/failure_prob))`` of the target with
    probability ``1 - failure_prob`` (Dwork & Roth 2014, Thm. 3.11). Aiming
    at rank ``n - 2r`` keeps the returned bound below the top of the data
    only with that margin, so bins far above the data (which all tie at the
    worst utility and are many) are not picked. Public: uses n, epsilon and
    the number of bins only. Returns a value in [0.5, 1).
    """
    if math.isinf(epsilon):
        return 1.0
    slack = 2.0 * (2.0 / epsilon) * (math.log(n_bins) + math.log(1.0 / failure_prob))
    return float(min(max(1.0 - slack / max(n, 1), 0.5), 1.0 - 1.0 / max(n, 2)))


def private_quantile_bin(values, quantile, epsilon, rng, bins=None):
    """A private upper ``quantile`` of ``values`` among public candidate ``bins``.

    Exponential mechanism with utility
    ``u(b) = -| #{i : values_i <= b} - quantile * n |``, which changes by at
    most 1 when one value is replaced (replace-one neighbours, n public), so
    the returned bin is epsilon-DP. With probability at least ``1 - beta``
    the rank of the returned bin is within
    ``(2/epsilon) ln(len(bins)/beta)`` of ``quantile * n``.

    Parameters
    ----------
    values : ndarray of shape (n,)
        Non-negative values (row norms, absolute labels).
    quantile : float in (0, 1]
    epsilon : float
    rng : numpy.random.Generator
    bins : ndarray or None
        Sorted public candidates; :func:`geometric_bins` by default.

    Returns
    -------
    bound : float
        One of ``bins``.
    """
    values = np.asarray(values, dtype=np.float64)
    bins = geometric_bins() if bins is None else np.asarray(bins, dtype=np.float64)
    if not 0 < quantile <= 1:
        raise ValueError("quantile must lie in (0, 1].")
    counts = np.searchsorted(np.sort(values), bins, side="right")
    utilities = -np.abs(counts - quantile * values.shape[0])
    return float(bins[exponential_mechanism(utilities, 1.0, epsilon, rng)])
