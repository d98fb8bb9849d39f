"""PEG's invariants (notes section 7): mixtures, designed identity expansions, the head path against standard
multi-head attention, attention rows, parameter counts, the learngene mean identity, determinism."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.vision.peg_learngene import (
    DescendantSpec,
    ExpansionMap,
    LearngeneAttention,
    build_descendant,
    descendant_parameter_count,
    mix,
    mixture_matrix,
)
from icml24.vision.tiny_vit import SoftmaxAttention, TinyViT

HYP = settings(derandomize=True, max_examples=25, deadline=None)
DIM, HEADS, DEPTH, MLP = 16, 4, 4, 32


def _ancestry(seed: int = 0) -> TinyViT:
    torch.manual_seed(seed)
    return TinyViT(image_size=8, patch_size=2, num_classes=5, dim=DIM, depth=DEPTH, num_heads=HEADS, mlp_dim=MLP,
                   dropout=0.0).eval()  # fmt: skip


def _with_head(model: TinyViT, like: TinyViT) -> TinyViT:
    model.head.load_state_dict(like.head.state_dict())
    return model.eval()


IMAGES = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(5))


# ---------------------------------------------------------------------------------------------- 1. mixtures
@HYP
@given(n_out=st.integers(1, 6), n_in=st.integers(1, 8), seed=st.integers(0, 10_000))
def test_gaussian_mixture_is_row_stochastic(n_out, n_in, seed):
    p = mixture_matrix(n_out, n_in, generator=torch.Generator().manual_seed(seed))
    assert p.shape == (n_out, n_in)
    assert (p >= 0).all()
    torch.testing.assert_close(p.sum(1), torch.ones(n_out))


def test_uniform_mixture_averages_and_one_hot_selects():
    w = torch.randn(5, 3, 7)
    u = mix(w, mixture_matrix(2, 5, kind="uniform"), dim=0)
    torch.testing.assert_close(u, w.mean(0, keepdim=True).expand(2, 3, 7))
    first = mix(w, mixture_matrix(3, 5, kind="first"), dim=0)
    assert torch.equal(first, w[:3])
    # mixing along a middle axis, against a loop
    q = mixture_matrix(2, 3, generator=torch.Generator().manual_seed(1))
    out = mix(w, q, dim=1)
    ref = torch.stack([sum(q[i, j] * w[:, j] for j in range(3)) for i in range(2)], 1)
    torch.testing.assert_close(out, ref)


@HYP
@given(seed=st.integers(0, 10_000), n_out=st.integers(1, 4))
def test_learngene_mean_is_the_mixture_of_layer_means(seed, n_out):
    """Invariant 6: mean(W_g,i) = Σ_j P_ij mean(W_j) exactly; uniform mixture: the ancestry average."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(6, 8, 8, generator=g) + torch.arange(6.0)[:, None, None]
    p = mixture_matrix(n_out, 6, generator=g)
    out = mix(w, p, dim=0)
    torch.testing.assert_close(out.mean((1, 2)), p @ w.mean((1, 2)), atol=1e-5, rtol=1e-5)


