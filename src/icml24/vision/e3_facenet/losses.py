"""E3-FaceNet's training losses (section 3.5; ``training/loss_4_E3_Face.py`` of the official code).

* :func:`generator_adversarial_loss`: ``0.5 [softplus(-s_gen) + softplus(-s_match)]`` on generated images.
* :func:`discriminator_loss`: ``0.5 [softplus(s_gen) + softplus(s_match)]`` on generated images plus
  ``0.5 [softplus(-s_gen) + softplus(-s_match)]`` on real image-caption pairs.
* :func:`r1_penalty`: ``gamma / 2 * ||d (s_gen + s_match) / d x||²`` on real images (Mescheder et al., 2018; the
  code sums both logits before the gradient).
* :func:`contrastive_loss`: the CLIP loss, cross-entropy of image-to-text similarity logits over the batch, so
  generated image ``i`` should match caption ``i``; with ``groups``, captions of the same attribute set are all
  positives (a toy batch repeats attribute sets, where CLIP's captions are unique).
* :func:`offset_penalty`: the offsets' norm regulariser, mean ``|dw|`` (the code's ``norm_delta_loss``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.nn import functional as F

__all__ = ["contrastive_loss", "discriminator_loss", "generator_adversarial_loss", "offset_penalty", "r1_penalty"]


def _vec(name: str, x: object, n: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 1 or (n is not None and x.shape[0] != n) or not torch.is_floating_point(x):
        raise ValueError(f"{name} must be a 1-d float tensor{'' if n is None else f' of length {n}'}, got "
                         f"{tuple(x.shape)} {x.dtype}")  # fmt: skip
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite (it holds NaN or infinity)")
    return x


def generator_adversarial_loss(realism: torch.Tensor, match: torch.Tensor | None = None) -> torch.Tensor:
    """Non-saturating loss of generated images' logits; without ``match`` (unconditional) ``softplus(-s_gen)``."""
    realism = _vec("realism", realism)
    if match is None:
        return F.softplus(-realism).mean()
    match = _vec("match", match, realism.shape[0])
    return 0.5 * (F.softplus(-realism) + F.softplus(-match)).mean()


def discriminator_loss(
    real_realism: torch.Tensor,
    fake_realism: torch.Tensor,
    real_match: torch.Tensor | None = None,
    fake_match: torch.Tensor | None = None,
) -> torch.Tensor:
    """The discriminator's logistic loss on real pairs and generated images (two logits, or one without match)."""
    real_realism, fake_realism = _vec("real_realism", real_realism), _vec("fake_realism", fake_realism)
    if (real_match is None) != (fake_match is None):
        raise ValueError("real_match and fake_match must be given together")
    if real_match is None:
        return F.softplus(-real_realism).mean() + F.softplus(fake_realism).mean()
    real_match = _vec("real_match", real_match, real_realism.shape[0])
    fake_match = _vec("fake_match", fake_match, fake_realism.shape[0])
    return (0.5 * (F.softplus(-real_realism) + F.softplus(-real_match)).mean()
            + 0.5 * (F.softplus(fake_realism) + F.softplus(fake_match)).mean())  # fmt: skip


def r1_penalty(logits: torch.Tensor, images: torch.Tensor, *, gamma: float) -> torch.Tensor:
    """``gamma / 2 * mean_i ||grad_x logits_i||²`` for real ``images`` that require grad (zero where the logits do
    not depend on the images). Differentiable (``create_graph``), so it trains the discriminator."""
    if not isinstance(images, torch.Tensor) or not images.requires_grad:
        raise ValueError("images must be a tensor that requires grad (call images.requires_grad_() first)")
    if not bool(torch.isfinite(images).all()):
        raise ValueError("images must be finite (they hold NaN or infinity)")
    logits = _vec("logits", logits, images.shape[0])
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not math.isfinite(gamma) or gamma < 0:
        raise ValueError(f"gamma must be a non-negative number, got {gamma!r}")
    if not logits.requires_grad:
        return torch.zeros((), dtype=images.dtype)
    (grad,) = torch.autograd.grad(logits.sum(), images, create_graph=True, allow_unused=True)
    if grad is None:
        return torch.zeros((), dtype=images.dtype)
    return 0.5 * gamma * grad.square().flatten(1).sum(1).mean()


def contrastive_loss(
    image_embedding: torch.Tensor,
    text_embedding: torch.Tensor,
    *,
    temperature: float = 0.1,
    groups: torch.Tensor | Sequence[int] | None = None,
) -> torch.Tensor:
    """CLIP-style image-to-text cross-entropy over the batch (the code's ``get_clip_loss``).

    ``logits_ij = cos(image_i, text_j) / temperature``; the target of row ``i`` is text ``i`` or, with ``groups``,
    the uniform distribution over the texts of ``i``'s group (the loss is then at least the targets' entropy).
    """
    if not isinstance(image_embedding, torch.Tensor) or not isinstance(text_embedding, torch.Tensor):
        raise TypeError("image_embedding and text_embedding must be torch.Tensors")
    if image_embedding.dim() != 2:
        raise ValueError(f"image_embedding must be (B, D), got {tuple(image_embedding.shape)}")
    if text_embedding.shape != image_embedding.shape:
        raise ValueError(f"text_embedding must have the image embedding's shape {tuple(image_embedding.shape)}, got "
                         f"{tuple(text_embedding.shape)}")  # fmt: skip
    for name, x in (("image_embedding", image_embedding), ("text_embedding", text_embedding)):
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite (it holds NaN or infinity)")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature) \
            or not temperature > 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    b = image_embedding.shape[0]
    logits = F.normalize(image_embedding, dim=-1) @ F.normalize(text_embedding, dim=-1).T / temperature
    if groups is None:
        return F.cross_entropy(logits, torch.arange(b))
    g = torch.as_tensor(groups)
    if g.shape != (b,) or torch.is_floating_point(g):
        raise ValueError(f"groups must hold one integer group id per row ({b}), got shape {tuple(g.shape)}")
    target = (g[:, None] == g[None, :]).float()
    target = target / target.sum(1, keepdim=True)
    return -(target * logits.log_softmax(-1)).sum(1).mean()


def offset_penalty(offsets: Sequence[torch.Tensor]) -> torch.Tensor:
    """Mean absolute value of the SCE offsets ``dw_b`` of all blocks (zero when there are none)."""
    if isinstance(offsets, torch.Tensor) or not isinstance(offsets, Sequence):
        raise TypeError("offsets must be a sequence of tensors")
    if not offsets:
        return torch.zeros(())
    if not all(isinstance(o, torch.Tensor) for o in offsets):
        raise TypeError("offsets must be a sequence of tensors")
    if not all(bool(torch.isfinite(o).all()) for o in offsets):
        raise ValueError("offsets must be finite")
    return torch.cat([o.reshape(-1) for o in offsets]).abs().mean()
