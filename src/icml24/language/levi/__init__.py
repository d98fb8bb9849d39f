"""LEVI: Generalizable Fine-tuning via Layer-wise Ensemble of Different Views (Roh et al., ICML 2024).

https://arxiv.org/abs/2402.04644 · no official code. A frozen pre-trained model's intermediate layers and
a small model trained from scratch are fused by adapting layers and trained with one task loss, so that
each view makes up for what the other lacks (the pre-trained model's missing subdomain features, the
fine-tuning data's shortcuts), improving out-of-distribution accuracy of fine-tuning.
"""

from icml24.language.levi.data import (
    DigitTask,
    ReviewSplit,
    ReviewTask,
    make_digit_task,
    make_review_task,
)
from icml24.language.levi.finetune import PooledEncoderClassifier, lora_encoder, wise_ft
from icml24.language.levi.model import (
    LEVI,
    SmallMLP,
    TrainConfig,
    TrainedClassifier,
    accuracy,
    hashed_bag_of_words,
    pooled_layer_features,
    predict_logits,
    train_classifier,
)
from icml24.language.levi.vision import DigitCNN, interpolate_weights

SLUG = "levi"

__all__ = [
    "LEVI",
    "SLUG",
    "DigitCNN",
    "DigitTask",
    "PooledEncoderClassifier",
    "ReviewSplit",
    "ReviewTask",
    "SmallMLP",
    "TrainConfig",
    "TrainedClassifier",
    "accuracy",
    "hashed_bag_of_words",
    "interpolate_weights",
    "lora_encoder",
    "make_digit_task",
    "make_review_task",
    "pooled_layer_features",
    "predict_logits",
    "train_classifier",
    "wise_ft",
]
