"""Tabular MDPs, exact dynamic programming and batched tabular Q-learning.

:class:`DeterministicMDP` is the sparse form for deterministic dynamics (a next-state table ``(S, A)``,
rewards and terminal flags per ``(s, a)``): puzzles with ~10^5-10^6 states (the 8-puzzle, the 2x2 cube of
:mod:`icml24.rl.skills_theory`) fit where the dense ``(S, A, S)`` table would not; every function below
accepts either form. :class:`TabularMDP` holds ``P(s'|s,a)``, the transition reward ``R(s,a,s')`` and a terminal flag
``T(s,a,s')`` (entering a terminal state ends the episode: no bootstrap). :func:`value_iteration` and
:func:`policy_evaluation` are the exact references; :func:`q_learning` runs ``n_runs`` independent
Q-learners in lock-step (one row of a ``(n_runs, S, A)`` table each), so a 20-seed experiment is one numpy
loop over time, not over seeds. The maximisation in the Bellman target and in the greedy policy is a
pluggable :class:`Maximizer`: exact (Watkins' Q-learning, Double Q-learning) or stochastic
(:mod:`icml24.rl.stochastic_q`), from the same code path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


def check_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int ``>= minimum``, or a TypeError/ValueError that names ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_gamma(gamma: float, *, allow_one: bool = True) -> float:
    """Validate a discount factor (``[0, 1]`` or ``[0, 1)``)."""
    if not isinstance(gamma, (int, float, np.floating)) or not np.isfinite(gamma):
        raise TypeError(f"gamma must be a finite number, got {gamma!r}")
    if gamma < 0 or gamma > 1 or (not allow_one and gamma == 1):
        raise ValueError(f"gamma must be in [0, 1{']' if allow_one else ')'}, got {gamma}")
    return float(gamma)


@dataclass(frozen=True)
class TabularMDP:
    """A finite MDP with transition rewards and terminal transitions."""

    P: np.ndarray
    """``(S, A, S)`` transition probabilities; rows sum to 1."""
    R: np.ndarray
    """``(S, A, S)`` reward received on the transition ``s -a-> s'``."""
    terminal: np.ndarray
    """``(S, A, S)`` bool: the transition ends the episode (no bootstrap from ``s'``)."""
    start: np.ndarray
    """``(S,)`` initial-state distribution."""

    def __post_init__(self) -> None:
        P = np.asarray(self.P, dtype=np.float64)
        if P.ndim != 3 or P.shape[0] != P.shape[2]:
            raise ValueError(f"P must have shape (S, A, S), got {P.shape}")
        if np.any(P < 0) or not np.allclose(P.sum(-1), 1.0, atol=1e-9):
            raise ValueError("every row P[s, a, :] must be a probability distribution")
        for name in ("R", "terminal"):
            if np.shape(getattr(self, name)) != P.shape:
                raise ValueError(f"{name} must have shape {P.shape}, got {np.shape(getattr(self, name))}")
        start = np.asarray(self.start, dtype=np.float64)
        if start.shape != (P.shape[0],) or not np.isclose(start.sum(), 1.0) or np.any(start < 0):
            raise ValueError(f"start must be a distribution over {P.shape[0]} states")
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "R", np.asarray(self.R, dtype=np.float64))
        object.__setattr__(self, "terminal", np.asarray(self.terminal, dtype=bool))
        object.__setattr__(self, "start", start)

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]

    def step(self, s: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        """Sample ``s' ~ P(.|s, a)`` for a batch: returns ``(s', r, terminated)``."""
        cdf = np.cumsum(self.P[s, a], axis=-1)
        u = rng.random(s.shape)[:, None]
        s2 = np.minimum((u >= cdf).sum(-1), self.n_states - 1)
        return s2, self.R[s, a, s2], self.terminal[s, a, s2]

    def reset(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(self.n_states, size=size, p=self.start)


@dataclass(frozen=True)
class DeterministicMDP:
    """A finite MDP with deterministic transitions ``s -a-> next_state[s, a]`` (stored sparsely).

    Same sampling interface as :class:`TabularMDP` (``step``, ``reset``, ``n_states``, ``n_actions``), so
    :func:`q_learning`, :func:`value_iteration` and :func:`policy_evaluation` run on it unchanged.
    """

    next_state: np.ndarray
    """``(S, A)`` int: the state reached by taking action ``a`` in state ``s``."""
    reward: np.ndarray
    """``(S, A)`` reward of the transition ``(s, a)``."""
    terminal: np.ndarray
    """``(S, A)`` bool: the transition ends the episode (no bootstrap from the next state)."""
    start: np.ndarray
    """``(S,)`` initial-state distribution."""

    def __post_init__(self) -> None:
        T = np.asarray(self.next_state)
        if T.ndim != 2 or T.shape[0] == 0 or T.shape[1] == 0:
            raise ValueError(f"next_state must be a non-empty (S, A) table, got shape {T.shape}")
        if not np.issubdtype(T.dtype, np.integer):
            raise TypeError(f"next_state must hold integer state indices, got dtype {T.dtype}")
        S = T.shape[0]
        if T.min() < 0 or T.max() >= S:
            raise ValueError(f"next_state entries must be state indices in [0, {S}), got [{T.min()}, {T.max()}]")
        for name in ("reward", "terminal"):
            if np.shape(getattr(self, name)) != T.shape:
                raise ValueError(f"{name} must have shape {T.shape}, got {np.shape(getattr(self, name))}")
        start = np.asarray(self.start, dtype=np.float64)
        if start.shape != (S,) or np.any(start < 0) or not np.isclose(start.sum(), 1.0):
            raise ValueError(f"start must be a distribution over {S} states")
        index_dtype = np.int32 if S < 2**31 else np.int64
        object.__setattr__(self, "next_state", T.astype(index_dtype, copy=False))
        object.__setattr__(self, "reward", np.asarray(self.reward, dtype=np.float64))
        object.__setattr__(self, "terminal", np.asarray(self.terminal, dtype=bool))
        object.__setattr__(self, "start", start)
        support = np.flatnonzero(start)
        object.__setattr__(self, "_start_support", support)
        object.__setattr__(self, "_start_cdf", np.cumsum(start[support]))

    @classmethod
    def goal_reaching(
        cls, next_state: np.ndarray, goal: int | np.ndarray, start: np.ndarray
    ) -> DeterministicMDP:
        """The sparse-reward goal MDP: reward 1 and termination on every transition that enters a goal state.

        A goal state's own transitions also count as entering the goal (reward 1): episodes end on reaching
        it, so they are bookkeeping only.
        """
        T = np.asarray(next_state)
        if T.ndim != 2 or T.size == 0 or not np.issubdtype(T.dtype, np.integer):
            raise ValueError(f"next_state must be a non-empty (S, A) table of state indices, got shape {T.shape}")
        if T.min() < 0 or T.max() >= T.shape[0]:
            raise ValueError(f"next_state entries must be state indices in [0, {T.shape[0]})")
        goals = np.atleast_1d(np.asarray(goal))
        if goals.size == 0 or not np.issubdtype(goals.dtype, np.integer):
            raise TypeError(f"goal must be a state index or an array of state indices, got {goal!r}")
        if goals.min() < 0 or goals.max() >= T.shape[0]:
            raise ValueError(f"goal must index a state in [0, {T.shape[0]}), got {goal!r}")
        is_goal = np.zeros(T.shape[0], dtype=bool)
        is_goal[goals] = True
        enters = is_goal[T]
        return cls(next_state=T, reward=enters.astype(np.float64), terminal=enters, start=start)

    @property
    def n_states(self) -> int:
        return self.next_state.shape[0]

    @property
    def n_actions(self) -> int:
        return self.next_state.shape[1]

    def step(self, s: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        """``(s', r, terminated)`` for a batch (``rng`` unused: kept for the :class:`TabularMDP` interface)."""
        return self.next_state[s, a], self.reward[s, a], self.terminal[s, a]

    def reset(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` start states ``~ p``, by inverse-CDF sampling over the support (precomputed: Q-learning
        calls this every step, and ``rng.choice(S, p=...)`` re-scans all ``S`` states each call)."""
        cdf = self._start_cdf
        i = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
        return self._start_support[np.minimum(i, cdf.size - 1)]

    def to_tabular(self) -> TabularMDP:
        """The dense :class:`TabularMDP` (``(S, A, S)`` arrays: small state spaces only)."""
        S, A = self.next_state.shape
        P = np.zeros((S, A, S))
        s_idx, a_idx = np.meshgrid(np.arange(S), np.arange(A), indexing="ij")
        P[s_idx, a_idx, self.next_state] = 1.0
        R = P * self.reward[:, :, None]
        T = (P > 0) & self.terminal[:, :, None]
        return TabularMDP(P=P, R=R, terminal=T, start=self.start)


AnyTabularMDP = TabularMDP | DeterministicMDP


def _check_mdp(mdp: object) -> None:
    if not isinstance(mdp, (TabularMDP, DeterministicMDP)):
        raise TypeError(f"mdp must be a TabularMDP or a DeterministicMDP, got {type(mdp).__name__}")


def bellman_optimality(mdp: AnyTabularMDP, Q: np.ndarray, gamma: float) -> np.ndarray:
    """``(T Q)(s,a) = sum_s' P(s'|s,a) [R(s,a,s') + gamma (1 - T) max_a' Q(s', a')]``."""
    v = Q.max(-1)
    if isinstance(mdp, DeterministicMDP):
        return mdp.reward + gamma * (~mdp.terminal) * v[mdp.next_state]
    return np.einsum("ijk,ijk->ij", mdp.P, mdp.R + gamma * (~mdp.terminal) * v[None, None, :])


def value_iteration(
    mdp: AnyTabularMDP,
    gamma: float,
    *,
    tol: float = 1e-10,
    max_iter: int = 100_000,
    return_sweeps: bool = False,
) -> np.ndarray | tuple[np.ndarray, int]:
    """Optimal ``Q*`` of the cumulative discounted return by synchronous value iteration from ``Q = 0``.

    Stops when a sweep changes no entry by ``tol`` or more (``tol=0``: runs exactly ``max_iter`` sweeps).
    With ``return_sweeps`` also returns the number of sweeps (Bellman backups of the whole table) done. In a
    deterministic goal MDP with goal distances ``d``, ``V = max_a Q`` is exact after ``D = max_s d(s)``
    sweeps and every ``Q(s, a)`` after ``D + 1`` (an action may lead to a state at distance ``D``), so the
    count is ``D + 2`` (the last sweep changes nothing).
    """
    _check_mdp(mdp)
    check_gamma(gamma)
    check_int("max_iter", max_iter, 1)
    if not isinstance(tol, (int, float, np.floating)) or isinstance(tol, bool) or not tol >= 0:
        raise ValueError(f"tol must be a number >= 0, got {tol!r}")
    Q = np.zeros((mdp.n_states, mdp.n_actions))
    for sweep in range(1, max_iter + 1):
        Q_new = bellman_optimality(mdp, Q, gamma)
        if np.max(np.abs(Q_new - Q)) < tol:
            return (Q_new, sweep) if return_sweeps else Q_new
        Q = Q_new
    return (Q, max_iter) if return_sweeps else Q


def policy_evaluation(mdp: AnyTabularMDP, policy: np.ndarray, gamma: float, *, horizon: int | None = None) -> np.ndarray:
    """``V^pi`` of a deterministic policy ``(S,)`` or stochastic policy ``(S, A)``.

    With ``horizon`` the value of the first ``horizon`` steps (finite-horizon backward recursion); otherwise
    the infinite-horizon value by a linear solve (``gamma < 1``, or a proper policy).
    """
    _check_mdp(mdp)
    if isinstance(mdp, DeterministicMDP):
        mdp = mdp.to_tabular()
    check_gamma(gamma)
    pi = np.asarray(policy)
    if pi.ndim == 1:
        pi = np.eye(mdp.n_actions)[pi]
    if pi.shape != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"policy must be (S,) or (S, A) = {(mdp.n_states, mdp.n_actions)}, got {pi.shape}")
    P_pi = np.einsum("sa,sak->sk", pi, mdp.P * (~mdp.terminal))
    r_pi = np.einsum("sa,sak->s", pi, mdp.P * mdp.R)
    if horizon is not None:
        v = np.zeros(mdp.n_states)
        for _ in range(horizon):
            v = r_pi + gamma * P_pi @ v
        return v
    return np.linalg.solve(np.eye(mdp.n_states) - gamma * P_pi, r_pi)


class Maximizer(Protocol):
    """``(Q_rows (B, A), states (B,), rng, slot) -> (max value (B,), argmax (B,), evaluations)``.

    ``slot`` (an int, or one per row) names the Q function the rows come from: 0 the acting one (Q, or
    ``Q^A + Q^B`` in Double Q-learning), 1 and 2 the tables ``Q^A`` and ``Q^B`` in a Double update. A maximiser
    with state (the stochastic max's memory) keeps it per slot; the exact max ignores it.
    """

    def __call__(
        self, q: np.ndarray, states: np.ndarray, rng: np.random.Generator, slot: int | np.ndarray = 0
    ) -> tuple[np.ndarray, ...]: ...


def exact_max(
    q: np.ndarray, states: np.ndarray, rng: np.random.Generator, slot: int | np.ndarray = 0
) -> tuple[np.ndarray, np.ndarray, int]:
    """The exact max/argmax over all ``A`` actions (``B * A`` evaluations); ties broken uniformly at random
    (lowest-index tie-breaking makes a zero-initialised greedy policy repeat action 0)."""
    top = q == q.max(-1, keepdims=True)
    a = np.where(top, rng.random(q.shape), -1.0).argmax(-1)
    return np.take_along_axis(q, a[:, None], 1)[:, 0], a, q.size


@dataclass(frozen=True)
class QLearningConfig:
    """Hyper-parameters of batched tabular (Double) Q-learning."""

    gamma: float = 0.99
    """Discount factor."""
    alpha: float = 0.1
    """Constant step size."""
    epsilon: float = 0.1
    """Probability of a uniformly random action (epsilon-greedy behaviour)."""
    q_init: float = 0.0
    """Initial value of every table entry (optimistic when above the largest return)."""
    horizon: int = 100
    """Episodes are truncated after this many steps (truncation bootstraps; termination does not)."""
    double: bool = False
    """Double Q-learning (van Hasselt, 2010): two tables, one selects and the other evaluates."""

    def __post_init__(self) -> None:
        check_gamma(self.gamma)
        for name, lo_open in (("alpha", True), ("epsilon", False)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not np.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
            if not ((0 < v) if lo_open else (0 <= v)) or v > 1:
                raise ValueError(f"{name} must be in {'(0' if lo_open else '[0'}, 1], got {v}")
        if isinstance(self.q_init, bool) or not isinstance(self.q_init, (int, float, np.floating)) or not np.isfinite(
            self.q_init
        ):
            raise ValueError(f"q_init must be a finite number, got {self.q_init!r}")
        check_int("horizon", self.horizon, 1)
        if not isinstance(self.double, bool):
            raise TypeError(f"double must be True or False, got {self.double!r}")


def q_learning(
    mdp: AnyTabularMDP,
    *,
    config: QLearningConfig,
    n_runs: int,
    steps: int,
    seed: int,
    maximizer: Maximizer | Callable[..., Any] = exact_max,
    eval_every: int = 0,
    evaluate: Callable[[np.ndarray], np.ndarray] | None = None,
    stop_at: float | None = None,
) -> dict[str, Any]:
    """``n_runs`` independent epsilon-greedy (Double) Q-learners for ``steps`` env steps each.

    Target ``r + gamma (1 - terminated) Q(s', argmax*)`` where ``argmax*``/``max*`` come from ``maximizer``
    (exact or stochastic); truncation at ``horizon`` resets without cutting the bootstrap. ``evaluate``
    maps the current tables ``(n_runs, S, A)`` to one score per run, recorded every ``eval_every`` steps.
    With ``stop_at``, training stops early at the first evaluation where every run scores ``>= stop_at``
    (the curve then ends there). Returns the tables, the curve, and the number of Q evaluations spent in
    maximisations.
    """
    _check_mdp(mdp)
    if not isinstance(config, QLearningConfig):
        raise TypeError(f"config must be a QLearningConfig, got {type(config).__name__}")
    n_runs = check_int("n_runs", n_runs, 1)
    steps = check_int("steps", steps, 0)
    seed = check_int("seed", seed, 0)
    eval_every = check_int("eval_every", eval_every, 0)
    if stop_at is not None and (
        isinstance(stop_at, bool) or not isinstance(stop_at, (int, float, np.floating)) or not np.isfinite(stop_at)
    ):
        raise ValueError(f"stop_at must be a finite number or None, got {stop_at!r}")
    rng = np.random.default_rng(seed)
    S, A, B = mdp.n_states, mdp.n_actions, n_runs
    tables = np.full((2 if config.double else 1, B, S, A), float(config.q_init))
    rows = np.arange(B)
    s = mdp.reset(B, rng)
    t = np.zeros(B, dtype=np.int64)
    evals = 0
    curve_steps, curve = [], []
    for step in range(steps):
        q_act = tables.sum(0) if config.double else tables[0]
        _, greedy, n_ev = maximizer(q_act[rows, s], s, rng)
        evals += n_ev
        explore = rng.random(B) < config.epsilon
        a = np.where(explore, rng.integers(0, A, B), greedy)
        s2, r, term = mdp.step(s, a, rng)
        if config.double:
            which = rng.random(B) < 0.5  # update table 0 with table 1's evaluation, or vice versa
            upd, other = which.astype(np.int64), 1 - which.astype(np.int64)
            _, a_star, n_ev = maximizer(tables[upd, rows, s2], s2, rng, slot=1 + upd)
            boot = tables[other, rows, s2, a_star]
            td = r + config.gamma * (~term) * boot - tables[upd, rows, s, a]
            tables[upd, rows, s, a] += config.alpha * td
        else:
            boot, _, n_ev = maximizer(tables[0, rows, s2], s2, rng)
            tables[0, rows, s, a] += config.alpha * (r + config.gamma * (~term) * boot - tables[0, rows, s, a])
        evals += n_ev
        t += 1
        done = term | (t >= config.horizon)
        s = np.where(done, mdp.reset(B, rng), s2)
        t[done] = 0
        if eval_every and evaluate is not None and (step + 1) % eval_every == 0:
            curve_steps.append(step + 1)
            curve.append(evaluate(tables.sum(0) if config.double else tables[0]))
            if stop_at is not None and np.all(curve[-1] >= stop_at):
                break
    return {
        "Q": tables.sum(0) / tables.shape[0],
        "tables": tables,
        "curve_steps": curve_steps,
        "curve": np.array(curve).T if curve else np.zeros((B, 0)),
        "evaluations": evals,
    }


def mdp_from_toy_text(env: Any) -> TabularMDP:
    """The :class:`TabularMDP` of a Gymnasium toy-text env (FrozenLake, CliffWalking, Taxi) from ``env.P``."""
    base = env.unwrapped
    S, A = base.observation_space.n, base.action_space.n
    P = np.zeros((S, A, S))
    R = np.zeros((S, A, S))
    T = np.zeros((S, A, S), dtype=bool)
    for s in range(S):
        for a in range(A):
            for p, s2, r, done in base.P[s][a]:
                P[s, a, s2] += p
                R[s, a, s2] = r
                T[s, a, s2] = done
    start = np.asarray(base.initial_state_distrib, dtype=np.float64)
    return TabularMDP(P=P, R=R, terminal=T, start=start / start.sum())


def q_learning_gym(
    env: Any,
    *,
    config: QLearningConfig,
    steps: int,
    seed: int,
    maximizer: Maximizer | Callable[..., Any] = exact_max,
) -> dict[str, Any]:
    """Single-learner (Double) Q-learning on any Gymnasium env with ``Discrete`` observations and actions.

    Seeds through ``env.reset(seed=seed)``; ``terminated`` cuts the bootstrap, ``truncated`` only resets (the
    env's own time limit decides truncation). Same update and ``maximizer`` hook as :func:`q_learning`.
    """
    import gymnasium as gym

    if not isinstance(env.observation_space, gym.spaces.Discrete) or not isinstance(
        env.action_space, gym.spaces.Discrete
    ):
        raise TypeError("q_learning_gym needs Discrete observation and action spaces")
    check_gamma(config.gamma)
    rng = np.random.default_rng(seed)
    S, A = int(env.observation_space.n), int(env.action_space.n)
    tables = np.full((2 if config.double else 1, S, A), float(config.q_init))
    s, _ = env.reset(seed=seed)
    returns, ret = [], 0.0
    evals = 0
    for _ in range(steps):
        q_act = tables.sum(0) if config.double else tables[0]
        _, greedy, n_ev = maximizer(q_act[[s]], np.array([s]), rng)
        evals += n_ev
        a = int(rng.integers(A)) if rng.random() < config.epsilon else int(greedy[0])
        s2, r, term, trunc, _ = env.step(a)
        if config.double:
            u = int(rng.random() < 0.5)
            _, b, n_ev = maximizer(tables[u][[s2]], np.array([s2]), rng, slot=1 + u)
            boot = tables[1 - u, s2, b[0]]
        else:
            u = 0
            v, _, n_ev = maximizer(tables[0][[s2]], np.array([s2]), rng)
            boot = v[0]
        evals += n_ev
        tables[u, s, a] += config.alpha * (r + config.gamma * (not term) * boot - tables[u, s, a])
        ret += float(r)
        s = s2
        if term or trunc:
            returns.append(ret)
            ret = 0.0
            s, _ = env.reset()
    return {"Q": tables.mean(0), "episode_returns": returns, "evaluations": evals}
