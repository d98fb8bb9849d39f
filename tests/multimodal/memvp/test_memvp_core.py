"""MemVP's invariants (notes §7) against closed forms, brute force and the base model, for the project's
TransformerLM and a transformers LlamaForCausalLM; the input-space baseline's contract."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from icml24.language import KVCache, TransformerConfig, TransformerLM, to_hf_llama
from icml24.multimodal.memvp import (
    InputSpaceConfig,
    InputSpacePrompting,
    LMBackend,
    MemoryFFN,
    MemVP,
    MemVPConfig,
    memory_flops_per_token,
)
from icml24.multimodal.memvp.memory import _MemoryState
from icml24.vision.flops import count_flops

CFG = TransformerConfig(vocab_size=30, d_model=16, n_layers=2, n_heads=2, max_seq_len=64)
C = 6  # feature width


def _lm(seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(CFG).eval()


def _hf(seed: int = 0):
    return to_hf_llama(_lm(seed)).eval()


def _inputs(b: int = 3, t: int = 5, n: int = 4, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(5, CFG.vocab_size, (b, t), generator=g), torch.randn(b, n, C, generator=g)


def _memvp(lm, **kw) -> MemVP:
    torch.manual_seed(3)
    return MemVP(lm, config=MemVPConfig(feature_dim=C, num_slots=kw.pop("num_slots", 6), **kw)).eval()


BACKENDS = [pytest.param(_lm, id="TransformerLM"), pytest.param(_hf, id="LlamaForCausalLM")]


def _base_logits(make, ids):
    lm = make()
    with torch.no_grad():
        out = lm(ids)
    return out if isinstance(out, torch.Tensor) else out.logits


@pytest.mark.parametrize("make", BACKENDS)
def test_scale_zero_is_bit_exact_base(make) -> None:
    ids, feats = _inputs()
    model = _memvp(make(), scale=0.0)
    with torch.no_grad():
        nn.init.normal_(model.value_offset)
        assert torch.equal(model(ids, feats), _base_logits(make, ids))


@pytest.mark.parametrize("make", BACKENDS)
def test_no_image_and_zero_offset_is_base_but_an_image_is_not(make) -> None:
    ids, feats = _inputs()
    model = _memvp(make())
    base = _base_logits(make, ids)
    with torch.no_grad():
        assert torch.equal(model(ids, None), base)  # Z = 0 and E = 0: the branch reads zero values
        assert torch.equal(model(ids, feats, image_present=torch.zeros(3)), base)
        with_image = model(ids, feats)
    assert with_image.shape == base.shape  # the text length is unchanged
    assert not torch.allclose(with_image, base)  # values Z + E = Z are non-zero


def test_branch_is_silu_of_keys_times_z_with_zero_offset() -> None:
    """With E = 0 the branch of one FFN is s · SiLU(u (Z + P)ᵀ) Z (notes §7), computed here by hand."""
    model = _memvp(_lm())
    ids, feats = _inputs(b=2, n=4)
    with torch.no_grad():
        z = model.visual_prompts(feats, 2)
        assert torch.equal(z[:, 4:], torch.zeros(2, 2, CFG.d_model))  # padded slots
        torch.testing.assert_close(z[:, :4], 0.01 * model.projector(feats))
        u = torch.randn(2, 5, CFG.d_model)
        ffn = model.lm.layers[0].mlp
        with model.memory(feats, 2):
            got = ffn(u) - ffn.ffn(u)
        want = 0.1 * F.silu(u @ (z + model.position).transpose(1, 2)) @ z
    torch.testing.assert_close(got, want)


def test_padded_slots_contribute_zero_until_their_offset_is_learned() -> None:
    ids, feats = _inputs(n=4)
    exact = _memvp(_lm(), num_slots=4)
    padded = _memvp(_lm(), num_slots=7)
    with torch.no_grad():
        padded.position[:4] = exact.position
        padded.projector.load_state_dict(exact.projector.state_dict())
        torch.testing.assert_close(padded(ids, feats), exact(ids, feats), rtol=0, atol=1e-6)
        padded.value_offset[4:] = torch.randn(3, CFG.d_model)  # as after training: image-independent memory
        moved = padded(ids, feats) - exact(ids, feats)
    assert moved.abs().max() > 1e-4


def test_joint_slot_permutation_leaves_outputs_unchanged() -> None:
    ids, feats = _inputs(n=6)
    model = _memvp(_lm(), num_slots=6)
    with torch.no_grad():
        nn.init.normal_(model.value_offset, std=0.05)
        before = model(ids, feats)
        perm = torch.randperm(6, generator=torch.Generator().manual_seed(0))
        model.position.copy_(model.position[perm])
        model.value_offset.copy_(model.value_offset[perm])
        after = model(ids, feats[:, perm])  # Z's rows follow the patches
    torch.testing.assert_close(after, before, rtol=0, atol=1e-6)


class ReluFFN(nn.Module):
    """FFN(u) = ReLU(u W1ᵀ) W2ᵀ, the key-value memory of Geva et al. with keys W1 and values W2ᵀ."""

    def __init__(self, w1: torch.Tensor, w2: torch.Tensor) -> None:
        super().__init__()
        self.w1, self.w2 = w1, w2

    def forward(self, u):
        return F.relu(u @ self.w1.T) @ self.w2.T


def test_additive_branch_equals_concatenated_ffn_weights_for_relu() -> None:
    """For a ReLU FFN and ReLU branch, FFN(u) + s ReLU(u Kᵀ) V is the FFN whose keys are [W1; K] and whose
    values are [W2ᵀ; s V]: the paper's "concatenate visual prompts with the FFN weights" (§3)."""
    g = torch.Generator().manual_seed(0)
    d, hidden, m, s = 8, 12, 5, 0.1
    w1, w2 = torch.randn(hidden, d, generator=g), torch.randn(d, hidden, generator=g)
    keys, values = torch.randn(1, m, d, generator=g), torch.randn(1, m, d, generator=g)
    state = _MemoryState()
    state.keys, state.values = keys, values
    ffn = MemoryFFN(ReluFFN(w1, w2), state, scale=s, dropout=0.0, activation="relu")
    u = torch.randn(1, 7, d, generator=g)
    w1_cat = torch.cat([w1, keys[0]], dim=0)  # (hidden + m, d)
    w2_cat = torch.cat([w2, s * values[0].T], dim=1)  # (d, hidden + m)
    torch.testing.assert_close(ffn(u), ReluFFN(w1_cat, w2_cat)(u))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(b=st.integers(1, 3), t=st.integers(1, 5), m=st.integers(1, 6), d=st.integers(1, 6),
       s=st.floats(0.0, 2.0), seed=st.integers(0, 10_000))  # fmt: skip
