"""Release wiring that a fourth round of deliberately broken variants found unconstrained.

Each test here failed on a deliberately broken variant that the rest of the
suite let through (checked when it was written):

- the search planned with the *smallest* candidate curve instead of the largest;
- the association sensitivity under zero-out halved (label DP's, in the function);
- the projection mechanisms (GaussProj_X, GaussProj_Y) released without noise
  (and, through the estimator, every outcome of GaussProj_Y noised);
- ReuseCov's intercept corner released exactly under zero-out neighbours;
- IndependentSSP's labels not clipped to ``y_bound``;
- LinearRegression's refinement gradients released at half their sensitivity;
- LinearRegression's model kept on any negative released loss difference (the
  ``-2 sigma`` threshold dropped);
- the global noisy-LLP accountant with ``ceil(rho n)`` noisy rows, with the
  probability of no noisy bag-mate (``delta = 1`` there) dropped, or with the
  mass of improbable mate counts dropped.

Tolerances come from the math: exact identities where the computation is
deterministic, chi-square/normal quantiles at 1e-9 for noise
(``_privacy_harness``).
"""

import math
import warnings

import numpy as np
import pytest
from _privacy_harness import assert_gaussian_noise, capture_reusecov

import skprivreg.linear_model._linear as lin
from skprivreg import (
    IndependentSSPRegressor,
    LinearRegression,
    PrivateGridSearchCV,
    ReuseCovRegressor,
    SSPRegressor,
)
from skprivreg.accounting import laplace_rdp, ledger_rdp
from skprivreg.label_dp import llp_privacy_profile
from skprivreg.label_dp._bags import llp_noise_mask
from skprivreg.linear_model._reusecov_release import _Projection, release_associations
from skprivreg.linear_model._reusecov_stats import association_sensitivity
from skprivreg.model_selection import selection_plan


# ---------------------------------------------------------------------------
# PrivateGridSearchCV: Q's curve is the largest of the candidates' curves
# ---------------------------------------------------------------------------
def test_search_is_planned_with_the_largest_candidate_curve():
    """One run of Q fits a candidate drawn at random: its Renyi curve is the
    pointwise maximum over candidates (and the score's). Recomputed here from
    each candidate's own ledger at the allotted per-run budget, the selection's
    total must be the recorded one and within epsilon. SSP with GDP and with
    basic composition have different curves at the same (epsilon, delta)."""
    rng = np.random.default_rng(0)
    n = 4000
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=n)
    epsilon, delta, mean_k = 4.0, 1e-6, 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = PrivateGridSearchCV(
            estimator=SSPRegressor(x_bound=2.0, y_bound=6.5),
            param_grid={"composition": ["gdp", "basic"]},
            epsilon=epsilon, delta=delta, n_repetitions=mean_k,
        ).fit(X, y)
        eps_c = search.candidate_epsilon_
        n_train = n - round(0.25 * n)
        curves = [
            ledger_rdp(SSPRegressor(x_bound=2.0, y_bound=6.5, composition=comp,
                                    epsilon=eps_c, delta=search.candidate_delta_)
                       .fit(X[:n_train], y[:n_train]).privacy_spent_)
            for comp in ("gdp", "basic")
        ]
    assert not np.allclose(curves[0], curves[1], rtol=0.05)  # the grid's curves differ
    q = np.maximum(np.maximum(curves[0], curves[1]), laplace_rdp(eps_c))
    total = selection_plan(q, epsilon=epsilon, delta=delta, n_repetitions=mean_k, eta=1.0)[0]
    assert total <= epsilon * (1 + 1e-9)
    assert search.privacy_spent_.epsilon == pytest.approx(total, rel=1e-9)


