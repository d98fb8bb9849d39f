"""Planning, Fast and Slow: Online RL with Action-Free Offline Data via Multiscale Planners (MSCP; Wu, Hu, Yang,
Zhang, Zhang; ICML 2024).

https://proceedings.mlr.press/v235/wu24j.html · OpenReview https://openreview.net/forum?id=HwVZbPbMjw

Passive (action-free) data helps online RL when the dynamics are *identifiable* (the action's effect can be told
apart from the environment's stochasticity). Multiscale State-Centric Planners pre-train two planners in state
space on such data, a slow one for long-range subgoals and a fast one for the next state, the latter with a
pessimistic regulariser against the shift between offline and online states, and act through an inverse
dynamics model learned online. The algorithm here is reconstructed from the abstract (the full text and code
were not available to us); the README lists every choice we made.
"""

from icml24.rl.mscp.agent import (
    METHODS,
    GuidedTD3Agent,
    MSCPConfig,
    WorldConfig,
    idm_action_error,
    run_online,
)
from icml24.rl.mscp.data import (
    DriftPointMazeVecEnv,
    collect_passive_data,
    maze_routes,
    scripted_actions,
    trajectory_index,
)
from icml24.rl.mscp.planners import (
    FastPlanner,
    InverseDynamicsModel,
    PlannerConfig,
    SlowPlanner,
    hindsight_batch,
    pessimism_weight,
    pretrain_planners,
)

SLUG = "mscp"

__all__ = [
    "METHODS",
    "SLUG",
    "DriftPointMazeVecEnv",
    "FastPlanner",
    "GuidedTD3Agent",
    "InverseDynamicsModel",
    "MSCPConfig",
    "PlannerConfig",
    "SlowPlanner",
    "WorldConfig",
    "collect_passive_data",
    "hindsight_batch",
    "idm_action_error",
    "maze_routes",
    "pessimism_weight",
    "pretrain_planners",
    "run_online",
    "scripted_actions",
    "trajectory_index",
]
