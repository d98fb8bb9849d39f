"""Fuzz cases for the PPO core (see tests/test_fuzz_api.py)."""

import gymnasium as gym
import numpy as np
import torch

from icml24.rl.envs import BatchedPendulum
from icml24.rl.ppo import (
    PPO,
    BlockActorCritic,
    KLAdaptiveLR,
    PPOConfig,
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

T, N = 4, 3
R, V, NV = torch.randn(T, N), torch.randn(T, N), torch.randn(T, N)
TERM, DONE = torch.zeros(T, N, dtype=torch.bool), torch.zeros(T, N, dtype=torch.bool)
LP, OLP, ADV = torch.randn(6), torch.randn(6), torch.randn(6)
MEAN, LOGSTD, ACT = torch.randn(6, 2), torch.zeros(6, 2), torch.randn(6, 2)
HOT = "a per-minibatch hot path: NaN entries propagate to the loss, as in torch.nn losses (documented)"
NOT_TENSOR = [np.zeros(6), [0.0] * 6, None, "x"]
POS = [0.0, -0.1, float("nan"), float("inf"), "0.2", None, True]
POS_OR_NONE = [0.0, -0.1, float("nan"), float("inf"), "0.2", True]  # None: no clip
UNIT = [-0.1, 1.5, float("nan"), "0.9", None]
SMALL = PPOConfig(horizon=4, epochs=1, num_minibatches=1, hidden_sizes=(8,))


def _opt() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)


def rms_update(x):
    """RunningMeanStd((2,)).update(x)."""
    RunningMeanStd((2,)).update(x)


def kl_lr_step(kl):
    """KLAdaptiveLR(SGD).step(kl)."""
    return KLAdaptiveLR(_opt()).step(kl)


def ppo_act(raw_obs, block=None, deterministic=True):
    """PPO(BatchedPendulum(num_envs=2)).act(...)."""
    return PPO(BatchedPendulum(num_envs=2), config=SMALL).act(raw_obs, block=block, deterministic=deterministic)


def ppo_learn(iterations):
    """PPO(BatchedPendulum(num_envs=2)).learn(iterations)."""
    return PPO(BatchedPendulum(num_envs=2), config=SMALL).learn(iterations)


def ppo_evaluate(env, seed=0, max_steps=3):
    """PPO(BatchedPendulum(num_envs=2)).evaluate(env, ...)."""
    return PPO(BatchedPendulum(num_envs=2), config=SMALL).evaluate(env, seed=seed, max_steps=max_steps)