def test_branch_matches_a_loop_over_slots(b, t, m, d, s, seed) -> None:
    g = torch.Generator().manual_seed(seed)
    keys, values = torch.randn(b, m, d, generator=g), torch.randn(b, m, d, generator=g)
    u = torch.randn(b, t, d, generator=g)
    state = _MemoryState()
    state.keys, state.values = keys, values
    ffn = MemoryFFN(nn.Identity(), state, scale=s, dropout=0.0)
    want = u.clone()
    for i in range(b):
        for j in range(m):
            want[i] += s * F.silu(u[i] @ keys[i, j])[:, None] * values[i, j][None, :]
    torch.testing.assert_close(ffn(u), want, rtol=1e-5, atol=1e-5)


def test_only_memory_parameters_train_and_the_lm_is_untouched() -> None:
    ids, feats = _inputs()
    model = _memvp(_lm()).train()
    frozen = {k: v.clone() for k, v in model.lm.state_dict().items()}
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"position", "value_offset", "projector.fc1.weight", "projector.fc1.bias",
                         "projector.fc2.weight", "projector.fc2.bias"}  # fmt: skip
    opt = torch.optim.AdamW(model.trainable_parameters(), lr=1e-2)
    for _ in range(3):
        loss = model(ids, feats).logsumexp(-1).mean()
        opt.zero_grad()
        loss.backward()
        for name, p in model.named_parameters():
            assert (p.grad is not None) == (name in trainable), name
        opt.step()
    for k, v in model.lm.state_dict().items():
        assert torch.equal(v, frozen[k]), k
    assert model.value_offset.abs().sum() > 0  # E moved off its zero initialisation


