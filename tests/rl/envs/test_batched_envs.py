"""Batched torch envs: Gymnasium reference dynamics, vector-env API, autoreset, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.rl.envs import (
    BatchedDeceptivePointMass,
    BatchedMountainCarContinuous,
    BatchedMultiGoalPointMass,
    BatchedPendulum,
    DeceptivePointMassEnv,
    PointMassLayout,
)

ALL = [BatchedPendulum, BatchedMountainCarContinuous, BatchedDeceptivePointMass, BatchedMultiGoalPointMass]


def _trajectories_match(batched, gym_id: str, n: int, steps: int, act_scale: float, rtol: float) -> None:
    rng = np.random.default_rng(0)
    refs = [gym.make(gym_id).unwrapped for _ in range(n)]
    env = batched(num_envs=n, dtype=torch.float64)
    env.reset(seed=0)
    for i, ref in enumerate(refs):
        ref.reset(seed=i)
        # Start both from the same state: copy the reference's initial state into the batched env.
        env.state[i] = torch.as_tensor(np.asarray(ref.state, dtype=np.float64))
    for _ in range(steps):
        # Out-of-range actions on purpose: both must clip them the same way.
        actions = rng.uniform(-act_scale, act_scale, size=(n, 1)).astype(np.float32)
        obs, reward, term, trunc, _ = env.step(actions)
        for i, ref in enumerate(refs):
            o, r, te, _, _ = ref.step(actions[i])
            np.testing.assert_allclose(obs[i].numpy(), o, rtol=rtol, atol=1e-5)
            assert reward[i].item() == pytest.approx(r, rel=rtol, abs=1e-5)
            assert bool(term[i]) == te


def test_pendulum_matches_gymnasium_pendulum_v1() -> None:
    _trajectories_match(BatchedPendulum, "Pendulum-v1", n=6, steps=150, act_scale=3.0, rtol=1e-5)


def test_mountain_car_matches_gymnasium_mountain_car_continuous() -> None:
    _trajectories_match(
        BatchedMountainCarContinuous, "MountainCarContinuous-v0", n=4, steps=200, act_scale=1.5, rtol=1e-4
    )


def test_mountain_car_goal_terminates_with_reward() -> None:
    env = BatchedMountainCarContinuous(num_envs=2)
    env.reset(seed=0)
    env.state[:] = torch.tensor([[0.449, 0.05], [-0.5, 0.0]])
    _, reward, term, _, info = env.step(torch.zeros(2, 1))
    assert term.tolist() == [True, False]
    assert reward[0].item() == pytest.approx(100.0)
    assert info["final_obs"][0, 0].item() >= 0.45
    assert -0.6 <= env.state[0, 0].item() <= -0.4  # reset in the same step


@pytest.mark.parametrize("cls", ALL)
def test_vector_env_api(cls) -> None:
    env = cls(num_envs=5)
    assert isinstance(env, gym.vector.VectorEnv)
    obs, info = env.reset(seed=3)
    assert obs.shape == (5, *env.single_observation_space.shape)
    assert env.observation_space.shape == obs.shape
    assert env.action_space.shape == (5, *env.single_action_space.shape)
    out = env.step(torch.zeros(env.action_space.shape))
    assert [x.shape for x in out[:4]] == [obs.shape, (5,), (5,), (5,)]
    assert out[2].dtype == torch.bool and out[3].dtype == torch.bool
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP


@pytest.mark.parametrize("cls", ALL)
def test_same_seed_same_rollout(cls) -> None:
    def roll(seed: int) -> torch.Tensor:
        env = cls(num_envs=7)
        obs, _ = env.reset(seed=seed)
        g = torch.Generator().manual_seed(1)
        out = [obs]
        for _ in range(30):
            obs, *_ = env.step(torch.rand(env.action_space.shape, generator=g) * 2 - 1)
            out.append(obs)
        return torch.stack(out)

    assert torch.equal(roll(0), roll(0))
    assert not torch.equal(roll(0), roll(1))


@pytest.mark.parametrize("cls", ALL)
def test_time_limit_truncates_and_autoresets(cls) -> None:
    env = cls(num_envs=3, max_episode_steps=5)
    env.reset(seed=0)
    zeros = torch.zeros(env.action_space.shape)
    for _ in range(4):
        _, _, _, trunc, _ = env.step(zeros)
        assert not trunc.any()
    obs, _, _, trunc, info = env.step(zeros)
    assert trunc.all()
    assert info["_final_obs"].all()
    assert not torch.equal(info["final_obs"], obs)  # obs is the first observation of the next episode
    assert (env.elapsed_steps == 0).all()


@pytest.mark.parametrize("cls", ALL)
def test_bad_actions_raise(cls) -> None:
    env = cls(num_envs=4)
    env.reset(seed=0)
    shape = env.action_space.shape
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(3, *shape[1:]))
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(shape[0]))
    bad = torch.zeros(shape)
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        env.step(bad)
    with pytest.raises(TypeError, match="actions"):
        env.step("left")


def test_step_before_reset_and_bad_constructor_args() -> None:
    with pytest.raises(RuntimeError, match="reset"):
        BatchedPendulum(num_envs=2).step(torch.zeros(2, 1))
    with pytest.raises(ValueError, match="num_envs"):
        BatchedPendulum(num_envs=0)
    with pytest.raises(ValueError, match="max_episode_steps"):
        BatchedPendulum(num_envs=2, max_episode_steps=0)
    with pytest.raises(ValueError, match="walls"):
        PointMassLayout(walls=((0.0, 0.0, -1.0, 1.0),))


@settings(max_examples=25, deadline=None)
@given(st.floats(-50, 50), st.floats(-50, 50))
def test_out_of_range_actions_are_clipped(a0: float, a1: float) -> None:
    env = BatchedDeceptivePointMass(num_envs=1)
    env.reset(seed=0)
    twin = BatchedDeceptivePointMass(num_envs=1)
    twin.reset(seed=0)
    o1, r1, *_ = env.step(torch.tensor([[a0, a1]]))
    o2, r2, *_ = twin.step(torch.tensor([[a0, a1]]).clamp(-1, 1))
    assert torch.equal(o1, o2) and torch.equal(r1, r2)


def test_point_mass_matches_its_plain_gymnasium_twin() -> None:
    rng = np.random.default_rng(0)
    layout = PointMassLayout(goal=(-1.0, 1.0), goal_radius=0.6)
    ref = DeceptivePointMassEnv(layout)
    env = BatchedDeceptivePointMass(num_envs=1, layout=layout, dtype=torch.float64)
    o_ref, _ = ref.reset(seed=0)
    env.reset(seed=0)
    env.state[0, :2] = torch.as_tensor(ref._p)
    for _ in range(100):
        a = rng.uniform(-1.5, 1.5, size=(1, 2))
        o, r, te, tr, _ = env.step(a)
        o_ref, r_ref, te_ref, tr_ref, _ = ref.step(a[0])
        if te_ref or tr_ref:
            assert bool(te[0]) == te_ref and bool(tr[0]) == tr_ref
            assert r[0].item() == pytest.approx(r_ref)
            break
        np.testing.assert_allclose(o[0].numpy(), o_ref, atol=1e-6)
        assert r[0].item() == pytest.approx(r_ref)


def test_point_mass_walls_block_and_goal_terminates() -> None:
    env = BatchedDeceptivePointMass(num_envs=3)
    env.reset(seed=0)
    env.state[:] = torch.tensor(
        [[-1.98, 2.0, -2.0, 0.0, 0.0], [-3.3, 2.95, 0.0, 0.0, 0.0], [0.8, 0.0, 0.0, 0.0, 0.0]]
    )
    _, reward, term, _, _ = env.step(torch.tensor([[-1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    assert env.state[0, 0].item() == pytest.approx(-1.98) and env.state[0, 2].item() == 0.0  # blocked
    assert term.tolist() == [False, True, False]
    assert reward.tolist() == pytest.approx([0.0, 20.0, 0.1])


def test_plain_point_mass_passes_gymnasium_env_checker() -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(DeceptivePointMassEnv(), skip_render_check=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_cuda() -> None:
    env = BatchedDeceptivePointMass(num_envs=64, device="cuda")
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(torch.zeros(64, 2, device="cuda"))
    assert obs.device.type == "cuda"


# ---- Gymnasium 1.x conventions: reset_mask, vector wrappers, the state view ---------------------------------


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("as_numpy", [False, True])
def test_reset_mask_resets_only_the_masked_envs(cls, as_numpy: bool) -> None:
    env = cls(num_envs=4, max_episode_steps=50)
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.full(env.action_space.shape, 0.7))
    before = env.state.clone()
    mask = torch.tensor([True, False, True, False])
    obs, info = env.reset(options={"reset_mask": mask.numpy() if as_numpy else mask})
    assert info == {}
    assert torch.equal(env.state[1], before[1]) and torch.equal(env.state[3], before[3])
    assert not torch.equal(env.state[0], before[0]) and not torch.equal(env.state[2], before[2])
    assert env.elapsed_steps.tolist() == [0, 3, 0, 3]
    assert torch.equal(obs, env._observe(env._state))


def test_reset_mask_rejects_bad_masks() -> None:
    env = BatchedPendulum(num_envs=3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": np.ones(2, dtype=bool)})
    with pytest.raises(TypeError, match="reset_mask"):
        env.reset(options={"reset_mask": np.ones(3)})
    with pytest.raises(TypeError, match="reset_mask"):
        env.reset(options={"reset_mask": [True, False, True]})
    with pytest.raises(RuntimeError, match="full reset"):
        BatchedPendulum(num_envs=3).reset(options={"reset_mask": np.ones(3, dtype=bool)})


def test_state_is_a_writable_view_of_the_variable_major_storage() -> None:
    env = BatchedPendulum(num_envs=3)
    env.reset(seed=0)
    assert env.state.shape == (3, 2) and env._state.shape == (2, 3) and env._state.is_contiguous()
    env.state[1] = torch.tensor([0.5, -0.25])
    assert env._state[:, 1].tolist() == [0.5, -0.25]
    env.state = torch.zeros(3, 2)
    assert torch.equal(env._state, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="state"):
        env.state = torch.zeros(2, 2)


@pytest.mark.parametrize("cls", ALL)
def test_gymnasium_record_episode_statistics_and_normalize_reward(cls) -> None:
    from gymnasium.wrappers.vector import NormalizeReward, RecordEpisodeStatistics

    from icml24.rl.envs import numpy_view

    base = cls(num_envs=3, max_episode_steps=6)
    env = NormalizeReward(RecordEpisodeStatistics(numpy_view(base)), gamma=0.9)
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.shape == (3, *base.single_observation_space.shape)
    for _ in range(6):
        obs, reward, term, trunc, info = env.step(np.zeros((3, *base.single_action_space.shape), np.float32))
        assert isinstance(reward, np.ndarray) and reward.shape == (3,)
    assert trunc.all() and info["_episode"].all()
    assert info["episode"]["l"].tolist() == [6, 6, 6]
    assert np.isfinite(info["episode"]["r"]).all()
    # the raw episode return equals the sum of the unwrapped rewards (RecordEpisodeStatistics is inside)
    twin = cls(num_envs=3, max_episode_steps=6)
    twin.reset(seed=0)
    raw = sum(twin.step(torch.zeros(3, *base.single_action_space.shape))[1].double() for _ in range(6))
    np.testing.assert_allclose(info["episode"]["r"], raw.numpy(), rtol=1e-5)


def test_numpy_view_shares_memory_on_cpu() -> None:
    from icml24.rl.envs import numpy_view
    from icml24.rl.envs.batched import _to_numpy

    env = numpy_view(BatchedPendulum(num_envs=4))
    env.reset(seed=0)
    obs, *_ = env.step(np.zeros((4, 1), np.float32))
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32
    t = torch.zeros(3)
    _to_numpy({"x": t})["x"][0] = 1.0  # a view, not a copy
    assert t[0].item() == 1.0
    with pytest.raises(TypeError, match="env"):
        numpy_view(object())


# ---- the multi-goal point mass -------------------------------------------------------------------------------


def test_multi_goal_point_mass_matches_the_single_goal_task_per_task() -> None:
    """Same dynamics and decoy as the single-goal env; only the env's own goal pays and terminates."""
    goals = ((-3.3, 3.3), (3.3, -3.3))
    multi = BatchedMultiGoalPointMass(num_envs=64, goals=goals, dtype=torch.float64)
    multi.reset(seed=0)
    task = multi.task().clone()
    assert set(task.tolist()) == {0, 1}
    singles = [BatchedDeceptivePointMass(num_envs=64, layout=PointMassLayout(goal=g, walls=()), dtype=torch.float64)
               for g in goals]  # fmt: skip
    for env in singles:
        env.reset(seed=0)
        env.state = multi.state[:, :5]
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        a = torch.rand(64, 2, generator=g, dtype=torch.float64) * 2.4 - 1.2
        obs, rew, term, _, info = multi.step(a)
        outs = [env.step(a) for env in singles]
        for k, (o, r, te, _, inf) in enumerate(outs):
            mine = task == k
            assert torch.equal(rew[mine], r[mine]) and torch.equal(term[mine], te[mine])
            if "final_obs" in info:
                fin = info["_final_obs"] & mine
                assert torch.allclose(info["final_obs"][fin, :5], inf["final_obs"][fin])
            elif mine.any():
                assert torch.allclose(obs[mine, :5], o[mine])
        if term.any() or "final_obs" in info:
            break  # an autoreset draws a new task: the single-goal twins no longer track
        task = multi.task().clone()


