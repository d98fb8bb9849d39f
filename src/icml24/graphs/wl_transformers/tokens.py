"""Tokens of the (k,1)-GT and the per-graph preprocessing (Müller & Morris, ICML 2024).

https://arxiv.org/abs/2406.03148; section numbers of the paper are not cited here (not checked against the PDF).

The (2,1)-GT sees a graph as the set of node pairs ``(v, v)`` and ``(u, v)`` for every node and every
directed edge: ``n + 2|E|`` tokens instead of the ``n^2`` of a full 2-tuple transformer. The (3,1)-GT sees
the ordered node triples whose node set induces a *connected* subgraph (the tuples of the (3,1)-LWL with
at most one connected component). Every node also carries the ``K`` smallest eigenpairs of the
normalised Laplacian ``I - D^{-1/2} A D^{-1/2}`` (NaN-padded when ``n < K``) and its degree; the
official preprocessing ``Transform`` in ``luis-mueller/wl-transformers`` stores the same four things.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data

ORDERS = (2, 3)


def _check_graph(graph: nx.Graph) -> nx.Graph:
    if not isinstance(graph, nx.Graph) or graph.is_directed() or graph.is_multigraph():
        raise TypeError(f"graph must be an undirected simple networkx.Graph, got {type(graph).__name__}")
    if graph.number_of_nodes() == 0:
        raise ValueError("graph must have at least one node")
    if nx.number_of_selfloops(graph) > 0:
        raise ValueError("graph must have no self-loops (the (v, v) tokens are added by the tokenizer)")
    return graph


def _relabelled(graph: nx.Graph) -> nx.Graph:
    """Nodes renamed 0..n-1 in the graph's own node order."""
    return nx.convert_node_labels_to_integers(graph, ordering="default")


def _check_order(order: int) -> int:
    if isinstance(order, bool) or order not in ORDERS:
        raise ValueError(f"order must be 2 or 3, got {order!r}")
    return int(order)


