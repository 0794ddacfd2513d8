"""The noise an estimator actually adds matches the sigma its ledger records.

Each test captures the noisy statistics where they enter the solve (by
replacing the module-level solve function the estimator calls), subtracts the
exact statistic computed here from the clipped, intercept-augmented data, and
compares the empirical variance of the noise over many fits with ``sigma^2``
of the ledger event (:func:`_privacy_harness.assert_gaussian_noise`: a
chi-square interval at 1e-9 per side). Halving the noise (variance ratio
0.25) or dropping it (ratio 0) is far outside every interval used here.

Also here: AboveThreshold and the private bounds against their exact output
distribution, and the ledger the accountant receives against
``privacy_spent_`` for every estimator.
"""

import math

import _privacy_harness as _h
import numpy as np
import pytest
from scipy.stats import norm

import skprivreg.label_dp._baseline as baseline_module
import skprivreg.linear_model._adassp as adassp_module
import skprivreg.linear_model._independent_ssp as issp_naive_module
import skprivreg.linear_model._ssp as ssp_module
from skprivreg import (
    AdaSSPRegressor,
    BudgetAccountant,
    GaussianLabelNoiseRegressor,
    IndependentSSPRegressor,
    ISSPRegressor,
    PrivateLassoRegressor,
    PrivateLassoSupportSelector,
    PrivateTopSSelector,
    ReuseCovRegressor,
    SSPRegressor,
    WeightedLBARegressor,
)
from skprivreg.bounds import private_norm_bound
from skprivreg.exceptions import PrivacyCheckFailedError
from skprivreg.mechanisms import (
    above_threshold,
    bound_bins,
    counts_above,
    private_upper_bound,
    upper_bound_margin,
)

above_threshold_distribution = _h.above_threshold_distribution
assert_gaussian_noise = _h.assert_gaussian_noise
assert_matches_distribution = _h.assert_matches_distribution
assert_fair_signs = _h.assert_fair_signs
assert_same_ledger = _h.assert_same_ledger
bins_index = _h.bins_index
event = _h.event
exact_gram_and_cross = _h.exact_gram_and_cross
quiet = _h.quiet
upper_triangle = _h.upper_triangle

N_FITS = 250


