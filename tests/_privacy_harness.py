"""Shared pieces of the privacy-integrity tests.

- statistical checks whose tolerances are derived from the sampling
  distribution (stated below), with a false-failure probability of at most
  ``2 * P_FALSE`` per check;
- the exact (clipped, intercept-augmented) statistics an estimator should
  have perturbed, computed here without the package's code;
- the exact output distribution of AboveThreshold (Dwork & Roth 2014,
  Algorithm 1), computed by quadrature from the algorithm's definition;
- small capture helpers for ``monkeypatch``.

Nothing here relies on seeds: the package draws its noise from fresh entropy,
so every check is a statement about a distribution, not about fixed numbers.
"""

import math
import warnings
from contextlib import contextmanager

import numpy as np
from scipy import stats

# Two-sided false-failure probability of each check is at most 2 * P_FALSE.
P_FALSE = 1e-9


@contextmanager
def quiet():
    """Ignore warnings (clipping, plan and leak warnings are not under test here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ---------------------------------------------------------------------------
# Statistical checks
# ---------------------------------------------------------------------------
def chi2_interval(n_dof, p=P_FALSE):
    """``[chi2.ppf(p, N), chi2.isf(p, N)] / N``: acceptance interval of a mean square.

    For ``N`` i.i.d. ``N(0, sigma^2)`` entries ``e``, ``sum(e^2) / sigma^2`` is
    chi-square with ``N`` degrees of freedom, so the ratio
    ``mean(e^2) / sigma^2`` lies in this interval except with probability
    ``2 p``. For large ``N`` the interval is about ``1 +- z sqrt(2/N)`` with
    ``z = Phi^{-1}(1 - p) = 6.0`` at ``p = 1e-9``: the "6 sd" rule with the
    chi-square's skew accounted for exactly.
    """
    return stats.chi2.ppf(p, n_dof) / n_dof, stats.chi2.isf(p, n_dof) / n_dof


def assert_gaussian_noise(noise, sigma, what):
    """Entries of ``noise`` behave as i.i.d. ``N(0, sigma^2)`` (mean and mean square).

    Mean square: ``mean(e^2)/sigma^2`` must lie in :func:`chi2_interval`.
    Mean: ``sum(e)/(sigma sqrt(N))`` is standard normal; ``|z| <= 6.11``
    (``2 Phi(-6.11) = 1e-9``). Power: the helper refuses sample sizes at which
    a noise drawn at half the recorded sigma (ratio 0.25) or at sqrt(2) times
    less (ratio 0.5) could pass, and a missing noise (ratio 0) never passes.
    """
    noise = np.asarray(noise, dtype=np.float64).ravel()
    n = noise.size
    assert sigma > 0, f"{what}: the ledger records no noise (sigma={sigma})"
    low, high = chi2_interval(n)
    assert low > 0.4 and high < 2.5, f"{what}: N={n} entries are too few to have power"
    ratio = float(np.mean(noise**2)) / sigma**2
    assert low <= ratio <= high, (
        f"{what}: empirical variance / ledger sigma^2 = {ratio:.4f} over N={n} entries; "
        f"expected in [{low:.4f}, {high:.4f}] (chi-square, p={P_FALSE:g} per side)"
    )
    z = float(np.sum(noise)) / (sigma * math.sqrt(n))
    assert abs(z) <= stats.norm.isf(P_FALSE / 2), f"{what}: noise mean z-score {z:.2f}"
    return ratio


def assert_matches_distribution(samples, probs, what, min_expected=5.0):
    """Integer ``samples`` follow the exact law ``probs`` (one exact binomial test per cell).

    ``probs[i]`` is the exact probability of outcome ``i``. Outcomes with an
    expected count below ``min_expected`` are pooled into one cell. The
    count ``O_c`` of each of the ``K`` cells is Binomial(N, p_c) under the
    law, so ``binom.ppf(a, N, p_c) <= O_c <= binom.isf(a, N, p_c)`` with
    ``a = P_FALSE / K`` fails with probability at most ``2 P_FALSE`` over all
    cells (union bound; exact, no chi-square approximation in the far tail).
    A point mass (a release computed without noise) or a changed noise scale
    moves some cell far outside.
    """
    samples = np.asarray(samples)
    probs = np.asarray(probs, dtype=np.float64)
    n = samples.size
    observed = np.bincount(samples, minlength=probs.size).astype(np.float64)
    assert observed.size == probs.size, f"{what}: an outcome outside the support"
    small = n * probs < min_expected
    cells_obs = [*observed[~small], observed[small].sum()]
    cells_p = [*probs[~small], probs[small].sum()]
    assert len(cells_p) >= 3, f"{what}: the exact law is (almost) a point mass"
    a = P_FALSE / len(cells_p)
    for o, p in zip(cells_obs, cells_p):
        low, high = stats.binom.ppf(a, n, p), stats.binom.isf(a, n, p)
        assert low <= o <= high, (
            f"{what}: a cell of probability {p:.4f} has {int(o)} of {n} draws, outside "
            f"[{low:.0f}, {high:.0f}]; observed {observed.astype(int).tolist()} vs "
            f"expected {np.round(n * probs, 1).tolist()}"
        )


def assert_fair_signs(values, what):
    """The signs of ``values`` are fair coins: ``#{v > 0} ~ Binomial(N, 1/2)``.

    Exact two-sided binomial bounds at ``P_FALSE`` per side. For products
    ``w_1 w_2`` of independent symmetric weights the sign is a fair coin; a
    weight shared by the two (``w_1 = w_2``) makes every product positive.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    n = values.size
    positive = int(np.sum(values > 0))
    low, high = stats.binom.ppf(P_FALSE, n, 0.5), stats.binom.isf(P_FALSE, n, 0.5)
    assert low <= positive <= high, f"{what}: {positive} of {n} positive, outside [{low}, {high}]"


