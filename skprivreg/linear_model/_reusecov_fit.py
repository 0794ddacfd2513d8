"""ReuseCov's releases in order: budget check, passes, spend, bounds, covariance, associations.

Mixed into :class:`~skprivreg.linear_model.ReuseCovRegressor` (its ``fit``
and ``add_outcomes`` call ``_release``). The order is the guarantee's: the
planned ledger is checked before any data value is read, bad input (NaN,
a public side too large for the calibration) is refused by passes that
release nothing, and the spend is recorded before any secret draw. The
numerical steps are the pure functions of :mod:`._reusecov_stats`,
:mod:`._reusecov_plan` and :mod:`._reusecov_release`.
"""

import math

import numpy as np

from .._random import secret_seed_sequence
from ..accounting import PrivacyLedger
from ..bounds import computed_norm_bound
from ..exceptions import ConfigurationError
from ..mechanisms import gram_with_exact_corner, hypot_at_least, sqrt_times_at_least
from ._private_bounds import (
    LARGEST_BOUND_SCALE,
    SMALLEST_BOUND_SCALE,
    check_bound_scales,
    check_data_bounds_supported,
    count_bounds,
    planned_bound_events,
    release_bounds,
)
from ._reusecov_plan import _plan_ledger, plan_reusecov
from ._reusecov_release import (
    NoisyCovariance,
    _child_seed,
    _feature_projection,
    _label_projection,
    psd_factor,
    release_associations,
)
from ._reusecov_stats import statistics_source, sufficient_statistics
from ._ridge_rule import released_ridge

__all__ = []

# Child of the secret root seed for the bound estimates (0: covariance,
# 1: subsample, 2, 3, ...: association releases).
_BOUNDS_CHILD = 1 << 30



def _check_public_side(stats, privacy):
    """Refuse a public side too large for the calibration (label DP: X; feature DP: Y).

    A public side is not clipped, and its measured scale (largest row norm)
    enters the sensitivities as a declared bound does: above
    :data:`~skprivreg.linear_model._private_bounds.LARGEST_BOUND_SCALE`, or
    with a non-finite ``X^T X``, the calibration would overflow; below
    :data:`~skprivreg.linear_model._private_bounds.SMALLEST_BOUND_SCALE`
    (a side of zeros excepted) the squares of its entries round towards 0,
    and the noise with them. These are
    facts of the public side only. It runs before the spend: with estimated
    bounds, the counting pass that precedes their spend counts the public
    side's rows above the limit first.
    """
    name, scale, largest = (
        ("X", stats.x_max_norm, stats.x_abs_max) if privacy == "label"
        else ("Y", stats.y_max_norm, stats.y_abs_max) if privacy == "feature"
        else (None, None, None))
    if name is None:
        return
    finite_gram = privacy != "label" or stats.xtx is None or bool(np.isfinite(stats.xtx).all())
    if scale is not None and not (scale <= LARGEST_BOUND_SCALE and finite_gram):
        raise _public_side_error(privacy,
                                 f"{scale:g}" if math.isfinite(scale) else "overflows float64")
    # A side of zeros is not refused: its product with the private side is 0,
    # whatever that holds (no noise is needed). A side whose entries are tiny but
    # not all 0 is: its computed norms (their squares) round towards 0.
    if scale is not None and not scale >= SMALLEST_BOUND_SCALE and largest != 0:
        raise _public_side_error(privacy, f"{scale:g}", too_small=True)


def _public_side_error(privacy, size, too_small=False):
    """The ``ValueError`` of a public side too large (or too small) for the calibration
    (public facts)."""
    name = "X" if privacy == "label" else "Y"
    if too_small:
        # Squares of such entries round towards 0 (and the norms, sensitivities
        # and noise with them) while what is released stays data-dependent.
        return ValueError(
            f"Under {privacy} DP the public {name} is used as it is, and its largest row "
            f"norm ({size}) is too small for the noise calibration: at least "
            f"{SMALLEST_BOUND_SCALE:g}"
            + (" (with the intercept column)" if name == "X" else "")
            + f". Rescale {name}" + (" or intercept_scaling." if name == "X" else ".")
        )
    gram = " (with the intercept column), and X^T X must be finite" if name == "X" else ""
    return ValueError(
        f"Under {privacy} DP the public {name} is used as it is, and its largest row "
        f"norm ({size}) is too large for the noise calibration: at most "
        f"{LARGEST_BOUND_SCALE:g}{gram}. Rescale {name}"
        + (" or intercept_scaling." if name == "X" else ".")
    )


