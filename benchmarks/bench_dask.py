"""Estimators on Dask: wall time relative to a plain Dask Gram-matrix pass, and worker memory.

Data are generated chunk by chunk on the workers (never on the driver):
X ~ N(0, I_d), y = X beta + 1 + N(0, 1), chunks of ``--chunk`` rows, on a
LocalCluster of 2 single-threaded worker processes. The reference is
``(X^T X, X^T y)`` of the same lazily generated data, computed once; each
estimator's time includes generating its data again for every pass it
makes, exactly like the reference.

    python benchmarks/bench_dask.py --n 100000000 --d 10

Results: benchmarks/results/dask.{json,md}.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def lazy_data(n, d, chunk, seed=0):
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.normal(size=(n, d), chunks=(chunk, d))
    beta = np.linspace(-1.0, 1.0, d)
    y = X @ beta + 1.0 + rng.normal(size=n, chunks=chunk)
    return X, y


def reference_pass(X, y):
    import dask

    return dask.compute(X.T @ X, X.T @ y)


def estimators():
    from skprivreg import AdaSSPRegressor, SSPRegressor

    return {
        "SSPRegressor (declared bounds)": SSPRegressor(
            1.0, 1e-9, x_bound=6.0, y_bound=10.0, random_state=0),
        "AdaSSPRegressor (declared bounds)": AdaSSPRegressor(
            1.0, 1e-9, x_bound=6.0, y_bound=10.0, random_state=0),
        "AdaSSPRegressor (private bounds: 2 passes)": AdaSSPRegressor(
            1.0, 1e-9, random_state=0),
    }


def peak_worker_memory(client):
    """Peak RSS of each worker process since it started, in MiB (ru_maxrss)."""

    def peak():
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    return client.run(peak)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000_000)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    import distributed
    from _common import write_results

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, memory_limit="8GiB")
    client = distributed.Client(cluster)
    X, y = lazy_data(args.n, args.d, args.chunk)
    rows = []
    start = time.perf_counter()
    reference_pass(X, y)
    ref_seconds = time.perf_counter() - start
    rows.append({"method": "dask Gram pass (X^T X, X^T y)", "seconds": ref_seconds,
                 "ratio": 1.0, "worker_rss_mib": peak_worker_memory(client)})
    for name, est in estimators().items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        seconds = time.perf_counter() - start
        rows.append({"method": name, "seconds": seconds, "ratio": seconds / ref_seconds,
                     "worker_rss_mib": peak_worker_memory(client),
                     "coef_error": float(np.max(np.abs(est.coef_ - np.linspace(-1, 1, args.d))))})
        print(rows[-1], flush=True)
    client.close()
    cluster.close()

    lines = [
        f"# Dask: n = {args.n:,}, d = {args.d}, chunks of {args.chunk:,} rows, "
        "LocalCluster 2 workers x 1 thread",
        "",
        f"Command: `python benchmarks/bench_dask.py --n {args.n} --d {args.d} "
        f"--chunk {args.chunk}`. Data generated on the workers for every pass.",
        "",
        "| method | wall s | / Gram pass | peak worker RSS MiB (cumulative) | max abs coef error |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        rss = ", ".join(f"{v:.0f}" for v in r["worker_rss_mib"].values())
        err = f"{r['coef_error']:.2e}" if "coef_error" in r else ""
        lines.append(f"| {r['method']} | {r['seconds']:.1f} | {r['ratio']:.2f} | {rss} | {err} |")
    for r in rows:
        r["worker_rss_mib"] = list(r["worker_rss_mib"].values())
    path = write_results("dask", {"n": args.n, "d": args.d, "chunk": args.chunk, "rows": rows},
                         "\n".join(lines) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
