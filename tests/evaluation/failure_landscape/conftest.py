"""A small trained model under test and its landscape, shared by the failure-landscape tests."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml24.evaluation.failure_landscape import (
    ConceptGrid,
    DigitsCNN,
    TrainConfig,
    evaluate_landscape,
    load_digit_images,
    train_classifier,
)

SMALL_GRID = ConceptGrid(rotations=(-20.0, 0.0, 20.0), blurs=(0.0, 1.5), brightness=(1.0, 0.35))


@pytest.fixture(scope="session")
def digits():
    return load_digit_images()


@pytest.fixture(scope="session")
def trained(digits):
    images, labels = digits
    torch.manual_seed(0)
    model = train_classifier(DigitsCNN(), images[:600], labels[:600], config=TrainConfig(epochs=8, batch_size=32), seed=0)
    return model, images[600:700], labels[600:700]


@pytest.fixture(scope="session")
def small_landscape(trained):
    model, images, labels = trained
    return evaluate_landscape(model, images, labels, SMALL_GRID)


@pytest.fixture(scope="session")
def full_landscape(trained):
    model, images, labels = trained
    return evaluate_landscape(model, images[:60], labels[:60], ConceptGrid())


def numpy_rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)
