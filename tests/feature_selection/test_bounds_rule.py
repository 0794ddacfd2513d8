"""The public-API rules for the feature-selection estimators.

Names (``x_range``, ``y_bound``, ``on_fail``; withdrawn names raise naming
the new one), keyword-only constructors, the delta default, and the bounds
rule: a bound not declared is estimated privately with ``bounds_budget *
epsilon`` (its own events, in ``privacy_spent_`` and on the accountant),
refused before any spend when ``n`` is too small, read from the data only
with ``bounds='data'`` (infinite epsilon, PrivacyLeakWarning), and the budget
is checked and recorded before the estimate reads the data.
"""

import inspect
import math
import re
import warnings

import numpy as np
import pytest

from skprivreg import BudgetAccountant
from skprivreg.bounds import min_samples_for_private_bound
from skprivreg.exceptions import (
    BudgetExceededError,
    ConfigurationError,
    PrivacyLeakWarning,
    PrivateTestFailedWarning,
    UnstableSupportError,
)
from skprivreg.feature_selection import (
    PrivateLassoRegressor,
    PrivateLassoSupportSelector,
    PrivateTopSSelector,
    _lasso_regressor,
    _lasso_support,
)
from skprivreg.feature_selection import _top_s as _top_s_module

CLASSES = [PrivateLassoSupportSelector, PrivateLassoRegressor, PrivateTopSSelector]


