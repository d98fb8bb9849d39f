"""A factored 2-D push world with a spurious correlation, the miniature of CAIAC's Fetch-Push.

CAIAC (Armengol Urpí et al., "Causal Action Influence Aware Counterfactual Data Augmentation", ICML 2024,
arXiv:2405.18917) is evaluated on Fetch-Push with a distractor block and on Franka-Kitchen, where the offline data
ties the configuration of the entities the agent does not act on to the task (section 5). This world keeps that
structure at a size a CPU trains in seconds. The state has three entities, each a position in ``[-1, 1]^2``:

    s = (agent, block, distractor) = (p, b, d),      action a in [-1, 1]^2,      v = speed * a,
    p' = clip(p + v),
    X' = clip(X + v) if |p - X| < radius else X      for X in {b, d}

(a sticky gripper: a block within ``radius`` of the agent moves with it, as a grasped object does in Fetch
Pick&Lift; the blocks do not touch each other). The task is goal-conditioned: push the block to the goal ``g``; the achieved goal is ``b`` and the
sparse reward is ``0`` within ``success_radius`` of the goal and ``-1`` otherwise (Fetch's convention).

The simulator's contact flag (:func:`reachable`) is ``|p - X| < radius``: there the action moves the block, i.e.
has causal influence on ``X'``; elsewhere no action does, and the CAI score of section 4.1 should be zero.

Spurious correlation (notes section 6): in the offline data the distractor sits opposite the goal,
``d = -g + N(0, layout_noise^2)``, so a policy can read the goal off the distractor. The shifted test places the
distractor uniformly at random, independent of the goal (the "other objects in unseen configurations" shift of
the paper's Kitchen and Fetch experiments). :class:`PushWorldEnv` is the Gymnasium interface; :func:`push_step`
and :func:`rollout` step any number of copies as one numpy operation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from icml24.rl import _checks

__all__ = [
    "ENTITY_SLICES",
    "PushDataset",
    "PushWorldConfig",
    "PushWorldEnv",
    "collect_push_dataset",
    "push_step",
    "reachable",
    "rollout",
    "sample_layouts",
    "scripted_expert",
    "sparse_reward",
]

ENTITY_SLICES: dict[str, slice] = {"agent": slice(0, 2), "block": slice(2, 4), "distractor": slice(4, 6)}
"""Where each entity's sub-state lives in the 6-D state."""
STATE_DIM, ACTION_DIM, GOAL_DIM = 6, 2, 2


@dataclass(frozen=True)
class PushWorldConfig:
    """Geometry of the push world (our choices: sizes that make an episode of 50 steps enough)."""

    speed: float = 0.1
    """Displacement per step of a full action in each coordinate (``v = speed * a``)."""
    radius: float = 0.1
    """Contact distance: a block closer than this to the agent moves with it."""
    success_radius: float = 0.1
    """The block counts as at the goal within this distance (the sparse reward's threshold)."""
    horizon: int = 50
    """Steps per episode (Fetch's 50)."""
    spawn: float = 0.7
    """Initial positions and goals are uniform in ``[-spawn, spawn]^2``."""
    layout_noise: float = 0.05
    """Std of the distractor around ``-goal`` in the correlated layout."""

    def __post_init__(self) -> None:
        for name in ("speed", "radius", "success_radius", "layout_noise"):
            _checks.real(name, getattr(self, name), low=0.0, low_open=name != "layout_noise")
        _checks.real("spawn", self.spawn, low=0.0, high=1.0, low_open=True)
        _checks.integer("horizon", self.horizon, low=1)


def _states(name: str, x: Any, dim: int) -> np.ndarray:
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of shape (n, {dim}), got {type(x).__name__}")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array of shape (n, {dim})") from exc
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n, {dim}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _config(config: Any) -> PushWorldConfig:
    if not isinstance(config, PushWorldConfig):
        raise TypeError(f"config must be a PushWorldConfig, got {type(config).__name__}")
    return config


def push_step(states: Any, actions: Any, config: PushWorldConfig = PushWorldConfig()) -> tuple[np.ndarray, np.ndarray]:  # noqa: B008
    """One step of ``n`` copies: ``(next_states (n, 6), moved (n, 2))``; ``moved`` flags block and distractor.

    Actions are clipped to ``[-1, 1]`` (as Gymnasium's ``ClipAction``); the dynamics are those of the module
    docstring.
    """
    s = _states("states", states, STATE_DIM)
    a = np.clip(_states("actions", actions, ACTION_DIM), -1.0, 1.0)
    config = _config(config)
    if len(a) != len(s):
        raise ValueError(f"actions must have one row per state ({len(s)}), got {len(a)}")
    v = config.speed * a
    p = s[:, 0:2]
    out = s.copy()
    out[:, 0:2] = np.clip(p + v, -1.0, 1.0)
    moved = np.zeros((len(s), 2), dtype=bool)
    for i, sl in enumerate((ENTITY_SLICES["block"], ENTITY_SLICES["distractor"])):
        x = s[:, sl]
        held = np.linalg.norm(p - x, axis=1) < config.radius
        out[:, sl] = np.where(held[:, None], np.clip(x + v, -1.0, 1.0), x)
        moved[:, i] = held & np.any(out[:, sl] != x, axis=1)
    return out, moved


