"""Faults and attacks on a federated round (issues 12 and 14), one test per case, on the strategy's
``aggregate_train``/``aggregate_evaluate`` with hand-built reply messages, and on the exact path.

- a client whose finite counts sum to +inf (no ``num-examples``) used to crash ``aggregate_train``;
- a reply that breaks the parser or the checks is rejected, never raised; the round goes on;
- the same node replying twice counted as two clients;
- an evaluation reply with ``coverage = 50`` was accepted; a node claiming 10^12 examples set the
  reported coverage to 0;
- a Byzantine client with an ordinary-looking histogram claiming 1000x the sample count is never flagged
  and pulled coverage from ~0.9 to ~0.8 (exact path and Flower path): the weight cap stops it.
"""

import math

import numpy as np
import pytest

from icml24.conformal import lac_scores, marginal_coverage, prediction_sets

flwr = pytest.importorskip("flwr")
from flwr.app import Array, ArrayRecord, Message, MessageType, MetricRecord, RecordDict  # noqa: E402

from icml24.conformal.rob_fcp import RobFCPStrategy, rob_fcp_quantile  # noqa: E402
from icml24.conformal.rob_fcp.characterization import score_histogram  # noqa: E402

N_BINS, REFINE = 20, 50


@pytest.fixture(autouse=True)
def _server_identity(monkeypatch):
    from flwr.supercore.task_identity import TaskIdentity

    # Instruction messages read the server task's identity, which a ServerApp run sets.
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 0)


def _reply(node, records, kind=MessageType.TRAIN):
    ins = Message(content=RecordDict(), dst_node_id=node, message_type=kind)
    return Message(content=RecordDict(records), reply_to=ins)


def _hist_reply(node, counts, n="auto"):
    records = {"histogram": ArrayRecord({"counts": Array(np.asarray(counts, dtype=np.float64))})}
    if n is not None:
        records["metrics"] = MetricRecord({"num-examples": float(np.sum(counts)) if n == "auto" else n})
    return _reply(node, records)


def _task(n, rng):
    p = rng.dirichlet(np.full(10, 0.5), size=n)
    y = (p.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1)
    return lac_scores(p, y), p, y


def _honest(k=8, n=300, seed=0):
    s, _, _ = _task(k * n, np.random.default_rng(seed))
    return [s[i * n : (i + 1) * n] for i in range(k)]


def _counts(scores):
    return score_histogram(scores, N_BINS * REFINE, bounds=(0.0, 1.0), normalize=False)


def _strategy(**kw):
    return RobFCPStrategy(alpha=0.1, n_bins=N_BINS, refine=REFINE, n_malicious=kw.pop("n_malicious", 1), **kw)


def test_non_finite_total_is_rejected_not_raised():
    honest = _honest()
    replies = [_hist_reply(10 + i, _counts(s)) for i, s in enumerate(honest)]
    replies.append(_hist_reply(99, np.full(N_BINS * REFINE, 1e308), n=None))  # finite entries, sum = +inf
    st = _strategy()
    arrays, metrics = st.aggregate_train(1, replies)
    assert 99 in st.rejected_nodes_ and "non-finite" in st.rejected_nodes_[99]
    assert math.isfinite(st.qhat_) and metrics["num-clients"] == 9 and metrics["num-rejected"] == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"histogram": ArrayRecord({"wrong-key": Array(np.zeros(3))})},
        {"metrics": MetricRecord({"num-examples": 5})},
        {"histogram": ArrayRecord({"counts": Array(np.zeros((2, 2)))})},
        {"histogram": ArrayRecord({"counts": Array(np.full(N_BINS * REFINE, 2.0**60))})},
    ],
    ids=["no-counts", "no-histogram", "2-D counts", "total beyond 2^53"],
)
def test_every_per_client_failure_is_caught_and_the_round_goes_on(bad):
    replies = [_hist_reply(10 + i, _counts(s)) for i, s in enumerate(_honest())] + [_reply(99, bad)]
    st = _strategy()
    arrays, _ = st.aggregate_train(1, replies)
    assert arrays is not None and math.isfinite(st.qhat_)
    assert list(st.rejected_nodes_) == [99] and 99 in st.flagged_nodes_


def test_a_node_replying_twice_counts_once():
    honest = _honest()
    replies = [_hist_reply(10 + i, _counts(s)) for i, s in enumerate(honest)]
    replies.append(_hist_reply(10, np.r_[np.full(10, 1.0), np.zeros(N_BINS * REFINE - 10)] * 300))
    st = _strategy(n_malicious=0)
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["num-clients"] == 8 and st.duplicate_nodes_ == [10]
    once = _strategy(n_malicious=0)
    once.aggregate_train(1, replies[:-1])
    assert st.qhat_ == once.qhat_  # the second reply of node 10 was ignored


def _eval_reply(node, n, coverage, size=1.5):
    return _reply(node, {"metrics": MetricRecord({"num-examples": n, "coverage": coverage, "set-size": size})},
                  MessageType.EVALUATE)


