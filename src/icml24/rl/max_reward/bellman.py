"""Max-reward Bellman operators over the state augmented with the running maximum, and exact DP.

Veviurko, Böhmer, de Weerdt. "To the Max: Reinventing Reward in Reinforcement Learning". ICML 2024
(PMLR v235), https://arxiv.org/abs/2402.01361.

The objective is ``J(pi) = E[max_t gamma^t r_t]`` (rewards shifted to be >= 0). The paper makes the recursion
correct for stochastic dynamics by carrying ``y``, the best reward so far measured in current-time units:
``y_0 = 0`` and ``y_{t+1} = max(y_t, r_t) / gamma``; then ``V(s, y) = E[max(y, r_0, gamma r_1, ...)] >= y`` and

    Q(s, y, a) = E_{s', r}[ terminated ? max(y, r) : gamma * max(y', V(s', y')) ],   y' = max(y, r) / gamma,
    V(s, y)    = max_a Q(s, y, a),

a ``gamma``-contraction (Section 4 of the paper). Once ``y >= r_max`` nothing can beat it and
``V(s, y) = y``, so the exact DP only needs the finite set of ``y`` values below ``r_max`` that are reachable
from ``y = 0`` (:func:`y_grid`). The older y-free recursion ``Q(s, a) = E[max(r, gamma max_a' Q(s', a'))]``
("MaxDet") is correct only for deterministic dynamics (``E[max] >= max E``).

MDPs are given as :class:`Outcomes`: for each ``(s, a)`` up to ``K`` outcomes ``(p, s', r, terminated)``, so a
reward may depend on the transition's randomness beyond ``s'`` (needed by the stochastic counterexample).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml24.rl.value.tabular import TabularMDP, check_gamma, check_int


def _finite_array(name: str, values: object, *, dtype: type = np.float64) -> np.ndarray:
    """``values`` as a finite float array, or a TypeError/ValueError naming ``name``."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(dtype)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return arr


def _finite_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def _check_tol(tol: object, max_iter: object) -> tuple[float, int]:
    t = _finite_number("tol", tol)
    if t <= 0:
        raise ValueError(f"tol must be > 0, got {t}")
    return t, check_int("max_iter", max_iter, 1)


def _check_outcomes(mdp: object) -> None:
    if not isinstance(mdp, Outcomes):
        raise TypeError(f"mdp must be an Outcomes, got {type(mdp).__name__} (use Outcomes.from_tabular)")


