"""Every noise calibration and sampler of skprivreg, with its formula and reference.

Estimators call these functions; they never calibrate noise inline. Calibration
functions return :class:`~skprivreg.accounting.PrivacyEvent` objects (or plain
numbers for planning), and samplers take the calibrated scale from them, so the
event recorded in ``privacy_spent_`` is made from the same numbers that drove
the noise.

Floating point
--------------
Noise is float64 sampling from a :class:`numpy.random.Generator`. It is *not*
hardened against floating-point precision attacks (Mironov 2012, "On
significance of the least significant bits for differential privacy"); the
guarantees hold in exact arithmetic. A hardened sampler is future work.

Sensitivities, bound norms, noise scales (``sensitivity / mu``,
``sensitivity / epsilon``) and the ``mu`` of an event are computed in exact
rational arithmetic and rounded up once (:func:`exact_fraction`,
:func:`sqrt_at_least`, :func:`hypot_at_least`, :func:`sqrt_times_at_least`,
:func:`value_at_least`, :func:`quotient_at_least`, :func:`width_at_least`): a
float rounded to nearest can fall an ulp below the exact value and calibrate
slightly too little noise. A ledger's totals are rounded up the same way.
Thresholds of private tests are computed in floating point (within about
1e-16 relative).

Laplace draws (:func:`laplace`, used by every Laplace mechanism and test here)
reach the whole support: NumPy's sampler inverts one double on the grid
``k 2^-53`` and stops near 36.7 scales, where tests at small ``delta`` put
their thresholds (see :mod:`~skprivreg.mechanisms._sampling`). Gumbel draws
(the exponential mechanism, :func:`gumbel_top_k`) come from NumPy and stop near
36.7 scales: a candidate that far behind is chosen with probability 0 instead
of ``e^-36.7`` or so, a difference of that order in the pure-DP guarantee.

References
----------
- Dwork & Roth (2014), *The Algorithmic Foundations of Differential Privacy*,
  Thm. A.1 (classical Gaussian mechanism), Thm. 3.6 (Laplace), Thm. 3.10
  (exponential mechanism, McSherry & Talwar 2007).
- Balle & Wang (2018), *Improving the Gaussian mechanism for differential
  privacy: analytical calibration and optimal denoising*, Thm. 8.
- Dong, Roth & Su (2022), *Gaussian differential privacy*.
- Geng, Ding, Guo & Kumar (2020), *Tight analysis of privacy and utility
  tradeoff in approximate differential privacy* (truncated Laplace).
- Karwa & Vadhan (2018), *Finite sample differentially private confidence
  intervals*, Lemma 2.3 (stability histogram).
"""

from .._rounding import (  # noqa: F401
    difference_at_most,
    exact_fraction,
    hypot_at_least,
    product_at_most,
    quotient_at_least,
    shares_at_most,
    sqrt_at_least,
    sqrt_at_most,
    sqrt_times_at_least,
    value_at_least,
    value_at_most,
    width_at_least,
)
from ._gaussian import (  # noqa: F401
    add_gaussian,
    add_laplace,
    gaussian_event,
    gaussian_event_from_mu,
    gaussian_sigma,
    symmetric_gaussian_matrix,
)
from ._moments import (  # noqa: F401
    clipped_squared_error_sensitivity,
    histogram_laplace_scale,
    moment_sums,
    moment_sums_sensitivity,
    noisy_histogram,
    private_neg_mse,
    randomized_response,
    randomized_response_probabilities,
    released_mean_variance,
)
from ._ptr import (  # noqa: F401
    PTRCalibration,
    ptr_calibration,
    ptr_test,
    stability_histogram,
    stability_mode,
    truncated_laplace,
)
from ._regression import (  # noqa: F401
    gaussian_precision_shaped,
    gdp_split,
    intercept_gram_sensitivity,
    primo_constant,
    primo_gaussian_event,
    residual_gradient_sensitivity,
    restricted_tukey_sample,
    subsampled_gaussian_event,
    tukey_log_volumes,
    tukey_ptr_test,
    tukey_ptr_threshold,
    tukey_safety_margin,
)
from ._reusecov import (  # noqa: F401
    cross_sensitivity,
    gram_upper_sensitivity,
    gram_with_exact_corner,
    joint_gram_cross_calibration,
    joint_gram_cross_mu,
    joint_mahalanobis_sq,
)
from ._sampling import exponential_magnitudes, laplace  # noqa: F401
from ._selection import (  # noqa: F401
    above_threshold,
    bound_bins,
    counts_above,
    exponential_mechanism,
    gumbel_top_k,
    laplace_distance_test,
    laplace_distance_threshold,
    laplace_release_probability,
    private_upper_bound,
    upper_bound_margin,
)

__all__ = [
    "gaussian_sigma",
    "gaussian_event",
    "gaussian_event_from_mu",
    "add_gaussian",
    "add_laplace",
    "symmetric_gaussian_matrix",
    "truncated_laplace",
    "laplace",
    "exponential_magnitudes",
    "PTRCalibration",
    "ptr_calibration",
    "ptr_test",
    "stability_histogram",
    "stability_mode",
    "exponential_mechanism",
    "above_threshold",
    "bound_bins",
    "upper_bound_margin",
    "counts_above",
    "private_upper_bound",
    "laplace_distance_threshold",
    "laplace_distance_test",
    "laplace_release_probability",
    "gumbel_top_k",
    "primo_constant",
    "primo_gaussian_event",
    "subsampled_gaussian_event",
    "gaussian_precision_shaped",
    "intercept_gram_sensitivity",
    "residual_gradient_sensitivity",
    "gdp_split",
    "gram_upper_sensitivity",
    "cross_sensitivity",
    "joint_mahalanobis_sq",
    "joint_gram_cross_mu",
    "joint_gram_cross_calibration",
    "gram_with_exact_corner",
    "tukey_log_volumes",
    "tukey_safety_margin",
    "tukey_ptr_threshold",
    "tukey_ptr_test",
    "restricted_tukey_sample",
    "histogram_laplace_scale",
    "noisy_histogram",
    "randomized_response_probabilities",
    "randomized_response",
    "moment_sums_sensitivity",
    "sqrt_at_least",
    "value_at_least",
    "exact_fraction",
    "hypot_at_least",
    "quotient_at_least",
    "width_at_least",
    "sqrt_times_at_least",
    "value_at_most",
    "sqrt_at_most",
    "product_at_most",
    "difference_at_most",
    "shares_at_most",
    "moment_sums",
    "released_mean_variance",
    "clipped_squared_error_sensitivity",
    "private_neg_mse",
]
