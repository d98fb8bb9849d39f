"""SAPG: Split and Aggregate Policy Gradients (Singla, Agarwal & Pathak, ICML 2024).
https://arxiv.org/abs/2407.20230

N environments split into M blocks driven by one shared network with per-block latents and log-stds; the
leader block learns from its own data and from relabelled follower data through importance ratios inside the
PPO clip. See :mod:`icml24.rl.sapg.agent`.
"""

from icml24.rl.sapg.agent import SAPG, SAPGConfig, entropy_schedule, follower_blocks_for_leader

SLUG = "sapg"

__all__ = ["SLUG", "SAPG", "SAPGConfig", "entropy_schedule", "follower_blocks_for_leader"]