def test_multi_goal_point_mass_pays_only_its_own_goal_and_shows_it_one_hot() -> None:
    env = BatchedMultiGoalPointMass(num_envs=4, goals=((0.0, 1.0), (0.0, -1.0)))
    obs, _ = env.reset(seed=1)
    onehot = obs[:, 5:]
    assert torch.equal(onehot.sum(1), torch.ones(4)) and torch.equal(onehot.argmax(1), env.task())
    env.state[:, 0:2] = torch.tensor([[0.0, 0.95], [0.0, 0.95], [0.0, -0.95], [0.0, -0.95]])
    env.state[:, 2:4] = 0.0
    env.state[:, 5] = torch.tensor([0.0, 1.0, 0.0, 1.0])
    _, rew, term, _, info = env.step(torch.zeros(4, 2))
    # env 0 is in its goal, env 3 too; env 1 and 2 sit in the other task's goal: no pay, no end
    assert term.tolist() == [True, False, False, True]
    assert rew[[0, 3]].tolist() == [20.0, 20.0] and rew[1].item() == 0.0
    assert info["_final_obs"].tolist() == [True, False, False, True]
    assert env.elapsed_steps.tolist() == [0, 1, 1, 0]


def test_multi_goal_point_mass_draws_tasks_uniformly_and_rejects_bad_goals() -> None:
    env = BatchedMultiGoalPointMass(num_envs=8000)
    env.reset(seed=0)
    counts = torch.bincount(env.task(), minlength=4).float() / 8000
    assert torch.allclose(counts, torch.full((4,), 0.25), atol=0.02)
    for bad in ((), ((1.0,),), ((1.0, float("nan")),), "corners"):
        with pytest.raises((TypeError, ValueError), match="goals"):
            BatchedMultiGoalPointMass(num_envs=2, goals=bad)
    fixed = BatchedMultiGoalPointMass(num_envs=50, fixed_task=2, max_episode_steps=3)
    fixed.reset(seed=0)
    for _ in range(4):  # through an autoreset
        obs, *_ = fixed.step(torch.zeros(50, 2))
        assert (fixed.task() == 2).all() and (obs[:, 7] == 1.0).all()
    for bad in (4, -1):
        with pytest.raises(ValueError, match="fixed_task"):
            BatchedMultiGoalPointMass(num_envs=2, fixed_task=bad)


