"""Renyi-DP accounting for private selection (re-exported by :mod:`skprivreg.accounting`).

A private hyperparameter search repeats a private base algorithm :math:`Q` a
random number :math:`K` of times and releases only the best result. Its
guarantee follows from :math:`Q`'s Renyi-DP curve :math:`\\varepsilon_Q(\\lambda)`
(Mironov 2017):

- Gaussian releases of mu-GDP: :math:`\\varepsilon(\\lambda) = \\lambda\\mu^2/2`
  (mu's compose as :math:`\\sqrt{\\sum \\mu_k^2}`);
- Laplace of scale :math:`\\Delta/\\varepsilon` (Mironov 2017, Table II):
  :math:`\\frac{1}{\\lambda-1}\\log\\left(\\frac{\\lambda}{2\\lambda-1}e^{(\\lambda-1)\\varepsilon}
  + \\frac{\\lambda-1}{2\\lambda-1}e^{-\\lambda\\varepsilon}\\right)`;
- any other pure :math:`\\varepsilon`-DP release:
  :math:`\\min(\\varepsilon, \\lambda\\varepsilon^2/2)` (Bun & Steinke 2016, Prop. 3.3).

Truncated negative binomial repetitions (Papernot & Steinke, ICLR 2022, Thm. 2):
for :math:`K \\sim \\mathcal{D}_{\\eta,\\gamma}` with :math:`\\eta > -1`,
:math:`\\gamma \\in (0, 1)`, releasing the best of :math:`K` runs of :math:`Q` is
:math:`(\\lambda, \\varepsilon')`-RDP with

.. math::
    \\varepsilon' = \\varepsilon_Q(\\lambda)
      + \\min_{\\hat\\lambda \\ge 1}\\left[(1+\\eta)\\left(1 - \\tfrac{1}{\\hat\\lambda}\\right)
        \\varepsilon_Q(\\hat\\lambda) + \\frac{(1+\\eta)\\log(1/\\gamma)}{\\hat\\lambda}\\right]
      + \\frac{\\log \\mathbb{E}[K]}{\\lambda - 1}.

:math:`\\eta = 1` is the geometric distribution of Liu & Talwar (STOC 2019),
whose pure-DP form is :math:`3\\varepsilon` (the limit of the bound above,
:math:`(2+\\eta)\\varepsilon`). RDP converts to :math:`(\\varepsilon, \\delta)`-DP by

.. math::
    \\varepsilon = \\min_\\lambda\\ \\varepsilon'(\\lambda) + \\log(1 - 1/\\lambda)
        - \\frac{\\log\\delta + \\log\\lambda}{\\lambda - 1}

(Canonne, Kamath & Steinke 2020, Prop. 12).
"""

import math
from fractions import Fraction

import numpy as np
from scipy.optimize import brentq

from ._rounding import value_at_least

__all__ = [
    "RDP_ORDERS",
    "gaussian_rdp",
    "laplace_rdp",
    "pure_dp_rdp",
    "ledger_rdp",
    "rdp_to_dp",
    "tnb_mean",
    "tnb_gamma_for_mean",
    "tnb_pmf",
    "private_selection_rdp",
]

#: Renyi orders at which curves are evaluated (lambda > 1).
RDP_ORDERS = np.array(
    [1.05, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0,
     14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 40.0, 48.0, 64.0, 96.0, 128.0, 256.0, 512.0, 1024.0]
)


#: Rounding allowance of a curve or a conversion: floating-point evaluation of a
#: few logarithms and products is within a few units in the last place of each
#: term; 16 of them, relative to the sum of the terms' magnitudes, is added so a
#: computed value is never below the exact one.
_ULPS = 16 * 2.0**-52


def _up(values):
    """The next float up of each value (an exact product or quotient of two floats
    rounded to nearest is within half an ulp: one step up covers it)."""
    return np.nextafter(values, np.inf)


def gaussian_rdp(mu, orders=RDP_ORDERS):
    """RDP of a mu-GDP Gaussian release: ``lambda mu^2 / 2`` (rounded up)."""
    return _up(_up(np.asarray(orders, dtype=float) * _up(float(mu) ** 2)) / 2.0)


