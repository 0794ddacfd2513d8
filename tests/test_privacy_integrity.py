"""Privacy integrity across estimators: fresh noise, typed accounting, no data-dependent signals."""

import copy
import math
import pickle
import secrets
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

import skprivreg._random as _random
from skprivreg import (
    AdaSSPRegressor,
    BoostedAdaSSPRegressor,
    BudgetAccountant,
    CompositionError,
    GaussianLabelNoiseRegressor,
    IndependentSSPRegressor,
    LinearRegression,
    PrivacyEvent,
    PrivacyLeakWarning,
    PrivacyLedger,
    ReuseCovRegressor,
    SSPRegressor,
    WeightedLBARegressor,
)
from skprivreg.accounting import DetachedAccountant, compose_ledgers, group_privacy
from skprivreg.diagnostics import clipping_report
from skprivreg.testing import reproducible_noise


def _data(n=6000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = X @ np.arange(1.0, d + 1) + 0.5 * rng.normal(size=n)
    return X, y


# Private configurations, each with declared bounds, fast on _data().
CONFIGS = [
    SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0, random_state=0),
    AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0, random_state=0),
    SSPRegressor(epsilon=1.0, delta=1e-6, random_state=0),  # private bounds
    BoostedAdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0,
                           random_state=0),
    IndependentSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0,
                            random_state=0),
    ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0, random_state=0),
    GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-6, y_bound=(-8.0, 8.0),
                                random_state=0),
    WeightedLBARegressor(epsilon=8.0, delta=1e-6, y_bound=(0.0, 1.0),
                         assumption="declared", residual_var_lower_bound=0.05,
                         random_state=0),
]


def _data_for(estimator, seed=0):
    if isinstance(estimator, WeightedLBARegressor):
        # Weighted LBA needs many rows per bag: 60,000 rows, uniform labels.
        rng = np.random.default_rng(seed)
        return rng.normal(size=(60_000, 1)), rng.uniform(0, 1, 60_000)
    return _data(seed=seed)
IDS = [f"{type(e).__name__}-{i}" for i, e in enumerate(CONFIGS)]


def _coef(est):
    return np.concatenate([np.ravel(est.coef_), np.ravel(est.intercept_)])


@pytest.mark.parametrize("estimator", CONFIGS, ids=IDS)
def test_clones_with_the_same_seed_draw_independent_noise(estimator):
    """clone copies random_state; the noise must still be fresh in every fit."""
    X, y = _data_for(estimator)
    a, b = clone(estimator).fit(X, y), clone(estimator).fit(X, y)
    assert not np.array_equal(_coef(a), _coef(b))
    assert not a.noise_reproducible_ and a.privacy_spent_.for_publication


@pytest.mark.parametrize("estimator", CONFIGS, ids=IDS)
def test_the_testing_facility_reproduces_and_marks(estimator):
    X, y = _data_for(estimator)
    with pytest.warns(PrivacyLeakWarning, match="testing facility"):
        with reproducible_noise(7):
            a, b = clone(estimator).fit(X, y), clone(estimator).fit(X, y)
    np.testing.assert_array_equal(_coef(a), _coef(b))
    assert a.noise_reproducible_ and not a.privacy_spent_.for_publication
    assert "NOT FOR PUBLICATION" in repr(a.privacy_spent_)


def test_rewinding_a_pickled_generator_reproduces_nothing():
    """The attack: rewind the Generator stored in the pickled params, refit."""
    X, y = _data()
    rng = np.random.default_rng()
    state_before = copy.deepcopy(rng.bit_generator.state)
    est = SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0, random_state=rng)
    est.fit(X, y)
    stolen = pickle.loads(pickle.dumps(est))
    # Stepping PCG64 back to its state before fit is what an attacker can do.
    stolen.random_state.bit_generator.state = state_before
    replay = stolen.fit(X, y)
    assert not np.array_equal(_coef(replay), _coef(est))
    # Nothing secret is stored on the fitted estimator.
    assert not [k for k, v in vars(est).items()
                if isinstance(v, np.random.Generator | np.random.SeedSequence)
                and k != "random_state"]


