"""Metrics: predictive quality, distances between weight samples, MCMC convergence.

- :mod:`~symlib.metrics.predictive`: accuracy, NLL, ECE, Brier, AUPR, FPR95, entropy, mutual
  information, agreement, total variation, loss barriers;
- :mod:`~symlib.metrics.mmd`: MMD with Gaussian/Laplace kernel banks, layer by layer (Laurent
  et al., 2024);
- :mod:`~symlib.metrics.mcmc`: split R-hat and effective sample sizes.
"""

from symlib.metrics import mcmc, mmd, predictive
from symlib.metrics.mcmc import (
    Summary,
    bulk_ess,
    split_rhat,
    summary,
    tail_ess,
)
from symlib.metrics.mmd import (
    Aggregation,
    Bandwidths,
    Kernel,
    LayerwiseMMD,
    aggregate,
    bandwidths,
    bandwidths_from_distances,
    combine_layers,
    gaussian_kernel,
    kernel_bank_mmd2,
    laplace_kernel,
    layer_banks,
    layerwise_mmd,
    unbiased_mmd2,
    unbiased_mmd2_from_gram,
)
from symlib.metrics.predictive import (
    accuracy,
    agreement,
    aupr,
    brier_score,
    expected_calibration_error,
    fpr_at_95_tpr,
    loss_barrier,
    mean_cross_entropy,
    mutual_information,
    predictive_entropy,
    predictive_probs,
    regression_total_variation,
    total_variation,
)

__all__ = [
    "Aggregation",
    "Bandwidths",
    "Kernel",
    "LayerwiseMMD",
    "Summary",
    "accuracy",
    "aggregate",
    "agreement",
    "aupr",
    "bandwidths",
    "bandwidths_from_distances",
    "brier_score",
    "bulk_ess",
    "combine_layers",
    "expected_calibration_error",
    "fpr_at_95_tpr",
    "gaussian_kernel",
    "kernel_bank_mmd2",
    "laplace_kernel",
    "layer_banks",
    "layerwise_mmd",
    "loss_barrier",
    "mcmc",
    "mean_cross_entropy",
    "mmd",
    "mutual_information",
    "predictive",
    "predictive_entropy",
    "predictive_probs",
    "regression_total_variation",
    "split_rhat",
    "summary",
    "tail_ess",
    "total_variation",
    "unbiased_mmd2",
    "unbiased_mmd2_from_gram",
]
