"""Statistical tests of the mechanisms: fixed seeds, bands derived from the math."""

import math

import numpy as np
import pytest
from scipy import stats

from skprivreg.accounting import gdp_delta
from skprivreg.mechanisms import (
    above_threshold,
    add_gaussian,
    add_laplace,
    bound_bins,
    counts_above,
    exponential_mechanism,
    gaussian_event,
    gaussian_event_from_mu,
    gaussian_sigma,
    laplace,
    laplace_distance_test,
    private_upper_bound,
    ptr_calibration,
    ptr_test,
    stability_histogram,
    stability_mode,
    symmetric_gaussian_matrix,
    truncated_laplace,
    tukey_ptr_test,
    upper_bound_margin,
)

# Two-sided band of a chi-square variance test: fails a correct sampler with
# probability 1e-4.
ALPHA = 1e-4


def _assert_variance(samples, variance):
    n = samples.size
    statistic = np.sum(samples**2) / variance  # mean is known to be 0
    lo, hi = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], df=n)
    assert lo <= statistic <= hi


def test_gaussian_noise_matches_calibrated_sigma():
    rng = np.random.default_rng(0)
    sigma = gaussian_sigma(2.0, 1.0, 1e-5)
    noise = add_gaussian(np.zeros(50_000), sigma, rng)
    _assert_variance(noise, sigma**2)


def test_gaussian_noise_detects_a_miscalibration():
    rng = np.random.default_rng(0)
    sigma = gaussian_sigma(2.0, 1.0, 1e-5)
    noise = add_gaussian(np.zeros(50_000), 1.05 * sigma, rng)
    with pytest.raises(AssertionError):
        _assert_variance(noise, sigma**2)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.0, 10.0])
def test_analytic_sigma_is_the_smallest_valid(epsilon):
    delta, sens = 1e-6, 3.0
    sigma = gaussian_sigma(sens, epsilon, delta)
    # Balle & Wang (2018) Thm 8 condition, written as GDP with mu = sens/sigma.
    assert gdp_delta(sens / sigma, epsilon) <= delta
    assert gdp_delta(sens / (sigma * (1 - 1e-7)), epsilon) > delta


def test_classical_is_larger_and_refuses_large_epsilon():
    assert gaussian_sigma(1.0, 0.5, 1e-5, "classical") > gaussian_sigma(1.0, 0.5, 1e-5)
    with pytest.raises(ValueError, match="epsilon < 1"):
        gaussian_sigma(1.0, 1.0, 1e-5, "classical")


def test_classical_sigma_is_the_smallest_float_at_least_its_exact_value():
    # It was rounded to nearest: below the exact value in about half the cases.
    import mpmath

    rng = np.random.default_rng(0)
    for _ in range(300):
        sens = float(10 ** rng.uniform(-3, 3))
        epsilon = float(rng.uniform(0.01, 0.999))
        delta = float(10 ** rng.uniform(-15, -1))
        sigma = gaussian_sigma(sens, epsilon, delta, "classical")
        with mpmath.workdps(80):
            exact = (mpmath.mpf(sens) * mpmath.sqrt(2 * mpmath.log(mpmath.mpf(5) / 4
                                                                   / mpmath.mpf(delta)))
                     / mpmath.mpf(epsilon))
            assert mpmath.mpf(sigma) >= exact
            assert mpmath.mpf(np.nextafter(sigma, 0.0)) < exact


def test_gaussian_events_carry_the_noise_they_calibrate():
    event = gaussian_event("XtX", 2.0, 1.0, 1e-5)
    assert event.sigma == pytest.approx(gaussian_sigma(2.0, 1.0, 1e-5))
    assert event.mu == pytest.approx(2.0 / event.sigma)
    from_mu = gaussian_event_from_mu("XtY", 2.0, 0.5, 1e-6)
    assert from_mu.sigma == pytest.approx(4.0)
    assert gdp_delta(0.5, from_mu.epsilon) <= 1e-6
    noiseless = gaussian_event("x", 1.0, np.inf, 1e-5)
    assert noiseless.sigma == 0 and math.isinf(noiseless.epsilon)


