"""Failure discovery: the one-step search environment, the DQN agent and the baselines at one query budget.

Sagar et al. (ICML 2024, https://arxiv.org/abs/2406.07145), Section 3 ("macroscopic" discovery): each
episode draws an input ``x``, the agent picks a concept cell ``c``, the model under test sees
``g(x, c)`` and the agent receives the failure reward of :func:`failure_reward`; the episode ends. The
released classification environment observes the (unperturbed) input image and is trained with
Stable-Baselines3's DQN (``MlpPolicy``, exploration from 1.0 down to a deliberately *high* final 0.6 so
the agent keeps mapping the whole landscape instead of exploiting one failure). Our DQN is
:class:`icml24.rl.value.DQNAgent` with the usual Q(s) -> R^|C| head, driven with SB3's linear
exploration schedule.

Every search answers one query per step through :class:`FailureSearchEnv` (same access: an image and
the reward of the chosen cell; same budget: ``budget`` queries). The environment looks the outcome of
each query up in the exhaustive :class:`FailureLandscape`, which holds exactly what a live forward pass
of the model would return (a test checks it), so a query costs no forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from icml24.evaluation.failure_landscape.landscape import FailureLandscape, landscape_distance
from icml24.evaluation.failure_landscape.model import _check_int, _check_real
from icml24.rl.value import DQNAgent, DQNConfig

__all__ = [
    "DQNSearchConfig",
    "FailureSearchEnv",
    "SearchTrace",
    "dqn_search",
    "epsilon_greedy_search",
    "linear_epsilon",
    "random_search",
    "search_metrics",
]


class FailureSearchEnv(gym.Env):
    """One-step failure-search episodes (Gymnasium API) over an exhaustive landscape.

    ``reset`` draws an image uniformly from the landscape's images and observes it (flattened, in
    ``[0, 1]``); ``step(c)`` returns the paper's reward of that image under cell ``c`` with
    ``terminated=True`` and the same observation; ``info`` has ``image``, ``cell`` and ``failed``.
    """

    metadata = {"render_modes": []}

    def __init__(self, landscape: FailureLandscape) -> None:
        if not isinstance(landscape, FailureLandscape):
            raise TypeError(f"landscape must be a FailureLandscape, got {type(landscape).__name__}")
        self.landscape = landscape
        obs_dim = landscape.observations.shape[1]
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(obs_dim,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(landscape.grid.n_cells)
        self._image: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._image = int(self.np_random.integers(self.landscape.n_images))
        return self.landscape.observations[self._image].copy(), {"image": self._image}

    def step(self, action: int):
        if self._image is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action) and not (
            isinstance(action, (int, np.integer)) and 0 <= int(action) < self.action_space.n
        ):
            raise ValueError(f"action must be a cell index in [0, {self.action_space.n}), got {action!r}")
        a, i = int(action), self._image
        obs = self.landscape.observations[i].copy()
        reward = float(self.landscape.rewards[i, a])
        info = {"image": i, "cell": a, "failed": bool(self.landscape.failed[i, a])}
        self._image = None
        return obs, reward, True, False, info


@dataclass(frozen=True)
class DQNSearchConfig:
    """The DQN search agent; defaults from the official ``train RL.py`` (SB3 DQN) unless noted."""

    epsilon_start: float = 1.0
    """Initial exploration rate (official: 1.0)."""
    epsilon_final: float = 0.6
    """Final exploration rate (official: 0.6, high on purpose: keep mapping the landscape)."""
    exploration_fraction: float = 0.1
    """Fraction of the budget over which epsilon falls linearly to its final value (SB3 default)."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the Q-network (SB3 ``MlpPolicy``)."""
    lr: float = 1e-3
    """Adam learning rate (SB3 default 1e-4 for 50k steps; 1e-3 for our budgets of a few thousand)."""
    batch_size: int = 32
    """Minibatch size (SB3 default)."""
    buffer_size: int = 10_000
    """Replay capacity (official: 10k)."""
    train_every: int = 1
    """Queries between gradient steps (SB3 default 4; 1 here: queries, not compute, are the budget)."""

    def __post_init__(self) -> None:
        for name in ("epsilon_start", "epsilon_final", "exploration_fraction"):
            _check_real(name, getattr(self, name), lo=0.0, hi=1.0)
        if not isinstance(self.hidden, tuple) or not self.hidden:
            raise TypeError(f"hidden must be a non-empty tuple of ints, got {self.hidden!r}")
        for h in self.hidden:
            _check_int("hidden", h, 1)
        _check_real("lr", self.lr, lo=0.0, hi=10.0, lo_open=True)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("buffer_size", self.buffer_size, 1)
        _check_int("train_every", self.train_every, 1)