class _ReleaseMixin:
    """``_release`` of :class:`~skprivreg.linear_model.ReuseCovRegressor` and its helpers."""

    @staticmethod
    def _release_summary(release, n_outputs):
        return {
            "n_outputs": n_outputs,
            "ridge": release["ridge"],
            "sigma": release["sigma_assoc"],
            "sensitivity": release["sens_assoc"],
            "proj_mu": release["proj_mu"],
        }

    def _check_bounds_held(self, bound_eps):
        """Refuse a private release without a bound its notion clips to (declared, or
        released by this call): the rows would be clipped to a scale of 0 and the
        release would get no noise. A model fitted with ``epsilon=inf`` and no
        bound holds none for :meth:`add_outcomes`. Before any spend."""
        needs = {"x_bound": (self.privacy != "label", self.x_bound_),
                 "y_bound": (self.privacy != "feature", self.y_bound_)}
        missing = [name for name, (needed, held) in needs.items()
                   if needed and held is None and name not in bound_eps]
        if missing:
            raise ConfigurationError(
                f"{type(self).__name__}: a private release under the {self.privacy!r} notion "
                f"clips to {' and '.join(missing)}, which this model does not hold (it was "
                "fitted with epsilon=inf without declaring it). Declare it and fit again "
                "before adding outcomes. Nothing was spent."
            )

    def _scales(self, n_outputs, x_max, y_max, y_abs=None):
        """(x_scale, y_row_scale, w_scale) for sensitivities and heuristics."""
        if self.privacy == "label":
            x_scale = x_max
        else:
            x_scale = self._x_bound_eff(self.x_bound_)
        if self.privacy == "feature":
            y_row = y_max
            y_entry = y_abs
        else:
            y_row = (None if self.y_bound_ is None
                     else sqrt_times_at_least(n_outputs, self.y_bound_))
            y_entry = self.y_bound_
        if self.w_bound is not None:
            w_scale = float(self.w_bound)
        elif x_scale and y_entry:
            w_scale = y_entry / x_scale
        else:
            w_scale = 1.0
        return (x_scale or 0.0), (y_row or 0.0), w_scale

    def _release(self, X, Y, *, epsilon, delta, private, cov_rows, reused, seed_index,
                 association_name=None, bound_eps=None, labels=None):
        """The missing bounds, one covariance (unless exact or reused) and one association.

        ``bound_eps`` (from :func:`bound_epsilons`) names the bounds to
        estimate; they are released after the spend and stored in
        ``x_bound_`` / ``y_bound_``. ``labels``: ``Y`` as the passes read
        it (the 1-D labels of one outcome), or None for ``Y``. Returns
        ``(W, G_hat, info)``;
        ``info['ledger']`` holds the new releases only. Sets ``covariance_``.
        """
        n, d = X.shape
        n_outputs = Y.shape[1]
        d_eff = d + int(self.fit_intercept)
        bound_eps = bound_eps or {}
        notions = self._bound_notions()
        bound_events = planned_bound_events(bound_eps, notions=notions,
                                            neighbouring=self.neighbouring)
        source = statistics_source(X, Y if labels is None else labels, verbose=self.verbose,
                                   name=type(self).__name__)
        exact_cov = self.privacy == "label"
        plan_args = dict(
            n=n, d_eff=d_eff, n_outputs=n_outputs, epsilon=epsilon, delta=delta,
            privacy=self.privacy, mechanism=self.mechanism,
            composition=self.composition, neighbouring=self.neighbouring,
            x_scale=hypot_at_least(1.0, self._intercept()), y_row_scale=1.0, w_scale=1.0,
            x_raw=None if self.privacy == "label" else 1.0,
            cov_budget=self.cov_budget, cov_rows=cov_rows,
            reused_sigma_cov=None if reused is None else reused.sigma, ridge=self.ridge,
            intercept=self._intercept(),
        )
        # Budget check before any data value is read: the planned (epsilon,
        # delta) does not depend on the public scales, which the pass measures.
        before_data = plan_reusecov(**plan_args)
        planned = _plan_ledger(before_data, delta, private, association_name, bound_events)
        if private:
            self._check_bounds_held(bound_eps)
        check_bound_scales(None if self.privacy == "label" else self.x_bound_,
                           None if self.privacy == "feature" else self.y_bound_, n_outputs)
        self._check_budget(planned)
        if bound_eps:
            # A counting pass (releases nothing, refuses NaN), the spend, then
            # the private bounds: the clipping of the statistics pass needs them.
            public = {"label": "X", "feature": "Y"}.get(self.privacy)
            # The public side's rows above the calibration's limit are counted
            # in the same pass (with a margin for the rounding of the norms
            # the statistics pass computes), so a public side too large for
            # the calibration is refused before the spend here too.
            counts = count_bounds(None, None, source, public=public,
                                  public_limit=LARGEST_BOUND_SCALE * (1.0 - 1e-12),
                                  public_floor=SMALLEST_BOUND_SCALE * (1.0 + 1e-12),
                                  intercept=self._intercept())
            if public is not None and counts["over"][0]:
                raise _public_side_error(self.privacy, "above the limit")
            if public is not None and counts["over"][2] and not counts["over"][1]:
                raise _public_side_error(self.privacy, "below the limit", too_small=True)
            check_data_bounds_supported(counts, bound_eps)
            self._spend(planned)
            seq = secret_seed_sequence(self.random_state)
            rng_bounds = np.random.Generator(np.random.PCG64(_child_seed(seq, _BOUNDS_CHILD)))
            estimated, bound_events = release_bounds(
                counts, bound_eps, rng_bounds, n_samples=n, notions=notions,
                neighbouring=self.neighbouring,
            )
            self.x_bound_ = estimated.get("x_bound", self.x_bound_)
            self.y_bound_ = estimated.get("y_bound", self.y_bound_)
        x_bound = None if self.privacy == "label" else self.x_bound_
        y_bound = None if self.privacy == "feature" else self.y_bound_
        common = dict(
            x_bound=x_bound, fit_intercept=self.fit_intercept,
            intercept_scaling=self.intercept_scaling,
        )
        # One pass over the rows (one task per block on Dask): the statistics
        # and the public sides' norms; it releases nothing and refuses NaN.
        stats = sufficient_statistics(
            None, source=source, y_bound=y_bound, x_public=self.privacy == "label",
            y_public=self.privacy == "feature",
            compute_xtx=exact_cov or (reused is None and cov_rows is None),
            # NaN or infinity in X or Y is refused here, in the same read
            # (validate_data leaves finiteness to this pass), on the workers
            # for Dask input.
            **common,
        )
        # The public side is used as it is: its scale must suit the
        # calibration as a declared bound must (public facts only).
        _check_public_side(stats, self.privacy)
        if not bound_eps:
            # The spend, before any secret draw.
            self._spend(planned)
            seq = secret_seed_sequence(self.random_state)
        # Computed norms may lie a few ulps below the exact ones: the public
        # side's scale is raised to a bound of every exact row norm.
        x_max = (None if stats.x_max_norm is None else computed_norm_bound(
            stats.x_max_norm, d_eff))
        y_max = (None if stats.y_max_norm is None
                 else computed_norm_bound(stats.y_max_norm, n_outputs))
        x_scale, y_row, w_scale = self._scales(n_outputs, x_max, y_max, stats.y_abs_max)
        plan_args.update(x_scale=x_scale, y_row_scale=y_row, w_scale=w_scale,
                         x_raw=None if self.privacy == "label" else float(self.x_bound_ or 0.0))
        if bound_eps and self.cov_budget == "auto" and (
                self.composition != "gdp" or cov_rows is not None):
            # Split by basic composition, the share sets the releases' Renyi
            # curve: it is chosen from public facts (the plan before the data),
            # never from estimated bounds, so the curve is the same for every
            # dataset of this shape (a search plans its runs from it).
            plan_args.update(cov_budget=before_data.cov_budget)

        if cov_rows is not None:
            # A secret subsample from its own seed, drawn on the driver; the
            # indices are never stored. A pass over X sums the selected rows
            # of each piece (no copy of the subsample); on Dask the indices
            # travel to the workers (the data owner's trusted cluster) as the
            # pass's parameters and are dropped with its tasks.
            rng_sub = np.random.Generator(np.random.PCG64(_child_seed(seq, 1)))
            rows = np.sort(rng_sub.choice(n, size=cov_rows, replace=False))
            sub_source = statistics_source(X, verbose=self.verbose, name=type(self).__name__)
            sub_source.n_passes = source.n_passes  # numbered after the rows' passes
            sub = sufficient_statistics(None, source=sub_source, rows=rows,
                                        label="XtX of the covariance subsample", **common)
            del rows

        proj = None
        if self.mechanism == "proj":
            if self.privacy == "label":
                proj = _label_projection(stats.xtx, n, n_outputs, self.y_bound_ or 0.0)
                c_fro = math.sqrt(n_outputs * max(np.trace(stats.xtx), 0.0)) / n
            else:
                proj, y_fro = _feature_projection(Y, n, x_scale)
                c_fro = math.sqrt(d_eff) * y_fro / n
            plan_args.update(proj_radius=proj.radius, proj_c_fro=c_fro)
        plan = plan_reusecov(**plan_args)
        self._settle(_plan_ledger(plan, delta, private, association_name, bound_events))

        if exact_cov:
            self.covariance_ = NoisyCovariance(
                stats.xtx / n, n, d_eff, None, self.fit_intercept,
                self.intercept_scaling, self.privacy, self.neighbouring, 0.0,
                PrivacyLedger([], composition="basic", delta=0.0),
            )
        elif reused is not None:
            self.covariance_ = reused
        else:
            xtx, rows_used = (stats.xtx, n) if cov_rows is None else (sub.xtx, cov_rows)
            rng_cov = np.random.Generator(np.random.PCG64(_child_seed(seq, 0)))
            # Under replace-one the corner c^2 of the intercept column is the
            # same for every dataset: released exactly.
            matrix = gram_with_exact_corner(
                xtx / rows_used, plan.sigma_cov, rng_cov,
                exact_corner=self.fit_intercept and self.neighbouring == "replace-one",
            )
            # The covariance carries the row bound its rows were clipped to: a
            # bound released by this fit is part of what it releases.
            cov_events = [e for e in bound_events if e.name == "x_bound"]
            cov_events += [] if plan.cov_event is None else [plan.cov_event]
            cov_ledger = PrivacyLedger(cov_events, composition="basic",
                                       delta=sum(e.delta for e in cov_events))
            # Its noise is the fit's: reproducible (not for publication) with it.
            spent = self.__dict__.get("privacy_spent_")
            cov_ledger.for_publication = spent is None or spent.for_publication
            self.covariance_ = NoisyCovariance(
                matrix, n, d_eff, x_scale, self.fit_intercept, self.intercept_scaling,
                self.privacy, self.neighbouring, plan.sigma_cov, cov_ledger,
                x_bound=None if self.x_bound_ is None else float(self.x_bound_),
            )
        cov = self.covariance_.matrix
        noisy_cov = self.covariance_.sigma > 0
        chosen = {"ridge": plan.ridge}

        def choose_factor(G_hat, noise_ratio):
            # Post-processing: the released covariance and association and
            # the public noise scales only.
            lam = released_ridge(cov, G_hat, self.covariance_.sigma,
                                 plan.sigma_assoc * math.sqrt(noise_ratio))
            chosen["ridge"] = lam
            return psd_factor(cov + lam * np.eye(d_eff), lam, noisy_cov, self.psd)

        eigvecs = inv = None
        if not self._uses_risk_rule(private):
            M = cov + plan.ridge * np.eye(d_eff)
            eigvecs, inv = psd_factor(M, plan.ridge, noisy_cov, self.psd)
            if not self._risk_rule_if_inactive(private):
                choose_factor = None
        W, G_hat, mu = release_associations(
            stats.xty / n, plan.sigma_assoc, _child_seed(seq, seed_index), eigvecs, inv,
            projection=proj, block_size=self.block_size, keep=self.keep_noisy_stats,
            choose_factor=choose_factor,
        )
        info = {
            "ledger": self.privacy_spent_,
            "ridge": chosen["ridge"],
            "cov_budget": plan.cov_budget,
            "sigma_assoc": plan.sigma_assoc,
            "sens_cov": None if plan.cov_event is None else plan.sens_cov,
            "sens_assoc": plan.sens_assoc,
            "proj_mu": float(mu),
        }
        return W, G_hat, info

    def _uses_risk_rule(self, private):
        """``ridge='auto'`` on a Gaussian association release: the risk rule."""
        return self.ridge == "auto" and private and (
            self.mechanism == "gauss" or self.privacy == "feature"
        )

    def _risk_rule_if_inactive(self, private):
        """GaussProj_X with ``ridge='auto'``: the risk rule when the projection is inactive.

        An inactive projection (multiplier 0) leaves the Gaussian release
        unchanged (up to the span of a rank-deficient X), so the risk rule
        applies; an active one shrinks the noise by direction, which the rule
        does not model, and the bound-based ridge is kept.
        """
        return (self.ridge == "auto" and private and self.mechanism == "proj"
                and self.privacy == "label")
