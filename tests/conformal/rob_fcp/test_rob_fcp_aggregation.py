"""Server aggregation over histograms: agreement with the score-level path, malformed messages, and the
Flower strategy's aggregate functions driven with real Flower Message objects (no simulation engine)."""

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.conformal.rob_fcp import (
    aggregate_histograms,
    client_histograms,
    rob_fcp_quantile,
    validate_histogram,
)


def federation(seed=0, k=10, n=200, n_bad=2):
    rng = np.random.default_rng(seed)
    scores = [rng.beta(2, 5, size=n) for _ in range(k - n_bad)] + [np.zeros(n)] * n_bad
    return scores


@pytest.mark.parametrize("n_malicious", [2, None])
def test_matches_score_level_rob_fcp_with_histogram_quantile(n_malicious):
    scores = federation()
    counts = client_histograms(scores, 200, normalize=False)
    agg = aggregate_histograms(list(counts), [200] * 10, alpha=0.1, n_bins=20, refine=10, n_malicious=n_malicious)
    ref = rob_fcp_quantile(scores, 0.1, n_malicious, n_bins=20, quantile_bins=200)
    assert agg.qhat == ref.qhat
    np.testing.assert_array_equal(agg.benign, ref.benign)
    np.testing.assert_array_equal(agg.malicious, [8, 9])
    assert agg.rejected == {}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (np.ones(7), "length"),
        (np.full(200, np.nan), "NaN"),
        (np.r_[-1.0, np.full(199, 1.0)], "negative"),
        (np.full(200, 0.5), "integer"),
        (np.zeros(200), "zero"),
        (np.ones((10, 20)), "1-D"),
        (None, "1-D"),
        ("garbage", "numeric"),
    ],
)
def test_malformed_message_is_rejected_as_malicious_never_raised(bad, reason):
    scores = federation(n_bad=1)
    counts = list(client_histograms(scores, 200, normalize=False))
    counts[3] = bad
    agg = aggregate_histograms(counts, None, alpha=0.1, n_bins=20, refine=10, n_malicious=2)
    assert reason in agg.rejected[3]
    assert 3 in agg.malicious and 9 in agg.malicious and 3 not in agg.benign
    assert agg.maliciousness[3] == math.inf
    ref = rob_fcp_quantile([s for i, s in enumerate(scores) if i != 3], 0.1, 1, n_bins=20, quantile_bins=200)
    assert agg.qhat == ref.qhat


def test_count_that_disagrees_with_num_examples_is_rejected():
    counts = list(client_histograms(federation(), 200, normalize=False))
    agg = aggregate_histograms(counts, [200] * 9 + [150], alpha=0.1, n_bins=20, refine=10, n_malicious=2)
    assert "num_examples" in agg.rejected[9]
    assert validate_histogram(np.ones(4), 4, 4) is None
    assert "num_examples" in validate_histogram(np.ones(4), 4, "many")


def test_all_malformed_gives_nan_threshold():
    agg = aggregate_histograms([np.ones(3), None], None, alpha=0.1, n_bins=2, refine=2)
    assert math.isnan(agg.qhat)
    assert agg.benign.size == 0 and set(agg.rejected) == {0, 1}


# ---- Flower strategy, driven with Flower Message objects ------------------------------------------------


def _reply(content, src):
    from flwr.app import Message, MessageType, Metadata

    md = Metadata(run_id=1, message_id=f"m{src}", src_node_id=src, dst_node_id=0, reply_to_message_id="i",
                  group_id="", created_at=time.time(), ttl=60.0, message_type=MessageType.TRAIN)  # fmt: skip
    return Message(content, metadata=md)


def _hist_content(counts, n):
    from flwr.app import Array, ArrayRecord, MetricRecord, RecordDict

    return RecordDict({"histogram": ArrayRecord({"counts": Array(np.asarray(counts, dtype=np.float64))}),
                       "metrics": MetricRecord({"num-examples": n})})  # fmt: skip


