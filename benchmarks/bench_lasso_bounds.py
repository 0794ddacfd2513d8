"""What the bounds rule costs the private Lasso regressor: declared vs privately estimated ranges.

On the demo's design (n = 60,000 training rows, p = 30, s = 3, coefficients
0.8, -0.6, 0.5, unit noise, intercept 1) ``PrivateLassoRegressor`` with the
LARS rule on disjoint subsamples at epsilon = 2, delta = 1e-6 is fitted with

- declared public ranges ``x_range = (-3, 3)``, ``y_bound = 6`` (the whole
  budget on selection and SSP), and
- no declared bound (the defaults): ``bounds_budget = 0.1`` of epsilon buys a
  private label range and a private range of the selected columns.

Reported per configuration over the seeds: the median and 90% quantile of the
test MSE (5,000 held-out rows) as a ratio to the non-private OLS fit measured
in the same run, how often the exact support is released, and the mean fit
time.

    python benchmarks/bench_lasso_bounds.py            # 20 seeds (~1 min on 2 cores)
    python benchmarks/bench_lasso_bounds.py --quick    # 5 seeds

Results: benchmarks/results/lasso_bounds.{json,md}.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LinearRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

from skprivreg.feature_selection import PrivateLassoRegressor  # noqa: E402

N, N_TEST, P = 60_000, 5_000, 30
SUPPORT = [2, 11, 23]
CONFIGS = {
    "declared x_range=(-3, 3), y_bound=6": {"x_range": (-3.0, 3.0), "y_bound": 6.0},
    "estimated privately (defaults)": {},
}


def data():
    rng = np.random.default_rng(20130601)
    theta = np.zeros(P)
    theta[SUPPORT] = [0.8, -0.6, 0.5]
    X = rng.normal(size=(N + N_TEST, P))
    y = 1.0 + X @ theta + rng.normal(size=N + N_TEST)
    return X[:N], y[:N], X[N:], y[N:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 seeds instead of 20")
    args = parser.parse_args(argv)
    seeds = range(5 if args.quick else 20)
    Xtr, ytr, Xte, yte = data()
    mse_ols = float(np.mean((yte - LinearRegression().fit(Xtr, ytr).predict(Xte)) ** 2))
    rows = {}
    for name, bounds in CONFIGS.items():
        ratios, exact, seconds = [], 0, []
        for seed in seeds:
            reg = PrivateLassoRegressor(
                epsilon=2.0, delta=1e-6, max_features=3, selection_rule="lars",
                sampling="partition", on_fail="empty", random_state=seed, **bounds,
            )
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a bottom warns; it is counted
                reg.fit(Xtr, ytr)
            seconds.append(time.perf_counter() - start)
            ratios.append(float(np.mean((yte - reg.predict(Xte)) ** 2)) / mse_ols)
            exact += np.flatnonzero(reg.support_).tolist() == SUPPORT
        rows[name] = {
            "mse_ratio_median": float(np.median(ratios)),
            "mse_ratio_q90": float(np.quantile(ratios, 0.9)),
            "exact_support": exact / len(seeds),
            "seconds": float(np.mean(seconds)),
        }
    lines = [
        "# Private Lasso regressor: declared vs privately estimated bounds",
        "",
        f"n = {N}, p = {P}, s = 3, epsilon = 2, delta = 1e-6, {len(seeds)} seeds; "
        f"non-private OLS test MSE {mse_ols:.4f}. Command: "
        f"`python benchmarks/bench_lasso_bounds.py{' --quick' if args.quick else ''}`.",
        "",
        "| bounds | test MSE / OLS (median) | (90% quantile) | exact support | fit s |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['mse_ratio_median']:.4f} | {r['mse_ratio_q90']:.4f} | "
            f"{r['exact_support']:.2f} | {r['seconds']:.2f} |"
        )
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    write_results("lasso_bounds", {"rows": rows, "mse_ols": mse_ols, "seeds": len(seeds)},
                  markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
