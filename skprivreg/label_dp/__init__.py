"""Label differential privacy: public features, private labels.

- :class:`WeightedLBARegressor`: weighted label/feature aggregation over
  random bags with secret Gaussian weights (Brahmbhatt et al. 2023), and
  noisy weighted LLP with a bag-loss linear model or MLP.
- :class:`GaussianLabelNoiseRegressor`: Gaussian noise on every label, then
  a linear fit (the baseline to compare with).
- :func:`lba_plan`: what :class:`WeightedLBARegressor` will do, from public
  facts only (:class:`LBAPlan`; ``python -m skprivreg plan lba`` prints it).
- :func:`aggregate`: the data owner's release of the private aggregated
  dataset, with its :class:`~skprivreg.accounting.PrivacyLedger`.
- Exact accountants: :func:`delta_for`, :func:`bag_size_for`,
  :func:`lba_privacy_profile`, :func:`lba_c_star`, :func:`lba_epsilon`,
  :func:`lba_min_bag_size`, :func:`lba_ptr_bag_size`,
  :func:`lba_ptr_pass_probability`, :func:`llp_privacy_profile`,
  :func:`llp_min_bag_size`.
"""

from ._accountant import (
    bag_size_for,
    delta_for,
    lba_c_star,
    lba_epsilon,
    lba_min_bag_size,
    lba_privacy_profile,
    lba_ptr_bag_size,
    lba_ptr_pass_probability,
)
from ._aggregate import aggregate, diagnose_lba_assumption
from ._baseline import GaussianLabelNoiseRegressor
from ._datasets import AggregatedDataset, LLPDataset
from ._lba import WeightedLBARegressor
from ._llp_accountant import llp_min_bag_size, llp_privacy_profile
from ._planner import LBAPlan, lba_plan
from ._rr_bins import RROnBinsRegressor

__all__ = [
    "WeightedLBARegressor",
    "GaussianLabelNoiseRegressor",
    "LBAPlan",
    "lba_plan",
    "AggregatedDataset",
    "LLPDataset",
    "aggregate",
    "diagnose_lba_assumption",
    "delta_for",
    "bag_size_for",
    "lba_privacy_profile",
    "lba_c_star",
    "lba_epsilon",
    "lba_min_bag_size",
    "lba_ptr_bag_size",
    "lba_ptr_pass_probability",
    "llp_privacy_profile",
    "llp_min_bag_size",
    "RROnBinsRegressor",
]
