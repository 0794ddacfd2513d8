"""Random bags, secret-weight aggregation, the private residual check, and the release.

Weighted LBA (Brahmbhatt et al. 2023, Fig. 1; spec §2.2-2.4):

.. math::
    \\bar z_j = \\sum_{r=1}^k w_{jr} z_{i_{jr}}, \\qquad
    \\bar y_j = \\sum_{r=1}^k w_{jr} y_{i_{jr}}, \\qquad w_{jr} \\sim N(0, 1)
    \\text{ i.i.d., secret},

over ``m`` disjoint uniformly random bags ``S_j = {i_j1, ..., i_jk}``. With an
intercept, ``z = [x, 1]`` and the last aggregate is the weight sum.

Noisy weighted LLP (paper Fig. 2): labels of a noise set get
``N(0, sigma_g^2)`` noise, only ``ybar_j`` is aggregated, and the bags,
features and weights are released.

Randomness: the released partition comes from ``random_state``; the weights
(secret in LBA, released in LLP), the PTR draw and LLP's noise come from
fresh OS entropy in every call (:func:`aggregation_rngs`). Secret values are
local variables of :func:`run_aggregation` and are never returned or stored.
"""

import json
import math
import warnings
from dataclasses import dataclass, field, fields
from functools import partial

import numpy as np
from sklearn.utils import check_array

from .._rows import check_block_finite, is_dask_collection, sum_over_row_blocks
from ..accounting import PrivacyEvent, PrivacyLedger
from .._random import public_generators, secret_generators
from ..exceptions import PrivacyLeakWarning
from ..mechanisms import bound_bins, ptr_calibration, ptr_test
from ._accountant import (
    lba_c_star,
    lba_epsilon,
    lba_min_bag_size,
    lba_privacy_profile,
    lba_ptr_bag_size,
    lba_ptr_split,
    llp_min_bag_size,
    llp_privacy_profile,
)
from ..exceptions import (
    InsufficientDataError,
    PrivacyCheckFailedError,
    PrivacyInfeasibleError,
)

__all__ = [
    "AggregatedDataset",
    "LLPDataset",
    "AggregationPlan",
    "aggregate",
    "plan_aggregation",
    "run_aggregation",
    "sample_bags",
    "sample_lba_weights",
    "lba_aggregate",
    "llp_noise_mask",
    "bag_design_ranks",
    "check_bag_ranks",
    "bag_residual_norms",
    "RNG_PURPOSES",
    "aggregation_rngs",
]

ACCOUNTANT_NAME = "exact-per-bag-v1"
PAPER = "arXiv:2310.10092"
RNG_PURPOSES = ("partition", "weights", "ptr", "noise")


# ---------------------------------------------------------------------------
# Pure numerical pieces
# ---------------------------------------------------------------------------
def sample_bags(n_samples, bag_size, n_bags, rng):
    """``m`` disjoint uniformly random bags of size ``k`` and the dropped rest.

    The prefix of a uniform permutation: bag ``j`` is ``perm[j k:(j+1) k]``;
    the ``n - m k`` remaining indices are dropped (their labels have no
    influence on the output). Draws from ``rng`` only (a released stream).

    Returns
    -------
    bags : ndarray of int, shape (m, k)
    dropped : ndarray of int, shape (n - m k,)
    """
    if n_bags * bag_size > n_samples:
        raise ValueError("n_bags * bag_size must be <= n_samples.")
    perm = rng.permutation(n_samples)
    used = n_bags * bag_size
    return perm[:used].reshape(n_bags, bag_size), perm[used:]


def sample_lba_weights(n_bags, bag_size, rng):
    """The secret i.i.d. N(0, 1) weights, shape (m, k), from a secret stream."""
    return rng.standard_normal((n_bags, bag_size))


def lba_aggregate(Z, y, bags, weights):
    """Weighted aggregates ``(Zbar, ybar)``: ``Zbar_j = sum_r W_jr Z[bags_jr]``.

    Parameters
    ----------
    Z : ndarray (n, p)
    y : ndarray (n,) or None
    bags : ndarray of int (m, k)
    weights : ndarray (m, k)

    Returns
    -------
    Zbar : ndarray (m, p)
    ybar : ndarray (m,) or None
    """
    Zbar = np.einsum("jr,jrc->jc", weights, Z[bags])
    ybar = None if y is None else np.einsum("jr,jr->j", weights, y[bags])
    return Zbar, ybar


def llp_noise_mask(bags, n_samples, noise_fraction, allocation, rng):
    """Boolean mask (n,) of the noise set N (secret stream).

    ``'per_bag'``: exactly ``ceil(rho k)`` random members of every bag;
    ``'global'``: a uniformly random ``floor(rho n)``-subset of all indices.
    """
    mask = np.zeros(n_samples, dtype=bool)
    m, k = bags.shape
    if allocation == "global":
        size = math.floor(noise_fraction * n_samples)
        mask[rng.choice(n_samples, size=size, replace=False)] = True
        return mask
    q0 = min(math.ceil(noise_fraction * k), k)
    if q0 == 0:
        return mask
    # A random q0-subset of each bag: the q0 smallest of k i.i.d. uniform keys.
    order = np.argsort(rng.random((m, k)), axis=1)[:, :q0]
    mask[np.take_along_axis(bags, order, axis=1).ravel()] = True
    return mask


def _bag_svd(Z, bags):
    return np.linalg.svd(Z[bags], full_matrices=False)


def _rank_tolerance(singular_values):
    # Stricter than numpy's default (max(k, p) * eps * s_max): near-zero
    # directions count as present, so the rank is never under-counted (E4).
    return singular_values[..., :1] * np.finfo(np.float64).eps


def bag_design_ranks(Z, bags):
    """Numerical rank of every bag's released design ``Z[bags[j]]`` (features only)."""
    s = np.linalg.svd(Z[bags], compute_uv=False)
    return np.sum(s > _rank_tolerance(s), axis=1)


