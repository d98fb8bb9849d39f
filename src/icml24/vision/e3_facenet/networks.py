"""E3-FaceNet's networks at toy scale (Zhang et al., ICML 2024, https://arxiv.org/abs/2403.06702, section 3).

* :class:`TextEncoder`: the stand-in for CLIP's text tower: frozen random word embeddings, learned positions and
  one pre-norm transformer layer; a global embedding ``f_t`` (masked mean) and token embeddings ``f_tok``.
* :class:`MappingNetwork`: the text-conditioned mapping (section 3.1; the code's ``MappingNetwork_4_text``):
  ``w = MLP(norm(z) + norm(W_t f_t))`` with ``norm`` the 2nd-moment normalisation, a tracked ``w_avg`` and
  truncation ``w_avg + psi (w - w_avg)``.
* :class:`FiLMNeRF`: a small NeRF MLP over positionally encoded points, modulated by ``w`` (FiLM), that gives a
  density and a feature per point; :func:`~icml24.vision.e3_facenet.geometry.volume_render` turns it into a
  low-resolution feature map and an expected depth (StyleNeRF's 3D part).
* :class:`ModulatedConv2d`: StyleGAN2's modulated, demodulated convolution (the 2D upsampler's layers).
* :class:`StyleCodeEnhancer`: the paper's SCE (section 3.2): for upsampler block ``b`` with input ``x_b``,
  ``f_b = x_b + CrossAttn(LN(x_b), f_tok)`` and ``dw_b = FC(flatten(Conv1x1(f_b)))``; block ``b`` is modulated
  by ``w_b' = w + lambda dw_b`` (the code's ``TransformerBlock`` and ``MappingBlock``; ``f_b`` only feeds the
  offset, the block itself still takes ``x_b``).
* :class:`E3FaceNetGenerator`: mapping -> NeRF at a camera yaw -> upsampler with per-block offsets; offset
  interpolation between two captions for editing (section 3.4; ``assist_alpha`` in the code).
* :class:`TwoLogitDiscriminator`: a realism logit and a text-match logit (projection onto the text embedding).
* :class:`AttributeEncoder`: a small CNN with an image embedding and one head per attribute; trained first and
  frozen, it is the image tower of the contrastive loss and, trained separately, the semantic metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from icml24.common.validation import integer, positive_int
from icml24.language.tokenizers import WordTokenizer
from icml24.vision.e3_facenet.faces import CameraSpec, camera_rays
from icml24.vision.e3_facenet.geometry import point_map, volume_render

__all__ = [
    "AttributeEncoder",
    "E3FaceNetConfig",
    "E3FaceNetGenerator",
    "FiLMNeRF",
    "GeneratorOutput",
    "MappingNetwork",
    "ModulatedConv2d",
    "StyleCodeEnhancer",
    "TextEncoder",
    "TextFeatures",
    "TwoLogitDiscriminator",
]


def _tensor(name: str, value: object, shape: Sequence[int | None], *, floating: bool = True) -> torch.Tensor:
    """Check a tensor's rank and the sizes that are given (None: any)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() != len(shape) or any(s is not None and s != v for s, v in zip(shape, value.shape)):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}, got {tuple(value.shape)}")
    if floating and not torch.is_floating_point(value):
        raise ValueError(f"{name} must be a float tensor, got {value.dtype}")
    return value


