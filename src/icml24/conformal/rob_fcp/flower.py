"""Rob-FCP on Flower: a message-based server strategy and the matching client behaviour.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang et al., ICML 2024,
https://arxiv.org/abs/2406.01960), Algorithm 1, as one Flower round (Flower's Message API,
``flwr.serverapp.strategy.Strategy``; tested with flwr 1.42):

- ``configure_train`` asks every connected node for its calibration histogram, telling it the number of
  bins ``H * refine`` and the score range;
- each client replies with one :class:`flwr.app.ArrayRecord` ``"histogram"`` holding its bin counts
  (``"counts"``) and a :class:`flwr.app.MetricRecord` ``"metrics"`` holding ``"num-examples"``. It never
  sends a score (:func:`histogram_reply`);
- ``aggregate_train`` parses the replies and calls the pure function
  :func:`~icml24.conformal.rob_fcp.aggregation.aggregate_histograms`: a malformed reply (missing records,
  wrong length, NaN, negative mass, a non-finite total, counts that disagree with ``num-examples``, a second
  reply from the same node) is rejected as malicious and logged, never raised; detection and the robust
  quantile run on the rest, each kept node's weight capped at ``max_weight_ratio`` x the median (beyond the
  paper). The threshold goes back as
  ``ArrayRecord({"qhat": [qhat]})``;
- ``configure_evaluate`` (when ``fraction_evaluate > 0``) sends ``qhat`` to the nodes, which report the
  coverage and mean set size of their local test data (:func:`evaluation_reply`); ``aggregate_evaluate``
  checks every metric's range, counts each node once and averages with capped ``num-examples`` weights.

Importing this module imports ``flwr`` (the ``federated`` extra); the package ``__init__`` imports it
lazily.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from logging import INFO, WARNING
from typing import Any

import numpy as np
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
from flwr.serverapp.strategy import Strategy
from flwr.serverapp.strategy.strategy_utils import sample_nodes
from flwr.supercore import log

from icml24.conformal._validation import check_alpha
from icml24.conformal.calibration import prediction_sets
from icml24.conformal.metrics import marginal_coverage, mean_set_size
from icml24.conformal.rob_fcp.aggregation import ServerAggregate, aggregate_histograms, validate_histogram
from icml24.conformal.rob_fcp.characterization import check_bounds, score_histogram
from icml24.conformal.rob_fcp.detection import NeighborMode
from icml24.conformal.rob_fcp.quantile import RankRule, histogram_quantile
from icml24.conformal.rob_fcp.weights import DEFAULT_MAX_WEIGHT_RATIO, check_max_weight_ratio, weight_cap

__all__ = [
    "HISTOGRAM_KEY",
    "METRICS_KEY",
    "RobFCPStrategy",
    "evaluation_reply",
    "histogram_reply",
    "make_client_app",
    "make_server_app",
    "parse_histogram_reply",
    "run_rob_fcp_simulation",
]

HISTOGRAM_KEY = "histogram"
"""Key of the client's ArrayRecord (its array ``"counts"`` holds the bin counts)."""
METRICS_KEY = "metrics"
"""Key of the client's MetricRecord (``"num-examples"`` and, in evaluation, ``"coverage"``, ``"set-size"``)."""


def histogram_reply(msg: Message, scores: np.ndarray) -> Message:
    """A client's reply to the server's histogram request: bin counts and sample count, no scores."""
    config = msg.content.config_records.get("config", ConfigRecord())
    n_bins = int(config.get("n-bins", 1000))
    bounds = (float(config.get("score-lo", 0.0)), float(config.get("score-hi", 1.0)))
    counts = score_histogram(scores, n_bins, bounds=bounds, normalize=False)
    content = RecordDict(
        {
            HISTOGRAM_KEY: ArrayRecord({"counts": Array(counts)}),
            METRICS_KEY: MetricRecord({"num-examples": int(np.asarray(scores).size)}),
        }
    )
    return Message(content=content, reply_to=msg)


