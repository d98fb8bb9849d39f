"""Fuzz cases for the shared decision primitives (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.common import decide

A = np.array([0.9, 0.8, 0.85, 0.95])
B = np.array([0.7, 0.75, 0.6, 0.8])

FUZZ_CASES = [
    dict(fn=decide.compare, args=(A, B), kwargs={"paired": True},
         invalid={"alpha": [0.0, 0.5, -1, "x"], "alternative": ["two-sided", 1], "paired": ["yes", None],
                  "margin": [float("nan")], "test": ["z"]},
         allowed={"method": "NaN marks a missing seed and is dropped", "baseline": "NaN marks a missing seed"}),
    dict(fn=decide.compare_rates, args=(8, 10, 5, 10), invalid={"k1": [-1, 11, 1.5], "n2": [-3, "10"]}),
    dict(fn=decide.rate_vs_value, args=(8, 10, 0.5), invalid={"value": [0.0, 1.0, -0.2], "k": [12]}),
    dict(fn=decide.trend, args=([1.0, 2.0, 3.0, 4.0], [1.0, 2.1, 2.9, 4.2]), kwargs={"claim": "increasing"},
         invalid={"claim": ["up", None], "method": ["pearson"]}),
    dict(fn=decide.equivalence, args=(A, B), kwargs={"margin": 0.5}, invalid={"margin": [0.0, -1.0]},
         allowed={"method": "NaN marks a missing seed", "baseline": "NaN marks a missing seed"}),
    dict(fn=decide.compare_to_value, args=(A, 0.5), invalid={"value": [float("inf")]},
         allowed={"values": "NaN marks a missing seed"}),
]