def check_bag_ranks(Z, bags):
    """Raise :class:`PrivacyInfeasibleError` if some bag has ``rank(Z_j) >= k``.

    Public features only; run before any label is touched. A bag whose
    design has rank ``k`` fits its labels exactly (RSS = 0) and its
    aggregate reveals any label change (paper App. J). Only possible when
    ``k <= p``.
    """
    k = bags.shape[1]
    if k > Z.shape[1]:
        return
    if _some_bag_full_rank(Z, bags):
        _raise_full_rank(k, Z.shape[1])


def _some_bag_full_rank(Z, bags):
    return bool(np.any(bag_design_ranks(Z, bags) >= bags.shape[1]))


def _raise_full_rank(k, p):
    raise PrivacyInfeasibleError(
        f"bag_size={k} is at most the number of design columns p={p} and "
        "some bag's design has rank equal to bag_size: its labels are fitted "
        "exactly and weighted aggregation gives no privacy (paper App. J). Use "
        f"bag_size well above p (at least 2p={2 * p})."
    )


def bag_residual_norms(Z, y, bags, label_bound=None):
    """Conservative (lower) ``sqrt(RSS_j)`` of each bag's own least squares fit.

    ``RSS_j = ||(I - H_j) y_j||^2``; the projection keeps every singular
    direction above ``s_max * machine eps`` (a larger subspace than lstsq's
    cut-off, so the residual is never overstated, review erratum E4), and a
    rounding allowance ``1e-12 sqrt(k) label_bound`` is subtracted. The
    allowance is a constant (``label_bound`` bounds ``|y|``; default: the
    data's maximum, for curator diagnostics only), so the result is exactly
    1-Lipschitz in each label: the projection depends on the public
    features only.

    Curator-side only: the values are private and never released.
    """
    U, s, _ = _bag_svd(Z, bags)
    keep = (s > _rank_tolerance(s))[:, None, :]
    yb = y[bags]
    coords = np.einsum("jkr,jk->jr", U, yb)
    resid = yb - np.einsum("jkr,jr->jk", U * keep, coords)
    if label_bound is None:
        label_bound = float(np.max(np.abs(yb))) if yb.size else 0.0
    allowance = 1e-12 * math.sqrt(bags.shape[1]) * label_bound
    return np.maximum(np.linalg.norm(resid, axis=1) - allowance, 0.0)


