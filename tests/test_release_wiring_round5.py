"""Fifth mutation round: tests for mutants the suite could not tell apart.

Each test names the mutant it kills; each was checked failing on its mutant
and passing on the unmodified code.
"""

import math

import numpy as np
import pytest
from _privacy_harness import capture_linear, quiet


# ---------------------------------------------------------------------------
# Clip threshold: the margin must grow with d (mutant: (d + 4) -> 4)
# ---------------------------------------------------------------------------
def _split(x):
    """Veltkamp split: ``x = hi + lo`` with ``hi``, ``lo`` of 26 bits, so products of
    parts are exact in float64."""
    c = 134217729.0 * x  # 2^27 + 1
    hi = c - (c - x)
    return hi, x - hi


def _exact_excess(row, bound):
    """``||row||^2 - bound^2`` correctly rounded (so its sign is exact).

    Every square is written as an exact sum of three float products of
    26-bit parts, and :func:`math.fsum` rounds the exact total once.
    """
    hi, lo = _split(np.asarray(row, dtype=np.float64))
    bh, bl = _split(np.array([float(bound)]))
    terms = np.concatenate([hi * hi, 2.0 * hi * lo, lo * lo,
                            -(bh * bh), -2.0 * bh * bl, -(bl * bl)])
    return math.fsum(terms.tolist())


def test_clip_threshold_margin_covers_wide_rows():
    # A computed squared norm of d terms may be low by gamma_d (about d u)
    # relative; the clip threshold B (1 - (d + 4) 2^-52) absorbs it for
    # every d. With d = 100,000 random rows the rounding of the norm is
    # typically tens of ulps (a random walk over ~d / lanes partial sums): a
    # margin that does not grow with d (4 * 2^-52 = 8 u) leaves a third of
    # the clipped rows above B in exact arithmetic, while the proven one
    # (2e5 u) leaves none. Rows and seed are public and fixed.
    from skprivreg.bounds import clip_rows

    d, bound = 100_000, 1.0
    rng = np.random.default_rng(5)
    v = rng.normal(size=(20, d))
    X = v / np.linalg.norm(v, axis=1, keepdims=True) * (bound * (1 + 1e-6))
    clipped, changed = clip_rows(X, bound)
    assert changed
    excess = [_exact_excess(row, bound) for row in clipped]
    above = sum(e > 0 for e in excess)
    assert above == 0, f"{above} of {len(excess)} clipped rows above the bound (exact)"


# ---------------------------------------------------------------------------
# PrivateGridSearchCV: the public-curve check and the run check
# ---------------------------------------------------------------------------
def _search_data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    return X, X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=n)


def _spending_more(factor, condition):
    """An AdaSSP candidate that spends ``factor`` times its epsilon when ``condition(X)``."""
    from skprivreg import AdaSSPRegressor

    class _Candidate(AdaSSPRegressor):
        def fit(self, X, y):
            epsilon = self.epsilon
            if condition(np.asarray(X)):
                self.epsilon = factor * epsilon
            try:
                return super().fit(X, y)
            finally:
                self.epsilon = epsilon

    return _Candidate


def _heavy_tailed(X):
    # max |x| > 15 median |x|: normal entries (any scale) pass it only beyond
    # 10 sd (median |x| = 0.674 sd), never in practice; Student-t with 2 degrees
    # of freedom (median |T| = 0.816) has P(|T| > 12.2) = 1 - t / sqrt(t^2 + 2) = 0.0066
    # per entry, so a synthetic set of thousands of entries has one (the search
    # draws it from a fixed public seed). The real rows (uniform) have ratio 2.
    a = np.abs(X)
    return np.max(a) > 15.0 * np.median(a)


def _search_for(estimator, acc):
    from skprivreg import PrivateGridSearchCV

    return PrivateGridSearchCV(estimator=estimator,
                               param_grid={"fit_intercept": [True, False]}, epsilon=4.0,
                               delta=1e-6, n_repetitions=2, accountant=acc)


@pytest.mark.parametrize(
    "factor, follows",
    [(2.0, _heavy_tailed),  # kills: the heavy-tailed variant left out (the curve is
                            # the same on normal data of every scale)
     (1.001, lambda X: np.max(np.abs(X)) > 100.0),  # kills: a loose tolerance in _above
     (2.0, lambda X: np.max(np.abs(X)) < 0.1)],  # kills: the 1e-3 scale left out
    ids=["heavy tails", "a little more", "small values"])
