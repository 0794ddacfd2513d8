"""Accuracy of the SSP family against OLS and the mean predictor.

Data: X ~ N(0, I_d), y = X beta + 1 + N(0, 1), beta fixed, n training rows,
20,000 test rows; median and quartiles of test MSE over seeds.

    python benchmarks/bench_adassp.py            # skprivreg estimators
    python benchmarks/bench_adassp.py --diffprivlib   # diffprivlib, in its own env

diffprivlib does not import with scikit-learn >= 1.9; run the second command
in a virtual environment with ``scikit-learn<1.6 diffprivlib`` (the script
needs only numpy there). Results: benchmarks/results/adassp.{json,md} and
adassp_diffprivlib.json.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

D = 10
N_TEST = 20_000
EPSILONS = [0.1, 0.5, 1.0, 2.0, 8.0]
NS = [1_000, 10_000, 100_000]
DELTA = 1e-5
SEEDS = range(10)


def simulate(n, seed):
    rng = np.random.default_rng(seed)
    beta = np.random.default_rng(1234).normal(scale=0.75, size=D)
    X = rng.normal(size=(n, D))
    return X, X @ beta + 1.0 + rng.normal(size=n)


def skprivreg_methods():
    from skprivreg import AdaSSPRegressor, SSPRegressor

    declared = dict(x_bound=5.0, y_bound=10.0)
    return {
        "AdaSSP (AGM, private bounds)": lambda e: AdaSSPRegressor(epsilon=e, delta=DELTA),
        "AdaSSP (AGM, declared bounds)": lambda e: AdaSSPRegressor(epsilon=e, delta=DELTA, **declared),
        "AdaSSP (published constants)": lambda e: AdaSSPRegressor(
            epsilon=e, delta=DELTA, constants="paper", **declared
        ),
        "SSP (declared bounds)": lambda e: SSPRegressor(epsilon=e, delta=DELTA, **declared),
    }


def diffprivlib_methods():
    from diffprivlib.models import LinearRegression

    return {
        "diffprivlib LinearRegression (declared bounds)": lambda e: LinearRegression(
            epsilon=e, bounds_X=(-5.0 / np.sqrt(D), 5.0 / np.sqrt(D)), bounds_y=(-10.0, 10.0)
        ),
    }


def run(methods):
    rows = []
    X_test, y_test = simulate(N_TEST, seed=10_000)
    for n in NS:
        for epsilon in EPSILONS:
            for name, make in methods.items():
                errors, seconds, refused = [], [], None
                for seed in SEEDS:
                    X, y = simulate(n, seed)
                    est = make(epsilon)
                    if "random_state" in est.get_params():
                        est.set_params(random_state=seed)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        start = time.perf_counter()
                        try:
                            est.fit(X, y)
                        except ValueError as exc:  # ConfigurationError: too few rows
                            refused = str(exc)
                            break
                        seconds.append(time.perf_counter() - start)
                    errors.append(float(np.mean((est.predict(X_test) - y_test) ** 2)))
                if refused:
                    rows.append({"method": name, "n": n, "epsilon": epsilon, "delta": DELTA,
                                 "refused": refused})
                    continue
                q1, med, q3 = np.percentile(errors, [25, 50, 75])
                rows.append({"method": name, "n": n, "epsilon": epsilon, "delta": DELTA,
                             "mse_median": med, "mse_q1": q1, "mse_q3": q3,
                             "fit_seconds": float(np.median(seconds))})
    return rows


def references():
    from sklearn.linear_model import LinearRegression

    X_test, y_test = simulate(N_TEST, seed=10_000)
    out = {}
    for n in NS:
        ols, mean = [], []
        for seed in SEEDS:
            X, y = simulate(n, seed)
            ols.append(np.mean((LinearRegression().fit(X, y).predict(X_test) - y_test) ** 2))
            mean.append(np.mean((y.mean() - y_test) ** 2))
        out[n] = {"ols": float(np.median(ols)), "mean": float(np.median(mean))}
    return out


def markdown(rows, refs, extra_rows=()):
    lines = [
        "# SSP family: test MSE (median over 10 seeds, [quartiles])",
        "",
        f"X ~ N(0, I_{D}), y = X beta + 1 + N(0,1), delta = {DELTA}; "
        "declared bounds x_bound=5, y_bound=10.",
        "Command: `python benchmarks/bench_adassp.py` (and `--diffprivlib` in its own env).",
        "",
    ]
    all_rows = list(rows) + list(extra_rows)
    methods = list(dict.fromkeys(r["method"] for r in all_rows))
    for n in NS:
        lines += [f"## n = {n:,} (OLS {refs[n]['ols']:.3f}, mean predictor {refs[n]['mean']:.3f})",
                  "", "| method | " + " | ".join(f"eps={e}" for e in EPSILONS) + " |",
                  "|---|" + "---|" * len(EPSILONS)]
        for method in methods:
            cells = []
            for e in EPSILONS:
                match = [r for r in all_rows if r["method"] == method and r["n"] == n
                         and r["epsilon"] == e]
                if not match:
                    cells.append("—")
                elif "refused" in match[0]:
                    cells.append("refused (n too small)")
                else:
                    cells.append(f"{match[0]['mse_median']:.3g} [{match[0]['mse_q1']:.3g}, "
                                 f"{match[0]['mse_q3']:.3g}]")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("'refused': ConfigurationError before any budget is spent, because private "
                 "bounds need n >= 4 (6/epsilon_b) ln(2000) rows (epsilon_b = 0.05 epsilon "
                 "per bound).")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--diffprivlib", action="store_true")
    args = parser.parse_args()
    results = Path(__file__).resolve().parent / "results"
    if args.diffprivlib:
        import diffprivlib
        import sklearn

        rows = run(diffprivlib_methods())
        (results / "adassp_diffprivlib.json").write_text(json.dumps(
            {"diffprivlib": diffprivlib.__version__, "scikit-learn": sklearn.__version__,
             "rows": rows}, indent=2))
        return
    from _common import write_results

    rows = run(skprivreg_methods())
    refs = references()
    extra = []
    extra_file = results / "adassp_diffprivlib.json"
    if extra_file.exists():
        extra_payload = json.loads(extra_file.read_text())
        extra = extra_payload["rows"]
    text = markdown(rows, refs, extra)
    if extra:
        text += (f"\ndiffprivlib {extra_payload['diffprivlib']} ran with scikit-learn "
                 f"{extra_payload['scikit-learn']} in its own environment (it does not "
                 "import with scikit-learn 1.9). Its epsilon is pure epsilon-DP with "
                 "per-feature bounds; it adds no PSD repair.\n")
    path = write_results("adassp", {"rows": rows, "references": refs, "diffprivlib": extra}, text)
    print(path.read_text())


if __name__ == "__main__":
    main()
