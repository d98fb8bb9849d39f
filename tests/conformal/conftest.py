"""Fixtures shared by the conformal tests (the package and its papers)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest


def _gaussian_blobs(n: int = 600, k: int = 4, d: int = 6, seed: int = 0, spread: float = 1.5):
    """``k`` Gaussian classes in ``d`` dimensions, centres ``N(0, spread^2 I)``, unit noise: (X, y)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * spread
    y = rng.integers(0, k, n)
    return centers[y] + rng.normal(size=(n, d)), y


@pytest.fixture
def gaussian_blobs() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """The blob generator: ``gaussian_blobs(n=, k=, d=, seed=, spread=)``."""
    return _gaussian_blobs