# ---------------------------------------------------------------------------
# Exact statistics (independent of the package's code)
# ---------------------------------------------------------------------------
def clip_rows(X, bound):
    """Rows scaled to L2 norm at most ``bound``."""
    X = np.asarray(X, dtype=np.float64)
    if bound is None:
        return X.copy()
    norms = np.linalg.norm(X, axis=1)
    return X * np.minimum(1.0, bound / np.maximum(norms, 1e-300))[:, None]


def augmented(X, intercept_scaling):
    """``[X, c 1]`` (no column when ``intercept_scaling`` is None)."""
    if intercept_scaling is None:
        return np.asarray(X, dtype=np.float64)
    return np.hstack([X, np.full((X.shape[0], 1), float(intercept_scaling))])


def exact_gram_and_cross(X, Y, x_bound, y_bound, intercept_scaling=1.0):
    """``(Z^T Z, Z^T Y)`` of the clipped, intercept-augmented data."""
    Z = augmented(clip_rows(X, x_bound), intercept_scaling)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if y_bound is not None:
        Y = np.clip(Y, -y_bound, y_bound)
    return Z.T @ Z, Z.T @ Y


def upper_triangle(M):
    """Entries on and above the diagonal (the independent entries of symmetric noise)."""
    M = np.asarray(M)
    i, j = np.triu_indices(M.shape[-1])
    return M[..., i, j]


def event(ledger, name):
    """The one event called ``name`` in ``ledger``."""
    found = [e for e in ledger.events if e.name == name]
    assert len(found) == 1, f"ledger has {[e.name for e in ledger.events]}, not one {name!r}"
    return found[0]


# ---------------------------------------------------------------------------
# AboveThreshold, exactly
# ---------------------------------------------------------------------------
def _laplace_survival(t, scale):
    """``P(Lap(0, scale) >= t)``."""
    t = np.asarray(t, dtype=np.float64)
    half_tail = 0.5 * np.exp(-np.abs(t) / scale)
    return np.where(t >= 0, half_tail, 1.0 - half_tail)


