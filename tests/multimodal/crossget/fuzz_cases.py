"""Fuzz cases for the CrossGET entry points (see tests/test_fuzz_api.py)."""

import torch

from icml24.multimodal.crossget import (
    CLIPTrainConfig,
    MergeConfig,
    MergePlan,
    SceneTextEncoder,
    TinyCLIP,
    TinyCLIPConfig,
    bipartite_soft_matching,
    complete_graph_soft_matching,
    content_ids,
    contrastive_loss,
    cross_guided_importance,
    evaluate_retrieval,
    js_alignment_loss,
    merge_tokens,
    random_drop,
    retrieval_recall,
    train_clip,
)
from icml24.multimodal.scenes import SceneConfig, generate_scenes

SCENES = SceneConfig(image_size=16, max_objects=1)
TEXT = SceneTextEncoder(SCENES)
SMALL = TinyCLIPConfig(vocab_size=TEXT.vocab_size, image_size=16, vision_width=16, vision_layers=1, vision_heads=2,
                       vision_mlp=16, text_width=16, text_layers=1, text_heads=2, embed_dim=8)  # fmt: skip
torch.manual_seed(0)
MODEL = TinyCLIP(config=SMALL).eval()
BATCH = generate_scenes(6, config=SCENES, seed=0)
METRIC = torch.randn(2, 9, 4)
PROT = torch.zeros(9, dtype=torch.bool)
PROT[0] = PROT[-1] = True
PLAN = complete_graph_soft_matching(METRIC, 2, protected=PROT)
FEATS = torch.randn(4, 8)
NOT_A_TENSOR = [[1.0, 2.0], "x", None]

FUZZ_CASES = [
    dict(fn=bipartite_soft_matching, args=(METRIC, 2), kwargs={"protected": PROT},
         invalid={"metric": [torch.randn(9, 4), "m"], "r": [-1, 1.5, True],
                  "protected": [torch.zeros(8, dtype=torch.bool), torch.zeros(9)]}),
    dict(fn=complete_graph_soft_matching, args=(METRIC, 2),
         kwargs={"protected": PROT, "importance": torch.rand(2, 9)},
         invalid={"metric": [torch.randn(2, 9)], "r": [-2, "2"], "importance": [torch.rand(9), "i"],
                  "protected": [torch.ones(2, 8, dtype=torch.bool)]}),
    dict(fn=cross_guided_importance, args=(torch.randn(2, 9, 4), torch.randn(2, 4)),
         invalid={"keys": [torch.randn(9, 4), *NOT_A_TENSOR], "cross_query": [torch.randn(2, 3), "q"]}),
    dict(fn=random_drop, args=(2, 9, 2), kwargs={"protected": PROT},
         invalid={"batch": [-1, 2.0], "tokens": [-3, None], "r": [-1, 0.5], "protected": [torch.zeros(9)]}),
    dict(fn=merge_tokens, args=(torch.randn(2, 9, 3), torch.ones(2, 9), PLAN),
         invalid={"x": [torch.randn(2, 8, 3), torch.randn(9, 3), "x"], "size": [torch.ones(2, 8), None],
                  "plan": ["plan", None]}),
    dict(fn=TinyCLIPConfig, kwargs={"vocab_size": 30},
         invalid={"vocab_size": [0, 2.5], "patch_size": [5, 0], "vision_width": [-1], "text_layers": [3],
                  "pixel_std": [0.0, -1.0], "vision_heads": [5]}),
    dict(fn=MergeConfig, kwargs={"method": "tome", "r": 4},
         invalid={"method": ["prune", None], "r": [-1, 1.5], "tome_metric": ["median"]}),
    dict(fn=TinyCLIP, kwargs={"config": SMALL}, invalid={"config": ["cfg", None, {}]}),
    dict(fn=MODEL.encode_image, args=(torch.from_numpy(BATCH.images),), kwargs={"merge": MergeConfig(method="tome", r=2)},
         invalid={"images": [torch.rand(6, 16, 16), torch.rand(6, 3, 8, 8), "img"], "merge": ["tome", 3]}),
    dict(fn=MODEL.encode_text, args=(TEXT.encode(BATCH.captions)[0],),
         invalid={"input_ids": [torch.zeros(2, 3), torch.full((2, 3), 10_000), torch.zeros(3, dtype=torch.int64)],
                  "attention_mask": [torch.ones(2, 2)]}),
    dict(fn=contrastive_loss, args=(FEATS, torch.randn(4, 8), torch.tensor(2.0)),
         invalid={"image_features": [torch.randn(4), "f"], "text_features": [torch.randn(3, 8)],
                  "content_ids": [torch.arange(3)]}),
    dict(fn=js_alignment_loss, args=(FEATS, torch.randn(4, 8)),
         invalid={"image_cross": [torch.randn(8), None], "text_cross": [torch.randn(4, 7)]}),
    dict(fn=retrieval_recall, args=(FEATS, torch.randn(4, 8), torch.arange(4)),
         invalid={"image_features": [torch.randn(4)], "text_features": [torch.randn(3, 8)],
                  "ids": [torch.arange(3), "ids"], "ks": [(0,), (), (1.5,)]}),
    dict(fn=SceneTextEncoder, kwargs={"config": SCENES}, invalid={"config": ["scenes", 3]}),
    dict(fn=TEXT.encode, args=(["a red box"],), invalid={"captions": ["a red box", [], [3]]}),
    dict(fn=content_ids, args=(BATCH,), invalid={"batch": [None, "b", [1, 2]]}),
    dict(fn=CLIPTrainConfig, kwargs={"steps": 1},
         invalid={"steps": [0, 1.5], "batch_size": [-1], "lr": [0.0, -1.0], "warmup": [-1],
                  "weight_decay": [-0.1], "js_weight": [1.5, -0.1]}),
    dict(fn=train_clip, args=(MODEL,),
         kwargs={"scenes": SCENES, "text": TEXT, "config": CLIPTrainConfig(steps=1, batch_size=4), "seed": 0},
         invalid={"model": ["m", None], "scenes": [None], "text": ["t"], "config": [{}], "seed": [-1, 1.5],
                  "merge": ["tome"]}),
    dict(fn=evaluate_retrieval, args=(MODEL, BATCH, TEXT),
         invalid={"model": [None], "batch": ["b"], "text": [None], "merge": ["tome"], "timing_repeats": [-1, 0.5]}),
]

EXEMPT = {"MergePlan": "a plain record returned by the matching rules; merge_tokens checks it against the tokens "
          "(covered by the merge_tokens case)"}  # fmt: skip
_ = MergePlan