def test_a_candidate_whose_spend_follows_the_data_is_refused_before_any_spend(factor,
                                                                              follows):
    # Spending 1.001 epsilon raises every point of a Gaussian Renyi curve
    # (alpha mu^2 / 2, mu increasing in epsilon) by far more than the 1e-9 rounding
    # allowance of _above and by less than a loose 1e-2.
    from skprivreg import BudgetAccountant
    from skprivreg.exceptions import ConfigurationError

    X, y = _search_data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = _search_for(_spending_more(factor, follows)(x_bound=2.0, y_bound=6.5), acc)
    with quiet(), pytest.raises(ConfigurationError, match="depends on the data"):
        search.fit(X, y)
    assert acc.n_spends == 0


def test_a_run_above_its_planned_curve_stops_the_search():
    # Kills: _check_run disabled. The candidate spends twice its epsilon only
    # beyond every synthetic variant (|x| > 1e6): the public checks pass, the
    # runs on data of scale 1e7 exceed the plan, and the search must stop
    # rather than release a result its analysis does not cover.
    from skprivreg import BudgetAccountant

    X, y = _search_data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    cand = _spending_more(2.0, lambda X: np.max(np.abs(X)) > 1e6)(x_bound=2e7, y_bound=6.5e7)
    search = _search_for(cand, acc)
    with quiet(), pytest.raises(RuntimeError, match="planned Renyi-DP curve"):
        search.fit(1e7 * X, 1e7 * y)


# ---------------------------------------------------------------------------
# Public label clip helpers (no estimator uses them, no test read them)
# ---------------------------------------------------------------------------
def test_clip_entries_and_clip_values_clip_to_the_bound():
    # Kills: clip_entries clipping to a wider interval (2 B). Values just inside,
    # at, and beyond +-B; the flag says whether any entry changed.
    from skprivreg.bounds import clip_entries, clip_values

    B = 1.5
    y = np.array([-1e9, -2.0 * B, -B, -np.nextafter(B, 0), 0.0, np.nextafter(B, 0), B,
                  1.9 * B, 3.0 * B, 1e9])
    clipped, changed = clip_entries(y, B)
    expected = np.minimum(np.maximum(y, -B), B)
    np.testing.assert_array_equal(clipped, expected)
    assert changed is True
    assert np.max(np.abs(clipped)) <= B
    np.testing.assert_array_equal(clip_values(y, B), expected)
    inside = np.array([-B, 0.0, B])
    kept, changed = clip_entries(inside, B)
    np.testing.assert_array_equal(kept, inside)
    assert changed is False


# ---------------------------------------------------------------------------
# BoostedAdaSSP: the noise of the lambda_min release
# ---------------------------------------------------------------------------
def test_boosted_lambda_min_noise_is_drawn_at_the_ledger_sigma(monkeypatch):
    # Kills: the noise of the lambda_min release drawn at half the recorded
    # sigma. The spy records every Gaussian draw of the fit; the first is the
    # release of lambda_min of the exact clipped A^T A, at the ledger's sigma.
    # Then (noise / sigma) over 300 fits must pass the chi-square check of the
    # harness (a noise at half the sigma gives a mean square near 0.25).
    from _privacy_harness import assert_gaussian_noise

    import skprivreg.linear_model._boosted_adassp as boosted
    from skprivreg import BoostedAdaSSPRegressor

    real_add = boosted.add_gaussian
    calls = []

    def add_spy(value, sigma, rng):
        noisy = real_add(value, sigma, rng)
        calls.append((np.array(value, dtype=float), float(sigma), np.array(noisy, dtype=float)))
        return noisy

    monkeypatch.setattr(boosted, "add_gaussian", add_spy)
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(60, 2))
    y = X @ [1.0, -1.0]
    A = boosted._clipped_design(X, 1.5, True)
    lam = float(np.linalg.eigvalsh(A.T @ A)[0])
    z = []
    for _ in range(300):
        calls.clear()
        est = BoostedAdaSSPRegressor(epsilon=1.0, x_bound=1.5, y_bound=3.0, n_rounds=1).fit(X, y)
        event = [e for e in est.privacy_spent_.events if e.name == "lambda_min"][0]
        value, sigma, noisy = calls[0]
        assert math.isclose(float(value), lam, rel_tol=1e-9, abs_tol=1e-12)
        z.append((float(noisy) - float(value)) / event.sigma)
    assert_gaussian_noise(np.array(z), 1.0, "BoostedAdaSSP lambda_min noise / ledger sigma")


