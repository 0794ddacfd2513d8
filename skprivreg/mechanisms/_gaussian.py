"""Gaussian mechanism: analytic calibration, GDP events and samplers.

Part of :mod:`skprivreg.mechanisms` (import from there).
"""

import decimal
import math
from fractions import Fraction

import numpy as np

from .._rounding import exact_fraction, quotient_at_least, sqrt_at_least
from ..accounting import PrivacyEvent, gdp_epsilon, gdp_mu
from ._sampling import laplace

__all__ = [
    "gaussian_sigma",
    "gaussian_event",
    "gaussian_event_from_mu",
    "add_gaussian",
    "add_laplace",
    "symmetric_gaussian_matrix",
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

    ``epsilon=np.inf`` gives ``sigma = 0`` (no noise). A positive sensitivity
    whose sigma falls below float64's normal range (about 2.2e-308) raises
    ``ValueError``: the noise would round towards 0.
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
        return normal_noise_scale(quotient_at_least(sensitivity, gdp_mu(epsilon, delta)),
                                  sensitivity)
    if method == "classical":
        if epsilon >= 1:
            raise ValueError(
                "The classical Gaussian mechanism is valid only for epsilon < 1; "
                "use method='analytic'."
            )
        return normal_noise_scale(_classical_sigma_at_least(sensitivity, epsilon, delta),
                                  sensitivity)
    raise ValueError("method must be 'analytic' or 'classical'.")


def _classical_sigma_at_least(sensitivity, epsilon, delta):
    """The smallest float at least :math:`\\Delta \\sqrt{2 \\ln(1.25/\\delta)} / \\varepsilon`.

    The logarithm is computed to 60 significant digits (``decimal`` rounds it
    correctly) and raised by a relative :math:`10^{-50}`, which covers that
    rounding; the rest is exact (:func:`~skprivreg.mechanisms.sqrt_at_least`).
    """
    with decimal.localcontext(decimal.Context(prec=60)):
        log = decimal.Decimal(5) / 4
        log = log.ln() - decimal.Decimal(float(delta)).ln()
        log = Fraction(log) * (1 + Fraction(1, 10**50))
    return sqrt_at_least(2 * log * exact_fraction(sensitivity) ** 2
                         / exact_fraction(epsilon) ** 2)


def normal_noise_scale(sigma, sensitivity):
    """A noise scale ``sigma`` of a positive sensitivity, refused below float64's
    normal range (it rounds towards 0 there: the release would carry less noise
    than calibrated, or none). Every calibration of this package passes
    through it."""
    if not sigma >= np.finfo(np.float64).tiny:
        raise ValueError(
            f"A sensitivity of {float(sensitivity):g} is too small to calibrate in float64: "
            "the noise scale falls below the normal range and rounds towards 0. Rescale "
            "the data (or its declared bounds)."
        )
    return sigma


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
    mu = quotient_at_least(sensitivity, sigma) if sigma > 0 else None
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
    among releases as ``mu_k`` with ``sum mu_k**2 <= mu**2`` (each rounded
    down, :func:`~skprivreg.mechanisms.gdp_split`). The event's own
    ``epsilon`` is the exact GDP conversion of ``mu`` at ``delta`` (its share
    of the ledger's delta); the ledger composes the ``mu``'s, not these.
    ``mu=np.inf`` means no noise. A noise scale below float64's normal range
    is refused (``ValueError``), as in :func:`gaussian_sigma`.
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
        sigma=normal_noise_scale(quotient_at_least(float(sensitivity), mu), sensitivity),
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
    return value + laplace(scale, rng, size=value.shape)


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