def test_laplace_noise_variance():
    rng = np.random.default_rng(1)
    scale = 0.7
    noise = add_laplace(np.zeros(200_000), scale, rng)
    # Var = 2 b^2; the sample variance of 2e5 Laplace draws has relative SE
    # sqrt((kurtosis - 1)/n) = sqrt(5/n) ~ 0.005; 5 SE band.
    assert np.var(noise) == pytest.approx(2 * scale**2, rel=5 * math.sqrt(5 / 2e5))


def test_symmetric_gaussian_matrix():
    rng = np.random.default_rng(2)
    m = symmetric_gaussian_matrix(300, 1.5, rng)
    np.testing.assert_array_equal(m, m.T)
    _assert_variance(m[np.triu_indices(300)], 1.5**2)


def _truncated_laplace_cdf(z, scale, half_width):
    m = math.exp(-half_width / scale)
    z = np.asarray(z)
    below = (np.exp(z / scale) - m) / (2 * (1 - m))
    above = 1 - (np.exp(-z / scale) - m) / (2 * (1 - m))
    return np.where(z <= 0, below, above)


def test_truncated_laplace_distribution():
    rng = np.random.default_rng(3)
    scale, half_width = 2.0, 5.0
    z = truncated_laplace(scale, half_width, rng, size=100_000)
    assert np.all(np.abs(z) <= half_width)
    ks = stats.kstest(z, lambda t: _truncated_laplace_cdf(t, scale, half_width))
    assert ks.pvalue > ALPHA


@pytest.mark.parametrize("half_width", [0.4, 60.0])
def test_truncated_laplace_distribution_below_one_scale_and_far_beyond_the_grid(half_width):
    rng = np.random.default_rng(4)
    z = truncated_laplace(1.0, half_width, rng, size=100_000)
    assert np.all(np.abs(z) <= half_width)
    ks = stats.kstest(z, lambda t: _truncated_laplace_cdf(t, 1.0, half_width))
    assert ks.pvalue > ALPHA


class _ScriptedUniforms:
    """A generator whose uniforms are given in order (one per value drawn)."""

    def __init__(self, values):
        self.values = list(values)

    def random(self, size=None):
        n = 1 if size is None else int(size)
        out, self.values = np.array(self.values[:n]), self.values[n:]
        return out if size is not None else float(out[0])


def test_truncated_laplace_reaches_its_whole_support():
    """The inverse CDF of one double reached no value above 36.04 scale (the
    grid k 2^-53 ends there) and put mass 2^-53 on -A: near such edges a PTR
    score and its neighbour PASSed with probability 0 on one side only (the
    realised delta was 116 times the declared one at epsilon 30, delta 1e-5).
    Every part of [-A, A] is reachable now: 40 successes of the e^-1 trials,
    then the fraction and the sign."""
    cal = ptr_calibration(1.0, 30.0, 1e-9)
    assert cal.half_width / cal.scale > 41.0
    script = [0.1] * 40 + [0.9] + [0.5] + [0.75]
    z = truncated_laplace(cal.scale, cal.half_width, _ScriptedUniforms(script))
    fraction = -math.log1p(-0.5 * -math.expm1(-1.0))
    assert z == pytest.approx(cal.scale * (40.0 + fraction), rel=1e-12)
    # the bottom end is no atom: u = 0 everywhere gives the centre's sign draw only
    script = [0.5] + [0.0] + [0.0]  # K = 0, F = 0, negative sign
    assert truncated_laplace(cal.scale, cal.half_width, _ScriptedUniforms(script)) == 0.0


def test_laplace_distribution():
    rng = np.random.default_rng(5)
    z = laplace(1.5, rng, size=100_000)
    assert stats.kstest(z, stats.laplace(scale=1.5).cdf).pvalue > ALPHA


# 50 successes of the e^-1 trials, a stop, the fraction's uniform, a positive sign:
# a draw of 50.47 scales, beyond NumPy's Laplace (36.7 scales at most).
_FAR_TAIL = [0.1] * 50 + [0.9] + [0.5] + [0.75]
_FAR = 50.0 - math.log1p(-0.5 * -math.expm1(-1.0))


@pytest.mark.parametrize("mechanism", ["laplace", "add_laplace", "distance_test", "tukey_ptr",
                                       "stability_histogram"])
