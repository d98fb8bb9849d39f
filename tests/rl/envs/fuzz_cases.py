"""Fuzz cases for the batched envs (see tests/test_fuzz_api.py): constructors, step, reset, numpy_view."""

import numpy as np
import torch

from icml24.rl.envs import (
    BatchedDeceptivePointMass,
    BatchedMountainCarContinuous,
    BatchedMultiGoalPointMass,
    BatchedPendulum,
    DeceptivePointMassEnv,
    PointMassLayout,
    TorchVectorEnv,
    numpy_view,
)

BAD_N = [0, -3, 2.5, "4", None, True]
BAD_STEPS = [0, -1, 1.5, "100", True]
NONFINITE = [float("nan"), float("inf"), "1.0", None]


def pendulum_step(actions):
    """BatchedPendulum(num_envs=3).step(actions) after a reset."""
    env = BatchedPendulum(num_envs=3)
    env.reset(seed=0)
    return env.step(actions)


def point_mass_step(actions):
    """BatchedDeceptivePointMass(num_envs=2).step(actions) after a reset."""
    env = BatchedDeceptivePointMass(num_envs=2)
    env.reset(seed=0)
    return env.step(actions)


def pendulum_reset(seed=0, options=None):
    """A reset of BatchedPendulum(num_envs=3) (after a first full reset when options are given)."""
    env = BatchedPendulum(num_envs=3)
    env.reset(seed=0)
    return env.reset(seed=seed, options=options)


def point_mass_env_step(action):
    """DeceptivePointMassEnv().step(action) after a reset."""
    env = DeceptivePointMassEnv()
    env.reset(seed=0)
    return env.step(action)


FUZZ_CASES = [
    dict(fn=BatchedPendulum, kwargs={"num_envs": 4, "g": 10.0, "max_episode_steps": 200},
         invalid={"num_envs": BAD_N, "g": NONFINITE + [-1.0], "max_episode_steps": BAD_STEPS,
                  "dtype": [torch.int64, "float32"], "device": ["no-such-device", 3.5],
                  "autoreset_mode": ["next", "next_step", 1, None]},
         covers=(TorchVectorEnv,)),  # fmt: skip
    dict(fn=BatchedMountainCarContinuous, kwargs={"num_envs": 4, "goal_velocity": 0.0},
         invalid={"num_envs": BAD_N, "goal_velocity": NONFINITE + [-0.1], "max_episode_steps": BAD_STEPS}),
    dict(fn=BatchedDeceptivePointMass, kwargs={"num_envs": 4, "max_episode_steps": 100},
         invalid={"num_envs": BAD_N, "layout": [{"goal": (0, 0)}, "open"], "max_episode_steps": BAD_STEPS}),
    dict(fn=BatchedMultiGoalPointMass, kwargs={"num_envs": 4, "goals": ((1.0, 1.0), (-1.0, -1.0))},
         invalid={"num_envs": BAD_N, "goals": [(), ((1.0,),), ((1.0, float("nan")),), "corners", None],
                  "fixed_task": [2, -1, 0.5, "0", True],
                  "layout": [{"goal": (0, 0)}, "open"], "max_episode_steps": BAD_STEPS}),
    dict(fn=pendulum_step, args=(torch.zeros(3, 1),),
         invalid={"actions": [torch.zeros(2, 1), torch.zeros(3), torch.full((3, 1), float("nan")),
                              torch.tensor([[0.0], [float("inf")], [0.0]]), np.full((3, 1), np.nan), "left",
                              None, [[0.0], [0.0]], {"a": 1}]}),  # fmt: skip
    dict(fn=point_mass_step, args=(torch.zeros(2, 2),),
         invalid={"actions": [torch.zeros(2, 1), torch.zeros(2, 2, 1), torch.tensor([[0.0, float("nan")], [0.0, 0.0]]),
                              "up", np.array([["a", "b"], ["c", "d"]])]}),  # fmt: skip
    dict(fn=pendulum_reset, kwargs={"seed": 1, "options": {"reset_mask": np.array([True, False, True])}},
         invalid={"seed": [1.5, "0", True],
                  "options": [{"reset_mask": np.ones(2, dtype=bool)}, {"reset_mask": np.ones(3)},
                              {"reset_mask": [True, False, True]}, "reset"]}),  # fmt: skip
    dict(fn=PointMassLayout, kwargs={"goal": (-3.3, 3.3), "goal_radius": 0.5, "decoy_reward": 0.1},
         invalid={"goal": [(1.0,), (float("nan"), 0.0), "far", None], "goal_radius": NONFINITE + [0.0, -1.0],
                  "decoy_reward": NONFINITE, "half_width": [0.0, float("nan")], "start_noise": [-0.1, float("inf")],
                  "walls": [((0.0, 0.0, -1.0, 1.0),), ((0.0, 0.0, 1.0),), ((0.0, float("nan"), 1.0, 1.0),), 3],
                  "decoy": [(0.0,), (float("inf"), 0.0)], "goal_reward": [float("nan")], "decoy_radius": [0.0]}),  # fmt: skip
    dict(fn=DeceptivePointMassEnv, kwargs={"max_episode_steps": 100},
         invalid={"layout": ["open", {"goal": (0, 0)}], "max_episode_steps": BAD_STEPS}),
    dict(fn=point_mass_env_step, args=(np.zeros(2, dtype=np.float32),),
         invalid={"action": [np.zeros(3), np.array([np.nan, 0.0]), np.array([0.0, np.inf])]}),
    dict(fn=numpy_view, args=(BatchedPendulum(num_envs=2),), invalid={"env": [None, "env", object()]}),
]
