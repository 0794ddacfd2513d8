"""Bags, weights, aggregates, the conditional-Gaussian law and the release.

Spec §5.1-5.3, 5.5, 5.8, 5.10 and 5.12.
"""

import math
import pickle
import warnings

import numpy as np
import pytest
from scipy import stats

from skprivreg.exceptions import PrivacyLeakWarning
from skprivreg.label_dp import AggregatedDataset, LLPDataset, aggregate, lba_privacy_profile
from skprivreg.label_dp._bags import (
    bag_residual_norms,
    lba_aggregate,
    llp_noise_mask,
    sample_bags,
    sample_lba_weights,
)

from ._gauss import configuration_delta


def _quiet(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return aggregate(**kwargs)


def test_aggregates_equal_explicit_loops():
    rng = np.random.default_rng(1)
    n, d, k, m = 97, 4, 9, 10
    X = rng.normal(size=(n, d))
    y = rng.normal(size=n)
    Z = np.column_stack([X, np.ones(n)])
    bags, dropped = sample_bags(n, k, m, rng)
    W = rng.normal(size=(m, k))
    Zbar, ybar = lba_aggregate(Z, y, bags, W)
    for j in range(m):
        zj = np.zeros(d + 1)
        yj = 0.0
        for r in range(k):
            zj += W[j, r] * Z[bags[j, r]]
            yj += W[j, r] * y[bags[j, r]]
        np.testing.assert_allclose(Zbar[j], zj, rtol=1e-12, atol=1e-13)
        assert ybar[j] == pytest.approx(yj, rel=1e-12, abs=1e-13)
    np.testing.assert_allclose(Zbar[:, -1], W.sum(axis=1), rtol=1e-12)


def test_secret_weights_are_standard_normal():
    W = sample_lba_weights(1000, 200, np.random.default_rng(12345)).ravel()
    assert W.size == 200_000
    assert stats.kstest(W, "norm").pvalue > 1e-3
    assert abs(W.mean()) < 0.01
    assert abs(W.var() - 1) < 0.01


def test_weights_and_partition_do_not_depend_on_labels(fixed_noise):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(600, 2))
    y = rng.uniform(0, 1, size=600)
    kwargs = dict(assumption="none", bag_size=30, y_bound=(0, 1), random_state=7)
    ds1, _ = _quiet(X=X, y=y, **kwargs)
    ds2, _ = _quiet(X=X, y=rng.permutation(y), **kwargs)
    np.testing.assert_array_equal(ds1.bag_indices, ds2.bag_indices)
    # same weights: the feature aggregates are identical
    np.testing.assert_array_equal(ds1.X_agg, ds2.X_agg)
    np.testing.assert_array_equal(ds1.w_sum, ds2.w_sum)
    assert not np.array_equal(ds1.y_agg, ds2.y_agg)


def test_bags_are_disjoint_of_size_k_and_drop_the_rest():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(103, 2))
    ds, _ = _quiet(X=X, y=rng.normal(size=103), assumption="none", bag_size=10, random_state=1)
    bags = ds.bag_indices
    assert bags.shape == (10, 10)
    assert len(np.unique(bags)) == bags.size
    assert ds.n_samples - bags.size == 3
    bags, dropped = sample_bags(103, 10, 10, rng)
    assert dropped.size == 3 and set(dropped).isdisjoint(bags.ravel())


def test_bags_are_uniformly_random():
    n, k = 50, 7
    m = n // k
    n_seeds = 2000
    inclusion = np.zeros(n)
    pair = 0
    for seed in range(n_seeds):
        bags, _ = sample_bags(n, k, m, np.random.default_rng(seed))
        inclusion[bags.ravel()] += 1
        row = np.nonzero((bags == 0).any(axis=1))[0]
        if row.size and (bags[row[0]] == 1).any():
            pair += 1
    p_in = m * k / n
    sd = math.sqrt(n_seeds * p_in * (1 - p_in))
    assert np.all(np.abs(inclusion - n_seeds * p_in) <= 5 * sd)
    p_pair = m * k * (k - 1) / (n * (n - 1))
    sd_pair = math.sqrt(n_seeds * p_pair * (1 - p_pair))
    assert abs(pair - n_seeds * p_pair) <= 5 * sd_pair


def test_llp_noise_counts():
    rng = np.random.default_rng(4)
    n, k, m = 1000, 40, 24
    bags, _ = sample_bags(n, k, m, rng)
    mask = llp_noise_mask(bags, n, 0.13, "per_bag", rng)
    assert np.all(mask[bags].sum(axis=1) == math.ceil(0.13 * k))
    assert mask.sum() == m * math.ceil(0.13 * k)
    mask = llp_noise_mask(bags, n, 0.13, "global", rng)
    assert mask.sum() == math.floor(0.13 * n)


