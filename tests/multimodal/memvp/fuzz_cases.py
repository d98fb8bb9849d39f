"""Fuzz cases for the MemVP entry points and the shared frozen backbones (see tests/test_fuzz_api.py)."""

import torch
from torch import nn

from icml24.language import TransformerConfig, TransformerLM
from icml24.language.training import IGNORE_INDEX
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
from icml24.multimodal.memvp import (
    FineTuneConfig,
    InputSpaceConfig,
    InputSpacePrompting,
    LMBackend,
    MemoryFFN,
    MemVP,
    MemVPConfig,
    VisualProjector,
    VQAData,
    backend_of,
    evaluate_vqa,
    finetune_vqa,
    make_vqa_data,
    memory_flops_per_token,
    time_generation,
    time_train_step,
)
from icml24.multimodal.memvp.memory import _MemoryState
from icml24.multimodal.scenes import SceneConfig, generate_scenes
from icml24.vision.tiny_vit import TinyViT

SCENES = SceneConfig(image_size=16, grid=2, max_objects=2)
TOK = scene_tokenizer(SCENES)
CFG = TransformerConfig(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_seq_len=64)
C = 8


def _lm() -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(CFG).eval()


torch.manual_seed(0)
MEMVP = MemVP(_lm(), config=MemVPConfig(feature_dim=C, num_slots=20))
INPUT = InputSpacePrompting(_lm(), config=InputSpaceConfig(feature_dim=C))
BATCH = generate_scenes(8, config=SCENES, seed=0)
ENCODER = SceneEncoder(TinyViT(image_size=16, patch_size=4, in_channels=3, dim=C, depth=1, num_heads=2, mlp_dim=8))
DATA = make_vqa_data(BATCH, TOK, ENCODER)
IDS = torch.randint(5, CFG.vocab_size, (2, 4))
FEATS = torch.randn(2, 4, C)
LABELS = torch.full_like(IDS, IGNORE_INDEX)
LABELS[:, -1] = 5
STATE = _MemoryState()
NAN_FEATS = torch.full((2, 4, C), float("nan"))
TINY_LM = SceneLMConfig(d_model=8, n_layers=1, n_heads=2, max_seq_len=32, steps=2, batch_size=2, pool=8, scenes=SCENES)
TINY_ENC = SceneEncoderConfig(patch_size=8, dim=4, depth=1, num_heads=2, mlp_dim=4, steps=2, batch_size=2, scenes=SCENES)

