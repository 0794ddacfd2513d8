"""Simulated regression problems with known coefficients."""

import numpy as np

from .._random import public_generators

__all__ = ["make_linear_regression"]


def make_linear_regression(
    n_samples,
    n_features,
    *,
    n_outputs=1,
    noise=1.0,
    intercept=0.0,
    coef_scale=0.75,
    condition_number=1.0,
    random_state=None,
    return_coef=False,
):
    """Gaussian design, linear response: ``y = X beta + intercept + noise * N(0, 1)``.

    ``X ~ N(0, Sigma)`` with ``Sigma = Q diag(s) Q^T``, ``s`` log-spaced from
    1 down to ``1/condition_number`` and ``Q`` a random rotation, so that
    ``cond(Sigma) = condition_number`` (1 gives ``Sigma = I``). The
    coefficients are drawn once from ``N(0, coef_scale^2)``.

    Parameters
    ----------
    n_samples, n_features : int
    n_outputs : int, default=1
        ``y`` is 1-D when 1, else ``(n_samples, n_outputs)``.
    noise : float, default=1.0
        Standard deviation of the response noise.
    intercept : float, default=0.0
    coef_scale : float, default=0.75
    condition_number : float >= 1, default=1.0
    random_state : None, int or numpy.random.Generator
    return_coef : bool, default=False
        Also return ``beta`` (shape ``(n_features,)`` or ``(n_outputs, n_features)``).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
    coef : ndarray, only if ``return_coef``
    """
    if condition_number < 1:
        raise ValueError("condition_number must be >= 1.")
    rngs = public_generators(random_state, ("design", "coef", "noise"))
    scales = np.logspace(0.0, -np.log10(condition_number), n_features)
    X = rngs["design"].normal(size=(n_samples, n_features)) * np.sqrt(scales)
    if condition_number > 1:
        rotation, _ = np.linalg.qr(rngs["design"].normal(size=(n_features, n_features)))
        X = X @ rotation.T
    coef = rngs["coef"].normal(scale=coef_scale, size=(n_outputs, n_features))
    y = X @ coef.T + intercept + noise * rngs["noise"].normal(size=(n_samples, n_outputs))
    if n_outputs == 1:
        y, coef = y[:, 0], coef[0]
    return (X, y, coef) if return_coef else (X, y)