def test_secret_entropy_has_256_bits_and_purposes_never_share_a_stream(monkeypatch):
    widths = []
    real = secrets.randbits

    def spy(k):
        widths.append(k)
        return real(k)

    monkeypatch.setattr(_random.secrets, "randbits", spy)
    rngs = _random.secret_generators(("a", "b", "c"))
    assert widths == [256]
    draws = [rngs[p].integers(0, 2**63, size=4).tolist() for p in "abc"]
    assert len({tuple(d) for d in draws}) == 3
    # 20 fresh roots: a 32-bit (or any < 200-bit) seed would show here.
    roots = [_random.fresh_seed_sequence().entropy for _ in range(20)]
    assert max(int(e).bit_length() for e in roots) > 200
    with pytest.raises(ValueError, match="own stream"):
        _random.secret_generators(("a", "a"))


# ---------------------------------------------------------------------------
# Typed accounting
# ---------------------------------------------------------------------------
def test_unlike_relations_convert_by_group_privacy():
    full = PrivacyEvent("a", 0.5, 1e-7)
    addrm = PrivacyEvent("b", 1.0, 1e-7, neighbouring="add-remove")
    ledger = PrivacyLedger([full, addrm])
    eps2, delta2 = group_privacy(1.0, 1e-7)
    assert (eps2, delta2) == (2.0, pytest.approx((1 + math.e) * 1e-7))
    assert ledger.neighbouring == "replace-one"
    assert ledger.epsilon == pytest.approx(0.5 + 2.0)
    assert ledger.delta == pytest.approx(1e-7 + (1 + math.e) * 1e-7)
    # One relation throughout: no conversion.
    same = PrivacyLedger([addrm, PrivacyEvent("c", 1.0, 0.0, neighbouring="add-remove")])
    assert same.neighbouring == "add-remove" and same.epsilon == pytest.approx(2.0)
    zero = PrivacyLedger([PrivacyEvent("z", 1.0, 0.0, neighbouring="zero-out"), full])
    assert zero.epsilon == pytest.approx(2.5)


def test_gaussian_events_convert_as_mu_to_2mu():
    mu = 0.3
    addrm = PrivacyEvent("g", 1.0, 1e-6, neighbouring="add-remove", sensitivity=1.0,
                         sigma=1 / mu, mu=mu)
    other = PrivacyEvent("h", 1.0, 1e-6, sensitivity=1.0, sigma=1 / mu, mu=mu)
    ledger = PrivacyLedger([addrm, other], composition="gdp", delta=2e-6)
    assert ledger.mu == pytest.approx(math.hypot(2 * mu, mu))


def test_notions_weaken_or_refuse():
    full = PrivacyEvent("f", 1.0, 0.0)
    label = PrivacyEvent("l", 1.0, 0.0, notion="label")
    feature = PrivacyEvent("x", 1.0, 0.0, notion="feature")
    assert PrivacyLedger([full, label]).notion == "label"
    assert PrivacyLedger([full, feature]).notion == "feature"
    with pytest.raises(CompositionError):
        PrivacyLedger([label, feature])
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    acc.spend(PrivacyLedger([full]))
    acc.spend(PrivacyLedger([label]))
    total = acc.total()
    assert total.notion == "label" and "label notion" in repr(acc)
    with pytest.raises(CompositionError):
        acc.check(PrivacyLedger([feature]))
    strict = BudgetAccountant(epsilon=10.0, notion="full")
    with pytest.raises(CompositionError):
        strict.spend(PrivacyLedger([label]))
    assert strict.n_spends == 0


def test_diffprivlib_style_calls():
    acc = BudgetAccountant(epsilon=2.0, delta=1e-4)
    assert acc.check(0.5, 1e-6)
    acc.spend(0.5, 1e-6)
    eps, delta = acc.total()
    assert (eps, delta) == (pytest.approx(0.5), pytest.approx(1e-6))
    assert acc.remaining() == (pytest.approx(1.5), pytest.approx(1e-4 - 1e-6))
    assert compose_ledgers(acc.ledgers).neighbouring == "replace-one"


def test_reusecov_zero_out_is_labelled_zero_out():
    X, y = _data()
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0,
                            neighbouring="zero-out").fit(X, y)
    assert {e.neighbouring for e in est.privacy_spent_} == {"zero-out"}
    with pytest.raises(ValueError):
        ReuseCovRegressor(epsilon=1.0, x_bound=2.0, y_bound=8.0,
                          neighbouring="add-remove").fit(X, y)