# ---- the fused in-place step against the plain math, with walls, goals, time limits and partial resets ----------


def _reference_pendulum(env, s, a):
    th, thdot = s[:, 0], s[:, 1]
    u = a[:, 0].clamp(-2.0, 2.0)
    cost = (((th + np.pi) % (2 * np.pi)) - np.pi) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
    thdot = (thdot + (15.0 * torch.sin(th) + 3.0 * u) * 0.05).clamp(-8.0, 8.0)
    th = th + thdot * 0.05
    return torch.stack((th, thdot), 1), torch.stack((th.cos(), th.sin(), thdot), 1), -cost, torch.zeros_like(th) > 0


def _reference_mountain_car(env, s, a):
    x, v, raw = s[:, 0], s[:, 1], a[:, 0]
    v = (v + (raw.clamp(-1, 1) * 0.0015 - torch.cos(3 * x) * 0.0025)).clamp(-0.07, 0.07)
    x = (x + v).clamp(-1.2, 0.6)
    v = torch.where((x == -1.2) & (v < 0), torch.zeros_like(v), v)
    term = (x >= 0.45) & (v >= env.goal_velocity)
    nxt = torch.stack((x, v), 1)
    return nxt, nxt.clone(), 100.0 * term.to(s.dtype) - 0.1 * raw**2, term


