"""The masked autoencoder that ViP trains with DP-SGD, built on the shared tiny ViT.

Yu, Sanjabi, Ma, Chaudhuri, Guo, "ViP: A Differentially Private Foundation Model for Computer Vision",
ICML 2024 (https://arxiv.org/abs/2306.08842), Sec. 3: ViP is a masked autoencoder (He et al., CVPR 2022,
https://arxiv.org/abs/2111.06377). An image is cut into ``P`` patches; a fresh random subset of
``round(P (1 - r))`` patches (mask ratio ``r = 0.75``) is kept *per image*; the ViT encoder sees only the
kept patches; a light decoder gets the encoded patches plus a learned mask token at every removed position
and predicts the pixels of every patch. The loss of image ``i`` is the mean squared error over its *masked*
patches only,

    l_i(theta) = (1 / |M_i|) sum_{p in M_i} (1 / d) || D(E(x_i[visible]))_p - x_{i,p} ||^2,

a per-example loss, which is what DP-SGD needs (per-sample clipping, Sec. 3.1: "MAE aligns well with DP-SGD").

Both position embeddings are the fixed 2-D sine-cosine tables of MAE (``requires_grad=False``), so every
trainable parameter lives in a layer that Opacus's hook-based per-sample gradients support (``Conv2d``,
``Linear``, ``LayerNorm``) or in :class:`MaskTokenFill`, for which this module registers a grad sampler.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from icml24.common.validation import positive_int
from icml24.vision.positions import sincos_2d
from icml24.vision.tiny_vit import SoftmaxAttention, TinyViT, TransformerBlock

__all__ = ["MAEConfig", "MaskTokenFill", "MaskedAutoencoder", "masked_patch_loss", "patchify", "random_masking",
           "sincos_pos_embed"]


@dataclass(frozen=True)
class MAEConfig:
    """Shape of the MAE (the paper's ViT-B/16 with a 512-d, 4-block decoder, shrunk to 16x16 images)."""

    image_size: int = 16
    """Side of the square input image (pixels)."""
    patch_size: int = 4
    """Side of a square patch; ``P = (image_size / patch_size)^2`` tokens (16 here, 196 in the paper)."""
    in_channels: int = 1
    """Image channels."""
    dim: int = 48
    """Encoder token width (768 for ViT-B)."""
    depth: int = 3
    """Encoder blocks (12 for ViT-B)."""
    num_heads: int = 4
    """Encoder attention heads."""
    decoder_dim: int = 32
    """Decoder token width (512 in the paper)."""
    decoder_depth: int = 1
    """Decoder blocks (4 in the paper's DP recipe, ``dec512d4b``)."""
    decoder_heads: int = 4
    """Decoder attention heads."""
    mask_ratio: float = 0.75
    """Fraction ``r`` of patches removed per image (MAE and ViP: 0.75)."""

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "in_channels", "dim", "depth", "num_heads", "decoder_dim",
                     "decoder_depth", "decoder_heads"):  # fmt: skip
            positive_int(getattr(self, name), name)
        if self.image_size % self.patch_size:
            raise ValueError(f"patch_size ({self.patch_size}) must divide image_size ({self.image_size})")
        if self.dim % 4:
            raise ValueError(f"dim must be a multiple of 4 for the 2-D sine-cosine embedding, got {self.dim}")
        if self.decoder_dim % 4:
            raise ValueError(f"decoder_dim must be a multiple of 4, got {self.decoder_dim}")
        if self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")
        if self.decoder_dim % self.decoder_heads:
            raise ValueError(f"decoder_dim ({self.decoder_dim}) must be divisible by decoder_heads ({self.decoder_heads})")
        if isinstance(self.mask_ratio, bool) or not isinstance(self.mask_ratio, (int, float)):
            raise TypeError(f"mask_ratio must be a float, got {type(self.mask_ratio).__name__}")
        n = self.num_patches
        if not (0.0 <= self.mask_ratio < 1.0) or not 1 <= self.num_visible <= n:
            raise ValueError(f"mask_ratio must be in [0, 1) and keep at least one of the {n} patches, got {self.mask_ratio!r}")

    @property
    def num_patches(self) -> int:
        """``P``, the number of patch tokens."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def num_visible(self) -> int:
        """Patches the encoder sees per image, ``round(P (1 - r))`` (``int(P (1 - r))`` in the MAE code)."""
        return int(self.num_patches * (1 - self.mask_ratio))


def sincos_pos_embed(dim: int, grid_size: int) -> torch.Tensor:
    """Fixed 2-D sine-cosine position embedding of MAE, ``(grid_size**2, dim)``: half the channels encode the
    row and half the column, each as ``[sin(pos w_k), cos(pos w_k)]`` with ``w_k = 10000^(-k / (dim/4))``
    (:func:`icml24.vision.positions.sincos_2d` with this paper's argument order)."""
    positive_int(dim, "dim")
    positive_int(grid_size, "grid_size")
    return sincos_2d(grid_size, dim)


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """``(B, C, H, W)`` images to ``(B, P, patch_size**2 * C)`` patch pixel vectors, rows of patches first
    (the order of the ViT's patch tokens)."""
    if not isinstance(images, torch.Tensor) or images.dim() != 4:
        raise ValueError(f"images must be a (B, C, H, W) tensor, got {getattr(images, 'shape', type(images))}")
    positive_int(patch_size, "patch_size")
    if not torch.isfinite(images).all():
        raise ValueError("images must be finite")
    h, w = images.shape[2:]
    if h % patch_size or w % patch_size:
        raise ValueError(f"patch_size ({patch_size}) must divide the image sides ({h}, {w})")
    return _patches(images, patch_size)


def _patches(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """:func:`patchify` without the checks (no data-dependent control flow, so ``torch.func.vmap`` works)."""
    b, c, h, w = images.shape
    gh, gw = h // patch_size, w // patch_size
    x = images.reshape(b, c, gh, patch_size, gw, patch_size)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(b, gh * gw, patch_size * patch_size * c)


def random_masking(batch: int, num_patches: int, num_visible: int, *, generator: torch.Generator | None = None,
                   device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """An independent uniformly random subset of ``num_visible`` patches per image (MAE's argsort of noise).

    Returns ``(ids_keep (B, num_visible), ids_restore (B, P), mask (B, P))`` with ``mask`` 1 on removed
    patches; ``ids_restore`` undoes the shuffle that puts the kept patches first.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
        raise ValueError(f"batch must be an int >= 0, got {batch!r}")
    positive_int(num_patches, "num_patches")
    if isinstance(num_visible, bool) or not isinstance(num_visible, int) or not 1 <= num_visible <= num_patches:
        raise ValueError(f"num_visible must be an int in [1, {num_patches}], got {num_visible!r}")
    noise = torch.rand(batch, num_patches, generator=generator, device=device)
    ids_shuffle = noise.argsort(dim=1)
    ids_restore = ids_shuffle.argsort(dim=1)
    mask = torch.ones(batch, num_patches, device=device)
    mask[:, :num_visible] = 0
    return ids_shuffle[:, :num_visible], ids_restore, mask.gather(1, ids_restore)


def masked_patch_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-image MAE loss ``l_i = sum_p m_ip ||pred_ip - target_ip||^2 / d / sum_p m_ip`` (He et al. 2022, Sec. 3;
    ViP keeps ``norm_pix_loss`` off): the mean squared error over the masked patches only, ``(B,)``."""
    if not all(isinstance(t, torch.Tensor) for t in (pred, target, mask)):
        raise TypeError("pred, target and mask must be tensors")
    if pred.shape != target.shape or pred.dim() != 3:
        raise ValueError(f"pred and target must be equal (B, P, d) tensors, got {tuple(pred.shape)} and {tuple(target.shape)}")
    if tuple(mask.shape) != tuple(pred.shape[:2]):
        raise ValueError(f"mask must have shape {tuple(pred.shape[:2])}, got {tuple(mask.shape)}")
    err = (pred - target).pow(2).mean(dim=-1)
    return (err * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)


class MaskTokenFill(nn.Module):
    """Appends the learned mask token at the ``num_masked`` removed positions: ``(B, V, D) -> (B, V + M, D)``,
    with ``M = num_masked`` fixed at construction (a tensor-only forward, as Opacus's hooks need).

    A module of its own so that Opacus computes its per-sample gradient (the sum of the output gradients at
    the appended positions), registered below.
    """

    def __init__(self, dim: int, num_masked: int):
        super().__init__()
        if isinstance(num_masked, bool) or not isinstance(num_masked, int) or num_masked < 0:
            raise ValueError(f"num_masked must be an int >= 0, got {num_masked!r}")
        self.num_masked = num_masked
        self.token = nn.Parameter(torch.zeros(1, 1, positive_int(dim, "dim")))
        nn.init.normal_(self.token, std=0.02)

    def forward(self, visible: torch.Tensor) -> torch.Tensor:
        fill = self.token.expand(visible.shape[0], self.num_masked, -1)
        return torch.cat([visible, fill], dim=1)


def mask_token_grad_sample(layer: MaskTokenFill, activations: list[torch.Tensor], backprops: torch.Tensor):
    """Opacus grad sampler of :class:`MaskTokenFill`: the per-sample gradient of the mask token is the sum of
    the output gradients over the appended positions (registered by :mod:`icml24.privacy.vip.dp`)."""
    n_visible = activations[0].shape[1]
    return {layer.token: backprops[:, n_visible:].sum(dim=1, keepdim=True)}


class MaskedAutoencoder(nn.Module):
    """MAE with the shared :class:`~icml24.vision.tiny_vit.TinyViT` as encoder (He et al. 2022; ViP Sec. 3).

    ``forward(images)`` returns the per-image loss ``l_i`` (a ``(B,)`` tensor) under fresh random masks;
    :meth:`features` returns the mean-pooled encoder output of the unmasked image for linear probing (ViP's
    probes use global pooling too).

    Args:
        config: the architecture (:class:`MAEConfig`).
    """

    def __init__(self, config: MAEConfig | None = None):
        super().__init__()
        config = MAEConfig() if config is None else config
        if not isinstance(config, MAEConfig):
            raise TypeError(f"config must be an MAEConfig, got {type(config).__name__}")
        self.config = c = config
        grid = c.image_size // c.patch_size
        self.encoder = TinyViT(image_size=c.image_size, patch_size=c.patch_size, in_channels=c.in_channels,
                               num_classes=1, dim=c.dim, depth=c.depth, num_heads=c.num_heads, mlp_dim=4 * c.dim,
                               dropout=0.0)  # fmt: skip
        # MAE's fixed position embedding; frozen, so Opacus never needs a per-sample gradient for it.
        with torch.no_grad():
            self.encoder.pos_embed.copy_(sincos_pos_embed(c.dim, grid)[None])
        self.encoder.pos_embed.requires_grad_(False)
        self.encoder.head = nn.Identity()  # forward() of the encoder then returns pooled features
        self.decoder_embed = nn.Linear(c.dim, c.decoder_dim)
        self.mask_fill = MaskTokenFill(c.decoder_dim, c.num_patches - c.num_visible)
        self.register_buffer("decoder_pos_embed", sincos_pos_embed(c.decoder_dim, grid)[None], persistent=False)
        self.decoder_blocks = nn.ModuleList(
            TransformerBlock(dim=c.decoder_dim, mlp_dim=4 * c.decoder_dim,
                             attention=SoftmaxAttention(dim=c.decoder_dim, num_heads=c.decoder_heads))
            for _ in range(c.decoder_depth)
        )  # fmt: skip
        self.decoder_norm = nn.LayerNorm(c.decoder_dim)
        self.decoder_pred = nn.Linear(c.decoder_dim, c.patch_size**2 * c.in_channels)
        self.generator: torch.Generator | None = None
        """Source of the masks; ``None`` draws from torch's global generator."""

    def _check(self, images: torch.Tensor) -> None:
        c = self.config
        expected = (c.in_channels, c.image_size, c.image_size)
        if not isinstance(images, torch.Tensor) or images.dim() != 4 or tuple(images.shape[1:]) != expected:
            shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
            raise ValueError(f"images must have shape (B, {', '.join(map(str, expected))}), got {shape}")

    def reconstruct(self, images: torch.Tensor, masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Predicted patch pixels ``(B, P, p*p*C)`` and the mask ``(B, P)`` (1 = removed) it was made under."""
        self._check(images)
        c = self.config
        b = images.shape[0]
        if masks is None:
            masks = random_masking(b, c.num_patches, c.num_visible, generator=self.generator, device=images.device)
        ids_keep, ids_restore, mask = masks
        tokens = self.encoder.tokens(images)
        x = tokens.gather(1, ids_keep[..., None].expand(-1, -1, tokens.shape[-1]))
        for block in self.encoder.blocks:
            x = block(x)
        x = self.decoder_embed(self.encoder.norm(x))
        if ids_keep.shape[1] != c.num_visible:
            raise ValueError(f"masks must keep {c.num_visible} patches per image, got {ids_keep.shape[1]}")
        x = self.mask_fill(x)
        x = x.gather(1, ids_restore[..., None].expand(-1, -1, x.shape[-1])) + self.decoder_pos_embed
        for block in self.decoder_blocks:
            x = block(x)
        return self.decoder_pred(self.decoder_norm(x)), mask

    def forward(self, images: torch.Tensor,
                masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:  # fmt: skip
        """Per-image MAE loss ``l_i``: mean squared pixel error over the masked patches, ``(B,)``."""
        pred, mask = self.reconstruct(images, masks)
        return masked_patch_loss(pred, _patches(images, self.config.patch_size), mask)

    @torch.no_grad()
    def features(self, images: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
        """Frozen mean-pooled encoder features of the whole (unmasked) image, ``(B, dim)``, for linear probing."""
        self._check(images)
        positive_int(batch_size, "batch_size")
        was_training = self.training
        self.eval()
        out = torch.cat([self.encoder(images[i : i + batch_size]) for i in range(0, len(images), batch_size)]) \
            if len(images) else images.new_zeros(0, self.config.dim)  # fmt: skip
        self.train(was_training)
        return out


def parameter_count(model: nn.Module) -> int:
    """Trainable parameters of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)

