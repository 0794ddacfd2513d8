"""ISSP's residual filter with labels or fitted values far from 0 against the residual scale.

Residual filtering gives the same scores and weights in exact arithmetic for
labels ``y`` and ``y - X~ b`` with any ``b``. The datasets here are built so
that ``e = y - X~ b`` is exact in float64 (an intercept of ``2^50``, or a slope
of ``2^48`` on integer features) and one row's residual sits within a float64
spacing of ``y`` of a rung of the residual ladder. On ``e`` the float64
residuals are accurate to about ``1e-15`` residual scales; on ``y`` they erred
by up to a residual scale, and the filter removed other rows than on ``e``
(the intercept and slope cases did, on the code before the relabelled second
run). On nearly collinear columns the rounding reaches the fit through the
inverse factor: the bound that decides a second run must carry the design's
condition number (without it, the collinear case below gets no second run; its
residuals erred by 1e-4 residual scales, and other seeds removed other rows).
"""

import fractions
import warnings

import numpy as np
import pytest

from skprivreg.linear_model import _issp_refine
from skprivreg.linear_model._issp import _issp_trace
from skprivreg.linear_model._issp_filters import residual_thresholds
from skprivreg.linear_model._issp_refine import Relabel

N, K = 100_000, 24
L0 = 1 / (96 * K) * 0.999
R0 = 6.0
PARAMS = dict(epsilon=8, delta=1e-6, residual_bound=R0, leverage_bound=L0,
              budget_split=(0.9, 0.05, 0.05), predicted_fail="spend", random_state=0)
LADDER = residual_thresholds(R0, L0, K)


