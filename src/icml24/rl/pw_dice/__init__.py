"""Offline Imitation from Observation via Primal Wasserstein State Occupancy Matching (PW-DICE; Yan, Schwing,
Wang; ICML 2024).

https://arxiv.org/abs/2311.01331 · official code https://github.com/KaiYan289/PW-DICE

Learn from expert *states* and task-agnostic ``(s, a, s')`` data by minimising the primal Wasserstein distance
between the learner's and the expert's state occupancies (with KL pessimism towards the data), under a ground
cost learned contrastively; the convex dual gives weights for weighted behaviour cloning. SMODICE is the special
case ``c(s_i, s_j) = -log d_E(s_i) / d_I(s_i)``, ``eps1 -> 0``, ``eps2 = 1``.
"""

from icml24.rl.pw_dice.continuous import (
    ContrastiveMetric,
    DualConfig,
    GaussianPolicy,
    ImitationConfig,
    collect_point_mass,
    distort_states,
    pw_dice_weights,
    run_imitation,
    scripted_expert,
    smodice_kl_weights,
    train_contrastive_metric,
    train_discriminator,
    weighted_bc,
)
from icml24.rl.pw_dice.tabular import (
    ArbitraryTask,
    DICESolution,
    arbitrary_task,
    dirac_cost,
    grid_manhattan_cost,
    lobsdice_tabular,
    occupancy_metrics,
    policy_from_occupancy,
    pw_dice_dual_loss,
    pw_dice_primal,
    pw_dice_tabular_dual,
    smodice_chi_tabular,
    smodice_kl_tabular,
)

SLUG = "pw-dice"

__all__ = [
    "SLUG",
    "ArbitraryTask",
    "ContrastiveMetric",
    "DICESolution",
    "DualConfig",
    "GaussianPolicy",
    "ImitationConfig",
    "collect_point_mass",
    "distort_states",
    "pw_dice_weights",
    "run_imitation",
    "scripted_expert",
    "smodice_kl_weights",
    "train_contrastive_metric",
    "train_discriminator",
    "weighted_bc",
    "arbitrary_task",
    "dirac_cost",
    "grid_manhattan_cost",
    "lobsdice_tabular",
    "occupancy_metrics",
    "policy_from_occupancy",
    "pw_dice_dual_loss",
    "pw_dice_primal",
    "pw_dice_tabular_dual",
    "smodice_chi_tabular",
    "smodice_kl_tabular",
]
