"""TinyCLIP with token merging: limiting cases, invariants, losses and retrieval metrics."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.multimodal.crossget import (
    MergeConfig,
    SceneTextEncoder,
    TinyCLIP,
    TinyCLIPConfig,
    contrastive_loss,
    js_alignment_loss,
    retrieval_recall,
)
from icml24.multimodal.scenes import generate_scenes
from icml24.vision.flops import count_flops

ENC = SceneTextEncoder()
SMALL = dict(vocab_size=ENC.vocab_size, image_size=16, patch_size=4, vision_width=32, vision_layers=2,
             vision_heads=2, vision_mlp=64, text_width=32, text_layers=2, text_heads=2, embed_dim=16)  # fmt: skip


def _model(cross=True, seed=0, **kw):
    torch.manual_seed(seed)
    return TinyCLIP(config=TinyCLIPConfig(**{**SMALL, "cross_tokens": cross, **kw})).eval()


def _images(n=6, size=16):
    from icml24.multimodal.scenes import SceneConfig

    return torch.from_numpy(generate_scenes(n, config=SceneConfig(image_size=size), seed=1).images)


def _reference_image_forward(model, images):
    """Plain pre-norm ViT with CLS pooling, written with explicit matmuls (no merging machinery)."""
    v = model.vision
    x = v.tokens((images - 0.5) / 0.25)
    cls = (model.class_embedding + model.cls_position).expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], 1)
    heads = model.config.vision_heads
    for blk in v.blocks:
        h = blk.norm1(x)
        b, t, c = h.shape
        q, k, val = blk.attn.qkv(h).reshape(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(c // heads)).softmax(-1)
        x = x + blk.attn.proj((att @ val).transpose(1, 2).reshape(b, t, c))
        x = x + blk.mlp(blk.norm2(x))
    return v.head(v.norm(x[:, 0]))


def test_no_merge_no_cross_token_is_the_plain_vit():
    model = _model(cross=False)
    imgs = _images()
    with torch.no_grad():
        ref = _reference_image_forward(model, imgs)
        for merge in (None, MergeConfig(method="none", r=0), MergeConfig(method="tome", r=0),
                      MergeConfig(method="complete", r=0)):  # fmt: skip
            torch.testing.assert_close(model.encode_image(imgs, merge=merge), ref, rtol=1e-5, atol=1e-6)


def test_text_cross_token_never_changes_the_text_features():
    with_cross, without = _model(cross=True), _model(cross=False)
    without.load_state_dict(with_cross.state_dict(), strict=False)
    with torch.no_grad():
        with_cross.cross_text.normal_()
    ids, mask = ENC.encode(["a small red square at the top left", "a big blue disc at the middle and a tiny box"
                            " at the bottom"])  # fmt: skip
    with torch.no_grad():
        a = with_cross.encode_text(ids, attention_mask=mask)
        b = without.encode_text(ids, attention_mask=mask)
        # padding never matters either: appending pads leaves the features unchanged
        ids2 = torch.cat([ids, torch.zeros(2, 3, dtype=torch.int64)], 1)
        c = with_cross.encode_text(ids2, attention_mask=ids2 != 0)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["random", "tome", "complete", "crossget"])
def test_merging_reduces_tokens_and_flops(method):
    model = _model()
    imgs = _images(3)
    merge = MergeConfig(method=method, r=3)
    with torch.no_grad():
        feats, counts = model.encode_image(imgs, merge=merge, return_tokens=True,
                                           generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert counts == [16 + 2, 16 + 2 - 3]
    assert feats.shape == (3, 16) and torch.isfinite(feats).all()
    full = count_flops(model.encode_image, imgs)
    merged = count_flops(model.encode_image, imgs, merge=merge, generator=torch.Generator().manual_seed(0))
    assert merged < full


def test_crossget_needs_cross_tokens():
    with pytest.raises(ValueError, match="cross_tokens"):
        _model(cross=False).encode_image(_images(2), merge=MergeConfig(method="crossget", r=2))


def test_training_losses_backpropagate_and_js_trains_only_the_cross_offsets():
    model = _model().train()
    scenes = generate_scenes(8, config=__import__("icml24.multimodal.scenes", fromlist=["x"]).SceneConfig(
        image_size=16), seed=0)  # fmt: skip
    ids, mask = ENC.encode(scenes.captions)
    imgs = torch.from_numpy(scenes.images)
    out = model(imgs, ids, attention_mask=mask, merge=MergeConfig(method="crossget", r=2), js_weight=0.5)
    assert set(out) == {"loss", "contrastive", "js"} and out["js"] >= 0
    torch.testing.assert_close(out["loss"], 0.5 * out["contrastive"] + 0.5 * out["js"])
    # the JS term alone reaches only the cross-token offsets (states, norms and projections are detached)
    model.zero_grad()
    img_cross = model.encode_image(imgs, return_cross=True)[1]
    txt_cross = model.encode_text(ids, attention_mask=mask, return_cross=True)[1]
    js_alignment_loss(img_cross, txt_cross).backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert with_grad == {"cross_image", "cross_text"}


def test_contrastive_loss_closed_form_and_duplicates():
    img, txt = torch.randn(4, 8), torch.randn(4, 8)
    scale = torch.tensor(math.log(10.0))
    logits = 10 * F.normalize(img, dim=-1) @ F.normalize(txt, dim=-1).T
    expected = (F.cross_entropy(logits, torch.arange(4)) + F.cross_entropy(logits.T, torch.arange(4))) / 2
    torch.testing.assert_close(contrastive_loss(img, txt, scale), expected)
    # two equal-content pairs: each counts the other as a positive with weight 1/2
    ids = torch.tensor([0, 0, 1, 2])
    target = torch.tensor([[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
    exp2 = (-(F.log_softmax(logits, 1) * target).sum(1).mean() - (F.log_softmax(logits.T, 1) * target).sum(1).mean()) / 2
    torch.testing.assert_close(contrastive_loss(img, txt, scale, content_ids=ids), exp2)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(1, 5), d=st.integers(2, 8), seed=st.integers(0, 999), scale=st.floats(0.1, 10))
def test_js_loss_is_zero_iff_equal_nonnegative_and_symmetric(n, d, seed, scale):
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(n, d, generator=g, dtype=torch.float64) * scale
    q = torch.randn(n, d, generator=g, dtype=torch.float64) * scale
    assert float(js_alignment_loss(p, p)) == pytest.approx(0.0, abs=1e-12)
    # a constant shift of the logits is the same distribution
    assert float(js_alignment_loss(p, p + 3.0)) == pytest.approx(0.0, abs=1e-10)
    v = float(js_alignment_loss(p, q))
    assert v >= -1e-12
    assert v == pytest.approx(float(js_alignment_loss(q, p)))
    # closed form: ½ Σ m log(m / p) + ½ Σ m log(m / q), averaged over rows
    sp, sq = p.softmax(-1), q.softmax(-1)
    m = (sp + sq) / 2
    ref = 0.5 * ((m * (m / sp).log()).sum(-1) + (m * (m / sq).log()).sum(-1)).mean()
    assert v == pytest.approx(float(ref))


def test_retrieval_recall_counts_equal_content():
    img = torch.eye(4)
    txt = torch.eye(4)[[1, 0, 2, 3]]  # images 0 and 1 retrieve each other's captions
    ids = torch.arange(4)
    r = retrieval_recall(img, txt, ids, ks=(1, 2))
    assert r["i2t_r1"] == 50.0 and r["t2i_r1"] == 50.0 and r["mean_r1"] == 50.0
    assert r["i2t_r2"] == 50.0
    # the swapped pair has equal content: both retrievals count
    assert retrieval_recall(img, txt, torch.tensor([0, 0, 1, 2]))["mean_r1"] == 100.0


def test_tokenizer_pads_and_marks():
    ids, mask = ENC.encode(["a red box", "a big blue disc at the middle"])
    assert ids.shape == mask.shape and ids[0, 0] == ENC.tokenizer.bos_id and mask[0].sum() == 5
    assert (ids[~mask] == 0).all()


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: TinyCLIPConfig(patch_size=5), "patch_size"),
        (lambda: TinyCLIPConfig(text_layers=3), "text_layers"),
        (lambda: TinyCLIPConfig(vision_width=0), "vision_width"),
        (lambda: MergeConfig(method="prune"), "method"),
        (lambda: MergeConfig(r=-1), "r"),
        (lambda: TinyCLIP(config="x"), "config"),
        (lambda: _model().encode_image(_images(2), merge="tome"), "merge"),
        (lambda: _model().encode_text(torch.zeros(2, 3)), "input_ids"),
        (lambda: _model().encode_text(torch.full((2, 3), 999)), "input_ids"),
        (lambda: contrastive_loss(torch.randn(3, 4), torch.randn(2, 4), torch.tensor(1.0)), "text_features"),
        (lambda: js_alignment_loss(torch.randn(3, 4), torch.randn(3, 5)), "text_cross"),
        (lambda: retrieval_recall(torch.randn(3, 4), torch.randn(3, 4), torch.arange(2)), "ids"),
        (lambda: ENC.encode("a red box"), "captions"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()
