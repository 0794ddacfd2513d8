"""Edges of the privacy accounting: deltas below the normal float range, RDP
curves of ledgers whose relations differ, and the reproducible-noise testing
facility seen from concurrent threads."""

import json
import math
import subprocess
import sys
import textwrap
import threading
import warnings

import mpmath
import numpy as np
import pytest

import skprivreg.linear_model._ssp as ssp_module
from skprivreg import PrivacyEvent, PrivacyLedger
from skprivreg._gdp import _log_gdp_delta
from skprivreg.accounting import (
    BudgetAccountant,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    ledger_rdp,
    tnb_gamma_for_mean,
    tnb_mean,
)
from skprivreg.linear_model import SSPRegressor
from skprivreg.testing import noise_is_reproducible, reproducible_noise

TINY_DELTAS = [1e-301, 1e-310, 5e-324]
GRID_DELTAS = [1e-5, 1e-12, 1e-50, 1e-100, 1e-200, 1e-300]


def _exact_log_delta(mu, epsilon):
    """log of the (epsilon, delta) curve of mu-GDP, evaluated independently of
    the package with 80 significant digits beyond those the subtraction cancels:
    delta = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2).

    The floats are converted exactly. The two terms agree to about
    -log10(mu) digits (plus a few), so 80 more leave over 40 after the
    subtraction for every (mu, epsilon) checked here.
    """
    with mpmath.workdps(80 + max(0, math.ceil(-math.log10(mu)))):
        mu, epsilon = mpmath.mpf(mu), mpmath.mpf(epsilon)
        delta = (mpmath.ncdf(-epsilon / mu + mu / 2)
                 - mpmath.exp(epsilon) * mpmath.ncdf(-epsilon / mu - mu / 2))
        return mpmath.log(delta) if delta > 0 else mpmath.mpf("-inf")


def _log(delta):
    """Exact log of a float delta, for comparisons with the oracle."""
    with mpmath.workdps(80):
        return mpmath.log(mpmath.mpf(delta))


