"""Training and decoding: the frozen LM's text-only loss is exactly unchanged (claim 2), full fine-tuning
moves it, and cached greedy captions equal uncached ones."""

from __future__ import annotations

import copy

import torch

from icml24.language import TransformerConfig, TransformerLM, WordTokenizer
from icml24.multimodal.libra import (
    CaptionTrainConfig,
    LibraConfig,
    LibraModel,
    LLaVAStyleModel,
    PatchTokenizer,
    evaluate_captions,
    generate_captions,
    image_patches,
    prepare_caption_data,
    text_only_loss,
    train_captioner,
)
from icml24.multimodal.scenes import SceneConfig, generate_scenes, scene_vocabulary

SCENES = SceneConfig(image_size=16, grid=2, max_objects=2)
TOK = WordTokenizer(scene_vocabulary(SCENES))


def _setup(n: int = 24):
    scenes = generate_scenes(n, config=SCENES, seed=0)
    feats = image_patches(scenes.images, 8)
    pt = PatchTokenizer(n_codes=4).fit(feats)
    torch.manual_seed(0)
    lm = TransformerLM(TransformerConfig(vocab_size=TOK.vocab_size, d_model=16, n_layers=2, n_heads=2,
                                         max_seq_len=64)).eval()  # fmt: skip
    cfg = LibraConfig(codebook_size=4, feature_dim=feats.shape[-1], max_vision_tokens=5, bridge_rank=2)
    return scenes, prepare_caption_data(scenes, feats, pt, TOK), lm, cfg


def test_frozen_lm_text_only_loss_is_exactly_unchanged_and_full_finetuning_moves_it():
    scenes, data, lm, cfg = _setup()
    heldout = generate_scenes(16, config=SCENES, seed=1).captions
    base = text_only_loss(lm, TOK, heldout)
    train = CaptionTrainConfig(steps=5, batch_size=8, lr=1e-2, weight_decay=0.1)
    libra = LibraModel(copy.deepcopy(lm), config=cfg)
    train_captioner(libra, data, train, seed=0)
    llava = LLaVAStyleModel(copy.deepcopy(lm), config=cfg, projector_hidden=8)
    train_captioner(llava, data, train, seed=0)
    full = LLaVAStyleModel(copy.deepcopy(lm), config=cfg, freeze_language_model=False)
    train_captioner(full, data, train, seed=0)
    assert text_only_loss(libra, TOK, heldout) == base  # bit-exact: the routed model on text is the LM
    assert text_only_loss(libra.language_model, TOK, heldout) == base
    assert text_only_loss(llava, TOK, heldout) == base
    assert text_only_loss(full, TOK, heldout) != base
    ids = TOK.batch(heldout, bos=True)[0]
    with torch.no_grad():
        assert torch.equal(libra(ids).text_logits, lm(ids))


def test_cached_greedy_captions_equal_uncached_ones():
    scenes, data, lm, cfg = _setup(12)
    for model in (LibraModel(copy.deepcopy(lm), config=cfg), LLaVAStyleModel(copy.deepcopy(lm), config=cfg)):
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.add_(0.5 * torch.randn(p.shape, generator=g))
        a = generate_captions(model, data, TOK, max_new_tokens=6, use_cache=True)
        b = generate_captions(model, data, TOK, max_new_tokens=6, use_cache=False)
        assert a == b and len(a) == 12


def test_training_lowers_the_loss_and_scores_are_in_range():
    scenes, data, lm, cfg = _setup(32)
    model = LibraModel(lm, config=cfg)
    losses = train_captioner(model, data, CaptionTrainConfig(steps=40, batch_size=16, lr=1e-2), seed=0)
    assert sum(losses[-5:]) < sum(losses[:5])
    scores = evaluate_captions(model, data, TOK, max_new_tokens=8)
    assert all(0 <= scores[k] <= 1 for k in ("attribute_f1", "caption_exact", "count_accuracy"))
    # same seed, same result
    again = LibraModel(copy.deepcopy(_setup(32)[2]), config=cfg)
    first = LibraModel(copy.deepcopy(_setup(32)[2]), config=cfg)
    again.load_state_dict(first.state_dict())
    a = train_captioner(first, data, CaptionTrainConfig(steps=3, batch_size=4), seed=1)
    b = train_captioner(again, data, CaptionTrainConfig(steps=3, batch_size=4), seed=1)
    assert a == b
