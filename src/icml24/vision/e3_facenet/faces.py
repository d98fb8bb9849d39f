"""Procedural "toy faces" with captions: the miniature stand-in for MM-CelebA-HQ (notes section 6).

E3-FaceNet (Zhang et al., ICML 2024, https://arxiv.org/abs/2403.06702) is trained on captioned photographs of
faces. Here a face is an ellipsoid head, rendered analytically by ray casting from a camera on a circle around
it (the yaw range ``[-0.3, 0.3]`` rad of the paper's camera, ``range_u`` of its StyleNeRF config), with four
attributes painted on the surface in the head's frame: hair colour (black / blond / red), glasses (no / yes),
smile (neutral / smiling) and skin tone (light / dark). Because the parts live on a 3D surface, two views of one
face are consistent by construction, which is what the multi-view measures compare a generator against.

Captions come from templates with synonyms ("a person with golden hair and pale skin, smiling, wearing
glasses"), in random order, so that a text encoder must map different words to the same attribute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from icml24.common.validation import positive_int
from icml24.language.tokenizers import WordTokenizer

__all__ = [
    "ATTRIBUTES",
    "CameraSpec",
    "camera_rays",
    "caption_faces",
    "make_tokenizer",
    "parse_caption",
    "render_toy_faces",
    "sample_attributes",
]

ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "hair": ("black", "blond", "red"),
    "glasses": ("no", "yes"),
    "smile": ("no", "yes"),
    "skin": ("light", "dark"),
}
"""The four attributes and their values; an attribute vector is ``(hair, glasses, smile, skin)`` value indices."""

_PHRASES: dict[str, tuple[tuple[str, ...], ...]] = {
    "hair": (("black hair", "dark hair"), ("blond hair", "golden hair"), ("red hair", "ginger hair")),
    "glasses": (("no glasses", "without glasses"), ("glasses", "eyeglasses")),
    "smile": (("a neutral face", "a serious face"), ("a smile", "a big smile")),
    "skin": (("light skin", "pale skin"), ("dark skin", "brown skin")),
}
_SUBJECTS = ("a person", "a face", "someone", "a portrait of a person")
_LINKS = ("with", "who has", "having")

_SKIN = torch.tensor([[0.93, 0.78, 0.65], [0.45, 0.30, 0.20]])
_HAIR = torch.tensor([[0.08, 0.07, 0.07], [0.95, 0.85, 0.35], [0.80, 0.25, 0.10]])
_BACKGROUND = torch.tensor([0.55, 0.60, 0.66])
_EYE = torch.tensor([0.10, 0.10, 0.15])
_GLASSES = torch.tensor([0.20, 0.25, 0.65])
_MOUTH = torch.tensor([0.70, 0.10, 0.15])
_LIGHT = torch.tensor([-0.35, 0.45, 1.0]) / math.sqrt(0.35**2 + 0.45**2 + 1.0)
_RADII = torch.tensor([0.8, 1.0, 0.85])  # the head ellipsoid's half-axes (x: width, y: height, z: depth)


def _check_generator(generator: object) -> torch.Generator | None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    return generator


class CameraSpec:
    """The pinhole camera of the toy world: on a circle of ``radius`` around the head, looking at its centre.

    Args:
        radius: distance from the camera to the head's centre (world units; the head is about 2 high).
        fov_degrees: full field of view of the square image.
        near, far: the depth range in which a NeRF samples each ray (the head lies within it at every yaw).
    """

    def __init__(self, *, radius: float = 4.0, fov_degrees: float = 28.0, near: float = 2.8, far: float = 5.2):
        for name, v in (("radius", radius), ("fov_degrees", fov_degrees), ("near", near), ("far", far)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        if fov_degrees >= 180:
            raise ValueError(f"fov_degrees must be below 180, got {fov_degrees}")
        if not near < far:
            raise ValueError(f"near must be below far, got near={near}, far={far}")
        self.radius, self.fov_degrees, self.near, self.far = float(radius), float(fov_degrees), float(near), float(far)

    def __repr__(self) -> str:
        return (f"CameraSpec(radius={self.radius}, fov_degrees={self.fov_degrees}, near={self.near}, "
                f"far={self.far})")  # fmt: skip


def camera_rays(yaw: torch.Tensor, *, resolution: int, camera: CameraSpec | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ray origins and unit directions of every pixel, ``(B, resolution * resolution, 3)`` each (row-major).

    The camera sits at ``radius * (sin yaw, 0, cos yaw)`` and looks at the origin with the world's y axis up (the
    paper's camera moves on a sphere, ``range_u`` in yaw and ``range_v`` in pitch; the toy keeps pitch at 0).
    """
    if not isinstance(yaw, torch.Tensor):
        raise TypeError(f"yaw must be a torch.Tensor of angles in radians, got {type(yaw).__name__}")
    if yaw.dim() != 1 or not torch.is_floating_point(yaw) or not bool(torch.isfinite(yaw).all()):
        raise ValueError(f"yaw must be a finite 1-d float tensor, got shape {tuple(yaw.shape)} and dtype {yaw.dtype}")
    resolution = positive_int(resolution, "resolution")
    camera = CameraSpec() if camera is None else camera
    if not isinstance(camera, CameraSpec):
        raise TypeError(f"camera must be a CameraSpec, got {type(camera).__name__}")
    dt = yaw.dtype
    centre = camera.radius * torch.stack([torch.sin(yaw), torch.zeros_like(yaw), torch.cos(yaw)], -1)
    forward = -centre / camera.radius
    up = torch.tensor([0.0, 1.0, 0.0], dtype=dt).expand_as(forward)
    right = torch.nn.functional.normalize(torch.linalg.cross(forward, up, dim=-1), dim=-1)
    cam_up = torch.linalg.cross(right, forward, dim=-1)
    half = math.tan(math.radians(camera.fov_degrees) / 2)
    coords = (torch.arange(resolution, dtype=dt) + 0.5) / resolution * 2 - 1
    v, u = torch.meshgrid(-coords, coords, indexing="ij")  # row 0 is the top of the image
    u, v = u.reshape(1, -1, 1), v.reshape(1, -1, 1)
    d = forward[:, None] + half * (u * right[:, None] + v * cam_up[:, None])
    d = torch.nn.functional.normalize(d, dim=-1)
    return centre[:, None].expand_as(d).contiguous(), d


