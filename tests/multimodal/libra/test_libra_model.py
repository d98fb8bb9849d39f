"""Invariants of Libra's decoupled vision system (the notes' section 7), each against the frozen base LM, a
closed form or a brute-force reference."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.language import IGNORE_INDEX, TransformerConfig, TransformerLM
from icml24.multimodal.libra import (
    LibraConfig,
    LibraLinear,
    LibraModel,
    LibraOutput,
    LLaVAStyleModel,
    build_caption_batch,
    libra_loss,
    route,
)

LM_CFG = TransformerConfig(vocab_size=23, d_model=16, n_layers=2, n_heads=2, max_seq_len=48)
CFG = LibraConfig(codebook_size=7, feature_dim=5, max_vision_tokens=6, bridge_rank=3)


def _lm(seed: int = 0, **kw) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(TransformerConfig(**{**LM_CFG.to_dict(), **kw})).eval()


def _perturb(model: torch.nn.Module, seed: int = 1, std: float = 0.3) -> None:
    """Give every trainable parameter (the vision system: experts, bridges, heads) a non-trivial value."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(std * torch.randn(p.shape, generator=g))


def _mixed_batch(b: int = 3, p: int = 4, text_len: int = 6, seed: int = 0, cfg: LibraConfig = CFG):
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, cfg.codebook_size, (b, p, cfg.n_codebooks), generator=g)
    feats = torch.rand(b, p, cfg.feature_dim, generator=g)
    text = torch.randint(5, LM_CFG.vocab_size, (b, text_len), generator=g)
    text[:, 0] = 1
    return build_caption_batch(codes, feats, text, boi_id=cfg.boi_id)


def _call(model, batch, **kw):
    return model(batch.input_ids, vision_flag=batch.vision_flag, vision_codes=batch.vision_codes,
                 vision_features=batch.vision_features, **kw)  # fmt: skip


