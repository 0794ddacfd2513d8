"""BoundedScaler and PrivateStandardScaler."""

import math
import pickle
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone

from skprivreg import BudgetAccountant, BudgetExceededError, ConfigurationError, PrivacyLeakWarning
from skprivreg.mechanisms import moment_sums_sensitivity
from skprivreg.preprocessing import BoundedScaler, PrivateStandardScaler


def _data(n=2000, d=3, seed=0):
    return np.random.default_rng(seed).uniform(0.0, 10.0, size=(n, d))


def _unreadable(n, d):
    """A Dask array whose values raise when computed: shape is readable, values are not."""
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")

    def read():
        raise AssertionError("a data value was read")

    return da.from_delayed(dask.delayed(read)(), shape=(n, d), dtype=np.float64)


# -- BoundedScaler -------------------------------------------------------
def test_bounded_scaler_maps_declared_ranges_and_clips():
    X = np.array([[0.0, -5.0], [10.0, 5.0], [5.0, 0.0], [20.0, -50.0]])
    scaler = BoundedScaler(x_range=([0.0, -5.0], [10.0, 5.0])).fit(X)
    Z = scaler.transform(X)
    np.testing.assert_allclose(Z, [[-1, -1], [1, 1], [0, 0], [1, -1]])
    np.testing.assert_allclose(scaler.inverse_transform(Z[:3]), X[:3])
    assert len(scaler.privacy_spent_) == 0 and scaler.privacy_spent_.epsilon == 0.0


def test_bounded_scaler_fit_reads_only_the_shape():
    scaler = BoundedScaler(x_range=(0.0, 1.0)).fit(_unreadable(100, 4))
    assert scaler.n_features_in_ == 4
    np.testing.assert_array_equal(scaler.data_min_, np.zeros(4))


def test_bounded_scaler_needs_a_declared_range():
    with pytest.raises(ValueError, match="declared x_range"):
        BoundedScaler().fit(_data())
    with pytest.raises(ValueError, match="x_range"):
        BoundedScaler(x_range=(1.0, 0.0)).fit(_data())
    with pytest.raises(TypeError):
        BoundedScaler((0, 1))  # keyword-only


# -- PrivateStandardScaler -------------------------------------------------
def test_sensitivity_of_the_joint_moment_sums_by_brute_force():
    # max over u, u' in [-1, 1] of ||(u - u', u^2 - u'^2)||, per column, times sqrt(d)
    grid = np.linspace(-1, 1, 401)
    u, v = np.meshgrid(grid, grid)
    per_column = np.sqrt((u - v) ** 2 + (u**2 - v**2) ** 2).max()
    for d in (1, 3, 7):
        assert moment_sums_sensitivity(d) == pytest.approx(per_column * math.sqrt(d), rel=1e-9)


def test_noise_matches_the_sigma_in_the_ledger():
    # Rows at the midpoint map to u = 0: the released sums are pure noise, and
    # n * (mean_ - mid) / half recovers each draw. Over N = K * d draws,
    # sum z^2 / sigma^2 ~ chi2_N, N = 1200: it must lie in [chi2.ppf(1e-9, N),
    # chi2.isf(1e-9, N)] = [0.77 N, 1.27 N] (a correct sampler fails with
    # probability 2e-9; 5 sd = 0.2 failed in 1.3e-6). Halving sigma gives 0.25 N.
    n, d, K = 1000, 4, 300
    X = np.full((n, d), 5.0)
    scaler = PrivateStandardScaler(epsilon=1.0, delta=1e-6, x_range=(0.0, 10.0))
    draws = []
    for _ in range(K):
        fitted = clone(scaler).fit(X)
        draws.append(n * (fitted.mean_ - 5.0) / 5.0)
    sigma = fitted.privacy_spent_.events[-1].sigma
    assert sigma == pytest.approx(moment_sums_sensitivity(d) / fitted.privacy_spent_.mu)
    stat = np.sum(np.square(draws)) / sigma**2
    assert stats.chi2.ppf(1e-9, K * d) <= stat <= stats.chi2.isf(1e-9, K * d), stat / (K * d)


