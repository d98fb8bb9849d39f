"""One bad client must not kill or poison COALA's federation (issue 42): each fault through the Flower strategy
(``CoalaFedAvg.aggregate_train`` / ``aggregate_evaluate`` on hand-made reply Messages after a real
``configure_train``), then end to end on the in-process Grid with a lying client against the same federation
without the defences (which the lie does poison, so the tests can fail).

Before the fix: wrong shapes, missing or extra keys, or a negative ``num-examples`` raised out of
``aggregate_train`` (the whole run died without naming the client); a NaN ``num-examples`` silently switched the
round to equal weights; a claim of 10^12 examples or an update of 1e30 drove the accuracy to 0.10.
"""

import math

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict  # noqa: E402

from icml24.federated.coala import (  # noqa: E402
    ClassificationTask,
    CoalaFedAvg,
    DigitsFederation,
    FederatedRun,
    InProcessGrid,
    LeNetTiny,
    bn_state_keys,
    make_client_app,
    run_in_process,
)
from icml24.federated.coala.flower import _load_state, state_arrays  # noqa: E402

K = 5


@pytest.fixture(autouse=True)
def _server_identity(monkeypatch):
    from flwr.supercore.task_identity import TaskIdentity

    # Instruction messages read the server task's identity, which a ServerApp run sets.
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 0)


def _round(**kwargs):
    """A strategy after a real ``configure_train`` of round 1 on K nodes; the global model and node ids."""
    torch.manual_seed(0)
    model = LeNetTiny()
    strategy = CoalaFedAvg(clients_per_round=K, **kwargs)
    grid = InProcessGrid(make_client_app(), K)
    strategy.node_partitions = {n: k for k, n in enumerate(grid.get_node_ids())}
    glob = state_arrays(model)
    list(strategy.configure_train(1, glob, ConfigRecord({}), grid))
    return strategy, {k: v.numpy() for k, v in glob.items()}, grid.get_node_ids()


def _honest_state(glob, i):
    rng = np.random.default_rng(i)
    return {k: (v + 0.01 * rng.standard_normal(v.shape).astype(v.dtype)) if v.dtype.kind == "f" else v.copy()
            for k, v in glob.items()}  # fmt: skip


def _reply(node, state, n, kind=MessageType.TRAIN, metrics=None):
    ins = Message(content=RecordDict(), dst_node_id=node, message_type=kind)
    records = {
        "metrics": MetricRecord(metrics if metrics is not None else {"num-examples": n, "train-loss": 1.0})
    }
    if state is not None:
        records["arrays"] = ArrayRecord({k: Array(np.asarray(v)) for k, v in state.items()})
    return Message(content=RecordDict(records), reply_to=ins)


def _weighted(states, weights, keys):
    w = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    return {k: sum(wi * s[k].astype(np.float64) for wi, s in zip(w, states, strict=True)) for k in keys}


def _check_equals_honest_mean(arrays, states, weights):
    expect = _weighted(states, weights, [k for k in states[0] if states[0][k].dtype.kind == "f"])
    for k, v in expect.items():
        np.testing.assert_allclose(arrays[k].numpy(), v, rtol=1e-5, atol=1e-6)