FUZZ_CASES = [
    dict(fn=MemVPConfig, kwargs={"feature_dim": C},
         invalid={"feature_dim": [0, 1.5, True], "num_slots": [0, "m"], "projector_hidden": [-1], "scale": [-0.1, "s"],
                  "feature_scale": [-1.0], "dropout": [1.0, -0.1], "activation": ["tanh", None],
                  "position_embedding": ["yes"], "value_offset": [1], "position_init_std": [-0.02]}),
    dict(fn=InputSpaceConfig, kwargs={"feature_dim": C},
         invalid={"feature_dim": [0], "projector_hidden": [1.5], "lora_rank": [-1, 2.5], "lora_alpha": [0.0, "a"],
                  "lora_dropout": [1.0, -0.5], "lora_targets": ["q_proj", (), (3,)]}),
    dict(fn=FineTuneConfig, kwargs={"steps": 2},
         invalid={"steps": [0, 1.5], "batch_size": [-1], "lr": [0.0, -1.0], "weight_decay": [-0.1],
                  "warmup_fraction": [1.5, -0.1]}),
    dict(fn=VisualProjector, kwargs={"in_features": C, "hidden": 4, "out_features": 16},
         invalid={"in_features": [0, 2.0], "hidden": [-1], "out_features": [None]}),
    dict(fn=MemoryFFN, args=(nn.Identity(), STATE), kwargs={"scale": 0.1, "dropout": 0.0},
         invalid={"ffn": ["f", None], "state": [None, {}], "scale": [-1.0], "dropout": [1.5], "activation": ["tanh"]}),
    dict(fn=memory_flops_per_token, args=(20, 64), invalid={"num_slots": [0, 1.5], "hidden_size": [-1, "d"]}),
    dict(fn=LMBackend, args=(_lm(),), invalid={"lm": ["lm", None, nn.Linear(2, 2)]}),
    dict(fn=backend_of, args=(_lm(),), invalid={"lm": ["lm", nn.Sequential()]}),
    dict(fn=MemVP, args=(_lm(),), kwargs={"config": MemVPConfig(feature_dim=C)},
         invalid={"lm": ["lm", nn.Linear(2, 2)], "config": [None, InputSpaceConfig(), {}]}),
    dict(fn=MEMVP.forward, args=(IDS, FEATS),
         invalid={"input_ids": [IDS.float(), IDS[0], "ids"], "features": [FEATS[:, :, :3], torch.randn(2, 21, C),
                                                                         FEATS.long(), NAN_FEATS, "f"],
                  "image_present": [torch.zeros(3), "yes"], "attention_mask": [torch.ones(2, 2)]}),
    dict(fn=MEMVP.generate, args=(IDS, FEATS), kwargs={"max_new_tokens": 2},
         invalid={"max_new_tokens": [0, 1.5], "input_ids": [IDS.float()], "features": [FEATS[:1]]}),
    dict(fn=InputSpacePrompting, args=(_lm(),), kwargs={"config": InputSpaceConfig(feature_dim=C, lora_rank=0)},
         invalid={"lm": ["lm"], "config": [MemVPConfig(), None]}),
    dict(fn=INPUT.forward, args=(IDS, FEATS),
         invalid={"input_ids": [IDS.float(), IDS[0]], "features": [FEATS[:1], FEATS[..., :2], NAN_FEATS, "f"]}),
    dict(fn=INPUT.generate, args=(IDS, FEATS), kwargs={"max_new_tokens": 2},
         invalid={"max_new_tokens": [-1, "2"], "input_ids": ["ids"]}),
    dict(fn=make_vqa_data, args=(BATCH, TOK, ENCODER),
         invalid={"batch": ["b", None], "tokenizer": [None, "tok"], "encoder": ["enc", 3], "chunk": [0, 1.5]}),
    dict(fn=finetune_vqa, args=(MEMVP, DATA, FineTuneConfig(steps=1, batch_size=2)),
         invalid={"model": [None, "m"], "data": ["d", BATCH], "config": [{}, None], "seed": [-1, 1.5],
                  "use_images": ["yes"]}),
    dict(fn=evaluate_vqa, args=(MEMVP, DATA), invalid={"model": [None], "data": ["d"], "batch_size": [0, 2.5]}),
    dict(fn=time_train_step, args=(MEMVP, IDS, torch.ones_like(IDS), FEATS, LABELS), kwargs={"repeats": 1},
         invalid={"model": [None], "input_ids": ["ids", IDS.float()], "labels": [LABELS[:, :2], None],
                  "repeats": [0, 1.5], "features": [NAN_FEATS]}),
    dict(fn=time_generation, args=(MEMVP, IDS, FEATS), kwargs={"max_new_tokens": 1, "repeats": 1},
         invalid={"model": ["m"], "input_ids": [IDS[0]], "max_new_tokens": [0], "repeats": [-1],
                  "features": [NAN_FEATS]}),
    # the shared frozen backbones (icml24.multimodal.frozen_lm)
    dict(fn=SceneLMConfig, kwargs={"steps": 2},
         invalid={"d_model": [0, 2.5], "n_layers": [-1], "n_heads": [3], "steps": [0], "lr": [0.0, -1.0],
                  "scenes": ["s", None], "pool": [0]}),
    dict(fn=SceneEncoderConfig, kwargs={"steps": 2},
         invalid={"patch_size": [5, 0], "dim": [-1], "num_heads": [5], "lr": [0.0], "scenes": [{}]}),
    dict(fn=pretrain_scene_lm, args=(TINY_LM,), kwargs={"seed": 0}, invalid={"config": ["c", 3], "seed": [-1, 0.5]}),
    dict(fn=pretrain_scene_encoder, args=(TINY_ENC,), kwargs={"seed": 0},
         invalid={"config": ["c", TINY_LM], "seed": [-1, "0"]}),
    dict(fn=SceneEncoder, args=(TinyViT(image_size=8, patch_size=4),), invalid={"vit": [nn.Linear(2, 2), None]}),
    dict(fn=scene_tokenizer, args=(SCENES,), invalid={"scenes": ["s", 3]}),
    dict(fn=scene_lm_documents, args=(BATCH,), kwargs={"seed": 0}, invalid={"batch": ["b", [1]], "seed": [-1]}),
    dict(fn=qa_prompt, args=("how many objects are there ?",), invalid={"question": [3, None]}),
]

EXEMPT = {
    "VQAData": "a plain record built by make_vqa_data (covered by that case and the functions that take it)",
    "SLUG": "a string, not a callable",
}
_ = VQAData