def laplace_rdp(epsilon, orders=RDP_ORDERS):
    """RDP of the Laplace mechanism with scale ``sensitivity/epsilon`` (Mironov 2017, Table II).

    Evaluated in floating point and raised by a rounding allowance, then
    capped by the bound of any pure epsilon-DP release (:func:`pure_dp_rdp`):
    at a small epsilon the formula cancels (its two terms nearly agree).
    """
    lam = np.asarray(orders, dtype=float)
    eps = float(epsilon)
    if eps == 0:
        return np.zeros_like(lam)
    log_a = np.log(lam / (2 * lam - 1)) + (lam - 1) * eps
    log_b = np.log((lam - 1) / (2 * lam - 1)) - lam * eps
    value = np.logaddexp(log_a, log_b) / (lam - 1)
    value = value + _ULPS * (np.abs(log_a) + np.abs(log_b) + 1.0) / (lam - 1)
    return np.minimum(np.maximum(value, 0.0), pure_dp_rdp(eps, lam))


def pure_dp_rdp(epsilon, orders=RDP_ORDERS):
    """RDP of any pure epsilon-DP release: ``min(epsilon, lambda epsilon^2 / 2)`` (rounded up)."""
    lam = np.asarray(orders, dtype=float)
    eps = float(epsilon)
    return np.minimum(eps, _up(_up(lam * _up(eps**2)) / 2.0))


def ledger_rdp(ledger, orders=RDP_ORDERS):
    """RDP curve of a ledger whose events are Gaussian (with mu) or pure DP.

    The events are taken as the ledger composes them: when their
    neighbouring relations differ, each is first converted to replace-one
    (an add/remove or zero-out Gaussian release of mu is a replace-one
    release of ``2 mu``), so the curve is stated in the ledger's relation.

    Raises ``ValueError`` for an event with ``delta > 0`` and no mu (an
    approximate-DP release without a Renyi bound) or with infinite epsilon.
    """
    lam = np.asarray(orders, dtype=float)
    mu_squared = Fraction(0)
    total = np.zeros_like(lam)
    for event in ledger._converted():
        if event.mu is not None:
            mu_squared += Fraction(event.mu) ** 2
        elif event.epsilon == 0 and event.delta == 0:
            continue
        elif event.delta == 0 and math.isfinite(event.epsilon):
            total = total + pure_dp_rdp(event.epsilon, lam)
        else:
            raise ValueError(
                f"The release {event.name!r} (epsilon={event.epsilon:.4g}, "
                f"delta={event.delta:.3g}) has no Renyi-DP bound: only Gaussian releases and "
                "pure-DP releases can be tuned privately."
            )
    # lambda mu^2 / 2 from the exact sum of the squares, rounded up (a root and
    # its square would each round to nearest).
    gaussian = _up(_up(lam * value_at_least(mu_squared)) / 2.0)
    # Each addition rounds by half an ulp of the running sum (all terms >= 0).
    return (total + gaussian) * (1.0 + _ULPS * (len(ledger.events) + 1))


def rdp_to_dp(rdp, delta, orders=RDP_ORDERS):
    """Smallest epsilon over ``orders`` giving ``(epsilon, delta)``-DP (Canonne et al. 2020)."""
    lam = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    log_term = np.log1p(-1.0 / lam)
    tail = (math.log(delta) + np.log(lam)) / (lam - 1)
    eps = rdp + log_term - tail
    # Raised by a rounding allowance of its terms: never below the exact value.
    eps = eps + _ULPS * (np.abs(rdp) + np.abs(log_term) + np.abs(tail)
                         + (abs(math.log(delta)) + np.log(lam)) / (lam - 1))
    return float(max(np.min(eps), 0.0))


# ---------------------------------------------------------------------------
# Truncated negative binomial repetitions
# ---------------------------------------------------------------------------
def _log_ratio_expm1(r):
    """``log(r / (e^r - 1))``, 0 at ``r = 0`` and accurate near it."""
    if r == 0:
        return 0.0
    if r > 700.0:  # e^r would overflow
        return math.log(r) - r - math.log1p(-math.exp(-r))
    return math.log(r / math.expm1(r))


def _tnb_log_mean(eta, t):
    """``log E[K]`` for :math:`\\mathcal{D}_{\\eta,\\gamma}` at ``gamma = exp(-t)``, ``t > 0``.

    With ``h(r) = log(r / (e^r - 1))``, ``E[K] = exp(h(-eta t) - h(t))``:
    written with ``expm1``, it is accurate for small ``|eta|`` and
    continuous across ``eta = 0``.
    """
    return _log_ratio_expm1(-eta * t) - _log_ratio_expm1(t)


def tnb_mean(eta, gamma):
    """``E[K]`` for the truncated negative binomial :math:`\\mathcal{D}_{\\eta,\\gamma}`.

    :math:`\\eta(1-\\gamma)/(\\gamma(1-\\gamma^\\eta))`, and
    :math:`(1/\\gamma - 1)/\\log(1/\\gamma)` for :math:`\\eta = 0` (Papernot & Steinke 2022),
    its limit as :math:`\\eta \\to 0`. Computed with ``expm1`` of
    :math:`\\eta\\log\\gamma`, so that it is accurate and continuous for
    :math:`\\eta` near 0.
    """
    return math.exp(_tnb_log_mean(float(eta), -math.log(gamma)))


