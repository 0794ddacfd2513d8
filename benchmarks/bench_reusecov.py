"""Benchmark of ReuseCovRegressor (PRIMO) against its baselines.

Two studies:

1. Accuracy vs the number of outcomes ``l`` on
   - ``genotype``: simulated haplotypes (msprime island model, a
     "1KG-like" G1 panel, n = 5008 haplotypes; d = 25 SNPs sampled per
     repetition, centred by column), outcomes ``y = X theta + N(0, 1)`` with
     ``theta ~ N(0, I_d / sqrt(d))``;
   - ``gaussian``: x ~ N(0, I_25), n = 5000, same outcome model.
   Methods: OLS (non-private), ReuseCovGauss (full, label, feature),
   ReuseCovProj (label, feature), ReuseCovGauss/Proj label with ridge 0
   (exposes the projection), IndependentSSP (full), ReuseCovGauss full
   with the paper's constants (``composition='paper'``, add-remove).
   epsilon = 5, delta = 1/n^2. Metrics: pooled in-sample R^2 on the 80%
   training split (the paper's metric), pooled holdout R^2 on the 20% test
   split, ln(MSE_priv / MSE_OLS), per-entry MSE of the released association.
2. Fit time for l = 1e4 outcomes, n = 1e5, d = 200, as a ratio to sklearn
   ``Ridge(solver='cholesky')`` on the same multi-output problem and to a
   loop of single-output ``Ridge`` fits (a subset is timed and extrapolated).

3. ``--targets``: the accuracy targets of the default parameters, as in-sample
   MSE / OLS's (median over seeds): full DP, n=20000, d=10, l=50, epsilon=1,
   delta=1e-6, ``x_bound=sqrt(d)``, ``y_bound=1`` (target <= 1.45; also
   IndependentSSP and ``ridge='theory'``); feature DP with the projection,
   n=2000, d=10, l=6000, epsilon=4, delta=1/n^2 (target <= 1.4). Writes
   ``benchmarks/results/reusecov_targets.json`` and ``.md``.
4. ``--speed``: fit time at n=20000, d=50, l=10000 of ReuseCov (defaults),
   IndependentSSP, sklearn ``Ridge(solver='cholesky')`` and the floor
   (X^T X, X^T Y and one solve), interleaved in one run (targets: ReuseCov
   <= 1.25x the floor and <= 0.5x Ridge). Writes
   ``benchmarks/results/reusecov_speed.json`` and ``.md``.

Writes ``benchmarks/results/reusecov.json`` and ``.md``. Not run by pytest.

Usage::

    python benchmarks/bench_reusecov.py            # everything
    python benchmarks/bench_reusecov.py --quick    # small grid, small timing
    python benchmarks/bench_reusecov.py --targets --seeds 10 --proj-seeds 3
    python benchmarks/bench_reusecov.py --speed --speed-repeats 5
"""

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings

import numpy as np
from _common import RESULTS, SETTLE_SECONDS, settle, write_results
from sklearn.linear_model import LinearRegression, Ridge

from skprivreg.linear_model._independent_ssp import IndependentSSPRegressor
from skprivreg.linear_model._reusecov import ReuseCovRegressor

EPSILON = 5.0
D = 25


# ---------------------------------------------------------------- data
def simulate_haplotypes(seed=11):
    """A 5-deme island model with the 1000 Genomes super-population sizes."""
    import msprime

    demography = msprime.Demography.island_model([10_000] * 5, migration_rate=1.44e-4)
    sizes = [661, 347, 504, 503, 489]
    samples = [msprime.SampleSet(k, population=i, ploidy=2) for i, k in enumerate(sizes)]
    ts = msprime.sim_ancestry(
        samples=samples, demography=demography, sequence_length=7_000_000,
        recombination_rate=1e-8, random_seed=seed,
    )
    mts = msprime.sim_mutations(ts, rate=1.25e-8, model=msprime.BinaryMutationModel(),
                                random_seed=seed + 1)
    H = mts.genotype_matrix().T.astype(np.int8)
    maf = H.mean(axis=0)
    maf = np.minimum(maf, 1 - maf)
    H = H[:, maf >= 0.01][:, :78_961]
    return H