def test_gaussian_mixture_shrinks_the_variance_of_independent_layers():
    """With independent layers of equal variance, Var(Σ_j P_ij W_j) = Σ_j P_ij² σ² < σ² (the paper's
    distribution argument); checked on 10 000 weights per layer, tolerance far above the sampling error."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 10_000, generator=g)
    p = mixture_matrix(3, 6, generator=g)
    out = mix(w, p, dim=0)
    expected = (p**2).sum(1)
    torch.testing.assert_close(out.var(1), expected, atol=0.03, rtol=0.05)
    assert (out.var(1) < 0.9).all()


# ---------------------------------------------------------------------------------------------- 2. expansion
@HYP
@given(n_in=st.integers(1, 5), n_out=st.integers(1, 9), copy_kind=st.sampled_from(["cyclic", "stretch"]))
def test_designed_map_is_an_exact_copy(n_in, n_out, copy_kind):
    """φ(x) = [S, −S]·ReLU([I; −I]·x) = S·x exactly; with n_in = n_out it is the identity."""
    phi = ExpansionMap(n_in=n_in, n_out=n_out, init="designed", copy=copy_kind)
    x = torch.randn(3, n_in, 4)
    out = phi(x, dim=1)
    for j in range(n_out):
        src = j % n_in if copy_kind == "cyclic" else min(n_in - 1, j * n_in // n_out)
        assert torch.equal(out[:, j], x[:, src])
    if n_in == n_out:
        assert torch.equal(out, x)


def test_random_map_has_the_code_widths_and_is_seeded():
    a = ExpansionMap(n_in=2, n_out=4, init="random", generator=torch.Generator().manual_seed(3))
    b = ExpansionMap(n_in=2, n_out=4, init="random", generator=torch.Generator().manual_seed(3))
    assert a.fc1.out_features == 4 and a.fc2.out_features == 4  # H_g -> H_d -> H_d, as transform_attn
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


# ---------------------------------------------------------------------------------------------- 3-4. attention
def _copy_softmax(att: LearngeneAttention, ref: SoftmaxAttention) -> None:
    with torch.no_grad():
        att.qkv_weight.copy_(ref.qkv.weight.reshape(3, ref.num_heads, ref.head_dim, -1))
        att.qkv_bias.copy_(ref.qkv.bias.reshape(3, ref.num_heads, ref.head_dim))
        att.proj.load_state_dict(ref.proj.state_dict())


@pytest.mark.parametrize("expand", [False, True])
def test_head_path_equals_standard_mha(expand):
    """Invariant 3: with H_g = H = H_d and identity maps, LearngeneAttention is standard MHA (1e-6), and both
    equal torch's scaled_dot_product_attention."""
    torch.manual_seed(0)
    ref = SoftmaxAttention(dim=DIM, num_heads=HEADS).eval()
    att = LearngeneAttention(dim=DIM, head_dim=DIM // HEADS, learngene_heads=HEADS, descendant_heads=HEADS,
                             expand=expand).eval()  # fmt: skip
    _copy_softmax(att, ref)
    x = torch.randn(2, 7, DIM)
    torch.testing.assert_close(att(x), ref(x), atol=1e-6, rtol=1e-6)
    q, k, v = ref.qkv(x).reshape(2, 7, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 7, DIM)
    torch.testing.assert_close(att(x), ref.proj(sdpa), atol=1e-6, rtol=1e-6)


@HYP
@given(hg=st.integers(1, 3), hd=st.integers(1, 6), seed=st.integers(0, 1000),
       init=st.sampled_from(["designed", "random"]))  # fmt: skip
def test_attention_rows_sum_to_one_and_tokens_permute(hg, hd, seed, init):
    """Invariant 4: softmax rows sum to 1; attention is equivariant to permuting tokens."""
    g = torch.Generator().manual_seed(seed)
    att = LearngeneAttention(dim=8, head_dim=4, learngene_heads=hg, descendant_heads=hd, map_init=init, generator=g)
    x = torch.randn(2, 5, 8, generator=g)
    out = att(x)
    assert out.shape == (2, 5, 8)
    rows = att.last_attention.sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))
    assert att.last_attention.shape == (2, hd, 5, 5)
    perm = torch.randperm(5, generator=g)
    torch.testing.assert_close(att(x[:, perm]), out[:, perm], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------- descendants
def test_one_hot_peg_with_identity_maps_is_the_ancestry():
    """Invariant 2: H_g = H = H_d, L_g = L = L_d, one-hot mixture and designed maps: PEG's descendant computes
    the ancestry's function (with the ancestry's classifier), as do 'direct' and 'ancestry'."""
    anc = _ancestry()
    spec = DescendantSpec(learngene_heads=HEADS, learngene_layers=DEPTH, descendant_heads=HEADS,
                          descendant_layers=DEPTH)  # fmt: skip
    ref = anc(IMAGES)
    for method, kind in (("peg", "first"), ("direct", None), ("ancestry", None)):
        d = _with_head(build_descendant(anc, spec, method, num_classes=5, mixture_kind=kind,
                                        generator=torch.Generator().manual_seed(1)), anc)  # fmt: skip
        torch.testing.assert_close(d(IMAGES), ref, atol=1e-6, rtol=1e-6, msg=method)


@pytest.mark.parametrize("method", ["peg", "direct"])
def test_copying_heads_and_layers_keeps_the_learngene_function(method):
    """Expanding H_g=2 → H_d=4 heads by the designed copy (with the output columns shared between the copies)
    computes the same function as the descendant with the learngene's 2 heads."""
    anc = _ancestry()
    small = DescendantSpec(learngene_heads=2, learngene_layers=2, descendant_heads=2, descendant_layers=4)
    wide = DescendantSpec(learngene_heads=2, learngene_layers=2, descendant_heads=4, descendant_layers=4)
    outs = [_with_head(build_descendant(anc, s, method, num_classes=5, generator=torch.Generator().manual_seed(2)),
                       anc)(IMAGES) for s in (small, wide)]  # fmt: skip
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)


