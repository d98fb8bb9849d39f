"""Environments as torch tensors over N parallel copies, behind Gymnasium's vector-env API.

GPU simulators (Isaac Gym, the setting of SAPG, arXiv:2407.20230) step tens of thousands of environments as one
tensor operation; the CPU-side equivalent of "more environments" is a batched tensor step, not a Python loop
over ``gymnasium.Env`` objects. :class:`TorchVectorEnv` holds the state of ``num_envs`` copies as tensors on any
``device`` and implements

* ``reset(seed=..., options=...) -> (obs, info)`` and ``step(actions) -> (obs, reward, terminated, truncated,
  info)`` with torch tensors of leading dimension ``num_envs``;
* Gymnasium's *same-step* autoreset (``AutoresetMode.SAME_STEP``, the default): an environment whose episode
  ends is reset inside the same ``step``; the returned observation is the first one of the new episode, and the
  observation that ended the episode is in ``info["final_obs"]`` (valid where ``info["_final_obs"]`` is True),
  which is what a learner needs to bootstrap a truncated episode;
* or, with ``autoreset_mode=AutoresetMode.NEXT_STEP`` (Gymnasium's default, which its observation wrappers
  such as ``NormalizeObservation`` require), the semantics of ``SyncVectorEnv(autoreset_mode=NEXT_STEP)``: the
  step that ends an episode returns its last observation, and the *next* step only resets those environments
  (their actions are ignored; it returns the first observation of the new episode, reward 0 and terminated and
  truncated False); with ``AutoresetMode.DISABLED`` nothing is reset automatically: the user resets finished
  environments with ``reset(options={"reset_mask": mask})``, and stepping one before that raises. The mode is
  ``env.metadata["autoreset_mode"]`` (per instance);
* ``reset(options={"reset_mask": mask})`` with Gymnasium 1.x semantics: only the environments where the boolean
  ``mask`` (shape ``(num_envs,)``, numpy or torch) is True are reset; the others keep their state and step
  count, and the returned observation is the current one for them;
* a time limit (``max_episode_steps``) that reports ``truncated`` exactly like ``gymnasium.wrappers.TimeLimit``;
* ``single_observation_space``/``single_action_space`` and their batched ``observation_space``/``action_space``;
* input checks: actions of the wrong shape, or with NaN/inf entries, raise a ``ValueError``; finite actions
  outside the action box are clipped to it, as Gymnasium's ``Pendulum-v1`` and the ``ClipAction`` wrapper do.

Speed. The state is stored *variable-major*, ``[state_dim, num_envs]``, so that each state variable is one
contiguous row: elementwise torch kernels on contiguous rows vectorise, while the columns of an ``[N, k]``
tensor are strided and do not (that, and ``torch.stack`` of the observation, cost the first version half its
speed). ``env.state`` is the ``[num_envs, state_dim]`` *view* of that storage (writing into it sets the state);
the storage is allocated once, so the view stays valid across resets. On CPU at N = 4096 a torch kernel costs
about a microsecond of dispatch whatever it computes, so the steps count kernels: scalars are 0-dim tensors
(a Python float doubles an op's dispatch), temporaries are preallocated, masks are 0/1 floats made by float
arithmetic and selects are ``lerp`` with 0/1 weights (torch's float->bool comparisons, ``torch.where``,
``masked_fill`` and bool->float casts are not vectorised on CPU and cost 3-6x an add at N = 65536), and work the
state rules out is skipped: ``elapsed_steps`` is derived from a vector-step clock and each env's episode start, so
the time-limit comparison runs only on steps where some env can reach the limit, and on CPU (where reading a
reduction back costs no device sync) the mountain car skips its wall and goal tests when no car is at either. The
observation returned is a new tensor, never a view of the state. ``tests/rl/envs`` checks the fused step
against the plain out-of-place math, and ``benchmarks/bench_rl_envs.py`` times it against plain numpy, bare
torch and ``SyncVectorEnv``. The finiteness check of the actions is one reduction; the autoreset touches only the
finished columns. Gymnasium's vector wrappers that do numpy arithmetic on rewards (``RecordEpisodeStatistics``,
``NormalizeReward``) need numpy arrays: view the env through :func:`numpy_view` (zero-copy on CPU).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

__all__ = ["TorchVectorEnv", "as_action_tensor", "numpy_view"]


def as_action_tensor(
    actions: Any, *, num_envs: int, shape: tuple[int, ...], device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """Convert ``actions`` to a tensor of shape ``(num_envs, *shape)`` or raise a clear error.

    The fast path (a tensor of the right dtype and device) costs one reduction: the sum of the entries is
    finite unless an entry is NaN/inf (or the sum overflows, in which case the entries are checked one by one).
    """
    if isinstance(actions, torch.Tensor):
        a = actions if (actions.dtype == dtype and actions.device == device) else actions.to(device, dtype)
    elif isinstance(actions, (np.ndarray, list, tuple, float, int, np.floating, np.integer)):
        try:
            arr = np.asarray(actions, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"actions must be numeric (a torch.Tensor or numpy array), got {actions!r}") from exc
        a = torch.as_tensor(arr, device=device, dtype=dtype)
    else:
        raise TypeError(f"actions must be a torch.Tensor or numpy array, got {type(actions).__name__}")
    expected = (num_envs, *shape)
    if a.shape != expected:
        raise ValueError(f"actions must have shape {expected} (num_envs, *action_shape), got {tuple(a.shape)}")
    if not math.isfinite(float(a.sum())) and not bool(torch.isfinite(a).all()):
        raise ValueError("actions must be finite; got NaN or inf entries")
    return a


def _as_autoreset_mode(mode: Any) -> AutoresetMode:
    """``autoreset_mode`` as an ``AutoresetMode`` (the enum or its value: "SameStep", "NextStep", "Disabled")."""
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        for m in AutoresetMode:
            if mode in (m.value, m.name):
                return m
    names = ", ".join(f"AutoresetMode.{m.name} ({m.value!r})" for m in AutoresetMode)
    raise ValueError(f"autoreset_mode must be one of {names}, got {mode!r}")


def _as_reset_mask(mask: Any, num_envs: int, device: torch.device) -> torch.Tensor:
    """``options["reset_mask"]`` as a bool tensor on ``device`` (Gymnasium 1.x: bool, shape (num_envs,))."""
    if isinstance(mask, torch.Tensor):
        m = mask.to(device)
    elif isinstance(mask, np.ndarray):
        m = torch.as_tensor(mask, device=device)
    else:
        raise TypeError(f"options['reset_mask'] must be a numpy array or torch tensor, got {type(mask).__name__}")
    if m.dtype != torch.bool:
        raise TypeError(f"options['reset_mask'] must have a boolean dtype, got {m.dtype}")
    if m.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must have shape ({num_envs},), got {tuple(m.shape)}")
    return m


class TorchVectorEnv(gym.vector.VectorEnv):
    """Base class: subclasses define the spaces and three tensor functions on the variable-major state.

    Subclasses set ``single_observation_space``/``single_action_space`` before calling ``super().__init__``
    and implement

    * ``_sample_initial_state(n) -> state``: a new ``[state_dim, n]`` tensor of initial states;
    * ``_dynamics(state, action) -> (reward, terminated)``: advance ``state`` (``[state_dim, N]``, contiguous
      rows; ``self._rows`` holds one view per row) *in place* under ``action`` (what ``_clip_actions`` returns:
      ``[N, *action_shape]`` clipped to the box unless a subclass overrides it, e.g. to a flat or transposed
      layout; the unclipped actions are ``self._raw_action``); ``terminated`` may be ``None`` when no env
      terminates this step (a task that never terminates, or one whose state rules it out);
    * ``_observe(state) -> obs``: a new ``[n, *obs_shape]`` tensor (never a view of the state) for the
      ``[state_dim, n]`` state given.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        *,
        num_envs: int,
        max_episode_steps: int,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        self.autoreset_mode = _as_autoreset_mode(autoreset_mode)
        # per instance: Gymnasium's wrappers read ``env.metadata["autoreset_mode"]`` (an ``AutoresetMode``)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self._same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        # NEXT_STEP/DISABLED: the envs whose episode ended on the last step (None when there are none)
        self._pending: torch.Tensor | None = None
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if not isinstance(max_episode_steps, (int, np.integer)) or isinstance(max_episode_steps, bool) or (
            max_episode_steps < 1
        ):
            raise ValueError(f"max_episode_steps must be a positive int, got {max_episode_steps!r}")
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        try:
            self.device = torch.device(device)
        except (TypeError, RuntimeError) as exc:
            raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}") from exc
        self.num_envs = int(num_envs)
        self.max_episode_steps = int(max_episode_steps)
        self.dtype = dtype
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        low, high = self.single_action_space.low, self.single_action_space.high
        self._act_low = torch.as_tensor(low, device=self.device, dtype=dtype)
        self._act_high = torch.as_tensor(high, device=self.device, dtype=dtype)
        # One scalar bound for every action dimension: clamp with Python floats (no broadcast tensors).
        uniform = bool(np.all(low == low.flat[0]) and np.all(high == high.flat[0]))
        self._act_bounds: tuple[float, float] | None = (float(low.flat[0]), float(high.flat[0])) if uniform else None
        self._act_shape = tuple(self.single_action_space.shape)
        self._batch_act_shape = torch.Size((self.num_envs, *self._act_shape))
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 2))
        # The time limit without a per-env counter update per step: ``_clock`` counts vector steps, each env
        # remembers the clock value at which its episode began, and ``_oldest_start`` is a lower bound of those
        # starts, so ``_clock - _oldest_start < max_episode_steps`` proves that no env is truncated this step
        # (a Python comparison instead of two tensor ops; the bound is refreshed only when an env truncates).
        self._clock = 0
        self._episode_start = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._oldest_start = 0
        # The state lives in one buffer for the env's lifetime (resets write into it), so views of it stay valid.
        self._state: torch.Tensor = self._sample_initial_state(self.num_envs).contiguous()
        self._rows = self._state.unbind(0)  # one view per state variable, made once (indexing costs a dispatch)
        # On CPU a host read of a reduction is free (no device sync), so a step may skip work the data rules out
        self._host_reads_are_free = self.device.type == "cpu"
        self._needs_reset = True

    # ---- subclass interface -------------------------------------------------------------------------
    def _sample_initial_state(self, n: int) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _observe(self, state: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- state --------------------------------------------------------------------------------------
    @property
    def elapsed_steps(self) -> torch.Tensor:
        """Steps taken in each env's current episode (a new ``long`` tensor of shape ``(num_envs,)``)."""
        return self._clock - self._episode_start

    def _const(self, value: float) -> torch.Tensor:
        """A 0-dim tensor of the env's dtype: multiplying by it dispatches faster than by a Python float."""
        return torch.tensor(value, device=self.device, dtype=self.dtype)

    @property
    def state(self) -> torch.Tensor:
        """The ``[num_envs, state_dim]`` view of the state (writes into it change the environments)."""
        return self._state.T

    @state.setter
    def state(self, value: Any) -> None:
        v = torch.as_tensor(value, device=self.device, dtype=self.dtype)
        if v.shape != self._state.T.shape:
            raise ValueError(f"state must have shape {tuple(self._state.T.shape)}, got {tuple(v.shape)}")
        self._state.copy_(v.T)

    # ---- Gymnasium vector-env API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all environments, or those of ``options["reset_mask"]``; ``seed`` reseeds the env's generator."""
        if seed is not None:
            if isinstance(seed, (list, tuple)):
                seed = seed[0]
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
                raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
            self.generator.manual_seed(int(seed))
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        if options is not None and options.get("reset_mask") is not None:
            if self._needs_reset:
                raise RuntimeError("a partial reset (options['reset_mask']) needs a full reset() first")
            mask = _as_reset_mask(options["reset_mask"], self.num_envs, self.device)
            idx = mask.nonzero().squeeze(1)
            if idx.numel():
                self._state[:, idx] = self._sample_initial_state(int(idx.numel()))
                self._episode_start[idx] = self._clock  # later starts keep _oldest_start a lower bound
                if self._pending is not None:  # a reset env no longer waits for its (next-step) reset
                    self._pending = self._pending & ~mask
                    if not bool(self._pending.any()):
                        self._pending = None
            return self._observe(self._state), {}
        self._state.copy_(self._sample_initial_state(self.num_envs))
        self._episode_start.fill_(self._clock)
        self._oldest_start = self._clock
        self._needs_reset = False
        self._pending = None
        return self._observe(self._state), {}

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every environment one step; finished ones are reset in the same call (see module doc), or
        in the next one (``NEXT_STEP``), or not at all (``DISABLED``)."""
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        if not self._same_step:
            return self._step_deferred_reset(actions)
        a = self._checked_actions(actions)
        self._raw_action = a  # for a reward on the unclipped action (MountainCarContinuous-v0)
        reward, terminated = self._dynamics(self._state, self._clip_actions(a))
        self._clock += 1
        obs = self._observe(self._state)
        limit_reached = self._clock - self._oldest_start >= self.max_episode_steps
        if limit_reached:  # some env may reach the time limit now: the one comparison over N
            truncated = self._episode_start <= self._clock - self.max_episode_steps
        else:
            truncated = self._no_flags()
        if terminated is None:
            terminated = self._no_flags()
            done = truncated if limit_reached else None
        else:
            done = terminated | truncated if limit_reached else terminated
        info: dict[str, Any] = {}
        # ``any`` over the bytes of the bool mask: torch's uint8 reduction is vectorised, its bool one is not.
        if done is not None and bool(done.view(torch.uint8).any()):
            idx = done.nonzero().squeeze(1)
            info["final_obs"] = obs.clone()
            info["_final_obs"] = done.clone() if done is terminated else done
            fresh = self._sample_initial_state(int(idx.numel()))
            self._state[:, idx] = fresh
            self._episode_start[idx] = self._clock
            obs[idx] = self._observe(fresh)
        if limit_reached:  # the truncated envs restarted: tighten the bound (one reduction per truncation step)
            self._oldest_start = int(self._episode_start.min())
        return obs, reward, terminated, truncated, info

    def _step_deferred_reset(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """``step`` for ``NEXT_STEP`` and ``DISABLED``: the finished envs are not reset in the step that ends
        their episode; with ``NEXT_STEP`` the following step resets them (as ``SyncVectorEnv`` does)."""
        pending = self._pending
        if pending is not None and self.autoreset_mode == AutoresetMode.DISABLED:
            envs = pending.nonzero().squeeze(1).tolist()
            raise RuntimeError(
                f"autoreset_mode is DISABLED and the episodes of envs {envs} have ended: reset them with "
                "env.reset(options={'reset_mask': mask}) before the next step"
            )
        a = self._checked_actions(actions)
        self._raw_action = a
        # Every env steps (one batched call); the pending ones are then overwritten by their reset, so their
        # actions have no effect, as in SyncVectorEnv, where those sub-envs are reset instead of stepped.
        reward, terminated = self._dynamics(self._state, self._clip_actions(a))
        self._clock += 1
        if pending is not None:
            idx = pending.nonzero().squeeze(1)
            self._state[:, idx] = self._sample_initial_state(int(idx.numel()))
            self._episode_start[idx] = self._clock  # elapsed 0: these envs cannot be truncated below
            reward = torch.where(pending, torch.zeros((), device=self.device, dtype=reward.dtype), reward)
            if terminated is not None:
                terminated = terminated & ~pending
        obs = self._observe(self._state)
        limit_reached = self._clock - self._oldest_start >= self.max_episode_steps
        if limit_reached:
            truncated = self._episode_start <= self._clock - self.max_episode_steps
        else:
            truncated = self._no_flags()
        if terminated is None:
            terminated = self._no_flags()
        done = terminated | truncated
        self._pending = done if bool(done.view(torch.uint8).any()) else None
        if limit_reached:  # the bound stays the start of a truncated env until it is reset (next step or by hand)
            self._oldest_start = int(self._episode_start.min())
        return obs, reward, terminated, truncated, {}

    def _no_flags(self) -> torch.Tensor:
        """A new all-False ``(num_envs,)`` bool tensor on the env's device (``terminated``/``truncated``)."""
        # new_zeros inherits the device: torch.zeros(..., device=) parses the device on every call (0.6 us more)
        return self._episode_start.new_zeros(self.num_envs, dtype=torch.bool)

    def _checked_actions(self, actions: Any) -> torch.Tensor:
        if type(actions) is torch.Tensor and actions.dtype == self.dtype and actions.device == self.device:
            if actions.shape != self._batch_act_shape:
                raise ValueError(
                    f"actions must have shape {tuple(self._batch_act_shape)} (num_envs, *action_shape), got "
                    f"{tuple(actions.shape)}"
                )
            if not math.isfinite(float(actions.sum())) and not bool(torch.isfinite(actions).all()):
                raise ValueError("actions must be finite; got NaN or inf entries")
            return actions
        return as_action_tensor(
            actions, num_envs=self.num_envs, shape=self._act_shape, device=self.device, dtype=self.dtype
        )

    def _clip_actions(self, a: torch.Tensor) -> torch.Tensor:
        if self._act_bounds is not None:
            return torch.clamp(a, *self._act_bounds)
        return torch.clamp(a, self._act_low, self._act_high)

    def close_extras(self, **kwargs: Any) -> None:
        """Nothing to release: the state is a tensor."""

    def _uniform(self, n: int, low: Any, high: Any) -> torch.Tensor:
        """``[len(low), n]`` uniform samples (variable-major), or ``[n]`` for scalar bounds."""
        low_t = torch.as_tensor(low, device=self.device, dtype=self.dtype)
        high_t = torch.as_tensor(high, device=self.device, dtype=self.dtype)
        shape = (*low_t.shape, n)
        u = torch.rand(shape, generator=self.generator, device=self.device, dtype=self.dtype)
        if low_t.ndim:
            return u.mul_((high_t - low_t)[:, None]).add_(low_t[:, None])
        return u.mul_(high_t - low_t).add_(low_t)


def numpy_view(env: gym.vector.VectorEnv) -> gym.vector.VectorWrapper:
    """``env`` (torch tensors in and out) seen as a numpy vector env, for Gymnasium's numpy-only wrappers.

    ``RecordEpisodeStatistics``, ``NormalizeReward`` and the other ``gymnasium.wrappers.vector`` wrappers do
    numpy arithmetic on the rewards and flags (``episode_returns += rewards``, ``1 - terminated``), which a
    torch tensor does not support. On CPU the arrays share memory with the tensors (``Tensor.numpy()``: no
    copy); on another device they are copied to the host. Actions go back as tensors on the env's device.
    """
    if not isinstance(env, gym.vector.VectorEnv):
        raise TypeError(f"env must be a gymnasium VectorEnv, got {type(env).__name__}")
    return _NumpyView(env)


def _to_numpy(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


class _NumpyView(gym.vector.VectorWrapper):
    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self._device = getattr(env.unwrapped, "device", torch.device("cpu"))
        self._dtype = getattr(env.unwrapped, "dtype", torch.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        return _to_numpy(obs), _to_numpy(info)

    def step(self, actions: Any) -> tuple[Any, ...]:
        a = actions if isinstance(actions, torch.Tensor) else np.asarray(actions)
        a = torch.as_tensor(a, device=self._device, dtype=self._dtype)
        return tuple(_to_numpy(x) for x in self.env.step(a))  # type: ignore[return-value]