def test_laplace_tests_reach_thresholds_beyond_the_uniform_grid(mechanism):
    """At delta = 1e-20 the thresholds lie 45-48 scales out: NumPy's Laplace never
    reached them (probability 0 where the neighbour's is positive); every Laplace
    draw of the mechanisms reaches them now."""
    rng = _ScriptedUniforms(_FAR_TAIL)
    if mechanism == "laplace":
        assert laplace(2.0, rng) == pytest.approx(2.0 * _FAR, rel=1e-12)
    elif mechanism == "add_laplace":
        assert add_laplace(np.zeros(1), 2.0, rng)[0] == pytest.approx(2.0 * _FAR, rel=1e-12)
    elif mechanism == "distance_test":
        passed, _, threshold = laplace_distance_test(0.0, 1.0, 1e-20, rng)
        assert threshold > 45.0 and passed
    elif mechanism == "tukey_ptr":
        assert tukey_ptr_test(0, 1.0, 1e-20, rng)
    else:
        assert list(stability_histogram(["a"], 2.0, 1e-20, rng)) == ["a"]


def test_ptr_k_table_of_the_issp_spec():
    # k = floor(tau + A) + 1 with sensitivity 4 and the paper split (eps/3, delta/3).
    table = {(0.5, 1e-5): 491, (1, 1e-6): 320, (1, 1e-9): 485, (8, 1e-6): 51}
    for (eps, delta), k in table.items():
        cal = ptr_calibration(4.0, eps / 3, delta / 3)
        assert math.floor(cal.fail_threshold) + 1 == k


def test_ptr_deterministic_pass_at_zero_and_fail_above_threshold():
    rng = np.random.default_rng(4)
    passes = [ptr_test(0.0, 4.0, 0.5, 1e-6, rng)[0] for _ in range(2000)]
    assert all(passes)
    threshold = ptr_calibration(4.0, 0.5, 1e-6).fail_threshold
    fails = [not ptr_test(threshold + 1e-9, 4.0, 0.5, 1e-6, rng)[0] for _ in range(2000)]
    assert all(fails)


def test_ptr_fail_prob_at_zero():
    rng = np.random.default_rng(5)
    beta = 0.05
    results = [ptr_test(0.0, 1.0, 1.0, 1e-3, rng, fail_prob=beta)[0] for _ in range(20_000)]
    fail_rate = 1 - np.mean(results)
    assert fail_rate == pytest.approx(beta, abs=5 * math.sqrt(beta * (1 - beta) / 20_000))


def test_ptr_empirical_pass_probabilities_satisfy_dp():
    """P[out | s] <= e^eps P[out | s'] + delta for |s - s'| <= Delta, both outcomes."""
    eps, delta, sens = 1.0, 0.05, 1.0
    cal = ptr_calibration(sens, eps, delta)
    rng = np.random.default_rng(6)
    n = 200_000
    z = truncated_laplace(cal.scale, cal.half_width, rng, size=n)
    scores = np.arange(0.0, cal.fail_threshold + 2 * sens, sens / 2)
    p_pass = np.array([np.mean(s + z <= cal.tau) for s in scores])
    se = math.sqrt(0.25 / n)
    step = 2  # scores[i + 2] - scores[i] == sens
    for i in range(len(scores) - step):
        a, b = p_pass[i], p_pass[i + step]
        for pa, pb in ((a, b), (b, a), (1 - a, 1 - b), (1 - b, 1 - a)):
            assert pa <= math.exp(eps) * pb + delta + 5 * se * (1 + math.exp(eps))
    # Tightness: P[FAIL | 0] = 0 and P[FAIL | Delta] = delta exactly, so the
    # delta of the guarantee is used up at the edge and a narrower truncation
    # would break DP.
    p_fail_delta = 1 - _truncated_laplace_cdf(cal.tau - sens, cal.scale, cal.half_width)
    assert float(p_fail_delta) == pytest.approx(delta, rel=1e-9)
    assert p_pass[0] == 1.0


def test_stability_histogram_lonely_bin_survives_with_delta_over_4():
    rng = np.random.default_rng(7)
    eps, delta = 1.0, 0.2
    trials = 40_000
    survived = sum(bool(stability_histogram(["a"], eps, delta, rng)) for _ in range(trials))
    rate = survived / trials
    assert rate == pytest.approx(delta / 4, abs=5 * math.sqrt(delta / 4 / trials))