# ------------------------------------------------------------------------------------------ routing
@pytest.mark.parametrize("use_bridge", [True, False])
def test_text_only_input_is_bit_identical_to_the_frozen_base_lm(use_bridge):
    lm = _lm()
    model = LibraModel(lm, config=LibraConfig(**{**CFG.to_dict(), "use_bridge": use_bridge}))
    _perturb(model)
    ids = torch.randint(0, LM_CFG.vocab_size, (4, 11), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = lm(ids)
        out = model(ids)
        out_flag = model(ids, vision_flag=torch.zeros_like(ids, dtype=torch.bool))
    assert torch.equal(out.text_logits, ref)
    assert torch.equal(out_flag.text_logits, ref)
    assert out.vision_logits is None


def test_llava_text_only_input_is_bit_identical_to_the_base_lm():
    lm = _lm()
    model = LLaVAStyleModel(lm, config=CFG, projector_hidden=8)
    ids = torch.randint(0, LM_CFG.vocab_size, (2, 9), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert torch.equal(model(ids).text_logits, lm(ids))


def test_bridge_zero_init_makes_full_model_equal_to_no_bridge():
    lm = _lm()
    torch.manual_seed(5)
    full = LibraModel(lm, config=CFG)
    no_bridge = LibraModel(copy.deepcopy(lm), config=LibraConfig(**{**CFG.to_dict(), "use_bridge": False}))
    missing, unexpected = no_bridge.load_state_dict(full.state_dict(), strict=False)
    assert not missing and all("bridge" in k for k in unexpected) and unexpected
    batch = _mixed_batch()
    with torch.no_grad():
        a, b = _call(full, batch), _call(no_bridge, batch)
    torch.testing.assert_close(a.text_logits, b.text_logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(a.vision_logits, b.vision_logits, rtol=0, atol=1e-6)
    # ... and a bridge that is not zero changes the output (the test can fail).
    _perturb(full, seed=2)
    with torch.no_grad():
        for layer in full.layers:
            for name in ("k", "v"):
                for side in ("language", "vision"):
                    getattr(layer.self_attn, f"vision_{name}_bridge_on_{side}").weight_B.normal_(std=0.5)
        c = _call(full, batch)
    no_bridge.load_state_dict(full.state_dict(), strict=False)
    with torch.no_grad():
        d = _call(no_bridge, batch)
    assert not torch.allclose(c.text_logits, d.text_logits, atol=1e-4)


def test_each_token_passes_only_through_its_own_modality_modules():
    lm = _lm()
    model = LibraModel(lm, config=CFG)
    batch = _mixed_batch(b=2, p=4, text_len=5)
    n_vis = int(batch.vision_flag.sum())
    n_txt = batch.vision_flag.numel() - n_vis
    rows: dict[str, int] = {}

    def hook(name):
        def fn(module, inputs, output):
            rows[name] = rows.get(name, 0) + inputs[0].reshape(-1, inputs[0].shape[-1]).shape[0]
        return fn

    text_names, vision_names = [], []
    for i, (block, layer) in enumerate(zip(lm.layers, model.layers)):
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(block.self_attn, n).register_forward_hook(hook(f"t{i}.{n}"))
            getattr(layer.self_attn, f"vision_{n}").register_forward_hook(hook(f"v{i}.{n}"))
            text_names.append(f"t{i}.{n}")
            vision_names.append(f"v{i}.{n}")
        for n in ("gate_proj", "up_proj", "down_proj"):
            getattr(block.mlp, n).register_forward_hook(hook(f"t{i}.{n}"))
            getattr(layer.mlp, f"vision_{n}").register_forward_hook(hook(f"v{i}.{n}"))
            text_names.append(f"t{i}.{n}")
            vision_names.append(f"v{i}.{n}")
        for n, m in (("in", block.input_layernorm), ("post", block.post_attention_layernorm)):
            m.register_forward_hook(hook(f"t{i}.{n}"))
            text_names.append(f"t{i}.{n}")
        for n, m in (("in", layer.vision_input_layernorm), ("post", layer.vision_post_attention_layernorm)):
            m.register_forward_hook(hook(f"v{i}.{n}"))
            vision_names.append(f"v{i}.{n}")
    lm.lm_head.register_forward_hook(hook("lm_head"))
    model.vision_lm_head[0].register_forward_hook(hook("vision_head"))
    with torch.no_grad():
        _call(model, batch)
    assert all(rows[n] == n_txt for n in text_names), rows
    assert all(rows[n] == n_vis for n in vision_names), rows
    assert rows["lm_head"] == n_txt and rows["vision_head"] == n_vis


def test_vision_expert_weights_do_not_reach_text_tokens_before_the_image():
    lm = _lm()
    model = LibraModel(lm, config=CFG)
    _perturb(model)
    g = torch.Generator().manual_seed(7)
    b, t = 2, 12
    flag = torch.zeros(b, t, dtype=torch.bool)
    flag[:, 5:9] = True  # text 0-4, image 5-8, text 9-11
    ids = torch.randint(0, LM_CFG.vocab_size, (b, t), generator=g)
    codes = torch.randint(0, CFG.codebook_size, (b, t, CFG.n_codebooks), generator=g)
    feats = torch.rand(b, t, CFG.feature_dim, generator=g)
    with torch.no_grad():
        before = model(ids, vision_flag=flag, vision_codes=codes, vision_features=feats).text_logits
        _perturb(model, seed=9, std=1.0)
        after = model(ids, vision_flag=flag, vision_codes=codes, vision_features=feats).text_logits
    assert torch.equal(before[:, :5], after[:, :5])
    assert not torch.allclose(before[:, 9:], after[:, 9:])
    # the text prefix is the base LM's own computation
    with torch.no_grad():
        torch.testing.assert_close(before[:, :5], lm(ids[:, :5]), rtol=0, atol=1e-5)


@pytest.mark.parametrize("position", [2, 6, 9])
def test_output_at_a_position_ignores_every_later_token(position):
    lm = _lm()
    model = LibraModel(lm, config=CFG)
    _perturb(model)
    batch = _mixed_batch(b=2, p=4, text_len=7)
    changed = copy.deepcopy(batch)
    g = torch.Generator().manual_seed(11)
    t = batch.input_ids.shape[1]
    changed.input_ids[:, position + 1:] = torch.randint(5, LM_CFG.vocab_size, (2, t - position - 1), generator=g)
    changed.vision_codes[:, position + 1:] = torch.randint(0, CFG.codebook_size, changed.vision_codes[:, position + 1:].shape, generator=g)
    changed.vision_features[:, position + 1:] += 1.0
    with torch.no_grad():
        a, b = _call(model, batch), _call(model, changed)
    torch.testing.assert_close(a.text_logits[:, : position + 1], b.text_logits[:, : position + 1], rtol=0, atol=1e-6)
    torch.testing.assert_close(a.vision_logits[:, : position + 1], b.vision_logits[:, : position + 1], rtol=0, atol=1e-6)
    assert not torch.allclose(a.text_logits[:, position + 1:], b.text_logits[:, position + 1:])


# ------------------------------------------------------------------------------------------ LibraLinear
def test_libra_linear_full_rank_represents_any_matrix_exactly():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 9, generator=g, dtype=torch.float64)
    layer = LibraLinear(9, 6, down_ratio=1).double()
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    with torch.no_grad():
        layer.weight_B.copy_(u)
        layer.weight_A.copy_(s[:, None] * vh)
    x = torch.randn(4, 9, generator=g, dtype=torch.float64)
    torch.testing.assert_close(layer(x), x @ w.T)
    torch.testing.assert_close(layer.weight, w)


@pytest.mark.parametrize("inner", [6, 2])
def test_libra_linear_gradient_fit_reaches_the_eckart_young_error(inner):
    """Fitting ``B A`` to a random ``W`` by gradient descent reaches the best rank-``inner`` error (zero at
    full rank), the closed form being the norm of the dropped singular values."""
    g = torch.Generator().manual_seed(1)
    w = torch.randn(6, 8, generator=g, dtype=torch.float64)
    layer = LibraLinear(8, 6, rank=inner).double()
    with torch.no_grad():
        layer.weight_B.normal_(std=0.3)
    opt = torch.optim.Adam(layer.parameters(), lr=0.02)
    for _ in range(3000):
        opt.zero_grad()
        loss = ((layer.weight - w) ** 2).sum()
        loss.backward()
        opt.step()
    s = torch.linalg.svdvals(w)
    best = float((s[inner:] ** 2).sum())
    assert float(loss) == pytest.approx(best, abs=1e-4 + 1e-3 * best)


def test_libra_linear_shapes_and_init():
    e = LibraLinear(16, 32, down_ratio=4)
    assert e.weight_A.shape == (8, 16) and e.weight_B.shape == (32, 8)
    b = LibraLinear(16, 32, rank=8)
    assert torch.count_nonzero(b.weight_B) == 0 and torch.count_nonzero(b.weight_A) > 0
    assert torch.count_nonzero(b(torch.randn(3, 16))) == 0


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(0, 2**16), st.integers(1, 4), st.integers(1, 9))
def test_route_equals_choosing_per_token(seed, b, t):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, 5, generator=g)
    flag = torch.rand(b, t, generator=g) < 0.5
    text, vision = torch.nn.Linear(5, 3), torch.nn.Linear(5, 3)
    with torch.no_grad():
        out = route(x, flag, text, vision)
        ref = torch.where(flag[..., None], vision(x), text(x))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------ labels, loss, cache
