"""Tiny-scale training, evaluation, the optimisation baseline and the timing helper."""

from __future__ import annotations

import pytest
import torch

from icml24.vision.e3_facenet import (
    E3FaceNetConfig,
    GANConfig,
    caption_faces,
    evaluate_generator,
    optimise_style_codes,
    pretrain_semantic_encoders,
    sample_attributes,
    time_direct_generation,
    train_attribute_classifier,
    train_e3facenet,
)


@pytest.fixture(scope="module")
def encoders():
    torch.set_num_threads(1)  # module fixtures run before conftest's per-test one-thread fixture
    return pretrain_semantic_encoders(steps=30, batch_size=32, seed=0)


@pytest.fixture(scope="module")
def judge():
    torch.set_num_threads(1)
    return train_attribute_classifier(steps=30, batch_size=32, seed=5)


def test_encoders_learn_the_attributes(encoders, judge):
    # Chance is (1/3 + 3 * 1/2) / 4 = 0.46; 30 steps already read most attributes.
    assert encoders.accuracy > 0.6 and judge.accuracy_ > 0.6
    assert not any(p.requires_grad for p in encoders.image.parameters())


def test_tiny_training_is_deterministic_and_evaluates(encoders, judge):
    cfg, tc = E3FaceNetConfig(), GANConfig(steps=4, batch_size=8, reg_weight=1.0, r1_every=2)
    a = train_e3facenet(config=cfg, train_config=tc, encoders=encoders, seed=3, log_every=2)
    b = train_e3facenet(config=cfg, train_config=tc, encoders=encoders, seed=3, log_every=2)
    assert a.history["step"] == [2, 4]
    assert a.history["g_loss"] == b.history["g_loss"] and a.history["d_loss"] == b.history["d_loss"]
    assert all(torch.equal(p, q) for p, q in zip(a.ema.parameters(), b.ema.parameters()))
    assert any(not torch.equal(p, q) for p, q in zip(a.ema.parameters(), a.generator.parameters()))
    ev = evaluate_generator(a.ema, encoders.text, judge, prompts=8)
    for k in ("attribute_accuracy", "view_agreement", "real_attribute_accuracy"):
        assert 0.0 <= ev[k] <= 1.0
    assert ev["reprojection_error"] >= 0 and ev["depth_tv"] >= 0 and ev["offset_abs_mean"] > 0
    assert a.generate(["a face with red hair, dark skin, a smile and glasses"], seed=0).shape == (5, 1, 3, 16, 16)


def test_optimisation_baseline_raises_the_text_similarity(encoders):
    torch.manual_seed(0)
    from icml24.vision.e3_facenet import E3FaceNetGenerator

    g = E3FaceNetGenerator(config=E3FaceNetConfig(style_code_enhancer=False))
    caps = caption_faces(sample_attributes(3, generator=torch.Generator().manual_seed(0)), seed=0)
    text = encoders.text.encode(caps)
    seen = []
    w, times = optimise_style_codes(g, encoders.image, text, steps=15, lr=0.1, callback=lambda s, w: seen.append(s))
    assert w.shape == (3, 64) and len(times) == 15 and seen == list(range(1, 16))

    def sim(w):
        with torch.no_grad():
            emb, _ = encoders.image(g.synthesis(w, torch.zeros(3)).image)
        return float((emb * torch.nn.functional.normalize(text.global_, dim=-1)).sum(-1).mean())

    assert sim(w) > sim(g.mapping.w_avg.expand(3, -1)) + 0.05
    with pytest.raises(ValueError, match="generator"):
        optimise_style_codes(E3FaceNetGenerator(), encoders.image, text, steps=1)
    assert time_direct_generation(g, encoders.text, caps, repeats=2) > 0