def _bad_state(glob, fault):
    s = _honest_state(glob, 99)
    key = "classifier.1.weight"
    if fault == "shape":
        s[key] = s[key][:, :-1]
    elif fault == "missing key":
        del s[key]
    elif fault == "extra key":
        s["backdoor.weight"] = np.ones(3, dtype=np.float32)
    elif fault == "dtype":
        s[key] = s[key].astype(np.float64)
    elif fault == "inf":
        s[key] = np.full_like(s[key], np.inf)
    return s


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("shape", "shape"), ("missing key", "missing"), ("extra key", "unexpected"), ("dtype", "dtype"),
     ("inf", "non-finite")],
)  # fmt: skip
def test_a_malformed_model_is_dropped_by_node_id_and_the_round_goes_on(fault, reason, caplog):
    strategy, glob, nodes = _round()
    honest = [_honest_state(glob, i) for i in range(K - 1)]
    replies = [_reply(nodes[i], honest[i], 60 + i) for i in range(K - 1)]
    replies.insert(2, _reply(nodes[K - 1], _bad_state(glob, fault), 60))
    arrays, metrics = strategy.aggregate_train(1, replies)
    assert list(strategy.rejected_[1]) == [nodes[K - 1]] and reason in strategy.rejected_[1][nodes[K - 1]]
    assert strategy.dropped_ == {1: [K - 1]}
    assert f"dropped node {nodes[K - 1]}" in caplog.text
    _check_equals_honest_mean(arrays, honest, [60 + i for i in range(K - 1)])
    assert metrics["train-loss"] == pytest.approx(1.0)


@pytest.mark.parametrize("count", [-5, float("nan"), float("inf"), 2.5, 1e12])
def test_a_bad_example_count_is_dropped_not_reweighted(count):
    strategy, glob, nodes = _round()
    honest = [_honest_state(glob, i) for i in range(K)]
    counts = [30, 60, 90, 120]
    replies = [_reply(nodes[i], honest[i], counts[i]) for i in range(K - 1)]
    replies.append(_reply(nodes[K - 1], honest[K - 1], count))
    arrays, _ = strategy.aggregate_train(1, replies)
    assert list(strategy.rejected_[1]) == [nodes[K - 1]]
    # The kept clients keep their own weights (a NaN count used to make the round equal-weighted).
    _check_equals_honest_mean(arrays, honest[: K - 1], counts)


def test_a_missing_count_or_metric_record_is_dropped():
    strategy, glob, nodes = _round()
    honest = [_honest_state(glob, i) for i in range(K)]
    replies = [_reply(nodes[i], honest[i], 60) for i in range(K - 2)]
    replies.append(_reply(nodes[K - 2], honest[K - 2], None, metrics={"train-loss": 0.5}))
    bare = Message(content=RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in honest[K - 1].items()})}),
                   reply_to=Message(content=RecordDict(), dst_node_id=nodes[K - 1], message_type=MessageType.TRAIN))  # fmt: skip
    replies.append(bare)
    arrays, _ = strategy.aggregate_train(1, replies)
    assert set(strategy.rejected_[1]) == {nodes[K - 2], nodes[K - 1]}
    assert "num-examples" in strategy.rejected_[1][nodes[K - 2]]
    _check_equals_honest_mean(arrays, honest[: K - 2], [60] * (K - 2))


def test_a_large_claim_is_capped_at_the_ratio_times_the_median_count(caplog):
    strategy, glob, nodes = _round(max_weight_ratio=10.0)
    honest = [_honest_state(glob, i) for i in range(K)]
    counts = [60, 60, 60, 60, 10**6]
    arrays, _ = strategy.aggregate_train(1, [_reply(nodes[i], honest[i], counts[i]) for i in range(K)])
    assert strategy.capped_ == {1: {nodes[K - 1]: (1e6, 600)}} and "capped at 600" in caplog.text
    assert 1 not in strategy.rejected_
    _check_equals_honest_mean(arrays, honest, [60, 60, 60, 60, 600])
    # Without the cap the claim sets the round's model: it is the liar's within 1e-4 of its weight.
    plain, glob2, nodes2 = _round(max_weight_ratio=None)
    arrays2, _ = plain.aggregate_train(1, [_reply(nodes2[i], honest[i], counts[i]) for i in range(K)])
    _check_equals_honest_mean(arrays2, honest, counts)


def test_honest_size_differences_under_the_ratio_are_plain_fedavg():
    strategy, glob, nodes = _round()
    honest = [_honest_state(glob, i) for i in range(K)]
    counts = [10, 35, 60, 200, 340]  # 5.7x the median, as the largest Dirichlet(0.1) client of a round
    arrays, _ = strategy.aggregate_train(1, [_reply(nodes[i], honest[i], counts[i]) for i in range(K)])
    assert strategy.capped_ == {} and strategy.rejected_ == {}
    _check_equals_honest_mean(arrays, honest, counts)


