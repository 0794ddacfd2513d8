"""Private pipelines: composed accounting and a guard against steps that learn without a guarantee.

The implementation lives in :mod:`skprivreg._pipeline`; this module is its public face.
"""

from ._pipeline import (
    PrivatePipeline,
    leaking_steps,
    make_private_pipeline,
    privacy_ledgers,
    privacy_spent,
)

__all__ = [
    "PrivatePipeline",
    "make_private_pipeline",
    "privacy_spent",
    "privacy_ledgers",
    "leaking_steps",
]
