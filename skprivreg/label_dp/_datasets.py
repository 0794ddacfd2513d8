"""The released datasets of weighted LBA and noisy weighted LLP, savable without pickle."""

import json
from dataclasses import dataclass, field, fields

import numpy as np

from .._rows import is_dask_collection
from ._bags import _llp_design_dask, lba_aggregate

__all__ = ["AggregatedDataset", "LLPDataset"]


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