def _run(code, timeout=60):
    """Run ``code`` in a fresh interpreter; its last stdout line as JSON.

    A subprocess with a timeout, so that a conversion that never returns
    fails the test instead of hanging the run.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True, text=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not return within {timeout} s")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- Gaussian DP conversions for deltas below the normal float range ----------
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_gdp_mu_returns_a_valid_tight_mu_for_subnormal_deltas(epsilon):
    mus = _run(f"""
        import json
        from skprivreg.accounting import gdp_mu
        print(json.dumps([gdp_mu({epsilon!r}, d) for d in {TINY_DELTAS!r}]))
    """)
    for delta, mu in zip(TINY_DELTAS, mus):
        assert 0 < mu < math.inf
        # Valid, checked in log space (gdp_delta underflows here).
        assert _exact_log_delta(mu, epsilon) <= _log(delta)
        # Tight: a slightly larger mu violates it.
        assert _exact_log_delta(mu * (1 + 1e-9), epsilon) > _log(delta)


@pytest.mark.parametrize("mu", [0.05, 1.0, 3.0])
@pytest.mark.parametrize("delta", TINY_DELTAS)
def test_gdp_epsilon_is_valid_and_tight_for_subnormal_deltas(mu, delta):
    eps = gdp_epsilon(mu, delta)
    assert _exact_log_delta(mu, eps) <= _log(delta)
    assert _exact_log_delta(mu, eps * (1 - 1e-9)) > _log(delta)


# Small epsilon with smaller mu: delta is a tiny fraction of both terms of the
# formula, which then agree to nearly every digit.
@pytest.mark.parametrize("epsilon", [1e-12, 1e-8, 1e-4, 0.1, 1.0, 5.0, 50.0])
@pytest.mark.parametrize("delta", GRID_DELTAS)
def test_gdp_mu_is_valid_and_tight_against_an_exact_oracle(epsilon, delta):
    mu = gdp_mu(epsilon, delta)
    assert 0 < mu < math.inf
    assert _exact_log_delta(mu, epsilon) <= _log(delta)
    assert _exact_log_delta(mu * (1 + 1e-6), epsilon) > _log(delta)


@pytest.mark.parametrize("mu", [1e-10, 1e-6, 1e-3, 0.5, 3.0])
@pytest.mark.parametrize("delta", GRID_DELTAS)
def test_gdp_epsilon_is_valid_and_tight_against_an_exact_oracle(mu, delta):
    eps = gdp_epsilon(mu, delta)
    assert 0 <= eps < math.inf
    assert _exact_log_delta(mu, eps) <= _log(delta)
    if eps > 0:  # else (0, delta)-DP already holds
        assert _exact_log_delta(mu, eps * (1 - 1e-6)) > _log(delta)


@pytest.mark.parametrize("mu", [1e-12, 1e-6, 1e-3, 0.05, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("epsilon", [1e-12, 1e-8, 1e-4, 0.01, 0.5, 2.0, 8.0])
def test_gdp_delta_is_never_below_the_exact_delta_and_close_to_it(mu, epsilon):
    exact = _exact_log_delta(mu, epsilon)
    if exact < _log(1e-300):  # gdp_delta underflows; covered through gdp_mu
        return
    delta = gdp_delta(mu, epsilon)
    assert delta > 0
    assert 0 <= _log(delta) - exact <= 1e-9


# Tiny mu: epsilon / mu is of order 1 at the root, and the solver's bracket
# in epsilon / mu must stay of that order too.
@pytest.mark.parametrize("mu", [1e-300, 1e-299, 1e-222, 1e-150, 1e-99, 1e-50])
@pytest.mark.parametrize("delta", [1e-300, 1e-100, 1e-10])
def test_gdp_epsilon_is_valid_and_tight_for_tiny_mu(mu, delta):
    eps = gdp_epsilon(mu, delta)
    assert 0 <= eps < math.inf
    assert _exact_log_delta(mu, eps) <= _log(delta)
    if eps > 0:  # else (0, delta)-DP already holds
        assert _exact_log_delta(mu, eps * (1 - 1e-9)) > _log(delta)


def _subnormal_points():
    """(mu, epsilon) whose delta lies below the smallest normal float."""
    points = [(0.0007472360136175462, 0.02838973590248597)]
    rng = np.random.default_rng(7)
    for _ in range(40):
        mu = float(10 ** rng.uniform(-8, 1.5))
        target = float(10 ** rng.uniform(-323, -308))
        points.append((mu, gdp_epsilon(mu, target) * float(1 + rng.uniform(-1e-3, 1e-3))))
    return points


def test_gdp_delta_is_never_below_the_exact_delta_among_subnormals():
    for mu, epsilon in _subnormal_points():
        delta = gdp_delta(mu, epsilon)
        with mpmath.workdps(100):
            exact = mpmath.exp(_exact_log_delta(mu, epsilon))
            assert exact < 2.2250738585072014e-308
            assert delta >= exact, (mu, epsilon)
            # Tight: within the bound's relative margin and two float steps.
            assert delta - exact <= 1e-9 * exact + 2 * 5e-324, (mu, epsilon)


def test_gdp_delta_of_a_delta_below_every_float_is_the_smallest_float():
    assert gdp_delta(1.0, 100.0) == 5e-324  # exact delta ~ exp(-5000) > 0
    assert gdp_delta(1.0, math.inf) == 0.0


# Far in the tail (log delta ~ -x^2 / 2 with x = epsilon/mu - mu/2 up to 1e6),
# the round-off of log delta grows with its size; no float delta is this small,
# but gdp_mu and gdp_epsilon solve in log space.
@pytest.mark.parametrize("mu", [1e-8, 1e-6, 1e-4])
@pytest.mark.parametrize("x", [1e3, 1e4, 1e5, 1e6])
def test_log_gdp_delta_is_never_below_the_exact_value_far_in_the_tail(mu, x):
    points = [(mu, mu * (x + mu / 2))]
    if mu == 1e-8 and x == 1e3:
        points.append((1e-8, 0.004641588833612773))
    for m, epsilon in points:
        exact = _exact_log_delta(m, epsilon)
        value = _log_gdp_delta(m, epsilon)
        assert value >= exact, (m, epsilon, value, exact)
        assert value - exact <= 1e-9 + 1e-13 * abs(exact)


def test_gdp_reference_values_are_unchanged():
    assert round(gdp_mu(1.0, 1e-5), 6) == 0.268051
    assert round(gdp_mu(5.0, 1 / 5008**2), 6) == 0.914623


def test_a_fit_with_a_subnormal_delta_returns_or_refuses_before_any_spend():
    result = _run("""
        import json, math, warnings
        import numpy as np
        from skprivreg.accounting import BudgetAccountant
        from skprivreg.linear_model import SSPRegressor
        warnings.simplefilter("ignore")
        rng = np.random.default_rng(0)
        X = rng.uniform(-1, 1, (500, 3)); y = np.clip(X.sum(1), -2, 2)
        out = {}
        for delta in (1e-300, 1e-310, 5e-324):
            acc = BudgetAccountant()
            est = SSPRegressor(epsilon=1.0, delta=delta, x_bound=2, y_bound=2,
                               accountant=acc)
            try:
                est.fit(X, y)
            except ValueError as exc:
                out[repr(delta)] = {"error": str(exc), "n_spends": acc.n_spends}
            else:
                out[repr(delta)] = {
                    "delta": est.privacy_spent_.delta, "epsilon": est.privacy_spent_.epsilon,
                    "finite": bool(np.all(np.isfinite(est.coef_))),
                }
        print(json.dumps(out))
    """, timeout=120)
    fitted = result["1e-300"]  # the smallest delta an estimator takes
    assert "error" not in fitted, fitted
    assert fitted["delta"] <= 1e-300 and fitted["epsilon"] <= 1.0 + 1e-9
    assert fitted["finite"]
    for tiny in ("1e-310", "5e-324"):  # its parts would round to 0: refused, clearly
        assert "delta" in result[tiny]["error"] and "1e-300" in result[tiny]["error"]
        assert result[tiny]["n_spends"] == 0


# -- RDP of a ledger whose relations differ -----------------------------------
def test_ledger_rdp_uses_the_events_as_the_ledger_composes_them():
    gauss = PrivacyEvent("XtX", gdp_epsilon(1.0, 1e-6), 1e-6, neighbouring="add-remove",
                         sensitivity=1.0, sigma=1.0, mu=1.0)
    laplace = PrivacyEvent("bound", 0.1, 0.0)  # replace-one
    ledger = PrivacyLedger([gauss, laplace])
    assert ledger.neighbouring == "replace-one"
    orders = np.array([2.0, 8.0])
    # Under replace-one the add/remove Gaussian release of mu = 1 is one of mu = 2:
    # order 2 gives 2 * 2**2 / 2 = 4, plus min(0.1, 2 * 0.1**2 / 2) = 0.01.
    assert ledger_rdp(ledger, orders)[0] == pytest.approx(4.01)
    expected = PrivacyLedger(list(ledger._converted()))
    np.testing.assert_allclose(ledger_rdp(ledger, orders), ledger_rdp(expected, orders))
    assert ledger.mu == pytest.approx(2.0)


def test_ledger_rdp_keeps_a_common_relation():
    gauss = PrivacyEvent("XtX", gdp_epsilon(1.0, 1e-6), 1e-6, neighbouring="add-remove",
                         sensitivity=1.0, sigma=1.0, mu=1.0)
    laplace = PrivacyEvent("bound", 0.1, 0.0, neighbouring="add-remove")
    ledger = PrivacyLedger([gauss, laplace])
    assert ledger.neighbouring == "add-remove"
    assert ledger_rdp(ledger, [2.0])[0] == pytest.approx(1.01)


# -- The reproducible-noise facility and concurrent threads -------------------
X_RACE = np.random.default_rng(0).uniform(-1, 1, (2000, 3))
Y_RACE = np.clip(X_RACE.sum(1), -2, 2)


def _ssp(**kwargs):
    return SSPRegressor(epsilon=1.0, x_bound=2, y_bound=2, random_state=42, **kwargs)


def test_a_fit_in_another_thread_keeps_os_entropy_while_a_block_is_active(monkeypatch):
    """A fit creates its generators while another thread is inside the block,
    and spends after that thread left it: its noise is fresh and it is
    marked publishable (it was seeded reproducibly yet marked publishable)."""
    seeded = threading.Event()
    block_left = threading.Event()
    original = ssp_module.gram_statistics

    def gram_statistics(*args, **kwargs):  # runs after _secret_rngs, before any draw
        if threading.current_thread().name == "production":
            seeded.set()
            assert block_left.wait(30)
        return original(*args, **kwargs)

    monkeypatch.setattr(ssp_module, "gram_statistics", gram_statistics)
    result = {}

    def production():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result["est"] = _ssp().fit(X_RACE, Y_RACE)

    def testing():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with reproducible_noise(0):
                result["inside"] = seeded.wait(30)
        block_left.set()

    threads = [threading.Thread(target=testing),
               threading.Thread(target=production, name="production")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert result["inside"] and "est" in result
    monkeypatch.setattr(ssp_module, "gram_statistics", original)

    est = result["est"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(0):
            replay = _ssp().fit(X_RACE, Y_RACE)
    assert replay.noise_reproducible_
    assert not est.noise_reproducible_ and est.privacy_spent_.for_publication
    # Its noise is not the one the facility's seed reproduces.
    assert not np.allclose(est.coef_, replay.coef_)


def test_the_mark_is_decided_when_the_generators_are_created(monkeypatch):
    """Generators seeded inside the block, spend recorded after it was left
    (same thread): the fit is marked reproducible."""
    block = reproducible_noise(0)
    original = ssp_module.gram_statistics

    def gram_statistics(*args, **kwargs):  # after _secret_rngs, before the spend
        block.__exit__(None, None, None)
        return original(*args, **kwargs)

    monkeypatch.setattr(ssp_module, "gram_statistics", gram_statistics)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        block.__enter__()
        est = _ssp(accountant=acc).fit(X_RACE, Y_RACE)
    assert not noise_is_reproducible()
    assert est.noise_reproducible_ and not est.privacy_spent_.for_publication
    monkeypatch.setattr(ssp_module, "gram_statistics", original)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(0):
            replay = _ssp().fit(X_RACE, Y_RACE)
    np.testing.assert_allclose(est.coef_, replay.coef_)


def test_the_block_is_local_to_the_thread_that_entered_it():
    seen = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(3):
            worker = threading.Thread(target=lambda: seen.update(worker=noise_is_reproducible()))
            worker.start()
            worker.join()
            seen["caller"] = noise_is_reproducible()
    assert seen == {"caller": True, "worker": False}
    assert not noise_is_reproducible()


def test_fits_whose_pass_is_threaded_stay_reproducible_inside_the_block():
    """The statistics pass of a large fit runs on pool threads; the secret
    generators are created on the calling thread, so the block still fixes
    the noise."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (80_000, 4))
    y = np.clip(X.sum(1), -2, 2)
    coefs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            with reproducible_noise(5):
                est = _ssp().fit(X, y)
            assert est.noise_reproducible_
            coefs.append(est.coef_)
    np.testing.assert_array_equal(coefs[0], coefs[1])


