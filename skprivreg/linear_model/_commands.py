"""Command-line adapters for the linear planners and demo cases.

Argument parsing only: each command builds the public planner's arguments
(:func:`ssp_plan`, :func:`adassp_plan`, :func:`reusecov_plan`) and prints
the returned plan. Kept apart from the estimator modules until
``skprivreg._cli`` calls the planners itself.
"""

import argparse
import math

import numpy as np

from ..datasets import make_linear_regression
from ._adassp import AdaSSPRegressor, adassp_plan
from ._independent_ssp import IndependentSSPRegressor
from ._reusecov import ReuseCovRegressor
from ._reusecov_plan import NEIGHBOURINGS, reusecov_plan
from ._ssp import SSPRegressor, ssp_plan

__all__ = ["plan_ssp", "plan_adassp", "plan_reusecov", "demo_cases"]


def _ssp_parser(name):
    parser = argparse.ArgumentParser(
        prog=f"python -m skprivreg plan {name}",
        description=(
            "Noise scales of each release for public numbers; touches no data. "
            "Bounds not given are estimated privately in fit, so the scales are "
            "printed per unit bound."
        ),
    )
    parser.add_argument("--n", type=int, required=True, help="number of rows (public)")
    parser.add_argument("--d", type=int, required=True, help="number of features")
    parser.add_argument("--epsilon", type=float, required=True, help="total privacy budget")
    parser.add_argument("--delta", type=float, default=1e-6,
                        help="total delta (default 1e-6; choose it well below 1/n)")
    parser.add_argument("--x-bound", type=float, default=None,
                        help="bound on the L2 norm of a row of X (same units as X)")
    parser.add_argument("--y-bound", type=float, default=None,
                        help="bound on |y| (same units as y)")
    parser.add_argument("--n-outputs", type=int, default=1, help="number of outputs")
    parser.add_argument("--no-intercept", action="store_true", help="fit without intercept")
    parser.add_argument("--composition", choices=["gdp", "basic"], default="gdp",
                        help="how the Gaussian releases share the budget")
    return parser


def _ssp_command(name, planner, argv):
    args = _ssp_parser(name).parse_args(argv)
    print(planner(
        n_samples=args.n, n_features=args.d, epsilon=args.epsilon, delta=args.delta,
        n_outputs=args.n_outputs, x_bound=args.x_bound, y_bound=args.y_bound,
        fit_intercept=not args.no_intercept, composition=args.composition,
    ))
    return 0


def plan_ssp(argv):
    """``python -m skprivreg plan ssp``: prints :func:`ssp_plan`."""
    return _ssp_command("ssp", ssp_plan, argv)


def plan_adassp(argv):
    """``python -m skprivreg plan adassp``: prints :func:`adassp_plan`."""
    return _ssp_command("adassp", adassp_plan, argv)


def plan_reusecov(argv):
    """``python -m skprivreg plan reusecov``: prints :func:`reusecov_plan`."""
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg plan reusecov",
        description="Noise scales, budget split and ridge of ReuseCovRegressor "
        "from public numbers only (no data is read).",
    )
    parser.add_argument("--n", type=int, required=True, help="number of rows")
    parser.add_argument("--d", type=int, required=True, help="number of features")
    parser.add_argument("--l", type=int, default=1, help="number of outcomes")
    parser.add_argument("--epsilon", type=float, default=1.0, help="total privacy budget")
    parser.add_argument("--delta", type=float, default=1e-6,
                        help="total delta (default 1e-6; choose it well below 1/n)")
    parser.add_argument("--privacy", choices=["full", "feature", "label"], default="full")
    parser.add_argument("--mechanism", choices=["gauss", "proj"], default="gauss")
    parser.add_argument("--composition", choices=["gdp", "paper"], default="gdp")
    parser.add_argument("--neighbouring", choices=list(NEIGHBOURINGS), default="replace-one")
    parser.add_argument("--x-bound", type=float, default=None,
                        help="bound on the L2 norm of a row of X (full/feature)")
    parser.add_argument("--y-bound", type=float, default=None,
                        help="bound on |y_ij| (full/label)")
    parser.add_argument("--x-max-norm", type=float, default=None,
                        help="public max row norm of the augmented X (label)")
    parser.add_argument("--y-max-norm", type=float, default=None,
                        help="public max row norm of Y (feature)")
    parser.add_argument("--w-bound", type=float, default=None,
                        help="scale of a coefficient vector's norm (ridge heuristic)")
    parser.add_argument("--cov-budget", default="0.5", help="float in (0,1) or 'auto'")
    parser.add_argument("--ridge", default="auto", help="float >= 0 or 'auto'")
    parser.add_argument("--cov-subsample", type=int, default=None,
                        help="rows of the secret covariance subsample")
    parser.add_argument("--no-intercept", action="store_true")
    parser.add_argument("--intercept-scaling", type=float, default=1.0)
    args = parser.parse_args(argv)
    try:
        plan = reusecov_plan(
            n_samples=args.n, n_features=args.d, n_outputs=args.l, epsilon=args.epsilon,
            delta=args.delta, privacy=args.privacy, mechanism=args.mechanism,
            composition=args.composition, neighbouring=args.neighbouring,
            x_bound=args.x_bound, y_bound=args.y_bound, x_max_norm=args.x_max_norm,
            y_max_norm=args.y_max_norm, w_bound=args.w_bound,
            cov_budget="auto" if args.cov_budget == "auto" else float(args.cov_budget),
            ridge="auto" if args.ridge == "auto" else float(args.ridge),
            cov_subsample=args.cov_subsample, fit_intercept=not args.no_intercept,
            intercept_scaling=args.intercept_scaling,
        )
    except ValueError as error:
        parser.error(str(error))
    print(plan)
    return 0


