"""The differentiable rule layer of SYFLOW (Xu, Walter, Kalofolias, Vreeken, ICML 2024, Sec. 3.2).

https://arxiv.org/abs/2402.12930. A subgroup is a conjunction of one interval per feature,
``x_j in (alpha_j, beta_j)``. SYFLOW relaxes it so that gradients reach the cut points:

* **soft binning** (differentiable binning into three bins, below / inside / above): for feature ``j`` the logits
  ``[x, 2x - alpha_j, 3x - alpha_j - beta_j] / T`` go through a softmax; the middle probability ``pi_j(x)``
  tends to the indicator ``1[alpha_j < x < beta_j]`` as the temperature ``T -> 0``;
* **soft conjunction**: a weighted harmonic mean ``s(x) = sum_j a_j / sum_j a_j (1 + eps) / (pi_j(x) + eps)``
  with learnable importances ``a_j >= 0`` (a ReLU of a free parameter). A single ``pi_j`` near 0 sends ``s``
  near 0, as a logical AND does; a feature with ``a_j = 0`` drops out of the rule.

After each optimiser step :meth:`SoftIntervalRule.project` sorts each pair of cut points and clamps them to
``[min - 0.2 range, max + 0.2 range]`` of the training data (the official code's ``bin_deviation = 0.2``).
The readable rule keeps a feature when ``a_j >= 0.1`` and its interval does not contain the whole training
range (the official ``get_rules``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml24.subgroups.syflow._validation import finite_number, finite_tensor

IMPORTANCE_THRESHOLD = 0.1
"""A feature with ReLU importance below this does not enter the readable rule (official ``get_rules``)."""


@dataclass(frozen=True)
class Condition:
    """One interval condition ``lower < x[feature] < upper``; ``None`` marks an open side."""

    feature: int
    name: str
    lower: float | None
    upper: float | None

    def __post_init__(self) -> None:
        if isinstance(self.feature, bool) or not isinstance(self.feature, (int, np.integer)) or self.feature < 0:
            raise ValueError(f"feature must be a column index >= 0, got {self.feature!r}")
        for side in ("lower", "upper"):
            v = getattr(self, side)
            if v is not None:
                finite_number(side, v)
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"lower must be <= upper, got lower {self.lower} and upper {self.upper}")

    def covers(self, X: np.ndarray) -> np.ndarray:
        """Boolean mask of the rows of ``X`` that satisfy this condition."""
        col = np.asarray(X, dtype=float)[:, self.feature]
        ok = np.ones(col.shape, dtype=bool)
        if self.lower is not None:
            ok &= col > self.lower
        if self.upper is not None:
            ok &= col < self.upper
        return ok

    def __str__(self) -> str:
        if self.lower is not None and self.upper is not None:
            return f"{self.lower:.4g} < {self.name} < {self.upper:.4g}"
        if self.lower is not None:
            return f"{self.name} > {self.lower:.4g}"
        if self.upper is not None:
            return f"{self.name} < {self.upper:.4g}"
        return f"{self.name} any"


@dataclass(frozen=True)
class Rule:
    """A conjunction of interval conditions: the readable description of one subgroup.

    The empty rule covers every row (the whole population).
    """

    conditions: tuple[Condition, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.conditions, (tuple, list)) or not all(isinstance(c, Condition) for c in self.conditions):
            raise TypeError(f"conditions must be a tuple of Condition, got {self.conditions!r}")
        object.__setattr__(self, "conditions", tuple(self.conditions))

    @property
    def features(self) -> tuple[int, ...]:
        """The column indices the rule uses, sorted."""
        return tuple(sorted(c.feature for c in self.conditions))

    def covers(self, X: np.ndarray) -> np.ndarray:
        """Boolean membership of each row of ``X`` (shape ``(n_samples,)``)."""
        X = np.asarray(X, dtype=float)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array (n_samples, n_features), got shape {X.shape}")
        mask = np.ones(X.shape[0], dtype=bool)
        for c in self.conditions:
            mask &= c.covers(X)
        return mask

    def __str__(self) -> str:
        return " AND ".join(str(c) for c in self.conditions) if self.conditions else "(everything)"


def soft_bin_middle(x: torch.Tensor, cut_points: torch.Tensor, temperature: float) -> torch.Tensor:
    """``pi_j(x)``: the soft probability that ``x[:, j]`` lies between the two cut points of feature ``j``.

    The three-bin soft binning of Sec. 3.2: ``softmax([x, 2x - a, 3x - a - b] / T)[1]`` for cut points
    ``a <= b``; logit 2 beats logit 1 when ``x > a`` and logit 3 when ``x < b``.

    Args:
        x: ``(n, d)`` inputs.
        cut_points: ``(d, 2)`` lower and upper cut point per feature.
        temperature: ``T > 0``.
    """
    finite_tensor("x", x, ndim=2)
    finite_tensor("cut_points", cut_points, ndim=2)
    if cut_points.shape != (x.shape[1], 2):
        raise ValueError(f"cut_points must have shape ({x.shape[1]}, 2), got {tuple(cut_points.shape)}")
    temperature = finite_number("temperature", temperature, positive=True)
    a, b = cut_points[:, 0], cut_points[:, 1]
    logits = torch.stack([x, 2 * x - a, 3 * x - a - b], dim=-1) / temperature
    return torch.softmax(logits, dim=-1)[..., 1]


def harmonic_conjunction(pi: torch.Tensor, importance: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft AND of ``pi`` (``(n, d)``) as the weighted harmonic mean of Sec. 3.2.

    Returns ``(s, denominator)`` with ``s = sum_j a_j / denominator`` and
    ``denominator = sum_j a_j (1 + eps) / (pi_j + eps)``. An all-zero importance gives ``s = 0``.
    """
    finite_tensor("pi", pi, ndim=2)
    finite_tensor("importance", importance, ndim=1)
    if importance.shape[0] != pi.shape[1]:
        raise ValueError(f"importance must have {pi.shape[1]} entries (one per column of pi), got {importance.shape[0]}")
    if (importance < 0).any():
        raise ValueError("importance must be >= 0 (the rule layer applies a ReLU)")
    eps = finite_number("eps", eps, nonnegative=True)
    denominator = ((1 + eps) / (pi + eps)) @ importance
    total = importance.sum()
    s = total / denominator.clamp_min(torch.finfo(pi.dtype).tiny)
    return s.clamp(0.0, 1.0), denominator


