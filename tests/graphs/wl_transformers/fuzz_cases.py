"""Fuzz cases for wl-transformers' exported callables (see tests/test_fuzz_api.py)."""

import networkx as nx
import numpy as np

from icml24.graphs.wl_transformers import (
    GIN,
    EdgeTransformer,
    LaplacianPE,
    SignNetSPE,
    TrainConfig,
    TriangularAttention,
    TupleGT,
    brec_like_pairs,
    build_model,
    connected_triples,
    counting_dataset,
    csl_dataset,
    csl_graph,
    distinguishes,
    fit,
    four_cycle_count,
    hotelling_paired_p,
    laplacian_eigenpairs,
    pair_tokens,
    predict,
    relabel_randomly,
    rook_graph,
    shrikhande_graph,
    tokenize,
    triangle_count,
    wl_hash,
)

P4 = nx.path_graph(4)
TOKENS = [tokenize(nx.path_graph(3), num_eigs=4, y=1), tokenize(nx.cycle_graph(4), num_eigs=4, y=0)]
SMALL_GIN = GIN(dim=4, layers=1, out_dim=2)
NOT_A_GRAPH = [[(0, 1)], nx.DiGraph([(0, 1)]), "graph"]
A = np.random.default_rng(0).normal(size=(8, 2))

FUZZ_CASES = [
    dict(fn=laplacian_eigenpairs, args=(P4, 3), invalid={"graph": NOT_A_GRAPH + [nx.empty_graph(0)], "num_eigs": [0, 2.5, True]}),
    dict(fn=pair_tokens, args=(P4,), invalid={"graph": NOT_A_GRAPH + [nx.Graph([(0, 0)])]}),
    dict(fn=connected_triples, args=(P4,), invalid={"graph": NOT_A_GRAPH}),
    dict(fn=tokenize, args=(P4,), kwargs={"order": 2, "num_eigs": 4, "y": 1}, invalid={"graph": NOT_A_GRAPH, "order": [1, 4, "2"], "num_eigs": [0, -1]}),
    dict(fn=csl_graph, args=(11, 2), invalid={"num_nodes": [3, 11.0], "skip": [1, 10, "2"]}),
    dict(fn=csl_dataset, args=(2,), kwargs={"num_nodes": 11, "skips": (2, 3), "seed": 0},
         invalid={"per_class": [0, 1.5], "skips": [(2,), (2, 2)], "seed": ["0", 1.5], "num_nodes": [2]}),
    dict(fn=relabel_randomly, args=(P4, np.random.default_rng(0)), invalid={"graph": NOT_A_GRAPH, "rng": [0, None]}),
    dict(fn=wl_hash, args=(P4,), invalid={"graph": NOT_A_GRAPH, "iterations": [0, 1.5]}),
    dict(fn=triangle_count, args=(P4,), invalid={"graph": NOT_A_GRAPH}),
    dict(fn=four_cycle_count, args=(P4,), invalid={"graph": NOT_A_GRAPH}),
    dict(fn=rook_graph, args=()),
    dict(fn=shrikhande_graph, args=()),
    dict(fn=brec_like_pairs, args=(0,), kwargs={"regular_pairs": 1}, invalid={"seed": ["0", 0.5], "regular_pairs": [-1, 1.5]}),
    dict(fn=counting_dataset, args=(3,), kwargs={"seed": 0},
         invalid={"num_graphs": [0, 2.5], "n_range": [(1, 5), (9, 5), (3.0, 5), [10, 20]], "p_range": [(0.0, 0.5), (0.5, 0.2), (0.1, 1.5)], "seed": ["x"]}),
    dict(fn=hotelling_paired_p, args=(A, A + 1.0), kwargs={"ridge": 1e-6},
         invalid={"a": [A[:, 0], np.zeros((2, 2))], "b": [A[:3]], "ridge": [0.0, -1.0]}),
    dict(fn=LaplacianPE, kwargs={"num_eigs": 4, "dim": 8}, invalid={"num_eigs": [0, 1.5], "dim": [0, "8"]}),
    dict(fn=SignNetSPE, kwargs={"num_eigs": 4, "dim": 8}, invalid={"num_eigs": [0], "dim": [-1], "channels": [0], "gin_layers": [0]}),
    dict(fn=TupleGT, kwargs={"order": 2, "pe": "lpe", "dim": 8, "heads": 2, "num_eigs": 4},
         invalid={"order": [1, 4], "pe": ["rwse"], "dim": [0, 7], "heads": [0], "layers": [0], "num_eigs": [0], "out_dim": [0],
                  "max_degree": [0], "dropout": [1.0, -0.1], "attention_dropout": [2.0]}),
    dict(fn=TriangularAttention, args=(8, 2), invalid={"dim": [0, 7, 8.0], "heads": [0, 3]}),
    dict(fn=EdgeTransformer, kwargs={"dim": 8, "heads": 2}, invalid={"dim": [0, 7], "layers": [0], "heads": [0, 3], "out_dim": [0]}),
    dict(fn=GIN, kwargs={"dim": 8, "layers": 1}, invalid={"dim": [0], "layers": [0, 1.5], "out_dim": [0]}),
    dict(fn=build_model, args=("gin",), kwargs={"out_dim": 2, "dim": 8},
         invalid={"name": ["gat", 3], "out_dim": [0]}),
    dict(fn=TrainConfig, kwargs={"epochs": 1}, invalid={"epochs": [0, 1.5], "batch_size": [0], "lr": [0.0, -1.0],
                                                       "weight_decay": [-1.0], "warmup_fraction": [1.0, -0.5], "grad_clip": [0.0]}),
    dict(fn=fit, args=(SMALL_GIN, TOKENS), kwargs={"task": "classify", "config": TrainConfig(epochs=1, batch_size=2)},
         invalid={"model": [None, "gin"], "graphs": [[], "abc", [P4]], "task": ["rank"], "config": [{"epochs": 1}],
                  "target_scale": [0.0, -1.0]}),
    dict(fn=predict, args=(SMALL_GIN, TOKENS), invalid={"model": [None], "graphs": [[], [P4]], "batch_size": [0, 1.5]}),
    dict(fn=distinguishes, args=(SMALL_GIN, P4, nx.star_graph(3)), kwargs={"num_eigs": 4, "n_perm": 6, "alpha": 1e-3},
         invalid={"model": [None], "g": ["P4"], "h": [None], "n_perm": [2, 6.0], "alpha": [0.0, 1.5, 1], "order": [5],
                  "num_eigs": [0]}),
]

EXEMPT = {
    "TokenizedGraph": "a torch_geometric Data container with no constructor logic of its own (built by tokenize)",
}