# ---------------------------------------------------------------------------
# LinearRegression: declared ranges mapped (not raw) clip every coordinate
# ---------------------------------------------------------------------------
def _linear_releases(X, y, **params):
    est, captured = capture_linear(X, y, **params)
    return est, [(name, value) for name, value, _ in captured]


def test_linear_mapped_rows_outside_the_declared_range_are_clipped():
    # Kills: the per-coordinate clip of _mapped skipped. With x_range = (100, 102)
    # (centre 101 > 16 half-widths) the passes map the rows instead of summing
    # raw ones, and with row_bound >= sqrt(d) no norm clip follows: the
    # coordinate clip alone keeps a row's mapped norm within the sensitivity.
    # A row at 1e6 is the row at 102 after clipping: with the same (reproducible)
    # noise, every release of the two fits must be bit-for-bit equal.
    rng = np.random.default_rng(0)
    X = rng.uniform(100.0, 102.0, size=(2000, 2))
    y = (X - 101.0) @ [1.0, -1.0] + 0.1 * rng.normal(size=2000)
    X_out, X_in = X.copy(), X.copy()
    X_out[0, 0], X_in[0, 0] = 1e6, 102.0
    params = dict(epsilon=1.0, x_range=(100.0, 102.0), y_bound=(-4.0, 4.0), n_rounds=2)
    est_out, rel_out = _linear_releases(X_out, y, **params)
    est_in, rel_in = _linear_releases(X_in, y, **params)
    assert [n for n, _ in rel_out] == [n for n, _ in rel_in] and len(rel_out) >= 5
    for (name, a), (_, b) in zip(rel_out, rel_in):
        np.testing.assert_array_equal(a, b, err_msg=name)
    np.testing.assert_array_equal(est_out.coef_, est_in.coef_)


def test_linear_gram_sensitivity_without_intercept_covers_orthogonal_rows():
    # Kills: XtX's sensitivity without the intercept as row_bound^2 (for
    # sqrt(2) row_bound^2). Private row bound: rows are mapped to norm at most
    # row_bound = 1, and a row (1e3, 0) replaced by (0, 1e3) (both clipped)
    # changes Z^T Z by diag(1, -1) (up to the clip margin): L2 norm sqrt(2) over
    # the upper triangle and over all entries alike. Same reproducible noise in
    # both fits (the bound estimate sees the same row norms; with no
    # intercept the centre is 0), so the release's difference is exact.
    import skprivreg.linear_model._linear as lin
    from skprivreg.linear_model import LinearRegression
    from skprivreg.testing import reproducible_noise

    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(2000, 2))
    y = X @ [1.0, -1.0]
    first, second = X.copy(), X.copy()
    first[0], second[0] = (1e3, 0.0), (0.0, 1e3)
    runs = []
    for rows in (first, second):
        captured = []
        lin._CAPTURE = captured
        try:
            with quiet(), reproducible_noise(seed=3):
                est = LinearRegression(epsilon=1.0, y_bound=(-4.0, 4.0), fit_intercept=False,
                                       random_state=7, n_rounds=1).fit(rows, y)
        finally:
            lin._CAPTURE = None
        runs.append(({name: (value, event) for name, value, event in captured}, est.x_bound_))
    assert runs[0][1] == runs[1][1]  # the same released row bound
    (a, event), (b, _) = runs[0][0]["XtX"], runs[1][0]["XtX"]
    change = float(np.linalg.norm(a - b))
    assert math.isclose(change, math.sqrt(2.0), rel_tol=1e-9), change
    # up to the rounding of the two noisy values (about 1e-13 here; the mutant is off by
    # a factor of at least sqrt(2))
    assert event.sensitivity >= change * (1 - 1e-9), (event.sensitivity, change)


