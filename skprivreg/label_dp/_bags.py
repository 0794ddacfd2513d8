"""Random bags and the per-bag arithmetic of weighted LBA and noisy weighted LLP.

Pure functions of arrays (no accounting, no planning): the partition, the
weights, the weighted aggregates, the feature-only rank check and the per-bag
least-squares residual norms, plus the same computations on blocks of whole
bags gathered from a Dask array (the per-block functions run on the workers).

Weighted LBA (Brahmbhatt et al. 2023, Fig. 1):

.. math::
    \\bar z_j = \\sum_{r=1}^k w_{jr} z_{i_{jr}}, \\qquad
    \\bar y_j = \\sum_{r=1}^k w_{jr} y_{i_{jr}}, \\qquad w_{jr} \\sim N(0, 1)
    \\text{ i.i.d., secret},

over ``m`` disjoint uniformly random bags ``S_j = {i_j1, ..., i_jk}``. With an
intercept, ``z = [x, 1]`` and the last aggregate is the weight sum.
"""

import math

import numpy as np

from .._rows import as_dask_array
from ..base import quiet_floats
from ..exceptions import PrivacyInfeasibleError

__all__ = [
    "sample_bags",
    "sample_lba_weights",
    "lba_aggregate",
    "llp_noise_mask",
    "bag_design_ranks",
    "check_bag_conditioning",
    "check_bag_ranks",
    "bag_residual_norms",
]


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


def _unit_columns(Zb):
    """Every column of every bag scaled to unit Euclidean norm (zero columns stay zero).

    Scaling a column does not change the column space, the rank or the
    least-squares residual, but the SVD's rounding error is relative to the
    largest column: without this a column of size 1e18 hides columns of size
    one. A power-of-two step first brings every column's largest entry into
    ``[0.5, 1)`` (exact, and the norm cannot overflow), then the column is
    divided by its norm.
    """
    Zb = np.asarray(Zb, dtype=np.float64)
    top = np.max(np.abs(Zb), axis=-2, keepdims=True)
    _, exponent = np.frexp(top)
    scaled = np.ldexp(Zb, -exponent)
    norms = np.linalg.norm(scaled, axis=-2, keepdims=True)
    return scaled / np.where(norms > 0, norms, 1.0)


def _without_repeated_constants(Zb):
    """Every bag's design with each exactly constant column after the first zeroed.

    Within a bag, two nonzero columns that are both constant are exact
    multiples of each other (one is the intercept column when there is one):
    zeroing the later ones leaves the column space exactly as it was, so the
    residual is unchanged, while a feature that happens to be constant in
    one bag (a rare binary flag) no longer makes that bag's design singular.
    Public features only.
    """
    Zb = np.asarray(Zb, dtype=np.float64)
    constant = (np.max(Zb, axis=-2) == np.min(Zb, axis=-2)) & (Zb[..., 0, :] != 0)
    if not np.any(constant.sum(axis=-1) > 1):
        return Zb
    repeated = constant & (np.cumsum(constant, axis=-1) > 1)
    return np.where(repeated[..., None, :], 0.0, Zb)


def _bag_svd(Z, bags, compute_uv=True):
    """SVD of every bag's design with unit-norm columns (public features only)."""
    return np.linalg.svd(_unit_columns(_without_repeated_constants(Z[bags])),
                         full_matrices=False, compute_uv=compute_uv)


def _rank_tolerance(singular_values):
    # On unit-norm columns; stricter than numpy's default (max(k, p) * eps *
    # s_max): a direction is absent only at the rounding level of the
    # column-scaled design, so the rank is not under-counted because of the
    # scale of a column.
    return singular_values[..., :1] * np.finfo(np.float64).eps


def bag_design_ranks(Z, bags):
    """Numerical rank of every bag's released design ``Z[bags[j]]`` (features only).

    Computed on the design with every column scaled to unit norm, so the
    count does not depend on the units of the features.
    """
    s = _bag_svd(Z, bags, compute_uv=False)
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


