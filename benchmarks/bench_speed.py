"""Fit time of the sufficient-statistics estimators against one read of the data.

The floor is what any linear regression from sufficient statistics must do:
``G = X.T @ X; b = X.T @ y; cho_solve(cho_factor(G), b)`` on the same array.
Every figure is a ratio to that floor measured in the same run, as the median
of ``--repeats`` interleaved (floor, fit) pairs, so the shared machine's load
cancels as far as it can (the 1-minute load average is recorded with every
cell). Also reported: scikit-learn's ``Ridge(solver='cholesky')`` and
``LinearRegression``, the peak memory a fit allocates above its input
(``tracemalloc``: NumPy allocations are traced), and, with ``--dask``, the
Dask path on a 2-worker ``LocalCluster`` against the NumPy fit, with the
number of passes over the rows.

Grid: d in {10, 100, 1000}, n in {1e5, 1e6, 1e7 (memmap)}. Cells that do not
fit this machine are skipped and listed in the results: 1e7 x 1000 float64
is 80 GB; 1e6 x 1000 is 8 GB in memory (scikit-learn's fits copy it once
more) on a 23 GB machine shared by several jobs; at 1e7 x 100 (an 8 GB
memmap) only the floor and our fits run, once.

Run: ``python benchmarks/bench_speed.py [--quick] [--dask] [--memmap]
[--reusecov]``; writes ``results/speed.{json,md}`` and ``speed.png`` (time
against n, which must be linear). ``--headline`` re-checks n = 1e6 only
(``results/speed_headline.*``); ``--dask-only`` re-checks the Dask path at
n = 1e6 (``results/speed_dask.*``); ``--dask-memmap`` times Dask against
NumPy at n = 1e7 read from a memmap (``results/speed_dask_memmap.*``).

Fortran-ordered X (what scikit-learn makes of a data frame) is timed at
n = 1e6 against the floor on the same Fortran-ordered array (``X.T @ X`` on
it is a product of a C-ordered array with its transpose, faster than on a
C-ordered X at d = 10).

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
from _common import settle, write_results
from scipy.linalg import cho_factor, cho_solve

OURS = ("SSPRegressor", "AdaSSPRegressor", "LinearRegression (1 round)")
#: The other fits that read their data through sums (``--others``).
OTHERS = ("IndependentSSPRegressor", "ReuseCovRegressor (1 outcome)", "PrivateStandardScaler")


def floor_fit(X, y):
    G = X.T @ X
    b = X.T @ y
    return cho_solve(cho_factor(G), b)


def floor_fit_one_thread(X, y):
    """The floor with BLAS on one thread (robust to a loaded machine, where a
    multi-threaded BLAS call can wait for a descheduled thread)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        return floor_fit(X, y)


def _estimators(d, n_outputs=None, only=None):
    from sklearn.linear_model import LinearRegression as SkLinearRegression
    from sklearn.linear_model import Ridge

    from skprivreg.linear_model import (
        AdaSSPRegressor,
        IndependentSSPRegressor,
        LinearRegression,
        ReuseCovRegressor,
        SSPRegressor,
    )
    from skprivreg.preprocessing import PrivateStandardScaler

    x_bound = math.sqrt(d)
    bound = {"x_bound": x_bound, "y_bound": 2.0 * math.sqrt(d)}
    cases = {
        "SSPRegressor": lambda: SSPRegressor(epsilon=1.0, **bound),
        "AdaSSPRegressor": lambda: AdaSSPRegressor(epsilon=1.0, **bound),
        "LinearRegression (1 round)": lambda: LinearRegression(
            epsilon=1.0, x_range=(-1.0, 1.0), y_bound=2.0 * math.sqrt(d), n_rounds=1),
        "LinearRegression (default, 8 rounds)": lambda: LinearRegression(
            epsilon=1.0, x_range=(-1.0, 1.0), y_bound=2.0 * math.sqrt(d)),
        "SSPRegressor, private bounds": lambda: SSPRegressor(epsilon=1.0),
        "PrivateStandardScaler": lambda: PrivateStandardScaler(epsilon=1.0,
                                                               x_range=(-1.0, 1.0)),
        "IndependentSSPRegressor": lambda: IndependentSSPRegressor(epsilon=1.0, **bound),
        "ReuseCovRegressor (1 outcome)": lambda: ReuseCovRegressor(epsilon=1.0, **bound),
        "sklearn Ridge(cholesky)": lambda: Ridge(alpha=1.0, solver="cholesky"),
        "sklearn LinearRegression": lambda: SkLinearRegression(),
    }
    if n_outputs:
        cases = {"ReuseCovRegressor": lambda: ReuseCovRegressor(epsilon=1.0, **bound)}
    if only is not None:
        cases = {k: v for k, v in cases.items() if k in only}
    return cases