def genotype_design(H, rng):
    cols = rng.choice(H.shape[1], size=D, replace=False)
    X = H[:, cols].astype(np.float64)
    return X - X.mean(axis=0)  # per-SNP centring (a public convention)


def gaussian_design(rng, n=5000):
    return rng.normal(size=(n, D))


def outcomes(X, n_outputs, rng):
    theta = rng.normal(0.0, 1.0 / D**0.25, size=(D, n_outputs))  # cov I/sqrt(d)
    return X @ theta + rng.normal(size=(X.shape[0], n_outputs))


# ------------------------------------------------------------- metrics
def pooled_r2(Y, P):
    return 1.0 - np.sum((Y - P) ** 2) / np.sum((Y - Y.mean(axis=0)) ** 2)


def methods(x_bound, y_bound, w_bound, delta):
    common = dict(epsilon=EPSILON, delta=delta, w_bound=w_bound, keep_noisy_stats=True)
    full = dict(x_bound=x_bound, y_bound=y_bound)
    return {
        "gauss_full": ReuseCovRegressor(privacy="full", **full, **common),
        "gauss_full_paper": ReuseCovRegressor(
            privacy="full", composition="paper", neighbouring="zero-out", **full,
            **common),
        "gauss_label": ReuseCovRegressor(privacy="label", y_bound=y_bound, **common),
        "proj_label": ReuseCovRegressor(privacy="label", mechanism="proj",
                                        y_bound=y_bound, **common),
        "gauss_label_ridge0": ReuseCovRegressor(privacy="label", y_bound=y_bound,
                                                ridge=0.0, **common),
        "proj_label_ridge0": ReuseCovRegressor(privacy="label", mechanism="proj",
                                               y_bound=y_bound, ridge=0.0, **common),
        "gauss_feature": ReuseCovRegressor(privacy="feature", x_bound=x_bound, **common),
        "proj_feature": ReuseCovRegressor(privacy="feature", mechanism="proj",
                                          x_bound=x_bound, **common),
        "independent_ssp": IndependentSSPRegressor(
            epsilon=EPSILON, delta=delta, x_bound=x_bound, y_bound=y_bound,
            w_bound=w_bound),
    }


def exact_association(est, X, Y):
    """X^T Y / n on the clipped, augmented data the estimator used."""
    Xa = X
    if est.privacy != "label" and est.x_bound is not None:
        norms = np.linalg.norm(X, axis=1)
        scale = np.minimum(1.0, est.x_bound / np.maximum(norms, 1e-300))
        Xa = X * scale[:, None]
    Xa = np.hstack([Xa, np.ones((X.shape[0], 1))])
    Yc = Y if est.privacy == "feature" else np.clip(Y, -est.y_bound, est.y_bound)
    return Xa.T @ Yc / X.shape[0]


