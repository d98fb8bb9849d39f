"""Simulated decision-makers: sanity invariants of the rules."""

import numpy as np
import pytest

from icml24.conformal.conformal_decision_sets import (
    DECISION_RULES,
    HumanModel,
    arm_summaries,
    decide,
    simulate_trial,
    topk_sets,
)


def _pool(seed=0, n=300, k=8):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    p = rng.dirichlet(np.ones(k), size=n)
    p[np.arange(n), y] += 1.0
    return p / p.sum(1, keepdims=True), y


@pytest.mark.parametrize("rule", DECISION_RULES)
def test_perfect_knowledge_gives_accuracy_one_in_every_arm(rule):
    p, y = _pool()
    onehot = np.eye(p.shape[1])[y]
    sets = topk_sets(p, 2)
    table = simulate_trial(weak_probs=onehot, labels=y, arms={"control": (None, 0.0), "topk": (sets, 0.9)},
                           human=HumanModel(rule=rule, noise_sd=0.0, skill_low=50, skill_high=50, anchor_prob=0.0),
                           n_participants=10, n_items=30, rng=np.random.default_rng(1))
    for s in arm_summaries(table):
        assert s.mean == 1.0


def test_no_knowledge_restricted_to_top1_gets_model_accuracy():
    p, y = _pool(3)
    uniform = np.full_like(p, 1 / p.shape[1])
    top1 = topk_sets(p, 1)
    table = simulate_trial(weak_probs=uniform, labels=y, arms={"top1": (top1, 0.8)},
                           human=HumanModel(rule="restrict", noise_sd=0.0), n_participants=5, n_items=p.shape[0],
                           rng=np.random.default_rng(0))
    model_acc = (p.argmax(1) == y).mean()
    assert arm_summaries(table)[0].mean == pytest.approx(model_acc)


def test_bayes_rule_reads_set_size_as_confidence():
    # weak preference for label 0; the set {1} (a singleton) overrides it, the set {1, 2, 3, 4} does not
    h = np.array([[0.4, 0.15, 0.15, 0.15, 0.15]])
    single = np.array([[0, 1, 0, 0, 0]], dtype=bool)
    big = np.array([[0, 1, 1, 1, 1]], dtype=bool)
    rng = np.random.default_rng(0)
    assert decide(h, single, 0.9, "bayes", rng)[0] == 1
    assert decide(h, big, 0.5, "bayes", rng)[0] == 0
    assert decide(h, big, 0.5, "restrict", rng)[0] == 1  # restrict ignores size
    assert decide(h, None, 0.9, "bayes", rng)[0] == 0
    assert decide(h, big, 0.5, "anchor", rng, anchor_prob=1.0)[0] == 1  # first listed label
    # ignore_large: a 4-label set is ignored when max_size = 3 (own knowledge: 0), read when max_size = 4
    assert decide(h, big, 0.99, "ignore_large", rng, max_size=3)[0] == 0
    assert decide(h, big, 0.99, "ignore_large", rng, max_size=4)[0] == 1
    assert decide(h, single, 0.9, "ignore_large", rng, max_size=3)[0] == 1


def test_simulation_is_deterministic_and_shaped():
    p, y = _pool(5)
    arms = {"control": (None, 0.0), "topk": (topk_sets(p, 2), 0.9)}
    a = simulate_trial(weak_probs=p, labels=y, arms=arms, human=HumanModel(), n_participants=7, n_items=11,
                       rng=np.random.default_rng(9))
    b = simulate_trial(weak_probs=p, labels=y, arms=arms, human=HumanModel(), n_participants=7, n_items=11,
                       rng=np.random.default_rng(9))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert len(a["correct"]) == 2 * 7 * 11
    assert len(np.unique(a["participant"])) == 14
    # each participant sees distinct items
    first = a["item"][:11]
    assert len(set(first.tolist())) == 11


def test_bad_input():
    p, y = _pool()
    with pytest.raises(ValueError, match="rule"):
        HumanModel(rule="guess")
    with pytest.raises(ValueError, match="max_size"):
        HumanModel(rule="ignore_large", max_size=0)
    with pytest.raises(ValueError, match="skill"):
        HumanModel(skill_low=2, skill_high=1)
    with pytest.raises(ValueError, match="n_items"):
        simulate_trial(weak_probs=p, labels=y, arms={"c": (None, 0)}, human=HumanModel(), n_items=10_000,
                       rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="shape"):
        simulate_trial(weak_probs=p, labels=y, arms={"t": (p[:5] > 0, 0.9)}, human=HumanModel(),
                       rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="labels must be class indices"):
        simulate_trial(weak_probs=p, labels=y + p.shape[1], arms={"c": (None, 0)}, human=HumanModel(),
                       rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="weak_probs contains NaN"):
        simulate_trial(weak_probs=p * np.nan, labels=y, arms={"c": (None, 0)}, human=HumanModel(),
                       rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="n_participants"):
        simulate_trial(weak_probs=p, labels=y, arms={"c": (None, 0)}, human=HumanModel(), n_participants=2.5,
                       rng=np.random.default_rng(0))