def _case(kind, scale, seed):
    """``(X, y, e, b)`` with ``y = X~ b + e`` exactly and row 7 on a rung (in ``e``)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    if kind in ("slope", "collinear", "nearly singular"):
        X[:, 0] = rng.integers(-4, 5, size=N)
        b = np.array([scale, 0.0, 0.0])
    if kind == "collinear":  # scaled Gram condition number about 1e7
        X[:, 1] = X[:, 0] + 1e-3 * X[:, 1]
    elif kind == "nearly singular":  # about 1e16: float64 cannot solve its normal equations
        X[:, 1] = X[:, 0] + 1e-8 * X[:, 1]
    else:
        b = np.array([0.0, 0.0, scale])
    Xa = np.column_stack([X, np.ones(N)])
    grid = np.spacing(np.max(np.abs(Xa @ b)) * 2)
    e = np.round((X @ [1.0, -1.0] + rng.normal(size=N)) / grid) * grid
    i = 7
    keep = np.arange(N) != i
    rest = np.linalg.lstsq(Xa[keep], e[keep], rcond=None)[0]
    h = Xa[i] @ np.linalg.solve(Xa.T @ Xa, Xa[i])
    rung = LADDER[rng.integers(0, 2 * K + 1)]
    e[i] = np.round((Xa[i] @ rest + rung / (1 - h)) / grid) * grid
    y = Xa @ b + e
    assert np.array_equal(y - Xa @ b, e)
    return X, y, e, b


def _trace(X, y, runs):
    runs.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _issp_trace(X, y, **PARAMS)


@pytest.fixture
def runs(monkeypatch):
    """The relabelled runs of residual filtering, counted."""
    calls = []
    engine = _issp_refine.srf_engine

    def counted(*args, **kwargs):
        calls.append(1)
        return engine(*args, **kwargs)

    monkeypatch.setattr(_issp_refine, "srf_engine", counted)
    return calls


@pytest.mark.parametrize("kind, scale", [("intercept", 2.0**52), ("slope", 2.0**48),
                                         ("collinear", 2.0**21), ("slope", 2.0**400),
                                         ("intercept", 2.0**700),
                                         ("nearly singular", 2.0**400)])
def test_labels_far_from_zero_get_the_filter_decisions_of_their_residuals(kind, scale, runs):
    """Slopes of 2^400 and intercepts of 2^700 residual scales: a run on labels minus a
    float fit gains about 13 digits, and the eight runs ended with other decisions than
    on the residuals; such runs are followed by a fit from exact sums (two runs), solved
    in rationals (on nearly collinear columns, condition number about 1e16, a float64
    refinement of that fit diverged and the seven runs FAILed where the residuals give
    0)."""
    for seed in range(3):
        X, y, e, b = _case(kind, scale, seed)
        near = _trace(X, e, runs)
        assert not runs  # residual-scale labels: one run
        far = _trace(X, y, runs)
        assert (far.score1, far.score2_num, far.passed) == (near.score1, near.score2_num,
                                                              near.passed)
        assert np.array_equal(far.V, near.V)
        assert 1 <= len(runs) <= 2  # far from 0: run again, relabelled
        if kind == "slope":
            # The release reads the labels themselves, not the relabelled ones: its
            # estimate is the one on e plus b, to float64 precision at the size of b.
            np.testing.assert_allclose(far.beta_hat - b, near.beta_hat, rtol=0,
                                       atol=1e-13 * scale)


def test_relabelled_values_are_the_exact_ones_rounded_within_double_double_error():
    rng = np.random.default_rng(3)
    m = 400
    X = rng.normal(size=(m, 3)) * 10.0 ** rng.integers(-3, 12, size=(m, 1))
    y = rng.normal(size=m) * 1e14
    y[:5] = [1e30, -1e40, 3e300, 1e-300, 0.0]  # terms too large for double-double: exact
    X[5] = [1e300, -1e300, 1e300]
    b = rng.normal(size=4) * 1e12
    b_hi = b.copy()
    b_lo = b * 2.0**-60
    for i in range(6, 10):  # the terms cancel: double-double would err by ~2^-104 * 1e33
        X[i] = rng.normal(size=3) * 1e21
        y[i] = np.append(X[i], 1.0) @ (b_hi + b_lo)
    relabel = Relabel(True, b_hi, b_lo, R0)
    out = relabel.apply(X, y)
    F = fractions.Fraction
    for i in range(m):
        terms = [F(float(y[i]))] + [-F(float(v)) * (F(float(h)) + F(float(lo))) for v, h, lo in
                                     zip(np.append(X[i], 1.0), b_hi, b_lo)]
        exact = sum(terms, F(0))
        size = sum(abs(t) for t in terms)
        if i < 10:
            try:
                expected = float(exact)
            except OverflowError:  # rounds to infinity, as float64 arithmetic would
                expected = np.inf if exact > 0 else -np.inf
            assert out[i] == expected
        else:
            assert abs(F(float(out[i])) - exact) <= abs(exact) * F(2.0**-52) + size * F(2.0**-100)


def test_an_exact_row_product_beyond_the_float64_range_is_infinite():
    """A row near the float64 maximum whose image overflows maps to infinity (it raised
    OverflowError, after any spend, from the exact fallback of the double-double product)."""
    from skprivreg.linear_model._issp_exact import dd_matmul

    out = dd_matmul(np.array([[1e308, 1e308], [-1e308, 1.0]]), np.eye(2) * 2.0, np.zeros((2, 2)))
    assert out[0, 0] == np.inf and out[1, 0] == -np.inf and out[1, 1] == 2.0


@pytest.mark.parametrize("scale", [2.0**48, 2.0**400])
def test_dask_rows_get_the_same_relabelled_run(client, runs, scale):
    """Relabelled runs, and at 2^400 the fit from exact sums, on Dask chunks."""
    da = pytest.importorskip("dask.array")
    X, y, _, _ = _case("slope", scale, 0)
    here = _trace(X, y, runs)
    assert runs
    lazy = _trace(da.from_array(X, chunks=(25_000, 2)), da.from_array(y, chunks=25_000), runs)
    assert runs
    assert (lazy.score1, lazy.score2_num) == (here.score1, here.score2_num)
    assert np.array_equal(lazy.V, here.V)


@pytest.mark.parametrize("kind, scale", [("intercept", 2.0**40), ("slope", 2.0**30),
                                         ("collinear", 2.0**21)])
def test_the_rounding_bounds_cover_the_residuals_the_filter_compared(kind, scale, monkeypatch):
    """The one-pass bound reads the largest ``|y_i| + sum_j |x~_ij beta_j|`` over the rows
    whose comparisons matter (every row within ``2 R_top`` of the fit, and any row whose
    rounding could be a quarter of its residual); the dot-product rounding of those rows'
    residuals stays below ``(p + 2) u`` times it, and the bound without a pass is at
    least the one with it (else it would skip a needed pass)."""
    from skprivreg.linear_model._issp_refine import _column_norms, _theta_error

    calls = []
    measured = _issp_refine.measured_rounding_bound

    def recorded(source, result, W_idx, W_val, R_top):
        value = measured(source, result, W_idx, W_val, R_top)
        calls.append((source, result, np.asarray(W_idx), np.asarray(W_val), R_top, value))
        return value

    monkeypatch.setattr(_issp_refine, "measured_rounding_bound", recorded)
    X, y, _, _ = _case(kind, scale, 0)
    _trace(X, y, [])
    source, result, W_idx, W_val, R_top, value = calls[0]
    assert result.factor.T is None
    G, p = result.factor.G, result.factor.G.shape[0]
    beta = np.linalg.solve(G.T, result.theta)
    Xa = np.column_stack([X, np.ones(N)])
    rows = np.setdiff1d(np.arange(N), W_idx[W_val == 0])
    fitted = Xa[rows] @ beta
    r = np.abs(y[rows] - fitted)
    size = np.abs(y[rows]) + np.abs(Xa[rows]) @ np.abs(beta)
    u = np.finfo(np.float64).eps / 2
    counted = ~((r > 2 * R_top) & (4 * u * (p + 2) * size <= r))
    top = size[counted].max()
    expected = u * (p + 2) * top + _theta_error(result, _column_norms(G))
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    exact = Relabel(True, beta, np.zeros(p), R0).apply(X[rows], y[rows])
    assert np.max(np.abs(r - np.abs(exact))[counted]) <= u * (p + 2) * top
    assert _issp_refine.residual_rounding_bound(result, R_top) >= value


@pytest.mark.parametrize("count, big", [(2, 1.7e308), (4, 1e308)])
def test_labels_whose_sums_overflow_are_filtered_as_smaller_huge_labels(count, big):
    """A few labels near the float64 maximum overflow X~^T W y. The filter runs again on
    labels scaled by a power of two, so they are removed as labels of 1e300 are. (Two
    labels of 1.7e308 removed nothing and released NaN while one gave a normal release;
    four of 1e308 raised ValueError after the spend.)"""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=N)
    huge, moderate = y.copy(), y.copy()
    huge[:count], moderate[:count] = big, 1e300
    a, b = _trace(X, huge, []), _trace(X, moderate, [])
    assert a.score2_num == b.score2_num == K * count
    assert np.array_equal(a.V, b.V)
    np.testing.assert_allclose(a.beta_hat, b.beta_hat, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("offset, unit, count", [(1.0, 1e-10, 2), (0.0, 5e-288, 3)])
def test_an_overflow_in_a_relabelled_run_or_at_a_tiny_residual_scale_is_scaled_too(
        offset, unit, count):
    """Labels ``offset + unit * (signal + noise)`` with ``residual_bound = 6 unit``.

    At an offset of 1e10 residual scales the first run is fine (its factor is a QR) but
    the relabelled run's sums of two labels of 1.7e308 overflow: that run is scaled too
    (it raised AttributeError after the spend). At a residual scale of 5e-288 the
    scaling stops before R0 leaves the normal range (R0 became 0 and the fit FAILed for
    three labels while two passed)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2))
    y = offset + unit * (X @ [20.0, -20.0] + rng.normal(size=N))
    params = {**PARAMS, "residual_bound": 6.0 * unit}
    scores = []
    for m in (count - 1, count):
        labels = y.copy()
        labels[:m] = 1.7e308
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = _issp_trace(X, labels, **params)
        assert trace.passed and np.all(np.isfinite(trace.beta_hat))
        scores.append(trace.score2_num)
    assert scores == [K * (count - 1), K * count]


