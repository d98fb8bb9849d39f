"""Fuzz cases for the ricci-causal entry points (see tests/test_fuzz_api.py)."""

import networkx as nx
import numpy as np

from icml24.graphs.ricci_causal import (
    GCNEffectEstimator,
    NetworkedTreatmentData,
    RicciFlowResult,
    as_edge_array,
    ate_error,
    forman_curvature,
    node_curvature,
    ollivier_ricci,
    pehe,
    ricci_flow,
    simulate_networked_treatment,
    tercile_pehe,
)

GRAPH = nx.karate_club_graph()
EDGES = np.asarray(list(GRAPH.edges()))
KAPPA = np.zeros(len(EDGES))
BAD_GRAPHS = [np.array([[0, 0]]), np.array([[0, 1], [1, 0]]), np.array([[0.5, 1.0]]), np.array([[-1, 2]]), "g", None,
              nx.DiGraph([(0, 1)])]  # fmt: skip
DATA = simulate_networked_treatment(nx.path_graph(12), seed=0)
TAU = np.linspace(0.5, 1.5, 6)


def fit_estimator(x=DATA.x, t=DATA.t, y=DATA.y, graph=DATA.edges, edge_weight=None, train_mask=None, hidden=4,
                  epochs=2, lr=1e-2, weight_decay=0.0, skip=True, val_fraction=0.2, seed=0):  # fmt: skip
    """GCNEffectEstimator(hidden=..., ...).fit(x, t, y, graph, ...).predict_ite()."""
    est = GCNEffectEstimator(hidden=hidden, epochs=epochs, lr=lr, weight_decay=weight_decay, skip=skip,
                             val_fraction=val_fraction, seed=seed)  # fmt: skip
    return est.fit(x, t, y, graph, edge_weight=edge_weight, train_mask=train_mask).predict_ite()


FUZZ_CASES = [
    dict(fn=ollivier_ricci, args=(GRAPH,),
         invalid={"graph": BAD_GRAPHS, "num_nodes": [-1, 2.5, "3", 20], "weights": [np.ones(3), -KAPPA - 1, "w"],
                  "alpha": [-0.1, 1.0, "0.5", None], "exp_power": [0.0, -1.0, "2"], "base": [0.0, -1.0, None]}),
    dict(fn=as_edge_array, args=(EDGES,), invalid={"graph": BAD_GRAPHS, "num_nodes": [-1, 1.5, 3]}),
    dict(fn=node_curvature, args=(EDGES, KAPPA),
         invalid={"graph": BAD_GRAPHS, "edge_curvature": [KAPPA[:3], "k", None]}),
    dict(fn=forman_curvature, args=(EDGES,), invalid={"graph": BAD_GRAPHS, "augmented": ["yes", 1, None]}),
    dict(fn=ricci_flow, args=(GRAPH,), kwargs={"iterations": 1},
         invalid={"graph": BAD_GRAPHS, "iterations": [-1, 1.5, "2"], "step": [0.0, -1.0, "1"],
                  "delta": [-1.0, "0"], "alpha": [1.5, None], "weights": [np.ones(2)]}),
    dict(fn=simulate_networked_treatment, args=(nx.path_graph(5),),
         invalid={"graph": BAD_GRAPHS, "latent_dim": [0, 2.5], "covariate_dim": [0, "3"],
                  "kappa_self": [-1.0, "1"], "kappa_nbr": [-1.0, None], "noise_x": [-0.1], "noise_y": [-0.1, "n"],
                  "seed": [-1, 1.5, None]}),
    dict(fn=pehe, args=(TAU, TAU[::-1]), invalid={"tau_hat": [TAU[:2], np.ones((2, 3)), "t", None],
                                                  "tau": [TAU[:3], None]}),
    dict(fn=ate_error, args=(TAU, TAU[::-1]), invalid={"tau_hat": [TAU[:2], "t", None], "tau": [TAU[:3], None]}),
    dict(fn=tercile_pehe, args=(TAU, TAU, TAU[::-1]),
         invalid={"curvature": [TAU[:2], "k", None], "tau_hat": [TAU[:2], None], "tau": [TAU[:1]]}),
    dict(fn=fit_estimator, covers=("GCNEffectEstimator",),
         invalid={"x": [DATA.x[:3], DATA.x[:, 0], "x", None], "t": [DATA.t + 2, DATA.t[:3], None],
                  "y": [DATA.y[:3], "y", None], "graph": [np.array([[0, 20]]), None],
                  "edge_weight": [np.ones(2), -np.ones(11), "w"], "train_mask": [np.zeros(12, bool), np.ones(3, bool),
                                                                                   np.ones(12)],
                  "hidden": [0, 2.5, "4"], "epochs": [0, -1], "lr": [0.0, -1.0, "1"], "weight_decay": [-1.0, None],
                  "skip": ["yes", 1, None], "val_fraction": [1.0, -0.1, "0.2"],
                  "seed": [1.5, "0", None]}),
]

EXEMPT = {
    "NetworkedTreatmentData": "a frozen container that simulate_networked_treatment fills",
    "RicciFlowResult": "a frozen container that ricci_flow fills",
}
_ = (NetworkedTreatmentData, RicciFlowResult)
