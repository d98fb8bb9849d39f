"""Fuzz cases for the platonic-representation entry points (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.evaluation.platonic_representation import (
    best_over_layers,
    chance_mutual_knn,
    cka,
    clip_outliers,
    hsic,
    knn_indices,
    knn_overlap,
    make_world,
    mutual_knn,
    unbiased_cka,
)

_rng = np.random.default_rng(0)
A = _rng.standard_normal((30, 5))
B = A @ _rng.standard_normal((5, 4)) + 0.1 * _rng.standard_normal((30, 4))
K = A @ A.T
L = B @ B.T
NAN_A = A.copy()
NAN_A[0, 0] = np.nan
BAD_FEATS = [NAN_A, A[:, 0], A[:1], np.zeros((30, 0)), "A", None, A.astype(complex), np.zeros((30, 2, 2))]
BAD_K = [0, -1, 30, 2.5, "10", None, True]
KNN_A = knn_indices(A, 5)
KNN_B = knn_indices(B, 5)

FUZZ_CASES = [
    dict(fn=mutual_knn, args=(A, B), kwargs={"k": 5},
         invalid={"A": BAD_FEATS, "B": BAD_FEATS + [B[:10]], "k": BAD_K, "outlier_q": [0.0, 1.5, float("nan"), "q"],
                  "normalize": ["yes", None, 2], "chunk_size": [0, -4, 2.5, "8", True]}),
    dict(fn=knn_indices, args=(A, 5),
         invalid={"feats": BAD_FEATS, "k": BAD_K, "normalize": ["yes", None], "chunk_size": [0, 2.5, "8", None]}),
    dict(fn=knn_overlap, args=(KNN_A, KNN_B),
         invalid={"knn_a": [KNN_A[:, :3], KNN_A.float(), "a", None, KNN_A.numpy()[:, :2]],
                  "knn_b": [KNN_B[:5], "b", None, torch.full_like(KNN_B, -1)]}),
    dict(fn=chance_mutual_knn, args=(30, 5), invalid={"n": [1, 0, 2.5, "30", None, True], "k": BAD_K}),
    dict(fn=clip_outliers, args=(A,), kwargs={"q": 0.9}, invalid={"feats": BAD_FEATS, "q": [0.0, -0.1, 1.5, float("nan"), "q", None]}),
    dict(fn=hsic, args=(K, L), invalid={"K": [K[:5], K[:, :5], NAN_A, "K", None], "L": [L[:5], "L", None],
                                         "unbiased": ["yes", None, 2]}),
    dict(fn=cka, args=(A, B),
         invalid={"A": BAD_FEATS, "B": BAD_FEATS + [B[:10]], "kernel": ["poly", None], "sigma": [0.0, -1.0, float("nan"), "wide", None],
                  "unbiased": ["yes", None]}),
    dict(fn=unbiased_cka, args=(A, B),
         invalid={"A": BAD_FEATS, "B": BAD_FEATS, "kernel": ["poly", None], "sigma": [0.0, float("inf"), "wide"]}),
    dict(fn=best_over_layers, args=([A, A], [B]), kwargs={"k": 5},
         invalid={"layers_a": [[], [A, B[:10]], [NAN_A], "A", None, A], "layers_b": [[], [B[:10]], None],
                  "metric": ["cca", None], "k": BAD_K, "outlier_q": [0.0, 1.5, "q"], "kernel": ["poly"],
                  "sigma": [0.0, "wide"]}),
    dict(fn=make_world, args=(16,),
         invalid={"n": [0, -1, 2.5, "16", None, True], "image_size": [10, 13, 24.0, "24", None],
                  "noise": [-0.1, float("nan"), "n", None], "caption_drop": [-0.1, 1.5, float("nan"), "d", None],
                  "seed": [-1, 1.5, "s", None]}),
]

EXEMPT = {
    "LayerAlignment": "a frozen result container returned by best_over_layers",
    "World": "a frozen result container returned by make_world",
}
