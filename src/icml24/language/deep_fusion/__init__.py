"""Deep Fusion: Efficient Network Training via Pre-trained Initializations (Mazzawi, Gonzalvo, Wunder,
Jerome, Dherin; ICML 2024).

https://proceedings.mlr.press/v235/mazzawi24a.html · arXiv:2306.11903 · no official code.
Train small networks, fuse them into one wider network that computes their average at fusion time (the
cross connections between the parents start at zero and train), and train the fused network on; the
compute of the parents counts towards the fused model's training cost.
"""

from icml24.language.deep_fusion.flops import FusionFlops, mlp_training_flops, transformer_training_flops
from icml24.language.deep_fusion.fusion import (
    ACTIVATIONS,
    DeepMLP,
    fuse_mlps,
    fuse_transformers,
    net2wider_mlp,
    self_fuse,
)

SLUG = "deep-fusion"

__all__ = [
    "ACTIVATIONS",
    "SLUG",
    "DeepMLP",
    "FusionFlops",
    "fuse_mlps",
    "fuse_transformers",
    "mlp_training_flops",
    "net2wider_mlp",
    "self_fuse",
    "transformer_training_flops",
]