def _some_bag_uncertifiable(Z, bags):
    """True when some bag's design is collinear up to rounding (public features only):
    :func:`bag_residual_norms` then certifies a residual of 0 for it, whatever the labels."""
    Zu = _unit_columns(_without_repeated_constants(Z[bags]))
    s = np.linalg.svd(Zu, compute_uv=False)
    n_nonzero_columns = np.sum(np.any(Zu != 0, axis=1), axis=1)
    allowance = _residual_allowances(s, n_nonzero_columns, bags.shape[1], Z.shape[1], 1.0)
    return bool(np.any(np.isinf(allowance)))


def _raise_uncertifiable():
    raise PrivacyInfeasibleError(
        "Some bag's design has columns that are collinear up to rounding (one-hot "
        "columns of every category with an intercept, one-hot columns of a category "
        "absent from a bag, or a near-copy of another column): the private residual "
        "check cannot certify its residual and would fail whatever the labels. Drop one "
        "category, merge rare categories, drop or combine near-duplicate columns, or "
        "use larger bags."
    )


def check_bag_conditioning(Z, bags):
    """Raise :class:`PrivacyInfeasibleError` if the residual check could not pass.

    Public features only, run before any label is touched or budget spent.
    """
    if _some_bag_uncertifiable(Z, bags):
        _raise_uncertifiable()


def _group_uncertifiable(X_b, fit_intercept, n_bags, bag_size):
    return _some_bag_uncertifiable(_design(X_b, fit_intercept), _local_bags(n_bags, bag_size))


def _some_bag_full_rank(Z, bags):
    return bool(np.any(bag_design_ranks(Z, bags) >= bags.shape[1]))


def _raise_full_rank(k, p):
    raise PrivacyInfeasibleError(
        f"bag_size={k} is at most the number of design columns p={p} and "
        "some bag's design has rank equal to bag_size: its labels are fitted "
        "exactly and weighted aggregation gives no privacy (paper App. J). Use "
        f"bag_size well above p (at least 2p={2 * p})."
    )


#: Safety factor on the backward error of the SVD in :func:`bag_residual_norms`.
_SVD_ERROR_FACTOR = 8.0


def _residual_allowances(singular_values, n_nonzero_columns, k, p, label_bound):
    """Per-bag rounding allowance of :func:`bag_residual_norms` (public facts only).

    ``s_j`` is the ``r_j``-th largest singular value, ``r_j`` the number of
    columns of the bag's design that are not exactly zero (at most
    ``min(k, p)``): exact zero columns add nothing to the column space.
    ``inf`` marks a bag whose ``s_j`` is at the rounding level (its residual
    is reported as 0).
    """
    eps = np.finfo(np.float64).eps
    scale = math.sqrt(k) * label_bound  # bounds ||y_j||
    # C k p eps sqrt(p): C times the backward error of the SVD of a k x p
    # design with unit-norm columns (||Z_j||_2 <= sqrt(p)).
    backward = _SVD_ERROR_FACTOR * k * p * eps * math.sqrt(p)
    r = np.minimum(n_nonzero_columns, singular_values.shape[1])
    s_j = np.take_along_axis(singular_values, np.maximum(r - 1, 0)[:, None], axis=1)[:, 0]
    s_j = np.where(r > 0, s_j, 1.0)  # no column: the column space is {0}
    well_conditioned = s_j > backward
    angle = backward / np.where(well_conditioned, s_j, 1.0)
    allowance = (1e-12 + angle) * scale
    return np.where(well_conditioned, allowance, np.inf)