def test_llp_noised_members_are_a_uniform_random_subset_of_each_bag():
    """Per bag, the noised members are a uniformly random q0-subset: over 2,000
    bags each of the k slots is noised in q0/k of them (5 binomial standard
    deviations), so no slot of a bag is noised by its position."""
    rng = np.random.default_rng(5)
    k, m, rho = 10, 2000, 0.3
    n = k * m
    bags = np.arange(n).reshape(m, k)
    mask = llp_noise_mask(bags, n, rho, "per_bag", rng)
    q0 = math.ceil(rho * k)
    per_slot = mask[bags].sum(axis=0)
    p = q0 / k
    assert np.all(np.abs(per_slot - m * p) <= 5 * math.sqrt(m * p * (1 - p)))


def test_llp_linear_fit_equals_ols_on_aggregates():
    from skprivreg.label_dp import WeightedLBARegressor

    rng = np.random.default_rng(5)
    n = 4000
    X = rng.normal(size=(n, 3))
    y = np.clip(X @ [1.0, -1.0, 2.0] + rng.normal(size=n), -8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        est = WeightedLBARegressor(
            mode="llp", assumption="none", bag_size=20, y_bound=(-8, 8),
            noise_fraction=0.5, random_state=0,
        ).fit(X, y)
    ds = est.aggregated_
    Zbar = ds.design(X)
    Z = np.column_stack([X, np.ones(n)])
    np.testing.assert_allclose(Zbar, lba_aggregate(Z, None, ds.bag_indices, ds.weights)[0])
    beta = np.linalg.lstsq(Zbar, ds.y_agg, rcond=None)[0]
    np.testing.assert_allclose(est.coef_, beta[:-1], rtol=1e-8)
    assert est.intercept_ == pytest.approx(beta[-1], rel=1e-8, abs=1e-10)


def _random_bag(rng, k=200, p=6):
    Z = np.column_stack([rng.normal(size=(k, p - 1)), np.ones(k)])
    y = np.clip(Z[:, :-1] @ rng.normal(size=p - 1) * 0.3 + rng.uniform(-0.6, 0.6, k), -1, 1)
    return Z, y


def test_conditional_gaussian_law_and_exact_configuration_delta():
    # Spec §5.8: ybar | xbar ~ N(xbar^T beta_hat, RSS) and the Monte Carlo
    # delta of a concrete neighbour equals the exact configuration value.
    rng = np.random.default_rng(6)
    k, p = 200, 6
    Z, y = _random_bag(rng, k, p)
    i, t = 17, -2.0 * np.sign(y[17]) if y[17] != 0 else 1.0
    y2 = y.copy()
    y2[i] = np.clip(y[i] + t, -1, 1)
    t = y2[i] - y[i]
    beta, beta2 = (np.linalg.lstsq(Z, v, rcond=None)[0] for v in (y, y2))
    rss, rss2 = (float(np.sum((v - Z @ b) ** 2)) for v, b in ((y, beta), (y2, beta2)))
    H = Z @ np.linalg.pinv(Z)
    h = H[i, i]
    resid_i = (y - Z @ beta)[i]

    n_draws, chunk = 400_000, 50_000
    standardised, losses = [], []
    bags = np.arange(k)[None, :]
    for _ in range(n_draws // chunk):
        W = rng.standard_normal((chunk, k))
        xbar = W @ Z
        ybar = W @ y
        standardised.append((ybar - xbar @ beta) / math.sqrt(rss))
        # privacy loss log p_D(ybar | xbar) - log p_D'(ybar | xbar)
        r1 = ybar - xbar @ beta
        r2 = ybar - xbar @ beta2
        losses.append(-0.5 * r1**2 / rss + 0.5 * r2**2 / rss2 + 0.5 * math.log(rss2 / rss))
        assert bags.shape == (1, k)
    standardised = np.concatenate(standardised)
    losses = np.concatenate(losses)
    assert stats.kstest(standardised, "norm").pvalue > 1e-3

    sigma = math.sqrt(rss)
    for eps in (0.05, 0.2):
        terms = np.maximum(1.0 - np.exp(eps - losses), 0.0)
        mc, se = terms.mean(), terms.std() / math.sqrt(terms.size)
        # forward direction of the exact configuration: N(0,1) vs N(tau u, var')
        exact = configuration_delta(eps, h, resid_i / sigma, t / sigma, n_nodes=80)
        fwd_only = _forward_configuration(eps, h, resid_i / sigma, t / sigma)
        assert abs(mc - fwd_only) <= 4 * se
        assert exact <= lba_privacy_profile(eps, abs(t) / sigma) * (1 + 1e-9)
        assert mc <= lba_privacy_profile(eps, 2.0 / sigma) + 4 * se


def _forward_configuration(eps, h, rho, tau, n_nodes=80):
    from ._gauss import hs_gauss

    s2 = math.sqrt(1.0 + 2.0 * tau * rho + tau**2 * (1.0 - h))
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_nodes)
    weights = weights / weights.sum()
    us = nodes * math.sqrt(h)
    return sum(w * hs_gauss(0.0, 1.0, tau * u, s2, eps) for u, w in zip(us, weights))


def test_residual_norm_sensitivity_is_at_most_label_range():
    # Spec §5.10: |sqrt(RSS) - sqrt(RSS')| <= Delta for one label change.
    rng = np.random.default_rng(8)
    worst = 0.0
    for _ in range(1000):
        k = int(rng.integers(8, 40))
        p = int(rng.integers(1, 6))
        Z = np.column_stack([rng.normal(size=(k, p)), np.ones(k)])
        y = rng.uniform(0, 1, size=k)
        y2 = y.copy()
        y2[rng.integers(k)] = rng.uniform(0, 1)
        bags = np.arange(k)[None, :]
        delta = abs(y2 - y).max()
        before = bag_residual_norms(Z, y, bags, label_bound=1.0)[0]
        after = bag_residual_norms(Z, y2, bags, label_bound=1.0)[0]
        change = abs(before - after)
        worst = max(worst, change / max(delta, 1e-300))
        assert change <= delta * (1 + 1e-9) + 1e-12
    assert worst > 0.5  # the bound is attained up to a constant


def test_residual_norms_are_exact_least_squares():
    rng = np.random.default_rng(9)
    Z = np.column_stack([rng.normal(size=(300, 3)), np.ones(300)])
    y = rng.normal(size=300)
    bags = rng.permutation(300).reshape(6, 50)
    got = bag_residual_norms(Z, y, bags)
    for j in range(6):
        Zj, yj = Z[bags[j]], y[bags[j]]
        resid = yj - Zj @ np.linalg.lstsq(Zj, yj, rcond=None)[0]
        assert got[j] == pytest.approx(np.linalg.norm(resid), rel=1e-9)
        assert got[j] <= np.linalg.norm(resid)


def test_release_contains_no_weights_and_loads_without_pickle(tmp_path):
    rng = np.random.default_rng(10)
    n = 60_000
    X = rng.normal(size=(n, 2))
    y = np.clip(X @ [1.0, 1.0] + 3 * rng.normal(size=n), -6, 6)
    ds, ledger = _quiet(
        X=X, y=y, epsilon=8.0, delta=1e-6, y_bound=(-6, 6), assumption="declared",
        residual_var_lower_bound=4.0,
    )
    assert isinstance(ds, AggregatedDataset)
    m, k = ds.bag_indices.shape
    assert ledger.epsilon == pytest.approx(8.0)
    assert ledger.delta <= 1e-6 and ds.privacy["delta"] == ledger.delta
    for name in ("X_agg", "w_sum", "y_agg", "bag_indices"):
        value = getattr(ds, name)
        assert not (value.shape == (m, k) and value.dtype.kind == "f")
    path = tmp_path / "release.npz"
    ds.save(path)
    with np.load(path, allow_pickle=False) as data:
        assert "weights" not in data.files
        assert all(data[f].dtype != object for f in data.files)
    back = AggregatedDataset.load(path)
    np.testing.assert_array_equal(back.y_agg, ds.y_agg)
    np.testing.assert_array_equal(back.bag_indices, ds.bag_indices)
    assert back.privacy == ds.privacy and back.label_bounds == (-6.0, 6.0)
    assert b"Generator" not in pickle.dumps(ds)


def test_llp_release_roundtrip(tmp_path):
    rng = np.random.default_rng(11)
    X = rng.normal(size=(500, 2))
    ds, ledger = _quiet(
        X=X, y=rng.uniform(0, 1, 500), mode="llp", assumption="none", bag_size=10,
        y_bound=(0, 1),
    )
    assert isinstance(ds, LLPDataset) and ds.weights.shape == (50, 10)
    assert math.isinf(ledger.epsilon)
    ds.save(tmp_path / "llp.npz")
    back = LLPDataset.load(tmp_path / "llp.npz")
    np.testing.assert_array_equal(back.weights, ds.weights)


def test_diagnose_lba_assumption_reports_per_bag_rss():
    from skprivreg.label_dp import diagnose_lba_assumption

    rng = np.random.default_rng(12)
    X = rng.normal(size=(400, 2))
    y = rng.normal(size=400)
    bags = rng.permutation(400).reshape(8, 50)
    rss, ok = diagnose_lba_assumption(X, y, bags, s=1.0)
    Z = np.column_stack([X, np.ones(400)])
    for j in range(8):
        resid = y[bags[j]] - Z[bags[j]] @ np.linalg.lstsq(Z[bags[j]], y[bags[j]], rcond=None)[0]
        assert rss[j] == pytest.approx(resid @ resid, rel=1e-9)
    assert ok is bool(np.all(rss >= 1.0))
    assert diagnose_lba_assumption(X, y, bags, s=1e6)[1] is False
