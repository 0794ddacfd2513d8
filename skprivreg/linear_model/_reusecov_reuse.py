"""Reuse of a released covariance across fits: export it, check it, add outcomes.

Mixed into :class:`~skprivreg.linear_model.ReuseCovRegressor`; the methods
use its ``_release`` (which checks the budget and spends before reading the
new outcomes) and its fitted attributes.
"""

import contextlib
import math
import warnings

import numpy as np
from sklearn.utils import check_array

from .._compat import check_is_fitted, validate_data
from .._rows import (
    as_dask_arrays,
    check_dask_dtype,
    is_dask_collection,
    same_row_chunks,
    set_dask_feature_names,
)
from .._warnings import quiet_warnings
from ..accounting import PrivacyLedger
from ..base import without_float_warnings
from ..exceptions import PrivacyLeakWarning
from ._reusecov_release import _check_dask_feature_projection

__all__ = []


class _CovarianceReuseMixin:
    """``export_covariance``, ``add_outcomes`` and ``public_view`` of ReuseCov."""

    def _check_covariance(self, cov, n, d_eff):
        expected = (
            ("n", n),
            ("d_eff", d_eff),
            ("fit_intercept", self.fit_intercept),
            ("privacy", self.privacy),
            ("neighbouring", self.neighbouring),
        )
        for name, value in expected:
            if getattr(cov, name) != value:
                raise ValueError(
                    f"The reused covariance has {name}={getattr(cov, name)!r} but this "
                    f"fit has {name}={value!r}."
                )
        if self.fit_intercept and not math.isclose(
            cov.intercept_scaling, self.intercept_scaling, rel_tol=1e-12
        ):
            raise ValueError("The reused covariance has another intercept_scaling.")
        # The raw bounds where the covariance carries its own (the augmented
        # bounds of two raw bounds far below intercept_scaling round equal).
        raw = getattr(cov, "x_bound", None)
        mine, theirs = ((self.x_bound, raw) if raw is not None
                        else (self._x_bound_eff(self.x_bound), cov.x_bound_eff))
        if mine is not None and (
            theirs is None or not math.isclose(theirs, mine, rel_tol=1e-12)
        ):
            raise ValueError(
                "The reused covariance was released with another x_bound: clipping "
                "would differ between the releases."
            )

    # -- reuse across time ---------------------------------------------------
    def export_covariance(self):
        """The released covariance, for reuse by later fits on the same rows.

        Returns
        -------
        NoisyCovariance
        """
        check_is_fitted(self)
        return self.covariance_

    @without_float_warnings
    def add_outcomes(self, X, Y_new, *, epsilon, delta):
        """Release coefficients for new outcomes with the stored covariance.

        Spends a fresh ``(epsilon, delta)`` entirely on the association of
        ``Y_new`` (same privacy notion, mechanism, bounds and ridge rule) and
        charges it to the accountant; the covariance is reused for free.
        ``privacy_spent_`` becomes the composition of every release so far
        (the covariance counted once). ``X`` must be the rows of ``fit`` in the
        same order: only n and d can be checked (a hash of X would not be
        private).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        Y_new : array-like of shape (n_samples,) or (n_samples, l_new)
        epsilon : float > 0
        delta : float in (0, 1)

        Returns
        -------
        coef_new : ndarray of shape (l_new, n_features)
        """
        check_is_fitted(self)
        if not epsilon > 0:
            raise ValueError("epsilon must be > 0.")
        if not 0 < delta < 1:
            raise ValueError("delta must lie in (0, 1).")
        if is_dask_collection(X) or is_dask_collection(Y_new):
            X, Y_new = self._validate_dask_outcomes(X, Y_new)
        else:
            X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
            # As fit checks its labels: complex data and non-numbers are
            # refused (np.asarray would drop an imaginary part), finiteness is
            # left to the pass.
            Y_new = check_array(Y_new, dtype=np.float64, ensure_2d=False,
                                ensure_all_finite=False, input_name="Y_new")
            if Y_new.ndim == 1:
                Y_new = Y_new[:, None]
            if Y_new.ndim != 2 or Y_new.shape[0] != X.shape[0]:
                raise ValueError("Y_new must have shape (n_samples, l_new).")
            # NaN or infinity in Y_new is refused by the statistics pass (the
            # scan that decides its clipping), before any spend.
        _check_dask_feature_projection(Y_new, self.privacy, self.mechanism)
        n = X.shape[0]
        if n != self.covariance_.n:
            raise ValueError(
                f"add_outcomes needs the rows of fit: n={self.covariance_.n}, got {n}."
            )
        private = not math.isinf(epsilon)
        if not private:
            warnings.warn(
                "add_outcomes(epsilon=inf) adds no noise: the new coefficients are "
                "not differentially private.",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        if self.mechanism == "proj" and Y_new.shape[1] < 100:
            warnings.warn(
                "mechanism='proj' gains with the batch size l; batches of fewer than "
                "100 outcomes lose most of the projection's advantage.",
                UserWarning,
                stacklevel=2,
            )
        reused = None if self.privacy == "label" else self.covariance_
        if reused is not None:
            self._check_covariance(reused, n, reused.d_eff)
        index = len(self.association_releases_)
        old = self.privacy_spent_
        # _release spends the new association on the accountant before reading Y_new.
        try:
            W, G_hat, release = self._release(
                X, Y_new, epsilon=float(epsilon), delta=float(delta), private=private,
                cov_rows=None, reused=reused, seed_index=2 + index,
                association_name=f"association[{index}]",
            )
        except BaseException:
            if self.privacy_spent_ is not old:
                # Spent, then failed: the ledger keeps the fit's releases and this one.
                self.privacy_spent_ = _joined(old, self.privacy_spent_)
                self.noise_reproducible_ = not self.privacy_spent_.for_publication
            raise
        self.privacy_spent_ = _joined(old, release["ledger"])
        # Reproducible noise anywhere in the fit or a later release marks the whole.
        self.noise_reproducible_ = not self.privacy_spent_.for_publication
        if self.fit_intercept:
            coef_new, intercept_new = W[:-1].T, self.intercept_scaling * W[-1]
        else:
            coef_new, intercept_new = W.T, np.zeros(W.shape[1])
        self.coef_ = np.vstack([np.atleast_2d(self.coef_), coef_new])
        self.intercept_ = np.concatenate([np.atleast_1d(self.intercept_), intercept_new])
        self.n_outputs_ = self.coef_.shape[0]
        self.association_releases_.append(self._release_summary(release, W.shape[1]))
        # The attributes that describe the last release.
        self.ridge_ = release["ridge"]
        self.noise_std_ = {**self.noise_std_, "association": release["sigma_assoc"]}
        self.sensitivity_ = {**self.sensitivity_, "association": release["sens_assoc"]}
        self.proj_mu_ = release["proj_mu"]
        self.proj_active_ = release["proj_mu"] > 0
        if self.keep_noisy_stats:
            self.noisy_xty_ = np.hstack([self.noisy_xty_, G_hat])
        return np.ascontiguousarray(coef_new)

    def _validate_dask_outcomes(self, X, Y_new):
        """Shape, dtype and feature-name checks of Dask input, without computing it.

        Finiteness is checked on the workers by the statistics pass, before
        any noise is drawn or budget spent.
        """
        # sklearn does not read a Dask frame's names (it warns that X has none);
        # they are checked by set_dask_feature_names instead. quiet_warnings, as
        # warnings.catch_warnings is not thread-safe (see skprivreg._warnings).
        with quiet_warnings() if hasattr(X, "columns") else contextlib.nullcontext():
            validate_data(self, X, skip_check_array=True, reset=False)
        set_dask_feature_names(self, X, reset=False)
        # Shapes first (an in-memory side as an array), then both on Dask.
        X, Y_new = (v if is_dask_collection(v) else np.asarray(v)
                    for v in as_dask_arrays(X, Y_new))
        if any(is_dask_collection(v) and math.isnan(v.shape[0]) for v in (X, Y_new)):
            raise ValueError(
                "Dask input needs known chunk sizes: call .compute_chunk_sizes() first."
            )
        if Y_new.ndim == 1:
            Y_new = Y_new[:, None]
        if X.ndim != 2 or Y_new.ndim != 2 or Y_new.shape[0] != X.shape[0]:
            raise ValueError("Y_new must have shape (n_samples, l_new).")
        X, Y_new = same_row_chunks(X, Y_new)
        for name, value in (("X", X), ("Y_new", Y_new)):
            check_dask_dtype(name, value.dtype)
        return X.astype(np.float64), Y_new.astype(np.float64)

    def public_view(self):
        """The DP outputs of the fit (safe to publish together)."""
        check_is_fitted(self)
        return {
            "coef_": self.coef_,
            "intercept_": self.intercept_,
            "covariance_": self.covariance_,
            "ridge_": self.ridge_,
            "cov_budget_": self.cov_budget_,
            "noise_std_": dict(self.noise_std_),
            "sensitivity_": dict(self.sensitivity_),
            "proj_mu_": self.proj_mu_,
            "privacy_spent_": self.privacy_spent_,
        }


def _joined(old, new):
    """The ledger of the fit's releases followed by a later release's.

    Not for publication if either is not (noise of the testing facility).
    """
    joined = PrivacyLedger(
        [*old.events, *new.events],
        composition=old.composition if old.composition == new.composition else "basic",
        delta=min(old.delta + new.delta, 1.0),
    )
    joined.for_publication = old.for_publication and new.for_publication
    return joined