def test_label_noise_baseline_never_reads_bounds_for_free():
    X, y = _data()
    est = GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-6).fit(X, y)
    names = [e.name for e in est.privacy_spent_]
    assert names == ["y_bound", "label_noise"]
    assert est.privacy_spent_.epsilon == pytest.approx(1.0)
    assert est.privacy_spent_.notion == "label"
    with pytest.warns(PrivacyLeakWarning):
        leak = GaussianLabelNoiseRegressor(epsilon=1.0, delta=1e-6, bounds="data").fit(X, y)
    assert math.isinf(leak.privacy_spent_.epsilon)
    low, high = leak.y_bound_
    assert high > np.abs(y).max() and low == -high  # a public bin edge, not max |y|
    assert high not in (np.max(y), -np.min(y))


# ---------------------------------------------------------------------------
# Spend before noise; failed refits leave nothing behind
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("estimator", CONFIGS, ids=IDS)
def test_an_exception_inside_a_mechanism_never_loses_the_spend(estimator, monkeypatch):
    """Every secret draw happens after the spend is recorded."""
    X, y = _data_for(estimator)

    class Boom(RuntimeError):
        pass

    def exploding(purposes, random_state=None):
        class Exploding:
            def __getattr__(self, name):
                raise Boom

        return {p: Exploding() for p in purposes}

    monkeypatch.setattr("skprivreg.base.secret_generators", exploding)
    monkeypatch.setattr("skprivreg.linear_model._reusecov_fit.secret_seed_sequence",
                        lambda random_state=None: (_ for _ in ()).throw(Boom()))
    acc = BudgetAccountant(epsilon=100.0, delta=0.1)
    est = clone(estimator).set_params(accountant=acc)
    with pytest.raises(Boom):
        est.fit(X, y)
    assert acc.n_spends == 1
    assert est.privacy_spent_ is acc.ledgers[0]


@pytest.mark.parametrize("estimator", CONFIGS, ids=IDS)
def test_accountant_receives_exactly_privacy_spent(estimator):
    X, y = _data_for(estimator)
    acc = BudgetAccountant(epsilon=100.0, delta=0.1)
    est = clone(estimator).set_params(accountant=acc).fit(X, y)
    assert acc.ledgers == [est.privacy_spent_]


def test_a_failed_private_refit_leaves_no_fitted_attribute():
    rng = np.random.default_rng(46)
    X = rng.normal(size=(2000, 1))
    y_fit = 0.5 + 0.05 * X[:, 0] + 0.3 * rng.normal(size=2000)
    y_flat = 0.5 + 0.05 * X[:, 0]  # RSS = 0 in every bag: the private check refuses
    est = WeightedLBARegressor(epsilon=8.0, delta=1e-6, y_bound=(-1.0, 2.0),
                               bag_size=1000, n_bags_min=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(X, y_fit)
        except Exception:  # noqa: BLE001 - the first fit may fail too; irrelevant here
            pass
        with pytest.raises(Exception, match="(?i)check|refus"):
            est.fit(X, y_flat)
    with pytest.raises(NotFittedError):
        est.predict(X)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)  # what pipelines and searches ask
    assert not hasattr(est, "coef_") and hasattr(est, "privacy_spent_")


# ---------------------------------------------------------------------------
# No data-dependent warnings
# ---------------------------------------------------------------------------
def _warnings_of(estimator, X, y):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        clone(estimator).fit(X, y)
    return sorted({(w.category.__name__, str(w.message)) for w in record})


@pytest.mark.parametrize("estimator", CONFIGS, ids=IDS)
def test_one_record_outside_the_bounds_changes_no_warning(estimator):
    X, y = _data_for(estimator)
    X2, y2 = X.copy(), y.copy()
    X2[17] = 1e6  # far outside every declared or private bound
    y2[17] = -1e6
    assert _warnings_of(estimator, X, y) == _warnings_of(estimator, X2, y2)
    X3 = X.copy()
    X3[3] = 1e200  # finite, but its square overflows: no floating-point warning either
    assert _warnings_of(estimator, X, y) == _warnings_of(estimator, X3, y)


_HUGE_BOUND = dict(epsilon=1.0, delta=1e-6, y_bound=1e307)


