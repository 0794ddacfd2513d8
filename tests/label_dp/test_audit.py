"""Black-box label-privacy audit of weighted LBA (spec §5.11).

A likelihood-ratio-style distinguisher on T = (ybar - xbar^T beta_hat)^2
for one near-worst-case bag and its neighbour; Clopper-Pearson bounds give
an empirical lower bound on epsilon at the accountant's delta, which must
not exceed the accountant's epsilon. Deliberately broken variants (equal
weights, full-rank bags, LLP without noise) must be caught.
"""

import math

import numpy as np
import pytest
from scipy import stats
from threadpoolctl import threadpool_limits

from skprivreg.label_dp import lba_privacy_profile
from skprivreg.label_dp._bags import lba_aggregate

N_DRAWS = 200_000
CHUNK = 20_000


def _clopper_pearson(successes, trials, alpha=0.05):
    lo = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, trials - successes + 1)
    if successes == trials:
        return lo, 1.0
    hi = stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes)
    return lo, hi


def empirical_epsilon(t_d, t_dprime, delta, n_thresholds=40):
    """max over thresholds/regions/orders of ln((TPR_lb - delta) / FPR_ub)."""
    pooled = np.concatenate([t_d, t_dprime])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.0005, 0.9995, n_thresholds)))
    best = -math.inf
    n = t_d.size
    for thr in thresholds:
        below_d, below_dp = int(np.sum(t_d <= thr)), int(np.sum(t_dprime <= thr))
        for count_d, count_dp in ((below_d, below_dp), (n - below_d, n - below_dp)):
            for c_p, c_q in ((count_d, count_dp), (count_dp, count_d)):
                tpr_lb = _clopper_pearson(c_p, n)[0]
                fpr_ub = _clopper_pearson(c_q, n)[1]
                if tpr_lb - delta > 0:
                    best = max(best, math.log((tpr_lb - delta) / fpr_ub))
    return best


def _worst_case_bag(k=400, x_target=3.0):
    """One feature + constant; every point fitted except a low-leverage far target.

    The others lie on y = 0.5 + 0.5 x with x in [-1, 1] (labels in [0, 1]); the
    target at x = 3 has leave-one-out prediction 2.0, far outside [0, 1], and
    label 0 (D) or 1 (D'): a near-pure variance change, the accountant's worst case.
    """
    x = np.linspace(-1.0, 1.0, k - 1)
    x = np.append(x, x_target)
    Z = np.column_stack([x, np.ones(k)])
    y = 0.5 + 0.5 * x
    y[-1] = 0.0
    y2 = y.copy()
    y2[-1] = 1.0
    return Z, y, y2


def _lba_statistics(Z, y, y_ref, rng, weights_fn=None, n_draws=N_DRAWS):
    """T = (ybar - xbar^T beta_ref)^2 over ``n_draws`` runs of the aggregation."""
    k = Z.shape[0]
    beta_ref = np.linalg.lstsq(Z, y_ref, rcond=None)[0]
    bags = np.arange(k)[None, :]
    out = []
    with threadpool_limits(1):
        for chunk in range(max(n_draws // CHUNK, 1)):
            W = rng.standard_normal((CHUNK, k)) if weights_fn is None else weights_fn(CHUNK, k)
            Zbar, ybar = W @ Z, W @ y
            if chunk == 0:
                # the library's aggregation (one bag per row of W) is the same map
                Zlib, ylib = lba_aggregate(Z, y, np.repeat(bags, 200, axis=0), W[:200])
                np.testing.assert_allclose(Zlib, Zbar[:200], rtol=1e-10, atol=1e-10)
                np.testing.assert_allclose(ylib, ybar[:200], rtol=1e-10, atol=1e-10)
            out.append((ybar - Zbar @ beta_ref) ** 2)
    return np.concatenate(out)


def _rss(Z, y):
    beta = np.linalg.lstsq(Z, y, rcond=None)[0]
    return float(np.sum((y - Z @ beta) ** 2))


@pytest.mark.slow
def test_audit_stays_within_the_accountant_on_a_near_worst_case_bag():
    rng = np.random.default_rng(2024)
    Z, y, y2 = _worst_case_bag()
    label_range = 1.0
    c = label_range / math.sqrt(_rss(Z, y))
    assert c < 0.6
    t_d = _lba_statistics(Z, y, y, rng)
    t_dp = _lba_statistics(Z, y2, y, rng)
    for epsilon in (0.5, 1.0, 2.0):
        delta = lba_privacy_profile(epsilon, c)
        eps_lb = empirical_epsilon(t_d, t_dp, delta)
        assert eps_lb <= epsilon
    # the audit has power: at a delta 100x smaller than the accountant's,
    # the same samples certify more than the accountant's epsilon
    delta_small = lba_privacy_profile(1.0, c) / 100
    assert empirical_epsilon(t_d, t_dp, delta_small) > 1.0


@pytest.mark.slow
def test_audit_detects_broken_variants():
    rng = np.random.default_rng(7)
    Z, y, y2 = _worst_case_bag()
    c = 1.0 / math.sqrt(_rss(Z, y))
    delta = lba_privacy_profile(1.0, c)

    # naive LBA: all weights 1 (not private)
    ones = lambda m, k: np.ones((m, k))  # noqa: E731
    t_d = _lba_statistics(Z, y, y, rng, ones, n_draws=CHUNK)
    t_dp = _lba_statistics(Z, y2, y, rng, ones, n_draws=CHUNK)
    assert empirical_epsilon(t_d, t_dp, delta) > 5

    # k <= p with a full-rank bag design: RSS = 0, the aggregate reveals the label
    k = 5
    Zs = np.column_stack([rng.normal(size=(k, 5)), np.ones(k)])
    ys = rng.uniform(0, 1, k)
    ys2 = ys.copy()
    ys2[0] = 1.0 - ys[0]
    t_d = _lba_statistics(Zs, ys, ys, rng, n_draws=CHUNK)
    t_dp = _lba_statistics(Zs, ys2, ys, rng, n_draws=CHUNK)
    assert empirical_epsilon(t_d, t_dp, delta) > 5

    # weighted LLP without noise (rho = 0): the weights are released
    W = rng.standard_normal((CHUNK, 400))
    stat_d = W @ y - W @ y
    stat_dp = W @ y2 - W @ y
    assert empirical_epsilon(stat_d**2, stat_dp**2, delta) > 5
