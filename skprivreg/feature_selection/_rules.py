"""Lasso selection rules evaluated on one subsample, and the Lambda <-> alpha conversion.

Each rule is a picklable callable ``rule(X_j, y_j) -> tuple`` (the sorted
selected column indices) that uses **only** the rows it is given: centring,
scaling and the penalty are computed on the subsample itself (the privacy proof
needs each subsample's answer to depend on its own rows only),
and every call builds a fresh solver (no warm start across subsamples).
"""

import math

import numpy as np
from scipy import sparse
from sklearn.linear_model import Lasso, lars_path

from ._stability import SENTINEL

__all__ = [
    "lambda_to_alpha",
    "alpha_to_lambda",
    "subsample_alpha",
    "top_s_support",
    "scaled_lasso",
    "LassoSupportRule",
    "LarsEntryRule",
]


def lambda_to_alpha(Lambda, n):
    """sklearn ``alpha`` of the paper's sum-form penalty: ``alpha = Lambda / n``.

    The paper minimises ``(1/2n)||y - X theta||^2 + (Lambda/n)||theta||_1``;
    ``Lasso(alpha)`` minimises ``(1/2n)||y - X w||^2 + alpha ||w||_1``: the same
    objective when ``alpha = Lambda/n`` (glmnet's ``lambda`` is on the alpha
    scale).
    """
    return float(Lambda) / float(n)


def alpha_to_lambda(alpha, n):
    """The paper's sum-form penalty of sklearn's ``alpha``: ``Lambda = alpha n``."""
    return float(alpha) * float(n)


def subsample_alpha(noise_level, lambda_scale, n_features, n_rows):
    """``alpha_j = lambda_scale * sigma * sqrt(ln(p) / n_j)`` for a subsample of ``n_j`` rows.

    In sum form ``Lambda_j = lambda_scale * sigma * sqrt(n_j ln p)``:
    ``lambda_scale = 8`` is the paper's Theorem 38 (``8 sigma sqrt(nq log p)``
    on a q-subsample), ``4`` its Theorem 7; the default 1 is ours (the proof
    constants zero realistic coefficients).
    """
    return float(lambda_scale) * float(noise_level) * math.sqrt(math.log(n_features) / n_rows)


def top_s_support(coef, max_features):
    """Sorted indices of the non-zeros of ``coef``, truncated to the ``s`` largest ``|coef|``.

    Ties go to the lower index (a deterministic rule of the subsample alone).
    """
    support = np.flatnonzero(coef)
    if max_features is not None and support.size > max_features:
        order = np.lexsort((support, -np.abs(coef[support])))
        support = support[order[:max_features]]
    return tuple(sorted(int(j) for j in support))


# Fixed-point iterations of the scaled Lasso; each is one warm-started Lasso
# fit on the same subsample (a warm start inside one subsample is local).
_SCALED_LASSO_MAX_ITER = 10
_SCALED_LASSO_RTOL = 1e-4


