"""
==========================================================
ReuseCov: many outcomes on one design
==========================================================

:class:`~skprivreg.linear_model.ReuseCovRegressor` (PRIMO, see
:doc:`/reusecov`) fits ``l`` ridge regressions that share one design ``X``.
It releases the covariance :math:`X^\\top X/n` *once* and reuses it for every
outcome, so only the association :math:`X^\\top Y/n` pays for ``l``. The
baseline :class:`~skprivreg.linear_model.IndependentSSPRegressor` runs ``l``
independent private regressions and splits the budget ``l`` ways, its
covariance noise included.

This example compares, as the number of outcomes grows from 1 to 1000:

- full DP (a whole record :math:`(x_i, y^i)` is protected):
  ReuseCovGauss and IndependentSSP;
- label DP (``X`` public, each outcome row protected): ReuseCovGauss and
  ReuseCovProj (the noisy association is projected onto a public convex set);
- feature DP (``Y`` public, each row of ``X`` protected): ReuseCovGauss and
  ReuseCovProj;
- the non-private least-squares fit.

The three notions protect *different* things, so compare lines within a
notion; the non-private line is the same for all. Data are simulated,
:math:`x \\sim N(0, I_d)`, :math:`y_j = x^\\top\\theta_j + N(0, 1)` with
:math:`\\theta_j \\sim N(0, I_d/\\sqrt d)`; the bounds are computed from the
simulation's parameters, never from the data.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LinearRegression

from skprivreg.linear_model import IndependentSSPRegressor, ReuseCovRegressor

N_TRAIN, N_TEST, N_FEATURES = 2_000, 1_000, 10
EPSILON = 5.0
DELTA = 1.0 / N_TRAIN**2
OUTCOMES = [1, 3, 10, 30, 100, 300, 1000]
N_REPEATS = 2

# Public bounds from the simulation: ||x|| is chi with d degrees of freedom
# (1.5 sqrt(d) is far in its tail); each outcome has standard deviation
# about sqrt(sqrt(d) + 1), and 4 of those bound the labels.
X_BOUND = 1.5 * np.sqrt(N_FEATURES)
Y_BOUND = 4.0 * np.sqrt(np.sqrt(N_FEATURES) + 1.0)
W_BOUND = N_FEATURES**0.25  # typical ||theta_j||, used only to size the ridge


def simulate(n_outputs, rng):
    X = rng.normal(size=(N_TRAIN + N_TEST, N_FEATURES))
    theta = rng.normal(0.0, N_FEATURES**-0.25, size=(N_FEATURES, n_outputs))
    Y = X @ theta + rng.normal(size=(X.shape[0], n_outputs))
    return X[:N_TRAIN], Y[:N_TRAIN], X[N_TRAIN:], Y[N_TRAIN:]


def pooled_r2(Y, P):
    """R^2 pooled over all outcomes (one number per fit)."""
    return 1.0 - np.sum((Y - P) ** 2) / np.sum((Y - Y.mean(axis=0)) ** 2)


def models(seed):
    common = dict(epsilon=EPSILON, delta=DELTA, w_bound=W_BOUND, random_state=seed)
    return {
        "full: ReuseCovGauss": ReuseCovRegressor(
            privacy="full", x_bound=X_BOUND, y_bound=Y_BOUND, **common
        ),
        "full: IndependentSSP": IndependentSSPRegressor(
            x_bound=X_BOUND, y_bound=Y_BOUND, **common
        ),
        "label: ReuseCovGauss": ReuseCovRegressor(
            privacy="label", y_bound=Y_BOUND, **common
        ),
        "label: ReuseCovProj": ReuseCovRegressor(
            privacy="label", mechanism="proj", y_bound=Y_BOUND, **common
        ),
        "feature: ReuseCovGauss": ReuseCovRegressor(
            privacy="feature", x_bound=X_BOUND, **common
        ),
        "feature: ReuseCovProj": ReuseCovRegressor(
            privacy="feature", mechanism="proj", x_bound=X_BOUND, **common
        ),
    }


rng = np.random.default_rng(0)
scores = {}
for n_outputs in OUTCOMES:
    for _ in range(N_REPEATS):
        X, Y, X_test, Y_test = simulate(n_outputs, rng)
        ols = LinearRegression().fit(X, Y)
        scores.setdefault("OLS (not private)", []).append(
            pooled_r2(Y_test, ols.predict(X_test))
        )
        for name, model in models(seed=int(rng.integers(2**31))).items():
            with warnings.catch_warnings():
                # The label bound is 4 standard deviations: a few labels
                # are clipped, as intended.
                pass  # clipping is never signalled
                model.fit(X, Y)
            prediction = model.predict(X_test).reshape(Y_test.shape)
            scores.setdefault(name, []).append(pooled_r2(Y_test, prediction))
scores = {
    name: np.array(values).reshape(len(OUTCOMES), N_REPEATS)
    for name, values in scores.items()
}

# %%
# Holdout R² against the number of outcomes
# -----------------------------------------
# Mean over 2 simulations (bars: min to max). Solid lines are the Gaussian
# mechanism, dashed lines the projection, colours the privacy notion.
styles = {
    "OLS (not private)": dict(color="k", ls="-", marker=""),
    "full: ReuseCovGauss": dict(color="C0", ls="-", marker="o"),
    "full: IndependentSSP": dict(color="C0", ls=":", marker="x"),
    "label: ReuseCovGauss": dict(color="C1", ls="-", marker="o"),
    "label: ReuseCovProj": dict(color="C1", ls="--", marker="s"),
    "feature: ReuseCovGauss": dict(color="C2", ls="-", marker="o"),
    "feature: ReuseCovProj": dict(color="C2", ls="--", marker="s"),
}
fig, ax = plt.subplots(figsize=(10, 5.5))
for name, values in scores.items():
    mean = values.mean(axis=1)
    ax.errorbar(
        OUTCOMES, mean,
        yerr=[mean - values.min(axis=1), values.max(axis=1) - mean],
        label=name, ms=5, capsize=2, **styles[name],
    )
ax.axhline(0.0, color="grey", lw=0.8)
ax.set_xscale("log")
ax.set_xlabel("number of outcomes l")
ax.set_ylabel("pooled holdout $R^2$")
ax.set_title(
    rf"n = {N_TRAIN}, d = {N_FEATURES}, $\varepsilon = {EPSILON:g}$, "
    r"$\delta = 1/n^2$ (budget for all l outcomes together)"
)
ax.legend(loc="lower left", fontsize=9, ncol=2)
fig.tight_layout()
plt.show()

print(f"{'method':<24}" + "".join(f"{f'l={n}':>9}" for n in OUTCOMES))
for name, values in scores.items():
    print(f"{name:<24}" + "".join(f"{v:9.3f}" for v in values.mean(axis=1)))

# %%
# What to read from the plot
# --------------------------
# - The budget covers all ``l`` outcomes, so every private line falls as
#   ``l`` grows: the association noise per entry grows like ``l``. With a
#   thousand outcomes on 2,000 rows, little signal is left under any notion.
# - Under full DP, reusing one covariance beats ``l`` independent SSP runs
#   once there are about ten outcomes or more (IndependentSSP pays
#   ``sqrt(l)`` more noise on every covariance); at a few outcomes the two
#   are within the noise of each other.
# - Label DP adds no covariance noise (``X`` is public), so at ``l = 1`` it is
#   the best private line. Feature DP (``Y`` public) wins as ``l`` grows: its
#   association sensitivity uses the public :math:`\max_i\lVert y^i\rVert`
#   instead of the worst case :math:`\sqrt{l}\,B_Y` of a clipped label row.
# - The feature-DP projection (green dashed) keeps a positive R² at
#   ``l >= 300`` where the Gaussian mechanism decays: it helps once ``l`` is
#   of the order of ``n / sqrt(d)``. The label-DP projection coincides with
#   the Gaussian line here: at these sizes the noisy association never leaves
#   the public set, so the projection is inactive (the benchmarks see it act
#   at ``l = 10,000``).
# - The :doc:`benchmarks </benchmarks>` repeat this with d = 25, up to
#   10,000 outcomes, and on simulated genotypes.