@pytest.mark.parametrize("make", BACKENDS)
def test_kv_cache_shapes_unchanged_and_generation_matches_uncached_argmax(make) -> None:
    ids, feats = _inputs(t=4)
    model = _memvp(make())
    with torch.no_grad():
        nn.init.normal_(model.value_offset, std=0.5)
    gen = model.generate(ids, feats, max_new_tokens=3)
    seq = ids
    for _ in range(3):  # no cache: recompute the whole sequence each step
        with torch.no_grad():
            nxt = model(seq, feats)[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], 1)
    assert torch.equal(gen, seq[:, 4:])
    back = LMBackend(model.lm)
    cache_m, cache_b = back.new_cache(), back.new_cache()
    with torch.no_grad():
        model(ids, feats, cache=cache_m)
        back(ids, None, cache_b)  # the memory is not set outside MemVP.forward: the base model
    assert LMBackend.cache_shapes(cache_m) == LMBackend.cache_shapes(cache_b)
    assert LMBackend.cache_shapes(cache_m)[0][2] == 4


def test_extra_flops_are_four_m_d_per_token_per_layer() -> None:
    b, t, n, m = 2, 5, 4, 9
    ids, feats = _inputs(b=b, t=t, n=n)
    model = _memvp(_lm(), num_slots=m)
    base = count_flops(_lm(), ids)
    projector = 2 * b * n * (C * 128 + 128 * CFG.d_model)
    extra = count_flops(model, ids, feats) - base - projector
    assert extra == CFG.n_layers * b * t * memory_flops_per_token(m, CFG.d_model) == CFG.n_layers * b * t * 4 * m * 16


