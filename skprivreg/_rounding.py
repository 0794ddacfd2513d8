"""Bounds rounded up and budget shares rounded down, each from its exact value.

Public in :mod:`skprivreg.mechanisms` (import from there); also used by
:mod:`skprivreg.accounting` for its totals. Floating-point
arithmetic rounds to nearest, so a product, a sum of squares or a square root
of floats can land an ulp below the exact value it stands for; a sensitivity
or a noise scale rounded that way calibrates less noise than the proof asks
for. These functions take the exact value (floats are exact rationals, and
:class:`~fractions.Fraction` arithmetic on them is exact) and return the
smallest float at least it.

Budget shares go the other way: a share of epsilon, delta or a GDP mu
rounded to nearest can land an ulp above the exact share, and shares whose
exact sum (or, for mu, root of the sum of squares) exceeds the budget spend
more than it. The ``*_at_most`` functions return the largest float at most
the exact value.
"""

import decimal
import functools
import math
import numbers
import sys
from fractions import Fraction

__all__ = [
    "exact_fraction",
    "sqrt_at_least",
    "value_at_least",
    "hypot_at_least",
    "sqrt_times_at_least",
    "quotient_at_least",
    "width_at_least",
    "value_at_most",
    "sqrt_at_most",
    "product_at_most",
    "difference_at_most",
    "shares_at_most",
]


def exact_fraction(value):
    """``value`` as an exact :class:`~fractions.Fraction`.

    Python and NumPy integers and floats (float32 included) are exact
    rationals; a :class:`~fractions.Fraction` or :class:`~decimal.Decimal` is
    kept exactly. A NumPy integer is converted to a Python one first:
    ``Fraction(np.int64(k))`` keeps a fixed-width numerator whose products
    overflow silently. Infinity and NaN raise ``ValueError``.
    """
    if isinstance(value, Fraction):
        return value
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"A bound must be finite to be computed exactly; got {value!r}.")
        return Fraction(value)
    if not isinstance(value, float) and hasattr(value, "as_integer_ratio"):
        # A NumPy float of any width (np.longdouble has more digits than a
        # Python float: float() would round it) is its exact ratio.
        try:
            return Fraction(*value.as_integer_ratio())
        except (OverflowError, ValueError):
            raise ValueError(
                f"A bound must be finite to be computed exactly; got {value!r}.") from None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"A bound must be finite to be computed exactly; got {value!r}.")
    return Fraction(value)


#: The square of the largest float: a root above it is infinity.
_MAX_SQUARE = Fraction(sys.float_info.max) ** 2


@functools.lru_cache(maxsize=4096)  # pure, and fits ask for the same few bounds
def sqrt_at_least(value):
    """The smallest float at least :math:`\\sqrt{v}` (``math.sqrt`` rounds to nearest,
    below the exact root for some ``v``, e.g. 3): a bound such as the norm
    :math:`\\sqrt{d}` of a row in :math:`[-1, 1]^d` must not be rounded down.

    ``value`` may be an exact :class:`~fractions.Fraction`, for a bound that
    floating-point arithmetic would round before the root: the norm
    :math:`\\sqrt{B^2 + c^2}` of a row with its intercept column is
    ``sqrt_at_least(Fraction(B) ** 2 + Fraction(c) ** 2)`` (``math.hypot``
    rounds to nearest), and :math:`\\sqrt{l}\\,x` is
    ``sqrt_at_least(l * Fraction(x) ** 2)``.
    """
    exact = exact_fraction(value)
    if exact <= 0:
        return math.sqrt(exact)  # 0.0, or math's error for a negative value
    if exact > _MAX_SQUARE:
        return math.inf
    # A first root within an ulp or two: the value scaled exactly by a power
    # of 4 into the range of floats, then the root scaled back.
    k = (exact.numerator.bit_length() - exact.denominator.bit_length()) // 2
    root = math.ldexp(math.sqrt(exact / Fraction(4) ** k), k)
    while Fraction(root) ** 2 < exact:
        root = math.nextafter(root, math.inf)
    while root > 0 and Fraction(math.nextafter(root, 0.0)) ** 2 >= exact:
        root = math.nextafter(root, 0.0)
    return root


@functools.lru_cache(maxsize=4096)
def value_at_least(value):
    """The smallest float at least ``value`` (an exact :class:`~fractions.Fraction`):
    a bound such as :math:`B^2 + c^2` must not be rounded down, as ``B**2 + c**2``
    in floating point may be. A value beyond the largest float gives ``inf``."""
    exact = exact_fraction(value)
    try:
        rounded = float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -sys.float_info.max
    if Fraction(rounded) < exact:
        rounded = math.nextafter(rounded, math.inf)
    return rounded


