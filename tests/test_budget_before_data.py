"""The budget is checked before any private data value is read, for every estimator.

For each estimator, the function that first reads the data's values (the
blockwise reducer, the statistic, the clip or the mechanism, as named in the
estimator's module) is replaced by one that raises :class:`DataRead`. With an
accountant whose budget is too small, ``fit`` must raise
:class:`BudgetExceededError` and never reach it; with budget to spare, the
same ``fit`` must reach it (the positive control: the patch point is really on
the data path). ``validate_data``'s own finiteness check is allowed first.
"""

import importlib
import types

import numpy as np
import pytest
from _privacy_harness import quiet

import skprivreg.feature_selection._lasso_support as lasso_module
from skprivreg import (
    AdaSSPRegressor,
    BudgetAccountant,
    BudgetExceededError,
    GaussianLabelNoiseRegressor,
    IndependentSSPRegressor,
    ISSPRegressor,
    PrivateLassoRegressor,
    PrivateLassoSupportSelector,
    PrivateTopSSelector,
    ReuseCovRegressor,
    SSPRegressor,
    WeightedLBARegressor,
)


class DataRead(Exception):
    """Raised by a patched function when fit reads private data values."""


def _raiser(what, original, when=None):
    """``original``, except that a call reading private values (``when``) raises."""

    def read(*args, **kwargs):
        if when is None or when(*args, **kwargs):
            raise DataRead(what)
        return original(*args, **kwargs)  # a pass over public values only

    return read


def _reads_y(position):
    """For label DP (X public): a pass that also reads Y (argument ``position``) is private."""

    def predicate(*args, **kwargs):
        Y = kwargs.get("Y", args[position] if len(args) > position else None)
        if Y is None and kwargs.get("source") is not None:  # a RowSource of (X, Y)
            Y = kwargs["source"].Y
        return Y is not None

    return predicate


