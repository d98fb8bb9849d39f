"""Offline goal-conditioned learners with hindsight relabelling, the downstream learners of CAIAC's Fetch tasks.

CAIAC (ICML 2024, arXiv:2405.18917, section 5.2) trains goal-conditioned TD3 (and TD3+BC) with HER "future"
relabelling on a fixed dataset, each minibatch half real and half counterfactual. The agent is the shared
:class:`icml24.rl.value.TD3Agent` with the TD3+BC actor loss of Fujimoto & Gu (2021),

    L_actor = -lambda * mean Q_1(s, mu(s)) + mean |mu(s) - a|^2,      lambda = alpha / mean |Q_1(s, mu(s))|,

trained on minibatches drawn by :class:`icml24.rl.caiac.augment.CounterfactualSampler` (the observation is the
state and the goal). :func:`train_gcbc` is the cheaper goal-conditioned behaviour cloning (the notes' alternative
for the miniature; Kitchen's skill model in the paper is also trained by imitation): an MLP policy
``mu(s, g) in [-1, 1]^|A|`` fitted by mean squared error to the dataset's actions on the same minibatches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml24.rl import _checks
from icml24.rl.caiac.augment import CounterfactualSampler
from icml24.rl.value.networks import mlp
from icml24.rl.value.td3 import TD3Agent, TD3Config

__all__ = ["BCConfig", "GoalConditionedPolicy", "OfflineConfig", "TD3BCAgent", "train_gcbc", "train_offline"]


class TD3BCAgent(TD3Agent):
    """TD3 with the behaviour-cloning actor loss of TD3+BC (``bc_alpha = inf`` would be pure TD3's limit)."""

    def __init__(self, *, obs_dim: int, action_dim: int, config: TD3Config = TD3Config(), seed: int = 0,  # noqa: B008
                 bc_alpha: float = 2.5) -> None:  # fmt: skip
        super().__init__(obs_dim=obs_dim, action_dim=action_dim, config=config, seed=seed)
        self.bc_alpha = _checks.real("bc_alpha", bc_alpha, low=0.0, low_open=True)

    def actor_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        pi = self.actor(batch["obs"])
        q = self.critic_value(self.critics[0], batch["obs"], pi)
        lam = self.bc_alpha / q.abs().mean().detach().clamp_min(1e-6)
        return -lam * q.mean() + ((pi - batch["action"]) ** 2).mean()


@dataclass(frozen=True)
class OfflineConfig:
    """The offline learner (official Fetch TD3 config: gamma 0.97, Polyak 0.95, lr 1e-3, batch 512)."""

    updates: int = 20_000
    """Gradient steps (the paper: 3000 epochs x 20 cycles x 20 batches; presets use far fewer)."""
    batch_size: int = 512
    """Minibatch size (half counterfactual when augmenting)."""
    gamma: float = 0.97
    """Discount."""
    tau: float = 0.05
    """Polyak rate (official polyak 0.95)."""
    lr: float = 1e-3
    """Actor and critic learning rate."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of actor and critics."""
    bc_alpha: float = 2.5
    """TD3+BC's alpha (Fujimoto & Gu, 2021)."""

    def __post_init__(self) -> None:
        _checks.integer("updates", self.updates, low=1)
        _checks.integer("batch_size", self.batch_size, low=2)
        _checks.real("gamma", self.gamma, low=0.0, high=1.0, high_open=True)
        _checks.real("tau", self.tau, low=0.0, high=1.0, low_open=True)
        _checks.real("lr", self.lr, low=0.0, low_open=True)
        _checks.real("bc_alpha", self.bc_alpha, low=0.0, low_open=True)
        if not isinstance(self.hidden, tuple) or not self.hidden or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in self.hidden
        ):
            raise ValueError(f"hidden must be a non-empty tuple of positive ints, got {self.hidden!r}")