# ---------------------------------------------------------------------------
# Released datasets
# ---------------------------------------------------------------------------
def _to_jsonable(value):
    if isinstance(value, dict):
        return {k: _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


class _SavableMixin:
    _array_fields = ()

    def save(self, path):
        """Write the dataset to ``path`` (``.npz``: arrays + a JSON string; no pickle)."""
        arrays = {}
        meta = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self._array_fields:
                if value is not None:
                    arrays[f.name] = np.asarray(value)
            else:
                meta[f.name] = _to_jsonable(value)
        arrays["meta"] = np.array(json.dumps(meta))
        with open(path, "wb") as handle:
            np.savez(handle, **arrays)

    @classmethod
    def load(cls, path):
        """Read a dataset written by :meth:`save` (``allow_pickle=False``)."""
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            kwargs = {
                name: (data[name].copy() if name in data.files else None)
                for name in cls._array_fields
            }
        if meta.get("label_bounds") is not None:
            meta["label_bounds"] = tuple(meta["label_bounds"])
        if meta.get("feature_names") is not None:
            meta["feature_names"] = tuple(meta["feature_names"])
        return cls(**kwargs, **meta)


@dataclass(frozen=True)
class AggregatedDataset(_SavableMixin):
    """The private output of weighted LBA: one row per bag, no weights.

    Everything here is covered by ``privacy['epsilon'], privacy['delta']``
    (label-DP, replace-one label); a model fitted on it inherits the
    guarantee (post-processing).

    Attributes
    ----------
    X_agg : ndarray (m, d)
        ``sum_r w_jr x_{i_jr}``.
    w_sum : ndarray (m,) or None
        ``sum_r w_jr``, the aggregate of the intercept column (None without
        an intercept).
    y_agg : ndarray (m,)
        ``sum_r w_jr y_{i_jr}`` on labels clipped to ``label_bounds``.
    bag_indices : ndarray of int (m, k) or None
        The public, label-independent partition.
    n_samples, bag_size : int
    feature_names : tuple of str or None
    label_bounds : tuple (a, b) or None
    fit_intercept : bool
    privacy : dict
        The guarantee and its accounting (see :func:`aggregate`).
    """

    X_agg: np.ndarray
    w_sum: np.ndarray | None
    y_agg: np.ndarray
    bag_indices: np.ndarray | None
    n_samples: int
    bag_size: int
    feature_names: tuple | None = None
    label_bounds: tuple | None = None
    fit_intercept: bool = True
    privacy: dict = field(default_factory=dict)

    _array_fields = ("X_agg", "w_sum", "y_agg", "bag_indices")

    @property
    def n_bags(self):
        return self.y_agg.shape[0]

    def design(self, X=None):
        """The aggregated design ``Zbar`` (m, p): ``[X_agg, w_sum]`` with an intercept."""
        if self.fit_intercept:
            return np.column_stack([self.X_agg, self.w_sum])
        return np.asarray(self.X_agg)

    def to_frame(self):
        """A pandas DataFrame with one row per bag (needs pandas)."""
        import pandas as pd

        names = self.feature_names or [f"x{j}" for j in range(self.X_agg.shape[1])]
        frame = pd.DataFrame(self.X_agg, columns=list(names))
        if self.w_sum is not None:
            frame["weight_sum"] = self.w_sum
        frame["y_agg"] = self.y_agg
        return frame


@dataclass(frozen=True)
class LLPDataset(_SavableMixin):
    """The private output of noisy weighted LLP (bags, weights, noisy aggregates).

    The features are public and not copied: the analyst combines this with
    the public ``X`` (:meth:`design`). No labels and no noise are stored.
    """

    bag_indices: np.ndarray
    weights: np.ndarray
    y_agg: np.ndarray
    n_samples: int
    bag_size: int
    feature_names: tuple | None = None
    label_bounds: tuple | None = None
    fit_intercept: bool = True
    privacy: dict = field(default_factory=dict)

    _array_fields = ("bag_indices", "weights", "y_agg")

    @property
    def n_bags(self):
        return self.y_agg.shape[0]

    def design(self, X):
        """``Zbar`` (m, p) from the public features ``X`` (the LLP linear bag loss).

        Parameters
        ----------
        X : array-like or Dask array of shape (n_samples, n_features)
            A Dask array or data frame is combined on its workers (the used
            rows gathered into blocks of whole bags); only the ``(m, p)``
            sums come back.

        Returns
        -------
        Zbar : ndarray of shape (n_bags, p)
            ``sum_r w_jr z_{i_jr}`` with ``z = [x, 1]`` when ``fit_intercept``.
        """
        if is_dask_collection(X):
            return _llp_design_dask(X, self.bag_indices, self.weights, self.fit_intercept)
        X = np.asarray(X, dtype=np.float64)
        Z = np.column_stack([X, np.ones(X.shape[0])]) if self.fit_intercept else X
        return lba_aggregate(Z, None, self.bag_indices, self.weights)[0]


# ---------------------------------------------------------------------------
# Planning from public facts
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AggregationPlan:
    """Everything :func:`run_aggregation` needs, computed from public facts only."""

    mode: str
    assumption: str
    private: bool
    n_samples: int
    n_features: int
    n_columns: int
    fit_intercept: bool
    bag_size: int
    n_bags: int
    label_bounds: tuple | None
    epsilon: float
    delta: float
    epsilon_ptr: float
    delta_ptr: float
    epsilon_aggregation: float
    delta_aggregation: float
    c: float | None
    rss_threshold: float | None
    residual_var_lower_bound: float | None
    delta_partition: float
    noise_fraction: float | None
    noise_scale: float | None
    noise_allocation: str | None
    ptr_target_failure: float

    @property
    def label_range(self):
        if self.label_bounds is None:
            return None
        return float(self.label_bounds[1] - self.label_bounds[0])

    def ledger(self):
        """The :class:`~skprivreg.accounting.PrivacyLedger` of this run."""
        name = "lba_aggregate" if self.mode == "lba" else "llp_aggregate"
        events = []
        if self.epsilon_ptr > 0:
            events.append(
                PrivacyEvent(
                    name="lba_ptr_check",
                    epsilon=self.epsilon_ptr,
                    delta=self.delta_ptr,
                    notion="label",
                )
            )
        events.append(
            PrivacyEvent(
                name=name,
                epsilon=self.epsilon_aggregation,
                delta=self.delta_aggregation,
                notion="label",
            )
        )
        return PrivacyLedger(events, composition="basic")

    def privacy_report(self, ptr_passed=None):
        """The JSON-serialisable privacy description of the release."""
        ledger = self.ledger()
        return {
            "mechanism": "weighted-LBA" if self.mode == "lba" else "noisy-weighted-LLP",
            "notion": "label",
            "neighbouring": "replace-one",
            "assumption": self.assumption,
            "accountant": ACCOUNTANT_NAME,
            "epsilon": float(ledger.epsilon),
            "delta": float(ledger.delta),
            "target_epsilon": float(self.epsilon),
            "target_delta": float(self.delta),
            "epsilon_aggregation": float(self.epsilon_aggregation),
            "delta_aggregation": float(self.delta_aggregation),
            "epsilon_ptr": float(self.epsilon_ptr),
            "delta_ptr": float(self.delta_ptr),
            "ptr_passed": ptr_passed,
            "rss_threshold": self.rss_threshold,
            "c": self.c,
            "label_bounds": None if self.label_bounds is None else list(self.label_bounds),
            "label_range": self.label_range,
            "residual_var_lower_bound": self.residual_var_lower_bound,
            "delta_partition": self.delta_partition,
            "bag_size": self.bag_size,
            "n_bags": self.n_bags,
            "noise_fraction": self.noise_fraction,
            "noise_scale": self.noise_scale,
            "noise_allocation": self.noise_allocation,
            "paper": PAPER,
        }


def resolve_n_bags_min(n_bags_min, n_columns, private):
    """``'auto'`` is ``max(20, 4p)`` when private, 1 otherwise."""
    if n_bags_min == "auto":
        return max(20, 4 * n_columns) if private else 1
    return int(n_bags_min)


def _insufficient(n, epsilon, delta, reason, k_needed, m_min, best=None):
    need = "" if not math.isfinite(k_needed) else f", i.e. n_samples>={int(k_needed) * m_min}"
    best_text = "" if best is None else f"; with n_samples={n} the best achievable is {best}"
    raise InsufficientDataError(
        f"n_samples={n} is too small for (epsilon={epsilon}, delta={delta}): {reason} "
        f"need bag_size>={k_needed} and >={m_min} bags{need}{best_text}."
    )


def plan_aggregation(
    n_samples,
    n_features,
    *,
    epsilon=1.0,
    delta=1e-6,
    mode="lba",
    bag_size="auto",
    n_bags=None,
    label_bounds=None,
    assumption="ptr",
    residual_var_lower_bound=None,
    declared_failure_prob=0.0,
    expected_residual_var=None,
    ptr_epsilon_fraction=0.4,
    ptr_target_failure=0.05,
    n_bags_min="auto",
    noise_fraction=0.1,
    noise_scale=1.0,
    noise_allocation="per_bag",
    fit_intercept=True,
):
    """Resolve bag size, bag count and the budget split from public facts (spec §1.5).

    Raises ``ValueError`` for bad parameters and
    :class:`InsufficientDataError` when ``n_samples`` cannot reach the
    target; nothing is read from the data and nothing is spent.
    """
    n = int(n_samples)
    p = int(n_features) + (1 if fit_intercept else 0)
    if mode not in ("lba", "llp"):
        raise ValueError("mode must be 'lba' or 'llp'.")
    if assumption not in ("ptr", "declared", "none"):
        raise ValueError("assumption must be 'ptr', 'declared' or 'none'.")
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0.")
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1).")
    private = assumption != "none" and math.isfinite(epsilon)
    if label_bounds is not None:
        a, b = (float(v) for v in label_bounds)
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError("label_bounds must be finite (a, b) with a < b.")
        label_bounds = (a, b)
    elif private:
        raise ValueError(
            "label_bounds=(a, b) is required (public bounds chosen without looking at "
            "the labels) unless assumption='none'."
        )
    if mode == "llp" and not 0 <= noise_fraction <= 1:
        raise ValueError("noise_fraction must lie in [0, 1].")
    if mode == "llp" and private and noise_fraction == 0:
        raise ValueError(
            "noise_fraction=0 is not label-DP (weighted LLP without noise); it is "
            "allowed only with assumption='none'."
        )
    if mode == "llp" and not noise_scale > 0:
        raise ValueError("noise_scale must be > 0.")
    if noise_allocation not in ("per_bag", "global"):
        raise ValueError("noise_allocation must be 'per_bag' or 'global'.")
    if mode == "lba" and assumption == "declared":
        if residual_var_lower_bound is None or not residual_var_lower_bound > 0:
            raise ValueError("assumption='declared' needs residual_var_lower_bound > 0.")
        if not 0 <= declared_failure_prob < delta:
            raise ValueError("declared_failure_prob must lie in [0, delta).")
    if not 0 < ptr_epsilon_fraction < 1:
        raise ValueError("ptr_epsilon_fraction must lie in (0, 1).")
    if not 0 < ptr_target_failure < 0.5:
        raise ValueError("ptr_target_failure must lie in (0, 0.5).")
    m_min = resolve_n_bags_min(n_bags_min, p, private)
    delta_range = None if label_bounds is None else label_bounds[1] - label_bounds[0]

    eps_ptr = delta_ptr = 0.0
    c = rss_threshold = None
    delta_partition = 0.0
    k = bag_size
    if mode == "lba" and private:
        if assumption == "declared":
            alpha = float(residual_var_lower_bound)
            delta_partition = float(declared_failure_prob)
            if k == "auto":
                k = lba_min_bag_size(epsilon, delta - delta_partition, delta_range, alpha, p)
                if not math.isfinite(k) or k * m_min > n:
                    k_best = max(n // m_min, 1)
                    best = lba_epsilon(
                        delta - delta_partition, delta_range / math.sqrt(alpha * k_best)
                    )
                    _insufficient(
                        n, epsilon, delta,
                        f"label range {delta_range} and residual_var_lower_bound={alpha:g}",
                        k, m_min,
                        best=f"epsilon={best:.3g} at delta={delta} (bag_size={k_best})",
                    )
            rss_threshold = alpha * k
            c = delta_range / math.sqrt(rss_threshold)
            eps_agg = float(epsilon)
            delta_agg = lba_privacy_profile(epsilon, c) + delta_partition
            if delta_agg > delta:
                k_need = lba_min_bag_size(epsilon, delta - delta_partition, delta_range, alpha, p)
                _insufficient(
                    n, epsilon, delta,
                    f"bag_size={k} gives delta={delta_agg:.3g}; label range {delta_range} and "
                    f"residual_var_lower_bound={alpha:g}",
                    k_need, m_min,
                )
        else:  # 'ptr'
            eps_ptr, delta_ptr, eps_agg, delta_half = lba_ptr_split(
                epsilon, delta, ptr_epsilon_fraction
            )
            c = lba_c_star(eps_agg, delta_half)
            if c <= 0:
                raise InsufficientDataError(
                    f"n_samples={n}: (epsilon={epsilon}, delta={delta}) is unreachable by "
                    "weighted LBA at any bag size."
                )
            rss_threshold = (delta_range / c) ** 2
            delta_agg = lba_privacy_profile(eps_agg, c)
            if k == "auto":
                if expected_residual_var is None:
                    k = max(n // m_min, 1)
                else:
                    k = lba_ptr_bag_size(
                        epsilon, delta, delta_range, float(expected_residual_var), p,
                        fraction=ptr_epsilon_fraction, beta=ptr_target_failure,
                    )
                    if k * m_min > n:
                        _insufficient(
                            n, epsilon, delta,
                            f"the residual check with label range {delta_range} and "
                            f"expected_residual_var={expected_residual_var:g} would",
                            k, m_min,
                        )
    elif mode == "llp" and private:
        eps_agg = float(epsilon)
        args = (noise_fraction, delta_range, noise_scale, n, noise_allocation)
        if k == "auto":
            k = llp_min_bag_size(epsilon, delta, *args)
            if not math.isfinite(k) or k * m_min > n:
                _insufficient(
                    n, epsilon, delta,
                    f"noise_fraction={noise_fraction} and label range / noise_scale="
                    f"{delta_range / noise_scale:g}",
                    k, m_min,
                )
        delta_agg = llp_privacy_profile(epsilon, k, *args)
        if delta_agg > delta:
            k_need = llp_min_bag_size(epsilon, delta, *args)
            _insufficient(
                n, epsilon, delta,
                f"bag_size={k} gives delta={delta_agg:.3g}; noise_fraction={noise_fraction} "
                f"and label range / noise_scale={delta_range / noise_scale:g}",
                k_need, m_min,
            )
    else:
        if k == "auto":
            raise ValueError("bag_size='auto' needs a private assumption ('ptr' or 'declared').")
        eps_agg, delta_agg = math.inf, 1.0

    k = int(k)
    if k < 1:
        raise ValueError("bag_size must be >= 1.")
    if k > n:
        _insufficient(n, epsilon, delta, "the chosen settings", k, m_min)
    m = n // k if n_bags is None else int(n_bags)
    if m < 1 or m * k > n:
        raise ValueError(
            f"n_bags={n_bags} with bag_size={k} needs n_bags*bag_size <= n_samples={n}."
        )
    if m < m_min:
        _insufficient(n, epsilon, delta, f"with bag_size={k}, fits", k, m_min)
    return AggregationPlan(
        mode=mode,
        # LLP's guarantee needs no assumption on the data.
        assumption=("none" if not private else "not-required" if mode == "llp" else assumption),
        private=private,
        n_samples=n,
        n_features=int(n_features),
        n_columns=p,
        fit_intercept=bool(fit_intercept),
        bag_size=k,
        n_bags=m,
        label_bounds=label_bounds,
        epsilon=float(epsilon),
        delta=float(delta),
        epsilon_ptr=float(eps_ptr),
        delta_ptr=float(delta_ptr),
        epsilon_aggregation=float(eps_agg),
        delta_aggregation=float(delta_agg),
        c=c,
        rss_threshold=rss_threshold,
        residual_var_lower_bound=(
            float(residual_var_lower_bound) if assumption == "declared" and private else None
        ),
        delta_partition=delta_partition,
        noise_fraction=float(noise_fraction) if mode == "llp" else None,
        noise_scale=float(noise_scale) if mode == "llp" else None,
        noise_allocation=noise_allocation if mode == "llp" else None,
        ptr_target_failure=float(ptr_target_failure),
    )


def plan_warnings(plan, random_state, stacklevel=3):
    """Public-fact warnings: fixed seed, delta > 1/n, k < 2p, no guarantee."""
    if not plan.private:
        warnings.warn(
            "Weighted LBA/LLP without a privacy assumption (assumption='none' or "
            "epsilon=inf): the output is NOT label-DP.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )
        return
    if plan.delta > 1.0 / plan.n_samples:
        warnings.warn(
            f"delta={plan.delta} > 1/n_samples={1.0 / plan.n_samples:.3g}: a mechanism "
            "that publishes one label in the clear meets this delta.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )
    if plan.bag_size < 2 * plan.n_columns:
        warnings.warn(
            f"bag_size={plan.bag_size} < 2p={2 * plan.n_columns}: bag designs are close "
            "to full rank and residuals small.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )


# ---------------------------------------------------------------------------
# Running the mechanism
# ---------------------------------------------------------------------------
def aggregation_rngs(random_state, extra_public=()):
    """The generators of one aggregation.

    The bag partition is released, so it comes from ``random_state``
    (with ``extra_public`` purposes, e.g. post-processing); the weights,
    the PTR draw and the label noise are secret draws from fresh OS entropy.
    """
    return {
        **public_generators(random_state, ("partition", *extra_public)),
        **secret_generators(("weights", "ptr", "noise"), random_state),
    }


def _data_label_range(low, high):
    """``(-B, B)`` with ``B`` the smallest public bin at or above ``max(|low|, |high|)``.

    For the non-private mode that reads the label range from the data: the
    reported range is a public grid point, never an exact data extreme.
    """
    bins = bound_bins()
    top = max(abs(float(low)), abs(float(high)))
    bound = float(bins[min(np.searchsorted(bins, top), len(bins) - 1)])
    return -max(bound, top), max(bound, top)


def _design(X, fit_intercept):
    if fit_intercept:
        return np.column_stack([X, np.ones(X.shape[0])])
    return X


def run_aggregation(X, y, plan, rngs, feature_names=None):
    """Run the planned mechanism on validated ``X`` (n, d) and 1-D ``y``.

    Order: partition (released stream); feature-only rank check; label
    clipping; the private residual check (``'ptr'``); secret aggregation.
    Raises :class:`PrivacyInfeasibleError` before any label is touched, and
    :class:`PrivacyCheckFailedError` (fixed message) when the PTR refuses;
    the caller must record the budget first (the plan's ledger).

    Dask arrays (both modes) are aggregated on the cluster by
    :func:`_run_aggregation_dask`, with the same streams, the same rank and PTR
    decisions, the same partition (and LLP weights), and the same aggregates
    up to float64 round-off. The secret weights (LBA) and label noise (LLP)
    are sent to the workers inside the compute (the cluster is trusted as
    the data owner's environment) and are never stored, logged or returned.

    Returns
    -------
    dataset : AggregatedDataset or LLPDataset
    """
    if is_dask_collection(X) or is_dask_collection(y):
        return _run_aggregation_dask(X, y, plan, rngs, feature_names)
    n = X.shape[0]
    Z = _design(X, plan.fit_intercept)
    bags, _ = sample_bags(n, plan.bag_size, plan.n_bags, rngs["partition"])
    if plan.private and plan.mode == "lba":
        check_bag_ranks(Z, bags)

    label_bounds = plan.label_bounds
    if label_bounds is None:
        label_bounds = _data_label_range(np.min(y), np.max(y))
        warnings.warn(
            "label_bounds were read from the labels (assumption='none'): not private.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    else:
        y = np.clip(y, *label_bounds)

    ptr_passed = None
    if plan.private and plan.mode == "lba" and plan.assumption == "ptr":
        ptr_passed = _ptr_check(Z, y, bags, plan, rngs["ptr"])
    _raise_if_ptr_failed(ptr_passed, plan)
    report = _release_report(plan, ptr_passed, label_bounds)
    names = None if feature_names is None else tuple(str(v) for v in feature_names)

    if plan.mode == "lba":
        weights = sample_lba_weights(plan.n_bags, plan.bag_size, rngs["weights"])
        Zbar, ybar = lba_aggregate(Z, y, bags, weights)
        del weights
        return _lba_dataset(Zbar, ybar, X.shape[1], bags, n, plan, names, label_bounds, report)

    slot_noise = _llp_slot_noise(bags, n, plan, rngs["noise"])
    weights = rngs["weights"].standard_normal((plan.n_bags, plan.bag_size))
    ybar = _group_llp_aggregates(y[bags.ravel()], weights, slot_noise, tuple(label_bounds))
    del slot_noise
    return _llp_dataset(weights, ybar, bags, n, plan, names, label_bounds, report)


def _lba_dataset(Zbar, ybar, d, bags, n, plan, names, label_bounds, report):
    """The released :class:`AggregatedDataset` (NumPy and Dask paths)."""
    return AggregatedDataset(
        X_agg=Zbar[:, :d].copy(),
        w_sum=Zbar[:, -1].copy() if plan.fit_intercept else None,
        y_agg=ybar,
        bag_indices=bags,
        n_samples=n,
        bag_size=plan.bag_size,
        feature_names=names,
        label_bounds=tuple(label_bounds),
        fit_intercept=plan.fit_intercept,
        privacy=report,
    )


def _llp_dataset(weights, ybar, bags, n, plan, names, label_bounds, report):
    """The released :class:`LLPDataset` (NumPy and Dask paths)."""
    return LLPDataset(
        bag_indices=bags,
        weights=weights,
        y_agg=ybar,
        n_samples=n,
        bag_size=plan.bag_size,
        feature_names=names,
        label_bounds=tuple(label_bounds),
        fit_intercept=plan.fit_intercept,
        privacy=report,
    )


def _ptr_check(Z, y, bags, plan, rng):
    """Truncated-Laplace PTR on ``L = (min_j sqrt(RSS_j) - s) / Delta`` (sensitivity 1).

    PASS iff ``L >= A + Z`` with ``Z`` truncated Laplace on ``[-A, A]``
    (:func:`~skprivreg.mechanisms.ptr_test` on the score ``2A - L``): an
    unsafe dataset (``L <= 0``) never passes, the PASS/FAIL bit is
    (eps_test, delta_test)-DP, and on PASS every bag has ``RSS_j >= s^2``.
    Only the bit leaves this function (review erratum E3).
    """
    norms = bag_residual_norms(Z, y, bags, label_bound=_label_bound(plan))
    return _ptr_decision(float(np.min(norms)), plan, rng)


def _label_bound(plan):
    return max(abs(plan.label_bounds[0]), abs(plan.label_bounds[1]))


def _raise_if_ptr_failed(ptr_passed, plan):
    if ptr_passed is not None and not ptr_passed:
        raise PrivacyCheckFailedError(
            "The private residual check failed: some bag's least-squares residual "
            "may be too small for the requested guarantee, so nothing was released. "
            f"Increase bag_size (now {plan.bag_size}) or epsilon; a retry spends a "
            "new budget."
        )


def _release_report(plan, ptr_passed, label_bounds):
    report = plan.privacy_report(ptr_passed=ptr_passed)
    report["label_bounds"] = list(label_bounds) if plan.label_bounds is not None else None
    return report


def _ptr_decision(min_residual_norm, plan, rng):
    """The PTR bit from ``min_j sqrt(RSS_j)`` (secret; drawn on the driver)."""
    s = math.sqrt(plan.rss_threshold)
    stat = (min_residual_norm - s) / plan.label_range
    cal = ptr_calibration(1.0, plan.epsilon_ptr, plan.delta_ptr)
    passed, _ = ptr_test(cal.fail_threshold - stat, 1.0, plan.epsilon_ptr, plan.delta_ptr, rng)
    return passed


# ---------------------------------------------------------------------------
# The same mechanism on Dask input (data on a cluster)
# ---------------------------------------------------------------------------
def _label_scan_block(X_b, y_b, label_bounds):
    """Finiteness of a row block, and whether clipping changes any label."""
    check_block_finite(X_b, "X")
    check_block_finite(y_b, "y")
    y_b = np.asarray(y_b, dtype=np.float64)
    low = float(y_b.min(initial=np.inf))
    high = float(y_b.max(initial=-np.inf))
    clipped = label_bounds is not None and (low < label_bounds[0] or high > label_bounds[1])
    return low, high, clipped


def _merge_label_scans(a, b):
    return min(a[0], b[0]), max(a[1], b[1]), a[2] or b[2]


def _bag_blocks(X, y, bags, chunk_rows=None):
    """Delayed blocks of whole bags: rows ``bags.ravel()`` gathered on the workers.

    Returns ``(x_blocks, y_blocks, bag_slices)``; block ``i`` holds the rows
    of the bags ``bag_slices[i]`` in bag order (``k`` consecutive rows per
    bag). Either ``X`` or ``y`` may be ``None`` (its blocks are then
    ``None``): only what a pass needs is moved. A block holds about
    ``chunk_rows`` rows (default: the largest row chunk of ``X``, else of
    ``y``), so the same ``chunk_rows`` gives the same ``bag_slices``. The
    partition is public; the gather moves rows between workers, never to
    the driver.
    """
    m, k = bags.shape
    if chunk_rows is None:
        chunk_rows = max((X if X is not None else y).chunks[0])
    per_block = max(1, -(-int(chunk_rows) // k))
    bag_slices = [slice(a, min(a + per_block, m)) for a in range(0, m, per_block)]
    rows = tuple(k * (g.stop - g.start) for g in bag_slices)
    order = bags.ravel()
    x_blocks = y_blocks = None
    if X is not None:
        x_blocks = X.rechunk({1: -1})[order].rechunk((rows, -1)).to_delayed().ravel()
    if y is not None:
        y_blocks = y[order].rechunk((rows,)).to_delayed().ravel()
    return x_blocks, y_blocks, bag_slices


def _local_bags(n_bags, bag_size):
    return np.arange(n_bags * bag_size).reshape(n_bags, bag_size)


def _group_full_rank(X_b, fit_intercept, n_bags, bag_size):
    return _some_bag_full_rank(_design(X_b, fit_intercept), _local_bags(n_bags, bag_size))


def _group_min_residual(X_b, y_b, fit_intercept, n_bags, bag_size, label_bounds, label_bound):
    y_b = np.clip(np.asarray(y_b, dtype=np.float64), *label_bounds)
    norms = bag_residual_norms(
        _design(X_b, fit_intercept), y_b, _local_bags(n_bags, bag_size), label_bound
    )
    return float(np.min(norms))


def _group_aggregates(X_b, y_b, weights, fit_intercept, label_bounds):
    y_b = np.clip(np.asarray(y_b, dtype=np.float64), *label_bounds)
    return lba_aggregate(
        _design(X_b, fit_intercept), y_b, _local_bags(*weights.shape), weights
    )


def _group_design_sums(X_b, weights, fit_intercept):
    """``Zbar`` of a block of whole bags (public features, released LLP weights)."""
    return lba_aggregate(_design(X_b, fit_intercept), None, _local_bags(*weights.shape), weights)[0]


def _group_llp_aggregates(y_b, weights, noise, label_bounds):
    """LLP's ``ybar`` of a block of whole bags: ``sum_r w_jr (clip(y) + noise)``.

    ``noise`` (g, k) is the secret per-slot noise, zero where a slot is not
    in the noise set; the arithmetic is that of :func:`run_aggregation`.
    """
    y_b = np.clip(np.asarray(y_b, dtype=np.float64), *label_bounds)
    noisy = y_b.reshape(weights.shape) + noise
    return np.einsum("jr,jr->j", weights, noisy)


def _llp_design_dask(X, bags, weights, fit_intercept):
    """:meth:`LLPDataset.design` for a Dask array ``X``: ``Zbar`` (m, p) as NumPy.

    The used rows are gathered on the workers into blocks of whole bags
    (:func:`_bag_blocks`); only the ``(m, p)`` weighted sums come back.
    Public features and released weights: no secret is involved.
    """
    import dask

    if hasattr(X, "to_dask_array"):
        X = X.to_dask_array(lengths=True)
    if np.isnan(X.shape[0]):
        raise ValueError(
            "Dask input needs known chunk sizes: call .compute_chunk_sizes() first."
        )
    X = X.astype(np.float64)
    x_blocks, _, groups = _bag_blocks(X, None, bags)
    parts = _compute(
        dask.delayed(_group_design_sums, pure=False)(xb, weights[g], fit_intercept)
        for xb, g in zip(x_blocks, groups)
    )
    return np.concatenate(parts)


def _llp_slot_noise(bags, n_samples, plan, rng):
    """The secret per-slot noise (m, k) of LLP (NumPy and Dask paths alike).

    From the ``'noise'`` stream: the noise set :func:`llp_noise_mask`, then
    ``|N|`` standard normals assigned to the members of ``N`` in increasing
    row order. Rows outside the bags (possible with ``'global'`` allocation)
    get their draw but are unused.
    """
    mask = llp_noise_mask(bags, n_samples, plan.noise_fraction, plan.noise_allocation, rng)
    per_row = np.zeros(n_samples)
    per_row[mask] = plan.noise_scale * rng.standard_normal(int(mask.sum()))
    slot_noise = per_row[bags]
    del per_row, mask
    return slot_noise


def _compute(tasks):
    import dask

    return dask.compute(*tasks)


def _run_aggregation_dask(X, y, plan, rngs, feature_names=None):
    """:func:`run_aggregation` for Dask arrays, without collecting X or y on the driver.

    Both modes, with the same order, the same streams and the same per-bag
    arithmetic as the NumPy path. The partition is drawn on the driver from
    the released stream; a first pass over the row blocks checks finiteness
    and the label range (NaN or infinity fails here, before anything is
    spent; the :class:`PrivacyLeakWarning` of the non-private mode is that of
    the NumPy path); then the used rows are gathered on the workers into
    blocks of whole bags (:func:`_bag_blocks`).

    ``mode='lba'``: the feature-only rank check and the per-bag residual
    norms (``'ptr'``) run on the gathered blocks with the NumPy code, so the
    rank decision and ``min_j sqrt(RSS_j)`` are bit-identical; the PTR draw
    happens on the driver. The secret N(0, 1) weights are drawn on the
    driver from the secret stream and shipped, one slice per block of bags;
    only the ``(m, p)`` aggregates come back.

    ``mode='llp'``: only the labels are gathered. The noise set, the noise
    values (``'noise'``) and the released weights (``'weights'``) are drawn
    on the driver exactly as on NumPy input; the weights and the secret
    per-slot noise (zero on slots outside the noise set) are shipped, one
    slice per block of bags, and the workers return only the ``(m,)`` noisy
    aggregates of the clipped labels. The features are not moved: the
    analyst's :meth:`LLPDataset.design` combines them on the workers later.

    Secrets travel inside tasks with random keys (``pure=False``; no hash of
    them is computed), and nothing random runs on a worker. Trust
    assumption: the cluster's workers and scheduler are the data owner's
    environment (they see the labels anyway); the secret weights (LBA) and
    the label noise (LLP) live in task memory only during the compute and
    are never stored, logged or returned.
    """
    import dask
    import dask.array as da

    X, y = (v if is_dask_collection(v) else da.from_array(np.asarray(v)) for v in (X, y))
    n = X.shape[0]
    k, m, fit_intercept = plan.bag_size, plan.n_bags, plan.fit_intercept
    lba = plan.mode == "lba"
    bags, _ = sample_bags(n, k, m, rngs["partition"])

    low, high, clipped = sum_over_row_blocks(
        partial(_label_scan_block, label_bounds=plan.label_bounds), X, y,
        combine=_merge_label_scans,
    )
    if lba:
        x_blocks, y_blocks, groups = _bag_blocks(X, y, bags)
    else:
        # LLP aggregates the labels only; blocks sized by X's row chunks.
        _, y_blocks, groups = _bag_blocks(None, y, bags, chunk_rows=max(X.chunks[0]))
    sizes = [g.stop - g.start for g in groups]

    if lba and plan.private and k <= _design_width(X.shape[1], fit_intercept):
        flags = _compute(
            dask.delayed(_group_full_rank)(xb, fit_intercept, g, k)
            for xb, g in zip(x_blocks, sizes)
        )
        if any(flags):
            _raise_full_rank(k, _design_width(X.shape[1], fit_intercept))

    label_bounds = plan.label_bounds
    if label_bounds is None:
        label_bounds = _data_label_range(low, high)
        warnings.warn(
            "label_bounds were read from the labels (assumption='none'): not private.",
            PrivacyLeakWarning,
            stacklevel=3,
        )

    ptr_passed = None
    if lba and plan.private and plan.assumption == "ptr":
        lows = _compute(
            dask.delayed(_group_min_residual)(
                xb, yb, fit_intercept, g, k, tuple(label_bounds), _label_bound(plan)
            )
            for xb, yb, g in zip(x_blocks, y_blocks, sizes)
        )
        ptr_passed = _ptr_decision(min(lows), plan, rngs["ptr"])
        del lows
    _raise_if_ptr_failed(ptr_passed, plan)
    report = _release_report(plan, ptr_passed, label_bounds)
    names = None if feature_names is None else tuple(str(v) for v in feature_names)

    if not lba:
        slot_noise = _llp_slot_noise(bags, n, plan, rngs["noise"])
        weights = rngs["weights"].standard_normal((m, k))
        parts = _compute(
            dask.delayed(_group_llp_aggregates, pure=False)(
                yb, weights[g], slot_noise[g], tuple(label_bounds)
            )
            for yb, g in zip(y_blocks, groups)
        )
        del slot_noise
        ybar = np.concatenate(parts)
        del parts
        return _llp_dataset(weights, ybar, bags, n, plan, names, label_bounds, report)

    weights = sample_lba_weights(m, k, rngs["weights"])
    parts = _compute(
        dask.delayed(_group_aggregates, pure=False)(
            xb, yb, weights[g], fit_intercept, tuple(label_bounds)
        )
        for xb, yb, g in zip(x_blocks, y_blocks, groups)
    )
    del weights
    Zbar = np.concatenate([p[0] for p in parts])
    ybar = np.concatenate([p[1] for p in parts])
    del parts
    return _lba_dataset(Zbar, ybar, X.shape[1], bags, n, plan, names, label_bounds, report)


def _design_width(n_features, fit_intercept):
    return n_features + int(fit_intercept)


# ---------------------------------------------------------------------------
# The data owner's public entry point
# ---------------------------------------------------------------------------
def aggregate(
    X,
    y,
    *,
    epsilon=1.0,
    delta=1e-6,
    mode="lba",
    bag_size="auto",
    n_bags=None,
    label_bounds=None,
    assumption="ptr",
    residual_var_lower_bound=None,
    declared_failure_prob=0.0,
    expected_residual_var=None,
    ptr_epsilon_fraction=0.4,
    ptr_target_failure=0.05,
    n_bags_min="auto",
    noise_fraction=0.1,
    noise_scale=1.0,
    noise_allocation="per_bag",
    fit_intercept=True,
    random_state=None,
):
    """Release a label-DP aggregated dataset (the data owner's step).

    Runs weighted LBA (``mode='lba'``) or noisy weighted LLP
    (``mode='llp'``) and returns the private dataset with its ledger; an
    analyst fits on it with
    :meth:`WeightedLBARegressor.fit_aggregated` without seeing any label.

    Privacy: label-DP under replace-one-label neighbours (features public),
    ``(epsilon, delta)`` as reported in ``dataset.privacy`` and the ledger
    (never above the target). See :class:`WeightedLBARegressor` for the
    three assumptions and the budget split.

    Parameters
    ----------
    X : array-like (n, d)
        Public features. Dask arrays or data frames (both modes) are
        aggregated on their cluster without collecting X or y (see
        :func:`run_aggregation` for the trust assumption).
    y : array-like (n,)
        Private labels, clipped to ``label_bounds``.
    epsilon, delta, mode, bag_size, ... :
        As in :class:`WeightedLBARegressor`.
    random_state : None, int or Generator
        Seeds the released bag partition only; the weights, the PTR draw and
        the label noise come from fresh OS entropy in every call.

    Returns
    -------
    dataset : AggregatedDataset or LLPDataset
        Contains no weights (LBA), no labels and no noise.
    ledger : PrivacyLedger

    Raises
    ------
    InsufficientDataError, PrivacyInfeasibleError
        Before any label is read; nothing is spent.
    PrivacyCheckFailedError
        The residual check refused; the budget is spent (the exception's
        ``ledger`` attribute holds it).
    """
    feature_names = None
    if is_dask_collection(X) or is_dask_collection(y):
        # Shapes and dtypes only; finiteness is checked on the workers.
        X, y, feature_names = _validate_dask_free(X, y)
    else:
        X = validate_data_free(X)
        y = np.asarray(y, dtype=np.float64)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError("y must be 1-D with one label per row of X.")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity.")
    plan = plan_aggregation(
        X.shape[0],
        X.shape[1],
        epsilon=epsilon,
        delta=delta,
        mode=mode,
        bag_size=bag_size,
        n_bags=n_bags,
        label_bounds=label_bounds,
        assumption=assumption,
        residual_var_lower_bound=residual_var_lower_bound,
        declared_failure_prob=declared_failure_prob,
        expected_residual_var=expected_residual_var,
        ptr_epsilon_fraction=ptr_epsilon_fraction,
        ptr_target_failure=ptr_target_failure,
        n_bags_min=n_bags_min,
        noise_fraction=noise_fraction,
        noise_scale=noise_scale,
        noise_allocation=noise_allocation,
        fit_intercept=fit_intercept,
    )
    plan_warnings(plan, random_state)
    rngs = aggregation_rngs(random_state)
    ledger = plan.ledger()
    try:
        dataset = run_aggregation(X, y, plan, rngs, feature_names=feature_names)
    except PrivacyCheckFailedError as exc:
        exc.ledger = ledger
        raise
    return dataset, ledger


def _validate_dask_free(X, y):
    """Dask X, y as float64 Dask arrays (no compute) and the frame's column names."""
    from sklearn.base import BaseEstimator

    from .._rows import validate_blockwise_data

    holder = BaseEstimator()
    X, y = validate_blockwise_data(holder, X, y, multi_output=False)
    return X, y, getattr(holder, "feature_names_in_", None)


def validate_data_free(X):
    """float64, 2-D, finite features (outside an estimator)."""
    return check_array(X, dtype=np.float64, ensure_2d=True)


def diagnose_lba_assumption(X, y, bag_indices, s=None, fit_intercept=True):
    """Per-bag least-squares RSS of a partition: a NON-PRIVATE curator diagnostic.

    Returns ``RSS_j`` for every bag (and, when ``s`` is given, whether all
    bags satisfy ``RSS_j >= s^2``, the ``'declared'`` assumption A(s)).

    Never call this inside a release pipeline: the values depend on the
    private labels, and acting on them (aborting, re-drawing the partition,
    choosing the bag size, telling an analyst) voids the label-DP guarantee.
    Use ``assumption='ptr'`` for a private check.
    """
    X = validate_data_free(X)
    y = np.asarray(y, dtype=np.float64)
    bags = np.asarray(bag_indices)
    rss = bag_residual_norms(_design(X, fit_intercept), y, bags) ** 2
    if s is None:
        return rss
    return rss, bool(np.all(rss >= float(s) ** 2))
