"""Ollivier-Ricci and Forman curvature of graph edges, and the discrete Ricci flow.

Farzam, Tannenbaum, Sapiro. *From Geometry to Causality: Ricci Curvature and the Reliability of Causal Inference on
Networks*. ICML 2024, PMLR 235:13086-13108 (https://proceedings.mlr.press/v235/). The paper measures the geometry of
the treatment network with the Ollivier-Ricci curvature (ORC, Ollivier 2009) of its edges:

    m_x = alpha * delta_x + (1 - alpha) * sum_{z ~ x} p_xz delta_z,   p_xz ∝ base^(-w_xz^exp_power)
    kappa(x, y) = 1 - W_1(m_x, m_y) / w_xy

with ``W_1`` the earth mover's distance whose ground cost is the weighted shortest-path distance. On an unweighted
graph (every ``w = 1``) ``m_x`` is uniform over the neighbours; the weighting ``exp(-w^2)`` and the division by the
edge weight follow GraphRicciCurvature (Ni et al. 2019), the library the Ricci flow of the paper comes from, so that
both agree on weighted graphs too.

Vectorised: every edge's two neighbourhood measures and its (|N[x]| x |N[y]|) cost block are built for all edges at
once from CSR arrays, the distances come from one truncated Dijkstra sweep (scipy, a path between a neighbour of x
and a neighbour of y is never longer than ``w_ux + w_xy + w_yv``), and only the exact transport LP is solved edge by
edge, with POT's network simplex called directly. Graphs with ``n^2`` at most ``DENSE_DISTANCES_MAX`` keep the sweep in
a dense table (one gather per edge) and solve each LP on the difference of the two measures (common neighbours drop
out of one side; exact for a metric cost). GraphRicciCurvature builds each measure in Python, needs the all-pairs
distance matrix and goes through ``ot.emd2``'s checks and a process pool for every edge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

EPSILON = 1e-7
"""Edges lighter than this get curvature 0, as in GraphRicciCurvature (a zero-length edge has no transport ratio)."""

__all__ = [
    "RicciFlowResult",
    "as_edge_array",
    "forman_curvature",
    "node_curvature",
    "ollivier_ricci",
    "ricci_flow",
]


def _emd_solver():
    """POT's network simplex without ``ot.emd2``'s per-call checks (13x less overhead on small problems)."""
    try:
        from ot.lp.emd_wrap import emd_c

        def solve(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> float:
            return float(emd_c(a, b, cost, 100000, 1)[1])
    except ImportError:  # pragma: no cover - a POT without the private wrapper
        import ot

        def solve(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> float:
            return float(ot.emd2(a, b, cost))

    return solve


def as_edge_array(graph, num_nodes: int | None = None) -> tuple[np.ndarray, int]:
    """``(edges, num_nodes)``: an ``(E, 2)`` int array of undirected edges and the node count.

    ``graph`` is a networkx graph with nodes ``0..n-1``, or an ``(E, 2)`` / ``(2, E)`` integer array (a
    torch-geometric ``edge_index`` holding both directions is reduced to one row per undirected edge).
    """
    if hasattr(graph, "edges") and hasattr(graph, "number_of_nodes"):
        n = graph.number_of_nodes()
        if sorted(graph.nodes()) != list(range(n)):
            raise ValueError("graph: nodes must be the integers 0..n-1 (use networkx.convert_node_labels_to_integers)")
        if graph.is_directed():
            raise ValueError("graph: must be undirected")
        edges = np.asarray(list(graph.edges()), dtype=np.int64).reshape(-1, 2)
        if num_nodes is not None and num_nodes != n:
            raise ValueError(f"num_nodes: {num_nodes} differs from the graph's {n} nodes")
        num_nodes = n
    else:
        if hasattr(graph, "detach"):  # a torch tensor
            graph = graph.detach().cpu().numpy()
        arr = np.asarray(graph)
        if arr.dtype == object or arr.ndim != 2 or 2 not in arr.shape or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"graph: expected a networkx graph or an integer (E, 2) / (2, E) edge array, got {arr!r:.80}")
        edges = arr.T if arr.shape[0] == 2 and arr.shape[1] != 2 else arr
        edges = np.asarray(edges, dtype=np.int64)
        if edges.size and edges.min() < 0:
            raise ValueError("graph: node ids must be non-negative")
        if num_nodes is None:
            num_nodes = int(edges.max()) + 1 if edges.size else 0
        if arr.shape[0] == 2 and arr.shape[1] != 2:
            # A (2, E) edge_index, maybe with both directions: one row per undirected edge, sorted.
            lo, hi = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
            keys = np.unique(lo * max(num_nodes, 1) + hi)
            edges = np.stack([keys // max(num_nodes, 1), keys % max(num_nodes, 1)], axis=1)
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)) or num_nodes < 0:
        raise ValueError(f"num_nodes: expected a non-negative int, got {num_nodes!r}")
    num_nodes = int(num_nodes)
    if edges.size and edges.max() >= num_nodes:
        raise ValueError(f"graph: node id {int(edges.max())} out of range for num_nodes={num_nodes}")
    if edges.size and np.any(edges[:, 0] == edges[:, 1]):
        raise ValueError("graph: self-loops are not allowed")
    lo, hi = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    if np.unique(lo * max(num_nodes, 1) + hi).size != len(edges):
        raise ValueError("graph: duplicate edges")
    return edges, num_nodes


def float_array(name: str, value) -> np.ndarray:
    """``value`` as a float array, or a ``ValueError`` naming ``name``."""
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected an array of numbers, got {value!r:.60}") from None
    return arr


def _check_weights(weights, n_edges: int) -> np.ndarray:
    if weights is None:
        return np.ones(n_edges)
    w = float_array("weights", weights)
    if w.shape != (n_edges,):
        raise ValueError(f"weights: expected shape ({n_edges},), one per edge, got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights: must be finite and non-negative")
    return w.astype(float)


def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha: expected a number in [0, 1), got {alpha!r}")
    return float(alpha)


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive number, got {value!r}")
    return float(value)


def ollivier_ricci(
    graph,
    *,
    num_nodes: int | None = None,
    weights=None,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    base: float = math.e,
) -> np.ndarray:
    """Ollivier-Ricci curvature ``kappa(x, y) = 1 - W_1(m_x, m_y) / w_xy`` of every edge (module docstring).

    Args:
        graph: a networkx graph on nodes ``0..n-1`` or an integer edge array (see :func:`as_edge_array`).
        num_nodes: the node count when ``graph`` is an array with isolated trailing nodes.
        weights: one non-negative length per edge (in the order of :func:`as_edge_array`); ``None``: all 1.
        alpha: idleness, the mass ``m_x`` keeps at ``x`` (GraphRicciCurvature's default 0.5).
        exp_power, base: neighbour mass ``∝ base^(-w^exp_power)`` (uniform when all weights are equal).

    Returns:
        ``(E,)`` curvatures, in the edge order of :func:`as_edge_array` (``graph.edges()`` for networkx).
    """
    edges, n = as_edge_array(graph, num_nodes)
    w = _check_weights(weights, len(edges))
    alpha = _check_alpha(alpha)
    exp_power = _check_positive("exp_power", exp_power)
    base = _check_positive("base", base)
    if len(edges) == 0:
        return np.zeros(0)
    return _orc(edges, n, w, alpha, exp_power, base)


def _orc(edges: np.ndarray, n: int, w: np.ndarray, alpha: float, exp_power: float, base: float) -> np.ndarray:
    n_e = len(edges)
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    ww = np.concatenate([w, w])
    # Closed neighbourhoods in CSR order: node x's neighbours (sorted), then x itself.
    order = np.lexsort((dst, src))
    src, dst, ww = src[order], dst[order], ww[order]
    deg = np.bincount(src, minlength=n)
    raw = np.power(base, -np.power(ww, exp_power))
    tot = np.bincount(src, weights=raw, minlength=n)
    # A neighbour-mass sum that underflows falls back to uniform mass, as in GraphRicciCurvature.
    small = tot[src] <= EPSILON
    share = np.where(small, 1.0 / np.maximum(deg[src], 1), raw / np.where(small, 1.0, tot[src]))
    closed_ptr = np.concatenate([[0], np.cumsum(deg + 1)])
    pos_nbr = closed_ptr[src] + (np.arange(len(src)) - np.concatenate([[0], np.cumsum(deg)])[src])
    closed_idx = np.empty(closed_ptr[-1], dtype=np.int64)
    closed_mass = np.empty(closed_ptr[-1])
    closed_idx[pos_nbr] = dst
    closed_mass[pos_nbr] = (1.0 - alpha) * share
    closed_idx[closed_ptr[1:] - 1] = np.arange(n)
    closed_mass[closed_ptr[1:] - 1] = alpha
    # Isolated nodes keep all their mass (not reached: every edge endpoint has degree >= 1).

    x, y = edges[:, 0], edges[:, 1]
    limit = _distance_limit(edges, w, src, ww, n)
    solve = _emd_solver()
    kappa = np.zeros(n_e)
    if n * n <= DENSE_DISTANCES_MAX:
        # One truncated Dijkstra sweep from every node into a dense (n, n) table; each edge's cost block is then one
        # gather, and its LP is solved on the measures' difference (see _transport_on_difference).
        dist = _distance_table(src, dst, ww, n, limit)
        net = np.zeros(n)
        for e in range(n_e):
            if w[e] < EPSILON:
                continue  # GraphRicciCurvature: a zero-weight edge has curvature 0
            sx, sy = slice(closed_ptr[x[e]], closed_ptr[x[e] + 1]), slice(closed_ptr[y[e]], closed_ptr[y[e] + 1])
            ix, iy = closed_idx[sx], closed_idx[sy]
            if len(ix) * len(iy) <= SMALL_BLOCK:  # the difference's bookkeeping costs more than it saves
                cost = solve(closed_mass[sx], closed_mass[sy], dist[ix[:, None], iy])
            else:
                cost = _transport_on_difference(ix, closed_mass[sx], iy, closed_mass[sy], dist, net, solve)
            kappa[e] = 1.0 - cost / w[e]
        return kappa

    # All (edge, u in N[x], v in N[y]) triples, flattened edge by edge, row-major within an edge.
    r, c = deg[x] + 1, deg[y] + 1
    sizes = r * c
    off = np.concatenate([[0], np.cumsum(sizes)])
    e_of = np.repeat(np.arange(n_e), sizes)
    local = np.arange(off[-1]) - off[e_of]
    u = closed_idx[closed_ptr[x][e_of] + local // c[e_of]]
    v = closed_idx[closed_ptr[y][e_of] + local % c[e_of]]

    cost = _pair_distances(u, v, src, dst, ww, n, limit=limit)
    for e in range(n_e):
        if w[e] < EPSILON:
            continue  # GraphRicciCurvature: a zero-weight edge has curvature 0
        a = closed_mass[closed_ptr[x[e]] : closed_ptr[x[e] + 1]]
        b = closed_mass[closed_ptr[y[e]] : closed_ptr[y[e] + 1]]
        m = cost[off[e] : off[e + 1]].reshape(r[e], c[e])
        kappa[e] = 1.0 - solve(a, b, m) / w[e]
    return kappa


SMALL_BLOCK = 64
"""Cost blocks with at most this many cells (mean degree below about 7) are solved whole."""

DENSE_DISTANCES_MAX = 10_000_000
"""Graphs with ``n * n`` at most this (80 MB of float64) get a dense distance table; larger ones the per-pair sweep."""


def _sparse_lengths(src, dst, ww, n) -> sparse.csr_matrix:
    # scipy drops explicit zeros from a sparse graph, so a zero-length edge is stored as a tiny positive one.
    return sparse.csr_matrix((np.maximum(ww, 1e-300), (src, dst)), shape=(n, n))


def _distance_table(src, dst, ww, n, limit: float) -> np.ndarray:
    """``(n, n)`` shortest-path distances up to ``limit`` (``inf`` beyond: never needed)."""
    return csgraph.dijkstra(_sparse_lengths(src, dst, ww, n), directed=True, limit=limit)


def _transport_on_difference(ix, a, iy, b, dist, net, solve) -> float:
    """``W_1(a on ix, b on iy)`` for the shortest-path metric, solved on the measures' difference.

    For a metric cost the mass both measures put on a node can stay where it is at no cost, so ``W_1(a, b) =
    W_1((a - b)^+, (a - b)^-)`` (e.g. Villani, *Optimal Transport*, the Kantorovich-Rubinstein duality: the dual
    depends on ``a - b`` only). The common neighbours of ``x`` and ``y`` then sit on one side of the LP at most,
    so it is smaller (about a third of the cells on a random geometric graph of mean degree 20). ``net`` is an
    ``(n,)`` zero scratch array, left zero.
    """
    net[ix] = a
    net[iy] -= b
    pos = ix[net[ix] > 0]
    neg = iy[net[iy] < 0]
    mass_pos, mass_neg = net[pos], -net[neg]
    net[ix] = 0.0
    net[iy] = 0.0
    if len(pos) == 0 or len(neg) == 0:
        return 0.0  # equal measures
    return solve(mass_pos, mass_neg, dist[pos[:, None], neg])


def _distance_limit(edges, w, src, ww, n) -> float:
    """An upper bound on every needed distance: max over edges of (heaviest edge at x) + w_xy + (heaviest at y)."""
    heaviest = np.zeros(n)
    np.maximum.at(heaviest, src, ww)
    return float(np.max(heaviest[edges[:, 0]] + w + heaviest[edges[:, 1]])) * (1 + 1e-9) + 1e-12


def _pair_distances(u, v, src, dst, ww, n, limit: float, chunk: int = 512) -> np.ndarray:
    """Weighted shortest-path distances ``d(u_k, v_k)`` by a truncated Dijkstra from each distinct source."""
    graph = _sparse_lengths(src, dst, ww, n)
    out = np.empty(len(u))
    order = np.argsort(u, kind="stable")
    us = u[order]
    sources = np.unique(us)
    bounds = np.searchsorted(us, sources, side="left")
    bounds = np.append(bounds, len(us))
    for start in range(0, len(sources), chunk):
        block = sources[start : start + chunk]
        dist = csgraph.dijkstra(graph, directed=True, indices=block, limit=limit)
        lo, hi = bounds[start], bounds[min(start + chunk, len(sources))]
        rows = np.searchsorted(block, us[lo:hi])
        out[order[lo:hi]] = dist[rows, v[order[lo:hi]]]
    if not np.all(np.isfinite(out)):  # pragma: no cover - the limit bounds every needed distance
        raise RuntimeError("a needed distance exceeded the Dijkstra limit")
    return out


def node_curvature(graph, edge_curvature, *, num_nodes: int | None = None) -> np.ndarray:
    """Node curvature: the mean curvature of a node's incident edges (GraphRicciCurvature's definition); 0 for an
    isolated node."""
    edges, n = as_edge_array(graph, num_nodes)
    k = float_array("edge_curvature", edge_curvature)
    if k.shape != (len(edges),):
        raise ValueError(f"edge_curvature: expected shape ({len(edges)},), one per edge, got {k.shape}")
    if not np.all(np.isfinite(k)):
        raise ValueError("edge_curvature: must be finite")
    total = np.bincount(edges[:, 0], weights=k, minlength=n) + np.bincount(edges[:, 1], weights=k, minlength=n)
    deg = np.bincount(edges.ravel(), minlength=n)
    return np.where(deg > 0, total / np.maximum(deg, 1), 0.0)


def forman_curvature(graph, *, num_nodes: int | None = None, augmented: bool = False) -> np.ndarray:
    """Forman curvature of each edge of an unweighted graph: ``4 - deg x - deg y``, plus ``3 *`` (triangles on the
    edge) when ``augmented`` (Samal et al. 2018), the cheap proxy the notes compare ORC to."""
    if not isinstance(augmented, bool):
        raise TypeError(f"augmented: expected True or False, got {augmented!r}")
    edges, n = as_edge_array(graph, num_nodes)
    deg = np.bincount(edges.ravel(), minlength=n)
    out = 4.0 - deg[edges[:, 0]] - deg[edges[:, 1]]
    if augmented and len(edges):
        adj = sparse.csr_matrix((np.ones(2 * len(edges)), (np.r_[edges[:, 0], edges[:, 1]],
                                                           np.r_[edges[:, 1], edges[:, 0]])), shape=(n, n))  # fmt: skip
        common = np.asarray(adj[edges[:, 0]].multiply(adj[edges[:, 1]]).sum(axis=1)).ravel()
        out = out + 3.0 * common
    return out


@dataclass(frozen=True)
class RicciFlowResult:
    """The outcome of :func:`ricci_flow`.

    Attributes:
        weights: ``(E,)`` edge lengths after the flow (summing to the number of edges).
        curvature: ``(E,)`` Ollivier-Ricci curvature under the final weights.
        initial_curvature: ``(E,)`` curvature before the flow.
        iterations: flow steps taken (fewer than asked when the curvature spread fell below ``delta``).
    """

    weights: np.ndarray
    curvature: np.ndarray
    initial_curvature: np.ndarray
    iterations: int


def ricci_flow(
    graph,
    *,
    num_nodes: int | None = None,
    weights=None,
    iterations: int = 10,
    step: float = 1.0,
    delta: float = 1e-4,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    base: float = math.e,
) -> RicciFlowResult:
    """Discrete Ricci flow (Ni et al. 2019; the paper's Sec. on Ricci-flow preprocessing), GraphRicciCurvature's
    ``compute_ricci_flow`` without surgery:

        w_xy <- w_xy - step * kappa_xy * w_xy,   then  w <- w * E / sum(w),   then recompute kappa under w

    so positively curved (community) edges shrink and negatively curved (bridge) edges stretch. Stops early when
    ``max kappa - min kappa < delta``. Unlike GraphRicciCurvature it does not drop all but the largest connected
    component; the normalisation is then over all edges.
    """
    edges, n = as_edge_array(graph, num_nodes)
    w = _check_weights(weights, len(edges)).copy()
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise ValueError(f"iterations: expected a non-negative int, got {iterations!r}")
    step = _check_positive("step", step)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not delta >= 0:
        raise ValueError(f"delta: expected a non-negative number, got {delta!r}")
    alpha = _check_alpha(alpha)
    exp_power = _check_positive("exp_power", exp_power)
    base = _check_positive("base", base)
    if len(edges) == 0:
        return RicciFlowResult(w, np.zeros(0), np.zeros(0), 0)
    total = float(len(edges))
    kappa = _orc(edges, n, w, alpha, exp_power, base)
    initial = kappa.copy()
    done = 0
    for _ in range(int(iterations)):
        w = w - step * kappa * w
        w = np.maximum(w, 0.0)  # kappa <= 1 keeps w >= 0 at step <= 1; larger steps are clipped, not negated
        w = w * (total / w.sum())
        kappa = _orc(edges, n, w, alpha, exp_power, base)
        done += 1
        if kappa.max() - kappa.min() < delta:
            break
    return RicciFlowResult(w, kappa, initial, done)
