"""Fit time of every sufficient-statistics estimator against one read of the data.

The floor is what any linear regression from sufficient statistics must do:
``G = X.T @ X; b = X.T @ y; cho_solve(cho_factor(G), b)`` on the same array.
Every figure is a ratio to that floor measured in the same run, as the median
of ``--repeats`` interleaved (floor, fit) pairs, so the shared machine's load
cancels. Also reported: scikit-learn's ``Ridge(solver='cholesky')`` and
``LinearRegression``, the peak memory a fit allocates above its input
(``tracemalloc``: NumPy allocations are traced), and, with ``--dask``, the
Dask path on a 2-worker ``LocalCluster`` against the NumPy fit.

Run: ``python benchmarks/bench_speed.py [--quick] [--dask] [--memmap]``;
writes ``results/speed.{json,md}`` (and ``speed.png`` with matplotlib: time
against n, which must be linear).

Bounds are declared (the private bound estimate costs one more pass, reported
separately as "private bounds"), epsilon = 1, delta = 1e-6. X is uniform on
[-1, 1]; y = X @ beta + noise.
"""

import argparse
import gc
import math
import os
import statistics
import tempfile
import time
import tracemalloc
import warnings

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from _common import write_results


def floor_fit(X, y):
    G = X.T @ X
    b = X.T @ y
    return cho_solve(cho_factor(G), b)


def _estimators(d, n_outputs=None):
    from sklearn.linear_model import LinearRegression as SkLinearRegression
    from sklearn.linear_model import Ridge

    from skprivreg.linear_model import (
        AdaSSPRegressor,
        LinearRegression,
        ReuseCovRegressor,
        SSPRegressor,
    )

    x_bound = math.sqrt(d)
    bound = {"x_bound": x_bound, "y_bound": 2.0 * math.sqrt(d)}
    cases = {
        "SSPRegressor": lambda: SSPRegressor(epsilon=1.0, **bound),
        "AdaSSPRegressor": lambda: AdaSSPRegressor(epsilon=1.0, **bound),
        "SSPRegressor, private bounds": lambda: SSPRegressor(epsilon=1.0),
        "LinearRegression (1 round)": lambda: LinearRegression(
            epsilon=1.0, x_range=(-1.0, 1.0), y_bound=2.0 * math.sqrt(d), n_rounds=1),
        "LinearRegression (default)": lambda: LinearRegression(
            epsilon=1.0, x_range=(-1.0, 1.0), y_bound=2.0 * math.sqrt(d)),
        "sklearn Ridge(cholesky)": lambda: Ridge(alpha=1.0, solver="cholesky"),
        "sklearn LinearRegression": lambda: SkLinearRegression(),
    }
    if n_outputs:
        cases = {"ReuseCovRegressor": lambda: ReuseCovRegressor(epsilon=1.0, **bound)}
    return cases


def _timed(function):
    gc.collect()
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _peak_above_input(function):
    gc.collect()
    tracemalloc.start()
    function()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def measure(X, y, factory, repeats):
    """Median ratio of fit time to the floor, over interleaved pairs."""
    ratios, seconds = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        factory().fit(X, y)  # warm-up (imports, first-touch)
        for _ in range(repeats):
            t_floor = _timed(lambda: floor_fit(X, y))
            t_fit = _timed(lambda: factory().fit(X, y))
            ratios.append(t_fit / t_floor)
            seconds.append(t_fit)
        peak = _peak_above_input(lambda: factory().fit(X, y))
    return {"ratio": statistics.median(ratios), "seconds": statistics.median(seconds),
            "peak_mb": peak / 2**20}


def _data(n, d, seed=0, n_outputs=None, dtype=np.float64, memmap_dir=None):
    rng = np.random.default_rng(seed)
    if memmap_dir is not None:
        path = os.path.join(memmap_dir, f"X_{n}_{d}.dat")
        X = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n, d))
        for start in range(0, n, 1 << 18):
            stop = min(n, start + (1 << 18))
            X[start:stop] = rng.uniform(-1, 1, size=(stop - start, d))
        X.flush()
    else:
        X = rng.uniform(-1, 1, size=(n, d)).astype(dtype)
    beta = rng.normal(size=(d,) if n_outputs is None else (d, n_outputs)) / math.sqrt(d)
    noise = rng.normal(size=n if n_outputs is None else (n, n_outputs))
    y = np.asarray(X @ beta, dtype=np.float64) + 0.5 * noise
    return X, y


