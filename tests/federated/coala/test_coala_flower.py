"""COALA's Flower building blocks on the in-process Grid (the real ClientApp and strategies, no Ray):
the round invariants, FedBN's local state, and each customisation level replaced by a one-class override."""

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import MetricRecord  # noqa: E402

from icml24.federated.coala import (  # noqa: E402
    ClassificationTask,
    CoalaFedAvg,
    DigitsFederation,
    FederatedRun,
    LeNetTiny,
    LocalTraining,
    bn_state_keys,
    make_client_app,
    run_in_process,
)
from icml24.federated.coala.flower import _load_state  # noqa: E402

BASE = {"local-epoch": 1, "batch-size": 32, "lr": 0.05, "momentum": 0.9}


def _server_eval(task, fed, scenario=None):
    sd = fed.server_data(scenario or {})

    def ev(r, arrays):
        if r == 0:
            return None
        m = task.build_model()
        _load_state(m, arrays)
        return MetricRecord(task.evaluate(m, sd.x_test, sd.y_test))

    return ev


def test_selection_without_replacement_and_seeded():
    runs = [FederatedRun(f"r{i}", CoalaFedAvg(clients_per_round=4, seed=7), 3, dict(BASE)) for i in range(2)]
    out = run_in_process(runs, num_supernodes=10)
    for r in range(1, 4):
        sel = out["r0"]["selected"][r]
        assert len(sel) == 4 == len(set(sel)) and all(0 <= s < 10 for s in sel)
        assert sel == out["r1"]["selected"][r]  # same seed, same clients (by partition id)


def test_same_seed_same_model():
    task, fed = ClassificationTask(), DigitsFederation()
    runs = [FederatedRun(f"r{i}", CoalaFedAvg(clients_per_round=3, seed=1), 2, {**BASE, "split-type": "dir",
                                                                                 "alpha": 0.5}, seed=1)
            for i in range(2)]  # fmt: skip
    out = run_in_process(runs, num_supernodes=6, task=task, federation=fed)
    a, b = out["r0"]["arrays"], out["r1"]["arrays"]
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


def test_one_client_one_round_equals_centralised_training():
    task, fed = ClassificationTask(), DigitsFederation()
    out = run_in_process([FederatedRun("one", CoalaFedAvg(clients_per_round=1), 1, {**BASE, "local-epoch": 2},
                                       seed=3)], num_supernodes=1, task=task, federation=fed)  # fmt: skip
    torch.manual_seed(3)
    model = task.build_model()
    data = fed.client_data(0, 1, {})
    # The ClientApp's seed for partition 0, round 1: seed * 1_000_003 + round * 1_009 + partition.
    task.fit(model, data.x_train, data.y_train, LocalTraining(local_epoch=2), seed=3 * 1_000_003 + 1_009)
    fed_state = out["one"]["arrays"]
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(fed_state[k].numpy(), v.numpy(), rtol=1e-6, atol=1e-7)


def test_fedbn_clients_keep_their_batch_norm_and_server_does_not_average_it():
    keys = bn_state_keys(LeNetTiny())
    strategy = CoalaFedAvg(clients_per_round=4, local_keys=keys, evaluate_clients=True, num_partitions=4)
    out = run_in_process([FederatedRun("bn", strategy, 2, {**BASE, "feature-shift": True})], num_supernodes=4)
    init = out["bn"]["arrays"]
    torch.manual_seed(0)
    fresh = LeNetTiny().state_dict()
    for k in keys:  # the server's BN entries are the initial ones
        np.testing.assert_array_equal(init[k].numpy(), fresh[k].numpy())
    assert not np.array_equal(init["classifier.1.weight"].numpy(), fresh["classifier.1.weight"].numpy())
    evals = out["bn"]["clients"][2]
    assert sorted(evals) == [0, 1, 2, 3] and all(0 <= e["accuracy"] <= 1 for e in evals.values())


# ---------------------------------------------------------------------------------------------------------
# Each customisation level replaced by a one-class override
# ---------------------------------------------------------------------------------------------------------


def test_task_level_override_one_class():
    """Task level: a subclass that replaces the loss (label smoothing) runs through the same ClientApp."""
    calls = []

    class SmoothedTask(ClassificationTask):
        def loss(self, logits, targets):
            calls.append(1)
            return torch.nn.functional.cross_entropy(logits, targets, label_smoothing=0.1)

    task = SmoothedTask()
    out = run_in_process([FederatedRun("t", CoalaFedAvg(clients_per_round=2), 2, dict(BASE),
                                       evaluate_fn=_server_eval(task, DigitsFederation()))],
                         num_supernodes=4, task=task)  # fmt: skip
    assert calls and 0 <= out["t"]["server"][2]["accuracy"] <= 1


def test_model_level_override_one_class():
    """Model level: a different torch.nn.Module (an MLP without batch norm) via the task's model factory."""

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                           torch.nn.Linear(32, 10))  # fmt: skip

        def forward(self, x):
            return self.net(x)

    task = ClassificationTask(MLP)
    out = run_in_process([FederatedRun("m", CoalaFedAvg(clients_per_round=2), 3, dict(BASE),
                                       evaluate_fn=_server_eval(task, DigitsFederation()))],
                         num_supernodes=4, task=task)  # fmt: skip
    assert set(out["m"]["arrays"].keys()) == {"net.1.weight", "net.1.bias", "net.3.weight", "net.3.bias"}
    assert out["m"]["server"][3]["accuracy"] > 0.3


