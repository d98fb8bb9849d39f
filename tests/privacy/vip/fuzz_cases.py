"""Fuzz cases for ViP's public API (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.privacy.vip import (
    DPConfig,
    MAEConfig,
    MAETrainConfig,
    MaskedAutoencoder,
    PrivacyAccount,
    attach_budget_guard,
    calibrate_noise,
    epsilon_dp_accounting,
    epsilon_for,
    few_shot_probe_accuracy,
    linear_probe_accuracy,
    noise_multiplier_dp_accounting,
    noise_multiplier_for,
    patchify,
    private_digits,
    random_masking,
    sincos_pos_embed,
    synthetic_images,
    train_mae,
    train_mae_private,
)

TINY = MAEConfig(image_size=8, patch_size=4, dim=8, depth=1, num_heads=2, decoder_dim=8, decoder_heads=2)
torch.manual_seed(0)
MODEL = MaskedAutoencoder(TINY)
IMAGES = np.random.default_rng(0).random((40, 1, 8, 8)).astype(np.float32)
LABELS = np.repeat(np.arange(2), 20)
BAD_IMAGES = [np.zeros((0, 1, 8, 8), np.float32), np.full((4, 1, 8, 8), np.nan, np.float32), "x", np.zeros(3)]
TRAIN = MAETrainConfig(steps=2, batch_size=20, warmup_steps=0)


def _dp_optimizer():
    from opacus.optimizers import DPOptimizer

    return DPOptimizer(torch.optim.SGD(MODEL.parameters(), lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0,
                       expected_batch_size=2)  # fmt: skip


def _accountant():
    from opacus.accountants import RDPAccountant

    return RDPAccountant()


ACC = dict(args=(1.0, 0.01, 100, 1e-5), invalid={"noise_multiplier": [0.0, -1.0, "s"], "sample_rate": [0.0, 1.5],
           "steps": [0, 2.5], "delta": [0.0, 1.5]})  # fmt: skip

FUZZ_CASES = [
    dict(fn=MAEConfig, kwargs={}, invalid={"image_size": [0, 2.0], "patch_size": [5, 0], "dim": [6, 0, "d"],
         "mask_ratio": [1.0, -0.1, "r"], "num_heads": [5], "decoder_dim": [6], "decoder_heads": [3]}),
    dict(fn=MAETrainConfig, kwargs={}, invalid={"steps": [0, 1.5], "batch_size": [0], "lr": [0.0, -1.0],
         "warmup_steps": [-1], "weight_decay": [-0.1], "beta1": [1.0, 1.5], "beta2": [-0.1]}),
    dict(fn=DPConfig, kwargs={}, invalid={"target_epsilon": [0.0, -1.0, "e"], "delta": [0.0, 1.0],
         "max_grad_norm": [0.0], "max_physical_batch_size": [0], "accountant": ["moments"],
         "epsilon_tolerance": [0.0]}),
    dict(fn=MaskedAutoencoder, args=(TINY,), invalid={"config": ["cfg", 3]}),
    dict(fn=patchify, args=(torch.zeros(2, 1, 8, 8), 4), invalid={"images": [torch.zeros(8, 8), "x"],
         "patch_size": [3, 0]}),
    dict(fn=random_masking, args=(3, 16, 4), invalid={"batch": [-1, 1.5], "num_patches": [0], "num_visible": [0, 17]}),
    dict(fn=sincos_pos_embed, args=(8, 3), invalid={"dim": [6, 0], "grid_size": [0, 1.5]}),
    dict(fn=synthetic_images, args=(4,), kwargs={"size": 8, "seed": 0}, invalid={"n": [0, 1.5], "size": [1],
         "seed": [-1, 0.5]}),
    dict(fn=private_digits, kwargs={"n_private": 50, "jitters": 1, "seed": 0}, invalid={"n_private": [0, 1700],
         "jitters": [0, 1.5], "size": [4], "seed": [-1]}),
    dict(fn=epsilon_for, **ACC),
    dict(fn=epsilon_dp_accounting, **ACC),
    dict(fn=noise_multiplier_for, args=(8.0, 0.01, 100, 1e-5), invalid={"target_epsilon": [0.0, -1.0],
         "sample_rate": [0.0, 2.0], "steps": [0], "delta": [1.0], "accountant": ["x"], "epsilon_tolerance": [0.0]}),
    dict(fn=noise_multiplier_dp_accounting, args=(8.0, 0.01, 100, 1e-5), invalid={"target_epsilon": [0.0],
         "sample_rate": [0.0], "steps": [0], "delta": [0.0], "tolerance": [0.0]}),
    dict(fn=attach_budget_guard, args=(_dp_optimizer(), _accountant()), kwargs={"sample_rate": 0.1, "epsilon": 8.0,
         "delta": 1e-5}, invalid={"optimizer": [torch.optim.SGD(MODEL.parameters(), lr=0.1), None],
         "accountant": [None], "sample_rate": [0.0, 2.0], "epsilon": [0.0], "delta": [0.0]}),
    dict(fn=train_mae, args=(MODEL, IMAGES, TRAIN), invalid={"model": [torch.nn.Linear(2, 2)], "images": BAD_IMAGES,
         "config": ["c", DPConfig()], "seed": [-1]}),
    dict(fn=train_mae_private, args=(MODEL, IMAGES, TRAIN, DPConfig(target_epsilon=4.0)),
         kwargs={"account": PrivacyAccount(epsilon=4.0)},
         invalid={"model": [None], "images": BAD_IMAGES, "train": [DPConfig()], "privacy": [TRAIN],
                  "seed": [-1], "max_steps": [0], "account": ["a", 3]}),
    dict(fn=PrivacyAccount, args=(4.0,), kwargs={"delta": 1e-5}, invalid={"epsilon": [0.0, -1.0, "e"],
         "delta": [0.0, 1.0, "d"], "accountant": ["moments", None]}),
    dict(fn=calibrate_noise, args=(4.0, 0.1, 10, 1e-5), invalid={"target_epsilon": [0.0, "e"],
         "sample_rate": [0.0, 1.5], "steps": [0, 1.5], "delta": [0.0, 1.0], "epsilon_tolerance": [0.0]}),
    dict(fn=linear_probe_accuracy, args=(MODEL, IMAGES[::2], LABELS[::2], IMAGES[1::2], LABELS[1::2]),
         invalid={"model": ["m"], "x_train": BAD_IMAGES, "y_train": [LABELS[:3], LABELS[::2] + 0.5, np.zeros(20, int)],
                  "x_test": BAD_IMAGES, "y_test": [LABELS[:3]], "C": [0.0, -1.0], "max_iter": [0]}),
    dict(fn=few_shot_probe_accuracy, args=(MODEL, IMAGES, LABELS), kwargs={"shots": 3, "draws": 2},
         invalid={"model": [None], "x": BAD_IMAGES, "y": [LABELS[:5], LABELS + 0.5], "shots": [0, 25],
                  "draws": [0], "seed": [-1], "C": [0.0]}),
]

EXEMPT = {
    "PrivacyBudgetExceededError": "an exception class, raised by the guard (tested in test_vip_dp.py)",
    "PrivateDigits": "a frozen result record built by private_digits (no validation of its own)",
    "TrainResult": "a result record returned by train_mae and train_mae_private",
}
