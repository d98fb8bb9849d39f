"""The difficulty measures of "When Do Skills Help Reinforcement Learning?" (Li, Poesia, Solar-Lezama; ICML 2024).

https://arxiv.org/abs/2406.07897 · official code https://github.com/uranium11010/rl-skill-theory

For a deterministic sparse-reward MDP (next-state table ``T (S, A)``, one goal ``g``, start distribution ``p``):

- ``d_A(s)``: the length of the shortest action sequence from ``s`` to ``g`` (a macroaction is one step), by
  breadth-first search backwards from ``g`` (:func:`goal_distances`);
- p-learning difficulty ``J_learn = |A| E_{s~p}[d_A(s)]`` (Section 3 of the paper; the official code's
  ``action_space_size * avg_sol_len``), :func:`learning_difficulty`;
- p-exploration difficulty ``J_explore = E_{s~p}[-log q_eps(s)]`` with ``q_eps`` the probability that a uniform
  random walk that stops with probability ``eps`` per step reaches ``g``: ``q(g) = 1``,
  ``q(s) = (1 - eps) mean_a q(T(s, a))`` (:func:`exploration_probabilities`, :func:`exploration_difficulty`);
- p-incompressibility ``I_p = max_eps [H(p) - log((1 - eps)/eps)] / [E_p[d_A] log(|A| / (1 - eps))]``
  (the official code's ``get_incompress``): the information needed to name a start state per step of its
  optimal solution, over the most an action can carry (:func:`incompressibility`);
- the combined difficulty ``log(lambda J_learn + (1 - lambda) exp(J_explore))`` that the paper correlates with
  log sample complexity, with ``lambda`` fitted to maximise the correlation (:func:`combined_difficulty`,
  :func:`fit_combination_weight`).

Every function is exact on the full state table and vectorised over states (no Python loop over states).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from icml24.rl.value.tabular import check_int


def _real(name: str, value: Any, low: float, high: float, *, low_open: bool = True, high_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or (v <= low if low_open else v < low) or (v >= high if high_open else v > high):
        lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}, got {value!r}")
    return v


def check_table(next_state: Any, name: str = "next_state") -> np.ndarray:
    """A next-state table ``(S, A)`` of integer state indices in ``[0, S)``, or a clear error."""
    if not isinstance(next_state, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of shape (S, A), got {type(next_state).__name__}")
    if next_state.ndim != 2 or next_state.shape[0] == 0 or next_state.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (S, A) table, got shape {next_state.shape}")
    if not np.issubdtype(next_state.dtype, np.integer):
        raise TypeError(f"{name} must hold integer state indices, got dtype {next_state.dtype}")
    S = next_state.shape[0]
    if next_state.min() < 0 or next_state.max() >= S:
        raise ValueError(f"{name} entries must be state indices in [0, {S})")
    return next_state


def _check_goal(goal: Any, n_states: int) -> int:
    if isinstance(goal, bool) or not isinstance(goal, (int, np.integer)):
        raise TypeError(f"goal must be an int state index, got {type(goal).__name__} {goal!r}")
    if not 0 <= goal < n_states:
        raise ValueError(f"goal must be a state index in [0, {n_states}), got {goal}")
    return int(goal)


def check_distribution(p: Any, n_states: int, name: str = "start") -> np.ndarray:
    """A probability vector over ``n_states`` states, or a clear error."""
    if not isinstance(p, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of shape ({n_states},), got {type(p).__name__}")
    p = p.astype(np.float64, copy=False)
    if p.shape != (n_states,) or not np.all(np.isfinite(p)) or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError(f"{name} must be a probability vector over {n_states} states (shape {p.shape} given)")
    return p


def goal_distances(next_state: np.ndarray, goal: int) -> np.ndarray:
    """``d_A(s)``: shortest number of actions from ``s`` to ``goal`` (``inf`` where the goal is unreachable).

    Backward breadth-first search in level sets: the states at distance ``k`` are the not yet labelled states
    with some action into the level-``k-1`` set, found by one vectorised gather ``frontier[T].any(1)`` over the
    whole table per level (``O(S A)`` per level, levels = the diameter; no inverse table is built).
    """
    T = check_table(next_state)
    g = _check_goal(goal, T.shape[0])
    dist = np.full(T.shape[0], np.inf)
    dist[g] = 0.0
    frontier = np.zeros(T.shape[0], dtype=bool)
    frontier[g] = True
    unlabelled = ~frontier
    level = 0
    while True:
        level += 1
        hit = unlabelled & frontier[T].any(1)
        if not hit.any():
            return dist
        dist[hit] = level
        unlabelled &= ~hit
        frontier = hit


def _check_distances(distances: Any) -> np.ndarray:
    if not isinstance(distances, np.ndarray) or distances.ndim != 1:
        raise TypeError(f"distances must be a 1-d numpy array, got {type(distances).__name__}")
    d = distances.astype(np.float64, copy=False)
    if np.any(np.isnan(d)) or np.any(d < 0):
        raise ValueError("distances must be >= 0 (inf where the goal is unreachable), without NaN")
    return d


def _solvable_start(distances: np.ndarray, start: np.ndarray) -> None:
    if np.any(start[~np.isfinite(distances)] > 0):
        raise ValueError("start puts mass on states from which the goal is unreachable (d_A = inf)")


def mean_solution_length(distances: np.ndarray, start: np.ndarray) -> float:
    """``E_{s~p}[d_A(s)]`` (the official code's ``avg_sol_len``)."""
    distances = _check_distances(distances)
    if isinstance(start, np.ndarray) and start.shape != distances.shape:
        raise ValueError(f"start and distances must have one entry per state, got {start.shape} and {distances.shape}")
    p = check_distribution(start, distances.shape[0])
    _solvable_start(distances, p)
    support = p > 0
    return float(p[support] @ distances[support])


def learning_difficulty(n_actions: int, distances: np.ndarray, start: np.ndarray) -> float:
    """p-learning difficulty ``J_learn = |A| E_{s~p}[d_A(s)]`` (Section 3)."""
    n_actions = check_int("n_actions", n_actions, 1)
    return n_actions * mean_solution_length(distances, start)


def exploration_probabilities(
    next_state: np.ndarray, goal: int, epsilon: float, *, rtol: float = 1e-6, max_iter: int = 1_000_000
) -> np.ndarray:
    """``q_eps(s)``: probability that the eps-terminating uniform random walk from ``s`` reaches ``goal``.

    Fixed point of ``q(g) = 1``, ``q(s) = (1 - eps) mean_a q(T(s, a))``, iterated from ``q = 1[s = g]``: the
    iterates increase monotonically to ``q_eps`` (iterate ``k`` is the probability of reaching ``g`` within
    ``k`` steps), and the iteration stops when no positive entry grows by a factor above ``1 + rtol``. (The
    official code stops at a log-ratio of ``1e-3``; ``J_explore`` is then accurate to about that much.)
    """
    T = check_table(next_state)
    g = _check_goal(goal, T.shape[0])
    eps = _real("epsilon", epsilon, 0.0, 1.0, low_open=False)
    rtol = _real("rtol", rtol, 0.0, 1.0)
    max_iter = check_int("max_iter", max_iter, 1)
    q = np.zeros(T.shape[0])
    q[g] = 1.0
    scale = (1.0 - eps) / T.shape[1]
    # one contiguous index array per action: A gathers of S entries are ~3x faster than one (S, A) gather
    columns = [np.ascontiguousarray(T[:, a], dtype=np.intp) for a in range(T.shape[1])]
    buffer = np.empty(T.shape[0])
    for _ in range(max_iter):
        new = np.take(q, columns[0])
        for col in columns[1:]:
            np.take(q, col, out=buffer)
            new += buffer
        new *= scale
        new[g] = 1.0
        grown = new > q * (1.0 + rtol)
        q = new
        if not grown.any():
            break
    return q


def exploration_difficulty(q: np.ndarray, start: np.ndarray) -> float:
    """p-exploration difficulty ``J_explore = E_{s~p}[-log q_eps(s)]`` (Section 3)."""
    if not isinstance(q, np.ndarray) or q.ndim != 1:
        raise TypeError("q must be a 1-d numpy array of reach probabilities")
    if not np.all(np.isfinite(q)) or np.any(q < 0) or np.any(q > 1):
        raise ValueError("q must hold probabilities in [0, 1]")
    if isinstance(start, np.ndarray) and start.shape != q.shape:
        raise ValueError(f"start and q must have one entry per state, got {start.shape} and {q.shape}")
    p = check_distribution(start, q.shape[0])
    support = p > 0
    if np.any(q[support] <= 0):
        raise ValueError("start puts mass on states the random walk never reaches the goal from (q = 0)")
    return float(p[support] @ -np.log(q[support]))


def entropy(p: np.ndarray) -> float:
    """Shannon entropy ``H(p)`` in nats."""
    if not isinstance(p, np.ndarray) or p.ndim != 1:
        raise TypeError(f"p must be a 1-d numpy array, got {type(p).__name__}")
    p = check_distribution(p, p.shape[0], "p")
    nz = p[p > 0]
    return float(-(nz @ np.log(nz)))


def incompressibility(start_entropy: float, mean_length: float, n_actions: int) -> float:
    """p-incompressibility ``I_p = max_{eps in (0,1)} [H(p) - log((1-eps)/eps)] / [E_p[d_A] log(|A|/(1-eps))]``.

    The maximum over ``eps`` is found on a grid of 2001 points of ``logit(eps)`` in ``[-30, 30]`` refined by a
    bounded scalar search. The ratio's limit at ``eps -> 1`` is ``1 / E_p[d_A]`` for every ``H(p)`` (numerator
    and denominator both grow like ``log(1/(1-eps))``).

    The limit, and the value at ``H(p) = 0``: the ratio is below ``1 / E_p[d_A]`` for every ``eps`` exactly when
    ``H(p) <= log|A|`` (``H + logit(eps) < log|A| + log(1 + e^logit)``), so for ``0 < H(p) <= log|A|`` the
    supremum is the boundary limit ``1 / E_p[d_A]``, not attained, and the grid returns its value at the grid's
    end, ``(H + 30) / (E_p[d_A] (log|A| + log(1 + e^30)))``, a few per cent below the limit (0.956 / E_p[d_A] at
    ``|A| = 4``); above ``log|A|`` an interior maximum exceeds the limit and tends to it as ``H(p)`` falls to
    ``log|A|``. So ``I_p -> about 1 / E_p[d_A]`` as ``H(p) -> 0+`` (the 0.1055 at ``H = 1e-6`` of an
    environment with ``E_p[d_A]`` near 9). A point-mass start (``H(p) = 0``) gets
    ``I_p = 0``, the official code's value for CliffWalking (``get_incompress`` returns 0 there): a deliberate
    jump of ``1 / E_p[d_A]`` at 0, where the bound carries no information about the solutions (the start state
    needs no naming). Our environments do not sit in between: CliffWalking has ``H = 0`` and the others have
    ``H > log|A|`` (an interior maximum), and CliffWalking stays the least incompressible with either value
    (``1 / 13 = 0.077`` against CompILE2's 0.130), so claim 2's order does not depend on the convention.
    """
    H = _real("start_entropy", start_entropy, 0.0, math.inf, low_open=False)
    D = _real("mean_length", mean_length, 0.0, math.inf)
    A = check_int("n_actions", n_actions, 2)
    if H == 0.0:
        return 0.0

    def ratio(logit: np.ndarray) -> np.ndarray:
        # log((1-eps)/eps) = -logit; log(A/(1-eps)) = log A + log(1 + e^logit)
        return (H + logit) / (D * (math.log(A) + np.logaddexp(0.0, logit)))

    grid = np.linspace(-30.0, 30.0, 2001)
    i = int(np.argmax(ratio(grid)))
    from scipy.optimize import minimize_scalar

    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(lambda x: -float(ratio(np.array(x))), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-10})  # fmt: skip
    return float(max(ratio(grid[i]), -res.fun))


