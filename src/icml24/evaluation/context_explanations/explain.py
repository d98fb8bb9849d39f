"""Explanations of *where* (heatmaps, segment Shapley values), probes of what they tell about the class, and
a counterfactual explanation of *how* (move B across A and see where the decision flips).

Tomaszewska & Biecek, "Position: Do Not Explain Vision Models Without Context", ICML 2024
(https://arxiv.org/abs/2404.18316). Sec. 2 reviews the popular methods, which answer "which pixels or
regions mattered": Grad-CAM (Selvaraju et al., 2017), Integrated Gradients (Sundararajan et al., 2017),
occlusion and LIME/SHAP-style segment attributions; Sec. 5 argues for a move "from *where* to *how*",
with explanations that state the relation driving a decision and can be tested by rearranging objects.

- :func:`grad_cam`, :func:`integrated_gradients`, :func:`occlusion`: Captum's ``LayerGradCam``,
  ``IntegratedGradients`` and ``Occlusion`` on a batch, as ``(n, H, W)`` heatmaps by :func:`to_heatmap`.
- :func:`segment_shapley`: exact Shapley values of the object segments (2 players, 4 forward passes), with
  an object "removed" by showing the background under it: the limit case of LIME/KernelSHAP superpixels.
- :func:`region_summaries` and :func:`attribution_probe`: the region-level summaries of an explanation
  (share of the attribution on A, on B, and their log ratio) and a cross-validated logistic probe of the
  class from them; :func:`object_mass_fraction`: how much of a heatmap lies on the objects.
- :func:`relational_counterfactual`: the "how" explanation, a sweep of B's column across A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import torch
from torch import nn

from icml24.evaluation.context_explanations.scenes import Scenes, move_b

_EPS = 1e-8


def _floats(name: str, value: object) -> np.ndarray:
    """``value`` as a float64 array, or a TypeError naming the argument."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a float array, got {type(value).__name__}") from exc


def _check_model(model: object) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    model.eval()
    return model


def _as_images(images: object, name: str = "images") -> torch.Tensor:
    if isinstance(images, torch.Tensor):
        x = images.detach().float()
    else:
        try:
            x = torch.as_tensor(np.asarray(images, dtype=np.float32))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be an (n, C, H, W) float array, got {type(images).__name__}") from exc
    if x.dim() != 4 or x.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (n, C, H, W) array, got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} must be finite")
    return x


def _as_target(target: object, n: int, model: nn.Module | None = None, x: torch.Tensor | None = None) -> torch.Tensor:
    """The class index of each of ``n`` images; with ``model`` and ``x``, also below the model's output width
    (one forward pass in eval mode on one image, which neither trains the model nor draws random numbers)."""
    if isinstance(target, bool):
        raise TypeError(f"target must be an int or an int array of shape ({n},), got {target!r}")
    arr = np.asarray(target)
    if arr.ndim == 0:
        arr = np.full(n, arr)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer) or (arr < 0).any():
        raise ValueError(f"target must be a non-negative int or an int array of shape ({n},), got {arr.dtype} {arr.shape}")
    if model is not None and x is not None:
        with torch.no_grad():
            n_out = int(model(x[:1]).shape[-1])
        if int(arr.max()) >= n_out:
            raise ValueError(f"target must be a class index below {n_out} (the model's outputs), got {int(arr.max())}")
    return torch.as_tensor(arr, dtype=torch.long)