def test_labels_mask_each_modality_out_of_the_other_head():
    batch = _mixed_batch(b=2, p=3, text_len=5)
    p = 3
    flag = batch.vision_flag
    assert flag[:, : 1 + p].all() and not flag[:, 1 + p:].any()
    assert (batch.text_labels[flag] == IGNORE_INDEX).all()
    assert (batch.vision_labels[~flag] == IGNORE_INDEX).all()
    # position i of the image predicts patch i + 1's codes; the last patch predicts nothing
    torch.testing.assert_close(batch.vision_labels[:, :p], batch.vision_codes[:, 1: 1 + p])
    assert (batch.vision_labels[:, p] == IGNORE_INDEX).all()
    # <bos> predicts the first word, the last text position nothing
    torch.testing.assert_close(batch.text_labels[:, 1 + p: -1], batch.input_ids[:, 2 + p:])
    assert (batch.text_labels[:, -1] == IGNORE_INDEX).all()


def test_joint_loss_is_text_ce_plus_mean_codebook_ce_and_ignores_the_other_modality():
    g = torch.Generator().manual_seed(2)
    batch = _mixed_batch(b=2, p=3, text_len=5)
    b, t = batch.input_ids.shape
    text_logits = torch.randn(b, t, 11, generator=g)
    vision_logits = torch.randn(b, t, CFG.n_codebooks, CFG.codebook_size, generator=g)
    text_labels = batch.text_labels.clamp_max(10).masked_fill(batch.text_labels == IGNORE_INDEX, IGNORE_INDEX)
    out = LibraOutput(text_logits, vision_logits)
    loss = libra_loss(out, text_labels, batch.vision_labels, vision_loss_weight=0.5)
    # brute force: average -log softmax over the counted positions
    lt = [-(torch.log_softmax(text_logits[i, j], -1)[text_labels[i, j]]) for i in range(b) for j in range(t)
          if text_labels[i, j] != IGNORE_INDEX]
    lv = []
    for c in range(CFG.n_codebooks):
        lv.append(torch.stack([-(torch.log_softmax(vision_logits[i, j, c], -1)[batch.vision_labels[i, j, c]])
                               for i in range(b) for j in range(t) if batch.vision_labels[i, j, c] != IGNORE_INDEX]).mean())
    torch.testing.assert_close(loss, torch.stack(lt).mean() + 0.5 * torch.stack(lv).mean())
    # scores of the other modality's positions do not count
    noisy = LibraOutput(text_logits.masked_fill(batch.vision_flag[..., None], 1e3),
                        vision_logits.masked_fill(~batch.vision_flag[..., None, None], -1e3))
    torch.testing.assert_close(libra_loss(noisy, text_labels, batch.vision_labels, vision_loss_weight=0.5), loss)


