"""Release wiring a fourth round of deliberately broken variants found unconstrained.

A refinement round's gradient sensitivity, IndependentSSP's label clip, the noise of
ReuseCov's feature-DP projection and the zero-out association sensitivity: each test
checks one against its definition and fails on the broken variant.
"""
import math
import warnings

import numpy as np
import pytest


def test_refinement_gradients_are_released_at_2_r_times_the_residual_clip():
    """``A^T clip(r)`` with ``||a_i|| <= R`` and ``|clip(r_i)| <= C``: ``2 R C``; the
    first ``A^T u`` (``|u_i| <= 1``) has ``2 R``, so a round's sensitivity is that
    times the round's clip."""
    import skprivreg.linear_model._linear as lin
    from skprivreg.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(4_000, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=4_000)
    clips = []
    orig = lin.gradient_block

    def spy(*a, **k):
        clips.append(k["clip"])
        return orig(*a, **k)

    lin.gradient_block = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = LinearRegression(epsilon=4.0, x_range=(-1.0, 1.0), y_bound=(-6.0, 6.0),
                                   n_rounds=3).fit(X, y)
    finally:
        lin.gradient_block = orig
    events = {e.name: e for e in est.privacy_spent_.events}
    clip = clips[0]
    assert clip is not None and 0 < clip <= 2.0 and set(clips) == {clip}
    for t in (1, 2):
        assert events[f"gradient_{t}"].sensitivity == pytest.approx(
            events["Xty"].sensitivity * clip, rel=1e-12)


def test_independent_ssp_clips_every_label_to_its_bound():
    from skprivreg.linear_model import IndependentSSPRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(500, 3))
    Y = rng.uniform(-1, 1, size=(500, 4))
    Y[7, 2], Y[11, 0] = 50.0, -9.0
    clipped = np.clip(Y, -2.0, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # epsilon=inf: the non-private mode warns
        fits = [IndependentSSPRegressor(epsilon=math.inf, x_bound=2.0, y_bound=2.0)
                .fit(X, labels) for labels in (Y, clipped)]
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    np.testing.assert_array_equal(fits[0].intercept_, fits[1].intercept_)


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


@pytest.mark.parametrize("neighbouring, factor", [("replace-one", 2.0), ("zero-out", 1.0)])
def test_association_sensitivity_is_attained(neighbouring, factor):
    """``||x y^T - x' y'^T||_F / n``: zero-out removes a row (``x y^T``, norm
    ``B_x B_y``), replace-one may flip it (``x' = -x``: ``2 B_x B_y``). The bound must
    be at least the attained value, and is equal to it."""
    from skprivreg.linear_model._reusecov_stats import association_sensitivity

    rng = np.random.default_rng(0)
    Bx, By, n = 1.7, 2.3, 50
    x = rng.normal(size=4)
    x *= Bx / np.linalg.norm(x)
    y = rng.normal(size=3)
    y *= By / np.linalg.norm(y)
    other = -x if neighbouring == "replace-one" else np.zeros(4)
    attained = np.linalg.norm(np.outer(x, y) - np.outer(other, y)) / n
    assert association_sensitivity(Bx, By, n, neighbouring) == pytest.approx(attained,
                                                                               rel=1e-12)
    assert association_sensitivity(Bx, By, n, neighbouring) == factor * Bx * By / n


@pytest.mark.parametrize("neighbouring", ["replace-one", "zero-out"])
def test_the_intercept_corner_is_exact_only_under_replace_one(neighbouring):
    """The corner ``sum_i c^2 / n`` of the released covariance is ``c^2`` for every
    dataset under replace-one (released exactly); a zero-out neighbour's zero row
    moves it, so it is noised like every other entry (over 20 fits its spread is
    sigma_cov's)."""
    from skprivreg.linear_model import ReuseCovRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2_000, 3))
    Y = rng.uniform(-1, 1, size=(2_000, 2))
    corners, sigmas = [], []
    for _ in range(20):
        cov = ReuseCovRegressor(epsilon=2.0, x_bound=2.0, y_bound=1.0, intercept_scaling=1.5,
                                neighbouring=neighbouring).fit(X, Y).covariance_
        corners.append(cov.matrix[-1, -1] - 1.5**2)
        sigmas.append(cov.sigma)
    if neighbouring == "replace-one":
        assert corners == [0.0] * 20
    else:
        # chi-square(20) of the corner's noise: within its 1e-9 quantiles.
        from scipy import stats

        stat = float(np.sum((np.array(corners) / np.array(sigmas)) ** 2))
        assert stats.chi2.ppf(1e-9, 20) <= stat <= stats.chi2.isf(1e-9, 20)
