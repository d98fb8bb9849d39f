"""Environments as torch tensors over N parallel copies, behind Gymnasium's vector-env API.

GPU simulators (Isaac Gym, the setting of SAPG, arXiv:2407.20230) step tens of thousands of environments as one
tensor operation; the CPU-side equivalent of "more environments" is a batched tensor step, not a Python loop
over ``gymnasium.Env`` objects. :class:`TorchVectorEnv` holds the state of ``num_envs`` copies as tensors on any
``device`` and implements

* ``reset(seed=..., options=...) -> (obs, info)`` and ``step(actions) -> (obs, reward, terminated, truncated,
  info)`` with torch tensors of leading dimension ``num_envs``;
* Gymnasium's *same-step* autoreset (``AutoresetMode.SAME_STEP``): an environment whose episode ends is reset
  inside the same ``step``; the returned observation is the first one of the new episode, and the observation
  that ended the episode is in ``info["final_obs"]`` (valid where ``info["_final_obs"]`` is True), which is
  what a learner needs to bootstrap a truncated episode;
* a time limit (``max_episode_steps``) that reports ``truncated`` exactly like ``gymnasium.wrappers.TimeLimit``;
* ``single_observation_space``/``single_action_space`` and their batched ``observation_space``/``action_space``;
* input checks: actions of the wrong shape, or with NaN/inf entries, raise a ``ValueError``; finite actions
  outside the action box are clipped to it, as Gymnasium's ``Pendulum-v1`` and the ``ClipAction`` wrapper do.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

__all__ = ["TorchVectorEnv", "as_action_tensor"]


def as_action_tensor(
    actions: Any, *, num_envs: int, shape: tuple[int, ...], device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """Convert ``actions`` to a tensor of shape ``(num_envs, *shape)`` or raise a clear error."""
    if isinstance(actions, torch.Tensor):
        a = actions.to(device=device, dtype=dtype)
    elif isinstance(actions, (np.ndarray, list, tuple, float, int)):
        a = torch.as_tensor(np.asarray(actions, dtype=np.float64), device=device, dtype=dtype)
    else:
        raise TypeError(f"actions must be a torch.Tensor or numpy array, got {type(actions).__name__}")
    expected = (num_envs, *shape)
    if tuple(a.shape) != expected:
        raise ValueError(f"actions must have shape {expected} (num_envs, *action_shape), got {tuple(a.shape)}")
    if not bool(torch.isfinite(a).all()):
        raise ValueError("actions must be finite; got NaN or inf entries")
    return a


class TorchVectorEnv(gym.vector.VectorEnv):
    """Base class: subclasses define the spaces and four tensor functions.

    Subclasses set ``single_observation_space``/``single_action_space`` before calling ``super().__init__``
    and implement ``_sample_initial_state(n) -> state`` (a tensor with leading dim n), ``_dynamics(state,
    action) -> (next_state, reward, terminated)`` (it may update ``state`` in place and return it) and
    ``_observe(state) -> obs`` (a new tensor, never a view of the state). The state lives in ``self.state``;
    everything is batched over the leading dimension.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        *,
        num_envs: int,
        max_episode_steps: int,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if not isinstance(max_episode_steps, int) or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be a positive int, got {max_episode_steps!r}")
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.device = torch.device(device)
        self.dtype = dtype
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._act_low = torch.as_tensor(self.single_action_space.low, device=self.device, dtype=dtype)
        self._act_high = torch.as_tensor(self.single_action_space.high, device=self.device, dtype=dtype)
        self._act_shape = tuple(self.single_action_space.shape)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(torch.randint(0, 2**62, (1,)).item()))
        self.elapsed_steps = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.state: torch.Tensor = self._sample_initial_state(num_envs)
        self._needs_reset = True

    # ---- subclass interface -------------------------------------------------------------------------
    def _sample_initial_state(self, n: int) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _observe(self, state: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- Gymnasium vector-env API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all environments; ``seed`` reseeds the environment's own torch generator."""
        if seed is not None:
            if isinstance(seed, (list, tuple)):
                seed = seed[0]
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
                raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
            self.generator.manual_seed(int(seed))
        self.state = self._sample_initial_state(self.num_envs)
        self.elapsed_steps.zero_()
        self._needs_reset = False
        return self._observe(self.state), {}

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every environment one step; finished ones are reset in the same call (see module doc)."""
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        a = as_action_tensor(
            actions, num_envs=self.num_envs, shape=self._act_shape, device=self.device, dtype=self.dtype
        )
        a = torch.clamp(a, self._act_low, self._act_high)
        state, reward, terminated = self._dynamics(self.state, a)
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        obs = self._observe(state)
        done = terminated | truncated
        info: dict[str, Any] = {}
        if bool(done.any()):
            idx = done.nonzero().squeeze(1)
            info["final_obs"] = obs.clone()
            info["_final_obs"] = done
            state[idx] = self._sample_initial_state(int(idx.numel()))
            self.elapsed_steps[idx] = 0
            obs[idx] = self._observe(state[idx])
        self.state = state
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        """Nothing to release: the state is a tensor."""

    def _uniform(self, n: int, low: Any, high: Any) -> torch.Tensor:
        low_t = torch.as_tensor(low, device=self.device, dtype=self.dtype)
        high_t = torch.as_tensor(high, device=self.device, dtype=self.dtype)
        shape = (n, *low_t.shape)
        u = torch.rand(shape, generator=self.generator, device=self.device, dtype=self.dtype)
        return low_t + (high_t - low_t) * u
