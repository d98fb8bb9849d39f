"""Goal-reaching mazes: a grid maze (deterministic or slippery) and a batched torch continuous point maze.

Both use the "discrete shortest path" (DSP) reward of Veviurko et al. (ICML 2024, To the Max): a cell at BFS
distance ``d`` from the goal pays ``beta ** (d + 1)`` and the goal pays 1 (and ends the episode). The reward
ranks cells by closeness to the goal, so a cumulative-reward agent with ``gamma`` near 1 prefers to loiter next
to the goal (``beta^2 / (1 - gamma) > 1``), while a max-reward agent walks in.

The map is our 8x8 layout with a 6x6 interior (``#`` wall, ``.`` free, ``S`` start, ``G`` goal), in the spirit
of the paper's ``sp_maze_single_goal``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from icml24.rl.value.tabular import TabularMDP

MAZE_SINGLE_GOAL: tuple[str, ...] = (
    "########",
    "#S..#..#",
    "#.#.#.##",
    "#.#...G#",
    "#.####.#",
    "#......#",
    "#.#.##.#",
    "########",
)
"""8x8 maze, 6x6 interior; the start is 7 moves from the goal."""

MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])
"""Actions 0..3: up, right, down, left (row, col deltas)."""


def parse_maze(maze: Sequence[str]) -> dict[str, Any]:
    """Free cells, start, goal and BFS distances to the goal of a maze given as strings."""
    rows = [list(r) for r in maze]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("all maze rows must have the same length")
    grid = np.array(rows)
    starts, goals = np.argwhere(grid == "S"), np.argwhere(grid == "G")
    if len(starts) != 1 or len(goals) != 1:
        raise ValueError("the maze needs exactly one 'S' and one 'G'")
    free = grid != "#"
    dist = np.full(grid.shape, -1, dtype=np.int64)
    g = tuple(goals[0])
    dist[g] = 0
    q = deque([g])
    while q:
        r, c = q.popleft()
        for dr, dc in MOVES:
            r2, c2 = r + dr, c + dc
            if 0 <= r2 < grid.shape[0] and 0 <= c2 < grid.shape[1] and free[r2, c2] and dist[r2, c2] < 0:
                dist[r2, c2] = dist[r, c] + 1
                q.append((r2, c2))
    return {"free": free, "start": tuple(starts[0]), "goal": g, "dist": dist, "shape": grid.shape}


def dsp_reward(dist: np.ndarray, beta: float) -> np.ndarray:
    """``beta ** (d + 1)`` per cell, 1 at the goal (``d = 0``), 0 for walls/unreachable cells."""
    if not 0 < beta < 1:
        raise ValueError(f"beta must be in (0, 1), got {beta}")
    r = np.where(dist >= 0, beta ** (dist + 1.0), 0.0)
    r[dist == 0] = 1.0
    return r


class GridMaze(gym.Env):
    """A grid maze with 4 moves; with probability ``slip`` the move is replaced by a uniformly random one.

    Observation: the index of the agent's free cell (``Discrete``). Reward on entering a cell: ``"dsp"``
    (above), ``"dsp_shifted"`` (DSP minus 1: <= 0, the paper's negative-shift baseline) or ``"sparse"``
    (1 at the goal only). Entering the goal terminates when ``terminate_at_goal`` (else the agent stays there
    and keeps collecting its reward); episodes truncate after ``max_episode_steps``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        maze: Sequence[str] = MAZE_SINGLE_GOAL,
        *,
        slip: float = 0.0,
        reward: str = "dsp",
        beta: float = 0.9,
        terminate_at_goal: bool = True,
        max_episode_steps: int = 50,
    ) -> None:
        if not 0 <= slip <= 1:
            raise ValueError(f"slip must be in [0, 1], got {slip}")
        if reward not in ("dsp", "dsp_shifted", "sparse"):
            raise ValueError(f"reward must be 'dsp', 'dsp_shifted' or 'sparse', got {reward!r}")
        info = parse_maze(maze)
        self.maze, self.slip, self.reward_kind, self.beta = tuple(maze), float(slip), reward, float(beta)
        self.terminate_at_goal, self.max_episode_steps = terminate_at_goal, int(max_episode_steps)
        self.cells = np.argwhere(info["free"])
        self._index = {tuple(c): i for i, c in enumerate(self.cells)}
        self.start_state = self._index[info["start"]]
        self.goal_state = self._index[info["goal"]]
        self.dist = info["dist"][self.cells[:, 0], self.cells[:, 1]]
        r = dsp_reward(info["dist"], beta)[self.cells[:, 0], self.cells[:, 1]]
        if reward == "dsp_shifted":
            r = r - 1.0
        elif reward == "sparse":
            r = (np.arange(len(self.cells)) == self.goal_state).astype(np.float64)
        self.cell_reward = r
        S = len(self.cells)
        nxt = np.empty((S, 4), dtype=np.int64)
        for i, (rr, cc) in enumerate(self.cells):
            for a, (dr, dc) in enumerate(MOVES):
                nxt[i, a] = self._index.get((rr + dr, cc + dc), i)  # bump into a wall: stay
        self.next_cell = nxt
        self.observation_space = gym.spaces.Discrete(S)
        self.action_space = gym.spaces.Discrete(4)
        self._s, self._t = self.start_state, 0

    def to_mdp(self) -> TabularMDP:
        """The exact :class:`TabularMDP` (``P``, reward on entering ``s'``, goal transitions terminal)."""
        S = len(self.cells)
        P = np.zeros((S, 4, S))
        probs = np.full(4, self.slip / 4) + np.eye(4) * (1 - self.slip)  # intended move + uniform slip
        for a in range(4):
            for b in range(4):
                np.add.at(P, (np.arange(S), a, self.next_cell[:, b]), probs[a, b])
        if not self.terminate_at_goal:
            pass
        else:
            P[self.goal_state] = 0.0
            P[self.goal_state, :, self.goal_state] = 1.0  # unreachable after termination; kept stochastic
        R = np.broadcast_to(self.cell_reward[None, None, :], P.shape).copy()
        T = np.zeros(P.shape, dtype=bool)
        if self.terminate_at_goal:
            T[:, :, self.goal_state] = True
        start = np.eye(S)[self.start_state]
        return TabularMDP(P=P, R=R, terminal=T, start=start)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self._s, self._t = self.start_state, 0
        return self._s, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in Discrete(4), got {action!r}")
        a = int(action)
        if self.slip > 0 and self.np_random.random() < self.slip:
            a = int(self.np_random.integers(4))
        self._s = int(self.next_cell[self._s, a])
        self._t += 1
        term = self.terminate_at_goal and self._s == self.goal_state
        trunc = (not term) and self._t >= self.max_episode_steps
        return (
            self._s,
            float(self.cell_reward[self._s]),
            bool(term),
            bool(trunc),
            {"success": self._s == self.goal_state},
        )


