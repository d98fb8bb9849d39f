"""Issue 13 audit: the batched torch envs under Gymnasium's common vector wrappers (test-only; the env code
is left to its owner). Action and reward wrappers run on the torch env itself; the numpy-arithmetic ones
(RecordEpisodeStatistics, NormalizeReward) through ``numpy_view``; ``reset_mask`` passes through a wrapper
stack with Gymnasium 1.x semantics. Gymnasium's *observation* wrappers refuse same-step autoreset envs
(``Expected autoreset_mode to be NEXT_STEP or DISABLED``, the envs' default); they run on envs made with
``autoreset_mode="NextStep"`` (or ``"Disabled"``) and transform exactly what the env returns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.wrappers import vector as V

from icml24.rl.envs import (
    BatchedDeceptivePointMass,
    BatchedMountainCarContinuous,
    BatchedMultiGoalPointMass,
    BatchedPendulum,
    numpy_view,
)

ALL = [BatchedPendulum, BatchedMountainCarContinuous, BatchedDeceptivePointMass, BatchedMultiGoalPointMass]

ON_TORCH = {
    "ClipAction": lambda e: V.ClipAction(e),
    "RescaleAction": lambda e: V.RescaleAction(e, -1.0, 1.0),
    "ClipReward": lambda e: V.ClipReward(e, -0.5, 0.5),
    "TransformReward": lambda e: V.TransformReward(e, lambda r: 2 * r),
}
ON_NUMPY = {
    **ON_TORCH,
    "RecordEpisodeStatistics": lambda e: V.RecordEpisodeStatistics(e),
    "NormalizeReward": lambda e: V.NormalizeReward(e, gamma=0.9),
    "NormalizeReward(RecordEpisodeStatistics)": lambda e: V.NormalizeReward(V.RecordEpisodeStatistics(e)),
}


def _run(env, steps: int = 5):  # max_episode_steps=5: the last step truncates
    env.reset(seed=0)
    out = None
    for _ in range(steps):
        out = env.step(env.action_space.sample())
    return out


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
@pytest.mark.parametrize("wrapper", sorted(ON_TORCH))
def test_action_and_reward_wrappers_on_the_torch_env(cls, wrapper):
    obs, reward, term, trunc, info = _run(ON_TORCH[wrapper](cls(num_envs=3, max_episode_steps=5)))
    assert isinstance(obs, torch.Tensor) and reward.shape == (3,) and trunc.any()
    if wrapper == "ClipReward":
        assert float(reward.abs().max()) <= 0.5


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
@pytest.mark.parametrize("wrapper", sorted(ON_NUMPY))
def test_common_wrappers_through_numpy_view(cls, wrapper):
    obs, reward, term, trunc, info = _run(ON_NUMPY[wrapper](numpy_view(cls(num_envs=3, max_episode_steps=5))))
    assert isinstance(obs, np.ndarray) and isinstance(reward, np.ndarray) and np.isfinite(reward).all()
    if "RecordEpisodeStatistics" in wrapper:
        assert info["_episode"].all() and info["episode"]["l"].tolist() == [5, 5, 5]


def test_reset_mask_through_a_wrapper_stack():
    """Gymnasium 1.x: reset(options={"reset_mask": m}) resets only the masked sub-envs, and
    RecordEpisodeStatistics restarts only their episode statistics."""
    base = BatchedPendulum(num_envs=4, max_episode_steps=50)
    env = V.RecordEpisodeStatistics(numpy_view(V.ClipAction(base)))
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.full((4, 1), 0.5, np.float32))
    before = base.state.clone()
    mask = np.array([True, False, False, True])
    obs, _ = env.reset(options={"reset_mask": mask})
    assert base.elapsed_steps.tolist() == [0, 3, 3, 0]
    assert torch.equal(base.state[1:3], before[1:3]) and not torch.equal(base.state[0], before[0])
    assert env.episode_lengths.tolist() == [0, 3, 3, 0]
    np.testing.assert_allclose(obs[1:3], base._observe(base._state)[1:3].numpy())


OBSERVATION_WRAPPERS = {
    "NormalizeObservation": lambda e: V.NormalizeObservation(e),
    "TransformObservation": lambda e: V.TransformObservation(e, lambda o: 2 * o),
    "DtypeObservation": lambda e: V.DtypeObservation(e, np.float64),
    "RescaleObservation": lambda e: V.RescaleObservation(e, -1.0, 1.0),
    "ClipObservation": lambda e: V.TransformObservation(e, lambda o: np.clip(o, -0.5, 0.5)),
}


@pytest.mark.parametrize("wrapper", sorted(OBSERVATION_WRAPPERS))
def test_observation_wrappers_refuse_the_default_same_step_autoreset(wrapper):
    with pytest.raises(ValueError, match="autoreset_mode"):
        OBSERVATION_WRAPPERS[wrapper](numpy_view(BatchedPendulum(num_envs=3, max_episode_steps=5)))


def _twin_observations(cls, mode, steps: int, seed: int = 0) -> list[np.ndarray]:
    """What the unwrapped env returns (reset, then ``steps`` steps of the actions ``_actions`` draws)."""
    env = numpy_view(cls(num_envs=3, max_episode_steps=5, autoreset_mode=mode))
    out = [env.reset(seed=seed)[0].copy()]
    for a in _actions(env, steps):
        out.append(env.step(a)[0].copy())
    return out


def _actions(env, steps: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.uniform(-1, 1, size=env.action_space.shape).astype(np.float32) for _ in range(steps)]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
@pytest.mark.parametrize("mode", ["NextStep", "Disabled"])
@pytest.mark.parametrize("wrapper", sorted(OBSERVATION_WRAPPERS))
def test_observation_wrappers_on_next_step_and_disabled_envs(cls, mode, wrapper):
    """Gymnasium's vector observation wrappers accept ``autoreset_mode`` NEXT_STEP (and DISABLED, except
    NormalizeObservation, which needs NEXT_STEP) and transform exactly what the env returns, over episode ends
    (max_episode_steps=5; with NEXT_STEP the sixth step only resets)."""
    if mode == "Disabled" and wrapper == "NormalizeObservation":
        with pytest.raises(ValueError, match="autoreset_mode"):
            OBSERVATION_WRAPPERS[wrapper](numpy_view(cls(num_envs=3, max_episode_steps=5, autoreset_mode=mode)))
        return
    env = OBSERVATION_WRAPPERS[wrapper](numpy_view(cls(num_envs=3, max_episode_steps=5, autoreset_mode=mode)))
    steps = 11 if mode == "NextStep" else 5  # NEXT_STEP: 5 steps, the reset step, 5 steps; DISABLED: 5
    raw = _twin_observations(cls, mode, steps)
    got = [env.reset(seed=0)[0]]
    for a in _actions(env, steps):
        obs, reward, term, trunc, info = env.step(a)
        got.append(obs)
    assert trunc.all() and all(isinstance(o, np.ndarray) and o.shape == raw[0].shape for o in got)
    if wrapper == "TransformObservation":
        expected = [2 * o for o in raw]
    elif wrapper == "DtypeObservation":
        expected = [o.astype(np.float64) for o in raw]
        assert all(o.dtype == np.float64 for o in got)
    elif wrapper == "ClipObservation":
        expected = [np.clip(o, -0.5, 0.5) for o in raw]
    elif wrapper == "RescaleObservation":
        space = cls(num_envs=3).single_observation_space
        expected = [-1 + 2 * (o - space.low) / (space.high - space.low) for o in raw]
    else:  # NormalizeObservation: the running mean/var of every batch seen, the last one included
        stacked = np.concatenate(raw)
        np.testing.assert_allclose(env.obs_rms.mean, stacked.mean(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(env.obs_rms.var, stacked.var(0), rtol=1e-3, atol=1e-5)
        expected = [got[-1]]
        got = [(raw[-1] - env.obs_rms.mean) / np.sqrt(env.obs_rms.var + env.epsilon)]
    for o, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-6)


def test_observation_wrapper_on_the_torch_env_itself():
    """TransformObservation with torch arithmetic needs no numpy view."""
    env = V.TransformObservation(BatchedPendulum(num_envs=3, max_episode_steps=5, autoreset_mode="NextStep"),
                                 lambda o: o * 2)  # fmt: skip
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and float(obs.abs().max()) <= 2.0 * 8.0


def test_record_episode_statistics_counts_episodes_right_on_a_next_step_env():
    """RecordEpisodeStatistics leaves the reset step of NEXT_STEP out of the next episode: 5 steps each."""
    base = BatchedPendulum(num_envs=3, max_episode_steps=5, autoreset_mode="NextStep")
    env = V.RecordEpisodeStatistics(V.NormalizeObservation(numpy_view(base)))
    env.reset(seed=0)
    lengths = []
    for _ in range(17):
        *_, info = env.step(np.zeros((3, 1), np.float32))
        if "episode" in info:
            lengths.append(info["episode"]["l"].tolist())
    assert lengths == [[5, 5, 5]] * 3 and env.episode_lengths.tolist() == [5, 5, 5]  # steps 5, 11 and 17