@pytest.mark.parametrize("case", ["tiny features", "huge rows"])
@pytest.mark.parametrize("count", [1, 2])
def test_labels_far_beyond_the_features_or_huge_rows_are_filtered_as_moderate_ones(
        case, count, runs):
    """Labels of 1.7e308 on features of 1e-150 make the fit ``beta_u`` overflow
    (about 1e458) while ``X~^T W y`` is finite: the residuals were NaN, no row was
    removed and the release was infinite (score 0 where exact arithmetic gives ``k``).
    On rows of norm 1e200 two such labels overflow the sums even after the labels are
    scaled to ``2^900``, and the fit FAILed where one label passed. Each run that
    overflows is scaled further, so these labels are removed as moderate huge labels
    are, with the same weights. The first scaling reads the largest term ``|y_i x_ij|``,
    so on the huge rows one scaled run suffices (three when it read the labels only)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N, 2))
    if case == "tiny features":
        X *= 1e-150
        y = X @ [1e150, -1e150] + rng.normal(size=N)
        rows, moderate = np.arange(count), 1e100
    else:
        y = rng.normal(size=N)
        X[1000:7000] *= 1e200 / np.linalg.norm(X[1000:7000], axis=1)[:, None]
        rows, moderate = 1000 + np.arange(count), 1e50
    huge, mid = y.copy(), y.copy()
    huge[rows], mid[rows] = 1.7e308, moderate
    a = _trace(X, huge, runs)
    if case == "huge rows":
        assert len(runs) == count - 1
    b = _trace(X, mid, [])
    assert a.passed and np.all(np.isfinite(a.beta_hat))
    assert a.score2_num == b.score2_num == K * count
    assert np.array_equal(a.V, b.V)


def test_exact_products_are_the_correctly_rounded_exact_values(monkeypatch):
    """Rows relabelled from their exact value: the float64 rounding of the exact product
    (terms of 1e300 that cancel, entries near the float64 maximum and in the subnormal
    range), from eight exact partial products per term summed by ``math.fsum``; only
    rows where a partial product overflows take exact rationals (rows of 1e300 took
    them all, about 0.2 ms a row). Partial products below the normal range may round,
    by at most ``2^-1074`` each."""
    from skprivreg.linear_model import _issp_exact

    rng = np.random.default_rng(0)
    blocks = []
    for q, cols in [(2, 1), (3, 1), (4, 3), (6, 2)]:
        e = rng.choice([0, 60, 300, 1000, -1000, -1070], size=(40, q))
        X = rng.normal(size=(40, q)) * np.ldexp(1.0, e)
        T_hi = rng.normal(size=(q, cols)) * np.ldexp(1.0, rng.choice([0, 90, -300], size=(q, cols)))
        T_lo = T_hi * rng.normal(size=(q, cols)) * 2.0**-54
        with np.errstate(all="ignore"):  # rows of cancelling terms (some overflow)
            X[:10, 0] = np.round(-(X[:10, 1:] @ T_hi[1:, 0]) / T_hi[0, 0] * 2.0**-30) * 2.0**30
        X[10, 0] = np.finfo(np.float64).max
        blocks.append((X[np.all(np.isfinite(X), axis=1)], T_hi, T_lo))
    calls = []
    exact_row = _issp_exact._exact_row_product
    monkeypatch.setattr(_issp_exact, "_exact_row_product",
                        lambda *a: calls.append(1) or exact_row(*a))
    for X, T_hi, T_lo in blocks:
        with np.errstate(all="ignore"):
            out = _issp_exact.exact_products(X, T_hi, T_lo)
        for i in range(X.shape[0]):
            ref = exact_row(X[i], T_hi, T_lo)
            for j in range(T_hi.shape[1]):
                if not np.isfinite(ref[j]):  # beyond the float64 range
                    assert out[i, j] == ref[j]
                    continue
                exact = sum(fractions.Fraction(X[i, k]) * (fractions.Fraction(T_hi[k, j])
                                                           + fractions.Fraction(T_lo[k, j]))
                            for k in range(X.shape[1]))
                assert abs(fractions.Fraction(out[i, j]) - exact) <= (
                    abs(fractions.Fraction(ref[j]) - exact)
                    + 8 * X.shape[1] * fractions.Fraction(2) ** -1074), (i, j)
    # Only rows with a term near the float64 maximum (a partial product that may
    # overflow) take exact rationals.
    near_max = 0
    for X, T_hi, _ in blocks:
        with np.errstate(divide="ignore"):
            size = np.log2(np.abs(X))[:, :, None] + np.log2(np.abs(T_hi))[None]
        near_max += int(np.sum(np.max(size, axis=(1, 2)) > 1000))
    assert 0 < len(calls) <= near_max < sum(X.shape[0] for X, _, _ in blocks) // 2


def test_the_exact_fit_is_the_rational_least_squares_fit_to_the_tolerance():
    """The expansion from exact sums approximates the exact weighted least-squares fit
    (computed here in rationals) to within ``tol`` on every kept row, with integer weights
    ``W_i / k``, removed rows (weight 0) and labels scaled by ``2^-exponent``; its first
    term alone (the float solve of the exact sums) is ``1e80`` off at this offset."""
    from skprivreg._rows import RowSource
    from skprivreg.linear_model._issp_passes import RowWeights

    rng = np.random.default_rng(3)
    n, k, exponent = 60, 5, 40
    X = rng.normal(size=(n, 2)) * [1.0, 1e3]
    y = 1e100 * (1 + rng.normal(size=n) * 1e-6) + X @ [3.0, -1e90]
    idx, W = np.array([0, 3, 4, 9]), np.array([2, 0, 4, 1])
    weights = RowWeights.from_pairs(idx, W / k)
    tol = 1e-20
    terms = _issp_refine.exact_fit(RowSource(X, y, fit_intercept=True, block_rows=16),
                                   weights, k, exponent, tol)
    Wfull = np.full(n, k)
    Wfull[idx] = W
    A = np.column_stack([X, np.ones(n)])
    F = fractions.Fraction
    S = [[sum(F(int(Wfull[r])) * F(A[r, i]) * F(A[r, j]) for r in range(n)) for j in range(3)]
         for i in range(3)]
    c = [sum(F(int(Wfull[r])) * F(A[r, i]) * F(y[r]) / 2**exponent for r in range(n))
         for i in range(3)]
    # Gauss-Jordan in rationals
    M = [row[:] + [ci] for row, ci in zip(S, c)]
    for i in range(3):
        M[i] = [v / M[i][i] for v in M[i]]
        for r in range(3):
            if r != i:
                M[r] = [a - M[r][i] * b for a, b in zip(M[r], M[i])]
    exact = [M[i][3] for i in range(3)]
    error = [exact[i] - sum(F(t[i]) for t in terms) for i in range(3)]
    kept = Wfull > 0
    moved = max(abs(sum(F(A[r, i]) * error[i] for i in range(3))) for r in np.flatnonzero(kept))
    assert moved <= 2 * tol
    assert len(terms) >= 3
    first = [exact[i] - F(terms[0][i]) for i in range(3)]
    assert max(abs(sum(F(A[r, i]) * first[i] for i in range(3))) for r in range(n)) > 1e20


def test_labels_near_the_float64_maximum_give_a_finite_release():
    """Labels of 1e306 residual scales' units (``y = u (X [1, -2] + noise)``, residual scale
    ``6 u``): the filter scales the labels (their sums overflow); the release summed the
    labels themselves and released NaN with the test passed. It sums them scaled too and
    scales the estimate back: ``u = 1e306`` gives ``1e6`` times the estimate at ``1e300``."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2))
    y = X @ [1.0, -2.0] + rng.normal(size=N)
    estimates = []
    for unit in (1e300, 1e306):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = _issp_trace(X, unit * y, **{**PARAMS, "residual_bound": 6.0 * unit})
        assert trace.passed
        estimates.append(trace.beta_hat / unit)
    np.testing.assert_allclose(estimates[1], estimates[0], rtol=1e-9)