def _design(n=40, d=3, seed=0):
    """Fixed data with a few rows above x_bound=1 and labels above y_bound=2.

    The test clips them itself, so a skipped clip shows as a biased noise mean.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.4
    X[:3] *= 6.0
    y = X.sum(axis=1) + 0.5 * rng.normal(size=n)
    y[:2] = [7.0, -9.0]
    return X, y


def _capture(monkeypatch, module, name, result):
    """Replace ``module.name`` by a recorder of its arguments returning ``result(*args)``."""
    calls = []

    def recorder(*args, **kwargs):
        calls.append((args, kwargs))
        return result(*args, **kwargs)

    monkeypatch.setattr(module, name, recorder)
    return calls


def _zeros_like_rhs(M, B, *args, **kwargs):
    return np.zeros_like(np.asarray(B, dtype=np.float64))


# ---------------------------------------------------------------------------
# SSP and AdaSSP: the Gram and X^T y noise at the solve
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("composition", ["gdp", "basic"])
def test_ssp_noise_matches_ledger(monkeypatch, composition):
    X, y = _design()
    XtX, XtY = exact_gram_and_cross(X, y, 1.0, 2.0)
    calls = _capture(monkeypatch, ssp_module, "solve_psd_repaired", _zeros_like_rhs)
    gram_noise, cross_noise = [], []
    with quiet():
        for _ in range(N_FITS):
            est = SSPRegressor(epsilon=1.0, delta=1e-5, x_bound=1.0, y_bound=2.0,
                               composition=composition).fit(X, y)
            M, B = calls[-1][0][:2]
            gram_noise.append(upper_triangle(M - est.ridge_ * np.eye(M.shape[0]) - XtX))
            cross_noise.append(B.reshape(XtY.shape) - XtY)
    assert len(calls) == N_FITS
    ledger = est.privacy_spent_
    assert_gaussian_noise(gram_noise, event(ledger, "XtX").sigma, "SSP X^T X noise")
    assert_gaussian_noise(cross_noise, event(ledger, "XtY").sigma, "SSP X^T y noise")


def _orthogonal_design(n_copies):
    """Rows (+-1, +-1, +-1)/sqrt(3) in every sign pattern: Z^T Z = diag(n/3, n/3, n/3, n)."""
    signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * 3)).reshape(3, -1).T / math.sqrt(3)
    X = np.tile(signs, (n_copies, 1))
    y = X @ np.array([1.0, -1.0, 0.5]) + np.tile([0.3, -0.3], X.shape[0] // 2)
    return X, y


def test_adassp_noise_matches_ledger(monkeypatch):
    # lambda_min(Z^T Z) = n/3 must sit far above the downward shift so that
    # the private eigenvalue is never truncated at 0 (checked below).
    X, y = _orthogonal_design(n_copies=60)
    XtX, XtY = exact_gram_and_cross(X, y, 1.0, 2.0)
    lambda_min = float(np.linalg.eigvalsh(XtX)[0])
    solves = _capture(monkeypatch, adassp_module, "solve_psd_repaired", _zeros_like_rhs)
    ridges = _capture(monkeypatch, adassp_module, "adassp_ridge", adassp_module.adassp_ridge)
    gram_noise, cross_noise, lambda_noise = [], [], []
    failure_prob = 0.05
    with quiet():
        for _ in range(N_FITS):
            est = AdaSSPRegressor(epsilon=4.0, delta=1e-5, x_bound=1.0, y_bound=2.0,
                                  failure_prob=failure_prob).fit(X, y)
            M, B = solves[-1][0][:2]
            gram_noise.append(upper_triangle(M - est.ridge_ * np.eye(M.shape[0]) - XtX))
            cross_noise.append(B.reshape(XtY.shape) - XtY)
            lambda_noise.append(ridges[-1][0][0])
    ledger = est.privacy_spent_
    lam = event(ledger, "lambda_min")
    # The release is max(lambda_min + N(0, s^2) - s z, 0), z = Phi^{-1}(1 - rho/3)
    # (Wang 2018, Algorithm 2); undo the documented shift.
    shift = lam.sigma * norm.ppf(1 - failure_prob / 3)
    assert lambda_min - shift > 7 * lam.sigma  # truncation at 0: probability < 1e-11
    lambda_noise = np.asarray(lambda_noise) + shift - lambda_min
    assert len(lambda_noise) == N_FITS
    assert_gaussian_noise(gram_noise, event(ledger, "XtX").sigma, "AdaSSP X^T X noise")
    assert_gaussian_noise(cross_noise, event(ledger, "XtY").sigma, "AdaSSP X^T y noise")
    assert_gaussian_noise(lambda_noise, lam.sigma, "AdaSSP lambda_min noise")


# ---------------------------------------------------------------------------
# IndependentSSP: l runs, each with its own covariance and association noise
# ---------------------------------------------------------------------------
class _RecordingNumpy:
    """The ``np`` of a module, with ``linalg.eigh`` and ``einsum`` recording their inputs."""

    def __init__(self, record):
        self._record = record
        outer = self

        class _Linalg:
            def __getattr__(self, name):
                return getattr(np.linalg, name)

            @staticmethod
            def eigh(M, *args, **kwargs):
                outer._record["eigh"].append(np.array(M))
                return np.linalg.eigh(M, *args, **kwargs)

        self.linalg = _Linalg()

    def __getattr__(self, name):
        return getattr(np, name)

    def einsum(self, subscripts, *operands, **kwargs):
        self._record["einsum"].append((subscripts, [np.array(o) for o in operands]))
        return np.einsum(subscripts, *operands, **kwargs)


@pytest.mark.parametrize("composition", ["gdp", "basic"])
def test_independent_ssp_noise_matches_ledger(monkeypatch, composition):
    X, y = _design(n=40, d=2)
    n_outputs = 6
    Y = np.column_stack([y * (1 + 0.1 * j) for j in range(n_outputs)])
    XtX, XtY = exact_gram_and_cross(X, Y, 1.0, 2.0)
    n = X.shape[0]
    record = {"eigh": [], "einsum": []}
    monkeypatch.setattr(issp_naive_module, "np", _RecordingNumpy(record))
    eigh_each = issp_naive_module._eigh_each

    def recording_eigh_each(M):
        record["eigh"].append(np.array(M))
        return eigh_each(M)

    monkeypatch.setattr(issp_naive_module, "_eigh_each", recording_eigh_each)
    cov_noise, assoc_noise = [], []
    n_fits = 120
    with quiet():
        for _ in range(n_fits):
            record["eigh"].clear()
            record["einsum"].clear()
            est = IndependentSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=1.0, y_bound=2.0,
                                          composition=composition, ridge="theory").fit(X, Y)
            # The noisy covariances of all runs (k, p, p), and the noisy
            # associations g (k, p), first operand pair of the solve's einsum.
            (M,) = record["eigh"]
            (g,) = [ops[1] for sub, ops in record["einsum"] if sub == "kji,kj->ki"]
            p = M.shape[-1]
            upper = upper_triangle(M - est.ridge_ * np.eye(p) - XtX / n)
            # The intercept corner c^2 is the same for every dataset: exact.
            assert np.all(np.abs(upper[..., -1]) < 1e-12)
            cov_noise.append(upper[..., :-1])
            assoc_noise.append(g - (XtY / n).T)
    ledger = est.privacy_spent_
    if composition == "gdp":
        # One joint Gaussian release; the noise scales it added are its components.
        joint = event(ledger, "covariance+association x l")
        assert (joint.notion, joint.neighbouring) == ("full", "replace-one")
        assert joint.mu == pytest.approx(ledger.mu, rel=1e-12)
        sigmas = dict(joint.components)
    else:
        sigmas = {"covariance": event(ledger, "covariance x l").sigma,
                  "association": event(ledger, "association x l").sigma}
    assert_gaussian_noise(cov_noise, sigmas["covariance"], "IndependentSSP covariance noise")
    assert_gaussian_noise(assoc_noise, sigmas["association"],
                          "IndependentSSP association noise")


# ---------------------------------------------------------------------------
# ReuseCov: one covariance noise, one association noise (full and label DP)
# ---------------------------------------------------------------------------
_capture_reusecov = _h.capture_reusecov


@pytest.mark.parametrize("privacy", ["full", "feature", "label"])
def test_reusecov_noise_matches_ledger(monkeypatch, privacy):
    X, y = _design(n=40, d=2)
    n_outputs = 8
    Y = np.column_stack([y * (1 + 0.1 * j) for j in range(n_outputs)])
    n = X.shape[0]
    x_bound = None if privacy == "label" else 1.0  # X is public under label DP
    y_bound = None if privacy == "feature" else 2.0  # Y is public under feature DP
    XtX, XtY = exact_gram_and_cross(X, Y, x_bound, y_bound)
    record = _capture_reusecov(monkeypatch)
    cov_noise, assoc_noise = [], []
    with quiet():
        for _ in range(N_FITS):
            est = ReuseCovRegressor(epsilon=1.0, delta=1e-5, privacy=privacy,
                                    x_bound=x_bound, y_bound=y_bound).fit(X, Y)
            (M, ridge), = record["M"][-1:]
            (G,) = record["G"][-1:]
            upper = upper_triangle(M - ridge * np.eye(M.shape[0]) - XtX / n)
            if privacy != "label":
                # The intercept corner c^2 is the same for every dataset: exact.
                assert abs(upper[-1]) < 1e-12
                upper = upper[:-1]
            cov_noise.append(upper)
            assoc_noise.append(G - XtY / n)
    assert len(record["M"]) == len(record["G"]) == N_FITS
    ledger = est.privacy_spent_
    if privacy == "label":
        assoc = event(ledger, "association[0]")
        assert (assoc.notion, assoc.neighbouring) == ("label", "replace-one")
        assert_gaussian_noise(assoc_noise, assoc.sigma, "ReuseCov (label) association noise")
    else:
        # One joint Gaussian release of the covariance and the association.
        joint = event(ledger, "covariance+association[0]")
        assert (joint.notion, joint.neighbouring) == (privacy, "replace-one")
        assert joint.mu == pytest.approx(ledger.mu, rel=1e-12)
        sigmas = dict(joint.components)
        assert_gaussian_noise(assoc_noise, sigmas["association"],
                              f"ReuseCov ({privacy}) association noise")
        assert_gaussian_noise(cov_noise, sigmas["covariance"], "ReuseCov covariance noise")
    if privacy == "label":
        # Label DP: X is public, the covariance is exact and costs nothing.
        assert [e.name for e in ledger.events] == ["association[0]"]
        assert np.max(np.abs(cov_noise)) < 1e-9


# ---------------------------------------------------------------------------
# The label-noise baseline
# ---------------------------------------------------------------------------
def test_gaussian_label_noise_matches_ledger(monkeypatch):
    X, y = _design(n=100, d=2)
    bounds = (-2.0, 3.0)
    clipped = np.clip(y, *bounds)
    captured = _capture(
        monkeypatch, baseline_module, "fit_on_aggregates",
        lambda Z, noisy, **kw: np.zeros(Z.shape[1]),
    )
    noise = []
    with quiet():
        for _ in range(60):
            est = GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-6, y_bound=bounds,
                                              estimator="ridge").fit(X, y)
            noise.append(captured[-1][0][1] - clipped)
    ledger = est.privacy_spent_
    label = event(ledger, "label_noise")
    assert label.notion == "label"
    assert_gaussian_noise(noise, label.sigma, "label-noise baseline")


# ---------------------------------------------------------------------------
# Weighted LBA: the secret weights; LLP: the label noise
# ---------------------------------------------------------------------------
def _lba_data(n, d, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.clip(X @ np.arange(1.0, d + 1) + rng.normal(size=n), -9.5, 9.5)
    return X, y


def test_lba_secret_weights_are_standard_normal():
    # Bags of k = p + 1 rows: the bag's [Z, y] is a k x k matrix of full rank,
    # so the released (Zbar_j, ybar_j) = w_j^T [Z, y] determine the secret
    # weights w_j exactly (the test knows y; the analyst does not). The
    # accountant assumes i.i.d. N(0, 1) weights: check variance 1, mean 0 and
    # that two weights of one bag are uncorrelated (E[w_1 w_2] = 0, Var = 1).
    d = 2
    k = d + 2
    X, y = _lba_data(400, d)
    Z = np.column_stack([X, np.ones(len(X))])
    weights = []
    with quiet():
        for _ in range(12):
            est = WeightedLBARegressor(
                epsilon=8.0, delta=1e-6, bag_size=k, y_bound=(-10.0, 10.0),
                assumption="declared", residual_var_lower_bound=1e6,
            ).fit(X, y)
            agg = est.aggregated_
            released = np.column_stack([agg.X_agg, agg.w_sum, agg.y_agg])
            for bag, row in zip(est.bag_indices_, released):
                A = np.column_stack([Z[bag], y[bag]])  # (k, k)
                weights.append(np.linalg.solve(A.T, row))
    weights = np.asarray(weights)
    assert_gaussian_noise(weights, 1.0, "LBA secret weights")
    assert_fair_signs(weights[:, 0] * weights[:, 1], "LBA weight products")


def test_llp_label_noise_matches_noise_scale():
    # noise_fraction=1: every label gets N(0, s^2); the released weights w_j
    # and the exact labels give r_j = ybar_j - w_j^T y_bag = w_j^T e_bag,
    # which is N(0, s^2 ||w_j||^2). So r_j / ||w_j|| has variance s^2.
    X, y = _lba_data(2000, 2)
    scale = 8.0
    residuals = []
    with quiet():
        for _ in range(4):
            est = WeightedLBARegressor(
                epsilon=8.0, delta=1e-5, mode="llp", bag_size=10, y_bound=(-10.0, 10.0),
                noise_fraction=1.0, noise_scale=scale,
            ).fit(X, y)
            agg = est.aggregated_
            exact = np.einsum("jr,jr->j", agg.weights, y[agg.bag_indices])
            residuals.append((agg.y_agg - exact) / np.linalg.norm(agg.weights, axis=1))
    assert_gaussian_noise(residuals, scale, "LLP label noise")


# ---------------------------------------------------------------------------
# AboveThreshold and the private bounds, against their exact distribution
# ---------------------------------------------------------------------------
def test_above_threshold_matches_its_exact_distribution():
    # Equal queries at the threshold: without the threshold noise the index
    # would be geometric(1/2); with it, a mixture with a heavier tail. The
    # exact law is computed by quadrature from the algorithm's definition.
    queries = np.zeros(8)
    epsilon = 1.0
    probs = above_threshold_distribution(queries, 0.0, epsilon)
    rng = np.random.default_rng()
    draws = [above_threshold(queries, 0.0, epsilon, rng) for _ in range(20_000)]
    draws = np.array([queries.size if i is None else i for i in draws])
    assert_matches_distribution(draws, probs, "above_threshold index")


def _geometric_values(n, low=1.0):
    """n values spaced by the bins' ratio 2^(1/8): counts above a bin drop by one per bin."""
    return low * 2.0 ** (np.arange(n) / 8.0 + 1.0 / 16.0)


