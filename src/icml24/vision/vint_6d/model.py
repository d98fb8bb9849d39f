"""The mini VinT-Net: per-point features of vision and touch, fused per point, keypoint voting and a Kabsch fit.

VinT-Net (Wan et al., ICML 2024, https://proceedings.mlr.press/v235/wan24d.html, section 4) follows PVN3D and
DenseFusion: per-point features of the object's depth points (PointNet++) and of the tactile points (PointNet++)
are fused per point; heads predict, for every point, its offset to the object's centre and to K model
keypoints (L1 losses); the votes are clustered into keypoints and the pose is the least-squares rigid fit of
the model keypoints to them. This miniature keeps that structure at CPU size:

- one PointNet per modality (shared MLP ``in -> 32 -> 64``; the 32-wide layer is the per-point *local* feature,
  the max-pool of the 64-wide layer the *global* one; masked for padded points);
- per-point fusion: every voter (a depth point, a firing taxel or a proprioceptive hand point) gets
  ``[its local feature, its modality's global feature, the other modality's global feature, its type]``
  (DenseFusion's concatenation of per-point and global features across modalities);
- a shared head predicts the offsets to the K keypoints and the centre (``(K + 1) x 3`` per voter);
- voting: the mean of the votes, then two mean-shift steps with a Gaussian kernel (PVN3D clusters the votes by
  MeanShift); the pose: :func:`~icml24.vision.vint_6d.geometry.kabsch`-style batched SVD fit.

``modalities="vision"`` is the vision-only baseline: the touch branch is absent (its global feature is zero and
touch points do not vote), so the output cannot depend on touch; ``"touch"`` is the touch-only variant (touch and
proprioception); ``"fusion"`` is VinT-Net.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

Modalities = Literal["fusion", "vision", "touch"]
MODALITIES: tuple[str, ...] = ("fusion", "vision", "touch")
_TYPE_VISION, _TYPE_TACTILE, _TYPE_HAND = 0, 1, 2


class PointNetEncoder(nn.Module):
    """A PointNet (Qi et al. 2017) without the transform nets: per-point ``in -> local_dim -> global_dim`` and a
    masked max-pool. Returns the per-point local features ``(B, N, local_dim)`` and the global one ``(B, global_dim)``."""

    def __init__(self, *, in_dim: int, local_dim: int = 32, global_dim: int = 64) -> None:
        super().__init__()
        for name, v in (("in_dim", in_dim), ("local_dim", local_dim), ("global_dim", global_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.local = nn.Sequential(nn.Linear(in_dim, local_dim), nn.ReLU())
        self.lift = nn.Sequential(nn.Linear(local_dim, global_dim), nn.ReLU())

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        local = self.local(x)
        lifted = self.lift(local)
        # ReLU features are >= 0, so masking padded points with 0 leaves the max-pool of the real ones
        # (an empty set pools to 0).
        pooled = (lifted * mask.unsqueeze(-1).to(lifted.dtype)).amax(dim=1)
        return local, pooled


class VintNet(nn.Module):
    """The mini VinT-Net (section 4 of the paper, at CPU size; see the module docstring).

    Args:
        num_keypoints: K, the model keypoints (the centre is predicted in addition).
        modalities: ``"fusion"`` (VinT-Net), ``"vision"`` (vision-only baseline: no touch branch) or ``"touch"``
            (touch-only: firing taxels and proprioceptive hand points).
        center: a fixed point (camera frame, metres) subtracted from every input point, and ``scale`` the length
            they are divided by: inputs and offsets are then of order one.
        local_dim, global_dim, head_dim: widths of the PointNets and the offset head.
    """

    def __init__(self, *, num_keypoints: int, modalities: Modalities = "fusion",
                 center: tuple[float, float, float] = (0.0, 0.0, 0.25), scale: float = 0.05, local_dim: int = 32,
                 global_dim: int = 64, head_dim: int = 64) -> None:  # fmt: skip
        super().__init__()
        if isinstance(num_keypoints, bool) or not isinstance(num_keypoints, int) or num_keypoints < 1:
            raise ValueError(f"num_keypoints must be a positive int, got {num_keypoints!r}")
        if modalities not in MODALITIES:
            raise ValueError(f"modalities must be one of {MODALITIES}, got {modalities!r}")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a positive number, got {scale!r}")
        if not (isinstance(center, (tuple, list)) and len(center) == 3):
            raise ValueError(f"center must be a 3-tuple, got {center!r}")
        for name, v in (("head_dim", head_dim),):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.num_keypoints = num_keypoints
        self.modalities = modalities
        self.register_buffer("center", torch.tensor(center, dtype=torch.float32))
        self.scale = float(scale)
        self.use_vision = modalities in ("fusion", "vision")
        self.use_touch = modalities in ("fusion", "touch")
        self.global_dim = global_dim
        self.vision_encoder = PointNetEncoder(in_dim=3, local_dim=local_dim, global_dim=global_dim) if self.use_vision else None
        # touch points carry their type (taxel or hand point) as a one-hot flag
        self.touch_encoder = PointNetEncoder(in_dim=5, local_dim=local_dim, global_dim=global_dim) if self.use_touch else None
        self.head = nn.Sequential(nn.Linear(local_dim + 2 * global_dim + 3, head_dim), nn.ReLU(),
                                  nn.Linear(head_dim, head_dim), nn.ReLU(),
                                  nn.Linear(head_dim, 3 * (num_keypoints + 1)))  # fmt: skip

    def voters(self, vision_points: torch.Tensor, tactile_points: torch.Tensor, tactile_mask: torch.Tensor,
               hand_points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """The voting points of this variant ``(B, N, 3)`` (metres), their mask ``(B, N)`` and type ``(B, N)``."""
        parts, masks, types = [], [], []
        b = vision_points.shape[0]
        if self.use_vision:
            parts.append(vision_points)
            masks.append(torch.ones(vision_points.shape[:2], dtype=torch.bool))
            types.append(torch.full(vision_points.shape[:2], _TYPE_VISION))
        if self.use_touch:
            parts += [tactile_points, hand_points]
            masks += [tactile_mask.bool(), torch.ones(hand_points.shape[:2], dtype=torch.bool)]
            types += [torch.full(tactile_points.shape[:2], _TYPE_TACTILE), torch.full(hand_points.shape[:2], _TYPE_HAND)]
        return torch.cat(parts, 1), torch.cat(masks, 1).reshape(b, -1), torch.cat(types, 1)

    def forward(self, vision_points: torch.Tensor, tactile_points: torch.Tensor, tactile_mask: torch.Tensor,
                hand_points: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """Per-voter offsets to the K keypoints and the centre, ``(B, N, K + 1, 3)`` in metres, for the voters of
        :meth:`voters` (in that order: depth points, then taxels, then hand points, as the variant uses them).

        Args:
            vision_points: ``(B, P, 3)`` object depth points, camera frame, metres.
            tactile_points: ``(B, T, 3)`` firing taxels (zero-padded), ``tactile_mask`` ``(B, T)`` the real ones.
            hand_points: ``(B, H, 3)`` proprioceptive FK points of the hand.
        """
        _check_inputs(vision_points, tactile_points, tactile_mask, hand_points)
        b = vision_points.shape[0]
        zeros = vision_points.new_zeros(b, self.global_dim)
        feats = []
        gv, gt = zeros, zeros
        if self.use_vision:
            xv = (vision_points - self.center) / self.scale
            lv, gv = self.vision_encoder(xv, torch.ones(xv.shape[:2], dtype=torch.bool))
        if self.use_touch:
            xt = torch.cat([tactile_points, hand_points], 1)
            mt = torch.cat([tactile_mask.bool(), torch.ones(hand_points.shape[:2], dtype=torch.bool)], 1)
            flag = torch.zeros(b, xt.shape[1], 2, dtype=xt.dtype)
            flag[:, : tactile_points.shape[1], 0] = 1.0
            flag[:, tactile_points.shape[1]:, 1] = 1.0
            lt, gt = self.touch_encoder(torch.cat([(xt - self.center) / self.scale, flag], -1), mt)
        one_hot = torch.eye(3, dtype=vision_points.dtype)
        if self.use_vision:
            n = lv.shape[1]
            feats.append(torch.cat([lv, gv[:, None].expand(b, n, -1), gt[:, None].expand(b, n, -1),
                                    one_hot[_TYPE_VISION].expand(b, n, 3)], -1))  # fmt: skip
        if self.use_touch:
            nt, nh = tactile_points.shape[1], hand_points.shape[1]
            types = torch.cat([one_hot[_TYPE_TACTILE].expand(b, nt, 3), one_hot[_TYPE_HAND].expand(b, nh, 3)], 1)
            n = nt + nh
            feats.append(torch.cat([lt, gt[:, None].expand(b, n, -1), gv[:, None].expand(b, n, -1), types], -1))
        out = self.head(torch.cat(feats, 1))
        return out.reshape(b, -1, self.num_keypoints + 1, 3) * self.scale


def _check_inputs(vision_points, tactile_points, tactile_mask, hand_points) -> None:
    for name, x in (("vision_points", vision_points), ("tactile_points", tactile_points),
                    ("hand_points", hand_points)):  # fmt: skip
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 3 or x.shape[-1] != 3:
            raise ValueError(f"{name} must have shape (batch, points, 3), got {tuple(x.shape)}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite")
    b = vision_points.shape[0]
    if tactile_points.shape[0] != b or hand_points.shape[0] != b:
        raise ValueError("vision_points, tactile_points and hand_points must have the same batch size, got "
                         f"{b}, {tactile_points.shape[0]} and {hand_points.shape[0]}")  # fmt: skip
    if not isinstance(tactile_mask, torch.Tensor):
        raise TypeError(f"tactile_mask must be a torch.Tensor, got {type(tactile_mask).__name__}")
    if tuple(tactile_mask.shape) != tuple(tactile_points.shape[:2]):
        raise ValueError(f"tactile_mask must have shape {tuple(tactile_points.shape[:2])}, got {tuple(tactile_mask.shape)}")


def vote_keypoints(voters: torch.Tensor, offsets: torch.Tensor, mask: torch.Tensor, *, bandwidth: float = 0.01,
                   iterations: int = 2) -> torch.Tensor:  # fmt: skip
    """Cluster the votes ``voter + offset`` into one point per keypoint, ``(B, K + 1, 3)``.

    The masked mean of the votes, refined by ``iterations`` mean-shift steps with a Gaussian kernel of
    ``bandwidth`` metres (PVN3D's MeanShift clustering, one mode started at the mean).
    """
    if not isinstance(voters, torch.Tensor) or voters.ndim != 3 or voters.shape[-1] != 3:
        raise ValueError("voters must be a (batch, points, 3) tensor")
    if not isinstance(offsets, torch.Tensor) or offsets.ndim != 4 or offsets.shape[:2] != voters.shape[:2]:
        raise ValueError("offsets must be a (batch, points, keypoints, 3) tensor matching voters")
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != tuple(voters.shape[:2]):
        raise ValueError("mask must be a (batch, points) tensor matching voters")
    if not (isinstance(bandwidth, (int, float)) and not isinstance(bandwidth, bool) and bandwidth > 0):
        raise ValueError(f"bandwidth must be a positive number, got {bandwidth!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise ValueError(f"iterations must be an int >= 0, got {iterations!r}")
    if not math.isfinite(bandwidth):
        raise ValueError(f"bandwidth must be finite, got {bandwidth!r}")
    for name, x in (("voters", voters), ("offsets", offsets)):
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite")
    votes = voters[:, :, None, :] + offsets
    w = mask.to(votes.dtype)[:, :, None]
    est = (votes * w[..., None]).sum(1) / w.sum(1).clamp_min(1e-9)[..., None]
    for _ in range(iterations):
        d2 = ((votes - est[:, None]) ** 2).sum(-1)
        k = torch.exp(-0.5 * d2 / bandwidth**2) * w
        k = torch.where(k.sum(1, keepdim=True) > 1e-12, k, w)  # every vote far away: keep the mean
        est = (votes * k[..., None]).sum(1) / k.sum(1).clamp_min(1e-12)[..., None]
    return est


def fit_pose(model_keypoints: torch.Tensor, keypoints: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched Kabsch: ``(R, t)`` with ``keypoints ~ R model_keypoints + t``, ``det R = +1``; shapes
    ``(K, 3)`` / ``(B, K, 3)`` in, ``(B, 3, 3)`` and ``(B, 3)`` out (the numpy :func:`~.geometry.kabsch` batched)."""
    for name, x in (("model_keypoints", model_keypoints), ("keypoints", keypoints)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.shape[-1:] != (3,) or x.ndim not in (2, 3):
            raise ValueError(f"{name} must have shape (..., K, 3), got {tuple(x.shape)}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite")
    if keypoints.ndim != 3 or keypoints.shape[1:] != model_keypoints.shape[-2:]:
        raise ValueError(f"keypoints must have shape (batch, {model_keypoints.shape[-2]}, 3), got {tuple(keypoints.shape)}")
    src = model_keypoints.to(keypoints.dtype).expand_as(keypoints)
    s_bar, d_bar = src.mean(1, keepdim=True), keypoints.mean(1, keepdim=True)
    h = (src - s_bar).transpose(1, 2) @ (keypoints - d_bar)
    u, _, vt = torch.linalg.svd(h)
    d = torch.sign(torch.det(vt.transpose(1, 2) @ u.transpose(1, 2)))
    d = torch.where(d == 0, torch.ones_like(d), d)
    diag = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], -1))
    r = vt.transpose(1, 2) @ diag @ u.transpose(1, 2)
    t = d_bar[:, 0] - (r @ s_bar[:, 0, :, None])[..., 0]
    return r, t


