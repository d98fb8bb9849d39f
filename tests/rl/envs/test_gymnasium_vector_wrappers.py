"""Issue 13 audit: the batched torch envs under Gymnasium's common vector wrappers (test-only; the env code
is left to its owner). Action and reward wrappers run on the torch env itself; the numpy-arithmetic ones
(RecordEpisodeStatistics, NormalizeReward) through ``numpy_view``; ``reset_mask`` passes through a wrapper
stack with Gymnasium 1.x semantics. Gymnasium's *observation* wrappers refuse same-step autoreset envs
(``Expected autoreset_mode to be NEXT_STEP or DISABLED``): a known gap, pinned by a strict xfail below."""

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


@pytest.mark.xfail(strict=True, raises=ValueError,
                   reason="known gap (issue 13): Gymnasium's observation wrappers need NEXT_STEP or DISABLED "
                          "autoreset; TorchVectorEnv autoresets in the same step. Remove this xfail when the "
                          "envs offer another autoreset mode.")  # fmt: skip
@pytest.mark.parametrize("wrapper", ["NormalizeObservation", "TransformObservation", "DtypeObservation"])
def test_observation_wrappers(wrapper):
    make = {
        "NormalizeObservation": lambda e: V.NormalizeObservation(e),
        "TransformObservation": lambda e: V.TransformObservation(e, lambda o: 2 * o),
        "DtypeObservation": lambda e: V.DtypeObservation(e, np.float64),
    }[wrapper]
    _run(make(numpy_view(BatchedPendulum(num_envs=3, max_episode_steps=5))))