def reachable(states: Any, config: PushWorldConfig = PushWorldConfig()) -> np.ndarray:  # noqa: B008
    """The contact flag ``(n, 3)`` per entity: does the action move it from this state? (the agent: always)."""
    s = _states("states", states, STATE_DIM)
    config = _config(config)
    reach = config.radius
    out = np.ones((len(s), 3), dtype=bool)
    for i, name in enumerate(("block", "distractor")):
        out[:, i + 1] = np.linalg.norm(s[:, 0:2] - s[:, ENTITY_SLICES[name]], axis=1) < reach
    return out


def sparse_reward(achieved_goals: Any, goals: Any, config: PushWorldConfig = PushWorldConfig()) -> np.ndarray:  # noqa: B008
    """Fetch's sparse reward ``-(|ag - g| > success_radius)`` ``(n,)`` (0 at the goal, -1 elsewhere)."""
    ag, g = _states("achieved_goals", achieved_goals, GOAL_DIM), _states("goals", goals, GOAL_DIM)
    if ag.shape != g.shape:
        raise ValueError(f"goals must have the shape of achieved_goals {ag.shape}, got {g.shape}")
    return -(np.linalg.norm(ag - g, axis=1) > _config(config).success_radius).astype(np.float64)


def sample_layouts(n: int, rng: np.random.Generator, *, shifted: bool,
                   config: PushWorldConfig = PushWorldConfig()) -> tuple[np.ndarray, np.ndarray]:  # noqa: B008  # fmt: skip
    """``n`` initial states and goals: agent, block and goal uniform; the distractor at ``-goal`` (+noise) or,
    ``shifted``, uniform and independent of the goal (the test-time shift)."""
    n = _checks.integer("n", n, low=1)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    if not isinstance(shifted, (bool, np.bool_)):
        raise TypeError(f"shifted must be a bool, got {type(shifted).__name__}")
    config = _config(config)
    c = config.spawn
    s = np.empty((n, STATE_DIM))
    s[:, 0:4] = rng.uniform(-c, c, size=(n, 4))
    g = rng.uniform(-c, c, size=(n, 2))
    if shifted:
        s[:, 4:6] = rng.uniform(-c, c, size=(n, 2))
    else:
        s[:, 4:6] = np.clip(-g + config.layout_noise * rng.standard_normal((n, 2)), -1.0, 1.0)
    return s, g


def scripted_expert(states: Any, goals: Any, config: PushWorldConfig = PushWorldConfig()) -> np.ndarray:  # noqa: B008
    """A scripted expert ``(n, 2)``: move to the block, then carry it to the goal (stop within half the threshold)."""
    s, g = _states("states", states, STATE_DIM), _states("goals", goals, GOAL_DIM)
    config = _config(config)
    p, b = s[:, 0:2], s[:, 2:4]
    to_goal = g - b
    dist = np.linalg.norm(to_goal, axis=1, keepdims=True)
    # Two phases: reach the block (aim at its centre), then carry it to the goal.
    held = np.linalg.norm(p - b, axis=1, keepdims=True) < 0.9 * config.radius
    a = np.where(held, to_goal, b - p) / config.speed
    a = np.where(dist < 0.5 * config.success_radius, 0.0, a)
    return np.clip(a, -1.0, 1.0)


def rollout(policy: Callable[[np.ndarray, np.ndarray], np.ndarray], states0: Any, goals: Any,
            config: PushWorldConfig = PushWorldConfig()) -> dict[str, np.ndarray]:  # noqa: B008  # fmt: skip
    """Run ``policy(states, goals) -> actions`` for ``config.horizon`` steps from ``n`` starts, batched.

    Returns ``states (n, T+1, 6)``, ``actions (n, T, 2)``, ``goals (n, 2)`` and ``success (n,)`` (the block
    within ``success_radius`` of the goal at the last step, Fetch's success).
    """
    if not callable(policy):
        raise TypeError(f"policy must be callable, got {type(policy).__name__}")
    s, g = _states("states0", states0, STATE_DIM), _states("goals", goals, GOAL_DIM)
    config = _config(config)
    if len(g) != len(s):
        raise ValueError(f"goals must have one row per start state ({len(s)}), got {len(g)}")
    T = config.horizon
    S = np.empty((len(s), T + 1, STATE_DIM))
    A = np.empty((len(s), T, ACTION_DIM))
    S[:, 0] = s
    for t in range(T):
        A[:, t] = np.clip(np.asarray(policy(S[:, t], g), dtype=np.float64).reshape(len(s), ACTION_DIM), -1, 1)
        S[:, t + 1] = push_step(S[:, t], A[:, t], config)[0]
    success = np.linalg.norm(S[:, -1, 2:4] - g, axis=1) <= config.success_radius
    return {"states": S, "actions": A, "goals": g, "success": success}