def test_the_same_kept_rows_are_fitted_from_exact_sums_once(monkeypatch):
    """A run whose bound stays too large after the exact fit of its kept rows (rows far
    outside the ladder that the filter keeps) would get the same fit and the same run
    again, up to the eighth run (30 labels of 1e100 with k = 24 took 145 s): with the
    bounds forced large, the exact fit of one kept set runs once and the run stands."""
    calls = []
    fit = _issp_refine.exact_fit
    monkeypatch.setattr(_issp_refine, "exact_fit",
                        lambda *a, **kw: calls.append(1) or fit(*a, **kw))
    monkeypatch.setattr(_issp_refine, "residual_rounding_bound", lambda *a: np.inf)
    monkeypatch.setattr(_issp_refine, "measured_rounding_bound", lambda *a: np.inf)
    X, y, _, _ = _case("slope", 2.0**48, 0)
    trace = _trace(X, y, [])
    assert len(calls) == 1
    assert trace.passed


def test_relabelled_labels_are_kept_for_rows_in_memory_only(monkeypatch, tmp_path):
    """A relabelled run over rows in memory relabels each row once (its passes read the
    kept labels) and decides as when every pass relabels; a file's rows are relabelled
    in every pass (the file may change between reads)."""
    from skprivreg._rows import RowSource

    X, y, _, _ = _case("slope", 2.0**400, 1)
    relabel = Relabel(True, np.zeros(3), np.zeros(3), R0)
    assert _issp_refine.RelabelledSource(RowSource(X, y, fit_intercept=True), relabel)._cache == {}
    path = tmp_path / "X.npy"
    np.save(path, X)
    on_file = RowSource(np.load(path, mmap_mode="r"), y, fit_intercept=True)
    assert _issp_refine.RelabelledSource(on_file, relabel)._cache is None
    kept = _trace(X, y, [])
    monkeypatch.setattr(_issp_refine, "RELABEL_CACHE_BYTES", 0)
    every_pass = _trace(X, y, [])
    assert (kept.score2_num, kept.passed) == (every_pass.score2_num, every_pass.passed)
    assert np.array_equal(kept.V, every_pass.V)
    np.testing.assert_array_equal(kept.beta_hat, every_pass.beta_hat)