def _sparse(n, p=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, X[:, :3] @ np.array([0.5, -0.5, 0.5]) + rng.normal(size=n)


# -- names and signatures ----------------------------------------------------
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_signature_is_keyword_only_with_one_meaning_per_name(cls):
    params = inspect.signature(cls.__init__).parameters
    assert all(p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "self")
    assert {"x_range", "y_bound", "bounds", "bounds_budget"} <= set(params)
    assert not {"x_bound", "feature_bound", "target_bound", "on_failure"} & set(params)
    if cls is PrivateTopSSelector:
        assert "delta" not in params  # pure DP
    else:
        assert params["delta"].default == 1e-6 and params["on_fail"].default == "raise"
    with pytest.raises(TypeError, match="keyword arguments only"):
        cls(1.0)


@pytest.mark.parametrize("cls", [PrivateLassoSupportSelector, PrivateTopSSelector],
                         ids=lambda c: c.__name__)
def test_x_bound_is_withdrawn_with_the_reason(cls):
    with pytest.raises(TypeError, match="'x_range'") as info:
        cls(x_bound=3.0)
    message = str(info.value)
    assert "x_range=(-b, b)" in message and "L2 norm of each feature row" in message


@pytest.mark.parametrize("cls, old, new", [
    (PrivateLassoSupportSelector, "on_failure", "on_fail"),
    (PrivateLassoRegressor, "on_failure", "on_fail"),
    (PrivateLassoRegressor, "feature_bound", "x_range"),
    (PrivateLassoRegressor, "target_bound", "y_bound"),
])
def test_withdrawn_names_raise_naming_the_new_one(cls, old, new):
    with pytest.raises(TypeError, match=f"no parameter '{old}': it is called '{new}'"):
        cls(**{old: 1.0})


# -- the bounds rule ---------------------------------------------------------
# Each case: a private configuration with no declared bound, the data, the
# names of the bound events, the patch points where the data is first read.
def _top_s():
    return PrivateTopSSelector(epsilon=1.0, n_features_to_select=3)


def _perturbation():
    return PrivateLassoSupportSelector(
        epsilon=1.0, method="perturbation", max_features=1, rsc_constant=0.25,
        penalty=2000.0, on_fail="empty")


def _regressor():
    return PrivateLassoRegressor(
        epsilon=2.0, max_features=3, selection_rule="lars", sampling="partition",
        on_fail="empty")


CASES = {
    "top-s": (_top_s, [(_top_s_module, "count_ranges"), (_top_s_module, "marginal_scores")]),
    "perturbation": (_perturbation, [(_lasso_support, "estimate_ranges")]),
    # the subsample method selects first (no bound needed), then estimates
    "regressor": (_regressor, [(_lasso_regressor, "estimate_ranges"),
                               (_lasso_support.PrivateLassoSupportSelector, "_fit_subsample")]),
}


# Fits whose first reads release nothing (counts, exact scores) and so may
# come before the spend, which refuses NaN in Dask blocks before it: their
# spend must be recorded before these mechanisms run instead.
MECHANISMS = {
    "top-s": [(_top_s_module, "release_ranges"), (_top_s_module, "_top_s_release")],
}


class DataRead(Exception):
    pass


def _patch(monkeypatch, points):
    def read(*args, **kwargs):
        raise DataRead

    for owner, name in points:
        assert hasattr(owner, name)
        monkeypatch.setattr(owner, name, read)


@pytest.mark.parametrize("case", sorted(CASES))
def test_missing_bounds_are_estimated_privately_and_recorded(case):
    make, _ = CASES[case]
    X, y = _sparse(8000)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        # the perturbation test answers bottom on this design (by design of
        # the method); this test is about the bounds
        warnings.simplefilter("ignore", PrivateTestFailedWarning)
        est = make().set_params(accountant=acc).fit(X, y)
    events = est.privacy_spent_.events
    names = [e.name for e in events]
    assert names[:2] == ["x_range", "y_bound"]
    # bounds_budget=0.1 of epsilon, split over the two missing bounds
    assert [e.epsilon for e in events[:2]] == pytest.approx([0.05 * est.epsilon] * 2)
    assert all(e.delta == 0.0 for e in events[:2])
    assert est.privacy_spent_.epsilon <= est.epsilon + 1e-9
    # the accountant holds exactly the fit's ledger
    (recorded,) = acc.ledgers
    assert recorded is est.privacy_spent_
    x_range = est.x_range_
    assert np.all(x_range[0] == -x_range[1]) and 1.0 < x_range[1][0] < 10.0
    assert 1.0 < est.y_bound_[1] < 10.0


@pytest.mark.parametrize("case", sorted(CASES))
def test_too_few_rows_refuses_before_any_spend(case, monkeypatch):
    make, points = CASES[case]
    est = make()
    needed = min_samples_for_private_bound(0.05 * est.epsilon)
    X, y = _sparse(needed - 1)
    _patch(monkeypatch, points)  # the refusal reads no data value
    acc = BudgetAccountant()
    with pytest.raises(ConfigurationError, match=f"needs at least {needed} samples"):
        est.set_params(accountant=acc).fit(X, y)
    assert acc.n_spends == 0 and not hasattr(est, "privacy_spent_")


@pytest.mark.parametrize("case", sorted(CASES))
def test_budget_is_checked_and_recorded_before_the_data_is_read(case, monkeypatch):
    make, points = CASES[case]
    X, y = _sparse(8000)
    _patch(monkeypatch, points)
    small = BudgetAccountant(epsilon=1e-3, delta=1e-12)
    with pytest.raises(BudgetExceededError):
        make().set_params(accountant=small).fit(X, y)
    assert small.n_spends == 0
    # Positive control: with budget, fit reaches the read (or, for a fit that
    # reads before it spends, the mechanism), and has already recorded the
    # spend when it does.
    monkeypatch.undo()
    _patch(monkeypatch, MECHANISMS.get(case, points))
    acc = BudgetAccountant()
    with pytest.raises(DataRead):
        make().set_params(accountant=acc).fit(X, y)
    assert acc.n_spends == 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_bounds_data_is_an_explicit_leak(case):
    make, _ = CASES[case]
    X, y = _sparse(500)  # no n requirement: nothing is estimated privately
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = make().set_params(bounds="data").fit(X, y)
    # The leak warning always; 500 rows are too few for a stable private
    # selection, so the Lasso cases also report their bottom.
    assert any(issubclass(w.category, PrivacyLeakWarning)
               and "read from the data" in str(w.message) for w in caught)
    assert all(issubclass(w.category, (PrivacyLeakWarning, PrivateTestFailedWarning))
               for w in caught)
    bound_events = [e for e in est.privacy_spent_.events if e.name in ("x_range", "y_bound")]
    assert len(bound_events) >= 1 and all(math.isinf(e.epsilon) for e in bound_events)
    assert math.isinf(est.privacy_spent_.epsilon)


def test_declared_bounds_spend_nothing_on_bounds():
    X, y = _sparse(500)
    est = PrivateTopSSelector(epsilon=1.0, n_features_to_select=2, x_range=(-4.0, 4.0),
                              y_bound=(-6.0, 6.0)).fit(X, y)
    assert [e.name for e in est.privacy_spent_.events] == ["top_s_marginal"]
    assert est.privacy_spent_.epsilon == pytest.approx(1.0)


def test_subsample_selector_refuses_bounds_it_does_not_use():
    X, y = _sparse(500)
    for params in ({"x_range": (-1.0, 1.0)}, {"bounds": "data"}, {"bounds_budget": 0.2}):
        with pytest.raises(ConfigurationError, match="not used with method='subsample'"):
            PrivateLassoSupportSelector(**params).fit(X, y)


def test_perturbation_penalty_from_an_estimated_y_bound_refuses_after_the_bound_spend():
    # Lambda = 4 sigma s sqrt(n ln p) / B_y ~ 4 * 0.01 * 90 / 3 = 1.2 < 16 s^2/Psi = 64:
    # known only once B_y is estimated, so the test does not run and only the
    # bound estimates stay spent.
    X, y = _sparse(8000, p=5)
    acc = BudgetAccountant()
    est = PrivateLassoSupportSelector(
        method="perturbation", max_features=1, rsc_constant=0.25, noise_level=0.01,
        accountant=acc)
    with pytest.raises(ConfigurationError, match="estimated y_bound"):
        est.fit(X, y)
    assert [e.name for e in est.privacy_spent_.events] == ["x_range", "y_bound"]
    assert acc.total()[0] == pytest.approx(0.1)


# -- the regressor's accounting when stage 2 does not run ---------------------
def _noise(n=6000, p=6, seed=3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, p)), rng.normal(size=n)