@dataclass(frozen=True)
class TrainConfig:
    """Training of the mini VinT-Net (the paper trains 25 epochs at batch 24 on 6 GPUs; section 5)."""

    epochs: int = 15
    """Passes over the training samples."""
    batch_size: int = 64
    """Samples per Adam step."""
    lr: float = 2e-3
    """Adam's learning rate (cosine-decayed to zero)."""
    weight_decay: float = 0.0
    """Adam's L2 penalty."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("lr", "weight_decay"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.lr == 0:
            raise ValueError("lr must be > 0")


def _float_tensor(name: str, x: object) -> torch.Tensor:
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    try:
        return torch.as_tensor(np.asarray(x, dtype=float), dtype=torch.float32)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers: {exc}") from exc


def _tensors(samples) -> dict[str, torch.Tensor]:
    return {
        "vision_points": torch.as_tensor(samples.vision_points, dtype=torch.float32),
        "tactile_points": torch.as_tensor(samples.tactile_points, dtype=torch.float32),
        "tactile_mask": torch.as_tensor(samples.tactile_mask, dtype=torch.bool),
        "hand_points": torch.as_tensor(samples.hand_points, dtype=torch.float32),
        "rotation": torch.as_tensor(samples.rotation, dtype=torch.float32),
        "translation": torch.as_tensor(samples.translation, dtype=torch.float32),
    }


def keypoint_targets(model_keypoints: torch.Tensor, rotation: torch.Tensor, translation: torch.Tensor) -> torch.Tensor:
    """The keypoints and the centre in the camera frame, ``(B, K + 1, 3)``: ``R x_k + t`` and ``t``."""
    kp = model_keypoints @ rotation.transpose(1, 2) + translation[:, None]
    return torch.cat([kp, translation[:, None]], 1)


def train_vintnet(model: VintNet, samples, model_keypoints: np.ndarray, *, symmetries: np.ndarray | None = None,
                  config: TrainConfig | None = None, generator: torch.Generator | None = None) -> list[float]:  # fmt: skip
    """Train ``model`` on VinT-mini ``samples`` with the L1 offset loss of PVN3D / VinT-Net (section 4): the mean
    absolute error between every voter's predicted offset and ``keypoint - voter``, over the K keypoints and the
    centre. Returns the mean loss of every epoch.

    ``symmetries``: rotations ``(S, 3, 3)`` of the object onto itself (``ObjectShape.symmetries()``); the loss of a
    sample is then the smallest over the poses ``R S_j`` (a symmetry-aware loss in the spirit of PoseCNN's
    ShapeMatch loss), so that a symmetric object's keypoints have a consistent answer that the net can learn.
    Without it the label is the given pose.
    """
    if not isinstance(model, VintNet):
        raise TypeError(f"model must be a VintNet, got {type(model).__name__}")
    cfg = config or TrainConfig()
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(cfg).__name__}")
    if not hasattr(samples, "vision_points"):
        raise TypeError(f"samples must be VintMiniSamples, got {type(samples).__name__}")
    kps = _float_tensor("model_keypoints", model_keypoints)
    if kps.ndim != 2 or kps.shape != (model.num_keypoints, 3) or not bool(torch.isfinite(kps).all()):
        raise ValueError(f"model_keypoints must be finite of shape ({model.num_keypoints}, 3), got {tuple(kps.shape)}")
    syms = torch.eye(3)[None] if symmetries is None else _float_tensor("symmetries", symmetries)
    if syms.ndim != 3 or syms.shape[1:] != (3, 3) or not bool(torch.isfinite(syms).all()):
        raise ValueError(f"symmetries must be finite of shape (S, 3, 3), got {tuple(syms.shape)}")
    data = _tensors(samples)
    n = data["vision_points"].shape[0]
    gen = generator or torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = cfg.epochs * math.ceil(n / cfg.batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    losses = []
    model.train()
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen)
        total, count = 0.0, 0
        for i in range(0, n, cfg.batch_size):
            idx = perm[i: i + cfg.batch_size]
            batch = {k: v[idx] for k, v in data.items()}
            offsets = model(batch["vision_points"], batch["tactile_points"], batch["tactile_mask"], batch["hand_points"])
            voters, mask, _ = model.voters(batch["vision_points"], batch["tactile_points"], batch["tactile_mask"],
                                           batch["hand_points"])  # fmt: skip
            per_sym = []
            m = mask.to(offsets.dtype)
            for s in syms:
                target = keypoint_targets(kps @ s.T, batch["rotation"], batch["translation"])[:, None] - voters[:, :, None]
                err = (offsets - target).abs().mean((-1, -2))
                per_sym.append((err * m).sum(1) / m.sum(1).clamp_min(1))
            loss = torch.stack(per_sym, 1).amin(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
            count += len(idx)
        losses.append(total / count)
    model.eval()
    return losses


@torch.no_grad()
def predict_pose(model: VintNet, samples, model_keypoints: np.ndarray, *, batch_size: int = 256,
                 bandwidth: float = 0.01) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Estimated poses (camera frame) of ``samples``: votes, :func:`vote_keypoints`, :func:`fit_pose` of the model
    keypoints plus the centre. Returns rotations ``(n, 3, 3)`` and translations ``(n, 3)``."""
    if not isinstance(model, VintNet):
        raise TypeError(f"model must be a VintNet, got {type(model).__name__}")
    if not hasattr(samples, "vision_points"):
        raise TypeError(f"samples must be VintMiniSamples, got {type(samples).__name__}")
    kps = _float_tensor("model_keypoints", model_keypoints)
    if kps.shape != (model.num_keypoints, 3) or not bool(torch.isfinite(kps).all()):
        raise ValueError(f"model_keypoints must be finite of shape ({model.num_keypoints}, 3), got {tuple(kps.shape)}")
    if not (isinstance(bandwidth, (int, float)) and not isinstance(bandwidth, bool) and math.isfinite(bandwidth)
            and bandwidth > 0):  # fmt: skip
        raise ValueError(f"bandwidth must be a positive number, got {bandwidth!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    src = torch.cat([kps, torch.zeros(1, 3)], 0)
    data = _tensors(samples)
    model.eval()
    rs, ts = [], []
    n = data["vision_points"].shape[0]
    for i in range(0, n, batch_size):
        b = {k: v[i: i + batch_size] for k, v in data.items()}
        offsets = model(b["vision_points"], b["tactile_points"], b["tactile_mask"], b["hand_points"])
        voters, mask, _ = model.voters(b["vision_points"], b["tactile_points"], b["tactile_mask"], b["hand_points"])
        est = vote_keypoints(voters, offsets, mask, bandwidth=bandwidth)
        r, t = fit_pose(src, est)
        rs.append(r.numpy().astype(np.float64))
        ts.append(t.numpy().astype(np.float64))
    return np.concatenate(rs), np.concatenate(ts)