def accuracy_study(design, grid, reps, seed, H=None):
    rng = np.random.default_rng(seed)
    rows = []
    for n_outputs in grid:
        n_reps = reps if n_outputs <= 1001 else 1
        for rep in range(n_reps):
            X = genotype_design(H, rng) if design == "genotype" else gaussian_design(rng)
            Y = outcomes(X, n_outputs, rng)
            n = X.shape[0]
            n_train = int(0.8 * n)
            perm = rng.permutation(n)
            tr, te = perm[:n_train], perm[n_train:]
            Xtr, Ytr, Xte, Yte = X[tr], Y[tr], X[te], Y[te]
            if design == "genotype":
                x_bound = math.sqrt(D)
                y_bound = 5.0
            else:
                x_bound = 1.5 * math.sqrt(D)
                # 4 sd of y, from a separate synthetic draw (never the evaluation data).
                aux = np.random.default_rng(seed + 1000 + rep)
                Xa = gaussian_design(aux, 2000)
                y_bound = 4.0 * outcomes(Xa, 50, aux).std()
            w_bound = D**0.25
            delta = 1.0 / n_train**2
            # Minimum-norm least squares: sampled SNPs can be collinear (perfect LD).
            ols = LinearRegression().fit(Xtr, Ytr)
            mse_ols = np.mean((Ytr - ols.predict(Xtr)) ** 2)
            base = {"design": design, "l": n_outputs, "rep": rep}
            rows.append({**base, "method": "ols", "r2_in": pooled_r2(Ytr, ols.predict(Xtr)),
                         "r2_out": pooled_r2(Yte, ols.predict(Xte)), "log_mse_ratio": 0.0,
                         "assoc_mse": 0.0, "seconds": None})
            for name, est in methods(x_bound, y_bound, w_bound, delta).items():
                est.set_params(random_state=int(rng.integers(2**31)))
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(Xtr, Ytr)
                seconds = time.perf_counter() - t0
                Ptr = est.predict(Xtr).reshape(Ytr.shape)
                Pte = est.predict(Xte).reshape(Yte.shape)
                row = {**base, "method": name, "r2_in": pooled_r2(Ytr, Ptr),
                       "r2_out": pooled_r2(Yte, Pte),
                       "log_mse_ratio": float(np.log(np.mean((Ytr - Ptr) ** 2) / mse_ols)),
                       "seconds": seconds}
                if isinstance(est, ReuseCovRegressor):
                    G = exact_association(est, Xtr, Ytr)
                    row["assoc_mse"] = float(np.mean((est.noisy_xty_ - G) ** 2))
                    row["proj_active"] = bool(est.proj_active_)
                    row["ridge"] = est.ridge_
                    row["cov_budget"] = est.cov_budget_
                else:
                    row["assoc_mse"] = None
                    row["ridge"] = est.ridge_
                rows.append(row)
            print(f"[{design}] l={n_outputs} rep={rep} done", flush=True)
    return rows


def summarise(rows):
    table = {}
    for row in rows:
        key = (row["design"], row["method"], row["l"])
        table.setdefault(key, []).append(row)
    out = []
    for (design, method, n_outputs), group in sorted(table.items()):
        entry = {"design": design, "method": method, "l": n_outputs, "reps": len(group)}
        for metric in ("r2_in", "r2_out", "log_mse_ratio", "assoc_mse"):
            values = [g[metric] for g in group if g.get(metric) is not None]
            if values:
                entry[metric] = float(np.mean(values))
                entry[metric + "_sd"] = float(np.std(values))
        if "proj_active" in group[0]:
            entry["proj_active"] = float(np.mean([g["proj_active"] for g in group]))
        out.append(entry)
    return out