def hypot_at_least(*values):
    """The smallest float at least the Euclidean norm :math:`\\sqrt{\\sum_k v_k^2}`
    (``math.hypot`` rounds to nearest): the norm bound of a row ``(x, c)``
    whose features have norm at most ``B`` is ``hypot_at_least(B, c)``.
    An infinite value gives ``inf``."""
    if any(math.isinf(v) for v in values):
        return math.inf
    return sqrt_at_least(sum(exact_fraction(v) ** 2 for v in values))


def sqrt_times_at_least(k, value):
    """The smallest float at least :math:`\\sqrt{k}\\, v` for ``k >= 0`` and ``v >= 0``:
    the norm bound :math:`\\sqrt{l}\\, b` of a row of ``l`` entries in
    :math:`[-b, b]`. An infinite ``v`` gives ``inf`` (for ``k > 0``)."""
    if math.isinf(value) and k > 0:
        return math.inf
    return sqrt_at_least(exact_fraction(k) * exact_fraction(value) ** 2)


def quotient_at_least(numerator, denominator):
    """The smallest float at least ``numerator / denominator`` (positive
    ``denominator``): a noise scale ``sigma = sensitivity / mu`` rounded to
    nearest can fall an ulp below the exact quotient, which is then
    mu-GDP only for a larger ``mu``. Non-finite operands give the float
    quotient (``inf / mu = inf``, ``x / inf = 0``)."""
    if not (math.isfinite(numerator) and math.isfinite(denominator)):
        return float(numerator) / float(denominator)
    return value_at_least(exact_fraction(numerator) / exact_fraction(denominator))


def width_at_least(low, high):
    """The smallest float at least the width ``high - low`` of a range (a
    difference of floats rounds to nearest): the sensitivity of a label
    clipped to ``[low, high]``. A width beyond the largest float gives ``inf``."""
    return value_at_least(exact_fraction(high) - exact_fraction(low))


def value_at_most(value):
    """The largest float at most ``value`` (an exact :class:`~fractions.Fraction`):
    a budget share must not be rounded up. A value beyond the largest float
    gives the largest float."""
    exact = exact_fraction(value)
    try:
        rounded = float(exact)
    except OverflowError:
        return sys.float_info.max if exact > 0 else -math.inf
    if Fraction(rounded) > exact:
        rounded = math.nextafter(rounded, -math.inf)
    return rounded


def sqrt_at_most(value):
    """The largest float at most :math:`\\sqrt{v}` (``v >= 0``): a GDP share
    :math:`\\mu \\sqrt{w}` must not exceed its exact value."""
    root = sqrt_at_least(value)
    if math.isinf(root) or Fraction(root) ** 2 == exact_fraction(value):
        return root if math.isfinite(root) else sys.float_info.max
    return math.nextafter(root, 0.0)


def product_at_most(fraction, total):
    """The largest float at most ``fraction * total``: a share of a budget
    (a product of floats rounds to nearest, possibly up). ``total=inf``
    gives ``inf`` for a positive ``fraction``."""
    if math.isinf(total) and fraction > 0:
        return float(total)
    return value_at_most(exact_fraction(fraction) * exact_fraction(total))


def difference_at_most(total, *spent):
    """The largest float at most ``total - sum(spent)``: the budget left after
    finite spends (a difference of floats rounds to nearest, possibly up).
    ``total=inf`` gives ``inf``."""
    if math.isinf(total):
        return float(total)
    return value_at_most(exact_fraction(total) - sum(exact_fraction(s) for s in spent))


def shares_at_most(total, weights):
    """``total * w_k / sum(w)`` for each weight, each the largest float at most
    its exact value, so the shares' exact sum never exceeds ``total``
    (rounded to nearest, ``0.3 * (1/3)`` three times sums above ``0.3``).
    ``total=inf`` (non-private) gives ``inf`` for every positive weight."""
    exact = [exact_fraction(w) for w in weights]
    if any(w < 0 for w in exact) or not sum(exact) > 0:
        raise ValueError("weights must be non-negative numbers with a positive sum.")
    if math.isinf(total):
        return [float(total) if w > 0 else 0.0 for w in exact]
    whole, t = sum(exact), exact_fraction(total)
    return [value_at_most(t * w / whole) for w in exact]
