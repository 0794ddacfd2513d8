"""ReuseCov planning from public numbers: budget split, noise scales, ridge, and the public planner.

:func:`plan_reusecov` is the plan of one release (used by ``fit``);
:func:`reusecov_plan` is the public planner behind
``python -m skprivreg plan reusecov``. Nothing here reads data.
"""

import math
from dataclasses import dataclass, replace

from scipy.optimize import minimize_scalar

from ..accounting import PrivacyEvent, PrivacyLedger, gdp_mu, text_at_least
from ..bounds import check_y_bound
from ..mechanisms import (
    cross_sensitivity,
    difference_at_most,
    gaussian_event,
    gaussian_event_from_mu,
    gdp_split,
    gram_upper_sensitivity,
    hypot_at_least,
    joint_gram_cross_calibration,
    primo_gaussian_event,
    product_at_most,
    quotient_at_least,
    sqrt_times_at_least,
    subsampled_gaussian_event,
)
from ._private_bounds import bound_epsilons
from ._reusecov_stats import association_sensitivity, covariance_sensitivity

__all__ = [
    "optimal_cov_budget",
    "ridge_log_factor",
    "theory_ridge",
    "projection_effective_sigma",
    "ReleasePlan",
    "plan_reusecov",
    "ReuseCovPlan",
    "reusecov_plan",
]

# Failure probability of the high-probability bounds behind the ridge rule.
_RHO = 0.05
NEIGHBOURINGS = ("replace-one", "zero-out")


def optimal_cov_budget(
    sens_cov, sens_assoc, w_scale, *, composition="gdp", epsilon=None, delta=None,
    sampling_ratio=None, joint=None,
):
    """Share ``f`` of the budget for the covariance minimising ``sigma_1^2 w^2 + sigma_2^2``.

    This is the Theorem-1 proxy of PRIMO's excess risk. Under GDP with the
    full data, ``sigma_1 = Delta_1/(sqrt(f) mu)`` and
    ``sigma_2 = Delta_2/(sqrt(1-f) mu)`` give the closed form
    ``f* = Delta_1 w / (Delta_1 w + Delta_2)``, kept in ``[0.01, 0.99]``
    (each release needs some budget). Otherwise (PRIMO's constant,
    or a subsampled covariance) the proxy is minimised numerically over
    ``f in [0.01, 0.99]`` with the exact calibrations. Public: depends on
    bounds, n, l and (epsilon, delta) only.

    ``joint`` (keyword arguments of
    :func:`~skprivreg.mechanisms.joint_gram_cross_calibration` without
    ``mu``, ``share`` and ``delta``): the covariance and association are one
    joint release, whose scales are ``gamma(f)`` times the composed ones;
    the proxy ``gamma(f)^2 (Delta_1^2 w^2 / f + Delta_2^2 / (1 - f))`` is
    minimised numerically over ``f in [0.01, 0.99]``.
    """
    if joint is not None:
        def joint_proxy(f):
            _, s1, s2, _ = joint_gram_cross_calibration("proxy", mu=1.0, share=f,
                                                        delta=0.5, **joint)
            return (s1 * w_scale) ** 2 + s2**2

        res = minimize_scalar(joint_proxy, bounds=(0.01, 0.99), method="bounded",
                              options={"xatol": 1e-6})
        return float(res.x)
    if composition == "gdp" and sampling_ratio is None:
        a = sens_cov * w_scale
        if a + sens_assoc <= 0:
            return 0.5  # no noise on either side (the non-private mode)
        # Within [0.01, 0.99], as the numerical minimisers: a share of exactly 0 or
        # 1 (a zero sensitivity on one side, or w_scale far from 1) leaves the other
        # release no budget, which its calibration refuses after the spend.
        return min(max(a / (a + sens_assoc), 0.01), 0.99)

    def proxy(f):
        cov, assoc = _split_events(
            composition, epsilon, delta, f, sens_cov, sens_assoc, "full",
            "replace-one", sampling_ratio,
        )
        return (cov.sigma * w_scale) ** 2 + assoc.sigma**2

    res = minimize_scalar(proxy, bounds=(0.01, 0.99), method="bounded",
                          options={"xatol": 1e-6})
    return float(res.x)


