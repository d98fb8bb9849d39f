"""The matmul FLOP counter against closed forms and torch.utils.flop_counter.FlopCounterMode."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from icml24.language import TransformerConfig, TransformerLM
from icml24.vision.flops import MatmulFlopCounter, count_flops
from icml24.vision.tiny_vit import TinyViT


def _reference(fn, *args) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as mode:
        fn(*args)
    return mode.get_total_flops()


def test_closed_forms():
    a, b = torch.randn(3, 4, 5), torch.randn(5, 6)
    assert count_flops(torch.matmul, a, b) == 2 * 3 * 4 * 5 * 6
    assert count_flops(lambda: a @ b) == 2 * 3 * 4 * 5 * 6
    lin = torch.nn.Linear(5, 7)
    assert count_flops(lin, a) == 2 * 12 * 5 * 7
    conv = torch.nn.Conv2d(3, 8, kernel_size=2, stride=2)
    x = torch.randn(2, 3, 8, 8)
    assert count_flops(conv, x) == 2 * (2 * 8 * 4 * 4) * (3 * 2 * 2)
    q = torch.randn(2, 4, 10, 8)
    k = torch.randn(2, 4, 12, 8)
    assert count_flops(F.scaled_dot_product_attention, q, k, k) == 2 * 8 * 10 * 12 * 16
    assert count_flops(torch.einsum, "bij,bjk->bik", torch.randn(2, 3, 4), torch.randn(2, 4, 5)) == 2 * 2 * 3 * 4 * 5
    assert count_flops(torch.relu, a) == 0


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(1, 6), k=st.integers(1, 6), m=st.integers(1, 6), batch=st.integers(1, 4))
def test_matmul_agrees_with_flop_counter_mode(n, k, m, batch):
    a, b = torch.randn(batch, n, k), torch.randn(batch, k, m)
    assert count_flops(torch.bmm, a, b) == _reference(torch.bmm, a, b) == 2 * batch * n * k * m
    lin = torch.nn.Linear(k, m)
    assert count_flops(lin, a) == _reference(lin, a)


def test_tiny_vit_forward_agrees_with_flop_counter_mode():
    model = TinyViT(image_size=16, patch_size=4, in_channels=3, dim=32, depth=2, num_heads=4, mlp_dim=64).eval()
    x = torch.randn(3, 3, 16, 16)
    ours = count_flops(model, x)
    assert ours == _reference(model, x)
    # closed form: patch conv + per block (qkv, attention, proj, MLP) + head
    b, t, d = 3, 16, 32
    per_block = 2 * b * t * d * 3 * d + 2 * 2 * b * t * t * d + 2 * b * t * d * d + 2 * 2 * b * t * d * 64
    assert ours == 2 * b * t * d * 3 * 16 + 2 * per_block + 2 * b * d * 10


def test_transformer_lm_forward_agrees_with_flop_counter_mode():
    model = TransformerLM(TransformerConfig(vocab_size=30, d_model=32, n_layers=2, n_heads=4, causal=False,
                                            positions="learned", max_seq_len=16)).eval()  # fmt: skip
    ids = torch.randint(0, 30, (2, 9))
    with torch.no_grad(), MatmulFlopCounter() as c:
        model(ids)
    # FlopCounterMode (this torch, CPU) does not see the attention kernel that F.scaled_dot_product_attention
    # dispatches to, so it misses QKᵀ and AV; everything else agrees, and those two are the closed form
    assert c.by_op["sdpa"] == 2 * (2 * 2 * 4 * 9 * 9 * (8 + 8))
    assert c.total - c.by_op["sdpa"] == _reference(model, ids)


def test_counter_accumulates_and_resets():
    lin = torch.nn.Linear(4, 4)
    with MatmulFlopCounter() as c:
        lin(torch.randn(1, 4))
        lin(torch.randn(1, 4))
    assert c.total == 2 * 2 * 16 and c.by_op["linear"] == c.total
    c.reset()
    assert c.total == 0
    with MatmulFlopCounter() as c:
        torch.einsum("i,j,k->ijk", torch.ones(2), torch.ones(2), torch.ones(2))
    assert c.uncounted and c.total == 0


def test_bad_fn():
    with pytest.raises(TypeError, match="fn"):
        count_flops(3)


def test_grouped_query_sdpa_counts_each_query_head():
    # 9 query heads share 3 key/value heads (SmolLM2-135M's layout): one L × S map per query head
    b, hq, hkv, L, S, E, Ev = 2, 9, 3, 5, 7, 8, 6
    q, k, v = torch.randn(b, hq, L, E), torch.randn(b, hkv, S, E), torch.randn(b, hkv, S, Ev)
    closed = 2 * b * hq * L * S * (E + Ev)
    sdpa = F.scaled_dot_product_attention
    assert count_flops(sdpa, q, k, v, enable_gqa=True) == closed
    assert count_flops(sdpa, q, k, v, None, 0.0, True, enable_gqa=True, scale=0.3) == closed  # mask/causal positional
    assert count_flops(sdpa, query=q, key=k, value=v, attn_mask=None, enable_gqa=True) == closed
    assert count_flops(sdpa, q, key=k, value=v, enable_gqa=True) == closed
    # the same products with k and v repeated to q's head count, as eager attention does
    assert count_flops(sdpa, q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1)) == closed
    # batch broadcasting (q's batch 1 against k's 3): one map per output row
    q1, k3 = torch.randn(1, 4, L, E), torch.randn(3, 4, S, E)
    assert count_flops(sdpa, q1, k3, k3) == 2 * 3 * 4 * L * S * (2 * E)


def test_grouped_query_heads_without_enable_gqa_raise_torchs_error():
    # mismatched head counts without enable_gqa are torch's error, raised unchanged (nothing counted)
    q, k = torch.randn(1, 9, 5, 8), torch.randn(1, 3, 7, 8)
    with MatmulFlopCounter() as c, pytest.raises(RuntimeError, match="size of tensor"):
        F.scaled_dot_product_attention(q, k, k)
    assert c.total == 0


@pytest.mark.parametrize("with_mask", [False, True])
def test_llama_gqa_sdpa_counts_as_eager(with_mask):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=40, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=32)  # fmt: skip
    torch.manual_seed(0)
    ids = torch.randint(0, 40, (2, 9))
    kwargs = {"attention_mask": torch.ones_like(ids)} if with_mask else {}
    totals = {}
    for impl in ("sdpa", "eager"):
        config._attn_implementation = impl
        model = transformers.LlamaForCausalLM(config).eval()
        with torch.no_grad(), MatmulFlopCounter() as c:
            model(ids, **kwargs)
        totals[impl] = c
    assert totals["sdpa"].by_op["sdpa"] > 0 and totals["eager"].by_op["sdpa"] == 0  # the two paths did differ
    assert totals["sdpa"].total == totals["eager"].total
    # per layer: QKᵀ and AV over 6 query heads of dim 8, L = S = 9
    assert totals["sdpa"].by_op["sdpa"] == 2 * (2 * 2 * 6 * 9 * 9 * (8 + 8))