class _ClipRaisingNumpy:
    """A module's ``np`` whose ``clip`` (the read of the labels) raises."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def clip(*args, **kwargs):
        raise DataRead("np.clip of the labels")


def _single(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.5
    return X, X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)


def _multi(n=400, d=3, l=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.5
    return X, X @ rng.normal(size=(d, l)) + 0.3 * rng.normal(size=(n, l))


def _sparse(n=3000, p=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    theta = np.zeros(p)
    theta[:3] = [0.5, -0.5, 0.5]
    return X, X @ theta + rng.normal(size=n)


def _labels(n=4000, d=2, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.clip(X @ np.arange(1.0, d + 1) + 3 * rng.normal(size=n), -9.5, 9.5)


def _ssp_points():
    return [("skprivreg.linear_model._ssp", "gram_statistics", None)]


def _reusecov_points(label=False):
    # sufficient_statistics(X, Y, ...) and its per-piece block_statistics(X_b, Y_b, ...)
    return [
        ("skprivreg.linear_model._reusecov_fit", "sufficient_statistics",
         _reads_y(1) if label else None),
        ("skprivreg.linear_model._reusecov_stats", "block_statistics",
         _reads_y(1) if label else None),
    ]


def _lasso_points():
    return [
        (lasso_module.PrivateLassoSupportSelector, "_fit_subsample", None),
        (lasso_module.PrivateLassoSupportSelector, "_fit_perturbation", None),
    ]


# name -> (estimator factory, data, [(module or class, attribute, predicate)])
CASES = {
    "ssp-declared": (lambda: SSPRegressor(epsilon=1.0, delta=1e-5, x_bound=2.0, y_bound=3.0),
                     _single, _ssp_points()),
    "ssp-private-bounds": (lambda: SSPRegressor(epsilon=8.0, delta=1e-5, bounds_budget=0.5),
                           lambda: _single(n=600), _ssp_points()),
    "adassp-declared": (lambda: AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=2.0, y_bound=3.0),
                        _single, _ssp_points()),
    "adassp-private-bound": (lambda: AdaSSPRegressor(epsilon=8.0, delta=1e-5, x_bound=2.0,
                                                     bounds_budget=0.5),
                             lambda: _single(n=600), _ssp_points()),
    "independent-ssp": (
        lambda: IndependentSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=2.0, y_bound=3.0), _multi,
        [("skprivreg.linear_model._independent_ssp", "sufficient_statistics", None)]),
    "reusecov-full": (lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0),
                      _multi, _reusecov_points()),
    "reusecov-feature": (
        lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, privacy="feature", x_bound=2.0),
        _multi, _reusecov_points()),
    # Label DP: X is public (its norms may be read first); Y must not be.
    "reusecov-label": (lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-6, privacy="label",
                                                 y_bound=3.0),
                       _multi, _reusecov_points(label=True)),
    "label-noise": (
        lambda: GaussianLabelNoiseRegressor(epsilon=1.0, y_bound=(-3.0, 3.0)), _single,
        [("skprivreg.label_dp._baseline", "np", _ClipRaisingNumpy()),
         ("skprivreg.label_dp._baseline", "add_gaussian", None)]),
    "lba-ptr": (
        lambda: WeightedLBARegressor(epsilon=8.0, bag_size=800, n_bags_min=4, y_bound=(-10.0,
                                                                                       10.0)),
        _labels, [("skprivreg.label_dp._lba", "run_aggregation", None)]),
    "lba-declared": (
        lambda: WeightedLBARegressor(epsilon=8.0, bag_size=50, y_bound=(-10.0, 10.0),
                                     assumption="declared", residual_var_lower_bound=1e4),
        _labels, [("skprivreg.label_dp._lba", "run_aggregation", None)]),
    "llp": (
        lambda: WeightedLBARegressor(epsilon=8.0, delta=1e-5, mode="llp", bag_size=10,
                                     y_bound=(-10.0, 10.0), noise_fraction=1.0,
                                     noise_scale=8.0),
        _labels, [("skprivreg.label_dp._lba", "run_aggregation", None)]),
    "issp-declared-residual": (
        lambda: ISSPRegressor(residual_bound=1.0, predicted_fail="spend"), _single,
        [("skprivreg.linear_model._issp", "private_residual_scale", None),
         ("skprivreg.linear_model._issp", "_issp_core", None)]),
    "lasso-support-subsample": (
        lambda: PrivateLassoSupportSelector(epsilon=2.0, delta=1e-6, max_features=3,
                                            selection_rule="lars"),
        _sparse, _lasso_points()),
    "lasso-support-perturbation": (
        lambda: PrivateLassoSupportSelector(noise_level=1.0), _sparse, _lasso_points()),
    "lasso-regressor": (
        lambda: PrivateLassoRegressor(max_features=3, selection_rule="lars",
                                      x_range=(-3.0, 3.0), y_bound=5.0),
        _sparse, _lasso_points()),
    "top-s": (lambda: PrivateTopSSelector(n_features_to_select=2, x_range=(-4.0, 4.0),
                                          y_bound=4.0),
              _sparse,
              [("skprivreg.feature_selection._top_s", "count_ranges", None),
               ("skprivreg.feature_selection._top_s", "marginal_scores", None)]),
}


def _patch(monkeypatch, points, case):
    """Apply each ``(owner, name, how)``: ``how`` is None (always raise), a
    predicate on the call's arguments (raise when it holds), or a ready
    replacement object (such as :class:`_ClipRaisingNumpy`)."""
    for target, name, how in points:
        owner = importlib.import_module(target) if isinstance(target, str) else target
        assert hasattr(owner, name), f"{case}: {target}.{name} no longer exists"
        if how is None or isinstance(how, types.FunctionType):
            replacement = _raiser(f"{case}: {name}", getattr(owner, name), how)
            if isinstance(owner, type):  # a method: drop self
                function = replacement

                def replacement(self, *args, _f=function, **kwargs):
                    return _f(*args, **kwargs)
        else:
            replacement = how
        monkeypatch.setattr(owner, name, replacement)




def _budget_case(case):
    return case


@pytest.mark.parametrize("case", [_budget_case(c) for c in sorted(CASES)])
def test_budget_is_checked_before_data_is_read(monkeypatch, case):
    make, data, points = CASES[case]
    X, y = data()
    _patch(monkeypatch, points, case)
    acc = BudgetAccountant(epsilon=1e-3, delta=1e-12)
    est = make().set_params(accountant=acc)
    with quiet(), pytest.raises(BudgetExceededError):
        est.fit(X, y)
    assert acc.n_spends == 0
    assert not hasattr(est, "privacy_spent_")


@pytest.mark.parametrize("case", sorted(CASES))
def test_patch_point_is_on_the_data_path(monkeypatch, case):
    # Positive control: with budget to spare, fit does reach the patched read.
    make, data, points = CASES[case]
    X, y = data()
    _patch(monkeypatch, points, case)
    est = make().set_params(accountant=BudgetAccountant())
    with quiet(), pytest.raises(DataRead):
        est.fit(X, y)


def _fitted_reusecov():
    X, Y = _multi()
    with quiet():
        est = ReuseCovRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=3.0).fit(X, Y)
    return est, X, Y[:, :2] * 0.5


def test_reusecov_add_outcomes_checks_budget_before_reading(monkeypatch):
    est, X, Y_new = _fitted_reusecov()
    _patch(monkeypatch, _reusecov_points(), "add_outcomes")
    est.set_params(accountant=BudgetAccountant(epsilon=1e-3, delta=1e-12))
    with quiet(), pytest.raises(BudgetExceededError):
        est.add_outcomes(X, Y_new, epsilon=1.0, delta=1e-6)


def test_reusecov_add_outcomes_patch_point_is_on_the_data_path(monkeypatch):
    est, X, Y_new = _fitted_reusecov()
    _patch(monkeypatch, _reusecov_points(), "add_outcomes")
    est.set_params(accountant=BudgetAccountant())
    with quiet(), pytest.raises(DataRead):
        est.add_outcomes(X, Y_new, epsilon=1.0, delta=1e-6)