def normalize_2nd_moment(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``x / sqrt(mean(x²) + eps)`` over the last axis (StyleGAN's input normalisation)."""
    return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt()


# ------------------------------------------------------------------------------------------------- text
@dataclass
class TextFeatures:
    """A batch of encoded captions: ``global_`` ``(B, D)``, ``tokens`` ``(B, L, D)``, ``mask`` ``(B, L)`` bool
    (True at real tokens)."""

    global_: torch.Tensor
    tokens: torch.Tensor
    mask: torch.Tensor

    def detach(self) -> TextFeatures:
        return TextFeatures(self.global_.detach(), self.tokens.detach(), self.mask)

    def index(self, idx: torch.Tensor | slice) -> TextFeatures:
        return TextFeatures(self.global_[idx], self.tokens[idx], self.mask[idx])


class TextEncoder(nn.Module):
    """Word embeddings (frozen at their random initialisation, as the notes' stand-in for CLIP's vocabulary),
    learned positions and one pre-norm transformer encoder layer; ``encode(captions)`` tokenises with the
    project's :class:`~icml24.language.tokenizers.WordTokenizer`.

    Args:
        tokenizer: the word tokenizer (``faces.make_tokenizer()`` for the toy captions).
        dim: embedding width (CLIP ViT-B/32: 512).
        num_heads: attention heads of the layer.
        max_length: longest caption in tokens.
    """

    def __init__(self, *, tokenizer: WordTokenizer, dim: int = 32, num_heads: int = 2, max_length: int = 24) -> None:
        super().__init__()
        if not isinstance(tokenizer, WordTokenizer):
            raise TypeError(f"tokenizer must be a WordTokenizer, got {type(tokenizer).__name__}")
        dim, num_heads = positive_int(dim, "dim"), positive_int(num_heads, "num_heads")
        if dim % num_heads:
            raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
        self.tokenizer = tokenizer
        self.max_length = positive_int(max_length, "max_length")
        self.dim = dim
        self.embed = nn.Embedding(tokenizer.vocab_size, dim, padding_idx=tokenizer.pad_id)
        self.embed.weight.requires_grad_(False)
        self.pos = nn.Parameter(torch.zeros(1, max_length, dim))
        self.layer = nn.TransformerEncoderLayer(dim, num_heads, dim_feedforward=2 * dim, dropout=0.0,
                                                batch_first=True, norm_first=True)  # fmt: skip
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> TextFeatures:
        """Encode token ids ``(B, L)`` with a padding ``mask`` ``(B, L)`` (nonzero at real tokens)."""
        ids = _tensor("ids", ids, (None, None), floating=False)
        if torch.is_floating_point(ids) or ids.dtype == torch.bool:
            raise ValueError(f"ids must be an integer tensor of token ids, got {ids.dtype}")
        mask = _tensor("mask", mask, tuple(ids.shape), floating=False).bool()
        if ids.shape[1] > self.max_length:
            raise ValueError(f"ids must hold at most max_length={self.max_length} tokens, got {ids.shape[1]}")
        if bool((ids < 0).any()) or bool((ids >= self.embed.num_embeddings).any()):
            raise ValueError(f"ids must lie in [0, {self.embed.num_embeddings})")
        if not bool(mask.any(1).all()):
            raise ValueError("mask must mark at least one real token in every row")
        x = self.embed(ids) + self.pos[:, : ids.shape[1]]
        x = self.norm(self.layer(x, src_key_padding_mask=~mask))
        m = mask[..., None].float()
        glob = self.proj((x * m).sum(1) / m.sum(1))
        return TextFeatures(glob, x, mask)

    def encode(self, captions: Sequence[str]) -> TextFeatures:
        """Tokenise (right padding) and encode a list of captions."""
        if isinstance(captions, str) or not isinstance(captions, Sequence) or not captions:
            raise TypeError("captions must be a non-empty sequence of str")
        ids, mask = self.tokenizer.batch(list(captions), max_length=self.max_length)
        return self(ids, mask)


# ---------------------------------------------------------------------------------------------- mapping
class MappingNetwork(nn.Module):
    """``w = MLP(norm(z) + norm(W_t f_t))`` (section 3.1), or ``MLP(norm(z))`` with ``text_dim=0`` (unconditional).

    Args:
        z_dim, text_dim, w_dim: widths of the noise, the global text embedding and the style code (paper: 512).
        num_layers: fully connected layers with leaky ReLU (paper: 8).
        w_avg_beta: decay of the tracked mean style code (for truncation).
    """

    def __init__(self, *, z_dim: int, text_dim: int, w_dim: int, num_layers: int = 3,
                 w_avg_beta: float = 0.995) -> None:  # fmt: skip
        super().__init__()
        self.z_dim, self.w_dim = positive_int(z_dim, "z_dim"), positive_int(w_dim, "w_dim")
        self.text_dim = integer(text_dim, "text_dim", low=0)
        num_layers = positive_int(num_layers, "num_layers")
        if isinstance(w_avg_beta, bool) or not isinstance(w_avg_beta, float) or not 0 <= w_avg_beta < 1:
            raise ValueError(f"w_avg_beta must be a float in [0, 1), got {w_avg_beta!r}")
        self.w_avg_beta = w_avg_beta
        self.embed = nn.Linear(text_dim, z_dim) if text_dim else None
        dims = [z_dim] + [w_dim] * num_layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.register_buffer("w_avg", torch.zeros(w_dim))

    def forward(self, z: torch.Tensor, text_global: torch.Tensor | None = None, *,
                truncation_psi: float = 1.0) -> torch.Tensor:  # fmt: skip
        z = _tensor("z", z, (None, self.z_dim))
        if isinstance(truncation_psi, bool) or not isinstance(truncation_psi, (int, float)) or not math.isfinite(truncation_psi):
            raise ValueError(f"truncation_psi must be a finite number, got {truncation_psi!r}")
        x = normalize_2nd_moment(z)
        if self.embed is not None:
            if text_global is None:
                raise ValueError("text_global is required by a text-conditioned mapping network")
            text_global = _tensor("text_global", text_global, (z.shape[0], self.text_dim))
            x = x + normalize_2nd_moment(self.embed(text_global))
        for layer in self.layers:
            x = F.leaky_relu(layer(x), 0.2)
        if self.training:
            with torch.no_grad():
                self.w_avg.copy_(x.detach().mean(0).lerp(self.w_avg, self.w_avg_beta))
        if truncation_psi != 1.0:
            x = self.w_avg.lerp(x, float(truncation_psi))
        return x


# ------------------------------------------------------------------------------------------------- NeRF
class FiLMNeRF(nn.Module):
    """A NeRF MLP whose hidden layers are FiLM-modulated by ``w``: ``h <- lrelu((1 + gamma(w)) (W h + b) +
    beta(w))``; outputs a density ``softplus(s(h) + prior(p))`` and a feature vector per point.

    ``prior(p) = sphere_prior * (1 - |p| / sphere_radius)`` starts the density as a solid ball (the toy's
    replacement for StyleNeRF's pre-trained geometry, which E3-FaceNet fine-tunes); the MLP learns the residual.

    Args:
        w_dim: style code width.
        hidden: MLP width (paper/StyleNeRF: 128-256 with 8 layers for the foreground).
        num_layers: hidden layers.
        feature_channels: channels of the rendered feature map (paper: 64).
        frequencies: positional-encoding octaves.
        sphere_prior: strength of the density prior (0: none).
        sphere_radius: radius of the prior's ball.
    """

    def __init__(self, *, w_dim: int, hidden: int = 64, num_layers: int = 2, feature_channels: int = 16,
                 frequencies: int = 3, sphere_prior: float = 8.0, sphere_radius: float = 0.9) -> None:  # fmt: skip
        super().__init__()
        w_dim, hidden = positive_int(w_dim, "w_dim"), positive_int(hidden, "hidden")
        num_layers = positive_int(num_layers, "num_layers")
        self.frequencies = integer(frequencies, "frequencies", low=0)
        self.feature_channels = positive_int(feature_channels, "feature_channels")
        self.sphere_prior, self.sphere_radius = float(sphere_prior), float(sphere_radius)
        in_dim = 3 + 6 * self.frequencies
        dims = [in_dim] + [hidden] * num_layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.film = nn.ModuleList(nn.Linear(w_dim, 2 * hidden) for _ in range(num_layers))
        for f in self.film:  # start as the identity modulation (gamma = 0, beta = 0)
            nn.init.normal_(f.weight, std=0.1 / math.sqrt(w_dim))
            nn.init.zeros_(f.bias)
        self.sigma = nn.Linear(hidden, 1)
        self.feature = nn.Linear(hidden, feature_channels)
        self.background = nn.Linear(w_dim, feature_channels)

    def encode(self, points: torch.Tensor) -> torch.Tensor:
        """``[p, sin(2^k pi p), cos(2^k pi p)]`` for ``k < frequencies``."""
        out = [points]
        for k in range(self.frequencies):
            out += [torch.sin((2**k) * math.pi * points), torch.cos((2**k) * math.pi * points)]
        return torch.cat(out, -1)

    def forward(self, points: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Densities ``(B, N)`` and features ``(B, N, C)`` of world points ``(B, N, 3)`` for style codes ``(B, w_dim)``."""
        points = _tensor("points", points, (None, None, 3))
        w = _tensor("w", w, (points.shape[0], None))
        h = self.encode(points)
        for layer, film in zip(self.layers, self.film):
            gamma, beta = film(w)[:, None].chunk(2, -1)
            h = F.leaky_relu((1 + gamma) * layer(h) + beta, 0.2)
        prior = self.sphere_prior * (1 - points.norm(dim=-1) / self.sphere_radius)
        sigma = F.softplus(self.sigma(h)[..., 0] + prior)
        return sigma, self.feature(h)


# --------------------------------------------------------------------------------------------- upsampler
class ModulatedConv2d(nn.Module):
    """StyleGAN2's modulated convolution: input channels scaled by ``s = A(w)``, then (``demodulate``) each
    output channel divided by ``sqrt(sum_{i,k} (W_oik s_i)²)`` (Karras et al., 2020, eqs. 1-3)."""

    def __init__(self, *, in_channels: int, out_channels: int, kernel_size: int, w_dim: int,
                 demodulate: bool = True) -> None:  # fmt: skip
        super().__init__()
        in_channels = positive_int(in_channels, "in_channels")
        out_channels = positive_int(out_channels, "out_channels")
        self.kernel_size, w_dim = positive_int(kernel_size, "kernel_size"), positive_int(w_dim, "w_dim")
        if not isinstance(demodulate, bool):
            raise TypeError(f"demodulate must be a bool, got {type(demodulate).__name__}")
        self.demodulate = demodulate
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.affine = nn.Linear(w_dim, in_channels)
        nn.init.ones_(self.affine.bias)
        self.gain = 1 / math.sqrt(in_channels * kernel_size**2)

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x = _tensor("x", x, (None, self.weight.shape[1], None, None))
        w = _tensor("w", w, (x.shape[0], self.affine.in_features))
        s = self.affine(w)
        weight = self.weight * self.gain
        y = F.conv2d(x * s[:, :, None, None], weight, padding=self.kernel_size // 2)
        if self.demodulate:
            d = (s.square() @ weight.square().sum((2, 3)).T + 1e-8).rsqrt()  # (B, out)
            y = y * d[:, :, None, None]
        return y + self.bias[None, :, None, None]


class StyleCodeEnhancer(nn.Module):
    """The Style Code Enhancer of one upsampler block (section 3.2).

    ``f = x + CrossAttn(LN(x), tokens)`` with the ``H*W`` pixels of ``x`` as queries (LayerNorm over ``C, H, W``,
    as the code's ``TransformerBlock``) and the caption's tokens as keys and values (one head); then
    ``dw = FC(flatten(Conv1x1_{C->1}(f)))``, ``H*W -> w_dim`` (the code's ``MappingBlock``). The FC starts at
    zero, so an untrained enhancer adds no offset (the generator starts as the one without SCE).
    """

    def __init__(self, *, channels: int, resolution: int, text_dim: int, w_dim: int, inner_dim: int = 32) -> None:
        super().__init__()
        self.channels = positive_int(channels, "channels")
        self.resolution = positive_int(resolution, "resolution")
        text_dim, w_dim = positive_int(text_dim, "text_dim"), positive_int(w_dim, "w_dim")
        inner_dim = positive_int(inner_dim, "inner_dim")
        self.norm = nn.LayerNorm([channels, resolution, resolution])
        self.q = nn.Linear(channels, inner_dim, bias=False)
        self.k = nn.Linear(text_dim, inner_dim, bias=False)
        self.v = nn.Linear(text_dim, inner_dim, bias=False)
        self.out = nn.Linear(inner_dim, channels)
        self.to_map = nn.Conv2d(channels, 1, 1)
        self.offset = nn.Linear(resolution * resolution, w_dim)
        nn.init.zeros_(self.offset.weight)
        nn.init.zeros_(self.offset.bias)

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(f, dw)``: the text-fused features ``(B, C, H, W)`` and the style offset ``(B, w_dim)``."""
        r = self.resolution
        x = _tensor("x", x, (None, self.channels, r, r))
        tokens = _tensor("tokens", tokens, (x.shape[0], None, self.k.in_features))
        mask = _tensor("mask", mask, tuple(tokens.shape[:2]), floating=False).bool()
        b = x.shape[0]
        q = self.q(self.norm(x).flatten(2).transpose(1, 2))  # (B, HW, inner)
        k, v = self.k(tokens), self.v(tokens)
        att = (q @ k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        att = att.masked_fill(~mask[:, None, :], float("-inf")).softmax(-1)
        fused = x + self.out(att @ v).transpose(1, 2).reshape(b, self.channels, r, r)
        dw = self.offset(self.to_map(fused).flatten(1))
        return fused, dw


# ------------------------------------------------------------------------------------------------ generator
@dataclass(frozen=True)
class E3FaceNetConfig:
    """The generator's sizes (toy scale; the paper's values in brackets)."""

    z_dim: int = 32
    """Noise width (512)."""
    w_dim: int = 64
    """Style code width (512)."""
    text_dim: int = 32
    """Width of the text embeddings (CLIP ViT-B/32: 512); 0 makes an unconditional generator."""
    mapping_layers: int = 3
    """Layers of the mapping network (8)."""
    nerf_hidden: int = 64
    """NeRF MLP width (StyleNeRF: 128 foreground, 64 background)."""
    nerf_layers: int = 2
    """NeRF MLP hidden layers."""
    feature_channels: int = 16
    """Channels of the volume-rendered feature map (64)."""
    low_resolution: int = 8
    """Resolution of the volume-rendered feature map (32)."""
    samples_per_ray: int = 12
    """Samples along each ray (14 + hierarchical, 4 background)."""
    upsampler_channels: int = 32
    """Channels of the two upsampler blocks (512 down to 64 over four blocks to 512 px)."""
    style_code_enhancer: bool = True
    """Whether each upsampler block takes an SCE offset (the paper's full model: True)."""
    offset_scale: float = 1.0
    """lambda in ``w_b' = w + lambda dw_b`` (the code's ``_lambda``: 1.0)."""
    camera: tuple[float, float, float, float] = (4.0, 28.0, 2.8, 5.2)
    """Camera radius, field of view in degrees, near and far depth (the toy world's :class:`CameraSpec`)."""

    def __post_init__(self) -> None:
        for name in ("z_dim", "w_dim", "mapping_layers", "nerf_hidden", "nerf_layers", "feature_channels",
                     "low_resolution", "samples_per_ray", "upsampler_channels"):  # fmt: skip
            integer(getattr(self, name), name, low=2 if name in ("low_resolution", "samples_per_ray") else 1)
        integer(self.text_dim, "text_dim", low=0)
        if not isinstance(self.style_code_enhancer, bool):
            raise TypeError(f"style_code_enhancer must be a bool, got {type(self.style_code_enhancer).__name__}")
        if self.style_code_enhancer and self.text_dim == 0:
            raise ValueError("style_code_enhancer needs text (text_dim > 0)")
        if isinstance(self.offset_scale, bool) or not isinstance(self.offset_scale, (int, float)):
            raise TypeError(f"offset_scale must be a number, got {type(self.offset_scale).__name__}")
        if not math.isfinite(self.offset_scale):
            raise ValueError(f"offset_scale must be finite, got {self.offset_scale}")
        if not isinstance(self.camera, tuple) or len(self.camera) != 4:
            raise ValueError(f"camera must be a tuple (radius, fov_degrees, near, far), got {self.camera!r}")
        try:
            CameraSpec(radius=self.camera[0], fov_degrees=self.camera[1], near=self.camera[2], far=self.camera[3])
        except ValueError as exc:
            raise ValueError(f"camera must be a valid (radius, fov_degrees, near, far): {exc}") from exc

    @property
    def image_resolution(self) -> int:
        """Output resolution: one 2x upsampling of the feature map (16 at the defaults)."""
        return 2 * self.low_resolution

    @property
    def camera_spec(self) -> CameraSpec:
        r, fov, near, far = self.camera
        return CameraSpec(radius=r, fov_degrees=fov, near=near, far=far)


@dataclass
class GeneratorOutput:
    """What one generator call returns.

    Attributes:
        image: ``(B, 3, 2h, 2h)`` RGB in about ``[-1, 1]``.
        depth: expected depth ``(B, h, h)`` of the low-resolution rays.
        points: the point map ``P = o + d r``, ``(B, 3, h, h)`` (the geometric regulariser's input).
        opacity: accumulated opacity ``(B, h, h)``.
        w: the style code ``(B, w_dim)`` (shared by every view of one ``(z, text)``).
        offsets: the SCE offsets ``dw_b`` of the upsampler blocks, each ``(B, w_dim)`` (empty without SCE).
        nerf_rgb: the first three channels of the volume-rendered feature map, ``(B, 3, h, h)``: the NeRF's own
            low-resolution image (StyleNeRF's NeRF path, which its path regulariser ties the upsampled image to).
    """

    image: torch.Tensor
    depth: torch.Tensor
    points: torch.Tensor
    opacity: torch.Tensor
    w: torch.Tensor
    offsets: list[torch.Tensor] = field(default_factory=list)
    nerf_rgb: torch.Tensor | None = None


class E3FaceNetGenerator(nn.Module):
    """Text -> 3D-aware face in one forward pass (section 3): mapping, FiLM-NeRF volume rendering at a yaw, and a
    2D upsampler whose two blocks are modulated by ``w + lambda dw_b`` with the SCE offsets ``dw_b``.

    Args:
        config: the sizes (:class:`E3FaceNetConfig`).
    """

    def __init__(self, *, config: E3FaceNetConfig | None = None) -> None:
        super().__init__()
        config = E3FaceNetConfig() if config is None else config
        if not isinstance(config, E3FaceNetConfig):
            raise TypeError(f"config must be an E3FaceNetConfig, got {type(config).__name__}")
        self.config = c = config
        self.mapping = MappingNetwork(z_dim=c.z_dim, text_dim=c.text_dim, w_dim=c.w_dim, num_layers=c.mapping_layers)
        self.nerf = FiLMNeRF(w_dim=c.w_dim, hidden=c.nerf_hidden, num_layers=c.nerf_layers,
                             feature_channels=c.feature_channels)  # fmt: skip
        ch, lo = c.upsampler_channels, c.low_resolution
        self.block1 = ModulatedConv2d(in_channels=c.feature_channels, out_channels=ch, kernel_size=3, w_dim=c.w_dim)
        self.block2 = ModulatedConv2d(in_channels=ch, out_channels=ch, kernel_size=3, w_dim=c.w_dim)
        self.to_rgb = ModulatedConv2d(in_channels=ch, out_channels=3, kernel_size=1, w_dim=c.w_dim, demodulate=False)
        self.enhancers = nn.ModuleList()
        if c.style_code_enhancer:
            self.enhancers.append(StyleCodeEnhancer(channels=c.feature_channels, resolution=lo, text_dim=c.text_dim,
                                                    w_dim=c.w_dim))  # fmt: skip
            self.enhancers.append(StyleCodeEnhancer(channels=ch, resolution=2 * lo, text_dim=c.text_dim, w_dim=c.w_dim))
        depths = torch.linspace(c.camera[2], c.camera[3], c.samples_per_ray + 1)
        self.register_buffer("depths", (depths[:-1] + depths[1:]) / 2)  # interval midpoints

    def render_features(self, w: torch.Tensor, yaw: torch.Tensor) -> dict[str, torch.Tensor]:
        """Volume-render the low-resolution feature map ``(B, C, h, h)``, depth, opacity and point map at ``yaw``."""
        c = self.config
        w = _tensor("w", w, (None, c.w_dim))
        yaw = _tensor("yaw", yaw, (w.shape[0],))
        b, h = w.shape[0], c.low_resolution
        origins, dirs = camera_rays(yaw, resolution=h, camera=c.camera_spec)
        pts = origins[:, :, None] + self.depths[None, None, :, None] * dirs[:, :, None]  # (B, R, K, 3)
        sigma, feat = self.nerf(pts.reshape(b, -1, 3), w)
        k = c.samples_per_ray
        out = volume_render(sigma.reshape(b, h * h, k), feat.reshape(b, h * h, k, -1), self.depths, far=c.camera[3],
                            background=self.nerf.background(w))  # fmt: skip
        depth = out["depth"].reshape(b, h, h)
        return {
            "features": out["features"].transpose(1, 2).reshape(b, -1, h, h),
            "depth": depth,
            "opacity": out["opacity"].reshape(b, h, h),
            "points": point_map(depth, origins, dirs),
        }

    def synthesis(
        self,
        w: torch.Tensor,
        yaw: torch.Tensor,
        text: TextFeatures | None = None,
        *,
        edit_text: TextFeatures | None = None,
        edit_alpha: float = 0.5,
    ) -> GeneratorOutput:
        """Render style codes ``w`` at ``yaw``; ``text`` gives the SCE its tokens (ignored without SCE).

        Editing (section 3.4): with ``edit_text``, each block's offset is ``(1 - a) dw_b(text) + a dw_b(edit_text)``
        on the same ``w``, ``a = edit_alpha``; ``a = 0`` reproduces the source generation bit for bit.
        """
        c = self.config
        if self.enhancers and text is None:
            raise ValueError("text is required by a generator with the Style Code Enhancer")
        if isinstance(edit_alpha, bool) or not isinstance(edit_alpha, (int, float)) or not math.isfinite(edit_alpha):
            raise ValueError(f"edit_alpha must be a finite number, got {edit_alpha!r}")
        if edit_text is not None and not isinstance(edit_text, TextFeatures):
            raise TypeError(f"edit_text must be TextFeatures or None, got {type(edit_text).__name__}")
        if text is not None and not isinstance(text, TextFeatures):
            raise TypeError(f"text must be TextFeatures or None, got {type(text).__name__}")
        r = self.render_features(w, yaw)
        x = r["features"]
        offsets: list[torch.Tensor] = []

        def styled(i: int, x: torch.Tensor) -> torch.Tensor:
            if not self.enhancers:
                return w
            _, dw = self.enhancers[i](x, text.tokens, text.mask)
            if edit_text is not None:
                _, dw_edit = self.enhancers[i](x, edit_text.tokens, edit_text.mask)
                dw = (1 - edit_alpha) * dw + edit_alpha * dw_edit
            offsets.append(dw)
            return w + c.offset_scale * dw

        x = F.leaky_relu(self.block1(x, styled(0, x)), 0.2)
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        w2 = styled(1, x)
        x = F.leaky_relu(self.block2(x, w2), 0.2)
        image = self.to_rgb(x, w2)
        return GeneratorOutput(image, r["depth"], r["points"], r["opacity"], w, offsets, r["features"][:, :3])

    def forward(
        self,
        z: torch.Tensor,
        yaw: torch.Tensor,
        text: TextFeatures | None = None,
        *,
        edit_text: TextFeatures | None = None,
        edit_alpha: float = 0.5,
        truncation_psi: float = 1.0,
    ) -> GeneratorOutput:
        """``synthesis(mapping(z, text.global_), yaw, text)``: one forward pass from a caption to a view."""
        if self.config.text_dim and text is None:
            raise ValueError("text is required by a text-conditioned generator")
        if text is not None and not isinstance(text, TextFeatures):
            raise TypeError(f"text must be TextFeatures or None, got {type(text).__name__}")
        w = self.mapping(z, text.global_ if (text is not None and self.config.text_dim) else None,
                         truncation_psi=truncation_psi)  # fmt: skip
        return self.synthesis(w, yaw, text, edit_text=edit_text, edit_alpha=edit_alpha)


# --------------------------------------------------------------------------------------------- discriminator
def _conv_trunk(channels: int) -> nn.Sequential:
    """16x16 RGB -> a 128-d feature: three 3x3 convolutions (the last two with stride 2) and a linear layer."""
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1), nn.LeakyReLU(0.2),
        nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
        nn.Conv2d(2 * channels, 2 * channels, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
        nn.Flatten(), nn.LazyLinear(128), nn.LeakyReLU(0.2),
    )  # fmt: skip


class TwoLogitDiscriminator(nn.Module):
    """A discriminator with a realism logit ``s_gen(x)`` and a text-match logit ``s_match(x, t) = <P h(x),
    E t> / sqrt(D)`` (the code's ``DiscriminatorEpilogue_4_text`` projection onto the mapped text embedding).

    Args:
        text_dim: width of the global text embedding (0: no match logit, an unconditional discriminator).
        channels: width of the first convolution.
        resolution: input resolution.
    """

    def __init__(self, *, text_dim: int, channels: int = 32, resolution: int = 16) -> None:
        super().__init__()
        self.text_dim = integer(text_dim, "text_dim", low=0)
        channels = positive_int(channels, "channels")
        self.resolution = integer(resolution, "resolution", low=4)
        self.trunk = _conv_trunk(channels)
        self.trunk(torch.zeros(1, 3, resolution, resolution))  # materialise the lazy layer
        self.realism = nn.Linear(128, 1)
        self.match_proj = nn.Linear(128, 32) if text_dim else None
        self.text_proj = nn.Linear(text_dim, 32) if text_dim else None

    def forward(self, images: torch.Tensor, text_global: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(s_gen, s_match)``, each ``(B,)``; ``s_match`` is None for an unconditional discriminator."""
        images = _tensor("images", images, (None, 3, self.resolution, self.resolution))
        h = self.trunk(images)
        gen = self.realism(h)[:, 0]
        if self.match_proj is None:
            return gen, None
        if text_global is None:
            raise ValueError("text_global is required by a text-conditioned discriminator")
        text_global = _tensor("text_global", text_global, (images.shape[0], self.text_dim))
        match = (self.match_proj(h) * self.text_proj(text_global)).sum(-1) / math.sqrt(32)
        return gen, match


class AttributeEncoder(nn.Module):
    """A small CNN image encoder: a unit-norm embedding ``(B, embed_dim)`` and one logit head per attribute.

    Trained on the procedural renders and frozen, it stands in for CLIP's image tower (the contrastive loss and the
    optimisation baseline's guidance) and, trained separately from another seed, for the semantic metric.

    Args:
        attribute_sizes: number of values of each attribute.
        embed_dim: embedding width.
        channels: width of the first convolution.
        resolution: input resolution.
    """

    def __init__(self, *, attribute_sizes: Sequence[int], embed_dim: int = 32, channels: int = 32,
                 resolution: int = 16) -> None:  # fmt: skip
        super().__init__()
        if isinstance(attribute_sizes, (str, bytes)) or not isinstance(attribute_sizes, Sequence) or not attribute_sizes:
            raise TypeError("attribute_sizes must be a non-empty sequence of ints")
        self.attribute_sizes = tuple(
            integer(int(s) if not isinstance(s, bool) else s, "attribute_sizes", low=2) for s in attribute_sizes
        )
        self.embed_dim, channels = positive_int(embed_dim, "embed_dim"), positive_int(channels, "channels")
        self.resolution = integer(resolution, "resolution", low=4)
        self.trunk = _conv_trunk(channels)
        self.trunk(torch.zeros(1, 3, resolution, resolution))
        self.embed = nn.Linear(128, embed_dim)
        self.heads = nn.ModuleList(nn.Linear(128, s) for s in self.attribute_sizes)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``(embedding, logits)``: the unit-norm embedding and a list of ``(B, n_values)`` logits."""
        images = _tensor("images", images, (None, 3, self.resolution, self.resolution))
        h = self.trunk(images)
        return F.normalize(self.embed(h), dim=-1), [head(h) for head in self.heads]

    @torch.no_grad()
    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Predicted attribute values ``(B, n_attributes)`` long."""
        return torch.stack([lg.argmax(-1) for lg in self(images)[1]], 1)
