"""PrivateGridSearchCV behaves as scikit-learn's GridSearchCV does: feature names, tags, y."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import DataConversionWarning
from sklearn.model_selection import GridSearchCV
from sklearn.utils import get_tags

from skprivreg import (
    AdaSSPRegressor,
    BoundedScaler,
    BudgetAccountant,
    LinearRegression,
    PrivateGridSearchCV,
    make_private_pipeline,
)

pd = pytest.importorskip("pandas")

COLUMNS = ["a", "b", "c"]


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    return X, X @ np.array([1.0, 2.0, 3.0]) + 0.3 * rng.normal(size=n)


def _search(estimator=None, **kw):
    params = dict(estimator=estimator or AdaSSPRegressor(x_bound=2.0, y_bound=6.5),
                  param_grid={"x_bound": [1.0, 2.0]}, epsilon=4.0, n_repetitions=3)
    params.update(kw)
    return PrivateGridSearchCV(**params)


def _pipeline_search(**kw):
    pipe = make_private_pipeline(BoundedScaler(x_range=(-1.0, 1.0)),
                                 AdaSSPRegressor(x_bound=2.0, y_bound=6.5))
    return _search(pipe, param_grid={"adasspregressor__x_bound": [1.0, 2.0]}, **kw)


SEARCHES = {
    "estimator": lambda: _search(),
    "estimator-refit": lambda: _search(refit_budget=0.2),
    "pipeline": lambda: _pipeline_search(),
    "pipeline-refit": lambda: _pipeline_search(refit_budget=0.2),
}


def _fit_on_frame(search):
    X, y = _data()
    frame = pd.DataFrame(X, columns=COLUMNS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(frame, y)
    return search, frame


@pytest.mark.parametrize("make", SEARCHES.values(), ids=SEARCHES.keys())
def test_a_frame_fit_keeps_the_feature_names_down_to_the_best_estimator(make):
    search, frame = _fit_on_frame(make())
    assert list(search.feature_names_in_) == COLUMNS
    assert search.n_features_in_ == 3
    assert list(search.best_estimator_.feature_names_in_) == COLUMNS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "fitted without feature names" warning
        prediction = search.predict(frame.iloc[:5])
    assert prediction.shape == (5,)


@pytest.mark.parametrize("make", SEARCHES.values(), ids=SEARCHES.keys())
def test_renamed_columns_raise_and_an_array_warns_as_with_grid_search_cv(make):
    search, frame = _fit_on_frame(make())
    reference, _ = _fit_on_frame(GridSearchCV(
        AdaSSPRegressor(epsilon=1.0, x_bound=2.0, y_bound=6.5), {"x_bound": [1.0, 2.0]}, cv=2))
    renamed = frame.iloc[:5].rename(columns={"a": "z"})
    for fitted in (reference, search):
        with pytest.raises(ValueError, match="The feature names should match"):
            fitted.predict(renamed)
        with pytest.warns(UserWarning, match="X does not have valid feature names"):
            fitted.predict(frame.iloc[:5].to_numpy())


def test_runs_fit_the_checked_copy_of_a_file_backed_frame(tmp_path, monkeypatch):
    """The runs and the refit read the copy the search checked (as for an array), as a
    frame with its names: a write into the file after the check reaches no run."""
    import skprivreg.model_selection._search as module

    X, y = _data()
    path = tmp_path / "X.npy"
    np.save(path, X)
    frame = pd.DataFrame(np.load(path, mmap_mode="r"), columns=COLUMNS, copy=False)
    writer = np.load(path, mmap_mode="r+")
    original = module.read_into_memory

    def read_then_written(array, name="X"):
        result = original(array, name)
        if name == "X":
            writer[:, 1] = np.nan
            writer.flush()
        return result

    monkeypatch.setattr(module, "read_into_memory", read_then_written)
    search = _search(refit_budget=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(frame, y)
    assert np.isnan(frame.to_numpy()[:, 1]).all()  # the file did change
    assert list(search.best_estimator_.feature_names_in_) == COLUMNS
    assert np.isfinite(search.best_estimator_.coef_).all()


def test_tags_follow_the_estimator_and_are_non_deterministic():
    multi = get_tags(_search())
    assert multi.target_tags.multi_output and multi.target_tags.required
    assert multi.non_deterministic and multi.regressor_tags.poor_score
    single = get_tags(_search(LinearRegression(x_range=(-1.0, 1.0), y_bound=(-6.5, 6.5)),
                              param_grid={"n_rounds": [1, 2]}))
    assert not single.target_tags.multi_output and single.non_deterministic
    assert get_tags(_pipeline_search()).target_tags.required
    assert get_tags(PrivateGridSearchCV()).non_deterministic  # no estimator yet


def test_a_column_vector_for_a_single_output_estimator_warns_and_is_raveled():
    X, y = _data(n=3000)
    search = _search(LinearRegression(x_range=(-1.0, 1.0), y_bound=(-6.5, 6.5)),
                     param_grid={"n_rounds": [1, 2]})
    with pytest.warns(DataConversionWarning):
        search.fit(X, y[:, None])
    assert search.predict(X[:4]).shape == (4,)


def test_two_outputs_for_a_single_output_estimator_are_refused_before_any_spend():
    X, y = _data(n=3000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    search = _search(LinearRegression(x_range=(-1.0, 1.0), y_bound=(-6.5, 6.5)),
                     param_grid={"n_rounds": [1, 2]}, accountant=acc)
    with pytest.raises(ValueError, match="1d array"):
        search.fit(X, np.column_stack([y, y]))
    assert acc.n_spends == 0


def test_too_few_rows_are_refused_in_scikit_learns_phrasing():
    X, y = _data(n=1)
    with pytest.raises(ValueError, match="n_samples=1"):
        _search().fit(X, y)
