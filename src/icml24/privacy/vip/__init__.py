"""ViP (Yu, Sanjabi, Ma, Chaudhuri, Guo, ICML 2024, https://arxiv.org/abs/2306.08842): a differentially
private vision foundation model, a masked autoencoder pre-trained on synthetic images and then trained with
DP-SGD (through Opacus) on private images.

* :class:`MaskedAutoencoder`, :class:`MAEConfig`: the MAE on the shared tiny ViT (per-image loss, Sec. 3).
* :func:`train_mae`: non-private MAE training (Stage 1, synthetic pre-training).
* :func:`train_mae_private`, :class:`DPConfig`, :class:`MAETrainConfig`: DP-AdamW through Opacus with a
  hard budget (:func:`attach_budget_guard`, :class:`PrivacyBudgetExceededError`) (Stage 2);
  :class:`PrivacyAccount` composes the calls on one dataset; :func:`calibrate_noise` (stricter of two accountants).
* :func:`noise_multiplier_for`, :func:`epsilon_for` (Opacus) and :func:`epsilon_dp_accounting`,
  :func:`noise_multiplier_dp_accounting` (dp-accounting, the cross-check).
* :func:`synthetic_images`, :func:`private_digits`: the miniature's data; :func:`linear_probe_accuracy`, :func:`few_shot_probe_accuracy`.
"""

from icml24.privacy.vip.data import PrivateDigits, private_digits, synthetic_images
from icml24.privacy.vip.dp import (
    DPConfig,
    MAETrainConfig,
    PrivacyAccount,
    PrivacyBudgetExceededError,
    TrainResult,
    attach_budget_guard,
    calibrate_noise,
    epsilon_dp_accounting,
    epsilon_for,
    noise_multiplier_dp_accounting,
    noise_multiplier_for,
    train_mae,
    train_mae_private,
)
from icml24.privacy.vip.mae import MAEConfig, MaskedAutoencoder, patchify, random_masking, sincos_pos_embed
from icml24.privacy.vip.probe import few_shot_probe_accuracy, linear_probe_accuracy

SLUG = "vip"

__all__ = [
    "SLUG",
    "DPConfig",
    "MAEConfig",
    "MAETrainConfig",
    "MaskedAutoencoder",
    "PrivacyAccount",
    "PrivacyBudgetExceededError",
    "PrivateDigits",
    "TrainResult",
    "attach_budget_guard",
    "calibrate_noise",
    "epsilon_dp_accounting",
    "epsilon_for",
    "few_shot_probe_accuracy",
    "linear_probe_accuracy",
    "noise_multiplier_dp_accounting",
    "noise_multiplier_for",
    "patchify",
    "private_digits",
    "random_masking",
    "sincos_pos_embed",
    "synthetic_images",
    "train_mae",
    "train_mae_private",
]
