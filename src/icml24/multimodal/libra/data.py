"""Libra's inputs at CPU scale: a k-means patch tokenizer (hybrid discrete + continuous visual tokens), the
image-then-caption sequence layout with its two label sets, and the attribute score of generated captions.

The paper tokenises an image into 24×24 positions of two lookup-free-quantised codes on CLIP features plus
the continuous CLIP feature (Section 3.3, ``image_tokenizer.py``); here a ``patch × patch`` patch of a scene
image is one visual position, its codes come from scikit-learn's ``KMeans`` (codebook 1 on the raw patch,
codebook 2 on the residual from codebook 1's centroid: two codebooks at the cost of two k-means fits), and its
continuous feature is the flattened patch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml24.language.tokenizers import WordTokenizer
from icml24.language.training import IGNORE_INDEX
from icml24.multimodal.scenes import _SYNONYMS, SceneBatch, SceneConfig

__all__ = [
    "CaptionBatch",
    "PatchTokenizer",
    "build_caption_batch",
    "caption_scores",
    "image_patches",
    "parse_caption",
]


def _check_images(images: object, name: str = "images") -> np.ndarray:
    if isinstance(images, torch.Tensor):
        images = images.detach().cpu().numpy()
    if not isinstance(images, np.ndarray) or images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"{name} must be an array of shape (n, 3, H, W)")
    if images.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one image")
    if not np.issubdtype(images.dtype, np.floating) or not np.isfinite(images).all():
        raise ValueError(f"{name} must hold finite floats")
    return images.astype(np.float32, copy=False)


def image_patches(images: np.ndarray, patch_size: int) -> np.ndarray:
    """``(n, 3, H, W) -> (n, (H/p)(W/p), 3 p²)``: row-major patches, channel-major inside a patch (the raw
    continuous signal when no pre-trained encoder is used)."""
    images = _check_images(images)
    if isinstance(patch_size, bool) or not isinstance(patch_size, int) or patch_size < 1:
        raise ValueError(f"patch_size must be a positive int, got {patch_size!r}")
    n, _, h, w = images.shape
    p = patch_size
    if h % p or w % p:
        raise ValueError(f"images of {h}x{w} pixels do not split into patch_size={p} patches")
    x = images.reshape(n, 3, h // p, p, w // p, p).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(x.reshape(n, (h // p) * (w // p), 3 * p * p))


def _check_features(features: object) -> np.ndarray:
    if isinstance(features, torch.Tensor):
        features = features.detach().cpu().numpy()
    if not isinstance(features, np.ndarray) or features.ndim != 3 or min(features.shape) < 1:
        raise ValueError("features must be an array of shape (n, P, D)")
    if not np.issubdtype(features.dtype, np.floating) or not np.isfinite(features).all():
        raise ValueError("features must hold finite floats")
    return features.astype(np.float32, copy=False)


class PatchTokenizer:
    """Discrete codes of visual features: ``n_codebooks`` residual k-means codebooks (scikit-learn ``KMeans``;
    codebook ``j`` clusters what codebooks ``< j`` left), the stand-in for Libra's two lookup-free-quantised
    codebooks on CLIP features (Section 3.3).

    Args:
        n_codes: clusters per codebook.
        n_codebooks: codebooks (1 or more).
        random_state: seed of the k-means initialisation.
        max_fit_vectors: fit on at most this many feature vectors (a random subset).

    ``fit(features)`` then ``transform(features) -> codes (n, P, n_codebooks)`` int64 for features
    ``(n, P, D)`` (one vector per visual position: a pre-trained encoder's patch features, or
    :func:`image_patches`).
    """

    def __init__(self, *, n_codes: int = 64, n_codebooks: int = 2, random_state: int = 0,
                 max_fit_vectors: int = 20_000) -> None:  # fmt: skip
        for name, v in (("n_codes", n_codes), ("n_codebooks", n_codebooks), ("max_fit_vectors", max_fit_vectors)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if isinstance(random_state, bool) or not isinstance(random_state, int):
            raise TypeError(f"random_state must be an int, got {type(random_state).__name__}")
        self.n_codes, self.n_codebooks = n_codes, n_codebooks
        self.random_state, self.max_fit_vectors = random_state, max_fit_vectors
        self.centroids_: list[np.ndarray] | None = None

    def fit(self, features: np.ndarray) -> PatchTokenizer:
        from sklearn.cluster import KMeans

        feats = _check_features(features)
        flat = feats.reshape(-1, feats.shape[-1]).astype(np.float64)
        rng = np.random.default_rng(self.random_state)
        if flat.shape[0] > self.max_fit_vectors:
            flat = flat[rng.choice(flat.shape[0], self.max_fit_vectors, replace=False)]
        if flat.shape[0] < self.n_codes:
            raise ValueError(f"features hold {flat.shape[0]} vectors, fewer than n_codes={self.n_codes}")
        residual, centroids = flat, []
        for j in range(self.n_codebooks):
            km = KMeans(n_clusters=self.n_codes, n_init=1, max_iter=100, random_state=self.random_state + j)
            labels = km.fit_predict(residual)
            centroids.append(km.cluster_centers_.astype(np.float32))
            residual = residual - km.cluster_centers_[labels]
        self.centroids_ = centroids
        return self

    def transform(self, features: np.ndarray) -> np.ndarray:
        if self.centroids_ is None:
            raise RuntimeError("PatchTokenizer.transform called before fit")
        feats = _check_features(features)
        if feats.shape[-1] != self.centroids_[0].shape[1]:
            raise ValueError(f"features must have {self.centroids_[0].shape[1]} dimensions, got {feats.shape[-1]}")
        residual = feats.reshape(-1, feats.shape[-1])
        codes = []
        for c in self.centroids_:
            # Squared distances by the expansion |x|² - 2 x·c + |c|² (one matrix product, no (N, K, D) tensor).
            d = (residual**2).sum(1, keepdims=True) - 2 * residual @ c.T + (c**2).sum(1)[None]
            idx = d.argmin(1)
            codes.append(idx)
            residual = residual - c[idx]
        n, p = feats.shape[:2]
        return np.stack(codes, -1).reshape(n, p, self.n_codebooks).astype(np.int64)

    def reconstruction_error(self, features: np.ndarray) -> float:
        """Mean squared error of the features rebuilt from their codes (drops with each codebook)."""
        codes = self.transform(features)
        feats = _check_features(features)
        rebuilt = sum(c[codes[..., j]] for j, c in enumerate(self.centroids_))
        return float(((feats - rebuilt) ** 2).mean())


@dataclass
class CaptionBatch:
    """One batch of ``[<boi>, patch_1 .. patch_P, <bos>, caption .., <eos>]`` sequences (Libra's image-to-text
    order, ``i2t_prob: 1`` of the pre-training config), aligned on the left, right-padded text."""

    input_ids: torch.Tensor
    """``(B, T)`` text ids at text positions (0 at visual ones)."""
    vision_flag: torch.Tensor
    """``(B, T)`` bool: the ``1 + P`` visual positions (the begin-of-image token and the patches)."""
    vision_codes: torch.Tensor
    """``(B, T, C)`` codes at visual positions (``boi_id`` at the first)."""
    vision_features: torch.Tensor
    """``(B, T, F)`` continuous features at visual positions (zero at the begin-of-image token)."""
    text_labels: torch.Tensor
    """``(B, T)`` the next text token at text positions (``IGNORE_INDEX`` at visual positions and padding)."""
    vision_labels: torch.Tensor
    """``(B, T, C)`` the next patch's codes at positions ``0 .. P-1`` (``IGNORE_INDEX`` elsewhere)."""

    @property
    def prefix_length(self) -> int:
        """Positions before the caption's first word: ``1 + P + 1`` (boi, patches, bos)."""
        return int(self.vision_flag[0].sum()) + 1