def evaluation_reply(msg: Message, score_matrix: np.ndarray, labels: np.ndarray) -> Message:
    """A client's reply to an evaluation request: local coverage and set size at the server's ``qhat``."""
    qhat = float(msg.content.array_records["qhat"]["qhat"].numpy()[0])
    sets = prediction_sets(score_matrix, qhat)
    metrics = MetricRecord(
        {
            "num-examples": int(len(labels)),
            "coverage": marginal_coverage(sets, labels),
            "set-size": mean_set_size(sets),
        }
    )
    return Message(content=RecordDict({METRICS_KEY: metrics}), reply_to=msg)


def parse_histogram_reply(msg: Message) -> tuple[object, object]:
    """``(counts, num_examples)`` of a reply, or ``(None, None)`` for a reply that lacks them.

    Whatever a Byzantine client put in its message comes back unchanged; validation is the aggregation
    function's job.
    """
    try:
        arrays = msg.content.array_records[HISTOGRAM_KEY]
        counts = arrays["counts"].numpy()
    except Exception:  # noqa: BLE001 - any broken payload is a malformed report, not a server crash
        return None, None
    try:
        n = msg.content.metric_records[METRICS_KEY]["num-examples"]
    except Exception:  # noqa: BLE001
        n = None
    return counts, n


