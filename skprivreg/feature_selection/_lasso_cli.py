"""Command-line adapter and demo case of the private Lasso (no estimator code).

``plan_command`` parses ``python -m skprivreg plan lasso`` options and prints
:func:`~skprivreg.feature_selection.lasso_plan`; ``demo_case`` is the demo's
row. Both exist only until the command line and the demo table call
``lasso_plan`` and build the case themselves.
"""

import argparse

import numpy as np

from ._lasso_plan import lasso_plan
from ._lasso_regressor import PrivateLassoRegressor

__all__ = ["plan_command", "demo_case"]


def plan_command(argv):
    """``python -m skprivreg plan lasso``: print :func:`lasso_plan` (no data used)."""
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg plan lasso",
        description="Planning numbers of the private Lasso support selector (no data used).",
    )
    parser.add_argument("--n", type=int, default=None, help="number of rows (n-public planning)")
    parser.add_argument("--p", "--d", dest="p", type=int, default=None, help="number of features")
    parser.add_argument("--s", type=int, default=None, help="target support size")
    parser.add_argument("--epsilon", type=float, default=1.0, help="budget of the distance test")
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--sampling", choices=("poisson", "partition"), default="poisson")
    parser.add_argument("--subsample-rate", type=float, default=None)
    parser.add_argument("--n-subsamples", default="1000", help="int or 'paper'")
    parser.add_argument("--max-appearances", type=int, default=None)
    parser.add_argument(
        "--n1", type=float, default=None,
        help="rows at which the non-private rule finds the support w.p. ~0.75",
    )
    parser.add_argument("--rsc", type=float, default=None, help="Psi, for the perturbation method")
    args = parser.parse_args(argv)
    m_arg = args.n_subsamples if args.n_subsamples == "paper" else int(args.n_subsamples)
    try:
        plan = lasso_plan(
            n_samples=args.n, n_features=args.p, epsilon=args.epsilon, delta=args.delta,
            sampling=args.sampling, subsample_rate=args.subsample_rate, n_subsamples=m_arg,
            max_appearances=args.max_appearances, n1=args.n1, max_features=args.s,
            rsc_constant=args.rsc,
        )
    except ValueError as exc:
        parser.error(str(exc))
    print(plan)
    return 0


def demo_case():
    """A configuration where private Lasso regression works: n = 60000, p = 30, s = 3."""
    rng = np.random.default_rng(20130601)
    n, p, s = 60_000, 30, 3
    theta = np.zeros(p)
    theta[[2, 11, 23]] = [0.8, -0.6, 0.5]
    X = rng.normal(size=(n + 5000, p))
    y = 1.0 + X @ theta + rng.normal(size=n + 5000)
    estimator = PrivateLassoRegressor(
        epsilon=2.0,
        delta=1e-6,
        max_features=s,
        selection_rule="lars",
        sampling="partition",
        x_range=(-3.0, 3.0),
        y_bound=6.0,
        on_fail="empty",
        random_state=0,
    )
    return {
        "name": "PrivateLasso (lars), n=6e4 p=30 s=3",
        "estimator": estimator,
        "notion": "full",
        "X_train": X[:n],
        "y_train": y[:n],
        "X_test": X[n:],
        "y_test": y[n:],
    }
