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
    with pytest.raises(TypeError, match="Discrete.*Gaussian policy.*not discrete"):
        PPO(env, config=PPOConfig(horizon=8), seed=0)


def test_ppo_accepts_a_single_env_and_total_timesteps():
    """Issue 35: a single gymnasium.Env is wrapped in a one-env vector env; learn takes SB3's total_timesteps."""
    agent = PPO(gym.make("Pendulum-v1", max_episode_steps=6), config=PPOConfig(horizon=8, epochs=1), seed=0)
    assert agent.num_envs == 1 and isinstance(agent.env, gym.vector.SyncVectorEnv)
    stats = agent.learn(total_timesteps=20)  # ceil(20 / (1 env * 8 steps)) = 3 iterations
    assert agent.iterations == 3 and np.isfinite(stats["policy_loss"])
    result = agent.evaluate(gym.make("Pendulum-v1", max_episode_steps=6))  # evaluate takes a single env too
    assert np.isfinite(result["return"])
    vec = PPO(BatchedPendulum(num_envs=4, max_episode_steps=6), config=PPOConfig(horizon=8, epochs=1), seed=0)
    vec.learn(total_timesteps=65)  # 65 / 32 per iteration -> 3 iterations, at least 65 steps
    assert vec.iterations == 3 and vec.env_steps >= 65
    vec.learn(1)  # iterations, positionally, still works
    assert vec.iterations == 4
    for kwargs in ({}, {"iterations": 1, "total_timesteps": 8}):
        with pytest.raises(TypeError, match="exactly one"):
            vec.learn(**kwargs)
    with pytest.raises(ValueError, match="total_timesteps"):
        vec.learn(total_timesteps=0)
    with pytest.raises(TypeError, match="env must be"):
        PPO("Pendulum-v1")


def test_ppo_verbose_prints_one_line_per_k_iterations(capsys):
    agent = PPO(BatchedPendulum(num_envs=4, max_episode_steps=6), config=PPOConfig(horizon=4, epochs=1), seed=0)
    agent.learn(4, verbose=2)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[PPO]")]
    assert len(lines) == 2 and "iteration 4" in lines[-1]


def test_ppo_save_load_round_trip_gives_identical_actions(tmp_path):
    def make():
        return BatchedPendulum(num_envs=4, max_episode_steps=6)

    cfg = PPOConfig(horizon=8, epochs=2, hidden_sizes=(16, 16))
    agent = PPO(make(), config=cfg, seed=3)
    agent.learn(3)
    path = tmp_path / "ppo.pt"
    agent.save(path)
    loaded = PPO.load(path, make())
    obs = torch.randn(32, agent.obs_dim, generator=torch.Generator().manual_seed(0)) * 3
    assert loaded.config == cfg and loaded.seed == 3 and loaded.iterations == 3
    assert loaded.env_steps == agent.env_steps and loaded.optimizer_steps == agent.optimizer_steps
    assert torch.equal(loaded.act(obs), agent.act(obs))  # normalisers restored: same deterministic actions
    assert torch.equal(loaded.act(obs, deterministic=False), agent.act(obs, deterministic=False))  # same generator
    assert loaded.lr_schedule.lr == agent.lr_schedule.lr
    # a fresh agent with the same seed acts differently (it is the loaded state that makes them equal)
    assert not torch.equal(PPO(make(), config=cfg, seed=3).act(obs), agent.act(obs))
    # both keep training from the same optimizer state (finite, and the loaded one moves its weights)
    before = [p.detach().clone() for p in loaded.policy.parameters()]
    assert np.isfinite(loaded.learn(1)["policy_loss"])
    assert any(not torch.equal(a, b) for a, b in zip(before, loaded.policy.parameters()))
    with pytest.raises(ValueError, match="spaces"):
        PPO.load(path, gym.vector.SyncVectorEnv([lambda: gym.make("MountainCarContinuous-v0")]))
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a file written by PPO.save"):
        PPO.load(tmp_path / "other.pt", make())


def test_sapg_refuses_save_and_load_rather_than_dropping_its_block_state(tmp_path):
    from icml24.rl.sapg import SAPG, SAPGConfig

    agent = SAPG(BatchedPendulum(num_envs=4, max_episode_steps=6), config=SAPGConfig(num_blocks=2), seed=0)
    with pytest.raises(NotImplementedError, match="SAPG"):
        agent.save(tmp_path / "sapg.pt")
    with pytest.raises(NotImplementedError, match="SAPG"):
        SAPG.load(tmp_path / "sapg.pt", BatchedPendulum(num_envs=4))
