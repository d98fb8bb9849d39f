"""Issue 13 audit: PPO trains on any Gymnasium VectorEnv with Box spaces, wrapped or not: numpy envs under
Gymnasium's own wrappers (observation normalisation, episode statistics), an AsyncVectorEnv, torch envs
under action wrappers (still tensors, no numpy round trip) and the numpy view of a torch env; other spaces
are refused with a message that names the space."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import vector as V

from icml24.rl.envs import BatchedPendulum, numpy_view
from icml24.rl.ppo import PPO, PPOConfig


def _sync(n: int = 3, env_id: str = "Pendulum-v1"):
    return gym.vector.SyncVectorEnv([lambda: gym.make(env_id, max_episode_steps=6) for _ in range(n)])


ENVS = {
    "NormalizeObservation(RecordEpisodeStatistics(SyncVectorEnv))": lambda: V.NormalizeObservation(
        V.RecordEpisodeStatistics(_sync())
    ),
    "NormalizeReward(SyncVectorEnv MountainCarContinuous)": lambda: V.NormalizeReward(
        _sync(env_id="MountainCarContinuous-v0")
    ),
    "AsyncVectorEnv": lambda: gym.vector.AsyncVectorEnv(
        [lambda: gym.make("Pendulum-v1", max_episode_steps=6) for _ in range(2)]
    ),
    "RecordEpisodeStatistics(numpy_view(torch env))": lambda: V.RecordEpisodeStatistics(
        numpy_view(BatchedPendulum(num_envs=4, max_episode_steps=6))
    ),
    "ClipAction(torch env)": lambda: V.ClipAction(BatchedPendulum(num_envs=4, max_episode_steps=6)),
}


@pytest.mark.parametrize("name", sorted(ENVS))
def test_ppo_learns_on_wrapped_gymnasium_envs(name):
    env = ENVS[name]()
    try:
        agent = PPO(env, config=PPOConfig(horizon=8, epochs=1), seed=0)
        assert agent.vec.is_torch == name.startswith("ClipAction")  # torch envs stay torch
        before = [p.detach().clone() for p in agent.policy.parameters()]
        stats = agent.learn(2)
        assert np.isfinite(stats["policy_loss"]) and np.isfinite(stats["value_loss"]) and stats["optimizer_steps"] >= 1
        assert any(not torch.equal(a, b) for a, b in zip(before, agent.policy.parameters()))  # it learned
    finally:
        env.close()


def test_ppo_refuses_a_discrete_action_space():
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    with pytest.raises((TypeError, ValueError), match="Box"):
        PPO(env, config=PPOConfig(horizon=8), seed=0)
