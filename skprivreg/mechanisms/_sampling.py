"""Laplace and exponential samplers whose tails reach as far as the distribution.

Part of :mod:`skprivreg.mechanisms` (import from there).

A double drawn by :meth:`numpy.random.Generator.random` lies on the grid
``k 2^-53``, so an inverse CDF of one uniform (NumPy's ``laplace`` included)
has no value beyond about ``36.7`` scales and atoms at its ends. A private test
whose threshold lies beyond (a propose-test-release at ``delta`` below about
``2^-53 (e^epsilon - 1)``, a Laplace test ``Lap > ln(1/delta)/epsilon`` at
``delta`` below ``1e-16``) then passes with probability exactly 0 on one
dataset and with a positive one on its neighbour. Here a magnitude is an
integer part counted by Bernoulli trials (no bound) plus a fraction in
``[0, 1)`` by inverse CDF, so every interval gets its probability up to a
relative error of about ``(1 + magnitude) 2^-51``.
"""

import math

import numpy as np

__all__ = ["exponential_magnitudes", "laplace"]

_EXP_MINUS_ONE = math.exp(-1.0)


def exponential_magnitudes(a, rng, count):
    """``count`` draws of ``M ~ Exp(1)`` conditioned on ``[0, a]`` (``a = inf``: none).

    For ``a >= 1``: ``M = K + F``, with ``P(K >= k) = e^-k`` counted by
    Bernoulli trials of probability ``e^-1`` (each is off by a relative
    ``2^-53`` at most) and ``F ~ Exp(1)`` conditioned on ``[0, 1)`` by its
    inverse CDF, independent (the exponential forgets); draws above ``a`` are
    drawn again (at most a share ``e^-1`` of them). For ``a < 1``: the inverse
    CDF on ``[0, a)``.
    """
    if not a > 0:
        raise ValueError("The truncation a must be > 0.")
    if a < 1.0:
        return -np.log1p(-rng.random(count) * -math.expm1(-a))
    out = np.empty(count)
    todo = np.arange(count)
    while todo.size:
        k = np.zeros(todo.size)
        active = np.arange(todo.size)
        while active.size:
            active = active[rng.random(active.size) < _EXP_MINUS_ONE]
            k[active] += 1.0
            active = active[k[active] <= a]  # above a: drawn again anyway
        m = k - np.log1p(-rng.random(todo.size) * -math.expm1(-1.0))
        inside = m <= a
        out[todo[inside]] = m[inside]
        todo = todo[~inside]
    return out


def laplace(scale, rng, size=None, half_width=math.inf):
    """``Laplace(0, scale)`` draws (conditioned on ``[-half_width, half_width]``).

    A fair sign (exact on the ``2^-53`` grid) times ``scale M`` with ``M`` from
    :func:`exponential_magnitudes`; a truncated draw is clipped to
    ``[-half_width, half_width]`` as a floating-point guard. Returns a float
    when ``size`` is None.
    """
    if not scale > 0 or not half_width > 0:
        raise ValueError("scale and half_width must be > 0.")
    count = 1 if size is None else int(np.prod(size))
    magnitude = exponential_magnitudes(half_width / scale, rng, count)
    sign = np.where(rng.random(count) < 0.5, -1.0, 1.0)
    z = sign * (scale * magnitude)
    if math.isfinite(half_width):
        z = np.clip(z, -half_width, half_width)
    return float(z[0]) if size is None else z.reshape(size)
