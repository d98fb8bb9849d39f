"""The reward, the exhaustive landscape and the landscape distance: closed forms, a brute-force oracle
(one forward pass per image and cell), POT against closed forms and the metric axioms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.evaluation.failure_landscape import (
    ConceptGrid,
    apply_concepts,
    failure_reward,
    landscape_distance,
    predict_proba,
)

from .conftest import SMALL_GRID


def test_reward_closed_form():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    reward, failed = failure_reward(probs, np.array([0, 0, 1]))
    assert failed.tolist() == [False, True, True]  # argmax of a tie is class 0 != 1
    assert reward[0] == -1.0
    np.testing.assert_allclose(reward[1], 10 * abs(np.log(0.8 / 0.2)), rtol=1e-6)
    np.testing.assert_allclose(reward[2], 0.0, atol=1e-5)  # a coin-flip mistake earns ~0


@settings(max_examples=80, derandomize=True, deadline=None)
@given(st.floats(0.5, 0.999), st.floats(0.5, 0.999))
def test_reward_grows_with_the_confidence_of_a_mistake(p, q):
    # two-class mistakes with top probability p and q: larger confidence, larger reward
    r, _ = failure_reward(np.array([[1 - p, p], [1 - q, q]]), np.array([0, 0]))
    assert (r[0] - r[1]) * (p - q) >= -1e-9
    # |logit| is symmetric in p <-> 1 - p
    np.testing.assert_allclose(abs(np.log(p / (1 - p))), abs(np.log((1 - p) / p)), rtol=1e-9)


def test_identity_cell_on_correct_inputs_gives_minus_one(trained):
    model, images, labels = trained
    grid = ConceptGrid()
    x = torch.as_tensor(images)
    same = apply_concepts(x, np.repeat(grid.values(grid.identity_cell)[None], len(x), 0))
    probs = predict_proba(model, same)
    correct = probs.argmax(1) == labels
    assert correct.mean() > 0.8
    reward, failed = failure_reward(probs, labels)
    assert np.all(reward[correct] == -1.0) and not failed[correct].any()


def test_exhaustive_landscape_equals_brute_force(trained, small_landscape):
    model, images, labels = trained
    grid = SMALL_GRID
    for i in range(0, len(labels), 9):
        for c in range(grid.n_cells):
            x = apply_concepts(torch.as_tensor(images[i : i + 1]), grid.values(np.array([c])))
            with torch.no_grad():
                p = torch.softmax(model(x), 1).double().numpy()
            r, f = failure_reward(p, labels[i : i + 1])
            assert small_landscape.failed[i, c] == f[0]
            np.testing.assert_allclose(small_landscape.rewards[i, c], r[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(small_landscape.failure_rate, small_landscape.failed.mean(0))


def test_landscape_has_structure(small_landscape):
    # the model is right on most clean images and fails more under the strongest perturbation
    rate = small_landscape.failure_rate
    assert rate[SMALL_GRID.identity_cell] < 0.25
    assert rate.max() > rate[SMALL_GRID.identity_cell] + 0.2


def test_w1_closed_forms_on_point_masses():
    grid = ConceptGrid()
    coords = grid.coordinates()
    a, b = np.zeros(125), np.zeros(125)
    a[0], b[124] = 1.0, 1.0
    assert landscape_distance(a, b, grid) == pytest.approx(np.sqrt(3.0))  # opposite corners of [0,1]^3
    c = np.zeros(125)
    c[grid.index(np.array([0, 0, 1]))] = 1.0
    assert landscape_distance(a, c, grid) == pytest.approx(0.25)  # one level step of five
    # half the mass moves one step: W1 = 0.5 * 0.25; scale does not matter (normalised)
    ab = 3.0 * (a + c)
    assert landscape_distance(ab, a, grid) == pytest.approx(0.125)
    assert np.allclose(np.linalg.norm(coords[0] - coords[124]), np.sqrt(3.0))


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.integers(0, 10_000))
def test_w1_is_a_metric(seed):
    rng = np.random.default_rng(seed)
    grid = ConceptGrid()
    p, q, r = (rng.random(125) ** 3 for _ in range(3))
    assert landscape_distance(p, p, grid) == pytest.approx(0.0, abs=1e-12)
    assert landscape_distance(p, q, grid) == pytest.approx(landscape_distance(q, p, grid), rel=1e-9, abs=1e-12)
    assert landscape_distance(p, r, grid) <= landscape_distance(p, q, grid) + landscape_distance(q, r, grid) + 1e-9


def test_w1_refuses_bad_landscapes():
    with pytest.raises(ValueError, match="a"):
        landscape_distance(np.zeros(125), np.ones(125))
    with pytest.raises(ValueError, match="b"):
        landscape_distance(np.ones(125), -np.ones(125))
    with pytest.raises(ValueError, match="125"):
        landscape_distance(np.ones(10), np.ones(10))