def demo_cases():
    """AdaSSP and SSP on simulated data and sklearn's diabetes; ReuseCov on 50 outcomes."""
    from sklearn.datasets import load_diabetes

    X_all, y_all = make_linear_regression(20_000, 10, intercept=1.0, random_state=0)
    X, y, X_test, y_test = X_all[:10_000], y_all[:10_000], X_all[10_000:], y_all[10_000:]
    common = {"X_train": X, "y_train": y, "X_test": X_test, "y_test": y_test, "notion": "full"}
    yield {"name": "AdaSSP, simulated n=1e4 d=10, private bounds",
           "estimator": AdaSSPRegressor(epsilon=1.0, random_state=0), **common}
    yield {"name": "AdaSSP, simulated n=1e4 d=10, declared bounds",
           "estimator": AdaSSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0, random_state=0),
           **common}
    yield {"name": "SSP, simulated n=1e4 d=10, declared bounds",
           "estimator": SSPRegressor(epsilon=1.0, x_bound=5.0, y_bound=10.0, random_state=0),
           **common}
    data = load_diabetes()
    order = np.random.default_rng(0).permutation(data.target.shape[0])
    Xd, yd = data.data[order], data.target[order]
    split = 330
    yield {"name": "AdaSSP, diabetes n=330 (too small for eps=1)",
           "estimator": AdaSSPRegressor(epsilon=1.0, x_bound=0.25, y_bound=350.0,
                                        random_state=0),
           "X_train": Xd[:split], "y_train": yd[:split], "X_test": Xd[split:],
           "y_test": yd[split:], "notion": "full"}
    yield _reusecov_case()


def _reusecov_case():
    """A full-DP multi-outcome fit that works: n=20000, d=10, l=50, epsilon=1.

    ``baseline`` is :class:`IndependentSSPRegressor` at the same budget (50
    separate private regressions), which PRIMO improves on.
    """
    rng = np.random.default_rng(20230304)
    n, d, n_outputs = 25_000, 10, 50
    W = rng.normal(0.0, 1.0 / math.sqrt(d), size=(d, n_outputs))
    X = rng.normal(size=(n, d))
    Y = X @ W + rng.normal(size=(n, n_outputs))
    n_train = 20_000
    bounds = dict(x_bound=1.5 * math.sqrt(d), y_bound=4.0, w_bound=1.0)
    return {
        "name": "ReuseCov (PRIMO): 50 outcomes on one design, full DP",
        "estimator": ReuseCovRegressor(epsilon=1.0, delta=1e-6, privacy="full",
                                       cov_budget="auto", random_state=0, **bounds),
        "baseline": IndependentSSPRegressor(epsilon=1.0, delta=1e-6, random_state=0,
                                            **bounds),
        "notion": "full",
        "X_train": X[:n_train],
        "y_train": Y[:n_train],
        "X_test": X[n_train:],
        "y_test": Y[n_train:],
    }
