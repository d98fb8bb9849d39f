"""Causal action influence (CAI) from a factored Gaussian world model (CAIAC, ICML 2024, section 4.1).

Armengol Urpí, Bagatella, Vlastelica, Martius, "Causal Action Influence Aware Counterfactual Data Augmentation",
ICML 2024 (arXiv:2405.18917). The state is split into entities ``s = (s^1, ..., s^K)``. A world model
``p(s'^j | s, a) = N(mu_j(s, a), diag sigma_j^2(s, a))`` (one head per entity, Gaussian NLL) gives the
state-conditioned mutual information between the action and each entity's next state (section 4.1, after Seitzer
et al., 2021, "Causal influence detection"):

    C^j(s) = I(S'^j ; A | S = s) = E_{a ~ pi}[ KL( p(s'^j | s, a) || p(s'^j | s) ) ],
    p(s'^j | s) ~= (1/m) sum_k p(s'^j | s, a_k),        a_k ~ U([-1, 1]^|A|),

with ``m = 64`` actions, the same samples for the outer expectation and the mixture (the official configs'
``reuse_action_samples``). The KL of a Gaussian to a Gaussian mixture has no closed form; as in the official
code (``kl_torch.kl_div_mixture_app``, after Durrieu et al., 2012) it is the mean of the variational
approximation ``log m - logsumexp_k(-KL(N || N_k))`` and the product approximation
``log m - H(N) - logsumexp_k log Z(N, N_k)`` (clamped at 0), where ``Z`` is the normalising constant of the
product of two Gaussians. An entity whose C^j is below a threshold is *uncontrolled* in that state (section 4.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from icml24.rl import _checks
from icml24.rl.value.networks import mlp

__all__ = [
    "FactoredGaussianWorldModel",
    "WorldModelConfig",
    "causal_action_influence",
    "gaussian_kl",
    "kl_gaussian_to_mixture",
    "smooth_scores",
    "train_world_model",
    "uncontrolled_mask",
]

LOG_2PI = math.log(2.0 * math.pi)


def _tensor(name: str, x: Any) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.as_tensor(x, dtype=torch.float32)
    t = _checks.finite_tensor(name, x)
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
    return t


def gaussian_kl(m1: torch.Tensor, v1: torch.Tensor, m2: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
    """``KL(N(m1, diag v1) || N(m2, diag v2))`` over the last dimension (broadcasting)."""
    for name, t in (("m1", m1), ("v1", v1), ("m2", m2), ("v2", v2)):
        _tensor(name, t)
    if bool((v1 <= 0).any()) or bool((v2 <= 0).any()):
        raise ValueError("v1 and v2 must be positive variances")
    return 0.5 * ((v1 + (m2 - m1) ** 2) / v2 + torch.log(v2) - torch.log(v1) - 1.0).sum(-1)


def kl_gaussian_to_mixture(m: torch.Tensor, v: torch.Tensor, mix_m: torch.Tensor, mix_v: torch.Tensor) -> torch.Tensor:
    """``KL(N(m, v) || (1/M) sum_k N(mix_m_k, mix_v_k))``: mean of the variational and product approximations.

    Shapes: ``m, v (..., n, d)``; ``mix_m, mix_v (..., M, d)``; result ``(..., n)``. With one component
    (``M = 1``) the variational approximation is the exact Gaussian KL; when every component equals ``N(m, v)``
    both approximations are 0 (the product one through its clamp at 0), so the result is 0.
    """
    for name, t in (("m", m), ("v", v), ("mix_m", mix_m), ("mix_v", mix_v)):
        _tensor(name, t)
    if m.shape != v.shape or mix_m.shape != mix_v.shape or m.shape[-1] != mix_m.shape[-1]:
        raise ValueError(f"m, v must share a shape and end in the dimension of mix_m, got {tuple(m.shape)}, "
                         f"{tuple(v.shape)}, {tuple(mix_m.shape)}, {tuple(mix_v.shape)}")  # fmt: skip
    if bool((v <= 0).any()) or bool((mix_v <= 0).any()):
        raise ValueError("v and mix_v must be positive variances")
    log_m = math.log(mix_m.shape[-2])
    m1, v1 = m.unsqueeze(-2), v.unsqueeze(-2)  # (..., n, 1, d)
    m2, v2 = mix_m.unsqueeze(-3), mix_v.unsqueeze(-3)  # (..., 1, M, d)
    inner = 0.5 * ((v1 + (m2 - m1) ** 2) / v2 + torch.log(v2) - torch.log(v1) - 1.0).sum(-1)
    kl_var = log_m - torch.logsumexp(-inner, dim=-1)
    d = m.shape[-1]
    vs = v1 + v2
    log_z = -0.5 * (d * LOG_2PI + torch.log(vs).sum(-1) + ((m1 - m2) ** 2 / vs).sum(-1))
    entropy = 0.5 * (d * (1.0 + LOG_2PI) + torch.log(v).sum(-1))
    kl_prod = (log_m - entropy - torch.logsumexp(log_z, dim=-1)).clamp_min(0.0)
    return 0.5 * (kl_var + kl_prod)


@dataclass(frozen=True)
class WorldModelConfig:
    """World-model training (official Fetch config where it fits a CPU: 3 x 256 MLPs, Adam 1e-4, batch 500)."""

    hidden: tuple[int, ...] = (256, 256, 256)
    """Hidden widths of each entity's MLP."""
    lr: float = 1e-4
    """Adam learning rate."""
    batch_size: int = 500
    """Minibatch size."""
    steps: int = 100_000
    """Gradient steps (the paper's 100k; the reproduction's presets use far fewer)."""
    min_var: float = 1e-8
    """Lower clamp of the predicted variances (official: 1e-8)."""
    max_var: float = 200.0
    """Upper clamp of the predicted variances (official: 200)."""

    def __post_init__(self) -> None:
        if not isinstance(self.hidden, tuple) or not self.hidden or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in self.hidden
        ):
            raise ValueError(f"hidden must be a non-empty tuple of positive ints, got {self.hidden!r}")
        _checks.real("lr", self.lr, low=0.0, low_open=True)
        _checks.integer("batch_size", self.batch_size, low=1)
        _checks.integer("steps", self.steps, low=0)
        _checks.real("min_var", self.min_var, low=0.0, low_open=True)
        _checks.real("max_var", self.max_var, low=self.min_var, low_open=True)


