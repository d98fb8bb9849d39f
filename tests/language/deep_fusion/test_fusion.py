"""The fusion operator: what the fused network computes at fusion time, and how it trains right after.

Closed forms: F(x) = w_f f(x) + w_g g(x) for random MLP and transformer parents (float64), the Jacobian
halving, self-fusion's symmetry, Net2WiderNet's function preservation, and hand-counted FLOPs.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

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
from icml24.language.transformer import GroupedNorm


def _mlp(sizes, activation="relu", seed=0) -> DeepMLP:
    torch.manual_seed(seed)
    m = DeepMLP(sizes, activation=activation).double()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.7)  # far from the tiny default init: every unit matters
    return m


def _x(n=17, d=6, seed=123):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("activation", ["relu", "gelu", "tanh"])
@pytest.mark.parametrize("hidden_f,hidden_g", [((5,), (3,)), ((5, 4), (3, 7)), ((4, 4, 4), (2, 6, 5))])
def test_fused_mlp_is_the_average_of_its_parents(activation, hidden_f, hidden_g):
    f = _mlp((6, *hidden_f, 3), activation, seed=1)
    g = _mlp((6, *hidden_g, 3), activation, seed=2)
    fused = fuse_mlps(f, g)
    x = _x()
    torch.testing.assert_close(fused(x), 0.5 * (f(x) + g(x)), rtol=0, atol=1e-12)
    assert fused.sizes == (6, *(a + b for a, b in zip(hidden_f, hidden_g, strict=True)), 3)


def test_fusion_weights_and_a_linear_model():
    f, g = _mlp((6, 5, 4, 3), seed=1), _mlp((6, 2, 8, 3), seed=2)
    x = _x()
    torch.testing.assert_close(fuse_mlps(f, g, weights=(1.0, 1.0))(x), f(x) + g(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(fuse_mlps(f, g, weights=(0.2, 0.8))(x), 0.2 * f(x) + 0.8 * g(x), rtol=0, atol=1e-12)
    lf, lg = _mlp((6, 3), seed=3), _mlp((6, 3), seed=4)  # no hidden layer: the fused model is the average model
    torch.testing.assert_close(fuse_mlps(lf, lg)(x), 0.5 * (lf(x) + lg(x)), rtol=0, atol=1e-12)


def test_self_fusion_is_the_identity_and_a_zero_parent_halves():
    f = _mlp((6, 5, 4, 3), "tanh", seed=1)
    x = _x()
    torch.testing.assert_close(self_fuse(f)(x), f(x), rtol=0, atol=1e-12)
    zero = _mlp((6, 2, 3, 3), "tanh", seed=2)
    with torch.no_grad():
        for p in zero.parameters():
            p.zero_()
    torch.testing.assert_close(fuse_mlps(f, zero)(x), 0.5 * f(x), rtol=0, atol=1e-12)


def test_fusion_is_symmetric_up_to_a_permutation_of_hidden_units():
    f, g = _mlp((6, 5, 4, 3), seed=1), _mlp((6, 3, 2, 3), seed=2)
    x = _x()
    torch.testing.assert_close(fuse_mlps(f, g)(x), fuse_mlps(g, f)(x), rtol=0, atol=1e-12)


def test_parameter_count_is_the_parents_plus_the_cross_blocks():
    f, g = _mlp((6, 5, 4, 3), seed=1), _mlp((6, 3, 2, 3), seed=2)
    fused = fuse_mlps(f, g)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    cross = 4 * 3 + 2 * 5  # the two off-diagonal blocks of the one hidden-to-hidden layer
    output_bias_shared = 3  # the output bias is one vector, not two
    assert n(fused) == n(f) + n(g) + cross - output_bias_shared
    c = fused.linears[1].weight
    assert torch.count_nonzero(c[:4, 5:]) == 0 and torch.count_nonzero(c[4:, :5]) == 0


def test_cross_noise_breaks_exactness_by_its_order_and_is_seeded():
    f, g = _mlp((6, 5, 4, 3), seed=1), _mlp((6, 3, 2, 3), seed=2)
    x = _x()
    a = fuse_mlps(f, g, cross_noise=1e-3, seed=0)
    b = fuse_mlps(f, g, cross_noise=1e-3, seed=0)
    gap = (a(x) - 0.5 * (f(x) + g(x))).abs().max()
    assert 0 < gap < 0.1
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)


def test_jacobian_of_each_half_is_half_the_parents_and_cross_blocks_get_gradients():
    f, g = _mlp((6, 5, 4, 3), "gelu", seed=1), _mlp((6, 3, 2, 3), "gelu", seed=2)
    fused = fuse_mlps(f, g)
    x = _x()
    v = torch.randn(17, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    (fused(x) * v).sum().backward()
    (f(x) * v).sum().backward()
    # f's first layer is the first 5 rows of the fused first layer; its middle layer the top-left block.
    torch.testing.assert_close(fused.linears[0].weight.grad[:5], 0.5 * f.linears[0].weight.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(fused.linears[1].weight.grad[:4, :5], 0.5 * f.linears[1].weight.grad,
                               rtol=0, atol=1e-12)  # fmt: skip
    # The output layer holds the 1/2 in its weights (W' = W_f / 2), so dF/dW' = h_f = df/dW_f: not halved.
    torch.testing.assert_close(fused.linears[2].weight.grad[:, :4], f.linears[2].weight.grad, rtol=0, atol=1e-12)
    assert fused.linears[1].weight.grad[:4, 5:].abs().max() > 1e-6  # the zero cross blocks do train


def test_self_fusion_gradient_is_half_the_parents_under_any_loss():
    f = _mlp((6, 5, 4, 3), seed=1)
    fused = self_fuse(f)
    x, y = _x(), torch.tensor([0, 1, 2] * 5 + [0, 1])
    nn.functional.cross_entropy(fused(x), y).backward()
    nn.functional.cross_entropy(f(x), y).backward()
    for lf, lF in zip(f.linears[:-1], fused.linears[:-1], strict=True):  # hidden layers (the output is not halved)
        rows = lf.weight.shape[0]
        cols = lf.weight.shape[1]
        torch.testing.assert_close(lF.weight.grad[:rows, :cols], 0.5 * lf.weight.grad, rtol=0, atol=1e-12)


@pytest.mark.parametrize("noise", [0.0, 1e-2])
def test_self_fusion_symmetry_persists_without_noise(noise):
    f = _mlp((6, 5, 4, 3), seed=1)
    fused = self_fuse(f, cross_noise=noise, seed=0)
    x, y = _x(), torch.tensor([0, 1, 2] * 5 + [0, 1])
    opt = torch.optim.SGD(fused.parameters(), lr=0.05)
    for _ in range(30):  # deterministic full-batch gradient descent
        opt.zero_grad()
        nn.functional.cross_entropy(fused(x), y).backward()
        opt.step()
    w0, w1 = fused.linears[0].weight, fused.linears[1].weight
    if noise == 0.0:
        torch.testing.assert_close(w0[:5], w0[5:], rtol=0, atol=1e-12)
        torch.testing.assert_close(w1[:4, :5], w1[4:, 5:], rtol=0, atol=1e-12)
        torch.testing.assert_close(w1[:4, 5:], w1[4:, :5], rtol=0, atol=1e-12)  # cross blocks equal too
    else:
        assert (w0[:5] - w0[5:]).abs().max() > 1e-4


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_net2wider_preserves_the_function(activation):
    f = _mlp((6, 5, 4, 3), activation, seed=1)
    wide = net2wider_mlp(f, (11, 9), seed=3)
    x = _x()
    torch.testing.assert_close(wide(x), f(x), rtol=0, atol=1e-12)
    assert wide.sizes == (6, 11, 9, 3)
    noisy = net2wider_mlp(f, (11, 9), noise=0.05, seed=3)
    assert (noisy(x) - f(x)).abs().max() > 1e-6


# ------------------------------------------------------------------------------------------ transformer
def _lm(seed=0, **kw) -> TransformerLM:
    cfg = dict(vocab_size=23, d_model=16, n_layers=2, n_heads=2, max_seq_len=12)
    cfg.update(kw)
    torch.manual_seed(seed)
    m = TransformerLM(TransformerConfig(**cfg)).double()
    with torch.no_grad():
        for name, p in m.named_parameters():
            # Random gains too (not all ones), so that a wrong norm layout would show.
            p.normal_(1.0 if "norm" in name and name.endswith("weight") else 0.0, 0.3)
    return m.eval()


def _ids(seed=5, vocab=23):
    return torch.randint(0, vocab, (3, 12), generator=torch.Generator().manual_seed(seed))


TRANSFORMER_VARIANTS = [
    {},  # Llama style: RMSNorm, SwiGLU, RoPE, no bias, tied embeddings
    {"norm": "layernorm", "mlp": "gelu", "bias": True, "positions": "learned", "tie_embeddings": False},
    {"n_heads": 4, "n_kv_heads": 2},  # grouped-query attention
    {"causal": False, "positions": "learned"},  # a bidirectional encoder
]


@pytest.mark.parametrize("variant", TRANSFORMER_VARIANTS)
def test_fused_transformer_logits_are_the_average_with_group_norm(variant):
    f, g = _lm(1, **variant), _lm(2, **variant)
    fused = fuse_transformers(f, g).eval()
    ids = _ids()
    torch.testing.assert_close(fused(ids), 0.5 * (f(ids) + g(ids)), rtol=0, atol=1e-10)
    c = fused.config
    assert (c.d_model, c.n_heads, c.ff_dim, c.norm_groups) == (32, 2 * f.config.n_heads, 2 * f.config.ff_dim, 2)
    assert c.head_dim == f.config.head_dim
    if c.tie_embeddings:
        assert fused.lm_head.weight is fused.embed_tokens.weight


def test_transformer_fusion_of_fused_models_and_weights():
    f, g = _lm(1), _lm(2)
    ff = fuse_transformers(fuse_transformers(f, g), self_fuse(f))  # a fusion graph: (f+g) + (f+f)
    ids = _ids()
    torch.testing.assert_close(ff(ids), 0.5 * (0.5 * (f(ids) + g(ids)) + f(ids)), rtol=0, atol=1e-10)
    assert ff.config.norm_groups == 4
    w = fuse_transformers(f, g, weights=(0.3, 0.7))
    torch.testing.assert_close(w(ids), 0.3 * f(ids) + 0.7 * g(ids), rtol=0, atol=1e-10)


def test_plain_norm_fusion_is_not_exact():
    f, g = _lm(1), _lm(2)
    ids = _ids()
    plain = fuse_transformers(f, g, exact_norm=False)
    assert plain.config.norm_groups == 1
    gap = (plain(ids) - 0.5 * (f(ids) + g(ids))).abs().max()
    assert gap > 1e-3  # documented: one RMSNorm over the fused stream rescales each half by the other's norm


def test_fused_transformer_jacobian_is_half_and_kv_cache_decoding_agrees():
    f, g = _lm(1), _lm(2)
    fused = fuse_transformers(f, g)
    ids = _ids()
    fused(ids).sum().backward()
    f(ids).sum().backward()
    q = fused.layers[0].self_attn.q_proj.weight.grad
    torch.testing.assert_close(q[:16, :16], 0.5 * f.layers[0].self_attn.q_proj.weight.grad, rtol=0, atol=1e-10)
    assert q[:16, 16:].abs().max() > 1e-8  # cross blocks receive gradient
    out = fused.generate(ids[:, :4], max_new_tokens=5, temperature=0.0)
    assert out.shape == (3, 9)


def test_fusion_rejects_mismatched_parents():
    with pytest.raises(ValueError, match="n_layers"):
        fuse_transformers(_lm(1), _lm(2, n_layers=1))
    with pytest.raises(ValueError, match="head dimension"):
        fuse_transformers(_lm(1), _lm(2, n_heads=4))
    with pytest.raises(ValueError, match="depth"):
        fuse_mlps(_mlp((6, 5, 3)), _mlp((6, 5, 5, 3)))


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_grouped_norm_with_one_group_is_the_torch_norm(kind):
    x = torch.randn(4, 5, 12, dtype=torch.float64)
    ours = GroupedNorm(12, 1, kind=kind, eps=1e-5, bias=True).double()
    ref = (nn.RMSNorm(12, eps=1e-5) if kind == "rmsnorm" else nn.LayerNorm(12, eps=1e-5)).double()
    with torch.no_grad():
        ours.weight.normal_()
        ref.weight.copy_(ours.weight)
        if kind == "layernorm":
            ours.bias.normal_()
            ref.bias.copy_(ours.bias)
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=1e-12)
    two = GroupedNorm(12, 2, kind=kind, eps=1e-5, bias=False).double()
    h = ref.__class__(6, eps=1e-5, **({"bias": False} if kind == "layernorm" else {})).double()
    torch.testing.assert_close(two(x), torch.cat([h(x[..., :6]), h(x[..., 6:])], -1), rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------------------ FLOPs
def test_flop_counts_by_hand():
    # 64-64-64-10: 64*64 + 64*64 + 64*10 = 8832 MACs per example, 6 FLOPs per MAC per training example.
    assert mlp_training_flops((64, 64, 64, 10), 100) == 6 * 8832 * 100
    c = TransformerConfig(vocab_size=50, d_model=8, n_layers=1, n_heads=2, d_ff=16, mlp="gelu")
    # q,k,v,o: 4*8*8; up, down: 2*8*16; lm_head: 8*50; context: 2*1*T*8 with T = 4.
    per_token = 4 * 64 + 2 * 128 + 400 + 2 * 4 * 8
    assert transformer_training_flops(c, 10, 4) == 6 * per_token * 10
    r = FusionFlops(parents=(3, 5), fused=10)
    assert (r.total, r.critical_path) == (18, 15)
    assert FusionFlops(parents=(), fused=7).total == 7
