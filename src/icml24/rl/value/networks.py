"""Q-networks over discrete (or discretised continuous) actions, and the action grid.

Two ways to score actions:

* :class:`StateActionQNetwork` is the architecture of Stochastic Q-learning (Fourati et al., ICML 2024): an MLP
  takes the state *and an action vector* and returns one scalar, Q(s, a). Scoring a candidate set C costs
  ``|C|`` forward rows per state, so the cost of ``max_a Q(s, a)`` is linear in the number of actions ``n``.
  Every evaluated (s, a) pair is counted in ``evaluations`` (the paper's cost model).
* :class:`StateQNetwork` is the usual DQN head Q(s) -> R^n: one forward pass scores all actions, so restricting
  the max to a candidate set saves nothing but the final gather.

Both expose ``q_candidates(obs, candidates)`` (candidate action *indices*, shared by the batch or one row each),
which is what the DQN update and the greedy policy call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int, activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """A plain MLP ``in -> hidden... -> out`` with the given activation between layers."""
    dims = [in_dim, *hidden]
    layers: list[nn.Module] = []
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        layers += [nn.Linear(a, b), activation()]
    layers.append(nn.Linear(dims[-1], out_dim))
    return nn.Sequential(*layers)


class ActionGrid:
    """The Cartesian grid of ``levels`` evenly spaced values per action dimension of a box ``[low, high]``.

    ``n = levels ** d`` actions, indexed in mixed radix with the last dimension varying fastest (as the
    official StochDQN ``index_to_action``). The network sees the grid normalised to ``[-1, 1]`` per dimension
    (``normalized``); the environment gets the rescaled action (``index_to_action``).
    """

    def __init__(self, low: Sequence[float] | np.ndarray, high: Sequence[float] | np.ndarray, levels: int) -> None:
        low_a = np.atleast_1d(np.asarray(low, dtype=np.float64))
        high_a = np.atleast_1d(np.asarray(high, dtype=np.float64))
        if low_a.shape != high_a.shape or low_a.ndim != 1:
            raise ValueError(f"low and high must be 1-d of the same shape, got {low_a.shape} and {high_a.shape}")
        if not np.all(np.isfinite(low_a)) or not np.all(np.isfinite(high_a)) or np.any(high_a <= low_a):
            raise ValueError("low and high must be finite with high > low in every dimension")
        if not isinstance(levels, (int, np.integer)) or levels < 2:
            raise ValueError(f"levels must be an int >= 2, got {levels!r}")
        self.low, self.high, self.levels = low_a, high_a, int(levels)
        self.dim = low_a.size
        self.n = self.levels**self.dim
        self._unit = np.linspace(-1.0, 1.0, self.levels)

    def digits(self, index: np.ndarray | int) -> np.ndarray:
        """Per-dimension level indices of flat action indices, shape ``(..., d)``."""
        idx = np.asarray(index, dtype=np.int64)
        if np.any(idx < 0) or np.any(idx >= self.n):
            raise ValueError(f"action index must be in [0, {self.n}), got min {idx.min()} max {idx.max()}")
        powers = self.levels ** np.arange(self.dim - 1, -1, -1)
        return (idx[..., None] // powers) % self.levels

    def normalized(self, index: np.ndarray | int) -> np.ndarray:
        """Grid points in ``[-1, 1]^d`` (the network's action input)."""
        return self._unit[self.digits(index)]

    def index_to_action(self, index: np.ndarray | int) -> np.ndarray:
        """Grid points rescaled to the env's box ``[low, high]``; endpoints map to ``low`` and ``high`` exactly."""
        u = self.normalized(index)
        return self.low + (u + 1.0) * 0.5 * (self.high - self.low)

    def action_to_index(self, action: np.ndarray) -> np.ndarray:
        """The index of the nearest grid point (inverse of :meth:`index_to_action` on the grid)."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape[-1] != self.dim:
            raise ValueError(f"action must have last dimension {self.dim}, got shape {a.shape}")
        u = (a - self.low) / (self.high - self.low) * (self.levels - 1)
        digits = np.clip(np.rint(u), 0, self.levels - 1).astype(np.int64)
        powers = self.levels ** np.arange(self.dim - 1, -1, -1)
        return (digits * powers).sum(-1)

    def table(self) -> np.ndarray:
        """All ``n`` normalised grid points, shape ``(n, d)``."""
        return self.normalized(np.arange(self.n))


class _CountingQ(nn.Module):
    """Base: counts the (state, action) pairs scored, the unit of the paper's cost model."""

    n_actions: int

    def __init__(self) -> None:
        super().__init__()
        self.evaluations = 0

    def _check(self, obs: torch.Tensor, candidates: torch.Tensor) -> None:
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs must have shape (batch, {self.obs_dim}), got {tuple(obs.shape)}")
        if candidates.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"candidates must be an integer tensor of action indices, got {candidates.dtype}")
        if candidates.ndim == 2 and candidates.shape[0] != obs.shape[0]:
            raise ValueError(f"per-row candidates must have {obs.shape[0]} rows, got {candidates.shape[0]}")
        if candidates.ndim not in (1, 2):
            raise ValueError(f"candidates must be 1-d (shared) or 2-d (per row), got {candidates.ndim}-d")


