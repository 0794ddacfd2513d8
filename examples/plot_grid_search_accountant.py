"""
=================================================================
Model selection on private data: every fit of a search is charged
=================================================================

:class:`~sklearn.model_selection.GridSearchCV` fits one model per candidate
and per fold, then refits the best candidate on all the data. Each of these
fits reads the private data, so each spends privacy budget. A
:class:`~skprivreg.accounting.BudgetAccountant` passed to the estimator is
shared by all of them: :func:`~sklearn.base.clone` returns the *same*
accountant (it is a handle to one budget, not a value), and every fit checks
the budget before it touches the data and records its ledger afterwards.

This example runs a search in a :class:`~sklearn.pipeline.Pipeline` with a
shared accountant, plots what every fit was charged, and shows the two ways
a search is refused: an exhausted budget, and ``n_jobs > 1`` (processes that
would each hold a copy of the budget). It also shows what the accountant does
*not* cover: the search's cross-validation scores.
"""

# %%

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from skprivreg.accounting import BudgetAccountant
from skprivreg.exceptions import BudgetExceededError
from skprivreg.linear_model import AdaSSPRegressor
from skprivreg.preprocessing import rowwise

rng = np.random.default_rng(0)
n, d = 6_000, 8
X = rng.normal(scale=3.0, size=(n, d))
y = X @ rng.normal(size=d) / 3.0 + rng.normal(size=n)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

# The bounds below are public guesses, not maxima: the rare row beyond them
# is clipped, which is part of the guarantee. ``fit`` never says whether a row
# was clipped (that would be a fact about one record); the curator can count
# them with :func:`skprivreg.diagnostics.clipping_report`.

# %%
# A pipeline whose preprocessing is private too
# ---------------------------------------------
# Preprocessing fitted on the private data is a release of its own: a
# :class:`~sklearn.preprocessing.StandardScaler` fitted here would publish the
# data's means and scales with no guarantee. We rescale by a *public* constant
# instead (here the known scale of the measurements), which is a fixed
# per-row map and keeps neighbouring datasets neighbours. The bounds of the
# regressor are stated in the rescaled units. ``rowwise`` declares the
# function a map of each row on its own, which the pipeline guard checks for.
PUBLIC_SCALE = 3.0


@rowwise
def rescale(X):
    return X / PUBLIC_SCALE


def make_search(accountant, n_jobs=1):
    pipe = Pipeline(
        [
            ("rescale", FunctionTransformer(rescale)),
            (
                "reg",
                AdaSSPRegressor(
                    delta=1e-7,
                    x_bound=6.0,
                    y_bound=15.0,
                    accountant=accountant,
                    random_state=0,
                ),
            ),
        ]
    )
    return GridSearchCV(
        pipe,
        {"reg__epsilon": [0.25, 0.5, 1.0]},
        cv=3,
        n_jobs=n_jobs,
        # A refused fit must stop the search, not become a NaN score.
        error_score="raise",
    )


# %%
# Run the search under a shared budget
# ------------------------------------
# 3 candidates x 3 folds + 1 refit = 10 fits. The accountant keeps the
# ledger of every fit, in order, in ``accountant.ledgers``.
#
# We run the search twice, with an accountant composing by basic composition
# and one composing by Gaussian DP.
accountants = {
    "basic": BudgetAccountant(epsilon=20.0, delta=1e-5, composition="basic"),
    "gdp": BudgetAccountant(epsilon=20.0, delta=1e-5, composition="gdp"),
}
searches = {}
for composition, accountant in accountants.items():
    searches[composition] = make_search(accountant).fit(X_train, y_train)
    print(accountant)

search = searches["basic"]
print("fits charged:", accountants["basic"].n_spends)
print("best candidate:", search.best_params_)
print("test R^2 of the refitted model:", round(search.score(X_test, y_test), 3))
print("\nThe refitted model's own ledger:")
print(search.best_estimator_[-1].privacy_spent_)

