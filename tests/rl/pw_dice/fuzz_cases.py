"""Fuzz cases for PW-DICE's exported callables (driven by tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.rl.offline import StateDataset, TransitionDataset, state_action_occupancy, state_occupancy
from icml24.rl.pw_dice import (
    ContrastiveMetric,
    DualConfig,
    GaussianPolicy,
    ImitationConfig,
    arbitrary_task,
    collect_point_mass,
    dirac_cost,
    distort_states,
    grid_manhattan_cost,
    lobsdice_tabular,
    occupancy_metrics,
    policy_from_occupancy,
    pw_dice_dual_loss,
    pw_dice_primal,
    pw_dice_tabular_dual,
    pw_dice_weights,
    run_imitation,
    scripted_expert,
    smodice_chi_tabular,
    smodice_kl_tabular,
    smodice_kl_weights,
    train_contrastive_metric,
    train_discriminator,
    weighted_bc,
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

_R = np.random.default_rng(0)
S4 = _R.standard_normal((30, 4))
DATA = TransitionDataset(states=S4, actions=_R.uniform(-1, 1, (30, 2)), next_states=S4 + 0.1, dones=np.zeros(30, bool),
                         steps=np.arange(30) % 10)
EXPERT = StateDataset(states=S4[:5], next_states=S4[:5] + 0.1, steps=np.arange(5))
SMALL = DualConfig(steps=1, batch_size=4, hidden=(4,))
COST = lambda x, y: torch.cdist(x, y)  # noqa: E731
REWARD = lambda x: torch.as_tensor(x)[:, 0]  # noqa: E731
TINY = ImitationConfig(expert_episodes=1, data_expert_episodes=1, data_random_episodes=2, metric_steps=1,
                       disc_steps=1, dual_steps=1, bc_steps=1, hidden=4, eval_episodes=2)

FUZZ_CASES += [
    dict(fn=ContrastiveMetric, kwargs={"state_dim": 4, "embed_dim": 3, "hidden": (4,)},
         invalid={"state_dim": [0, 1.5, "4"], "embed_dim": [0, None], "scale": [0.0, -1.0, "k"]}),
    dict(fn=train_contrastive_metric, args=(S4, S4 + 0.1), kwargs={"steps": 1, "batch_size": 4, "hidden": (4,)},
         invalid={"states": [np.zeros(3), "s", np.zeros((0, 4))], "next_states": [S4[:, :3]], "steps": [-1, 1.5],
                  "batch_size": [1, "b"], "lr": [0.0, -1.0], "seed": [-1]}),
    dict(fn=train_discriminator, args=(S4[:5], S4), kwargs={"steps": 1, "batch_size": 4, "hidden": (4,)},
         invalid={"expert_states": [S4[:, :2], None], "data_states": [np.zeros(4)], "steps": [-2],
                  "grad_penalty": [-1.0], "batch_size": [0]}),
    dict(fn=DualConfig, kwargs={"steps": 1},
         invalid={"eps1": [0.0, -1.0], "eps2": ["a"], "gamma": [1.0, -0.5], "lr": [0.0], "steps": [-1, 1.5],
                  "batch_size": [0], "hidden": [[4], (0,)], "kappa": [-1.0], "occupancy_cost": [-0.5]}),
    dict(fn=pw_dice_weights, args=(DATA, EXPERT), kwargs={"cost": COST, "reward": REWARD, "config": SMALL},
         invalid={"data": [None, EXPERT], "expert": [DATA, None], "cost": [None, 3], "reward": [None],
                  "config": ["cfg"], "seed": [-1], "initial_states": [np.zeros(4)]}),
    dict(fn=smodice_kl_weights, args=(DATA,), kwargs={"reward": REWARD, "config": SMALL},
         invalid={"data": [None], "reward": [None, 1.0], "config": [3], "seed": [0.5]}),
    dict(fn=GaussianPolicy, args=(4, 2), invalid={"state_dim": [0, 2.5], "action_dim": [0, "2"]}),
    dict(fn=weighted_bc, args=(DATA, np.ones(30)), kwargs={"steps": 1, "hidden": (4,)},
         invalid={"data": [None], "weights": [np.ones(3), -np.ones(30), np.zeros(30)], "steps": [-1],
                  "batch_size": [0], "seed": [-3]}),
    dict(fn=scripted_expert, args=(torch.zeros(3, 5, dtype=torch.float64),),
         invalid={"obs": [torch.zeros(3, 2), np.zeros((3, 5)), torch.zeros(5)]}),
    dict(fn=distort_states, args=(S4,), invalid={"states": [S4[:, :3], np.zeros(4), "s"]}),
    dict(fn=collect_point_mass, args=("random",), kwargs={"episodes": 2, "seed": 0, "horizon": 3},
         invalid={"episodes": [0, 1.5], "seed": [-1], "action_noise": [-0.1, "x"]}),
    dict(fn=ImitationConfig, kwargs={},
         invalid={"variant": ["rotated", None], "expert_episodes": [0], "hidden": [0, 1.5], "dual_steps": [-1],
                  "eps1": [0.0], "metric_scale": [-1.0], "expert_noise": [-0.1], "batch_size": [0]}),
    dict(fn=run_imitation, args=(TINY,), kwargs={"method": "bc", "seed": 0},
         invalid={"config": [None, {}], "method": ["gail", None], "seed": [-1, 0.5]}),
]