def test_workflow_level_override_one_class():
    """Workflow: a strategy subclass replaces one stage (selection: always the lowest partitions) and
    leaves the others (aggregation) as they were."""

    class FirstClients(CoalaFedAvg):
        def selection(self, grid, server_round):
            return self.eligible_nodes(grid)[: self.clients_per_round]

    out = run_in_process([FederatedRun("w", FirstClients(clients_per_round=2), 2, dict(BASE)),
                          FederatedRun("d", CoalaFedAvg(clients_per_round=2, seed=5), 2, dict(BASE))],
                         num_supernodes=6)  # fmt: skip
    assert out["w"]["selected"] == {1: [0, 1], 2: [0, 1]}
    assert out["d"]["selected"] != out["w"]["selected"]


def test_client_app_refuses_bad_components():
    with pytest.raises(TypeError, match="task"):
        make_client_app(task="x")
    with pytest.raises(TypeError, match="federation"):
        make_client_app(federation=3)


def test_continual_run_accuracy_matrix_and_kd_teacher():
    from icml24.federated.coala import ContinualRun, task_splits

    task, fed = ClassificationTask(), DigitsFederation()
    sd = fed.server_data({})

    def task_eval(classes, seen, arrays):
        m = task.build_model()
        _load_state(m, arrays)
        keep = np.isin(sd.y_test, classes)
        return task.evaluate(m, sd.x_test[keep], sd.y_test[keep], classes=seen)["accuracy"]

    tasks = task_splits(10, 5)[:3]
    runs = [ContinualRun(f"cl{kd}", CoalaFedAvg(clients_per_round=3), tasks, 1, dict(BASE), task_eval, kd_alpha=kd)
            for kd in (0.0, 1.0)]  # fmt: skip
    out = run_in_process(runs, num_supernodes=4, task=task, federation=fed)
    for r in runs:
        acc = out[r.name]["accuracy"]
        assert [len(row) for row in acc] == [1, 2, 3] and all(0 <= a <= 1 for row in acc for a in row)
    # The first task has no teacher, so both runs agree on it exactly.
    assert out["cl0.0"]["accuracy"][0] == out["cl1.0"]["accuracy"][0]


def test_a_diverged_client_is_left_out_of_the_round():
    class NaNOnPartitionZero(ClassificationTask):
        def fit(self, model, x, y, settings, **kwargs):
            out = super().fit(model, x, y, settings, **kwargs)
            if np.array_equal(x, DigitsFederation().client_data(0, 3, {}).x_train):
                with torch.no_grad():
                    next(model.parameters()).fill_(float("nan"))
            return out

    strategy = CoalaFedAvg(clients_per_round=3)
    out = run_in_process(
        [FederatedRun("n", strategy, 1, dict(BASE))], num_supernodes=3, task=NaNOnPartitionZero()
    )
    assert strategy.dropped_ == {1: [0]}
    assert all(np.isfinite(out["n"]["arrays"][k].numpy()).all() for k in out["n"]["arrays"])


def test_deployable_apps_run_on_the_in_process_grid():
    from flwr.app import Context, RecordDict

    from icml24.federated.coala import InProcessGrid, apps
    from icml24.federated.coala.flower import _server_identity

    cfg = apps.config_from_run_config({"num-rounds": 2, "num-partitions": 4, "algorithm": "fedbn", "lr": 0.1})
    assert cfg.server.rounds == 2 and cfg.server.algorithm == "fedbn" and cfg.client.lr == 0.1
    assert cfg.client.batch_size == 32  # a key the run config does not set keeps its default
    grid = InProcessGrid(apps.client_app, 4)
    ctx = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                  run_config={"num-rounds": 1, "num-partitions": 4, "clients-per-round": 2, "algorithm": "fedbn",
                              "feature-shift": True})  # fmt: skip
    with _server_identity():
        apps._main(grid, ctx)
    states = [c.state for c in grid._contexts.values()]
    assert sum(len(s.array_records) for s in states) == 2  # the two selected clients keep their batch norm


def test_any_object_with_client_data_goes_through_the_same_client_app():
    """Issue 35: the data level is a protocol, not the digits class: a plain class with ``client_data`` over
    tabular rows (scikit-learn's wine data, not the reproduction's digits) trains through the same ClientApp."""
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    from icml24.federated.coala import ArrayFederation, ClientData, FederatedDataset

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)

    class Rows:  # no base class: only the protocol's method
        def client_data(self, partition_id, num_partitions, scenario):
            part = np.arange(len(y))[partition_id::num_partitions]
            return ClientData(X[part[::2]], y[part[::2]], X[part[1::2]], y[part[1::2]])

    assert isinstance(Rows(), FederatedDataset) and not isinstance(object(), FederatedDataset)
    task = ClassificationTask(lambda: torch.nn.Sequential(torch.nn.Linear(13, 16), torch.nn.ReLU(),
                                                          torch.nn.Linear(16, 3)), num_classes=3)  # fmt: skip
    for fed in (Rows(), ArrayFederation(X, y)):
        strategy = CoalaFedAvg(clients_per_round=3, evaluate_clients=True)
        out = run_in_process([FederatedRun("t", strategy, 4, {**BASE, "lr": 0.1, "local-epoch": 5})], num_supernodes=3, task=task,
                             federation=fed)  # fmt: skip
        acc = [m["accuracy"] for m in out["t"]["clients"][4].values()]
        assert len(acc) == 3 and np.mean(acc) > 0.8  # three classes: chance is about 0.4
    with pytest.raises(ValueError, match="feature-shift transforms images"):
        ArrayFederation(X, y).client_data(0, 4, {"feature-shift": True})