def scaled_lasso(model, X_j, y_j, lambda_scale, fit_intercept):
    """Fit ``model`` (a ``Lasso``) with a noise level estimated from these rows only.

    The scaled Lasso (Sun & Zhang, "Scaled sparse linear regression",
    Biometrika 2012), with the residual degrees of freedom of Reid, Tibshirani
    & Friedman (Statistica Sinica 2016): start from
    ``sigma_0 = ||y - mean||/sqrt(n_j)`` (the residual of the empty model) and
    iterate

    .. math::
        \\alpha_t = c\\,\\hat\\sigma_t \\sqrt{\\ln p / n_j},\\qquad
        \\hat\\sigma_{t+1} = \\frac{\\lVert y - X\\hat\\theta(\\alpha_t)\\rVert_2}
        {\\sqrt{n_j - |\\hat S_t| - [\\text{intercept}]}}

    (``c = lambda_scale``) until ``sigma`` changes by less than a relative
    ``1e-4`` or 10 fits. Everything is computed from ``(X_j, y_j)``, so the
    rule stays a function of its subsample alone. Returns the fitted
    ``model``, or ``None`` when the subsample cannot estimate a noise level
    (no residual degrees of freedom): the caller votes ``SENTINEL``.
    """
    n_rows, n_features = X_j.shape
    centred = y_j - y_j.mean() if fit_intercept else y_j
    sigma = float(np.linalg.norm(centred)) / math.sqrt(n_rows)
    if not sigma > 0:
        return None
    root = math.sqrt(math.log(n_features) / n_rows) if n_features > 1 else 0.0
    model.set_params(warm_start=True)
    for _ in range(_SCALED_LASSO_MAX_ITER):
        model.set_params(alpha=float(lambda_scale) * sigma * root)
        model.fit(X_j, y_j, check_input=sparse.issparse(X_j))
        coef = np.ravel(model.coef_)
        dof = n_rows - np.count_nonzero(coef) - int(fit_intercept)
        if dof <= 0:
            return None
        fitted = np.asarray(X_j @ coef).ravel()
        if fit_intercept:
            # Lasso may have centred its private copy of X_j in place:
            # centring both sides again gives the same residual either way.
            residual = centred - (fitted - fitted.mean())
        else:
            residual = y_j - fitted
        new_sigma = float(np.linalg.norm(residual)) / math.sqrt(dof)
        if not new_sigma > 0:
            return None
        converged = abs(new_sigma - sigma) <= _SCALED_LASSO_RTOL * sigma
        sigma = new_sigma
        if converged:
            break
    return model


def _prepare(X_j, y_j, fit_intercept, standardize, dense):
    """Subsample-local centring and scaling (never statistics of other rows)."""
    if sparse.issparse(X_j) and dense:
        X_j = X_j.toarray()
    if sparse.issparse(X_j):
        X_j = sparse.csc_matrix(X_j)
        if standardize:
            mean = np.asarray(X_j.mean(axis=0)).ravel()
            sq = np.asarray(X_j.multiply(X_j).mean(axis=0)).ravel()
            scale = np.sqrt(np.maximum(sq - mean**2, 0.0))
            scale[scale == 0] = 1.0
            X_j = sparse.csc_matrix(X_j.multiply(1.0 / scale))
        return X_j, np.asarray(y_j, dtype=X_j.dtype)
    # Centring and scaling work in place on a private copy; without them the
    # caller's array is used as is (Lasso(copy_X=False) and lars_path(copy_X=True)
    # never write to it then), which saves a copy per subsample.
    dtype = np.float32 if X_j.dtype == np.float32 else np.float64
    in_place = standardize or fit_intercept
    X_j = np.array(X_j, dtype=dtype, order="F", copy=True if in_place else None)
    y_j = np.array(y_j, dtype=X_j.dtype)
    if standardize:
        scale = X_j.std(axis=0)
        scale[scale == 0] = 1.0
        X_j /= scale
    if fit_intercept and dense:
        # lars_path has no intercept: centre on the subsample's own means.
        X_j -= X_j.mean(axis=0)
        y_j = y_j - y_j.mean()
    return X_j, y_j