@dataclass(frozen=True)
class PushDataset:
    """Offline episodes of the push world: ``states (E, T+1, 6)``, ``actions (E, T, 2)``, ``goals (E, 2)``."""

    states: np.ndarray
    """Episode states including the final one."""
    actions: np.ndarray
    """The actions taken."""
    goals: np.ndarray
    """The commanded goal of each episode (random episodes have one too; it is relabelled in hindsight)."""
    expert: np.ndarray
    """``(E,)`` bool: the episode comes from the scripted expert."""

    def __post_init__(self) -> None:
        s, a, g, e = (np.asarray(x) for x in (self.states, self.actions, self.goals, self.expert))
        if s.ndim != 3 or s.shape[2] != STATE_DIM or s.shape[1] < 2:
            raise ValueError(f"states must have shape (E, T+1, {STATE_DIM}) with T >= 1, got {s.shape}")
        E, T1 = s.shape[:2]
        if a.shape != (E, T1 - 1, ACTION_DIM):
            raise ValueError(f"actions must have shape ({E}, {T1 - 1}, {ACTION_DIM}), got {a.shape}")
        if g.shape != (E, GOAL_DIM):
            raise ValueError(f"goals must have shape ({E}, {GOAL_DIM}), got {g.shape}")
        if e.shape != (E,) or e.dtype != bool:
            raise ValueError(f"expert must be a bool array of shape ({E},)")
        for name, v in (("states", s), ("actions", a), ("goals", g)):
            if not np.all(np.isfinite(v)):
                raise ValueError(f"{name} must be finite")

    @property
    def n_episodes(self) -> int:
        return int(self.states.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.actions.shape[1])


def collect_push_dataset(n_expert: int, n_random: int, *, seed: int, expert_noise: float = 0.3,
                         config: PushWorldConfig = PushWorldConfig()) -> PushDataset:  # noqa: B008  # fmt: skip
    """The offline data: ``n_expert`` noisy scripted-expert and ``n_random`` uniform-random episodes.

    Both kinds start from the correlated layout (distractor at ``-goal``), the notes' recipe for the paper's
    "30% expert + 70% random" Fetch data. The expert's actions get ``N(0, expert_noise^2)`` noise.
    """
    n_expert, n_random = _checks.integer("n_expert", n_expert, low=0), _checks.integer("n_random", n_random, low=0)
    if n_expert + n_random == 0:
        raise ValueError("n_expert + n_random must be >= 1")
    seed = _checks.integer("seed", seed, low=0)
    expert_noise = _checks.real("expert_noise", expert_noise, low=0.0)
    config = _config(config)
    rng = np.random.default_rng(seed)
    parts = []
    if n_expert:
        s0, g = sample_layouts(n_expert, rng, shifted=False, config=config)
        noisy = lambda s, gg: scripted_expert(s, gg, config) + expert_noise * rng.standard_normal((len(s), 2))  # noqa: E731
        parts.append((rollout(noisy, s0, g, config), True))
    if n_random:
        s0, g = sample_layouts(n_random, rng, shifted=False, config=config)
        parts.append((rollout(lambda s, gg: rng.uniform(-1, 1, size=(len(s), 2)), s0, g, config), False))
    return PushDataset(
        states=np.concatenate([p["states"] for p, _ in parts]),
        actions=np.concatenate([p["actions"] for p, _ in parts]),
        goals=np.concatenate([p["goals"] for p, _ in parts]),
        expert=np.concatenate([np.full(len(p["goals"]), e) for p, e in parts]),
    )


class PushWorldEnv(gym.Env):
    """The push world as a ``gymnasium.Env``: observation ``(p, b, d, g)`` in ``[-1, 1]^8``, sparse reward.

    ``options={"shifted": True}`` in ``reset`` draws the shifted layout (distractor independent of the goal).
    The episode is truncated after ``config.horizon`` steps and never terminates (Fetch's convention);
    ``info["is_success"]`` is the block-at-goal flag.
    """

    metadata = {"render_modes": []}

    def __init__(self, config: PushWorldConfig = PushWorldConfig(), *, shifted: bool = False) -> None:  # noqa: B008
        self.config = _config(config)
        if not isinstance(shifted, (bool, np.bool_)):
            raise TypeError(f"shifted must be a bool, got {type(shifted).__name__}")
        self.shifted = bool(shifted)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(STATE_DIM + GOAL_DIM,), dtype=np.float64)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)
        self._state = np.zeros(STATE_DIM)
        self._goal = np.zeros(GOAL_DIM)
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([self._state, self._goal])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        shifted = bool((options or {}).get("shifted", self.shifted))
        s, g = sample_layouts(1, self.np_random, shifted=shifted, config=self.config)
        self._state, self._goal, self._t = s[0], g[0], 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        a = np.asarray(action, dtype=np.float64).reshape(1, ACTION_DIM)
        s2, moved = push_step(self._state[None], a, self.config)
        self._state, self._t = s2[0], self._t + 1
        r = float(sparse_reward(self._state[None, 2:4], self._goal[None], self.config)[0])
        info = {"is_success": r == 0.0, "block_moved": bool(moved[0, 0]), "distractor_moved": bool(moved[0, 1])}
        return self._obs(), r, False, self._t >= self.config.horizon, info
