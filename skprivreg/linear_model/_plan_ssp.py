"""Public planning numbers and demo cases for SSPRegressor and AdaSSPRegressor."""

import argparse
import math

import numpy as np

from ..datasets import make_linear_regression
from ._adassp import AdaSSPRegressor
from ._ssp import SSPRegressor

__all__ = ["plan_adassp", "plan_ssp", "demo_cases"]


def _parser(name):
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
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--x-bound", type=float, default=None, help="row L2-norm bound")
    parser.add_argument("--y-bound", type=float, default=None, help="|y| bound")
    parser.add_argument("--n-outputs", type=int, default=1)
    parser.add_argument("--no-intercept", action="store_true")
    parser.add_argument("--composition", choices=["gdp", "basic"], default="gdp")
    return parser


def _report(estimator, args):
    private = not math.isinf(args.epsilon)
    x_bound = 1.0 if args.x_bound is None else args.x_bound
    y_bound = 1.0 if args.y_bound is None else args.y_bound
    ledger = estimator._plan_ledger(private, args.n_outputs, x_bound, y_bound)
    p = args.d + (0 if args.no_intercept else 1)
    print(f"{type(estimator).__name__}: n={args.n}, d={args.d} (p={p} columns), "
          f"epsilon={args.epsilon}, delta={args.delta}")
    if args.x_bound is None or args.y_bound is None:
        print(f"  missing bounds are estimated privately with {estimator.bounds_budget:.0%} "
              "of epsilon; scales below are for unit bounds")
    print(ledger)
    gram = next(event for event in ledger.events if event.name == "XtX")
    gram_norm = 2 * gram.sigma * math.sqrt(p)
    print(f"\n  Gram noise operator norm ~ 2*sigma_XX*sqrt(p) = {gram_norm:.4g}")
    isotropic_lambda = x_bound**2 / max(args.d, 1)
    needed = 2 * gram.sigma * math.sqrt(p) / isotropic_lambda
    print(f"  For isotropic rows of norm x_bound (lambda_min(Sigma) = x_bound^2/d), the "
          f"Gram noise is\n  smaller than n*lambda_min once n >> {needed:.3g} "
          f"(you have n/that = {args.n / needed:.3g}).")
    return 0


def plan_adassp(argv):
    """``python -m skprivreg plan adassp``."""
    args = _parser("adassp").parse_args(argv)
    est = AdaSSPRegressor(
        args.epsilon, args.delta, x_bound=args.x_bound, y_bound=args.y_bound,
        fit_intercept=not args.no_intercept, composition=args.composition,
    )
    return _report(est, args)


def plan_ssp(argv):
    """``python -m skprivreg plan ssp``."""
    args = _parser("ssp").parse_args(argv)
    est = SSPRegressor(
        args.epsilon, args.delta, x_bound=args.x_bound, y_bound=args.y_bound,
        fit_intercept=not args.no_intercept, composition=args.composition,
    )
    return _report(est, args)


def demo_cases():
    """AdaSSP and SSP on simulated data (n=10,000) and on sklearn's diabetes (n=442)."""
    from sklearn.datasets import load_diabetes

    X_all, y_all = make_linear_regression(20_000, 10, intercept=1.0, random_state=0)
    X, y, X_test, y_test = X_all[:10_000], y_all[:10_000], X_all[10_000:], y_all[10_000:]
    common = {"X_train": X, "y_train": y, "X_test": X_test, "y_test": y_test, "notion": "full"}
    yield {"name": "AdaSSP, simulated n=1e4 d=10, private bounds",
           "estimator": AdaSSPRegressor(epsilon=1.0, delta=1e-5, random_state=0), **common}
    yield {"name": "AdaSSP, simulated n=1e4 d=10, declared bounds",
           "estimator": AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=5.0, y_bound=10.0, random_state=0),
           **common}
    yield {"name": "SSP, simulated n=1e4 d=10, declared bounds",
           "estimator": SSPRegressor(epsilon=1.0, delta=1e-5, x_bound=5.0, y_bound=10.0, random_state=0),
           **common}
    data = load_diabetes()
    order = np.random.default_rng(0).permutation(data.target.shape[0])
    Xd, yd = data.data[order], data.target[order]
    split = 330
    yield {"name": "AdaSSP, diabetes n=330 (too small for eps=1)",
           "estimator": AdaSSPRegressor(epsilon=1.0, delta=1e-5, x_bound=0.25, y_bound=350.0, random_state=0),
           "X_train": Xd[:split], "y_train": yd[:split], "X_test": Xd[split:],
           "y_test": yd[split:], "notion": "full"}
