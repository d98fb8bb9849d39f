"""Aligning Transformers with Weisfeiler-Leman (Müller & Morris, ICML 2024) and the Edge Transformer.

https://arxiv.org/abs/2406.03148 · official code https://github.com/luis-mueller/wl-transformers;
Edge Transformer: *Towards Principled Graph Transformers* (Müller, Kusuma, Bonet & Morris, NeurIPS 2024,
https://arxiv.org/abs/2401.10119, code https://github.com/luis-mueller/towards-principled-gts).
A standard transformer on (k,1) tokens (node pairs for every node and edge; connected node triples) with
adjacency-identifying Laplacian positional encodings (LPE, SPE) is as expressive as the matching local
k-WL; the Edge Transformer's triangular attention over all node pairs reaches 3-WL without encodings.
GIN is the 1-WL-bounded baseline.
"""

from icml24.graphs.wl_transformers.datasets import (
    CSL_SKIPS,
    brec_like_pairs,
    counting_dataset,
    csl_dataset,
    csl_graph,
    four_cycle_count,
    relabel_randomly,
    rook_graph,
    shrikhande_graph,
    triangle_count,
    wl_hash,
)
from icml24.graphs.wl_transformers.expressivity import distinguishes, hotelling_paired_p
from icml24.graphs.wl_transformers.models import (
    GIN,
    MODEL_NAMES,
    EdgeTransformer,
    LaplacianPE,
    SignNetSPE,
    TriangularAttention,
    TupleGT,
    build_model,
)
from icml24.graphs.wl_transformers.tokens import (
    TokenizedGraph,
    connected_triples,
    laplacian_eigenpairs,
    pair_tokens,
    tokenize,
)
from icml24.graphs.wl_transformers.training import TrainConfig, fit, predict

SLUG = "wl-transformers"

__all__ = [
    "CSL_SKIPS",
    "GIN",
    "MODEL_NAMES",
    "SLUG",
    "EdgeTransformer",
    "LaplacianPE",
    "SignNetSPE",
    "TokenizedGraph",
    "TrainConfig",
    "TriangularAttention",
    "TupleGT",
    "brec_like_pairs",
    "build_model",
    "connected_triples",
    "counting_dataset",
    "csl_dataset",
    "csl_graph",
    "distinguishes",
    "fit",
    "four_cycle_count",
    "hotelling_paired_p",
    "laplacian_eigenpairs",
    "pair_tokens",
    "predict",
    "relabel_randomly",
    "rook_graph",
    "shrikhande_graph",
    "tokenize",
    "triangle_count",
    "wl_hash",
]