FUZZ_CASES = [
    dict(fn=gae, args=(R, V, NV, TERM, DONE), kwargs={"gamma": 0.99, "lam": 0.95},
         invalid={"gamma": UNIT, "lam": UNIT, "rewards": [torch.zeros(T, N + 1), torch.zeros(T), np.zeros((T, N))],
                  "values": [torch.zeros(T + 1, N), None], "dones": [torch.zeros(2, 2, dtype=torch.bool)]},
         allowed={"rewards": HOT, "values": HOT, "next_values": HOT}),  # fmt: skip
    dict(fn=clipped_surrogate_loss, args=(LP, OLP, ADV, 0.2),
         invalid={"clip": POS, "log_prob": NOT_TENSOR, "advantages": NOT_TENSOR},
         allowed={"log_prob": HOT, "old_log_prob": HOT, "advantages": HOT}),
    dict(fn=clipped_value_loss, args=(LP, OLP, ADV, 0.2), invalid={"clip": POS_OR_NONE, "values": NOT_TENSOR},
         allowed={"values": HOT, "old_values": HOT, "returns": HOT}),
    dict(fn=bounds_loss, args=(MEAN,), kwargs={"bound": 1.1}, invalid={"bound": [-1.0, float("nan"), "1"],
         "mean": NOT_TENSOR}, allowed={"mean": HOT}),  # fmt: skip
    dict(fn=gaussian_log_prob, args=(ACT, MEAN, LOGSTD), invalid={"actions": NOT_TENSOR, "log_std": NOT_TENSOR},
         allowed={"actions": HOT, "mean": HOT, "log_std": HOT}),
    dict(fn=gaussian_entropy, args=(LOGSTD,), invalid={"log_std": NOT_TENSOR}, allowed={"log_std": HOT}),
    dict(fn=gaussian_kl, args=(MEAN, LOGSTD, MEAN + 0.1, LOGSTD), invalid={"mean_p": NOT_TENSOR},
         allowed={"mean_p": HOT, "log_std_p": HOT, "mean_q": HOT, "log_std_q": HOT}),
    dict(fn=normalize, args=(ADV,), kwargs={"eps": 1e-8}, invalid={"x": NOT_TENSOR, "eps": [-1.0, float("nan")]},
         allowed={"x": HOT}),
    dict(fn=RunningMeanStd, args=((2,),), kwargs={"clip": 5.0},
         invalid={"shape": [2, (0,), ("2",), None], "clip": POS}),
    dict(fn=rms_update, args=(torch.randn(5, 2),),
         invalid={"x": [torch.zeros(5, 3), torch.tensor([[0.0, float("nan")]]), np.zeros((5, 2)), torch.zeros(0, 2)]}),
    dict(fn=KLAdaptiveLR, args=(_opt(),), kwargs={"kl_threshold": 0.016, "lr_min": 1e-6, "lr_max": 1e-2,
         "factor": 1.5},
         invalid={"optimizer": [None, "adam"], "kl_threshold": POS, "lr_min": POS, "lr_max": [1e-7, float("nan")],
                  "factor": [1.0, 0.5, float("nan")]}),  # fmt: skip
    dict(fn=kl_lr_step, args=(0.01,), invalid={"kl": [float("nan"), float("inf"), "0.1", None]}),
    dict(fn=PPOConfig, kwargs={"gamma": 0.99, "gae_lambda": 0.95, "clip": 0.2, "value_clip": 0.2,
                               "learning_rate": 5e-4, "kl_threshold": 0.016, "lr_min": 1e-6, "lr_max": 1e-2,
                               "entropy_coef": 0.0, "critic_coef": 4.0, "bounds_loss_coef": 1e-4,
                               "max_grad_norm": 1.0, "reward_scale": 1.0, "init_log_std": 0.0},
         invalid={"horizon": [0, 1.5, "16"], "epochs": [0, -1], "num_minibatches": [0, True], "gamma": UNIT,
                  "gae_lambda": UNIT, "clip": POS, "value_clip": POS_OR_NONE, "learning_rate": POS, "lr_min": POS,
                  "lr_max": [1e-7, float("nan")], "entropy_coef": [-0.1, float("nan")],
                  "critic_coef": [-1.0], "max_grad_norm": POS, "reward_scale": POS, "init_log_std": [float("nan"), 50.0],
                  "hidden_sizes": [(0,), (64.0,), 64, None], "normalize_value": ["yes", 1],
                  "adaptive_lr": [None]}),  # fmt: skip
    dict(fn=BlockActorCritic, kwargs={"obs_dim": 3, "act_dim": 1, "num_blocks": 2, "latent_dim": 4,
                                      "hidden_sizes": (8,), "init_log_std": 0.0},
         invalid={"obs_dim": [0, 2.5, "3"], "act_dim": [0, None], "num_blocks": [0, True], "latent_dim": [-1, 1.5],
                  "hidden_sizes": [(0,), [8], "8"], "init_log_std": [float("nan"), float("inf"), "0"]}),  # fmt: skip
    dict(fn=PPO, args=(BatchedPendulum(num_envs=2),), kwargs={"config": SMALL, "seed": 0},
         invalid={"env": [None, gym.make("CartPole-v1"), gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")])],
                  "config": [{"horizon": 4}, "small"], "seed": [1.5, "0", -1, True]}),  # fmt: skip
    dict(fn=ppo_act, args=(torch.zeros(4, 3),), kwargs={"block": 0, "deterministic": True},
         invalid={"raw_obs": [torch.zeros(4, 2), torch.zeros(3), torch.full((1, 3), float("nan")), "obs", None],
                  "block": [1, -1, 0.5, "0"], "deterministic": ["yes", None]}),  # fmt: skip
    dict(fn=ppo_learn, args=(1,), invalid={"iterations": [0, -1, 1.5, "2", True]}),
    dict(fn=ppo_evaluate, args=(BatchedPendulum(num_envs=2),), kwargs={"seed": 0, "max_steps": 3},
         invalid={"env": [None, "env", gym.vector.SyncVectorEnv([lambda: gym.make("MountainCarContinuous-v0")])],
                  "seed": [1.5, "0"], "max_steps": [0, 2.5]}),  # fmt: skip
]