def build_caption_batch(codes: torch.Tensor, features: torch.Tensor, text_ids: torch.Tensor,
                        text_mask: torch.Tensor | None = None, *, boi_id: int) -> CaptionBatch:  # fmt: skip
    """Lay out image-then-caption sequences and their labels.

    Args:
        codes: ``(B, P, C)`` int64 patch codes; features ``(B, P, F)`` float.
        text_ids: ``(B, L)`` caption ids starting with ``<bos>`` (``WordTokenizer.batch(..., bos=True,
            eos=True)``), right-padded; ``text_mask`` its attention mask (``None``: no padding). ``L = 1`` (just
            ``<bos>``) gives a generation prompt.
        boi_id: the begin-of-image code id (``LibraConfig.boi_id``).
    """
    for name, t in (("codes", codes), ("features", features), ("text_ids", text_ids)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if codes.dim() != 3 or codes.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"codes must be an integer tensor of shape (B, P, C), got {tuple(codes.shape)}")
    b, p, c = codes.shape
    if features.dim() != 3 or features.shape[:2] != (b, p) or not torch.is_floating_point(features):
        raise ValueError(f"features must be a float tensor of shape ({b}, {p}, F)")
    if not bool(torch.isfinite(features).all()):
        raise ValueError("features must be finite")
    if text_ids.dim() != 2 or text_ids.shape[0] != b or text_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"text_ids must be an integer tensor of shape ({b}, L)")
    if text_mask is not None and (not isinstance(text_mask, torch.Tensor) or text_mask.shape != text_ids.shape):
        raise ValueError(f"text_mask must be a tensor of shape {tuple(text_ids.shape)} or None")
    if isinstance(boi_id, bool) or not isinstance(boi_id, int) or boi_id < 0:
        raise ValueError(f"boi_id must be an int >= 0, got {boi_id!r}")
    seq_len = 1 + p + text_ids.shape[1]
    flag = torch.zeros(b, seq_len, dtype=torch.bool)
    flag[:, : 1 + p] = True
    ids = torch.zeros(b, seq_len, dtype=torch.long)
    ids[:, 1 + p :] = text_ids
    vcodes = torch.zeros(b, seq_len, c, dtype=torch.long)
    vcodes[:, 0] = boi_id
    vcodes[:, 1 : 1 + p] = codes
    vfeat = torch.zeros(b, seq_len, features.shape[2], dtype=features.dtype)
    vfeat[:, 1 : 1 + p] = features
    text_labels = torch.full((b, seq_len), IGNORE_INDEX, dtype=torch.long)
    nxt = text_ids[:, 1:].clone()
    if text_mask is not None:
        nxt[~text_mask[:, 1:].bool()] = IGNORE_INDEX
    text_labels[:, 1 + p : seq_len - 1] = nxt
    vision_labels = torch.full((b, seq_len, c), IGNORE_INDEX, dtype=torch.long)
    vision_labels[:, :p] = codes  # position i (boi or patch i) predicts patch i + 1's codes
    return CaptionBatch(ids, flag, vcodes, vfeat, text_labels, vision_labels)