# ---------------------------------------------------------------------------
# ReuseCov: sensitivities, noise of the projections, the corner, independence
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("neighbouring", ["replace-one", "zero-out"])
def test_association_sensitivity_holds_and_is_tight(neighbouring):
    """X^T Y / n with ||x|| <= B_x and ||y|| <= B_y: replacing (x, y) by (-x, y)
    moves it by 2 ||x y^T||_F / n = 2 B_x B_y / n at the bound; zeroing the row
    (zero-out) by ||x y^T||_F / n = B_x B_y / n. No pair moves it further
    (||x y^T - x' y'^T||_F <= ||x|| ||y|| + ||x'|| ||y'||). (The estimator
    allows zero-out with full DP only; the function states the label-DP value.)"""
    rng = np.random.default_rng(2)
    n, d, n_outputs, bx, by = 9, 3, 4, 1.3, 2.2
    sens = association_sensitivity(bx, by, n, neighbouring)
    x = bx * np.eye(d)[0]
    y = by * np.full(n_outputs, 1.0 / math.sqrt(n_outputs))
    other = -x if neighbouring == "replace-one" else np.zeros(d)
    other_y = y if neighbouring == "replace-one" else np.zeros(n_outputs)
    gap = np.linalg.norm(np.outer(x, y) - np.outer(other, other_y)) / n
    assert sens == pytest.approx(gap, rel=1e-12)  # reached
    # random pairs within the bounds never exceed it
    xs = rng.normal(size=(5000, d))
    xs *= bx * rng.uniform(0, 1, size=(5000, 1)) ** 0.1 / np.linalg.norm(xs, axis=1, keepdims=True)
    ys = rng.normal(size=(5000, n_outputs))
    ys *= by / np.linalg.norm(ys, axis=1, keepdims=True)
    if neighbouring == "replace-one":
        moved = np.einsum("ki,kj->kij", xs, ys) - np.einsum("ki,kj->kij", xs[::-1], ys[::-1])
    else:
        moved = np.einsum("ki,kj->kij", xs, ys)
    assert np.linalg.norm(moved.reshape(5000, -1), axis=1).max() / n <= sens * (1 + 1e-12)


@pytest.mark.parametrize("side", ["X", "Y"])
def test_projected_association_release_carries_the_recorded_noise(side):
    """With an inactive projection (multiplier 0, shrinkage 1) onto a full
    orthonormal basis, GaussProj_X and GaussProj_Y release G + N(0, sigma^2)
    entrywise: the projection is the identity, the noise is sigma_2's."""
    rng = np.random.default_rng(4)
    p, n_outputs, sigma = 3, 40, 0.7
    G = rng.uniform(-1.0, 1.0, size=(p, n_outputs))
    V = np.eye(p if side == "X" else n_outputs)
    projection = _Projection(side, np.ones(V.shape[1]), 1e100, V=V)
    noise = []
    for _ in range(40):
        _, G_hat, mu = release_associations(
            G, sigma, np.random.SeedSequence(), np.eye(p), np.ones(p),
            projection=projection, keep=True,
        )
        assert mu == 0.0
        noise.append(G_hat - G)
    assert_gaussian_noise(noise, sigma, f"GaussProj_{side} association noise")




def _small_design(n=40, d=2, n_outputs=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, d))
    Y = rng.uniform(-1.0, 1.0, size=(n, n_outputs))
    return X, Y


def test_reusecov_zero_out_releases_the_intercept_corner_with_noise(monkeypatch):
    """Under zero-out neighbours a row (its constant column included) becomes 0,
    so the corner sum_i c^2 / n changes with the data: it is released with the
    covariance noise, unlike under replace-one where it is the same for every
    dataset. Corner noise = released corner - ridge - c^2 (c = 1)."""
    X, Y = _small_design()
    record = capture_reusecov(monkeypatch)
    corner = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(250):
            est = ReuseCovRegressor(epsilon=1.0, delta=1e-5, neighbouring="zero-out",
                                    x_bound=1.0, y_bound=1.0, ridge=0.1).fit(X, Y)
            M, ridge = record["M"][-1]
            corner.append(M[-1, -1] - ridge - 1.0)
    assert_gaussian_noise(corner, est.covariance_.sigma, "ReuseCov zero-out corner noise")


