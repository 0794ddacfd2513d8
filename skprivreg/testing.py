"""Facilities for testing code that uses skprivreg; never for publishing.

:func:`reproducible_noise` makes the noise of private fits repeatable so that
a test or a documentation example can show fixed numbers. Everything fitted
inside it is marked as not differentially private. The setting is local to
the thread that enters the block: fits in other threads keep fresh noise.
"""

from ._random import noise_is_reproducible, reproducible_noise

__all__ = ["reproducible_noise", "noise_is_reproducible"]
