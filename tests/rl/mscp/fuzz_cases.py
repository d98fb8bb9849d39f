"""Fuzz cases for MSCP's exported callables (driven by tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.rl.mscp import (
    DriftPointMazeVecEnv,
    FastPlanner,
    GuidedTD3Agent,
    InverseDynamicsModel,
    MSCPConfig,
    PlannerConfig,
    SlowPlanner,
    WorldConfig,
    collect_passive_data,
    hindsight_batch,
    idm_action_error,
    maze_routes,
    pessimism_weight,
    pretrain_planners,
    run_online,
    scripted_actions,
    trajectory_index,
)
from icml24.rl.offline import StateDataset
from icml24.rl.value.td3 import TD3Config

DATA = collect_passive_data(n_trajectories=6, horizon=6, seed=0)
ROUTES = maze_routes()
ENV = DriftPointMazeVecEnv(2)
S2 = torch.zeros(3, 2)
BAD_T = [torch.full((3, 2), float("nan")), torch.zeros(3, 3), "x"]
TINY_WORLD = WorldConfig(passive_trajectories=6, passive_horizon=5, num_envs=2, total_steps=40, warmup_steps=10,
                         max_episode_steps=10, eval_points=2)  # fmt: skip
TINY_CFG = MSCPConfig(planner=PlannerConfig(steps=2, hidden=(4,)), td3=TD3Config(hidden=(4,), batch_size=8),
                      bc_steps=1)  # fmt: skip
SMALL_TD3 = TD3Config(hidden=(4,), batch_size=8)

FUZZ_CASES = [
    dict(fn=DriftPointMazeVecEnv, args=(2,), kwargs={"drift_prob": 0.5},
         invalid={"num_envs": [0, 1.5, "2"], "drift_prob": [-0.1, 1.5, "a"], "step_size": [0.0, -1.0],
                  "goal_radius": [0.0], "max_episode_steps": [0, 2.5], "maze": ["#S.G#", 3]}),
    dict(fn=SlowPlanner, kwargs={"horizon": 3, "max_step": 0.1, "hidden": (4,)},
         invalid={"horizon": [0, 1.5], "max_step": [0.0, -1.0, "a"], "hidden": [(), "8", (0,)], "state_dim": [0]}),
    dict(fn=SlowPlanner(horizon=2, hidden=(4,)).forward, args=(S2, S2), invalid={"state": BAD_T, "goal": BAD_T}),
    dict(fn=FastPlanner, kwargs={"ensemble": 2, "hidden": (4,)},
         invalid={"ensemble": [1, 2.0], "max_step": [0.0], "hidden": [[]], "state_dim": [-1]}),
    dict(fn=FastPlanner(ensemble=2, hidden=(4,)).forward, args=(S2, S2), invalid={"state": BAD_T,
                                                                                   "subgoal": BAD_T}),
    dict(fn=InverseDynamicsModel, kwargs={"hidden": (4,)},
         invalid={"action_dim": [0], "max_step": [-0.5], "hidden": [("a",)], "state_dim": [0]}),
    dict(fn=InverseDynamicsModel(hidden=(4,)).forward, args=(S2, S2),
         invalid={"state": BAD_T, "next_state": BAD_T}),
    dict(fn=pessimism_weight, args=(torch.ones(3),), kwargs={"beta": 1.0, "scale": 0.5},
         invalid={"uncertainty": [-torch.ones(3), torch.tensor([float("nan")]), [1.0]], "beta": [-1.0, "b"],
                  "scale": [0.0, -1.0]}),
    dict(fn=PlannerConfig, kwargs={"horizon": 4},
         invalid={"horizon": [0], "ensemble": [1], "hidden": [()], "steps": [0], "batch_size": [0], "lr": [0.0]}),
    dict(fn=hindsight_batch, args=(DATA, 3, 4, np.random.default_rng(0)),
         invalid={"data": ["d", None], "horizon": [0, 1.5], "size": [0]}),
    dict(fn=pretrain_planners, args=(DATA,), kwargs={"max_step": 0.1, "config": PlannerConfig(steps=1, hidden=(4,))},
         invalid={"data": [np.zeros((3, 2))], "max_step": [0.0, -1.0], "config": [{"steps": 1}], "seed": [-1]}),
    dict(fn=trajectory_index, args=(DATA,), invalid={"data": [np.zeros(3), "d"]}),
    dict(fn=maze_routes, args=(), invalid={"maze": ["#SG#", 5]}),
    dict(fn=scripted_actions, args=(torch.full((2, 2), 1.5), torch.tensor([3, 4]), ROUTES),
         kwargs={"noise": 0.1, "generator": torch.Generator()},
         invalid={"pos": [torch.full((2, 2), float("inf")), torch.zeros(2, 3)], "goal_cells": [torch.tensor([0.5, 1.0]),
                  torch.tensor([999, 0])], "routes": ["r"], "noise": [-0.1], "generator": [0]}),
    dict(fn=collect_passive_data, kwargs={"n_trajectories": 3, "horizon": 4, "seed": 1},
         invalid={"n_trajectories": [0], "horizon": [1], "noise": [-1.0], "drift_prob": [2.0], "seed": [-2],
                  "exclude_cells": [[(0, 0)], "ab", [(1,)]]}),
    dict(fn=WorldConfig, kwargs={"drift_prob": 0.5},
         invalid={"drift_prob": [1.5], "total_steps": [0], "num_envs": [0], "step_size": [0.0],
                  "passive_noise": [-1.0], "exclude_cells": ["ab"], "eval_points": [0]}),
    dict(fn=MSCPConfig, kwargs={"pessimism": 1.0},
         invalid={"planner": [{}], "td3": [None], "replan_every": [0], "pessimism": [-1.0], "guide_weight": [-1.0],
                  "bc_steps": [-1], "idm_lr": [0.0], "shaping": ["s"]}),
    dict(fn=GuidedTD3Agent, kwargs={"obs_dim": 2, "action_dim": 2, "config": SMALL_TD3, "seed": 0},
         invalid={"q_weight": [-1.0], "guide_weight": [-1.0], "bc_weight": [-1.0], "guide": [3], "bc": ["f"],
                  "obs_dim": [0], "seed": [-1]}),
    dict(fn=idm_action_error, args=(InverseDynamicsModel(hidden=(4,)), ENV), kwargs={"n": 10},
         invalid={"idm": ["m"], "env": [None], "n": [0], "seed": [-1]}),
    dict(fn=run_online, args=("mscp", TINY_WORLD, TINY_CFG), kwargs={"seed": 0},
         invalid={"method": ["sac", 1], "world": [{}], "config": [None], "seed": [-1, 0.5],
                  "passive": [np.zeros((3, 2))]}),
]

EXEMPT = {}
_ = StateDataset  # the passive data type (icml24.rl.offline) is fuzzed with the pw-dice cases
