"""Representation-alignment metrics of the Platonic Representation Hypothesis.

Huh, Cheung, Wang, Isola. *Position: The Platonic Representation Hypothesis*. ICML 2024.
https://arxiv.org/abs/2405.07987

The paper argues that representations of competent models converge across architectures and
modalities. Alignment is measured on paired inputs by comparing the kernels the two representations
induce, chiefly with the mutual k-nearest-neighbour score (``mutual_knn``); CKA variants (``cka``,
``unbiased_cka``) and the best-over-layer-pairs protocol (``best_over_layers``) are provided too.

Example:
    >>> import numpy as np
    >>> from icml24.evaluation.platonic_representation import mutual_knn
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=(200, 16))
    >>> mutual_knn(a, 3.0 * a, k=10)                              # scale-invariant, self-alignment 1
    1.0
    >>> mutual_knn(a, rng.normal(size=(200, 8)), k=10) < 0.15      # independent: about k/(n-1) = 0.05
    True
"""

from .metrics import (
    LayerAlignment,
    best_over_layers,
    chance_mutual_knn,
    cka,
    clip_outliers,
    hsic,
    knn_indices,
    knn_overlap,
    mutual_knn,
    unbiased_cka,
)
from .world import World, make_world

SLUG = "platonic-representation"

__all__ = [
    "SLUG",
    "LayerAlignment",
    "World",
    "best_over_layers",
    "chance_mutual_knn",
    "cka",
    "clip_outliers",
    "hsic",
    "knn_indices",
    "knn_overlap",
    "make_world",
    "mutual_knn",
    "unbiased_cka",
]
