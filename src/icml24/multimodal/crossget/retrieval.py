"""Image-text retrieval on the scene world: captions to token ids, recall@K that counts equal-content matches.

CrossGET reports image→text and text→image Recall@1/5/10 on Flickr30k (Table 1). In the scene world two
scenes can have the same content (same objects in the same cells), so a retrieved item counts as correct
when its content equals the query's (``content_ids``), as the official training targets treat equal ``idx``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from icml24.language import WordTokenizer
from icml24.multimodal.crossget.merging import check_tensor
from icml24.multimodal.scenes import SceneBatch, SceneConfig, scene_vocabulary

__all__ = ["SceneTextEncoder", "content_ids", "retrieval_recall"]


class SceneTextEncoder:
    """Word tokenizer over the scene vocabulary; ``encode(captions) -> (ids, attention_mask)``.

    Every caption becomes ``<bos> words <eos>`` padded on the right with ``<pad>`` (id 0).
    """

    def __init__(self, config: SceneConfig | None = None) -> None:
        if config is not None and not isinstance(config, SceneConfig):
            raise TypeError(f"config must be a SceneConfig or None, got {type(config).__name__}")
        self.tokenizer = WordTokenizer(scene_vocabulary(config))

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def encode(self, captions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(captions, str) or not isinstance(captions, Sequence) or not len(captions):
            raise ValueError("captions must be a non-empty sequence of strings")
        if not all(isinstance(c, str) for c in captions):
            raise TypeError("captions must hold strings")
        rows = [self.tokenizer.encode(c, bos=True, eos=True) for c in captions]
        t = max(map(len, rows))
        ids = torch.zeros(len(rows), t, dtype=torch.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
        return ids, ids != self.tokenizer.pad_id


def content_ids(batch: SceneBatch) -> torch.Tensor:
    """``(n,)`` int64: equal iff two scenes have the same content key."""
    if not isinstance(batch, SceneBatch):
        raise TypeError(f"batch must be a SceneBatch, got {type(batch).__name__}")
    index: dict[str, int] = {}
    return torch.tensor([index.setdefault(k, len(index)) for k in batch.keys], dtype=torch.int64)


@torch.no_grad()
def retrieval_recall(
    image_features: torch.Tensor, text_features: torch.Tensor, ids: torch.Tensor, ks: Sequence[int] = (1, 5)
) -> dict[str, float]:
    """Recall@K in both directions, in percent: ``{"i2t_r1", "t2i_r1", "i2t_r5", ..., "mean_r1"}``.

    Image ``i`` retrieves texts by cosine similarity; it scores at K when one of its top K texts has
    ``ids[j] == ids[i]`` (and vice versa). ``mean_r1`` is the mean of the two R@1.
    """
    check_tensor("image_features", image_features, 2)
    check_tensor("text_features", text_features, 2)
    check_tensor("ids", ids)
    if image_features.shape != text_features.shape:
        raise ValueError(f"image_features and text_features must be equal (N, D) tensors, got "
                         f"{tuple(image_features.shape)} and {tuple(text_features.shape)}")  # fmt: skip
    n = image_features.shape[0]
    if ids.shape != (n,):
        raise ValueError(f"ids must have shape ({n},), got {tuple(ids.shape)}")
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive ints, got {ks!r}")
    sim = F.normalize(image_features.float(), dim=-1) @ F.normalize(text_features.float(), dim=-1).T
    same = ids[:, None] == ids[None, :]
    out: dict[str, float] = {}
    for k in ks:
        kk = min(k, n)
        top_t = sim.topk(kk, dim=1).indices  # texts for each image
        top_i = sim.T.topk(kk, dim=1).indices  # images for each text
        out[f"i2t_r{k}"] = 100.0 * float(same.gather(1, top_t).any(1).float().mean())
        out[f"t2i_r{k}"] = 100.0 * float(same.gather(1, top_i).any(1).float().mean())
    if 1 in ks:
        out["mean_r1"] = (out["i2t_r1"] + out["t2i_r1"]) / 2
    return out