def _check_int(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def laplacian_eigenpairs(graph: nx.Graph, num_eigs: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``num_eigs`` smallest eigenpairs of the normalised Laplacian (the input of LPE and SPE).

    Returns ``(eigenvalues, eigenvectors)`` of shapes ``(num_eigs,)`` and ``(n, num_eigs)``; columns past
    ``n`` are NaN (padding the encoders ignore). Isolated nodes get degree 1 in ``D^{-1/2}`` so that the
    Laplacian stays defined (as the official ``clip(1)``).
    """
    graph = _check_graph(graph)
    num_eigs = _check_int("num_eigs", num_eigs, 1)
    adj = nx.to_numpy_array(graph, nodelist=list(graph.nodes), dtype=np.float64)
    n = adj.shape[0]
    d_inv_sqrt = 1.0 / np.sqrt(np.clip(adj.sum(1), 1.0, None))
    lap = np.eye(n) - d_inv_sqrt[:, None] * adj * d_inv_sqrt[None, :]
    vals, vecs = np.linalg.eigh(lap)
    vals = np.clip(vals, 0.0, None)
    k = min(n, num_eigs)
    out_vals = np.full(num_eigs, np.nan)
    out_vecs = np.full((n, num_eigs), np.nan)
    out_vals[:k], out_vecs[:, :k] = vals[:k], vecs[:, :k]
    return out_vals, out_vecs


def pair_tokens(graph: nx.Graph) -> tuple[np.ndarray, np.ndarray]:
    """The (2,1) tokens: ``(v, v)`` for every node, then ``(u, v)`` and ``(v, u)`` for every edge.

    Returns ``(token_index, is_edge)``: an int array ``(2, n + 2|E|)`` of node ids (nodes renamed
    0..n-1 in the graph's node order) and a bool array ``(n + 2|E|,)`` marking the real edges.
    """
    g = _relabelled(_check_graph(graph))
    n = g.number_of_nodes()
    edges = np.array(list(g.edges), dtype=np.int64).reshape(-1, 2)
    directed = np.concatenate([edges, edges[:, ::-1]]) if len(edges) else edges
    loops = np.stack([np.arange(n), np.arange(n)], 1)
    index = np.concatenate([loops, directed]).T
    is_edge = np.concatenate([np.zeros(n, bool), np.ones(len(directed), bool)])
    return index, is_edge


def connected_triples(graph: nx.Graph) -> np.ndarray:
    """The (3,1) tokens: ordered triples ``(a, b, c)`` whose node set ``{a, b, c}`` induces a connected
    subgraph (repeated nodes allowed), i.e. the 3-tuples with at most one component (the (3,1) tuples).

    Built from stars: a single node, an edge, or a path ``a - b - c`` through a centre ``b`` (a triangle
    is found three times and counted once). Returns an int array ``(3, T)`` sorted lexicographically.
    """
    g = _relabelled(_check_graph(graph))
    sets: set[tuple[int, ...]] = {(v,) for v in g.nodes}
    sets |= {tuple(sorted(e)) for e in g.edges}
    for b in g.nodes:
        for a, c in itertools.combinations(sorted(g.neighbors(b)), 2):
            sets.add(tuple(sorted((a, b, c))))
    triples: set[tuple[int, int, int]] = set()
    for s in sets:
        triples |= {t for t in itertools.product(s, repeat=3) if set(t) == set(s)}
    return np.array(sorted(triples), dtype=np.int64).reshape(-1, 3).T


def tuple_pair_is_edge(graph: nx.Graph, token_index: np.ndarray) -> np.ndarray:
    """For each token and each position pair ``(i, j), i < j``, whether the two nodes are adjacent.

    Shape ``(T, k (k - 1) / 2)``; the columns follow ``itertools.combinations(range(k), 2)``.
    """
    g = _relabelled(_check_graph(graph))
    adj = nx.to_numpy_array(g, nodelist=range(g.number_of_nodes()), dtype=bool)
    k = token_index.shape[0]
    return np.stack([adj[token_index[i], token_index[j]] for i, j in itertools.combinations(range(k), 2)], 1)


class TokenizedGraph(Data):
    """A PyG ``Data`` holding one graph's tokens, Laplacian eigenpairs and degrees.

    ``token_index`` (k, T) is shifted by ``num_nodes`` when batched (PyG does so for every ``*_index``
    attribute); ``eigvals`` is repeated per node (n, K) so that it batches along nodes like ``eigvecs``.
    """


def tokenize(
    graph: nx.Graph,
    *,
    order: int = 2,
    num_eigs: int = 16,
    y: float | int | Iterable[float] | None = None,
) -> TokenizedGraph:
    """One graph as a :class:`TokenizedGraph`: the inputs of every model in this package.

    Attributes: ``x`` (n,) node type 0 (the graphs here are unlabelled), ``edge_index`` (2, 2|E|),
    ``adj_n`` (scalar, n), ``degree`` (n,), ``eigvals``/``eigvecs`` (n, K), ``token_index`` (order, T),
    ``token_edges`` (T, order (order - 1) / 2) and ``y`` (1, ...) when given.
    """
    graph = _check_graph(graph)
    order = _check_order(order)
    num_eigs = _check_int("num_eigs", num_eigs, 1)
    g = _relabelled(graph)
    n = g.number_of_nodes()
    vals, vecs = laplacian_eigenpairs(g, num_eigs)
    if order == 2:
        index, _ = pair_tokens(g)
    else:
        index = connected_triples(g)
    edges = np.array(list(g.edges), dtype=np.int64).reshape(-1, 2)
    edge_index = np.concatenate([edges, edges[:, ::-1]]).T if len(edges) else np.zeros((2, 0), np.int64)
    data = TokenizedGraph(
        x=torch.zeros(n, dtype=torch.long),
        edge_index=torch.as_tensor(edge_index, dtype=torch.long),
        num_nodes=n,
        degree=torch.as_tensor([d for _, d in sorted(g.degree)], dtype=torch.long),
        eigvals=torch.as_tensor(np.tile(vals, (n, 1)), dtype=torch.float32),
        eigvecs=torch.as_tensor(vecs, dtype=torch.float32),
        token_index=torch.as_tensor(index, dtype=torch.long),
        token_edges=torch.as_tensor(tuple_pair_is_edge(g, index), dtype=torch.float32),
    )
    if y is not None:
        data.y = torch.as_tensor(np.atleast_1d(np.asarray(y, dtype=np.float64)), dtype=torch.float32).unsqueeze(0)
    return data