def ridge_log_factor(d_eff, rho=_RHO):
    """``L_d = sqrt(d log(2 d^2 / rho))``: high-probability factor of the Theorem-1 bound."""
    return math.sqrt(d_eff * math.log(2.0 * d_eff**2 / rho))


def theory_ridge(d_eff, sigma_cov, sigma_assoc_eff, w_scale, rho=_RHO):
    """Ridge minimising PRIMO's Theorem-1 bound, on the normalised scale.

    The per-outcome excess risk is bounded by
    ``(L_d^2 / lambda) (sigma_1^2 w^2 + sigma_2^2) + lambda w^2``; its
    minimiser is

    .. math::
        \\lambda = L_d \\sqrt{\\sigma_1^2 + \\sigma_{2,\\mathrm{eff}}^2 / w^2},
        \\qquad L_d = \\sqrt{d \\log(2 d^2/\\rho)}.

    ``lambda`` multiplies the identity added to :math:`X^\\top X / n`, so it
    equals scikit-learn's ``Ridge(alpha=n * lambda)``.
    """
    if w_scale <= 0:
        return ridge_log_factor(d_eff, rho) * sigma_cov
    return ridge_log_factor(d_eff, rho) * math.sqrt(
        sigma_cov**2 + sigma_assoc_eff**2 / w_scale**2
    )


def projection_effective_sigma(sigma_assoc, radius, c_fro, d_eff, n_outputs):
    """Public a-priori per-entry error of a projected association.

    ``E||G_hat - G||_F^2 <= 2 sigma_2 R ||C||_F`` (projection onto a set containing the truth),
    so the
    per-entry variance used by the ridge rule is
    ``min(sigma_2^2, 2 sigma_2 R ||C||_F / (d l))``.
    """
    bound = 2.0 * sigma_assoc * radius * c_fro / (d_eff * n_outputs)
    return math.sqrt(min(sigma_assoc**2, bound))


def _split_events(
    composition, epsilon, delta, f, sens_cov, sens_assoc, notion, neighbouring,
    sampling_ratio=None, assoc_name="association[0]",
):
    """Covariance and association events for a total (epsilon, delta) and share ``f``.

    ``gdp``: ``mu = gdp_mu(epsilon, delta)``; the covariance gets
    ``sqrt(f) mu`` and the association ``sqrt(1-f) mu``, each rounded down
    (:func:`~skprivreg.mechanisms.gdp_split`: their root sum of squares is
    at most ``mu``). ``paper``: basic composition,
    ``(f eps, f delta)`` and ``((1-f) eps, (1-f) delta)``, each with Neel's
    Lemma-1 constant. A subsampled covariance always uses the basic split,
    with the amplified calibration. ``f = 0`` means no covariance release.
    """
    neigh = neighbouring
    if math.isinf(epsilon):
        # Non-private test mode: no noise, no guarantee (the ledger says inf).
        def noiseless(name, sens):
            return PrivacyEvent(name, math.inf, 0.0, notion=notion, neighbouring=neigh,
                                sensitivity=sens, sigma=0.0)

        cov = noiseless("covariance", sens_cov) if f > 0 else None
        return cov, noiseless(assoc_name, sens_assoc)
    eps_cov, delta_cov = product_at_most(f, epsilon), product_at_most(f, delta)
    eps_assoc = difference_at_most(epsilon, eps_cov)
    delta_assoc = difference_at_most(delta, delta_cov)
    if sampling_ratio is not None and f > 0:
        cov = subsampled_gaussian_event(
            "covariance[subsampled]", sens_cov, eps_cov, delta_cov, sampling_ratio,
            method="analytic" if composition == "gdp" else "primo",
            notion=notion, neighbouring=neigh,
        )
        if composition == "gdp":
            assoc = gaussian_event(assoc_name, sens_assoc, eps_assoc, delta_assoc,
                                   notion=notion, neighbouring=neigh)
        else:
            assoc = primo_gaussian_event(assoc_name, sens_assoc, eps_assoc, delta_assoc,
                                         notion=notion, neighbouring=neigh)
        return cov, assoc
    if composition == "gdp":
        mu = gdp_mu(epsilon, delta)
        cov = None
        mu_cov, mu_assoc = gdp_split(mu, [f, 1 - f]) if f > 0 else (0.0, mu)
        if f > 0:
            cov = gaussian_event_from_mu("covariance", sens_cov, mu_cov,
                                         delta_cov, notion=notion, neighbouring=neigh)
        assoc = gaussian_event_from_mu(assoc_name, sens_assoc, mu_assoc,
                                       delta_assoc if f > 0 else delta, notion=notion,
                                       neighbouring=neigh)
        return cov, assoc
    cov = None
    if f > 0:
        cov = primo_gaussian_event("covariance", sens_cov, eps_cov, delta_cov,
                                   notion=notion, neighbouring=neigh)
    assoc = primo_gaussian_event(assoc_name, sens_assoc, eps_assoc, delta_assoc,
                                 notion=notion, neighbouring=neigh)
    return cov, assoc


