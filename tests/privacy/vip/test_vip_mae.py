"""The MAE of ViP: patch order, masking, the masked-only loss, the sine-cosine table, data generators."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.privacy.vip import (
    MAEConfig,
    MaskedAutoencoder,
    few_shot_probe_accuracy,
    linear_probe_accuracy,
    patchify,
    private_digits,
    random_masking,
    sincos_pos_embed,
    synthetic_images,
)
from icml24.privacy.vip.mae import masked_patch_loss

TINY = MAEConfig(image_size=8, patch_size=4, dim=8, depth=1, num_heads=2, decoder_dim=8, decoder_heads=2)


def test_patchify_closed_form():
    img = torch.arange(16.0).reshape(1, 1, 4, 4)
    patches = patchify(img, 2)
    # Patches in row-major order of the 2x2 grid, each row-major inside: [[0,1,4,5], [2,3,6,7], ...].
    expected = torch.tensor([[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]], dtype=torch.float32)
    torch.testing.assert_close(patches[0], expected)
    # The patch order is the order of the ViT's patch tokens (a stride-p convolution).
    conv = torch.nn.Conv2d(1, 1, 2, stride=2, bias=False)
    tokens = conv(img).flatten(2).transpose(1, 2)[0, :, 0]
    torch.testing.assert_close(tokens, patches[0] @ conv.weight.reshape(-1))


@settings(max_examples=25, derandomize=True, deadline=None)
@given(batch=st.integers(1, 6), patches=st.integers(1, 20), frac=st.floats(0.05, 1.0), seed=st.integers(0, 1000))
def test_random_masking_keeps_exactly_num_visible(batch, patches, frac, seed):
    visible = max(1, int(patches * frac))
    ids_keep, ids_restore, mask = random_masking(batch, patches, visible, generator=torch.Generator().manual_seed(seed))
    assert ids_keep.shape == (batch, visible)
    assert torch.all(mask.sum(1) == patches - visible)
    # The kept ids are the unmasked positions, and ids_restore inverts the shuffle.
    for i in range(batch):
        assert set(ids_keep[i].tolist()) == set(torch.nonzero(mask[i] == 0).flatten().tolist())
        assert sorted(ids_restore[i].tolist()) == list(range(patches))


def test_masks_are_independent_and_uniform_across_images():
    _, _, mask = random_masking(4000, 16, 4, generator=torch.Generator().manual_seed(0))
    freq = mask.mean(0)  # each patch is masked with probability 12/16 = 0.75
    assert torch.all((freq - 0.75).abs() < 4 * (0.75 * 0.25 / 4000) ** 0.5 + 1e-3)
    # Independent across images: two images' masks agree on a patch with probability 0.75^2 + 0.25^2.
    agree = (mask[::2] == mask[1::2]).float().mean()
    assert abs(float(agree) - 0.625) < 0.02


def test_loss_is_on_masked_patches_only_and_matches_formula():
    g = torch.Generator().manual_seed(0)
    pred, target = torch.rand(3, 4, 5, generator=g), torch.rand(3, 4, 5, generator=g)
    mask = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 0]], dtype=torch.float32)
    loss = masked_patch_loss(pred, target, mask)
    manual = [np.mean([((pred[i, p] - target[i, p]) ** 2).mean().item() for p in range(4) if mask[i, p]]) for i in range(3)]
    torch.testing.assert_close(loss, torch.tensor(manual, dtype=torch.float32))
    changed = target.clone()
    changed[mask == 0] += 10.0  # visible patches' targets do not enter the loss
    torch.testing.assert_close(masked_patch_loss(pred, changed, mask), loss)


def test_model_loss_ignores_visible_reconstruction():
    torch.manual_seed(0)
    model = MaskedAutoencoder(TINY)
    x = torch.rand(2, 1, 8, 8)
    masks = random_masking(2, 4, TINY.num_visible, generator=torch.Generator().manual_seed(1))
    pred, mask = model.reconstruct(x, masks)
    torch.testing.assert_close(model(x, masks), masked_patch_loss(pred, patchify(x, 4), mask))
    assert model(x).shape == (2,) and model.features(x).shape == (2, 8)


def test_sincos_pos_embed_closed_form():
    emb = sincos_pos_embed(8, 3)
    assert emb.shape == (9, 8)
    omega = 1.0 / 10000 ** (np.arange(2) / 2)
    row, col = 1, 2  # token index 5 on a 3x3 grid
    expected = np.concatenate([np.sin(row * omega), np.cos(row * omega), np.sin(col * omega), np.cos(col * omega)])
    np.testing.assert_allclose(emb[5].numpy(), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="dim"):
        sincos_pos_embed(6, 3)


def test_position_embeddings_are_frozen_and_every_trainable_layer_is_opacus_supported():
    from opacus.validators import ModuleValidator

    model = MaskedAutoencoder(TINY)
    assert not model.encoder.pos_embed.requires_grad
    assert "decoder_pos_embed" not in dict(model.named_parameters())
    assert ModuleValidator.validate(model, strict=False) == []


def test_same_seed_same_model_and_masks():
    def run():
        torch.manual_seed(3)
        m = MaskedAutoencoder(TINY)
        m.generator = torch.Generator().manual_seed(4)
        return m(torch.ones(2, 1, 8, 8))

    torch.testing.assert_close(run(), run(), rtol=0, atol=0)


def test_config_validation():
    with pytest.raises(ValueError, match="patch_size"):
        MAEConfig(image_size=16, patch_size=5)
    with pytest.raises(ValueError, match="mask_ratio"):
        MAEConfig(mask_ratio=1.0)
    with pytest.raises(TypeError, match="dim"):
        MAEConfig(dim=3.0)
    with pytest.raises(ValueError, match="images"):
        MaskedAutoencoder(TINY)(torch.rand(2, 1, 16, 16))


def test_synthetic_images_range_determinism_and_variety():
    a, b = synthetic_images(50, seed=1), synthetic_images(50, seed=1)
    assert a.shape == (50, 1, 16, 16) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0.0 and a.max() <= 1.0
    assert not np.array_equal(a, synthetic_images(50, seed=2))
    assert np.all(a.reshape(50, -1).std(1) > 0.05)  # no blank images


def test_private_digits_sizes_and_range():
    d = private_digits(n_private=300, jitters=4, seed=0)
    assert d.private.shape == (1200, 1, 16, 16)
    assert d.downstream_x.shape == (1797 - 300, 1, 16, 16) and d.downstream_y.shape == (1497,)
    assert d.private.min() >= 0 and d.private.max() <= 1
    assert set(np.unique(d.downstream_y)) == set(range(10))


def test_probe_separates_linearly_separable_features():
    # Images whose mean brightness encodes the class: the frozen features separate them; accuracy is high.
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(2), 40)
    x = (rng.random((80, 1, 8, 8)) * 0.1 + y[:, None, None, None] * 0.8).astype(np.float32)
    torch.manual_seed(0)
    model = MaskedAutoencoder(TINY)
    assert linear_probe_accuracy(model, x[::2], y[::2], x[1::2], y[1::2]) == 1.0
    acc = few_shot_probe_accuracy(model, x, y, shots=5, draws=3, seed=0)
    assert acc == few_shot_probe_accuracy(model, x, y, shots=5, draws=3, seed=0) and acc > 0.95
