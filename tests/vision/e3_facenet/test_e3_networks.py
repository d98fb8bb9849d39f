"""The generator, the Style Code Enhancer, the losses and the toy world's captions (notes section 7)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.vision.e3_facenet import (
    ATTRIBUTES,
    E3FaceNetConfig,
    E3FaceNetGenerator,
    ModulatedConv2d,
    StyleCodeEnhancer,
    TextEncoder,
    caption_faces,
    contrastive_loss,
    discriminator_loss,
    generator_adversarial_loss,
    make_tokenizer,
    offset_penalty,
    parse_caption,
    r1_penalty,
    render_toy_faces,
    sample_attributes,
)

HYP = settings(derandomize=True, max_examples=25, deadline=None)
CAPTIONS = ["a person with black hair, pale skin, a smile and glasses",
            "someone having red hair, dark skin, a serious face and no glasses"]  # fmt: skip


@pytest.fixture(scope="module")
def text():
    torch.set_num_threads(1)  # module fixtures run before conftest's per-test one-thread fixture
    torch.manual_seed(0)
    enc = TextEncoder(tokenizer=make_tokenizer()).eval()
    with torch.no_grad():
        return enc.encode(CAPTIONS)


def _generator(sce: bool, seed: int = 0) -> E3FaceNetGenerator:
    torch.manual_seed(seed)
    return E3FaceNetGenerator(config=E3FaceNetConfig(style_code_enhancer=sce)).eval()


# --------------------------------------------------------------------------------------------- captions
@HYP
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 1), st.integers(0, 1)), min_size=1,
                max_size=6), st.integers(0, 10_000))  # fmt: skip
def test_captions_state_their_attributes(rows, seed):
    attrs = torch.tensor(rows)
    caps = caption_faces(attrs, seed=seed)
    assert [parse_caption(c) for c in caps] == [tuple(r) for r in rows]
    tok = make_tokenizer()
    assert all(tok.unk_id not in tok.encode(c) for c in caps)  # every caption word is in the vocabulary


def test_attributes_paint_the_surface_where_they_should():
    base = torch.tensor([[0, 0, 0, 0]])
    yaw = torch.zeros(1)
    img = render_toy_faces(base, yaw)["image"]
    glasses = render_toy_faces(torch.tensor([[0, 1, 0, 0]]), yaw)["image"]
    rows = (glasses - img).abs().sum((0, 1, 3)) > 1e-3
    assert rows.any() and not rows[:4].any() and not rows[-4:].any()  # the band is mid-face only
    assert float(img.min()) >= -1 and float(img.max()) <= 1
    assert torch.equal(img, render_toy_faces(base, yaw)["image"])  # deterministic
    assert len(ATTRIBUTES) == 4 and sample_attributes(5).shape == (5, 4)


# -------------------------------------------------------------------------------------------- generator
def test_mapping_is_view_independent_and_views_differ(text):
    g = _generator(True)
    z = torch.randn(2, g.config.z_dim, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = g(z, torch.tensor([-0.3, -0.3]), text)
        b = g(z, torch.tensor([0.3, 0.3]), text)
    assert torch.equal(a.w, b.w)  # the style code does not see the camera
    assert not torch.allclose(a.image, b.image)  # the views do
    assert a.image.shape == (2, 3, 16, 16) and a.depth.shape == (2, 8, 8) and a.points.shape == (2, 3, 8, 8)
    c = g.config.camera
    assert bool((a.depth >= c[2] - 1e-4).all()) and bool((a.depth <= c[3] + 1e-4).all())
    assert len(a.offsets) == 2


def test_zeroed_enhancer_reproduces_the_generator_without_it(text):
    with_sce, without = _generator(True), _generator(False)
    missing = without.load_state_dict(with_sce.state_dict(), strict=False)
    assert not missing.missing_keys and all(k.startswith("enhancers.") for k in missing.unexpected_keys)
    z = torch.randn(2, 32, generator=torch.Generator().manual_seed(2))
    yaw = torch.tensor([0.1, -0.2])
    with torch.no_grad():
        a, b = with_sce(z, yaw, text), without(z, yaw, text)
    assert all(float(o.abs().max()) == 0.0 for o in a.offsets)  # the offset layer starts at zero
    assert torch.equal(a.image, b.image)
    # A trained (non-zero) offset layer changes the image.
    with torch.no_grad():
        with_sce.enhancers[1].offset.weight.normal_(0, 0.5)
        assert not torch.allclose(with_sce(z, yaw, text).image, b.image)


def test_offset_interpolation_endpoints_are_bit_exact(text):
    g = _generator(True)
    with torch.no_grad():
        for e in g.enhancers:
            e.offset.weight.normal_(0, 0.3)
    z = torch.randn(2, 32, generator=torch.Generator().manual_seed(3))
    yaw = torch.zeros(2)
    src, tgt = text.index(slice(0, 1)), text.index(slice(1, 2))
    z1 = z[:1]
    with torch.no_grad():
        source = g(z1, yaw[:1], src)
        w = source.w
        edit0 = g.synthesis(w, yaw[:1], src, edit_text=tgt, edit_alpha=0.0)
        edit1 = g.synthesis(w, yaw[:1], src, edit_text=tgt, edit_alpha=1.0)
        target_offsets = g.synthesis(w, yaw[:1], tgt)  # the source's w with the target's token offsets
        half = g.synthesis(w, yaw[:1], src, edit_text=tgt, edit_alpha=0.5)
    assert torch.equal(edit0.image, source.image)
    assert torch.equal(edit1.image, target_offsets.image)
    assert not torch.equal(half.image, source.image) and not torch.equal(half.image, edit1.image)
    # The first block's offset is exactly the average (its input x does not depend on any offset).
    assert torch.allclose(half.offsets[0], 0.5 * (source.offsets[0] + target_offsets.offsets[0]), atol=1e-6)


def test_modulated_conv_matches_an_explicit_per_sample_convolution():
    torch.manual_seed(0)
    conv = ModulatedConv2d(in_channels=4, out_channels=5, kernel_size=3, w_dim=6)
    x, w = torch.randn(3, 4, 7, 7), torch.randn(3, 6)
    got = conv(x, w)
    s = conv.affine(w)
    for i in range(3):
        weight = conv.weight * conv.gain * s[i][None, :, None, None]
        weight = weight / (weight.square().sum((1, 2, 3), keepdim=True) + 1e-8).sqrt()
        want = torch.nn.functional.conv2d(x[i : i + 1], weight, padding=1) + conv.bias[None, :, None, None]
        assert torch.allclose(got[i : i + 1], want, atol=1e-5)


def test_enhancer_ignores_padding_tokens():
    torch.manual_seed(0)
    sce = StyleCodeEnhancer(channels=4, resolution=4, text_dim=6, w_dim=5)
    torch.nn.init.normal_(sce.offset.weight)
    x, tok = torch.randn(2, 4, 4, 4), torch.randn(2, 3, 6)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    f1, d1 = sce(x, tok, mask)
    tok2 = tok.clone()
    tok2[0, 2] = 100.0  # a padded token's content must not matter
    f2, d2 = sce(x, tok2, mask)
    assert torch.allclose(d1, d2) and torch.allclose(f1, f2)


def test_text_encoder_is_padding_invariant():
    torch.manual_seed(0)
    enc = TextEncoder(tokenizer=make_tokenizer()).eval()
    ids, mask = enc.tokenizer.batch(CAPTIONS)
    one = enc(ids[:1, : int(mask[0].sum())], mask[:1, : int(mask[0].sum())])
    both = enc(ids, mask)
    assert torch.allclose(one.global_[0], both.global_[0], atol=1e-5)
    assert not enc.embed.weight.requires_grad  # frozen random word embeddings


# ----------------------------------------------------------------------------------------------- losses
def test_contrastive_loss_is_minimal_on_diagonal_dominant_logits_and_permutation_symmetric():
    g = torch.Generator().manual_seed(0)
    t = torch.nn.functional.normalize(torch.randn(6, 8, generator=g), dim=-1)
    noise = torch.randn(6, 8, generator=g)
    losses = [float(contrastive_loss(t + s * noise, t, temperature=0.1)) for s in (0.0, 0.3, 1.0, 3.0)]
    assert losses == sorted(losses)  # the closer each image to its own text, the lower
    assert float(contrastive_loss(t, t, temperature=0.01)) < 1e-3
    perm = torch.randperm(6, generator=g)
    img = t + 0.5 * noise
    assert float(contrastive_loss(img[perm], t[perm])) == pytest.approx(float(contrastive_loss(img, t)), rel=1e-6)
    # Groups: with every row in one group the target is uniform, so the loss is log B at equal logits.
    assert float(contrastive_loss(t * 0 + 1, t * 0 + 1, groups=[0] * 6)) == pytest.approx(math.log(6), rel=1e-5)
    grouped = contrastive_loss(img, t, groups=[0, 0, 1, 1, 2, 2])
    assert float(grouped) >= math.log(2) - 1e-6  # at least the targets' entropy


def test_adversarial_losses_closed_forms():
    zero = torch.zeros(4)
    assert float(generator_adversarial_loss(zero, zero)) == pytest.approx(math.log(2))
    assert float(discriminator_loss(zero, zero, zero, zero)) == pytest.approx(2 * math.log(2))
    assert float(discriminator_loss(zero, zero)) == pytest.approx(2 * math.log(2))
    big = torch.full((4,), 30.0)
    assert float(discriminator_loss(big, -big, big, -big)) < 1e-10
    assert float(generator_adversarial_loss(big)) < 1e-10
    assert float(offset_penalty([torch.tensor([[1.0, -3.0]]), torch.tensor([[2.0, 0.0]])])) == pytest.approx(1.5)
    assert float(offset_penalty([])) == 0.0


def test_r1_is_zero_for_a_constant_discriminator_and_closed_form_for_a_linear_one():
    x = torch.randn(5, 3, 4, 4, requires_grad=True)
    const = torch.full((5,), 2.0, requires_grad=True) * 1.0
    assert float(r1_penalty(const, x, gamma=10.0)) == 0.0
    a = torch.randn(3, 4, 4)
    lin = (x * a).flatten(1).sum(1)
    assert float(r1_penalty(lin, x, gamma=0.5)) == pytest.approx(0.25 * float(a.square().sum()), rel=1e-5)
    with pytest.raises(ValueError, match="images"):
        r1_penalty(lin, x.detach(), gamma=1.0)
