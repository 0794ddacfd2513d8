"""Release wiring that the rest of the suite did not constrain.

Which epsilon or generator a caller hands to a mechanism, an index in the
Tukey safety margin, the classical Gaussian's constant, a bound function's
own NaN refusal and the leverage engine's rows outside its candidates: each
test checks one of them against its definition, and fails when it is
broken (each seen failing on a deliberately broken variant).
"""
import math
import warnings

import numpy as np
import pytest


def _state(rng):
    inner = rng if hasattr(rng, "bit_generator") else rng._rng
    return repr(inner.bit_generator.state)


def test_stable_mode_subsamples_are_secret_whatever_the_seed(monkeypatch):
    """A_samp's privacy needs a secret subsample pattern (amplification by
    subsampling): two runs with the same public random_state must draw it
    from different generator states."""
    import skprivreg.feature_selection._stability as st

    seen = []
    orig = st._draw_subsamples

    def spy(n, plan, rng):
        seen.append(_state(rng))
        return orig(n, plan, rng)

    monkeypatch.setattr(st, "_draw_subsamples", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = rng.normal(size=400)
    def f(Xs, ys):  # any function of the subsample
        return int(len(ys) > 0)

    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            st.stable_mode(X, y, f, 1.0, 1e-6, sampling="partition", subsample_rate=0.05,
                           random_state=0)
    assert len(seen) == 2 and seen[0] != seen[1]


def test_top_s_noise_uses_the_selection_share_when_a_bound_is_estimated(monkeypatch):
    import skprivreg.feature_selection._top_s as ts
    from skprivreg import PrivateTopSSelector

    seen = []
    orig = ts.gumbel_top_k

    def spy(utilities, k, sensitivity, epsilon, rng):
        seen.append(float(epsilon))
        return orig(utilities, k, sensitivity, epsilon, rng)

    monkeypatch.setattr(ts, "gumbel_top_k", spy)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(5000, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=5000)
    sel = PrivateTopSSelector(epsilon=4.0, n_features_to_select=2, x_range=(-1.0, 1.0),
                              bounds_budget=0.1).fit(X, y)  # y_bound estimated privately
    event = [e for e in sel.privacy_spent_.events if e.name == "top_s_marginal"][0]
    assert event.epsilon == pytest.approx(4.0 * 0.9, rel=1e-12)
    assert seen == [pytest.approx(event.epsilon, rel=1e-12)]


def _brute_k_hat(log_v, t, eps_em, eta):
    """Largest k >= 0 with, for some g >= 1, V_{t-k-1}/V_{t+k+g+1} e^{-eps g/2} <= eta
    (V_j = inf for j <= 0, 0 for j > m), from the docstring's definition."""
    m = len(log_v)

    def logV(j):
        if j <= 0:
            return math.inf
        return -math.inf if j > m else log_v[j - 1]

    best = -1
    for k in range(0, t + 1):
        ok = False
        for g in range(1, m + 2):
            lo, hi = logV(t - k - 1), logV(t + k + g + 1)
            finite = math.isfinite(lo) and math.isfinite(hi)
            if finite and lo - hi - eps_em * g / 2 <= math.log(eta):
                ok = True
        if ok:
            best = k
    return best


def test_tukey_safety_margin_matches_its_definition():
    from skprivreg.mechanisms._regression import tukey_safety_margin

    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(300):
        m = int(rng.integers(6, 30))
        steps = rng.exponential(rng.uniform(0.05, 2.0), size=m)
        log_v = 5.0 - np.cumsum(steps)  # strictly decreasing finite log-volumes
        t = int(rng.integers(2, m))
        eps_em = float(rng.uniform(0.2, 4.0))
        eta = float(rng.uniform(1e-4, 0.3))
        got = tukey_safety_margin(log_v, t, eps_em, eta)
        assert got == _brute_k_hat(list(log_v), t, eps_em, eta)
        checked += got >= 0
    assert checked > 20


def test_classical_gaussian_uses_ln_1_25_over_delta():
    from skprivreg.mechanisms import gaussian_sigma

    for eps, delta in [(0.5, 1e-5), (0.999, 0.99)]:
        s = gaussian_sigma(1.0, eps, delta, method="classical")
        assert s == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) / eps, rel=1e-12)
        # the classical calibration is never below the exact (analytic) one
        assert s >= gaussian_sigma(1.0, eps, delta)


def test_scaler_range_bound_runs_at_its_recorded_share(monkeypatch):
    import skprivreg.preprocessing._scalers as sc
    from skprivreg import PrivateStandardScaler

    seen = []
    orig = sc.private_norm_bound

    def spy(counts, n, epsilon, rng, **kw):
        seen.append(float(epsilon))
        return orig(counts, n, epsilon, rng, **kw)

    monkeypatch.setattr(sc, "private_norm_bound", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 3))
    scaler = PrivateStandardScaler(epsilon=2.0, delta=1e-6, bounds_budget=0.1).fit(X)
    event = [e for e in scaler.privacy_spent_.events if e.name == "x_range"][0]
    assert event.epsilon == pytest.approx(0.2, rel=1e-12)
    assert seen == [pytest.approx(event.epsilon, rel=1e-12)]


def test_label_bound_counts_refuse_non_finite_labels():
    from skprivreg.label_dp._label_bound import label_bound_counts

    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError):
            label_bound_counts(np.array([1.0, bad, -2.0]))


def test_slf_engine_bounds_rows_outside_its_candidates_after_a_removal():
    """After a removal the leverage of a row outside the candidate set can rise
    by 1/lambda_min(I - Z_E^T Z_E): a row below every threshold at the base
    (h = 0.00238 < L_base) exceeds L_top (h = 0.00403) once the big row on its
    axis is removed. The engine must find it (as the reference does), else the
    SLF score and the weights miss a leverage-unstable row (Theorem 9(2))."""
    from skprivreg.linear_model._issp_filters import leverage_thresholds
    from skprivreg.linear_model._issp_reference import _direct_leverages, stable_leverage_filtering

    k = 4
    L0 = 0.99 / (96 * k)
    L = leverage_thresholds(L0, k)
    rng = np.random.default_rng(0)
    n = 8000
    X = rng.uniform(-1, 1, size=(n, 2))
    X[0] = [0.0, math.sqrt(1850.0)]        # big: removed at the top level
    X[1] = [0.0, math.sqrt(10.7)]          # medium: outside the 5 candidates
    X[2:6] = [math.sqrt(6.6), 0.0]         # decoys: the other candidates, stay below
    h, _ = _direct_leverages(X)
    keep = np.ones(n)
    keep[0] = 0.0
    h_after, _ = _direct_leverages(X, keep)
    assert h[1] < L[0] < L[-1] < h_after[1] and h[1] < h[2:6].min()
    assert h_after[2:6].max() < L[0] and h[6:].max() < h[1]
    ref = stable_leverage_filtering(X, L0, k, method="reference")
    eng = stable_leverage_filtering(X, L0, k, n_candidates=5)
    assert ref[0] == 2  # the big and the medium row, both at the top level
    assert eng[0] == ref[0] and np.array_equal(eng[1], ref[1])
