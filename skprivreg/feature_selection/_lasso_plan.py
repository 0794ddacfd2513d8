"""Planning numbers of the private Lasso support selector (public facts only, no data)."""

import math
from dataclasses import dataclass

from ._perturbation import minimum_penalty
from ._stability import subsample_plan

__all__ = ["LassoPlan", "lasso_plan"]


@dataclass(frozen=True)
class LassoPlan:
    """Public planning numbers of one :class:`PrivateLassoSupportSelector` fit.

    Every field is a function of the arguments of :func:`lasso_plan`; no data
    is involved. ``str(plan)`` is the table that ``python -m skprivreg plan
    lasso`` prints.

    Attributes
    ----------
    epsilon, delta : float
        Budget of the distance test.
    sampling : {'poisson', 'partition'}
    subsample_rate : float
        ``q``.
    n_subsamples : int
        ``m``, the number of Lasso fits.
    max_appearances : int
        ``K``.
    threshold : float
        :math:`T = \\ln(1/\\delta)/\\varepsilon`.
    max_distance : float
        :math:`m/(2K) - 1`, the distance when every subsample agrees.
    max_release_probability : float
        Release probability of a perfectly stable rule.
    required_gap_fraction : float
        Vote margin :math:`(c_1 - c_2)/m` needed for a 95% release probability.
    recorded_delta : float
        :math:`\\delta/2`, the delta the fit records.
    n_samples, n_features, max_features : int or None
        As given.
    rows_per_subsample : float or None
        :math:`n q` (with ``n_samples``).
    n1 : float or None
        Rows at which the non-private rule finds the support with
        probability about 0.75 (as given).
    rough_n_poisson, rough_n_partition : float or None
        :math:`N_1/q` and :math:`N_1/(2q)`: rough sample sizes for a release.
    minimum_penalty : float or None
        :math:`16 s^2/\\Psi`, the smallest ``Lambda`` of the perturbation
        method (with ``max_features`` and ``rsc_constant``).
    warnings : tuple of str
        Public warnings (a delta too large for ``n``, a rule that cannot be
        released with probability 0.95).
    """

    epsilon: float
    delta: float
    sampling: str
    subsample_rate: float
    n_subsamples: int
    max_appearances: int
    threshold: float
    max_distance: float
    max_release_probability: float
    required_gap_fraction: float
    recorded_delta: float
    n_samples: int | None = None
    n_features: int | None = None
    max_features: int | None = None
    rows_per_subsample: float | None = None
    n1: float | None = None
    rough_n_poisson: float | None = None
    rough_n_partition: float | None = None
    minimum_penalty: float | None = None
    warnings: tuple = ()

    def rows(self):
        """``(label, value)`` pairs of the printed table."""
        rows = [
            ("sampling", self.sampling),
            ("subsample rate q", f"{self.subsample_rate:.6g}"),
            ("subsamples m (Lasso fits)", f"{self.n_subsamples}"),
            ("max appearances K", f"{self.max_appearances}"),
            ("threshold T = ln(1/delta)/eps", f"{self.threshold:.4g}"),
            ("max distance m/(2K) - 1", f"{self.max_distance:.4g}"),
            ("release prob. of a perfectly stable f", f"{self.max_release_probability:.4f}"),
            ("vote margin (c1-c2)/m for 95% release", f"{self.required_gap_fraction:.4f}"),
            ("recorded guarantee", f"({self.epsilon:g}, {self.recorded_delta:.3g})"),
        ]
        if self.rows_per_subsample is not None:
            rows.append(("expected rows per subsample ~ n q", f"{self.rows_per_subsample:.1f}"))
        if self.rough_n_poisson is not None:
            rows.append(("rough n needed ~ N1/q (poisson)", f"{self.rough_n_poisson:.4g}"))
            rows.append(("rough n needed ~ N1/(2q) (partition)", f"{self.rough_n_partition:.4g}"))
        if self.minimum_penalty is not None:
            rows.append(("perturbation: Lambda must exceed 16 s^2/Psi",
                         f"{self.minimum_penalty:.4g}"))
        rows.extend(("WARNING", text) for text in self.warnings)
        return rows

    def __str__(self):
        rows = self.rows()
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def lasso_plan(
    *,
    n_samples=None,
    n_features=None,
    epsilon=1.0,
    delta=1e-6,
    sampling="poisson",
    subsample_rate=None,
    n_subsamples=1000,
    max_appearances=None,
    n1=None,
    max_features=None,
    rsc_constant=None,
):
    """Public planning numbers of the private Lasso support selector.

    Touches no data. For :class:`PrivateLassoRegressor` pass the selection's
    budget, ``epsilon_1`` (see its docstring).

    Parameters
    ----------
    n_samples : int or None, default=None
        Number of rows ``n`` (needed for ``n_subsamples='paper'``; gives the
        expected rows per subsample and the delta check).
    n_features : int or None, default=None
        Number of columns ``p`` (reported only).
    epsilon : float, default=1.0
        Budget of the distance test.
    delta : float, default=1e-6
        Choose it well below ``1/n_samples``.
    sampling : {'poisson', 'partition'}, default='poisson'
    subsample_rate : float or None, default=None
        ``q``; ``None`` is :math:`\\varepsilon/(32 \\ln(1/\\delta))`.
    n_subsamples : int or 'paper', default=1000
    max_appearances : int or None, default=None
    n1 : float or None, default=None
        Rows at which the non-private rule finds the support with
        probability about 0.75; gives rough sample sizes.
    max_features : int or None, default=None
        ``s`` (with ``rsc_constant``: the perturbation method's smallest
        ``Lambda``).
    rsc_constant : float or None, default=None
        :math:`\\Psi` of the perturbation method.

    Returns
    -------
    plan : LassoPlan

    Raises
    ------
    ValueError
        For parameters no fit accepts (for example ``q`` outside (0, 1)).
    """
    plan = subsample_plan(
        epsilon,
        delta,
        sampling=sampling,
        subsample_rate=subsample_rate,
        n_subsamples=n_subsamples,
        max_appearances=max_appearances,
        n_samples=n_samples,
    )
    q = plan.subsample_rate
    notes = []
    if n_samples is not None and delta > 1.0 / (10 * n_samples):
        notes.append("delta > 1/(10 n): choose a smaller delta")
    if plan.max_distance < plan.threshold + math.log(20.0) / epsilon:
        notes.append("even a perfectly stable f is released w.p. < 0.95")
    return LassoPlan(
        epsilon=float(epsilon),
        delta=float(delta),
        sampling=plan.sampling,
        subsample_rate=q,
        n_subsamples=plan.n_subsamples,
        max_appearances=plan.max_appearances,
        threshold=plan.threshold,
        max_distance=plan.max_distance,
        max_release_probability=plan.max_release_probability,
        required_gap_fraction=plan.required_gap_fraction(epsilon),
        recorded_delta=float(delta) / 2.0,
        n_samples=n_samples,
        n_features=n_features,
        max_features=max_features,
        rows_per_subsample=None if n_samples is None else n_samples * q,
        n1=n1,
        rough_n_poisson=None if n1 is None else n1 / q,
        rough_n_partition=None if n1 is None else n1 / (2 * q),
        minimum_penalty=(
            minimum_penalty(max_features, rsc_constant)
            if max_features is not None and rsc_constant is not None else None
        ),
        warnings=tuple(notes),
    )