@dataclass(frozen=True)
class ReleasePlan:
    """Public planning numbers of one ReuseCov fit (no data involved).

    Attributes
    ----------
    cov_budget : float
        Share ``f`` of the budget spent on the covariance (0 if none is released).
    cov_event, assoc_event : PrivacyEvent or None
        The two Gaussian releases (``cov_event`` is None under label DP or
        when a released covariance is reused).
    sigma_cov, sigma_assoc : float
        ``sigma_1`` (on ``X^T X / m``) and ``sigma_2`` (on ``X^T Y / n``).
    sens_cov, sens_assoc : float
    ridge : float
        The ridge ``lambda`` (normalised scale).
    sigma_assoc_eff : float
        Per-entry association error the ridge rule assumed.
    ledger_composition : str
    joint_event : PrivacyEvent or None
        The covariance and the association released as one joint Gaussian
        mechanism (:func:`~skprivreg.mechanisms.joint_gram_cross_calibration`;
        GDP composition, replace-one, full or feature DP). The ledger then
        holds this event instead of the two marginal ones; ``cov_event`` is
        the covariance's marginal (``mu = Delta_1/sigma_1``), which is what a
        reused covariance carries.
    joint_gain : float
        ``gamma <= 1``: both noise scales relative to composing the two
        releases (1 without a joint release).
    """

    cov_budget: float
    cov_event: PrivacyEvent | None
    assoc_event: PrivacyEvent
    sigma_cov: float
    sigma_assoc: float
    sens_cov: float
    sens_assoc: float
    ridge: float
    sigma_assoc_eff: float
    ledger_composition: str
    joint_event: PrivacyEvent | None = None
    joint_gain: float = 1.0
    gaussian_epsilon: float | None = None  # the releases' planned epsilon (GDP ledgers)


def _raw_bound_above(x_scale, c):
    """An upper bound on ``B`` from ``x_scale = hypot(B, c)`` (rounded), never below it.

    ``sqrt((s' - c)(s' + c))`` with ``s' = x_scale (1 + 4 2^-53)`` covers the
    rounding of ``x_scale`` (``hypot`` is within an ulp); the difference is
    exact (Sterbenz) where it would cancel, so when ``c >> B`` the result is
    about ``2e-8 c``, an upper bound, where ``sqrt(x_scale^2 - c^2)`` rounds to
    0 (no sensitivity, no noise).
    """
    s_up = float(x_scale) * (1.0 + 4.0 * 2.0**-53)
    c = abs(float(c))
    if c == 0.0 or not math.isfinite(s_up) or x_scale < 2.0**-900:
        # x_scale itself bounds B (hypot(B, c) >= B, and rounding is monotone):
        # used where the computation below would overflow or lose its digits.
        return float(x_scale)
    # Two square roots, not the root of a product that can underflow.
    return math.sqrt(max(s_up - c, 0.0)) * math.sqrt(s_up + c) * (1.0 + 2.0**-50)