def test_private_moments_are_accurate_and_outputs_stay_in_the_public_range():
    X = _data(n=20000)
    scaler = PrivateStandardScaler(epsilon=2.0, x_range=(0.0, 10.0)).fit(X)
    np.testing.assert_allclose(scaler.mean_, X.mean(axis=0), atol=0.05)
    np.testing.assert_allclose(scaler.scale_, X.std(axis=0), rtol=0.05)
    Z = scaler.transform(np.vstack([X, [[-100.0, 50.0, 5.0]]]))
    low, high = scaler.output_range_[:, 0], scaler.output_range_[:, 1]
    assert np.all(Z >= low - 1e-12) and np.all(Z <= high + 1e-12)
    np.testing.assert_allclose(scaler.inverse_transform(scaler.transform(X)), X)


def test_spend_reaches_the_accountant_and_the_budget_comes_first():
    acc = BudgetAccountant(epsilon=1.5, delta=1e-5)
    scaler = PrivateStandardScaler(epsilon=1.0, x_range=(0.0, 10.0), accountant=acc).fit(_data())
    assert acc.ledgers == [scaler.privacy_spent_]
    assert scaler.privacy_spent_.epsilon == pytest.approx(1.0)
    assert scaler.privacy_spent_.delta == pytest.approx(1e-6)
    with pytest.raises(BudgetExceededError):
        clone(scaler).fit(_unreadable(2000, 3))  # refused before any value is read
    assert acc.n_spends == 1


def test_missing_range_is_estimated_privately_or_refused_before_any_spend():
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    scaler = PrivateStandardScaler(epsilon=1.0, accountant=acc).fit(_data(n=4000))
    names = [event.name for event in scaler.privacy_spent_.events]
    assert names == ["x_range", "moments"]
    assert scaler.privacy_spent_.epsilon == pytest.approx(1.0)
    assert 8.0 < scaler.x_range_[1][0] < 12.0
    with pytest.raises(ConfigurationError, match="samples"):
        clone(scaler).fit(_data(n=100))
    assert acc.n_spends == 1


def test_bounds_from_data_warn_and_record_infinite_epsilon():
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        scaler = PrivateStandardScaler(bounds="data").fit(_data())
    assert math.isinf(scaler.privacy_spent_.epsilon)


def test_noise_is_fresh_whatever_the_random_state():
    X = _data()
    one = PrivateStandardScaler(x_range=(0.0, 10.0), random_state=0).fit(X)
    two = clone(one).fit(X)
    assert not np.array_equal(one.mean_, two.mean_)


def test_set_output_feature_names_and_pickle():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(_data(), columns=["a", "b", "c"])
    for scaler in (BoundedScaler(x_range=(0.0, 10.0)),
                   PrivateStandardScaler(x_range=(0.0, 10.0))):
        out = scaler.set_output(transform="pandas").fit_transform(frame)
        assert list(out.columns) == ["a", "b", "c"]
        assert list(scaler.get_feature_names_out()) == ["a", "b", "c"]
        loaded = pickle.loads(pickle.dumps(scaler))
        np.testing.assert_allclose(loaded.transform(frame).to_numpy(), out.to_numpy())


def test_dask_input_gives_the_numpy_result(fixed_noise):
    da = pytest.importorskip("dask.array")
    X = _data(n=3000)
    dX = da.from_array(X, chunks=(700, 3))
    for make in (lambda: BoundedScaler(x_range=(0.0, 10.0)),
                 lambda: PrivateStandardScaler(x_range=(0.0, 10.0), random_state=3),
                 lambda: PrivateStandardScaler(random_state=3)):
        a, b = make().fit(X), make().fit(dX)
        Za, Zb = a.transform(X), b.transform(dX)
        assert hasattr(Zb, "compute")
        np.testing.assert_allclose(Zb.compute(), Za, rtol=1e-10, atol=1e-12)