class PointMazeVecEnv(gym.vector.VectorEnv):
    """A batched kinematic 2-D point maze in torch with the Gymnasium vector-env API (same-step autoreset).

    The point moves by ``step_size * action`` (action in ``[-1, 1]^2``), one axis at a time so it slides along
    walls; the cell grid is the maze map with unit cells. Observation ``[x, y] / size * 2 - 1``. Reward: the
    DSP value of the current cell (``reward="dsp"``), DSP - 1 (``"dsp_shifted"``) or sparse; reaching within
    ``goal_radius`` of the goal centre terminates with reward 1 (0 when shifted). Episodes truncate after
    ``max_episode_steps``. ``info["progress"]`` is the DSP value of the current cell (1 at the goal) whatever
    the reward, to compare agents trained on different rewards. Done envs reset in the same step; the final observation is in
    ``info["final_obs"]`` (Gymnasium's ``SAME_STEP`` autoreset). Tensors in, tensors out.
    """

    def __init__(
        self,
        num_envs: int,
        maze: Sequence[str] = MAZE_SINGLE_GOAL,
        *,
        reward: str = "dsp",
        beta: float = 0.9,
        step_size: float = 0.25,
        goal_radius: float = 0.35,
        max_episode_steps: int = 200,
        device: str | torch.device = "cpu",
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if reward not in ("dsp", "dsp_shifted", "sparse"):
            raise ValueError(f"reward must be 'dsp', 'dsp_shifted' or 'sparse', got {reward!r}")
        info = parse_maze(maze)
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.reward_kind, self.step_size, self.goal_radius = reward, float(step_size), float(goal_radius)
        self.max_episode_steps = int(max_episode_steps)
        self.size = torch.tensor(info["shape"], dtype=torch.float32, device=self.device)
        self.free = torch.as_tensor(info["free"], device=self.device)
        r = dsp_reward(info["dist"], beta)
        if reward == "sparse":
            r = (info["dist"] == 0).astype(np.float64)
        self.cell_reward = torch.as_tensor(r, dtype=torch.float32, device=self.device)
        # closeness to the goal whatever the reward: the DSP value of the cell (1 = goal), for monitoring
        self.dsp = torch.as_tensor(dsp_reward(info["dist"], beta), dtype=torch.float32, device=self.device)
        self.start = torch.tensor(info["start"], dtype=torch.float32, device=self.device) + 0.5
        self.goal = torch.tensor(info["goal"], dtype=torch.float32, device=self.device) + 0.5
        self.single_observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self.pos = self.start.repeat(self.num_envs, 1)
        self.t = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self.generator = torch.Generator(device=self.device)

    def _obs(self, pos: torch.Tensor) -> torch.Tensor:
        return pos / self.size * 2.0 - 1.0

    def _is_free(self, pos: torch.Tensor) -> torch.Tensor:
        cell = pos.floor().long()
        r = cell[:, 0].clamp(0, self.free.shape[0] - 1)
        c = cell[:, 1].clamp(0, self.free.shape[1] - 1)
        return self.free[r, c]

    def move(self, pos: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The kinematics alone: ``pos + step_size * clip(a)``, one axis at a time so the point slides along walls.

        ``pos`` ``(B, 2)`` in maze coordinates (row, col; unit cells), any batch size; no goal, reward or reset
        logic (used by :meth:`step`, and to roll out scripted behaviour from arbitrary starts).
        """
        delta = actions.clamp(-1.0, 1.0) * self.step_size
        pos = pos.clone()
        for axis in range(2):  # move one axis at a time: slide along walls instead of sticking
            cand = pos.clone()
            cand[:, axis] += delta[:, axis]
            ok = self._is_free(cand)
            pos = torch.where(ok[:, None], cand, pos)
        return pos

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self.pos = self.start.repeat(self.num_envs, 1)
        self.t.zero_()
        return self._obs(self.pos), {}

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        if a.shape != (self.num_envs, 2):
            raise ValueError(f"actions must have shape ({self.num_envs}, 2), got {tuple(a.shape)}")
        if not bool(torch.isfinite(a).all()):
            raise ValueError("actions must be finite; got NaN or inf entries")
        pos = self.move(self.pos, a)
        self.pos = pos
        self.t += 1
        success = (pos - self.goal).norm(dim=1) <= self.goal_radius
        cell = pos.floor().long()
        reward = self.cell_reward[cell[:, 0], cell[:, 1]]
        reward = torch.where(success, torch.ones_like(reward), reward)
        if self.reward_kind == "dsp_shifted":
            reward = reward - 1.0
        terminated = success
        truncated = (self.t >= self.max_episode_steps) & ~terminated
        obs = self._obs(pos)
        done = terminated | truncated
        progress = torch.where(success, torch.ones_like(reward), self.dsp[cell[:, 0], cell[:, 1]])
        info: dict[str, Any] = {"success": success, "progress": progress}
        if bool(done.any()):
            info["final_obs"] = obs.clone()
            info["_final_obs"] = done.clone()
            self.pos = torch.where(done[:, None], self.start.expand_as(pos), pos)
            self.t = torch.where(done, torch.zeros_like(self.t), self.t)
            obs = self._obs(self.pos)
        return obs, reward, terminated, truncated, info
