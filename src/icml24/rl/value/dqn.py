"""DQN and Double DQN over a candidate set of actions (exact = all actions).

The Bellman target of DQN (Mnih et al., 2015) is ``r + gamma (1 - terminated) max_b Q_targ(s', b)``; Double
DQN (van Hasselt et al., 2016) selects ``b* = argmax_b Q(s', b)`` with the online network and evaluates
``Q_targ(s', b*)``. Here both maxima range over a *candidate set* ``C`` returned by a
:class:`CandidateSampler`: :class:`AllActions` (``C = A``) gives exact DQN/DDQN, the stochastic sampler of
:mod:`icml24.rl.stochastic_q` gives StochDQN/StochDDQN. The candidate set is shared by the minibatch, as in
the official StochDQN code, so one update scores ``batch * |C|`` (s, a) pairs with a Q(s, a)-input network.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import nn

from icml24.rl.value.networks import StateActionQNetwork, StateQNetwork
from icml24.rl.value.replay import ReplayBuffer
from icml24.rl.value.tabular import check_gamma, check_int


class CandidateSampler(Protocol):
    """``(n_actions, memory actions or None, generator) -> candidate action indices (K,)``."""

    def __call__(self, n_actions: int, memory: torch.Tensor | None, generator: torch.Generator) -> torch.Tensor: ...


class AllActions:
    """The exact maximisation: every action is a candidate (no randomness consumed)."""

    def __call__(self, n_actions: int, memory: torch.Tensor | None, generator: torch.Generator) -> torch.Tensor:
        return torch.arange(n_actions)


def default_batch_size(n_actions: int) -> int:
    """The official StochDQN minibatch: ``2 * round(log2 n)`` (at least 2)."""
    return max(2, 2 * round(math.log2(max(n_actions, 2))))


@dataclass(frozen=True)
class DQNConfig:
    """Hyper-parameters of (Stoch)DQN / (Stoch)DDQN; defaults from the official StochDQN code."""

    gamma: float = 0.99
    """Discount factor."""
    lr: float = 1e-3
    """Adam learning rate."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the Q-network."""
    batch_size: int | None = None
    """Minibatch size; ``None`` = ``2 round(log2 n)`` as in the official code."""
    buffer_size: int = 10_000
    """Replay capacity (the official script uses ``2 * batch``, a near-online FIFO; see the README)."""
    epsilon_start: float = 1.0
    """Initial exploration rate."""
    epsilon_decay: float = 0.995
    """Multiplicative decay of epsilon after every gradient step."""
    epsilon_min: float = 0.01
    """Floor of epsilon."""
    target_update_every: int = 100
    """Copy the online network into the target network every this many gradient steps: the periodic hard
    update of DQN (Mnih et al., 2015) and Double DQN (van Hasselt et al., 2016), on which the paper builds
    StochDQN/StochDDQN. 100 = once per 100-step episode of the paper's deep runs. The released StochDQN script
    copies after *every* env step (1); then the target network equals the online one at every update, so DQN
    and Double DQN (and StochDQN and StochDDQN) compute the same targets bit for bit."""
    double: bool = False
    """Double DQN: online network selects, target network evaluates."""
    network: str = "state_action"
    """``"state_action"``: Q(s, a_vec) -> R (the paper's); ``"state"``: Q(s) -> R^n (the usual DQN head)."""
    looped: bool = False
    """Score candidates with one forward pass per action (the official code) instead of one batched pass."""

    def __post_init__(self) -> None:
        check_gamma(self.gamma)
        if self.network not in ("state_action", "state"):
            raise ValueError(f"network must be 'state_action' or 'state', got {self.network!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        for name in ("epsilon_start", "epsilon_min"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0.0 < self.epsilon_decay <= 1.0:
            raise ValueError(f"epsilon_decay must be in (0, 1], got {self.epsilon_decay}")
        if isinstance(self.target_update_every, bool) or not isinstance(self.target_update_every, int) or self.target_update_every < 1:
            raise ValueError(f"target_update_every must be a positive int, got {self.target_update_every!r}")


class DQNAgent:
    """DQN / Double DQN whose maximisations range over a sampled candidate set.

    Args:
        obs_dim: observation size.
        action_table: ``(n, d)`` action vectors for the Q(s, a) network, or an int ``n`` for the Q(s) head.
        config: :class:`DQNConfig`.
        candidates: the candidate sampler (default :class:`AllActions`, i.e. exact DQN/DDQN).
        seed: seeds the network initialisation, the replay sampling, exploration and the candidates.
    """

    def __init__(
        self,
        *,
        obs_dim: int,
        action_table: np.ndarray | int,
        config: DQNConfig = DQNConfig(),  # noqa: B008 - frozen dataclass
        candidates: CandidateSampler | None = None,
        seed: int = 0,
    ) -> None:
        if not isinstance(config, DQNConfig):
            raise TypeError(f"config must be a DQNConfig, got {type(config).__name__}")
        obs_dim = check_int("obs_dim", obs_dim, 1)
        seed = check_int("seed", seed, 0)
        self.config = config
        self.candidates = candidates if candidates is not None else AllActions()
        self.generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)  # network init draws from the global generator
        self.rng = np.random.default_rng(seed)
        if config.network == "state_action":
            if isinstance(action_table, int):
                raise TypeError("network='state_action' needs an (n, d) action_table, got an int")
            self.q: StateActionQNetwork | StateQNetwork = StateActionQNetwork(
                obs_dim=obs_dim, action_table=action_table, hidden=config.hidden
            )
        else:
            n = check_int("action_table", action_table, 1) if isinstance(action_table, (int, np.integer)) else len(
                action_table
            )
            self.q = StateQNetwork(obs_dim=obs_dim, n_actions=n, hidden=config.hidden)
        self.obs_dim = obs_dim
        self.n_actions = self.q.n_actions
        self.q_target = copy.deepcopy(self.q)
        self.q_target.evaluations = 0
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=config.lr)
        self.batch_size = config.batch_size or default_batch_size(self.n_actions)
        self.buffer = ReplayBuffer(
            capacity=config.buffer_size,
            fields={
                "obs": ((obs_dim,), torch.float32),
                "action": ((), torch.int64),
                "reward": ((), torch.float32),
                "next_obs": ((obs_dim,), torch.float32),
                "terminated": ((), torch.float32),
            },
        )
        self.epsilon = config.epsilon_start
        self.updates = 0
        self._memory: torch.Tensor | None = None

    @property
    def evaluations(self) -> int:
        """(state, action) pairs scored so far by the online and target networks together."""
        return self.q.evaluations + self.q_target.evaluations

    def _score(self, net: nn.Module, obs: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        return net.q_candidates_looped(obs, cand) if self.config.looped else net.q_candidates(obs, cand)

    @torch.no_grad()
    def greedy(self, obs: np.ndarray | torch.Tensor) -> np.ndarray:
        """(Stochastic) argmax of the online Q over a fresh candidate set, one action per row."""
        o = torch.as_tensor(np.asarray(obs), dtype=torch.float32).reshape(-1, self.obs_dim)
        cand = self.candidates(self.n_actions, self._memory, self.generator)
        return cand[self._score(self.q, o, cand).argmax(1)].numpy()

    def act(self, obs: np.ndarray) -> int:
        """Epsilon-greedy action index for one observation (random until the first minibatch exists)."""
        o = np.asarray(obs, dtype=np.float32)
        if o.shape != (self.obs_dim,):
            raise ValueError(f"obs must have shape ({self.obs_dim},), got {o.shape}")
        if self.rng.random() < self.epsilon or len(self.buffer) < self.batch_size:
            return int(self.rng.integers(self.n_actions))
        return int(self.greedy(o)[0])

    def store(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray, terminated: bool) -> None:
        """One transition; ``terminated`` only (a truncated episode still bootstraps)."""
        if not 0 <= int(action) < self.n_actions:
            raise ValueError(f"action must be an index in [0, {self.n_actions}), got {action!r}")
        self.buffer.add(
            {
                "obs": torch.as_tensor(np.asarray(obs, dtype=np.float32)).reshape(1, -1),
                "action": torch.tensor([int(action)]),
                "reward": torch.tensor([float(reward)]),
                "next_obs": torch.as_tensor(np.asarray(next_obs, dtype=np.float32)).reshape(1, -1),
                "terminated": torch.tensor([float(terminated)]),
            }
        )

    def td_target(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``r + gamma (1 - term) Q_targ(s', b*)``, ``b*`` the (stochastic) argmax over the candidate set."""
        cand = self.candidates(self.n_actions, batch["action"], self.generator)
        with torch.no_grad():
            if self.config.double:
                b = cand[self._score(self.q, batch["next_obs"], cand).argmax(1)]
                boot = self.q_target(batch["next_obs"], b)
            else:
                boot = self._score(self.q_target, batch["next_obs"], cand).max(1).values
        return batch["reward"] + self.config.gamma * (1.0 - batch["terminated"]) * boot

    def update(self) -> float | None:
        """One gradient step on an MSE TD loss (``None`` until the buffer holds a minibatch)."""
        if len(self.buffer) < self.batch_size:
            return None
        batch = self.buffer.sample(self.batch_size, self.generator)
        self._memory = batch["action"]  # code variant: the minibatch's actions are the memory set when acting
        target = self.td_target(batch)
        loss = nn.functional.mse_loss(self.q(batch["obs"], batch["action"]), target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.config.target_update_every == 0:
            self.q_target.load_state_dict(self.q.state_dict())
        self.epsilon = max(self.config.epsilon_min, self.epsilon * self.config.epsilon_decay)
        return float(loss.item())