def test_hf_and_icml24_backends_agree() -> None:
    ids, feats = _inputs()
    a, b = _memvp(_lm()), _memvp(_hf())
    with torch.no_grad():
        nn.init.normal_(a.value_offset, std=0.3)
        b.value_offset.copy_(a.value_offset)
        torch.testing.assert_close(b(ids, feats), a(ids, feats), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------ input space
@pytest.mark.parametrize("make", BACKENDS)
def test_input_space_prepends_n_tokens_and_starts_as_the_base_model(make) -> None:
    ids, feats = _inputs(n=4)
    torch.manual_seed(0)
    model = InputSpacePrompting(make(), config=InputSpaceConfig(feature_dim=C)).eval()
    with torch.no_grad():
        assert torch.equal(model(ids, None), _base_logits(make, ids))  # LoRA's B starts at zero
        out = model(ids, feats)
    assert out.shape == (3, 5, CFG.vocab_size)
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert names and all("lora_" in n or n.startswith("projector.") for n in names)
    assert any("lora_A" in n for n in names)
    cache = LMBackend(model.lm).new_cache()
    with torch.no_grad():
        model(ids, feats, cache=cache)
    assert LMBackend.cache_shapes(cache)[0][2] == 4 + 5  # the cache holds the visual tokens too
    gen = model.generate(ids, feats, max_new_tokens=3)
    seq = ids
    for _ in range(3):
        with torch.no_grad():
            seq = torch.cat([seq, model(seq, feats)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(gen, seq[:, 5:])


def test_input_space_prefix_matches_explicit_embedding_concatenation() -> None:
    from icml24.language.transformer import rope_cos_sin

    ids, feats = _inputs(n=3)
    torch.manual_seed(0)
    model = InputSpacePrompting(_lm(), config=InputSpaceConfig(feature_dim=C, lora_rank=0)).eval()
    lm = _lm()
    with torch.no_grad():
        x = torch.cat([model.projector(feats), lm.embed_tokens(ids)], 1)
        # the TransformerLM's forward on embeddings, written out (RoPE positions 0..n+T-1, causal mask)
        length = x.shape[1]
        rope = rope_cos_sin(torch.arange(length).expand(3, length), CFG.head_dim, CFG.rope_theta)
        mask = torch.ones(length, length, dtype=torch.bool).tril()[None, None]
        for layer in lm.layers:
            x = layer(x, mask, rope)
        want = lm.lm_head(lm.norm(x))[:, 3:]
        torch.testing.assert_close(model(ids, feats), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", BACKENDS)
def test_input_space_computes_the_lm_head_on_the_text_positions_only(make) -> None:
    """logits_to_keep: the n prefix positions' logits were computed and discarded; now the head runs on the T
    text positions only, the logits unchanged and the head's 2·B·n·d·V FLOPs saved."""
    b, t, n = 3, 5, 4
    ids, feats = _inputs(b=b, t=t, n=n)
    torch.manual_seed(0)
    model = InputSpacePrompting(make(), config=InputSpaceConfig(feature_dim=C)).eval()
    backend = model._backend
    with torch.no_grad():
        model._embed.pending = model.visual_tokens(feats, b)
        try:
            full = backend(torch.cat([ids.new_zeros(b, n), ids], 1), None, None)
        finally:
            model._embed.pending = None
        kept = model(ids, feats)
    torch.testing.assert_close(kept, full[:, n:], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        before = count_flops(lambda: full_forward(model, ids, feats, n))
    after = count_flops(model, ids, feats)
    assert before - after == 2 * b * n * CFG.d_model * CFG.vocab_size
    with pytest.raises(ValueError, match="logits_to_keep"):
        backend(ids, None, None, logits_to_keep=-1)


def full_forward(model, ids, feats, n):
    """The input-space forward as it was: the LM head on all n + T positions, the prefix's logits dropped."""
    b = ids.shape[0]
    model._embed.pending = model.visual_tokens(feats, b)
    try:
        return model._backend(torch.cat([ids.new_zeros(b, n), ids], 1), None, None)[:, n:]
    finally:
        model._embed.pending = None


def test_wrappers_reject_bad_inputs() -> None:
    model = _memvp(_lm())
    ids, feats = _inputs()
    with pytest.raises(ValueError, match="features"):
        model(ids, feats[:, :, :3])
    with pytest.raises(ValueError, match="num_slots"):
        model(ids, torch.randn(3, 7, C))
    with pytest.raises(TypeError, match="input_ids"):
        model(ids.float(), feats)
    with pytest.raises(TypeError, match="lm"):
        MemVP(nn.Linear(2, 2), config=MemVPConfig(feature_dim=C))
    with pytest.raises(TypeError, match="config"):
        InputSpacePrompting(_lm(), config=MemVPConfig())
    with pytest.raises(ValueError, match="scale"):
        MemVPConfig(scale=-1.0)


def test_memvp_deepcopy_keeps_one_shared_memory() -> None:
    model = _memvp(_lm())
    clone = copy.deepcopy(model)
    states = {id(layer.mlp._state) for layer in clone.lm.layers}
    assert states == {id(clone._state)} and id(clone._state) != id(model._state)
    ids, feats = _inputs()
    with torch.no_grad():
        torch.testing.assert_close(clone(ids, feats), model(ids, feats))


def test_kvcache_type_for_icml24() -> None:
    assert isinstance(LMBackend(_lm()).new_cache(), KVCache)