def test_tleg_interpolates_between_the_anchor_layers():
    anc = _ancestry()
    spec = DescendantSpec(descendant_heads=HEADS, descendant_layers=3)
    d = build_descendant(anc, spec, "tleg", num_classes=5, generator=torch.Generator().manual_seed(0))
    w0, w1 = anc.blocks[0].mlp[0].weight, anc.blocks[-1].mlp[0].weight
    for i, t in enumerate((0.0, 0.5, 1.0)):
        torch.testing.assert_close(d.blocks[i].mlp[0].weight, w0 + t * (w1 - w0))


def test_released_behaviour_keeps_only_qkv_and_patch_embedding():
    anc = _ancestry()
    d = build_descendant(anc, DescendantSpec(), "peg_released", num_classes=5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(d.patch_embed.weight, anc.patch_embed.weight)
    first_heads = anc.blocks[0].attn.qkv.weight.reshape(3, HEADS, DIM // HEADS, DIM)[:, :2]
    assert torch.equal(d.blocks[0].attn.qkv_weight, first_heads)
    assert abs(float(d.blocks[0].attn.proj.weight.detach().std()) - 0.02) < 0.005
    assert torch.equal(d.blocks[0].norm1.weight, torch.ones(DIM))
    assert abs(float(d.blocks[0].mlp[0].weight.detach().std()) - 0.02) < 0.005


@pytest.mark.parametrize("spec", [DescendantSpec(), DescendantSpec(descendant_heads=6, descendant_layers=9),
                                  DescendantSpec(descendant_heads=2, descendant_layers=3)])  # fmt: skip
@pytest.mark.parametrize("method", ["peg", "peg_tied", "direct", "random", "tleg"])
def test_parameter_count_matches_the_formula(spec, method):
    """Invariant 5: parameter counts in closed form; the output projection takes H_d·d_h inputs."""
    anc = _ancestry()
    d = build_descendant(anc, spec, method, num_classes=5, generator=torch.Generator().manual_seed(0))
    n = sum(p.numel() for p in d.parameters())
    expected = descendant_parameter_count(dim=DIM, head_dim=DIM // HEADS, mlp_dim=MLP, patch_size=2, in_channels=1,
                                          num_tokens=16, num_classes=5, spec=spec, expanded=method.startswith("peg"),
                                          tied_ffn=method == "peg_tied")  # fmt: skip
    assert n == expected
    assert d.blocks[0].attn.proj.in_features == spec.descendant_heads * (DIM // HEADS)
    assert d(IMAGES).shape == (3, 5)


def test_same_seed_same_descendant_and_different_seed_different():
    """Invariant 7: a fixed seed gives identical P, Q and descendant."""
    anc = _ancestry()
    a, b, c = (build_descendant(anc, DescendantSpec(), "peg", num_classes=5, generator=torch.Generator().manual_seed(s))
               for s in (4, 4, 5))  # fmt: skip
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["blocks.0.attn.qkv_weight"], sc["blocks.0.attn.qkv_weight"])


def test_expansion_maps_and_learngene_are_trained():
    anc = _ancestry()
    d = build_descendant(anc, DescendantSpec(), "peg_tied", num_classes=5, generator=torch.Generator().manual_seed(0))
    d.train()
    d(IMAGES).sum().backward()
    assert d.ffn_learngene.depth_map.fc1.weight.grad is not None
    assert d.ffn_learngene.fc1_weight.grad.abs().sum() > 0
    assert d.blocks[0].attn.qk_map.fc2.weight.grad.abs().sum() > 0
    copy.deepcopy(d)(IMAGES)  # deep copies keep the shared FFN stack working


def test_bad_input_names_the_argument():
    anc = _ancestry()
    with pytest.raises(ValueError, match="learngene_heads"):
        build_descendant(anc, DescendantSpec(learngene_heads=5), "peg", num_classes=5)
    with pytest.raises(ValueError, match="method"):
        build_descendant(anc, DescendantSpec(), "bogus", num_classes=5)
    with pytest.raises(TypeError, match="ancestry"):
        build_descendant("anc", DescendantSpec(), "peg", num_classes=5)
    with pytest.raises(ValueError, match="n_out"):
        mixture_matrix(0, 3)
    with pytest.raises(ValueError, match="kind"):
        mixture_matrix(2, 3, kind="beta")
    with pytest.raises(ValueError, match="x"):
        ExpansionMap(n_in=2, n_out=3)(torch.zeros(3, 3))


def test_peg_unties_the_expanded_ffns_into_layers_of_their_own():
    """PEG writes φ_depth's outputs into independent per-layer FFNs once (the official TransMlp): it starts as the
    tied ablation's function, has an FFN of its own per layer, and each layer's FFN then trains on its own,
    so layers that started as copies of one learngene layer drift apart; the tied ablation keeps them tied."""
    anc = _ancestry()
    spec = DescendantSpec()  # 3 learngene layers -> 6: layers 0 and 1 start as copies of learngene layer 0
    untied, tied, direct = (build_descendant(anc, spec, m, num_classes=5, generator=torch.Generator().manual_seed(3))
                            for m in ("peg", "peg_tied", "direct"))  # fmt: skip
    torch.testing.assert_close(untied(IMAGES), tied(IMAGES), atol=1e-6, rtol=1e-6)
    assert not hasattr(untied, "ffn_learngene") and hasattr(tied, "ffn_learngene")
    n = [sum(p.numel() for p in m.parameters() if p.dim() > 0) for m in (untied, tied)]
    ffn = sum(p.numel() for p in untied.blocks[0].mlp.parameters())
    assert n[0] - n[1] == (spec.descendant_layers - spec.learngene_layers) * ffn - sum(
        p.numel() for p in tied.ffn_learngene.depth_map.parameters())
    torch.testing.assert_close(untied.blocks[0].mlp[0].weight, untied.blocks[1].mlp[0].weight)
    opt = torch.optim.SGD(untied.parameters(), lr=0.5)
    untied.train()
    torch.nn.functional.cross_entropy(untied(IMAGES), torch.tensor([0, 1, 2])).backward()
    g0, g1 = untied.blocks[0].mlp[0].weight.grad, untied.blocks[1].mlp[0].weight.grad
    assert g0 is not None and g1 is not None and not torch.allclose(g0, g1)
    opt.step()
    assert not torch.allclose(untied.blocks[0].mlp[0].weight, untied.blocks[1].mlp[0].weight)
    del direct


def test_every_method_gets_the_same_classifier_initialisation():
    """The classifier is drawn from its own generator (seeded by the caller's generator), so the peg* methods,
    whose attention consumes the global RNG differently, share it with random, direct and TLEG."""
    anc = _ancestry()
    heads = [build_descendant(anc, DescendantSpec(), m, num_classes=5, generator=torch.Generator().manual_seed(7)).head
             for m in ("random", "peg", "peg_tied", "peg_uniform", "direct", "tleg")]  # fmt: skip
    for h in heads[1:]:
        assert torch.equal(h.weight, heads[0].weight) and torch.equal(h.bias, heads[0].bias)
    other = build_descendant(anc, DescendantSpec(), "peg", num_classes=5, generator=torch.Generator().manual_seed(8))
    assert not torch.equal(other.head.weight, heads[0].weight)
    bound = 1 / DIM**0.5
    assert float(heads[0].weight.detach().abs().max()) <= bound


def test_the_tied_stack_is_mapped_once_per_forward_pass():
    """The depth map runs once per tensor per forward pass (4 calls), not once per layer (4 x L_d); the cached
    layers equal the freshly computed ones, a new pass after an update sees the new weights, and a deep copy
    clears its own cache."""
    anc = _ancestry()
    d = build_descendant(anc, DescendantSpec(), "peg_tied", num_classes=5, generator=torch.Generator().manual_seed(0))
    calls = []
    d.ffn_learngene.depth_map.fc1.register_forward_hook(lambda *_: calls.append(1))
    out = d(IMAGES)
    assert len(calls) == 4
    stack = d.ffn_learngene
    for i in range(DescendantSpec().descendant_layers):
        for a, b in zip(stack.cached_layer(i), stack.layer(i)):
            torch.testing.assert_close(a, b)
    with torch.no_grad():
        stack.fc2_weight.mul_(3.0)  # (a constant shift would vanish in the final LayerNorm)
    assert not torch.allclose(d(IMAGES), out)
    twin = copy.deepcopy(d)
    torch.testing.assert_close(twin(IMAGES), d(IMAGES))
    twin(IMAGES).sum().backward()  # the copy's pass builds its own graph