def bag_residual_norms(Z, y, bags, label_bound=None):
    """Conservative (lower) ``sqrt(RSS_j)`` of each bag's own least squares fit.

    ``RSS_j = ||(I - H_j) y_j||^2`` with ``H_j`` the exact projection onto
    the column space of ``Z_j``. Every column of ``Z_j`` is scaled to unit
    norm (the column space is unchanged, and the result does not depend on
    the units of the features) and ``y_j`` is projected off all
    ``min(k, p)`` left singular vectors of that design, whatever its
    numerical rank (a rank-deficient design loses a few more directions and
    gives a smaller value).

    The computed left singular vectors span the column space of a nearby
    matrix ``Z_j + E`` only: the SVD is backward stable, with ``||E||`` of
    order ``k p eps ||Z_j||_2`` and ``||Z_j||_2 <= sqrt(p)`` for unit-norm
    columns (``eps = 2.2e-16``). By Wedin's sin-theta theorem the exact
    column space then lies within an angle of about ``||E|| / s_j`` of the
    computed span, ``s_j`` the smallest singular value of the column-scaled
    design (not counting the columns that are exactly zero in the bag,
    which add nothing to the column space), so the computed residual can
    exceed the exact one by up to that angle times
    ``||y_j|| <= sqrt(k) label_bound``. The allowance

    .. math::
        a_j = \\Bigl(10^{-12} + \\frac{8\\, k\\, p\\, \\mathrm{eps}\\,
        \\sqrt{p}}{s_j}\\Bigr) \\sqrt{k}\\, \\mathrm{label\\_bound}

    is subtracted and the result floored at 0. The factor 8 leaves room
    above the backward-error estimate and above the change of ``s_j``
    itself (at most ``||E||``); ``10^{-12}`` covers the rounding of the
    projection. A bag with ``s_j <= 8 k p eps sqrt(p)`` (columns collinear
    up to rounding) gets 0. For well-conditioned designs the allowance is
    negligible: about ``1e-8 label_bound`` for ``k = 2000``, ``p = 10`` and
    ``s_j = 0.5``, against a threshold ``s`` of order ``label_bound``.

    Consequence: a bag design whose columns are exactly or nearly
    collinear, such as one-hot columns of all categories with an
    intercept, a feature constant within a bag next to the intercept, or a
    near-copy of another column, gets a residual of (about) 0, so the
    private residual check fails. Drop one category of a one-hot encoding,
    and drop or combine near-duplicate columns.

    The allowance depends on the public features and ``label_bound`` only
    (``label_bound`` bounds ``|y|``; default: the data's maximum, for
    curator diagnostics only), so the result is exactly 1-Lipschitz in each
    label: the projection depends on the public features only.

    Curator-side only: the values are private and never released.
    """
    Zu = _unit_columns(_without_repeated_constants(Z[bags]))
    U, s, _ = np.linalg.svd(Zu, full_matrices=False)
    n_nonzero_columns = np.sum(np.any(Zu != 0, axis=1), axis=1)
    del Zu
    yb = y[bags]
    coords = np.einsum("jkr,jk->jr", U, yb)
    resid = yb - np.einsum("jkr,jr->jk", U, coords)
    if label_bound is None:
        label_bound = float(np.max(np.abs(yb))) if yb.size else 0.0
    k, p = bags.shape[1], Z.shape[1]
    allowance = _residual_allowances(s, n_nonzero_columns, k, p, float(label_bound))
    # The norms in units of a power of two near the label bound (exact scaling):
    # a sum of squares in label units overflows for labels near 1e154, and an
    # infinite norm passed the test whatever its noise. An infinite allowance
    # (rounding-level s_j) gives 0.
    shift = int(np.frexp(label_bound)[1]) if label_bound > 0 else 0
    norms = np.ldexp(np.linalg.norm(np.ldexp(resid, -shift), axis=1), shift)
    return np.maximum(norms - allowance, 0.0)


def _design(X, fit_intercept):
    if fit_intercept:
        return np.column_stack([X, np.ones(X.shape[0])])
    return X


def _design_width(n_features, fit_intercept):
    return n_features + int(fit_intercept)


def _local_bags(n_bags, bag_size):
    return np.arange(n_bags * bag_size).reshape(n_bags, bag_size)


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


def _compute(tasks):
    import dask

    return dask.compute(*tasks)


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

    X = as_dask_array(X)
    if np.isnan(X.shape[0]):
        raise ValueError(
            "Dask input needs known chunk sizes: call .compute_chunk_sizes() first."
        )
    X = X.astype(np.float64)
    x_blocks, _, groups = _bag_blocks(X, None, bags)
    parts = _compute(
        dask.delayed(quiet_floats(_group_design_sums), pure=False)(xb, weights[g], fit_intercept)
        for xb, g in zip(x_blocks, groups)
    )
    return np.concatenate(parts)
