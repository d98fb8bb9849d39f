"""Volume rendering with expected depth, and E3-FaceNet's Geometric Regularization (paper section 3.3).

Volume rendering (Mildenhall et al., 2020; StyleNeRF's renderer): along a ray with samples at depths
``t_1 < ... < t_K`` and densities ``sigma_k``, ``alpha_k = 1 - exp(-sigma_k delta_k)``, transmittance
``T_k = prod_{j<k} (1 - alpha_j)`` and weights ``w_k = T_k alpha_k``, so ``w_k`` lie in ``[0, 1]`` and sum to at most
one; the rendered feature is ``sum_k w_k f_k + (1 - sum_k w_k) f_bg`` and the expected depth
``d = sum_k w_k t_k + (1 - sum_k w_k) t_far``.

Geometric Regularization (the paper's eqs. 15-18; ``get_smooth_loss_v3`` in the official code): lift each pixel
to the 3D point ``P(u) = o + d(u) r(u)`` on its ray; the *local* term is the L1 distance between the points of
pixels two apart, ``L_loc = mean |P(u + 2e_x) - P(u)|_1 + mean |P(u + 2e_y) - P(u)|_1``; the *virtual normal*
``n(u) = normalise((P(u + e_x) - P(u - e_x)) x (P(u + e_y) - P(u - e_y)))`` (a normal from three-point planes of
the depth map, with no density gradient), and the *normal* term is the same neighbour L1 on ``n``:
``L_normal = mean |n(u + 2e_x) - n(u)|_1 + mean |n(u + 2e_y) - n(u)|_1``. ``L_reg = L_loc + 0.5 L_normal`` (the
code's weight). Note: the released code computes the normals but then applies the second L1 to the point map
again; this module implements the normal smoothness the paper states.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "depth_total_variation",
    "reprojection_error",
    "geometric_regularization",
    "point_map",
    "virtual_normals",
    "volume_render",
]


def _check_tensor(name: str, value: object, dims: int) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() != dims or not torch.is_floating_point(value):
        raise ValueError(f"{name} must be a {dims}-d float tensor, got shape {tuple(value.shape)} {value.dtype}")
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} must be finite (it holds NaN or infinity)")
    return value


def volume_render(
    sigma: torch.Tensor,
    features: torch.Tensor,
    depths: torch.Tensor,
    *,
    far: float,
    background: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Alpha-composite samples along rays.

    Args:
        sigma: non-negative densities, ``(B, R, K)`` (``R`` rays, ``K`` samples each).
        features: per-sample features, ``(B, R, K, C)``.
        depths: increasing sample depths, ``(K,)`` or ``(B, R, K)``.
        far: the depth that the leftover transmittance is assigned to (the background's depth).
        background: ``(B, C)`` feature of the background (the leftover transmittance's colour); zeros if None.

    Returns:
        ``{"weights": (B, R, K), "features": (B, R, C), "depth": (B, R), "opacity": (B, R)}``.
    """
    sigma = _check_tensor("sigma", sigma, 3)
    features = _check_tensor("features", features, 4)
    if features.shape[:3] != sigma.shape:
        raise ValueError(f"features must be (B, R, K, C) with (B, R, K) = {tuple(sigma.shape)}, got "
                         f"{tuple(features.shape)}")  # fmt: skip
    if not isinstance(depths, torch.Tensor) or depths.shape not in (sigma.shape[-1:], sigma.shape):
        raise ValueError(f"depths must be a tensor of shape ({sigma.shape[-1]},) or {tuple(sigma.shape)}")
    if not bool(torch.isfinite(depths).all()):
        raise ValueError("depths must be finite")
    if bool((depths[..., 1:] <= depths[..., :-1]).any()):
        raise ValueError("depths must increase along each ray")
    if isinstance(far, bool) or not isinstance(far, (int, float)) or not math.isfinite(far) or not far >= float(depths.max()):
        raise ValueError(f"far must be a number at least the largest sample depth, got {far!r}")
    depths = depths.expand_as(sigma)
    # The last interval reaches to `far` (StyleNeRF uses 1e10, i.e. an opaque last sample; a finite end keeps
    # the expected depth of a thin ray inside [near, far]).
    delta = torch.cat([depths[..., 1:] - depths[..., :-1], (far - depths[..., -1:]).clamp_min(1e-3)], -1)
    alpha = 1 - torch.exp(-sigma.clamp_min(0) * delta)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[..., :1]), 1 - alpha[..., :-1]], -1), -1)
    weights = alpha * trans
    opacity = weights.sum(-1)
    feat = (weights[..., None] * features).sum(-2)
    if background is not None:
        if not isinstance(background, torch.Tensor) or background.shape != (sigma.shape[0], features.shape[-1]):
            raise ValueError(f"background must be a tensor of shape ({sigma.shape[0]}, {features.shape[-1]})")
        if not bool(torch.isfinite(background).all()):
            raise ValueError("background must be finite")
        feat = feat + (1 - opacity)[..., None] * background[:, None]
    depth = (weights * depths).sum(-1) + (1 - opacity) * far
    return {"weights": weights, "features": feat, "depth": depth, "opacity": opacity}