def above_threshold_distribution(queries, threshold, epsilon, grid=40_001):
    """Exact law of AboveThreshold's index (last entry: no query stops it).

    Dwork & Roth (2014), Algorithm 1: ``rho ~ Lap(2/eps)`` once, ``nu_i ~
    Lap(4/eps)`` per query, output the first ``i`` with
    ``q_i + nu_i >= T + rho``. Given ``rho = r`` the queries stop
    independently with ``p_i(r) = P(nu >= T + r - q_i)``, so

        P(I = i) = E_rho[ prod_{j<i} (1 - p_j(rho)) p_i(rho) ],

    integrated here by the trapezoid rule on ``[-60, 60] * 2/eps`` (the
    Laplace tail beyond holds ``e^-60`` of the mass; ``grid`` points make the
    quadrature error far below what the tests can resolve).
    """
    queries = np.asarray(queries, dtype=np.float64)
    b_rho, b_nu = 2.0 / epsilon, 4.0 / epsilon
    r = np.linspace(-60 * b_rho, 60 * b_rho, grid)
    # Put a grid point on the density's kink at 0 (grid is odd, symmetric).
    weight = np.exp(-np.abs(r) / b_rho) / (2 * b_rho)
    weight = weight * np.gradient(r)  # trapezoid-like cell widths
    weight[0] *= 0.5
    weight[-1] *= 0.5
    survive = np.ones_like(r)
    probs = np.empty(queries.size + 1)
    for i, q in enumerate(queries):
        p = _laplace_survival(threshold + r - q, b_nu)
        probs[i] = float(np.sum(weight * survive * p))
        survive *= 1.0 - p
    probs[-1] = float(np.sum(weight * survive))
    total = probs.sum()
    assert abs(total - 1.0) < 1e-6, total
    return probs / total


def bins_index(values, bins):
    """Index of each released bound among the public candidate ``bins``."""
    values = np.asarray(values, dtype=np.float64)
    index = np.searchsorted(bins, values)
    assert np.allclose(bins[np.minimum(index, bins.size - 1)], values, rtol=1e-12), (
        "released bound is not a public candidate"
    )
    return index


# ---------------------------------------------------------------------------
# Ledgers
# ---------------------------------------------------------------------------
EVENT_FIELDS = ("name", "notion", "neighbouring", "epsilon", "delta", "mu", "sigma", "sensitivity")


def _same_number(a, b):
    if a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def assert_same_ledger(received, recorded, what):
    """Event by event: the ledger the accountant received equals ``privacy_spent_``."""
    got = [tuple(getattr(e, f, None) for f in EVENT_FIELDS) for e in received.events]
    want = [tuple(getattr(e, f, None) for f in EVENT_FIELDS) for e in recorded.events]
    assert len(got) == len(want), f"{what}: accountant got {got}, privacy_spent_ has {want}"
    for g, w in zip(got, want):
        for field, a, b in zip(EVENT_FIELDS, g, w):
            assert _same_number(a, b), (
                f"{what}: event {w[0]!r} field {field}: accountant {a!r} vs "
                f"privacy_spent_ {b!r}"
            )
    assert received.composition == recorded.composition, what
    assert _same_number(received.epsilon, recorded.epsilon), what
    assert _same_number(received.delta, recorded.delta), what


# ---------------------------------------------------------------------------
# What a fitted estimator holds
# ---------------------------------------------------------------------------
_RANDOM_TYPES = (np.random.Generator, np.random.RandomState, np.random.SeedSequence,
                 np.random.BitGenerator)


def random_objects(obj, path="est", seen=None):
    """Paths of every generator-like object reachable from ``obj``.

    Follows ``__dict__``, ``get_params(deep=True)``, dicts, lists and tuples;
    arrays, strings and numbers are leaves. A fitted estimator must hold none:
    a stored generator (even a public one) is state the guarantee does not
    describe.
    """
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (np.ndarray, str, bytes, int, float)):
        return []
    seen.add(id(obj))
    if isinstance(obj, _RANDOM_TYPES) or type(obj).__name__ == "SpendFirstGenerator":
        return [path]
    children = []
    if isinstance(obj, dict):
        children = [(f"{path}[{key!r}]", value) for key, value in obj.items()]
    elif isinstance(obj, (list, tuple)):
        children = [(f"{path}[{i}]", value) for i, value in enumerate(obj)]
    else:
        if hasattr(obj, "__dict__") and not isinstance(obj, type):
            children += [(f"{path}.{key}", value) for key, value in vars(obj).items()]
        if hasattr(obj, "get_params") and not isinstance(obj, type):
            children += [(f"{path}.get_params()[{key!r}]", value)
                         for key, value in obj.get_params(deep=True).items()]
    found = []
    for child_path, child in children:
        found += random_objects(child, child_path, seen)
    return found


