"""
=========================================================
ISSP: how many rows the proven constants need (planner)
=========================================================

:class:`~skprivreg.linear_model.ISSPRegressor` (Insufficient Statistics
Perturbation, see :doc:`/issp`) releases
:math:`\\tilde\\beta \\sim N(\\hat\\beta_v, c^2 S_v^{-1})`. Its noise has the
shape of the OLS error, so on clean data the privacy cost is one number: the
ratio :math:`c/\\sigma` of the privacy noise to the OLS noise. A ratio of 1
means the private fit is about :math:`\\sqrt 2` times the OLS error.

With the *proven* constants (the corrected PTR test and leverage schedule
stated in :ref:`issp`, and the analysis of :ref:`issp_analysis`), that ratio
is small only for large ``n``: a data-independent Gaussian-design rule must
put every leverage below a bound :math:`L_0` that the privacy proof caps,
and the residual-ladder blow-up :math:`(R_{2k}/R_0)^2 \approx e^{4 k^2 L_0}`
must stay moderate. :func:`skprivreg.linear_model.issp_plan` computes all of
this from public numbers only (``n``, ``d``, epsilon, delta); it touches no
data. This example draws its predictions.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np

from skprivreg.exceptions import ConfigurationError
from skprivreg.linear_model import ISSPRegressor, issp_plan

N_FEATURES = 20
DELTA = 1e-6
EPSILONS = [0.5, 1.0, 2.0, 4.0, 8.0]
N_GRID = np.logspace(5, 11, 49)


def plan_curve(epsilon):
    """Predicted c/sigma and whether the clean path is predicted, per n.

    Below a few hundred thousand rows the private residual scale has too few
    rows per group and the planner refuses the request (NaN here).
    """
    ratios, clean = [], []
    for n in N_GRID:
        with warnings.catch_warnings():
            # The planner warns (by design) when the clean path is not
            # predicted; here that is exactly what we want to draw.
            warnings.simplefilter("ignore")
            try:
                plan = issp_plan(n_samples=int(n), n_features=N_FEATURES,
                                 epsilon=epsilon, delta=DELTA)
            except ConfigurationError:
                ratios.append(np.nan)
                clean.append(False)
                continue
        ratios.append(plan.predicted_noise_ratio)
        clean.append(plan.clean_path_possible)
    return np.array(ratios), np.array(clean)


curves = {eps: plan_curve(eps) for eps in EPSILONS}

# %%
# Predicted noise against the number of rows
# ------------------------------------------
# Filled markers: the planner predicts the clean path (every row passes the
# filters on Gaussian-like data, so the output has exactly the distribution
# above). Open markers: a privacy cap binds and ISSP is predicted to FAIL or
# to add large noise. Missing points: the planner refuses the request.
fig, ax = plt.subplots(figsize=(9, 5.2))
for i, (eps, (ratio, clean)) in enumerate(curves.items()):
    color = f"C{i}"
    shown = np.clip(ratio, 1e-3, 1e5)
    ax.plot(N_GRID, shown, color=color, lw=1.5, label=rf"$\varepsilon = {eps:g}$")
    ax.plot(N_GRID[clean], shown[clean], "o", color=color, ms=4)
    ax.plot(
        N_GRID[~clean], shown[~clean], "o", mfc="none", color=color, ms=4
    )
ax.axhline(1.0, color="k", lw=1, ls="--")
ax.text(1.3e6, 1.3, r"privacy noise = OLS noise", fontsize=9)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_ylim(1e-3, 1e5)
ax.set_xlabel("number of rows n")
ax.set_ylabel(r"predicted $c / \sigma$ (privacy noise / OLS noise)")
ax.set_title(
    rf"ISSP planner, d = {N_FEATURES}, $\delta = 10^{{-6}}$ "
    "(filled: clean path predicted)"
)
ax.legend(loc="upper right")
fig.tight_layout()
plt.show()

# %%
# Minimum number of rows against epsilon
# --------------------------------------
# The smallest ``n`` of the grid at which the planner predicts the clean
# path, and the smallest at which the predicted noise is at most the OLS
# noise (:math:`c/\sigma \le 1`).
eps_fine = np.geomspace(0.25, 16, 13)
n_clean, n_unit = [], []
for eps in eps_fine:
    ratio, clean = plan_curve(eps)
    n_clean.append(N_GRID[np.argmax(clean)] if clean.any() else np.nan)
    ok = clean & (ratio <= 1.0)
    n_unit.append(N_GRID[np.argmax(ok)] if ok.any() else np.nan)

fig, ax = plt.subplots(figsize=(9, 5.2))
ax.plot(eps_fine, n_clean, "o-", label="clean path predicted")
ax.plot(eps_fine, n_unit, "s-", label=r"clean path and $c/\sigma \leq 1$")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel(r"$\varepsilon$ (with $\delta = 10^{-6}$)")
ax.set_ylabel("minimum rows n (grid of 8 points per decade)")
ax.set_title(f"ISSP with the proven constants, d = {N_FEATURES}")
ax.legend()
fig.tight_layout()
plt.show()
for eps, a, b in zip(eps_fine, n_clean, n_unit):
    print(f"epsilon {eps:6.2f}: clean path from n = {a:8.1e}, c/sigma <= 1 from n = {b:8.1e}")

# %%
# What happens below that size
# ----------------------------
# A fit on 20,000 rows is a valid request, but the planner predicts, from
# public facts only and before any data access, that the private test will
# FAIL. By default the fit is then refused with
# :class:`~skprivreg.exceptions.ConfigurationError` and nothing is
# spent. With ``predicted_fail='spend'`` the fit goes ahead; with
# ``on_fail='zero'`` the private test fails, the whole budget is spent and
# recorded, and the model is all zeros (with ``on_fail='raise'``, the
# default, :class:`~skprivreg.exceptions.ISSPFailedError` is raised
# instead). There is never a non-private fallback.
rng = np.random.default_rng(0)
X = rng.normal(size=(20_000, 5))
y = X @ np.ones(5) + rng.normal(size=20_000)
try:
    ISSPRegressor(epsilon=1.0).fit(X, y)
except ConfigurationError as exc:
    print(f"refused: {str(exc)[:150]}...")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = ISSPRegressor(
        epsilon=1.0, on_fail="zero", predicted_fail="spend", random_state=0
    ).fit(X, y)
for w in caught:
    print(f"{type(w.message).__name__}: {str(w.message)[:150]}...")
print("ptr_passed_ =", model.ptr_passed_, " coef_ =", model.coef_)
print(model.privacy_spent_)

# %%
# Reading the curves
# ------------------
# - With ``d = 20`` and :math:`\varepsilon = 1` the clean path starts near
#   :math:`6 \cdot 10^6` rows and the noise falls to the OLS noise near
#   :math:`3 \cdot 10^7`; at :math:`\varepsilon = 8` the numbers are about
#   :math:`2.4 \cdot 10^5` and :math:`7.5 \cdot 10^5`. Below the clean path
#   the noise is tens to thousands of times the OLS noise; ISSP is not a
#   small-data method.
# - These are *proven* constants. The paper's PTR lemma is false (the
#   corrected ``k`` is about 1.7 times larger) and its printed leverage
#   schedule breaks its own theorem; every tightening of its other constants
#   is proved on :ref:`issp_analysis` (with the published constants the same
#   curves start beyond :math:`10^{10}` rows at :math:`\varepsilon = 1`). For
#   data at this scale ISSP's noise does not depend on the condition number;
#   for smaller data use :class:`~skprivreg.linear_model.AdaSSPRegressor` (see
#   :ref:`sphx_glr_auto_examples_plot_adassp_epsilon.py`).
# - The same numbers are printed by
#   ``python -m skprivreg plan issp --n N --d D --epsilon E --delta DL``.
