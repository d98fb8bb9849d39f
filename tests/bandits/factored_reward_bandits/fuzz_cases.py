"""Fuzz cases for factored-reward-bandits' exported callables (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.bandits import factored_reward_bandits as frb

MEANS = np.array([[0.9, 0.5, 0.4], [0.8, 0.6, 0.3]])
REQ = np.array([[0, 3, 5], [0, 2, 4]])
BEST = np.array([0, 0])
ACTS = np.array([[1, 1], [2, 2]])
CURVE = np.cumsum(np.linspace(1.0, 0.1, 50))
AGENT_KW = {"n_arms": 3, "n_factors": 2, "sigma": 0.1}
BAD_INT = [0, -1, 2.5, "3", True, None]

FUZZ_CASES = [
    dict(fn=frb.joint_actions, args=(3, 2), invalid={"n_arms": BAD_INT, "n_factors": BAD_INT}),
    dict(fn=frb.joint_index, args=(ACTS, 3),
         invalid={"actions": [np.array([[np.nan, 1.0]]), np.array([[0.5, 1.0]]), np.array([[3, 0]]),
                              np.array([[-1, 0]]), np.array(["a", "b"]), np.array(2)],
                  "n_arms": BAD_INT}),
    dict(fn=frb.FactoredEnv, kwargs={"n_arms": 3, "n_factors": 2, "sigma": 0.1},
         invalid={"n_arms": BAD_INT, "sigma": [-0.1, "x"], "alpha": [-0.1, 1.5], "noise": ["cauchy", 1],
                  "means": [np.array([[0.5, -0.1, 0.3], [0.5, 0.5, 0.5]]), np.zeros((2, 2)), np.array([1.0])]}),
    dict(fn=frb.ParallelFactoredEnv, kwargs={"n_arms": 2, "n_factors": 3, "sigma": 0.1},
         invalid={"n_factors": BAD_INT, "sigma": [-1.0], "best_mean": [0.0, -1.0], "other_mean": [0.0]}),
    dict(fn=frb.FUCB, kwargs=dict(AGENT_KW), invalid={"n_arms": BAD_INT, "sigma": [-1.0], "c_exp": [0.0, -1.0]}),
    dict(fn=frb.FTrack, kwargs=dict(AGENT_KW, horizon=1000),
         invalid={"horizon": [0, 2, 2.5, None], "c": [-1.0], "schedule_order": ["random"]}),
    dict(fn=frb.FlatUCB1, kwargs=dict(AGENT_KW), invalid={"n_factors": BAD_INT, "sigma": [-1.0]}),
    dict(fn=frb.FlatMoMUCB, kwargs=dict(AGENT_KW), invalid={"mult": [-1.0], "variance_proxy": [-1.0, "x"]}),
    dict(fn=frb.simulate, args=(frb.FactoredEnv(**AGENT_KW), frb.FUCB(**AGENT_KW), 20, 2),
         kwargs={"seed": 0},
         invalid={"horizon": BAD_INT, "n_trials": BAD_INT, "env": [None, "env"], "agent": [None, 3],
                  "seed": ["x", 1.5]}),
    dict(fn=frb.loglog_slope, args=(CURVE,),
         invalid={"cumulative": [np.ones(2), np.ones((3, 3)), np.array([1.0, -2.0, 3.0, 4.0])],
                  "start_fraction": [-0.1, 1.5, "x"]}),
    dict(fn=frb.required_samples, args=(MEANS, 0.1, 5.0),
         invalid={"means": [np.array([[0.5, 0.5]]), np.array([[0.5, -1.0]])], "sigma": [-1.0],
                  "log_term": [-1.0, "x"]}),
    dict(fn=frb.aligned_schedule, args=(REQ, BEST),
         invalid={"required": [np.array([[0, -1, 2], [0, 1, 1]]), np.ones(3)], "best": [np.array([0, 3]), np.array([0])],
                  "length": [-1, "x"], "order": ["sideways"]}),
    dict(fn=frb.schedule_cost, args=(MEANS, ACTS, np.array([2.0, 3.0])),
         invalid={"actions": [np.array([[3, 0], [0, 0]]), np.ones((2, 3), dtype=int)],
                  "counts": [np.array([-1.0, 1.0]), np.ones(3)]}),
    dict(fn=frb.exploration_lp, args=(MEANS, 0.1, 1000),
         invalid={"horizon": BAD_INT, "sigma": [-1.0], "max_vectors": [0, -5, "x"]}),
]

EXEMPT = {
    "ExplorationLP": "a result record returned by exploration_lp, not an entry point",
    "Simulation": "a result record returned by simulate, not an entry point",
    "FactoredAgent": "the abstract base class of the agents (each concrete agent has a case)",
}
