"""Preprocessing for private pipelines: transformers that spend nothing or spend privately."""

from ._rowwise import rowwise
from ._scalers import BoundedScaler, PrivateStandardScaler, to_unit_box

__all__ = ["BoundedScaler", "PrivateStandardScaler", "to_unit_box", "rowwise"]