# --------------------------------------------------------------------------------------------------
# Attribute score of generated captions
# --------------------------------------------------------------------------------------------------


def _canonical_words(config: SceneConfig) -> dict[str, tuple[str, str]]:
    """Word -> (attribute, canonical value) for colours, shapes and sizes, synonyms included."""
    out: dict[str, tuple[str, str]] = {}
    for attr, names in (("colour", config.colours), ("shape", config.shapes), ("size", config.sizes)):
        for name in names:
            for w in _SYNONYMS.get(name, (name,)):
                out[w] = (attr, name)
    return out


def _position_phrases(config: SceneConfig) -> list[tuple[list[str], int]]:
    """Position word sequences (synonyms included) -> cell, longest first (so "top left" beats "top")."""
    out = []
    for cell, name in enumerate(config.position_names):
        words = name.split()
        variants = [[]]
        for w in words:
            variants = [v + [s] for v in variants for s in _SYNONYMS.get(w, (w,))]
        variants += [list(s.split()) for s in _SYNONYMS.get(name, ()) if s.split() not in variants]
        out += [(v, cell) for v in variants]
    return sorted(out, key=lambda vc: -len(vc[0]))


def parse_caption(text: str, config: SceneConfig) -> set[tuple[int, str, str]]:
    """The ``(cell, attribute, value)`` facts a caption states: phrases split at ``" and "``, each phrase's
    colour, shape and size words (synonyms mapped to canonical names) attached to its position's cell. A phrase
    without a recognisable position states nothing."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(config, SceneConfig):
        raise TypeError(f"config must be a SceneConfig, got {type(config).__name__}")
    words_map = _canonical_words(config)
    positions = _position_phrases(config)
    facts: set[tuple[int, str, str]] = set()
    for phrase in text.split(" and "):
        words = phrase.split()
        cell = None
        for seq, c in positions:
            k = len(seq)
            if any(words[i:i + k] == seq for i in range(len(words) - k + 1)):
                cell = c
                break
        if cell is None:
            continue
        for w in words:
            if w in words_map:
                attr, value = words_map[w]
                facts.add((cell, attr, value))
    return facts


def _true_facts(batch: SceneBatch, i: int) -> set[tuple[int, str, str]]:
    cfg = batch.config
    out = set()
    for k in range(int(batch.count[i])):
        cell = int(batch.cell[i, k])
        out |= {(cell, "colour", cfg.colours[batch.colour[i, k]]), (cell, "shape", cfg.shapes[batch.shape[i, k]]),
                (cell, "size", cfg.sizes[batch.size[i, k]])}  # fmt: skip
    return out


def caption_scores(captions: list[str], scenes: SceneBatch) -> dict[str, float]:
    """Attribute exact-match of generated captions against the scenes' ground truth.

    Per scene, the stated facts ``P`` (:func:`parse_caption`) against the true ``(cell, attribute, value)``
    facts ``T`` of its objects (colour, shape, size at each object's cell): ``attribute_f1`` is the mean of
    ``2 |P ∩ T| / (|P| + |T|)``, ``attribute_precision`` / ``attribute_recall`` of ``|P ∩ T| / |P|`` (0 for an
    empty ``P``) and ``|P ∩ T| / |T|``; ``caption_exact`` the share of scenes with ``P == T`` (every object,
    every attribute, nothing extra); ``count_accuracy`` the share whose number of stated cells is the number
    of objects.
    """
    if isinstance(captions, str) or len(captions) != len(scenes):
        raise ValueError(f"captions must be a list of {len(scenes)} str, one per scene")
    f1, prec, rec, exact, count = [], [], [], [], []
    for i, text in enumerate(captions):
        p = parse_caption(text, scenes.config)
        t = _true_facts(scenes, i)
        hit = len(p & t)
        f1.append(2 * hit / (len(p) + len(t)))
        prec.append(hit / len(p) if p else 0.0)
        rec.append(hit / len(t))
        exact.append(float(p == t))
        count.append(float(len({c for c, _, _ in p}) == int(scenes.count[i])))
    mean = lambda xs: float(np.mean(xs))  # noqa: E731
    return {"attribute_f1": mean(f1), "attribute_precision": mean(prec), "attribute_recall": mean(rec),
            "caption_exact": mean(exact), "count_accuracy": mean(count)}  # fmt: skip


def tokenize_captions(tokenizer: WordTokenizer, captions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` of captions with ``<bos>`` and ``<eos>``, right-padded."""
    return tokenizer.batch(list(captions), bos=True, eos=True)
