"""Fuzz cases for PW-DICE's exported callables (driven by tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.rl.offline import state_action_occupancy, state_occupancy
from icml24.rl.pw_dice import (
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

TASK = arbitrary_task(4, 2, seed=0, connectivity=3, noise=0.2, gamma=0.9)
D_DATA = 0.5 * state_action_occupancy(TASK.mdp, np.full((4, 2), 0.5), 0.9) + 0.5 / 8
D_EXP = state_occupancy(TASK.mdp, TASK.expert_policy, 0.9)
PAIRS = np.einsum("sa,sak->sk", state_action_occupancy(TASK.mdp, TASK.expert_policy, 0.9), TASK.mdp.P)
COST = dirac_cost(4)
BAD_DIST = [np.full(4, 0.5), -np.full(4, 0.25), np.full(3, 1 / 3), "d"]

EXEMPT = {
    "ArbitraryTask": "a plain record built by arbitrary_task (which validates its inputs)",
    "DICESolution": "a plain record returned by the solvers",
}

FUZZ_CASES = [
    dict(fn=arbitrary_task, args=(4, 2), kwargs={"seed": 0, "connectivity": 3},
         invalid={"n_states": [1, 2.5, "4"], "n_actions": [0, None], "seed": [-1, 0.5], "connectivity": [0, 5],
                  "noise": [-0.1, 1.5, "x"], "gamma": [1.0, -0.1]}),
    dict(fn=dirac_cost, args=(3,), invalid={"n_states": [0, 2.5, "3"]}),
    dict(fn=grid_manhattan_cost, args=(3,), invalid={"side": [0, 1.5, None]}),
    dict(fn=pw_dice_primal, args=(TASK.mdp, D_EXP, D_DATA, COST), kwargs={"gamma": 0.9, "eps1": 0.1, "eps2": 0.1},
         invalid={"model": [None, "mdp"], "d_expert": BAD_DIST, "d_data": [np.ones((4, 2)), np.ones(8) / 8],
                  "cost": [np.ones((3, 3)), np.ones(4)], "gamma": [1.0, 1.5], "eps1": [-1.0, "a"], "eps2": [-0.5]}),
    dict(fn=pw_dice_tabular_dual, args=(TASK.mdp, D_EXP, D_DATA, COST),
         kwargs={"gamma": 0.9, "eps1": 0.5, "eps2": 0.5, "max_iter": 20},
         invalid={"d_expert": BAD_DIST, "cost": [np.ones((2, 2))], "eps1": [0.0, -1.0], "eps2": [0.0],
                  "max_iter": [0, 1.5], "gamma": [1.0]}),
    dict(fn=smodice_kl_tabular, args=(TASK.mdp, D_EXP, D_DATA), kwargs={"gamma": 0.9},
         invalid={"model": [3], "d_expert": BAD_DIST, "delta": [0.0, -1.0], "reward": [np.ones(3)],
                  "gamma": [-0.5]}),
    dict(fn=smodice_chi_tabular, args=(TASK.mdp, D_EXP, D_DATA), kwargs={"gamma": 0.9},
         invalid={"d_expert": BAD_DIST, "d_data": [np.zeros((4, 2))], "delta": [0.0]}),
    dict(fn=lobsdice_tabular, args=(TASK.mdp, PAIRS, D_DATA), kwargs={"gamma": 0.9},
         invalid={"model": [None], "d_expert_pairs": [np.ones((4, 4)), np.ones(4) / 4], "alpha": [-1.0, "a"],
                  "delta": [0.0], "gamma": [2.0]}),
    dict(fn=occupancy_metrics, args=(TASK, TASK.expert_policy),
         invalid={"task": [None, TASK.mdp], "policy": [np.ones((4, 2)), np.array([0, 1, 2, 0]), "pi"]}),
    dict(fn=policy_from_occupancy, args=(D_DATA,), invalid={"occupancy": [np.ones(3), np.array([[np.nan, 1.0]])]}),
    dict(fn=pw_dice_dual_loss, args=(torch.zeros(3, 2), torch.zeros(4)),
         kwargs={"init_term": torch.tensor(0.0), "expert_term": torch.tensor(0.0), "lam3": torch.tensor(0.0),
                 "eps1": 0.5, "eps2": 0.5},
         invalid={"pair_scores": [np.zeros(3), None, torch.zeros(0)], "flow_residuals": [[1.0]],
                  "eps1": [0.0, -1.0], "eps2": [0.0], "lam3": [0.0]}),
]
