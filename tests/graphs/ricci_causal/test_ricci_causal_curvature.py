"""Ollivier-Ricci curvature and Ricci flow: closed forms (notes Sec. 7), invariances, an LP oracle, and the
cross-check against GraphRicciCurvature (exact OT, ``method="OTD"``) on the same graphs."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linprog

from icml24.graphs.ricci_causal import forman_curvature, node_curvature, ollivier_ricci, ricci_flow


def _edge(graph, kappa, u, v):
    for (a, b), k in zip(graph.edges(), kappa):
        if {a, b} == {u, v}:
            return k
    raise KeyError((u, v))


@pytest.mark.parametrize("n", [3, 4, 5, 8])
@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_complete_graph_closed_form(n, alpha):
    kappa = ollivier_ricci(nx.complete_graph(n), alpha=alpha)
    np.testing.assert_allclose(kappa, 1 - abs(alpha - (1 - alpha) / (n - 1)), atol=1e-12)


def test_tree_star_path_cycle_grid_hypercube():
    tree = nx.balanced_tree(2, 4)  # internal nodes of degree 3 (the root has degree 2)
    k0 = ollivier_ricci(tree, alpha=0.0)
    assert _edge(tree, k0, 1, 3) == pytest.approx(-2 * (1 - 1 / 3 - 1 / 3))  # -2/3
    assert _edge(tree, ollivier_ricci(tree, alpha=0.5), 1, 3) == pytest.approx(-1 / 3)
    star = nx.star_graph(4)  # 5 nodes
    np.testing.assert_allclose(ollivier_ricci(star, alpha=0.0), 0.0, atol=1e-12)
    # alpha 0.5 by hand: m_centre = 1/2 at the centre + 1/8 per leaf, m_leaf = 1/2 + 1/2 at the centre; the three
    # other leaves' 3/8 travel 2 hops to the leaf, W1 = 3/4, kappa = 1/4 (the notes' 0.2 is a slip).
    np.testing.assert_allclose(ollivier_ricci(star, alpha=0.5), 0.25, atol=1e-12)
    path = nx.path_graph(6)
    for alpha in (0.0, 0.5):
        assert _edge(path, ollivier_ricci(path, alpha=alpha), 2, 3) == pytest.approx(0.0, abs=1e-12)
    for n, want in ((4, 0.5), (5, 0.25), (6, 0.0), (9, 0.0)):
        np.testing.assert_allclose(ollivier_ricci(nx.cycle_graph(n), alpha=0.5), want, atol=1e-12)
        if n >= 4:
            np.testing.assert_allclose(ollivier_ricci(nx.cycle_graph(n), alpha=0.0), 0.0, atol=1e-12)
    grid = nx.convert_node_labels_to_integers(nx.grid_2d_graph(5, 5), label_attribute="pos")
    pos = {v: d["pos"] for v, d in grid.nodes(data=True)}
    inner = next(i for i, (a, b) in enumerate(grid.edges()) if pos[a] == (2, 2) and pos[b] in ((2, 3), (3, 2)))
    for alpha in (0.0, 0.5):
        assert ollivier_ricci(grid, alpha=alpha)[inner] == pytest.approx(0.0, abs=1e-12)
    cube = nx.convert_node_labels_to_integers(nx.hypercube_graph(3))
    np.testing.assert_allclose(ollivier_ricci(cube, alpha=0.0), 0.0, atol=1e-12)
    np.testing.assert_allclose(ollivier_ricci(cube, alpha=0.5), 1 / 3, atol=1e-12)


def _lp_curvature(graph, alpha):
    """Naive oracle: the transport LP by scipy's HiGHS on the full node set with networkx distances."""
    dist = dict(nx.all_pairs_shortest_path_length(graph))
    nodes = list(graph.nodes())
    out = []
    for x, y in graph.edges():
        def measure(z):
            m = np.zeros(len(nodes))
            m[z] = alpha
            for nb in graph.neighbors(z):
                m[nb] += (1 - alpha) / graph.degree(z)
            return m

        a, b = measure(x), measure(y)
        cost = np.array([[dist[i][j] for j in nodes] for i in nodes], float)
        k = len(nodes)
        a_eq = np.vstack([np.kron(np.eye(k), np.ones(k)), np.kron(np.ones(k), np.eye(k))])
        res = linprog(cost.ravel(), A_eq=a_eq, b_eq=np.r_[a, b], bounds=(0, None), method="highs")
        out.append(1 - res.fun)
    return np.array(out)