@pytest.mark.parametrize(
    "n,coverage,size", [(100, 50.0, 1.0), (100, -0.1, 1.0), (100, float("nan"), 1.0), (0, 0.9, 1.0),
                        (100, 0.9, -1.0), (float("inf"), 0.9, 1.0)],
)
def test_evaluation_metrics_outside_their_range_are_skipped(n, coverage, size):
    replies = [_eval_reply(10 + i, 100, 0.9) for i in range(5)] + [_eval_reply(99, n, coverage, size)]
    st = _strategy()
    out = st.aggregate_evaluate(1, replies)
    assert out["coverage"] == pytest.approx(0.9) and out["set-size"] == pytest.approx(1.5)
    assert list(st.rejected_evaluations_) == [99] and out["num-evaluations"] == 5


def test_evaluation_weights_are_robust_and_nodes_count_once():
    replies = [_eval_reply(10 + i, 100, 0.9) for i in range(9)] + [_eval_reply(99, 1e12, 0.0)]
    replies.append(_eval_reply(10, 100, 0.0))  # node 10 again: ignored
    out = _strategy().aggregate_evaluate(1, replies)
    # capped at 3 x the median (100): the liar weighs 300 of 1200, so coverage is 0.675, not ~0
    assert out["coverage"] == pytest.approx(0.9 * 900 / 1200) and out["num-evaluations"] == 10
    naive = _strategy(max_weight_ratio=None).aggregate_evaluate(1, replies)
    assert naive["coverage"] < 1e-6  # without the cap one node sets the coverage


def _inflation_attack(seed, n=50, k=10, factor=1000):
    """``k`` honest clients x ``n`` scores; one attacker reports a fresh sample of the same model's scores
    with its top 15% replaced by low values (a histogram within the honest spread, so detection often
    keeps it) and claims ``factor`` x the count."""
    rng = np.random.default_rng(seed)
    s, _, _ = _task(k * n, rng)
    honest = [s[i * n : (i + 1) * n] for i in range(k)]
    a, _, _ = _task(n, rng)
    a = np.where(a > np.quantile(a, 0.85), rng.uniform(0, np.median(a), n), a)
    return honest, np.tile(a, factor)


SEEDS = range(10)
_TEST = _task(20000, np.random.default_rng(12345))


def _coverage(qhat):
    _, p, y = _TEST
    return marginal_coverage(prediction_sets(lac_scores(p), qhat), y)


def test_inflated_count_attack_exact_path():
    hidden, cov_def, cov_undef = 0, [], []
    for seed in SEEDS:
        honest, attacker = _inflation_attack(seed)
        clients = honest + [attacker]
        defended = rob_fcp_quantile(clients, 0.1, 1, n_bins=N_BINS)
        undefended = rob_fcp_quantile(clients, 0.1, 1, n_bins=N_BINS, max_weight_ratio=None)
        if 10 in defended.benign:  # its histogram looks benign: detection alone kept it
            hidden += 1
            assert defended.capped == {10: (50_000, 150)}
        cov_def.append(_coverage(defended.qhat))
        cov_undef.append(_coverage(undefended.qhat))
    assert hidden >= 5
    assert np.mean(cov_undef) < 0.85  # the attack works without the cap (about 0.80) ...
    assert np.mean(cov_def) > 0.88 and min(cov_def) > 0.86  # ... and the cap keeps coverage near 0.9


def test_inflated_count_attack_flower_path():
    hidden, cov_def, cov_undef = 0, [], []
    for seed in SEEDS:
        honest, attacker = _inflation_attack(seed)
        replies = [_hist_reply(10 + i, _counts(s)) for i, s in enumerate(honest)]
        replies.append(_hist_reply(99, _counts(attacker)))
        st, naive = _strategy(), _strategy(max_weight_ratio=None)
        st.aggregate_train(1, replies)
        naive.aggregate_train(1, replies)
        if 99 not in st.flagged_nodes_:
            hidden += 1
            assert st.capped_nodes_ == {99: (50_000.0, 150.0)}
        cov_def.append(_coverage(st.qhat_))
        cov_undef.append(_coverage(naive.qhat_))
    assert hidden >= 5 and np.mean(cov_undef) < 0.85
    assert np.mean(cov_def) > 0.88 and min(cov_def) > 0.86


def test_the_cap_changes_nothing_for_honest_clients_of_unequal_size():
    rng = np.random.default_rng(3)
    s, _, _ = _task(4000, rng)
    sizes = [200, 300, 400, 500, 600, 700, 800]  # within 3x the median (500)
    clients = np.split(s[: sum(sizes)], np.cumsum(sizes)[:-1])
    a = rob_fcp_quantile(clients, 0.1, 0, n_bins=N_BINS)
    b = rob_fcp_quantile(clients, 0.1, 0, n_bins=N_BINS, max_weight_ratio=None)
    assert a.qhat == b.qhat and a.capped == {}


def test_cap_helpers():
    from icml24.conformal.rob_fcp.weights import cap_counts, cap_scores, weight_cap

    c = np.array([3.0, 0.0, 7.0, 10.0])
    capped = cap_counts(c, 5)
    assert capped.sum() == 5 and np.all(np.abs(capped - c * 5 / 20) < 1)
    assert np.array_equal(cap_counts(c, 100), c)
    sc = cap_scores(np.arange(1000.0), 10)
    assert sc.size == 10 and sc[0] == 50 and sc[-1] == 950
    assert weight_cap([100, 100, 1e12], 3.0) == 300 and weight_cap([1, 2], None) == math.inf
    with pytest.raises(ValueError, match="max_weight_ratio"):
        weight_cap([1], 0.5)
