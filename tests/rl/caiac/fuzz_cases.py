"""Fuzz cases for CAIAC's public API (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.rl.caiac import (
    ENTITY_SLICES,
    BCConfig,
    CounterfactualSampler,
    FactoredGaussianWorldModel,
    GoalConditionedPolicy,
    OfflineConfig,
    PushDataset,
    PushWorldConfig,
    PushWorldEnv,
    SamplerConfig,
    TD3BCAgent,
    WorldModelConfig,
    causal_action_influence,
    collect_push_dataset,
    counterfactual_swap,
    gaussian_kl,
    kl_gaussian_to_mixture,
    push_step,
    reachable,
    rollout,
    sample_layouts,
    scripted_expert,
    smooth_scores,
    sparse_reward,
    train_gcbc,
    train_offline,
    train_world_model,
    uncontrolled_mask,
)

SLICES = list(ENTITY_SLICES.values())
DATA = collect_push_dataset(2, 2, seed=0, config=PushWorldConfig(horizon=4))
S = DATA.states.reshape(-1, 6)
A = np.zeros((len(S), 2))
G = np.zeros((len(S), 2))
MASK = np.ones(DATA.states.shape[:2] + (3,), dtype=bool)
MODEL = FactoredGaussianWorldModel(entity_dims=(2, 2, 2), action_dim=2, config=WorldModelConfig(hidden=(4,)))
M = torch.zeros(2, 3)
V = torch.ones(2, 3)
BAD_STATES = [S[:, :5], "s", None, S[None]]
BAD_INT = [0, -1, 1.5, True, "3"]


def _sampler():
    return CounterfactualSampler(states=DATA.states, actions=DATA.actions, goals=DATA.goals, uncontrolled=MASK,
                                 entity_slices=SLICES, swappable=np.array([False, True, True]),
                                 achieved_goal=lambda x: x[:, 2:4], reward=lambda ag, g: sparse_reward(ag, g))  # fmt: skip


def sample_from(n=4):
    """CounterfactualSampler(...).sample(n, rng)."""
    return _sampler().sample(n, np.random.default_rng(0))


def policy_forward(obs):
    """GoalConditionedPolicy(obs_dim=8, action_dim=2)(obs)."""
    return GoalConditionedPolicy(obs_dim=8, action_dim=2, hidden=(4,))(obs)


FUZZ_CASES = [
    dict(fn=PushWorldConfig, kwargs={}, invalid={"speed": [0.0, -1.0, "a"], "radius": [0.0, None],
         "spawn": [0.0, 1.5], "horizon": BAD_INT, "layout_noise": [-0.1]}),  # fmt: skip
    dict(fn=push_step, args=(S, A), invalid={"states": BAD_STATES, "actions": [A[:3], A[:, :1], "a"],
                                             "config": [None, 3]}),  # fmt: skip
    dict(fn=reachable, args=(S,), invalid={"states": BAD_STATES, "config": ["c"]}),
    dict(fn=sparse_reward, args=(G, G), invalid={"achieved_goals": [G[:, :1], "g"], "goals": [G[:2], None]}),
    dict(fn=sample_layouts, args=(3, np.random.default_rng(0)), kwargs={"shifted": False},
         invalid={"n": BAD_INT, "rng": [0, None], "shifted": ["no", 1]}),  # fmt: skip
    dict(fn=scripted_expert, args=(S, G), invalid={"states": BAD_STATES, "goals": [G[:, :1], "g"]}),
    dict(fn=rollout, args=(scripted_expert, S[:2], G[:2]), kwargs={"config": PushWorldConfig(horizon=2)},
         invalid={"policy": [None, 3], "states0": BAD_STATES, "goals": [G[:1], "g"]}),  # fmt: skip
    dict(fn=collect_push_dataset, args=(1, 1), kwargs={"seed": 0, "config": PushWorldConfig(horizon=2)},
         invalid={"n_expert": [-1, 1.5, "1"], "n_random": [-1, None], "seed": [-1, 0.5], "expert_noise": [-1.0, "x"]}),  # fmt: skip
    dict(fn=PushDataset, kwargs={"states": DATA.states, "actions": DATA.actions, "goals": DATA.goals,
                                 "expert": DATA.expert},
         invalid={"states": [DATA.states[:, :, :5], DATA.states[0]], "actions": [DATA.actions[:, :2]],
                  "goals": [DATA.goals[:1]], "expert": [DATA.expert.astype(int)]}),  # fmt: skip
    dict(fn=PushWorldEnv, kwargs={}, invalid={"config": [None, 1], "shifted": ["x", 1]}),
    dict(fn=gaussian_kl, args=(M, V, M, V), invalid={"m1": ["m", None], "v1": [-V, None], "m2": [[1.0]],
                                                    "v2": [torch.zeros(2, 3)]}),  # fmt: skip
    dict(fn=kl_gaussian_to_mixture, args=(M[None], V[None], M[None], V[None]),
         invalid={"m": [M, "m"], "v": [-V[None], None], "mix_m": [torch.zeros(1, 2, 2)], "mix_v": [-V[None]]}),  # fmt: skip
    dict(fn=WorldModelConfig, kwargs={}, invalid={"hidden": [(), (0,), [4], (1.5,)], "lr": [0.0, "a"],
         "batch_size": BAD_INT, "steps": [-1, 1.5], "min_var": [0.0, -1.0], "max_var": [1e-9]}),  # fmt: skip
    dict(fn=FactoredGaussianWorldModel, kwargs={"entity_dims": (2, 2, 2), "action_dim": 2,
                                                "config": WorldModelConfig(hidden=(4,))},
         invalid={"entity_dims": [(), (0, 2), [2, 2], (2.0,)], "action_dim": BAD_INT, "config": [None, {}]}),  # fmt: skip
    dict(fn=train_world_model, args=(MODEL, S[:8], A[:8], S[:8]), kwargs={"seed": 0, "steps": 1},
         invalid={"model": [None, torch.nn.Linear(2, 2)], "states": [S[:4], "s"], "actions": [A[:4]],
                  "next_states": [S[:4, :5]], "seed": [-1, 1.5], "steps": [-1, "1"]}),  # fmt: skip
    dict(fn=causal_action_influence, args=(MODEL, S[:4]), kwargs={"n_action_samples": 4},
         invalid={"model": [None], "states": [S[:4, :5], "s"], "n_action_samples": BAD_INT, "seed": [-1],
                  "batch_size": BAD_INT}),  # fmt: skip
    dict(fn=smooth_scores, args=(np.zeros((2, 3, 3)), 3), invalid={"scores": [np.zeros(3), "s", None],
                                                                 "kernel": BAD_INT}),  # fmt: skip
    dict(fn=uncontrolled_mask, args=(np.zeros((2, 3)), 0.05), invalid={"scores": ["s", None, np.zeros(0)],
                                                                     "threshold": [-1.0, "t", None]},
         allowed={"threshold": "inf is the random-swap limit (every entity uncontrolled)"}),  # fmt: skip
    dict(fn=counterfactual_swap, args=(S[:2], S[:2], S[:2], np.zeros((2, 3), bool), np.zeros((2, 3, 6)),
                                       np.zeros((2, 3, 6)), SLICES),
         invalid={"states": [S[:2, :5], "s"], "next_states": [S[:3]], "future_states": [S[:1]],
                  "swap": [np.zeros((2, 3)), np.zeros((2, 2), bool)], "source_states": [np.zeros((2, 2, 6))],
                  "source_next_states": [np.zeros((2, 3, 5))], "entity_slices": [[0, 1], None]}),  # fmt: skip
    dict(fn=SamplerConfig, kwargs={}, invalid={"ratio_cf": [-0.1, 1.5, "x"], "future_p": [2.0, None]}),
    dict(fn=CounterfactualSampler,
         kwargs={"states": DATA.states, "actions": DATA.actions, "goals": DATA.goals, "uncontrolled": MASK,
                 "entity_slices": SLICES, "swappable": np.array([False, True, True]),
                 "achieved_goal": lambda x: x[:, 2:4], "reward": lambda ag, g: sparse_reward(ag, g)},
         invalid={"states": [DATA.states[0], "s"], "actions": [DATA.actions[:, :2]], "goals": [DATA.goals[:1]],
                  "uncontrolled": [MASK.astype(int), MASK[:, :2]], "entity_slices": [[1, 2], None],
                  "swappable": [np.ones(3), np.ones(2, bool)], "achieved_goal": [None], "reward": [3],
                  "train_episodes": [np.array([7]), np.array([]), np.array([0.5])], "config": [None]}),  # fmt: skip
    dict(fn=sample_from, kwargs={}, invalid={"n": BAD_INT}, covers=("CounterfactualSampler",)),
    dict(fn=BCConfig, kwargs={}, invalid={"updates": BAD_INT, "batch_size": [1, "2"], "lr": [0.0, -1.0],
                                          "hidden": [(), (0,)]}),  # fmt: skip
    dict(fn=OfflineConfig, kwargs={}, invalid={"updates": BAD_INT, "batch_size": [1], "gamma": [1.0, -0.1],
         "tau": [0.0, 2.0], "lr": [0.0], "hidden": [(), [8]], "bc_alpha": [0.0, -1.0]}),  # fmt: skip
    dict(fn=GoalConditionedPolicy, kwargs={"obs_dim": 8, "action_dim": 2},
         invalid={"obs_dim": BAD_INT, "action_dim": BAD_INT}),  # fmt: skip
    dict(fn=policy_forward, args=(torch.zeros(2, 8),), invalid={"obs": [torch.zeros(2, 5), torch.zeros(8)]},
         covers=("GoalConditionedPolicy",)),  # fmt: skip
    dict(fn=TD3BCAgent, kwargs={"obs_dim": 8, "action_dim": 2, "config": __import__("icml24.rl.value", fromlist=["x"]).TD3Config(hidden=(4,))},
         invalid={"obs_dim": BAD_INT, "action_dim": BAD_INT, "bc_alpha": [0.0, -1.0, "a"], "seed": [-1]}),  # fmt: skip
    dict(fn=train_gcbc, args=(_sampler(), BCConfig(updates=1, batch_size=4, hidden=(4,))), kwargs={"seed": 0},
         invalid={"sampler": [None, 3], "config": [None, OfflineConfig()], "seed": [-1, 0.5]}),  # fmt: skip
    dict(fn=train_offline, args=(_sampler(), OfflineConfig(updates=1, batch_size=4, hidden=(4,))), kwargs={"seed": 0},
         invalid={"sampler": [None], "config": [None, BCConfig()], "seed": [-1]}),  # fmt: skip
]