def _check_pos_int(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return int(v)


def grad_cam(
    model: nn.Module, images: np.ndarray, target: int | np.ndarray, *, layer: nn.Module | None = None
) -> np.ndarray:
    """Grad-CAM (Selvaraju et al., 2017, Eq. 1-2) by Captum's ``LayerGradCam``, bilinearly up-sampled to the
    input size: ``ReLU(sum_k alpha_k A^k)`` with ``alpha_k`` the spatial mean of ``d y_target / d A^k``.

    Args:
        model: the classifier; ``layer`` defaults to its ``gradcam_layer`` (the CNN's last conv layer, the
            ViT's token grid).
        images: ``(n, C, H, W)``.
        target: the class explained (an int, or one per image).

    Returns:
        ``(n, H, W)`` non-negative maps.
    """
    from captum.attr import LayerAttribution, LayerGradCam

    model = _check_model(model)
    x = _as_images(images)
    t = _as_target(target, x.shape[0], model, x)
    if layer is None:
        layer = getattr(model, "gradcam_layer", None)
        if layer is None:
            raise ValueError("layer must be given for a model without a gradcam_layer attribute")
    if not isinstance(layer, nn.Module):
        raise TypeError(f"layer must be a torch.nn.Module, got {type(layer).__name__}")
    cam = LayerGradCam(model, layer).attribute(x, target=t, relu_attributions=True)
    up = LayerAttribution.interpolate(cam, tuple(x.shape[2:]), interpolate_mode="bilinear")
    return up.detach().clamp_min(0.0)[:, 0].numpy()


def integrated_gradients(
    model: nn.Module,
    images: np.ndarray,
    target: int | np.ndarray,
    *,
    baseline: float | np.ndarray = 0.0,
    n_steps: int = 50,
    return_delta: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Integrated Gradients (Sundararajan et al., 2017, Eq. 1) by Captum (Gauss-Legendre, ``n_steps``),
    ``(x - x') * int_0^1 d f(x' + a (x - x')) / dx da``, from a black (0) baseline by default.

    Completeness (their Prop. 1): the attributions sum to ``f(x) - f(x')``; with ``return_delta`` the
    per-image gap of that sum is returned too.

    Returns:
        ``(n, C, H, W)`` signed attributions (and the ``(n,)`` completeness deltas).
    """
    from captum.attr import IntegratedGradients

    model = _check_model(model)
    x = _as_images(images)
    t = _as_target(target, x.shape[0], model, x)
    n_steps = _check_pos_int("n_steps", n_steps)
    if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
        if not math.isfinite(baseline):
            raise ValueError(f"baseline must be finite, got {baseline!r}")
        base: float | torch.Tensor = float(baseline)
    else:
        base = _as_images(baseline, "baseline")
        if base.shape != x.shape:
            raise ValueError(f"baseline must be a number or match images' shape {tuple(x.shape)}, got {tuple(base.shape)}")
    ig = IntegratedGradients(model)
    attr, delta = ig.attribute(x, baselines=base, target=t, n_steps=n_steps, internal_batch_size=512,
                               return_convergence_delta=True)  # fmt: skip
    attr = attr.detach().numpy()
    return (attr, delta.detach().numpy()) if return_delta else attr


def occlusion(
    model: nn.Module,
    images: np.ndarray,
    target: int | np.ndarray,
    *,
    window: int = 4,
    stride: int = 4,
    baseline: float = 0.0,
) -> np.ndarray:
    """Occlusion (Zeiler & Fergus, 2014) by Captum: the drop of the target logit when a ``window`` x
    ``window`` patch (all channels) is set to ``baseline``, averaged over the windows covering a pixel.

    Returns:
        ``(n, C, H, W)`` attributions (the same value in every channel of a pixel).
    """
    from captum.attr import Occlusion

    model = _check_model(model)
    x = _as_images(images)
    t = _as_target(target, x.shape[0], model, x)
    window = _check_pos_int("window", window)
    stride = _check_pos_int("stride", stride)
    if window > min(x.shape[2:]):
        raise ValueError(f"window must be at most the image side {min(x.shape[2:])}, got {window}")
    if isinstance(baseline, bool) or not isinstance(baseline, (int, float)) or not math.isfinite(baseline):
        raise ValueError(f"baseline must be a finite number, got {baseline!r}")
    c = int(x.shape[1])
    attr = Occlusion(model).attribute(x, sliding_window_shapes=(c, window, window), strides=(c, stride, stride),
                                      baselines=float(baseline), target=t, perturbations_per_eval=64)  # fmt: skip
    return attr.detach().numpy()


def to_heatmap(attributions: np.ndarray, *, mode: str = "positive") -> np.ndarray:
    """A ``(n, H, W)`` "where" map from ``(n, C, H, W)`` (or ``(n, H, W)``) attributions: the channel sum of
    the positive part (``"positive"``: evidence for the class) or of the magnitude (``"absolute"``, the
    usual display of Integrated Gradients)."""
    a = _floats("attributions", attributions)
    if a.ndim not in (3, 4) or a.shape[0] == 0:
        raise ValueError(f"attributions must be (n, C, H, W) or (n, H, W), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("attributions must be finite")
    if mode not in ("positive", "absolute"):
        raise ValueError(f"mode must be 'positive' or 'absolute', got {mode!r}")
    a = np.clip(a, 0.0, None) if mode == "positive" else np.abs(a)
    return a.sum(1) if a.ndim == 4 else a


@dataclass(frozen=True)
class SegmentShapley:
    """Exact Shapley values of segments.

    Attributes:
        values: ``(n, k)``: ``phi_i`` of each segment (Shapley, 1953: the weighted mean marginal contribution
            over the coalitions without ``i``).
        coalitions: the ``2^k`` coalitions, as tuples of segment indices, in the order of ``coalition_values``.
        coalition_values: ``(n, 2^k)``: ``v(S)``, the target logit with only the segments of ``S`` shown.
    """

    values: np.ndarray
    coalitions: tuple[tuple[int, ...], ...]
    coalition_values: np.ndarray

    def value_of(self, coalition: tuple[int, ...]) -> np.ndarray:
        """``v(S)`` for the coalition ``S`` (segment indices, any order)."""
        return self.coalition_values[:, self.coalitions.index(tuple(sorted(coalition)))]


def segment_shapley(
    model: nn.Module,
    images: np.ndarray,
    background: np.ndarray,
    segments: np.ndarray,
    target: int | np.ndarray,
    *,
    batch_size: int = 512,
) -> SegmentShapley:
    """Exact Shapley values of ``k`` image segments for the target logit, by enumerating all ``2^k``
    coalitions (4 forward passes per image for the two objects {A, B}).

    A coalition ``S`` is the image with the pixels of the segments in ``S`` and the ``background`` elsewhere
    (the object removed, the scene kept). ``phi_i = sum_{S not containing i} |S|! (k-|S|-1)! / k!
    [v(S + i) - v(S)]``; efficiency: ``sum_i phi_i = v(all) - v(empty)``. Pixels outside every segment show
    the background in every coalition.

    Args:
        images, background: ``(n, C, H, W)``.
        segments: ``(n, k, H, W)`` bool, disjoint, ``1 <= k <= 10``.
        target: the class explained.
    """
    model = _check_model(model)
    x = _as_images(images)
    bg = _as_images(background, "background")
    if bg.shape != x.shape:
        raise ValueError(f"background must match images' shape {tuple(x.shape)}, got {tuple(bg.shape)}")
    seg = np.asarray(segments)
    if seg.dtype != bool or seg.ndim != 4 or seg.shape[0] != x.shape[0] or seg.shape[2:] != tuple(x.shape[2:]):
        raise ValueError(f"segments must be a bool array of shape ({x.shape[0]}, k, {x.shape[2]}, {x.shape[3]}), got {seg.dtype} {seg.shape}")
    k = seg.shape[1]
    if not 1 <= k <= 10:
        raise ValueError(f"segments must hold 1 to 10 segments per image (exact enumeration), got {k}")
    if (seg.sum(1) > 1).any():
        raise ValueError("segments must be disjoint")
    t = _as_target(target, x.shape[0], model, x)
    batch_size = _check_pos_int("batch_size", batch_size)
    coalitions = tuple(c for r in range(k + 1) for c in combinations(range(k), r))
    seg_t = torch.as_tensor(seg)
    vals = np.empty((x.shape[0], len(coalitions)))
    with torch.no_grad():
        for j, coalition in enumerate(coalitions):
            shown = seg_t[:, list(coalition)].any(1, keepdim=True) if coalition else torch.zeros_like(seg_t[:, :1])
            xs = torch.where(shown, x, bg)
            out = torch.cat([model(xs[i : i + batch_size]) for i in range(0, len(xs), batch_size)])
            vals[:, j] = out.gather(1, t[:, None])[:, 0].double().numpy()
    index = {c: j for j, c in enumerate(coalitions)}
    phi = np.zeros((x.shape[0], k))
    for i in range(k):
        for c in coalitions:
            if i in c:
                continue
            weight = math.factorial(len(c)) * math.factorial(k - len(c) - 1) / math.factorial(k)
            phi[:, i] += weight * (vals[:, index[tuple(sorted(c + (i,)))]] - vals[:, index[c]])
    return SegmentShapley(phi, coalitions, vals)


def _dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    if radius == 0:
        return mask
    m = torch.as_tensor(mask, dtype=torch.float32)[:, None]
    return (torch.nn.functional.max_pool2d(m, 2 * radius + 1, stride=1, padding=radius)[:, 0] > 0).numpy()


def _check_maps(heatmaps: object, masks: dict[str, object], dilate: object) -> tuple[np.ndarray, list[np.ndarray], int]:
    h = _floats("heatmaps", heatmaps)
    if h.ndim != 3 or h.shape[0] == 0:
        raise ValueError(f"heatmaps must be a non-empty (n, H, W) array, got shape {h.shape}")
    if not np.isfinite(h).all() or (h < 0).any():
        raise ValueError("heatmaps must be finite and non-negative (see to_heatmap)")
    out = []
    for name, m in masks.items():
        arr = np.asarray(m)
        if arr.dtype != bool or arr.shape != h.shape:
            raise ValueError(f"{name} must be a bool array of shape {h.shape}, got {arr.dtype} {arr.shape}")
        out.append(arr)
    if isinstance(dilate, bool) or not isinstance(dilate, (int, np.integer)) or dilate < 0:
        raise ValueError(f"dilate must be an int >= 0, got {dilate!r}")
    return h, out, int(dilate)


SUMMARY_NAMES = ("share on A", "share on B", "log(share A / share B)")
"""The region-level summaries of an explanation (notes, Sec. 6: mass on A, mass on B, their ratio)."""


def region_summaries(heatmaps: np.ndarray, mask_a: np.ndarray, mask_b: np.ndarray, *, dilate: int = 1) -> np.ndarray:
    """``(n, 3)``: the share of each map's mass on A and on B (each object's mask dilated by ``dilate``
    pixels, a pixel near both counted for both) and ``log(share_A / share_B)``. Shares, not raw masses,
    so that the summary says *where* the evidence is and not how large the output is (which the efficiency
    of an attribution would give away)."""
    h, (ma, mb), r = _check_maps(heatmaps, {"mask_a": mask_a, "mask_b": mask_b}, dilate)
    total = h.sum((1, 2)) + _EPS
    share_a = (h * _dilate(ma, r)).sum((1, 2)) / total
    share_b = (h * _dilate(mb, r)).sum((1, 2)) / total
    return np.stack([share_a, share_b, np.log((share_a + 1e-6) / (share_b + 1e-6))], 1)


def shapley_summaries(values: np.ndarray) -> np.ndarray:
    """``(n, 3)`` region summaries of two-segment Shapley values ``(phi_A, phi_B)``: each one's share of
    ``|phi_A| + |phi_B|`` and ``phi_A - phi_B`` over that sum (signed)."""
    v = _floats("values", values)
    if v.ndim != 2 or v.shape[1] != 2 or v.shape[0] == 0 or not np.isfinite(v).all():
        raise ValueError(f"values must be a finite (n, 2) array of (phi_A, phi_B), got shape {v.shape}")
    scale = np.abs(v).sum(1) + _EPS
    return np.stack([v[:, 0] / scale, v[:, 1] / scale, (v[:, 0] - v[:, 1]) / scale], 1)


def object_mass_fraction(heatmaps: np.ndarray, mask: np.ndarray, *, dilate: int = 2) -> np.ndarray:
    """``(n,)``: the fraction of each map's mass inside ``mask`` dilated by ``dilate`` pixels ("the
    explanation is right about *where*"; the dilation allows for the coarse grid a Grad-CAM map is
    up-sampled from: 4 pixels a cell for the CNN and the ViT)."""
    h, (m,), r = _check_maps(heatmaps, {"mask": mask}, dilate)
    return (h * _dilate(m, r)).sum((1, 2)) / (h.sum((1, 2)) + _EPS)


def pointing_game(heatmaps: np.ndarray, mask: np.ndarray, *, tolerance: int = 2) -> np.ndarray:
    """``(n,)`` bool: the map's maximum lies on ``mask`` dilated by ``tolerance`` pixels (the pointing game
    of Zhang et al., 2018, "Top-down neural attention by excitation backprop", with a tolerance of half a
    Grad-CAM cell: the localisation metric of "the explanation is right about *where*")."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, np.integer)) or tolerance < 0:
        raise ValueError(f"tolerance must be an int >= 0, got {tolerance!r}")
    h, (m,), r = _check_maps(heatmaps, {"mask": mask}, tolerance)
    flat = h.reshape(len(h), -1).argmax(1)
    return _dilate(m, r).reshape(len(h), -1)[np.arange(len(h)), flat]


@dataclass(frozen=True)
class ProbeResult:
    """A cross-validated probe: ``correct`` per example (its held-out fold's prediction) and the accuracy."""

    correct: np.ndarray
    accuracy: float


def attribution_probe(features: np.ndarray, labels: np.ndarray, *, folds: int = 5, seed: int = 0) -> ProbeResult:
    """Predict the class from explanation summaries with a logistic regression (standardised inputs),
    ``folds``-fold stratified cross-validation; every example is predicted by the fold that held it out.

    An accuracy near 1/2 on two balanced classes means the summaries carry no information about the class.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    f = _floats("features", features)
    if f.ndim != 2 or f.shape[0] == 0 or not np.isfinite(f).all():
        raise ValueError(f"features must be a finite (n, d) array, got shape {f.shape}")
    y = np.asarray(labels)
    if y.shape != (f.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be an int array of shape ({f.shape[0]},), got {y.dtype} {y.shape}")
    folds = _check_pos_int("folds", folds)
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    counts = np.bincount(y - y.min()) if y.size else np.array([0])
    if (counts > 0).sum() < 2 or counts[counts > 0].min() < folds:
        raise ValueError(f"labels need at least two classes with >= folds ({folds}) examples each")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    pred = cross_val_predict(probe, f, y, cv=StratifiedKFold(folds, shuffle=True, random_state=int(seed)))
    correct = pred == y
    return ProbeResult(correct, float(correct.mean()))


@dataclass(frozen=True)
class Counterfactual:
    """The relational counterfactual explanation of each scene.

    Attributes:
        offsets: ``(n, m)`` B's centre column minus A's at each swept position (NaN where not swept).
        margins: ``(n, m)`` ``logit_1 - logit_0`` at each position (NaN where not swept).
        flip_offset: ``(n,)`` the offset where the margin crosses 0 (linear interpolation; the mean of the
            crossings if it crosses more than once; NaN if it never does).
        n_crossings: ``(n,)`` how many times the decision changes along the sweep.
        recovered: ``(n,)`` the sweep states the relation rule "class 1 iff B is right of A": every position
            with B at a training gap on the right gives 1, every one on the left gives 0, and the decision
            changes only while B crosses A (touching or overlapping it, where no training scene lies).
        flips: ``(n,)`` moving B changes the decision somewhere along the sweep.
    """

    offsets: np.ndarray
    margins: np.ndarray
    flip_offset: np.ndarray
    n_crossings: np.ndarray
    recovered: np.ndarray
    flips: np.ndarray


def relational_counterfactual(model: nn.Module, scenes: Scenes, *, batch_size: int = 1024) -> Counterfactual:
    """The "how" explanation (paper, Sec. 5, "counterfactual 'move this object' probes" in our notes): move
    B along the row, from a training gap on A's left, across A, to a training gap on A's right (every
    column inside the image), and record the two-class decision margin at each position.

    For a model that decides by the relation the margin changes sign once, as B crosses A; the sweep then
    recovers the rule. For the colour task the decision should not change at all (``flips`` False).
    """
    model = _check_model(model)
    if not isinstance(scenes, Scenes):
        raise TypeError(f"scenes must be Scenes, got {type(scenes).__name__}")
    batch_size = _check_pos_int("batch_size", batch_size)
    size = scenes.config.image_size
    g_lo, g_hi = scenes.config.gap_range
    start = scenes.xa - g_hi - scenes.sb  # B at the widest gap on A's left
    stop = scenes.xa + scenes.sa + g_hi  # ... and on A's right
    m = int((stop - start).max()) + 1
    n = len(scenes)
    offsets = np.full((n, m), np.nan)
    margins = np.full((n, m), np.nan)
    xb_all = start[:, None] + np.arange(m)[None]
    valid = (xb_all >= 0) & (xb_all <= size - scenes.sb[:, None]) & (xb_all <= stop[:, None])
    with torch.no_grad():
        for j in range(m):
            rows = np.flatnonzero(valid[:, j])
            if rows.size == 0:
                continue
            sub = scenes.subset(rows)
            moved = move_b(sub, xb_all[rows, j])
            x = torch.as_tensor(moved.images)
            out = torch.cat([model(x[i : i + batch_size]) for i in range(0, len(x), batch_size)]).double().numpy()
            margins[rows, j] = out[:, 1] - out[:, 0]
            offsets[rows, j] = moved.centre_offset
    flip_offset = np.full(n, np.nan)
    n_cross = np.zeros(n, dtype=np.int64)
    recovered = np.zeros(n, dtype=bool)
    flips = np.zeros(n, dtype=bool)
    for i in range(n):
        ok = ~np.isnan(margins[i])
        d, mg = offsets[i, ok], margins[i, ok]
        pos = mg > 0
        flips[i] = bool(pos.any() and (~pos).any())
        change = np.flatnonzero(pos[1:] != pos[:-1])
        n_cross[i] = change.size
        if change.size:
            # Each sign change located by linear interpolation of the margin; the flip is their mean.
            at = d[change] - mg[change] * (d[change + 1] - d[change]) / (mg[change + 1] - mg[change])
            flip_offset[i] = float(at.mean())
        # B's gap to A at each swept position (B's left edge past A's right edge, or A's left past B's right).
        xb = np.rint(d + scenes.xa[i] + scenes.sa[i] / 2.0 - scenes.sb[i] / 2.0).astype(np.int64)
        gap_r = xb - (scenes.xa[i] + scenes.sa[i])
        gap_l = scenes.xa[i] - (xb + scenes.sb[i])
        right = (gap_r >= g_lo) & (gap_r <= g_hi)
        left = (gap_l >= g_lo) & (gap_l <= g_hi)
        if right.any() and left.any() and change.size:
            # Every decision change happens while B crosses A (touching or overlapping it, a gap < g_lo).
            crossing = np.maximum(gap_r, gap_l)[np.concatenate([change, change + 1])] < g_lo
            recovered[i] = bool(pos[right].all() and not pos[left].any() and crossing.all())
    return Counterfactual(offsets, margins, flip_offset, n_cross, recovered, flips)