def test_strategy_aggregate_train_with_flower_messages():
    pytest.importorskip("flwr")
    from flwr.app import Error, Message, RecordDict

    from icml24.conformal.rob_fcp import RobFCPStrategy

    scores = federation(k=10, n_bad=1)
    counts = client_histograms(scores, 200, normalize=False)
    replies = [_reply(_hist_content(c, 200), 100 + k) for k, c in enumerate(counts[:9])]
    replies[4] = _reply(_hist_content(np.full(200, np.nan), 200), 104)  # malformed: NaN
    replies.append(_reply(_hist_content(np.ones(13), 13), 109))  # malformed: wrong length
    replies.append(_reply(RecordDict(), 110))  # malformed: no records at all
    replies.append(_reply(_hist_content(counts[9], 200), 111))  # the coverage attacker
    err = Message(Error(code=0, reason="timeout"), metadata=_reply(RecordDict(), 112).metadata)
    replies.append(err)  # an error reply is a missing node, not a malicious one

    strategy = RobFCPStrategy(alpha=0.1, n_bins=20, refine=10, n_malicious=4)
    arrays, metrics = strategy.aggregate_train(1, replies)
    assert set(strategy.rejected_nodes_) == {104, 109, 110}
    assert set(strategy.flagged_nodes_) == {104, 109, 110, 111}
    assert 112 not in strategy.node_ids_
    honest = [s for k, s in enumerate(scores[:9]) if k != 4]
    ref = rob_fcp_quantile(honest, 0.1, 0, n_bins=20, quantile_bins=200)
    assert strategy.qhat_ == ref.qhat == arrays["qhat"].numpy()[0]
    assert metrics["num-rejected"] == 3 and metrics["num-malicious"] == 4 and metrics["num-benign"] == 8


def test_strategy_aggregate_evaluate_weights_by_examples_and_skips_garbage():
    pytest.importorskip("flwr")
    from flwr.app import MetricRecord, RecordDict

    from icml24.conformal.rob_fcp import RobFCPStrategy

    def ev(n, cov, size, src):
        return _reply(RecordDict({"metrics": MetricRecord({"num-examples": n, "coverage": cov, "set-size": size})}), src)

    replies = [ev(100, 0.9, 2.0, 1), ev(300, 0.8, 1.0, 2), _reply(RecordDict(), 3), ev(50, float("nan"), 1.0, 4)]
    out = RobFCPStrategy().aggregate_evaluate(1, replies)
    assert out["coverage"] == pytest.approx(0.825)
    assert out["set-size"] == pytest.approx(1.25)
    assert RobFCPStrategy().aggregate_evaluate(1, []) is None


def test_strategy_bad_config():
    pytest.importorskip("flwr")
    from icml24.conformal.rob_fcp import RobFCPStrategy

    with pytest.raises(ValueError, match="alpha"):
        RobFCPStrategy(alpha=2.0)
    with pytest.raises(ValueError, match="n_malicious"):
        RobFCPStrategy(n_malicious=-1)
    with pytest.raises(ValueError, match="n_bins"):
        RobFCPStrategy(n_bins=0)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.sampled_from([None, 0, 1, 2, 5]))
def test_random_garbage_never_crashes_the_round(seed, k, n_malicious):
    rng = np.random.default_rng(seed)
    counts, ns = [], []
    for _ in range(k):
        kind = rng.integers(0, 6)
        c = rng.multinomial(40, np.full(20, 0.05)).astype(float)
        if kind == 1:
            c = c[: rng.integers(0, 20)]
        elif kind == 2:
            c[rng.integers(0, 20)] = np.nan
        elif kind == 3:
            c[rng.integers(0, 20)] = -3.0
        elif kind == 4:
            c = rng.normal(size=(2, 10))
        counts.append(c)
        ns.append(None if kind == 5 else 40)
    agg = aggregate_histograms(counts, ns, alpha=0.1, n_bins=4, refine=5, n_malicious=n_malicious)
    assert math.isnan(agg.qhat) or agg.qhat == math.inf or 0.0 < agg.qhat <= 1.0
    assert set(agg.benign).isdisjoint(agg.rejected)
    np.testing.assert_array_equal(np.sort(np.r_[agg.benign, agg.malicious]), np.arange(k))