def test_stability_mode_finds_the_populated_bin():
    rng = np.random.default_rng(8)
    labels = [3] * 400 + [4] * 100 + [7]
    assert stability_mode(labels, 1.0, 1e-6, rng) == 3
    assert stability_mode([1, 2, 3], 1.0, 1e-6, rng) is None


def test_exponential_mechanism_frequencies():
    rng = np.random.default_rng(9)
    utilities = np.array([0.0, -1.0, -2.0, -4.0])
    eps = 2.0
    probs = np.exp(eps * utilities / 2)
    probs /= probs.sum()
    draws = np.array([exponential_mechanism(utilities, 1.0, eps, rng) for _ in range(20_000)])
    counts = np.bincount(draws, minlength=4)
    chi2 = stats.chisquare(counts, probs * draws.size)
    assert chi2.pvalue > ALPHA


@pytest.mark.parametrize("n", [2_000, 100_000])
@pytest.mark.parametrize("epsilon", [0.05, 0.5])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e6])
def test_private_upper_bound_leaves_about_the_margin_above(n, epsilon, scale):
    rng = np.random.default_rng(10)
    values = scale * np.linalg.norm(rng.normal(size=(n, 10)), axis=1)
    margin = upper_bound_margin(epsilon)
    # Both Laplace draws stay within ln(4k/beta) of their scale w.p. 1 - beta.
    k, beta = 481, 1e-4
    slack = (4 / epsilon + 2 / epsilon) * np.log(4 * k / beta)
    for seed in range(20):
        bins = bound_bins()
        bound = private_upper_bound(
            counts_above(values, bins), bins, epsilon, np.random.default_rng(seed)
        )
        above = np.sum(values > bound)
        assert bound <= values.max() * 2 ** (1 / 8) or above == 0
        assert above <= margin + slack
        if margin < n:
            # one bin (2^(1/8)) below the bound there are at least margin - slack values
            assert np.sum(values > bound / 2 ** (1 / 8)) >= min(margin - slack, n) - 1


def test_private_upper_bound_handles_ties():
    """One-hot rows all have norm 1: the bound must be 1 (one bin), not far above."""
    values = np.ones(5_000)
    bins = bound_bins()
    counts = counts_above(values, bins)
    bounds = [private_upper_bound(counts, bins, 0.5, np.random.default_rng(s)) for s in range(50)]
    assert all(1.0 <= b <= 2 ** (1 / 8) * 1.0000001 for b in bounds)


def test_above_threshold_output_frequencies_on_neighbours():
    """P[index = i] on neighbouring query vectors within e^eps (5 SE)."""
    eps = 1.0
    queries = np.array([-5.0, -3.0, -1.0, 0.0, 1.0])
    neighbour = queries + np.array([1.0, 1.0, 1.0, 0.0, -1.0])
    n_draws = 40_000
    freqs = []
    for q, seed in ((queries, 13), (neighbour, 14)):
        rng = np.random.default_rng(seed)
        idx = [above_threshold(q, 0.0, eps, rng) for _ in range(n_draws)]
        idx = np.array([len(q) if i is None else i for i in idx])
        freqs.append(np.bincount(idx, minlength=len(q) + 1) / n_draws)
    p, p2 = freqs
    for a, b in ((p, p2), (p2, p)):
        se = np.sqrt(np.maximum(a, b) / n_draws)
        assert np.all(a <= np.exp(eps) * b + 5 * se * (1 + np.exp(eps)))


# ---------------------------------------------------------------------------
# K-ary randomised response: the realised change probability on the uniform grid
# ---------------------------------------------------------------------------
def _exp_lower_bound(epsilon):
    """A rational lower bound on e^epsilon (400-bit evaluation, widened)."""
    from fractions import Fraction

    import mpmath

    with mpmath.workprec(400):
        value = mpmath.exp(mpmath.mpf(epsilon))  # a float converts exactly
        man, exp = value.man_exp
    return Fraction(man) * Fraction(2) ** exp * (1 - Fraction(1, 2**380))


