"""
=========================================================
Privacy accounting: basic composition against Gaussian DP
=========================================================

Every noisy release inside ``fit`` is one
:class:`~skprivreg.accounting.PrivacyEvent`; a fit's events form a
:class:`~skprivreg.accounting.PrivacyLedger`; and a
:class:`~skprivreg.accounting.BudgetAccountant` adds up the ledgers of many
fits. How the events add up is the ledger's *composition*:

``'basic'``
    The epsilons add and the deltas add. Valid for any mechanism.
``'gdp'``
    Gaussian differential privacy (Dong, Roth & Su 2022). A Gaussian release
    with L2-sensitivity :math:`\\Delta` and noise :math:`\\sigma` is
    :math:`\\mu`-GDP with :math:`\\mu = \\Delta/\\sigma`, Gaussian releases
    compose *exactly* as :math:`\\mu = \\sqrt{\\sum_k \\mu_k^2}`, and
    :math:`\\mu`-GDP is :math:`(\\varepsilon, \\delta)`-DP for every pair on the
    curve

    .. math::
        \\delta(\\varepsilon; \\mu) = \\Phi(-\\varepsilon/\\mu + \\mu/2)
            - e^{\\varepsilon}\\,\\Phi(-\\varepsilon/\\mu - \\mu/2).

This example draws that curve, converts between :math:`\\mu` and
:math:`(\\varepsilon, \\delta)` with :func:`~skprivreg.accounting.gdp_mu` and
:func:`~skprivreg.accounting.gdp_epsilon`, and shows how much more a budget
holds under GDP composition than under basic composition. Nothing here touches
data: accounting is computed from public numbers only.
"""

# %%
# One Gaussian release, many valid (epsilon, delta) pairs
# --------------------------------------------------------
# A Gaussian mechanism is not "(1, 1e-5)-DP" and nothing else: it satisfies a
# whole curve of guarantees. :func:`~skprivreg.accounting.gdp_delta` gives the
# smallest delta for each epsilon.
import matplotlib.pyplot as plt
import numpy as np

from skprivreg.accounting import (
    BudgetAccountant,
    PrivacyLedger,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
)
from skprivreg.exceptions import BudgetExceededError
from skprivreg.mechanisms import gaussian_event, gaussian_sigma

epsilons = np.linspace(0.01, 6, 300)
fig, ax = plt.subplots(figsize=(6.5, 4.2))
for mu in (0.25, 0.5, 1.0, 2.0):
    deltas = [gdp_delta(mu, eps) for eps in epsilons]
    ax.semilogy(epsilons, deltas, label=rf"$\mu = {mu}$")
ax.axhline(1e-5, color="grey", lw=0.8, ls=":", label=r"$\delta = 10^{-5}$")
ax.set_ylim(1e-12, 1)
ax.set_xlabel(r"$\varepsilon$")
ax.set_ylabel(r"$\delta(\varepsilon; \mu)$")
ax.set_title(r"The $(\varepsilon, \delta)$ guarantees of one $\mu$-GDP release")
ax.legend()
fig.tight_layout()

# %%
# The other direction: for a target (epsilon, delta), the largest mu. The noise
# of a Gaussian release of sensitivity 1 is then ``sigma = 1 / mu``: this is
# the analytic Gaussian mechanism (Balle & Wang 2018), and it is never worse
# than the classical ``sqrt(2 ln(1.25/delta)) / epsilon`` calibration (which is
# valid only for epsilon < 1).
fig, ax = plt.subplots(figsize=(6.5, 4.2))
for delta in (1e-3, 1e-6, 1e-9):
    mus = [gdp_mu(eps, delta) for eps in epsilons]
    ax.plot(epsilons, mus, label=rf"$\delta = 10^{{{int(np.log10(delta))}}}$")