class StateActionQNetwork(_CountingQ):
    """Q(s, a_vec) -> scalar: an MLP on the concatenation of the observation and the action's grid vector.

    Args:
        obs_dim: observation size.
        action_table: ``(n, d)`` action vectors (e.g. ``ActionGrid.table()``), the network's action input.
        hidden: hidden layer widths (paper code: two layers of 64).
    """

    def __init__(self, *, obs_dim: int, action_table: np.ndarray | torch.Tensor, hidden: Sequence[int] = (64, 64)):
        super().__init__()
        arr = np.asarray(action_table)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"action_table must hold numbers, got dtype {arr.dtype}")
        table = torch.as_tensor(arr, dtype=torch.float32)
        if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
            raise ValueError(f"action_table must be (n, d) with n, d >= 1, got shape {tuple(table.shape)}")
        if not bool(torch.isfinite(table).all()):
            raise ValueError("action_table must be finite")
        if isinstance(obs_dim, bool) or not isinstance(obs_dim, (int, np.integer)) or obs_dim < 1:
            raise ValueError(f"obs_dim must be a positive int, got {obs_dim!r}")
        self.obs_dim = int(obs_dim)
        self.n_actions = table.shape[0]
        self.register_buffer("action_table", table)
        self.net = mlp(self.obs_dim + table.shape[1], hidden, 1)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q of one action index per row: ``(B, obs_dim), (B,) -> (B,)``."""
        self._check(obs, actions[:, None])
        self.evaluations += obs.shape[0]
        return self.net(torch.cat([obs, self.action_table[actions]], dim=1)).squeeze(-1)

    def q_candidates(self, obs: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Q of every candidate, batched into one forward pass of ``B * K`` rows: -> ``(B, K)``."""
        self._check(obs, candidates)
        b = obs.shape[0]
        k = candidates.shape[-1]
        acts = self.action_table[candidates]
        acts = acts.expand(b, k, acts.shape[-1]) if candidates.ndim == 1 else acts
        x = torch.cat([obs[:, None, :].expand(b, k, self.obs_dim), acts], dim=2)
        self.evaluations += b * k
        return self.net(x).squeeze(-1)

    def q_candidates_looped(self, obs: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """The same values with one forward pass per candidate action, the official code's cost model."""
        self._check(obs, candidates)
        if candidates.ndim != 1:
            raise ValueError("the looped evaluation takes a candidate set shared by the batch (1-d)")
        cols = []
        for a in candidates.tolist():
            x = torch.cat([obs, self.action_table[a].expand(obs.shape[0], -1)], dim=1)
            cols.append(self.net(x).squeeze(-1))
        self.evaluations += obs.shape[0] * candidates.shape[0]
        return torch.stack(cols, dim=1)


class StateQNetwork(_CountingQ):
    """The standard DQN head Q(s) -> R^n; candidate sets only select columns of one forward pass."""

    def __init__(self, *, obs_dim: int, n_actions: int, hidden: Sequence[int] = (64, 64)):
        super().__init__()
        if isinstance(n_actions, bool) or not isinstance(n_actions, (int, np.integer)) or n_actions < 1:
            raise ValueError(f"n_actions must be a positive int, got {n_actions!r}")
        if isinstance(obs_dim, bool) or not isinstance(obs_dim, (int, np.integer)) or obs_dim < 1:
            raise ValueError(f"obs_dim must be a positive int, got {obs_dim!r}")
        self.obs_dim = int(obs_dim)
        self.n_actions = int(n_actions)
        self.net = mlp(self.obs_dim, hidden, self.n_actions)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        self._check(obs, actions[:, None])
        self.evaluations += obs.shape[0] * self.n_actions
        return self.net(obs).gather(1, actions[:, None]).squeeze(-1)

    def q_candidates(self, obs: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        self._check(obs, candidates)
        self.evaluations += obs.shape[0] * self.n_actions
        q = self.net(obs)
        if candidates.ndim == 1:
            return q[:, candidates]
        return q.gather(1, candidates)

    q_candidates_looped = q_candidates
