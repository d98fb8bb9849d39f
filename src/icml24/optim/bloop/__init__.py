"""Bloop: gradient surgery with an EMA of the training gradient (Hsieh et al., ICML 2024).

*Careful with that Scalpel: Improving Gradient Surgery with an EMA*, https://arxiv.org/abs/2402.02998.
The direction ``g_main + lam (g_aux - c e)``, with ``e`` an EMA of training gradients and ``c`` the global
projection ratio, as a wrapper around any ``torch.optim.Optimizer``; the baselines (mixed sum, PCGrad,
dynamic barrier) share the interface.
"""

from icml24.optim.bloop.directions import (
    bloop_direction,
    dynamic_barrier_direction,
    mixed_direction,
    pcgrad_direction,
    project_out,
    projection_ratio,
    tree_dot,
    update_ema,
)
from icml24.optim.bloop.surgery import DEFAULT_EMA, DEFAULT_LAM, METHODS, Bloop, GradientSurgery

SLUG = "bloop"

__all__ = [
    "SLUG",
    "DEFAULT_EMA",
    "DEFAULT_LAM",
    "METHODS",
    "Bloop",
    "GradientSurgery",
    "bloop_direction",
    "dynamic_barrier_direction",
    "mixed_direction",
    "pcgrad_direction",
    "project_out",
    "projection_ratio",
    "tree_dot",
    "update_ema",
]
