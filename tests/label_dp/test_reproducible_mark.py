"""aggregate() marks its ledger when its secret draws were seeded for testing."""

import warnings

import numpy as np
import pytest

import skprivreg.label_dp._aggregate as aggregate_module
from skprivreg.exceptions import PrivacyCheckFailedError
from skprivreg.label_dp import aggregate
from skprivreg.testing import reproducible_noise


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, X @ [1.0, 2.0, 3.0] + rng.normal(size=n)


def _llp(X, y):
    return aggregate(X, y, epsilon=1.0, delta=1e-6, mode="llp", y_bound=10.0,
                     noise_scale=20.0, noise_fraction=1.0, random_state=0)


def test_aggregate_ledger_is_not_for_publication_inside_reproducible_noise():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(1):
            first, ledger = _llp(X, y)
        with reproducible_noise(1):
            again, _ = _llp(X, y)
    np.testing.assert_array_equal(first.y_agg, again.y_agg)  # seeded noise
    assert ledger.for_publication is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, outside = _llp(X, y)
    assert outside.for_publication is True


def test_failed_check_ledger_is_not_for_publication_inside_reproducible_noise(monkeypatch):
    # The ledger attached to a refused residual check carries the mark too.
    X, y = _data(n=60_000)
    monkeypatch.setattr(aggregate_module, "_ptr_decision", lambda *args: False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(1), pytest.raises(PrivacyCheckFailedError) as inside:
            aggregate(X, y, epsilon=8.0, y_bound=10.0, random_state=0)
        with pytest.raises(PrivacyCheckFailedError) as outside:
            aggregate(X, y, epsilon=8.0, y_bound=10.0, random_state=0)
    assert inside.value.ledger.for_publication is False
    assert outside.value.ledger.for_publication is True


def test_the_released_dataset_carries_the_mark_through_save_and_fit(tmp_path):
    # The dataset is what is shared: it must say so itself, through save/load, and a
    # model fitted on it must inherit the mark.
    from skprivreg.label_dp import LLPDataset, WeightedLBARegressor

    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(1):
            marked, _ = _llp(X, y)
        plain, _ = _llp(X, y)
        assert marked.privacy["for_publication"] is False
        assert plain.privacy["for_publication"] is True
        marked.save(tmp_path / "marked.npz")
        loaded = LLPDataset.load(tmp_path / "marked.npz")
        assert loaded.privacy["for_publication"] is False
        est = WeightedLBARegressor(mode="llp").fit_aggregated(loaded, X)
        assert not est.privacy_spent_.for_publication and est.noise_reproducible_
        est = WeightedLBARegressor(mode="llp").fit_aggregated(plain, X)
        assert est.privacy_spent_.for_publication and not est.noise_reproducible_