def test_private_upper_bound_matches_its_exact_distribution():
    bins = bound_bins()
    counts = counts_above(_geometric_values(120), bins)
    epsilon = 2.0
    n_above = upper_bound_margin(epsilon)
    probs = above_threshold_distribution(-counts.astype(float), -n_above, epsilon)
    # 'None' returns the top bin.
    probs[-2] += probs[-1]
    probs = probs[:-1]
    rng = np.random.default_rng()
    draws = [private_upper_bound(counts, bins, epsilon, rng) for _ in range(3000)]
    assert_matches_distribution(bins_index(draws, bins), probs, "private_upper_bound")
    draws = [
        private_norm_bound(counts, 120, epsilon, rng, name="x_bound", bins=bins)[0]
        for _ in range(3000)
    ]
    assert_matches_distribution(bins_index(draws, bins), probs, "private_norm_bound")


@pytest.mark.parametrize("Estimator, missing", [(SSPRegressor, "x_bound"),
                                                (AdaSSPRegressor, "y_bound")])
def test_private_bound_of_a_fit_matches_its_exact_distribution(Estimator, missing):
    # One missing bound, epsilon_b = bounds_budget * epsilon = 4: the
    # minimum n is 4 (6/4) ln 2000 = 46. Row norms (or |y|) are geometric, so
    # the count above each public bin drops by one per bin and the released
    # bound spreads over several bins.
    n, d = 150, 2
    values = _geometric_values(n, low=0.5)
    rng = np.random.default_rng(3)
    directions = rng.normal(size=(n, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    if missing == "x_bound":
        X = directions * values[:, None]
        y = rng.uniform(-1, 1, size=n)
        declared = {"y_bound": 1.0}
        row_values = np.hypot(values, 0.0)
    else:
        X = directions * 0.5
        y = values * rng.choice([-1.0, 1.0], size=n)
        declared = {"x_bound": 1.0}
        row_values = values
    epsilon_b = 4.0
    bins = bound_bins()
    counts = counts_above(row_values, bins)
    probs = above_threshold_distribution(-counts.astype(float), -upper_bound_margin(epsilon_b),
                                         epsilon_b)
    probs[-2] += probs[-1]
    probs = probs[:-1]
    released = []
    with quiet():
        for _ in range(300):
            est = Estimator(epsilon=8.0, delta=1e-5, bounds_budget=0.5, **declared).fit(X, y)
            released.append(getattr(est, missing + "_"))
    assert event(est.privacy_spent_, missing).epsilon == pytest.approx(epsilon_b)
    assert_matches_distribution(bins_index(released, bins), probs,
                                f"{Estimator.__name__} {missing}")


# ---------------------------------------------------------------------------
# The accountant receives exactly privacy_spent_
# ---------------------------------------------------------------------------
def _multi(n=400, d=3, l=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.5
    return X, X @ rng.normal(size=(d, l)) + 0.3 * rng.normal(size=(n, l))


def _single(n=400, d=3, seed=0):
    X, Y = _multi(n, d, 1, seed)
    return X, Y[:, 0]


def _sparse(n=3000, p=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    theta = np.zeros(p)
    theta[:3] = [0.5, -0.5, 0.5]
    return X, X @ theta + rng.normal(size=n)


LEDGER_CASES = {
    "ssp-declared": (lambda: SSPRegressor(epsilon=1.0, delta=1e-5, x_bound=2.0, y_bound=3.0),
                     _single),
    "ssp-private-bounds": (
        lambda: SSPRegressor(epsilon=8.0, delta=1e-5, bounds_budget=0.5), lambda: _single(n=600)),
    "adassp-private-bound": (
        lambda: AdaSSPRegressor(epsilon=8.0, delta=1e-5, x_bound=2.0, bounds_budget=0.5),
        lambda: _single(n=600)),
    "adassp-paper": (
        lambda: AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=2.0, y_bound=3.0,
                                constants="paper"),
        _single),
    "independent-ssp": (
        lambda: IndependentSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=2.0, y_bound=3.0), _multi),
    "reusecov-full": (lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0),
                      _multi),
    "reusecov-label": (
        lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, privacy="label", y_bound=3.0), _multi),
    "reusecov-feature-proj": (
        lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, privacy="feature", mechanism="proj",
                                  x_bound=2.0), _multi),
    "reusecov-zero-out": (
        lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0,
                                  neighbouring="zero-out"), _multi),
    "label-noise": (
        lambda: GaussianLabelNoiseRegressor(epsilon=1.0, y_bound=(-3.0, 3.0)), _single),
    "lba-declared": (
        lambda: WeightedLBARegressor(epsilon=8.0, bag_size=50, y_bound=(-10.0, 10.0),
                                     assumption="declared", residual_var_lower_bound=1e4),
        lambda: _lba_data(4000, 2)),
    "lba-ptr": (
        lambda: WeightedLBARegressor(epsilon=8.0, bag_size=800, n_bags_min=4, y_bound=(-10.0,
                                                                                       10.0)),
        lambda: _lba_data(10_000, 2)),
    "llp": (
        lambda: WeightedLBARegressor(epsilon=8.0, delta=1e-5, mode="llp", bag_size=10,
                                     y_bound=(-10.0, 10.0), noise_fraction=1.0,
                                     noise_scale=8.0),
        lambda: _lba_data(2000, 2)),
    "issp": (lambda: ISSPRegressor(on_fail="zero", residual_bound=1.0, predicted_fail="spend"),
             _single),
    "lasso-support": (
        lambda: PrivateLassoSupportSelector(epsilon=2.0, delta=1e-6, max_features=3,
                                            selection_rule="lars", on_fail="empty"),
        _sparse),
    "lasso-regressor": (
        lambda: PrivateLassoRegressor(max_features=3, selection_rule="lars",
                                      on_fail="empty", x_range=(-3.0, 3.0), y_bound=5.0),
        _sparse),
    "top-s": (lambda: PrivateTopSSelector(n_features_to_select=2, x_range=(-4.0, 4.0),
                                          y_bound=4.0),
              _sparse),
}