def plan_reusecov(
    *,
    n,
    d_eff,
    n_outputs,
    epsilon,
    delta,
    privacy="full",
    mechanism="gauss",
    composition="gdp",
    neighbouring="replace-one",
    x_scale,
    y_row_scale,
    w_scale,
    cov_budget=0.5,
    cov_rows=None,
    reused_sigma_cov=None,
    ridge="auto",
    proj_radius=None,
    proj_c_fro=None,
    intercept=0.0,
    joint=True,
    x_raw=None,
):
    """Noise scales, budget split and ridge of a fit, from public numbers only.

    Parameters
    ----------
    n, d_eff, n_outputs : int
        Rows, columns of the (augmented) design, outcomes ``l``.
    epsilon, delta : float
        Total budget of this release.
    x_scale : float
        Row-norm bound of the design: the (augmented) ``x_bound`` when X is
        private, the public ``max_i ||x_i||`` under label DP.
    y_row_scale : float
        Bound on an outcome row: ``sqrt(l) y_bound`` when Y is private, the
        public ``max_i ||y^i||`` under feature DP.
    w_scale : float
        Coefficient scale for the ridge rule and the budget split.
    cov_budget : float or 'auto'
    cov_rows : int or None
        Rows of the secret covariance subsample (Algorithm 4); None = all.
    reused_sigma_cov : float or None
        ``sigma_1`` of a previously released covariance that is reused: no
        covariance release, the whole budget goes to the association.
    ridge : float or 'auto' or 'theory'
    proj_radius, proj_c_fro : float or None
        ``R`` and ``||C||_F`` of the projection (``mechanism='proj'``).
    intercept : float
        The constant column ``c`` of the augmented design (0: none); the
        sensitivities are the tight ones of
        :func:`~skprivreg.mechanisms.gram_upper_sensitivity` and
        :func:`~skprivreg.mechanisms.cross_sensitivity` at the raw row bound.
    x_raw : float or None
        The raw row bound of a private X (without the constant column). None:
        an upper bound on it from ``x_scale`` (:func:`_raw_bound_above`; the
        plain ``sqrt(x_scale^2 - c^2)`` rounds to 0 when ``c >> x_raw``).
    joint : bool
        Release the covariance and the association as one joint Gaussian
        mechanism where that applies (GDP composition, replace-one, full or
        feature DP, full-data covariance).

    Returns
    -------
    ReleasePlan
    """
    sampling_ratio = None
    if cov_rows is not None and cov_rows < n:
        sampling_ratio = cov_rows / n
    m = n if sampling_ratio is None else cov_rows
    c = float(intercept)
    if privacy == "label":
        # X public: no covariance release; a public augmented row norm.
        x_raw = None
        sens_cov = covariance_sensitivity(x_scale, m, neighbouring)
        sens_assoc = association_sensitivity(x_scale, y_row_scale, n, neighbouring)
    else:
        x_raw = _raw_bound_above(x_scale, c) if x_raw is None else float(x_raw)
        sens_cov = quotient_at_least(gram_upper_sensitivity(x_raw, c, neighbouring), m)
        sens_assoc = quotient_at_least(
            cross_sensitivity(x_raw, y_row_scale, c, privacy, neighbouring), n)
    no_cov = privacy == "label" or reused_sigma_cov is not None
    use_joint = (
        joint and not no_cov and composition == "gdp" and sampling_ratio is None
        and neighbouring == "replace-one" and math.isfinite(epsilon)
        and sens_cov > 0 and sens_assoc > 0
    )
    if no_cov:
        f = 0.0
    elif cov_budget == "auto" and (math.isinf(epsilon) or mechanism == "proj"):
        # No noise: the split is immaterial. A projection removes most of the
        # association noise by an amount known only after the release, so
        # the split of the unprojected noise would starve the covariance.
        f = 0.5
    elif cov_budget == "auto":
        f = optimal_cov_budget(
            sens_cov, sens_assoc, w_scale, composition=composition, epsilon=epsilon,
            delta=delta, sampling_ratio=sampling_ratio,
            joint=None if not use_joint else dict(
                x_bound=x_raw, y_row_bound=y_row_scale, n_rows=n, intercept=c,
                notion=privacy),
        )
    else:
        f = float(cov_budget)
    cov_event, assoc_event = _split_events(
        composition, epsilon, delta, f, sens_cov, sens_assoc, privacy, neighbouring,
        sampling_ratio,
    )
    joint_event, gamma = None, 1.0
    if use_joint:
        joint_event, sigma1, sigma2, gamma = joint_gram_cross_calibration(
            "covariance+association[0]", x_bound=x_raw, y_row_bound=y_row_scale,
            n_rows=n, mu=gdp_mu(epsilon, delta), share=f, delta=delta, intercept=c,
            notion=privacy, neighbouring=neighbouring,
        )
        # The marginals of the joint release (post-processing of it): the
        # covariance's is what a reused covariance carries.
        cov_event = gaussian_event_from_mu("covariance", sens_cov, sens_cov / sigma1,
                                           f * delta, notion=privacy,
                                           neighbouring=neighbouring)
        assoc_event = gaussian_event_from_mu("association[0]", sens_assoc,
                                             sens_assoc / sigma2, (1 - f) * delta,
                                             notion=privacy, neighbouring=neighbouring)
    if reused_sigma_cov is not None:
        sigma_cov = float(reused_sigma_cov)
    else:
        sigma_cov = 0.0 if cov_event is None else cov_event.sigma
    sigma_assoc = assoc_event.sigma
    sigma_eff = sigma_assoc
    if mechanism == "proj" and proj_radius is not None and sigma_assoc > 0:
        sigma_eff = projection_effective_sigma(
            sigma_assoc, proj_radius, proj_c_fro, d_eff, n_outputs
        )
    if isinstance(ridge, str):
        lam = 0.0 if math.isinf(epsilon) else theory_ridge(
            d_eff, sigma_cov, sigma_eff, w_scale
        )
    else:
        lam = float(ridge)
    ledger_composition = (
        "gdp" if composition == "gdp" and sampling_ratio is None else "basic"
    )
    return ReleasePlan(
        cov_budget=f,
        cov_event=cov_event,
        assoc_event=assoc_event,
        sigma_cov=sigma_cov,
        sigma_assoc=sigma_assoc,
        sens_cov=sens_cov,
        sens_assoc=sens_assoc,
        ridge=lam,
        sigma_assoc_eff=sigma_eff,
        ledger_composition=ledger_composition,
        joint_event=joint_event,
        joint_gain=gamma,
        gaussian_epsilon=float(epsilon) if ledger_composition == "gdp" else None,
    )