# -- Truncated negative binomial repetitions ----------------------------------
def _exact_tnb_mean(eta, gamma):
    with mpmath.workdps(60):
        eta, gamma = mpmath.mpf(eta), mpmath.mpf(gamma)
        if eta == 0:
            return (1 / gamma - 1) / mpmath.log(1 / gamma)
        return eta * (1 - gamma) / (gamma * (1 - gamma**eta))


@pytest.mark.parametrize("gamma", [1e-10, 0.1, 0.5, 1 - 1e-6])
def test_tnb_mean_is_accurate_and_continuous_across_eta_zero(gamma):
    for eta in [-1e-8, 0.0, 1e-8, -1e-4, 1e-4, 1.0]:
        assert tnb_mean(eta, gamma) == pytest.approx(float(_exact_tnb_mean(eta, gamma)),
                                                     rel=1e-13)
    # E[K] moves by about |eta| log(1/gamma) / 2 relative to eta = 0.
    at_zero = tnb_mean(0.0, gamma)
    for eta in [-1e-8, 1e-8, 1e-4]:
        assert abs(tnb_mean(eta, gamma) / at_zero - 1) <= abs(eta) * math.log(1 / gamma)


@pytest.mark.parametrize("eta", [-0.9, -0.5, -1e-6, 0.0, 1e-6, 1e-4, 1.0, 3.0])
@pytest.mark.parametrize("mean", [1.5, 10.0, 100.0, 1e11])
def test_tnb_gamma_for_mean_gives_the_mean(eta, mean):
    gamma = tnb_gamma_for_mean(eta, mean)
    assert 0 < gamma < 1
    assert float(_exact_tnb_mean(eta, gamma)) == pytest.approx(mean, rel=1e-12)