def linear_epsilon(step: int, budget: int, config: DQNSearchConfig) -> float:
    """SB3's linear schedule: ``start -> final`` over the first ``exploration_fraction * budget`` steps."""
    step = _check_int("step", step, 0)
    budget = _check_int("budget", budget, 1)
    if not isinstance(config, DQNSearchConfig):
        raise TypeError(f"config must be a DQNSearchConfig, got {type(config).__name__}")
    span = config.exploration_fraction * budget
    if span <= 0:
        return config.epsilon_final
    frac = min(1.0, step / span)
    return config.epsilon_start + frac * (config.epsilon_final - config.epsilon_start)


@dataclass(frozen=True)
class SearchTrace:
    """What a search queried: the image, the cell, the reward and the failure flag of every query, in order."""

    name: str
    images: np.ndarray
    cells: np.ndarray
    rewards: np.ndarray
    failed: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {type(self.name).__name__}")
        n = np.shape(self.cells)
        if len(n) != 1:
            raise ValueError(f"cells must be 1-d, got shape {n}")
        for field in ("images", "rewards", "failed"):
            if np.shape(getattr(self, field)) != n:
                raise ValueError(f"{field} must have the shape of cells {n}, got {np.shape(getattr(self, field))}")
        for field in ("images", "cells"):
            arr = np.asarray(getattr(self, field))
            if arr.dtype.kind not in "iu" or (arr.size and arr.min() < 0):
                raise ValueError(f"{field} must be non-negative integer indices")
        if not np.all(np.isfinite(np.asarray(self.rewards, dtype=float))):
            raise ValueError("rewards must be finite")
        if np.asarray(self.failed).dtype != bool:
            raise TypeError(f"failed must be a boolean array, got dtype {np.asarray(self.failed).dtype}")

    @property
    def budget(self) -> int:
        return int(self.cells.size)

    def visitation(self, n_cells: int, upto: int | None = None) -> np.ndarray:
        """Queries per cell (the first ``upto`` queries), ``(n_cells,)``."""
        k = self.budget if upto is None else int(upto)
        return np.bincount(self.cells[:k], minlength=n_cells).astype(np.float64)

    def failure_counts(self, n_cells: int, upto: int | None = None) -> np.ndarray:
        """Failing queries per cell: the landscape the search reports to the human, ``(n_cells,)``."""
        k = self.budget if upto is None else int(upto)
        return np.bincount(self.cells[:k], weights=self.failed[:k].astype(np.float64), minlength=n_cells)


def _run(env: FailureSearchEnv, budget: int, seed: int, choose, learn=None, name: str = "") -> SearchTrace:
    budget = _check_int("budget", budget, 1)
    seed = _check_int("seed", seed, 0)
    images = np.empty(budget, np.int64)
    cells = np.empty(budget, np.int64)
    rewards = np.empty(budget)
    failed = np.empty(budget, bool)
    obs, info = env.reset(seed=seed)
    for t in range(budget):
        a = int(choose(t, obs))
        next_obs, r, terminated, truncated, info = env.step(a)
        images[t], cells[t], rewards[t], failed[t] = info["image"], a, r, info["failed"]
        if learn is not None:
            learn(t, obs, a, r, next_obs, terminated)
        obs, info = env.reset()
    return SearchTrace(name, images, cells, rewards, failed)


def _check_env(env: object) -> FailureSearchEnv:
    if not isinstance(env, FailureSearchEnv):
        raise TypeError(f"env must be a FailureSearchEnv, got {type(env).__name__}")
    return env


def random_search(env: FailureSearchEnv, budget: int, *, seed: int = 0) -> SearchTrace:
    """Uniform random cells (the official random-search baseline)."""
    env = _check_env(env)
    rng = np.random.default_rng([seed, 1]) if isinstance(seed, (int, np.integer)) and seed >= 0 else None
    n = env.action_space.n
    return _run(env, budget, seed, lambda t, obs: rng.integers(n), name="random")


def epsilon_greedy_search(env: FailureSearchEnv, budget: int, *, epsilon: float = 0.1, seed: int = 0) -> SearchTrace:
    """An epsilon-greedy bandit over the cells: with probability ``epsilon`` a uniform cell, otherwise the
    cell with the highest mean reward so far (ties at random; untried cells score 0, above the -1 of a
    correct prediction, so every cell is tried early). The observation is ignored (a context-free bandit)."""
    env = _check_env(env)
    epsilon = _check_real("epsilon", epsilon, lo=0.0, hi=1.0)
    rng = np.random.default_rng([seed, 2]) if isinstance(seed, (int, np.integer)) and seed >= 0 else None
    n = env.action_space.n
    total = np.zeros(n)
    count = np.zeros(n)

    def choose(t: int, obs: np.ndarray) -> int:
        if rng.random() < epsilon:
            return int(rng.integers(n))
        mean = np.divide(total, count, out=np.zeros(n), where=count > 0)
        best = np.flatnonzero(mean == mean.max())
        return int(rng.choice(best))

    def learn(t, obs, a, r, next_obs, terminated) -> None:
        total[a] += r
        count[a] += 1

    return _run(env, budget, seed, choose, learn, name=f"epsilon-greedy ({epsilon:g})")


