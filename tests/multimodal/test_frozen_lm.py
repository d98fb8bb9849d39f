"""The shared frozen backbones of issue 18: text-only pre-training, freezing, memoisation, patch features."""

from __future__ import annotations

import pytest
import torch

from icml24.language import TransformerLM, WordTokenizer
from icml24.multimodal.frozen_lm import (
    SceneEncoder,
    SceneEncoderConfig,
    SceneLMConfig,
    pretrain_scene_encoder,
    pretrain_scene_lm,
    qa_prompt,
    scene_lm_documents,
    scene_tokenizer,
)
from icml24.multimodal.scenes import SceneConfig, generate_scenes

SCENES = SceneConfig(image_size=16, grid=2, max_objects=2)
LM = SceneLMConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=64, steps=30, batch_size=8, pool=64, scenes=SCENES)
ENC = SceneEncoderConfig(patch_size=4, dim=8, depth=1, num_heads=2, mlp_dim=16, steps=20, batch_size=16, scenes=SCENES)


def test_documents_cover_every_word_and_three_kinds() -> None:
    batch = generate_scenes(200, config=SCENES, seed=0)
    docs = scene_lm_documents(batch, seed=0)
    tok = scene_tokenizer(SCENES)
    assert all(tok.unk_id not in tok.encode(d) for d in docs)
    with_caption_and_answer = [d for d, c, q in zip(docs, batch.captions, batch.questions, strict=True)
                               if d.startswith(c) and q in d]
    caption_only = [d for d, c in zip(docs, batch.captions, strict=True) if d == c]
    qa_only = [d for d, q in zip(docs, batch.questions, strict=True) if d.startswith(q)]
    assert len(with_caption_and_answer) + len(caption_only) + len(qa_only) == len(docs)
    assert min(len(with_caption_and_answer), len(caption_only), len(qa_only)) > 20
    assert qa_prompt("how many objects are there ?") == "how many objects are there ?"


def test_pretrained_lm_is_frozen_memoised_and_learned_something() -> None:
    lm, tok = pretrain_scene_lm(LM, seed=0)
    assert isinstance(lm, TransformerLM) and isinstance(tok, WordTokenizer)
    assert not any(p.requires_grad for p in lm.parameters()) and not lm.training
    again, _ = pretrain_scene_lm(LM, seed=0)
    assert again is not lm  # a fresh copy each call, the same weights
    for a, b in zip(lm.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)
    # the loss fell below the uniform-guess cross-entropy log(V)
    assert lm.pretrain_loss < torch.log(torch.tensor(float(tok.vocab_size))).item()
    lm.layers[0].mlp = torch.nn.Identity()  # patching a copy leaves the cached model alone
    third, _ = pretrain_scene_lm(LM, seed=0)
    assert not isinstance(third.layers[0].mlp, torch.nn.Identity)


def test_encoder_gives_patch_features() -> None:
    enc = pretrain_scene_encoder(ENC, seed=0)
    assert isinstance(enc, SceneEncoder) and enc.num_patches == ENC.num_patches == 16 and enc.feature_dim == 8
    assert not any(p.requires_grad for p in enc.parameters())
    images = torch.from_numpy(generate_scenes(3, config=SCENES, seed=1).images)
    assert enc(images).shape == (3, 16, 8)


@pytest.mark.parametrize("kwargs", [{"d_model": 0}, {"lr": -1.0}, {"d_model": 12, "n_heads": 4}, {"scenes": 3}])
def test_lm_config_rejects_bad_values(kwargs) -> None:
    with pytest.raises((ValueError, TypeError), match=next(iter(kwargs)) if "n_heads" not in kwargs else "d_model"):
        SceneLMConfig(**kwargs)


def test_encoder_config_rejects_bad_patch() -> None:
    with pytest.raises(ValueError, match="patch_size"):
        SceneEncoderConfig(patch_size=5)
    with pytest.raises(TypeError, match="config"):
        pretrain_scene_encoder("x")
    with pytest.raises(ValueError, match="seed"):
        pretrain_scene_lm(LM, seed=-1)