# ------------------------------------------------------------------ timing
def timing_study(n, d, n_outputs, loop_subset, seed=0, repeats=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    Y = np.empty((n, n_outputs))
    theta = rng.normal(0, 1 / math.sqrt(d), size=(d, n_outputs))
    step = 10_000
    for a in range(0, n, step):
        Y[a:a + step] = X[a:a + step] @ theta + rng.normal(size=(min(step, n - a),
                                                              n_outputs))
    y_bound = float(np.abs(Y).max()) + 1.0  # benchmark only: timing, no privacy claim
    result = {"n": n, "d": d, "l": n_outputs}

    # The machine is shared: alternate the two multi-output fits and keep the
    # best of ``repeats`` runs of each.
    times = {"reusecov": [], "ridge": []}
    for _ in range(repeats):
        est = ReuseCovRegressor(epsilon=1.0, delta=1e-10, x_bound=math.sqrt(d),
                                y_bound=y_bound, random_state=0)
        t0 = time.perf_counter()
        est.fit(X, Y)
        times["reusecov"].append(time.perf_counter() - t0)
        del est
        ridge = Ridge(alpha=1.0, solver="cholesky")
        t0 = time.perf_counter()
        ridge.fit(X, Y)
        times["ridge"].append(time.perf_counter() - t0)
        del ridge
    result["repeats"] = repeats
    result["reusecov_gauss_full_s"] = min(times["reusecov"])
    result["ridge_multioutput_s"] = min(times["ridge"])
    result["reusecov_gauss_full_all_s"] = times["reusecov"]
    result["ridge_multioutput_all_s"] = times["ridge"]

    t0 = time.perf_counter()
    for j in range(loop_subset):
        Ridge(alpha=1.0, solver="cholesky").fit(X, Y[:, j])
    per_fit = (time.perf_counter() - t0) / loop_subset
    result["ridge_loop_subset"] = loop_subset
    result["ridge_loop_extrapolated_s"] = per_fit * n_outputs

    est1 = ReuseCovRegressor(epsilon=1.0, delta=1e-10, x_bound=math.sqrt(d),
                             y_bound=y_bound, random_state=0)
    t0 = time.perf_counter()
    for j in range(loop_subset):
        est1.fit(X, Y[:, j])
    result["reusecov_loop_extrapolated_s"] = (
        (time.perf_counter() - t0) / loop_subset * n_outputs
    )
    result["ratio_to_ridge_multioutput"] = (
        result["reusecov_gauss_full_s"] / result["ridge_multioutput_s"]
    )
    result["ratio_to_ridge_loop"] = (
        result["reusecov_gauss_full_s"] / result["ridge_loop_extrapolated_s"]
    )
    return result


def _floor_fit(X, Y):
    """The floor: X^T X and X^T Y of the augmented design and one solve."""
    Xa = np.column_stack([X, np.ones(X.shape[0])])
    A = Xa.T @ Xa
    B = Xa.T @ Y
    return np.linalg.solve(A + 1e-3 * np.eye(A.shape[0]), B)


def speed_study(n, d, n_outputs, repeats, seed=0, independent=False):
    """Fit times, interleaved in one run: floor, ReuseCov, IndependentSSP, sklearn Ridge.

    Each repeat runs every method once, in turn (the machine is shared, so
    the methods see the same load); medians and per-repeat ratios are kept.
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    W = rng.uniform(-0.3, 0.3, size=(d, n_outputs)) / math.sqrt(d)
    Y = np.empty((n, n_outputs))
    for a in range(0, n, 2000):
        b = min(a + 2000, n)
        Y[a:b] = np.clip(X[a:b] @ W + 0.1 * rng.standard_normal((b - a, n_outputs)), -1, 1)
    methods = {
        "floor": lambda: _floor_fit(X, Y),
        "reusecov": lambda: ReuseCovRegressor(epsilon=1.0, x_bound=math.sqrt(d),
                                              y_bound=1.0).fit(X, Y),
        "ridge_cholesky": lambda: Ridge(alpha=1.0, solver="cholesky").fit(X, Y),
    }
    if independent:
        methods["independent_ssp"] = lambda: IndependentSSPRegressor(
            epsilon=1.0, x_bound=math.sqrt(d), y_bound=1.0).fit(X, Y)
    times = {name: [] for name in methods}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            for name, fit in methods.items():
                settle()
                t0 = time.perf_counter()
                fit()
                times[name].append(time.perf_counter() - t0)
    out = {"n": n, "d": d, "l": n_outputs, "repeats": repeats, "times_s": times,
           "median_s": {k: float(np.median(v)) for k, v in times.items()}}
    for name in methods:
        if name in ("floor", "ridge_cholesky"):
            continue
        for ref in ("floor", "ridge_cholesky"):
            ratios = np.array(times[name]) / np.array(times[ref])
            out[f"{name}/{ref}"] = float(np.median(ratios))
    return out


def speed_markdown(speed, command):
    lines = ["# ReuseCov: fit time against the floor and sklearn Ridge", "",
             f"Command: `{command}`. n = {speed['n']}, d = {speed['d']}, "
             f"l = {speed['l']}; {speed['repeats']} interleaved repeats (each runs every "
             f"method once, in turn, each after a {SETTLE_SECONDS} s pause that lets BLAS worker "
             "threads stop spinning); median seconds and median of the per-repeat ratios. "
             "Floor: X^T X and X^T Y of the augmented design and one solve. "
             f"Platform: {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cpus (shared), numpy {np.__version__}.", "",
             "| method | median s | / floor | / Ridge(cholesky) |", "|---|---|---|---|"]
    def ratio(key):
        return "-" if key not in speed else f"{speed[key]:.2f}"

    for name, t in speed["median_s"].items():
        lines.append(f"| {name} | {t:.3f} | {ratio(f'{name}/floor')} | "
                     f"{ratio(f'{name}/ridge_cholesky')} |")
    lines += ["", "Targets: reusecov <= 1.25 x floor and <= 0.5 x Ridge(cholesky).", ""]
    return "\n".join(lines)


# --------------------------------------------------------------- reporting
METHOD_ORDER = ["ols", "gauss_full", "gauss_full_paper", "independent_ssp", "gauss_label",
                "proj_label", "gauss_label_ridge0", "proj_label_ridge0", "gauss_feature",
                "proj_feature"]


def markdown(summary, timing, meta):
    lines = ["# ReuseCov (PRIMO) benchmark", "",
             f"Command: `{meta['command']}`; {meta['platform']}; "
             f"epsilon = {EPSILON}, delta = 1/n_train^2, d = {D}.", ""]
    for design in sorted({s["design"] for s in summary}):
        grid = sorted({s["l"] for s in summary if s["design"] == design})
        for metric, title in [("r2_in", "pooled in-sample R^2"),
                              ("r2_out", "pooled holdout R^2"),
                              ("log_mse_ratio", "ln(MSE_priv / MSE_OLS), in-sample"),
                              ("assoc_mse", "per-entry MSE of the released X^T Y / n")]:
            lines += [f"## {design}: {title}", "",
                      "| method | " + " | ".join(f"l={g}" for g in grid) + " |",
                      "|---|" + "---|" * len(grid)]
            for method in METHOD_ORDER:
                cells = []
                for g in grid:
                    hit = [s for s in summary if s["design"] == design and
                           s["method"] == method and s["l"] == g and metric in s]
                    if not hit:
                        cells.append("-")
                        continue
                    s = hit[0]
                    if metric == "assoc_mse":
                        cells.append(f"{s[metric]:.3g}")
                    else:
                        cells.append(f"{s[metric]:.3f} ± {s[metric + '_sd']:.3f}")
                if any(c != "-" for c in cells):
                    lines.append(f"| {method} | " + " | ".join(cells) + " |")
            lines.append("")
        active = [s for s in summary if s["design"] == design and "proj_active" in s and
                  s["method"].startswith("proj")]
        if active:
            lines += [f"Projection active (fraction of reps), {design}: " + ", ".join(
                f"{s['method']}@l={s['l']}: {s['proj_active']:.2f}" for s in active), ""]
    if timing:
        lines += ["## Fit time", "", "| quantity | value |", "|---|---|"]
        for k, v in timing.items():
            if isinstance(v, list):
                v = ", ".join(f"{x:.3g}" for x in v)
            lines.append(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |")
        lines.append("")
    return "\n".join(lines)


def _target_problem(seed, n, d, n_outputs):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    W = rng.uniform(-0.3, 0.3, (d, n_outputs))
    Y = np.clip(X @ W + 0.1 * rng.standard_normal((n, n_outputs)), -1, 1)
    Xa = np.column_stack([X, np.ones(n)])
    mse_ols = np.mean((Y - Xa @ np.linalg.lstsq(Xa, Y, rcond=None)[0]) ** 2)
    return X, Y, mse_ols


def target_study(seeds, proj_seeds):
    """In-sample MSE / OLS's of the defaults on the two target settings."""
    cases = {
        "full_default": (20000, 10, 50, dict(epsilon=1.0, delta=1e-6, y_bound=1.0)),
        "full_ridge_theory": (20000, 10, 50, dict(epsilon=1.0, delta=1e-6, y_bound=1.0,
                                                  ridge="theory", cov_budget=0.5)),
        "independent_ssp_default": (20000, 10, 50, dict(epsilon=1.0, delta=1e-6,
                                                        y_bound=1.0)),
        "feature_proj_default": (2000, 10, 6000, dict(epsilon=4.0, delta=1 / 2000**2,
                                                      privacy="feature", mechanism="proj")),
    }
    out = {}
    for name, (n, d, n_outputs, kw) in cases.items():
        cls = IndependentSSPRegressor if name.startswith("independent") else ReuseCovRegressor
        ratios, ridges, times = [], [], []
        for seed in range(proj_seeds if "proj" in name else seeds):
            X, Y, mse_ols = _target_problem(seed, n, d, n_outputs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                est = cls(x_bound=math.sqrt(d), **kw).fit(X, Y)
                times.append(time.perf_counter() - t0)
            ratios.append(float(np.mean((Y - est.predict(X)) ** 2) / mse_ols))
            ridges.append(float(np.median(est.ridge_)))
        out[name] = {"n": n, "d": d, "l": n_outputs, "seeds": len(ratios),
                     "median_ratio": float(np.median(ratios)), "ratios": ratios,
                     "median_ridge": float(np.median(ridges)),
                     "median_fit_s": float(np.median(times))}
        print(name, out[name]["median_ratio"], flush=True)
    return out


def target_markdown(targets, command):
    lines = ["# ReuseCov: accuracy of the defaults on the target settings", "",
             f"Command: `{command}`. In-sample MSE / OLS's MSE, median over seeds.", "",
             "| case | n | d | l | seeds | median ratio | median ridge | fit s |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in targets.items():
        lines.append(f"| {name} | {r['n']} | {r['d']} | {r['l']} | {r['seeds']} | "
                     f"{r['median_ratio']:.3f} | {r['median_ridge']:.4g} | "
                     f"{r['median_fit_s']:.2f} |")
    lines += ["", "Targets: full_default <= 1.45; feature_proj_default <= 1.4.", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--timing-n", type=int, default=100_000)
    parser.add_argument("--timing-l", type=int, default=10_000)
    parser.add_argument("--timing-d", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--targets", action="store_true")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--proj-seeds", type=int, default=3)
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--speed-repeats", type=int, default=5)
    parser.add_argument("--speed-independent", action="store_true",
                        help="also time IndependentSSP (l eigendecompositions: minutes)")
    args = parser.parse_args(argv)
    if args.speed:
        command = "python benchmarks/bench_reusecov.py " + " ".join(argv or [])
        speed = speed_study(20_000, 50, 10_000, args.speed_repeats,
                            independent=args.speed_independent)
        text = speed_markdown(speed, command)
        write_results("reusecov_speed", speed, text)
        print(text)
        return
    if args.targets:
        command = "python benchmarks/bench_reusecov.py " + " ".join(argv or [])
        targets = target_study(args.seeds, args.proj_seeds)
        text = target_markdown(targets, command)
        write_results("reusecov_targets", targets, text)
        print(text)
        return
    grid = [1, 11, 101] if args.quick else [1, 11, 101, 1001, 10_000]
    meta = {"command": "python benchmarks/bench_reusecov.py " + " ".join(argv or []),
            "platform": f"{platform.processor() or platform.machine()}, "
                        f"{os.cpu_count()} cpus, numpy {np.__version__}"}
    rows = []
    if not args.skip_accuracy:
        t0 = time.perf_counter()
        H = simulate_haplotypes()
        meta["haplotypes_shape"] = list(H.shape)
        meta["simulation_seconds"] = time.perf_counter() - t0
        rows += accuracy_study("genotype", grid, args.reps, seed=1, H=H)
        rows += accuracy_study("gaussian", grid, args.reps, seed=2)
    summary = summarise(rows)
    timing = None
    if not args.skip_timing:
        if args.quick:
            timing = timing_study(20_000, 50, 1000, loop_subset=20)
        else:
            timing = timing_study(args.timing_n, args.timing_d, args.timing_l,
                                  loop_subset=20)
    RESULTS.mkdir(parents=True, exist_ok=True)
    previous = RESULTS / "reusecov.json"
    if previous.exists() and (args.skip_accuracy or args.skip_timing):
        old = json.loads(previous.read_text())
        if args.skip_accuracy:
            rows, summary = old.get("rows", []), old.get("summary", [])
            meta = {**old.get("meta", {}), "timing_command": meta["command"]}
        if args.skip_timing:
            timing = old.get("timing")
    payload = {"meta": meta, "summary": summary, "timing": timing, "rows": rows}
    text = markdown(summary, timing, meta)
    write_results("reusecov", payload, text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
