"""Rob-FCP on Flower: 9 nodes, 3 of them Byzantine (two well-formed coverage attackers that inflate their
counts, one NaN sender). Rob-FCP's coverage holds where the undefended FCP threshold computed from the same
messages breaks.

Two drivers: Flower's real simulation engine (Ray; 10-35 s on the shared 2-core machine, so marked slow),
and an in-process Grid that hands the strategy's messages to the real ClientApp (fast, no Ray): same
strategy, same ClientApp, same Message objects, only the transport differs."""

import numpy as np
import pytest

from icml24.conformal import lac_scores, marginal_coverage, prediction_sets


def calibrated_task(n, rng):
    """Probabilities from Dirichlet(0.5), labels drawn from them: a calibrated 10-class model."""
    p = rng.dirichlet(np.full(10, 0.5), size=n)
    y = (p.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1)
    return p, y


def byzantine_federation():
    """Client scores (6 honest + 2 coverage attackers + 1 NaN sender) and the NaN sender's partition id."""
    rng = np.random.default_rng(0)
    n_honest, n_per = 6, 300
    p, y = calibrated_task(n_honest * n_per, rng)
    s = lac_scores(p, y)
    client_scores = [s[k * n_per : (k + 1) * n_per] for k in range(n_honest)]
    # Two coverage attackers that send well-formed histograms (all mass at score 0, claiming 800 samples
    # each) and one that sends NaN counts; the attackers sit among the honest nodes.
    client_scores += [np.zeros(800), np.zeros(800), np.zeros(1)]
    order = [0, 6, 1, 2, 7, 3, 4, 8, 5]
    return [client_scores[i] for i in order], order.index(8)


def nan_reply_fn(nan_node):
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    def reply_fn(msg, context):
        if int(context.node_config["partition-id"]) != nan_node:
            return None
        content = RecordDict({"histogram": ArrayRecord({"counts": Array(np.full(1000, np.nan))}),
                              "metrics": MetricRecord({"num-examples": 300})})  # fmt: skip
        return Message(content=content, reply_to=msg)

    return reply_fn


def check_outcome(strategy, result):
    metrics = result.train_metrics_clientapp[1]
    assert metrics["num-clients"] == 9 and metrics["num-rejected"] == 1 and metrics["num-benign"] == 6
    assert float(result.arrays["qhat"].numpy()[0]) == strategy.qhat_

    p_te, y_te = calibrated_task(20000, np.random.default_rng(1))
    test_matrix = lac_scores(p_te)
    rob_cov = marginal_coverage(prediction_sets(test_matrix, strategy.qhat_), y_te)
    fcp_cov = marginal_coverage(prediction_sets(test_matrix, strategy.undefended_qhat_), y_te)
    # N_b = 1800 honest scores: the coverage of a fixed threshold has sd ~0.007; 0.88 is ~3 sd below 0.9.
    assert 0.88 <= rob_cov <= 0.94
    # Undefended: the rank ceil(0.9 * (3400 + 8)) lands on an honest level of about 0.81.
    assert fcp_cov <= 0.85
    return test_matrix, y_te


@pytest.mark.slow
def test_flower_simulation_rob_fcp_holds_where_fcp_breaks():
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    from icml24.conformal.rob_fcp import RobFCPStrategy, run_rob_fcp_simulation

    client_scores, nan_node = byzantine_federation()
    strategy = RobFCPStrategy(alpha=0.1, n_bins=20, refine=50, n_malicious=3, min_available_nodes=9)
    result = run_rob_fcp_simulation(client_scores, strategy, reply_fn=nan_reply_fn(nan_node))
    check_outcome(strategy, result)


def test_strategy_start_with_in_process_grid_and_real_client_app(monkeypatch):
    pytest.importorskip("flwr")
    from flwr.app import Array, ArrayRecord, Context, RecordDict
    from flwr.serverapp import Grid
    from flwr.supercore.task_identity import TaskIdentity

    from icml24.conformal.rob_fcp import RobFCPStrategy, make_client_app

    # Instruction messages read the server task's identity, which a ServerApp run sets.
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 0)
    client_scores, nan_node = byzantine_federation()
    p_te, y_te = calibrated_task(900, np.random.default_rng(2))
    test_matrix, test_y = lac_scores(p_te), y_te
    node_ids = [1000 + 7 * k for k in range(len(client_scores))]

    def context(node):
        pid = node_ids.index(node)
        return Context(run_id=1, node_id=node, node_config={"partition-id": pid}, state=RecordDict(), run_config={})

    app = make_client_app(
        lambda ctx: client_scores[int(ctx.node_config["partition-id"])],
        lambda ctx: (test_matrix[ctx.node_config["partition-id"] :: 9], test_y[ctx.node_config["partition-id"] :: 9]),
        reply_fn=nan_reply_fn(nan_node),
    )

    class InProcessGrid(Grid):
        def get_node_ids(self):
            return list(node_ids)

        def send_and_receive(self, messages, *, timeout=None):
            return [app(msg, context(msg.metadata.dst_node_id)) for msg in messages]

        def set_run(self, run):
            raise NotImplementedError

        @property
        def run(self):
            raise NotImplementedError

        def create_message(self, *args, **kwargs):
            raise NotImplementedError

        def push_messages(self, messages):
            raise NotImplementedError

        def pull_messages(self, message_ids):
            raise NotImplementedError

    strategy = RobFCPStrategy(alpha=0.1, n_bins=20, refine=50, n_malicious=3, min_available_nodes=9,
                              fraction_evaluate=1.0)  # fmt: skip
    result = strategy.start(grid=InProcessGrid(), initial_arrays=ArrayRecord({"qhat": Array(np.array([1.0]))}),
                            num_rounds=1)  # fmt: skip
    check_outcome(strategy, result)
    assert strategy.rejected_nodes_.keys() == {node_ids[nan_node]}
    # Federated evaluation: every node evaluates qhat on its slice of the test set.
    ev = result.evaluate_metrics_clientapp[1]
    sets = prediction_sets(test_matrix, strategy.qhat_)
    assert ev["coverage"] == pytest.approx(marginal_coverage(sets, test_y))