# %%
# What each fit cost
# ------------------
# The accountant keeps one ledger per fit, in the order they ran. Under basic
# composition the total is the sum of the bars; under GDP composition the
# Gaussian releases of all fits compose by their :math:`\mu`, and the same
# ten fits cost much less epsilon at the same total delta.
ledgers = accountants["basic"].ledgers
per_fit = np.array([ledger.epsilon for ledger in ledgers])


def running_total(composition):
    accountant = BudgetAccountant(epsilon=np.inf, composition=composition)
    totals = []
    for ledger in ledgers:
        accountant.spend(ledger)
        totals.append(accountant.total()[0])
    return totals


fig, ax = plt.subplots(figsize=(7, 4.4))
fit_index = np.arange(1, len(per_fit) + 1)
colors = ["C0"] * (len(per_fit) - 1) + ["C3"]
ax.bar(fit_index, per_fit, color=colors, alpha=0.7, label="epsilon of each fit")
ax.plot(fit_index, running_total("basic"), "k-o", ms=4, label="running total, basic")
ax.plot(fit_index, running_total("gdp"), "k--s", ms=4, label="running total, GDP")
ax.set_xticks(fit_index)
ax.set_xlabel("fit number (blue: cross-validation fits, red: refit)")
ax.set_ylabel(r"$\varepsilon$")
ax.set_title("Privacy spent by one GridSearchCV")
ax.legend()
fig.tight_layout()

# %%
# The scores are not private
# --------------------------
# ``cv_results_`` holds validation scores computed from the private data by
# the non-private code of scikit-learn: they are *not* covered by the
# accountant, and neither is the choice of ``best_params_`` made from them.
# Publishing the scores, or a model chosen by them, leaks information about
# the validation rows. Treat the search as an internal step, choose
# hyperparameters on public or simulated data when you can, and publish only
# models whose whole path is accounted for.
means = search.cv_results_["mean_test_score"]
stds = search.cv_results_["std_test_score"]
eps_grid = [p["reg__epsilon"] for p in search.cv_results_["params"]]
fig, ax = plt.subplots(figsize=(7, 4.4))
ax.errorbar(eps_grid, means, yerr=stds, fmt="o-", capsize=3)
ax.set_xscale("log")
ax.minorticks_off()
ax.set_xticks(eps_grid, [str(e) for e in eps_grid])
ax.set_xlabel(r"candidate $\varepsilon$")
ax.set_ylabel("mean validation R$^2$ (not private)")
ax.set_title("cv_results_: computed in the clear, not covered")
fig.tight_layout()
plt.show()

# %%
# Refused before touching the data
# --------------------------------
# A budget too small for the whole search: the fit that would exceed it raises
# :class:`~skprivreg.exceptions.BudgetExceededError` *before* it reads any row,
# and nothing is recorded for it. With ``error_score='raise'`` the search
# stops there; with scikit-learn's default (``error_score=np.nan``) it would
# go on and report NaN scores, so keep ``'raise'``.
small = BudgetAccountant(epsilon=3.0, delta=1e-5)
try:
    make_search(small).fit(X_train, y_train)
except BudgetExceededError as exc:
    print("refused:", exc)
print(small)

# %%
# Parallel searches cannot share a budget across processes
# --------------------------------------------------------
# With ``n_jobs=2`` joblib sends the estimator to worker processes. A copy of
# the accountant in another process would record spends that never come back,
# so the accountant refuses to be pickled and the search fails at once, before
# any fit. Use ``n_jobs=1`` (as above), a thread backend
# (``joblib.parallel_backend('threading')``), or charge the whole search up
# front and fit with ``accountant=None``.
parallel = BudgetAccountant(epsilon=20.0, delta=1e-5)
try:
    make_search(parallel, n_jobs=2).fit(X_train, y_train)
except Exception as exc:  # joblib wraps the accountant's TypeError
    print(f"{type(exc).__name__}: {exc}")
    cause = str(exc.__cause__ or "")
    reason = [line for line in cause.splitlines() if "cannot be pickled" in line]
    print("\n".join(reason[-1:]))
print(parallel)