def test_an_absurd_update_is_screened_against_the_rounds_median_norm():
    strategy, glob, nodes = _round()
    honest = [_honest_state(glob, i) for i in range(K)]
    huge = {k: (v * np.float32(1e30)) if v.dtype.kind == "f" else v for k, v in honest[K - 1].items()}
    replies = [_reply(nodes[i], honest[i], 60) for i in range(K - 1)] + [_reply(nodes[K - 1], huge, 60)]
    arrays, _ = strategy.aggregate_train(1, replies)
    assert (
        list(strategy.rejected_[1]) == [nodes[K - 1]] and "update norm" in strategy.rejected_[1][nodes[K - 1]]
    )
    _check_equals_honest_mean(arrays, honest[: K - 1], [60] * (K - 1))
    assert max(strategy.update_ratios_[1][: K - 1]) < 2  # the honest updates sit near the median


def test_a_second_reply_from_one_node_counts_once():
    strategy, glob, nodes = _round()
    honest = [_honest_state(glob, i) for i in range(K)]
    replies = [_reply(nodes[i], honest[i], 60) for i in range(K)]
    replies.append(_reply(nodes[0], _honest_state(glob, 50), 60))
    arrays, _ = strategy.aggregate_train(1, replies)
    assert strategy.rejected_[1] == {nodes[0]: "a second reply from the same node (only its first counts)"}
    _check_equals_honest_mean(arrays, honest, [60] * K)


def test_the_new_global_keeps_the_models_shapes_and_dtypes():
    """Flower's mean returns the 0-d num_batches_tracked as shape (1,): the next round's honest replies were all
    dropped for a shape mismatch until the aggregate was given the global model's signature back."""
    strategy, glob, nodes = _round()
    arrays, _ = strategy.aggregate_train(1, [_reply(n, _honest_state(glob, i), 60) for i, n in enumerate(nodes)])
    for k, v in glob.items():
        assert arrays[k].numpy().shape == v.shape and arrays[k].numpy().dtype == v.dtype, k


def test_a_round_with_no_usable_reply_keeps_the_global_model():
    strategy, glob, nodes = _round()
    replies = [_reply(n, _bad_state(glob, "shape"), 60) for n in nodes]
    assert strategy.aggregate_train(1, replies) == (None, None)
    assert sorted(strategy.rejected_[1]) == sorted(nodes)


def test_fedbn_local_keys_are_checked_but_not_screened_or_averaged():
    keys = bn_state_keys(LeNetTiny())
    strategy, glob, nodes = _round(local_keys=keys)
    honest = [_honest_state(glob, i) for i in range(K)]
    for s in honest:  # local batch norm may move far (each client's own domain): not an absurd update
        s["features.1.running_mean"] = s["features.1.running_mean"] + 1e6
    arrays, _ = strategy.aggregate_train(1, [_reply(nodes[i], honest[i], 60) for i in range(K)])
    assert strategy.rejected_ == {}
    np.testing.assert_array_equal(arrays["features.1.running_mean"].numpy(), glob["features.1.running_mean"])


@pytest.mark.parametrize(
    ("metrics", "reason"),
    [({"num-examples": -1, "accuracy": 0.5, "loss": 1.0}, "num-examples"),
     ({"num-examples": 100, "accuracy": 50.0, "loss": 1.0}, "accuracy"),
     ({"num-examples": 100, "accuracy": 0.5, "loss": float("nan")}, "loss"),
     ({"accuracy": 0.5, "loss": 1.0}, "num-examples")],
)  # fmt: skip
def test_a_bad_evaluation_reply_is_skipped(metrics, reason):
    strategy, _, nodes = _round()
    good = [_reply(n, None, None, MessageType.EVALUATE, {"num-examples": 100, "accuracy": 0.8, "loss": 0.5})
            for n in nodes[:-1]]  # fmt: skip
    out = strategy.aggregate_evaluate(
        1, [*good, _reply(nodes[-1], None, None, MessageType.EVALUATE, metrics)]
    )
    assert out["accuracy"] == pytest.approx(0.8) and out["loss"] == pytest.approx(0.5)
    assert reason in strategy.rejected_evaluations_[1][nodes[-1]]
    assert sorted(strategy.client_metrics_[1]) == list(range(K - 1))


