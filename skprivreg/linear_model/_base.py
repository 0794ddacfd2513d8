"""Numerical pieces shared by the linear estimators (pure functions + a predict mixin)."""

import numpy as np
from scipy import linalg

from .._compat import check_is_fitted, validate_data
from .._rows import as_dask_array, is_dask_collection, set_dask_feature_names

__all__ = [
    "augment_intercept",
    "split_intercept",
    "solve_psd_repaired",
    "LinearPredictMixin",
]


def augment_intercept(X, intercept_scaling=1.0):
    """Append a constant column of value ``intercept_scaling`` to ``X``.

    This is a fixed per-row map, so neighbouring datasets stay neighbours
    (centering with data means would not: it changes every row).
    """
    X = np.asarray(X, dtype=np.float64)
    return np.hstack([X, np.full((X.shape[0], 1), float(intercept_scaling))])


def split_intercept(W, fit_intercept, intercept_scaling=1.0, single_output=True):
    """Turn a (p, l) solution on the (possibly augmented) design into ``coef_, intercept_``.

    ``coef_`` has shape (d,) for single output, (l, d) otherwise (like
    ``LinearRegression``); ``intercept_`` is a float or shape (l,).
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim == 1:
        W = W[:, None]
    if fit_intercept:
        coef, intercept = W[:-1].T, intercept_scaling * W[-1]
    else:
        coef, intercept = W.T, np.zeros(W.shape[1])
    if single_output:
        return coef[0].copy(), float(intercept[0])
    return coef.copy(), intercept.copy()


def solve_psd_repaired(M, B, floor):
    """Solve ``M W = B`` after projecting symmetric ``M`` onto ``{M >= floor I}``.

    ``M`` is a noisy (ridge-regularised) Gram matrix. Its eigenvalues are
    clipped at ``floor > 0``: the exact Frobenius projection onto the convex
    set ``{M >= floor I}``, which contains the noiseless ``X^T X + floor I``;
    it is post-processing and never increases the distance to it. It keeps
    the estimate from exploding when noise makes ``M`` indefinite (the
    failure that gives diffprivlib's LinearRegression MSE ~1e7).

    Parameters
    ----------
    M : ndarray (p, p)
    B : ndarray (p,) or (p, l)
    floor : float >= 0
        ``0`` is allowed only for noiseless statistics: the minimum-norm
        solution (pseudo-inverse) is returned, as ``lstsq`` would.

    Returns
    -------
    W : ndarray, shape of ``B``
    """
    if floor < 0:
        raise ValueError("floor must be >= 0.")
    M = 0.5 * (M + M.T)
    eigvals, eigvecs = linalg.eigh(M)
    if floor > 0:
        inv = 1.0 / np.maximum(eigvals, floor)
    else:
        # Noiseless statistics and no ridge: the minimum-norm least-squares
        # solution, with lstsq's cut-off for numerically zero eigenvalues.
        cutoff = max(M.shape) * np.finfo(np.float64).eps * max(eigvals.max(), 0.0)
        keep = eigvals > cutoff
        inv = np.where(keep, 1.0 / np.where(keep, eigvals, 1.0), 0.0)
    projected = eigvecs.T @ B
    projected = projected * (inv if B.ndim == 1 else inv[:, None])
    return eigvecs @ projected


class LinearPredictMixin:
    """``predict(X) = X @ coef_.T + intercept_``, with sklearn's input checks.

    Prediction is post-processing of the released coefficients: inputs are
    not clipped and nothing is spent. Fitted means ``coef_`` exists: a
    private fit that failed after its spend keeps ``privacy_spent_`` (the
    spend happened) but is not fitted.
    """

    def __sklearn_is_fitted__(self):
        return hasattr(self, "coef_")

    def predict(self, X):
        """Predict with the private linear model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            # Lazy, blockwise: the prediction of each row depends on that row only.
            validate_data(self, X, skip_check_array=True, reset=False)
            set_dask_feature_names(self, X, reset=False)
            X = as_dask_array(X)
            return X.astype(np.float64) @ np.asarray(self.coef_).T + self.intercept_
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ np.asarray(self.coef_).T + self.intercept_