@pytest.mark.parametrize("case", sorted(LEDGER_CASES))
def test_accountant_receives_privacy_spent(case):
    make, data = LEDGER_CASES[case]
    X, y = data()
    acc = BudgetAccountant()
    est = make().set_params(accountant=acc)
    with quiet():
        try:
            est.fit(X, y)
        except PrivacyCheckFailedError:  # a refused private test still spends
            assert case == "lba-ptr"
    assert acc.n_spends == 1, f"{case}: {acc.n_spends} spends for one fit"
    (received,) = acc.ledgers
    assert len(est.privacy_spent_.events) >= 1
    assert_same_ledger(received, est.privacy_spent_, case)
    if case in ("ssp-private-bounds", "adassp-private-bound"):
        names = [e.name for e in received.events]
        assert {"x_bound", "y_bound"} & set(names), names


def test_accountant_receives_new_releases_of_a_reused_covariance():
    X, Y = _multi()
    acc = BudgetAccountant()
    with quiet():
        first = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0).fit(X, Y)
        second = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0,
                                   covariance=first.export_covariance(), accountant=acc).fit(X, Y)
    (received,) = acc.ledgers
    new = [e for e in second.privacy_spent_.events if not e.name.endswith("[reused]")]
    reused = [e for e in second.privacy_spent_.events if e.name.endswith("[reused]")]
    assert [e.name for e in reused] == ["covariance[reused]"]
    assert [e.name for e in received.events] == [e.name for e in new]
    for got, want in zip(received.events, new):
        for field in ("notion", "neighbouring", "epsilon", "delta", "mu", "sigma"):
            assert getattr(got, field) == getattr(want, field), field
