"""Generated graph sets for the expressivity and counting experiments (no downloads).

* CSL (Murphy et al., 2019): circulant graphs ``C_41(1, k)`` for ten skip lengths, all 4-regular and
  therefore indistinguishable by 1-WL; the class is the skip length.
* A BREC-like set (Wang & Zhang, 2023) of non-isomorphic, 1-WL-equivalent pairs built in code: unions of
  cycles against one cycle, random regular pairs, CSL pairs, and the strongly regular pair Shrikhande vs
  the 4x4 rook's graph (both SRG(16, 6, 2, 2), which also 3-WL cannot separate).
* Substructure counting on Erdős–Rényi graphs: triangle and 4-cycle counts as regression targets.
"""

from __future__ import annotations

import itertools
import warnings

import networkx as nx
import numpy as np

CSL_SKIPS = (2, 3, 4, 5, 6, 9, 11, 12, 13, 16)
"""The ten skip lengths of the CSL benchmark (pairwise non-isomorphic circulants on 41 nodes)."""


def _rng(seed: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    return np.random.default_rng(int(seed))


def _pos_int(name: str, value: int, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _check_nx(graph: nx.Graph, name: str = "graph") -> nx.Graph:
    if not isinstance(graph, nx.Graph) or graph.is_directed() or graph.is_multigraph():
        raise TypeError(f"{name} must be an undirected simple networkx.Graph, got {type(graph).__name__}")
    return graph


def relabel_randomly(graph: nx.Graph, rng: np.random.Generator) -> nx.Graph:
    """The graph with its nodes renamed by a uniformly random permutation of 0..n-1 (nodes inserted in
    the new order, so that node order carries no information)."""
    _check_nx(graph)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    nodes = list(graph.nodes)
    perm = rng.permutation(len(nodes))
    mapping = {v: int(perm[i]) for i, v in enumerate(nodes)}
    out = nx.Graph()
    out.add_nodes_from(range(len(nodes)))
    out.add_edges_from((mapping[u], mapping[v]) for u, v in graph.edges)
    return out


def csl_graph(num_nodes: int, skip: int) -> nx.Graph:
    """The circulant skip-link graph ``C_n(1, skip)``: a cycle plus chords ``i - (i + skip) mod n``."""
    num_nodes = _pos_int("num_nodes", num_nodes, 5)
    skip = _pos_int("skip", skip, 2)
    if skip >= num_nodes - 1:
        raise ValueError(f"skip must be < num_nodes - 1 = {num_nodes - 1}, got {skip}")
    return nx.circulant_graph(num_nodes, [1, skip])


def csl_dataset(
    per_class: int = 15, *, num_nodes: int = 41, skips: tuple[int, ...] = CSL_SKIPS, seed: int = 0
) -> tuple[list[nx.Graph], np.ndarray]:
    """CSL classification: ``per_class`` random relabellings of ``C_n(1, k)`` per skip ``k``.

    Returns ``(graphs, labels)`` with ``labels[i]`` the index of the graph's skip in ``skips``.
    """
    per_class = _pos_int("per_class", per_class)
    if len(skips) < 2 or len(set(skips)) != len(skips):
        raise ValueError(f"skips must hold at least two distinct skip lengths, got {skips!r}")
    rng = _rng(seed)
    graphs, labels = [], []
    for label, k in enumerate(skips):
        base = csl_graph(num_nodes, k)
        for _ in range(per_class):
            graphs.append(relabel_randomly(base, rng))
            labels.append(label)
    return graphs, np.array(labels)


def rook_graph() -> nx.Graph:
    """The 4x4 rook's graph ``K4 x K4``: SRG(16, 6, 2, 2)."""
    return nx.convert_node_labels_to_integers(nx.cartesian_product(nx.complete_graph(4), nx.complete_graph(4)))


def shrikhande_graph() -> nx.Graph:
    """The Shrikhande graph: the Cayley graph of Z4 x Z4 with connection set +-(1,0), +-(0,1), +-(1,1);
    SRG(16, 6, 2, 2) like the rook's graph but not isomorphic to it."""
    g = nx.Graph()
    nodes = list(itertools.product(range(4), range(4)))
    g.add_nodes_from(range(16))
    steps = [(1, 0), (3, 0), (0, 1), (0, 3), (1, 1), (3, 3)]
    for a, b in nodes:
        for da, db in steps:
            g.add_edge(4 * a + b, 4 * ((a + da) % 4) + (b + db) % 4)
    return g


def wl_hash(graph: nx.Graph, iterations: int = 5) -> str:
    """The 1-WL colour-refinement hash of networkx (equal hashes: 1-WL cannot tell the graphs apart)."""
    _check_nx(graph)
    iterations = _pos_int("iterations", iterations)
    with warnings.catch_warnings():  # networkx 3.5 changed unlabelled hashes and says so on every call
        warnings.simplefilter("ignore", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(graph, iterations=iterations)


def brec_like_pairs(seed: int = 0, *, regular_pairs: int = 10) -> list[dict]:
    """Non-isomorphic pairs of graphs that 1-WL cannot distinguish, in four groups.

    Each item is ``{"group", "name", "g", "h"}``. Groups: ``"cycles"`` (a union of two cycles against
    one cycle of the same size), ``"regular"`` (random 3- and 4-regular pairs on 10-16 nodes),
    ``"csl"`` (CSL graphs with different skips, 41 nodes) and ``"srg"`` (Shrikhande vs rook, which is
    3-WL-equivalent as well: the ceiling check of 3-WL-bounded models). Every pair is checked to be
    non-isomorphic and to have equal networkx WL hashes.
    """
    regular_pairs = _pos_int("regular_pairs", regular_pairs, 0)
    rng = _rng(seed)
    pairs: list[dict] = []
    for a, b in ((3, 3), (3, 4), (3, 5), (4, 4), (3, 6)):
        pairs.append({"group": "cycles", "name": f"C{a}+C{b} vs C{a + b}",
                      "g": nx.disjoint_union(nx.cycle_graph(a), nx.cycle_graph(b)), "h": nx.cycle_graph(a + b)})  # fmt: skip
    specs = [(d, n) for d, n in ((3, 10), (3, 12), (4, 10), (4, 12), (3, 14), (4, 14), (3, 16), (4, 16))]
    made = 0
    while made < regular_pairs:
        d, n = specs[made % len(specs)]
        g = nx.random_regular_graph(d, n, seed=int(rng.integers(2**31)))
        h = nx.random_regular_graph(d, n, seed=int(rng.integers(2**31)))
        if nx.is_connected(g) and nx.is_connected(h) and not nx.is_isomorphic(g, h):
            pairs.append({"group": "regular", "name": f"{d}-regular n={n} #{made}", "g": g, "h": h})
            made += 1
    for k1, k2 in ((2, 3), (4, 5), (6, 9), (11, 12), (13, 16)):
        pairs.append({"group": "csl", "name": f"CSL skip {k1} vs {k2}", "g": csl_graph(41, k1), "h": csl_graph(41, k2)})
    pairs.append({"group": "srg", "name": "Shrikhande vs 4x4 rook", "g": shrikhande_graph(), "h": rook_graph()})
    for p in pairs:
        assert wl_hash(p["g"]) == wl_hash(p["h"]), p["name"]
    return pairs


def triangle_count(graph: nx.Graph) -> int:
    """Number of triangles, ``tr(A^3) / 6``."""
    _check_nx(graph)
    return int(sum(nx.triangles(graph).values()) // 3)


def four_cycle_count(graph: nx.Graph) -> int:
    """Number of (not necessarily induced) 4-cycles, ``(tr(A^4) - 2 sum_i d_i^2 + 2|E|) / 8``: closed
    4-walks minus the back-and-forth walks on one or two edges, each 4-cycle walked 8 ways."""
    _check_nx(graph)
    adj = nx.to_numpy_array(graph, dtype=np.int64)
    a2 = adj @ adj
    deg = adj.sum(1)
    closed = int(np.trace(a2 @ a2))
    return (closed - 2 * int((deg**2).sum()) + 2 * int(adj.sum() // 2)) // 8


def counting_dataset(
    num_graphs: int, *, seed: int = 0, n_range: tuple[int, int] = (10, 20), p_range: tuple[float, float] = (0.2, 0.4)
) -> tuple[list[nx.Graph], np.ndarray]:
    """Erdős–Rényi graphs ``G(n, p)`` with ``n`` and ``p`` uniform in the ranges; targets ``(triangles,
    4-cycles)`` per graph, shape ``(num_graphs, 2)``."""
    num_graphs = _pos_int("num_graphs", num_graphs)
    if not isinstance(n_range, tuple) or len(n_range) != 2:
        raise ValueError(f"n_range must be two ints 2 <= low <= high, got {n_range!r}")
    lo, hi = n_range
    if not (isinstance(lo, int) and isinstance(hi, int) and 2 <= lo <= hi):  # noqa: SIM102
        raise ValueError(f"n_range must be two ints 2 <= low <= high, got {n_range!r}")
    if len(p_range) != 2 or not all(isinstance(p, (int, float)) for p in p_range) or not (0 < p_range[0] <= p_range[1] <= 1):
        raise ValueError(f"p_range must satisfy 0 < low <= high <= 1, got {p_range!r}")
    rng = _rng(seed)
    graphs, targets = [], []
    for _ in range(num_graphs):
        n = int(rng.integers(lo, hi + 1))
        p = float(rng.uniform(*p_range))
        g = nx.gnp_random_graph(n, p, seed=int(rng.integers(2**31)))
        graphs.append(g)
        targets.append((triangle_count(g), four_cycle_count(g)))
    return graphs, np.array(targets, dtype=np.float64)
