"""TD3: twin delayed deep deterministic policy gradient (Fujimoto et al., ICML 2018), batched in torch.

Twin critics, the target ``r + gamma (1 - terminated) min_i Q_i'(s', clip(mu'(s') + clip(eps, -c, c)))`` with
``eps ~ N(0, sigma^2)``, actor updated every ``policy_delay`` critic steps by ``-Q_1(s, mu(s))``, Polyak
target averaging with ``tau``. Actions live in ``[-1, 1]^d`` (scale in the env). :meth:`TD3Agent.critic_value`
and :meth:`TD3Agent.compute_target` are the two hooks a variant overrides (max-reward TD3 in
:mod:`icml24.rl.max_reward` changes exactly these); :meth:`TD3Agent.actor_loss` is the third (TD3+BC adds its
behaviour-cloning term there). ``update(batch)`` trains on a given minibatch instead of one sampled from the
agent's own buffer (offline learners with their own sampler, e.g. the counterfactual augmentation of
:mod:`icml24.rl.caiac`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from icml24.rl.value.networks import mlp
from icml24.rl.value.replay import ReplayBuffer
from icml24.rl.value.tabular import check_gamma, check_int


@dataclass(frozen=True)
class TD3Config:
    """TD3 hyper-parameters (defaults: Fujimoto et al. / the To-the-Max code where they agree)."""

    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak averaging rate of the target networks."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of actor and critics."""
    batch_size: int = 256
    """Minibatch size."""
    buffer_size: int = 1_000_000
    """Replay capacity."""
    policy_delay: int = 2
    """Critic steps per actor (and target) step."""
    target_noise: float = 0.2
    """Std of the target-policy smoothing noise."""
    noise_clip: float = 0.5
    """Clip of the target-policy smoothing noise."""
    exploration_noise: float = 0.1
    """Std of the Gaussian exploration noise added when acting."""

    def __post_init__(self) -> None:
        check_gamma(self.gamma)
        for name in ("tau", "actor_lr", "critic_lr", "target_noise", "noise_clip", "exploration_noise"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not 0 < self.tau <= 1:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        for name in ("batch_size", "buffer_size", "policy_delay"):
            check_int(name, getattr(self, name), 1)


class TD3Agent:
    """A TD3 agent over ``[-1, 1]^action_dim`` actions; observations are float tensors ``(B, obs_dim)``."""

    def __init__(self, *, obs_dim: int, action_dim: int, config: TD3Config = TD3Config(), seed: int = 0) -> None:  # noqa: B008
        if not isinstance(config, TD3Config):
            raise TypeError(f"config must be a TD3Config, got {type(config).__name__}")
        self.config = config
        self.obs_dim, self.action_dim = check_int("obs_dim", obs_dim, 1), check_int("action_dim", action_dim, 1)
        seed = check_int("seed", seed, 0)
        self.generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        self.actor = nn.Sequential(mlp(self.obs_dim, config.hidden, self.action_dim), nn.Tanh())
        self.critics = nn.ModuleList([mlp(self.obs_dim + self.action_dim, config.hidden, 1) for _ in range(2)])
        self.actor_targ = copy.deepcopy(self.actor)
        self.critics_targ = copy.deepcopy(self.critics)
        for p in [*self.actor_targ.parameters(), *self.critics_targ.parameters()]:
            p.requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=config.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=config.critic_lr)
        self.buffer = ReplayBuffer(
            capacity=config.buffer_size,
            fields={
                "obs": ((self.obs_dim,), torch.float32),
                "action": ((self.action_dim,), torch.float32),
                "reward": ((), torch.float32),
                "next_obs": ((self.obs_dim,), torch.float32),
                "terminated": ((), torch.float32),
            },
        )
        self.updates = 0

    def _check_obs(self, obs: torch.Tensor) -> torch.Tensor:
        obs = torch.as_tensor(obs, dtype=torch.float32)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs must have shape (batch, {self.obs_dim}), got {tuple(obs.shape)}")
        return obs

    @torch.no_grad()
    def act(self, obs: torch.Tensor, *, noise: bool = True) -> torch.Tensor:
        """``mu(s)`` plus Gaussian exploration noise, clipped to ``[-1, 1]``."""
        obs = self._check_obs(obs)
        a = self.actor(obs)
        if noise:
            eps = torch.randn(a.shape, generator=self.generator) * self.config.exploration_noise
            a = (a + eps).clamp(-1.0, 1.0)
        return a

    def store(self, batch: dict[str, torch.Tensor]) -> None:
        self.buffer.add(batch)

    def critic_value(self, critic: nn.Module, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``Q(s, a)`` of one critic, ``(B,)``."""
        return critic(torch.cat([obs, action], dim=1)).squeeze(-1)

    def target_q(self, next_obs: torch.Tensor) -> torch.Tensor:
        """Clipped double-Q of the smoothed target action: ``min_i Q_i'(s', mu'(s') + clip(eps))``."""
        a = self.actor_targ(next_obs)
        eps = (torch.randn(a.shape, generator=self.generator) * self.config.target_noise).clamp(
            -self.config.noise_clip, self.config.noise_clip
        )
        a2 = (a + eps).clamp(-1.0, 1.0)
        return torch.minimum(*(self.critic_value(c, next_obs, a2) for c in self.critics_targ))

    def compute_target(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The cumulative-reward TD3 target ``r + gamma (1 - terminated) min_i Q_i'``."""
        return batch["reward"] + self.config.gamma * (1.0 - batch["terminated"]) * self.target_q(batch["next_obs"])

    def actor_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The deterministic policy-gradient loss ``-mean Q_1(s, mu(s))``."""
        return -self.critic_value(self.critics[0], batch["obs"], self.actor(batch["obs"])).mean()

    def update(self, batch: dict[str, torch.Tensor] | None = None) -> dict[str, Any] | None:
        """One critic step (and an actor + target step every ``policy_delay``).

        ``batch`` (the buffer's fields, float tensors with a common leading size) is trained on as given;
        without it a minibatch of ``batch_size`` is drawn from the agent's buffer (``None`` until it holds one).
        """
        if batch is None:
            if len(self.buffer) < self.config.batch_size:
                return None
            batch = self.buffer.sample(self.config.batch_size, self.generator)
        elif not isinstance(batch, dict):
            raise TypeError(f"batch must be a dict of tensors, got {type(batch).__name__}")
        with torch.no_grad():
            target = self.compute_target(batch)
        qs = [self.critic_value(c, batch["obs"], batch["action"]) for c in self.critics]
        critic_loss = sum(nn.functional.mse_loss(q, target) for q in qs)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        out: dict[str, Any] = {"critic_loss": float(critic_loss.item())}
        if self.updates % self.config.policy_delay == 0:
            actor_loss = self.actor_loss(batch)
            self.actor_opt.zero_grad()
            actor_loss.backward()
            self.actor_opt.step()
            with torch.no_grad():
                for net, targ in ((self.actor, self.actor_targ), (self.critics, self.critics_targ)):
                    for p, pt in zip(net.parameters(), targ.parameters(), strict=True):
                        pt.lerp_(p, self.config.tau)
            out["actor_loss"] = float(actor_loss.item())
        return out


def random_actions(n: int, action_dim: int, generator: torch.Generator) -> torch.Tensor:
    """Uniform actions in ``[-1, 1]^d`` for the warm-up phase."""
    return torch.rand((n, action_dim), generator=generator) * 2.0 - 1.0


__all__ = ["TD3Agent", "TD3Config", "random_actions"]
