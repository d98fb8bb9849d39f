"""VinT-mini: a small MuJoCo generator of object-in-hand samples with vision, touch and proprioception.

VinT-6D (Wan et al., ICML 2024, https://proceedings.mlr.press/v235/wan24d.html) builds VinT-Sim with MuJoCo
grasps of objects in a multi-finger hand with whole-hand taxels (section 3), rendered in Blender with simulated
Kinect depth noise. This module is the CPU miniature of that pipeline (no OpenGL, no Blender):

- a palm and three fingers of two hinged capsule links with position actuators (randomised targets and gains),
  closing on an object that sits on a *mocap* body (kinematically fixed, so strong closing cannot squeeze it
  out) at a random pose near the palm; gravity off;
- **touch**: the hand-object contacts of ``data.contact`` snapped to a fixed grid of taxels on the finger
  capsules, whose positions come from forward kinematics (the paper's sensor-agnostic representation: 3D
  positions of the firing taxels);
- **proprioception**: the six joint angles and the forward-kinematics positions (``data.xpos``) of the finger
  links and tips;
- **vision**: a depth image from a fixed pinhole camera by ray casting (``mujoco.mj_multiRay``), the object mask
  from the hit geom ids, Gaussian depth noise and random pixel dropout; an occluder plate between camera and
  object, placed so that the fraction of the object's pixels hidden (by fingers and plate together) reaches a
  target level;
- filters: a sample is dropped when the palm penetrates the object by more than ``max_penetration`` (signed
  geom distance, ``mujoco.mj_geomDistance``), when the hand touches the object at fewer than ``min_contacts``
  points, or when fewer than ``min_visible_pixels`` object pixels survive.

Everything is expressed in the camera frame (OpenCV convention: x right, y down, z forward), as VinT-Net's
inputs are. The generator is deterministic per seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from icml24.vision.vint_6d.geometry import ObjectShape

_PALM_HALF = (0.06, 0.06, 0.005)
_FINGER_RADIUS_ON_PALM = 0.05
_LINK_LENGTHS = (0.045, 0.04)
_LINK_RADII = (0.008, 0.007)
_GROUP_HAND, _GROUP_OBJECT, _GROUP_OCCLUDER = 1, 2, 3
HAND_POINTS = 9
"""Proprioceptive points per sample: the origins of the six finger links and the three fingertips (FK)."""


@dataclass(frozen=True)
class VintMiniConfig:
    """The VinT-mini scene and sensors (notes section 6; the paper's simulation pipeline is section 3).

    Every field has a one-line docstring; the defaults are the quick reproduction's.
    """

    shape: ObjectShape = field(default_factory=ObjectShape)
    """The object (a cylinder of radius 2.5 cm and height 8 cm by default: a small "soup can")."""
    image_size: int = 32
    """Depth image width and height in pixels."""
    fov_deg: float = 26.0
    """Horizontal (= vertical) field of view of the pinhole camera, degrees."""
    camera_position: tuple[float, float, float] = (0.0, -0.21, 0.17)
    """Camera centre in the palm's frame, metres (looking at ``camera_target``)."""
    camera_target: tuple[float, float, float] = (0.0, 0.0, 0.035)
    """The point the optical axis goes through."""
    depth_noise_std: float = 0.0015
    """Standard deviation of the Gaussian noise added to every depth value, metres (a Kinect-like 1.5 mm)."""
    dropout: float = 0.1
    """Probability that a pixel returns no depth (holes)."""
    position_jitter: float = 0.004
    """The object centre is drawn uniformly within +-this of its nominal position in x, y and z, metres."""
    gap: float = 0.001
    """Nominal clearance between the object's lowest point and the palm, metres (jitter may make it negative)."""
    close_target: tuple[float, float] = (0.5, 1.4)
    """Range of the commanded closing angle of each finger joint, radians (drawn per joint and sample)."""
    kp_range: tuple[float, float] = (0.7, 1.3)
    """Per-sample multiplier of the actuators' position gains (kp 1.0 proximal, 0.5 distal)."""
    steps: int = 200
    """Physics steps while the fingers close (timestep 2 ms; the joint angles settle to within 0.01 rad of their
    500-step values, and each step is most of the generator's cost)."""
    taxel_spacing: float = 0.005
    """Spacing of the taxel grid on the finger capsules, metres (along the axis; about as much around it)."""
    taxel_radius: float = 0.004
    """A taxel fires when a hand-object contact lies within this distance of it (the nearest one always does)."""
    max_penetration: float = 0.002
    """Samples whose palm penetrates the object deeper than this are dropped, metres."""
    min_contacts: int = 2
    """Samples with fewer finger-object contacts are dropped."""
    min_visible_pixels: int = 8
    """Samples with fewer visible (unoccluded, not dropped) object pixels are dropped."""
    max_tactile: int = 24
    """At most this many firing taxels are kept per sample (the ones nearest the contacts first)."""
    vision_points: int = 64
    """Object depth points per sample fed to the network (drawn from the visible object pixels)."""

    def __post_init__(self) -> None:
        if not isinstance(self.shape, ObjectShape):
            raise TypeError(f"shape must be an ObjectShape, got {type(self.shape).__name__}")
        for name in ("image_size", "steps", "min_contacts", "min_visible_pixels", "max_tactile", "vision_points"):
            v = getattr(self, name)
            lo = 0 if name in ("min_contacts",) else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        for name in ("fov_deg", "depth_noise_std", "dropout", "position_jitter", "gap", "taxel_spacing",
                     "taxel_radius", "max_penetration"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise TypeError(f"{name} must be a finite number, got {v!r}")
        if not 1.0 < self.fov_deg < 120.0:
            raise ValueError(f"fov_deg must be in (1, 120), got {self.fov_deg!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        for name in ("depth_noise_std", "position_jitter", "max_penetration"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("taxel_spacing", "taxel_radius"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("close_target", "kp_range"):
            v = getattr(self, name)
            if not (isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)
                    and v[0] <= v[1]):  # fmt: skip
                raise ValueError(f"{name} must be a (low, high) pair with low <= high, got {v!r}")
        if self.kp_range[0] <= 0:
            raise ValueError(f"kp_range must be positive, got {self.kp_range!r}")
        for name in ("camera_position", "camera_target"):
            v = getattr(self, name)
            if not (isinstance(v, (tuple, list)) and len(v) == 3 and all(isinstance(x, (int, float)) for x in v)):
                raise ValueError(f"{name} must be a 3-tuple of numbers, got {v!r}")
        if np.allclose(self.camera_position, self.camera_target):
            raise ValueError("camera_position and camera_target must differ")

    def to_dict(self) -> dict:
        """A JSON-able dict of the config (the shape as ``{"kind", "size"}``)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["shape"] = {"kind": self.shape.kind, "size": list(self.shape.size)}
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: dict) -> VintMiniConfig:
        """The inverse of :meth:`to_dict`."""
        kw = dict(data)
        if "shape" in kw and isinstance(kw["shape"], dict):
            kw["shape"] = ObjectShape(kw["shape"]["kind"], tuple(kw["shape"]["size"]))
        for k in ("close_target", "kp_range", "camera_position", "camera_target"):
            if k in kw and isinstance(kw[k], list):
                kw[k] = tuple(kw[k])
        return cls(**kw)


def camera_rotation(position: tuple[float, ...], target: tuple[float, ...]) -> np.ndarray:
    """Camera-to-world rotation (columns: the camera's x right, y down, z forward axes in world coordinates)."""
    z = np.asarray(target, float) - np.asarray(position, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    if np.linalg.norm(x) < 1e-8:  # looking straight down or up
        x = np.array([1.0, 0.0, 0.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.stack([x, y, z], axis=1)


def _mjcf(shape: ObjectShape) -> str:
    """The scene's MJCF: palm (static), three 2-link fingers, the object and the occluder on mocap bodies."""
    fingers = []
    for i in range(3):
        a = 2 * math.pi * i / 3
        x, y = _FINGER_RADIUS_ON_PALM * math.cos(a), _FINGER_RADIUS_ON_PALM * math.sin(a)
        l0, l1 = _LINK_LENGTHS
        r0, r1 = _LINK_RADII
        # Local x points outward; a positive angle about -y tips the finger inward (closing).
        fingers.append(f"""
      <body name="f{i}_l0" pos="{x:.6f} {y:.6f} 0" euler="0 0 {math.degrees(a):.6f}">
        <joint name="f{i}_j0" type="hinge" axis="0 -1 0" range="-0.6 1.8" damping="0.1"/>
        <geom name="f{i}_g0" type="capsule" fromto="0 0 0 0 0 {l0}" size="{r0}" group="{_GROUP_HAND}"/>
        <body name="f{i}_l1" pos="0 0 {l0}">
          <joint name="f{i}_j1" type="hinge" axis="0 -1 0" range="-0.3 1.8" damping="0.1"/>
          <geom name="f{i}_g1" type="capsule" fromto="0 0 0 0 0 {l1}" size="{r1}" group="{_GROUP_HAND}"/>
          <site name="f{i}_tip" pos="0 0 {l1}"/>
        </body>
      </body>""")
    acts = "\n".join(f'    <position name="f{i}_a{k}" joint="f{i}_j{k}" kp="{1.0 if k == 0 else 0.5}"/>'
                     for i in range(3) for k in range(2))  # fmt: skip
    size = " ".join(f"{s:.6f}" for s in shape.size)
    ph = _PALM_HALF
    return f"""<mujoco model="vint_mini">
  <compiler angle="degree"/>
  <option gravity="0 0 0" timestep="0.002"/>
  <default><geom friction="1 0.005 0.0001" solref="0.004 1"/></default>
  <worldbody>
    <body name="palm" pos="0 0 0">
      <geom name="palm" type="box" size="{ph[0]} {ph[1]} {ph[2]}" pos="0 0 {-ph[2]}" group="{_GROUP_HAND}"/>
      {"".join(fingers)}
    </body>
    <body name="object" mocap="true" pos="0 0 0.04">
      <geom name="object" type="{shape.kind}" size="{size}" group="{_GROUP_OBJECT}"/>
    </body>
    <body name="occluder" mocap="true" pos="0 0 -1">
      <geom name="occluder" type="box" size="0.3 0.3 0.0005" group="{_GROUP_OCCLUDER}" contype="0"
            conaffinity="0"/>
    </body>
  </worldbody>
  <actuator>
{acts}
  </actuator>
</mujoco>"""


def _taxel_grid(length: float, radius: float, spacing: float) -> np.ndarray:
    """Taxel positions on a capsule's cylindrical surface and its distal cap, in the link's frame."""
    n_along = max(2, int(round(length / spacing)) + 1)
    n_around = max(4, int(round(2 * math.pi * radius / spacing)))
    zs = np.linspace(0.0, length, n_along)
    phis = 2 * math.pi * np.arange(n_around) / n_around
    side = np.array([[radius * math.cos(p), radius * math.sin(p), z] for z in zs for p in phis])
    cap = np.array([[radius * math.sin(th) * math.cos(p), radius * math.sin(th) * math.sin(p),
                     length + radius * math.cos(th)] for th in (0.0, 0.75) for p in (phis if th else [0.0])])  # fmt: skip
    return np.concatenate([side, cap], axis=0)


class VintMiniScene:
    """The MuJoCo scene of VinT-mini and its sensors; one instance per process is enough (it is reset per sample).

    Call :meth:`grasp` to place the object and close the fingers, then :meth:`render` for a depth image at an
    occlusion level, :meth:`touch` and :meth:`proprioception` for the other modalities.
    """

    def __init__(self, config: VintMiniConfig | None = None) -> None:
        import mujoco

        self.config = config or VintMiniConfig()
        if not isinstance(self.config, VintMiniConfig):
            raise TypeError(f"config must be a VintMiniConfig, got {type(self.config).__name__}")
        self._mj = mujoco
        self.model = mujoco.MjModel.from_xml_string(_mjcf(self.config.shape))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.object_geom = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "object")
        self.palm_geom = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "palm")
        self.occluder_geom = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "occluder")
        self.link_geoms = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"f{i}_g{k}") for i in range(3)
                           for k in range(2)]  # fmt: skip
        self.link_bodies = [int(m.geom_bodyid[g]) for g in self.link_geoms]
        self.tip_sites = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, f"f{i}_tip") for i in range(3)]
        self._obj_mocap = int(m.body_mocapid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "object")])
        self._occ_mocap = int(m.body_mocapid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "occluder")])
        self._kp0 = m.actuator_gainprm[:, 0].copy()
        c = self.config
        self.taxels = [_taxel_grid(_LINK_LENGTHS[k], _LINK_RADII[k], c.taxel_spacing) for _ in range(3)
                       for k in range(2)]  # fmt: skip
        # Camera rays: one per pixel centre, direction with camera-frame z = 1 (so the ray parameter is depth).
        self.cam_pos = np.asarray(c.camera_position, float)
        self.cam_rot = camera_rotation(c.camera_position, c.camera_target)
        w = c.image_size
        self.focal = (w / 2) / math.tan(math.radians(c.fov_deg) / 2)
        uv = (np.arange(w) + 0.5 - w / 2) / self.focal
        vv, uu = np.meshgrid(uv, uv, indexing="ij")
        self.ray_dirs_cam = np.stack([uu.ravel(), vv.ravel(), np.ones(w * w)], axis=1)
        self._ray_vec = np.ascontiguousarray((self.ray_dirs_cam @ self.cam_rot.T).ravel())
        self._geomid = np.zeros(w * w, dtype=np.int32)
        self._dist = np.zeros(w * w, dtype=np.float64)
        self.object_rotation = np.eye(3)
        self.object_position = np.zeros(3)

    # ------------------------------------------------------------------ physics
    def grasp(self, rotation: np.ndarray, position: np.ndarray, close_targets: np.ndarray,
              kp_scale: float = 1.0) -> None:  # fmt: skip
        """Put the object at the world pose ``(rotation, position)`` on its mocap body, command the six finger
        joints to ``close_targets`` (radians) with gains ``kp_scale`` times the nominal ones, and step until
        the fingers rest on the surface (``config.steps`` steps)."""
        mj, m, d = self._mj, self.model, self.data
        mj.mj_resetData(m, d)
        m.actuator_gainprm[:, 0] = self._kp0 * kp_scale
        m.actuator_biasprm[:, 1] = -self._kp0 * kp_scale
        d.qpos[:] = -0.5  # start open, so that the object can be placed without touching the fingers
        quat = np.zeros(4)
        mj.mju_mat2Quat(quat, np.asarray(rotation, float).ravel())
        d.mocap_pos[self._obj_mocap] = position
        d.mocap_quat[self._obj_mocap] = quat
        d.mocap_pos[self._occ_mocap] = (0.0, 0.0, -1.0)
        d.ctrl[:] = close_targets
        self.object_rotation = np.asarray(rotation, float)
        self.object_position = np.asarray(position, float)
        mj.mj_forward(m, d)
        for _ in range(self.config.steps):
            mj.mj_step(m, d)
        mj.mj_forward(m, d)

    def palm_penetration(self) -> float:
        """How deep the palm penetrates the object, metres (0 when they do not touch): minus the signed distance
        between the two geoms (the static palm and the mocap object generate no contacts, so it is measured)."""
        dist = self._mj.mj_geomDistance(self.model, self.data, self.palm_geom, self.object_geom, 0.05, None)
        return float(max(0.0, -dist))

    def contacts(self) -> np.ndarray:
        """World positions of the finger-object contacts, shape ``(n, 3)``, and (second value) their link index
        (0-5)."""
        d = self.data
        pts, links = [], []
        for i in range(d.ncon):
            con = d.contact[i]
            g1, g2 = int(con.geom[0]), int(con.geom[1])
            if self.object_geom not in (g1, g2):
                continue
            other = g2 if g1 == self.object_geom else g1
            if other in self.link_geoms:
                pts.append(np.array(con.pos, float))
                links.append(self.link_geoms.index(other))
        return (np.asarray(pts).reshape(-1, 3), np.asarray(links, dtype=int))

    def taxel_positions(self) -> list[np.ndarray]:
        """World positions of every link's taxels by forward kinematics (``data.xpos``, ``data.xmat``)."""
        d = self.data
        return [d.xpos[b] + t @ d.xmat[b].reshape(3, 3).T for b, t in zip(self.link_bodies, self.taxels)]

    def touch(self) -> tuple[np.ndarray, np.ndarray]:
        """The firing taxels (world positions, shape ``(n, 3)``) and the raw contact points (world, ``(m, 3)``).

        Each contact fires its link's nearest taxel and every taxel of that link within ``taxel_radius``;
        at most ``max_tactile`` taxels are kept, nearest to a contact first.
        """
        pts, links = self.contacts()
        if len(pts) == 0:
            return np.zeros((0, 3)), pts
        tax = self.taxel_positions()
        fired: dict[tuple[int, int], float] = {}
        for p, k in zip(pts, links):
            dist = np.linalg.norm(tax[k] - p, axis=1)
            idx = set(np.flatnonzero(dist < self.config.taxel_radius).tolist()) | {int(dist.argmin())}
            for j in idx:
                fired[(int(k), j)] = min(fired.get((int(k), j), np.inf), float(dist[j]))
        keys = sorted(fired, key=lambda kj: (fired[kj], kj))[: self.config.max_tactile]
        return np.array([tax[k][j] for k, j in keys]), pts

    def proprioception(self) -> tuple[np.ndarray, np.ndarray]:
        """The six joint angles (radians) and the FK hand points (world): link origins then fingertips, (9, 3)."""
        d = self.data
        pts = np.concatenate([d.xpos[self.link_bodies], d.site_xpos[self.tip_sites]], axis=0)
        return np.array(d.qpos[:6], float), pts

    # ------------------------------------------------------------------ vision
    def cast(self, groups: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Cast one ray per pixel against the geoms of ``groups``: (depth or inf, hit geom id or -1), each (w*w,)."""
        mask = np.zeros(6, dtype=np.uint8)
        mask[list(groups)] = 1
        n = self._geomid.size
        try:
            self._mj.mj_multiRay(self.model, self.data, self.cam_pos, self._ray_vec, mask, 1, -1, self._geomid,
                                 self._dist, None, n, 10.0)  # fmt: skip
        except TypeError:  # mujoco < 3.3: no normals argument
            self._mj.mj_multiRay(self.model, self.data, self.cam_pos, self._ray_vec, mask, 1, -1, self._geomid,
                                 self._dist, n, 10.0)  # fmt: skip
        depth = np.where(self._geomid >= 0, self._dist, np.inf)
        return depth.copy(), self._geomid.copy()

    def place_occluder(self, direction: float, edge: float | None, depth: float = 0.07) -> None:
        """Put the occluder plate ``depth`` metres in front of the camera, square to the optical axis, covering
        every ray whose image coordinate along the in-plane ``direction`` (radians) is below ``edge``
        (``edge`` in units of the normalised image coordinate x/z; ``None`` removes the plate)."""
        if edge is None:
            self.data.mocap_pos[self._occ_mocap] = (0.0, 0.0, -1.0)
            self._mj.mj_forward(self.model, self.data)
            return
        half = float(self.model.geom_size[self.occluder_geom][0])
        u = np.array([math.cos(direction), math.sin(direction), 0.0])
        centre_cam = u * (edge * depth - half) + np.array([0.0, 0.0, depth])
        rz = np.array([[u[0], -u[1], 0.0], [u[1], u[0], 0.0], [0.0, 0.0, 1.0]])
        quat = np.zeros(4)
        self._mj.mju_mat2Quat(quat, (self.cam_rot @ rz).ravel())
        self.data.mocap_pos[self._occ_mocap] = self.cam_pos + self.cam_rot @ centre_cam
        self.data.mocap_quat[self._occ_mocap] = quat
        self._mj.mj_forward(self.model, self.data)

    def occlusion(self) -> float:
        """Fraction of the object's pixels (object alone in view) that the hand and the plate hide, in [0, 1]."""
        _, alone = self.cast((_GROUP_OBJECT,))
        _, seen = self.cast((_GROUP_HAND, _GROUP_OBJECT, _GROUP_OCCLUDER))
        obj = alone == self.object_geom
        if not obj.any():
            return 1.0
        return float(1.0 - (obj & (seen == self.object_geom)).sum() / obj.sum())

    def render(self, target_occlusion: float, direction: float) -> tuple[np.ndarray, np.ndarray, float]:
        """A depth image at an occlusion level: the plate's edge is set so that the fingers and the plate together
        hide ``target_occlusion`` of the object's pixels (exactly, up to one pixel, unless the fingers alone
        hide more). Returns the clean depth (w*w, inf where nothing is hit), the hit geom ids and the measured
        occlusion."""
        if isinstance(target_occlusion, bool) or not isinstance(target_occlusion, (int, float)) or not (
                0.0 <= target_occlusion <= 1.0):  # fmt: skip
            raise ValueError(f"target_occlusion must be a fraction in [0, 1], got {target_occlusion!r}")
        if isinstance(direction, bool) or not isinstance(direction, (int, float)) or not math.isfinite(direction):
            raise ValueError(f"direction must be a finite angle in radians, got {direction!r}")
        self.place_occluder(direction, None)
        _, alone = self.cast((_GROUP_OBJECT,))
        _, hand = self.cast((_GROUP_HAND, _GROUP_OBJECT))
        obj = alone == self.object_geom
        n_obj = int(obj.sum())
        visible = obj & (hand == self.object_geom)
        need = int(math.ceil(target_occlusion * n_obj - 1e-9)) - (n_obj - int(visible.sum()))
        if need > 0 and visible.any():
            u = np.array([math.cos(direction), math.sin(direction)])
            s = np.sort(self.ray_dirs_cam[visible, :2] @ u)
            k = min(need, s.size)
            edge = s[k - 1] + 1e-9 if k == s.size else 0.5 * (s[k - 1] + s[k])
            self.place_occluder(direction, float(edge))
        depth, geom = self.cast((_GROUP_HAND, _GROUP_OBJECT, _GROUP_OCCLUDER))
        occ = 1.0 if n_obj == 0 else float(1.0 - ((geom == self.object_geom) & obj).sum() / n_obj)
        return depth, geom, occ

    def to_camera(self, points_world: np.ndarray) -> np.ndarray:
        """World points (n, 3) in the camera frame."""
        return (np.asarray(points_world, float) - self.cam_pos) @ self.cam_rot

    def to_world(self, points_camera: np.ndarray) -> np.ndarray:
        """Camera-frame points (n, 3) in the world frame (the inverse of :meth:`to_camera`)."""
        return np.asarray(points_camera, float) @ self.cam_rot.T + self.cam_pos


# ---------------------------------------------------------------------------------------------- the dataset
@dataclass(frozen=True)
class VintMiniSamples:
    """A batch of VinT-mini samples, every array's first axis the sample (camera frame, metres, float32).

    Attributes:
        vision_points: ``(n, P, 3)`` object depth points (visible object pixels back-projected with noisy depth,
            drawn with replacement to ``P = vision_points``).
        tactile_points: ``(n, T, 3)`` firing taxel positions, zero-padded; ``tactile_mask`` ``(n, T)`` marks
            the real ones (``T = max_tactile``).
        hand_points: ``(n, 9, 3)`` FK positions of the finger links and tips.
        joint_angles: ``(n, 6)`` finger joint angles, radians.
        rotation, translation: ``(n, 3, 3)``, ``(n, 3)`` the object's pose in the camera frame, rotation
            canonicalised over the object's symmetries (the training label).
        occlusion_target, occlusion: ``(n,)`` the requested and the measured occlusion fraction.
        grasp_id: ``(n,)`` index of the grasp a sample renders (test grasps are rendered at every level).
        n_contacts: ``(n,)`` finger-object contacts of the grasp.
        depth, object_mask: ``(n, w, w)`` the noisy depth image (0 where no return) and the visible object mask.
    """

    vision_points: np.ndarray
    tactile_points: np.ndarray
    tactile_mask: np.ndarray
    hand_points: np.ndarray
    joint_angles: np.ndarray
    rotation: np.ndarray
    translation: np.ndarray
    occlusion_target: np.ndarray
    occlusion: np.ndarray
    grasp_id: np.ndarray
    n_contacts: np.ndarray
    depth: np.ndarray
    object_mask: np.ndarray
    stats: dict = field(default_factory=dict)
    """Counts of the generator: grasps tried, dropped by each filter."""

    def __len__(self) -> int:
        return int(self.vision_points.shape[0])

    def subset(self, index: np.ndarray) -> VintMiniSamples:
        """The samples at ``index`` (an integer or boolean array)."""
        kw = {f.name: getattr(self, f.name)[index] for f in fields(self) if f.name != "stats"}
        return VintMiniSamples(**kw, stats=dict(self.stats))


def generate_samples(config: VintMiniConfig, n_grasps: int, *, seed: int,
                     occlusion_levels: tuple[float, ...] = (0.2, 0.35, 0.5),
                     render_all_levels: bool = False) -> VintMiniSamples:  # fmt: skip
    """Generate ``n_grasps`` accepted grasps and render each at one random occlusion level (or, with
    ``render_all_levels``, at every level: a paired test set). Deterministic per ``seed``.

    Notes section 6: the object's orientation is uniform on SO(3), its centre within ``position_jitter`` of a
    nominal pose resting ``gap`` above the palm; every joint's closing target and the gains are drawn per grasp;
    grasps failing the palm-penetration or the contact filter are redrawn (counted in ``stats``).
    """
    from scipy.spatial.transform import Rotation

    if not isinstance(config, VintMiniConfig):
        raise TypeError(f"config must be a VintMiniConfig, got {type(config).__name__}")
    if isinstance(n_grasps, bool) or not isinstance(n_grasps, int) or n_grasps < 1:
        raise ValueError(f"n_grasps must be a positive int, got {n_grasps!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if (not isinstance(occlusion_levels, (tuple, list)) or not occlusion_levels
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1
                       for x in occlusion_levels)):  # fmt: skip
        raise ValueError(f"occlusion_levels must be a non-empty tuple of fractions in [0, 1), got {occlusion_levels!r}")
    rng = np.random.default_rng(seed)
    scene = VintMiniScene(config)
    c = config
    shape = c.shape
    w = c.image_size
    stats = {"tried": 0, "penetration": 0, "contacts": 0, "visibility": 0}
    out: dict[str, list] = {k: [] for k in ("vision_points", "tactile_points", "tactile_mask", "hand_points",
                                            "joint_angles", "rotation", "translation", "occlusion_target",
                                            "occlusion", "grasp_id", "n_contacts", "depth", "object_mask")}  # fmt: skip
    accepted = 0
    max_tries = 20 * n_grasps + 100
    while accepted < n_grasps:
        if stats["tried"] >= max_tries:
            raise RuntimeError(f"VinT-mini accepted only {accepted} of {n_grasps} grasps in {max_tries} tries: "
                               f"{stats}")  # fmt: skip
        stats["tried"] += 1
        rot = Rotation.random(random_state=rng).as_matrix()
        jitter = rng.uniform(-c.position_jitter, c.position_jitter, 3)
        pos = np.array([0.0, 0.0, shape.lowest_extent(rot) + c.gap]) + jitter
        targets = rng.uniform(*c.close_target, 6)
        kp = float(rng.uniform(*c.kp_range))
        levels = list(occlusion_levels) if render_all_levels else [float(rng.choice(occlusion_levels))]
        directions = rng.uniform(0, 2 * math.pi, len(levels))
        noise_seed = int(rng.integers(2**31))
        scene.grasp(rot, pos, targets, kp)
        if scene.palm_penetration() > c.max_penetration:
            stats["penetration"] += 1
            continue
        taxels, contacts = scene.touch()
        if len(contacts) < c.min_contacts:
            stats["contacts"] += 1
            continue
        angles, hand = scene.proprioception()
        renders = []
        nrng = np.random.default_rng(noise_seed)
        for level, direction in zip(levels, directions):
            depth, geom, occ = scene.render(level, float(direction))
            noisy = depth + c.depth_noise_std * nrng.standard_normal(depth.shape)
            keep = nrng.random(depth.shape) >= c.dropout
            seen = (geom == scene.object_geom) & keep & np.isfinite(depth)
            renders.append((level, occ, np.where(keep & np.isfinite(depth), noisy, 0.0), seen))
        if min(int(r[3].sum()) for r in renders) < c.min_visible_pixels:
            stats["visibility"] += 1
            continue
        r_cam = scene.cam_rot.T @ rot
        t_cam = scene.to_camera(pos[None])[0]
        r_label = shape.canonical_rotation(r_cam)
        tac_cam = scene.to_camera(taxels) if len(taxels) else np.zeros((0, 3))
        tac = np.zeros((c.max_tactile, 3))
        tac[: len(tac_cam)] = tac_cam
        tmask = np.zeros(c.max_tactile, dtype=bool)
        tmask[: len(tac_cam)] = True
        hand_cam = scene.to_camera(hand)
        for level, occ, depth_img, seen in renders:
            idx = np.flatnonzero(seen)
            pick = nrng.choice(idx, size=c.vision_points, replace=idx.size < c.vision_points)
            pts = scene.ray_dirs_cam[pick] * depth_img[pick, None]
            out["vision_points"].append(pts)
            out["tactile_points"].append(tac)
            out["tactile_mask"].append(tmask)
            out["hand_points"].append(hand_cam)
            out["joint_angles"].append(angles)
            out["rotation"].append(r_label)
            out["translation"].append(t_cam)
            out["occlusion_target"].append(level)
            out["occlusion"].append(occ)
            out["grasp_id"].append(accepted)
            out["n_contacts"].append(len(contacts))
            out["depth"].append(depth_img.reshape(w, w))
            out["object_mask"].append(seen.reshape(w, w))
        accepted += 1
    f32 = {"vision_points", "tactile_points", "hand_points", "joint_angles", "rotation", "translation",
           "occlusion_target", "occlusion", "depth"}  # fmt: skip
    arrays = {k: np.asarray(v, dtype=np.float32 if k in f32 else None) for k, v in out.items()}
    return VintMiniSamples(**arrays, stats=stats)


class VintMiniDataset:
    """A ``torch.utils.data.Dataset``-style view of :class:`VintMiniSamples`: item ``i`` is a dict of float32
    tensors (``vision_points``, ``tactile_points``, ``tactile_mask``, ``hand_points``, ``joint_angles``,
    ``rotation``, ``translation``, ``occlusion``), so a ``DataLoader`` batches it."""

    _KEYS = ("vision_points", "tactile_points", "tactile_mask", "hand_points", "joint_angles", "rotation",
             "translation", "occlusion")  # fmt: skip

    def __init__(self, samples: VintMiniSamples) -> None:
        if not isinstance(samples, VintMiniSamples):
            raise TypeError(f"samples must be VintMiniSamples, got {type(samples).__name__}")
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        import torch

        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"index must be an int, got {type(index).__name__}")
        if not -len(self) <= int(index) < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        return {k: torch.as_tensor(getattr(self.samples, k)[int(index)]) for k in self._KEYS}
