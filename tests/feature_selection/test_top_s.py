"""Top-s marginal screening with per-column ranges: scores, sensitivity, noise scale."""

import numpy as np
import pytest

from skprivreg.bounds import check_x_range, check_y_bound
from skprivreg.feature_selection import PrivateTopSSelector
from skprivreg.feature_selection import _top_s as top_s_module
from skprivreg.feature_selection._top_s import (
    marginal_scores,
    private_top_s_correlations,
    score_sensitivity,
)


def test_one_row_moves_each_scaled_score_by_at_most_the_sensitivity():
    # Worst-case replacements: a row at the corners of the ranges, replaced by
    # the opposite corner, moves u_j by exactly 2 B_y (replace-one); removing
    # it by B_y (add/remove). Columns have very different ranges, so a score
    # not divided by m_j would move by 2 m_j B_y >> 2 B_y and fail here.
    rng = np.random.default_rng(0)
    x_range = check_x_range(((-1.0, -50.0, 0.0), (2.0, 10.0, 0.1)), 3)
    y_range = check_y_bound((-3.0, 1.0))
    X = rng.uniform(x_range[0], x_range[1], size=(200, 3))
    y = rng.uniform(-3.0, 1.0, size=200)
    base = marginal_scores(X, y, x_range, y_range)
    worst_replace = worst_remove = 0.0
    for corner in ([2.0, -50.0, 0.1], [-1.0, 10.0, 0.0]):
        for label in (-3.0, 1.0):
            Xr, yr = X.copy(), y.copy()
            Xr[0], yr[0] = corner, label
            worst_replace = max(worst_replace,
                                np.max(np.abs(marginal_scores(Xr, yr, x_range, y_range) - base)))
    worst_remove = np.max(np.abs(marginal_scores(X[1:], y[1:], x_range, y_range) - base))
    assert worst_replace <= score_sensitivity(3.0, "replace-one") + 1e-9
    assert worst_remove <= score_sensitivity(3.0, "add-remove") + 1e-9
    assert worst_replace > 0.5 * score_sensitivity(3.0, "replace-one")  # the bound is tight-ish


def test_scores_are_invariant_to_rescaling_a_column_with_its_range():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 2))
    y = rng.normal(size=300)
    r = check_x_range((-3.0, 3.0), 2)
    scaled = check_x_range(((-3.0, -300.0), (3.0, 300.0)), 2)
    Xs = X * np.array([1.0, 100.0])
    yr = check_y_bound(4.0)
    assert np.allclose(marginal_scores(X, y, r, yr), marginal_scores(Xs, y, scaled, yr))


@pytest.mark.parametrize("neighbouring, factor", [("replace-one", 2.0), ("add-remove", 1.0)])
def test_noise_is_calibrated_to_the_recorded_epsilon_and_label_range(
    monkeypatch, neighbouring, factor
):
    seen = {}
    original = top_s_module.gumbel_top_k

    def spy(utilities, k, sensitivity, epsilon, rng):
        seen.update(k=k, sensitivity=sensitivity, epsilon=epsilon)
        return original(utilities, k, sensitivity, epsilon, rng)

    monkeypatch.setattr(top_s_module, "gumbel_top_k", spy)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 5))
    y = X[:, 0] + rng.normal(size=400)
    est = PrivateTopSSelector(epsilon=0.7, n_features_to_select=2, x_range=(-4.0, 4.0),
                              y_bound=(-2.0, 5.0), neighbouring=neighbouring).fit(X, y)
    (event,) = est.privacy_spent_.events
    assert seen == {"k": 2, "sensitivity": factor * 5.0, "epsilon": event.epsilon}
    assert event.epsilon == 0.7 and event.neighbouring == neighbouring


@pytest.mark.parametrize("ranges", [dict(x_range=(-1e200, 1e200), y_bound=1.0),
                                    dict(x_range=(-1.0, 1.0), y_bound=1e200),
                                    dict(x_range=(-1e61, 1e61), y_bound=1e61)])
def test_ranges_whose_scores_could_overflow_are_refused_before_any_spend(ranges):
    # One row at 1e200 x 1e200 made its column's sum infinite: that column then won
    # whatever the noise (and inf - inf made a column that could never win).
    from skprivreg import BudgetAccountant

    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(500, 3)), rng.normal(size=500)
    acc = BudgetAccountant(epsilon=5.0)
    with pytest.raises(ValueError, match="must be at most 1e\\+60"):
        PrivateTopSSelector(epsilon=1.0, accountant=acc, **ranges).fit(X, y)
    assert acc.n_spends == 0
    # At the limit the largest possible scores stay finite.
    X[0], y[0] = 1e60, 1e60
    scores = marginal_scores(X, y, check_x_range((-1e60, 1e60), 3), check_y_bound(1e60))
    assert np.all(np.isfinite(scores))


def test_add_remove_reads_no_row_count_before_the_spend():
    # Under add/remove the number of rows is private: whether the fit refuses must not
    # depend on it (a count one row below the private-bound minimum was refused, and
    # the message printed it).
    from skprivreg.bounds import min_samples_for_private_bound

    rng = np.random.default_rng(4)
    est = PrivateTopSSelector(epsilon=1.0, neighbouring="add-remove")
    needed = min_samples_for_private_bound(0.05)  # each of the two bounds gets half of 0.1
    outcomes = []
    for n in (needed - 1, needed):
        X, y = rng.normal(size=(n, 3)), rng.normal(size=n)
        est.fit(X, y)
        outcomes.append(est.support_.sum())
    assert outcomes == [1, 1]


def test_the_function_draws_its_secret_noise_from_fresh_entropy():
    # A caller's seeded generator made the epsilon-DP selection deterministic; the
    # noise is now drawn afresh on every call, and reproducible only in the testing
    # facility (which warns).
    import warnings

    from skprivreg.exceptions import PrivacyLeakWarning
    from skprivreg.feature_selection import private_top_s_correlations
    from skprivreg.testing import reproducible_noise

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 10))
    y = X @ rng.normal(size=10)
    kw = dict(epsilon=0.1, x_range=(-1.0, 1.0), y_bound=5.0, random_state=42)
    # At epsilon 0.1 the noise dominates: 20 equal selections of 3 of 10 would have
    # probability below (1/2)^19 even if one set had half the mass.
    picks = {tuple(private_top_s_correlations(X, y, 3, **kw)[0]) for _ in range(20)}
    assert len(picks) > 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        with reproducible_noise(1):
            one = private_top_s_correlations(X, y, 3, **kw)[0]
            two = private_top_s_correlations(X, y, 3, **kw)[0]
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("where", ["X", "y"])
def test_the_function_refuses_nan_and_infinity(bad, where):
    # A NaN made its column's score NaN, a column the noise could never select:
    # one record decided the output while the event stated pure epsilon-DP.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4))
    y = 0.3 * X[:, 0] + rng.normal(size=500)
    (X if where == "X" else y)[17] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        private_top_s_correlations(X, y, 1, epsilon=0.5, x_range=(-3.0, 3.0), y_bound=4.0)
