"""Any Gymnasium ``VectorEnv`` with 1-D ``Box`` spaces as torch tensors on one device, for the PPO loop.

Torch environments (outputs are ``torch.Tensor``) pass through without copies. Numpy environments
(``SyncVectorEnv``, ``AsyncVectorEnv``, wrapped or not) are converted at the boundary: observations, rewards
and flags with ``torch.as_tensor`` (no copy for float32 arrays on CPU), actions back with ``.cpu().numpy()``.

Autoreset (https://farama.org/Vector-Autoreset-Mode): with ``SAME_STEP`` a finished environment is reset inside
``step`` and its last observation is in ``info["final_obs"]`` (a batched array, or an object array of per-env
observations as ``SyncVectorEnv`` returns it); with ``NEXT_STEP`` (Gymnasium's default) the *following* step
only resets that environment, ignores its action and returns reward 0: :meth:`VecEnvAdapter.step` flags such a
step as not a transition (``valid`` False) so that the learner leaves it out. ``DISABLED`` is refused.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

__all__ = ["VecEnvAdapter", "as_vector_env"]


def as_vector_env(env: Any) -> gym.vector.VectorEnv:
    """``env`` itself if it is a ``VectorEnv``; a single ``gymnasium.Env`` wrapped in a one-env
    ``SyncVectorEnv`` (next-step autoreset, as Stable-Baselines3 wraps a single env in a ``DummyVecEnv``)."""
    if isinstance(env, gym.vector.VectorEnv):
        return env
    if isinstance(env, gym.Env):
        return gym.vector.SyncVectorEnv([lambda: env])
    raise TypeError(
        f"env must be a gymnasium VectorEnv (e.g. a TorchVectorEnv or a SyncVectorEnv) or a single gymnasium.Env, "
        f"got {type(env).__name__}"
    )


def _box_dim(space: Any, name: str) -> int:
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        raise TypeError(
            f"env.{name} is {space!r}: this PPO has a Gaussian policy with rl_games' bounds loss on its mean (the "
            "setting SAPG runs) and supports only 1-D gymnasium.spaces.Box spaces, not discrete ones"
        )
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise TypeError(f"env.{name} must be a 1-D gymnasium.spaces.Box, got {space!r}")
    return int(space.shape[0])


class VecEnvAdapter:
    """Steps a Gymnasium ``VectorEnv`` with torch actions and returns torch tensors on ``device``."""

    def __init__(self, env: Any, *, device: str | torch.device | None = None) -> None:
        if not isinstance(env, gym.vector.VectorEnv):
            raise TypeError(
                f"env must be a gymnasium VectorEnv (e.g. a TorchVectorEnv or a SyncVectorEnv), got {type(env).__name__}"
            )
        self.env = env
        self.num_envs = int(env.num_envs)
        self.obs_dim = _box_dim(env.single_observation_space, "single_observation_space")
        self.act_dim = _box_dim(env.single_action_space, "single_action_space")
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if isinstance(mode, str):
            mode = AutoresetMode(mode)
        if mode == AutoresetMode.DISABLED:
            raise ValueError(
                "env.metadata['autoreset_mode'] must be AutoresetMode.SAME_STEP or NEXT_STEP (PPO's rollouts need "
                "an env that resets itself), got DISABLED"
            )
        self.autoreset_mode = mode
        env_device = getattr(env.unwrapped, "device", None)
        self.env_device = torch.device(env_device) if isinstance(env_device, (str, torch.device)) else None
        self.device = torch.device(device) if device is not None else (self.env_device or torch.device("cpu"))
        self.is_torch: bool | None = None  # known after the first reset
        self.max_episode_steps = self._max_steps()
        self._prev_done = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _max_steps(self) -> int | None:
        m = getattr(self.env.unwrapped, "max_episode_steps", None)
        if isinstance(m, int):
            return m
        spec = getattr(self.env, "spec", None)
        return getattr(spec, "max_episode_steps", None) if spec is not None else None

    def _tensor(self, x: Any, dtype: torch.dtype) -> torch.Tensor:
        if isinstance(x, torch.Tensor):
            return x.to(self.device, dtype)
        return torch.as_tensor(np.asarray(x), device=self.device).to(dtype)

    def reset(self, *, seed: int | None = None) -> torch.Tensor:
        obs, _ = self.env.reset(seed=seed)
        self.is_torch = isinstance(obs, torch.Tensor)
        self._prev_done.zero_()
        return self._tensor(obs, torch.float32)

    def _final_obs(self, info: dict[str, Any], obs: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if "final_obs" not in info:
            return None, None
        mask = self._tensor(info["_final_obs"], torch.bool)
        final = info["final_obs"]
        if isinstance(final, np.ndarray) and final.dtype == object:  # SyncVectorEnv: one entry per env, or None
            out = obs.clone()
            for i in np.flatnonzero(np.asarray(info["_final_obs"])):
                out[i] = torch.as_tensor(np.asarray(final[i], dtype=np.float32), device=self.device)
            return out, mask
        return self._tensor(final, torch.float32), mask

    def step(self, actions: torch.Tensor) -> dict[str, torch.Tensor]:
        """One vector step: ``obs`` (what the policy sees next), ``next_obs`` (the true next state of this
        transition), ``reward``, ``terminated``, ``truncated`` and ``valid`` (False for next-step resets)."""
        if self.is_torch:
            a: Any = actions if self.env_device is None else actions.to(self.env_device)
        else:
            a = actions.detach().cpu().numpy().astype(self.env.single_action_space.dtype, copy=False)
        obs, reward, terminated, truncated, info = self.env.step(a)
        obs_t = self._tensor(obs, torch.float32)
        term = self._tensor(terminated, torch.bool)
        trunc = self._tensor(truncated, torch.bool)
        rew = self._tensor(reward, torch.float32)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            final, mask = self._final_obs(info, obs_t)
            next_obs = obs_t if final is None else torch.where(mask.unsqueeze(1), final, obs_t)
            valid = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        else:
            # NEXT_STEP: obs of a finishing step *is* its final observation; the next step is a pure reset.
            next_obs = obs_t
            valid = ~self._prev_done
            self._prev_done = (term | trunc) & valid
            term, trunc = term & valid, trunc & valid
        return {"obs": obs_t, "next_obs": next_obs, "reward": rew, "terminated": term, "truncated": trunc,
                "valid": valid}  # fmt: skip
