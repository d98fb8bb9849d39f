"""Fuzz cases for negucb's exported callables (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.bandits import negucb as ng

BAD_INT = [0, -1, 2.5, "3", True, None]
BAD_POS = [0.0, -1.0, "x", None]
X = np.random.default_rng(0).uniform(size=(6, 2))
Y = np.arange(6, dtype=float) % 2
ENV = ng.NegotiationEnv(ng.TradingDomain(n_levels=5), episode_length=3)

FUZZ_CASES = [
    dict(fn=ng.MultiIssueDomain, kwargs={"n_issues": 2, "n_values": 3},
         invalid={"n_issues": BAD_INT, "n_values": BAD_INT + [1, 1000], "interaction": [-0.1, "x"]}),
    dict(fn=ng.TradingDomain, kwargs={"n_levels": 5}, invalid={"n_levels": BAD_INT + [1]}),
    dict(fn=ng.AllocationDomain, kwargs={"counts": (1, 2)},
         invalid={"counts": [(), (0, 1), (1.5,), "12", 3, None]}),
    dict(fn=ng.NegotiationEnv, args=(ng.TradingDomain(n_levels=5),), kwargs={"episode_length": 4},
         invalid={"domain": [None, "trading"], "episode_length": BAD_INT,
                  "types": [(), ((0.0, 0.3),), ((1.0, 1.5),), ((1.0,),), "ab", ((1.0, 0.99),)],
                  "theta_start": [-0.1, 1.5, "x"], "temperature": BAD_POS}),
    dict(fn=ng.NegUCB, kwargs={"n_features": 8},
         invalid={"beta": [-1.0, "x"], "lam": BAD_POS, "n_features": BAD_INT, "features": ["poly", 3],
                  "hidden_state": [1, "yes"], "lengthscale_state": BAD_POS, "lengthscale_bid": [0.0, -2.0, "x"],
                  "epsilon": [-0.1, 1.5], "exhaustive_limit": BAD_INT, "pool_top": BAD_INT,
                  "pool_random": BAD_INT, "local_steps": [-1, 1.5, True], "seed": [-1, 1.5, "x"]}),
    dict(fn=ng.EpsilonGreedy, kwargs={"epsilon": 0.1, "n_features": 8},
         invalid={"epsilon": [-0.1, 2.0], "lam": BAD_POS, "n_features": BAD_INT}),
    dict(fn=ng.LinearUCB, kwargs={"beta": 0.5}, invalid={"beta": [-1.0, "x"], "lam": BAD_POS, "hidden_state": [1]}),
    dict(fn=ng.TimeDependentTactic, kwargs={"exponent": 0.2, "floor": 0.3},
         invalid={"exponent": BAD_POS, "floor": [-0.1, 1.5, "x"]}),
    dict(fn=ng.RandomBidder, kwargs={"seed": 1}, invalid={"seed": [-1, 1.5, "x"]}),
    dict(fn=ng.simulate, args=(ENV, ng.RandomBidder(), 5, 2), kwargs={"seed": 0},
         invalid={"env": [None, "env"], "agent": [None, 3], "horizon": BAD_INT, "n_trials": BAD_INT,
                  "seed": ["x", 1.5, -1]}),
    dict(fn=ng.kernel_ridge_posterior, args=(X, Y, X[:2]), kwargs={"lengthscales": 0.5, "lam": 1.0},
         invalid={"train": [np.ones(3), np.array([[np.nan, 1.0]] * 6), "x"], "targets": [np.ones(4), np.ones((6, 1))],
                  "query": [np.ones((2, 3)), np.ones(2)], "lengthscales": [0.0, -1.0, np.ones(3), "x"],
                  "lam": BAD_POS}),
    dict(fn=ng.median_lengthscale, args=(X,),
         invalid={"points": [np.ones(3), np.ones((1, 2)), np.array([[np.inf, 0.0], [0.0, 0.0]])],
                  "max_points": BAD_INT, "seed": [-1, 1.5]}),
    dict(fn=ng.RandomFourierFeatures, args=(8, np.ones(3)),
         invalid={"n_features": BAD_INT, "lengthscales": [np.zeros(3), np.array([]), np.ones((2, 2))],
                  "seed": [-1, 1.5]}),
    dict(fn=ng.RidgePosterior, args=(2, 3, 1.0), invalid={"n_trials": BAD_INT, "dim": BAD_INT, "lam": BAD_POS}),
]

EXEMPT = {
    "Domain": "the base class of the three domains (each concrete domain has a case)",
    "NegotiationAgent": "the base class of the agents (each concrete agent has a case)",
    "NegotiationRun": "a result record returned by simulate, not an entry point",
    "Observation": "a record the environment hands to the agents, not an entry point",
    "HiddenState": "takes no arguments; its update() gets observations from the environment",
    "OracleBidder": "takes no arguments (it reads the environment it is reset with)",
}