def _reference_point_mass(env, s, a):
    lay = env.layout
    p, v, t = s[:, 0:2], s[:, 2:4], s[:, 4]
    v = 0.9 * v + 0.3 * a.clamp(-1, 1)
    p_new = (p + 0.1 * v).clamp(-lay.half_width, lay.half_width)
    hit = torch.zeros(len(s), dtype=torch.bool)
    for x0, y0, x1, y1 in lay.walls:
        hit |= (p_new[:, 0] >= x0) & (p_new[:, 0] <= x1) & (p_new[:, 1] >= y0) & (p_new[:, 1] <= y1)
    p = torch.where(hit[:, None], p, p_new)
    v = torch.where(hit[:, None], torch.zeros_like(v), v)
    t = t + 1
    in_goal = ((p - torch.tensor(lay.goal, dtype=s.dtype)) ** 2).sum(1) < lay.goal_radius**2
    in_decoy = ((p - torch.tensor(lay.decoy, dtype=s.dtype)) ** 2).sum(1) < lay.decoy_radius**2
    reward = lay.decoy_reward * in_decoy.to(s.dtype) + lay.goal_reward * in_goal.to(s.dtype)
    nxt = torch.cat((p, v, t[:, None]), 1)
    obs = torch.cat((p / 3, v, t[:, None] / env.max_episode_steps), 1)
    return nxt, obs, reward, in_goal


