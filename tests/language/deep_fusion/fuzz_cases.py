"""Fuzz cases for deep-fusion's exported callables (see tests/test_fuzz_api.py)."""

import torch

from icml24.language import TransformerConfig, TransformerLM
from icml24.language.deep_fusion import (
    DeepMLP,
    FusionFlops,
    fuse_mlps,
    fuse_transformers,
    mlp_training_flops,
    net2wider_mlp,
    self_fuse,
    transformer_training_flops,
)

torch.manual_seed(0)
MLP_F, MLP_G = DeepMLP((4, 3, 3, 2)), DeepMLP((4, 2, 2, 2))
LM_CONFIG = TransformerConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, max_seq_len=8)
LM_F, LM_G = TransformerLM(LM_CONFIG), TransformerLM(LM_CONFIG)

FUZZ_CASES = [
    dict(fn=DeepMLP, args=((4, 3, 2),), invalid={"sizes": [(4,), (4, 0, 2), "432", (4, 2.5, 2)],
                                                 "activation": ["sigmoid", 3]}),
    dict(fn=fuse_mlps, args=(MLP_F, MLP_G),
         invalid={"f": [LM_F, None], "g": [DeepMLP((4, 3, 2)), DeepMLP((4, 3, 3, 5)), "g"],
                  "weights": [(0.5,), (0.5, float("nan")), "ab"], "cross_noise": [-1.0, float("inf"), "x"],
                  "seed": [1.5]}),
    dict(fn=fuse_transformers, args=(LM_F, LM_G),
         invalid={"f": [MLP_F], "g": [TransformerLM(TransformerConfig(vocab_size=12, d_model=8, n_layers=1, n_heads=2))],
                  "weights": [(1.0, 2.0, 3.0)], "exact_norm": ["yes"], "cross_noise": [-0.1], "seed": ["0"]}),
    dict(fn=self_fuse, args=(MLP_F,), invalid={"model": [None, 3], "cross_noise": [-1.0], "seed": [0.5]}),
    dict(fn=net2wider_mlp, args=(MLP_F, (5, 4)),
         invalid={"f": [LM_F], "widths": [(5,), (2, 4), "54"], "noise": [-0.1, float("nan")], "seed": [1.5]}),
    dict(fn=mlp_training_flops, args=((4, 3, 2), 10), invalid={"sizes": [(4,), (0, 2)], "examples": [-1, 1.5]}),
    dict(fn=transformer_training_flops, args=(LM_CONFIG, 100, 8),
         invalid={"config": [None, {}], "tokens": [-5, 2.0], "seq_len": [0, 1.5]}),
    dict(fn=FusionFlops, args=((1, 2), 3), invalid={"parents": [[1, 2], (1, -2)], "fused": [-1, 2.5]}),
]

EXEMPT = {
    "ACTIVATIONS": "a constant mapping of activation functions",
    "SLUG": "a constant",
}