@dataclass(frozen=True)
class Outcomes:
    """A finite MDP as per-(s, a) outcome lists, padded to ``K`` outcomes with probability 0."""

    prob: np.ndarray
    """``(S, A, K)`` outcome probabilities (rows sum to 1)."""
    next_state: np.ndarray
    """``(S, A, K)`` next states."""
    reward: np.ndarray
    """``(S, A, K)`` rewards."""
    terminal: np.ndarray
    """``(S, A, K)`` whether the outcome ends the episode."""
    start: np.ndarray
    """``(S,)`` initial-state distribution."""

    def __post_init__(self) -> None:
        prob = _finite_array("prob", self.prob)
        shape = prob.shape
        if len(shape) != 3 or 0 in shape:
            raise ValueError(f"prob must be (S, A, K) with S, A, K >= 1, got {shape}")
        for name in ("next_state", "reward", "terminal"):
            if np.shape(getattr(self, name)) != shape:
                raise ValueError(f"{name} must have shape {shape}, got {np.shape(getattr(self, name))}")
        if not np.allclose(np.sum(prob, -1), 1.0) or np.any(prob < 0):
            raise ValueError("outcome probabilities prob of every (s, a) must be >= 0 and sum to 1")
        nxt = np.asarray(self.next_state)
        if nxt.dtype.kind not in "iu":
            raise TypeError(f"next_state must hold integer state indices, got dtype {nxt.dtype}")
        if np.any(nxt < 0) or np.any(nxt >= shape[0]):
            raise ValueError(f"next_state must be in [0, {shape[0]})")
        reward = _finite_array("reward", self.reward)
        term = np.asarray(self.terminal)
        if term.dtype != bool:
            raise TypeError(f"terminal must be a bool array, got dtype {term.dtype}")
        start = _finite_array("start", self.start)
        if start.shape != (shape[0],) or np.any(start < 0) or not np.isclose(start.sum(), 1.0):
            raise ValueError(f"start must be a distribution over the {shape[0]} states")
        object.__setattr__(self, "prob", prob)
        object.__setattr__(self, "next_state", nxt.astype(np.int64))
        object.__setattr__(self, "reward", reward)
        object.__setattr__(self, "terminal", term)
        object.__setattr__(self, "start", start)

    @property
    def n_states(self) -> int:
        return self.prob.shape[0]

    @property
    def n_actions(self) -> int:
        return self.prob.shape[1]

    @classmethod
    def from_tabular(cls, mdp: TabularMDP) -> Outcomes:
        """The outcomes of a :class:`TabularMDP` (one per reachable ``s'``)."""
        K = max(1, int((mdp.P > 0).sum(-1).max()))
        order = np.argsort(-mdp.P, axis=-1, kind="stable")[..., :K]
        take = lambda x: np.take_along_axis(x, order, -1)  # noqa: E731
        return cls(take(mdp.P), order, take(mdp.R), take(mdp.terminal), mdp.start)

    def shifted(self, c: float) -> Outcomes:
        """The same MDP with ``c`` added to every reward."""
        return Outcomes(self.prob, self.next_state, self.reward + c, self.terminal, self.start)

    def sample(self, s: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        """Sample one outcome per row: ``(s', r, terminated)``."""
        cdf = np.cumsum(self.prob[s, a], axis=-1)
        k = np.minimum((rng.random(s.shape)[:, None] >= cdf).sum(-1), self.prob.shape[-1] - 1)
        return self.next_state[s, a, k], self.reward[s, a, k], self.terminal[s, a, k]


def check_reward_bounds(rewards: np.ndarray, r_lb: float, r_ub: float) -> None:
    """Raise unless ``r_lb <= r <= r_ub`` for every reward (max-reward RL shifts by ``r_lb`` to get r >= 0).

    A NaN or infinite reward, or non-finite bounds, raise too (a NaN would pass every comparison)."""
    r = _finite_array("rewards", rewards)
    r_lb = _finite_number("r_lb", r_lb)
    r_ub = _finite_number("r_ub", r_ub)
    if not r_lb < r_ub:
        raise ValueError(f"reward bounds must satisfy r_lb < r_ub, got r_lb={r_lb}, r_ub={r_ub}")
    if r.size and (r.min() < r_lb - 1e-12 or r.max() > r_ub + 1e-12):
        raise ValueError(
            f"reward bounds r_lb={r_lb}, r_ub={r_ub} do not bracket the rewards (observed [{r.min()}, {r.max()}])"
        )


@dataclass(frozen=True)
class YGrid:
    """The finite set of running-max values ``y < r_max`` reachable from ``y = 0``, and its transition table."""

    values: np.ndarray
    """``(Y,)`` sorted y values; ``values[0] == 0``."""
    next_index: np.ndarray
    """``(Y, R)``: index of ``y' = max(y, r) / gamma`` for each distinct reward, -1 when ``y' >= r_max``."""
    rewards: np.ndarray
    """``(R,)`` the distinct rewards, sorted."""
    r_max: float
    """The largest reward: ``V(s, y) = y`` for ``y >= r_max``."""

    def __post_init__(self) -> None:
        values = _finite_array("values", self.values)
        rewards = _finite_array("rewards", self.rewards)
        if values.ndim != 1 or values.size < 1 or values[0] != 0 or np.any(np.diff(values) <= 0):
            raise ValueError("values must be a sorted 1-d array of distinct y values starting at 0")
        if rewards.ndim != 1 or rewards.size < 1 or np.any(rewards < 0):
            raise ValueError("rewards must be a 1-d array of non-negative rewards")
        nxt = np.asarray(self.next_index)
        if nxt.dtype.kind not in "iu" or nxt.shape != (values.size, rewards.size):
            raise ValueError(f"next_index must be an int array of shape {(values.size, rewards.size)}")
        if np.any(nxt < -1) or np.any(nxt >= values.size):
            raise ValueError(f"next_index entries must be in [-1, {values.size})")
        r_max = _finite_number("r_max", self.r_max)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "rewards", rewards)
        object.__setattr__(self, "r_max", r_max)

    def reward_index(self, r: np.ndarray) -> np.ndarray:
        idx = np.clip(np.searchsorted(self.rewards, np.asarray(r) - 1e-10), 0, len(self.rewards) - 1)
        if not np.allclose(self.rewards[idx], r, rtol=1e-9, atol=1e-11):
            raise ValueError("reward not in the grid's reward set")
        return idx