def test_private_scaler_validates_before_spending():
    acc = BudgetAccountant(epsilon=10.0)
    with pytest.raises(ValueError, match="x_range"):
        PrivateStandardScaler(x_range=(1.0, 0.0), accountant=acc).fit(_data())
    with pytest.raises(TypeError, match="sample_weight"):
        PrivateStandardScaler(x_range=(0.0, 1.0)).fit(_data(), sample_weight=np.ones(2000))
    assert acc.n_spends == 0


def test_per_column_ranges_are_called_x_range():
    with pytest.raises(TypeError, match="'x_range'"):
        PrivateStandardScaler(feature_bounds=(0.0, 1.0))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("symmetric", [False, True])
def test_moment_block_equals_the_sums_of_the_mapped_rows(dtype, symmetric):
    """The pass's block statistic: sums of the rows clipped to the box and mapped to [-1, 1].

    Ranges symmetric about 0 take the sums of the clipped rows, then scale them.
    """
    from skprivreg.preprocessing import to_unit_box
    from skprivreg.preprocessing._scalers import _moment_block

    rng = np.random.default_rng(5)
    low, high = np.array([-1.0, 0.0, 18.0]), np.array([1.0, 5.0, 90.0])
    if symmetric:
        low, high = np.array([-1.0, -5.0, -90.0]), np.array([1.0, 5.0, 90.0])
    X = rng.uniform(low - 2.0, high + 2.0, size=(4000, 3)).astype(dtype)  # some outside
    U = to_unit_box(X, low, high)
    S1, S2 = _moment_block(X, None, low=low, high=high, check=True, symmetric=symmetric)
    np.testing.assert_allclose(S1, U.sum(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(S2, (U * U).sum(axis=0), rtol=1e-12, atol=1e-9)
    assert np.all(S2 <= len(X))
    for bad in (np.nan, np.inf, -np.inf):
        Xb = X.copy()
        Xb[1234, 1] = bad
        with pytest.raises(ValueError, match="NaN or infinity"):
            _moment_block(Xb, None, low=low, high=high, check=True, symmetric=symmetric)


@pytest.mark.parametrize("layout", ["C", "F", "rows of F"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_entry_outside_a_symmetric_range_changes_no_bit_of_the_moments(dtype, layout):
    """Whether a block needed clipping is private: its sums equal the clipped copy's bit for
    bit, in every memory order (a product rounds a Fortran-ordered operand differently)."""
    from skprivreg.preprocessing._scalers import _moment_block

    rng = np.random.default_rng(2)
    low, high = np.full(4, -3.0), np.full(4, 3.0)
    X = (rng.standard_normal((10_000, 4)) * 0.9).astype(dtype)
    X = {"C": X[:5_000], "F": np.asfortranarray(X[:5_000]),
         "rows of F": np.asfortranarray(X)[:5_000]}[layout]
    X[1234, 2] = 40.0
    assert np.abs(X).max() > 3.0
    got = _moment_block(X, None, low=low, high=high, check=True, symmetric=True)
    want = _moment_block(np.clip(X, low, high).astype(dtype), None, low=low, high=high,
                         check=True, symmetric=True)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_unscaled_moments_only_where_nothing_overflows():
    from skprivreg.preprocessing._scalers import unscaled_moments

    assert unscaled_moments([-1.0, -5.0], [1.0, 5.0], 10**6)
    assert not unscaled_moments([-1.0, 0.0], [1.0, 5.0], 10)  # not symmetric
    assert not unscaled_moments([-1e200], [1e200], 10)
    assert not unscaled_moments([-1e147], [1e147], 10**7)  # n * half^2 > 1e300
    assert not unscaled_moments([-1e-200, -1.0], [1e-200, 1.0], 10)  # 1 / half^2 overflows


def test_moments_of_huge_or_tiny_ranges_are_scaled_first():
    """Summing unscaled squares is kept to ranges where nothing overflows (public facts).

    With a range of 1e200 the squares of entries overflow: one record far
    inside the range then turned a released variance from inf into NaN, and
    the warnings depended on the data.
    """
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(1000, 2))
    X2 = X.copy()
    X2[0, 0] = 1e160  # one record changed, inside the range
    releases = []
    for data in (X, X2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            scaler = PrivateStandardScaler(epsilon=1.0, x_range=(-1e200, 1e200)).fit(data)
        releases.append(scaler.var_)
    assert not np.isnan(releases[0]).any() and not np.isnan(releases[1]).any()
    # A tiny range: mapping an entry far outside it overflows, silently, to
    # an infinity that the clip maps to 1 (the warning would name the record).
    tiny = rng.uniform(0.0, 1e-150, size=(1000, 2))
    far = tiny.copy()
    far[0, 0] = 1e160
    for data in (tiny, far):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            scaler = PrivateStandardScaler(epsilon=1.0, x_range=(0.0, 1e-150)).fit(data)
        assert np.all(np.isfinite(scaler.mean_))


def test_float32_entries_just_outside_the_range_are_clipped():
    """The range check compares in float64: a float32 maximum would round the range first."""
    from skprivreg.preprocessing._scalers import _moment_block

    reach = 1.00000008  # between two float32 values
    low, high = np.full(1, -reach), np.full(1, reach)
    X = np.full((4, 1), np.float32(1.00000012), dtype=np.float32)
    assert float(X[0, 0]) > reach
    S1, S2 = _moment_block(X, None, low=low, high=high, check=True, symmetric=True)
    # Every mapped entry in [-1, 1] up to float64 rounding of the scale; the
    # float32 comparison let u = 1.00000004 through (S1 = 4.00000016).
    assert S1[0] <= 4.0 * (1 + 1e-15) and S2[0] <= 4.0 * (1 + 1e-15)


def test_a_range_whose_width_overflows_is_refused_before_any_spend():
    acc = BudgetAccountant(epsilon=2.0, delta=1e-5)
    X = np.zeros((100, 2))
    with pytest.raises(ValueError, match="finite width"):
        PrivateStandardScaler(epsilon=1.0, x_range=(-1.7e308, 1e308), accountant=acc).fit(X)
    assert acc.n_spends == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_range_read_from_the_data_refuses_nan_and_infinity(bad):
    """bounds='data' reads the range from the rows: their max and min refuse NaN or infinity."""
    X = _data()
    X[7, 1] = bad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        with pytest.raises(ValueError, match="NaN|infinity"):
            PrivateStandardScaler(epsilon=1.0, bounds="data").fit(X)


def test_private_range_counts_rows_by_their_largest_magnitude(monkeypatch):
    """The private x_range counts, for each bin, the rows whose largest |x_ij| exceeds
    it: negative entries by their magnitude."""
    import skprivreg.preprocessing._scalers as scalers
    from skprivreg.mechanisms import bound_bins, counts_above

    rng = np.random.default_rng(6)
    X = rng.normal(size=(5_000, 3)) * rng.uniform(0.01, 50.0, size=(5_000, 1))
    X[::2] = -np.abs(X[::2])  # half the rows: negative entries only
    seen = []
    real = scalers.private_norm_bound

    def recording(counts, *args, **kwargs):
        seen.append(np.array(counts))
        return real(counts, *args, **kwargs)

    monkeypatch.setattr(scalers, "private_norm_bound", recording)
    scalers.PrivateStandardScaler(epsilon=1.0).fit(X)
    (counts,) = seen
    np.testing.assert_array_equal(counts, counts_above(np.abs(X).max(axis=1), bound_bins()))
