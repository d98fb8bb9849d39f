"""The federated datasets of the miniature: scikit-learn digits divided by a scenario.

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Sections 5.2-5.4 (data level: label shift, feature shift,
semi-supervised FL, federated continual learning). A :class:`DigitsFederation` answers two questions from a
scenario (the keys of the round's ConfigRecord, so one simulation can run several scenarios): what client
``k`` of ``K`` holds (:meth:`~DigitsFederation.client_data`) and what the server holds
(:meth:`~DigitsFederation.server_data`). The data-level customisation is a subclass (another dataset) or
another :class:`~icml24.federated.coala.partition.Partitioner` (``partitioner=``).

Scenario keys (all optional; defaults in brackets): ``split-type`` [iid] / ``alpha`` [0.5] /
``classes-per-client`` [2] / ``min-size`` [10]: the label split of the training pool; ``data-seed`` [0];
``feature-shift`` [False] with ``domains``: clients are divided evenly among the domains (client ``k`` of
``K`` gets domain ``floor(k D / K)``), each domain a disjoint share of the pool in its transform, IID within
the domain, and each client tests on its domain's test share; ``labels-per-class`` [0]: > 0 makes the
label-in-server semi-supervised scenario (the server holds that many labelled samples per class, the clients
the rest without labels); ``task-classes`` [all]: a client keeps only samples of these classes (a task of
class-incremental learning).

Any data, not only images (issue 35): the ClientApp needs only an object with the :class:`FederatedDataset`
protocol, a method ``client_data(partition_id, num_partitions, scenario) -> ClientData``.
:class:`ArrayFederation` is that object for a user's own arrays: tabular rows ``(n, d)``, text embeddings, or
images, with integer labels, divided by the same scenario keys (feature shift needs images).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from icml24.federated.coala._checks import int_at_least, labels_1d
from icml24.federated.coala.partition import (
    DOMAINS,
    Partitioner,
    domain_transform,
    load_digit_images,
    make_partitioner,
)

__all__ = [
    "ArrayFederation",
    "ClientData",
    "DigitsFederation",
    "FederatedDataset",
    "ServerData",
    "task_splits",
]


@dataclass(frozen=True)
class ClientData:
    """What one client holds: training inputs and labels (None: unlabeled) and its local test set."""

    x_train: np.ndarray
    y_train: np.ndarray | None
    x_test: np.ndarray
    y_test: np.ndarray
    domain: str = "original"


@dataclass(frozen=True)
class ServerData:
    """What the server holds: the central test set and, in the semi-supervised scenario, labelled data."""

    x_test: np.ndarray
    y_test: np.ndarray
    x_labeled: np.ndarray
    y_labeled: np.ndarray


@runtime_checkable
class FederatedDataset(Protocol):
    """The data level as the ClientApp sees it: what client ``partition_id`` of ``num_partitions`` holds in a
    scenario (the round's ConfigRecord keys). ``ClientData.x_train`` / ``x_test`` are whatever the task's model
    takes (images, tabular rows, token ids), ``y_*`` integer class labels (``y_train`` None: unlabeled)."""

    def client_data(
        self, partition_id: int, num_partitions: int, scenario: Mapping[str, Any]
    ) -> ClientData: ...


def _get(scenario: Mapping[str, Any], key: str, default: Any) -> Any:
    value = scenario.get(key, default)
    return default if value is None else value


class DigitsFederation:
    """scikit-learn digits (8x8, 10 classes) divided among clients by a scenario (see the module docstring).

    Args:
        test_fraction: share of the digits held out as test data (stratified, by ``data-seed``).
        partitioner: replaces the label split that ``split-type`` would choose (data-level customisation).
    """

    def __init__(self, *, test_fraction: float = 0.3, partitioner: Partitioner | None = None) -> None:
        if (
            isinstance(test_fraction, bool)
            or not isinstance(test_fraction, (int, float))
            or not 0 < test_fraction < 1
        ):
            raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
        if partitioner is not None and not isinstance(partitioner, Partitioner):
            raise TypeError(f"partitioner must be a Partitioner, got {type(partitioner).__name__}")
        self.test_fraction = float(test_fraction)
        self.partitioner = partitioner
        self._cache: dict[tuple, Any] = {}

    # -- the pools ------------------------------------------------------------------------------------------
    def load(self) -> tuple[np.ndarray, np.ndarray]:
        """All images and labels (override for another dataset of ``(n, c, h, w)`` images in [0, 1])."""
        return load_digit_images()

    def _pools(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        key = ("pools", seed)
        if key not in self._cache:
            from sklearn.model_selection import train_test_split

            x, y = self.load()
            x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=self.test_fraction, stratify=y,
                                                      random_state=seed)  # fmt: skip
            self._cache[key] = (x_tr, y_tr, x_te, y_te)
        return self._cache[key]

    def _split(self, scenario: Mapping[str, Any], num_partitions: int) -> dict[str, Any]:
        seed = int(_get(scenario, "data-seed", 0))
        shift = bool(_get(scenario, "feature-shift", False))
        domains = tuple(_get(scenario, "domains", DOMAINS)) if shift else ("original",)
        lpc = int(_get(scenario, "labels-per-class", 0))
        label_key = (_get(scenario, "split-type", "iid"), float(_get(scenario, "alpha", 0.5)),
                     int(_get(scenario, "classes-per-client", 2)), int(_get(scenario, "min-size", 10)))  # fmt: skip
        key = ("split", seed, num_partitions, shift, domains, lpc, label_key)
        if key in self._cache:
            return self._cache[key]
        x_tr, y_tr, x_te, y_te = self._pools(seed)
        rng = np.random.default_rng([seed, 1])
        pool = np.arange(y_tr.size)
        labeled = np.empty(0, dtype=np.int64)
        if lpc > 0:
            labeled = np.concatenate(
                [rng.permutation(np.flatnonzero(y_tr == c))[:lpc] for c in np.unique(y_tr)]
            )
            pool = np.setdiff1d(pool, labeled)
        if shift:
            if x_tr.ndim != 4:
                raise ValueError(f"feature-shift transforms images (n, c, h, w); this federation's inputs have shape "
                                 f"{x_tr.shape}")  # fmt: skip
            n_dom = len(domains)
            if num_partitions < n_dom:
                raise ValueError(
                    f"feature shift needs at least one client per domain: {num_partitions} < {n_dom}"
                )
            dom_of = [k * n_dom // num_partitions for k in range(num_partitions)]
            tr_chunks = np.array_split(rng.permutation(pool), n_dom)
            te_chunks = np.array_split(rng.permutation(y_te.size), n_dom)
            parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * num_partitions
            for d in range(n_dom):
                members = [k for k in range(num_partitions) if dom_of[k] == d]
                for k, share in zip(
                    members, np.array_split(rng.permutation(tr_chunks[d]), len(members)), strict=True
                ):
                    parts[k] = share
            out = {"parts": parts, "domain_of": dom_of, "test_chunks": te_chunks, "domains": domains}
        else:
            splitter = self.partitioner or make_partitioner(
                label_key[0], alpha=label_key[1], classes_per_client=label_key[2], min_size=label_key[3]
            )
            parts = [pool[p] for p in splitter(y_tr[pool], num_partitions, rng)]
            out = {"parts": parts, "domain_of": [0] * num_partitions, "test_chunks": [np.arange(y_te.size)],
                   "domains": domains}  # fmt: skip
        out["labeled"] = labeled
        self._cache[key] = out
        return out

    # -- the two views --------------------------------------------------------------------------------------
    def client_data(self, partition_id: int, num_partitions: int, scenario: Mapping[str, Any]) -> ClientData:
        """What client ``partition_id`` of ``num_partitions`` holds in ``scenario``."""
        num_partitions = int_at_least(num_partitions, "num_partitions", 1)
        partition_id = int_at_least(partition_id, "partition_id", 0)
        if partition_id >= num_partitions:
            raise ValueError(f"partition_id must be < num_partitions ({num_partitions}), got {partition_id}")
        if not isinstance(scenario, Mapping):
            raise TypeError(f"scenario must be a mapping of scenario keys, got {type(scenario).__name__}")
        split = self._split(scenario, num_partitions)
        x_tr, y_tr, x_te, y_te = self._pools(int(_get(scenario, "data-seed", 0)))
        idx = split["parts"][partition_id]
        d = split["domain_of"][partition_id]
        te = split["test_chunks"][d]
        domain = split["domains"][d]
        xs, ys, xt, yt = x_tr[idx], y_tr[idx], x_te[te], y_te[te]
        task_classes = scenario.get("task-classes")
        if task_classes is not None:
            cls = np.asarray(list(task_classes), dtype=np.int64)
            keep, keep_t = np.isin(ys, cls), np.isin(yt, cls)
            xs, ys, xt, yt = xs[keep], ys[keep], xt[keep_t], yt[keep_t]
        if domain != "original":
            xs, xt = domain_transform(xs, domain), domain_transform(xt, domain)
        labeled = int(_get(scenario, "labels-per-class", 0)) == 0
        return ClientData(xs, ys if labeled else None, xt, yt, domain)

    def server_data(self, scenario: Mapping[str, Any], num_partitions: int = 20) -> ServerData:
        """The central test set (original domain) and the server's labelled data (semi-supervised)."""
        if not isinstance(scenario, Mapping):
            raise TypeError(f"scenario must be a mapping of scenario keys, got {type(scenario).__name__}")
        split = self._split(scenario, int_at_least(num_partitions, "num_partitions", 1))
        x_tr, y_tr, x_te, y_te = self._pools(int(_get(scenario, "data-seed", 0)))
        lab = split["labeled"]
        return ServerData(x_te, y_te, x_tr[lab], y_tr[lab])

    def label_histograms(self, scenario: Mapping[str, Any], num_partitions: int,
                         num_classes: int = 10) -> np.ndarray:  # fmt: skip
        """``(K, C)`` label counts of the clients' training data (a view of the label skew)."""
        rows = []
        for k in range(num_partitions):
            y = self.client_data(k, num_partitions, scenario).y_train
            rows.append(
                np.bincount(y, minlength=num_classes) if y is not None else np.zeros(num_classes, int)
            )
        return np.stack(rows)


class ArrayFederation(DigitsFederation):
    """A user's own labelled arrays as a federation: the same scenarios (IID / Dirichlet / k classes per
    client, semi-supervised, class-incremental) over any inputs, e.g. the rows of a tabular dataset.

    Args:
        x: inputs ``(n, ...)``: tabular rows ``(n, d)``, embeddings, or images ``(n, c, h, w)``; finite reals.
        y: integer class labels ``(n,)`` in ``0 .. C - 1``.
        test_fraction, partitioner: as in :class:`DigitsFederation`.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, *, test_fraction: float = 0.3,
                 partitioner: Partitioner | None = None) -> None:  # fmt: skip
        super().__init__(test_fraction=test_fraction, partitioner=partitioner)
        xa = np.asarray(x)
        if xa.ndim < 2 or xa.shape[0] < 2 or not np.issubdtype(xa.dtype, np.number) or np.iscomplexobj(xa):
            raise ValueError(
                f"x must be a real array of at least 2 rows, (n, ...), got shape {xa.shape}, dtype {xa.dtype}"
            )
        xa = xa.astype(np.float32)
        if not np.isfinite(xa).all():
            raise ValueError("x must be finite")
        ya = labels_1d(y, "y")
        if ya.shape[0] != xa.shape[0]:
            raise ValueError(
                f"x and y must have the same number of rows, got {xa.shape[0]} and {ya.shape[0]}"
            )
        self._x, self._y = xa, ya.astype(np.int64)

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        """The arrays given to the constructor."""
        return self._x, self._y


def task_splits(num_classes: int = 10, num_tasks: int = 5) -> list[list[int]]:
    """Class-incremental tasks: consecutive blocks of ``num_classes / num_tasks`` classes."""
    num_classes = int_at_least(num_classes, "num_classes", 2)
    num_tasks = int_at_least(num_tasks, "num_tasks", 1)
    if num_classes % num_tasks:
        raise ValueError(f"num_tasks must divide num_classes ({num_classes}), got {num_tasks}")
    per = num_classes // num_tasks
    return [list(range(t * per, (t + 1) * per)) for t in range(num_tasks)]
