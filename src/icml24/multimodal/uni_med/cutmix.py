"""Token-level cut-mix (Uni-Med, Wu et al., ICML 2024, Section 3: "Token-Level Cut-Mix").

The paper aligns the visual explanation of each training answer with image patch tokens and mixes tokens so
that the answer stays traceable to its evidence. The released code computes the cosine similarity of visual
tokens and explanation-word embeddings, keeps the top-5 patches per word and fills the rest of the token
grid (:func:`similarity_evidence`, then ``fill="zeros"``). We read the "mix" as CutMix's: with probability
``p`` a sample's visual tokens outside its evidence set ``K_i`` are replaced by those of a random partner
``j`` of the batch, while the question and answer stay those of ``i``:

    v~_i[q] = v_i[q] if q in K_i else v_j[q]

so the model sees the evidence of ``i`` in the context of ``j`` and must take the answer from ``K_i``.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

__all__ = ["similarity_evidence", "token_cutmix"]


def _check_tokens(visual: object, name: str = "visual") -> torch.Tensor:
    if not isinstance(visual, torch.Tensor) or visual.dim() != 3 or not visual.is_floating_point():
        raise ValueError(f"{name} must be a float (B, P, C) tensor, got {getattr(visual, 'shape', type(visual).__name__)}")
    if not torch.isfinite(visual).all():
        raise ValueError(f"{name} must be finite")
    return visual


def token_cutmix(
    visual: torch.Tensor,
    evidence: torch.Tensor,
    *,
    p: float,
    generator: torch.Generator | None = None,
    fill: Literal["partner", "zeros"] = "partner",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mix visual tokens outside each sample's evidence patches.

    Args:
        visual: ``(B, P, C)`` visual tokens.
        evidence: ``(B, P)`` bool, True on the evidence patches ``K_i`` of each sample.
        p: probability that a sample is mixed (0: the batch is returned unchanged).
        generator: torch generator for which samples mix and with whom (a random derangement of the batch:
            every sample's partner is another sample, never itself).
        fill: ``"partner"`` (tokens of sample ``perm[i]``) or ``"zeros"`` (the released code's stub).

    Returns:
        ``(mixed, partner, was_mixed)``: mixed tokens ``(B, P, C)``, partner index ``(B,)`` and the bool
        ``(B,)`` of mixed samples. Labels and questions are not touched: they stay those of ``i``. A batch of
        one sample has no partner: it is returned unchanged (``was_mixed`` all False).
    """
    visual = _check_tokens(visual)
    if not isinstance(evidence, torch.Tensor) or evidence.shape != visual.shape[:2]:
        raise ValueError(f"evidence must be a bool tensor of shape {tuple(visual.shape[:2])}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
    if fill not in ("partner", "zeros"):
        raise ValueError(f"fill must be 'partner' or 'zeros', got {fill!r}")
    b = visual.shape[0]
    # a random cyclic order of the batch, each sample paired with the next one in it: a derangement (a plain
    # permutation pairs a sample with itself with probability about 1 - 1/e per batch, mixing nothing)
    order = torch.randperm(b, generator=generator, device=visual.device)
    partner = torch.empty_like(order)
    partner[order] = order.roll(-1)
    was_mixed = (torch.rand(b, generator=generator, device=visual.device) < p) & (b > 1)
    background = visual[partner] if fill == "partner" else torch.zeros_like(visual)
    keep = evidence.bool() | ~was_mixed[:, None]
    return torch.where(keep[..., None], visual, background), partner, was_mixed


def similarity_evidence(visual: torch.Tensor, words: torch.Tensor, word_mask: torch.Tensor | None = None, *,
                        top_k: int = 5) -> torch.Tensor:  # fmt: skip
    """Evidence patches from text: for each explanation word, the ``top_k`` visual tokens of highest cosine
    similarity (the released code's selection, k = 5); their union over words, ``(B, P)`` bool.

    Args:
        visual: ``(B, P, C)`` visual tokens.
        words: ``(B, W, C)`` embeddings of the visual-explanation words.
        word_mask: ``(B, W)`` bool, False on padding words (default: all words count).
        top_k: patches kept per word (``1 <= top_k <= P``).
    """
    visual = _check_tokens(visual)
    words = _check_tokens(words, "words")
    if words.shape[0] != visual.shape[0] or words.shape[2] != visual.shape[2]:
        raise ValueError(f"words must be a (B, W, C) tensor with B = {visual.shape[0]}, C = {visual.shape[2]}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= visual.shape[1]:
        raise ValueError(f"top_k must be an int in [1, {visual.shape[1]}], got {top_k!r}")
    if word_mask is None:
        word_mask = torch.ones(words.shape[:2], dtype=torch.bool, device=words.device)
    elif not isinstance(word_mask, torch.Tensor) or word_mask.shape != words.shape[:2]:
        raise ValueError(f"word_mask must be a bool tensor of shape {tuple(words.shape[:2])}")
    sim = F.normalize(words, dim=-1) @ F.normalize(visual, dim=-1).transpose(1, 2)  # (B, W, P)
    top = sim.topk(top_k, dim=-1).indices  # (B, W, k)
    hit = torch.zeros_like(sim, dtype=torch.bool).scatter_(-1, top, True) & word_mask.bool()[..., None]
    return hit.any(1)
