"""The failure landscape: the paper's reward, the exhaustive ground truth, and landscape distances.

Sagar et al. (ICML 2024, https://arxiv.org/abs/2406.07145). Classification reward (Section 3; the
official ``train RL.py``): with ``p`` the top-class probability of ``f(g(x, c))``,

    r = 10 |log(p / (1 - p))|   if argmax f(g(x, c)) != y     (a failure; confident mistakes score more)
    r = -1                      otherwise.

The *failure landscape* over the concept grid is the failure rate ``L(c) = P_x[argmax f(g(x, c)) != y]``;
we compute it exhaustively (every image under every cell, one batched forward pass) as the ground truth
that the searches are scored against. Landscapes are compared as distributions over the grid
(``L / sum L``) by the Wasserstein-1 distance with the Euclidean ground cost between cells in the
``[0, 1]^3`` level coordinates of :meth:`ConceptGrid.coordinates`, solved exactly by POT (``ot.emd2``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml24.evaluation.failure_landscape.concepts import ConceptGrid, perturb_grid
from icml24.evaluation.failure_landscape.model import _as_xy, _check_int, _check_real, predict_proba

__all__ = [
    "FAILURE_REWARD",
    "FailureLandscape",
    "evaluate_landscape",
    "failure_reward",
    "landscape_distance",
    "normalize_landscape",
]

FAILURE_REWARD = {"scale": 10.0, "success": -1.0, "clip": 1e-7}
"""The reward's constants (official code): the failure scale, the reward of a correct prediction, and the
offset that keeps ``log(p / (1 - p))`` finite."""


def _float_array(name: str, value: object) -> np.ndarray:
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be an array of numbers, got {type(value).__name__}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers ({exc})") from None
    return arr


def failure_reward(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The paper's classification reward and the failure indicator, row by row.

    Args:
        probs: ``(n, k)`` class probabilities of the perturbed inputs.
        labels: ``(n,)`` true classes.

    Returns:
        ``(reward, failed)``: ``10 |logit(p_top)|`` where the top class is wrong, ``-1`` where it is right.
    """
    p = _float_array("probs", probs)
    if labels is None or isinstance(labels, (str, bytes)):
        raise TypeError(f"labels must be an array of class ids, got {type(labels).__name__}")
    y = np.asarray(labels)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"probs must have shape (n, k) with k >= 2, got {p.shape}")
    if y.dtype.kind not in "iu":
        raise TypeError(f"labels must be integer class ids, got dtype {y.dtype}")
    if y.shape != (p.shape[0],):
        raise ValueError(f"labels must have shape ({p.shape[0]},), got {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= p.shape[1]):
        raise ValueError(f"labels must lie in [0, {p.shape[1]}), got {y.min()}..{y.max()}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("probs must be finite and non-negative")
    top = p.argmax(1)
    pt = np.clip(p[np.arange(p.shape[0]), top], 0.0, 1.0)
    failed = top != y
    eps = FAILURE_REWARD["clip"]
    logit = np.abs(np.log((pt + eps) / (1.0 - pt + eps)))
    reward = np.where(failed, FAILURE_REWARD["scale"] * logit, FAILURE_REWARD["success"])
    return reward, failed


@dataclass(frozen=True)
class FailureLandscape:
    """The exhaustive outcome of every (image, cell) pair.

    Attributes:
        grid: the concept grid.
        rewards: ``(n_images, n_cells)`` paper reward of image ``i`` under cell ``c``.
        failed: ``(n_images, n_cells)`` whether the model's top class is wrong there.
        observations: ``(n_images, obs_dim)`` the unperturbed images, flattened (the search agent's state).
        labels: ``(n_images,)`` true classes.
    """

    grid: ConceptGrid
    rewards: np.ndarray
    failed: np.ndarray
    observations: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.grid, ConceptGrid):
            raise TypeError(f"grid must be a ConceptGrid, got {type(self.grid).__name__}")
        n, c = np.shape(self.rewards) if np.ndim(self.rewards) == 2 else (None, None)
        if c != self.grid.n_cells:
            raise ValueError(f"rewards must have shape (n_images, {self.grid.n_cells}), got {np.shape(self.rewards)}")
        if np.shape(self.failed) != (n, c):
            raise ValueError(f"failed must have shape ({n}, {c}), got {np.shape(self.failed)}")
        if np.ndim(self.observations) != 2 or np.shape(self.observations)[0] != n:
            raise ValueError(f"observations must have shape ({n}, obs_dim), got {np.shape(self.observations)}")
        if np.shape(self.labels) != (n,):
            raise ValueError(f"labels must have shape ({n},), got {np.shape(self.labels)}")
        for name in ("rewards", "observations"):
            arr = np.asarray(getattr(self, name))
            if arr.dtype.kind not in "biuf" or not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} must be finite numbers")
        if np.asarray(self.failed).dtype != bool:
            raise TypeError(f"failed must be a boolean array, got dtype {np.asarray(self.failed).dtype}")

    @property
    def n_images(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def failure_rate(self) -> np.ndarray:
        """``L(c)``: the fraction of images the model gets wrong under cell ``c``, ``(n_cells,)``."""
        return self.failed.mean(0)

    @property
    def mean_reward(self) -> np.ndarray:
        """The expected paper reward of each cell over the images, ``(n_cells,)``."""
        return self.rewards.mean(0)

    def failure_cells(self, threshold: float = 0.3) -> np.ndarray:
        """The *true failure cells*: a boolean mask of the cells with failure rate above ``threshold``."""
        t = _check_real("threshold", threshold, lo=0.0, hi=1.0)
        return self.failure_rate > t


def evaluate_landscape(
    model: nn.Module,
    images: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    grid: ConceptGrid = ConceptGrid(),  # noqa: B008 - frozen dataclass
    *,
    chunk_images: int = 64,
) -> FailureLandscape:
    """The exhaustive ground-truth landscape: every image under every cell, through the model in batches
    of ``chunk_images * n_cells`` perturbed images (the perturbation and the forward pass are batched)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(grid, ConceptGrid):
        raise TypeError(f"grid must be a ConceptGrid, got {type(grid).__name__}")
    chunk_images = _check_int("chunk_images", chunk_images, 1)
    x, y = _as_xy(images, labels)
    c = grid.n_cells
    rewards, failed = [], []
    for start in range(0, x.shape[0], chunk_images):
        xb, yb = x[start : start + chunk_images], y[start : start + chunk_images]
        probs = predict_proba(model, perturb_grid(xb, grid), batch_size=8192)
        r, f = failure_reward(probs, yb.numpy().repeat(c))
        rewards.append(r.reshape(-1, c))
        failed.append(f.reshape(-1, c))
    return FailureLandscape(grid=grid, rewards=np.concatenate(rewards), failed=np.concatenate(failed),
                            observations=x.reshape(x.shape[0], -1).numpy().astype(np.float32),
                            labels=y.numpy())  # fmt: skip


def normalize_landscape(weights: np.ndarray, name: str = "weights") -> np.ndarray:
    """``w / sum w`` over the grid cells, after checking ``w`` is finite, non-negative and not all zero."""
    w = _float_array(name, weights)
    if w.ndim != 1:
        raise ValueError(f"{name} must be 1-d over the grid cells, got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    s = w.sum()
    if s <= 0:
        raise ValueError(f"{name} must have positive total mass")
    return w / s


def landscape_distance(a: np.ndarray, b: np.ndarray, grid: ConceptGrid = ConceptGrid()) -> float:  # noqa: B008
    """Wasserstein-1 distance between two landscapes over ``grid`` (each normalised to total mass 1), with
    the Euclidean ground cost in the grid's ``[0, 1]^3`` level coordinates; exact, by POT's network
    simplex (``ot.emd2``)."""
    import ot

    if not isinstance(grid, ConceptGrid):
        raise TypeError(f"grid must be a ConceptGrid, got {type(grid).__name__}")
    pa, pb = normalize_landscape(a, "a"), normalize_landscape(b, "b")
    for name, p in (("a", pa), ("b", pb)):
        if p.size != grid.n_cells:
            raise ValueError(f"{name} must have {grid.n_cells} entries (one per cell), got {p.size}")
    coords = grid.coordinates()
    cost = ot.dist(coords, coords, metric="euclidean")
    return float(max(ot.emd2(pa, pb, cost), 0.0))
