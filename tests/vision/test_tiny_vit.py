"""The tiny ViT: shapes, the pluggable attention factory, softmax attention against a reference, bad input."""

from __future__ import annotations

import pytest
import torch

from icml24.vision.tiny_vit import SoftmaxAttention, TinyViT


def test_forward_shapes_and_tokens():
    model = TinyViT(image_size=8, patch_size=2, num_classes=5, dim=16, depth=2, num_heads=4, mlp_dim=32)
    x = torch.rand(3, 1, 8, 8)
    assert model(x).shape == (3, 5)
    assert model.tokens(x).shape == (3, 16, 16)
    assert TinyViT(patch_size=1, dim=8, num_heads=2).tokens(x).shape == (3, 64, 8)


def test_attention_factory_is_used_per_block():
    seen = []

    class Identity(torch.nn.Module):
        def forward(self, x):
            return torch.zeros_like(x)

    def factory(i):
        seen.append(i)
        return Identity() if i == 1 else SoftmaxAttention(dim=8, num_heads=2)

    model = TinyViT(dim=8, num_heads=2, depth=3, attention_factory=factory)
    assert seen == [0, 1, 2]
    assert isinstance(model.blocks[1].attn, Identity) and isinstance(model.blocks[0].attn, SoftmaxAttention)


def test_softmax_attention_matches_torch_sdpa():
    torch.manual_seed(0)
    attn = SoftmaxAttention(dim=8, num_heads=2).eval()
    x = torch.randn(2, 5, 8)
    q, k, v = attn.qkv(x).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 5, 8)
    torch.testing.assert_close(attn(x), attn.proj(ref), rtol=1e-5, atol=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="divide"):
        TinyViT(image_size=8, patch_size=3)
    with pytest.raises(ValueError, match="divisible"):
        SoftmaxAttention(dim=10, num_heads=3)
    with pytest.raises(ValueError, match="shape"):
        TinyViT()(torch.rand(2, 8, 8))
