"""Fuzz cases for the Uni-Med entry points (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.multimodal.uni_med import (
    IntentGuidedAttention,
    MedVQAConfig,
    MedVQATransformer,
    ToyMedVQAConfig,
    TrainConfig,
    blank_patches,
    closest_candidate,
    deletion_test,
    evaluate_vqa,
    evidence_attention_share,
    intent_key_scale,
    make_toy_med_vqa,
    parse_intent,
    pretrain_image_encoder,
    question_tokenizer,
    similarity_evidence,
    token_cutmix,
    train_vqa,
)

DATA = make_toy_med_vqa(8, seed=0)
torch.manual_seed(0)
MODEL = MedVQATransformer(dim=8, num_heads=2, mlp_dim=8, max_question_len=DATA.questions.shape[1])
G = torch.Generator().manual_seed(0)
VISUAL = torch.randn(4, 6, 3, generator=G)
EVIDENCE = torch.rand(4, 6, generator=G) < 0.5
WORDS = torch.randn(4, 2, 3, generator=G)
QUESTIONS = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
INTENT = torch.tensor([[True, True, False, False], [False, True, False, False]])
IMAGES = np.ones((2, 1, 8, 8), np.float32)
PATCHES = np.array([[True, False, False, False], [False, True, True, False]])
NOT_DATA = ["data", None, DATA.images]
NOT_MODEL = ["model", None, torch.nn.Linear(2, 2)]

FUZZ_CASES = [
    dict(fn=make_toy_med_vqa, args=(6,), kwargs={"seed": 1},
         invalid={"n": [0, -3, 2.5, "6", True], "seed": ["0", 1.5], "config": ["cfg", {"distractor_words": 2}],
                  "max_question_len": [2, 0, "x"]}),
    dict(fn=ToyMedVQAConfig, kwargs={},
         invalid={"image_size": [8, 16.0, True], "patch_size": [0, 5, 2.0], "distractor_words": [-1, 1.5],
                  "lesion_rate": [-0.1, 1.5, "a"], "noise": [-0.1, 1.0, "a"], "confuser_rate": [2.0, -1]}),
    dict(fn=parse_intent, args=("a <real_intention>b c</real_intention> d",),
         invalid={"text": [None, 3, "<real_intention>open", "a</real_intention>", "x<real_intention>y</real_intention>z"]}),
    dict(fn=closest_candidate, args=("yes", ["yes", "no"]),
         invalid={"prediction": [None, 1], "candidates": [[], "yes", [1, 2]]}),
    dict(fn=question_tokenizer, args=()),
    dict(fn=MedVQAConfig, kwargs={},
         invalid={"dim": [0, 7.5, True], "num_heads": [0, 5], "patch_size": [3, 0], "image_size": [0, "16"],
                  "fusion_layers": [0], "image_layers": [0], "dropout": [1.0, -0.1, "a"],
                  "intent_alpha": [-0.1, 1.5, "a", True], "max_question_len": [0], "num_answers": [0],
                  "vocab_size": [0], "mlp_dim": [0], "in_channels": [0]}),
    dict(fn=MedVQATransformer, kwargs={"config": MedVQAConfig(dim=8, num_heads=2, mlp_dim=8)},
         invalid={"config": ["cfg", {"dim": 8}]}),
    dict(fn=IntentGuidedAttention, kwargs={"dim": 8, "num_heads": 2},
         invalid={"dim": [0, 7, 2.5], "num_heads": [0, 3], "dropout": [1.0, -0.5, "x"]}),
    dict(fn=intent_key_scale, args=(QUESTIONS, INTENT, 0.01, 2),
         invalid={"questions": [None, QUESTIONS[0]], "intent_mask": [INTENT[:, :2], "m"],
                  "alpha": [-0.5, 2.0, "a"], "num_prefix": [-1, 1.5]}),
    dict(fn=token_cutmix, args=(VISUAL, EVIDENCE), kwargs={"p": 0.5, "generator": G},
         invalid={"visual": [VISUAL[0], VISUAL.long(), None], "evidence": [EVIDENCE[:, :3], None],
                  "p": [-0.1, 1.5, "a", True], "fill": ["noise"]}),
    dict(fn=similarity_evidence, args=(VISUAL, WORDS), kwargs={"top_k": 2},
         invalid={"visual": [VISUAL[0], None], "words": [WORDS[:, :, :2], WORDS[:2], None],
                  "word_mask": [torch.ones(4, 3, dtype=torch.bool), "m"], "top_k": [0, 7, 1.5]}),
    dict(fn=TrainConfig, kwargs={},
         invalid={"epochs": [0, 1.5], "batch_size": [0, "8"], "lr": [0.0, 1.5, "a"], "weight_decay": [-1.0, 2.0],
                  "warmup_ratio": [-0.1, 1.1], "cutmix_p": [-0.1, 1.1, "a"], "cutmix_fill": ["noise"]}),
    dict(fn=train_vqa, args=(MODEL, DATA), kwargs={"config": TrainConfig(epochs=1, batch_size=8), "seed": 0},
         invalid={"model": NOT_MODEL, "data": NOT_DATA, "config": ["cfg", {"epochs": 1}], "seed": ["0", 0.5]}),
    dict(fn=pretrain_image_encoder, args=(MODEL, DATA), kwargs={"steps": 2, "batch_size": 4, "seed": 0},
         invalid={"model": NOT_MODEL, "data": NOT_DATA, "steps": [0, 1.5], "batch_size": [0, "4"],
                  "lr": [0.0, 2.0, "a"], "seed": ["0", 0.5]}),
    dict(fn=evaluate_vqa, args=(MODEL, DATA),
         invalid={"model": NOT_MODEL, "data": NOT_DATA, "batch_size": [0, 2.5]}),
    dict(fn=evidence_attention_share, args=(MODEL, DATA), invalid={"model": NOT_MODEL, "data": NOT_DATA}),
    dict(fn=deletion_test, args=(MODEL, DATA), kwargs={"seed": 0},
         invalid={"model": NOT_MODEL, "data": NOT_DATA, "seed": ["0", 1.5]}),
    dict(fn=blank_patches, args=(IMAGES, PATCHES, 4),
         invalid={"images": [IMAGES[0], None], "patches": [PATCHES[:1], None], "patch_size": [3, 0, 4.0]}),
]

EXEMPT = {
    "ToyMedVQA": "a frozen container of the generator's arrays (fields only, no checks of its own); every function "
    "that takes one checks its type and the arrays' shapes are those make_toy_med_vqa writes",
}
