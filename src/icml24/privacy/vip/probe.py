"""The linear-probe protocol of ViP (Sec. 4.1): freeze the pre-trained encoder, take its globally pooled
features, and fit a linear classifier on a labelled downstream set (non-private, as in the paper).

Yu et al., ICML 2024 (https://arxiv.org/abs/2306.08842). The paper trains the linear head with LARS over 90
epochs on ImageNet features; at our scale the exact optimum of an L2-regularised multinomial logistic
regression (scikit-learn, on standardised features) is the same protocol without the optimiser's noise.
"""

from __future__ import annotations

import numpy as np
import torch

from icml24.privacy.vip.mae import MaskedAutoencoder

__all__ = ["few_shot_probe_accuracy", "linear_probe_accuracy"]


def _as_images(name: str, x: object) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.as_tensor(x)
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or len(x) == 0:
        raise ValueError(f"{name} must be a non-empty (n, C, H, W) array, got {getattr(x, 'shape', type(x).__name__)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} must be finite")
    return x.float()


def _as_labels(name: str, y: object, n: int) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1 or len(arr) != n:
        raise ValueError(f"{name} must be a 1-d array of {n} labels, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer class labels, got dtype {arr.dtype}")
    return arr


def linear_probe_accuracy(model: MaskedAutoencoder, x_train: np.ndarray | torch.Tensor, y_train: np.ndarray,
                          x_test: np.ndarray | torch.Tensor, y_test: np.ndarray, *, C: float = 1.0,
                          max_iter: int = 2000) -> float:  # fmt: skip
    """Test accuracy of a logistic-regression probe on the frozen mean-pooled encoder features.

    Args:
        model: the (pre-trained) MAE; only its encoder is used, in eval mode, on unmasked images.
        x_train, y_train: labelled probe-training images ``(n, C, H, W)`` and integer labels.
        x_test, y_test: held-out images and labels.
        C: inverse L2 strength of the probe (scikit-learn's ``C``).
        max_iter: L-BFGS iterations.
    """
    if not isinstance(model, MaskedAutoencoder):
        raise TypeError(f"model must be a MaskedAutoencoder, got {type(model).__name__}")
    xtr, xte = _as_images("x_train", x_train), _as_images("x_test", x_test)
    ytr, yte = _as_labels("y_train", y_train, len(xtr)), _as_labels("y_test", y_test, len(xte))
    if len(np.unique(ytr)) < 2:
        raise ValueError("y_train must hold at least two classes")
    if isinstance(C, bool) or not isinstance(C, (int, float)) or not np.isfinite(C) or C <= 0:
        raise ValueError(f"C must be a finite number > 0, got {C!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
    return _probe(model.features(xtr).double().numpy(), ytr, model.features(xte).double().numpy(), yte, C, max_iter)


def _probe(f_tr: np.ndarray, y_tr: np.ndarray, f_te: np.ndarray, y_te: np.ndarray, C: float, max_iter: int) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(f_tr)
    clf = LogisticRegression(C=float(C), max_iter=max_iter).fit(scaler.transform(f_tr), y_tr)
    return float((clf.predict(scaler.transform(f_te)) == y_te).mean())


def few_shot_probe_accuracy(model: MaskedAutoencoder, x: np.ndarray | torch.Tensor, y: np.ndarray, *, shots: int = 10,
                            draws: int = 10, seed: int = 0, C: float = 1.0) -> float:  # fmt: skip
    """Few-shot linear probing (ViP Sec. 4.2 reports 10- and 25-shot ImageNet): the mean test accuracy over
    ``draws`` random splits of ``(x, y)`` into ``shots`` labelled images per class (probe training) and the
    rest (test). Features are computed once; each draw fits :func:`linear_probe_accuracy`'s probe."""
    if not isinstance(model, MaskedAutoencoder):
        raise TypeError(f"model must be a MaskedAutoencoder, got {type(model).__name__}")
    xs = _as_images("x", x)
    ys = _as_labels("y", y, len(xs))
    for name, v in (("shots", shots), ("draws", draws)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if isinstance(C, bool) or not isinstance(C, (int, float)) or not np.isfinite(C) or C <= 0:
        raise ValueError(f"C must be a finite number > 0, got {C!r}")
    classes, counts = np.unique(ys, return_counts=True)
    if len(classes) < 2 or counts.min() <= shots:
        raise ValueError(f"shots ({shots}) must be below every class's count in y (smallest {counts.min()}), "
                         "with at least two classes")  # fmt: skip
    feats = model.features(xs).double().numpy()
    rng = np.random.default_rng(seed)
    accs = []
    for _ in range(draws):
        train = np.concatenate([rng.choice(np.flatnonzero(ys == c), shots, replace=False) for c in classes])
        test = np.setdiff1d(np.arange(len(ys)), train)
        accs.append(_probe(feats[train], ys[train], feats[test], ys[test], C, 1000))
    return float(np.mean(accs))