def train_offline(sampler: CounterfactualSampler, config: OfflineConfig = OfflineConfig(), *,  # noqa: B008
                  seed: int) -> TD3BCAgent:  # fmt: skip
    """Train goal-conditioned TD3+BC on minibatches from ``sampler`` for ``config.updates`` steps."""
    if not isinstance(sampler, CounterfactualSampler):
        raise TypeError(f"sampler must be a CounterfactualSampler, got {type(sampler).__name__}")
    if not isinstance(config, OfflineConfig):
        raise TypeError(f"config must be an OfflineConfig, got {type(config).__name__}")
    seed = _checks.integer("seed", seed, low=0)
    obs_dim = sampler.states.shape[2] + sampler.goals.shape[1]
    td3 = TD3Config(gamma=config.gamma, tau=config.tau, actor_lr=config.lr, critic_lr=config.lr,
                    hidden=config.hidden, batch_size=config.batch_size, buffer_size=1)  # fmt: skip
    agent = TD3BCAgent(obs_dim=obs_dim, action_dim=sampler.actions.shape[2], config=td3, seed=seed,
                       bc_alpha=config.bc_alpha)  # fmt: skip
    rng = np.random.default_rng(seed)
    for _ in range(config.updates):
        b = sampler.sample(config.batch_size, rng)
        agent.update({
            "obs": torch.as_tensor(b["obs"], dtype=torch.float32),
            "action": torch.as_tensor(b["action"], dtype=torch.float32),
            "reward": torch.as_tensor(b["reward"], dtype=torch.float32),
            "next_obs": torch.as_tensor(b["next_obs"], dtype=torch.float32),
            "terminated": torch.zeros(config.batch_size),
        })  # fmt: skip
    return agent


@dataclass(frozen=True)
class BCConfig:
    """Goal-conditioned behaviour cloning (our choice of size for a 2-core CPU)."""

    updates: int = 5_000
    """Gradient steps."""
    batch_size: int = 256
    """Minibatch size (a ``ratio_cf`` fraction of it counterfactual when augmenting)."""
    lr: float = 1e-3
    """Adam learning rate."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden widths of the policy."""

    def __post_init__(self) -> None:
        _checks.integer("updates", self.updates, low=1)
        _checks.integer("batch_size", self.batch_size, low=2)
        _checks.real("lr", self.lr, low=0.0, low_open=True)
        if not isinstance(self.hidden, tuple) or not self.hidden or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in self.hidden
        ):
            raise ValueError(f"hidden must be a non-empty tuple of positive ints, got {self.hidden!r}")


class GoalConditionedPolicy(torch.nn.Module):
    """``mu(s, g)``: an MLP on the concatenated state and goal, ``tanh`` into ``[-1, 1]^action_dim``."""

    def __init__(self, *, obs_dim: int, action_dim: int, hidden: tuple[int, ...] = (128, 128)) -> None:
        super().__init__()
        self.obs_dim = _checks.integer("obs_dim", obs_dim, low=1)
        self.action_dim = _checks.integer("action_dim", action_dim, low=1)
        self.net = torch.nn.Sequential(mlp(self.obs_dim, hidden, self.action_dim), torch.nn.Tanh())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs must have shape (B, {self.obs_dim}), got {tuple(obs.shape)}")
        _checks.finite_tensor("obs", obs)
        return self.net(obs)

    @torch.no_grad()
    def act(self, states: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """Deterministic actions for numpy ``states (n, D)`` and ``goals (n, G)`` (the rollout interface)."""
        x = torch.as_tensor(np.concatenate([states, goals], axis=1), dtype=torch.float32)
        return self(x).numpy().astype(np.float64)


def train_gcbc(sampler: CounterfactualSampler, config: BCConfig = BCConfig(), *,  # noqa: B008
               seed: int) -> GoalConditionedPolicy:  # fmt: skip
    """Fit a :class:`GoalConditionedPolicy` by MSE to the actions of ``sampler``'s (relabelled) minibatches."""
    if not isinstance(sampler, CounterfactualSampler):
        raise TypeError(f"sampler must be a CounterfactualSampler, got {type(sampler).__name__}")
    if not isinstance(config, BCConfig):
        raise TypeError(f"config must be a BCConfig, got {type(config).__name__}")
    seed = _checks.integer("seed", seed, low=0)
    torch.manual_seed(seed)
    policy = GoalConditionedPolicy(obs_dim=sampler.states.shape[2] + sampler.goals.shape[1],
                                   action_dim=sampler.actions.shape[2], hidden=config.hidden)  # fmt: skip
    opt = torch.optim.Adam(policy.parameters(), lr=config.lr)
    rng = np.random.default_rng(seed)
    for _ in range(config.updates):
        b = sampler.sample(config.batch_size, rng)
        obs = torch.as_tensor(b["obs"], dtype=torch.float32)
        loss = ((policy(obs) - torch.as_tensor(b["action"], dtype=torch.float32)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.eval()
    return policy