def test_tnb_gamma_for_mean_refuses_a_mean_no_gamma_gives():
    # For eta < 0, E[K] grows only as gamma^-(1 + eta) as gamma tends to 0.
    with pytest.raises(ValueError, match=r"n_repetitions.*eta=-0\.999"):
        tnb_gamma_for_mean(-0.999, 100)


# -- the budget check holds the budget for the fit ------------------------------
def test_a_fit_whose_check_passed_holds_its_budget_against_a_concurrent_fit(monkeypatch):
    # Two fits share an accountant that fits one. The first passes its check and
    # reads the data; the second, checked meanwhile, is refused before reading.
    import threading

    import skprivreg.linear_model._ssp as ssp_module
    from skprivreg import BudgetAccountant, BudgetExceededError, SSPRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = X.sum(axis=1)
    acc = BudgetAccountant(epsilon=1.5, delta=1e-3)
    inside, second_done = threading.Event(), threading.Event()
    original, reads = ssp_module.gram_statistics, []

    def reading(*args, **kwargs):
        reads.append(threading.current_thread().name)
        inside.set()
        second_done.wait(30)  # the second fit checks while the first holds its budget
        return original(*args, **kwargs)

    monkeypatch.setattr(ssp_module, "gram_statistics", reading)
    outcome = {}

    def first():
        SSPRegressor(epsilon=1.0, x_bound=3.0, y_bound=5.0, accountant=acc).fit(X, y)
        outcome["first"] = "ok"

    thread = threading.Thread(target=first, name="first")
    thread.start()
    assert inside.wait(30)
    with pytest.raises(BudgetExceededError):
        SSPRegressor(epsilon=1.0, x_bound=3.0, y_bound=5.0, accountant=acc).fit(X, y)
    second_done.set()
    thread.join(30)
    assert outcome == {"first": "ok"} and reads == ["first"] and acc.n_spends == 1