@pytest.mark.parametrize("n_outputs", [2, 10, 1000])
@pytest.mark.parametrize("epsilon", [1e-15, 1e-10, 1e-6, 1.0, 37.0, 40.0, 800.0])
def test_randomized_response_realised_change_probability_is_valid(epsilon, n_outputs):
    # With c the realised probability of a change (keep: 1 - c, each other
    # value: c / (K - 1)), every output's probability ratio under two inputs
    # is at most e^eps iff (K-1)/(e^eps+K-1) <= c <= (K-1)e^eps/(1+(K-1)e^eps).
    # The draw u < q with u on the 2**-53 grid realises ceil(q 2**53) 2**-53.
    from fractions import Fraction

    from skprivreg.mechanisms import randomized_response
    from skprivreg.mechanisms._moments import _change_probability

    K = n_outputs
    q = _change_probability(epsilon, K)
    if q is None:
        # The interval is too narrow for the grid: a uniform draw that
        # ignores the input (ratio exactly 1). Only at tiny epsilon.
        assert epsilon < 1e-9
        outputs = [randomized_response(np.full(5000, i), K, epsilon, np.random.default_rng(7))
                   for i in (0, K - 1)]
        assert np.array_equal(outputs[0], outputs[1])
        return
    realised = Fraction(math.ceil(Fraction(q) * 2**53), 2**53)
    e_low = _exp_lower_bound(epsilon)  # the checks below are conservative with it
    c_star_at_most = Fraction(K - 1) / (e_low + K - 1)
    c_max_at_least = (K - 1) * e_low / (1 + (K - 1) * e_low)
    assert c_star_at_most <= realised <= c_max_at_least
    # Utility: hardly above the smallest valid value.
    assert realised <= c_star_at_most * (1 + Fraction(1, 10**13)) + Fraction(1, 2**53)


def test_randomized_response_at_tiny_epsilon_is_uniform():
    from skprivreg.mechanisms import randomized_response

    rng = np.random.default_rng(11)
    out = randomized_response(np.zeros(20_000, dtype=np.int64), 10, 1e-15, rng)
    counts = np.bincount(out, minlength=10)
    assert stats.chisquare(counts).pvalue > ALPHA


@pytest.mark.parametrize("sensitivity", [5e-324, 1e-310, 2e-308])
def test_a_noise_scale_below_the_normal_range_is_refused(sensitivity):
    # sigma = sensitivity / mu rounds towards 0 below float64's normal range:
    # the release would carry less noise than its ledger states, or none.
    from skprivreg.mechanisms import gaussian_event_from_mu, gaussian_sigma

    with pytest.raises(ValueError, match="too small to calibrate"):
        gaussian_sigma(sensitivity, 50.0, 1e-5)
    with pytest.raises(ValueError, match="too small to calibrate"):
        gaussian_event_from_mu("x", sensitivity, 10.0, 1e-5)
    # The smallest scale taken keeps its relative precision.
    assert gaussian_event_from_mu("x", 1e-300, 10.0, 1e-5).sigma == pytest.approx(1e-301)


def test_laplace_and_gumbel_scales_below_the_normal_range_are_refused():
    from skprivreg.mechanisms import gumbel_top_k, laplace_distance_test

    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="too small to calibrate"):
        laplace_distance_test(0.0, 50.0, 1e-6, rng, sensitivity=5e-324)
    with pytest.raises(ValueError, match="too small to calibrate"):
        gumbel_top_k([0.0, 1e-320], 1, 5e-324, 50.0, rng)


def test_square_root_bounds_are_never_rounded_below_the_exact_root():
    # math.sqrt(3) rounds below sqrt(3): a row (1, 1, 1) of the mapped cube had a norm
    # above LinearRegression's row bound, and the scaler's 2 sqrt(d) was short too.
    from fractions import Fraction

    from skprivreg.linear_model._linear import range_map
    from skprivreg.mechanisms import moment_sums_sensitivity, sqrt_at_least

    below = [d for d in range(1, 1000) if Fraction(math.sqrt(d)) ** 2 < d]
    assert 3 in below
    for d in range(1, 1000):
        root = sqrt_at_least(d)
        assert Fraction(root) ** 2 >= d > Fraction(math.nextafter(root, 0.0)) ** 2
        assert Fraction(moment_sums_sensitivity(d)) ** 2 >= 4 * d
    for d in below[:20]:
        assert Fraction(range_map((-1.0, 1.0), (-1.0, 1.0), d).row_bound) ** 2 >= d