ax.set_xlabel(r"$\varepsilon$")
ax.set_ylabel(r"$\mu$ = sensitivity / $\sigma$")
ax.set_title(r"gdp_mu($\varepsilon$, $\delta$): the largest $\mu$ allowed")
ax.legend()
fig.tight_layout()

for eps in (0.25, 0.5, 0.9):
    analytic = gaussian_sigma(1.0, eps, 1e-6)
    classical = gaussian_sigma(1.0, eps, 1e-6, method="classical")
    print(
        f"epsilon={eps:<5} delta=1e-6: sigma analytic={analytic:7.3f}  "
        f"classical={classical:7.3f}  (ratio {classical / analytic:.2f})"
    )

# %%
# Composing k releases
# --------------------
# Suppose a study makes ``k`` Gaussian releases, each calibrated to
# (0.5, 1e-7). Basic composition charges ``(0.5 k, 1e-7 k)``. Under GDP each
# release is ``mu_0 = gdp_mu(0.5, 1e-7)``-GDP, the ``k`` releases together are
# ``sqrt(k) mu_0``-GDP, and :func:`~skprivreg.accounting.gdp_epsilon` converts
# that back at the same total delta. The ledger does exactly this.
eps0, delta0 = 0.5, 1e-7
ks = np.arange(1, 101)
basic, gdp = [], []
for k in ks:
    events = [gaussian_event(f"release_{i}", 1.0, eps0, delta0) for i in range(k)]
    basic.append(PrivacyLedger(events, composition="basic").epsilon)
    gdp.append(PrivacyLedger(events, composition="gdp").epsilon)

fig, ax = plt.subplots(figsize=(6.5, 4.2))
ax.plot(ks, basic, label="basic: epsilons add")
ax.plot(ks, gdp, label=r"GDP: $\mu = \sqrt{k}\,\mu_0$")
ax.set_xlabel("number of Gaussian releases k, each (0.5, 1e-7)")
ax.set_ylabel(r"total $\varepsilon$ at $\delta = k \cdot 10^{-7}$")
ax.set_title("Composition of Gaussian releases")
ax.legend()
fig.tight_layout()

k = 20
events = [gaussian_event(f"release_{i}", 1.0, eps0, delta0) for i in range(k)]
print(f"{k} releases: basic epsilon = {PrivacyLedger(events).epsilon:.2f}, "
      f"GDP epsilon = {PrivacyLedger(events, composition='gdp').epsilon:.2f}")
print("mu of one release:", round(gdp_mu(eps0, delta0), 4),
      "; of all of them:", round(PrivacyLedger(events).mu, 4),
      "; back to epsilon:", round(gdp_epsilon(PrivacyLedger(events).mu, k * delta0), 3))

# %%
# A ledger is a readable table
# ----------------------------
# Estimators store the ledger of their last fit in ``privacy_spent_``; here is
# one made by hand with three releases, as AdaSSP makes them.
ledger = PrivacyLedger(
    [
        gaussian_event("lambda_min", 1.0, 1 / 3, 1e-6 / 3),
        gaussian_event("XtX", np.sqrt(2), 1 / 3, 1e-6 / 3),
        gaussian_event("XtY", 2.0, 1 / 3, 1e-6 / 3),
    ],
    composition="gdp",
)
print(ledger)

# %%
# How many fits fit in a budget?
# ------------------------------
# A :class:`~skprivreg.accounting.BudgetAccountant` refuses a spend that would
# exceed its budget, *before* any data is touched, and records nothing then.
# With the same ledger per fit, a budget of (4, 1e-4) holds this many fits:
def fits_until_refused(composition):
    accountant = BudgetAccountant(epsilon=4.0, delta=1e-4, composition=composition)
    n_fits = 0
    while True:
        try:
            accountant.spend(ledger)
        except BudgetExceededError:
            return n_fits, accountant
        n_fits += 1


for composition in ("basic", "gdp"):
    n_fits, accountant = fits_until_refused(composition)
    print(f"{composition:>5}: {n_fits:3d} fits; {accountant}")

plt.show()
