"""The public plan of a private selection: the secret number of runs, its cap, the total.

Pure functions of public numbers (Papernot & Steinke 2022, Thm. 2, with the
truncated negative binomial number of runs); :class:`PrivateGridSearchCV`
plans from them before it reads the data.
"""

import math

import numpy as np

from .._rdp import (
    RDP_ORDERS,
    private_selection_rdp,
    rdp_to_dp,
    tnb_gamma_for_mean,
    tnb_log_pmf,
)
from ..exceptions import ConfigurationError

__all__ = ["selection_plan"]

# Share of delta that may go to capping the number of repetitions.
_CAP_DELTA_SHARE = 0.1
_MAX_CAP = 100_000


def _cap_and_delta(log_pmf, delta, epsilon, eta, gamma):
    r"""Cap on K and the delta left for the RDP conversion.

    Running ``min(K, cap)`` instead of ``K`` changes the output distribution by
    at most ``P[K > cap]`` in total variation on each dataset, which turns an
    ``(eps, d)`` guarantee into ``(eps, d + (1 + e^eps) P[K > cap])``.

    ``log_pmf[i] = log P[K = i + 1]`` up to ``k_max``. Everything is in log
    space (the pmf, and ``1 + e^eps``, underflow or overflow at large
    epsilon), and the tails are summed from the far end (``1 - cumsum``
    cancels to 0 below about 1e-16), plus a bound on the mass beyond
    ``k_max``: consecutive terms have the ratio
    :math:`(1-\gamma)(k+\eta)/(k+1) \le r = (1-\gamma)\max(1, (k_{max}+\eta)/(k_{max}+1))`
    for :math:`k \ge k_{max}`, so that mass is at most
    :math:`P[K = k_{max}]\, r / (1 - r)`. Raises ``ConfigurationError`` when
    no cap costs at most a tenth of ``delta``.
    """
    log_pmf = np.asarray(log_pmf, dtype=float)
    k_max = len(log_pmf)
    ratio = (1.0 - gamma) * max(1.0, (k_max + eta) / (k_max + 1.0))
    log_beyond = (math.inf if ratio >= 1.0
                  else float(log_pmf[-1]) + math.log(ratio) - math.log1p(-ratio))
    # log P[K > i + 1]; the margin covers the rounding of the sums and the pmf.
    from_end = np.logaddexp.accumulate(log_pmf[::-1])[::-1]
    log_tails = np.logaddexp(np.append(from_end[1:], -np.inf), log_beyond) + 1e-9
    log_charge = np.logaddexp(0.0, epsilon) + log_tails  # log of (1 + e^eps) P[K > i + 1]
    ok = np.nonzero(log_charge <= math.log(_CAP_DELTA_SHARE * delta))[0]
    if not ok.size:
        raise ConfigurationError(
            f"The secret number of repetitions cannot be capped at a cost of at most a tenth "
            f"of delta={delta:.3g} at epsilon={epsilon:.4g}: raise delta, or lower epsilon or "
            "n_repetitions."
        )
    cap = int(ok[0]) + 1
    return cap, delta - math.exp(float(log_charge[cap - 1]))


def selection_plan(candidate_rdp, *, epsilon, delta, n_repetitions, eta):
    """The public plan of a private selection at per-candidate budget ``candidate_rdp``.

    Returns ``(total_epsilon, gamma, cap, conversion_delta)``: the total
    guarantee is ``(total_epsilon, delta)``-DP.
    """
    gamma = tnb_gamma_for_mean(eta, n_repetitions)
    log_pmf = tnb_log_pmf(eta, gamma, min(_MAX_CAP, int(200 * n_repetitions) + 1000))
    cap, conversion_delta = _cap_and_delta(log_pmf, delta, epsilon, eta, gamma)
    rdp = private_selection_rdp(candidate_rdp, eta, gamma, RDP_ORDERS)
    return rdp_to_dp(rdp, conversion_delta, RDP_ORDERS), gamma, cap, conversion_delta
