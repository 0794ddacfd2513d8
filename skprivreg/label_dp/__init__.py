"""Label differential privacy: public features, private labels.

- :class:`WeightedLBARegressor`: weighted label/feature aggregation over
  random bags with secret Gaussian weights (Brahmbhatt et al. 2023), and
  noisy weighted LLP with a bag-loss linear model or MLP.
- :class:`GaussianLabelNoiseRegressor`: Gaussian noise on every label, then
  a linear fit (the baseline to compare with).
- :func:`aggregate`: the data owner's release of the private aggregated
  dataset, with its :class:`~skprivreg.accounting.PrivacyLedger`.
- Exact accountants: :func:`delta_for`, :func:`bag_size_for`,
  :func:`lba_privacy_profile`, :func:`lba_c_star`, :func:`lba_epsilon`,
  :func:`lba_min_bag_size`, :func:`lba_ptr_bag_size`,
  :func:`llp_privacy_profile`, :func:`llp_min_bag_size`; the paper's bounds
  for reference only (:func:`paper_theorem_1_2_delta`,
  :func:`paper_delta2_explicit`).
- :func:`plan_command` (``python -m skprivreg plan lba ...``) and
  :func:`demo_case`.
"""

from ._accountant import (
    bag_size_for,
    delta_for,
    lba_c_star,
    lba_epsilon,
    lba_min_bag_size,
    lba_privacy_profile,
    lba_ptr_bag_size,
    llp_min_bag_size,
    llp_privacy_profile,
    paper_delta2_explicit,
    paper_theorem_1_2_delta,
)
from ._aggregate import AggregatedDataset, LLPDataset, aggregate, diagnose_lba_assumption
from ._baseline import GaussianLabelNoiseRegressor
from ._lba import WeightedLBARegressor
from ._plan import demo_case, plan_command
from ._rr_bins import RROnBinsRegressor

__all__ = [
    "WeightedLBARegressor",
    "GaussianLabelNoiseRegressor",
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
    "llp_privacy_profile",
    "llp_min_bag_size",
    "paper_theorem_1_2_delta",
    "paper_delta2_explicit",
    "plan_command",
    "demo_case",
    "RROnBinsRegressor",
]
