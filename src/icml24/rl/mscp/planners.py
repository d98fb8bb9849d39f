"""MSCP's state-centric planners and inverse dynamics model (Wu et al., ICML 2024, "Planning, Fast and Slow").

The two planners of Multiscale State-Centric Planners work in *state* space and are pre-trained on action-free
offline data (abstract):

* the **slow planner** ``pi_slow(s, g) -> s_hat_{t+H}`` proposes a subgoal ``H`` steps ahead on the way to the
  goal ``g`` (long-term objective);
* the **fast planner** ``pi_fast(s, s_sub) -> s_hat_{t+1}`` proposes the next state on the way to the subgoal
  (immediate objective). It is an ensemble: the spread of its members measures how far a state is from the
  offline data, and MSCP's *pessimistic regularisation* trusts its proposal less where the spread is large
  (the distribution shift between offline and online states);
* the **inverse dynamics model** ``IDM(s, s') -> a``, learned from the agent's own online transitions, turns a
  proposed next state into an action. It is only as good as the dynamics are identifiable: when a drift the
  action does not control can produce the same ``(s, s')``, the IDM regresses to an average action.

Training is hindsight relabelling on the passive trajectories (our reconstruction: the paper's text was not
available to us): for a state ``s_t`` the goal is a later state ``s_j`` of the same trajectory, the slow
planner's target is ``s_{min(t+H, j)}``; the fast planner's condition is a state ``k <= H`` steps ahead and its
target ``s_{t+1}``. Displacements are clipped to what the dynamics allow (``H`` steps, one step), so a subgoal
is never farther than ``H * max_step`` in any axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml24.rl import _checks
from icml24.rl.mscp.data import trajectory_index
from icml24.rl.offline import StateDataset
from icml24.rl.value.networks import mlp

__all__ = [
    "FastPlanner",
    "InverseDynamicsModel",
    "PlannerConfig",
    "SlowPlanner",
    "hindsight_batch",
    "pessimism_weight",
    "pretrain_planners",
]


def _hidden(name: str, hidden: object) -> tuple[int, ...]:
    if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence) or len(hidden) == 0:
        raise TypeError(f"{name} must be a non-empty sequence of layer widths, got {hidden!r}")
    return tuple(_checks.integer(f"{name}[{i}]", h, low=1) for i, h in enumerate(hidden))


def _clip_box(delta: torch.Tensor, bound: float) -> torch.Tensor:
    """A displacement squashed into ``[-bound, bound]`` per axis (smoothly: ``bound * tanh(x / bound)``)."""
    return bound * torch.tanh(delta / bound)


def _pair(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor, dim: int) -> None:
    for name, t in ((name_a, a), (name_b, b)):
        _checks.finite_tensor(name, t)
        if t.ndim != 2 or t.shape[1] != dim:
            raise ValueError(f"{name} must have shape (batch, {dim}), got {tuple(t.shape)}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{name_a} and {name_b} must have the same batch size, got {a.shape[0]} and {b.shape[0]}")


class SlowPlanner(nn.Module):
    """``pi_slow(s, g) = s + H m tanh(f(s, g) / (H m))``: a subgoal at most ``H`` steps of size ``m`` away per axis.

    Args:
        state_dim: size of a state.
        horizon: ``H``, the subgoal horizon in env steps.
        max_step: ``m``, the largest per-axis displacement of one step (state units).
        hidden: hidden widths of the MLP ``f``.
    """

    def __init__(self, *, state_dim: int = 2, horizon: int = 6, max_step: float = 0.125,
                 hidden: Sequence[int] = (64, 64)) -> None:  # fmt: skip
        super().__init__()
        self.state_dim = _checks.integer("state_dim", state_dim, low=1)
        self.horizon = _checks.integer("horizon", horizon, low=1)
        self.max_step = _checks.real("max_step", max_step, low=0.0, low_open=True)
        self.net = mlp(2 * self.state_dim, _hidden("hidden", hidden), self.state_dim)

    def forward(self, state: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        _pair("state", state, "goal", goal, self.state_dim)
        raw = self.net(torch.cat([state, goal - state], dim=1))
        return state + _clip_box(raw, self.horizon * self.max_step)


class FastPlanner(nn.Module):
    """An ensemble of ``K`` next-state proposers ``s + m tanh(f_k(s, s_sub) / m)``; returns mean and spread.

    :meth:`forward` gives the ensemble mean ``(B, d)`` and its disagreement ``u(s, s_sub)`` ``(B,)`` (the root
    mean square over coordinates of the members' standard deviation), the uncertainty MSCP's pessimism uses.
    """

    def __init__(self, *, state_dim: int = 2, max_step: float = 0.125, ensemble: int = 5,
                 hidden: Sequence[int] = (64, 64)) -> None:  # fmt: skip
        super().__init__()
        self.state_dim = _checks.integer("state_dim", state_dim, low=1)
        self.max_step = _checks.real("max_step", max_step, low=0.0, low_open=True)
        self.ensemble = _checks.integer("ensemble", ensemble, low=2)
        h = _hidden("hidden", hidden)
        self.members = nn.ModuleList([mlp(2 * self.state_dim, h, self.state_dim) for _ in range(self.ensemble)])

    def members_forward(self, state: torch.Tensor, subgoal: torch.Tensor) -> torch.Tensor:
        """Every member's proposal, ``(K, B, d)``."""
        _pair("state", state, "subgoal", subgoal, self.state_dim)
        x = torch.cat([state, subgoal - state], dim=1)
        return torch.stack([state + _clip_box(m(x), self.max_step) for m in self.members])

    def forward(self, state: torch.Tensor, subgoal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        props = self.members_forward(state, subgoal)
        return props.mean(0), props.std(0).pow(2).mean(-1).sqrt()


class InverseDynamicsModel(nn.Module):
    """``IDM(s, s') = tanh(f(s, (s' - s) / m))``: the action that moves ``s`` to ``s'`` (actions in ``[-1, 1]^k``)."""

    def __init__(self, *, state_dim: int = 2, action_dim: int = 2, max_step: float = 0.125,
                 hidden: Sequence[int] = (64, 64)) -> None:  # fmt: skip
        super().__init__()
        self.state_dim = _checks.integer("state_dim", state_dim, low=1)
        self.action_dim = _checks.integer("action_dim", action_dim, low=1)
        self.max_step = _checks.real("max_step", max_step, low=0.0, low_open=True)
        self.net = mlp(2 * self.state_dim, _hidden("hidden", hidden), self.action_dim)

    def forward(self, state: torch.Tensor, next_state: torch.Tensor) -> torch.Tensor:
        _pair("state", state, "next_state", next_state, self.state_dim)
        return torch.tanh(self.net(torch.cat([state, (next_state - state) / self.max_step], dim=1)))


def pessimism_weight(uncertainty: torch.Tensor, *, beta: float, scale: float) -> torch.Tensor:
    """MSCP's pessimistic trust in the fast planner: ``w = exp(-beta * max(0, u / u_0 - 1))`` in ``(0, 1]``.

    ``u_0 = scale`` is a high quantile of the ensemble spread on the offline data, so a proposal inside the data's
    support keeps full weight and one outside it is discounted the more the members disagree. ``beta = 0``
    trusts every proposal (no pessimism); ``beta -> inf`` drops every proposal whose spread exceeds ``u_0``
    (guidance only on the data's support; off it MSCP falls back to subgoal-conditioned RL).
    """
    _checks.finite_tensor("uncertainty", uncertainty)
    beta = _checks.real("beta", beta, low=0.0)
    scale = _checks.real("scale", scale, low=0.0, low_open=True)
    if bool((uncertainty < 0).any()):
        raise ValueError("uncertainty must be >= 0")
    if beta == 0.0:
        return torch.ones_like(uncertainty)
    return torch.exp(-beta * torch.relu(uncertainty / scale - 1.0))


@dataclass(frozen=True)
class PlannerConfig:
    """Pre-training of the slow and fast planners on passive data (our choices; the paper's were not available)."""

    horizon: int = 6
    """``H``: the slow planner's subgoal horizon (env steps), also the longest lookahead of the fast planner's
    condition."""
    ensemble: int = 5
    """Members of the fast planner's ensemble (its spread is the pessimism signal)."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of every planner network."""
    steps: int = 800
    """Adam steps of the planners."""
    batch_size: int = 256
    """Minibatch size."""
    lr: float = 1e-3
    """Adam learning rate."""

    def __post_init__(self) -> None:
        _checks.integer("horizon", self.horizon, low=1)
        _checks.integer("ensemble", self.ensemble, low=2)
        _hidden("hidden", self.hidden)
        _checks.integer("steps", self.steps, low=1)
        _checks.integer("batch_size", self.batch_size, low=1)
        _checks.real("lr", self.lr, low=0.0, low_open=True)


def hindsight_batch(data: StateDataset, horizon: int, size: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """A hindsight-relabelled minibatch of passive data (states only; the dataset has no actions to read).

    Keys: ``state`` ``s_t``; ``goal`` ``s_j`` with ``j`` uniform in ``(t, T]`` (``T`` the trajectory's last
    state); ``subgoal`` ``s_{min(t + H, j)}`` (the slow planner's target); ``condition`` ``s_{t+k}`` with ``k``
    uniform in ``1..min(H, T - t)`` and ``next`` ``s_{t+1}`` (the fast planner's input and target).
    """
    if not isinstance(data, StateDataset):
        raise TypeError(f"data must be a StateDataset, got {type(data).__name__}")
    horizon = _checks.integer("horizon", horizon, low=1)
    size = _checks.integer("size", size, low=1)
    return _hindsight(data, trajectory_index(data)[1], horizon, size, rng)


def _hindsight(data: StateDataset, last: np.ndarray, horizon: int, size: int,
               rng: np.random.Generator) -> dict[str, torch.Tensor]:  # fmt: skip
    """:func:`hindsight_batch` with the trajectories' last rows precomputed."""
    # position p of a trajectory holds state(p) = next_states[p - 1] for p > its first row (so the final state,
    # next_states[last], sits at position last + 1)
    i = rng.integers(0, len(data.states), size)
    end = last[i] + 1
    j = i + 1 + (rng.random(size) * (end - i)).astype(np.int64)  # in (i, end]
    sub = np.minimum(i + horizon, j)
    k = i + 1 + (rng.random(size) * np.minimum(horizon, end - i)).astype(np.int64)

    def state_at(idx: np.ndarray) -> np.ndarray:
        return data.next_states[idx - 1]

    out = {"state": data.states[i], "goal": state_at(j), "subgoal": state_at(sub), "condition": state_at(k),
           "next": data.next_states[i]}  # fmt: skip
    return {key: torch.as_tensor(v, dtype=torch.float32) for key, v in out.items()}


def pretrain_planners(
    data: StateDataset, *, max_step: float, config: PlannerConfig = PlannerConfig(), seed: int = 0  # noqa: B008
) -> tuple[SlowPlanner, FastPlanner, float]:
    """Fit the slow and fast planners on passive data by hindsight regression (mean squared error).

    Every fast-planner member sees its own minibatches (a bootstrap-free ensemble: the members differ by
    initialisation and data order, as in deep ensembles). Returns the two planners (in eval mode, frozen) and
    the 90% quantile of the ensemble spread on the training data (the ``scale`` of :func:`pessimism_weight`).
    """
    if not isinstance(data, StateDataset):
        raise TypeError(f"data must be a StateDataset, got {type(data).__name__}")
    if not isinstance(config, PlannerConfig):
        raise TypeError(f"config must be a PlannerConfig, got {type(config).__name__}")
    max_step = _checks.real("max_step", max_step, low=0.0, low_open=True)
    seed = _checks.integer("seed", seed, low=0)
    if data.states.ndim != 2:
        raise ValueError(f"data.states must be (N, d) vectors, got shape {data.states.shape}")
    d = data.states.shape[1]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    slow = SlowPlanner(state_dim=d, horizon=config.horizon, max_step=max_step, hidden=config.hidden)
    fast = FastPlanner(state_dim=d, max_step=max_step, ensemble=config.ensemble, hidden=config.hidden)
    opt = torch.optim.Adam([*slow.parameters(), *fast.parameters()], lr=config.lr)
    _, last = trajectory_index(data)
    K, B = config.ensemble, config.batch_size
    for _ in range(config.steps):
        big = _hindsight(data, last, config.horizon, K * B, rng)  # one draw, split among the members
        b = {k: v[:B] for k, v in big.items()}
        # both losses in units of the largest displacement each planner can propose (so they weigh alike)
        loss = (slow(b["state"], b["goal"]) - b["subgoal"]).pow(2).sum(-1).mean() / (config.horizon * max_step) ** 2
        bs = [{k: v[i * B : (i + 1) * B] for k, v in big.items()} for i in range(K)]
        for m, bk in zip(fast.members, bs, strict=True):
            x = torch.cat([bk["state"], bk["condition"] - bk["state"]], dim=1)
            pred = bk["state"] + _clip_box(m(x), max_step)
            loss = loss + (pred - bk["next"]).pow(2).sum(-1).mean() / max_step**2
        opt.zero_grad()
        loss.backward()
        opt.step()
    for p in [*slow.parameters(), *fast.parameters()]:
        p.requires_grad_(False)
    slow.eval()
    fast.eval()
    with torch.no_grad():
        b = _hindsight(data, last, config.horizon, 2048, rng)
        _, u = fast(b["state"], b["condition"])
    return slow, fast, float(u.quantile(0.9).clamp_min(1e-6))
