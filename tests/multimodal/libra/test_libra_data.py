"""The k-means visual tokenizer, the image-then-caption layout and the caption attribute score."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.multimodal.libra import PatchTokenizer, caption_scores, image_patches, parse_caption
from icml24.multimodal.scenes import SceneConfig, generate_scenes

GRID2 = SceneConfig(image_size=32, grid=2, max_objects=2)


def test_image_patches_match_a_pixel_loop():
    rng = np.random.default_rng(0)
    images = rng.random((2, 3, 8, 12)).astype(np.float32)
    p = 4
    out = image_patches(images, p)
    assert out.shape == (2, 6, 48)
    for n in range(2):
        for r in range(2):
            for c in range(3):
                ref = images[n, :, r * p:(r + 1) * p, c * p:(c + 1) * p].reshape(-1)
                np.testing.assert_array_equal(out[n, r * 3 + c], ref)
    with pytest.raises(ValueError, match="patch_size"):
        image_patches(images, 5)


def test_codes_are_the_nearest_centroids_of_the_residuals():
    rng = np.random.default_rng(1)
    feats = rng.normal(size=(40, 4, 6)).astype(np.float32)
    tok = PatchTokenizer(n_codes=5, n_codebooks=2, random_state=0).fit(feats)
    codes = tok.transform(feats)
    flat = feats.reshape(-1, 6)
    c1, c2 = tok.centroids_
    ref1 = ((flat[:, None] - c1[None]) ** 2).sum(-1).argmin(1)
    ref2 = (((flat - c1[ref1])[:, None] - c2[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_array_equal(codes.reshape(-1, 2), np.stack([ref1, ref2], 1))


def test_a_second_codebook_lowers_the_reconstruction_error():
    rng = np.random.default_rng(2)
    feats = rng.normal(size=(200, 4, 8)).astype(np.float32)
    one = PatchTokenizer(n_codes=8, n_codebooks=1).fit(feats).reconstruction_error(feats)
    two = PatchTokenizer(n_codes=8, n_codebooks=2).fit(feats).reconstruction_error(feats)
    assert two < one < float((feats**2).mean())


def test_tokenizer_refuses_calls_out_of_order_and_bad_shapes():
    with pytest.raises(RuntimeError, match="before fit"):
        PatchTokenizer().transform(np.zeros((1, 2, 3), np.float32))
    tok = PatchTokenizer(n_codes=2, n_codebooks=1).fit(np.random.default_rng(0).random((4, 2, 3)).astype(np.float32))
    with pytest.raises(ValueError, match="dimensions"):
        tok.transform(np.zeros((1, 2, 4), np.float32))


@pytest.mark.parametrize("split", ["train", "ood_template"])
@pytest.mark.parametrize("config", [GRID2, SceneConfig(), SceneConfig(grid=1, max_objects=1)])
def test_true_captions_score_perfectly(config, split):
    scenes = generate_scenes(300, config=config, seed=3, split=split)
    scores = caption_scores(scenes.captions, scenes)
    assert scores == {"attribute_f1": 1.0, "attribute_precision": 1.0, "attribute_recall": 1.0,
                      "caption_exact": 1.0, "count_accuracy": 1.0}  # fmt: skip


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_parse_caption_recovers_every_object(seed):
    scenes = generate_scenes(4, config=SceneConfig(), seed=seed)
    cfg = scenes.config
    for i, text in enumerate(scenes.captions):
        facts = parse_caption(text, cfg)
        for k in range(int(scenes.count[i])):
            cell = int(scenes.cell[i, k])
            assert (cell, "colour", cfg.colours[scenes.colour[i, k]]) in facts
            assert (cell, "shape", cfg.shapes[scenes.shape[i, k]]) in facts
            assert (cell, "size", cfg.sizes[scenes.size[i, k]]) in facts
        assert len(facts) == 3 * int(scenes.count[i])


def test_caption_scores_hand_computed():
    scenes = generate_scenes(1, config=SceneConfig(grid=2, max_objects=1, min_objects=1, synonyms=False), seed=0)
    cfg = scenes.config
    colour, shape, size = cfg.colours[scenes.colour[0, 0]], cfg.shapes[scenes.shape[0, 0]], cfg.sizes[scenes.size[0, 0]]
    pos = cfg.position_names[scenes.cell[0, 0]]
    wrong_colour = next(c for c in cfg.colours if c != colour)
    other_pos = next(p for p in cfg.position_names if p != pos)
    # right cell, one attribute wrong: 2 of 3 facts; F1 = 2*2/(3+3)
    s = caption_scores([f"a {size} {wrong_colour} {shape} at the {pos}"], scenes)
    assert s["attribute_f1"] == pytest.approx(2 / 3) and s["caption_exact"] == 0 and s["count_accuracy"] == 1
    # right attributes at the wrong cell: nothing matches
    s = caption_scores([f"a {size} {colour} {shape} at the {other_pos}"], scenes)
    assert s["attribute_f1"] == 0 and s["attribute_precision"] == 0
    # an extra object: precision 3/6, recall 1, F1 2*3/(6+3)
    s = caption_scores([f"a {size} {colour} {shape} at the {pos} and a {size} {colour} {shape} at the {other_pos}"], scenes)
    assert s["attribute_precision"] == pytest.approx(0.5) and s["attribute_recall"] == 1
    assert s["attribute_f1"] == pytest.approx(2 / 3) and s["count_accuracy"] == 0
    # no position: states nothing
    assert caption_scores([f"a {size} {colour} {shape}"], scenes)["attribute_f1"] == 0
    with pytest.raises(ValueError, match="captions"):
        caption_scores(["a", "b"], scenes)


def test_generated_features_path_accepts_tensors():
    feats = torch.rand(6, 4, 3)
    tok = PatchTokenizer(n_codes=3, n_codebooks=1).fit(feats)
    assert tok.transform(feats).shape == (6, 4, 1)
