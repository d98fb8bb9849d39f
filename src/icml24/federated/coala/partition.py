"""Data level of COALA: how a dataset is divided among clients (label shift) and how domains differ
(feature shift).

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Section 3 (data level) and the official ``coala/datasets/simulation.py``:
the configuration's ``split_type`` chooses

- ``iid``: shuffle and cut into equal shares;
- ``dir``: Dirichlet label skew: for every class, proportions ``p ~ Dir(alpha 1_K)`` over the ``K`` clients
  (clients already holding ``N / K`` samples take no more), redrawn until every client holds ``min_size``
  samples; smaller ``alpha`` = more skew (the same partition as rob-fcp's
  :func:`~icml24.conformal.rob_fcp.splits.dirichlet_label_split`, which this module reuses);
- ``class``: each client holds exactly ``classes_per_client`` labels; a class's samples are split equally
  among the clients that hold it.

A partitioner is a class with one method, ``split(labels, n_clients, rng) -> list of index arrays``; the
data-level customisation is a subclass of :class:`Partitioner` (see ``tests/federated/coala``).

Feature shift: :func:`domain_transform` maps 8x8 digit images to one of four deterministic domains
(original, inverted, rotated by 90 degrees, salt-and-pepper noise then a 3x3 box blur), a miniature of
COALA's Digits-5 benchmark (MNIST, SVHN, USPS, SynthDigits, MNIST-M).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from icml24.conformal.rob_fcp.splits import dirichlet_label_split
from icml24.federated.coala._checks import finite_float, int_at_least, labels_1d, one_of, rng_of

__all__ = [
    "DOMAINS",
    "ClassPartitioner",
    "DirichletPartitioner",
    "IIDPartitioner",
    "Partitioner",
    "domain_transform",
    "load_digit_images",
    "make_partitioner",
]

DOMAINS: tuple[str, ...] = ("original", "inverted", "rotated", "noisy")
"""The feature-shift domains of :func:`domain_transform` (a miniature Digits-5)."""


class Partitioner:
    """Base class of the data-level component: divide sample indices among clients.

    Subclasses implement :meth:`split`; :meth:`__call__` checks the arguments and the result (every sample
    assigned exactly once).
    """

    def split(self, labels: np.ndarray, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Return ``n_clients`` index arrays that partition ``range(len(labels))``."""
        raise NotImplementedError

    def __call__(self, labels: np.ndarray, n_clients: int, rng: np.random.Generator | int | None = None,
                 ) -> list[np.ndarray]:  # fmt: skip
        y = labels_1d(labels)
        k = int_at_least(n_clients, "n_clients", 1)
        if k > y.size:
            raise ValueError(f"n_clients ({k}) exceeds the number of samples ({y.size})")
        parts = [np.sort(np.asarray(p, dtype=np.int64)) for p in self.split(y, k, rng_of(rng))]
        if len(parts) != k:
            raise RuntimeError(f"{type(self).__name__}.split returned {len(parts)} parts for {k} clients")
        flat = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        if flat.size != y.size or not np.array_equal(np.sort(flat), np.arange(y.size)):
            raise RuntimeError(f"{type(self).__name__}.split must assign every sample exactly once")
        return parts