@pytest.mark.parametrize("estimator", [
    LinearRegression(x_range=(-3.0, 3.0), n_rounds=2, **_HUGE_BOUND),
], ids=["LinearRegression"])
def test_sums_that_overflow_under_a_huge_public_bound_raise_no_warning(estimator):
    """Whether X^T y overflows depends on the labels: no floating-point warning,
    neither from the fit nor from the threads that share its pass (80,000
    rows: several pieces, so the pass is threaded on two cores). The SSP
    family and ReuseCov refuse bounds this large before any spend (their
    calibration multiplies up to four bound-sized factors)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(80_000, 3))
    y = rng.uniform(-1.0, 1.0, size=80_000)
    y_big = y.copy()
    y_big[::1000] = 1e307  # 80 labels: their sums overflow float64
    assert _warnings_of(estimator, X, y) == _warnings_of(estimator, X, y_big)
    assert not [w for w in _warnings_of(estimator, X, y_big) if w[0] == "RuntimeWarning"]


def test_the_threads_of_a_pass_raise_no_floating_point_warning():
    """A pass thread has its own floating-point state: the pool silences it as
    ``fit`` silences the calling thread (labels whose sums overflow)."""
    from skprivreg._gram import gram_statistics
    from skprivreg._rows import RowSource

    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(80_000, 3))
    y = np.full(80_000, 1e307)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("error")
        gram_statistics(RowSource(X, y, raw_blocks=True), x_bound=3.0, y_bound=1e307)


def test_clipping_counts_come_from_the_curator_diagnostic_only():
    X, y = _data(n=100)
    X[:3] *= 10
    report = clipping_report(X, y, x_bound=2.0, y_bound=1.0)
    assert report["rows_clipped"] == int((np.linalg.norm(X, axis=1) > 2.0).sum())
    assert report["labels_clipped"] == int((np.abs(y) > 1.0).sum())
    assert 0 < report["rows_clipped_fraction"] < 1
    # It counts the rows the estimators scale: rows on the bound are scaled by a
    # few ulps (their norm is above the clip threshold), so they count.
    from skprivreg.bounds import clip_rows

    on_bound = np.eye(4)[np.arange(1000) % 4]
    assert clipping_report(on_bound, x_bound=1.0)["rows_clipped"] == 1000
    changed = (clip_rows(on_bound, 1.0)[0] != on_bound).any(axis=1)
    assert int(changed.sum()) == 1000


def test_fitted_estimator_pickles_without_its_accountant():
    X, y = _data()
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est = SSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=8.0, accountant=acc)
    with pytest.raises(TypeError):
        pickle.dumps(est)  # unfitted: would lose spends in a worker process
    est.fit(X, y)
    loaded = pickle.loads(pickle.dumps(est))
    assert isinstance(loaded.accountant, DetachedAccountant) and est.accountant is acc
    assert loaded.privacy_spent_.epsilon == pytest.approx(1.0)


def test_the_aggregate_function_raises_no_floating_point_warning():
    """``label_dp.aggregate`` releases values as ``fit`` does: no NumPy
    floating-point warning (here its planning overflowed under a huge bound)."""
    from skprivreg.exceptions import InsufficientDataError
    from skprivreg.label_dp import aggregate

    X, y = _data(n=20_000)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(InsufficientDataError):
            aggregate(X[:, :2], y, epsilon=1.0, delta=1e-6, mode="llp", bag_size=100,
                      y_bound=1e300)
    assert not [w for w in record if issubclass(w.category, RuntimeWarning)]


def test_a_reusecov_fit_that_fails_after_its_spend_is_not_fitted(monkeypatch):
    """The spend stays recorded, but predict and add_outcomes say "not fitted"."""
    X, y = _data()

    class Boom(Exception):
        pass

    monkeypatch.setattr("skprivreg.linear_model._reusecov_fit.release_associations",
                        lambda *a, **k: (_ for _ in ()).throw(Boom()))
    acc = BudgetAccountant(epsilon=100.0, delta=0.1)
    est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=3.0, y_bound=8.0, accountant=acc)
    with pytest.raises(Boom):
        est.fit(X, y)
    assert acc.n_spends == 1 and hasattr(est, "privacy_spent_")
    with pytest.raises(NotFittedError):
        est.predict(X)
    with pytest.raises(NotFittedError):
        est.add_outcomes(X, y, epsilon=1.0, delta=1e-6)
    assert acc.n_spends == 1