def _mountain_car_events(env) -> None:  # cars at the goal and at the left wall
    env.state[:4] = torch.tensor([[0.449, 0.05]] * 4, dtype=env.dtype)
    env.state[4:8] = torch.tensor([[-1.19, -0.06]] * 4, dtype=env.dtype)


def _point_mass_events(env) -> None:  # masses driving into the wall, at the goal, in the decoy
    env.state[:4] = torch.tensor([[-1.98, 2.0, -2.0, 0.0, 3.0]] * 4, dtype=env.dtype)
    env.state[4:8] = torch.tensor([[-3.3, 2.95, 0.0, 0.5, 4.0]] * 4, dtype=env.dtype)
    env.state[8:12] = torch.tensor([[-1.9, 0.5, -1.0, -1.0, 4.0]] * 4, dtype=env.dtype)
    env.state[12:16] = torch.tensor([[0.8, 0.2, 0.0, 0.0, 4.0]] * 4, dtype=env.dtype)


@pytest.mark.parametrize(
    ("cls", "reference", "events", "scale"),
    [
        (BatchedPendulum, _reference_pendulum, None, 3.0),
        (BatchedMountainCarContinuous, _reference_mountain_car, _mountain_car_events, 1.5),
        (BatchedDeceptivePointMass, _reference_point_mass, _point_mass_events, 1.5),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("skips", [True, False], ids=["cpu-skips", "device-path"])
def test_in_place_step_matches_the_plain_math(cls, reference, events, scale, dtype, skips) -> None:
    """The fused, in-place step (float masks, lerp selects, skipped checks, the time-limit bound) computes the
    plain out-of-place math: next state, observation, reward, terminated, truncated and the autoreset. Without
    ``skips`` the env takes the path of a GPU (no host reads to rule out the wall and goal tests)."""
    n, horizon = 48, 23
    env = cls(num_envs=n, max_episode_steps=horizon, dtype=dtype)
    env._host_reads_are_free = skips
    env.reset(seed=0)
    g = torch.Generator().manual_seed(1)
    elapsed = torch.zeros(n, dtype=torch.long)
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    seen_done = seen_term = 0
    for t in range(150):
        if events is not None and t % 17 == 3:
            events(env)
        if t % 40 == 25:  # a partial reset restarts some episodes at other times than the rest
            mask = torch.rand(n, generator=g) < 0.3
            env.reset(options={"reset_mask": mask})
            elapsed[mask] = 0
        a = (torch.rand(n, *env.single_action_space.shape, generator=g, dtype=dtype) * 2 - 1) * scale
        before = env.state.clone()
        nxt, ref_obs, ref_reward, ref_term = reference(env, before, a)
        elapsed += 1
        ref_trunc = elapsed >= horizon
        obs, reward, term, trunc, info = env.step(a)
        assert torch.equal(term, ref_term) and torch.equal(trunc, ref_trunc)
        torch.testing.assert_close(reward, ref_reward.to(dtype), **tol)
        done = ref_term | ref_trunc
        assert bool(info.get("_final_obs", torch.zeros(n, dtype=torch.bool)).any()) == bool(done.any())
        if done.any():
            assert torch.equal(info["_final_obs"], done)
            torch.testing.assert_close(info["final_obs"][done], ref_obs[done].to(dtype), **tol)
        keep = ~done
        torch.testing.assert_close(env.state[keep], nxt[keep].to(dtype), **tol)
        torch.testing.assert_close(obs[keep], ref_obs[keep].to(dtype), **tol)
        torch.testing.assert_close(obs[done], env._observe(env._state)[done])  # the first obs of the new episode
        elapsed[done] = 0
        assert torch.equal(env.elapsed_steps, elapsed)
        seen_done += int(done.sum())
        seen_term += int(ref_term.sum())
    assert seen_done > 0 and (events is None or seen_term > 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [48, 4099])  # 4099: full SIMD vectors and a scalar tail in every kernel
def test_mountain_car_step_is_the_plain_math_bit_for_bit(dtype, n) -> None:
    """The fused mountain-car step (the acceleration as -0.0025 cos(3 x) + (power force) 1 through addcmul_, the
    wall as a clamp) rounds exactly as Gymnasium's operation order in out-of-place torch math, at the wall and the
    goal too: equal bits, not merely close values (a fused multiply-add would change the last bit)."""
    env = BatchedMountainCarContinuous(num_envs=n, max_episode_steps=10_000, dtype=dtype)
    env.reset(seed=0)
    g = torch.Generator().manual_seed(2)
    for t in range(120):
        if t % 17 == 3:
            _mountain_car_events(env)
        a = (torch.rand(n, 1, generator=g, dtype=dtype) * 2 - 1) * 1.5
        nxt, _, ref_reward, ref_term = _reference_mountain_car(env, env.state.clone(), a)
        obs, reward, term, _, _ = env.step(a)
        keep = ~ref_term
        assert torch.equal(term, ref_term)
        assert torch.equal(reward, ref_reward.to(dtype))
        assert torch.equal(obs[keep], nxt[keep]) and torch.equal(env.state[keep], nxt[keep])
