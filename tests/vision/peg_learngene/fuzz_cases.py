"""Fuzz cases for PEG's public API (see tests/test_fuzz_api.py)."""

import torch

from icml24.vision.peg_learngene import (
    DescendantSpec,
    ExpandedFFNStack,
    ExpansionMap,
    LearngeneAttention,
    TrainConfig,
    accuracy,
    build_descendant,
    descendant_parameter_count,
    digits_split,
    mix,
    mixture_matrix,
    train_classifier,
)
from icml24.vision.tiny_vit import TinyViT

torch.manual_seed(0)
ANCESTRY = TinyViT(image_size=4, patch_size=2, num_classes=3, dim=8, depth=2, num_heads=2, mlp_dim=8, dropout=0.0)
SPEC = DescendantSpec(learngene_heads=1, learngene_layers=1, descendant_heads=2, descendant_layers=2)
W = torch.randn(4, 3, 5)
P = mixture_matrix(2, 4, generator=torch.Generator().manual_seed(0))
TOKENS = torch.randn(2, 4, 8)
IMAGES = torch.rand(6, 1, 4, 4, generator=torch.Generator().manual_seed(2))
LABELS = torch.tensor([0, 1, 2, 0, 1, 2])


def map_forward(x, dim=-1):
    """ExpansionMap(n_in=3, n_out=5)(x, dim)."""
    return ExpansionMap(n_in=3, n_out=5)(x, dim=dim)


def attention_forward(x):
    """LearngeneAttention(dim=8, head_dim=4, learngene_heads=1, descendant_heads=2)(x)."""
    return LearngeneAttention(dim=8, head_dim=4, learngene_heads=1, descendant_heads=2)(x)


def stack_layer(fc1_weight, fc1_bias):
    """ExpandedFFNStack of 2 learngene layers (width 8, hidden 8) mapped to 3 layers, and its layer 0."""
    stack = ExpandedFFNStack(fc1_weight=fc1_weight, fc1_bias=fc1_bias, fc2_weight=torch.zeros(2, 8, 8),
                             fc2_bias=torch.zeros(2, 8), depth_map=ExpansionMap(n_in=2, n_out=3, copy="stretch"))  # fmt: skip
    return stack.layer(0)


def _model():
    return build_descendant(ANCESTRY, SPEC, "peg", num_classes=3, generator=torch.Generator().manual_seed(0))


def train_small(x, y, x_test=None, y_test=None):
    """train_classifier on a fresh PEG descendant for one epoch."""
    return train_classifier(_model(), x, y, config=TrainConfig(epochs=1, batch_size=3), x_test=x_test, y_test=y_test,
                            generator=torch.Generator().manual_seed(0))  # fmt: skip


FUZZ_CASES = [
    dict(fn=mixture_matrix, args=(2, 3), kwargs={"kind": "gaussian"},
         invalid={"n_out": [0, 2.5, "2", True], "n_in": [0, -1, None], "kind": ["beta", None],
                  "generator": [0, "g"]}),
    dict(fn=mix, args=(W, P), kwargs={"dim": 0},
         invalid={"weights": [W[:2], "w", None], "mixture": [P[0], P[:, :3], None], "dim": [3, -4]}),
    dict(fn=ExpansionMap, kwargs={"n_in": 2, "n_out": 3},
         invalid={"n_in": [0, 1.5, "2"], "n_out": [0, None], "init": ["zeros", None], "copy": ["nearest", 1],
                  "bias": [1, "yes"], "generator": [1]}),
    dict(fn=map_forward, args=(torch.randn(2, 3),), invalid={"x": [torch.randn(2, 4), torch.tensor(1.0), "x", None],
                                                             "dim": [2, -3]},
         allowed={"x": "a forward pass propagates NaN like any torch layer (a finiteness check would cost a device "
                       "sync per call)"}),  # fmt: skip
    dict(fn=LearngeneAttention, kwargs={"dim": 8, "head_dim": 4, "learngene_heads": 1, "descendant_heads": 2},
         invalid={"dim": [0, 8.0, "8"], "head_dim": [0, None], "learngene_heads": [0, 1.5],
                  "descendant_heads": [0, "2"], "expand": ["yes", None, False], "map_init": ["zeros"],
                  "proj_drop": [-0.1, 1.0, "0"], "generator": ["g"]}),
    dict(fn=attention_forward, args=(TOKENS,), invalid={"x": [TOKENS[..., :4], TOKENS[0], "x", None]},
         allowed={"x": "a forward pass propagates NaN like any torch layer (a finiteness check would cost a device "
                       "sync per call)"}),  # fmt: skip
    dict(fn=stack_layer, args=(torch.zeros(2, 8, 8), torch.zeros(2, 8)),
         invalid={"fc1_bias": [torch.zeros(3, 8), "b"], "fc1_weight": [torch.zeros(3, 8, 8), None]},
         covers=("ExpandedFFNStack",)),
    dict(fn=DescendantSpec, invalid={"learngene_heads": [0, 1.5, "2"], "learngene_layers": [0, None],
                                     "descendant_heads": [-1, True], "descendant_layers": [0, 2.0]}),
    dict(fn=build_descendant, args=(ANCESTRY, SPEC, "peg"), kwargs={"num_classes": 3},
         invalid={"ancestry": ["model", None, torch.nn.Linear(2, 2)], "spec": [None, (1, 1, 2, 2)],
                  "method": ["bogus", None], "num_classes": [0, 2.5], "generator": [3],
                  "dropout": [-0.1, 1.0, "0.1"], "mixture_kind": ["beta"]}),
    dict(fn=descendant_parameter_count,
         kwargs={"dim": 8, "head_dim": 4, "mlp_dim": 8, "patch_size": 2, "in_channels": 1, "num_tokens": 4,
                 "num_classes": 3, "spec": SPEC, "expanded": True},
         invalid={"dim": [0, "8"], "head_dim": [0], "mlp_dim": [-1], "patch_size": [0], "in_channels": [0],
                  "num_tokens": [0], "num_classes": [0], "spec": [None], "expanded": ["yes"],
                  "map_hidden": [0], "depth_hidden": [-2]}),
    dict(fn=TrainConfig, invalid={"epochs": [0, 2.5, "3"], "batch_size": [0, None], "lr": [0.0, -1.0, "1"],
                                 "weight_decay": [-1.0, "0"], "min_lr": [-1e-5, None]}),
    dict(fn=train_small, args=(IMAGES, LABELS),
         invalid={"x": [IMAGES[:3], IMAGES[:, 0], "x", None], "y": [LABELS[:3], LABELS.float(), None],
                  "x_test": [IMAGES[:, 0]], "y_test": [LABELS]},
         covers=("train_classifier",)),
    dict(fn=accuracy, args=(ANCESTRY, IMAGES, LABELS),
         invalid={"model": ["m", None], "x": [IMAGES[:2], None], "y": [LABELS.float(), "y"],
                  "batch_size": [0, 1.5]}),
    dict(fn=digits_split, args=(0,), kwargs={"shots": 5},
         invalid={"seed": [1.5, "0", None], "shots": [0, 2.5, 200], "ancestry_classes": [(), (11,), tuple(range(10))],
                  "ancestry_test_fraction": [0.0, 1.0, "0.2"]}),
]