def capture_reusecov(monkeypatch):
    """Record ReuseCov's released covariance (with its ridge) and association at the
    solve, which then returns zeros (the released values are what the tests check)."""
    import skprivreg.linear_model._reusecov_fit as reusecov_fit
    import skprivreg.linear_model._reusecov_release as reusecov_release

    record = {"M": [], "G": []}

    def psd_factor(M, ridge, noisy, psd="clip"):
        record["M"].append((np.array(M), ridge))
        return np.eye(M.shape[0]), np.ones(M.shape[0])

    def apply_factor(eigvecs, inv_eigvals, G):
        record["G"].append(np.array(G))
        return np.zeros_like(G)

    monkeypatch.setattr(reusecov_fit, "psd_factor", psd_factor)
    monkeypatch.setattr(reusecov_release, "apply_factor", apply_factor)
    return record


def capture_linear(X, y, **params):
    """``(estimator, [(name, noisy value, event), ...])`` of one LinearRegression fit with
    reproducible noise (seed 3), in release order."""
    import skprivreg.linear_model._linear as lin
    from skprivreg.linear_model import LinearRegression
    from skprivreg.testing import reproducible_noise

    captured = []
    lin._CAPTURE = captured
    try:
        with quiet(), reproducible_noise(seed=3):
            est = LinearRegression(random_state=7, **params).fit(X, y)
    finally:
        lin._CAPTURE = None
    return est, captured


def three_high_leverage_rows(k=20, n=4000, p=3, seed=0):
    """``(X, y, L0)``: Gaussian rows plus three rows that ISSP's leverage filter removes
    at level ``k/2`` (their leverage sits midway between two thresholds), for
    ``_issp_core`` with ``k`` levels and base bound ``L0``."""
    from skprivreg.linear_model._issp_filters import leverage_bound_for_base, leverage_thresholds

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    h_bulk = np.max(np.einsum("ij,ij->i", X @ np.linalg.inv(X.T @ X), X))
    L0 = leverage_bound_for_base(1.2 * h_bulk, k)
    L = leverage_thresholds(L0, k)
    target = 0.5 * (L[k // 2] + L[k // 2 + 1])
    r = np.sqrt(target * (X.T @ X)[0, 0] / (1 - target))
    for i in range(3):
        X[i] = 0.0
        X[i, 0] = r * (1 + 0.001 * i)
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.standard_normal(n)
    return X, y, L0


# ---------------------------------------------------------------------------
# Data of the all-estimator checks (fixed data; the noise stays fresh)
# ---------------------------------------------------------------------------
def regression_data(n=6000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    return X, X @ np.arange(1.0, d + 1) + 0.5 * rng.normal(size=n)


def multi_output_data():
    X, y = regression_data()
    return X, np.stack([y, -y, 0.5 * y], axis=1)


def sparse_support_data():
    # tests/feature_selection/test_contract.py: a stable LARS support {0, 1, 2}
    # under sampling='partition' at epsilon=2 (30,000 rows, 8 columns).
    rng = np.random.default_rng(2013)
    n, p = 30_000, 8
    X = rng.normal(size=(n, p))
    return X, 1.0 + X[:, :3] @ np.array([0.5, -0.5, 0.5]) + rng.normal(size=n)


def lba_data():
    # tests/test_privacy_integrity.py: weighted LBA needs many rows per bag.
    rng = np.random.default_rng(0)
    return rng.normal(size=(60_000, 1)), rng.uniform(0, 1, 60_000)


def issp_pass_data():
    # tests/linear_model/test_issp_contract.py: the smallest size at which the
    # planner predicts a PASS at d=1, epsilon=4, delta=1e-6 (a fit takes ~0.2 s).
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500_000, 1))
    return X, 2.0 * X[:, 0] + 0.5 + rng.standard_normal(500_000)
