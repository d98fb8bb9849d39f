"""COALA's round workflow as Flower building blocks (Message API, flwr 1.42): strategies, a ClientApp, a
ServerApp that runs several experiments in one federation, and the two drivers (Flower's simulation engine,
and an in-process Grid without Ray).

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Section 4 (workflow customisation): a server round is a fixed sequence of
overridable stages. Here they are methods of :class:`CoalaFedAvg`, a subclass of Flower's
``flwr.serverapp.strategy.FedAvg``:

- :meth:`CoalaFedAvg.selection`: ``clients_per_round`` clients without replacement from a seeded generator
  (by partition id, so a seed gives the same clients in the simulation and on real SuperNodes);
- ``configure_train`` (distribution): the global arrays, the round's ConfigRecord (local-training settings,
  the scenario, ``local-keys``) and any extra ArrayRecords (the continual-learning teacher);
- the clients' ``train`` (:func:`make_client_app`): load the global model, restore the client's local keys
  from its ``context.state``, run the task's local update, keep its local keys, reply arrays + metrics;
- :meth:`CoalaFedAvg.aggregation`: Flower's weighted mean (:func:`~icml24.federated.coala.aggregation.fedavg_states`)
  over the non-local keys (FedBN: batch norm is local);
- :meth:`CoalaFedAvg.post_aggregation`: a server stage after aggregation (identity; the semi-supervised
  strategy trains on the server's labelled data here);
- ``configure_evaluate`` / ``aggregate_evaluate``: test in client (each client on its local test set, with
  its local keys) after the last round or every ``test_every`` rounds; per-client results are kept.

FedProx (:class:`CoalaFedProx`) sends ``proximal-mu`` as Flower's ``FedProx`` does; its server side is
FedAvg's. Importing this module imports ``flwr``.

Deployment: :mod:`icml24.federated.coala.apps` defines module-level ``client_app`` and ``server_app`` objects
for ``flwr run`` on a SuperLink with SuperNodes started with ``--node-config "partition-id=K num-partitions=N"``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from logging import INFO, WARNING
from typing import Any

import numpy as np
import torch
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.serverapp.strategy.strategy_utils import sample_nodes
from flwr.supercore import log

from icml24.conformal.rob_fcp.weights import check_max_weight_ratio, weight_cap
from icml24.federated.coala._checks import finite_float, int_at_least, one_of
from icml24.federated.coala.aggregation import (
    check_evaluate_reply,
    check_train_reply,
    fedavg_states,
    screen_updates,
    update_norm,
)
from icml24.federated.coala.data import DigitsFederation, FederatedDataset
from icml24.federated.coala.task import ClassificationTask, LocalTraining

__all__ = [
    "CoalaFedAvg",
    "CoalaFedProx",
    "ContinualRun",
    "FederatedRun",
    "InProcessGrid",
    "SemiSupervisedFedAvg",
    "discover_partitions",
    "make_client_app",
    "make_server_app",
    "run_coala_simulation",
    "run_in_process",
    "state_arrays",
]

ARRAYS_KEY = "arrays"
CONFIG_KEY = "config"
METRICS_KEY = "metrics"
TEACHER_KEY = "teacher"

_SETTING_KEYS = {"local-epoch": "local_epoch", "batch-size": "batch_size", "lr": "lr", "momentum": "momentum",
                 "weight-decay": "weight_decay", "proximal-mu": "proximal_mu", "kd-alpha": "kd_alpha",
                 "kd-temperature": "kd_temperature", "pseudo-label-threshold": "pseudo_label_threshold"}  # fmt: skip


def state_arrays(model: torch.nn.Module) -> ArrayRecord:
    """A model's ``state_dict`` as a Flower ArrayRecord (the message payload)."""
    return ArrayRecord({k: Array(v.detach().cpu().numpy().copy()) for k, v in model.state_dict().items()})


def _load_state(model: torch.nn.Module, arrays: ArrayRecord | Mapping[str, np.ndarray]) -> None:
    ref = model.state_dict()
    state = {}
    for k, v in ref.items():
        a = arrays[k].numpy() if isinstance(arrays, ArrayRecord) else np.asarray(arrays[k])
        state[k] = torch.as_tensor(np.asarray(a)).to(v.dtype).reshape(v.shape)
    model.load_state_dict(state)


def local_training_from(config: Mapping[str, Any]) -> LocalTraining:
    """The :class:`~icml24.federated.coala.task.LocalTraining` of a round's ConfigRecord keys."""
    kwargs = {attr: config[key] for key, attr in _SETTING_KEYS.items() if key in config}
    for k in ("local_epoch", "batch_size"):
        if k in kwargs:
            kwargs[k] = int(kwargs[k])
    return LocalTraining(**kwargs)


# ------------------------------------------------------------------------------------------------------
# Server side: strategies
# ------------------------------------------------------------------------------------------------------


