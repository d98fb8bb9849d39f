"""PPO core for batched torch environments: GAE with time-limit bootstrapping, clipped policy and value losses,
entropy bonus, observation/advantage normalisation and rl_games' KL-adaptive learning rate.

Shared by the RL papers; SAPG (``icml24.rl.sapg``) extends :class:`PPO` with blocks of environments.
"""

from icml24.rl.ppo.agent import PPO, BlockActorCritic, PPOConfig
from icml24.rl.ppo.functional import (
    KLAdaptiveLR,
    RunningMeanStd,
    bounds_loss,
    clipped_surrogate_loss,
    clipped_value_loss,
    gae,
    gaussian_entropy,
    gaussian_kl,
    gaussian_log_prob,
    normalize,
)

__all__ = [
    "PPO",
    "PPOConfig",
    "BlockActorCritic",
    "gae",
    "clipped_surrogate_loss",
    "clipped_value_loss",
    "bounds_loss",
    "gaussian_log_prob",
    "gaussian_entropy",
    "gaussian_kl",
    "normalize",
    "RunningMeanStd",
    "KLAdaptiveLR",
]