def _plan_ledger(plan, delta, private, association_name=None, bound_events=()):
    """The ledger of a plan's releases (empty totals in the non-private mode).

    ``bound_events`` (pure DP, the private bound estimates of the fit) come first.
    """
    if plan.joint_event is not None:
        events = [*bound_events, plan.joint_event]
    else:
        assoc = plan.assoc_event
        if association_name is not None and assoc is not None:
            assoc = replace(assoc, name=association_name)
        events = [*bound_events, *(e for e in (plan.cov_event, assoc) if e is not None)]
    if not private:
        return PrivacyLedger(events, composition="basic", delta=0.0)
    return PrivacyLedger(events, composition=plan.ledger_composition, delta=delta,
                         gaussian_epsilon=plan.gaussian_epsilon)




# ---------------------------------------------------------------------------
# The public planner
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReuseCovPlan:
    """Public planning numbers of a :class:`ReuseCovRegressor` fit (no data involved).

    ``str(plan)`` is the table ``python -m skprivreg plan reusecov`` prints.

    Attributes
    ----------
    n_samples, n_features, n_outputs, d_eff : int
        Rows, features, outcomes ``l``, and design columns with the intercept.
    epsilon, delta : float
        Total budget of the fit.
    privacy, neighbouring, mechanism, composition : str
    bound_epsilons : tuple of (str, float)
        Epsilon of each bound that is not declared (estimated privately in
        ``fit``); the noise scales then assume a unit bound.
    unit_scales : tuple of str
        Scales taken as 1 because they were not given (missing bounds, or the
        public maximum norms under label or feature DP).
    cov_budget : float
        Share ``f`` of the release budget spent on the covariance.
    sens_cov, sens_assoc : float
        Sensitivities of :math:`X^\\top X/m` and :math:`X^\\top Y/n`.
    sigma_cov, sigma_assoc, sigma_assoc_eff : float
        ``sigma_1``, ``sigma_2``, and the per-entry association error the
        ridge rule assumes.
    ridge : float
        ``lambda`` on the normalised scale; scikit-learn's ``Ridge`` alpha is
        ``n_samples * ridge``. NaN when ``fit`` chooses it from the released
        statistics (``ridge='auto'``, except GaussProj_X under label DP, for
        which this is the bound-based ridge that ``fit`` keeps if the
        projection is active and replaces by the risk rule if it is not).
    ledger : PrivacyLedger
        The planned releases (bound estimates first).
    l_zero : float or None
        Under full DP, the number of outcomes at which the association noise
        ``sigma_2^2`` reaches the covariance noise ``sigma_1^2 w^2``.
    joint_gain : float
        Both noise scales relative to composing the two releases (below 1
        when they are released jointly; see :class:`ReuseCovRegressor`).
    """

    n_samples: int
    n_features: int
    n_outputs: int
    d_eff: int
    epsilon: float
    delta: float
    privacy: str
    neighbouring: str
    mechanism: str
    composition: str
    bound_epsilons: tuple
    unit_scales: tuple
    cov_budget: float
    sens_cov: float | None
    sens_assoc: float
    sigma_cov: float
    sigma_assoc: float
    sigma_assoc_eff: float
    ridge: float
    ledger: PrivacyLedger
    l_zero: float | None
    joint_gain: float = 1.0

    def __str__(self):
        rows = [
            ("n, d_eff, l", f"{self.n_samples}, {self.d_eff}, {self.n_outputs}"),
            ("privacy / neighbouring", f"{self.privacy} / {self.neighbouring}"),
            ("mechanism / composition", f"{self.mechanism} / {self.composition}"),
            ("epsilon, delta", f"{self.epsilon:g}, {self.delta:.3g}"),
        ]
        for name, eps in self.bound_epsilons:
            rows.append((f"private {name} (epsilon)", f"{eps:.4g}"))
        rows += [
            ("covariance share f", f"{self.cov_budget:.4f}"),
            ("sensitivity covariance",
             "-" if self.sens_cov is None else f"{self.sens_cov:.6g}"),
            ("sensitivity association", f"{self.sens_assoc:.6g}"),
            ("sigma_1 (covariance)", f"{self.sigma_cov:.6g}"),
            ("sigma_2 (association)", f"{self.sigma_assoc:.6g}"),
            ("sigma_2 effective", f"{self.sigma_assoc_eff:.6g}"),
            *([("joint release: sigmas x", f"{self.joint_gain:.4f}")]
              if self.joint_gain < 1.0 else []),
            *(
                [("ridge lambda (normalised)", "chosen in fit from the released statistics")]
                if math.isnan(self.ridge) else
                [("ridge lambda (normalised)", f"{self.ridge:.6g}"),
                 ("sklearn Ridge alpha", f"{self.ridge * self.n_samples:.6g}")]
            ),
            ("ledger epsilon, delta", f"{text_at_least(self.ledger.epsilon, 6)}, "
                                      f"{text_at_least(self.ledger.delta, 3)}"),
        ]
        if self.l_zero is not None:
            rows.append(("l_0 (assoc = cov noise)", f"{self.l_zero:.4g}"))
        width = max(len(name) for name, _ in rows)
        lines = [f"{name:<{width}}  {value}" for name, value in rows]
        if self.unit_scales:
            lines.append(
                f"(not given, taken as 1: {', '.join(self.unit_scales)}; the noise "
                "scales grow with them)"
            )
        return "\n".join(lines)


