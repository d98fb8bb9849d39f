"""Batched pendulum swing-up with the dynamics, reward and time limit of Gymnasium's ``Pendulum-v1``.

The dense-reward control task of the SAPG miniature (arXiv:2407.20230, the paper's dense tasks are ShadowHand
and AllegroHand, where SAPG roughly ties PPO). Per environment, with g = 10, m = l = 1, dt = 0.05:

    u      = clip(a, -2, 2)
    cost   = normalize(theta)^2 + 0.1 * theta_dot^2 + 0.001 * u^2
    theta_dot' = clip(theta_dot + (3 g / (2 l) sin(theta) + 3 / (m l^2) u) dt, -8, 8)
    theta'     = theta + theta_dot' dt
    obs    = (cos theta', sin theta', theta_dot'),   reward = -cost,   200 steps, never terminates.

Initial state uniform in [-pi, pi] x [-1, 1]. A test steps this env and ``gymnasium.make("Pendulum-v1")`` with
the same actions from the same initial states and compares the trajectories.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from icml24.rl import _checks
from icml24.rl.envs.batched import TorchVectorEnv

__all__ = ["BatchedPendulum"]


class BatchedPendulum(TorchVectorEnv):
    """``Pendulum-v1`` over ``num_envs`` copies as tensors (state ``(theta, theta_dot)``)."""

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    m = 1.0
    length = 1.0

    def __init__(
        self,
        *,
        num_envs: int,
        g: float = 10.0,
        max_episode_steps: int = 200,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        self.g = _checks.real("g", g, low=0.0)
        high = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        self.single_observation_space = spaces.Box(low=-high, high=high, dtype=np.float32)
        self.single_action_space = spaces.Box(
            low=-self.max_torque, high=self.max_torque, shape=(1,), dtype=np.float32
        )
        super().__init__(
            num_envs=num_envs, max_episode_steps=max_episode_steps, device=device, dtype=dtype,
            autoreset_mode=autoreset_mode,
        )
        self._consts = {
            "pi": self._const(math.pi),
            "two_pi": self._const(2 * math.pi),
            "gravity": self._const(3.0 * self.g / (2.0 * self.length)),
            "dt": self._const(self.dt),
        }
        self._scratch = torch.empty(1, self.num_envs, device=self.device, dtype=dtype)
        self._obs_rows = torch.empty(3, self.num_envs, device=self.device, dtype=dtype)

    def _sample_initial_state(self, n: int) -> torch.Tensor:
        return self._uniform(n, [-math.pi, -1.0], [math.pi, 1.0])

    def _clip_actions(self, a: torch.Tensor) -> torch.Tensor:
        return torch.clamp(a.view(-1), -self.max_torque, self.max_torque)  # the [N] view of the [N, 1] actions

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, None]:
        # In place on the contiguous rows; the operation order is Gymnasium's, so float64 trajectories agree.
        # Scalars are 0-dim tensors: a Python float costs a second dispatch per op on CPU.
        c = self._consts
        th, thdot = self._rows
        u = action
        cost = torch.add(th, c["pi"]).remainder_(c["two_pi"]).sub_(c["pi"]).square_()  # angle_normalize(th)^2
        cost.addcmul_(thdot, thdot, value=0.1).addcmul_(u, u, value=0.001)
        acc = torch.sin(th, out=self._scratch[0]).mul_(c["gravity"]).add_(u, alpha=3.0 / (self.m * self.length**2))
        thdot.add_(acc.mul_(c["dt"])).clamp_(-self.max_speed, self.max_speed)
        th.add_(thdot, alpha=self.dt)
        return cost.neg_(), None

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        # cos and sin into contiguous rows, then one transposed copy into the [N, 3] observation (writing them
        # straight into the observation's strided columns takes 3x longer)
        th, thdot = state.unbind(0)
        n = th.shape[0]
        rows = self._obs_rows[:, :n]
        torch.cos(th, out=rows[0])
        torch.sin(th, out=rows[1])
        rows[2].copy_(thdot)
        return torch.empty(n, 3, device=th.device, dtype=th.dtype).T.copy_(rows).T