class CoalaFedAvg(FedAvg):
    """FedAvg with COALA's server stages as overridable methods (see the module docstring).

    Args:
        clients_per_round: clients sampled per round, without replacement (COALA's ``clients_per_round``).
        aggregation_strategy: ``"FedAvg"`` (weights = ``num-examples``) or ``"equal"`` (plain mean).
        local_keys: ``state_dict`` keys that stay on the clients (FedBN: ``bn_state_keys(model)``).
        evaluate_clients: test in client (each client's local test set) after the last round.
        test_every: also test in client every this many rounds (0: last round only).
        seed: seeds the client selection.
        min_available_nodes: wait for this many nodes before the first round.
        num_partitions: use only the nodes of partitions ``0 .. num_partitions - 1`` (None: every node); a
            scenario with fewer clients than SuperNodes runs in the same federation.
        max_num_examples: a reply claiming more examples than this is dropped (with its reason).
        max_weight_ratio: a client's weight is capped at this many times the round's median ``num-examples``
            (Rob-FCP's cap; None: no cap). 10 lies above the honest spread of our Dirichlet(0.1) splits (the
            largest of 5 selected clients holds up to 5.9x the median) and caps a claim of 10^12 examples.
        max_update_ratio: an update whose norm exceeds this many times the round's median update norm is
            dropped (None: no screen); needs three or more clients a round to resist one absurd update.

    Every reply is checked before it is averaged (:func:`~icml24.federated.coala.aggregation.check_train_reply`:
    the global model's keys, shapes and dtypes, finite floats, a finite integer ``num-examples`` in
    ``[0, max_num_examples]``); a bad one is dropped by node id with a log line, never raised. Per round:
    ``dropped_`` (partitions dropped), ``rejected_`` (``{node_id: reason}``), ``capped_`` (``{node_id:
    (claimed, used)}``) and ``update_ratios_`` (each kept update's norm over the round's median).
    """

    def __init__(
        self,
        *,
        clients_per_round: int = 5,
        aggregation_strategy: str = "FedAvg",
        local_keys: Collection[str] = (),
        evaluate_clients: bool = False,
        test_every: int = 0,
        seed: int = 0,
        min_available_nodes: int = 1,
        num_partitions: int | None = None,
        max_num_examples: float = 1e9,
        max_weight_ratio: float | None = 10.0,
        max_update_ratio: float | None = 100.0,
    ) -> None:
        self.max_num_examples = finite_float(max_num_examples, "max_num_examples", low=1.0)
        self.max_weight_ratio = check_max_weight_ratio(max_weight_ratio)
        self.max_update_ratio = None if max_update_ratio is None else finite_float(
            max_update_ratio, "max_update_ratio", low=1.0)  # fmt: skip
        self.num_partitions = (
            None if num_partitions is None else int_at_least(num_partitions, "num_partitions", 1)
        )
        self.clients_per_round = int_at_least(clients_per_round, "clients_per_round", 1)
        self.aggregation_strategy = one_of(aggregation_strategy, "aggregation_strategy", ("FedAvg", "equal"))
        if isinstance(local_keys, str):
            raise TypeError("local_keys must be a collection of state keys, not one string")
        self.local_keys = frozenset(str(k) for k in local_keys)
        if not isinstance(evaluate_clients, bool):
            raise TypeError(f"evaluate_clients must be True or False, got {evaluate_clients!r}")
        self.evaluate_clients = evaluate_clients
        self.test_every = int_at_least(test_every, "test_every", 0)
        self.seed = int_at_least(seed, "seed", 0)
        super().__init__(fraction_train=1.0, fraction_evaluate=1.0 if evaluate_clients else 0.0, min_train_nodes=1,
                         min_evaluate_nodes=1, min_available_nodes=int_at_least(min_available_nodes,
                                                                                "min_available_nodes", 1))  # fmt: skip
        self.node_partitions: dict[int, int] = {}
        self.extra_arrays: dict[str, ArrayRecord] = {}
        self.client_metrics_: dict[int, dict[int, dict[str, float]]] = {}
        self.selected_: dict[int, list[int]] = {}
        self.dropped_: dict[int, list[int]] = {}
        self.rejected_: dict[int, dict[int, str]] = {}
        self.capped_: dict[int, dict[int, tuple[float, float]]] = {}
        self.update_ratios_: dict[int, list[float]] = {}
        self.rejected_evaluations_: dict[int, dict[int, str]] = {}
        self.num_rounds_ = 0
        self._rng = np.random.default_rng(self.seed)
        self._global: ArrayRecord | None = None

    def summary(self) -> None:
        log(INFO, "\t├──> COALA FedAvg: %d clients/round, weights %s, %d local keys", self.clients_per_round,
            self.aggregation_strategy, len(self.local_keys))  # fmt: skip

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3, timeout: float = 3600,
              train_config: ConfigRecord | None = None, evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None) -> Any:  # fmt: skip
        """Flower's round loop; records ``num_rounds`` so the last round can be evaluated in client."""
        self.num_rounds_ = int(num_rounds)
        return super().start(
            grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config, evaluate_fn
        )

    # -- stages --------------------------------------------------------------------------------------------
    def partition_of(self, node_id: int) -> int:
        """The partition id of a node (its node id when the federation was not discovered)."""
        return self.node_partitions.get(int(node_id), int(node_id))

    def in_partition_order(self, replies: Iterable[Message]) -> list[Message]:
        """``replies`` sorted by the partition of their sender (then its node id).

        Replies arrive in completion order, which the simulation engine's scheduling varies from run to run,
        and a float sum depends on its order: aggregating in partition order makes a round a pure function of
        the clients' replies (without it the same seed gave FedBN 0.7398 in one run and 0.7407 in another)."""
        return sorted(
            replies, key=lambda m: (self.partition_of(m.metadata.src_node_id), m.metadata.src_node_id)
        )

    def eligible_nodes(self, grid: Grid) -> list[int]:
        """The connected nodes this strategy may use, ordered by partition id."""
        _, nodes = sample_nodes(grid, self.min_available_nodes, 0)
        if self.num_partitions is not None:
            nodes = [n for n in nodes if self.partition_of(n) < self.num_partitions]
        return sorted(nodes, key=self.partition_of)

    def selection(self, grid: Grid, server_round: int) -> list[int]:
        """COALA's ``selection``: ``clients_per_round`` node ids without replacement, seeded, by partition."""
        ordered = self.eligible_nodes(grid)
        size = min(self.clients_per_round, len(ordered))
        picks = self._rng.choice(len(ordered), size=size, replace=False)
        return [ordered[i] for i in sorted(picks)]

    def aggregation(self, server_round: int, replies: Sequence[RecordDict]) -> dict[str, np.ndarray]:
        """COALA's ``aggregation``: Flower's weighted mean over the non-local keys (``replies`` are checked
        already; their ``num-examples`` are the capped weights)."""
        states = [{k: v.numpy() for k, v in r.array_records[ARRAYS_KEY].items()} for r in replies]
        weights = None
        if self.aggregation_strategy == "FedAvg":
            weights = [float(next(iter(r.metric_records.values()))[self.weighted_by_key]) for r in replies]
            if not sum(weights) > 0:
                log(
                    INFO,
                    "COALA: every kept client of round %d reports 0 examples; equal weights",
                    server_round,
                )
                weights = None
        return fedavg_states(states, weights, local_keys=self.local_keys)

    def _drop(self, server_round: int, node: int, reason: str) -> None:
        self.rejected_.setdefault(server_round, {})[node] = reason
        self.dropped_.setdefault(server_round, []).append(self.partition_of(node))
        log(WARNING, "COALA: dropped node %d (partition %d) from round %d: %s", node, self.partition_of(node),
            server_round, reason)  # fmt: skip

    def screen_replies(self, server_round: int, replies: Iterable[Message]) -> list[tuple[int, dict, float]]:
        """The usable replies of a round as ``(node_id, state, weight)`` in partition order: each checked
        (keys, shapes, dtypes, finite floats, count), absurd updates screened against the round's median
        norm, weights capped at ``max_weight_ratio`` x the median count. Every drop and cap is logged."""
        if self._global is not None:
            reference = {k: (tuple(a.numpy().shape), a.numpy().dtype) for k, a in self._global.items()}
        else:  # aggregate_train without configure_train: the signature most replies share
            sigs = []
            for m in replies:
                with contextlib.suppress(Exception):
                    rec = m.content.array_records[ARRAYS_KEY]
                    sigs.append(
                        tuple((k, tuple(a.numpy().shape), str(a.numpy().dtype)) for k, a in rec.items())
                    )
            if not sigs:
                return []
            best = max(set(sigs), key=lambda s: (sigs.count(s), -sigs.index(s)))
            reference = {k: (shape, np.dtype(dt)) for k, shape, dt in best}
        seen: set[int] = set()
        checked: list[tuple[int, dict, float]] = []
        for m in self.in_partition_order(replies):
            node = int(m.metadata.src_node_id)
            if node in seen:
                self._drop(server_round, node, "a second reply from the same node (only its first counts)")
                continue
            seen.add(node)
            state, n, reason = check_train_reply(m.content, reference, arrays_key=ARRAYS_KEY, metrics_key=METRICS_KEY,
                                                 max_num_examples=self.max_num_examples)  # fmt: skip
            if reason is not None:
                self._drop(server_round, node, reason)
                continue
            checked.append((node, state, float(n)))
        if not checked:
            return []
        shared = [k for k in reference if k not in self.local_keys]
        if self._global is not None:
            base = {k: self._global[k].numpy() for k in shared}
            norms = [update_norm(st, base, shared) for _, st, _ in checked]
            keep = screen_updates(norms, self.max_update_ratio)
            med = float(np.median(norms))
            self.update_ratios_[server_round] = [v / med if med > 0 else 0.0 for v in norms]
            for (node, _, _), v, ok in zip(checked, norms, keep, strict=True):
                if not ok:
                    self._drop(server_round, node, f"update norm {v:.3g} > {self.max_update_ratio:g} x the round's "
                               f"median {med:.3g}")  # fmt: skip
            checked = [c for c, ok in zip(checked, keep, strict=True) if ok]
        counts = [n for _, _, n in checked]
        cap = weight_cap(counts, self.max_weight_ratio) if counts else math.inf
        out = []
        for node, st, n in checked:
            if n > cap:
                self.capped_.setdefault(server_round, {})[node] = (n, cap)
                log(WARNING, "COALA: node %d claims %g examples in round %d; its weight is capped at %g", node, n,
                    server_round, cap)  # fmt: skip
            out.append((node, st, min(n, cap)))
        return out

    def post_aggregation(self, server_round: int, arrays: ArrayRecord) -> ArrayRecord:
        """COALA's server ``post_train`` stage, after aggregation (identity here)."""
        return arrays

    # -- Flower's hooks --------------------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:  # fmt: skip
        node_ids = self.selection(grid, server_round)
        self.selected_[server_round] = [self.partition_of(n) for n in node_ids]
        self._global = arrays
        config["server-round"] = server_round
        config["local-keys"] = sorted(self.local_keys) if self.local_keys else [""]
        record = RecordDict({ARRAYS_KEY: arrays, CONFIG_KEY: config, **self.extra_arrays})
        return self._construct_messages(record, node_ids, MessageType.TRAIN)

    def aggregate_train(self, server_round: int, replies: Iterable[Message],
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:  # fmt: skip
        """Check every reply (:meth:`screen_replies`), average the usable ones with capped weights; a round
        without a usable reply aggregates nothing (the global model stays)."""
        valid, _ = self._check_and_log_replies(replies, is_train=True, validate=False)
        kept = self.screen_replies(server_round, valid)
        if not kept:
            return None, None
        by_node = {int(m.metadata.src_node_id): m for m in valid}
        contents = []
        for node, state, weight in kept:
            metrics = by_node[node].content.metric_records
            mr = metrics[METRICS_KEY] if METRICS_KEY in metrics else next(iter(metrics.values()))
            extra = {k: float(v) for k, v in mr.items() if k != self.weighted_by_key and _finite_scalar(v)}
            contents.append(RecordDict({ARRAYS_KEY: ArrayRecord({k: Array(a) for k, a in state.items()}),
                                        METRICS_KEY: MetricRecord({**extra, self.weighted_by_key: weight})}))  # fmt: skip
        common = set.intersection(*(set(c.metric_records[METRICS_KEY].keys()) for c in contents))
        for c in contents:  # only the metrics every kept client reports are averaged
            mr = c.metric_records[METRICS_KEY]
            for k in [k for k in mr if k not in common]:
                del mr[k]
        merged = self.aggregation(server_round, contents)
        base = self._global if self._global is not None else contents[0].array_records[ARRAYS_KEY]
        # Flower's mean returns a 0-d entry (num_batches_tracked) as shape (1,) and may widen dtypes: the new
        # global keeps the global model's shapes and dtypes (the clients cast the same way when they load it), so
        # the next round's replies are checked against a model of the same signature.
        ref = {k: base[k].numpy() for k in base}
        arrays = ArrayRecord({k: Array(np.asarray(merged[k]).reshape(ref[k].shape).astype(ref[k].dtype, copy=False))
                              if k in merged else base[k] for k in base})  # fmt: skip
        arrays = self.post_aggregation(server_round, arrays)
        total = sum(w for _, _, w in kept)
        metrics = self.train_metrics_aggr_fn(contents, self.weighted_by_key) if total > 0 else None
        return arrays, metrics

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:  # fmt: skip
        last = server_round == self.num_rounds_
        due = self.test_every > 0 and server_round % self.test_every == 0
        if not self.evaluate_clients or not (last or due):
            return []
        config["server-round"] = server_round
        config["local-keys"] = sorted(self.local_keys) if self.local_keys else [""]
        record = RecordDict({ARRAYS_KEY: arrays, CONFIG_KEY: config})
        return self._construct_messages(record, self.eligible_nodes(grid), MessageType.EVALUATE)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """Per-client test results (kept in ``client_metrics_``) and their mean weighted by the capped
        ``num-examples``; a reply with a bad count, an accuracy outside [0, 1] or a non-finite metric is
        skipped by node id with a log line (``rejected_evaluations_``)."""
        per_client: dict[int, dict[str, float]] = {}
        rows: list[tuple[int, dict[str, float]]] = []
        rejected: dict[int, str] = {}
        seen: set[int] = set()
        for msg in self.in_partition_order(replies):
            if msg.has_error():
                continue
            node = int(msg.metadata.src_node_id)
            if node in seen:
                continue
            seen.add(node)
            m, reason = check_evaluate_reply(msg.content, metrics_key=METRICS_KEY,
                                             max_num_examples=self.max_num_examples)  # fmt: skip
            if reason is not None:
                rejected[node] = reason
                log(
                    WARNING,
                    "COALA: evaluation of node %d skipped in round %d: %s",
                    node,
                    server_round,
                    reason,
                )
                continue
            per_client[self.partition_of(node)] = m
            rows.append((node, m))
        self.client_metrics_[server_round] = per_client
        if rejected:
            self.rejected_evaluations_[server_round] = rejected
        if not rows:
            return None
        counts = [m["num-examples"] for _, m in rows]
        cap = weight_cap(counts, self.max_weight_ratio)
        common = set.intersection(*(set(m) for _, m in rows))
        records = [RecordDict({METRICS_KEY: MetricRecord({k: (min(m[k], cap) if k == self.weighted_by_key else m[k])
                                                          for k in sorted(common)})}) for _, m in rows]  # fmt: skip
        if not sum(min(c, cap) for c in counts) > 0:
            return None
        return self.evaluate_metrics_aggr_fn(records, self.weighted_by_key)


def _finite_scalar(value: object) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and math.isfinite(value))  # fmt: skip


