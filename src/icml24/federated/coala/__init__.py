"""COALA: A Practical and Vision-Centric Federated Learning Platform (Zhuang, Xu, Chen, Li & Lyu, ICML 2024,
https://arxiv.org/abs/2407.16560; official code https://github.com/SonyResearch/COALA).

COALA organises practical federated-learning scenarios in three levels, task (what a client trains), data
(label shift, feature shift, semi-supervised and continual data) and model (which network, which of its
parts are shared), and offers three depths of customisation: configuration (a nested config merged over the
defaults), components (register your own dataset / model / client / server) and workflow (override a stage of
the server's round). This package builds them on Flower's Message API (flwr 1.42): the round stages are
methods of a Flower strategy, the clients a Flower ClientApp, and the experiments run in Flower's simulation
engine or on real SuperNodes.

- configuration: :class:`CoalaConfig` and :func:`merge_config` (:mod:`~icml24.federated.coala.config`);
- data level: :class:`Partitioner` and its IID / Dirichlet / k-classes subclasses, :func:`domain_transform`,
  :class:`DigitsFederation` (:mod:`~icml24.federated.coala.partition`, :mod:`~icml24.federated.coala.data`);
- model level: :class:`LeNetTiny`, :func:`bn_state_keys` (:mod:`~icml24.federated.coala.models`);
- task level: :class:`ClassificationTask`, :class:`LocalTraining` (:mod:`~icml24.federated.coala.task`);
- aggregation: :func:`fedavg_states` on Flower's ``aggregate_arrayrecords``;
- Flower (the ``federated`` extra; loaded on first use): :class:`CoalaFedAvg`, :class:`CoalaFedProx`,
  :class:`SemiSupervisedFedAvg`, :func:`make_client_app`, :func:`make_server_app`, :class:`FederatedRun`,
  :class:`ContinualRun`, :func:`run_coala_simulation`, :func:`run_in_process`
  (:mod:`~icml24.federated.coala.flower`).
"""

from __future__ import annotations

from typing import Any

from icml24.federated.coala.config import ClientConfig, CoalaConfig, DataConfig, ServerConfig, merge_config
from icml24.federated.coala.data import (
    ArrayFederation,
    ClientData,
    DigitsFederation,
    FederatedDataset,
    ServerData,
    task_splits,
)
from icml24.federated.coala.models import LeNetTiny, bn_state_keys
from icml24.federated.coala.partition import (
    DOMAINS,
    ClassPartitioner,
    DirichletPartitioner,
    IIDPartitioner,
    Partitioner,
    domain_transform,
    load_digit_images,
    make_partitioner,
)
from icml24.federated.coala.task import ClassificationTask, LocalTraining

SLUG = "coala"

_FLOWER_NAMES = (
    "CoalaFedAvg",
    "CoalaFedProx",
    "ContinualRun",
    "FederatedRun",
    "InProcessGrid",
    "SemiSupervisedFedAvg",
    "discover_partitions",
    "fedavg_states",
    "make_client_app",
    "make_server_app",
    "run_coala_simulation",
    "run_in_process",
    "state_arrays",
)

__all__ = [
    "ArrayFederation",
    "FederatedDataset",
    "DOMAINS",
    "SLUG",
    "ClassPartitioner",
    "ClassificationTask",
    "ClientConfig",
    "ClientData",
    "CoalaConfig",
    "DataConfig",
    "DigitsFederation",
    "DirichletPartitioner",
    "IIDPartitioner",
    "LeNetTiny",
    "LocalTraining",
    "Partitioner",
    "ServerConfig",
    "ServerData",
    "bn_state_keys",
    "domain_transform",
    "load_digit_images",
    "make_partitioner",
    "merge_config",
    "task_splits",
    *_FLOWER_NAMES,
]


def __getattr__(name: str) -> Any:
    # Flower is an optional dependency (the federated extra): import it only when one of its names is asked for.
    if name == "fedavg_states":
        from icml24.federated.coala import aggregation

        return aggregation.fedavg_states
    if name in _FLOWER_NAMES:
        from icml24.federated.coala import flower

        return getattr(flower, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