@pytest.mark.parametrize("on_fail", ["raise", "empty"])
def test_regressor_without_stage2_settles_to_the_selection_ledger(on_fail, fixed_noise):
    # Pure noise: bottom (partition, epsilon_1 = 0.675). Seeded (the testing
    # facility): the votes of 655 blocks of 9 rows can still agree by chance
    # (d_hat up to 20 seen), and fresh draws released a support in about 1e-4
    # of fits; the bound delta/2 holds only where d_hat <= 0.
    X, y = _noise()
    acc = BudgetAccountant()
    reg = PrivateLassoRegressor(
        epsilon=1.0, max_features=1, selection_rule="lars", sampling="partition",
        fit_intercept=False, on_fail=on_fail, accountant=acc, random_state=0)
    if on_fail == "raise":
        with pytest.raises(UnstableSupportError):
            reg.fit(X, y)
    else:
        with pytest.warns(PrivateTestFailedWarning, match="empty support was released"):
            reg.fit(X, y)
        assert reg.stage2_ is None and not reg.coef_.any()
    names = [e.name for e in reg.privacy_spent_.events]
    assert names == ["lasso_support_subsample"]  # no bound estimate, no stage 2
    eps1 = 0.75 * 0.9 * 1.0
    assert reg.privacy_spent_.epsilon == pytest.approx(eps1)
    assert acc.total()[0] == pytest.approx(eps1)
    assert acc.ledgers[0] is reg.privacy_spent_


def _message_guarantee(message):
    found = re.search(r"epsilon=(\d(?:[0-9.eE+-]*\d)?), delta=(\d(?:[0-9.eE+-]*\d)?)", message)
    assert found, message
    return float(found.group(1)), float(found.group(2))


@pytest.mark.parametrize("cls", [PrivateLassoSupportSelector, PrivateLassoRegressor],
                         ids=lambda c: c.__name__)
@pytest.mark.parametrize("on_fail", ["raise", "empty"])
def test_bottom_message_states_the_recorded_guarantee(cls, on_fail, fixed_noise):
    # The selection guarantees (epsilon, delta/2): the message of bottom must
    # give the numbers the ledger records, not the delta parameter. Seeded
    # pure noise (bottom; see the test above).
    X, y = _noise()
    est = cls(epsilon=2.0, delta=1e-6, max_features=1, selection_rule="lars",
              sampling="partition", fit_intercept=False, on_fail=on_fail, random_state=0)
    if on_fail == "raise":
        with pytest.raises(UnstableSupportError) as info:
            est.fit(X, y)
        message = str(info.value)
    else:
        with pytest.warns(PrivateTestFailedWarning, match="bottom") as record:
            est.fit(X, y)
        message = str(record[0].message)
    selection = [e for e in est.privacy_spent_.events if e.name == "lasso_support_subsample"]
    assert len(selection) == 1
    eps, delta = _message_guarantee(message)
    assert eps == pytest.approx(selection[0].epsilon, rel=1e-3)
    assert delta == pytest.approx(selection[0].delta, rel=1e-2)
    assert delta == pytest.approx(5e-7, rel=1e-2)  # delta/2, not the parameter


def test_regressor_intercept_only_estimates_the_label_bound_only(fixed_noise):
    X, y = _noise()  # seeded: pure noise still releases a support in ~1e-4 of fresh fits
    reg = PrivateLassoRegressor(
        epsilon=1.0, max_features=1, selection_rule="lars", sampling="partition",
        on_fail="empty", random_state=0)
    with pytest.warns(PrivateTestFailedWarning):
        reg.fit(X, y + 2.0)
    assert not reg.stable_ and reg.stage2_ is not None
    names = [e.name for e in reg.privacy_spent_.events]
    assert names[:2] == ["y_bound", "lasso_support_subsample"] and "x_range" not in names


