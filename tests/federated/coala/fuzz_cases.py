"""Fuzz cases for coala's exported callables (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.federated import coala as co

LABELS = np.repeat(np.arange(10), 6)
IMAGES, _ = co.load_digit_images()
IMAGES = IMAGES[:20]
STATES = [{"w": np.array([1.0, 2.0])}, {"w": np.array([3.0, 4.0])}]
TASK = co.ClassificationTask()
torch.manual_seed(0)
MODEL = co.LeNetTiny()
X = IMAGES[:8]
Y = np.arange(8) % 10
BAD_INT = [0, -1, 2.5, "3", None]
BAD_POS = [0.0, -1.0, "x"]

FUZZ_CASES = [
    dict(fn=co.IIDPartitioner(), args=(LABELS, 3), kwargs={"rng": 0},
         invalid={"labels": [np.ones((2, 2), dtype=int), np.array([0.5, 1.0]), np.array([], dtype=int),
                             np.array([-1, 2])],
                  "n_clients": [0, -1, 61, 2.5, "x"], "rng": ["x", -1, 1.5]},
         covers=(co.IIDPartitioner, co.Partitioner)),
    dict(fn=co.DirichletPartitioner, kwargs={"alpha": 0.5, "min_size": 1},
         invalid={"alpha": BAD_POS, "min_size": [-1, 1.5, "x"]}),
    dict(fn=co.DirichletPartitioner(alpha=0.5, min_size=1), args=(LABELS, 3), kwargs={"rng": 0},
         invalid={"n_clients": [0, "x"], "labels": [np.array([0.5, 1.0])]}),
    dict(fn=co.ClassPartitioner, kwargs={"classes_per_client": 2}, invalid={"classes_per_client": BAD_INT}),
    dict(fn=co.ClassPartitioner(classes_per_client=2), args=(LABELS, 5), kwargs={"rng": 0},
         invalid={"n_clients": [0, 2, "x"]}),
    dict(fn=co.make_partitioner, args=("dir",), kwargs={"alpha": 0.5, "classes_per_client": 2, "min_size": 10},
         invalid={"split_type": ["x", None, 3], "alpha": BAD_POS, "classes_per_client": BAD_INT,
                  "min_size": [-1, "x"]}),
    dict(fn=co.domain_transform, args=(IMAGES, "noisy"),
         invalid={"images": [np.ones((2, 8, 8)), np.ones((1, 1, 8, 8), dtype=int)], "domain": ["x", None, 1]}),
    dict(fn=co.load_digit_images),
    dict(fn=co.task_splits, args=(10, 5), invalid={"num_classes": BAD_INT, "num_tasks": [0, 3, "x"]}),
    dict(fn=co.DataConfig, kwargs={"split_type": "dir", "alpha": 0.1, "test_fraction": 0.3},
         invalid={"split_type": ["x"], "alpha": BAD_POS, "classes_per_client": BAD_INT,
                  "num_of_clients": BAD_INT, "min_size": [-1, "x"], "feature_shift": ["yes", 1],
                  "domains": [(), (1,)], "test_fraction": [0.0, 1.0, "x"]}),
    dict(fn=co.ServerConfig, kwargs={"rounds": 10, "proximal_mu": 0.01},
         invalid={"rounds": BAD_INT, "clients_per_round": BAD_INT, "aggregation_strategy": ["fedavg", None],
                  "algorithm": ["scaffold"], "proximal_mu": [-1.0, "x"], "test_every": [-1, "x"]}),
    dict(fn=co.ClientConfig, kwargs={"lr": 0.05, "momentum": 0.9, "weight_decay": 0.0},
         invalid={"local_epoch": BAD_INT, "batch_size": BAD_INT, "lr": BAD_POS, "momentum": [-0.1, 1.5, "x"],
                  "weight_decay": [-1.0, "x"]}),
    dict(fn=co.CoalaConfig, kwargs={"seed": 0}, invalid={"data": [{}, 3], "server": [{}], "client": [None],
                                                         "seed": [-1, 1.5, "x"]}),
    dict(fn=co.merge_config, args=(co.CoalaConfig(), {"data": {"alpha": 0.1}}),
         invalid={"base": [{}, None], "overrides": [3, [("seed", 1)], {"nope": 1}, {"data": {"alpha": -1.0}}]}),
    dict(fn=co.LocalTraining, kwargs={"lr": 0.05, "momentum": 0.9, "weight_decay": 0.0, "proximal_mu": 0.0,
                                      "kd_alpha": 0.0, "kd_temperature": 2.0, "pseudo_label_threshold": 0.9},
         invalid={"local_epoch": BAD_INT, "batch_size": BAD_INT, "lr": BAD_POS, "momentum": [1.5],
                  "weight_decay": [-1.0], "proximal_mu": [-1.0, "x"], "kd_alpha": [-1.0],
                  "kd_temperature": [0.0, -1.0], "pseudo_label_threshold": [-0.1, 1.5]}),
    dict(fn=co.LeNetTiny, kwargs={"in_channels": 1, "num_classes": 10, "width": 4, "image_size": 8},
         invalid={"in_channels": BAD_INT, "num_classes": [1, "x"], "width": BAD_INT, "image_size": [6, 2, "x"]}),
    dict(fn=co.bn_state_keys, args=(MODEL,), invalid={"model": [None, "x", {}]}),
    dict(fn=co.ClassificationTask, args=(co.LeNetTiny,), kwargs={"num_classes": 10},
         invalid={"model_fn": [None, 3], "num_classes": [1, "x"]}),
    dict(fn=TASK.fit, args=(MODEL, X, Y, co.LocalTraining()), kwargs={"seed": 0},
         invalid={"x": [np.array([]), np.full((2, 1, 8, 8), np.nan)], "y": [np.arange(3)],
                  "settings": [{}, None]}),
    dict(fn=TASK.evaluate, args=(MODEL, X, Y), invalid={"x": [np.array([])], "y": [np.arange(3), np.array([])]}),
    dict(fn=co.DigitsFederation, kwargs={"test_fraction": 0.3}, invalid={"test_fraction": [0.0, 1.0, "x"],
                                                                         "partitioner": ["iid", 3]}),
    dict(fn=co.DigitsFederation().client_data, args=(0, 4, {}),
         invalid={"partition_id": [-1, 4, 1.5, "0"], "num_partitions": [0, "x"], "scenario": [None, 3]}),
    dict(fn=co.DigitsFederation().server_data, args=({},), invalid={"scenario": [None, 3], "num_partitions": [0]}),
    dict(fn=co.fedavg_states, args=(STATES, [1.0, 3.0]),
         invalid={"states": [[], {"w": 1}, [1, 2], [{"w": np.ones(2)}, {"v": np.ones(2)}],
                             [{"w": np.ones(2)}, {"w": np.ones(3)}], [{"w": np.array([np.nan, 1.0])}, {"w": np.ones(2)}]],
                  "weights": [[1.0], [-1.0, 1.0], [0.0, 0.0], ["a", "b"], [np.nan, 1.0]],
                  "local_keys": ["w"]}),
    dict(fn=co.CoalaFedAvg, kwargs={"clients_per_round": 2, "seed": 0},
         invalid={"clients_per_round": BAD_INT, "aggregation_strategy": ["mean"], "local_keys": ["features"],
                  "evaluate_clients": ["yes"], "test_every": [-1], "seed": [-1, "x"],
                  "min_available_nodes": [0], "num_partitions": [0, "x"], "max_num_examples": [0.5, "x"],
                  "max_weight_ratio": [0.5, "x"], "max_update_ratio": [0.5, "x"]}),
    dict(fn=co.ArrayFederation, args=(np.ones((20, 3)), np.arange(20) % 2), kwargs={"test_fraction": 0.3},
         invalid={"x": [np.ones(20), np.full((20, 3), np.nan), np.ones((19, 3)), "x"],
                  "y": [np.arange(20) + 0.5, -np.arange(20), np.arange(19)], "test_fraction": [0.0, "x"]}),
    dict(fn=co.CoalaFedProx, kwargs={"proximal_mu": 0.01}, invalid={"proximal_mu": [-1.0, "x"]}),
    dict(fn=co.SemiSupervisedFedAvg, kwargs={"task": TASK, "x_labeled": X, "y_labeled": Y},
         invalid={"task": [None, "x"]}, allowed={"x_labeled": "server data, checked by task.fit when it trains"}),
    dict(fn=co.make_client_app, invalid={"task": ["x", 3], "federation": ["x"]}),
    dict(fn=co.InProcessGrid, args=(co.make_client_app(), 2), invalid={"num_nodes": BAD_INT}),
]

EXEMPT = {
    "FederatedDataset": "a typing Protocol (the data level's interface), implemented by ArrayFederation",
    "ClientData": "a record of arrays returned by DigitsFederation.client_data",
    "ServerData": "a record of arrays returned by DigitsFederation.server_data",
    "FederatedRun": "an experiment record; its strategy and config are checked by CoalaFedAvg and the ClientApp",
    "ContinualRun": "an experiment record, exercised in tests/federated/coala/test_coala_flower.py",
    "discover_partitions": "Flower wiring (one QUERY round on a Grid), exercised by every in-process test",
    "make_server_app": "Flower wiring (a ServerApp factory), exercised by the simulation smoke test",
    "run_coala_simulation": "starts Flower's Ray simulation engine (module-scoped fixture of the smoke test)",
    "run_in_process": "driver of the in-process Grid, exercised in tests/federated/coala/test_coala_flower.py",
    "state_arrays": "a model's state_dict as an ArrayRecord; takes a torch module built by the task",
}
