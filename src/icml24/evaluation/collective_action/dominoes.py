"""A dominoes dataset for the simplicity-bias experiment (Ben-Dov et al., ICML 2024, https://arxiv.org/abs/2405.06582;
dominoes after Shah et al., NeurIPS 2020).

Each input is ``[easy block | hard block]``: the easy block is a one-hot code of the label with margin
``margin`` plus Gaussian noise, followed by ``free_dims`` pure-noise columns (room for a signal that overwrites
no label information); the hard block is the original features (digit pixels). Both blocks predict the label;
SGD-trained networks lean on the easy one (simplicity bias). The collective can plant its signal in either
block: :meth:`Dominoes.easy_signal` writes ``size`` free columns of the easy block,
:meth:`Dominoes.hard_signal` a corner patch of the pixels; both overwrite the same number of columns that
carry no label code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from icml24.evaluation.collective_action._validation import (
    check_int,
    check_labels,
    check_matrix,
    check_real,
    check_rng,
)
from icml24.evaluation.collective_action.signals import PatchSignal

__all__ = ["Dominoes", "make_dominoes"]


@dataclass(frozen=True)
class Dominoes:
    """Dominoes inputs and where their blocks lie.

    Attributes:
        X: ``n x (n_classes + free_dims + d_hard)`` inputs.
        y: the labels.
        n_classes: width of the label code.
        free_dims: pure-noise columns after the label code.
        image_shape: ``(height, width)`` of the hard block's pixels (row-major).
    """

    X: np.ndarray
    y: np.ndarray
    n_classes: int
    free_dims: int
    image_shape: tuple[int, int]

    @property
    def hard_offset(self) -> int:
        """Column of the first pixel of the hard block."""
        return self.n_classes + self.free_dims

    def easy_signal(self, size: int = 4, value: float = 1.0) -> PatchSignal:
        """A signal on ``size`` of the easy block's free (label-free) columns."""
        size = check_int(size, "size", lo=1)
        if size > self.free_dims:
            raise ValueError(f"size must be at most free_dims = {self.free_dims}, got {size}")
        return PatchSignal(tuple(range(self.n_classes, self.n_classes + size)), value)

    def hard_signal(self, size: int = 2, value: float = 1.0) -> PatchSignal:
        """A ``size x size`` bottom-right patch of the hard block's pixels."""
        h, w = self.image_shape
        return PatchSignal.corner(h, w, size=size, value=value, offset=self.hard_offset)

    def without_easy_code(self, rng: Any = None) -> np.ndarray:
        """``X`` with the easy block's label code shuffled across rows: the accuracy of a model on it says how
        much the model needs the hard block."""
        rng = check_rng(rng, "rng")
        out = self.X.copy()
        out[:, : self.n_classes] = out[rng.permutation(len(out)), : self.n_classes]
        return out


def make_dominoes(
    X_hard: Any,
    y: Any,
    *,
    image_shape: tuple[int, int],
    n_classes: int | None = None,
    free_dims: int = 6,
    margin: float = 3.0,
    noise: float = 0.1,
    random_state: int | np.random.Generator | None = None,
) -> Dominoes:
    """Dominoes from hard features ``X_hard`` (e.g. digit pixels scaled to [0, 1]) and labels ``y``.

    Args:
        X_hard: the hard block, ``n x (height * width)``.
        y: integer labels in ``0..n_classes-1``.
        image_shape: ``(height, width)`` of the hard block.
        n_classes: number of classes (default ``max(y) + 1``).
        free_dims: noise columns after the code, where an easy-block signal can go.
        margin: the code's value on the true class (the easy feature's margin). At the default 3 (noise 0.1)
            an SGD-trained MLP on digits relies on the code alone: shuffling the code across rows drops its
            accuracy to chance (0.1), although the pixels alone support ~96%.
        noise: standard deviation of the Gaussian noise on the code and the free columns.
        random_state: seed or generator of the noise.
    """
    X_hard = check_matrix(X_hard, "X_hard")
    y = check_labels(y, X_hard.shape[0])
    if (not isinstance(image_shape, tuple) or len(image_shape) != 2
            or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in image_shape)):  # fmt: skip
        raise ValueError(f"image_shape must be a (height, width) tuple of positive ints, got {image_shape!r}")
    if image_shape[0] * image_shape[1] != X_hard.shape[1]:
        raise ValueError(f"image_shape {image_shape} does not match the {X_hard.shape[1]} columns of X_hard")
    k = int(y.max()) + 1 if n_classes is None else check_int(n_classes, "n_classes", lo=2)
    if y.min() < 0 or y.max() >= k:
        raise ValueError(f"y must hold labels in 0..{k - 1} (n_classes = {k}), got range [{y.min()}, {y.max()}]")
    free_dims = check_int(free_dims, "free_dims", lo=0)
    margin = check_real(margin, "margin", lo=0.0, lo_open=True)
    noise = check_real(noise, "noise", lo=0.0)
    rng = check_rng(random_state, "random_state")
    n = X_hard.shape[0]
    code = margin * np.eye(k)[y] + noise * rng.standard_normal((n, k))
    free = noise * rng.standard_normal((n, free_dims))
    X = np.hstack([code, free, X_hard])
    return Dominoes(X, y, k, free_dims, (int(image_shape[0]), int(image_shape[1])))