@dataclass(frozen=True)
class IIDPartitioner(Partitioner):
    """``split_type="iid"``: a random permutation cut into shares whose sizes differ by at most one."""

    def split(self, labels: np.ndarray, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
        return list(np.array_split(rng.permutation(labels.size), n_clients))


@dataclass(frozen=True)
class DirichletPartitioner(Partitioner):
    """``split_type="dir"``: Dirichlet(``alpha``) label skew, every client with >= ``min_size`` samples."""

    alpha: float = 0.5
    """Dirichlet concentration (COALA's ``alpha``; 0.5 and 0.1 in its label-shift benchmark)."""
    min_size: int = 10
    """Redraw until every client holds at least this many samples (COALA's ``min_size``)."""

    def __post_init__(self) -> None:
        finite_float(self.alpha, "alpha", low=0.0, low_open=True)
        int_at_least(self.min_size, "min_size", 0)

    def split(self, labels: np.ndarray, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
        if self.min_size * n_clients > labels.size:
            raise ValueError(f"min_size={self.min_size} x n_clients={n_clients} exceeds the {labels.size} samples")
        return dirichlet_label_split(labels, n_clients, float(self.alpha), rng, min_size=int(self.min_size))


@dataclass(frozen=True)
class ClassPartitioner(Partitioner):
    """``split_type="class"``: every client holds exactly ``classes_per_client`` labels.

    Client ``k`` takes the classes ``order[(k c + j) mod C]``, ``j < c``, of a random class order, so every
    class is held by someone once ``K c >= C``; each class is split equally at random among its holders.
    """

    classes_per_client: int = 2
    """Labels per client (COALA's ``class_per_client``)."""

    def __post_init__(self) -> None:
        int_at_least(self.classes_per_client, "classes_per_client", 1)

    def split(self, labels: np.ndarray, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
        classes = np.unique(labels)
        c = int(self.classes_per_client)
        if c > classes.size:
            raise ValueError(f"classes_per_client={c} exceeds the {classes.size} classes in labels")
        if n_clients * c < classes.size:
            raise ValueError(f"n_clients x classes_per_client = {n_clients * c} cannot cover {classes.size} classes")
        order = rng.permutation(classes)
        held = [[order[(k * c + j) % classes.size] for j in range(c)] for k in range(n_clients)]
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for cls in classes:
            holders = [k for k in range(n_clients) if cls in held[k]]
            idx = rng.permutation(np.flatnonzero(labels == cls))
            for k, share in zip(holders, np.array_split(idx, len(holders)), strict=True):
                parts[k].append(share)
        return [np.concatenate(p) for p in parts]


def make_partitioner(split_type: str, *, alpha: float = 0.5, classes_per_client: int = 2,
                     min_size: int = 10) -> Partitioner:  # fmt: skip
    """The partitioner of COALA's ``data.split_type`` (``"iid"``, ``"dir"`` or ``"class"``)."""
    split_type = one_of(split_type, "split_type", ("iid", "dir", "class"))
    finite_float(alpha, "alpha", low=0.0, low_open=True)
    int_at_least(classes_per_client, "classes_per_client", 1)
    int_at_least(min_size, "min_size", 0)
    if split_type == "iid":
        return IIDPartitioner()
    if split_type == "dir":
        return DirichletPartitioner(alpha=alpha, min_size=min_size)
    return ClassPartitioner(classes_per_client=classes_per_client)


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8), y.astype(np.int64)


def load_digit_images() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 8x8 digits as ``(images (n, 1, 8, 8) float32 in [0, 1], labels (n,))``
    (bundled with scikit-learn: no download). Copies, so a caller may modify them."""
    x, y = _digits()
    return x.copy(), y.copy()


def domain_transform(images: np.ndarray, domain: str) -> np.ndarray:
    """Map ``(n, c, h, w)`` images in [0, 1] to a feature-shift domain (deterministic: the same array
    always gives the same output; the noise mask comes from a fixed seed).

    - ``original``: unchanged; ``inverted``: ``1 - x``; ``rotated``: 90 degrees counter-clockwise;
    - ``noisy``: 15% of pixels set to 0 or 1 (salt and pepper), then a 3x3 box blur.
    """
    domain = one_of(domain, "domain", DOMAINS)
    x = np.asarray(images)
    if x.ndim != 4 or not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"images must be a float array of shape (n, channels, h, w), got {x.shape}, {x.dtype}")
    if x.size and not np.isfinite(x).all():
        raise ValueError("images must be finite")
    x = x.astype(np.float32, copy=True)
    if domain == "inverted":
        return 1.0 - x
    if domain == "rotated":
        return np.ascontiguousarray(np.rot90(x, k=1, axes=(2, 3)))
    if domain == "noisy":
        rng = np.random.default_rng(20240723)
        mask = rng.uniform(size=x.shape) < 0.15
        x = np.where(mask, (rng.uniform(size=x.shape) < 0.5).astype(np.float32), x)
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="edge")
        h, w = x.shape[2:]
        return sum(padded[:, :, i : i + h, j : j + w] for i in range(3) for j in range(3)) / 9.0
    return x