def test_matches_lp_oracle_on_random_graphs():
    graphs = [g for g in (nx.gnp_random_graph(12, 0.3, seed=s) for s in range(10)) if nx.is_connected(g)][:3]
    assert len(graphs) == 3
    for g in graphs:
        for alpha in (0.0, 0.3, 0.5):
            np.testing.assert_allclose(ollivier_ricci(g, alpha=alpha), _lp_curvature(g, alpha), atol=1e-9)


@pytest.mark.parametrize("weighted", [False, True])
def test_dense_table_path_equals_the_per_pair_sweep(monkeypatch, weighted):
    """Small graphs take the dense distance table and the LP on the measures' difference; larger ones the per-pair
    Dijkstra sweep and the full LP. Both give the same curvature (zero-weight edges included)."""
    from icml24.graphs.ricci_causal import curvature

    g = nx.random_geometric_graph(120, 0.2, seed=4)
    rng = np.random.default_rng(1)
    w = rng.uniform(0.2, 2.0, g.number_of_edges()) if weighted else None
    if weighted:
        w[:3] = 0.0
    dense = ollivier_ricci(g, weights=w, alpha=0.3)
    monkeypatch.setattr(curvature, "DENSE_DISTANCES_MAX", 0)
    swept = ollivier_ricci(g, weights=w, alpha=0.3)
    assert 2 * g.number_of_edges() / 120 > 8  # dense enough that common neighbours cancel in the difference
    np.testing.assert_allclose(dense, swept, rtol=0, atol=1e-12)


def test_symmetry_bound_and_relabelling_invariance():
    g = nx.barabasi_albert_graph(60, 2, seed=3)
    kappa = ollivier_ricci(g)
    assert np.all(kappa <= 1 + 1e-12)
    flipped = ollivier_ricci(np.asarray([(v, u) for u, v in g.edges()]), num_nodes=60)
    np.testing.assert_allclose(flipped, kappa, atol=1e-12)
    perm = np.random.default_rng(0).permutation(60)
    relabelled = nx.relabel_nodes(g, {i: int(perm[i]) for i in range(60)})
    k2 = dict(zip((frozenset(e) for e in relabelled.edges()), ollivier_ricci(relabelled)))
    for (u, v), k in zip(g.edges(), kappa):
        assert k2[frozenset((int(perm[u]), int(perm[v])))] == pytest.approx(k, abs=1e-12)


def test_edge_index_with_both_directions_and_node_curvature():
    g = nx.karate_club_graph()
    ei = np.array(list(g.edges()) + [(v, u) for u, v in g.edges()]).T
    kappa = ollivier_ricci(g)
    k_ei = ollivier_ricci(ei)
    by_edge = dict(zip((frozenset(e) for e in g.edges()), kappa))
    lo_hi = sorted(tuple(sorted(e)) for e in g.edges())
    np.testing.assert_allclose(k_ei, [by_edge[frozenset(e)] for e in lo_hi], atol=1e-12)
    nodek = node_curvature(g, kappa)
    assert nodek[0] == pytest.approx(np.mean([by_edge[frozenset((0, v))] for v in g.neighbors(0)]))


def test_forman():
    g = nx.path_graph(4)
    np.testing.assert_allclose(forman_curvature(g), [1, 0, 1])
    for n in (3, 5, 7):
        np.testing.assert_allclose(forman_curvature(nx.complete_graph(n), augmented=True), n)


def _grc():
    return pytest.importorskip("GraphRicciCurvature.OllivierRicci")


def _unweighted(g):
    g = nx.Graph(g)
    for u, v in g.edges():
        g[u][v].pop("weight", None)
    return g


