"""A real Flower simulation (Ray backend): 9 nodes, 3 of them Byzantine. Rob-FCP's coverage holds where the
undefended FCP threshold computed from the same messages breaks."""

import numpy as np
import pytest

from icml24.conformal import lac_scores, marginal_coverage, prediction_sets


def calibrated_task(n, rng):
    """Probabilities from Dirichlet(0.5), labels drawn from them: a calibrated 10-class model."""
    p = rng.dirichlet(np.full(10, 0.5), size=n)
    y = (p.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1)
    return p, y


def test_flower_simulation_rob_fcp_holds_where_fcp_breaks():
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    from icml24.conformal.rob_fcp import RobFCPStrategy, run_rob_fcp_simulation

    rng = np.random.default_rng(0)
    n_honest, n_per = 6, 300
    p, y = calibrated_task(n_honest * n_per, rng)
    s = lac_scores(p, y)
    client_scores = [s[k * n_per : (k + 1) * n_per] for k in range(n_honest)]
    # Two coverage attackers that send well-formed histograms (all mass at score 0, claiming 800 samples
    # each) and one that sends NaN counts; the attackers sit among the honest nodes.
    client_scores += [np.zeros(800), np.zeros(800), np.zeros(1)]
    order = [0, 6, 1, 2, 7, 3, 4, 8, 5]
    client_scores = [client_scores[i] for i in order]
    nan_node = order.index(8)

    def reply_fn(msg, context):
        if int(context.node_config["partition-id"]) != nan_node:
            return None
        content = RecordDict({"histogram": ArrayRecord({"counts": Array(np.full(1000, np.nan))}),
                              "metrics": MetricRecord({"num-examples": 300})})  # fmt: skip
        return Message(content=content, reply_to=msg)

    strategy = RobFCPStrategy(alpha=0.1, n_bins=20, refine=50, n_malicious=3, min_available_nodes=9)
    result = run_rob_fcp_simulation(client_scores, strategy, reply_fn=reply_fn)

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
