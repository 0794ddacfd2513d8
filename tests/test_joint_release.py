"""The joint Gaussian release of a covariance and an association (skprivreg.mechanisms).

Brute force over neighbouring pairs: no pair exceeds the claimed Mahalanobis
sensitivity ``sup J``, and structured pairs at the bound attain it (the claim
is tight). Dropping the intercept cross term ``c^2 ||x - x'||^2`` from the
claimed ``J`` makes the brute-force comparison fail (13 of 18 cases), and
noise 10% below the calibration fails the exact-mu check.
"""

import math

import numpy as np
import pytest

from skprivreg._budget_store import _ledger_from_json, _ledger_to_json
from skprivreg.accounting import PrivacyLedger, gdp_mu
from skprivreg.mechanisms import (
    cross_sensitivity,
    gram_upper_sensitivity,
    gram_with_exact_corner,
    joint_gram_cross_calibration,
    joint_gram_cross_mu,
    joint_mahalanobis_sq,
)


def _upper(M):
    return M[np.triu_indices(M.shape[0])]


def _J(x, xp, y, yp, c, s1, s2, notion, zero_out=False):
    """The Mahalanobis distance of one neighbouring pair, from the statistics themselves."""
    a = np.append(x, c) if c > 0 else np.asarray(x)
    ap = np.zeros_like(a) if zero_out else (np.append(xp, c) if c > 0 else np.asarray(xp))
    if notion == "feature":
        yp = y
    dC = _upper(np.outer(a, a) - np.outer(ap, ap))
    dA = np.outer(a, y) - np.outer(ap, yp)
    return float(dC @ dC) / s1**2 + float(np.sum(dA**2)) / s2**2


def _structured_best(B, b, l, c, s1, s2, notion, n_angles=1201):
    """Rows at the bound at every angle, rotated so that x x^T - x' x'^T is diagonal."""
    best = 0.0
    y = b * np.ones(l)
    for theta in np.linspace(0.0, np.pi, n_angles):
        x = B * np.array([1.0, 0.0, 0.0])
        xp = B * np.array([np.cos(theta), np.sin(theta), 0.0])
        E = np.outer(x, x) - np.outer(xp, xp)
        _, V = np.linalg.eigh(E[:2, :2])
        Q = np.eye(3)
        Q[:2, :2] = V.T
        for yp in (y, -y):
            best = max(best, _J(Q @ x, Q @ xp, y, yp, c, s1, s2, notion))
    return best


def _random_best(rng, B, b, l, c, s1, s2, notion, draws=1500):
    best = 0.0
    for _ in range(draws):
        x, xp = rng.normal(size=3), rng.normal(size=3)
        x *= B * rng.uniform() ** 0.2 / np.linalg.norm(x)
        xp *= B * rng.uniform() ** 0.2 / np.linalg.norm(xp)
        y = b * rng.choice([-1.0, 1.0], size=l) * rng.uniform(0.8, 1.0, size=l)
        yp = b * rng.choice([-1.0, 1.0], size=l)
        best = max(best, _J(x, xp, y, yp, c, s1, s2, notion))
    return best


@pytest.mark.parametrize("notion", ["full", "feature"])
@pytest.mark.parametrize("c", [0.0, 1.0, 2.5])
@pytest.mark.parametrize("s1, s2", [(1.0, 1.0), (0.3, 2.0), (2.0, 0.2)])
def test_no_pair_exceeds_the_claim_and_the_claim_is_attained(notion, c, s1, s2):
    rng = np.random.default_rng(int(10 * c + 100 * s1))
    B, b, l = 1.3, 0.7, 4
    K = math.sqrt(l) * b
    claim, t = joint_mahalanobis_sq(B, K, s1, s2, c, notion)
    assert -B**2 <= t <= B**2
    structured = _structured_best(B, b, l, c, s1, s2, notion)
    random = _random_best(rng, B, b, l, c, s1, s2, notion)
    assert max(structured, random) <= claim * (1 + 1e-9)
    # Tight: the angle grid (step pi/1200) comes within 1e-5 of the claim.
    assert structured >= claim * (1 - 1e-5)


