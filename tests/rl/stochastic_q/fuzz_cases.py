"""Fuzz cases for Stochastic Q-learning's exported callables (driven by tests/test_fuzz_api.py)."""

import numpy as np

from icml24.rl.envs.chain import garnet_mdp
from icml24.rl.stochastic_q import (
    StochasticCandidates,
    StochasticMaximizer,
    candidate_size,
    make_dqn_agent,
    p_argmax_in_random_set,
    p_top_m_in_random_set,
    run_tabular,
    sample_without_replacement,
    stochastic_max,
    stochastic_q_learning,
)
from icml24.rl.value import ActionGrid, QLearningConfig

MDP = garnet_mdp(n_states=3, n_actions=8, seed=0)
CFG = QLearningConfig(gamma=0.9, alpha=0.5, epsilon=0.1, horizon=10)
Q = np.random.default_rng(0).standard_normal((4, 16))
TABLE = ActionGrid([-1.0], [1.0], 8).table()

FUZZ_CASES = [
    dict(fn=candidate_size, args=(1024,), invalid={"n_actions": [0, -3, 2.5, "8", True, None]}),
    dict(fn=p_argmax_in_random_set, args=(64, 6),
         invalid={"n": [0, -1, 3.5, None], "k": [-1, 0, 2.0, "3"]}),
    dict(fn=p_top_m_in_random_set, args=(64, 6, 3),
         invalid={"n": [0, -5, 1.5], "k": [0, -1, 2.5], "m": [-1, 65, 1.5, None]}),
    dict(fn=sample_without_replacement, args=(20, 4, 8, np.random.default_rng(0)),
         invalid={"n": [0, -2, 3.0], "k": [0, -1, 1.5], "size": [-1, 2.5], "rng": [0, None, "rng"]}),
    dict(fn=stochastic_max, args=(Q, 3, np.random.default_rng(0)), kwargs={"memory": np.array([[0], [1], [2], [3]])},
         invalid={"q": [np.zeros(5), np.zeros((2, 0)), np.array([["a"]])], "k": [0, -2, 1.5],
                  "rng": [None, 3], "memory": [np.array([[16], [0], [0], [0]]), np.array([[0.5], [1], [2], [3]]),
                                               np.array([[0, 1, 2]]), np.array([[-2], [0], [0], [0]])]}),
    dict(fn=StochasticMaximizer, kwargs={"n_runs": 2, "n_states": 3, "k": 2},
         invalid={"n_runs": [0, -1, 1.5], "n_states": [0, 2.5], "k": [0, -1, 1.5], "use_memory": ["yes", 1]}),
    dict(fn=StochasticCandidates, kwargs={"k": 3, "memory": "batch"},
         invalid={"k": [0, -4, 2.5], "memory": ["argmax", None, 1]}),
    dict(fn=stochastic_q_learning, args=(MDP,), kwargs={"config": CFG, "n_runs": 2, "steps": 20, "seed": 0},
         invalid={"mdp": [None, np.zeros((3, 8, 3))], "n_runs": [0, 1.5], "steps": [-1, 2.5], "seed": [-1, 0.5],
                  "k": [0, -1, 2.5], "use_memory": ["no"]}),
    dict(fn=run_tabular, args=("stoch_q_learning", MDP), kwargs={"config": CFG, "n_runs": 2, "steps": 20, "seed": 0},
         invalid={"method": ["sarsa", None], "config": [None, {"gamma": 0.9}], "mdp": [None]}),
    dict(fn=QLearningConfig, kwargs={"gamma": 0.9, "alpha": 0.5, "epsilon": 0.1},
         invalid={"gamma": [1.5, -0.1], "alpha": [0.0, 1.5, -0.5], "epsilon": [-0.1, 1.1], "horizon": [0, 2.5],
                  "q_init": ["high"], "double": ["yes"]}),
    dict(fn=make_dqn_agent, args=("stochdqn",), kwargs={"obs_dim": 3, "action_table": TABLE, "k": 3, "seed": 0},
         invalid={"method": ["dqn2", None], "obs_dim": [0, -1, 2.5], "action_table": [np.zeros(8), np.zeros((0, 1))],
                  "k": [0, -1, 1.5], "memory": ["argmax"], "seed": [-1, 1.5], "config": [None]}),
]