class SoftIntervalRule(nn.Module):
    """SYFLOW's rule layer: ``s(x) in [0, 1]``, a soft conjunction of one learnable interval per feature.

    Args:
        lower, upper: ``(d,)`` training minimum and maximum of each (standardised) feature; the cut points start
            there (the rule starts as "everything").
        temperature: initial softmax temperature ``T`` (0.2 in the paper's presets).
        eps: the harmonic mean's ``eps`` (1e-5).
        bin_deviation: how far beyond the data range the cut points may move, as a fraction of the range (0.2).
        learn_importance: learn the importances ``a_j`` (the official ``use_weights``); else all stay 1.
    """

    def __init__(
        self,
        lower: torch.Tensor,
        upper: torch.Tensor,
        *,
        temperature: float = 0.2,
        eps: float = 1e-5,
        bin_deviation: float = 0.2,
        learn_importance: bool = True,
    ) -> None:
        super().__init__()
        lower = finite_tensor("lower", torch.as_tensor(lower), ndim=1).detach().clone()
        upper = finite_tensor("upper", torch.as_tensor(upper), ndim=1).detach().clone()
        if lower.shape != upper.shape or lower.ndim != 1:
            raise ValueError(f"lower and upper must be 1-D of equal length, got {tuple(lower.shape)} and {tuple(upper.shape)}")
        temperature = finite_number("temperature", temperature, positive=True)
        self.cut_points = nn.Parameter(torch.stack([lower, upper], dim=1))
        self.importance_raw = nn.Parameter(torch.ones_like(lower), requires_grad=learn_importance)
        span = upper - lower
        self.register_buffer("data_range", torch.stack([lower, upper], dim=1))
        self.register_buffer("limits", torch.stack([lower - bin_deviation * span, upper + bin_deviation * span], 1))
        self.temperature = float(temperature)
        self.eps = float(eps)
        self.last_denominator_mean = 1.0

    @property
    def importance(self) -> torch.Tensor:
        """``a_j = ReLU(raw_j)``."""
        return torch.relu(self.importance_raw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Soft membership ``s(x)`` of each row, shape ``(n,)``."""
        pi = soft_bin_middle(x, self.cut_points, self.temperature)
        s, denominator = harmonic_conjunction(pi, self.importance, self.eps)
        self.last_denominator_mean = float(denominator.detach().mean())
        return s

    @torch.no_grad()
    def project(self) -> None:
        """Sort each pair of cut points and clamp it to the allowed range (the official ``fix_parameters``)."""
        cp = torch.sort(self.cut_points.data, dim=1).values
        lo, hi = self.limits[:, :1], self.limits[:, 1:]
        self.cut_points.data.copy_(torch.minimum(torch.maximum(cp, lo), hi))

    @torch.no_grad()
    def rule(
        self,
        *,
        feature_names: Sequence[str] | None = None,
        mean: np.ndarray | None = None,
        scale: np.ndarray | None = None,
    ) -> Rule:
        """The readable rule, in the original units when the standardisation ``x_std = (x - mean) / scale``
        is given: features with ``a_j >= 0.1`` whose interval does not contain the whole training range."""
        cp = self.cut_points.detach().cpu().double().numpy()
        rng = self.data_range.detach().cpu().double().numpy()
        imp = self.importance.detach().cpu().double().numpy()
        d = cp.shape[0]
        names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
        mu = np.zeros(d) if mean is None else np.asarray(mean, dtype=float)
        sd = np.ones(d) if scale is None else np.asarray(scale, dtype=float)
        conditions = []
        for j in range(d):
            lo, hi = cp[j]
            # A cut point at or beyond the data's extreme cuts nothing away: that side is open.
            if imp[j] < IMPORTANCE_THRESHOLD or (lo <= rng[j, 0] and hi >= rng[j, 1]) or rng[j, 0] == rng[j, 1]:
                continue
            lower = None if lo <= rng[j, 0] else float(lo * sd[j] + mu[j])
            upper = None if hi >= rng[j, 1] else float(hi * sd[j] + mu[j])
            conditions.append(Condition(j, str(names[j]), lower, upper))
        return Rule(tuple(conditions))
