"""Restructuring the failure landscape with limited human feedback (the "Summarize" and "Restructure" steps).

Sagar et al. (ICML 2024, https://arxiv.org/abs/2406.07145), Section 3: the discovered landscape is
summarised for a human (the official ``evaluate RL.py`` prints the three most frequent failing actions),
who marks the failure modes that are unacceptable; the model under test is then fine-tuned on inputs
transformed by the marked concepts (official ``finetune NUT.py``: each training image is perturbed with
probability 0.5 by the chosen concept combination) and the landscape is measured again.

Our human is simulated and stated as such: :func:`select_failure_modes` marks the ``k`` cells with the
most failing queries in the search's report.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml24.evaluation.failure_landscape.concepts import ConceptGrid, _check_images, apply_concepts
from icml24.evaluation.failure_landscape.model import TrainConfig, _check_int, _check_real, train_classifier
from icml24.evaluation.failure_landscape.search import SearchTrace

__all__ = ["RestructureConfig", "augment_with_concepts", "concept_augmenter", "restructure", "select_failure_modes"]


def select_failure_modes(trace: SearchTrace, n_cells: int, k: int = 3) -> list[int]:
    """The simulated human's choice: the ``k`` cells with the most failing queries in ``trace`` (ties to the
    lower cell index; fewer than ``k`` if fewer cells failed)."""
    if not isinstance(trace, SearchTrace):
        raise TypeError(f"trace must be a SearchTrace, got {type(trace).__name__}")
    n_cells = _check_int("n_cells", n_cells, 1)
    k = _check_int("k", k, 1)
    if trace.budget and int(trace.cells.max()) >= n_cells:
        raise ValueError(f"n_cells must exceed every queried cell index, got {n_cells} <= {int(trace.cells.max())}")
    counts = trace.failure_counts(n_cells)
    order = np.lexsort((np.arange(n_cells), -counts))
    return [int(c) for c in order[:k] if counts[c] > 0]


def _check_cells(cells: Sequence[int], grid: ConceptGrid) -> np.ndarray:
    arr = np.asarray(list(cells)) if not isinstance(cells, np.ndarray) else cells
    if arr.size == 0:
        raise ValueError("cells must name at least one cell")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"cells must be integer cell indices, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= grid.n_cells:
        raise ValueError(f"cells must lie in [0, {grid.n_cells}), got {arr.min()}..{arr.max()}")
    return arr.astype(np.int64)


def augment_with_concepts(
    images: torch.Tensor, grid: ConceptGrid, cells: Sequence[int], prob: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Perturb each image with probability ``prob`` by one of ``cells`` (uniformly); returns the batch and
    the cell applied to each image (``-1``: left unchanged). Images are never perturbed by other cells."""
    if not isinstance(grid, ConceptGrid):
        raise TypeError(f"grid must be a ConceptGrid, got {type(grid).__name__}")
    chosen = torch.as_tensor(_check_cells(cells, grid))
    prob = _check_real("prob", prob, lo=0.0, hi=1.0)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    images = _check_images(images)
    n = images.shape[0]
    hit = torch.rand(n, generator=generator) < prob
    pick = chosen[torch.randint(chosen.numel(), (n,), generator=generator)]
    applied = torch.where(hit, pick, torch.full_like(pick, -1))
    if not bool(hit.any()):
        return images, applied
    out = images.clone()
    vals = torch.as_tensor(grid.values(applied[hit].numpy()), dtype=torch.float32)
    out[hit] = apply_concepts(images[hit], vals)
    return out, applied


def concept_augmenter(grid: ConceptGrid, cells: Sequence[int], prob: float = 0.5) -> Callable:
    """``augment(x, generator)`` for :func:`train_classifier`: :func:`augment_with_concepts` without the record."""
    if not isinstance(grid, ConceptGrid):
        raise TypeError(f"grid must be a ConceptGrid, got {type(grid).__name__}")
    cells = _check_cells(cells, grid).tolist()
    _check_real("prob", prob, lo=0.0, hi=1.0)

    def augment(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return augment_with_concepts(x, grid, cells, prob, generator)[0]

    return augment


@dataclass(frozen=True)
class RestructureConfig:
    """Fine-tuning on the chosen failure modes (official ``finetune NUT.py`` unless noted)."""

    k: int = 3
    """Failure modes the simulated human marks (official evaluation prints the top 3)."""
    prob: float = 0.5
    """Probability that a training image is perturbed by a chosen concept (official: 0.5)."""
    epochs: int = 5
    """Fine-tuning epochs (official script: 1 to 20)."""
    lr: float = 1e-3
    """SGD learning rate (official: 1e-3)."""
    momentum: float = 0.9
    """SGD momentum (official: 0.9)."""
    batch_size: int = 8
    """Minibatch size (official: 1)."""

    def __post_init__(self) -> None:
        _check_int("k", self.k, 1)
        _check_real("prob", self.prob, lo=0.0, hi=1.0)
        _check_int("epochs", self.epochs, 1)
        _check_real("lr", self.lr, lo=0.0, hi=10.0, lo_open=True)
        _check_real("momentum", self.momentum, lo=0.0, hi=1.0)
        _check_int("batch_size", self.batch_size, 1)


def restructure(
    model: nn.Module,
    images: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    cells: Sequence[int],
    grid: ConceptGrid = ConceptGrid(),  # noqa: B008 - frozen dataclass
    *,
    config: RestructureConfig = RestructureConfig(),  # noqa: B008 - frozen dataclass
    seed: int = 0,
) -> nn.Module:
    """A fine-tuned *copy* of ``model``: every parameter trained by SGD with momentum on the training images,
    each perturbed with probability ``config.prob`` by one of the chosen ``cells``; ``model`` itself is left
    unchanged."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(config, RestructureConfig):
        raise TypeError(f"config must be a RestructureConfig, got {type(config).__name__}")
    augment = concept_augmenter(grid, cells, config.prob)
    tuned = copy.deepcopy(model)
    train = TrainConfig(epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, optimizer="sgd",
                        momentum=config.momentum)  # fmt: skip
    return train_classifier(tuned, images, labels, config=train, seed=seed, augment=augment)