def sample_attributes(n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` attribute vectors drawn uniformly, ``(n, 4)`` long: hair, glasses, smile, skin value indices."""
    n = positive_int(n, "n")
    generator = _check_generator(generator)
    cols = [torch.randint(len(v), (n,), generator=generator) for v in ATTRIBUTES.values()]
    return torch.stack(cols, 1)


def _check_attributes(attributes: object) -> torch.Tensor:
    if not isinstance(attributes, torch.Tensor):
        raise TypeError(f"attributes must be a torch.Tensor of value indices, got {type(attributes).__name__}")
    if attributes.dim() != 2 or attributes.shape[1] != len(ATTRIBUTES) or torch.is_floating_point(attributes):
        raise ValueError(f"attributes must be an integer tensor of shape (n, {len(ATTRIBUTES)}), got "
                         f"{tuple(attributes.shape)} {attributes.dtype}")  # fmt: skip
    sizes = torch.tensor([len(v) for v in ATTRIBUTES.values()])
    if len(attributes) == 0 or bool(((attributes < 0) | (attributes >= sizes)).any()):
        raise ValueError(f"attributes must be non-empty with each column within its number of values {sizes.tolist()}")
    return attributes.long()


def render_toy_faces(
    attributes: torch.Tensor,
    yaw: torch.Tensor,
    *,
    resolution: int = 16,
    supersample: int = 2,
    camera: CameraSpec | None = None,
) -> dict[str, torch.Tensor]:
    """Ray-cast toy faces: ``{"image": (B, 3, R, R) in [-1, 1], "depth": (B, R, R), "mask": (B, R, R)}``.

    Each pixel is the mean of ``supersample ** 2`` rays (anti-aliasing). A ray hits the head ellipsoid
    ``(x/0.8)² + y² + (z/0.85)² = 1`` at the smaller root of the quadratic; the colour at the hit point comes from
    the attributes (hair cap above the forehead and at the back, eyes, an optional glasses band, a straight or
    curved mouth) times Lambertian shading from a light fixed in the world. ``depth`` is the ray length to the
    surface (``camera.far`` off the head), ``mask`` the covered fraction of each pixel.
    """
    attributes = _check_attributes(attributes)
    if not isinstance(yaw, torch.Tensor) or yaw.shape != (len(attributes),) or not torch.is_floating_point(yaw):
        raise ValueError(f"yaw must be a float tensor of shape ({len(attributes)},), one angle per face")
    resolution = positive_int(resolution, "resolution")
    supersample = positive_int(supersample, "supersample")
    camera = CameraSpec() if camera is None else camera
    hi = resolution * supersample
    o, d = camera_rays(yaw.float(), resolution=hi, camera=camera)
    od, dd = o / _RADII, d / _RADII
    a = (dd * dd).sum(-1)
    b = 2 * (od * dd).sum(-1)
    c = (od * od).sum(-1) - 1
    disc = b * b - 4 * a * c
    hit = disc > 0
    t = (-b - torch.sqrt(disc.clamp_min(0))) / (2 * a)
    p = o + t[..., None] * d
    x, y, z = p.unbind(-1)
    normal = torch.nn.functional.normalize(p / _RADII**2, dim=-1)
    shade = 0.45 + 0.55 * (normal * _LIGHT).sum(-1).clamp_min(0)

    hair, glasses, smile, skin = (attributes[:, i, None] for i in range(4))
    colour = _SKIN[skin.squeeze(1)][:, None].expand(-1, p.shape[1], -1).clone()
    front = z > 0.2
    eye = front & ((((x.abs() - 0.32) / 0.14) ** 2 + ((y - 0.12) / 0.09) ** 2) < 1)
    colour[eye] = _EYE
    band = front & (glasses == 1) & ((y - 0.13).abs() < 0.13) & (x.abs() < 0.66)
    colour[band] = _GLASSES
    curve = torch.where(smile == 1, 2.6, 0.0)
    mouth_y = -0.5 + curve * x**2
    thick = torch.where(smile == 1, 0.09, 0.06)
    mouth = front & ((y - mouth_y).abs() < thick) & (x.abs() < 0.34)
    colour[mouth] = _MOUTH
    cap = (y > 0.45 - 0.1 * z) | ((z < -0.15) & (y > -0.35))
    colour = torch.where(cap[..., None], _HAIR[hair.squeeze(1)][:, None], colour)
    colour = colour * shade[..., None]
    colour = torch.where(hit[..., None], colour, _BACKGROUND)
    depth = torch.where(hit, t, torch.full_like(t, camera.far))

    n = len(attributes)

    def pool(v: torch.Tensor) -> torch.Tensor:  # (B, hi*hi, C) -> (B, C, R, R), mean over each pixel's rays
        v = v.reshape(n, hi, hi, -1).permute(0, 3, 1, 2)
        return torch.nn.functional.avg_pool2d(v, supersample)

    return {
        "image": pool(colour) * 2 - 1,
        "depth": pool(depth[..., None])[:, 0],
        "mask": pool(hit.float()[..., None])[:, 0],
    }


def caption_faces(attributes: torch.Tensor, *, seed: int = 0) -> list[str]:
    """One caption per attribute vector: a subject, a link word and the four attribute phrases (a synonym each)
    in random order, e.g. ``"someone with golden hair, pale skin, a smile and no glasses"``."""
    attributes = _check_attributes(attributes)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    rng = np.random.default_rng(int(seed))
    names = list(ATTRIBUTES)
    out = []
    for row in attributes.tolist():
        parts = [_PHRASES[names[i]][v][rng.integers(2)] for i, v in enumerate(row)]
        parts = [parts[i] for i in rng.permutation(len(parts))]
        out.append(f"{_SUBJECTS[rng.integers(len(_SUBJECTS))]} {_LINKS[rng.integers(len(_LINKS))]} "
                   f"{', '.join(parts[:-1])} and {parts[-1]}")  # fmt: skip
    return out


def parse_caption(caption: str) -> tuple[int, ...]:
    """The attribute vector a caption of :func:`caption_faces` states (the inverse map; raises if one is missing)."""
    if not isinstance(caption, str):
        raise TypeError(f"caption must be a str, got {type(caption).__name__}")
    phrases = [p.strip() for chunk in caption.split(",") for p in chunk.split(" and ")]
    found: dict[str, list[int]] = {name: [] for name in _PHRASES}
    for p in phrases:  # the longest synonym a phrase ends with ("no glasses" before "glasses")
        hits = [(len(s), name, v) for name, values in _PHRASES.items() for v, syn in enumerate(values) for s in syn
                if p == s or p.endswith(" " + s)]
        if hits:
            _, name, v = max(hits)
            found[name].append(v)
    out = []
    for name, values in found.items():
        if len(values) != 1:
            raise ValueError(f"caption must state the {name} attribute exactly once, got {caption!r}")
        out.append(values[0])
    return tuple(out)


def make_tokenizer() -> WordTokenizer:
    """The word tokenizer of every caption :func:`caption_faces` can write (the project's ``WordTokenizer``)."""
    words = set()
    for text in (*_SUBJECTS, *_LINKS, "and", ",", *(s for v in _PHRASES.values() for syn in v for s in syn)):
        words.update(WordTokenizer._WORD.findall(text))
    return WordTokenizer(sorted(words))


def attribute_sizes() -> Sequence[int]:
    """The number of values of each attribute, in :data:`ATTRIBUTES` order."""
    return tuple(len(v) for v in ATTRIBUTES.values())
