"""Command-line adaptor of ISSP's planner and its demo case (kept apart from the estimator).

``python -m skprivreg plan issp`` parses its options here and prints
``str(issp_plan(...))``; ``python -m skprivreg demo`` takes :func:`demo_case`.
This module holds no logic of its own: the CLI and demo modules can call
:func:`~skprivreg.linear_model.issp_plan` and build the case directly.
"""

import argparse

import numpy as np

from ..exceptions import ConfigurationError
from ._issp import ISSPRegressor
from ._issp_plan import issp_plan


def _split_arg(text):
    if text in ("auto", "paper"):
        return text
    parts = tuple(float(v) for v in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("budget split: 'auto', 'paper' or 'fT,fM,fC'.")
    return parts


def _bound_arg(text):
    return text if text == "auto" else float(text)


def plan_command(argv):
    """``python -m skprivreg plan issp --n N --d D --epsilon E --delta DL``: public numbers only."""
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg plan issp",
        description="Public planning numbers of ISSPRegressor (no data is read).",
    )
    parser.add_argument("--n", type=float, required=True,
                        help="number of training rows n (e.g. 1e9)")
    parser.add_argument("--d", type=int, required=True,
                        help="number of features d (without the intercept column)")
    parser.add_argument("--epsilon", type=float, default=1.0,
                        help="total epsilon of the fit (default: 1.0)")
    parser.add_argument("--delta", type=float, default=1e-6,
                        help="total delta, in (0, 0.1]; choose it well below 1/n (default: 1e-6)")
    parser.add_argument("--no-intercept", action="store_true",
                        help="plan for fit_intercept=False (p = d instead of d + 1)")
    parser.add_argument("--leverage-bound", type=_bound_arg, default="auto",
                        help="L0, a leverage (unitless, in (0, 1)), or 'auto' (default)")
    parser.add_argument("--residual-bound", type=_bound_arg, default="auto",
                        help="R0 in units of y, or 'auto' (estimated privately; default)")
    parser.add_argument("--budget-split", type=_split_arg, default="auto",
                        help="'auto' (default), 'paper' or three shares fT,fM,fC summing to 1")
    parser.add_argument("--r0-budget-fraction", type=float, default=0.05,
                        help="share of (epsilon, delta) for the residual scale (default: 0.05)")
    parser.add_argument("--ptr-fail-prob", type=float, default=0.0,
                        help="probability of FAIL on clean data, in [0, 0.5) (default: 0)")
    parser.add_argument("--max-blowup", type=float, default=10.0,
                        help="warning threshold on e^(432 k^2 L0) (default: 10)")
    args = parser.parse_args(argv)
    try:
        plan = issp_plan(
            n_samples=int(args.n), n_features=args.d, epsilon=args.epsilon, delta=args.delta,
            fit_intercept=not args.no_intercept, leverage_bound=args.leverage_bound,
            residual_bound=args.residual_bound, budget_split=args.budget_split,
            r0_budget_fraction=args.r0_budget_fraction, ptr_fail_prob=args.ptr_fail_prob,
            max_blowup=args.max_blowup,
        )
    except ConfigurationError as exc:
        print(f"infeasible: {exc}")
        return 2
    print(plan)
    return 0


def demo_case():
    """ISSP at n = 2e6, d = 2, epsilon = 8: it PASSes, and its noise shows the n it needs."""
    rng = np.random.default_rng(20240415)
    n, d = 2_000_000, 2
    coef = np.array([1.5, -2.0])
    X = rng.standard_normal((n + 20_000, d))
    y = X @ coef + 0.5 + rng.standard_normal(n + 20_000)
    est = ISSPRegressor(epsilon=8.0, delta=1e-5, residual_bound=5.5, on_fail="zero",
                        random_state=0)
    return {
        "name": "ISSP, n=2e6 d=2 (far below its minimum n)",
        "estimator": est,
        "notion": "full",
        "X_train": X[:n],
        "y_train": y[:n],
        "X_test": X[n:],
        "y_test": y[n:],
    }

