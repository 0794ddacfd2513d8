"""Estimators on Dask: wall time relative to a plain Dask Gram-matrix pass, and worker memory.

Data are generated chunk by chunk on the workers (never on the driver):
X ~ N(0, I_d), y = X beta + 1 + N(0, 1), chunks of ``--chunk`` rows, on a
LocalCluster of 2 single-threaded worker processes. The reference is
``(X^T X, X^T y)`` of the same lazily generated data, computed once; each
estimator's time includes generating its data again for every pass it
makes, exactly like the reference.

    python benchmarks/bench_dask.py --n 100000000 --d 10

    python benchmarks/bench_dask.py --n 2000000 --estimators reusecov --l 100

ISSP (``--estimators issp``): epsilon = 8, delta = 1e-9, private residual
scale (the default): at n = 1e8, d = 10 the plan's automatic L0 is not capped,
so Gaussian data take the clean path (pass 1: residual-scale group Grams,
which also give the Gram matrix; pass 2: leverage/residual scan). The row
records whether the private test PASSed and how many data passes ran.

ReuseCov (``--estimators reusecov,reusecov-label-proj``) fits ``--l`` outcomes
``Y = X B + 1 + N(0, I)`` (B public, d x l), also generated chunk by chunk on
the workers; its reference is the Gram pass ``(X^T X, X^T Y)`` of the same data.

Results: benchmarks/results/<--output>.{json,md} (default dask).
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


def lazy_outcomes(X, n_outcomes, seed=1):
    """``Y = X B + 1 + N(0, I_l)``, chunk by chunk on the workers (B is public, d x l)."""
    import dask.array as da

    d = X.shape[1]
    B = np.random.default_rng(seed).normal(0.0, 1.0 / np.sqrt(d), size=(d, n_outcomes))
    rng = da.random.default_rng(seed + 1)
    noise = rng.normal(size=(X.shape[0], n_outcomes), chunks=(X.chunks[0], n_outcomes))
    return X @ B + 1.0 + noise, B


def reference_pass(X, y):
    import dask

    return dask.compute(X.T @ X, X.T @ y)


# Key for --estimators -> row label. ReuseCov targets have l columns.
ESTIMATORS = {
    "ssp": "SSPRegressor (declared bounds)",
    "adassp": "AdaSSPRegressor (declared bounds)",
    "adassp-private": "AdaSSPRegressor (private bounds: 2 passes)",
    "reusecov": "ReuseCovRegressor (full DP, l outcomes)",
    "reusecov-label-proj": "ReuseCovRegressor (label DP, proj, l outcomes)",
    "lba": "WeightedLBARegressor (label DP, declared, bags gathered on workers)",
    "issp": "ISSPRegressor (eps=8, delta=1e-9, private R0)",
}


def estimators(selected, n_outcomes):
    from skprivreg import AdaSSPRegressor, ISSPRegressor, SSPRegressor
    from skprivreg.label_dp import WeightedLBARegressor
    from skprivreg.linear_model._reusecov import ReuseCovRegressor

    d_scale = 6.0
    made = {
        "ssp": lambda: SSPRegressor(epsilon=1.0, delta=1e-9, x_bound=d_scale, y_bound=10.0, random_state=0),
        "adassp": lambda: AdaSSPRegressor(epsilon=1.0, delta=1e-9, x_bound=d_scale, y_bound=10.0,
                                          random_state=0),
        "adassp-private": lambda: AdaSSPRegressor(epsilon=1.0, delta=1e-9, random_state=0),
        "reusecov": lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-9, privacy="full", x_bound=d_scale, y_bound=8.0, w_bound=1.0,
            cov_budget="auto", random_state=0),
        "reusecov-label-proj": lambda: ReuseCovRegressor(epsilon=1.0, delta=1e-9, privacy="label", mechanism="proj", y_bound=8.0, w_bound=1.0,
            random_state=0),
        # y - X beta - 1 ~ N(0, 1), |y| < 10 but for a few rows: sigma^2 >= 0.9
        # holds in every bag; n >= 2e6 is needed at (4, 1e-9).
        "lba": lambda: WeightedLBARegressor(
            epsilon=4.0, delta=1e-9, y_bound=(-10.0, 10.0), assumption="declared",
            residual_var_lower_bound=0.9, random_state=0),
        # on_fail='zero' so a FAIL is recorded (ptr_passed) instead of aborting the run.
        "issp": lambda: ISSPRegressor(epsilon=8.0, delta=1e-9, on_fail="zero", random_state=0),
    }
    return {key: (ESTIMATORS[key], made[key]()) for key in selected}


def count_issp_passes():
    """Record every data pass of ISSP on Dask (one ``RowSource._reduce_dask`` each)."""
    from skprivreg._rows import RowSource

    calls = []
    reduce = RowSource._reduce_dask

    def counted(self, fn, *args, **kwargs):
        calls.append(fn.__name__)
        return reduce(self, fn, *args, **kwargs)

    RowSource._reduce_dask = counted
    return calls


def fresh_workers(client):
    """Restart the worker processes, so the next peak RSS belongs to one measurement."""
    client.restart()


def peak_worker_memory(client):
    """Peak RSS of each worker process since it (re)started, in MiB (ru_maxrss)."""

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
    parser.add_argument("--l", type=int, default=100,
                        help="outcomes of the ReuseCov estimators (generated on the workers)")
    parser.add_argument(
        "--estimators", default="ssp,adassp,adassp-private,reusecov",
        help="comma-separated subset of: " + ", ".join(ESTIMATORS),
    )
    parser.add_argument("--output", default="dask",
                        help="results/<output>.{json,md} (default: dask)")
    args = parser.parse_args()
    selected = [name.strip() for name in args.estimators.split(",") if name.strip()]
    unknown = sorted(set(selected) - set(ESTIMATORS))
    if unknown:
        parser.error(f"unknown estimators {unknown}; choose from {list(ESTIMATORS)}")
    multi = [name for name in selected if name.startswith("reusecov")]

    import distributed
    from _common import write_results

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, memory_limit="8GiB")
    client = distributed.Client(cluster)
    X, y = lazy_data(args.n, args.d, args.chunk)
    rows = []
    fresh_workers(client)
    start = time.perf_counter()
    reference_pass(X, y)
    ref_seconds = time.perf_counter() - start
    rows.append({"method": "dask Gram pass (X^T X, X^T y)", "seconds": ref_seconds,
                 "ratio": 1.0, "worker_rss_mib": peak_worker_memory(client)})
    print(rows[-1], flush=True)
    Y = B = multi_seconds = None
    if multi:
        Y, B = lazy_outcomes(X, args.l)
        fresh_workers(client)
        start = time.perf_counter()
        reference_pass(X, Y)
        multi_seconds = time.perf_counter() - start
        rows.append({"method": f"dask Gram pass (X^T X, X^T Y), l = {args.l}",
                     "seconds": multi_seconds, "ratio": 1.0,
                     "worker_rss_mib": peak_worker_memory(client)})
        print(rows[-1], flush=True)
    for key, (name, est) in estimators(selected, args.l).items():
        is_multi = key.startswith("reusecov")
        target, truth = (Y, B.T) if is_multi else (y, np.linspace(-1, 1, args.d))
        reference = multi_seconds if is_multi else ref_seconds
        passes = count_issp_passes() if key == "issp" else None
        fresh_workers(client)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, target)
        seconds = time.perf_counter() - start
        rows.append({"method": name, "seconds": seconds, "ratio": seconds / reference,
                     "worker_rss_mib": peak_worker_memory(client),
                     "coef_error": float(np.max(np.abs(est.coef_ - truth)))})
        if passes is not None:
            rows[-1].update(ptr_passed=bool(est.ptr_passed_), data_passes=len(passes),
                            noise_scale=float(est.noise_scale_))
        print(rows[-1], flush=True)
    client.close()
    cluster.close()

    lines = [
        f"# Dask: n = {args.n:,}, d = {args.d}, chunks of {args.chunk:,} rows, "
        "LocalCluster 2 workers x 1 thread",
        "",
        f"Command: `python benchmarks/bench_dask.py --n {args.n} --d {args.d} "
        f"--chunk {args.chunk} --l {args.l} --estimators {','.join(selected)}`. "
        "Data generated on the workers for every pass. ReuseCov rows are timed "
        f"against the Gram pass of the same X and l = {args.l} outcomes.",
        "",
        "| method | wall s | / Gram pass | peak worker RSS MiB (workers restarted per row) "
        "| max abs coef error |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        rss = ", ".join(f"{v:.0f}" for v in r["worker_rss_mib"].values())
        err = f"{r['coef_error']:.2e}" if "coef_error" in r else ""
        lines.append(f"| {r['method']} | {r['seconds']:.1f} | {r['ratio']:.2f} | {rss} | {err} |")
    for r in rows:
        if "ptr_passed" in r:
            lines += ["", f"{r['method']}: private test {'PASS' if r['ptr_passed'] else 'FAIL'}, "
                      f"{r['data_passes']} data passes, noise scale c = {r['noise_scale']:.3g}."]
    for r in rows:
        r["worker_rss_mib"] = list(r["worker_rss_mib"].values())
    path = write_results(args.output, {"n": args.n, "d": args.d, "chunk": args.chunk,
                                       "n_outcomes": args.l, "estimators": selected,
                                       "rows": rows},
                         "\n".join(lines) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
