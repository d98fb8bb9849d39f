"""The push world: dynamics against hand-computed steps, the contact flag, the scripted expert, the layouts
(spurious correlation and shift), and the Gymnasium env through check_env."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from icml24.rl.caiac import (
    PushWorldConfig,
    PushWorldEnv,
    collect_push_dataset,
    push_step,
    reachable,
    rollout,
    sample_layouts,
    scripted_expert,
    sparse_reward,
)


def test_push_step_by_hand():
    s = np.array([[0.0, 0.0, 0.05, 0.0, 0.5, 0.5],  # block within reach: moves with the agent
                  [0.0, 0.0, 0.3, 0.0, -0.5, 0.5],  # nothing within reach
                  [0.95, 0.0, 0.3, 0.0, 0.0, 0.0]])  # agent at the wall: clipped  # fmt: skip
    a = np.array([[1.0, -0.5], [0.2, 0.4], [1.0, 0.0]])
    s2, moved = push_step(s, a)
    np.testing.assert_allclose(s2[0], [0.1, -0.05, 0.15, -0.05, 0.5, 0.5])
    np.testing.assert_allclose(s2[1], [0.02, 0.04, 0.3, 0.0, -0.5, 0.5])
    np.testing.assert_allclose(s2[2], [1.0, 0.0, 0.3, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(moved, [[True, False], [False, False], [False, False]])
    np.testing.assert_array_equal(reachable(s), [[True, True, False], [True, False, False], [True, False, False]])
    np.testing.assert_array_equal(push_step(s, 5 * a)[0], push_step(s, np.clip(5 * a, -1, 1))[0])


def test_reward_and_layouts():
    np.testing.assert_array_equal(sparse_reward(np.array([[0.0, 0.0], [0.0, 0.0]]), np.array([[0.05, 0], [0.5, 0]])),
                                  [0.0, -1.0])  # fmt: skip
    s, g = sample_layouts(2000, np.random.default_rng(0), shifted=False)
    assert np.corrcoef(s[:, 4], g[:, 0])[0, 1] < -0.95  # the distractor sits at minus the goal
    s, g = sample_layouts(2000, np.random.default_rng(0), shifted=True)
    assert abs(np.corrcoef(s[:, 4], g[:, 0])[0, 1]) < 0.1  # the shift: independent of the goal


def test_scripted_expert_solves_the_task_and_random_does_not():
    s0, g = sample_layouts(300, np.random.default_rng(1), shifted=True)
    assert rollout(scripted_expert, s0, g)["success"].mean() > 0.95
    rng = np.random.default_rng(2)
    assert rollout(lambda s, gg: rng.uniform(-1, 1, (len(s), 2)), s0, g)["success"].mean() < 0.1


def test_dataset_shapes_and_determinism():
    a, b = collect_push_dataset(3, 4, seed=5), collect_push_dataset(3, 4, seed=5)
    assert a.states.shape == (7, 51, 6) and a.actions.shape == (7, 50, 2) and a.expert.sum() == 3
    np.testing.assert_array_equal(a.states, b.states)
    # states follow the dynamics
    nxt = push_step(a.states[:, :-1].reshape(-1, 6), a.actions.reshape(-1, 2))[0]
    np.testing.assert_allclose(nxt, a.states[:, 1:].reshape(-1, 6))


def test_env_passes_check_env_and_matches_push_step():
    env = PushWorldEnv(PushWorldConfig(horizon=5))
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0, options={"shifted": True})
    nxt, r, term, trunc, info = env.step(np.array([0.5, 0.5], dtype=np.float32))
    np.testing.assert_allclose(nxt[:6], push_step(obs[None, :6], np.array([[0.5, 0.5]]))[0][0])
    assert not term and not trunc and r in (0.0, -1.0) and "is_success" in info
    with pytest.raises(TypeError, match="shifted"):
        PushWorldEnv(shifted="yes")