# ---------------------------------------------------------------------------
# BudgetAccountant: the relation rule and amendments
# ---------------------------------------------------------------------------
def test_an_accountant_of_another_relation_refuses_replace_one_spends():
    # Kills: the refusal of spends that compose under another relation than a
    # non-replace-one accountant's (replace-one DP does not imply add/remove or
    # zero-out DP; only the converse holds, by group privacy). A manual spend
    # is full DP under replace-one.
    from skprivreg import BudgetAccountant
    from skprivreg.exceptions import CompositionError

    for relation in ("add-remove", "zero-out"):
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3, neighbouring=relation)
        for call in (acc.check, acc.spend, acc.reserve):
            with pytest.raises(CompositionError):
                call(0.5, 1e-6)
        assert acc.n_spends == 0


def test_a_spent_ledger_cannot_be_amended_to_spend_more():
    # Kills: the epsilon condition of _amend dropped. A final ledger may only
    # restate the planned spend at most (its use by _settle): one of larger
    # epsilon is refused and the recorded total stays.
    from skprivreg import BudgetAccountant
    from skprivreg.accounting import PrivacyEvent, PrivacyLedger

    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    planned = PrivacyLedger([PrivacyEvent("release", 1.0, 1e-6)])
    acc.spend(planned)
    for final in (PrivacyLedger([PrivacyEvent("release", 1.5, 1e-6)]),
                  PrivacyLedger([PrivacyEvent("release", 1.0, 2e-6)])):
        with pytest.raises(ValueError):
            acc._amend(planned, final)
    total = acc.total()
    assert total.epsilon == 1.0 and total.delta == 1e-6


def test_a_replace_one_accountant_charges_add_remove_spends_by_group_privacy():
    # Kills: the group-privacy conversion left out (an add/remove spend counted
    # at its own epsilon under replace-one). An add/remove (eps, delta) spend is
    # a replace-one (2 eps, (1 + e^eps) delta) one: 0.6 of a budget of 1 is 1.2.
    from skprivreg import BudgetAccountant
    from skprivreg.accounting import PrivacyEvent, PrivacyLedger, group_privacy
    from skprivreg.exceptions import BudgetExceededError

    def add_remove(eps, delta):
        return PrivacyLedger([PrivacyEvent("release", eps, delta, neighbouring="add-remove")])

    acc = BudgetAccountant(epsilon=10.0, delta=1e-3, neighbouring="replace-one")
    acc.spend(add_remove(0.6, 1e-7))
    total = acc.total()
    eps, delta = group_privacy(0.6, 1e-7)
    assert total.neighbouring == "replace-one"
    assert math.isclose(total.epsilon, eps, rel_tol=1e-12) and math.isclose(eps, 1.2)
    assert math.isclose(total.delta, delta, rel_tol=1e-12)
    small = BudgetAccountant(epsilon=1.0, delta=1e-3, neighbouring="replace-one")
    with pytest.raises(BudgetExceededError):
        small.check(add_remove(0.6, 1e-7))


def test_the_budget_check_refuses_a_delta_over_budget_and_epsilon_just_over_it():
    # Kills: the delta comparison dropped; a loose relative tolerance on epsilon
    # (1e-3 for the 1e-9 allowed for rounding).
    from skprivreg import BudgetAccountant
    from skprivreg.exceptions import BudgetExceededError

    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    acc.spend(0.9999, 0.0)
    for spend in ((0.0002, 0.0), (1e-6, 2e-6)):  # epsilon 1.0001 > 1; delta 2e-6 > 1e-6
        for call in (acc.check, acc.reserve, acc.spend):
            with pytest.raises(BudgetExceededError):
                call(*spend)
    assert acc.n_spends == 1
    acc.spend(0.0001, 1e-6)  # exactly the rest fits
    assert acc.n_spends == 2


def test_a_spent_ledger_cannot_be_amended_to_another_notion():
    # Kills: the notion condition of _amend dropped.
    from skprivreg import BudgetAccountant
    from skprivreg.accounting import PrivacyEvent, PrivacyLedger

    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    planned = PrivacyLedger([PrivacyEvent("release", 1.0, 1e-6)])
    acc.spend(planned)
    final = PrivacyLedger([PrivacyEvent("release", 1.0, 1e-6, notion="label")])
    with pytest.raises(ValueError):
        acc._amend(planned, final)
    assert acc.total().notion == "full"