class LassoSupportRule:
    """The paper's ``f``: support of ``Lasso(alpha_j)`` on the subsample, top-``s`` truncated.

    Parameters
    ----------
    alpha : float or None
        sklearn-scale penalty used on every subsample (``Lambda_j = alpha n_j``).
    noise_level : float or None
        Public ``sigma`` (y units) for ``alpha_j = lambda_scale sigma sqrt(ln p / n_j)``
        when ``alpha`` is None. With both None, ``sigma`` is estimated from
        the subsample's own rows by the scaled Lasso (:func:`scaled_lasso`);
        a subsample without residual degrees of freedom votes ``SENTINEL``.
    lambda_scale : float
    max_features : int or None
        ``s``: keep the ``s`` largest ``|coef|`` (ties to the lower index).
    fit_intercept : bool
        Centre inside the subsample (sklearn's Lasso intercept).
    standardize : bool
        Scale the subsample's columns by their own standard deviation.
    tol, max_iter : float, int
        Coordinate descent settings (``selection='cyclic'``, deterministic).
    """

    def __init__(
        self,
        alpha=None,
        noise_level=None,
        lambda_scale=1.0,
        max_features=None,
        fit_intercept=False,
        standardize=False,
        tol=1e-6,
        max_iter=5000,
    ):
        self.alpha = alpha
        self.noise_level = noise_level
        self.lambda_scale = lambda_scale
        self.max_features = max_features
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.tol = tol
        self.max_iter = max_iter

    def penalty(self, n_features, n_rows):
        """The sklearn-scale ``alpha_j`` for a subsample of ``n_rows`` rows.

        ``None`` when it is estimated from the subsample (no ``alpha``, no
        ``noise_level``).
        """
        if self.alpha is not None:
            return float(self.alpha)
        if self.noise_level is None:
            return None
        return subsample_alpha(self.noise_level, self.lambda_scale, n_features, n_rows)

    def __call__(self, X_j, y_j):
        n_rows, n_features = X_j.shape
        if n_rows < 2:
            return SENTINEL
        X_j, y_j = _prepare(X_j, y_j, self.fit_intercept, self.standardize, dense=False)
        alpha = self.penalty(n_features, n_rows)
        model = Lasso(
            alpha=1.0 if alpha is None else alpha,
            fit_intercept=self.fit_intercept,
            selection="cyclic",
            warm_start=False,
            tol=self.tol,
            max_iter=self.max_iter,
            copy_X=False,
        )
        if alpha is None:
            model = scaled_lasso(model, X_j, y_j, self.lambda_scale, self.fit_intercept)
            if model is None:
                return SENTINEL
        else:
            # check_input=False skips a second validation; X_j is a fresh
            # Fortran-ordered copy (or CSC) of this subsample only.
            model.fit(X_j, y_j, check_input=sparse.issparse(X_j))
        return top_s_support(np.ravel(model.coef_), self.max_features)


class LarsEntryRule:
    """Tuning-free ``f``: the first ``s`` variables to enter the Lasso path of the subsample.

    Walks the breakpoints of ``lars_path(method='lasso', max_iter=4s)`` by
    decreasing penalty and returns the first active set of size ``>= s``
    (top-``s`` by ``|coef|`` if several variables enter together), or the
    final support if the path ends first. Under the conditions of the
    paper's Theorem 7 the primal-dual witness gives ``supp(theta(alpha))
    subset Gamma`` for all penalties above the one where the support is
    ``Gamma``, so the first time the path has ``s`` actives it equals
    ``Gamma``; no noise level is needed.
    """

    def __init__(self, max_features, fit_intercept=False, standardize=False):
        if max_features is None or max_features < 1:
            raise ValueError("LarsEntryRule needs max_features >= 1.")
        self.max_features = max_features
        self.fit_intercept = fit_intercept
        self.standardize = standardize

    def __call__(self, X_j, y_j):
        if X_j.shape[0] < 2:
            return SENTINEL
        X_j, y_j = _prepare(X_j, y_j, self.fit_intercept, self.standardize, dense=True)
        s = int(self.max_features)
        if s == 1:
            # The first variable on the path is the largest |X_j^T y| (ties to
            # the lower index, as in lars_path); none if y is orthogonal to X.
            scores = np.abs(X_j.T @ y_j)
            return (int(np.argmax(scores)),) if scores.max() > 0 else ()
        X_j = X_j.astype(np.float64, copy=False)
        y_j = y_j.astype(np.float64, copy=False)
        # The path is computed step by step, so its first s steps do not
        # depend on max_iter: try s steps first (the usual case, no variable
        # leaves), and 4s only when a variable left on the way.
        for max_iter in (s, 4 * s):
            _, _, coefs = lars_path(X_j, y_j, method="lasso", max_iter=max_iter, copy_X=True)
            reached = np.flatnonzero(np.count_nonzero(coefs, axis=0) >= s)
            if reached.size:
                return top_s_support(coefs[:, reached[0]], s)
        return top_s_support(coefs[:, -1], s)
