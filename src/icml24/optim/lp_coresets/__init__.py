"""Coresets for multiple lp regression, dimension-free in the number of responses (Woodruff & Yasuda, ICML 2024).

*Coresets for Multiple lp Regression*, https://arxiv.org/abs/2406.02432. lp Lewis weights, the m-free
row sampling distribution (Lewis weights + residual mass over all responses), weighted coresets, an IRLS
solver for ``min_X sum_i w_i ||a_i^T X - b_i||_p^p``, and uniform sampling for Euclidean power means.
"""

from icml24.optim.lp_coresets.coreset import (
    Coreset,
    MultipleLpCoreset,
    coreset_probabilities,
    inclusion_probabilities,
    p2_worst_case_error,
    residual_mass,
    sample_coreset,
    sensitivity_mix,
    uniform_probabilities,
    union_of_column_coresets,
)
from icml24.optim.lp_coresets.lewis import (
    LewisConvergenceWarning as LewisConvergenceWarning,  # for filterwarnings
)
from icml24.optim.lp_coresets.lewis import LewisResult, lewis_weights
from icml24.optim.lp_coresets.power_means import (
    power_mean_cost,
    power_mean_excess,
    power_mean_rate,
    solve_power_mean,
    uniform_power_mean,
)
from icml24.optim.lp_coresets.regression import LpSolution, lp_cost, solve_multi_lp

SLUG = "lp-coresets"

__all__ = [
    "SLUG",
    "Coreset",
    "LewisResult",
    "LpSolution",
    "MultipleLpCoreset",
    "coreset_probabilities",
    "inclusion_probabilities",
    "lewis_weights",
    "lp_cost",
    "p2_worst_case_error",
    "power_mean_cost",
    "power_mean_excess",
    "power_mean_rate",
    "residual_mass",
    "sample_coreset",
    "sensitivity_mix",
    "solve_multi_lp",
    "solve_power_mean",
    "uniform_power_mean",
    "uniform_probabilities",
    "union_of_column_coresets",
]
