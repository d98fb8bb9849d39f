"""Deceptive point mass: a small reward next to the start, a large one far away behind a wall.

The exploration task of the SAPG miniature (notes: ``shared/papers/sapg.md`` section 6; SAPG, ICML 2024,
arXiv:2407.20230, argues that PPO's extra parallel environments stop paying off on tasks that need
exploration). A point mass in the square [-L, L]^2 (L = 4) with first-order velocity dynamics:

    v' = 0.9 v + 0.3 clip(a, -1, 1);     p' = clip(p + 0.1 v', -L, L)   (blocked by walls: p' = p, v' = 0)
    reward = decoy_reward [|p' - c_decoy| < r_decoy] + goal_reward [|p' - c_goal| < r_goal]
    terminated = |p' - c_goal| < r_goal;   truncated after ``max_episode_steps`` (H = 100).

Observation: (x / 3, y / 3, v_x, v_y, t / H). Start: the origin plus U(-0.1, 0.1)^2 noise, v = 0. A policy that
parks in the decoy disc earns about ``decoy_reward * H`` per episode; reaching the goal earns ``goal_reward``
(+20 by default) once, which is worth more but has to be discovered by driving around the wall.

:class:`BatchedDeceptivePointMass` is the tensor version; :class:`DeceptivePointMassEnv` the same task as a plain
``gymnasium.Env`` (numpy), used by the speed benchmark in ``SyncVectorEnv`` and by ``check_env``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from icml24.rl import _checks
from icml24.rl.envs.batched import TorchVectorEnv

__all__ = ["PointMassLayout", "BatchedDeceptivePointMass", "DeceptivePointMassEnv", "BatchedMultiGoalPointMass"]


@dataclass(frozen=True)
class PointMassLayout:
    """Geometry and rewards of the deceptive point mass (defaults: the notes' v3 layout plus one wall)."""

    goal: tuple[float, float] = (-3.3, 3.3)
    """Centre of the goal disc (terminal, ``goal_reward`` once)."""
    goal_radius: float = 0.5
    """Radius of the goal disc."""
    goal_reward: float = 20.0
    """Reward for entering the goal disc; the episode then terminates."""
    decoy: tuple[float, float] = (0.8, 0.0)
    """Centre of the decoy disc next to the start."""
    decoy_radius: float = 0.4
    """Radius of the decoy disc."""
    decoy_reward: float = 0.1
    """Reward per step inside the decoy disc."""
    walls: tuple[tuple[float, float, float, float], ...] = ((-2.4, 0.6, -2.0, 4.0),)
    """Axis-aligned wall rectangles ``(x_min, y_min, x_max, y_max)``; a move into one is cancelled."""
    half_width: float = 4.0
    """The arena is ``[-half_width, half_width]^2``."""
    start_noise: float = 0.1
    """Start position is uniform in ``[-start_noise, start_noise]^2``."""

    def __post_init__(self) -> None:
        for name in ("goal", "decoy"):
            c = getattr(self, name)
            if not isinstance(c, (tuple, list)) or len(c) != 2:
                raise TypeError(f"{name} must be an (x, y) pair, got {c!r}")
            for v in c:
                _checks.real(name, v)
        for name in ("goal_radius", "decoy_radius", "half_width"):
            _checks.real(name, getattr(self, name), low=0.0, low_open=True)
        for name in ("goal_reward", "decoy_reward"):
            _checks.real(name, getattr(self, name))
        _checks.real("start_noise", self.start_noise, low=0.0)
        if not isinstance(self.walls, (tuple, list)):
            raise TypeError(f"walls must be a tuple of (x_min, y_min, x_max, y_max), got {self.walls!r}")
        for w in self.walls:
            if not isinstance(w, (tuple, list)) or len(w) != 4:
                raise ValueError(f"walls must be (x_min, y_min, x_max, y_max) rectangles, got {w!r}")
            for v in w:
                _checks.real("walls", v)
            if not (w[0] < w[2] and w[1] < w[3]):
                raise ValueError(f"walls must be (x_min, y_min, x_max, y_max) with min < max, got {w}")


_ACCEL = 0.3
_DAMPING = 0.9
_DT = 0.1


class BatchedDeceptivePointMass(TorchVectorEnv):
    """The deceptive point mass over ``num_envs`` copies (state ``(x, y, v_x, v_y, t)``)."""

    def __init__(
        self,
        *,
        num_envs: int,
        layout: PointMassLayout | None = None,
        max_episode_steps: int = 100,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        self.layout = layout if layout is not None else PointMassLayout()
        if not isinstance(self.layout, PointMassLayout):
            raise TypeError(f"layout must be a PointMassLayout, got {type(layout).__name__}")
        high = np.array([2.0, 2.0, 5.0, 5.0, 1.0], dtype=np.float32)
        self.single_observation_space = spaces.Box(low=-high, high=high, dtype=np.float32)
        self.single_action_space = spaces.Box(low=-1.0, high=1.0, shape=(2,), dtype=np.float32)
        self._horizon = max_episode_steps
        super().__init__(
            num_envs=num_envs, max_episode_steps=max_episode_steps, device=device, dtype=dtype,
            autoreset_mode=autoreset_mode,
        )
        lay = self.layout
        as_t = lambda v: torch.tensor(v, device=self.device, dtype=dtype)  # noqa: E731
        # goal and decoy centres [2 discs, 2 coordinates, 1] against the [2, N] position rows, and radii^2
        self._discs = as_t([lay.goal, lay.decoy])[:, :, None]
        self._disc_radii_sq = as_t([lay.goal_radius**2, lay.decoy_radius**2])[:, None]
        # per wall, its (x_min, y_min) and (x_max, y_max) corners as [2, 1] columns
        self._walls = [(as_t(w[0:2])[:, None], as_t(w[2:4])[:, None]) for w in lay.walls]
        self._damping, self._zero, self._decoy_reward = as_t(_DAMPING), as_t(0.0), as_t(lay.decoy_reward)
        self._obs_scale = as_t([1.0 / 3.0, 1.0 / 3.0, 1.0, 1.0, 1.0 / self._horizon])[:, None]
        self._one = as_t(1.0)
        self._pos, self._vel = self._state[0:2], self._state[2:4]  # views, made once
        # step temporaries: the clipped actions as [2, N] rows, the scaled state before the observation's transpose
        self._action_rows = torch.empty(2, self.num_envs, device=self.device, dtype=dtype)
        self._obs_rows = torch.empty(5, self.num_envs, device=self.device, dtype=dtype)

    def _sample_initial_state(self, n: int) -> torch.Tensor:
        s = self.layout.start_noise
        state = torch.zeros(5, n, device=self.device, dtype=self.dtype)
        state[0:2] = self._uniform(n, [-s, -s], [s, s])
        return state

    def _clip_actions(self, a: torch.Tensor) -> torch.Tensor:
        # clip and transpose in one kernel: [N, 2] actions -> contiguous [2, N] rows (the transposed read is the
        # strided part; later kernels on the rows vectorise)
        return torch.clamp(a.T, -1.0, 1.0, out=self._action_rows)

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        # In place on the variable-major rows: p and v are contiguous [2, N] blocks, so each line is one kernel.
        # Masks are 0/1 floats made by float arithmetic and selects are ``lerp`` with a 0/1 weight (exact:
        # ``lerp(a, b, 1) = b - (b - a) * 0 = b`` and ``lerp(a, b, 0) = a``): torch's float->bool comparisons,
        # ``torch.where`` and ``masked_fill`` are not vectorised on CPU and cost 3-6x an add at N = 65536.
        lay = self.layout
        p, v = self._pos, self._vel
        v.mul_(self._damping).add_(action, alpha=_ACCEL)
        if self._walls:
            p_new = torch.add(p, v, alpha=_DT).clamp_(-lay.half_width, lay.half_width)
            # inside a wall <=> max(x_min - x, x - x_max, y_min - y, y - y_max) <= 0 (float differences have
            # exact signs); ``outside`` is that margin's minimum over the walls
            outside = None
            for low, high in self._walls:
                margin = torch.sub(low, p_new)
                torch.maximum(margin, torch.sub(p_new, high), out=margin)
                m = torch.maximum(margin[0], margin[1])
                outside = m if outside is None else torch.minimum(outside, m, out=outside)
            assert outside is not None
            keep = outside.gt_(0.0)  # 1 = the move stands, 0 = it ran into a wall and is cancelled
            torch.lerp(p, p_new, keep, out=p)
            torch.lerp(self._zero, v, keep, out=v)  # v, or +0.0 after a blocked move
        else:
            p.add_(v, alpha=_DT).clamp_(-lay.half_width, lay.half_width)
        self._rows[4].add_(self._one)
        # squared distances to the goal and the decoy centre in one [2 discs, 2, N] block, then 0/1 float masks
        d = torch.sub(p, self._discs).square_()
        inside = torch.add(d[:, 0], d[:, 1]).lt_(self._disc_radii_sq)
        in_goal, in_decoy = inside[0], inside[1]
        reward = torch.mul(in_decoy, self._decoy_reward)
        if self._host_reads_are_free and float(in_goal.max()) == 0.0:
            return reward, None  # no mass is in the goal disc: nothing terminates (on CPU a free host read)
        return reward.add_(in_goal, alpha=lay.goal_reward), in_goal.to(torch.bool)

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        # scale the rows (contiguous), then one transposed copy into the [N, 5] observation
        rows = torch.mul(state, self._obs_scale, out=self._obs_rows[:, : state.shape[1]])
        obs = torch.empty(state.shape[1], 5, device=state.device, dtype=state.dtype)
        return obs.T.copy_(rows).T


class DeceptivePointMassEnv(gym.Env):
    """The same task as one plain ``gymnasium.Env`` (numpy); truncates itself after ``max_episode_steps``."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, layout: PointMassLayout | None = None, max_episode_steps: int = 100) -> None:
        self.layout = layout if layout is not None else PointMassLayout()
        if not isinstance(self.layout, PointMassLayout):
            raise TypeError(f"layout must be a PointMassLayout, got {type(layout).__name__}")
        self.max_episode_steps = _checks.integer("max_episode_steps", max_episode_steps, low=1)
        high = np.array([2.0, 2.0, 5.0, 5.0, 1.0], dtype=np.float32)
        self.observation_space = spaces.Box(low=-high, high=high, dtype=np.float32)
        self.action_space = spaces.Box(low=-1.0, high=1.0, shape=(2,), dtype=np.float32)
        self._walls: Sequence[tuple[float, float, float, float]] = self.layout.walls
        self._p = np.zeros(2)
        self._v = np.zeros(2)
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.array(
            [self._p[0] / 3, self._p[1] / 3, self._v[0], self._v[1], self._t / self.max_episode_steps],
            dtype=np.float32,
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        s = self.layout.start_noise
        self._p = self.np_random.uniform(-s, s, size=2)
        self._v = np.zeros(2)
        self._t = 0
        return self._obs(), {}

    def step(self, action: np.ndarray):
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (2,):
            raise ValueError(f"action must have shape (2,), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("action must be finite; got NaN or inf entries")
        a = np.clip(a, -1.0, 1.0)
        lay = self.layout
        v = _DAMPING * self._v + _ACCEL * a
        p = np.clip(self._p + _DT * v, -lay.half_width, lay.half_width)
        for x0, y0, x1, y1 in self._walls:
            if x0 <= p[0] <= x1 and y0 <= p[1] <= y1:
                p, v = self._p, np.zeros(2)
                break
        self._p, self._v, self._t = p, v, self._t + 1
        in_goal = float(np.sum((p - np.asarray(lay.goal)) ** 2)) < lay.goal_radius**2
        in_decoy = float(np.sum((p - np.asarray(lay.decoy)) ** 2)) < lay.decoy_radius**2
        reward = lay.goal_reward * in_goal + lay.decoy_reward * in_decoy
        return self._obs(), float(reward), bool(in_goal), self._t >= self.max_episode_steps, {}



DEFAULT_MULTI_GOALS: tuple[tuple[float, float], ...] = ((-3.3, 3.3), (3.3, 3.3), (3.3, -3.3), (-3.3, -3.3))
"""The four goal discs of :class:`BatchedMultiGoalPointMass`: the corners of the single-goal task's arena."""


class BatchedMultiGoalPointMass(TorchVectorEnv):
    """K deceptive point-mass tasks in one env: each episode draws which of K far goals pays.

    The dynamics, arena, walls and decoy are those of :class:`BatchedDeceptivePointMass` (``layout``; its
    ``goal`` is ignored). At each reset a task ``k`` is drawn uniformly from ``goals`` and shown to the agent as
    a one-hot; entering goal disc ``k`` (radius ``layout.goal_radius``) pays ``layout.goal_reward`` and
    terminates, the other goal discs pay nothing. Every task has the same decoy next to the start, so each one
    is the single-goal exploration problem in another direction, and a policy's return averages over K
    discoveries instead of one: a seed's evaluation return is a graded (k / K) measure of how much it explored,
    which is what a comparison over seeds needs (the single-goal return is two-valued, about 20 or about 9).

    State ``(x, y, v_x, v_y, t, k)``; observation ``(x / 3, y / 3, v_x, v_y, t / H, onehot(k))``.
    ``fixed_task=k`` makes every episode task ``k`` (to evaluate a policy task by task).
    """

    def __init__(
        self,
        *,
        num_envs: int,
        goals: Sequence[tuple[float, float]] = DEFAULT_MULTI_GOALS,
        layout: PointMassLayout | None = None,
        fixed_task: int | None = None,
        max_episode_steps: int = 100,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        self.layout = layout if layout is not None else PointMassLayout(walls=())
        if not isinstance(self.layout, PointMassLayout):
            raise TypeError(f"layout must be a PointMassLayout, got {type(layout).__name__}")
        if not isinstance(goals, (tuple, list)) or len(goals) < 1:
            raise TypeError(f"goals must be a non-empty sequence of (x, y) pairs, got {goals!r}")
        for g in goals:
            if not isinstance(g, (tuple, list)) or len(g) != 2:
                raise TypeError(f"goals must be a non-empty sequence of (x, y) pairs, got {goals!r}")
            for v in g:
                _checks.real("goals", v)
        self.goals = tuple((float(g[0]), float(g[1])) for g in goals)
        k = len(self.goals)
        if fixed_task is not None:
            fixed_task = _checks.integer("fixed_task", fixed_task, low=0)
            if fixed_task >= k:
                raise ValueError(f"fixed_task must be in [0, {k}) (one of the {k} goals), got {fixed_task}")
        self.fixed_task = fixed_task
        high = np.concatenate([[2.0, 2.0, 5.0, 5.0, 1.0], np.ones(k)]).astype(np.float32)
        low = np.concatenate([[-2.0, -2.0, -5.0, -5.0, 0.0], np.zeros(k)]).astype(np.float32)
        self.single_observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self.single_action_space = spaces.Box(low=-1.0, high=1.0, shape=(2,), dtype=np.float32)
        self._horizon = max_episode_steps
        self.num_goals = k
        # set before super().__init__, which samples the first state
        self._goal_xy = torch.tensor(self.goals, device=torch.device(device), dtype=dtype).T.contiguous()  # [2, K]
        super().__init__(
            num_envs=num_envs, max_episode_steps=max_episode_steps, device=device, dtype=dtype,
            autoreset_mode=autoreset_mode,
        )
        lay = self.layout
        self._decoy = torch.tensor(lay.decoy, device=self.device, dtype=dtype)
        self._walls = torch.tensor(lay.walls, device=self.device, dtype=dtype).reshape(-1, 4)

    def _sample_initial_state(self, n: int) -> torch.Tensor:
        s = self.layout.start_noise
        state = torch.zeros(6, n, device=self.device, dtype=self.dtype)
        state[0:2] = self._uniform(n, [-s, -s], [s, s])
        if self.fixed_task is None:
            task = torch.randint(self.num_goals, (n,), generator=self.generator, device=self.device)
            state[5] = task.to(self.dtype)
        else:
            state[5] = float(self.fixed_task)
        return state

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lay = self.layout
        p, v = state[0:2], state[2:4]
        v.mul_(_DAMPING).add_(action.T, alpha=_ACCEL)
        if self._walls.shape[0]:
            p_new = torch.add(p, v, alpha=_DT).clamp_(-lay.half_width, lay.half_width)
            x, y = p_new[0:1], p_new[1:2]
            w = self._walls[:, :, None]
            hit = ((x >= w[:, 0]) & (x <= w[:, 2]) & (y >= w[:, 1]) & (y <= w[:, 3])).any(dim=0)
            p.copy_(torch.where(hit, p, p_new))
            v.masked_fill_(hit, 0.0)
        else:
            p.add_(v, alpha=_DT).clamp_(-lay.half_width, lay.half_width)
        state[4].add_(1.0)
        goal = self._goal_xy[:, state[5].long()]  # [2, N]: each env's own goal
        d = torch.sub(p, goal).square_()
        in_goal = torch.add(d[0], d[1]) < lay.goal_radius**2
        d = torch.sub(p, self._decoy[:, None]).square_()
        reward = (torch.add(d[0], d[1]) < lay.decoy_radius**2).to(self.dtype).mul_(lay.decoy_reward)
        reward.add_(in_goal.to(self.dtype), alpha=lay.goal_reward)
        return reward, in_goal

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        n = state.shape[1]
        obs = torch.zeros(n, 5 + self.num_goals, device=state.device, dtype=state.dtype)
        obs[:, :5].T.copy_(state[:5])
        obs[:, 0:2].mul_(1.0 / 3.0)
        obs[:, 4].mul_(1.0 / self._horizon)
        obs.scatter_(1, state[5].long()[:, None] + 5, 1.0)
        return obs

    def task(self) -> torch.Tensor:
        """Each env's current task index ``k`` (``[num_envs]``, long)."""
        return self._state[5].long()