def point_map(depth: torch.Tensor, origins: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """``P(u) = o(u) + d(u) r(u)`` as an image ``(B, 3, H, W)``, from ``depth (B, H, W)`` and row-major rays
    ``(B, H*W, 3)`` (the paper's eq. 15, the code's ``camera_world + fg_depth_map * ray_vector``)."""
    depth = _check_tensor("depth", depth, 3)
    b, h, w = depth.shape
    for name, v in (("origins", origins), ("directions", directions)):
        if not isinstance(v, torch.Tensor) or v.shape != (b, h * w, 3):
            raise ValueError(f"{name} must be a tensor of shape ({b}, {h * w}, 3), got "
                             f"{tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__}")  # fmt: skip
        _check_tensor(name, v, 3)
    pts = origins + depth.reshape(b, h * w, 1) * directions
    return pts.permute(0, 2, 1).reshape(b, 3, h, w)


def virtual_normals(points: torch.Tensor) -> torch.Tensor:
    """Unit normals ``(B, 3, H-2, W-2)`` of a point map ``(B, 3, H, W)`` from central differences (eq. 17).

    ``n = normalise(dP/dx x dP/dy)`` with ``dP/dx = P(u + e_x) - P(u - e_x)`` along the columns and ``dP/dy``
    along the rows (rows grow downwards, so the normal of a surface facing the camera points away from the camera,
    along the viewing direction; the sign convention does not matter to ``L_normal``).
    """
    points = _check_tensor("points", points, 4)
    if points.shape[1] != 3 or min(points.shape[2:]) < 3:
        raise ValueError(f"points must be (B, 3, H, W) with H, W >= 3, got {tuple(points.shape)}")
    dx = (points[:, :, 1:-1, 2:] - points[:, :, 1:-1, :-2])
    dy = (points[:, :, 2:, 1:-1] - points[:, :, :-2, 1:-1])
    return torch.nn.functional.normalize(torch.linalg.cross(dx, dy, dim=1), dim=1, eps=1e-8)


def _neighbour_l1(x: torch.Tensor, shift: int) -> torch.Tensor:
    return (x[:, :, shift:] - x[:, :, :-shift]).abs().mean() + (x[..., shift:] - x[..., :-shift]).abs().mean()


def geometric_regularization(
    points: torch.Tensor, *, normal_weight: float = 0.5, shift: int = 2
) -> dict[str, torch.Tensor]:
    """``{"loc": L_loc, "normal": L_normal, "reg": L_loc + normal_weight * L_normal}`` of a point map (eqs. 16-18).

    ``L_loc`` and ``L_normal`` are mean L1 distances between a pixel's point (normal) and the one ``shift``
    pixels to the right plus the one ``shift`` pixels down (the code's ``shift_l``/``shift_r`` slices, shift 2).
    """
    points = _check_tensor("points", points, 4)
    if isinstance(shift, bool) or not isinstance(shift, int) or shift < 1:
        raise ValueError(f"shift must be a positive int, got {shift!r}")
    if points.shape[1] != 3 or min(points.shape[2:]) < shift + 3:
        raise ValueError(f"points must be (B, 3, H, W) with H, W >= shift + 3 = {shift + 3}, got {tuple(points.shape)}")
    if isinstance(normal_weight, bool) or not isinstance(normal_weight, (int, float)) or not normal_weight >= 0 \
            or not math.isfinite(normal_weight):
        raise ValueError(f"normal_weight must be a non-negative number, got {normal_weight!r}")
    loc = _neighbour_l1(points, shift)
    normal = _neighbour_l1(virtual_normals(points), shift)
    return {"loc": loc, "normal": normal, "reg": loc + normal_weight * normal}


def depth_total_variation(depth: torch.Tensor) -> torch.Tensor:
    """Per-image anisotropic total variation of a depth map ``(B, H, W)``: mean ``|d(u+e_x) - d(u)| + |d(u+e_y) -
    d(u)|``, shape ``(B,)`` (the multi-view measure's smoothness part; lower is smoother)."""
    depth = _check_tensor("depth", depth, 3)
    if min(depth.shape[1:]) < 2:
        raise ValueError(f"depth must be at least 2x2, got {tuple(depth.shape)}")
    return (depth[:, 1:] - depth[:, :-1]).abs().mean((1, 2)) + (depth[:, :, 1:] - depth[:, :, :-1]).abs().mean((1, 2))


def reprojection_error(
    source_image: torch.Tensor,
    source_depth: torch.Tensor,
    source_yaw: torch.Tensor,
    target_image: torch.Tensor,
    target_yaw: torch.Tensor,
    *,
    camera,
    mask: torch.Tensor | None = None,
    target_depth: torch.Tensor | None = None,
    depth_tolerance: float = 0.05,
) -> torch.Tensor:
    """Per-image multi-view consistency: mean ``|I_s(u) - I_t(pi_t(P_s(u)))|`` over the source's pixels.

    Each source pixel is lifted to ``P_s(u) = o + d_s(u) r(u)`` with its depth (ray length), projected into the
    target camera and the target image is sampled there (bilinear); the error is averaged over the pixels with
    ``mask > 0.5`` (e.g. the opacity: the face, not the background) that land inside the target image and, given
    ``target_depth``, are *visible* there: the target's depth sampled at the projection (bilinear, ray length)
    must equal the point's distance from the target camera to within ``depth_tolerance``. Without that test a
    point hidden in the target view (the far side of the head, or a silhouette pixel whose depth mixes face and
    background) is compared with whatever occludes it, so even the true geometry scores well above 0. For renders
    of one Lambertian scene under a light fixed in the world with their true depths it is near zero (up to
    sampling); a generator whose images do not follow the camera, or whose depth does not match its image, scores
    higher.

    Args:
        source_image, target_image: ``(B, C, R, R)``.
        source_depth: ``(B, R, R)`` ray lengths of the source pixels.
        source_yaw, target_yaw: ``(B,)`` camera yaws (the toy cameras of :func:`camera_rays`).
        camera: the :class:`~icml24.vision.e3_facenet.faces.CameraSpec`.
        mask: ``(B, R, R)`` weights of the source pixels to score (all pixels if None).
        target_depth: ``(B, R, R)`` ray lengths of the target pixels, for the visibility test (none if None).
        depth_tolerance: the largest depth disagreement (world units) at which a point counts as visible.

    Returns:
        ``(B,)`` mean absolute colour difference (NaN for an image with no scored pixel).
    """
    from icml24.vision.e3_facenet.faces import camera_rays

    source_image = _check_tensor("source_image", source_image, 4)
    b, _, r, r2 = source_image.shape
    if r != r2:
        raise ValueError(f"source_image must be square, got {tuple(source_image.shape)}")
    if not isinstance(target_image, torch.Tensor) or target_image.shape != source_image.shape:
        raise ValueError(f"target_image must have the source image's shape {tuple(source_image.shape)}")
    _check_tensor("target_image", target_image, 4)
    source_depth = _check_tensor("source_depth", source_depth, 3)
    if source_depth.shape != (b, r, r):
        raise ValueError(f"source_depth must have shape {(b, r, r)}, got {tuple(source_depth.shape)}")
    for name, v in (("source_yaw", source_yaw), ("target_yaw", target_yaw)):
        if not isinstance(v, torch.Tensor) or v.shape != (b,) or not bool(torch.isfinite(v).all()):
            raise ValueError(f"{name} must be a finite tensor of shape ({b},)")
    if mask is not None and (not isinstance(mask, torch.Tensor) or mask.shape != (b, r, r)
                             or not bool(torch.isfinite(mask).all())):  # fmt: skip
        raise ValueError(f"mask must be None or a finite tensor of shape {(b, r, r)}")
    if target_depth is not None:
        if not isinstance(target_depth, torch.Tensor) or target_depth.shape != (b, r, r):
            raise ValueError(f"target_depth must be None or a tensor of shape {(b, r, r)}")
        _check_tensor("target_depth", target_depth, 3)
    if isinstance(depth_tolerance, bool) or not isinstance(depth_tolerance, (int, float)) \
            or not math.isfinite(depth_tolerance) or not depth_tolerance > 0:
        raise ValueError(f"depth_tolerance must be a positive number, got {depth_tolerance!r}")
    if not hasattr(camera, "fov_degrees") or not hasattr(camera, "radius"):
        raise TypeError(f"camera must be a CameraSpec, got {type(camera).__name__}")
    o, d = camera_rays(source_yaw.to(source_depth.dtype), resolution=r, camera=camera)
    pts = o + source_depth.reshape(b, -1, 1) * d  # (B, R*R, 3)
    yaw = target_yaw.to(pts.dtype)
    centre = camera.radius * torch.stack([torch.sin(yaw), torch.zeros_like(yaw), torch.cos(yaw)], -1)
    forward = -centre / camera.radius
    right = torch.stack([torch.cos(yaw), torch.zeros_like(yaw), -torch.sin(yaw)], -1)  # forward x up, normalised
    up = torch.linalg.cross(right, forward, dim=-1)
    rel = pts - centre[:, None]
    z = (rel * forward[:, None]).sum(-1).clamp_min(1e-6)
    half = math.tan(math.radians(camera.fov_degrees) / 2)
    u = (rel * right[:, None]).sum(-1) / (z * half)
    v = (rel * up[:, None]).sum(-1) / (z * half)
    grid = torch.stack([u, -v], -1).reshape(b, r, r, 2)  # grid_sample: x right, y down, in [-1, 1]
    sampled = torch.nn.functional.grid_sample(target_image, grid, mode="bilinear", align_corners=False)
    inside = ((u.abs() <= 1) & (v.abs() <= 1)).reshape(b, r, r).float()
    weight = inside * ((mask > 0.5).float() if mask is not None else 1.0)
    if target_depth is not None:
        seen = torch.nn.functional.grid_sample(target_depth[:, None].to(pts.dtype), grid, mode="bilinear",
                                               align_corners=False)[:, 0]  # fmt: skip
        dist = rel.norm(dim=-1).reshape(b, r, r)
        weight = weight * ((seen - dist).abs() <= depth_tolerance).float()
    err = (sampled - source_image).abs().mean(1)
    return (err * weight).sum((1, 2)) / weight.sum((1, 2))
