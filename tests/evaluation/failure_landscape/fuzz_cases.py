"""Fuzz cases for the failure-landscape entry points (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.evaluation.failure_landscape import (
    ConceptGrid,
    DigitsCNN,
    DQNSearchConfig,
    FailureLandscape,
    FailureSearchEnv,
    RestructureConfig,
    SearchTrace,
    TrainConfig,
    apply_concepts,
    augment_with_concepts,
    concept_augmenter,
    dqn_search,
    epsilon_greedy_search,
    evaluate_landscape,
    failure_reward,
    landscape_distance,
    linear_epsilon,
    load_digit_images,
    normalize_landscape,
    perturb_grid,
    predict_proba,
    random_search,
    restructure,
    search_metrics,
    select_failure_modes,
    train_classifier,
)

GRID = ConceptGrid(rotations=(0.0, 10.0), blurs=(0.0, 1.0), brightness=(1.0, 0.5))
_rng = np.random.default_rng(0)
IMAGES = _rng.random((6, 1, 16, 16)).astype(np.float32)
LABELS = np.arange(6) % 3
MODEL = DigitsCNN(n_classes=3)
FAILED = _rng.random((6, GRID.n_cells)) < 0.4
REWARDS = np.where(FAILED, 3.0, -1.0)
OBS = IMAGES.reshape(6, -1)
LAND = FailureLandscape(grid=GRID, rewards=REWARDS, failed=FAILED, observations=OBS, labels=LABELS)
ENV = FailureSearchEnv(LAND)
TRACE = SearchTrace("t", images=np.array([0, 1, 2]), cells=np.array([0, 3, 3]), rewards=np.array([3.0, 3.0, -1.0]),
                    failed=np.array([True, True, False]))
BAD_IMAGES = [IMAGES[0], IMAGES.astype(np.int64), np.full_like(IMAGES, np.nan), "x", None]
BAD_INT = [0, -1, 1.5, "3", None, True]
BAD_PROB = [-0.1, 1.5, float("nan"), "0.5", None]
BAD_POSITIVE = [0.0, -1.0, float("nan"), float("inf"), "1", None]


def make_grid(rotations=(0.0, 10.0), blurs=(0.0, 1.0), brightness=(1.0, 0.5)):
    """ConceptGrid(...) and its index maps."""
    grid = ConceptGrid(rotations=rotations, blurs=blurs, brightness=brightness)
    return grid.index(grid.levels(np.arange(grid.n_cells)))


def make_cnn(size=16, channels=(4, 8), hidden=8, n_classes=3):
    """DigitsCNN(...) and one forward pass."""
    return DigitsCNN(size=size, channels=channels, hidden=hidden, n_classes=n_classes)(torch.zeros(2, 1, size, size))


def make_train_config(epochs=1, batch_size=8, lr=1e-3, weight_decay=0.0, optimizer="sgd", momentum=0.9):
    return TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay, optimizer=optimizer,
                       momentum=momentum)


def make_dqn_config(epsilon_start=1.0, epsilon_final=0.6, exploration_fraction=0.1, hidden=(8,), lr=1e-3,
                    batch_size=4, buffer_size=100, train_every=1):
    return DQNSearchConfig(epsilon_start=epsilon_start, epsilon_final=epsilon_final,
                           exploration_fraction=exploration_fraction, hidden=hidden, lr=lr, batch_size=batch_size,
                           buffer_size=buffer_size, train_every=train_every)


def make_restructure_config(k=3, prob=0.5, epochs=1, lr=1e-3, momentum=0.9, batch_size=8):
    return RestructureConfig(k=k, prob=prob, epochs=epochs, lr=lr, momentum=momentum, batch_size=batch_size)


def make_landscape(rewards, failed, observations, labels):
    """FailureLandscape(grid=GRID, ...)."""
    return FailureLandscape(grid=GRID, rewards=rewards, failed=failed, observations=observations, labels=labels)


def make_trace(images, cells, rewards, failed, name="t"):
    return SearchTrace(name, images=images, cells=cells, rewards=rewards, failed=failed)


def make_env(landscape):
    """FailureSearchEnv(landscape) and one step."""
    env = FailureSearchEnv(landscape)
    env.reset(seed=0)
    return env.step(0)


def augment(images, cells, prob, seed=0):
    """augment_with_concepts on a tensor batch."""
    x = torch.as_tensor(images) if isinstance(images, np.ndarray) else images
    return augment_with_concepts(x, GRID, cells, prob, torch.Generator().manual_seed(0))


def make_augmenter(grid, cells, prob=0.5):
    """concept_augmenter(...) applied to a batch."""
    return concept_augmenter(grid, cells, prob)(torch.as_tensor(IMAGES), torch.Generator().manual_seed(0))


FUZZ_CASES = [
    dict(fn=make_grid, covers=(ConceptGrid,),
         invalid={"rotations": [(0.0, 0.0), (float("nan"),), (), "ab", None, (400.0,)],
                  "blurs": [(-1.0,), (float("inf"),), ("a",), None], "brightness": [(-0.5,), (True,), 3]}),
    dict(fn=make_cnn, covers=(DigitsCNN,),
         invalid={"size": [6, 0, 2.5, "16"], "channels": [(4,), (0, 8), 4, "ab"], "hidden": BAD_INT,
                  "n_classes": [1, 2.5, "3"]}),
    dict(fn=make_train_config, covers=(TrainConfig,),
         invalid={"epochs": BAD_INT, "batch_size": BAD_INT, "lr": BAD_POSITIVE, "weight_decay": [-1.0, float("nan")],
                  "optimizer": ["rmsprop", None], "momentum": BAD_PROB}),
    dict(fn=make_dqn_config, covers=(DQNSearchConfig,),
         invalid={"epsilon_start": BAD_PROB, "epsilon_final": BAD_PROB, "exploration_fraction": BAD_PROB,
                  "hidden": [(), (0,), [8], (1.5,), None], "lr": BAD_POSITIVE, "batch_size": BAD_INT,
                  "buffer_size": BAD_INT, "train_every": BAD_INT}),
    dict(fn=make_restructure_config, covers=(RestructureConfig,),
         invalid={"k": BAD_INT, "prob": BAD_PROB, "epochs": BAD_INT, "lr": BAD_POSITIVE, "momentum": BAD_PROB,
                  "batch_size": BAD_INT}),
    dict(fn=make_landscape, args=(REWARDS, FAILED, OBS, LABELS), covers=(FailureLandscape,),
         invalid={"rewards": [REWARDS[:, :3], REWARDS[0], "r", None], "failed": [FAILED[:2], FAILED.astype(int)],
                  "observations": [OBS[:2], OBS[0], None], "labels": [LABELS[:2], None]}),
    dict(fn=make_trace, args=(np.array([0, 1]), np.array([2, 3]), np.array([1.0, -1.0]), np.array([True, False])),
         covers=(SearchTrace,),
         invalid={"images": [np.array([0]), np.array([-1, 0]), np.array([0.5, 1.0])],
                  "cells": [np.array([[1, 2]]), np.array([-1, 0])], "rewards": [np.array([1.0])],
                  "failed": [np.array([1, 0]), np.array([True])], "name": [3, None]}),
    dict(fn=make_env, args=(LAND,), covers=(FailureSearchEnv,), invalid={"landscape": [None, "L", REWARDS]}),
    dict(fn=apply_concepts, args=(IMAGES, np.tile([5.0, 0.5, 0.8], (6, 1))),
         invalid={"images": BAD_IMAGES, "values": [np.zeros((5, 3)), np.zeros((6, 2)), np.tile([0, -1.0, 1], (6, 1)),
                                                   np.full((6, 3), "a"), None]}),
    dict(fn=perturb_grid, args=(IMAGES, GRID), invalid={"images": BAD_IMAGES, "grid": [None, (0, 1), "g"]}),
    dict(fn=load_digit_images, kwargs={"size": 8}, invalid={"size": [4, 7.5, "16", None]}),
    dict(fn=train_classifier, args=(DigitsCNN(n_classes=3), IMAGES, LABELS), kwargs={"config": TrainConfig(epochs=1)},
         invalid={"model": [None, "m"], "images": BAD_IMAGES, "labels": [LABELS[:2], LABELS + 0.5, None],
                  "config": [None, {"epochs": 1}], "seed": [-1, 1.5, "0"], "augment": [3, "a"]}),
    dict(fn=predict_proba, args=(MODEL, IMAGES), invalid={"model": [None], "images": BAD_IMAGES[1:],
                                                          "batch_size": BAD_INT}),
    dict(fn=failure_reward, args=(np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]), np.array([0, 1])),
         invalid={"probs": [np.array([0.5, 0.5]), np.array([[-0.1, 1.1]] * 2), np.ones((2, 1)), None],
                  "labels": [np.array([0]), np.array([0.0, 1.0]), np.array([0, 3]), None]}),
    dict(fn=evaluate_landscape, args=(MODEL, IMAGES, LABELS, GRID),
         invalid={"model": [None], "images": BAD_IMAGES, "labels": [LABELS[:3], None], "grid": [None, "g"],
                  "chunk_images": BAD_INT}),
    dict(fn=normalize_landscape, args=(np.ones(8),),
         invalid={"weights": [np.zeros(8), -np.ones(8), np.ones((2, 4)), "w"], "name": []}),
    dict(fn=landscape_distance, args=(np.ones(8), np.arange(8.0) + 1, GRID),
         invalid={"a": [np.zeros(8), -np.ones(8), np.ones(5)], "b": [np.ones(3), np.ones((2, 4))],
                  "grid": [None, 3]}),
    dict(fn=linear_epsilon, args=(5, 100, DQNSearchConfig()),
         invalid={"step": [-1, 1.5, "s"], "budget": BAD_INT, "config": [None, {}]}),
    dict(fn=random_search, args=(ENV, 20), kwargs={"seed": 0},
         invalid={"env": [None, LAND], "budget": BAD_INT, "seed": [-1, 1.5, "0"]}),
    dict(fn=epsilon_greedy_search, args=(ENV, 20), kwargs={"epsilon": 0.1, "seed": 0},
         invalid={"env": [None], "budget": BAD_INT, "epsilon": BAD_PROB, "seed": [-1, "0"]}),
    dict(fn=dqn_search, args=(ENV, 20), kwargs={"config": DQNSearchConfig(batch_size=4, hidden=(8,)), "seed": 0},
         invalid={"env": [None], "budget": BAD_INT, "config": [None, {}], "seed": [-1, 1.5]}),
    dict(fn=search_metrics, args=(TRACE, LAND), kwargs={"threshold": 0.3, "checkpoints": 3},
         invalid={"trace": [None, LAND], "landscape": [None, TRACE], "threshold": BAD_PROB, "checkpoints": BAD_INT}),
    dict(fn=select_failure_modes, args=(TRACE, GRID.n_cells, 2),
         invalid={"trace": [None, "t"], "n_cells": BAD_INT + [2], "k": BAD_INT}),
    dict(fn=augment, args=(IMAGES, [0, 3], 0.5), covers=(augment_with_concepts,),
         invalid={"images": [torch.full((6, 1, 16, 16), float("nan")), torch.zeros(6, 16, 16)],
                  "cells": [[], [8], [-1], [0.5]], "prob": BAD_PROB}),
    dict(fn=make_augmenter, args=(GRID, [1, 2]), covers=(concept_augmenter,),
         invalid={"grid": [None, 3], "cells": [[], [99], ["a"]], "prob": BAD_PROB}),
    dict(fn=restructure, args=(DigitsCNN(n_classes=3), IMAGES, LABELS, [0, 1], GRID),
         kwargs={"config": RestructureConfig(epochs=1), "seed": 0},
         invalid={"model": [None], "images": BAD_IMAGES, "labels": [LABELS[:1], None], "cells": [[], [99]],
                  "grid": [None], "config": [None, TrainConfig()], "seed": [-1, "0"]}),
]

EXEMPT = {}
