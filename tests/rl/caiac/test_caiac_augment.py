"""The counterfactual swap and the sampler: invariants of section 4.2 (actions, the agent guard, mask consistency,
reward recomputation, the theta = 0 and theta = inf limits) and feasibility under the true dynamics."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.rl.caiac import (
    ENTITY_SLICES,
    CounterfactualSampler,
    SamplerConfig,
    collect_push_dataset,
    counterfactual_swap,
    push_step,
    reachable,
    sparse_reward,
)

SLICES = list(ENTITY_SLICES.values())
DATA = collect_push_dataset(8, 8, seed=3)
ORACLE = ~reachable(DATA.states.reshape(-1, 6)).reshape(*DATA.states.shape[:2], 3)


def _sampler(mask, **kw):
    return CounterfactualSampler(states=DATA.states, actions=DATA.actions, goals=DATA.goals, uncontrolled=mask,
                                 entity_slices=SLICES, swappable=np.array([False, True, True]),
                                 achieved_goal=lambda x: x[:, 2:4], reward=lambda ag, g: sparse_reward(ag, g),
                                 **kw)  # fmt: skip


def test_swap_replaces_exactly_the_masked_entities():
    rng = np.random.default_rng(0)
    s, s2, sf = rng.random((3, 4, 6))
    s_before = s.copy()
    src, src2 = rng.random((2, 4, 3, 6))
    swap = np.array([[False, True, False], [False, False, True], [False, True, True], [False, False, False]])
    a, b, c = counterfactual_swap(s, s2, sf, swap, src, src2, SLICES)
    for i in range(4):
        for j, sl in enumerate(SLICES):
            if swap[i, j]:
                np.testing.assert_array_equal(a[i, sl], src[i, j, sl])
                np.testing.assert_array_equal(b[i, sl], src2[i, j, sl])
                np.testing.assert_array_equal(c[i, sl], src[i, j, sl])  # the future state gets s_k, as the code
            else:
                np.testing.assert_array_equal(a[i, sl], s[i, sl])
                np.testing.assert_array_equal(b[i, sl], s2[i, sl])
                np.testing.assert_array_equal(c[i, sl], sf[i, sl])
    np.testing.assert_array_equal(s, s_before)  # inputs are not modified


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(["oracle", "random"]), st.floats(0.1, 1.0))
def test_sampler_invariants(seed, kind, ratio):
    mask = ORACLE if kind == "oracle" else np.ones_like(ORACLE)
    sampler = _sampler(mask, config=SamplerConfig(ratio_cf=ratio, future_p=0.7))
    b = sampler.sample(64, np.random.default_rng(seed))
    e, t, f = b["episode"], b["step"], b["future_step"]
    assert b["is_cf"].sum() == round(ratio * 64) and np.all(t < f) and np.all(f <= DATA.horizon)
    np.testing.assert_array_equal(b["action"], DATA.actions[e, t])  # actions are never changed
    np.testing.assert_array_equal(b["states"][:, 0:2], DATA.states[e, t, 0:2])  # the agent guard
    np.testing.assert_array_equal(b["next_states"][:, 0:2], DATA.states[e, t + 1, 0:2])
    assert not b["swapped"][~b["is_cf"]].any() and not b["swapped"][:, 0].any()
    # a swapped entity is uncontrolled at t, t+1 and the future step of the target sample
    for j in (1, 2):
        w = b["swapped"][:, j]
        assert np.all(mask[e[w], t[w], j] & mask[e[w], t[w] + 1, j] & mask[e[w], f[w], j])
        keep = ~w
        np.testing.assert_array_equal(b["states"][keep][:, SLICES[j]], DATA.states[e[keep], t[keep]][:, SLICES[j]])
    # the reward is recomputed from the (counterfactual) next achieved goal and the goal
    np.testing.assert_array_equal(b["reward"], sparse_reward(b["next_states"][:, 2:4], b["obs"][:, 6:8]))
    np.testing.assert_array_equal(b["obs"][:, :6], b["states"])


def test_theta_zero_is_no_augmentation_and_none_adds_no_counterfactuals():
    nothing = _sampler(np.zeros_like(ORACLE))  # theta = 0: every entity controlled
    plain = _sampler(None)
    b0, b1 = nothing.sample(128, np.random.default_rng(1)), plain.sample(128, np.random.default_rng(1))
    assert not b0["swapped"].any() and not b1["is_cf"].any() and not plain.augments
    e, t = b0["episode"], b0["step"]
    np.testing.assert_array_equal(b0["states"], DATA.states[e, t])


def test_oracle_counterfactuals_are_feasible_away_from_contact():
    """With the true contact mask, a counterfactual misses the simulator only where a swapped-in block lands in
    the agent's reach (an interaction the mask of the source and target cannot see); random swaps also break
    transitions in which the block was being carried."""
    rng = np.random.default_rng(0)
    for kind in ("oracle", "random"):
        mask = ORACLE if kind == "oracle" else np.ones_like(ORACLE)
        b = _sampler(mask, config=SamplerConfig(ratio_cf=1.0)).sample(3000, rng)
        err = np.abs(push_step(b["states"], b["action"])[0] - b["next_states"]).max(1)
        lands_in_reach = (reachable(b["states"])[:, 1:] & b["swapped"][:, 1:]).any(1)
        if kind == "oracle":
            assert np.all(err[~lands_in_reach] < 1e-12)
            oracle_rate = np.mean(err > 1e-6)
        else:
            random_rate = np.mean(err > 1e-6)
    assert oracle_rate < 0.05 < random_rate


def test_train_episodes_restrict_the_samples_not_the_sources():
    sampler = _sampler(np.ones_like(ORACLE), train_episodes=np.array([0, 1]))
    b = sampler.sample(200, np.random.default_rng(0))
    assert set(np.unique(b["episode"])) <= {0, 1}
    with pytest.raises(ValueError, match="train_episodes"):
        _sampler(None, train_episodes=np.array([99]))