def combined_difficulty(j_learn: Any, j_explore: Any, weight: float) -> np.ndarray:
    """``log(lambda J_learn + (1 - lambda) exp(J_explore))`` (the paper's Table 1 regressor), computed with
    ``logaddexp`` so that large ``J_explore`` does not overflow."""
    lam = _real("weight", weight, 0.0, 1.0, low_open=False, high_open=False)
    jl = np.asarray(j_learn, dtype=np.float64)
    je = np.asarray(j_explore, dtype=np.float64)
    if jl.shape != je.shape:
        raise ValueError(f"j_learn and j_explore must have equal shapes, got {jl.shape} and {je.shape}")
    if np.any(jl <= 0) or not np.all(np.isfinite(jl)):
        raise ValueError("j_learn must be positive and finite")
    if not np.all(np.isfinite(je)) or np.any(je < 0):
        raise ValueError("j_explore must be finite and >= 0")
    with np.errstate(divide="ignore"):
        a = math.log(lam) + np.log(jl) if lam > 0 else np.full(jl.shape, -np.inf)
        b = math.log1p(-lam) + je if lam < 1 else np.full(je.shape, -np.inf)
    return np.logaddexp(a, b)


def fit_combination_weight(j_learn: Any, j_explore: Any, log_steps: Any) -> tuple[float, float]:
    """``(lambda, r)``: the weight in ``[0, 1]`` that maximises the Pearson correlation ``r`` between the
    combined difficulty and ``log_steps`` (as the paper's analysis notebook fits it per environment and
    algorithm), by a grid of 201 weights (log-spaced towards both ends, where exp(J_explore) and J_learn
    trade off) refined by a bounded scalar search."""
    jl = np.asarray(j_learn, dtype=np.float64)
    je = np.asarray(j_explore, dtype=np.float64)
    y = np.asarray(log_steps, dtype=np.float64)
    if not (jl.shape == je.shape == y.shape) or jl.ndim != 1:
        raise ValueError("j_learn, j_explore and log_steps must be 1-d arrays of equal length")
    if jl.size < 3:
        raise ValueError(f"need at least 3 points to fit the weight, got {jl.size}")
    if not np.all(np.isfinite(y)):
        raise ValueError("log_steps must be finite")
    if not (np.all(np.isfinite(jl)) and np.all(jl > 0)):
        raise ValueError("j_learn must be positive and finite")
    if not (np.all(np.isfinite(je)) and np.all(je >= 0)):
        raise ValueError("j_explore must be finite and >= 0")

    def corr(lam: float) -> float:
        x = combined_difficulty(jl, je, lam)
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            return -1.0
        return float(np.corrcoef(x, y)[0, 1])

    tail = np.logspace(-12, -0.31, 100)
    grid = np.unique(np.concatenate([[0.0, 1.0], tail, 1.0 - tail]))
    scores = np.array([corr(float(g)) for g in grid])
    i = int(np.argmax(scores))
    from scipy.optimize import minimize_scalar

    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(lambda lam: -corr(float(lam)), bounds=(lo, hi), method="bounded")
    if -res.fun > scores[i]:
        return float(res.x), float(-res.fun)
    return float(grid[i]), float(scores[i])