def y_grid(rewards: np.ndarray, gamma: float, *, max_size: int = 50_000) -> YGrid:
    """Closure of ``{0}`` under ``y -> max(y, r) / gamma`` over the rewards, keeping values ``< r_max``."""
    check_gamma(gamma)
    if gamma == 0:
        raise ValueError("gamma must be > 0 for the augmented state (y' = max(y, r) / gamma)")
    max_size = check_int("max_size", max_size, 1)
    rv = np.unique(np.round(_finite_array("rewards", rewards).ravel(), 12))
    if rv.size == 0 or rv.min() < 0:
        raise ValueError("max-reward RL needs non-negative rewards: shift them by the lower bound r_lb first")
    r_max = float(rv.max())
    key = lambda v: round(float(v), 11)  # noqa: E731 - merge equal values reached along different paths
    seen = {key(0.0): 0.0}
    frontier = [0.0]
    while frontier:
        new = []
        for y in frontier:
            for r in rv:
                y2 = max(y, r) / gamma
                if y2 < r_max - 1e-12 and key(y2) not in seen:
                    seen[key(y2)] = y2
                    new.append(y2)
        if len(seen) > max_size:
            raise ValueError(f"the y grid exceeds max_size={max_size}: use gamma=1 or fewer distinct rewards")
        frontier = new
    values = np.array(sorted(seen.values()))
    y2 = np.maximum(values[:, None], rv[None, :]) / gamma
    idx = np.searchsorted(values, y2 - 1e-10)
    idx_c = np.clip(idx, 0, len(values) - 1)
    found = np.isclose(values[idx_c], y2, rtol=1e-9, atol=1e-12)
    nxt = np.where((y2 < r_max - 1e-12) & found, idx_c, -1)
    return YGrid(values=values, next_index=nxt, rewards=rv, r_max=r_max)


def augmented_backup(mdp: Outcomes, grid: YGrid, Q: np.ndarray, gamma: float) -> np.ndarray:
    """The max-reward Bellman optimality operator on ``Q (S, Y, A)`` (the equation of the module docstring)."""
    _check_outcomes(mdp)
    if not isinstance(grid, YGrid):
        raise TypeError(f"grid must be a YGrid (from y_grid), got {type(grid).__name__}")
    Q = _finite_array("Q", Q)
    if Q.shape != (mdp.n_states, len(grid.values), mdp.n_actions):
        raise ValueError(f"Q must have shape (S, Y, A) = {(mdp.n_states, len(grid.values), mdp.n_actions)}, got {Q.shape}")
    gamma = check_gamma(gamma)
    y = grid.values
    r_idx = grid.reward_index(mdp.reward)  # (S, A, K)
    m = np.maximum(y[None, None, None, :], mdp.reward[..., None])  # (S, A, K, Y): max(y, r)
    ny = grid.next_index[:, r_idx].transpose(1, 2, 3, 0)  # (S, A, K, Y)
    V = Q.max(-1)  # (S, Y)
    v_next = V[mdp.next_state[..., None], np.maximum(ny, 0)]
    cont = np.where(
        ny >= 0, gamma * np.maximum(y[np.maximum(ny, 0)], v_next), m
    )  # saturated y': gamma y' = m
    target = np.where(mdp.terminal[..., None], m, cont)
    return np.einsum("sak,saky->sya", mdp.prob, target)


