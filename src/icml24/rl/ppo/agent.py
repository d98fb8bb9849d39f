"""PPO for batched torch environments (Schulman et al., 2017, "Proximal Policy Optimization Algorithms",
arXiv:1707.06347), configured the way SAPG's rl_games configs run it (Singla, Agarwal & Pathak, "SAPG: Split and
Aggregate Policy Gradients", ICML 2024, https://arxiv.org/abs/2407.20230, section 3 / official code).

One iteration: every one of the N environments acts for T steps with a Gaussian policy; GAE(gamma, lambda)
gives advantages with correct bootstrapping at time limits; then ``epochs`` passes of minibatch Adam steps on

    L = E[ -min(rho A, clip(rho, 1-eps, 1+eps) A) + 0.5 c_V max((V-R)^2, (V_clip-R)^2) - c_H H[pi] + c_b B(mu) ]

with observation normalisation (running mean/std), value normalisation (the critic predicts returns in the
units of a running mean/std of values and returns, so the value clip acts in normalised units, rl_games'
``normalize_value``), advantage normalisation over the batch, a gradient-norm clip and rl_games' KL-adaptive
learning rate. As in rl_games' ``train_epoch``, the stored old-policy mean and std of each minibatch are replaced
by the current policy's after its step (``dataset.update_mu_sigma``), so the KL that drives the schedule measures
how far one epoch moved the policy, not how far all epochs together moved it from the behaviour policy.

The environment may be any Gymnasium ``VectorEnv`` with 1-D ``Box`` observation and action spaces: torch
environments (``TorchVectorEnv``, wrapped or not) are used as they are (tensors in, tensors out, no copies);
numpy environments (``SyncVectorEnv``, ``AsyncVectorEnv``) are converted at the boundary. Both autoreset
modes are handled: same-step (``info["final_obs"]``) and next-step (the step after an episode end only resets,
and is left out of the batch). The network is :class:`BlockActorCritic`, which also carries
SAPG's per-block latent and log-std; plain PPO is the one-block case (``icml24.rl.sapg`` builds on this class).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from icml24.rl import _checks
from icml24.rl.ppo.functional import (
    KLAdaptiveLR,
    RunningMeanStd,
    bounds_loss,
    clipped_surrogate_loss,
    clipped_value_loss,
    gae,
    gaussian_entropy,
    gaussian_kl,
    gaussian_log_prob,
    normalize,
)
from icml24.rl.ppo.vec import VecEnvAdapter, as_vector_env

__all__ = ["PPOConfig", "BlockActorCritic", "PPO", "explained_variance"]


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var(target - predicted) / Var(target)``: how much of the returns' variance the critic explains
    (1 is perfect, 0 is no better than a constant; NaN when the targets are constant)."""
    var = float(target.var()) if target.numel() > 1 else 0.0
    if var == 0.0:
        return math.nan
    return 1.0 - float((target - predicted).var()) / var


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters (defaults: SAPG's rl_games ShadowHand config, network scaled down for a CPU)."""

    horizon: int = 16
    """T, environment steps per environment per iteration (``horizon_length``)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda (``tau``)."""
    clip: float = 0.2
    """PPO ratio clip epsilon (``e_clip``)."""
    value_clip: float | None = 0.2
    """Clip of the value change in the value loss; None for the plain squared error."""
    epochs: int = 5
    """Passes over the batch per iteration (``mini_epochs``)."""
    num_minibatches: int = 4
    """On-policy batch N*T is cut into this many minibatches (minibatch = 4N when T = 16, as in the configs)."""
    learning_rate: float = 5e-4
    """Initial Adam learning rate."""
    adaptive_lr: bool = True
    """KL-adaptive learning rate (rl_games ``lr_schedule: adaptive``)."""
    kl_threshold: float = 0.016
    """Target KL of the adaptive schedule."""
    lr_min: float = 1e-6
    """Floor of the adaptive learning rate."""
    lr_max: float = 1e-2
    """Ceiling of the adaptive learning rate (rl_games: 1e-2)."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient c_H."""
    critic_coef: float = 4.0
    """Value loss coefficient c_V (the loss uses 0.5 c_V, as rl_games does)."""
    bounds_loss_coef: float = 1e-4
    """Coefficient of the soft penalty on action means outside [-1.1, 1.1]."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    normalize_obs: bool = True
    """Running mean/std observation normalisation."""
    normalize_value: bool = True
    """Critic in the units of a running mean/std of values and returns (rl_games ``normalize_value``); the value
    clip then applies to normalised values."""
    normalize_advantages: bool = True
    """Normalise advantages over the whole batch before the epochs."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before GAE (rl_games ``reward_shaper.scale_value``)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layers of the actor and of the critic MLPs (tanh)."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the Gaussian policy."""

    def __post_init__(self) -> None:
        for name in ("horizon", "epochs", "num_minibatches"):
            _checks.integer(name, getattr(self, name), low=1)
        for name in ("gamma", "gae_lambda"):
            _checks.real(name, getattr(self, name), low=0.0, high=1.0)
        for name in ("clip", "learning_rate", "kl_threshold", "lr_min", "max_grad_norm", "reward_scale"):
            _checks.real(name, getattr(self, name), low=0.0, low_open=True)
        _checks.real("lr_max", self.lr_max, low=self.lr_min)
        for name in ("entropy_coef", "critic_coef", "bounds_loss_coef"):
            _checks.real(name, getattr(self, name), low=0.0)
        _checks.real("init_log_std", self.init_log_std, low=-20.0, high=2.0)
        if self.value_clip is not None:
            _checks.real("value_clip", self.value_clip, low=0.0, low_open=True)
        for name in ("adaptive_lr", "normalize_obs", "normalize_value", "normalize_advantages"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        _check_hidden_sizes(self.hidden_sizes)


def _check_hidden_sizes(hidden_sizes: Any) -> None:
    if not isinstance(hidden_sizes, tuple) or not all(
        isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden_sizes
    ):
        raise TypeError(f"hidden_sizes must be a tuple of positive ints, got {hidden_sizes!r}")


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class BlockActorCritic(nn.Module):
    """Gaussian actor and value critic conditioned on a per-block learned latent (SAPG section 3).

    Block j has a learned latent phi_j (N(0, 1) init, rl_games' ``extra_param``) appended to the observation
    of both MLPs, and its own learned log-std sigma_j (``coef_cond``):
    ``pi_j(a|s) = Normal(mu(s, phi_j), exp(sigma_j))``, ``V_j(s) = V(s, phi_j)``. One block without latent
    is the ordinary PPO actor-critic.
    """

    def __init__(
        self,
        *,
        obs_dim: int,
        act_dim: int,
        num_blocks: int = 1,
        latent_dim: int = 0,
        hidden_sizes: tuple[int, ...] = (64, 64),
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        obs_dim = _checks.integer("obs_dim", obs_dim, low=1)
        act_dim = _checks.integer("act_dim", act_dim, low=1)
        num_blocks = _checks.integer("num_blocks", num_blocks, low=1)
        latent_dim = _checks.integer("latent_dim", latent_dim, low=0)
        _check_hidden_sizes(hidden_sizes)
        init_log_std = _checks.real("init_log_std", init_log_std, low=-20.0, high=2.0)
        self.num_blocks, self.latent_dim = num_blocks, latent_dim
        self.actor = _mlp([obs_dim + latent_dim, *hidden_sizes, act_dim])
        self.critic = _mlp([obs_dim + latent_dim, *hidden_sizes, 1])
        self.log_std = nn.Parameter(torch.full((num_blocks, act_dim), float(init_log_std)))
        self.latent = nn.Parameter(torch.randn(num_blocks, latent_dim))

    def _inputs(self, obs: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
        if self.latent_dim == 0:
            return obs
        return torch.cat((obs, self.latent[block]), dim=-1)

    def forward(self, obs: torch.Tensor, block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mean, log_std, value)`` for observations ``obs [B, D]`` acting as blocks ``block [B]``."""
        x = self._inputs(obs, block)
        return self.actor(x), self.log_std[block], self.critic(x).squeeze(-1)

    def value(self, obs: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
        return self.critic(self._inputs(obs, block)).squeeze(-1)


class PPO:
    """PPO on a Gymnasium vector env with Box spaces (all N environments on one policy).

    ``env`` may also be a single ``gymnasium.Env``: it is wrapped in a one-env ``SyncVectorEnv``. Train with
    ``learn(iterations)`` or, as in Stable-Baselines3, ``learn(total_timesteps=...)``; ``save(path)`` and
    ``PPO.load(path, env)`` store and restore the agent (network, optimizer, normalisers, config).

    Example:
        >>> from icml24.rl.envs import BatchedPendulum
        >>> agent = PPO(BatchedPendulum(num_envs=64), seed=0)
        >>> stats = agent.learn(2)
        >>> sorted(stats)[:3]
        ['batch_size', 'entropy', 'episode_return']
    """

    def __init__(self, env: gym.vector.VectorEnv | gym.Env, *, config: PPOConfig | None = None, seed: int = 0) -> None:
        self.config = config if config is not None else PPOConfig()
        if not isinstance(self.config, PPOConfig):
            raise TypeError(f"config must be a PPOConfig, got {type(self.config).__name__}")
        _checks.integer("seed", seed, low=0)
        env = as_vector_env(env)
        self.vec = VecEnvAdapter(env)
        self.env, self.seed = env, int(seed)
        self.device = self.vec.device
        self.num_envs = self.vec.num_envs
        self.obs_dim = self.vec.obs_dim
        self.act_dim = self.vec.act_dim
        self._check_blocks()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.policy = self._make_network().to(self.device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed + 1)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=self.config.learning_rate, eps=1e-8)
        self.lr_schedule = KLAdaptiveLR(
            self.optimizer, kl_threshold=self.config.kl_threshold, lr_min=self.config.lr_min, lr_max=self.config.lr_max
        )
        self.obs_rms = RunningMeanStd((self.obs_dim,), device=self.device)
        self.value_rms = RunningMeanStd((), device=self.device)
        self.env_blocks = self._env_blocks()
        self.entropy_coefs = self._entropy_coefs().to(self.device)
        raw = self.vec.reset(seed=self.seed)
        self._obs = self._normalize_obs(raw, update=True)
        self._ep_return = torch.zeros(self.num_envs, device=self.device, dtype=torch.float64)
        # Statistics of the latest iteration in which each block finished episodes (episodes of H > T steps
        # finish only every few iterations).
        self.last_episode_return = torch.full((self.num_blocks,), float("nan"), dtype=torch.float64)
        self.last_success_rate = torch.full((self.num_blocks,), float("nan"), dtype=torch.float64)
        self.iterations = 0
        self.env_steps = 0
        self.optimizer_steps = 0
        self.last_explained_variance = math.nan

    # ---- hooks SAPG overrides ---------------------------------------------------------------------------
    kl_on_policy_only: bool = False
    """Whether the adaptive-LR KL ignores off-policy samples (PPO has none; SAPG sets it from its config)."""

    @property
    def num_blocks(self) -> int:
        return 1

    def _check_blocks(self) -> None:
        """Validate the block structure against the env (nothing to check for PPO)."""

    def _make_network(self) -> BlockActorCritic:
        cfg = self.config
        return BlockActorCritic(
            obs_dim=self.obs_dim, act_dim=self.act_dim, hidden_sizes=cfg.hidden_sizes, init_log_std=cfg.init_log_std
        )

    def _env_blocks(self) -> torch.Tensor:
        return torch.zeros(self.num_envs, dtype=torch.long, device=self.device)

    def _entropy_coefs(self) -> torch.Tensor:
        return torch.tensor([self.config.entropy_coef], dtype=torch.float32)

    def _extra_samples(self, rollout: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        """Samples to add to the on-policy batch (SAPG's relabelled follower data); none for PPO."""
        return None

    @property
    def eval_block(self) -> int:
        """The block whose policy is reported (the leader in SAPG)."""
        return self.num_blocks - 1

    # ---- rollout ------------------------------------------------------------------------------------------
    def _normalize_obs(self, raw: torch.Tensor, *, update: bool) -> torch.Tensor:
        raw = raw.to(torch.float32)
        if not self.config.normalize_obs:
            return raw
        if update:
            self.obs_rms.update(raw)
        return self.obs_rms(raw)

    def _value(self, normalized: torch.Tensor) -> torch.Tensor:
        """The critic's output in return units (rl_games ``denorm_value``: clamp to +-5 std, then unscale)."""
        if not self.config.normalize_value:
            return normalized
        std = torch.sqrt(self.value_rms.var + 1e-8).to(normalized.dtype)
        return normalized.clamp(-5.0, 5.0) * std + self.value_rms.mean.to(normalized.dtype)

    @torch.no_grad()
    def collect(self) -> dict[str, torch.Tensor]:
        """Run T steps in every environment; returns ``[T, N, ...]`` tensors and episode statistics."""
        T, N, dev = self.config.horizon, self.num_envs, self.device
        blocks = self.env_blocks
        obs_buf = torch.empty(T, N, self.obs_dim, device=dev)
        next_obs_buf = torch.empty_like(obs_buf)
        act_buf = torch.empty(T, N, self.act_dim, device=dev)
        mean_buf = torch.empty_like(act_buf)
        logp_buf = torch.empty(T, N, device=dev)
        val_buf, rew_buf = torch.empty_like(logp_buf), torch.empty_like(logp_buf)
        term_buf = torch.empty(T, N, dtype=torch.bool, device=dev)
        done_buf, valid_buf = torch.empty_like(term_buf), torch.empty_like(term_buf)
        M = self.num_blocks
        ep_count = torch.zeros(M, device=dev, dtype=torch.float64)
        ep_sum, ep_success = torch.zeros_like(ep_count), torch.zeros_like(ep_count)
        obs = self._obs
        for t in range(T):
            mean, log_std, value = self.policy(obs, blocks)
            noise = torch.randn(mean.shape, generator=self.generator, device=dev, dtype=mean.dtype)
            action = mean + torch.exp(log_std) * noise
            out = self.vec.step(action)
            terminated, done = out["terminated"], out["terminated"] | out["truncated"]
            next_obs = self._normalize_obs(out["obs"], update=True)
            true_next = next_obs
            if out["next_obs"] is not out["obs"]:
                true_next = self._normalize_obs(out["next_obs"], update=False)
            obs_buf[t], next_obs_buf[t], act_buf[t], mean_buf[t] = obs, true_next, action, mean
            logp_buf[t] = gaussian_log_prob(action, mean, log_std)
            val_buf[t] = self._value(value)
            rew_buf[t] = out["reward"] * self.config.reward_scale
            term_buf[t], done_buf[t], valid_buf[t] = terminated, done, out["valid"]
            self._ep_return += out["reward"].to(torch.float64)
            if bool(done.any()):
                d = done.to(torch.float64)
                ep_count.scatter_add_(0, blocks, d)
                ep_sum.scatter_add_(0, blocks, d * self._ep_return)
                ep_success.scatter_add_(0, blocks, terminated.to(torch.float64))
                self._ep_return = torch.where(done, torch.zeros_like(self._ep_return), self._ep_return)
            obs = next_obs
        self._obs = obs
        next_values = self._value(self.policy.value(next_obs_buf.reshape(T * N, -1), blocks.repeat(T))).reshape(T, N)
        self.env_steps += int(valid_buf.sum())
        return {
            "obs": obs_buf, "next_obs": next_obs_buf, "actions": act_buf, "means": mean_buf, "log_probs": logp_buf,
            "values": val_buf, "next_values": next_values, "rewards": rew_buf, "terminated": term_buf,
            "dones": done_buf, "valid": valid_buf, "ep_count": ep_count, "ep_return_sum": ep_sum,
            "ep_success_sum": ep_success,
        }  # fmt: skip

    # ---- batch and update --------------------------------------------------------------------------------
    @torch.no_grad()
    def build_batch(self, rollout: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Flatten the rollout into PPO samples with GAE targets, plus any extra (off-policy) samples.

        Values and returns are in return units up to here; with ``normalize_value`` the running statistics are
        then updated with the batch's values and returns (in that order, as rl_games' ``prepare_dataset``
        does over the union batch) and both are stored normalised, so the value loss and its clip act in
        normalised units. Advantages are computed in return units, before that.
        """
        cfg = self.config
        T, N = rollout["values"].shape
        adv, ret = gae(
            rollout["rewards"], rollout["values"], rollout["next_values"], rollout["terminated"],
            rollout["dones"], gamma=cfg.gamma, lam=cfg.gae_lambda,
        )  # fmt: skip
        blocks = self.env_blocks.repeat(T)
        batch = {
            "obs": rollout["obs"].reshape(T * N, -1),
            "block": blocks,
            "actions": rollout["actions"].reshape(T * N, -1),
            "old_log_prob": rollout["log_probs"].reshape(-1),
            "old_mean": rollout["means"].reshape(T * N, -1),
            "old_log_std": self.policy.log_std.detach()[blocks],
            "old_values": rollout["values"].reshape(-1),
            "advantages": adv.reshape(-1),
            "returns": ret.reshape(-1),
            "off_policy": torch.zeros(T * N, dtype=torch.bool, device=self.device),
            "valid": rollout["valid"].reshape(-1),
        }
        extra = self._extra_samples(rollout)
        if extra is not None:
            batch = {k: torch.cat((batch[k], extra[k]), dim=0) for k in batch}
        if not bool(batch["valid"].all()):  # next-step autoreset steps are not transitions
            keep = batch["valid"]
            batch = {k: v[keep] for k, v in batch.items()}
        del batch["valid"]
        batch["entropy_coef"] = self.entropy_coefs[batch["block"]]
        self.last_explained_variance = explained_variance(batch["old_values"], batch["returns"])
        if cfg.normalize_value:
            self.value_rms.update(batch["old_values"])
            batch["old_values"] = self.value_rms.normalize(batch["old_values"])
            self.value_rms.update(batch["returns"])
            batch["returns"] = self.value_rms.normalize(batch["returns"])
        if cfg.normalize_advantages:
            batch["advantages"] = normalize(batch["advantages"])
        return batch

    def loss(self, mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The PPO loss of one minibatch (module docstring), its parts, and the policy outputs it used."""
        cfg = self.config
        mean, log_std, value = self.policy(mb["obs"], mb["block"])
        log_prob = gaussian_log_prob(mb["actions"], mean, log_std)
        pg = clipped_surrogate_loss(log_prob, mb["old_log_prob"], mb["advantages"], cfg.clip)
        vl = clipped_value_loss(value, mb["old_values"], mb["returns"], cfg.value_clip)
        entropy = gaussian_entropy(log_std)
        bl = bounds_loss(mean)
        per_sample = pg + 0.5 * cfg.critic_coef * vl - mb["entropy_coef"] * entropy + cfg.bounds_loss_coef * bl
        with torch.no_grad():
            kl_all = gaussian_kl(mb["old_mean"], mb["old_log_std"], mean, log_std)
            if self.kl_on_policy_only and bool((~mb["off_policy"]).any()):
                kl = kl_all[~mb["off_policy"]].mean()
            else:
                kl = kl_all.mean()
        parts = {
            "policy_loss": pg.mean().detach(), "value_loss": vl.mean().detach(), "entropy": entropy.mean().detach(),
            "kl": kl, "mean": mean.detach(), "log_std": log_std.detach(),
        }  # fmt: skip
        return per_sample.mean(), parts

    def minibatch_size(self) -> int:
        """On-policy N T / ``num_minibatches``; SAPG's union batch is cut into more minibatches of this size,
        as rl_games' dataset does (``len(returns) // minibatch_size``)."""
        return max(1, (self.num_envs * self.config.horizon) // self.config.num_minibatches)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """``epochs`` passes of shuffled minibatch Adam steps; the KL schedule steps after each epoch.

        After each minibatch step the stored old-policy mean/std of its samples become the outputs the policy
        had for them just before the step (rl_games ``update_mu_sigma``); the importance ratio keeps using the
        behaviour log-probabilities.
        """
        cfg = self.config
        n = batch["advantages"].shape[0]
        mb_size = self.minibatch_size()
        sums: dict[str, torch.Tensor] = {}
        steps = 0
        batch = dict(batch)
        batch["old_mean"] = batch["old_mean"].clone()
        batch["old_log_std"] = batch["old_log_std"].clone()
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self.generator, device=self.device)
            kls = []
            for start in range(0, n, mb_size):
                idx = perm[start : start + mb_size]
                loss, parts = self.loss({k: v[idx] for k, v in batch.items()})
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                batch["old_mean"][idx] = parts.pop("mean")
                batch["old_log_std"][idx] = parts.pop("log_std")
                kls.append(parts["kl"])
                for k, v in parts.items():
                    sums[k] = sums[k] + v if k in sums else v
                steps += 1
            if cfg.adaptive_lr:
                self.lr_schedule.step(float(torch.stack(kls).mean()))
        self.optimizer_steps += steps
        out = {k: float(v) / max(steps, 1) for k, v in sums.items()}
        out["optimizer_steps"] = steps
        return out

    # ---- public loop -------------------------------------------------------------------------------------
    def iterate(self) -> dict[str, Any]:
        """One collect-build-update iteration; returns training statistics (reported block only)."""
        t0 = time.perf_counter()
        rollout = self.collect()
        batch = self.build_batch(rollout)
        stats: dict[str, Any] = self.update(batch)
        self.iterations += 1
        count = rollout["ep_count"].cpu()
        seen = count > 0
        self.last_episode_return[seen] = rollout["ep_return_sum"].cpu()[seen] / count[seen]
        self.last_success_rate[seen] = rollout["ep_success_sum"].cpu()[seen] / count[seen]
        b = self.eval_block
        stats.update(
            episodes=float(count[b]),
            episode_return=float(self.last_episode_return[b]),
            success_rate=float(self.last_success_rate[b]),
            learning_rate=self.lr_schedule.lr,
            batch_size=int(batch["advantages"].shape[0]),
            explained_variance=self.last_explained_variance,
            seconds=time.perf_counter() - t0,
        )
        return stats

    def learn(
        self, iterations: int | None = None, *, total_timesteps: int | None = None, verbose: int = 0
    ) -> dict[str, Any]:
        """Run ``iterations`` iterations, or enough for ``total_timesteps`` environment steps (give one of the
        two); returns the last iteration's statistics.

        ``total_timesteps`` counts steps summed over the N environments, as Stable-Baselines3 does: the
        number of iterations is ``ceil(total_timesteps / (N T))``, so at least that many steps are taken.
        (The first positional argument is ``iterations``, not SB3's ``total_timesteps``: name the latter.)
        ``verbose=k > 0`` prints one line of statistics every ``k`` iterations.
        """
        if (iterations is None) == (total_timesteps is None):
            raise TypeError("learn() takes exactly one of iterations and total_timesteps")
        if total_timesteps is not None:
            total_timesteps = _checks.integer("total_timesteps", total_timesteps, low=1)
            iterations = -(-total_timesteps // (self.num_envs * self.config.horizon))
        iterations = _checks.integer("iterations", iterations, low=1)
        verbose = _checks.integer("verbose", verbose, low=0)
        stats: dict[str, Any] = {}
        for i in range(iterations):
            stats = self.iterate()
            if verbose and ((i + 1) % verbose == 0 or i + 1 == iterations):
                print(
                    f"[{type(self).__name__}] iteration {self.iterations}  env steps {self.env_steps}  "
                    f"episode return {stats['episode_return']:.4g}  lr {stats['learning_rate']:.3g}",
                    flush=True,
                )
        return stats

    # ---- save / load -------------------------------------------------------------------------------------
    _STATE_VERSION = 1

    def state_dict(self) -> dict[str, Any]:
        """Everything ``load`` needs to act and train on as before: network and optimizer state dicts, the
        observation and value normalisers, the sampling generator, counters, the config and the seed (tensors,
        numbers, strings, lists and dicts only, so ``torch.load(weights_only=True)`` reads it)."""
        return {
            "format": "icml24.rl.ppo", "version": self._STATE_VERSION, "agent": type(self).__name__,
            "config": asdict(self.config), "seed": self.seed,
            "policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
            "obs_rms": {"mean": self.obs_rms.mean, "var": self.obs_rms.var, "count": float(self.obs_rms.count)},
            "value_rms": {"mean": self.value_rms.mean, "var": self.value_rms.var,
                          "count": float(self.value_rms.count)},
            "generator": self.generator.get_state(),
            "counters": {"iterations": self.iterations, "env_steps": self.env_steps,
                         "optimizer_steps": self.optimizer_steps},
        }  # fmt: skip

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`state_dict` to ``path`` with ``torch.save`` (the environment is not saved)."""
        if type(self) is not PPO:
            raise NotImplementedError(f"save/load cover PPO; {type(self).__name__} adds state they do not store")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        torch.save(self.state_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], env: gym.vector.VectorEnv | gym.Env) -> PPO:
        """The agent saved at ``path``, on ``env`` (which must have the saved agent's spaces).

        The network, optimizer, normalisers, generator and counters are restored, so ``act`` gives exactly
        the saved agent's actions; ``env`` is reset with the saved seed.
        """
        if cls is not PPO:
            raise NotImplementedError(f"save/load cover PPO; {cls.__name__} adds state they do not store")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != "icml24.rl.ppo" or state.get("agent") != cls.__name__:
            raise ValueError(f"path: {os.fspath(path)!r} is not a file written by {cls.__name__}.save")
        cfg = dict(state["config"])
        cfg["hidden_sizes"] = tuple(cfg["hidden_sizes"])
        agent = cls(env, config=PPOConfig(**cfg), seed=int(state["seed"]))
        agent.load_state_dict(state)
        agent._obs = agent._normalize_obs(agent.vec.reset(seed=agent.seed), update=False)  # saved statistics
        return agent

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` into this agent (same config and spaces)."""
        if asdict(self.config) != {**state["config"], "hidden_sizes": tuple(state["config"]["hidden_sizes"])}:
            raise ValueError("state: it was saved with another config than this agent's")
        try:
            self.policy.load_state_dict(state["policy"])
        except RuntimeError as exc:  # shapes: another env's spaces
            raise ValueError(f"env must have the saved agent's spaces: {exc}") from exc
        self.optimizer.load_state_dict(state["optimizer"])
        for name in ("obs_rms", "value_rms"):
            rms, saved = getattr(self, name), state[name]
            rms.mean = saved["mean"].to(self.device, torch.float64)
            rms.var = saved["var"].to(self.device, torch.float64)
            rms.count = float(saved["count"])
        self.generator.set_state(state["generator"])
        for k, v in state["counters"].items():
            setattr(self, k, int(v))

    @torch.no_grad()
    def act(self, raw_obs: torch.Tensor, *, block: int | None = None, deterministic: bool = True) -> torch.Tensor:
        """Actions of block ``block`` (default: the reported block) for raw observations ``[B, D]``."""
        b = self.eval_block if block is None else _checks.integer("block", block, low=0)
        if not 0 <= b < self.num_blocks:
            raise ValueError(f"block must be in [0, {self.num_blocks}), got {b}")
        if not isinstance(deterministic, bool):
            raise TypeError(f"deterministic must be True or False, got {deterministic!r}")
        if isinstance(raw_obs, np.ndarray):
            raw_obs = torch.as_tensor(raw_obs, device=self.device)
        _checks.tensor("raw_obs", raw_obs)
        if raw_obs.ndim != 2 or raw_obs.shape[1] != self.obs_dim:
            raise ValueError(f"raw_obs must have shape (batch, {self.obs_dim}), got {tuple(raw_obs.shape)}")
        _checks.finite_tensor("raw_obs", raw_obs)
        obs = self._normalize_obs(raw_obs, update=False)
        blocks = torch.full((obs.shape[0],), b, dtype=torch.long, device=obs.device)
        mean, log_std, _ = self.policy(obs, blocks)
        if deterministic:
            return mean
        return mean + torch.exp(log_std) * torch.randn(mean.shape, generator=self.generator, device=mean.device)

    @torch.no_grad()
    def evaluate(
        self,
        env: gym.vector.VectorEnv | gym.Env,
        *,
        seed: int = 12345,
        block: int | None = None,
        deterministic: bool = True,
        max_steps: int | None = None,
    ) -> dict[str, float]:
        """First-episode return and success (termination) rate of each of ``env``'s copies under one block.

        Runs until every copy has finished its first episode, or ``max_steps`` steps (default: the env's
        ``max_episode_steps``, else 10,000).
        """
        _checks.integer("seed", seed, low=0)
        if max_steps is not None:
            max_steps = _checks.integer("max_steps", max_steps, low=1)
        vec = VecEnvAdapter(as_vector_env(env), device=self.device)
        if vec.obs_dim != self.obs_dim or vec.act_dim != self.act_dim:
            raise ValueError(
                f"env must have the training env's spaces (obs {self.obs_dim}, action {self.act_dim}), got "
                f"obs {vec.obs_dim}, action {vec.act_dim}"
            )
        raw = vec.reset(seed=seed)
        n = vec.num_envs
        limit = max_steps if max_steps is not None else (vec.max_episode_steps or 10_000)
        ret = torch.zeros(n, dtype=torch.float64, device=self.device)
        active = torch.ones(n, dtype=torch.bool, device=self.device)
        success = torch.zeros(n, dtype=torch.bool, device=self.device)
        for _ in range(int(limit)):
            out = vec.step(self.act(raw, block=block, deterministic=deterministic))
            raw = out["obs"]
            ret += torch.where(active, out["reward"].to(torch.float64), torch.zeros_like(ret))
            success |= active & out["terminated"]
            active &= ~(out["terminated"] | out["truncated"])
            if not bool(active.any()):
                break
        return {"return": float(ret.mean()), "success_rate": float(success.to(torch.float64).mean())}

    def config_dict(self) -> dict[str, Any]:
        return asdict(self.config)