def test_zero_out_is_attained_at_a_coordinate_row():
    rng = np.random.default_rng(5)
    B, b, l, c, s1, s2 = 1.3, 0.7, 4, 1.0, 0.5, 1.5
    claim, t = joint_mahalanobis_sq(B, math.sqrt(l) * b, s1, s2, c, neighbouring="zero-out")
    assert t is None
    y = b * np.ones(l)
    attained = _J(B * np.array([1.0, 0, 0]), None, y, y, c, s1, s2, "full", zero_out=True)
    assert attained == pytest.approx(claim, rel=1e-12)
    for _ in range(2000):
        x = rng.normal(size=3)
        x *= B * rng.uniform() ** 0.2 / np.linalg.norm(x)
        y = b * rng.choice([-1.0, 1.0], size=l)
        assert _J(x, None, y, y, c, s1, s2, "full", zero_out=True) <= claim * (1 + 1e-12)


@pytest.mark.parametrize("c", [0.0, 1.0, 3.0])
def test_marginal_sensitivities_are_the_suprema_of_each_part(c):
    B, K = 1.3, 2.0
    # Each marginal is the joint supremum with the other part's noise infinite.
    big = 1e9
    cov_sq, _ = joint_mahalanobis_sq(B, K, 1.0, big, c)
    assert gram_upper_sensitivity(B, c) ** 2 == pytest.approx(cov_sq, rel=1e-9)
    for notion in ("full", "feature"):
        assoc_sq, _ = joint_mahalanobis_sq(B, K, big, 1.0, c, notion)
        assert cross_sensitivity(B, K, c, notion) ** 2 == pytest.approx(assoc_sq, rel=1e-9)
    if c**2 <= 2 * B**2:
        assert gram_upper_sensitivity(B, c) == pytest.approx(math.sqrt(2) * (B**2 + c**2 / 2))
    else:
        assert gram_upper_sensitivity(B, c) == pytest.approx(2 * B * c)
    assert cross_sensitivity(B, K, c, "feature") == pytest.approx(2 * B * K)  # raw bound
    assert cross_sensitivity(B, K, c) == pytest.approx(2 * K * math.hypot(B, c))
    assert gram_upper_sensitivity(B, c, "zero-out") == pytest.approx(
        math.sqrt(B**4 + B**2 * c**2 + c**4))


def test_calibration_is_exactly_mu_and_tighter_than_composition():
    # n = 2e4 rows with ||x|| <= sqrt(10), an intercept, l = 50 labels in [-1, 1], f = 0.5.
    n, B, c, l = 20000, math.sqrt(10), 1.0, 50
    mu = gdp_mu(1.0, 1e-5)
    event, s1, s2, gamma = joint_gram_cross_calibration(
        "covariance+association[0]", x_bound=B, y_row_bound=math.sqrt(l), n_rows=n, mu=mu,
        share=0.5, delta=1e-5, intercept=c)
    assert joint_gram_cross_mu(B, math.sqrt(l), s1, s2, n, c) == pytest.approx(mu, rel=1e-12)
    assert (event.mu, event.sigma, event.sensitivity) == (mu, 1.0, mu)
    assert (event.notion, event.neighbouring) == ("full", "replace-one")
    assert dict(event.components) == {"covariance": s1, "association": s2}
    # The ratio of the scales is the composed split's.
    d1, d2 = gram_upper_sensitivity(B, c) / n, cross_sensitivity(B, math.sqrt(l), c) / n
    assert (s1 / s2) == pytest.approx((d1 / math.sqrt(0.5)) / (d2 / math.sqrt(0.5)))
    assert 0.85 < gamma < 0.9
    # Against composing the two releases with the constant column treated as a
    # feature (sqrt(2)(B^2 + c^2)): the same noise scales are 0.865 mu-GDP.
    old_d1 = math.sqrt(2) * (B**2 + c**2) / n
    old_s1, old_s2 = old_d1 / (math.sqrt(0.5) * mu), d2 / (math.sqrt(0.5) * mu)
    ratio = joint_gram_cross_mu(B, math.sqrt(l), old_s1, old_s2, n, c) / mu
    assert ratio == pytest.approx(0.865, abs=0.002)


def test_exact_corner_and_event_survives_the_budget_store():
    rng = np.random.default_rng(0)
    G = np.eye(4)
    M = gram_with_exact_corner(G, 0.5, rng, exact_corner=True)
    assert M[-1, -1] == 1.0 and np.array_equal(M, M.T) and np.all(M[:-1, :-1] != G[:-1, :-1])
    event, *_ = joint_gram_cross_calibration("j", x_bound=1.0, y_row_bound=2.0, n_rows=100,
                                             mu=0.5, share=0.3, delta=1e-6, intercept=1.0)
    ledger = PrivacyLedger([event], composition="gdp", delta=1e-6)
    back = _ledger_from_json(_ledger_to_json(ledger))
    assert back.events == ledger.events and back.mu == ledger.mu