def test_perturbation_maps_asymmetric_ranges_into_the_papers_domain(monkeypatch):
    # Entries clipped to [l_j, h_j] and divided by m_j = max(|l_j|, |h_j|) lie
    # in [-1, 1]; labels clipped and mapped to s clip(y)/B_y lie in [-s, s].
    seen = {}
    original = _lasso_support.perturbation_distance

    def spy(X, y, s, Lambda, psi):
        seen.update(X=X, y=y, s=s)
        return original(X, y, s, Lambda, psi)

    monkeypatch.setattr(_lasso_support, "perturbation_distance", spy)
    X, y = _sparse(2000, p=4)
    X = 10.0 * X + 3.0
    with pytest.warns(PrivateTestFailedWarning):  # bottom on this design
        PrivateLassoSupportSelector(
            method="perturbation", max_features=2, rsc_constant=0.25, penalty=2000.0,
            x_range=((0.0, -40.0, 1.0, -2.0), (25.0, 5.0, 2.0, 2.0)), y_bound=(-2.0, 0.5),
            on_fail="empty").fit(X, y)
    assert np.max(np.abs(seen["X"])) == pytest.approx(1.0)
    assert np.max(np.abs(seen["y"])) == pytest.approx(2.0)
    assert seen["X"][:, 2].min() >= 0.5 - 1e-12  # column 2 clipped to [1, 2], over m = 2


def test_empty_on_bottom_warns_and_a_release_does_not(fixed_noise):
    # Seeded: on this pure-noise design fresh fits released a support in ~6e-4 of runs.
    X, y = _noise()
    sel = PrivateLassoSupportSelector(epsilon=1.0, max_features=1, selection_rule="lars",
                                      sampling="partition", on_fail="empty", random_state=0)
    with pytest.warns(PrivateTestFailedWarning, match="bottom"):
        sel.fit(X, y)
    assert not sel.stable_
    X, y = _sparse(30_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sel.set_params(epsilon=2.0, max_features=3).fit(X, y)
    assert sel.stable_


def test_regressor_perturbation_estimates_its_ranges_before_the_test():
    # The perturbation test clips to the ranges, so the regressor estimates
    # them over all columns before stage 1 and hands them to the selector.
    rng = np.random.default_rng(11)
    X = rng.choice([-1.0, 1.0], size=(20_000, 20))
    y = np.clip(0.5 * X[:, 0] + 0.2 * rng.normal(size=20_000), -1, 1)
    reg = PrivateLassoRegressor(
        epsilon=4.0, method="perturbation", max_features=1, rsc_constant=0.25,
        penalty=2000.0, fit_intercept=False, on_fail="empty")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivateTestFailedWarning)  # bottom is possible
        reg.fit(X, y)
    names = [e.name for e in reg.privacy_spent_.events]
    assert names[:3] == ["x_range", "y_bound", "lasso_support_perturbation"]
    assert reg.selector_.x_range_[1][0] == pytest.approx(reg.x_range_[1][0])
    # every entry is +-1: the private bound lies within one bin (9%) of 1
    assert 0.9 < reg.x_range_[1][0] < 1.2
    assert reg.privacy_spent_.epsilon <= 4.0 + 1e-9


def test_top_s_with_declared_ranges_records_its_spend_before_the_selection(monkeypatch):
    """Its scores are read before the spend; the Gumbel selection only after it."""
    X, y = _sparse(2000)
    _patch(monkeypatch, [(_top_s_module, "_top_s_release")])
    acc = BudgetAccountant()
    est = _top_s().set_params(x_range=(-5.0, 5.0), y_bound=10.0, accountant=acc)
    with pytest.raises(DataRead):
        est.fit(X, y)
    assert acc.n_spends == 1


def test_perturbation_penalty_refused_after_the_bound_estimate_charges_the_estimate_only():
    # The penalty follows the privately estimated y_bound, so it can only be checked
    # after that estimate: then only the estimate stays spent, as for the selector.
    import warnings

    from skprivreg import BudgetAccountant
    from skprivreg.exceptions import ConfigurationError
    from skprivreg.feature_selection import PrivateLassoRegressor, PrivateLassoSupportSelector

    rng = np.random.default_rng(0)
    X = rng.choice([-1.0, 1.0], size=(5000, 5))
    y = 0.5 * X[:, 0] + 0.2 * rng.normal(size=5000)
    spent = []
    for cls in (PrivateLassoSupportSelector, PrivateLassoRegressor):
        acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
        est = cls(epsilon=1.0, delta=1e-6, method="perturbation", max_features=1,
                  rsc_constant=0.25, noise_level=0.01, x_range=(-1.0, 1.0), accountant=acc)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ConfigurationError, match="estimate stays spent"):
                est.fit(X, y)
        spent.append((tuple(acc.total()), [e.name for e in est.privacy_spent_.events]))
    assert spent[0] == spent[1] == ((0.1, 0.0), ["y_bound"])