def dqn_search(
    env: FailureSearchEnv,
    budget: int,
    *,
    config: DQNSearchConfig = DQNSearchConfig(),  # noqa: B008 - frozen dataclass
    seed: int = 0,
) -> SearchTrace:
    """The paper's DQN failure search: :class:`icml24.rl.value.DQNAgent` (Q(s) head over the cells) on
    one-step episodes, epsilon by :func:`linear_epsilon`, one gradient step every ``train_every`` queries
    once the buffer holds a minibatch. The target is the reward itself (every episode terminates)."""
    env = _check_env(env)
    if not isinstance(config, DQNSearchConfig):
        raise TypeError(f"config must be a DQNSearchConfig, got {type(config).__name__}")
    budget = _check_int("budget", budget, 1)
    seed = _check_int("seed", seed, 0)
    dqn_cfg = DQNConfig(lr=config.lr, hidden=config.hidden, batch_size=config.batch_size,
                        buffer_size=config.buffer_size, epsilon_start=config.epsilon_start,
                        epsilon_decay=1.0, epsilon_min=0.0, network="state")  # fmt: skip
    # DQNAgent seeds the global torch generator for its initialisation: fork it, so that a search leaves
    # the caller's random state as it found it.
    with torch.random.fork_rng(devices=[]):
        agent = DQNAgent(obs_dim=env.observation_space.shape[0], action_table=int(env.action_space.n),
                         config=dqn_cfg, seed=seed)  # fmt: skip

        def choose(t: int, obs: np.ndarray) -> int:
            agent.epsilon = linear_epsilon(t, budget, config)
            return agent.act(obs)

        def learn(t, obs, a, r, next_obs, terminated) -> None:
            agent.store(obs, a, r, next_obs, terminated)
            if t % config.train_every == 0:
                agent.update()

        return _run(env, budget, seed, choose, learn, name="DQN")


def search_metrics(
    trace: SearchTrace, landscape: FailureLandscape, *, threshold: float = 0.3, checkpoints: int = 10
) -> dict[str, Any]:
    """How well a search mapped the landscape within its budget.

    * ``true_cells_recall``: the fraction of the true failure cells (failure rate above ``threshold``) in
      which the search saw at least one failure; ``true_cells_found`` the count;
    * ``failure_rate``: failing queries / budget (the paper's "faults over steps" at the end);
    * ``visitation_w1``: Wasserstein-1 between the search's visitation and the true landscape ``L / sum L``;
    * ``reported_w1``: the same for the failure counts the search reports (its estimated landscape);
    * ``recall_curve``: ``true_cells_recall`` after each of ``checkpoints`` equal parts of the budget.
    """
    if not isinstance(trace, SearchTrace):
        raise TypeError(f"trace must be a SearchTrace, got {type(trace).__name__}")
    if not isinstance(landscape, FailureLandscape):
        raise TypeError(f"landscape must be a FailureLandscape, got {type(landscape).__name__}")
    checkpoints = _check_int("checkpoints", checkpoints, 1)
    n = landscape.grid.n_cells
    truth = landscape.failure_cells(threshold)
    n_true = int(truth.sum())
    rate = landscape.failure_rate

    def recall(upto: int) -> float:
        found = trace.failure_counts(n, upto) > 0
        return float((found & truth).sum() / n_true) if n_true else float("nan")

    found = trace.failure_counts(n) > 0
    reported = trace.failure_counts(n)
    steps = [max(1, round(trace.budget * (k + 1) / checkpoints)) for k in range(checkpoints)]
    out: dict[str, Any] = {
        "true_cells_found": int((found & truth).sum()),
        "true_cells_recall": recall(trace.budget),
        "cells_with_failures": int(found.sum()),
        "failure_rate": float(trace.failed.mean()),
        "distinct_cells": int((trace.visitation(n) > 0).sum()),
        "visitation_w1": landscape_distance(trace.visitation(n), rate, landscape.grid) if rate.sum() > 0 else None,
        "reported_w1": landscape_distance(reported, rate, landscape.grid)
        if rate.sum() > 0 and reported.sum() > 0 else None,
        "recall_steps": steps,
        "recall_curve": [recall(s) for s in steps],
    }  # fmt: skip
    return out