def test_a_fit_refused_after_its_check_gives_its_budget_back():
    from skprivreg import BudgetAccountant, ReuseCovRegressor, SSPRegressor

    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 3))
    y = X.sum(axis=1)
    acc = BudgetAccountant(epsilon=1.0, delta=1e-3)
    X_nan = X.copy()
    X_nan[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SSPRegressor(epsilon=1.0, x_bound=3.0, y_bound=5.0, accountant=acc).fit(X_nan, y)
    assert acc.n_spends == 0
    SSPRegressor(epsilon=1.0, x_bound=3.0, y_bound=5.0, accountant=acc).fit(X, y)
    assert acc.n_spends == 1
    # add_outcomes too: a refused batch gives back what its check held
    acc = BudgetAccountant(epsilon=2.0, delta=1e-3)
    est = ReuseCovRegressor(epsilon=1.0, x_bound=3.0, y_bound=5.0, accountant=acc)
    est.fit(X, np.column_stack([y, y]))
    Y_nan = np.column_stack([y, y])
    Y_nan[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.add_outcomes(X, Y_nan, epsilon=1.0, delta=1e-6)
    est.add_outcomes(X, np.column_stack([y, y]), epsilon=1.0, delta=1e-6)
    assert acc.n_spends == 2


def test_composed_totals_keep_the_reproducible_noise_mark():
    # A pipeline's or an accountant's total of a ledger fitted with the testing
    # facility's noise must not read as publishable.
    from skprivreg.accounting import BudgetAccountant, PrivacyEvent, PrivacyLedger, compose_ledgers

    marked = PrivacyLedger([PrivacyEvent("a", 1.0, 1e-6)])
    marked.for_publication = False
    plain = PrivacyLedger([PrivacyEvent("b", 0.5, 1e-6)])
    assert compose_ledgers([plain]).for_publication
    total = compose_ledgers([plain, marked])
    assert not total.for_publication and "NOT for publication" in str(total)
    assert not marked.guarantee.for_publication
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    acc.spend(plain)
    assert acc.total().for_publication
    acc.spend(marked)
    assert not acc.total().for_publication
    eps, delta = acc.total()  # still unpacks as (epsilon, delta)
    assert eps == 1.5


def _exact_log_gdp_delta(mu, epsilon):
    with mpmath.workdps(80):
        m, e = mpmath.mpf(mu), mpmath.mpf(epsilon)
        la = mpmath.log(mpmath.ncdf(-e / m + m / 2))
        lb = e + mpmath.log(mpmath.ncdf(-e / m - m / 2))
        return la + mpmath.log(-mpmath.expm1(lb - la))


@pytest.mark.parametrize("mu", [10**8.5, 1e12])
def test_log_gdp_delta_covers_the_rounding_of_its_arguments(mu):
    """Near epsilon = mu^2/2 the arguments -epsilon/mu +- mu/2 cancel and their
    rounding (a unit in the last place of mu) moves log delta by far more than
    the logs' own round-off: the bound must cover it, and gdp_epsilon must then
    return an epsilon whose exact delta is within the target."""
    for t in (1.0, 3.0, 5.0, 8.0):
        for k in range(-6, 7, 3):
            epsilon = mu * (mu / 2 + t) * (1 + k * 2.0**-52)
            assert _log_gdp_delta(mu, epsilon) >= _exact_log_gdp_delta(mu, epsilon)
    epsilon = gdp_epsilon(mu, 1e-3)
    assert _exact_log_gdp_delta(mu, epsilon) <= math.log(1e-3)


@pytest.mark.parametrize("epsilon", [1e4, 1e8, 1e14])
def test_gdp_mu_stays_tight_at_large_epsilon(epsilon):
    """The rounding allowance is relative to the value's own slope: at large
    epsilon the returned mu is valid and within 1e-6 of the largest valid one
    (an allowance from a global slope bound once returned mu = 24.5 for 14,138)."""
    mu = gdp_mu(epsilon, 1e-5)
    assert _exact_log_gdp_delta(mu, epsilon) <= math.log(1e-5)
    assert _exact_log_gdp_delta(mu * (1 + 1e-6), epsilon) > math.log(1e-5)


def test_the_budget_slack_is_not_granted_twice_by_an_amended_ledger():
    """A spend may fill the budget up to a relative 1e-9 (float totals); an amended
    ledger restates its plan within 1e-12 only: with 1e-9 there too, a plan at the
    budget's edge was amended to 2e-9 above the budget."""
    from skprivreg import BudgetAccountant
    from skprivreg.accounting import PrivacyEvent, PrivacyLedger

    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    planned = PrivacyLedger([PrivacyEvent("release", 1.0 + 9e-10, 1e-6)])
    acc.spend(planned)  # within the documented slack
    above = PrivacyLedger([PrivacyEvent("release", (1.0 + 9e-10) * (1 + 9e-10), 1e-6)])
    with pytest.raises(ValueError):
        acc._amend(planned, above)
    restated = PrivacyLedger([PrivacyEvent("release", (1.0 + 9e-10) * (1 + 1e-15), 1e-6)])
    acc._amend(planned, restated)
    assert acc.total().epsilon <= 1.0 * (1 + 1e-9)


def test_subsample_budget_rounds_the_safe_way():
    """The amplified guarantee of the returned (eps_1, delta_1), computed exactly,
    never exceeds the target (rounded to nearest, half of the cases were above
    by an ulp or so)."""
    import mpmath

    from skprivreg.accounting import subsample_budget

    mpmath.mp.prec = 200
    rng = np.random.default_rng(7)
    for _ in range(3000):
        eps = float(10.0 ** rng.uniform(-4, 1.5))
        q = float(10.0 ** rng.uniform(-3, 0))
        delta = float(10.0 ** rng.uniform(-12, -4)) * q
        eps_1, delta_1 = subsample_budget(eps, delta, q)
        whole = mpmath.log1p(mpmath.mpf(q) * mpmath.expm1(mpmath.mpf(eps_1)))
        assert whole <= mpmath.mpf(eps), (eps, q)
        assert mpmath.mpf(q) * mpmath.mpf(delta_1) <= mpmath.mpf(delta)
        assert eps_1 > eps  # amplification still buys budget
    eps_1, _ = subsample_budget(700.0, 1e-6, 1e-5)  # expm1(700) / q overflowed
    whole = mpmath.log1p(mpmath.mpf(1e-5) * mpmath.expm1(mpmath.mpf(eps_1)))
    assert math.isfinite(eps_1) and 700.0 < eps_1 and whole <= 700


def test_gdp_epsilon_at_an_extreme_mu_returns_a_valid_epsilon():
    """Round-off left no sign change in the bracket (mu = 1e12, delta = 1e-300) and
    Brent's method raised; an end of the bracket is taken and stepped to validity."""
    from skprivreg.accounting import gdp_delta, gdp_epsilon

    for mu, delta in [(1e12, 1e-300), (1e12, 1e-5), (1e8, 1e-300)]:
        eps = gdp_epsilon(mu, delta)
        assert math.isfinite(eps) and gdp_delta(mu, eps) <= delta


def test_group_privacy_delta_is_never_below_the_exact_conversion():
    # (1 + e^eps) delta was rounded to nearest (below the exact value about half the
    # time) and e^eps was capped at e^700 (a delta of 1e-16 where 1 is exact).
    from skprivreg.accounting import group_privacy

    rng = np.random.default_rng(0)
    for _ in range(2000):
        eps, delta = float(rng.uniform(0.0, 20.0)), float(10 ** rng.uniform(-12, -1))
        got_eps, got_delta = group_privacy(eps, delta)
        with mpmath.workdps(60):
            exact = (1 + mpmath.exp(mpmath.mpf(eps))) * mpmath.mpf(delta)
            assert got_eps == 2 * eps
            assert mpmath.mpf(got_delta) >= min(exact, 1)
    assert group_privacy(800.0, 1e-320) == (1600.0, 1.0)
    assert group_privacy(3.0, 0.0) == (6.0, 0.0)


def test_a_declared_delta_below_its_events_deltas_is_not_reported():
    from skprivreg.accounting import PrivacyEvent, PrivacyLedger

    ledger = PrivacyLedger([PrivacyEvent("x", 0.5, 1e-3)], delta=1e-9)
    assert ledger.delta >= 1e-3
    gdp = PrivacyLedger([PrivacyEvent("x", 0.5, 1e-3)], delta=1e-9, composition="gdp")
    assert gdp.delta >= 1e-3


def test_long_doubles_are_taken_exactly():
    from fractions import Fraction

    from skprivreg.mechanisms import exact_fraction, quotient_at_least, value_at_least

    x = np.longdouble(1) + np.longdouble(2) ** -60
    if x == 1:
        pytest.skip("np.longdouble is float64 here")
    assert exact_fraction(x) == 1 + Fraction(1, 2**60)
    assert value_at_least(x) > 1.0 and quotient_at_least(x, 1) > 1.0
    with pytest.raises(ValueError, match="finite"):
        exact_fraction(np.longdouble("inf"))


def test_renyi_curves_and_their_conversion_are_never_below_the_exact_values():
    # laplace_rdp cancelled at small epsilon (-5.6e-16 at order 1.05 for eps = 1e-8);
    # rdp_to_dp and the Gaussian curve rounded to nearest.
    from skprivreg.accounting import RDP_ORDERS, gaussian_rdp, laplace_rdp, rdp_to_dp

    orders = np.asarray(RDP_ORDERS, dtype=float)
    rng = np.random.default_rng(1)
    for eps in [1e-8, 1e-5, *rng.uniform(0.001, 5.0, size=40)]:
        got = laplace_rdp(eps)
        with mpmath.workdps(60):
            for lam, value in zip(orders, got):
                lam_, e = mpmath.mpf(float(lam)), mpmath.mpf(float(eps))
                exact = mpmath.log(lam_ / (2 * lam_ - 1) * mpmath.exp((lam_ - 1) * e)
                                   + (lam_ - 1) / (2 * lam_ - 1) * mpmath.exp(-lam_ * e)
                                   ) / (lam_ - 1)
                assert mpmath.mpf(float(value)) >= exact
    for mu in rng.uniform(0.01, 3.0, size=300):
        curve = gaussian_rdp(mu)
        delta = float(10 ** rng.uniform(-10, -3))
        got = rdp_to_dp(curve, delta)
        with mpmath.workdps(60):
            # the conversion of the curve as given (its own rounding is checked below)
            exact = min(mpmath.mpf(float(value))
                        + mpmath.log1p(-1 / mpmath.mpf(float(lam)))
                        - (mpmath.log(delta) + mpmath.log(mpmath.mpf(float(lam))))
                        / (mpmath.mpf(float(lam)) - 1) for lam, value in zip(orders, curve))
            assert mpmath.mpf(got) >= max(exact, 0)
            for lam, value in zip(orders, curve):
                assert mpmath.mpf(float(value)) >= (mpmath.mpf(float(lam))
                                                    * mpmath.mpf(float(mu)) ** 2 / 2)


def test_subsampled_guarantee_is_never_below_the_exact_value():
    from skprivreg.accounting import subsampled_guarantee

    rng = np.random.default_rng(2)
    for _ in range(500):
        eps, q = float(rng.uniform(0.0, 5.0)), float(rng.uniform(0.001, 1.0))
        delta = float(10 ** rng.uniform(-12, -2))
        got, got_delta = subsampled_guarantee(eps, delta, q)
        with mpmath.workdps(60):
            exact = mpmath.log(1 + q * (mpmath.exp(mpmath.mpf(eps)) - 1))
            assert mpmath.mpf(got) >= exact
            assert mpmath.mpf(got_delta) >= mpmath.mpf(q) * mpmath.mpf(delta)
    big, _ = subsampled_guarantee(710.0, 1e-6, 0.5)  # it overflowed
    assert 709.3 < big < 710.0
    for _ in range(300):  # above 700 the sum cancels for a tiny q
        eps, q = float(rng.uniform(700.5, 720.0)), float(10 ** rng.uniform(-308, -1))
        got, _ = subsampled_guarantee(eps, 1e-6, q)
        with mpmath.workdps(80):
            exact = mpmath.log(1 + q * (mpmath.exp(mpmath.mpf(eps)) - 1))
            assert mpmath.mpf(got) >= exact


def test_group_privacy_above_epsilon_709_is_not_below_exact_nor_vacuous():
    from skprivreg.accounting import group_privacy

    for eps, delta in [(709.5, 1e-320), (720.0, 1e-320), (800.0, 1e-320), (710.0, 1e-300)]:
        got = group_privacy(eps, delta)[1]
        with mpmath.workdps(60):
            exact = min((1 + mpmath.exp(mpmath.mpf(eps))) * mpmath.mpf(delta), 1)
            assert mpmath.mpf(got) >= exact
            assert mpmath.mpf(got) <= exact * (1 + mpmath.mpf("1e-10")) or got == 1.0
    assert group_privacy(709.5, 1e-320)[1] < 1e-10


def test_ledger_renyi_curve_of_many_pure_releases_is_not_below_the_exact_sum():
    from fractions import Fraction

    from skprivreg.accounting import RDP_ORDERS, PrivacyEvent, PrivacyLedger
    from skprivreg.accounting import ledger_rdp as curve_of

    rng = np.random.default_rng(4)
    orders = np.asarray(RDP_ORDERS, dtype=float)
    for _ in range(300):
        epsilons = rng.uniform(0.001, 2.0, size=5)
        ledger = PrivacyLedger([PrivacyEvent(f"e{i}", float(e), 0.0)
                                for i, e in enumerate(epsilons)])
        got = curve_of(ledger)
        for lam, value in zip(orders, got):
            exact = sum(min(Fraction(float(e)), Fraction(float(lam)) * Fraction(float(e)) ** 2 / 2)
                        for e in epsilons)
            assert Fraction(float(value)) >= exact


def test_printed_guarantees_never_read_below_the_guarantee():
    from skprivreg.accounting import Guarantee, PrivacyEvent, PrivacyLedger, text_at_least

    assert str(Guarantee(1.0000004, 1.2349e-6)).startswith("(1.00001, 1.24e-06)-DP")
    ledger = PrivacyLedger([PrivacyEvent("x", 1.00004, 1.4e-6)])
    assert "1.001" in repr(ledger) and "1.4e-06" in repr(ledger)
    # A declared 1e-05 or 0.1 (floats a hair above the decimal) prints as declared.
    assert text_at_least(1e-5, 3) == "1e-05" and text_at_least(0.1, 6) == "0.1"
    rng = np.random.default_rng(3)
    for value in 10 ** rng.uniform(-300, 300, size=500):
        for digits in (2, 3, 4, 6):
            text = text_at_least(value, digits)
            assert float(text) >= value  # reads back at least the value
            assert len(text.split("e")[0].replace(".", "").lstrip("0")) <= digits
