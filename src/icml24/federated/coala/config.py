"""Configuration level of COALA: one nested, frozen config merged over the defaults.

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Section 4 (configuration customisation): a user changes a scenario by
overriding keys of the default configuration (``coala.init(config)`` merges a dict over
``coala/config.yaml``). Here the sections are frozen dataclasses and :func:`merge_config` returns a new
config with the user's keys replaced and every other key kept (unknown keys are an error, not ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from icml24.federated.coala._checks import finite_float, int_at_least, one_of

__all__ = ["ClientConfig", "CoalaConfig", "DataConfig", "ServerConfig", "merge_config"]


@dataclass(frozen=True)
class DataConfig:
    """``data`` section: the federated scenario."""

    split_type: str = "iid"
    """``"iid"``, ``"dir"`` (Dirichlet label skew) or ``"class"`` (k classes per client)."""
    alpha: float = 0.5
    """Dirichlet concentration for ``split_type="dir"``."""
    classes_per_client: int = 2
    """Labels per client for ``split_type="class"``."""
    num_of_clients: int = 20
    """Number of clients (SuperNodes)."""
    min_size: int = 10
    """Minimum samples per client of the Dirichlet split."""
    feature_shift: bool = False
    """True: clients are divided evenly among the domains of ``domains`` (Digits-4), IID within a domain."""
    domains: tuple[str, ...] = ("original", "inverted", "rotated", "noisy")
    """Feature-shift domains (see :func:`~icml24.federated.coala.partition.domain_transform`)."""
    test_fraction: float = 0.3
    """Share of the data held out as the (server or per-client) test set."""

    def __post_init__(self) -> None:
        one_of(self.split_type, "split_type", ("iid", "dir", "class"))
        finite_float(self.alpha, "alpha", low=0.0, low_open=True)
        int_at_least(self.classes_per_client, "classes_per_client", 1)
        int_at_least(self.num_of_clients, "num_of_clients", 1)
        int_at_least(self.min_size, "min_size", 0)
        if not isinstance(self.feature_shift, bool):
            raise TypeError(f"feature_shift must be True or False, got {self.feature_shift!r}")
        if not self.domains or not all(isinstance(d, str) for d in self.domains):
            raise ValueError(f"domains must be a non-empty tuple of domain names, got {self.domains!r}")
        finite_float(self.test_fraction, "test_fraction", low=0.0, high=0.9, low_open=True)


@dataclass(frozen=True)
class ServerConfig:
    """``server`` section: the round loop and the aggregation."""

    rounds: int = 30
    """Communication rounds."""
    clients_per_round: int = 5
    """Clients sampled per round, without replacement."""
    aggregation_strategy: str = "FedAvg"
    """``"FedAvg"`` (weights proportional to sample counts) or ``"equal"`` (plain mean)."""
    algorithm: str = "fedavg"
    """``"fedavg"``, ``"fedbn"`` (batch-norm parameters and buffers stay local) or ``"fedprox"``."""
    proximal_mu: float = 0.01
    """FedProx's proximal weight mu (``algorithm="fedprox"``)."""
    test_every: int = 0
    """Evaluate every this many rounds (0: after the last round only)."""

    def __post_init__(self) -> None:
        int_at_least(self.rounds, "rounds", 1)
        int_at_least(self.clients_per_round, "clients_per_round", 1)
        one_of(self.aggregation_strategy, "aggregation_strategy", ("FedAvg", "equal"))
        one_of(self.algorithm, "algorithm", ("fedavg", "fedbn", "fedprox"))
        finite_float(self.proximal_mu, "proximal_mu", low=0.0)
        int_at_least(self.test_every, "test_every", 0)


@dataclass(frozen=True)
class ClientConfig:
    """``client`` section: local training."""

    local_epoch: int = 1
    """Local epochs E per round."""
    batch_size: int = 32
    """Mini-batch size."""
    lr: float = 0.05
    """SGD learning rate."""
    momentum: float = 0.9
    """SGD momentum."""
    weight_decay: float = 0.0
    """SGD weight decay."""

    def __post_init__(self) -> None:
        int_at_least(self.local_epoch, "local_epoch", 1)
        int_at_least(self.batch_size, "batch_size", 1)
        finite_float(self.lr, "lr", low=0.0, low_open=True)
        finite_float(self.momentum, "momentum", low=0.0, high=1.0)
        finite_float(self.weight_decay, "weight_decay", low=0.0)


@dataclass(frozen=True)
class CoalaConfig:
    """The whole configuration (COALA's ``config.yaml``): ``data``, ``server``, ``client`` and ``seed``."""

    data: DataConfig = field(default_factory=DataConfig)
    """The federated scenario."""
    server: ServerConfig = field(default_factory=ServerConfig)
    """The round loop and aggregation."""
    client: ClientConfig = field(default_factory=ClientConfig)
    """Local training."""
    seed: int = 0
    """Seed of the partition, the client sampling, the model initialisation and local shuffling."""

    def __post_init__(self) -> None:
        for name, cls in (("data", DataConfig), ("server", ServerConfig), ("client", ClientConfig)):
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}")
        int_at_least(self.seed, "seed", 0)


def merge_config(base: CoalaConfig, overrides: Mapping[str, Any]) -> CoalaConfig:
    """``base`` with the (nested) keys of ``overrides`` replaced; every other key keeps its value.

    ``overrides`` mirrors the config: ``{"data": {"split_type": "dir", "alpha": 0.1}, "seed": 3}``. An
    unknown key raises ``ValueError`` naming it (a typo must not silently keep the default).
    """
    if not isinstance(base, CoalaConfig):
        raise TypeError(f"base must be a CoalaConfig, got {type(base).__name__}")
    if not isinstance(overrides, Mapping):
        raise TypeError(f"overrides must be a mapping of config keys, got {type(overrides).__name__}")
    return _merge(base, overrides, "overrides")


def _merge(obj: Any, overrides: Mapping[str, Any], path: str) -> Any:
    known = {f.name for f in fields(obj)}
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in known:
            raise ValueError(f"{path}: unknown config key {key!r} (known: {', '.join(sorted(known))})")
        current = getattr(obj, key)
        if is_dataclass(current) and isinstance(value, Mapping):
            changes[key] = _merge(current, value, f"{path}.{key}")
        elif key == "domains" and isinstance(value, list):
            changes[key] = tuple(value)
        else:
            changes[key] = value
    try:
        return replace(obj, **changes)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{path}: {exc}") from exc
