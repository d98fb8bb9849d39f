"""Batched continuous mountain car: Gymnasium's ``MountainCarContinuous-v0`` as tensors.

The hard-exploration continuous-control task of the SAPG miniature (arXiv:2407.20230 argues that PPO's extra
environments stop helping when the task needs exploration). The reward is deceptive: every step costs
``0.1 a^2``, so "do nothing" is a local optimum worth 0, while the +100 at the hill top is reached only by a
policy that swings back and forth coherently for tens of steps, which Gaussian action noise alone rarely does.
Per environment:

    force = clip(a, -1, 1)
    v' = clip(v + 0.0015 force - 0.0025 cos(3 x), -0.07, 0.07);   x' = clip(x + v', -1.2, 0.6)
    v' = 0 if x' == -1.2 and v' < 0;   terminated = x' >= 0.45 and v' >= goal_velocity
    reward = 100 [terminated] - 0.1 a^2   (the unclipped action, as Gymnasium does)

Initial x uniform in [-0.6, -0.4], v = 0; 999 steps by default (``max_episode_steps``).
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from icml24.rl import _checks
from icml24.rl.envs.batched import TorchVectorEnv

__all__ = ["BatchedMountainCarContinuous"]


class BatchedMountainCarContinuous(TorchVectorEnv):
    """``MountainCarContinuous-v0`` over ``num_envs`` copies (state ``(position, velocity)``)."""

    min_position = -1.2
    max_position = 0.6
    max_speed = 0.07
    goal_position = 0.45
    power = 0.0015

    def __init__(
        self,
        *,
        num_envs: int,
        goal_velocity: float = 0.0,
        max_episode_steps: int = 999,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.goal_velocity = _checks.real("goal_velocity", goal_velocity, low=0.0)
        low = np.array([self.min_position, -self.max_speed], dtype=np.float32)
        high = np.array([self.max_position, self.max_speed], dtype=np.float32)
        self.single_observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self.single_action_space = spaces.Box(low=-1.0, high=1.0, shape=(1,), dtype=np.float32)
        super().__init__(num_envs=num_envs, max_episode_steps=max_episode_steps, device=device, dtype=dtype)

    def _sample_initial_state(self, n: int) -> torch.Tensor:
        x = self._uniform(n, -0.6, -0.4)
        return torch.stack((x, torch.zeros_like(x)))

    def step(self, actions):  # type: ignore[override]
        # Gymnasium charges the action cost on the *unclipped* action; keep it before the base class clips.
        a = self._checked_actions(actions)
        self._raw_action = a[:, 0]
        return super().step(a)

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, v = state[0], state[1]
        # v' = clip(v + force * power - 0.0025 cos(3 x)), in Gymnasium's operation order
        v.add_(torch.mul(action[:, 0], self.power).sub_(torch.mul(x, 3.0).cos_().mul_(0.0025)))
        v.clamp_(-self.max_speed, self.max_speed)
        x.add_(v).clamp_(self.min_position, self.max_position)
        v.masked_fill_((x == self.min_position) & (v < 0), 0.0)
        terminated = (x >= self.goal_position) & (v >= self.goal_velocity)
        raw = self._raw_action
        reward = torch.mul(raw, raw).mul_(-0.1).add_(terminated.to(self.dtype), alpha=100.0)
        return reward, terminated

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        obs = torch.empty(state.shape[1], 2, device=state.device, dtype=state.dtype)
        obs.T.copy_(state)
        return obs
