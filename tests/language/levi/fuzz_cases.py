"""Fuzz cases for levi's exported callables (see tests/test_fuzz_api.py)."""

import torch

from icml24.language.levi import (
    LEVI,
    DigitCNN,
    PooledEncoderClassifier,
    SmallMLP,
    TrainConfig,
    accuracy,
    hashed_bag_of_words,
    interpolate_weights,
    make_digit_task,
    make_review_task,
    predict_logits,
    train_classifier,
    wise_ft,
)

_X = torch.randn(12, 5)
_Y = torch.arange(12) % 2
_MLP = SmallMLP(in_features=5, out_dim=2)
_CNN = DigitCNN(n_classes=3)

FUZZ_CASES = [
    dict(fn=make_review_task, args=(20, 10, 10), kwargs={"rho": 0.9},
         invalid={"n_train": [0, 1, 2.5, "20"], "n_val": [-1], "n_test": [None], "rho": [1.5, -0.1, "x"],
                  "jargon_fraction": [2.0, -1.0], "seed": [-1, 0.5]}),
    dict(fn=make_digit_task, kwargs={"rho": 0.9, "noise": 0.1},
         invalid={"rho": [1.1, -0.5, None], "noise": [-0.1, "x"], "seed": [-3]}),
    dict(fn=hashed_bag_of_words, args=(["a b", "c"],), kwargs={"n_features": 64},
         invalid={"texts": ["a b", [], [1, 2]], "n_features": [0, 2.5]}),
    dict(fn=SmallMLP, kwargs={"in_features": 5, "hidden": 8, "out_dim": 2},
         invalid={"in_features": [0, 1.5], "hidden": [-1], "out_dim": [0], "dropout": [1.0, -0.1]}),
    dict(fn=LEVI, kwargs={"view_dims": [4, 6], "small_model": _MLP, "n_classes": 2},
         invalid={"view_dims": ["ab", [0], [4, -1]], "small_model": ["mlp"], "n_classes": [1, 0, 2.5],
                  "adapter_dim": [0, 1.5], "head_hidden": [-1, 1.5], "dropout": [1.0, -0.2]}),
    dict(fn=TrainConfig, kwargs={"lr": 1e-3},
         invalid={"lr": [0.0, -1.0, "x"], "weight_decay": [-1.0], "epochs": [0, 2.5], "batch_size": [0],
                  "patience": [-1], "seed": [-1, 0.5]}),
    dict(fn=train_classifier, args=(_MLP, (_X,), _Y),
         kwargs={"val_inputs": (_X,), "val_labels": _Y, "config": TrainConfig(epochs=1)},
         invalid={"model": ["m"], "inputs": [_X, ()], "labels": [_Y[:5]], "val_inputs": [()],
                  "val_labels": [_Y[:3]], "config": [{"lr": 1}]},
         allowed={"labels": "integer class labels (a float NaN cannot be a class index)"}),
    dict(fn=predict_logits, args=(_MLP, (_X,)), kwargs={"batch_size": 4}, invalid={"batch_size": [0, 1.5]}),
    dict(fn=accuracy, args=(torch.randn(4, 2), torch.tensor([0, 1, 1, 0])),
         invalid={"logits": [torch.randn(4)], "labels": [torch.tensor([0.5, 1.0, 0.0, 1.0]), torch.tensor([0, 1])]}),
    dict(fn=DigitCNN, kwargs={"n_classes": 3},
         invalid={"n_classes": [0, 1.5], "channels": [(4,), (0, 4)], "hidden": [0], "side": [-2]}),
    dict(fn=interpolate_weights, args=(_CNN, _CNN, 0.5),
         invalid={"alpha": [1.5, -0.1, "x"], "finetuned": [DigitCNN(n_classes=4)]}),
    dict(fn=PooledEncoderClassifier, kwargs={"encoder": _MLP, "head": _MLP},
         invalid={"encoder": ["x"], "head": [None], "layer": [1.5, "last"]}),
    dict(fn=wise_ft, args=(PooledEncoderClassifier(encoder=_MLP, head=_MLP), PooledEncoderClassifier(encoder=_MLP, head=_MLP), 0.5),
         invalid={"alpha": [2.0, -1.0], "start": [_MLP], "finetuned": ["x"]}),
]

EXEMPT = {
    "SLUG": "a constant",
    "DigitTask": "a frozen dataclass of arrays returned by make_digit_task",
    "ReviewTask": "a frozen dataclass returned by make_review_task",
    "ReviewSplit": "a frozen dataclass returned by make_review_task",
    "TrainedClassifier": "a result record returned by train_classifier",
    "pooled_layer_features": "needs a transformers encoder; its argument checks are tested in test_levi.py",
    "lora_encoder": "needs peft and a transformers encoder; its argument checks are tested in test_levi.py",
}
