"""Fuzz cases for SAPG's exported callables (see tests/test_fuzz_api.py); the PPO core and the envs it
runs on are fuzzed in tests/rl/ppo/fuzz_cases.py and tests/rl/envs/fuzz_cases.py."""

import torch

from icml24.rl.envs import BatchedPendulum
from icml24.rl.ppo import PPOConfig
from icml24.rl.sapg import SAPG, SAPGConfig, entropy_schedule, follower_blocks_for_leader

SMALL = SAPGConfig(num_blocks=2, latent_dim=2, ppo=PPOConfig(horizon=4, epochs=1, num_minibatches=1, hidden_sizes=(8,)))


def sapg_learn(iterations):
    """SAPG(BatchedPendulum(num_envs=4), M = 2).learn(iterations)."""
    return SAPG(BatchedPendulum(num_envs=4), config=SMALL).learn(iterations)


FUZZ_CASES = [
    dict(fn=SAPGConfig, kwargs={"num_blocks": 4, "latent_dim": 8, "off_policy_ratio": 1, "entropy_scale": 0.005},
         invalid={"num_blocks": [0, -2, 1.5, "4", True], "latent_dim": [-1, 2.5], "off_policy_ratio": [-1, 0.5],
                  "entropy_scale": [-0.1, float("nan"), float("inf"), "0"], "aggregation": ["all", None],
                  "kl_on_policy_only": ["no", None], "ppo": [{"horizon": 4}, None]}),  # fmt: skip
    dict(fn=SAPG, args=(BatchedPendulum(num_envs=4),), kwargs={"config": SMALL, "seed": 0},
         invalid={"env": [None, "env", BatchedPendulum(num_envs=3)], "config": [PPOConfig(), {"num_blocks": 2}],
                  "seed": [-1, 0.5, "0"]}),  # fmt: skip
    dict(fn=sapg_learn, args=(1,), invalid={"iterations": [0, 1.5, None]}),
    dict(fn=entropy_schedule, args=(4, 0.005), kwargs={"base": 0.0},
         invalid={"num_blocks": [0, 2.5, "4", True], "scale": [-0.1, float("nan"), "0"], "base": [-1.0, float("inf")]}),
    dict(fn=follower_blocks_for_leader, args=([0, 2, 3],),
         invalid={"repeat_idxs": [[-1, 1], [0.5], "012", None, torch.tensor([0.0, 1.0]), 3]}),
]