class FactoredGaussianWorldModel(nn.Module):
    """``p(s'^j | s, a)`` for every entity ``j``: a diagonal Gaussian over the entity's next sub-state.

    One MLP per entity takes the whole state and the action (the official ``FactorizedMLP``) and outputs the mean
    of the *change* ``s'^j - s^j`` and its log-variance. ``forward(states, actions)`` returns two lists (means,
    variances) of ``(B, d_j)`` tensors for the next sub-states.
    """

    def __init__(self, *, entity_dims: tuple[int, ...], action_dim: int,
                 config: WorldModelConfig = WorldModelConfig()) -> None:  # noqa: B008  # fmt: skip
        super().__init__()
        if not isinstance(entity_dims, tuple) or not entity_dims or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in entity_dims
        ):
            raise ValueError(f"entity_dims must be a non-empty tuple of positive ints, got {entity_dims!r}")
        if not isinstance(config, WorldModelConfig):
            raise TypeError(f"config must be a WorldModelConfig, got {type(config).__name__}")
        self.entity_dims = entity_dims
        self.action_dim = _checks.integer("action_dim", action_dim, low=1)
        self.config = config
        self.state_dim = sum(entity_dims)
        self.offsets = tuple(int(x) for x in np.cumsum((0, *entity_dims)))
        self.heads = nn.ModuleList(
            mlp(self.state_dim + self.action_dim, config.hidden, 2 * d) for d in entity_dims
        )

    def forward(self, states: torch.Tensor, actions: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        if states.ndim != 2 or states.shape[1] != self.state_dim:
            raise ValueError(f"states must have shape (B, {self.state_dim}), got {tuple(states.shape)}")
        if actions.shape != (states.shape[0], self.action_dim):
            raise ValueError(f"actions must have shape ({states.shape[0]}, {self.action_dim}), got {tuple(actions.shape)}")
        x = torch.cat([states, actions], dim=1)
        means, variances = [], []
        lo, hi = math.log(self.config.min_var), math.log(self.config.max_var)
        for j, head in enumerate(self.heads):
            out = head(x)
            d = self.entity_dims[j]
            means.append(states[:, self.offsets[j] : self.offsets[j + 1]] + out[:, :d])
            variances.append(torch.exp(out[:, d:].clamp(lo, hi)))
        return means, variances

    def nll(self, states: torch.Tensor, actions: torch.Tensor, next_states: torch.Tensor) -> torch.Tensor:
        """Mean Gaussian negative log-likelihood of the next states, summed over entities and dimensions."""
        means, variances = self(states, actions)
        total = states.new_zeros(())
        for j, (mu, var) in enumerate(zip(means, variances, strict=True)):
            target = next_states[:, self.offsets[j] : self.offsets[j + 1]]
            total = total + 0.5 * (torch.log(var) + (target - mu) ** 2 / var + LOG_2PI).sum(-1).mean()
        return total


def train_world_model(model: FactoredGaussianWorldModel, states: Any, actions: Any, next_states: Any, *,
                      seed: int, steps: int | None = None) -> list[float]:  # fmt: skip
    """Fit ``model`` by Adam on the Gaussian NLL (section 4.1); returns the loss every 100 steps."""
    if not isinstance(model, FactoredGaussianWorldModel):
        raise TypeError(f"model must be a FactoredGaussianWorldModel, got {type(model).__name__}")
    s, a, s2 = _tensor("states", states), _tensor("actions", actions), _tensor("next_states", next_states)
    if s.ndim != 2 or s2.shape != s.shape or a.ndim != 2 or len(a) != len(s):
        raise ValueError(f"states, next_states (N, d) and actions (N, k) must agree, got {tuple(s.shape)}, "
                         f"{tuple(s2.shape)}, {tuple(a.shape)}")  # fmt: skip
    seed = _checks.integer("seed", seed, low=0)
    n_steps = model.config.steps if steps is None else _checks.integer("steps", steps, low=0)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=model.config.lr)
    losses = []
    model.train()
    for step in range(n_steps):
        idx = torch.randint(len(s), (min(model.config.batch_size, len(s)),), generator=g)
        loss = model.nll(s[idx], a[idx], s2[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            losses.append(float(loss.item()))
    model.eval()
    return losses


@torch.no_grad()
def causal_action_influence(model: FactoredGaussianWorldModel, states: Any, *, n_action_samples: int = 64,
                            seed: int = 0, batch_size: int = 2048) -> np.ndarray:  # fmt: skip
    """CAI scores ``C^j(s)`` ``(N, K)`` of every entity in every state (section 4.1, the estimator above).

    Actions are uniform in ``[-1, 1]^|A|`` (the action range the model was trained on), the same
    ``n_action_samples`` for the outer expectation and for the mixture ``p(s'^j | s)``.
    """
    if not isinstance(model, FactoredGaussianWorldModel):
        raise TypeError(f"model must be a FactoredGaussianWorldModel, got {type(model).__name__}")
    s = _tensor("states", states)
    if s.ndim != 2 or s.shape[1] != model.state_dim:
        raise ValueError(f"states must have shape (N, {model.state_dim}), got {tuple(s.shape)}")
    m = _checks.integer("n_action_samples", n_action_samples, low=1)
    seed = _checks.integer("seed", seed, low=0)
    batch_size = _checks.integer("batch_size", batch_size, low=1)
    g = torch.Generator().manual_seed(seed)
    model.eval()
    out = np.empty((len(s), len(model.entity_dims)))
    for lo in range(0, len(s), batch_size):
        sb = s[lo : lo + batch_size]
        B = len(sb)
        acts = torch.rand((B, m, model.action_dim), generator=g) * 2.0 - 1.0
        rep = sb.unsqueeze(1).expand(B, m, sb.shape[1]).reshape(B * m, -1)
        means, variances = model(rep, acts.reshape(B * m, -1))
        for j, (mu, var) in enumerate(zip(means, variances, strict=True)):
            mu, var = mu.reshape(B, m, -1), var.reshape(B, m, -1)
            out[lo : lo + B, j] = kl_gaussian_to_mixture(mu, var, mu, var).mean(-1).numpy()
    return out


def _scores(scores: Any) -> np.ndarray:
    if isinstance(scores, (str, bytes)) or scores is None:
        raise TypeError(f"scores must be a numeric array of CAI scores, got {type(scores).__name__}")
    try:
        x = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError("scores must be a numeric array of CAI scores") from exc
    if x.ndim < 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("scores must be a non-empty array of finite CAI scores")
    return x


def smooth_scores(scores: Any, kernel: int) -> np.ndarray:
    """Moving average of CAI scores along each episode ``(E, T, K)`` (official ``smooth_fct``: kernel 3 in Fetch).

    A centred window of ``kernel`` steps, shrunk at the episode's ends; ``kernel = 1`` returns the scores.
    """
    x = _scores(scores)
    if x.ndim != 3:
        raise ValueError(f"scores must be an (episodes, steps, entities) array, got shape {x.shape}")
    kernel = _checks.integer("kernel", kernel, low=1)
    if kernel == 1:
        return x.copy()
    T = x.shape[1]
    c = np.concatenate([np.zeros((x.shape[0], 1, x.shape[2])), np.cumsum(x, axis=1)], axis=1)
    lo = np.clip(np.arange(T) - (kernel - 1) // 2, 0, T)
    hi = np.clip(np.arange(T) + kernel // 2 + 1, 0, T)
    return (c[:, hi] - c[:, lo]) / (hi - lo)[None, :, None]


def uncontrolled_mask(scores: Any, threshold: float) -> np.ndarray:
    """``C^j(s) < threshold``: the entity is not under the agent's control in that state (section 4.2)."""
    x = _scores(scores)
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and threshold == math.inf:
        return np.ones(x.shape, dtype=bool)
    threshold = _checks.real("threshold", threshold, low=0.0)
    return x < threshold