GRAPHS = {
    "karate": lambda: nx.karate_club_graph(),
    "sbm": lambda: nx.stochastic_block_model([25] * 4, [[0.3 if i == j else 0.01 for j in range(4)] for i in range(4)],
                                             seed=1),
    "ba": lambda: nx.barabasi_albert_graph(150, 2, seed=2),
    "regular": lambda: nx.random_regular_graph(6, 80, seed=3),
    "ws": lambda: nx.connected_watts_strogatz_graph(100, 6, 0.1, seed=4),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_agrees_with_graphriccicurvature(name, alpha):
    mod = _grc()
    g = _unweighted(GRAPHS[name]())
    orc = mod.OllivierRicci(g.copy(), alpha=alpha, method="OTD", proc=1, verbose="ERROR")
    orc.compute_ricci_curvature()
    ref = np.array([orc.G[u][v]["ricciCurvature"] for u, v in g.edges()])
    np.testing.assert_allclose(ollivier_ricci(g, alpha=alpha), ref, atol=1e-10)
    # Weighted: GraphRicciCurvature's exp(-w^2) masses and weighted shortest paths.
    w = np.random.default_rng(0).uniform(0.3, 2.0, g.number_of_edges())
    gw = g.copy()
    for (u, v), wi in zip(g.edges(), w):
        gw[u][v]["weight"] = float(wi)
    orc = mod.OllivierRicci(gw, alpha=alpha, method="OTD", proc=1, verbose="ERROR")
    orc.compute_ricci_curvature()
    ref = np.array([orc.G[u][v]["ricciCurvature"] for u, v in g.edges()])
    np.testing.assert_allclose(ollivier_ricci(g, weights=w, alpha=alpha), ref, atol=1e-10)


@pytest.mark.parametrize("name", ["karate", "sbm"])
def test_ricci_flow_agrees_with_graphriccicurvature(name):
    mod = _grc()
    g = _unweighted(GRAPHS[name]())
    if not nx.is_connected(g):
        g = nx.convert_node_labels_to_integers(g.subgraph(max(nx.connected_components(g), key=len)).copy())
    orc = mod.OllivierRicci(g.copy(), alpha=0.5, method="OTD", proc=1, verbose="ERROR")
    orc.compute_ricci_flow(iterations=4)
    ref_w = np.array([orc.G[u][v]["weight"] for u, v in g.edges()])
    ref_k = np.array([orc.G[u][v]["ricciCurvature"] for u, v in g.edges()])
    res = ricci_flow(g, iterations=4)
    np.testing.assert_allclose(res.weights, ref_w, atol=1e-9)
    np.testing.assert_allclose(res.curvature, ref_k, atol=1e-9)


@pytest.mark.parametrize("graph", [nx.complete_graph(6), nx.cycle_graph(9),
                                   nx.convert_node_labels_to_integers(nx.hypercube_graph(3))])
def test_flow_keeps_edge_transitive_graphs_uniform_and_total_weight(graph):
    res = ricci_flow(graph, iterations=5, delta=0.0)
    np.testing.assert_allclose(res.weights, 1.0, atol=1e-9)
    assert res.weights.sum() == pytest.approx(graph.number_of_edges())


def test_flow_stretches_the_barbell_bridge():
    g = nx.barbell_graph(6, 0)
    res = ricci_flow(g, iterations=5, delta=0.0)
    bridge = [i for i, (u, v) in enumerate(g.edges()) if {u, v} == {5, 6}][0]
    assert res.initial_curvature[bridge] < 0
    assert res.weights[bridge] > 2 * np.max(np.delete(res.weights, bridge))
    assert res.weights.sum() == pytest.approx(g.number_of_edges())


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="graph"):
        ollivier_ricci(np.array([[0, 0]]))
    with pytest.raises(ValueError, match="graph"):
        ollivier_ricci(np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="weights"):
        ollivier_ricci(nx.path_graph(3), weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="alpha"):
        ollivier_ricci(nx.path_graph(3), alpha=1.0)
    assert list(itertools.islice(ollivier_ricci(nx.empty_graph(3)), 1)) == []


@pytest.mark.parametrize("name", ["karate", "ba"])
def test_forman_agrees_with_graphriccicurvature_1d_and_augmented(name):
    mod = pytest.importorskip("GraphRicciCurvature.FormanRicci")
    g = _unweighted(GRAPHS[name]())
    for method, augmented in (("1d", False), ("augmented", True)):
        ref = mod.FormanRicci(g.copy(), method=method)
        ref.compute_ricci_curvature()
        want = np.array([ref.G[u][v]["formanCurvature"] for u, v in g.edges()])
        np.testing.assert_allclose(forman_curvature(g, augmented=augmented), want, atol=1e-12)
