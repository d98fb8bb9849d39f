"""The three Gymnasium autoreset modes of ``TorchVectorEnv`` (``autoreset_mode=``), checked step by step against
``gymnasium.vector.SyncVectorEnv`` with the same mode over the envs' single-env Gymnasium counterparts
(``Pendulum-v1``, ``MountainCarContinuous-v0``, ``DeceptivePointMassEnv``). Both sides start every episode from
the same fixed state (a test-only override of the initial-state draw), so that every step, including the
resets, can be compared: observations, rewards, terminated and truncated, ``final_obs`` for ``SAME_STEP``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from icml24.rl.envs import (
    BatchedDeceptivePointMass,
    BatchedMountainCarContinuous,
    BatchedMultiGoalPointMass,
    BatchedPendulum,
    DeceptivePointMassEnv,
    PointMassLayout,
)

ALL = [BatchedPendulum, BatchedMountainCarContinuous, BatchedDeceptivePointMass, BatchedMultiGoalPointMass]
MODES = [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED]
HORIZON = 6
NEAR_GOAL = PointMassLayout(goal=(0.12, 0.0), goal_radius=0.1, walls=())


class _FixedStart(gym.Wrapper):
    """Every episode of the wrapped Gymnasium env starts from ``set_start(unwrapped) -> obs``."""

    def __init__(self, env: gym.Env, set_start) -> None:
        super().__init__(env)
        self._set_start = set_start

    def reset(self, **kwargs):
        _, info = self.env.reset(**kwargs)  # resets the TimeLimit counter
        return self._set_start(self.env.unwrapped), info


def _fixed_start(cls, start):
    """``cls`` whose every episode starts from the ``[state_dim]`` state ``start``."""

    class Fixed(cls):
        def _sample_initial_state(self, n: int) -> torch.Tensor:
            return torch.tensor(start, device=self.device, dtype=self.dtype)[:, None].repeat(1, n).contiguous()

    return Fixed


def _pendulum_start(u):
    u.state = np.array([2.5, -0.5])
    return u._get_obs()


def _car_start(u):
    u.state = np.array([0.40, 0.012])
    return np.array(u.state, dtype=np.float32)


def _mass_start(u):
    u._p, u._v, u._t = np.zeros(2), np.zeros(2), 0
    return u._obs()


CASES = {  # name: (Gymnasium env factory, our fixed-start class and its kwargs, action scale)
    "pendulum": (lambda: _FixedStart(gym.make("Pendulum-v1", max_episode_steps=HORIZON), _pendulum_start),
                 (_fixed_start(BatchedPendulum, [2.5, -0.5]), {}), 3.0),
    "mountain car": (lambda: _FixedStart(gym.make("MountainCarContinuous-v0", max_episode_steps=HORIZON), _car_start),
                     (_fixed_start(BatchedMountainCarContinuous, [0.40, 0.012]), {}), 1.5),
    "point mass": (lambda: _FixedStart(DeceptivePointMassEnv(NEAR_GOAL, max_episode_steps=HORIZON), _mass_start),
                   (_fixed_start(BatchedDeceptivePointMass, [0.0] * 5), {"layout": NEAR_GOAL}), 1.5),
}  # fmt: skip


def _compare(case: str, mode: AutoresetMode, n: int = 4, steps: int = 80) -> dict[str, int]:
    make_ref, (cls, kwargs), scale = CASES[case]
    ref = SyncVectorEnv([make_ref for _ in range(n)], autoreset_mode=mode)
    env = cls(num_envs=n, max_episode_steps=HORIZON, dtype=torch.float64, autoreset_mode=mode, **kwargs)
    assert env.metadata["autoreset_mode"] is mode
    tol = {"rtol": 1e-5, "atol": 1e-5}
    o_ref, _ = ref.reset(seed=0)
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs.numpy(), o_ref, **tol)
    rng = np.random.default_rng(0)
    done = np.zeros(n, dtype=bool)
    seen = {"terminated": 0, "truncated": 0, "reset steps": 0, "masked resets": 0}
    for t in range(steps):
        mask = done.copy() if mode == AutoresetMode.DISABLED else np.zeros(n, dtype=bool)
        if t % 11 == 7:  # a partial reset by hand in every mode, also of envs waiting for their next-step reset
            mask |= rng.random(n) < 0.4
        if mask.any():
            o_ref, _ = ref.reset(options={"reset_mask": mask.copy()})
            obs, _ = env.reset(options={"reset_mask": mask.copy()})
            np.testing.assert_allclose(obs.numpy(), o_ref, **tol)
            seen["masked resets"] += int(mask.sum())
            done &= ~mask
        a = rng.uniform(-scale, scale, size=(n, *env.single_action_space.shape)).astype(np.float32)
        o_ref, r_ref, te_ref, tr_ref, info_ref = ref.step(a)
        obs, reward, term, trunc, info = env.step(a)
        np.testing.assert_allclose(obs.numpy(), o_ref, **tol)
        np.testing.assert_allclose(reward.numpy(), r_ref, **tol)
        assert term.tolist() == te_ref.tolist() and trunc.tolist() == tr_ref.tolist(), t
        if mode == AutoresetMode.SAME_STEP:
            assert ("final_obs" in info) == ("final_obs" in info_ref)
            if "final_obs" in info:
                assert info["_final_obs"].tolist() == info_ref["_final_obs"].tolist()
                for i in np.flatnonzero(info_ref["_final_obs"]):
                    np.testing.assert_allclose(info["final_obs"][i].numpy(), info_ref["final_obs"][i], **tol)
        else:
            assert "final_obs" not in info
            if mode == AutoresetMode.NEXT_STEP and done.any():  # the reset step: reward 0, flags False
                assert (reward.numpy()[done] == 0).all() and not (term | trunc).numpy()[done].any()
                seen["reset steps"] += int(done.sum())
        done = (te_ref | tr_ref).copy()
        seen["terminated"] += int(te_ref.sum())
        seen["truncated"] += int(tr_ref.sum())
    return seen


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_step_matches_sync_vector_env_with_the_same_mode(case: str, mode: AutoresetMode) -> None:
    seen = _compare(case, mode)
    assert seen["truncated"] > 0 and seen["masked resets"] > 0
    if case != "pendulum":  # the pendulum never terminates
        assert seen["terminated"] > 0
    if mode == AutoresetMode.NEXT_STEP:
        assert seen["reset steps"] > 0


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_next_step_mode_resets_on_the_step_after_the_episode_end(cls) -> None:
    env = cls(num_envs=3, max_episode_steps=5, autoreset_mode=AutoresetMode.NEXT_STEP)
    twin = cls(num_envs=3, max_episode_steps=5)  # same-step: the same dynamics, reset one step earlier
    env.reset(seed=0)
    twin.reset(seed=0)
    zeros = torch.zeros(env.action_space.shape)
    for _ in range(5):
        obs, reward, term, trunc, info = env.step(zeros)
        o2, r2, _, tr2, info2 = twin.step(zeros)
    assert trunc.all() and tr2.all() and info == {}
    assert torch.equal(obs, info2["final_obs"]) and torch.equal(reward, r2)  # the episode's last observation
    assert (env.elapsed_steps == 5).all()
    obs, reward, term, trunc, info = env.step(torch.ones(env.action_space.shape))  # ignored: only resets
    assert not (term | trunc).any() and torch.equal(reward, torch.zeros(3)) and info == {}
    assert (env.elapsed_steps == 0).all() and torch.equal(obs, env._observe(env._state))
    # the same draws from the env's generator as the twin's same-step reset: the new episodes start alike
    assert torch.equal(obs, o2) and torch.equal(env.state, twin.state)
    for _ in range(4):
        *_, trunc, _ = env.step(zeros)
        assert not trunc.any()
    assert env.step(zeros)[3].all()  # the next episode has 5 steps too


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_disabled_mode_refuses_to_step_an_ended_episode_until_it_is_reset(cls) -> None:
    env = cls(num_envs=3, max_episode_steps=4, autoreset_mode="Disabled")
    env.reset(seed=0)
    zeros = torch.zeros(env.action_space.shape)
    for _ in range(3):
        env.step(zeros)
    env.reset(options={"reset_mask": np.array([False, True, False])})
    obs, _, _, trunc, info = env.step(zeros)
    assert trunc.tolist() == [True, False, True] and info == {}
    assert torch.equal(obs, env._observe(env._state))  # not reset: the observation that ended the episode
    with pytest.raises(RuntimeError, match=r"DISABLED.*\[0, 2\].*reset_mask"):
        env.step(zeros)
    env.reset(options={"reset_mask": np.array([True, False, False])})
    with pytest.raises(RuntimeError, match=r"\[2\]"):
        env.step(zeros)
    env.reset(options={"reset_mask": np.array([False, False, True])})
    assert env.elapsed_steps.tolist() == [0, 1, 0]
    *_, trunc, _ = env.step(zeros)
    assert trunc.tolist() == [False, False, False]
    env.reset()  # a full reset clears everything too
    env.step(zeros)


def test_autoreset_mode_is_per_instance_and_accepts_the_enum_values_and_names() -> None:
    a = BatchedPendulum(num_envs=2, autoreset_mode="NextStep")
    b = BatchedPendulum(num_envs=2)
    c = BatchedMountainCarContinuous(num_envs=2, autoreset_mode="DISABLED")
    assert a.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP and a.autoreset_mode is AutoresetMode.NEXT_STEP
    assert b.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert c.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    assert BatchedPendulum.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP  # the class default is untouched
    for bad in ("next", "next_step", 1, None, True):
        with pytest.raises(ValueError, match="autoreset_mode"):
            BatchedPendulum(num_envs=2, autoreset_mode=bad)