def test_an_evaluation_claiming_many_examples_is_capped():
    strategy, _, nodes = _round()
    replies = [_reply(n, None, None, MessageType.EVALUATE, {"num-examples": 100, "accuracy": 0.8, "loss": 0.5})
               for n in nodes[:-1]]  # fmt: skip
    replies.append(_reply(nodes[-1], None, None, MessageType.EVALUATE,
                          {"num-examples": 10**8, "accuracy": 0.0, "loss": 9.0}))  # fmt: skip
    out = strategy.aggregate_evaluate(1, replies)
    assert out["accuracy"] == pytest.approx(0.8 * 400 / 1400)  # the liar weighs 10 x the median, not 10^6 x


def test_strategy_refuses_bad_defence_settings():
    with pytest.raises(ValueError, match="max_weight_ratio"):
        CoalaFedAvg(max_weight_ratio=0.5)
    with pytest.raises(TypeError, match="max_update_ratio"):
        CoalaFedAvg(max_update_ratio="x")
    with pytest.raises(ValueError, match="max_num_examples"):
        CoalaFedAvg(max_num_examples=math.inf)


# ---------------------------------------------------------------------------------------------------------
# End to end: a lying client in a real federation, with and without the defences
# ---------------------------------------------------------------------------------------------------------


class _Liar(ClassificationTask):
    """Partition 0 trains honestly, then replaces its reply by an attack."""

    def __init__(self, attack):
        super().__init__()
        self.attack = attack
        self.x0 = DigitsFederation().client_data(0, K, {}).x_train

    def fit(self, model, x, y, settings, **kwargs):
        out = super().fit(model, x, y, settings, **kwargs)
        if np.array_equal(x, self.x0):
            with torch.no_grad():
                for p in model.parameters():
                    if self.attack == "scale":
                        p.mul_(1e30)
                    else:  # a garbage model claiming 10^12 examples
                        p.copy_(torch.randn_like(p) * 3)
            if self.attack == "count":
                out["num-examples"] = 10**12
        return out


def _accuracy(task, strategy):
    fed = DigitsFederation()
    sd = fed.server_data({})
    out = run_in_process([FederatedRun("r", strategy, 3, {"local-epoch": 2, "lr": 0.05})], num_supernodes=K,
                         task=task, federation=fed)  # fmt: skip
    m = ClassificationTask().build_model()
    _load_state(m, out["r"]["arrays"])
    return ClassificationTask().evaluate(m, sd.x_test, sd.y_test)["accuracy"]


@pytest.mark.parametrize("attack", ["count", "scale"])
def test_one_lying_client_poisons_an_undefended_federation_but_not_the_defended_one(attack):
    honest = _accuracy(ClassificationTask(), CoalaFedAvg(clients_per_round=K))
    defended_strategy = CoalaFedAvg(clients_per_round=K)
    defended = _accuracy(_Liar(attack), defended_strategy)
    undefended = _accuracy(_Liar(attack), CoalaFedAvg(clients_per_round=K, max_num_examples=1e13,
                                                      max_weight_ratio=None, max_update_ratio=None))  # fmt: skip
    assert honest > 0.3  # chance is 0.1
    assert undefended < 0.2  # the attack works when nothing stops it
    assert defended > max(honest - 0.2, undefended + 0.15)  # four honest clients left, the liar dropped each round
    assert (
        all(list(r) == [0] for r in defended_strategy.dropped_.values())
        and len(defended_strategy.dropped_) == 3
    )