def reusecov_plan(
    *,
    n_samples,
    n_features,
    epsilon,
    delta=1e-6,
    n_outputs=1,
    privacy="full",
    mechanism="gauss",
    composition="gdp",
    neighbouring="replace-one",
    x_bound=None,
    y_bound=None,
    x_max_norm=None,
    y_max_norm=None,
    y_abs_max=None,
    w_bound=None,
    bounds_budget=0.1,
    cov_budget="auto",
    ridge="auto",
    cov_subsample=None,
    fit_intercept=True,
    intercept_scaling=1.0,
):
    """Noise scales, budget split and ridge of a :class:`ReuseCovRegressor` fit.

    A pure function of public numbers; reads no data.

    Parameters
    ----------
    n_samples, n_features : int
        Rows and features of the design.
    epsilon : float
        Total budget of the fit.
    delta : float, default=1e-6
    n_outputs : int, default=1
        Outcomes ``l``.
    privacy, mechanism, composition, neighbouring : str
        As in :class:`ReuseCovRegressor`.
    x_bound : float or None
        Bound on the L2 norm of a raw row of X (full and feature DP).
    y_bound : float, (low, high) or None
        Label range (full and label DP).
    x_max_norm : float or None
        Public largest row norm of the augmented X (label DP).
    y_max_norm : float or None
        Public largest row norm of Y (feature DP).
    y_abs_max : float or None
        Public largest ``|y_ij|`` (feature DP): the fit's coefficient scale
        ``w = max |y_ij| / x_scale`` (for ``cov_budget='auto'`` and the
        ridge). ``None``: ``y_max_norm`` stands for it, and an ``'auto'``
        split may differ from the fit's.
    w_bound : float or None
        Coefficient-norm scale for the ridge and ``cov_budget='auto'``.
    bounds_budget : float in (0, 1), default=0.1
        Share of epsilon for the bounds that are not given (estimated
        privately in ``fit``; the scales here then assume a unit bound).
    cov_budget : float in (0, 1) or 'auto', default='auto'
    ridge : float >= 0, 'auto' or 'theory', default='auto'
        With ``'auto'`` (finite epsilon; ``mechanism='gauss'``, or the
        projection under feature DP) the ridge is chosen in ``fit`` from the
        released statistics, so the plan shows ``ridge=nan``; otherwise the
        public ridge of the fit.
    cov_subsample : int or None
        Rows of the secret covariance subsample.
    fit_intercept : bool, default=True
    intercept_scaling : float, default=1.0

    Returns
    -------
    ReuseCovPlan
    """
    if mechanism == "proj" and privacy == "full":
        raise ValueError("mechanism='proj' needs privacy 'feature' or 'label'.")
    if neighbouring == "zero-out" and privacy != "full":
        raise ValueError("zero-out neighbouring is supported with privacy='full' only.")
    if not (n_samples >= 2 and n_features >= 1 and n_outputs >= 1):
        raise ValueError("n_samples >= 2, n_features >= 1 and n_outputs >= 1 are needed.")
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError("epsilon > 0 and delta in (0, 1) are needed.")
    d_eff = n_features + int(fit_intercept)
    n, l = int(n_samples), int(n_outputs)
    y_mag = None
    if y_bound is not None:
        pair = check_y_bound(y_bound)
        y_mag = max(abs(pair[0]), abs(pair[1]))
    required = {"full": ("x_bound", "y_bound"), "feature": ("x_bound",),
                "label": ("y_bound",)}[privacy]
    given = {"x_bound": x_bound, "y_bound": y_mag}
    missing = [name for name in required if given[name] is None]
    bound_eps = {}
    if missing and math.isfinite(epsilon):
        bound_eps = bound_epsilons(missing, private=True, bounds="private",
                                   bounds_budget=bounds_budget, epsilon=epsilon)
    unit = list(missing)
    x_raw = 1.0 if x_bound is None else float(x_bound)
    y_entry = 1.0 if y_mag is None else y_mag

    def augmented(bound):
        return hypot_at_least(bound, intercept_scaling) if fit_intercept else bound

    if privacy == "label":
        if x_max_norm is None:
            unit.append("x_max_norm")
        x_scale = 1.0 if x_max_norm is None else float(x_max_norm)
    else:
        x_scale = augmented(x_raw)
    if privacy == "feature":
        if y_max_norm is None:
            unit.append("y_max_norm")
        y_row = y_entry = 1.0 if y_max_norm is None else float(y_max_norm)
        if y_abs_max is not None:
            y_entry = float(y_abs_max)  # as the fit's coefficient scale
    else:
        y_row = sqrt_times_at_least(l, y_entry)
    w_scale = float(w_bound) if w_bound is not None else y_entry / x_scale
    proj_radius = proj_c_fro = None
    if mechanism == "proj":
        # A-priori bounds: ||X||_F <= sqrt(n) x_scale, ||Y||_F <= sqrt(n) y_row.
        if privacy == "label":
            proj_radius = sqrt_times_at_least(n * l, y_entry)
            proj_c_fro = quotient_at_least(sqrt_times_at_least(l * n, x_scale), n)
        else:
            proj_radius = sqrt_times_at_least(n, x_scale)
            proj_c_fro = quotient_at_least(sqrt_times_at_least(d_eff * n, y_row), n)
    epsilon_release = difference_at_most(epsilon, *bound_eps.values())
    plan = plan_reusecov(
        n=n, d_eff=d_eff, n_outputs=l, epsilon=epsilon_release, delta=delta,
        privacy=privacy, mechanism=mechanism, composition=composition,
        neighbouring=neighbouring, x_scale=x_scale, y_row_scale=y_row,
        w_scale=w_scale, cov_budget=cov_budget, cov_rows=cov_subsample,
        ridge=ridge, proj_radius=proj_radius, proj_c_fro=proj_c_fro,
        intercept=float(intercept_scaling) if fit_intercept else 0.0,
        x_raw=None if privacy == "label" else x_raw,
    )
    notions = {"x_bound": "feature" if privacy == "feature" else "full",
               "y_bound": "label" if privacy == "label" else "full"}
    bound_events = [
        PrivacyEvent(name=name, epsilon=eps, delta=0.0, notion=notions[name],
                     neighbouring=neighbouring)
        for name, eps in bound_eps.items()
    ]
    ledger = _plan_ledger(plan, delta, math.isfinite(epsilon), bound_events=bound_events)
    l_zero = None
    if privacy == "full" and plan.sigma_assoc > 0:
        # sigma_2^2 is linear in l when Y is private.
        l_zero = (plan.sigma_cov * w_scale) ** 2 / (plan.sigma_assoc**2 / l)
    return ReuseCovPlan(
        n_samples=n, n_features=int(n_features), n_outputs=l, d_eff=d_eff,
        epsilon=float(epsilon), delta=float(delta), privacy=privacy,
        neighbouring=neighbouring, mechanism=mechanism, composition=composition,
        bound_epsilons=tuple(bound_eps.items()), unit_scales=tuple(unit),
        cov_budget=plan.cov_budget,
        sens_cov=plan.sens_cov if plan.cov_event is not None else None,
        sens_assoc=plan.sens_assoc, sigma_cov=plan.sigma_cov,
        sigma_assoc=plan.sigma_assoc, sigma_assoc_eff=plan.sigma_assoc_eff,
        ridge=(math.nan if ridge == "auto" and math.isfinite(epsilon)
               and (mechanism == "gauss" or privacy == "feature") else plan.ridge),
        ledger=ledger, l_zero=l_zero, joint_gain=plan.joint_gain,
    )
