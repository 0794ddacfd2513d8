"""CLI adapter of ``python -m skprivreg plan lba`` and the label-DP demo case.

Kept out of the estimator modules: the parser only maps options to
:func:`~skprivreg.label_dp.lba_plan` and prints the returned plan. The
command-line interface owns this module's two entry points.
"""

import argparse

import numpy as np

from ..exceptions import ConfigurationError
from ._baseline import GaussianLabelNoiseRegressor
from ._lba import WeightedLBARegressor
from ._planner import lba_plan

__all__ = ["plan_command", "demo_case", "build_parser"]

def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg plan lba",
        description=(
            "Plan weighted LBA / noisy weighted LLP (label-DP): bag size, number of "
            "bags, guaranteed (epsilon, delta) and predicted excess loss, from public "
            "facts only. No data is read."
        ),
    )
    parser.add_argument("--n", type=int, required=True, help="number of samples")
    parser.add_argument("--d", type=int, required=True, help="number of features")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--mode", choices=["lba", "llp"], default="lba")
    parser.add_argument("--assumption", choices=["ptr", "declared"], default="ptr")
    parser.add_argument(
        "--y-bound", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
        help="declared label range (label units); default: estimated privately",
    )
    parser.add_argument(
        "--bounds-budget", type=float, default=0.1,
        help="share of epsilon for a private label range (without --y-bound)",
    )
    parser.add_argument(
        "--residual-var", type=float, default=None,
        help="declared per-point residual-variance floor alpha ('declared')",
    )
    parser.add_argument(
        "--expected-residual-var", type=float, default=None,
        help="public guess of the residual variance, to plan k ('ptr'; utility only)",
    )
    parser.add_argument("--bag-size", type=int, default=None, help="default: auto")
    parser.add_argument("--ptr-fraction", type=float, default=0.4)
    parser.add_argument("--noise-fraction", type=float, default=0.1)
    parser.add_argument("--noise-scale", type=float, default=1.0)
    parser.add_argument("--allocation", choices=["per_bag", "global"], default="per_bag")
    parser.add_argument("--no-intercept", action="store_true")
    return parser


def plan_command(argv):
    """Print the public planning numbers of weighted LBA / LLP; return an exit code.

    Parameters
    ----------
    argv : list of str
        Arguments after ``plan lba`` (see ``--help``).

    Returns
    -------
    int
        0 on success, 2 when the estimator would refuse (too few samples, or a
        private residual test that passes with probability below 5%).
    """
    args = build_parser().parse_args(argv)
    try:
        plan = lba_plan(
            n_samples=args.n,
            n_features=args.d,
            epsilon=args.epsilon,
            delta=args.delta,
            y_bound=None if args.y_bound is None else tuple(args.y_bound),
            mode=args.mode,
            assumption=args.assumption,
            bag_size="auto" if args.bag_size is None else args.bag_size,
            residual_var_lower_bound=args.residual_var,
            expected_residual_var=args.expected_residual_var,
            ptr_epsilon_fraction=args.ptr_fraction,
            noise_fraction=args.noise_fraction,
            noise_scale=args.noise_scale,
            noise_allocation=args.allocation,
            bounds_budget=args.bounds_budget,
            fit_intercept=not args.no_intercept,
        )
    except (ConfigurationError, ValueError) as exc:
        print(f"infeasible: {exc}")
        return 2
    print(plan)
    return 2 if plan.refusal is not None else 0


def demo_case():
    """Simulated census-like data where ``'ptr'`` weighted LBA works (fits in seconds).

    1,000,000 training rows, 5 features, labels clipped to the public range
    [-12, 12] with residual standard deviation about 5 (``r = Delta/sigma ~ 5``);
    (epsilon, delta) = (4, 1e-6) with the private residual check.
    """
    rng = np.random.default_rng(20231016)
    n_train, n_test, d = 1_000_000, 20_000, 5
    beta = np.array([2.0, -1.0, 0.5, 0.0, 1.5])

    def simulate(n):
        X = rng.normal(size=(n, d))
        y = X @ beta + 1.0 + 5.0 * rng.normal(size=n)
        return X, np.clip(y, -12.0, 12.0)

    X_train, y_train = simulate(n_train)
    X_test, y_test = simulate(n_test)
    estimator = WeightedLBARegressor(
        epsilon=4.0,
        delta=1e-6,
        y_bound=(-12.0, 12.0),
        assumption="ptr",
        expected_residual_var=22.0,
    )
    return {
        "name": "WeightedLBA, simulated n=1e6 d=5, PTR check",
        "estimator": estimator,
        "notion": "label",
        "X_train": X_train,
        "y_train": y_train,
        "X_test": X_test,
        "y_test": y_test,
        "baseline": GaussianLabelNoiseRegressor(
            epsilon=4.0, delta=1e-6, y_bound=(-12.0, 12.0)
        ),
        "notes": (
            "Weighted LBA needs r = label range / residual std small and n large; "
            "the Gaussian-label-noise baseline is more accurate at the same budget."
        ),
    }


if __name__ == "__main__":  # pragma: no cover
    import sys

    raise SystemExit(plan_command(sys.argv[1:]))