# ---------------------------------------------------------------------------
# IndependentSSP: the statistics are those of the clipped data
# ---------------------------------------------------------------------------
def test_independent_ssp_clips_rows_and_labels():
    """In the non-private mode (no noise, ridge 0) the fit is a function of the
    clipped statistics only: fitting the raw data equals fitting data already
    clipped (rows to norm x_bound, labels to [-y_bound, y_bound])."""
    rng = np.random.default_rng(5)
    n, d, n_outputs, x_bound, y_bound = 200, 3, 4, 1.0, 2.0
    X = rng.normal(size=(n, d))
    Y = 3.0 * rng.normal(size=(n, n_outputs))
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    X_clipped = X * np.minimum(1.0, x_bound / norms)
    Y_clipped = np.clip(Y, -y_bound, y_bound)
    assert np.mean(np.abs(Y) > y_bound) > 0.3 and np.mean(norms > x_bound) > 0.3
    params = dict(epsilon=np.inf, x_bound=x_bound, y_bound=y_bound)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = IndependentSSPRegressor(**params).fit(X, Y)
        clipped = IndependentSSPRegressor(**params).fit(X_clipped, Y_clipped)
        wide = IndependentSSPRegressor(**dict(params, y_bound=100.0)).fit(X_clipped, Y)
    np.testing.assert_allclose(raw.coef_, clipped.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(raw.intercept_, clipped.intercept_, rtol=1e-9, atol=1e-12)
    # The clipping matters here: without it the fit would differ.
    assert np.max(np.abs(wide.coef_ - clipped.coef_)) > 1e-3


# ---------------------------------------------------------------------------
# LinearRegression: refinement sensitivities and the selection threshold
# ---------------------------------------------------------------------------
def _linear_data(n=20000, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + 0.5 * rng.normal(size=n)
    return X, y


def test_linear_refinement_releases_at_their_clipped_sensitivity():
    """Mapped rows have ||z|| <= sqrt(d) and the constant column is 1, so
    R = sqrt(d + 1). Replacing a row moves A^T clip_C(r) by at most 2 C R
    (gradient rounds, C = residual_clip_), A^T u by 2 R (|u| <= 1), and the
    clipped residual second moment sum min(r^2, 1) by 1."""
    X, y = _linear_data()
    d = X.shape[1]
    R = math.sqrt(d + 1)
    captured = []
    lin._CAPTURE = captured
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = LinearRegression(epsilon=2.0, x_range=(-1.0, 1.0), y_bound=(-8.0, 8.0),
                                   n_rounds=4).fit(X, y)
    finally:
        lin._CAPTURE = None
    events = {name: event for name, _, event in captured}
    C = est.residual_clip_
    assert C is not None and 0 < C <= 2.0
    for t in range(1, 4):
        assert events[f"gradient_{t}"].sensitivity == pytest.approx(2.0 * C * R, rel=1e-12)
    assert events["Xty"].sensitivity == pytest.approx(2.0 * R, rel=1e-12)
    assert events["residual_scale"].sensitivity == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("z, keep_model", [(-1.0, False), (-1.9, False), (-2.1, True),
                                           (0.5, False)])
def test_linear_keeps_the_model_only_below_minus_two_noise_sds(monkeypatch, z, keep_model):
    """The model replaces the mean predictor only if the released loss
    difference is below -2 sigma_D. The released value is forced to z sigma_D
    (sigma_D is the selection release's own noise scale)."""
    X, y = _linear_data(n=5000)
    state = {"selection": False}
    data_pass, add_gaussian = lin._data_pass, lin.add_gaussian

    def spy_pass(source, block, label, streamed=False):
        state["selection"] = label == "selection"
        return data_pass(source, block, label, streamed)

    def forced(value, sigma, rng):
        if state["selection"]:
            return np.full(np.shape(value), z * sigma)
        return add_gaussian(value, sigma, rng)

    monkeypatch.setattr(lin, "_data_pass", spy_pass)
    monkeypatch.setattr(lin, "add_gaussian", forced)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LinearRegression(epsilon=2.0, x_range=(-1.0, 1.0), y_bound=(-8.0, 8.0)).fit(X, y)
    assert state["selection"]  # the selection was released last
    assert est.mean_fallback_ is (not keep_model)
    if not keep_model:
        assert np.all(est.coef_ == 0.0)


# ---------------------------------------------------------------------------
# Noisy LLP accountant: the global law of the noisy bag-mates
# ---------------------------------------------------------------------------
def test_global_llp_accountant_counts_the_noise_set_the_estimator_draws():
    """'global' draws a uniformly random floor(rho n)-subset: the profile at
    rho = 0.26, n = 64 (16.64 -> 16 noisy rows) is the profile at rho = 16/64."""
    n, rho = 64, 0.26
    bags = np.arange(n).reshape(16, 4)
    mask = llp_noise_mask(bags, n, rho, "global", np.random.default_rng(0))
    assert mask.sum() == math.floor(rho * n) == 16
    args = dict(epsilon=1.0, bag_size=4, label_range=1.0, noise_scale=1.0, n_samples=n,
                allocation="global")
    exact_share = llp_privacy_profile(noise_fraction=16 / 64, **args)
    assert llp_privacy_profile(noise_fraction=rho, **args) == exact_share
    # The count matters: one noisy row more would give a smaller delta.
    assert llp_privacy_profile(noise_fraction=17 / 64, **args) < exact_share


def _binomial_no_mate(rho, k):
    return (1.0 - rho) ** (k - 1)


def _hypergeometric_no_mate(rho, k, n):
    n_noisy = math.floor(rho * n)
    # A target outside the noise set: its k - 1 mates drawn from n - 1 rows, n_noisy noisy.
    return math.comb(n - 1 - n_noisy, k - 1) / math.comb(n - 1, k - 1)


@pytest.mark.parametrize(
    "epsilon, rho, k, n, label_range",
    [
        (5.0, 0.1, 10, None, 1.0),  # P(no noisy mate) = 0.9^9 = 0.39
        (5.0, 0.1, 10, 1000, 1.0),
        # P = 0.1^99 < 1e-60: among the improbable mate counts (counted with
        # delta 1). With label_range / noise_scale = 1e-3 every likelier count
        # (q >= 20 noisy mates) has a delta far below 1e-99.
        (50.0, 0.9, 100, None, 1e-3),
    ],
)
def test_llp_profile_is_at_least_the_chance_of_no_noisy_mate(epsilon, rho, k, n, label_range):
    """A target outside the noise set whose k - 1 bag-mates are all noise-free
    has its label released in an aggregate without noise: delta = 1 at every
    epsilon. So the exact delta is at least P(q = 0), the chance of that."""
    p0 = _binomial_no_mate(rho, k) if n is None else _hypergeometric_no_mate(rho, k, n)
    assert p0 > 0
    delta = llp_privacy_profile(epsilon, k, rho, label_range, noise_scale=1.0, n_samples=n,
                                allocation="global")
    assert delta >= p0 * (1 - 1e-12)


def test_feature_dp_projection_adds_noise_to_every_outcome(monkeypatch):
    """GaussProj_Y releases ``(G + E_2) P``: the association of every outcome column
    gets its Gaussian noise before the projection."""
    import skprivreg.linear_model._reusecov_release as rel
    from skprivreg.linear_model import ReuseCovRegressor

    covered = []
    orig = rel._noisy_block

    def spy(G_block, start, sigma, seed):
        out = orig(G_block, start, sigma, seed)
        if sigma > 0 and not np.array_equal(out, G_block):
            covered.extend(range(start, start + G_block.shape[1]))
        return out

    monkeypatch.setattr(rel, "_noisy_block", spy)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(1_000, 3))
    Y = X @ rng.normal(size=(3, 6)) + 0.1 * rng.normal(size=(1_000, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ReuseCovRegressor(epsilon=2.0, privacy="feature", mechanism="proj",
                          x_bound=2.0).fit(X, Y)
    assert sorted(covered) == list(range(6))