def max_reward_value_iteration(
    mdp: Outcomes,
    gamma: float,
    *,
    r_lb: float | None = None,
    r_ub: float | None = None,
    tol: float = 1e-12,
    max_iter: int = 10_000,
    max_y: int = 50_000,
) -> tuple[np.ndarray, YGrid]:
    """Optimal ``Q(s, y, a)`` of the max-reward objective on the reachable y grid; returns ``(Q, grid)``.

    With reward bounds ``[r_lb, r_ub]`` (checked to bracket the rewards) the objective is that of the shifted
    rewards ``r - r_lb >= 0`` (the paper's convention); values are then in shifted units.
    """
    _check_outcomes(mdp)
    check_gamma(gamma)
    tol, max_iter = _check_tol(tol, max_iter)
    max_y = check_int("max_y", max_y, 1)
    if r_lb is not None or r_ub is not None:
        lb = float(np.min(mdp.reward)) if r_lb is None else float(r_lb)
        ub = float(np.max(mdp.reward)) if r_ub is None else float(r_ub)
        check_reward_bounds(mdp.reward, lb, ub)
        mdp = mdp.shifted(-lb)
    grid = y_grid(mdp.reward, gamma, max_size=max_y)
    Q = np.zeros((mdp.n_states, len(grid.values), mdp.n_actions))
    for _ in range(max_iter):
        Q_new = augmented_backup(mdp, grid, Q, gamma)
        if np.max(np.abs(Q_new - Q)) <= tol:
            return Q_new, grid
        Q = Q_new
    return Q, grid


def maxdet_value_iteration(
    mdp: Outcomes, gamma: float, *, tol: float = 1e-12, max_iter: int = 10_000
) -> np.ndarray:
    """The y-free recursion ``Q(s, a) = E[terminated ? r : max(r, gamma max_a' Q(s', a'))]`` (baseline)."""
    _check_outcomes(mdp)
    check_gamma(gamma)
    tol, max_iter = _check_tol(tol, max_iter)
    Q = np.zeros((mdp.n_states, mdp.n_actions))
    for _ in range(max_iter):
        V = Q.max(-1)
        target = np.where(mdp.terminal, mdp.reward, np.maximum(mdp.reward, gamma * V[mdp.next_state]))
        Q_new = (mdp.prob * target).sum(-1)
        if np.max(np.abs(Q_new - Q)) <= tol:
            return Q_new
        Q = Q_new
    return Q


def cumulative_value_iteration(
    mdp: Outcomes, gamma: float, *, tol: float = 1e-10, max_iter: int = 100_000
) -> np.ndarray:
    """Optimal ``Q(s, a)`` of the usual discounted sum on the same MDP (the cumulative baseline)."""
    _check_outcomes(mdp)
    check_gamma(gamma)
    tol, max_iter = _check_tol(tol, max_iter)
    Q = np.zeros((mdp.n_states, mdp.n_actions))
    for _ in range(max_iter):
        V = Q.max(-1)
        Q_new = (mdp.prob * (mdp.reward + gamma * (~mdp.terminal) * V[mdp.next_state])).sum(-1)
        if np.max(np.abs(Q_new - Q)) <= tol:
            return Q_new
        Q = Q_new
    return Q


