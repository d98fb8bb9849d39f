"""Deployable Flower apps: the same ClientApp and strategies as the simulation, for a real SuperLink.

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Section 4 (remote training: COALA's ``start_server`` / ``start_client``).
With Flower, the server side is a ServerApp run by the SuperLink and each client a SuperNode that runs the
ClientApp; this module holds both as module-level objects (``icml24.federated.coala.apps:server_app`` and
``:client_app``). Each SuperNode names its partition: ``--node-config "partition-id=K num-partitions=N"``.

The run config (``flwr run ... --run-config``) chooses the scenario: ``algorithm`` (fedavg | fedbn |
fedprox), ``num-rounds``, ``clients-per-round``, ``split-type``, ``alpha``, ``classes-per-client``,
``feature-shift``, ``local-epoch``, ``lr``, ``proximal-mu``, ``seed``; defaults come from
:class:`~icml24.federated.coala.config.CoalaConfig`. Importing this module imports ``flwr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.app import ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp

from icml24.federated.coala.config import CoalaConfig, merge_config
from icml24.federated.coala.flower import (
    CoalaFedAvg,
    CoalaFedProx,
    discover_partitions,
    make_client_app,
    state_arrays,
)
from icml24.federated.coala.models import bn_state_keys
from icml24.federated.coala.task import ClassificationTask

__all__ = ["client_app", "config_from_run_config", "server_app"]

_DATA = {"split-type": "split_type", "alpha": "alpha", "classes-per-client": "classes_per_client",
         "feature-shift": "feature_shift", "num-partitions": "num_of_clients"}  # fmt: skip
_SERVER = {"num-rounds": "rounds", "clients-per-round": "clients_per_round", "algorithm": "algorithm",
           "proximal-mu": "proximal_mu"}  # fmt: skip
_CLIENT = {"local-epoch": "local_epoch", "batch-size": "batch_size", "lr": "lr", "momentum": "momentum"}


def config_from_run_config(run_config: Mapping[str, Any]) -> CoalaConfig:
    """A :class:`~icml24.federated.coala.config.CoalaConfig` from Flower's flat run config keys."""
    overrides: dict[str, Any] = {}
    for section, keys in (("data", _DATA), ("server", _SERVER), ("client", _CLIENT)):
        values = {attr: run_config[key] for key, attr in keys.items() if key in run_config}
        if values:
            overrides[section] = values
    if "seed" in run_config:
        overrides["seed"] = int(run_config["seed"])
    return merge_config(CoalaConfig(), overrides)


client_app = make_client_app()
"""The ClientApp every SuperNode runs (digits, LeNetTiny)."""

server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    cfg = config_from_run_config(context.run_config)
    task = ClassificationTask()
    import torch

    torch.manual_seed(cfg.seed)
    model = task.build_model()
    kwargs = {"clients_per_round": cfg.server.clients_per_round, "seed": cfg.seed,
              "min_available_nodes": cfg.data.num_of_clients, "evaluate_clients": True}  # fmt: skip
    if cfg.server.algorithm == "fedprox":
        strategy: CoalaFedAvg = CoalaFedProx(proximal_mu=cfg.server.proximal_mu, **kwargs)
    else:
        local = bn_state_keys(model) if cfg.server.algorithm == "fedbn" else ()
        strategy = CoalaFedAvg(local_keys=local, **kwargs)
    strategy.node_partitions = discover_partitions(grid, min_nodes=cfg.data.num_of_clients)
    round_config = {"split-type": cfg.data.split_type, "alpha": cfg.data.alpha,
                    "classes-per-client": cfg.data.classes_per_client, "feature-shift": cfg.data.feature_shift,
                    "num-partitions": cfg.data.num_of_clients, "data-seed": cfg.seed, "seed": cfg.seed,
                    "local-epoch": cfg.client.local_epoch, "batch-size": cfg.client.batch_size, "lr": cfg.client.lr,
                    "momentum": cfg.client.momentum, "run-name": cfg.server.algorithm}  # fmt: skip
    strategy.start(grid=grid, initial_arrays=state_arrays(model), num_rounds=cfg.server.rounds,
                   train_config=ConfigRecord(round_config), evaluate_config=ConfigRecord(round_config))  # fmt: skip
