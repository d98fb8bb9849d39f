"""KEP-SVGP (Chen, Tao, Tonin, Suykens, ICML 2024, https://arxiv.org/abs/2402.01476): self-attention through
kernel-eigen pair sparse variational Gaussian processes.

* :class:`KEPSVGPAttention`: the attention layer, a drop-in for a multi-head self-attention block.
* :func:`kep_svgp_loss`, :func:`train_classifier`, :func:`predict_proba`: the training objective and prediction.
* :mod:`icml24.gp.kep_svgp.metrics`: ECE, NLL, AURC, failure and OOD AUROC.
"""

from icml24.gp.kep_svgp import metrics
from icml24.gp.kep_svgp.attention import KEPSVGPAttention
from icml24.gp.kep_svgp.training import (
    KEPSVGPConfig,
    TrainConfig,
    kep_layers,
    kep_svgp_loss,
    predict_proba,
    train_classifier,
)

SLUG = "kep-svgp"

__all__ = [
    "SLUG",
    "KEPSVGPAttention",
    "KEPSVGPConfig",
    "TrainConfig",
    "kep_layers",
    "kep_svgp_loss",
    "metrics",
    "predict_proba",
    "train_classifier",
]