def rollout(
    mdp: Outcomes,
    policy: np.ndarray,
    *,
    gamma: float,
    episodes: int,
    horizon: int,
    rng: np.random.Generator,
    grid: YGrid | None = None,
) -> dict[str, np.ndarray]:
    """Monte-Carlo episodes of a policy ``(S,)`` or, with ``grid``, a y-aware policy ``(S, Y)``.

    Returns per-episode discounted max-return ``max_t gamma^t r_t``, discounted sum, and whether the episode
    ended by termination within ``horizon`` steps.
    """
    _check_outcomes(mdp)
    check_gamma(gamma)
    episodes = check_int("episodes", episodes, 1)
    horizon = check_int("horizon", horizon, 1)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if grid is not None and not isinstance(grid, YGrid):
        raise TypeError(f"grid must be a YGrid or None, got {type(grid).__name__}")
    policy = np.asarray(policy)
    want = (mdp.n_states, len(grid.values)) if grid is not None else (mdp.n_states,)
    if policy.dtype.kind not in "iu" or policy.shape != want:
        raise ValueError(f"policy must be an int array of shape {want}, got {policy.dtype} {policy.shape}")
    if np.any(policy < 0) or np.any(policy >= mdp.n_actions):
        raise ValueError(f"policy actions must be in [0, {mdp.n_actions})")
    s = rng.choice(mdp.n_states, size=episodes, p=mdp.start)
    yi = np.zeros(episodes, dtype=np.int64)  # index into grid.values; -1 = saturated
    alive = np.ones(episodes, dtype=bool)
    g_max = np.zeros(episodes)
    g_sum = np.zeros(episodes)
    terminated = np.zeros(episodes, dtype=bool)
    disc = 1.0
    for _ in range(horizon):
        a = policy[s, np.maximum(yi, 0)] if grid is not None else policy[s]
        s2, r, term = mdp.sample(s, a, rng)
        g_max = np.where(alive, np.maximum(g_max, disc * r), g_max)
        g_sum = np.where(alive, g_sum + disc * r, g_sum)
        if grid is not None:
            ny = grid.next_index[np.maximum(yi, 0), grid.reward_index(r)]
            yi = np.where(yi < 0, -1, ny)
        terminated |= alive & term
        alive &= ~term
        s = s2
        disc *= gamma
        if not alive.any():
            break
    return {"max_return": g_max, "sum_return": g_sum, "terminated": terminated}


def max_returns(rewards: np.ndarray, gamma: float, y0: float = 0.0) -> np.ndarray:
    """The max-return estimator on a finished episode: ``G_t = max(y_t, max_{k >= t} gamma^(k-t) r_k)``.

    ``y_t`` follows ``y_0 = y0``, ``y_{t+1} = max(y_t, r_t) / gamma``; the backward recursion
    ``G_t = max(y_t, r_t, gamma G_{t+1} with y removed)`` is computed in one reverse pass over time.
    Works on ``(T,)`` or batched ``(..., T)`` rewards.
    """
    check_gamma(gamma)
    r = _finite_array("rewards", rewards)
    if r.ndim < 1 or r.shape[-1] < 1:
        raise ValueError(f"rewards must have a time axis of length >= 1, got shape {r.shape}")
    if np.any(r < 0):
        raise ValueError("rewards must be >= 0 (shift them by the lower bound r_lb first)")
    y0 = _finite_number("y0", y0)
    if y0 < 0:
        raise ValueError(f"y0 must be >= 0, got {y0}")
    T = r.shape[-1]
    y = np.empty_like(r)
    cur = np.full(r.shape[:-1], float(y0))
    for t in range(T):
        y[..., t] = cur
        cur = np.maximum(cur, r[..., t]) / gamma if gamma > 0 else np.zeros_like(cur)
    tail = np.empty_like(r)
    acc = np.full(r.shape[:-1], -np.inf)
    for t in range(T - 1, -1, -1):
        acc = np.maximum(r[..., t], gamma * acc)
        tail[..., t] = acc
    return np.maximum(y, tail)


def stochastic_counterexample() -> Outcomes:
    """Our two-step MDP where the y-free recursion is wrong (gamma = 1).

    From ``s0`` (either action) the reward is 0.7 or 0 with probability 1/2 each, landing in ``s1``; in ``s1``
    'safe' (action 0) pays 0.6, 'gamble' (action 1) pays 1 or 0 with probability 1/2; both end the episode.
    The y-aware optimum gambles only after 0.7 and is worth 0.725; MaxDet says 0.65.
    """
    prob = np.array([[[0.5, 0.5], [0.5, 0.5]], [[1.0, 0.0], [0.5, 0.5]]])
    nxt = np.array([[[1, 1], [1, 1]], [[1, 1], [1, 1]]])
    rew = np.array([[[0.7, 0.0], [0.7, 0.0]], [[0.6, 0.0], [1.0, 0.0]]])
    term = np.array([[[False, False], [False, False]], [[True, True], [True, True]]])
    return Outcomes(prob, nxt, rew, term, np.array([1.0, 0.0]))