def _capture_linear(X, y, **params):
    """``({name: (noisy value, event)}, estimator)`` of one reproducible LinearRegression fit."""
    est, captured = capture_linear(X, y, **params)
    return {name: (value, event) for name, value, event in captured}, est


def test_linear_mapped_rows_stay_within_the_planned_row_bound(monkeypatch):
    # Kills: the range map built with a larger row bound than the plan's (the
    # sensitivities use plan.row_bound = 1 on the private-range path). Rows are
    # clipped to the released bound, then centred at the (noisy) mean: a row
    # opposite the mean maps to norm about 1 + |mean| / x_clip > 1, and only the
    # row-norm clip to 1 keeps it inside. Every mapped row a pass reads is checked.
    import skprivreg.linear_model._range_blocks as rb

    real = rb._mapped
    largest = []

    def spy(X_block, y_block, rmap, x_clip=None, check=False):
        Z, u = real(X_block, y_block, rmap, x_clip, check)
        if len(Z):
            largest.append(float(np.max(np.linalg.norm(Z, axis=1))))
        return Z, u

    monkeypatch.setattr(rb, "_mapped", spy)
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.2, 0.2, size=(2000, 2)) + [0.6, 0.0]
    X[:20] = (-0.8, 0.0)
    y = X @ [1.0, -1.0]
    _, est = _capture_linear(X, y, epsilon=2.0, y_bound=(-4.0, 4.0), n_rounds=2)
    assert est.x_bound_ is not None and largest
    assert max(largest) <= 1.0 + 1e-12, max(largest)


def test_one_row_blocks_outside_the_declared_range_are_clipped():
    # Kills: the range check of _clipped_rows skipped for blocks of one row (a
    # last piece, a Dask chunk or a file piece of one row). In raw space the
    # passes sum the range-clipped raw rows: a one-row block with an entry
    # outside its range must give the statistics of its clipped row.
    from skprivreg.linear_model._linear import range_map
    from skprivreg.linear_model._range_blocks import (
        first_pass_block,
        gradient_block,
        raw_space,
        residual_moment_block,
        selection_block,
    )

    rmap = range_map((-1.0, 1.0), (-4.0, 4.0), 2, True)
    assert raw_space(rmap, None)
    outside, clipped = np.array([[50.0, -0.5]]), np.array([[1.0, -0.5]])
    y = np.array([0.3])
    theta = np.array([0.4, -0.2, 0.1])
    blocks = [
        lambda X: first_pass_block(X, y, rmap=rmap, fit_intercept=True),
        lambda X: gradient_block(X, y, rmap=rmap, fit_intercept=True, theta=theta, clip=0.5),
        lambda X: residual_moment_block(X, y, rmap=rmap, fit_intercept=True, theta=theta),
        lambda X: selection_block(X, y, rmap=rmap, fit_intercept=True, theta=theta,
                                  u_mean=0.0, cap=1.0),
    ]
    for block in blocks:
        got, want = block(outside.copy()), block(clipped.copy())
        for a, b in zip(got, want):
            if a.shape == (4,):  # first pass sums: the last entry counts clipped blocks
                a, b = a[:3], b[:3]
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_a_row_bound_whose_square_overflows_is_refused_by_the_gram_pass():
    # Above about 1.3e154 the pass's comparison with the bound's square could never
    # fire: no row would be clipped. Estimators cap their bounds at 1e60 first.
    import pytest

    from skprivreg._gram import GramParams

    with pytest.raises(ValueError, match="square overflows"):
        GramParams(1e160, None, 1)
    assert GramParams(1e150, None, 1).x_bound == 1e150


def test_generators_seeded_by_the_facility_after_the_spend_mark_the_ledger():
    # A spend recorded outside the testing facility, then generators seeded inside
    # it: the fit's noise is reproducible, so its ledger is not for publication.
    import warnings

    from skprivreg.accounting import PrivacyEvent, PrivacyLedger
    from skprivreg.linear_model import SSPRegressor
    from skprivreg.testing import reproducible_noise

    est = SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=1.0, y_bound=1.0)
    est._spend(PrivacyLedger([PrivacyEvent("x", 1.0, 1e-6)]))
    assert est.privacy_spent_.for_publication
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(3):
            est._secret_rngs("noise")
    assert not est.privacy_spent_.for_publication and est.noise_reproducible_
