"""Fuzz cases for the lp-coresets entry points (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.optim.lp_coresets import (
    Coreset,
    MultipleLpCoreset,
    coreset_probabilities,
    inclusion_probabilities,
    lewis_weights,
    lp_cost,
    p2_worst_case_error,
    power_mean_cost,
    power_mean_excess,
    power_mean_rate,
    residual_mass,
    sample_coreset,
    sensitivity_mix,
    solve_multi_lp,
    solve_power_mean,
    uniform_power_mean,
    uniform_probabilities,
    union_of_column_coresets,
)

_rng = np.random.default_rng(0)
A = _rng.standard_normal((40, 3))
B = A @ _rng.standard_normal((3, 2)) + 0.1 * _rng.standard_normal((40, 2))
X = np.linalg.lstsq(A, B, rcond=None)[0]
Q = np.full(40, 1 / 40)
CS = Coreset(np.arange(0, 40, 2), np.full(20, 2.0))
PTS = _rng.standard_normal((30, 2))
NAN_A = A.copy()
NAN_A[0, 0] = np.nan
BAD_MATRIX = [NAN_A, A[:, 0], np.zeros((0, 3)), "A", None]
BAD_P = [0.0, -1.0, float("nan"), float("inf"), "2", None, True]
BAD_RNG = [-1, 1.5, "seed"]


def fit_multiple_lp_coreset(X, y, p=1.5, k=20, mix=None, pilot_size=None, scheme="poisson", random_state=0):
    """MultipleLpCoreset(...).fit(X, y) (X = A, y = B): the estimator checks its hyperparameters in fit (sklearn)."""
    return MultipleLpCoreset(p=p, k=k, mix=mix, pilot_size=pilot_size, scheme=scheme,
                             random_state=random_state).fit(X, y)  # fmt: skip


def coreset_cost(indices, weights, A, B, X, p):
    """Coreset(indices, weights).cost(A, B, X, p)."""
    return Coreset(indices, weights).cost(A, B, X, p)


FUZZ_CASES = [
    dict(fn=lewis_weights, args=(A, 1.5),
         invalid={"A": BAD_MATRIX + [np.zeros((5, 2))], "p": BAD_P, "max_iter": [0, -3, 2.5, "9"],
                  "tol": [-1.0, float("nan"), "x"], "damping": [0.0, 1.5, float("nan"), "a"],
                  "on_fail": ["quiet", None]}),
    dict(fn=lp_cost, args=(A, B, X, 1.5),
         invalid={"A": BAD_MATRIX, "B": [B[:10], np.full_like(B, np.nan), "B"], "X": [X[:2], X.T, "X", None],
                  "p": BAD_P, "weights": [np.ones(3), -np.ones(40), np.full(40, np.nan), "w"]}),
    dict(fn=solve_multi_lp, args=(A, B, 1.5), kwargs={"max_iter": 20},
         invalid={"A": BAD_MATRIX, "B": [B[:10], "B"], "p": BAD_P + [0.5],
                  "weights": [np.ones(3), -np.ones(40), np.zeros(40)], "max_iter": [0, 1.5, "a"],
                  "tol": [-1.0, float("nan")], "X0": [X[:2], np.full_like(X, np.nan)]}),
    dict(fn=residual_mass, args=(A, B, X, 1.5),
         invalid={"A": BAD_MATRIX, "B": [B[:3]], "X0": [X[:1], "X"], "p": BAD_P}),
    dict(fn=sensitivity_mix, args=(1.5, 3), invalid={"p": BAD_P, "d": [0, -2, 1.5, "3"]}),
    dict(fn=coreset_probabilities, args=(A, B, 1.5), kwargs={"X0": X},
         invalid={"A": BAD_MATRIX, "B": [B[:5], "B"], "p": BAD_P, "X0": [X[:2], np.full_like(X, np.inf)],
                  "lewis": [np.ones(5), -np.ones(40), np.zeros(40), np.full(40, np.nan)],
                  "mix": [-0.1, 1.5, float("nan"), "half"]}),
    dict(fn=inclusion_probabilities, args=(Q, 10),
         invalid={"q": [-Q, np.zeros(40), Q.reshape(4, 10), "q", np.array([np.nan, 1.0])],
                  "k": [0, -1, 41, 2.5, True, "10"]}),
    dict(fn=sample_coreset, args=(Q, 10, 0),
         invalid={"q": [-Q, np.zeros(40), "q"], "k": [0, 41, 1.5], "rng": BAD_RNG, "scheme": ["bernoulli", None]}),
    dict(fn=uniform_probabilities, args=(10,), invalid={"n": [0, -5, 2.5, "10", True]}),
    dict(fn=union_of_column_coresets, args=(A, B, 1.5, 20, 0), kwargs={"X0": X},
         invalid={"A": BAD_MATRIX, "B": [B[:5]], "p": BAD_P, "k": [0, 41, 1.5], "rng": BAD_RNG,
                  "X0": [X[:1]], "lewis": [np.ones(3), -np.ones(40)], "mix": [2.0, -1.0]}),
    dict(fn=p2_worst_case_error, args=(A, B, CS),
         invalid={"A": BAD_MATRIX, "B": [B[:5], "B"],
                  "coreset": [None, (np.arange(3), np.ones(3)), Coreset(np.array([50]), np.ones(1))]}),
    dict(fn=coreset_cost, args=(np.arange(0, 40, 2), np.full(20, 2.0), A, B, X, 1.5),
         invalid={"indices": [np.array([3, 1]), np.array([-1, 2]), np.array([0.5, 1.5]), np.array([[1, 2]])],
                  "weights": [np.ones(3), -np.ones(20), np.full(20, np.nan)],
                  "A": BAD_MATRIX, "X": [X[:1]], "p": BAD_P},
         covers=(Coreset,)),
    dict(fn=fit_multiple_lp_coreset, args=(A, B),
         invalid={"X": BAD_MATRIX, "y": [B[:4], "B"], "p": BAD_P, "k": [0, -3, 2.5, "k"],
                  "mix": [-0.5, 1.5, "m"], "pilot_size": [-1, 41, 1.5], "scheme": ["x"],
                  "random_state": BAD_RNG},
         covers=(MultipleLpCoreset,)),
    dict(fn=power_mean_rate, args=(1.5,), invalid={"p": BAD_P + [0.5]}),
    dict(fn=power_mean_cost, args=(PTS, np.zeros(2), 1.5),
         invalid={"points": [PTS[:, 0], "P", np.full((3, 2), np.nan)], "x": [np.zeros(3), "x"], "p": BAD_P,
                  "weights": [np.ones(3), -np.ones(30)]}),
    dict(fn=solve_power_mean, args=(PTS, 1.5),
         invalid={"points": [PTS[:, 0], "P"], "p": BAD_P + [0.5], "weights": [np.ones(2), np.zeros(30)],
                  "max_iter": [0, 1.5], "tol": [-1.0]}),
    dict(fn=uniform_power_mean, args=(PTS, 1.5, 10, 0),
         invalid={"points": [PTS[:, 0]], "p": BAD_P, "k": [0, 31, 2.5], "rng": BAD_RNG}),
    dict(fn=power_mean_excess, args=(PTS, np.ones(2), np.zeros(2), 1.5),
         invalid={"points": [PTS[:, 0]], "x": [np.zeros(5)], "x_star": [np.zeros(5), "x"], "p": BAD_P}),
]

EXEMPT = {
    "LewisResult": "a frozen result record returned by lewis_weights, not an input",
    "LpSolution": "a frozen result record returned by solve_multi_lp, not an input",
}