def test_vision_head_scores_only_visual_positions():
    model = LibraModel(_lm(), config=CFG)
    _perturb(model)
    batch = _mixed_batch()
    with torch.no_grad():
        out = _call(model, batch)
    assert (out.vision_logits[~batch.vision_flag] == 0).all()
    assert (out.text_logits[batch.vision_flag] == 0).all()
    assert (out.vision_logits[batch.vision_flag] != 0).any()


@pytest.mark.parametrize("use_bridge", [True, False])
def test_kv_cache_decoding_equals_the_full_forward(use_bridge):
    lm = _lm()
    model = LibraModel(lm, config=LibraConfig(**{**CFG.to_dict(), "use_bridge": use_bridge}))
    _perturb(model, std=0.5)
    g = torch.Generator().manual_seed(5)
    b, t = 2, 14
    flag = torch.zeros(b, t, dtype=torch.bool)
    flag[:, 3:8] = True  # text, image, text: the cache holds both views of text keys before the image
    ids = torch.randint(0, LM_CFG.vocab_size, (b, t), generator=g)
    codes = torch.randint(0, CFG.codebook_size, (b, t, CFG.n_codebooks), generator=g)
    feats = torch.rand(b, t, CFG.feature_dim, generator=g)
    with torch.no_grad():
        full = model(ids, vision_flag=flag, vision_codes=codes, vision_features=feats)
        cache = model.new_cache()
        text_steps, vision_steps = [], []
        for start, stop in ((0, 2), (2, 5), (5, 6), (6, 10), *((i, i + 1) for i in range(10, t))):
            out = model(ids[:, start:stop], vision_flag=flag[:, start:stop], vision_codes=codes[:, start:stop],
                        vision_features=feats[:, start:stop], cache=cache)
            text_steps.append(out.text_logits)
            vision_steps.append(out.vision_logits if out.vision_logits is not None
                                else torch.zeros(b, stop - start, CFG.n_codebooks, CFG.codebook_size))
    assert cache.length == t
    torch.testing.assert_close(torch.cat(text_steps, 1), full.text_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(vision_steps, 1), full.vision_logits, rtol=1e-5, atol=1e-5)


def test_llava_kv_cache_decoding_equals_the_full_forward():
    model = LLaVAStyleModel(_lm(), config=CFG, projector_hidden=8)
    batch = _mixed_batch()
    with torch.no_grad():
        full = _call(model, batch).text_logits
        cache = model.new_cache()
        p = 1 + 4 + 1
        first = model(batch.input_ids[:, :p], vision_flag=batch.vision_flag[:, :p], vision_codes=batch.vision_codes[:, :p],
                      vision_features=batch.vision_features[:, :p], cache=cache).text_logits
        rest = [model(batch.input_ids[:, i:i + 1], cache=cache).text_logits for i in range(p, batch.input_ids.shape[1])]
    torch.testing.assert_close(torch.cat([first, *rest], 1), full, rtol=1e-5, atol=1e-5)


def test_only_the_vision_system_trains_and_the_lm_stays_bit_identical():
    lm = _lm()
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    model = LibraModel(lm, config=CFG)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("vision" in n for n in trainable)
    assert not any(p.requires_grad for p in lm.parameters())
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
    batch = _mixed_batch()
    for _ in range(3):
        loss = libra_loss(_call(model, batch), batch.text_labels, batch.vision_labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(torch.equal(before[k], v) for k, v in lm.state_dict().items())
    full_ft = LLaVAStyleModel(_lm(), config=CFG, freeze_language_model=False)
    assert all(p.requires_grad for p in full_ft.language_model.parameters())


def test_hybrid_input_ablations_drop_their_source():
    lm = _lm()
    batch = _mixed_batch()
    for use_codes, use_features in ((True, False), (False, True)):
        cfg = LibraConfig(**{**CFG.to_dict(), "use_codes": use_codes, "use_features": use_features})
        model = LibraModel(lm, config=cfg)
        _perturb(model)
        changed = copy.deepcopy(batch)
        if use_codes:
            changed.vision_features += 5.0
        else:
            changed.vision_codes = (changed.vision_codes + 1) % CFG.codebook_size
        with torch.no_grad():
            torch.testing.assert_close(_call(model, batch).text_logits, _call(model, changed).text_logits)
    with pytest.raises(ValueError, match="use_codes"):
        LibraConfig(use_codes=False, use_features=False)


def test_gqa_language_model_is_supported():
    lm = _lm(n_heads=4, n_kv_heads=2)
    model = LibraModel(lm, config=CFG)
    _perturb(model)
    ids = torch.randint(0, LM_CFG.vocab_size, (2, 7))
    with torch.no_grad():
        assert torch.equal(model(ids).text_logits, lm(ids))
        out = _call(model, _mixed_batch())
    assert np.isfinite(out.text_logits.numpy()).all()
