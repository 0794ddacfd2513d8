"""The Gaussian profile inside the noisy-LLP accountant is never below the
exact one, where its two terms cancel (small mu and epsilon) as elsewhere."""

import math

import mpmath
import numpy as np
import pytest

import skprivreg.label_dp._llp_accountant as accountant
from skprivreg._gdp import _log_gdp_delta as scalar_log_gdp_delta
from skprivreg.label_dp import llp_privacy_profile


def _exact_log_delta(mu, epsilon):
    """log(Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)) with 80
    significant digits beyond the ~-log10(mu) that the subtraction cancels."""
    with mpmath.workdps(80 + max(0, math.ceil(-math.log10(mu)))):
        mu, epsilon = mpmath.mpf(mu), mpmath.mpf(epsilon)
        delta = (mpmath.ncdf(-epsilon / mu + mu / 2)
                 - mpmath.exp(epsilon) * mpmath.ncdf(-epsilon / mu - mu / 2))
        return mpmath.log(delta) if delta > 0 else mpmath.mpf("-inf")


@pytest.mark.parametrize("mu, epsilon", [(1e-14, 2e-13), (1e-12, 1e-11)])
def test_log_gdp_delta_where_the_terms_cancel(mu, epsilon):
    value = float(accountant._log_gdp_delta(mu, epsilon))
    exact = _exact_log_delta(mu, epsilon)
    assert value >= exact
    assert value - exact <= 1e-9


@pytest.mark.parametrize("ratio", [5.0, 10.0, 20.0, 30.0, 37.0])
def test_log_gdp_delta_is_never_below_the_exact_value_on_a_grid(ratio):
    mus = np.logspace(-14, -1, 27)
    values = accountant._log_gdp_delta(mus, ratio * mus)
    for mu, value in zip(mus, values):
        exact = _exact_log_delta(float(mu), float(ratio * mu))
        assert value >= exact, (mu, value, float(exact))
        # The slack covers the rounding of the arguments -ratio +- mu/2: about
        # 3 u ratio (ratio + 1) per log, times up to 1 / (1 - e^-0.001) = 1000
        # where the direct formula is used: 2 x 3 x 1.1e-16 x 37 x 38 x 1000 < 1e-9,
        # and 5e-9 leaves room for the bound's own margin.
        assert value - exact <= 5e-9


def test_log_gdp_delta_is_the_computation_of_gdp_delta():
    """Elementwise, the vectorised profile agrees with the scalar one of
    skprivreg.accounting (up to the last place of numpy's log and exp)."""
    rng = np.random.default_rng(0)
    mu = np.concatenate([10 ** rng.uniform(-300, 3, 3000), 10 ** rng.uniform(-14, 0, 3000),
                         [0.0, -1.0, 5e-324, np.inf]])
    epsilon = np.concatenate([10 ** rng.uniform(-300, 4, 3000),
                              mu[3000:6000] * rng.uniform(0, 40, 3000), [1.0, 1.0, 1.0, 1.0]])
    values = accountant._log_gdp_delta(mu, epsilon)
    expected = np.array([scalar_log_gdp_delta(float(m), float(e)) for m, e in zip(mu, epsilon)])
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(values[~finite], expected[~finite])
    np.testing.assert_allclose(values[finite], expected[finite], rtol=1e-14, atol=1e-14)


def _certified(mu, epsilon):
    return np.vectorize(lambda m: scalar_log_gdp_delta(float(m), float(epsilon)),
                        otypes=[float])(np.asarray(mu, dtype=float))


@pytest.mark.parametrize("args, allocation", [
    ((1e-11, 10, 0.5, 1e-12), "per_bag"),
    ((1e-12, 10, 0.5, 1e-11), "per_bag"),
    ((2e-13, 10, 0.5, 1e-14), "per_bag"),
    ((1e-11, 4, 0.3, 1e-12), "global"),
])
def test_llp_profile_is_not_below_the_profile_of_the_certified_delta(
        args, allocation, monkeypatch):
    """With label_range and epsilon tiny, every mu of the integrands is tiny:
    the profile equals the one computed with the scalar gdp profile."""
    value = accountant.llp_log_privacy_profile(*args, allocation=allocation)
    monkeypatch.setattr(accountant, "_log_gdp_delta", _certified)
    reference = accountant.llp_log_privacy_profile(*args, allocation=allocation)
    assert value >= reference - 1e-12 * abs(reference)
    assert value - reference <= 1e-9


def test_profiles_never_round_a_positive_delta_down_to_zero():
    # A log profile of -740.7 (delta ~2e-322) was reported as 0, which accepts any target.
    from scipy.optimize import brentq

    from skprivreg.label_dp._accountant import (
        lba_log_privacy_profile,
        lba_privacy_profile,
    )

    c = brentq(lambda c: lba_log_privacy_profile(1.0, c) + 740.7, 1e-4, 0.5)
    assert lba_privacy_profile(1.0, c) >= math.exp(lba_log_privacy_profile(1.0, c)) > 0
    assert accountant._delta_from_log(-800.0) == math.ulp(0.0)
    assert accountant._delta_from_log(-math.inf) == 0.0
    for log_delta in (-744.0, -742.3, -709.5):  # never below exp(log_delta)
        assert accountant._delta_from_log(log_delta) >= float(mpmath.exp(log_delta))


def test_the_global_law_is_exact_for_large_n():
    # scipy's hypergeometric log pmf is off by up to 4e-7 for n near 1e8, which put the
    # mixture below the exact delta. The exact value here is at least 0.0135278770036
    # (a 50-digit mpmath sum over q of the exact pmf times the expectation for each q,
    # terms of pmf below 1e-25 left out).
    got = llp_privacy_profile(1.0, 100, 0.5, 3.0, 1.0, 10**8 + 1, "global")
    assert 0.0135278770036 <= got <= 0.0135278770036 * (1 + 1e-6)
    from skprivreg.label_dp._llp_accountant import _log_hypergeom_pmf

    N, K, m = 3 * 10**8, 9 * 10**7, 499
    ours = _log_hypergeom_pmf(N, K, m)
    mpmath.mp.dps = 40
    for q in (100, 150, 200):
        exact = (mpmath.log(mpmath.binomial(K, q)) + mpmath.log(mpmath.binomial(N - K, m - q))
                 - mpmath.log(mpmath.binomial(N, m)))
        assert 0 <= ours[q] - exact <= 1e-8


def test_a_bag_larger_than_the_data_is_refused():
    # The hypergeometric law of k - 1 draws from n - 1 rows is undefined for k > n; its
    # NaN pmf was dropped and delta came out 0.
    with pytest.raises(ValueError, match="exceeds n_samples"):
        llp_privacy_profile(1.0, 20, 0.5, 1.0, 1.0, 10, "global")
    # The smallest bag size is searched among bags the data can fill.
    from skprivreg.label_dp import llp_min_bag_size

    assert llp_min_bag_size(0.1, 1e-9, 0.5, 1.0, 1.0, n_samples=30, allocation="global") == math.inf
    # A cap of one row still finds a bag of one that is enough.
    assert llp_min_bag_size(1.0, 0.5, 1.0, 0.1, 1.0, n_samples=1, allocation="global") == 1
    assert llp_min_bag_size(1.0, 0.5, 1.0, 0.1, 1.0, k_max=1) == 1
