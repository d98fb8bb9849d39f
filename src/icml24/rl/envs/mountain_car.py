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

import math

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

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
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        self.goal_velocity = _checks.real("goal_velocity", goal_velocity, low=0.0)
        low = np.array([self.min_position, -self.max_speed], dtype=np.float32)
        high = np.array([self.max_position, self.max_speed], dtype=np.float32)
        self.single_observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self.single_action_space = spaces.Box(low=-1.0, high=1.0, shape=(1,), dtype=np.float32)
        super().__init__(
            num_envs=num_envs, max_episode_steps=max_episode_steps, device=device, dtype=dtype,
            autoreset_mode=autoreset_mode,
        )
        self._consts = {
            "three": self._const(3.0),
            "one": self._const(1.0),
            "minus_hill": self._const(-0.0025),
            "cost": self._const(-0.1),
            "goal_position": self._const(self.goal_position),
            # 2^100 min_position is exactly 2^100 float32(min_position) (rounding commutes with the scale)
            "wall": self._const(self.min_position * 2.0**100),
        }
        # step temporaries, one row each for the clipped force and the acceleration (unbound once: indexing a
        # row costs a dispatch per step)
        self._scratch = torch.empty(2, self.num_envs, device=self.device, dtype=dtype)
        self._force, self._accel = self._scratch.unbind(0)
        # the wall and goal positions as the env's dtype rounds them (x is compared with those, not with 0.45)
        self._wall_at, self._goal_at = float(self._const(self.min_position)), float(self._consts["goal_position"])

    def _sample_initial_state(self, n: int) -> torch.Tensor:
        x = self._uniform(n, -0.6, -0.4)
        return torch.stack((x, torch.zeros_like(x)))

    def _clip_actions(self, a: torch.Tensor) -> torch.Tensor:
        # the [N] view of the [N, 1] actions, kept unclipped for the action cost (Gymnasium charges it so)
        # (the clipped force goes into a preallocated row: only ``_dynamics`` reads it, within this step)
        self._raw_flat = a.view(-1)
        return torch.clamp(self._raw_flat, -1.0, 1.0, out=self._force)

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        # Each line is one or two kernels on the contiguous rows, in Gymnasium's operation order (so float64
        # trajectories agree). Scalars are 0-dim tensors (a Python float costs a second dispatch per op on
        # CPU), and masks are built with float arithmetic: torch's float->bool comparisons, bool->float casts
        # and masked_fill are not vectorised on CPU and cost 3-6x an add at N = 65536.
        c = self._consts
        x, v = self._rows
        # accel = power force - 0.0025 cos(3 x), computed as (-0.0025 cos(3 x)) + (power force) 1: negating a
        # float and swapping an addition's operands are exact, so this is Gymnasium's rounding in four kernels
        # instead of five. addcmul_(t1, t2, value) computes self + (value t1) t2 and the compiler may fuse the
        # last multiply-add; with t2 = 1 a fused one rounds as the separate ones (with t2 = power it does not,
        # and the trajectories change in the last bit: tests/rl/envs checks them bit for bit against the math)
        accel = torch.mul(x, c["three"], out=self._accel).cos_().mul_(c["minus_hill"])
        accel.addcmul_(action, c["one"], value=self.power)
        v.add_(accel).clamp_(-self.max_speed, self.max_speed)
        x.add_(v).clamp_(self.min_position, self.max_position)
        reward = torch.mul(self._raw_flat, self._raw_flat).mul_(c["cost"])  # the cost of the unclipped action
        # On CPU one min/max reduction rules out the wall and the goal for most steps (two and four kernels).
        low, high = (float(b) for b in torch.aminmax(x)) if self._host_reads_are_free else (-math.inf, math.inf)
        if low <= self._wall_at:
            # Gymnasium: v = 0 where x == min_position and v < 0, i.e. v = max(v, floor) with floor = +0.0 at
            # the wall and <= -max_speed (a no-op) elsewhere: floor = 2^100 (min_position - x) is exactly that
            # (x >= min_position after the clamp, a power-of-two scale is exact, x - x = +0.0, and any nonzero
            # gap times 2^100 is below -max_speed): one kernel instead of two comparisons, an and, a masked_fill
            v.clamp_(min=torch.add(c["wall"], x, alpha=-(2.0**100)))
        if high < self._goal_at:
            return reward, None  # no car is at the goal position, so none terminates
        # terminated = x >= goal_position and v >= goal_velocity, as min(x - goal_position, v - goal_velocity)
        # >= 0 (the sign of a float difference is exact), in place as a 0/1 float mask
        reached = torch.sub(x, c["goal_position"])
        torch.minimum(reached, v if self.goal_velocity == 0.0 else v - self.goal_velocity, out=reached)
        reached.ge_(0.0)
        return reward.add_(reached, alpha=100.0), reached.to(torch.bool)

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        # [2, N] rows -> [N, 2] rows: interleaving two rows is a complex number's memory layout, and building a
        # complex tensor is a vectorised kernel, unlike a transposed copy (2.5x faster at N = 65536)
        # (the state's rows were unbound once; unbinding again costs three dispatches per step)
        x, v = self._rows if state is self._state else state.unbind(0)
        return torch.view_as_real(torch.complex(x, v))
