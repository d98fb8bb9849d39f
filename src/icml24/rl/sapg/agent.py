"""SAPG: Split and Aggregate Policy Gradients (Singla, Agarwal & Pathak, ICML 2024, oral).
https://arxiv.org/abs/2407.20230 · official code: https://github.com/jayeshs999/sapg (rl_games fork).

PPO stops improving once N parallel environments are more than it can use: a bigger batch only sharpens the
gradient of the same trust-region step, and all samples come from one policy. SAPG splits the N environments
into M blocks of B = N / M. Block j acts with pi_j(a|s) = Normal(mu(s, phi_j), exp(sigma_j)) (one shared
network; learned per-block latent phi_j and log-std sigma_j) and may carry its own entropy coefficient
c_j = scale * linspace(0.5, 0)_j. The last block is the *leader* L (c_L = 0); the others are *followers*.
Every block learns on-policy from its own data; in addition the leader learns from K = min(M - 1, rho)
follower blocks drawn each iteration, relabelled with phi_L (section 3, eq. for L_off):

    R_off = r + gamma (1 - terminated) V_L(s'),   A_off = R_off - V_L(s)           (one-step targets)
    L     = PPO loss over  D_on(all blocks)  U  D_off(followers -> leader)           (lambda = 1: union mean)

where the PPO ratio of an off-policy sample is the importance weight pi_L(a|s) / pi_follower(a|s), clipped
inside the PPO objective. Reported performance is the leader block's only. The ``symmetric`` ablation
relabels every block's data to another block (each policy learns from a neighbour), ``none`` drops the
off-policy term (splitting without aggregation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import gymnasium as gym
import torch

from icml24.rl import _checks
from icml24.rl.ppo.agent import PPO, BlockActorCritic, PPOConfig

__all__ = ["SAPGConfig", "SAPG", "entropy_schedule", "follower_blocks_for_leader"]

Aggregation = Literal["leader_follower", "symmetric", "none"]


@dataclass(frozen=True)
class SAPGConfig:
    """SAPG's hyper-parameters on top of PPO's (defaults: the official ``--sapg`` launcher flags)."""

    num_blocks: int = 6
    """M, the number of blocks (policies) the N environments are split into; the last one is the leader."""
    latent_dim: int = 32
    """Size of the learned per-block latent phi_j fed to the shared network (``extra_param``)."""
    off_policy_ratio: int = 1
    """rho: the leader takes K = min(M - 1, rho) follower blocks of off-policy data per iteration."""
    aggregation: Aggregation = "leader_follower"
    """``leader_follower`` (SAPG), ``symmetric`` (every block learns from another; ablation) or ``none``."""
    entropy_scale: float = 0.005
    """Per-block entropy bonus c_j = ppo.entropy_coef + entropy_scale * linspace(0.5, 0, M)_j (0 disables)."""
    kl_on_policy_only: bool = False
    """Adaptive-LR KL over on-policy samples only (True), or over the whole union batch as the official code does
    (False, the default). With old-policy outputs refreshed per minibatch (rl_games ``update_mu_sigma``) the
    relabelled samples' KL(follower || leader) enters only the first epoch, and the learning rate does not
    collapse (it did, to the 1e-6 floor, before the PPO core refreshed them)."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """The underlying PPO hyper-parameters (shared by all blocks)."""

    def __post_init__(self) -> None:
        _checks.integer("num_blocks", self.num_blocks, low=1)
        _checks.integer("latent_dim", self.latent_dim, low=0)
        _checks.integer("off_policy_ratio", self.off_policy_ratio, low=0)
        if self.aggregation not in ("leader_follower", "symmetric", "none"):
            raise ValueError(
                f"aggregation must be 'leader_follower', 'symmetric' or 'none', got {self.aggregation!r}"
            )
        _checks.real("entropy_scale", self.entropy_scale, low=0.0)
        if not isinstance(self.kl_on_policy_only, bool):
            raise TypeError(f"kl_on_policy_only must be True or False, got {self.kl_on_policy_only!r}")
        if not isinstance(self.ppo, PPOConfig):
            raise TypeError(f"ppo must be a PPOConfig, got {type(self.ppo).__name__}")

    @property
    def num_off_policy_blocks(self) -> int:
        """K = min(M - 1, rho) (0 when aggregation is ``none``)."""
        return 0 if self.aggregation == "none" else min(self.num_blocks - 1, self.off_policy_ratio)


def entropy_schedule(num_blocks: int, scale: float, base: float = 0.0) -> torch.Tensor:
    """Per-block entropy coefficients ``base + scale * linspace(0.5, 0, M)``; the leader (last) gets ``base``."""
    num_blocks = _checks.integer("num_blocks", num_blocks, low=1)
    scale = _checks.real("scale", scale, low=0.0)
    base = _checks.real("base", base, low=0.0)
    if num_blocks == 1:
        return torch.tensor([base], dtype=torch.float32)
    return base + scale * torch.linspace(0.5, 0.0, num_blocks, dtype=torch.float32)


def follower_blocks_for_leader(repeat_idxs: list[int] | torch.Tensor) -> list[int]:
    """The official code's ``filter_leader`` index rule: repeat index r >= 1 selects block r - 1 (a follower),
    re-conditioned on the leader (last block); index 0 is the untouched on-policy copy."""
    if isinstance(repeat_idxs, torch.Tensor):
        if repeat_idxs.is_floating_point() or repeat_idxs.ndim != 1:
            raise TypeError(f"repeat_idxs must be a 1-D integer tensor or a list of ints, got {repeat_idxs!r}")
        repeat_idxs = repeat_idxs.tolist()
    if not isinstance(repeat_idxs, (list, tuple)):
        raise TypeError(f"repeat_idxs must be a list of ints, got {type(repeat_idxs).__name__}")
    idxs = [_checks.integer("repeat_idxs", r, low=0) for r in repeat_idxs]
    return [r - 1 for r in idxs if r != 0]


class SAPG(PPO):
    """SAPG on a Gymnasium vector env (Box spaces) whose ``num_envs`` is divisible by ``num_blocks``.

    Example:
        >>> from icml24.rl.envs import BatchedPendulum
        >>> agent = SAPG(BatchedPendulum(num_envs=64), config=SAPGConfig(num_blocks=4), seed=0)
        >>> stats = agent.learn(1)
        >>> agent.eval_block, agent.block_size
        (3, 16)
    """

    def __init__(self, env: gym.vector.VectorEnv, *, config: SAPGConfig | None = None, seed: int = 0) -> None:
        self.sapg_config = config if config is not None else SAPGConfig()
        if isinstance(config, PPOConfig):
            raise TypeError("config must be a SAPGConfig (pass the PPOConfig as SAPGConfig(ppo=...))")
        if not isinstance(self.sapg_config, SAPGConfig):
            raise TypeError(f"config must be a SAPGConfig, got {type(self.sapg_config).__name__}")
        self.kl_on_policy_only = self.sapg_config.kl_on_policy_only
        super().__init__(env, config=self.sapg_config.ppo, seed=seed)

    @property
    def num_blocks(self) -> int:
        return self.sapg_config.num_blocks

    @property
    def block_size(self) -> int:
        return self.num_envs // self.num_blocks

    @property
    def leader(self) -> int:
        """Index of the leader block (the last one, whose entropy coefficient is the base one)."""
        return self.num_blocks - 1

    def _check_blocks(self) -> None:
        if self.num_envs % self.num_blocks:
            raise ValueError(
                f"num_envs ({self.num_envs}) must be divisible by num_blocks ({self.num_blocks})"
            )

    def _make_network(self) -> BlockActorCritic:
        cfg = self.config
        return BlockActorCritic(
            obs_dim=self.obs_dim, act_dim=self.act_dim, num_blocks=self.num_blocks,
            latent_dim=self.sapg_config.latent_dim, hidden_sizes=cfg.hidden_sizes, init_log_std=cfg.init_log_std,
        )  # fmt: skip

    def _env_blocks(self) -> torch.Tensor:
        return torch.arange(self.num_envs, device=self.device) // self.block_size

    def _entropy_coefs(self) -> torch.Tensor:
        s = self.sapg_config
        return entropy_schedule(s.num_blocks, s.entropy_scale, base=self.config.entropy_coef)

    def sample_relabelling(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """This iteration's off-policy relabellings as ``(env_index, target_block)`` pairs, one per draw.

        ``leader_follower``: K distinct followers drawn uniformly, each block's envs relabelled to the leader.
        ``symmetric``: K distinct shifts r in 1..M-1 drawn uniformly, every env of block j relabelled to block
        (j - r) mod M (the official code's ``torch.roll`` of the block embeddings).
        """
        s, M, B, dev = self.sapg_config, self.num_blocks, self.block_size, self.device
        K = s.num_off_policy_blocks
        if K == 0:
            return []
        draws = torch.randperm(M - 1, generator=self.generator, device=dev)[:K] + 1
        out = []
        for r in draws.tolist():
            if s.aggregation == "leader_follower":
                (follower,) = follower_blocks_for_leader([r])
                envs = torch.arange(follower * B, (follower + 1) * B, device=dev)
                out.append((envs, torch.full((B,), self.leader, dtype=torch.long, device=dev)))
            else:
                envs = torch.arange(self.num_envs, device=dev)
                out.append((envs, (self.env_blocks - r) % M))
        return out

    @torch.no_grad()
    def _extra_samples(self, rollout: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        relabels = self.sample_relabelling()
        if not relabels:
            return None
        cfg = self.config
        T = rollout["values"].shape[0]
        parts: list[dict[str, torch.Tensor]] = []
        log_std = self.policy.log_std.detach()
        for envs, target in relabels:
            n = envs.numel()
            obs = rollout["obs"][:, envs].reshape(T * n, -1)
            next_obs = rollout["next_obs"][:, envs].reshape(T * n, -1)
            tgt = target.repeat(T)
            # One-step targets under the *target* block's critic (official code: returns = r + gamma V(s') (1 - d)).
            v = self._value(self.policy.value(obs, tgt))
            v_next = self._value(self.policy.value(next_obs, tgt))
            r = rollout["rewards"][:, envs].reshape(-1)
            not_term = 1.0 - rollout["terminated"][:, envs].reshape(-1).to(v.dtype)
            ret = r + cfg.gamma * not_term * v_next
            behaviour_blocks = self.env_blocks[envs].repeat(T)
            parts.append({
                "obs": obs, "block": tgt,
                "actions": rollout["actions"][:, envs].reshape(T * n, -1),
                "old_log_prob": rollout["log_probs"][:, envs].reshape(-1),
                "old_mean": rollout["means"][:, envs].reshape(T * n, -1),
                "old_log_std": log_std[behaviour_blocks],
                "old_values": v, "advantages": ret - v, "returns": ret,
                "off_policy": torch.ones(T * n, dtype=torch.bool, device=self.device),
                "valid": rollout["valid"][:, envs].reshape(-1),
            })  # fmt: skip
        return {k: torch.cat([p[k] for p in parts], dim=0) for k in parts[0]}

    def block_stats(self) -> dict[str, list[float]]:
        """Latest per-block training episode return and success rate (followers included, for diagnostics)."""
        return {
            "episode_return": self.last_episode_return.tolist(),
            "success_rate": self.last_success_rate.tolist(),
        }
