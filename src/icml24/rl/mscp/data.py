"""The point-maze world of the MSCP miniature: identifiable and non-identifiable dynamics, and passive data.

Wu, Hu, Yang, Zhang, Zhang. *Planning, Fast and Slow: Online Reinforcement Learning with Action-Free Offline
Data via Multiscale Planners.* ICML 2024 (PMLR 235:53515-53541), https://proceedings.mlr.press/v235/wu24j.html.

The paper's theory separates *identifiable* dynamics, where the effect of the action on the next state can be
told apart from the environment's stochasticity, from non-identifiable ones (abstract). Our two worlds on the
shared batched point maze (:class:`icml24.rl.envs.mazes.PointMazeVecEnv`):

* identifiable (``drift_prob = 0``): ``s' = slide(s + step * a)``: the action is a function of ``(s, s')`` away
  from walls, so an inverse dynamics model learned from a few online transitions recovers it;
* non-identifiable (``drift_prob = p > 0``): with probability ``p`` (a hidden coin per step) the action is
  ignored and the point moves one full step in a uniformly random direction, a displacement of the same size as
  a deliberate move; from ``(s, s')`` alone one cannot tell whether the action or the drift moved it.

Passive data ("videos"): state sequences of a scripted navigator (breadth-first shortest path on the cell grid,
heading for the centre of the next cell at full speed, with Gaussian action noise) between random start and
goal cells, recorded in the same world, actions dropped. A *coverage gap* removes every trajectory that enters
a given set of cells (the pessimism experiment of the notes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np
import torch

from icml24.rl import _checks
from icml24.rl.envs.mazes import MAZE_SINGLE_GOAL, MOVES, PointMazeVecEnv, parse_maze
from icml24.rl.offline import StateDataset

__all__ = [
    "DriftPointMazeVecEnv",
    "collect_passive_data",
    "maze_routes",
    "scripted_actions",
    "trajectory_index",
]


class DriftPointMazeVecEnv(PointMazeVecEnv):
    """:class:`PointMazeVecEnv` whose action is replaced, with probability ``drift_prob``, by a random full step.

    ``drift_prob = 0`` is the identifiable world (the base env exactly); ``drift_prob > 0`` the non-identifiable
    one. The drift direction is uniform on the circle, so its displacement has the length of a deliberate
    unit-norm action. ``info["drifted"]`` flags the steps where the coin came up (for diagnostics only: no
    learner reads it). Everything else (reward, termination, same-step autoreset) is the base env's.
    """

    def __init__(
        self,
        num_envs: int,
        maze: Sequence[str] = MAZE_SINGLE_GOAL,
        *,
        drift_prob: float = 0.0,
        reward: str = "sparse",
        step_size: float = 0.5,
        goal_radius: float = 0.4,
        max_episode_steps: int = 60,
        device: str | torch.device = "cpu",
    ) -> None:
        self.drift_prob = _checks.real("drift_prob", drift_prob, low=0.0, high=1.0)
        _checks.integer("num_envs", num_envs, low=1)
        _checks.real("step_size", step_size, low=0.0, low_open=True)
        _checks.real("goal_radius", goal_radius, low=0.0, low_open=True)
        _checks.integer("max_episode_steps", max_episode_steps, low=1)
        if isinstance(maze, (str, bytes)) or not isinstance(maze, Sequence):
            raise TypeError(f"maze must be a sequence of strings, got {type(maze).__name__}")
        self.maze = tuple(maze)
        super().__init__(num_envs, maze, reward=reward, step_size=step_size, goal_radius=goal_radius,
                         max_episode_steps=max_episode_steps, device=device)  # fmt: skip

    def drift(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actions the world applies: each row replaced by a random unit step with probability ``drift_prob``."""
        a = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        if self.drift_prob == 0.0:
            return a, torch.zeros(a.shape[0], dtype=torch.bool, device=self.device)
        coin = torch.rand(a.shape[0], generator=self.generator, device=self.device) < self.drift_prob
        theta = torch.rand(a.shape[0], generator=self.generator, device=self.device) * (2 * np.pi)
        d = torch.stack([torch.cos(theta), torch.sin(theta)], dim=1)
        return torch.where(coin[:, None], d, a), coin

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        if a.shape != (self.num_envs, 2):
            raise ValueError(f"actions must have shape ({self.num_envs}, 2), got {tuple(a.shape)}")
        applied, coin = self.drift(a)
        out = super().step(applied)
        out[4]["drifted"] = coin
        return out

    def to_obs(self, pos: torch.Tensor) -> torch.Tensor:
        """Maze coordinates (row, col) to observations in ``[-1, 1]^2``."""
        return self._obs(pos)

    def to_pos(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations back to maze coordinates."""
        return (obs + 1.0) / 2.0 * self.size

    @property
    def goal_obs(self) -> torch.Tensor:
        """The task goal as an observation ``(2,)``."""
        return self._obs(self.goal[None])[0]

    @property
    def max_obs_step(self) -> float:
        """The largest displacement of one step in observation units along one axis (``2 step / size``)."""
        return float(2.0 * self.step_size / self.size.min())


class MazeRoutes:
    """Breadth-first shortest-path routing between every pair of free cells of a maze.

    ``cells`` ``(C, 2)`` are the free cells (row, col); ``next_cell[g, c]`` is the index of the neighbour of
    cell ``c`` on a shortest path to cell ``g`` (``c`` itself when ``c == g``); ``dist[g, c]`` the path length;
    ``index`` maps the grid to cell indices (-1 on walls).
    """

    def __init__(self, cells: np.ndarray, next_cell: np.ndarray, dist: np.ndarray, index: np.ndarray) -> None:
        self.cells, self.next_cell, self.dist, self.index = cells, next_cell, dist, index

    def cell_of(self, pos: torch.Tensor) -> torch.Tensor:
        """Cell index of each position ``(B, 2)`` (maze coordinates)."""
        cell = pos.floor().long()
        r = cell[:, 0].clamp(0, self.index.shape[0] - 1)
        c = cell[:, 1].clamp(0, self.index.shape[1] - 1)
        return torch.as_tensor(self.index)[r, c]


def maze_routes(maze: Sequence[str] = MAZE_SINGLE_GOAL) -> MazeRoutes:
    """BFS from every free cell of ``maze`` (4-connected moves of :data:`icml24.rl.envs.mazes.MOVES`)."""
    if isinstance(maze, (str, bytes)) or not isinstance(maze, Sequence):
        raise TypeError(f"maze must be a sequence of strings, got {type(maze).__name__}")
    info = parse_maze(maze)
    free = info["free"]
    cells = np.argwhere(free)
    index = np.full(free.shape, -1, dtype=np.int64)
    index[cells[:, 0], cells[:, 1]] = np.arange(len(cells))
    C = len(cells)
    dist = np.full((C, C), -1, dtype=np.int64)
    nxt = np.tile(np.arange(C), (C, 1))
    for g in range(C):
        dist[g, g] = 0
        q = deque([g])
        while q:
            u = q.popleft()
            r, c = cells[u]
            for dr, dc in MOVES:
                v = index[r + dr, c + dc] if 0 <= r + dr < free.shape[0] and 0 <= c + dc < free.shape[1] else -1
                if v >= 0 and dist[g, v] < 0:
                    dist[g, v] = dist[g, u] + 1
                    nxt[g, v] = u  # from v, step to u (one closer to g)
                    q.append(v)
    return MazeRoutes(cells, nxt, dist, index)


def scripted_actions(
    pos: torch.Tensor, goal_cells: torch.Tensor, routes: MazeRoutes, *, noise: float, generator: torch.Generator
) -> torch.Tensor:
    """The scripted navigator: a unit step towards the centre of the next cell on a shortest path to the goal cell.

    In the goal cell it heads for the goal cell's centre (and slows down there, so it stays). Gaussian noise of
    std ``noise`` is added per coordinate and the action clipped to ``[-1, 1]^2``.
    """
    noise = _checks.real("noise", noise, low=0.0)
    if not isinstance(routes, MazeRoutes):
        raise TypeError(f"routes must be a MazeRoutes (from maze_routes), got {type(routes).__name__}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    _checks.finite_tensor("pos", pos)
    if pos.ndim != 2 or pos.shape[1] != 2:
        raise ValueError(f"pos must have shape (batch, 2), got {tuple(pos.shape)}")
    _checks.tensor("goal_cells", goal_cells)
    if goal_cells.shape != (pos.shape[0],) or goal_cells.is_floating_point():
        raise ValueError(f"goal_cells must be an int tensor of shape ({pos.shape[0]},), got {tuple(goal_cells.shape)}")
    if bool((goal_cells < 0).any()) or bool((goal_cells >= len(routes.cells)).any()):
        raise ValueError(f"goal_cells must be cell indices in [0, {len(routes.cells)})")
    cell = routes.cell_of(pos)
    nxt = torch.as_tensor(routes.next_cell)[goal_cells, cell]
    target = torch.as_tensor(routes.cells, dtype=torch.float32)[nxt] + 0.5
    d = target - pos
    norm = d.norm(dim=1, keepdim=True)
    a = d / norm.clamp_min(1.0)  # unit speed when a cell or more away; proportional (so it settles) nearer
    a = a + noise * torch.randn(a.shape, generator=generator)
    return a.clamp(-1.0, 1.0)


def collect_passive_data(
    *,
    n_trajectories: int,
    horizon: int,
    drift_prob: float = 0.0,
    noise: float = 0.3,
    exclude_cells: Sequence[tuple[int, int]] = (),
    maze: Sequence[str] = MAZE_SINGLE_GOAL,
    step_size: float = 0.5,
    seed: int = 0,
) -> StateDataset:
    """Action-free trajectories of the scripted navigator, as a :class:`icml24.rl.offline.StateDataset`.

    ``n_trajectories`` rollouts of ``horizon`` steps from a uniformly random point of a random free cell to a
    random other cell, in the world with ``drift_prob``; states are observations in ``[-1, 1]^2``, stored
    trajectory after trajectory (``steps`` restarts at 0), so ``states[i + k]`` is ``k`` steps after
    ``states[i]`` while ``steps`` increases. Trajectories entering any of ``exclude_cells`` are dropped and
    replaced by new draws (the coverage gap). The actions are never stored.
    """
    n_trajectories = _checks.integer("n_trajectories", n_trajectories, low=1)
    horizon = _checks.integer("horizon", horizon, low=2)
    seed = _checks.integer("seed", seed, low=0)
    _checks.real("noise", noise, low=0.0)
    if isinstance(exclude_cells, (str, bytes)) or not isinstance(exclude_cells, Sequence):
        raise TypeError(f"exclude_cells must be a sequence of (row, col) cells, got {type(exclude_cells).__name__}")
    routes = maze_routes(maze)
    excl = []
    for rc in exclude_cells:
        if not (isinstance(rc, Sequence) and len(rc) == 2) or routes.index[int(rc[0]), int(rc[1])] < 0:
            raise ValueError(f"exclude_cells must hold free (row, col) cells of the maze, got {rc!r}")
        excl.append(int(routes.index[int(rc[0]), int(rc[1])]))
    env = DriftPointMazeVecEnv(1, maze, drift_prob=drift_prob, step_size=step_size)
    gen = torch.Generator().manual_seed(seed)
    env.generator.manual_seed(seed + 1)
    C = len(routes.cells)
    kept: list[torch.Tensor] = []
    n_kept, rounds = 0, 0
    while n_kept < n_trajectories:
        rounds += 1
        if rounds > 50:
            raise ValueError("exclude_cells leave too few trajectories; exclude fewer cells")
        B = 2 * (n_trajectories - n_kept) + 8
        env.num_envs = B
        start = torch.randint(C, (B,), generator=gen)
        goal = (start + 1 + torch.randint(C - 1, (B,), generator=gen)) % C
        pos = torch.as_tensor(routes.cells, dtype=torch.float32)[start] + 0.2 + 0.6 * torch.rand((B, 2), generator=gen)
        traj = [pos]
        for _ in range(horizon - 1):
            a = scripted_actions(pos, goal, routes, noise=noise, generator=gen)
            applied, _ = env.drift(a)
            pos = env.move(pos, applied)
            traj.append(pos)
        T = torch.stack(traj, dim=1)  # (B, horizon, 2)
        visited = routes.cell_of(T.reshape(-1, 2)).reshape(B, horizon)
        ok = ~torch.isin(visited, torch.tensor(excl, dtype=torch.long)).any(dim=1) if excl else torch.ones(B, dtype=torch.bool)
        T = T[ok][: n_trajectories - n_kept]
        kept.append(T)
        n_kept += len(T)
    pos_all = torch.cat(kept)  # (n, horizon, 2)
    obs = env.to_obs(pos_all.reshape(-1, 2)).reshape(n_trajectories, horizon, 2).numpy().astype(np.float64)
    states = obs[:, :-1].reshape(-1, 2)
    next_states = obs[:, 1:].reshape(-1, 2)
    steps = np.tile(np.arange(horizon - 1), n_trajectories)
    return StateDataset(states=states, next_states=next_states, steps=steps)


def trajectory_index(data: StateDataset) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a trajectory-ordered :class:`StateDataset`: its trajectory id and the index of the
    trajectory's last row (a new trajectory starts where ``steps`` does not increase by one)."""
    if not isinstance(data, StateDataset):
        raise TypeError(f"data must be a StateDataset, got {type(data).__name__}")
    t = np.asarray(data.steps)
    new = np.ones(len(t), dtype=bool)
    new[1:] = t[1:] != t[:-1] + 1
    traj = np.cumsum(new) - 1
    last = np.zeros(len(t), dtype=np.int64)
    ends = np.r_[np.flatnonzero(new)[1:] - 1, len(t) - 1]
    last[:] = ends[traj]
    return traj, last