def _timed(function):
    gc.collect()
    settle()
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
    ratios, ratios1, seconds, floors, floors1 = [], [], [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if repeats > 1:
            factory().fit(X, y)  # warm-up (imports, first-touch)
        for _ in range(repeats):
            t_floor = _timed(lambda: floor_fit(X, y))
            t_floor1 = _timed(lambda: floor_fit_one_thread(X, y))
            t_fit = _timed(lambda: factory().fit(X, y))
            ratios.append(t_fit / t_floor)
            ratios1.append(t_fit / t_floor1)
            seconds.append(t_fit)
            floors.append(t_floor)
            floors1.append(t_floor1)
        peak = _peak_above_input(lambda: factory().fit(X, y))
    return {"ratio": statistics.median(ratios), "ratio_1thread": statistics.median(ratios1),
            "seconds": statistics.median(seconds),
            "floor_seconds": statistics.median(floors),
            "floor_1thread_seconds": statistics.median(floors1), "peak_mb": peak / 2**20,
            "load": os.getloadavg()[0]}


def _data(n, d, seed=0, n_outputs=None, dtype=np.float64, memmap_dir=None):
    rng = np.random.default_rng(seed)
    if memmap_dir is not None:
        path = os.path.join(memmap_dir, f"X_{n}_{d}.npy")
        X = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n, d))
        step = max(1, (1 << 24) // d)
        for start in range(0, n, step):
            stop = min(n, start + step)
            X[start:stop] = rng.uniform(-1, 1, size=(stop - start, d))
        X.flush()
        X = np.load(path, mmap_mode="r")
    else:
        X = rng.uniform(-1, 1, size=(n, d)).astype(dtype)
    beta = rng.normal(size=(d,) if n_outputs is None else (d, n_outputs)) / math.sqrt(d)
    y = np.empty(n if n_outputs is None else (n, n_outputs))
    step = max(1, (1 << 24) // d)
    for start in range(0, n, step):  # block by block (X may be a memmap)
        stop = min(n, start + step)
        y[start:stop] = X[start:stop] @ beta
    y += 0.5 * rng.normal(size=y.shape)
    return X, y


def _report(row):
    extra = f" load {row['load']:.1f}"
    print(f"{row['input']:7s} n={row['n']:.0e} d={row['d']:4d} {row['estimator']:38s} "
          f"{row['ratio']:6.2f}x floor {row['ratio_1thread']:6.2f}x 1-thread floor "
          f"{row['seconds']:8.3f} s "
          f"peak {row['peak_mb']:8.1f} MB{extra}", flush=True)


def run_numpy(sizes, repeats, memmap_dir=None, only=None, dtype=np.float64, order="C"):
    rows = []
    for n, d in sizes:
        X, y = _data(n, d, memmap_dir=memmap_dir, dtype=dtype)
        kind = "memmap" if memmap_dir else "numpy"
        if dtype == np.float32:
            kind += " float32"
        if order == "F":  # what scikit-learn makes of a data frame; the floor reads it too
            X = np.asfortranarray(X)
            kind += " Fortran"
        for name, factory in _estimators(d, only=only).items():
            result = measure(X, y, factory, repeats)
            rows.append({"n": n, "d": d, "estimator": name, "input": kind,
                         "input_mb": X.nbytes / 2**20, **result})
            _report(rows[-1])
        del X, y
        gc.collect()
    return rows


def run_reusecov(repeats):
    n, d, n_outputs = 20_000, 50, 10_000
    X, Y = _data(n, d, n_outputs=n_outputs)
    rows = []
    for name, factory in _estimators(d, n_outputs=n_outputs).items():
        result = measure(X, Y, factory, repeats)
        rows.append({"n": n, "d": d, "outputs": n_outputs, "estimator": name,
                     "input": "numpy", "input_mb": (X.nbytes + Y.nbytes) / 2**20, **result})
        print(f"{name}: {result['ratio']:.2f}x floor", flush=True)
    return rows


def _count_passes():
    """Patch RowSource.reduce to count passes; returns (list, undo)."""
    from skprivreg._rows import RowSource

    calls = []
    original = RowSource.reduce

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("label", ""))
        return original(self, *args, **kwargs)

    RowSource.reduce = counted
    return calls, lambda: setattr(RowSource, "reduce", original)


def _dask_against_numpy(factory, X, y, Xd, yd, repeats):
    """Median Dask and NumPy fit times (interleaved pairs) and the Dask fit's passes."""
    t_np, t_dask = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        factory().fit(Xd, yd)  # warm-up
        for _ in range(repeats):
            t_np.append(_timed(lambda: factory().fit(X, y)))
            t_dask.append(_timed(lambda: factory().fit(Xd, yd)))
        calls, undo = _count_passes()
        try:
            est = factory().fit(Xd, yd)
        finally:
            undo()
    return {"ratio_to_numpy": statistics.median(t_dask) / statistics.median(t_np),
            "seconds": statistics.median(t_dask), "numpy_seconds": statistics.median(t_np),
            "passes": len(calls), "releases": len(est.privacy_spent_.events),
            "load": os.getloadavg()[0]}


#: Dask's array best practices: "it is rare to see chunk sizes below 100 MB".
DASK_CHUNK_BYTES = 100 << 20


def dask_chunkings(n, d):
    """Chunk counts timed at ``(n, d)``: 8 chunks, and chunks of about
    :data:`DASK_CHUNK_BYTES` (at least one per worker) when that differs."""
    recommended = max(2, round(8 * n * d / DASK_CHUNK_BYTES))
    return sorted({8, recommended})


def run_dask(sizes, repeats, only=OURS + ("LinearRegression (default, 8 rounds)",)):
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        for n, d in sizes:
            X, y = _data(n, d)
            for n_chunks in dask_chunkings(n, d):
                chunk = -(-n // n_chunks)
                Xd = da.from_array(X, chunks=(chunk, d)).persist()
                yd = da.from_array(y, chunks=(chunk,)).persist()
                for name, factory in _estimators(d, only=only).items():
                    rows.append({"n": n, "d": d, "estimator": name, "input": "dask (2 workers)",
                                 "chunks": n_chunks, "chunk_mb": chunk * 8 * d / 2**20,
                                 **_dask_against_numpy(factory, X, y, Xd, yd, repeats)})
                    print(f"dask n={n:.0e} d={d} {n_chunks} chunks {name}: "
                          f"{rows[-1]['ratio_to_numpy']:.2f}x the NumPy fit, "
                          f"{rows[-1]['passes']} passes for {rows[-1]['releases']} releases",
                          flush=True)
                del Xd, yd
    return rows


def _load_rows(path, start, stop):
    """Rows ``start:stop`` of a ``.npy`` file, read on the worker (nothing shipped)."""
    return np.load(path, mmap_mode="r")[start:stop]


def _dask_from_npy(path, shape, chunk):
    """A Dask array whose chunks are read from the ``.npy`` file by the workers."""
    import dask
    import dask.array as da

    parts = []
    for start in range(0, shape[0], chunk):
        stop = min(start + chunk, shape[0])
        parts.append(da.from_delayed(dask.delayed(_load_rows)(path, start, stop),
                                     shape=(stop - start, *shape[1:]), dtype=np.float64))
    return da.concatenate(parts)


def run_dask_memmap(sizes, repeats, chunk=1_000_000):
    """Dask (2 workers) reading ~1e6-row chunks from ``.npy`` memmaps, against NumPy on them.

    Nothing is persisted: every pass of the Dask fit reads its chunks from the
    file (the page cache), as a fit larger than memory would.
    """
    from dask.distributed import Client, LocalCluster

    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp, \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=None) as cluster, Client(cluster):
        for n, d in sizes:
            X, y = _data(n, d, memmap_dir=tmp)
            y_path = os.path.join(tmp, f"y_{n}_{d}.npy")
            np.save(y_path, y)
            Xd = _dask_from_npy(X.filename, X.shape, chunk)
            yd = _dask_from_npy(y_path, y.shape, chunk)
            for name, factory in _estimators(d, only=OURS).items():
                rows.append({"n": n, "d": d, "estimator": name,
                             "input": f"dask from memmap, chunks of {chunk:.0e} rows",
                             **_dask_against_numpy(factory, X, y, Xd, yd, repeats)})
                print(f"dask-memmap n={n:.0e} d={d} {name}: "
                      f"{rows[-1]['ratio_to_numpy']:.2f}x the NumPy fit "
                      f"({rows[-1]['seconds']:.2f} s vs {rows[-1]['numpy_seconds']:.2f} s), "
                      f"load {rows[-1]['load']:.1f}", flush=True)
            del X, Xd, yd
    return rows


def _dask_markdown(rows):
    lines = ["# Dask against NumPy on 1e7 rows read from a memmap", "",
             "2-worker `LocalCluster` (1 thread each), chunks read from the `.npy` file by",
             "the workers (nothing persisted); NumPy fit on the same memmap. Median of",
             "interleaved pairs; load = 1-minute load average of the shared 2-core machine.", "",
             "| n | d | estimator | time / NumPy fit | Dask s | NumPy s | passes | releases | "
             "load |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']:.0e} | {r['d']} | {r['estimator']} | "
                     f"{r['ratio_to_numpy']:.2f} | {r['seconds']:.2f} | "
                     f"{r['numpy_seconds']:.2f} | {r['passes']} | {r['releases']} | "
                     f"{r['load']:.1f} |")
    return "\n".join(lines) + "\n"


def _markdown(rows, reusecov, dask_rows, skipped):
    lines = ["# Fit time against one read of the data", "",
             "Ratio = median over interleaved pairs of (fit time) / (floor time), the floor",
             "being `X.T @ X`, `X.T @ y` and a Cholesky solve on the same array in the same",
             "run (BLAS threads as configured: 2 here), and the same floor with BLAS on one",
             "thread (1-thread floor; our fits share a block's pieces between 2 threads).",
             "Each timed call starts after a 0.3 s pause (OpenBLAS worker threads spin",
             "for about 0.1 s after a multi-threaded call and would share the cores).",
             "Peak = memory allocated by the fit above its input (tracemalloc). Load =",
             "1-minute load average of the shared 2-core machine after the cell.", "",
             "| input | n | d | estimator | ratio to floor | ratio to 1-thread floor | fit s | "
             "floor s | peak MB | input MB | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows + reusecov:
        lines.append(f"| {r['input']} | {r['n']:.0e} | {r['d']} | {r['estimator']} | "
                     f"{r['ratio']:.2f} | {r['ratio_1thread']:.2f} | {r['seconds']:.3f} | "
                     f"{r['floor_seconds']:.3f} | "
                     f"{r['peak_mb']:.1f} | {r.get('input_mb', float('nan')):.0f} | "
                     f"{r['load']:.1f} |")
    if dask_rows:
        lines += ["", "Dask: X and y persisted on the workers in 8 chunks, and in chunks of about",
                  "100 MB (Dask's guidance; at least one per worker) where that differs.", "",
                  "| Dask (2 workers) | n | d | chunks (MB each) | estimator | time / NumPy fit | "
                  "Dask s | NumPy s | passes | releases |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in dask_rows:
            chunks = (f"{r['chunks']} ({r['chunk_mb']:.0f})" if "chunks" in r else "8")
            lines.append(f"| | {r['n']:.0e} | {r['d']} | {chunks} | {r['estimator']} | "
                         f"{r['ratio_to_numpy']:.2f} | {r['seconds']:.3f} | "
                         f"{r['numpy_seconds']:.3f} | {r['passes']} | {r['releases']} |")
    if skipped:
        lines += ["", "Skipped cells:", ""] + [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def _plot(rows):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    from _common import RESULTS

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, d in zip(axes, (10, 100)):
        for name in ("floor", "floor (1 BLAS thread)") + OURS + ("sklearn Ridge(cholesky)",):
            if name.startswith("floor"):
                key = "floor_seconds" if name == "floor" else "floor_1thread_seconds"
                points = {(r["n"], r[key]) for r in rows
                          if r["d"] == d and r["estimator"] == "SSPRegressor"
                          and r["input"] in ("numpy", "memmap")}
            else:
                points = {(r["n"], r["seconds"]) for r in rows if r["estimator"] == name
                          and r["d"] == d and r["input"] in ("numpy", "memmap")}
            points = sorted(points)
            if len(points) > 1:
                ax.loglog(*zip(*points), marker="o", label=name)
        ax.set_xlabel(f"n (rows), d = {d}; n = 1e7 from a memmap")
        ax.set_ylabel("fit time (s)")
        loads = [r["load"] for r in rows if r["d"] == d and "load" in r]
        ax.set_title(f"1-minute load average {min(loads):.1f}-{max(loads):.1f} on "
                     f"{os.cpu_count()} shared cores", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "speed.png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n <= 1e6, d <= 100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dask", action="store_true", help="also the 2-worker Dask path")
    parser.add_argument("--memmap", action="store_true", help="also n = 1e7 from a memmap")
    parser.add_argument("--reusecov", action="store_true",
                        help="also ReuseCovRegressor at n=20,000, d=50, 10,000 outcomes")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw speed.png from results/speed.json")
    parser.add_argument("--headline", action="store_true",
                        help="only n=1e6, d in {10, 100}, C- and Fortran-ordered: our "
                             "one-round fits, the default LinearRegression and Ridge, "
                             "5 triples; writes results/speed_headline.{json,md}")
    parser.add_argument("--dask-memmap", action="store_true",
                        help="only Dask vs NumPy at n=1e7, d in {10, 100} from a memmap "
                             "(chunks of 1e6 rows; 8 GB of disk at d=100); writes "
                             "results/speed_dask_memmap.{json,md}")
    parser.add_argument("--others", action="store_true",
                        help="only IndependentSSP, ReuseCov (1 outcome) and the scaler on the "
                             "grid, a 1e7-row memmap at d=10 and Dask at n=1e6; writes "
                             "results/speed_others.{json,md}")
    parser.add_argument("--dask-only", action="store_true",
                        help="only the 2-worker Dask path at n=1e6, d in {10, 100}; writes "
                             "results/speed_dask.{json,md}")
    args = parser.parse_args()
    if args.others:
        sizes = [(100_000, 10), (1_000_000, 10), (100_000, 100), (1_000_000, 100)]
        rows = run_numpy(sizes, args.repeats, only=OTHERS)
        rows += run_numpy([(100_000, 1000)], 1, only=OTHERS)
        rows += run_numpy([(1_000_000, 10), (1_000_000, 100)], args.repeats, only=OTHERS,
                          dtype=np.float32)
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            rows += run_numpy([(10_000_000, 10)], 1, memmap_dir=tmp, only=OTHERS)
        dask_rows = run_dask([(1_000_000, 10), (1_000_000, 100)], args.repeats, only=OTHERS)
        skipped = ["n=1e5, d=1000 and the 1e7-row memmap: one pair per fit."]
        path = write_results("speed_others", {"rows": rows, "reusecov": [], "dask": dask_rows,
                                              "skipped": skipped},
                             _markdown(rows, [], dask_rows, skipped).replace(
                                 "# Fit time against one read of the data",
                                 "# Fit time against one read of the data: the other "
                                 "sums-only fits"))
        print(f"wrote {path}")
        return
    if args.dask_only:
        dask_rows = run_dask([(1_000_000, 10), (1_000_000, 100)], args.repeats)
        path = write_results("speed_dask", {"rows": [], "reusecov": [], "dask": dask_rows,
                                            "skipped": []},
                             _markdown([], [], dask_rows, []).replace(
                                 "# Fit time against one read of the data",
                                 "# Dask against NumPy (re-check)"))
        print(f"wrote {path}")
        return
    if args.dask_memmap:
        rows = run_dask_memmap([(10_000_000, 10), (10_000_000, 100)], args.repeats)
        print("wrote", write_results("speed_dask_memmap", {"dask": rows}, _dask_markdown(rows)))
        return
    if args.headline:
        headline = OURS + ("LinearRegression (default, 8 rounds)", "sklearn Ridge(cholesky)")
        rows = run_numpy([(1_000_000, 10), (1_000_000, 100)], 5, only=headline)
        rows += run_numpy([(1_000_000, 10), (1_000_000, 100)], 5, only=headline, order="F")
        path = write_results("speed_headline", {"rows": rows, "reusecov": [], "dask": [],
                                                "skipped": []},
                             _markdown(rows, [], [], []).replace(
                                 "# Fit time against one read of the data",
                                 "# Fit time against one read of the data (headline re-check)"))
        print(f"wrote {path}")
        return
    if args.plot_only:
        import json

        from _common import RESULTS

        _plot(json.loads((RESULTS / "speed.json").read_text())["rows"])
        return
    sizes = [(100_000, 10), (1_000_000, 10), (100_000, 100), (1_000_000, 100)]
    skipped = ["n=1e7, d=1000: 80 GB of float64, beyond this machine's disk budget and RAM.",
               "n=1e6, d=1000: 8 GB in memory (scikit-learn's fits copy it once more) on a "
               "23 GB machine shared by several jobs."]
    rows = run_numpy(sizes, args.repeats)
    if not args.quick:
        rows += run_numpy([(100_000, 1000)], 1, only=OURS + ("sklearn Ridge(cholesky)",))
        skipped.append("n=1e5, d=1000: one pair per fit, and only our one-round fits and "
                       "Ridge (the others take minutes on the shared machine).")
    rows += run_numpy([(1_000_000, 10), (1_000_000, 100)], args.repeats,
                      only=("SSPRegressor", "AdaSSPRegressor"), dtype=np.float32)
    rows += run_numpy([(1_000_000, 10), (1_000_000, 100)], args.repeats,
                      only=OURS + ("sklearn Ridge(cholesky)",), order="F")
    if args.memmap:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            rows += run_numpy([(10_000_000, 10)], 1, memmap_dir=tmp,
                              only=OURS + ("sklearn Ridge(cholesky)",))
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            rows += run_numpy([(10_000_000, 100)], 1, memmap_dir=tmp, only=OURS)
        skipped.append("n=1e7, d=100 (8 GB memmap): the floor and our fits only, one "
                       "pair each (scikit-learn would load and copy 8 GB).")
    reusecov = run_reusecov(args.repeats) if args.reusecov else []
    dask_rows = run_dask([(1_000_000, 10), (1_000_000, 100)], args.repeats) if args.dask else []
    path = write_results("speed", {"rows": rows, "reusecov": reusecov, "dask": dask_rows,
                                   "skipped": skipped},
                         _markdown(rows, reusecov, dask_rows, skipped))
    _plot(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
