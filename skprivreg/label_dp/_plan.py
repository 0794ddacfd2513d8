"""``python -m skprivreg plan lba ...`` and the demo case (public facts only)."""

import argparse

import numpy as np

from ..mechanisms import gaussian_sigma
from ._planning import plan_aggregation
from ._baseline import GaussianLabelNoiseRegressor
from ..exceptions import InsufficientDataError
from ._lba import WeightedLBARegressor

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
        "--label-bounds", type=float, nargs=2, required=True, metavar=("A", "B"),
        help="public label bounds",
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
        0 on success, 2 when the target is unreachable with ``--n`` samples.
    """
    args = build_parser().parse_args(argv)
    try:
        plan = plan_aggregation(
            args.n,
            args.d,
            epsilon=args.epsilon,
            delta=args.delta,
            mode=args.mode,
            bag_size="auto" if args.bag_size is None else args.bag_size,
            label_bounds=tuple(args.label_bounds),
            assumption=args.assumption,
            residual_var_lower_bound=args.residual_var,
            expected_residual_var=args.expected_residual_var,
            ptr_epsilon_fraction=args.ptr_fraction,
            noise_fraction=args.noise_fraction,
            noise_scale=args.noise_scale,
            noise_allocation=args.allocation,
            fit_intercept=not args.no_intercept,
        )
    except (InsufficientDataError, ValueError) as exc:
        print(f"infeasible: {exc}")
        return 2
    p, m, k = plan.n_columns, plan.n_bags, plan.bag_size
    label_range = plan.label_range
    ledger = plan.ledger()
    lines = [
        f"mechanism            {plan.privacy_report()['mechanism']} "
        f"(label-DP, replace-one label)",
        f"assumption           {plan.assumption}",
        f"n, d, p              {plan.n_samples}, {plan.n_features}, {p}",
        f"bag_size k           {k}",
        f"n_bags m             {m}  (uses {m * k} samples, drops {plan.n_samples - m * k})",
        f"guarantee            epsilon={ledger.epsilon:.6g}, delta={ledger.delta:.3g}",
    ]
    if plan.mode == "lba":
        lines.append(
            f"per-bag c = Delta/s  {plan.c:.6g}  (requires every bag RSS >= "
            f"{plan.rss_threshold:.6g})"
        )
        if plan.assumption == "ptr":
            lines.append(
                f"budget split         test eps={plan.epsilon_ptr:.4g} delta={plan.delta_ptr:.3g}; "
                f"aggregation eps={plan.epsilon_aggregation:.4g} "
                f"delta={plan.delta_aggregation:.3g}"
            )
    if m > p + 1:
        lines.append(f"excess loss (OLS)    about {p / (m - p - 1):.3g} x residual variance")
    sigma = gaussian_sigma(label_range, args.epsilon, args.delta)
    lines.append(
        f"baseline             Gaussian label noise sigma={sigma:.4g}; OLS excess loss about "
        f"{sigma**2 * p / args.n:.4g} (absolute, label units^2)"
    )
    print("\n".join(lines))
    return 0


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
        label_bounds=(-12.0, 12.0),
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
            epsilon=4.0, delta=1e-6, label_bounds=(-12.0, 12.0)
        ),
        "notes": (
            "Weighted LBA needs r = label range / residual std small and n large; "
            "the Gaussian-label-noise baseline is more accurate at the same budget."
        ),
    }


if __name__ == "__main__":  # pragma: no cover
    import sys

    raise SystemExit(plan_command(sys.argv[1:]))
