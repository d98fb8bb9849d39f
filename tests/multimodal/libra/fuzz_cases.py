"""Fuzz cases for the Libra entry points (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.language import TransformerConfig, TransformerLM, WordTokenizer
from icml24.multimodal.libra import (
    CaptionTrainConfig,
    LibraConfig,
    LibraKVCache,
    LibraLinear,
    LibraModel,
    LibraOutput,
    LLaVAStyleModel,
    PatchTokenizer,
    VisualInputEmbedding,
    build_caption_batch,
    caption_scores,
    evaluate_captions,
    generate_captions,
    image_patches,
    libra_loss,
    parse_caption,
    prepare_caption_data,
    route,
    text_only_loss,
    train_captioner,
)
from icml24.multimodal.scenes import SceneConfig, generate_scenes, scene_vocabulary

SCENES = SceneConfig(image_size=16, grid=2, max_objects=1)
BATCH = generate_scenes(6, config=SCENES, seed=0)
TOK = WordTokenizer(scene_vocabulary(SCENES))
torch.manual_seed(0)
LM = TransformerLM(TransformerConfig(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_seq_len=64))
FEATS = image_patches(BATCH.images, 8)
PT = PatchTokenizer(n_codes=3, n_codebooks=2).fit(FEATS)
CFG = LibraConfig(codebook_size=3, feature_dim=FEATS.shape[-1], max_vision_tokens=5, bridge_rank=2)
MODEL = LibraModel(LM, config=CFG)
DATA = prepare_caption_data(BATCH, FEATS, PT, TOK)
CODES = torch.zeros(2, 4, 2, dtype=torch.long)
VFEAT = torch.rand(2, 4, FEATS.shape[-1])
TEXT = torch.ones(2, 3, dtype=torch.long)
CB = build_caption_batch(CODES, VFEAT, TEXT, boi_id=3)
OUT = LibraOutput(torch.randn(2, 8, 5), torch.randn(2, 8, 2, 3))
TINY_TRAIN = CaptionTrainConfig(steps=1, batch_size=2)
NOT_INT = [-1, 0, 1.5, True, "2"]

FUZZ_CASES = [
    dict(fn=LibraConfig, kwargs={"codebook_size": 8},
         invalid={"down_ratio": NOT_INT, "bridge_rank": [0, 2.5], "n_codebooks": [0], "codebook_size": [0, None],
                  "feature_dim": [-3], "use_bridge": [1, "yes"], "use_codes": [None], "use_features": [0],
                  "vision_loss_weight": [-1.0, "w", True], "max_vision_tokens": [0],
                  "use_position_embedding": ["no"]}),
    dict(fn=LibraLinear, args=(8, 4), kwargs={"down_ratio": 2},
         invalid={"in_features": NOT_INT, "out_features": [0, 2.0], "down_ratio": [0, 8, 1.5], "rank": [0, -2, 1.5]}),
    dict(fn=LibraKVCache, args=(2,), invalid={"n_layers": NOT_INT}),
    dict(fn=VisualInputEmbedding, args=(16, CFG), invalid={"d_model": [0, 15, 2.0], "config": ["c", None]}),
    dict(fn=LibraModel, args=(LM,), kwargs={"config": CFG},
         invalid={"language_model": ["lm", None, torch.nn.Linear(2, 2)], "config": [{}, "cfg"],
                  "freeze_language_model": [1, "yes"]}),
    dict(fn=LLaVAStyleModel, args=(LM,), kwargs={"config": CFG, "projector_hidden": 4},
         invalid={"language_model": [None, 3], "config": ["c"], "projector_hidden": [-1, 2.5, True],
                  "freeze_language_model": [None]}),
    dict(fn=route, args=(torch.randn(2, 3, 4), torch.tensor([[True, False, True], [False, False, True]]),
                         torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)),
         invalid={"x": [torch.randn(4), "x"], "flag": [torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.bool)]}),
    dict(fn=libra_loss, args=(OUT, torch.zeros(2, 8, dtype=torch.long), torch.zeros(2, 8, 2, dtype=torch.long)),
         kwargs={"vision_loss_weight": 0.5},
         invalid={"output": [(1, 2), None], "text_labels": [torch.zeros(2, 7, dtype=torch.long), "l"],
                  "vision_labels": [torch.zeros(2, 8, dtype=torch.long)],
                  "vision_loss_weight": [-1.0, "w", True]}),
    dict(fn=image_patches, args=(BATCH.images, 8),
         invalid={"images": [BATCH.images[0], np.zeros((0, 3, 16, 16), np.float32), "img"],
                  "patch_size": [0, 5, 2.0, True]}),
    dict(fn=PatchTokenizer, kwargs={"n_codes": 4},
         invalid={"n_codes": NOT_INT, "n_codebooks": [0], "random_state": [1.5, None], "max_fit_vectors": [0]}),
    dict(fn=PT.fit, args=(FEATS,), invalid={"features": [FEATS[0], "f", np.zeros((1, 1, 48), np.int64)]}),
    dict(fn=PT.transform, args=(FEATS,), invalid={"features": [FEATS[..., :5], None]}),
    dict(fn=build_caption_batch, args=(CODES, VFEAT, TEXT), kwargs={"boi_id": 3},
         invalid={"codes": [CODES.float(), CODES[0], "c"], "features": [VFEAT[:, :2], VFEAT.long()],
                  "text_ids": [TEXT[0], TEXT.float()], "text_mask": [torch.ones(2, 2)], "boi_id": [-1, 1.5, None]}),
    dict(fn=parse_caption, args=("a big red box at the top left", SCENES),
         invalid={"text": [None, 3], "config": ["cfg", None]}),
    dict(fn=caption_scores, args=(BATCH.captions, BATCH), invalid={"captions": [BATCH.captions[:2], "a caption"]}),
    dict(fn=CaptionTrainConfig, kwargs={"steps": 10},
         invalid={"steps": NOT_INT, "batch_size": [0], "lr": [0.0, -1.0, "x"], "weight_decay": [-0.1],
                  "warmup_fraction": [-0.1, 1.5, "w"], "grad_clip": [0.0], "vision_loss_weight": [-2.0]}),
    dict(fn=prepare_caption_data, args=(BATCH, FEATS, PT, TOK),
         invalid={"scenes": ["s", None], "features": [FEATS[:2], FEATS[0]], "patch_tokenizer": [None],
                  "tokenizer": ["t"]}),
    dict(fn=train_captioner, args=(MODEL, DATA, TINY_TRAIN), kwargs={"seed": 0},
         invalid={"model": [LM, "m"], "data": [BATCH, None], "config": [{}], "seed": [1.5, None]}),
    dict(fn=generate_captions, args=(MODEL, DATA, TOK), kwargs={"max_new_tokens": 2},
         invalid={"model": [None], "data": ["d"], "max_new_tokens": [0, 1.5], "batch_size": [0, None]}),
    dict(fn=evaluate_captions, args=(MODEL, DATA, TOK), kwargs={"max_new_tokens": 2},
         invalid={"model": [LM], "data": [None], "max_new_tokens": [-1]}),
]

EXEMPT = {
    "CaptionBatch": "a plain dataclass of tensors that build_caption_batch (fuzzed) makes and checks",
    "CaptionData": "a plain dataclass of tensors that prepare_caption_data (fuzzed) makes and checks",
    "LibraOutput": "a NamedTuple of model outputs; libra_loss (fuzzed) checks what it is given",
}

FUZZ_CASES.append(dict(fn=text_only_loss, args=(MODEL, TOK, BATCH.captions), kwargs={"batch_size": 4},
                       invalid={"model": ["m", None], "tokenizer": [None], "texts": ["a caption", []],
                                "batch_size": [0, 1.5]}))