class CoalaFedProx(CoalaFedAvg):
    """FedProx (Li et al., MLSys 2020): FedAvg's server, clients add ``mu / 2 ||w - w_global||^2``.

    Like Flower's ``flwr.serverapp.strategy.FedProx``, it sends ``proximal-mu`` in the ConfigRecord.
    """

    def __init__(self, *, proximal_mu: float = 0.01, **kwargs: Any) -> None:
        self.proximal_mu = finite_float(proximal_mu, "proximal_mu", low=0.0)
        super().__init__(**kwargs)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:  # fmt: skip
        config["proximal-mu"] = self.proximal_mu
        return super().configure_train(server_round, arrays, config, grid)


class SemiSupervisedFedAvg(CoalaFedAvg):
    """Label-in-server semi-supervised FL: clients train on confident pseudo-labels of the global model,
    the server fine-tunes the aggregate on its labelled data (the workflow customisation of
    :meth:`CoalaFedAvg.post_aggregation`; COALA's semi-supervised benchmark, label-in-server scenario).

    Args:
        task: the task whose :meth:`~icml24.federated.coala.task.ClassificationTask.fit` trains on the server.
        x_labeled, y_labeled: the server's labelled data.
        server_training: the server's local-training settings (epochs per round).
        **kwargs: :class:`CoalaFedAvg`'s.
    """

    def __init__(self, *, task: ClassificationTask, x_labeled: np.ndarray, y_labeled: np.ndarray,
                 server_training: LocalTraining | None = None, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(**kwargs)
        if not isinstance(task, ClassificationTask):
            raise TypeError(f"task must be a ClassificationTask, got {type(task).__name__}")
        self.task = task
        self.x_labeled = np.asarray(x_labeled, dtype=np.float32)
        self.y_labeled = np.asarray(y_labeled, dtype=np.int64)
        self.server_training = server_training or LocalTraining()

    def post_aggregation(self, server_round: int, arrays: ArrayRecord) -> ArrayRecord:
        model = self.task.build_model()
        _load_state(model, arrays)
        self.task.fit(model, self.x_labeled, self.y_labeled, self.server_training,
                      seed=self.seed * 7919 + server_round)  # fmt: skip
        return state_arrays(model)


# ------------------------------------------------------------------------------------------------------
# Client side
# ------------------------------------------------------------------------------------------------------


def _partition(context: Context, config: Mapping[str, Any]) -> tuple[int, int]:
    node = context.node_config
    pid = node.get("partition-id")
    if pid is None:
        raise RuntimeError("this SuperNode has no 'partition-id' in its node config (--node-config)")
    # The scenario's client count (a scenario may use the first partitions only), else the node's.
    n = config.get("num-partitions", node.get("num-partitions"))
    if n is None:
        raise RuntimeError("this SuperNode has no 'num-partitions' in its node config (--node-config)")
    return int(pid), int(n)


def _local_key(config: Mapping[str, Any]) -> str:
    return f"local::{config.get('run-name', 'run')}"


def _prepare_model(
    task: ClassificationTask, msg: Message, context: Context
) -> tuple[torch.nn.Module, set[str]]:
    config = msg.content.config_records[CONFIG_KEY]
    model = task.build_model()
    _load_state(model, msg.content.array_records[ARRAYS_KEY])
    local = {k for k in config.get("local-keys", []) if k}
    store = _local_key(config)
    if local and store in context.state.array_records:
        saved = context.state.array_records[store]
        state = model.state_dict()
        for k in local:
            state[k] = torch.as_tensor(saved[k].numpy()).to(state[k].dtype).reshape(state[k].shape)
        model.load_state_dict(state)
    return model, local


def make_client_app(
    task: ClassificationTask | None = None, federation: FederatedDataset | None = None
) -> ClientApp:
    """A ClientApp for COALA's scenarios.

    ``train``: load the global arrays (and the client's own local keys), run ``task.fit`` on the client's
    data of the round's scenario (``federation.client_data``), reply ``{"arrays", "metrics":
    {"num-examples", "train-loss"}}``. ``evaluate``: the client's local test set with its local keys, reply
    ``{"metrics": {"num-examples", "accuracy", "loss"}}``. ``query``: reply the node's partition id (for
    seeded selection by partition).

    Args:
        task: the task level (model, loss, local loop); default :class:`ClassificationTask`.
        federation: the data level, any :class:`~icml24.federated.coala.data.FederatedDataset` (an object with
            ``client_data``): default :class:`~icml24.federated.coala.data.DigitsFederation`; a user's tabular or
            text arrays: :class:`~icml24.federated.coala.data.ArrayFederation`.
    """
    task = task if task is not None else ClassificationTask()
    federation = federation if federation is not None else DigitsFederation()
    if not isinstance(task, ClassificationTask):
        raise TypeError(f"task must be a ClassificationTask, got {type(task).__name__}")
    if not isinstance(federation, FederatedDataset):
        raise TypeError(f"federation must have a client_data method (the FederatedDataset protocol), got "
                        f"{type(federation).__name__}")  # fmt: skip
    app = ClientApp()

    @app.train()
    def _train(msg: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        config = msg.content.config_records[CONFIG_KEY]
        pid, n = _partition(context, config)
        data = federation.client_data(pid, n, config)
        model, local = _prepare_model(task, msg, context)
        teacher = None
        if TEACHER_KEY in msg.content.array_records:
            teacher = task.build_model()
            _load_state(teacher, msg.content.array_records[TEACHER_KEY])
        seed = int(config.get("seed", 0)) * 1_000_003 + int(config.get("server-round", 0)) * 1_009 + pid
        ce = config.get("ce-classes")
        metrics = task.fit(model, data.x_train, data.y_train, local_training_from(config), seed=seed,
                           teacher=teacher, old_classes=list(config.get("old-classes", [])),
                           seen_classes=list(ce) if ce else None)  # fmt: skip
        if local:
            state = model.state_dict()
            context.state[_local_key(config)] = ArrayRecord(
                {k: Array(state[k].cpu().numpy().copy()) for k in local}
            )
        reply = RecordDict(
            {
                ARRAYS_KEY: state_arrays(model),
                METRICS_KEY: MetricRecord(
                    {
                        "num-examples": int(metrics["num-examples"]),
                        "train-loss": float(np.nan_to_num(metrics["train-loss"])),
                    }
                ),
            }
        )
        return Message(content=reply, reply_to=msg)

    @app.evaluate()
    def _evaluate(msg: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        config = msg.content.config_records[CONFIG_KEY]
        pid, n = _partition(context, config)
        data = federation.client_data(pid, n, config)
        model, _ = _prepare_model(task, msg, context)
        m = task.evaluate(model, data.x_test, data.y_test)
        metrics = MetricRecord({"num-examples": int(m["num-examples"]), "accuracy": float(m["accuracy"]),
                                "loss": float(m["loss"])})  # fmt: skip
        return Message(content=RecordDict({METRICS_KEY: metrics}), reply_to=msg)

    @app.query()
    def _query(msg: Message, context: Context) -> Message:
        pid = int(context.node_config.get("partition-id", -1))
        return Message(content=RecordDict({METRICS_KEY: MetricRecord({"partition-id": pid})}), reply_to=msg)

    return app


# ------------------------------------------------------------------------------------------------------
# Server side: experiments in one federation
# ------------------------------------------------------------------------------------------------------


def discover_partitions(grid: Grid, min_nodes: int = 1, timeout: float = 600) -> dict[int, int]:
    """Ask every connected node for its partition id (one QUERY round): ``{node_id: partition_id}``."""
    _, nodes = sample_nodes(grid, int_at_least(min_nodes, "min_nodes", 1), 0)
    msgs = [Message(content=RecordDict({CONFIG_KEY: ConfigRecord({"query": "partition-id"})}),
                    message_type=MessageType.QUERY, dst_node_id=n) for n in nodes]  # fmt: skip
    out: dict[int, int] = {}
    for reply in grid.send_and_receive(msgs, timeout=timeout):
        if not reply.has_error():
            out[int(reply.metadata.src_node_id)] = int(
                reply.content.metric_records[METRICS_KEY]["partition-id"]
            )
    return out


def _seeded_model(task: ClassificationTask, seed: int) -> torch.nn.Module:
    torch.manual_seed(int(seed))
    return task.build_model()


@dataclass
class FederatedRun:
    """One federated training run: a strategy for ``num_rounds`` rounds on the round config ``train_config``
    (scenario + local-training keys). ``evaluate_fn(round, arrays)`` is COALA's test in server."""

    name: str
    strategy: CoalaFedAvg
    num_rounds: int
    train_config: dict[str, Any]
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None
    seed: int = 0

    def run(self, grid: Grid, task: ClassificationTask, num_partitions: int) -> dict[str, Any]:
        n = self.strategy.num_partitions or num_partitions
        cfg = {**self.train_config, "run-name": self.name, "seed": self.seed, "num-partitions": n}
        initial = state_arrays(_seeded_model(task, self.seed))
        t0 = time.perf_counter()
        result = self.strategy.start(grid=grid, initial_arrays=initial, num_rounds=self.num_rounds,
                                     train_config=ConfigRecord(cfg), evaluate_config=ConfigRecord(cfg),
                                     evaluate_fn=self.evaluate_fn)  # fmt: skip
        wall = time.perf_counter() - t0
        server_eval = {r: dict(m) for r, m in result.evaluate_metrics_serverapp.items()}
        arrays = result.arrays if len(result.arrays) else initial
        return {
            "arrays": arrays,
            "server": server_eval,
            "clients": self.strategy.client_metrics_,
            "selected": self.strategy.selected_,
            "seconds": wall,
            "rounds": self.num_rounds,
        }


@dataclass
class ContinualRun:
    """Class-incremental FL: the tasks in order, ``rounds_per_task`` FedAvg rounds each, the global model
    carried over. With ``kd_alpha > 0`` the previous task's final global model is sent as the teacher and
    distilled on the old classes. After each task, ``task_eval(task_classes, seen_classes, arrays)`` gives
    the accuracy on one task's test data; the run returns the accuracy matrix ``a[t][j]``."""

    name: str
    strategy: CoalaFedAvg
    tasks: list[list[int]]
    rounds_per_task: int
    train_config: dict[str, Any]
    task_eval: Callable[[list[int], list[int], ArrayRecord], float]
    kd_alpha: float = 0.0
    seed: int = 0
    accuracy: list[list[float]] = field(default_factory=list)

    def run(self, grid: Grid, task: ClassificationTask, num_partitions: int) -> dict[str, Any]:
        arrays = state_arrays(_seeded_model(task, self.seed))
        num_partitions = self.strategy.num_partitions or num_partitions
        seen: list[int] = []
        matrix: list[list[float]] = []
        t0 = time.perf_counter()
        for t, classes in enumerate(self.tasks):
            old = list(seen)
            seen = sorted(set(seen) | set(classes))
            cfg = {**self.train_config, "run-name": self.name, "seed": self.seed * 101 + t,
                   "num-partitions": num_partitions, "task-classes": list(classes),
                   # Plain fine-tuning: cross-entropy over every class seen so far. The KD variant: over the
                   # current task's classes only, the old ones kept by distillation (LwF with a separated
                   # softmax), so new data does not push the old logits down.
                   "ce-classes": list(classes) if (self.kd_alpha > 0 and old) else seen,
                   "kd-alpha": float(self.kd_alpha) if old else 0.0}  # fmt: skip
            if old:  # a ConfigRecord holds no empty list: the first task sends no old classes
                cfg["old-classes"] = old
            self.strategy.extra_arrays = {TEACHER_KEY: arrays} if (self.kd_alpha > 0 and old) else {}
            result = self.strategy.start(grid=grid, initial_arrays=arrays, num_rounds=self.rounds_per_task,
                                         train_config=ConfigRecord(cfg))  # fmt: skip
            if len(result.arrays):  # no round aggregated anything (every client diverged): keep the model
                arrays = result.arrays
            matrix.append([self.task_eval(list(self.tasks[j]), seen, arrays) for j in range(t + 1)])
        self.strategy.extra_arrays = {}
        self.accuracy = matrix
        return {"arrays": arrays, "accuracy": matrix, "seconds": time.perf_counter() - t0,
                "rounds": self.rounds_per_task * len(self.tasks)}  # fmt: skip


Experiment = FederatedRun | ContinualRun


def make_server_app(experiments: Sequence[Experiment], *, task: ClassificationTask | None = None,
                    num_partitions: int, sink: dict[str, Any]) -> ServerApp:  # fmt: skip
    """A ServerApp that discovers the federation's partitions, then runs ``experiments`` one after the
    other on the same SuperNodes (one simulation start for many scenarios); results go to ``sink``."""
    task = task if task is not None else ClassificationTask()
    app = ServerApp()

    @app.main()
    def _main(grid: Grid, context: Context) -> None:
        torch.set_num_threads(1)
        t0 = time.perf_counter()
        partitions = discover_partitions(grid, min_nodes=num_partitions)
        sink["discovery_seconds"] = time.perf_counter() - t0
        for exp in experiments:
            exp.strategy.node_partitions = partitions
            sink[exp.name] = exp.run(grid, task, num_partitions)

    return app


def _check_experiments(experiments: Sequence[Experiment]) -> list[Experiment]:
    exps = list(experiments)
    if not exps or not all(isinstance(e, (FederatedRun, ContinualRun)) for e in exps):
        raise TypeError("experiments must be a non-empty sequence of FederatedRun / ContinualRun")
    names = [e.name for e in exps]
    if len(set(names)) != len(names):
        raise ValueError(f"experiments must have distinct names, got {names}")
    return exps


def run_coala_simulation(
    experiments: Sequence[Experiment],
    *,
    num_supernodes: int,
    task: ClassificationTask | None = None,
    federation: FederatedDataset | None = None,
    num_cpus: int = 1,
) -> dict[str, Any]:
    """Run ``experiments`` in Flower's simulation engine (Ray) on ``num_supernodes`` SuperNodes, one start.

    ``num_cpus`` is Ray's CPU budget; each ClientApp asks for one CPU, so ``num_cpus`` ClientApps run at a
    time. Returns ``{experiment name: results, "discovery_seconds": ..., "wall_seconds": ...}``.
    """
    from flwr.simulation import run_simulation

    exps = _check_experiments(experiments)
    n = int_at_least(num_supernodes, "num_supernodes", 1)
    task = task if task is not None else ClassificationTask()
    sink: dict[str, Any] = {}
    t0 = time.perf_counter()
    run_simulation(server_app=make_server_app(exps, task=task, num_partitions=n, sink=sink),
                   client_app=make_client_app(task, federation), num_supernodes=n,
                   backend_config={"client_resources": {"num_cpus": 1},
                                   "init_args": {"num_cpus": int_at_least(num_cpus, "num_cpus", 1)}})  # fmt: skip
    sink["wall_seconds"] = time.perf_counter() - t0
    missing = [e.name for e in exps if e.name not in sink]
    if missing:
        raise RuntimeError(f"the Flower simulation ended without results for {missing} (see the Flower log)")
    return sink


class InProcessGrid(Grid):
    """A Grid that hands each message to a ClientApp in this process (no SuperLink, no Ray).

    Same strategies, same ClientApp, same Message objects as the simulation; only the transport differs.
    Each node keeps its own :class:`flwr.app.Context` (so ``context.state`` persists across rounds).
    """

    def __init__(self, client_app: ClientApp, num_nodes: int, *, first_node_id: int = 1000) -> None:
        n = int_at_least(num_nodes, "num_nodes", 1)
        self.client_app = client_app
        self._nodes = [int(first_node_id) + 7 * k for k in range(n)]
        self._contexts = {
            node: Context(
                run_id=1,
                node_id=node,
                node_config={"partition-id": k, "num-partitions": n},
                state=RecordDict(),
                run_config={},
            )  # fmt: skip
            for k, node in enumerate(self._nodes)
        }

    def get_node_ids(self) -> list[int]:
        return list(self._nodes)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        return [self.client_app(m, self._contexts[m.metadata.dst_node_id]) for m in messages]

    def set_run(self, run: Any) -> None:  # pragma: no cover - not used in process
        raise NotImplementedError

    @property
    def run(self) -> Any:  # pragma: no cover
        raise NotImplementedError

    def create_message(self, *args: Any, **kwargs: Any) -> Message:  # pragma: no cover
        raise NotImplementedError

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:  # pragma: no cover
        raise NotImplementedError

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:  # pragma: no cover
        raise NotImplementedError


@contextlib.contextmanager
def _server_identity() -> Iterator[None]:
    """Instruction messages read the server task's identity, which a ServerApp run sets; in process we set
    it for the duration and restore it after."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = 1, 0, 0
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def run_in_process(
    experiments: Sequence[Experiment],
    *,
    num_supernodes: int,
    task: ClassificationTask | None = None,
    federation: FederatedDataset | None = None,
    client_app: ClientApp | None = None,
) -> dict[str, Any]:
    """The same as :func:`run_coala_simulation` on an :class:`InProcessGrid` (no Ray): for tests, debugging
    and as the speed reference of the simulation engine."""
    exps = _check_experiments(experiments)
    n = int_at_least(num_supernodes, "num_supernodes", 1)
    task = task if task is not None else ClassificationTask()
    app = client_app if client_app is not None else make_client_app(task, federation)
    grid = InProcessGrid(app, n)
    sink: dict[str, Any] = {}
    t0 = time.perf_counter()
    with _server_identity():
        partitions = discover_partitions(grid, min_nodes=n)
        sink["discovery_seconds"] = time.perf_counter() - t0
        for exp in exps:
            exp.strategy.node_partitions = partitions
            sink[exp.name] = exp.run(grid, task, n)
    sink["wall_seconds"] = time.perf_counter() - t0
    return sink