def run_numpy(sizes, repeats, memmap_dir=None):
    rows = []
    for n, d in sizes:
        X, y = _data(n, d, memmap_dir=memmap_dir)
        for name, factory in _estimators(d).items():
            result = measure(X, y, factory, repeats)
            rows.append({"n": n, "d": d, "estimator": name,
                         "input": "memmap" if memmap_dir else "numpy", **result})
            print(f"n={n:.0e} d={d:4d} {name:32s} {result['ratio']:6.2f}x floor "
                  f"{result['seconds']:7.3f} s peak {result['peak_mb']:8.1f} MB", flush=True)
        del X, y
    return rows


def run_reusecov(repeats):
    n, d, n_outputs = 20_000, 50, 10_000
    X, Y = _data(n, d, n_outputs=n_outputs)
    rows = []
    for name, factory in _estimators(d, n_outputs=n_outputs).items():
        result = measure(X, Y, factory, repeats)
        rows.append({"n": n, "d": d, "outputs": n_outputs, "estimator": name,
                     "input": "numpy", **result})
        print(f"{name}: {result['ratio']:.2f}x floor", flush=True)
    return rows


def run_dask(n, d, repeats):
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    from skprivreg.linear_model import AdaSSPRegressor, SSPRegressor

    X, y = _data(n, d)
    bound = {"x_bound": math.sqrt(d), "y_bound": 2.0 * math.sqrt(d)}
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster, \
            Client(cluster):
        Xd = da.from_array(X, chunks=(max(1, n // 8), d)).persist()
        yd = da.from_array(y, chunks=(max(1, n // 8),)).persist()
        for name, cls in (("SSPRegressor", SSPRegressor), ("AdaSSPRegressor", AdaSSPRegressor)):
            t_np, t_dask = [], []
            for _ in range(repeats):
                t_np.append(_timed(lambda: cls(epsilon=1.0, **bound).fit(X, y)))
                t_dask.append(_timed(lambda: cls(epsilon=1.0, **bound).fit(Xd, yd)))
            rows.append({"n": n, "d": d, "estimator": name, "input": "dask (2 workers)",
                         "ratio_to_numpy": statistics.median(t_dask) / statistics.median(t_np),
                         "seconds": statistics.median(t_dask)})
            print(f"dask {name}: {rows[-1]['ratio_to_numpy']:.2f}x the NumPy fit", flush=True)
    return rows


def _markdown(rows, reusecov, dask_rows):
    lines = ["# Fit time against one read of the data", "",
             "Ratio = median over interleaved pairs of (fit time) / (floor time), the floor",
             "being `X.T @ X`, `X.T @ y` and a Cholesky solve on the same array in the same",
             "run. Peak = memory allocated by the fit above its input (tracemalloc).", "",
             "| input | n | d | estimator | ratio to floor | fit s | peak MB |",
             "|---|---|---|---|---|---|---|"]
    for r in rows + reusecov:
        lines.append(f"| {r['input']} | {r['n']:.0e} | {r['d']} | {r['estimator']} | "
                     f"{r['ratio']:.2f} | {r['seconds']:.3f} | {r['peak_mb']:.1f} |")
    if dask_rows:
        lines += ["", "| Dask (2 workers) | n | d | estimator | time / NumPy fit |",
                  "|---|---|---|---|---|"]
        for r in dask_rows:
            lines.append(f"| | {r['n']:.0e} | {r['d']} | {r['estimator']} | "
                         f"{r['ratio_to_numpy']:.2f} |")
    return "\n".join(lines) + "\n"


def _plot(rows):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    from _common import RESULTS

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in sorted({r["estimator"] for r in rows}):
        points = sorted((r["n"], r["seconds"]) for r in rows
                        if r["estimator"] == name and r["d"] == 10 and r["input"] == "numpy")
        if len(points) > 1:
            ax.loglog(*zip(*points), marker="o", label=name)
    ax.set_xlabel("n (rows), d = 10")
    ax.set_ylabel("fit time (s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "speed.png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n <= 1e6, d <= 100, 3 repeats")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dask", action="store_true", help="also the 2-worker Dask path")
    parser.add_argument("--memmap", action="store_true", help="also n = 1e7 from a memmap")
    args = parser.parse_args()
    sizes = [(100_000, 10), (1_000_000, 10), (100_000, 100), (1_000_000, 100)]
    if not args.quick:
        sizes += [(100_000, 1000)]
    rows = run_numpy(sizes, args.repeats)
    if args.memmap:
        with tempfile.TemporaryDirectory() as tmp:
            rows += run_numpy([(10_000_000, 10)], 1, memmap_dir=tmp)
    reusecov = [] if args.quick else run_reusecov(args.repeats)
    dask_rows = run_dask(1_000_000, 10, args.repeats) if args.dask else []
    path = write_results("speed", {"rows": rows, "reusecov": reusecov, "dask": dask_rows},
                         _markdown(rows, reusecov, dask_rows))
    _plot(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