class RobFCPStrategy(Strategy):
    """Byzantine-robust federated conformal calibration as a Flower strategy (Algorithm 1).

    One round calibrates: clients send histograms, the server keeps the least suspicious ``K_b`` clients and
    returns ``qhat``. After :meth:`aggregate_train` the strategy holds ``qhat_``, ``undefended_qhat_`` (plain
    FCP over every well-formed report, for monitoring), ``aggregate_``
    (a :class:`~icml24.conformal.rob_fcp.aggregation.ServerAggregate` whose indices refer to ``node_ids_``),
    ``flagged_nodes_``, ``rejected_nodes_`` (``{node_id: reason}``), ``capped_nodes_`` (``{node_id: (claimed,
    used)}``) and ``duplicate_nodes_`` (nodes that replied more than once; only the first reply counts).

    Args:
        alpha: target miscoverage.
        n_bins: ``H``, the bins of the characterisation vectors (the paper uses 100).
        refine: every characterisation bin is split into ``refine`` bins for the quantile; clients send
            ``H * refine`` counts and the threshold is exact up to one fine bin.
        n_malicious: known number of malicious clients, or None to estimate it.
        neighbor_mode: ``"nearest"`` (paper) or ``"farthest"`` (official code).
        rank_rule: ``"fcp"`` or ``"split"``.
        bounds: the score range.
        min_available_nodes: wait for this many connected nodes before the round.
        fraction_evaluate: fraction of nodes asked to evaluate ``qhat`` on their local data (0: none).
        max_weight_ratio: a kept node weighs at most this many times the median kept node, in the quantile
            and in the evaluation average (None: as claimed). Beyond the paper, see
            :mod:`~icml24.conformal.rob_fcp.weights`.
    """

    def __init__(
        self,
        *,
        alpha: float = 0.1,
        n_bins: int = 100,
        refine: int = 10,
        n_malicious: int | None = None,
        neighbor_mode: NeighborMode = "nearest",
        rank_rule: RankRule = "fcp",
        bounds: tuple[float, float] = (0.0, 1.0),
        min_available_nodes: int = 2,
        fraction_evaluate: float = 0.0,
        max_weight_ratio: float | None = DEFAULT_MAX_WEIGHT_RATIO,
    ) -> None:
        self.alpha = check_alpha(alpha)
        self.max_weight_ratio = check_max_weight_ratio(max_weight_ratio)
        if int(n_bins) < 1 or int(refine) < 1:
            raise ValueError(f"n_bins and refine must be positive integers, got {n_bins} and {refine}")
        if n_malicious is not None and int(n_malicious) < 0:
            raise ValueError(f"n_malicious must be >= 0 or None, got {n_malicious}")
        if not 0.0 <= fraction_evaluate <= 1.0:
            raise ValueError(f"fraction_evaluate must be in [0, 1], got {fraction_evaluate}")
        self.n_bins = int(n_bins)
        self.refine = int(refine)
        self.n_malicious = n_malicious
        self.neighbor_mode = neighbor_mode
        self.rank_rule = rank_rule
        self.bounds = check_bounds(bounds)
        self.min_available_nodes = int(min_available_nodes)
        self.fraction_evaluate = float(fraction_evaluate)
        self.qhat_: float = math.nan
        self.undefended_qhat_: float = math.nan
        self.aggregate_: ServerAggregate | None = None
        self.node_ids_: list[int] = []
        self.flagged_nodes_: list[int] = []
        self.rejected_nodes_: dict[int, str] = {}
        self.capped_nodes_: dict[int, tuple[float, float]] = {}
        self.duplicate_nodes_: list[int] = []

    def summary(self) -> None:
        """Log the strategy's configuration."""
        log(INFO, "\t├──> Rob-FCP: alpha=%s, H=%d bins x %d, n_malicious=%s", self.alpha, self.n_bins,
            self.refine, "estimated" if self.n_malicious is None else self.n_malicious)  # fmt: skip
        log(INFO, "\t└──> neighbor_mode=%s, rank_rule=%s", self.neighbor_mode, self.rank_rule)

    def _messages(self, record: RecordDict, grid: Grid, fraction: float, kind: str) -> list[Message]:
        # Wait for min_available_nodes first, then sample from every node connected by then (counting the
        # nodes before waiting would sample too few while the federation is still connecting).
        _, all_nodes = sample_nodes(grid, self.min_available_nodes, 0)
        size = min(max(int(math.ceil(len(all_nodes) * fraction)), 1), len(all_nodes))
        node_ids = sorted(all_nodes) if size == len(all_nodes) else sample_nodes(grid, 0, size)[0]
        return [Message(content=record, message_type=kind, dst_node_id=n) for n in node_ids]

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Ask every node for its histogram of ``H * refine`` bins over ``bounds``."""
        config["server-round"] = server_round
        config["n-bins"] = self.n_bins * self.refine
        config["score-lo"], config["score-hi"] = self.bounds
        return self._messages(RecordDict({"config": config}), grid, 1.0, MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Robust aggregation of the histograms. Every per-client failure (an error reply, a second reply
        from the same node, an unparsable or malformed payload, a non-finite total) is caught here and the
        node rejected: one bad reply never ends the round."""
        node_ids: list[int] = []
        counts: list[object] = []
        num_examples: list[object] = []
        early_rejects: dict[int, str] = {}
        seen: set[int] = set()
        duplicates: list[int] = []
        expected = self.n_bins * self.refine
        for msg in replies:
            try:
                node = int(msg.metadata.src_node_id)
                if msg.has_error():  # a node that failed to answer is absent, not malicious
                    log(WARNING, "Rob-FCP: node %d returned an error: %s", node, msg.error.reason)
                    continue
                if node in seen:  # the same node twice is one client, not two: only its first reply counts
                    duplicates.append(node)
                    log(WARNING, "Rob-FCP: node %d replied more than once; only its first reply counts", node)
                    continue
                seen.add(node)
                c, n = parse_histogram_reply(msg)
                reason = validate_histogram(c, expected, n)
            except Exception as exc:  # noqa: BLE001 - a broken reply must not end the round
                reason = f"unreadable reply: {type(exc).__name__}: {exc}"
                node = int(getattr(getattr(msg, "metadata", None), "src_node_id", -1))
                c = n = None
            if reason is not None:
                early_rejects[node] = reason
                continue
            node_ids.append(node)
            counts.append(c)
            num_examples.append(n)
        self.rejected_nodes_ = dict(early_rejects)
        self.duplicate_nodes_ = sorted(set(duplicates))
        for node, reason in early_rejects.items():
            log(WARNING, "Rob-FCP: rejected node %d as malicious: %s", node, reason)
        if not node_ids:
            self.aggregate_, self.node_ids_, self.qhat_ = None, [], math.nan
            self.flagged_nodes_ = sorted(early_rejects)
            return None, None
        n_mal = None if self.n_malicious is None else max(int(self.n_malicious) - len(early_rejects), 0)
        try:
            agg = aggregate_histograms(
                counts,
                num_examples,
                alpha=self.alpha,
                n_bins=self.n_bins,
                refine=self.refine,
                n_malicious=n_mal,
                neighbor_mode=self.neighbor_mode,
                rank_rule=self.rank_rule,
                bounds=self.bounds,
                max_weight_ratio=self.max_weight_ratio,
            )
        except Exception as exc:  # noqa: BLE001 - the round ends without a threshold, the server survives
            log(WARNING, "Rob-FCP: aggregation failed: %s: %s", type(exc).__name__, exc)
            return None, None
        self.aggregate_, self.node_ids_, self.qhat_ = agg, node_ids, agg.qhat
        # Plain FCP over every well-formed report, kept for monitoring: how far the defence moved qhat.
        well_formed = [np.asarray(counts[i], dtype=np.float64) for i in range(len(counts)) if i not in agg.rejected]
        self.undefended_qhat_ = (
            histogram_quantile(np.stack(well_formed), self.alpha, rank_rule=self.rank_rule, bounds=self.bounds)
            if well_formed
            else math.nan
        )
        self.flagged_nodes_ = sorted({node_ids[i] for i in agg.malicious} | set(early_rejects))
        self.rejected_nodes_.update({node_ids[i]: reason for i, reason in agg.rejected.items()})
        self.capped_nodes_ = {node_ids[i]: used for i, used in agg.capped.items()}
        for node, (claimed, used) in self.capped_nodes_.items():
            log(WARNING, "Rob-FCP: node %d claims %g samples; its weight is capped at %g", node, claimed, used)
        metrics = MetricRecord(
            {
                "qhat": float(agg.qhat),
                "qhat-undefended": float(self.undefended_qhat_),
                "num-clients": len(node_ids) + len(early_rejects),
                "num-rejected": len(self.rejected_nodes_),
                "num-malicious": int(agg.n_malicious) + len(early_rejects),
                "num-benign": int(agg.benign.size),
                "num-capped": len(agg.capped),
            }
        )
        return ArrayRecord({"qhat": Array(np.array([agg.qhat], dtype=np.float64))}), metrics

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Send ``qhat`` to a fraction of the nodes for local evaluation (none by default)."""
        if self.fraction_evaluate == 0.0 or "qhat" not in arrays:
            return []
        config["server-round"] = server_round
        record = RecordDict({"qhat": arrays, "config": config})
        return self._messages(record, grid, self.fraction_evaluate, MessageType.EVALUATE)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """Weighted mean of the nodes' coverage and set size.

        Each node counts once (a second reply is dropped); a reply is used only if ``num-examples`` is a
        positive finite number, ``coverage`` lies in [0, 1] and ``set-size`` is finite and >= 0 (others are
        logged and skipped); weights are the claimed sizes capped at ``max_weight_ratio`` x their median, so
        one node claiming 10^12 examples cannot set the reported coverage.
        """
        rows: dict[int, tuple[float, float, float]] = {}
        self.rejected_evaluations_: dict[int, str] = {}
        for msg in replies:
            try:
                node = int(msg.metadata.src_node_id)
                if msg.has_error() or node in rows or node in self.rejected_evaluations_:
                    continue
                m = msg.content.metric_records[METRICS_KEY]
                row = (float(m["num-examples"]), float(m["coverage"]), float(m["set-size"]))
            except Exception as exc:  # noqa: BLE001 - a broken evaluation reply is skipped, not raised
                log(WARNING, "Rob-FCP: unreadable evaluation reply skipped: %s", exc)
                continue
            reason = _evaluation_problem(*row)
            if reason is not None:
                self.rejected_evaluations_[node] = reason
                log(WARNING, "Rob-FCP: evaluation of node %d skipped: %s", node, reason)
                continue
            rows[node] = row
        if not rows:
            return None
        w, cov, size = np.asarray(list(rows.values())).T
        w = np.minimum(w, weight_cap(w, self.max_weight_ratio))
        return MetricRecord(
            {
                "coverage": float(np.average(cov, weights=w)),
                "set-size": float(np.average(size, weights=w)),
                "num-evaluations": len(rows),
                "num-rejected-evaluations": len(self.rejected_evaluations_),
            }
        )


def _evaluation_problem(n: float, coverage: float, set_size: float) -> str | None:
    """Why an evaluation reply is unusable, or None."""
    if not (math.isfinite(n) and n > 0):
        return f"num-examples must be a positive number, got {n!r}"
    if not (math.isfinite(coverage) and 0.0 <= coverage <= 1.0):
        return f"coverage must lie in [0, 1], got {coverage!r}"
    if not (math.isfinite(set_size) and set_size >= 0.0):
        return f"set-size must be a finite number >= 0, got {set_size!r}"
    return None


def make_client_app(
    load_scores: Callable[[Context], np.ndarray],
    load_test: Callable[[Context], tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    reply_fn: Callable[[Message, Context], Message | None] | None = None,
) -> ClientApp:
    """A ClientApp that answers histogram requests from ``load_scores(context)`` (its calibration scores).

    Args:
        load_scores: the node's calibration nonconformity scores (e.g. from
            ``context.node_config["partition-id"]``).
        load_test: optional ``(score_matrix, labels)`` of the node's test data, for evaluation rounds.
        reply_fn: optional override ``(msg, context) -> Message`` (return None for the honest reply);
            used to simulate Byzantine clients that send arbitrary messages.
    """
    app = ClientApp()

    @app.train()
    def _train(msg: Message, context: Context) -> Message:
        if reply_fn is not None:
            custom = reply_fn(msg, context)
            if custom is not None:
                return custom
        return histogram_reply(msg, load_scores(context))

    @app.evaluate()
    def _evaluate(msg: Message, context: Context) -> Message:
        if load_test is None:
            raise RuntimeError("this ClientApp has no test data (load_test=None)")
        score_matrix, labels = load_test(context)
        return evaluation_reply(msg, score_matrix, labels)

    return app


def make_server_app(
    strategy: RobFCPStrategy,
    *,
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    sink: dict[str, Any] | None = None,
) -> ServerApp:
    """A ServerApp that runs one Rob-FCP calibration round; the Flower ``Result`` goes to ``sink["result"]``."""
    app = ServerApp()

    @app.main()
    def _main(grid: Grid, context: Context) -> None:
        result = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord({"qhat": Array(np.array([math.inf]))}),
            num_rounds=1,
            evaluate_fn=evaluate_fn,
        )
        if sink is not None:
            sink["result"] = result

    return app


def run_rob_fcp_simulation(
    client_scores: Sequence[np.ndarray],
    strategy: RobFCPStrategy,
    *,
    reply_fn: Callable[[Message, Context], Message | None] | None = None,
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    num_cpus: int = 1,
) -> Any:
    """Run one calibration round in Flower's simulation engine with one node per entry of ``client_scores``.

    Node ``k`` (``partition-id`` k) holds ``client_scores[k]``; ``reply_fn`` may replace any node's reply.
    Returns the Flower ``Result`` (``result.arrays["qhat"]``, ``result.train_metrics_clientapp``); the
    strategy keeps its fitted attributes.
    """
    from flwr.simulation import run_simulation

    scores = [np.asarray(s, dtype=np.float64) for s in client_scores]

    def load(context: Context) -> np.ndarray:
        return scores[int(context.node_config["partition-id"])]

    sink: dict[str, Any] = {}
    run_simulation(
        server_app=make_server_app(strategy, evaluate_fn=evaluate_fn, sink=sink),
        client_app=make_client_app(load, reply_fn=reply_fn),
        num_supernodes=len(scores),
        backend_config={"client_resources": {"num_cpus": 1}, "init_args": {"num_cpus": int(num_cpus)}},
    )
    if "result" not in sink:
        raise RuntimeError("the Flower simulation ended without a result (see the Flower log)")
    return sink["result"]