# gamma is searched down to the smallest normal float, exp(-708).
_TNB_MAX_LOG_INV_GAMMA = 708.0


def tnb_gamma_for_mean(eta, mean):
    """The ``gamma`` that gives ``E[K] = mean`` (``E[K]`` decreases in gamma).

    Solved for ``log log(1/gamma)``, so that gamma is found to relative
    precision however small it is. For ``eta < 0``, ``E[K]`` grows only as
    :math:`\\gamma^{-(1+\\eta)}` as gamma tends to 0: a mean that no gamma
    down to the smallest normal float gives raises ``ValueError``.
    """
    eta = float(eta)
    mean = float(mean)
    if not mean > 1:
        raise ValueError("The expected number of repetitions must be > 1.")
    if math.isinf(mean):
        raise ValueError("The expected number of repetitions must be finite.")
    log_mean = math.log(mean)

    def excess(log_t):  # increases with t = log(1 / gamma)
        return _tnb_log_mean(eta, math.exp(log_t)) - log_mean

    lo, hi = math.log(1e-300), math.log(_TNB_MAX_LOG_INV_GAMMA)
    if excess(hi) < 0:
        largest = math.exp(_tnb_log_mean(eta, _TNB_MAX_LOG_INV_GAMMA))
        raise ValueError(
            f"No gamma in (0, 1) gives an expected number of repetitions "
            f"(n_repetitions) of {mean:g} with eta={eta:g}: for this eta it is at most "
            f"about {largest:.4g}. Raise eta or lower n_repetitions."
        )
    log_t = brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15)
    # gamma rounds to 1 only for a mean within rounding of 1
    return min(math.exp(-math.exp(log_t)), math.nextafter(1.0, 0.0))


def tnb_pmf(eta, gamma, k_max):
    """``P[K = k]`` for ``k = 1..k_max`` (length ``k_max``): ``exp`` of :func:`tnb_log_pmf`."""
    return np.exp(tnb_log_pmf(eta, gamma, k_max))


def tnb_log_pmf(eta, gamma, k_max):
    """``log P[K = k]`` for ``k = 1..k_max`` (finite where ``P[K = k]`` underflows).

    :math:`P[K=k] = \\frac{(1-\\gamma)^k}{\\gamma^{-\\eta} - 1}\\prod_{\\ell=0}^{k-1}
    \\frac{\\ell+\\eta}{\\ell+1}` for :math:`\\eta \\neq 0`, and
    :math:`\\frac{(1-\\gamma)^k}{k\\log(1/\\gamma)}` for :math:`\\eta = 0`.
    """
    k = np.arange(1, int(k_max) + 1, dtype=float)
    if eta == 0:
        log_p = k * math.log1p(-gamma) - np.log(k) - math.log(math.log(1.0 / gamma))
    else:
        ell = k - 1.0
        log_prod = np.cumsum(np.log(np.abs((ell + eta) / (ell + 1.0))))
        # For -1 < eta < 0 both the product and gamma^-eta - 1 are negative.
        # gamma^-eta - 1 as expm1: it cancels for small |eta|, and a pmf that does
        # not sum to 1 would put the missing mass on the search's cap.
        log_p = k * math.log1p(-gamma) + log_prod - math.log(
            abs(math.expm1(-eta * math.log(gamma))))
    return log_p


def private_selection_rdp(q_rdp, eta, gamma, orders=RDP_ORDERS):
    """RDP curve of the best of :math:`K \\sim \\mathcal{D}_{\\eta,\\gamma}` runs of Q.

    ``q_rdp`` is Q's curve at ``orders``; the inner minimum over
    :math:`\\hat\\lambda` runs over ``orders`` and :math:`\\hat\\lambda = 1`
    (Papernot & Steinke 2022, Thm. 2).
    """
    lam = np.asarray(orders, dtype=float)
    q = np.asarray(q_rdp, dtype=float)
    log_inv_gamma = math.log(1.0 / gamma)
    inner = (1 + eta) * (1 - 1 / lam) * q + (1 + eta) * log_inv_gamma / lam
    inner_min = min(float(np.min(inner)), (1 + eta) * log_inv_gamma)  # lambda_hat = 1
    return q + inner_min + math.log(tnb_mean(eta, gamma)) / (lam - 1)
