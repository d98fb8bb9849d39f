"""Fuzz cases for the KEP-SVGP entry points and its uncertainty metrics (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.gp.kep_svgp import (
    KEPSVGPAttention,
    KEPSVGPConfig,
    TrainConfig,
    kep_layers,
    kep_svgp_loss,
    metrics,
    predict_proba,
    train_classifier,
)
from icml24.vision.tiny_vit import TinyViT

torch.manual_seed(0)
LAYER = KEPSVGPAttention(dim=8, num_heads=2, seq_len=4, rank=2, rank_multi=2)
TOKENS = torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(1))


def _model():
    torch.manual_seed(0)
    return TinyViT(image_size=4, patch_size=2, num_classes=3, dim=8, depth=1, num_heads=2, mlp_dim=8,
                   attention_factory=lambda i: KEPSVGPAttention(dim=8, num_heads=2, seq_len=4, rank=2, rank_multi=2))  # fmt: skip


MODEL = _model()
IMAGES = torch.rand(6, 1, 4, 4, generator=torch.Generator().manual_seed(2))
LABELS = torch.tensor([0, 1, 2, 0, 1, 2])
LOGITS = torch.randn(6, 3, generator=torch.Generator().manual_seed(3))
PROBS = np.full((6, 3), 1 / 3)
PROBS[:, 0] += 0.2
PROBS[:, 1:] -= 0.1
Y = np.array([0, 1, 2, 0, 1, 2])
BAD_PROBS = [PROBS[0], -PROBS, "p", None]
BAD_LABELS = [Y[:3], Y + 3, Y - 1, Y + 0.5, "y", None]


def attention_forward(x, noise=None):
    """KEPSVGPAttention(...)(x, noise=noise)."""
    return LAYER(x, noise=noise)


def loss_after_forward(logits, targets, eta_ksvd=0.1, eta_kl=0.01):
    """kep_svgp_loss on the layers of a model that just ran a forward pass."""
    MODEL(IMAGES)
    return kep_svgp_loss(logits, targets, kep_layers(MODEL), eta_ksvd=eta_ksvd, eta_kl=eta_kl)


def train_small(x, y, epochs=1, batch_size=3, lr=1e-3, weight_decay=0.0, warmup_epochs=1, min_lr=1e-5):
    """train_classifier on a fresh tiny KEP-SVGP ViT with TrainConfig(...)."""
    config = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                         warmup_epochs=warmup_epochs, min_lr=min_lr)  # fmt: skip
    return train_classifier(_model(), x, y, config=config, generator=torch.Generator().manual_seed(0))


FUZZ_CASES = [
    dict(fn=KEPSVGPAttention, kwargs={"dim": 8, "num_heads": 2, "seq_len": 4, "rank": 2, "rank_multi": 2},
         invalid={"dim": [0, 7, 8.0, "8", True], "num_heads": [0, 3, None], "seq_len": [0, -4, 4.5],
                  "rank": [0, "2"], "rank_multi": [0, None], "concat": ["yes", None], "qk_bias": [1, "no"],
                  "proj_drop": [-0.1, 1.0, float("nan"), "0.1"], "sample": ["yes", None]}),
    dict(fn=attention_forward, args=(TOKENS,),
         invalid={"x": [TOKENS[:, :3], TOKENS[..., :4], TOKENS[0], "x", None],
                  "noise": [torch.zeros(3, 2, 4, 2), "n"]}),
    dict(fn=KEPSVGPConfig, invalid={"rank": [0, 2.5, "2"], "rank_multi": [0, None], "concat": ["no"],
                                   "eta_ksvd": [-1.0, float("nan"), "1"], "eta_kl": [-0.1, float("inf"), None],
                                   "n_samples": [0, 1.5]}),
    dict(fn=TrainConfig, invalid={"epochs": [0, 2.5, "3"], "batch_size": [0, -1], "lr": [0.0, -1.0, float("nan")],
                                 "weight_decay": [-1.0, float("inf")], "warmup_epochs": [-1, 1.5],
                                 "min_lr": [-1e-5, float("nan"), "0"]}),
    dict(fn=kep_layers, args=(MODEL,), invalid={"model": ["model", None, [LAYER]]}),
    dict(fn=loss_after_forward, args=(LOGITS[:6], LABELS),
         invalid={"logits": [LOGITS[:3], LOGITS[:, 0], "l", None], "targets": [LABELS[:3], LABELS + 3, None],
                  "eta_ksvd": [-1.0, "1", None], "eta_kl": [-1.0, "1", None]}),
    dict(fn=kep_svgp_loss, args=(LOGITS, LABELS, []), kwargs={"eta_ksvd": 0.1, "eta_kl": 0.1},
         invalid={"layers": [None, "layers", [1, 2]]}),
    dict(fn=train_small, args=(IMAGES, LABELS),
         invalid={"x": [IMAGES[:3], "x", None], "y": [LABELS[:3], LABELS + 3, LABELS.float(), None],
                  "epochs": [0], "lr": [0.0]}),
    dict(fn=train_classifier, args=(_model(), IMAGES, LABELS),
         kwargs={"config": TrainConfig(epochs=1, batch_size=3), "generator": torch.Generator().manual_seed(0)},
         invalid={"model": [None, "m"], "config": [None, {"epochs": 1}], "generator": [None, 0],
                  "kep": ["kep", {"eta_kl": 1.0}]}),
    dict(fn=predict_proba, args=(MODEL, IMAGES),
         invalid={"model": [None, "m"], "x": [IMAGES[0], "x", None], "n_samples": [0, -1, 1.5, "2"],
                  "mc_dropout": ["yes", None], "batch_size": [0, 2.5]}),
    dict(fn=metrics.accuracy, args=(PROBS, Y), invalid={"probs": BAD_PROBS, "labels": BAD_LABELS}),
    dict(fn=metrics.nll, args=(PROBS, Y), invalid={"probs": BAD_PROBS, "labels": BAD_LABELS,
                                                   "eps": [0.0, -1.0, 1.5, "e"]}),
    dict(fn=metrics.brier, args=(PROBS, Y), invalid={"probs": BAD_PROBS, "labels": BAD_LABELS}),
    dict(fn=metrics.ece, args=(PROBS, Y), invalid={"probs": BAD_PROBS, "labels": BAD_LABELS,
                                                   "n_bins": [0, -1, 2.5, "15"]}),
    dict(fn=metrics.aurc, args=(PROBS, Y), invalid={"probs": BAD_PROBS, "labels": BAD_LABELS}),
    dict(fn=metrics.failure_auroc, args=(PROBS, Y), invalid={"probs": BAD_PROBS, "labels": BAD_LABELS}),
    dict(fn=metrics.auroc, args=(np.array([0.9, 0.8]), np.array([0.1, 0.85])),
         invalid={"scores_pos": [np.ones((2, 2)), "s", None], "scores_neg": [np.ones((2, 2)), None]}),
    dict(fn=metrics.ood_auroc, args=(PROBS, PROBS[::-1]), invalid={"probs_in": BAD_PROBS, "probs_out": BAD_PROBS}),
    dict(fn=metrics.apply_temperature, args=(PROBS, 2.0), invalid={"probs": BAD_PROBS,
                                                                   "temperature": [0.0, -1.0, "2", None, True]}),
    dict(fn=metrics.fit_temperature, args=(PROBS, Y),
         invalid={"probs": BAD_PROBS, "labels": BAD_LABELS, "bounds": [(0.0, 1.0), (2.0, 1.0), (1.0,), "b"]}),
]
