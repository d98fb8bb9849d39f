"""PPO's building blocks as pure tensor functions (Schulman et al., 2017, arXiv:1707.06347; GAE:
Schulman et al., 2016, arXiv:1506.02438), in the form the rl_games configs used by SAPG (arXiv:2407.20230)
run them: clipped surrogate, clipped value loss, bounds loss on the action mean, KL-adaptive learning rate.
"""

from __future__ import annotations

import math

import torch

from icml24.rl import _checks

__all__ = [
    "gae",
    "clipped_surrogate_loss",
    "clipped_value_loss",
    "bounds_loss",
    "gaussian_log_prob",
    "gaussian_entropy",
    "gaussian_kl",
    "normalize",
    "RunningMeanStd",
    "KLAdaptiveLR",
]

_LOG_2PI = math.log(2 * math.pi)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    dones: torch.Tensor,
    *,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over a ``[T, N]`` rollout; returns ``(advantages, returns)``.

    ``next_values[t]`` is V of the *true* next state of step t: for an episode that ended at t that is the
    final observation, not the first observation of the next episode. Two masks keep the two reasons an
    episode ends apart (GAE, eq. 16, with the time-limit correction of Pardo et al., 2018):

        delta_t = r_t + gamma (1 - terminated_t) V(s'_t) - V(s_t)        # bootstrap unless a true terminal
        A_t     = delta_t + gamma lam (1 - done_t) A_{t+1}               # never chain across an episode end

    so a truncated step still bootstraps from V(s'_t) while a terminated one does not. NaN entries are
    not looked for (this runs every iteration): they propagate to the advantages.
    """
    for name, x in (("rewards", rewards), ("values", values), ("next_values", next_values),
                    ("terminated", terminated), ("dones", dones)):  # fmt: skip
        _checks.tensor(name, x)
    gamma = _checks.real("gamma", gamma, low=0.0, high=1.0)
    lam = _checks.real("lam", lam, low=0.0, high=1.0)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must be a [T, N] tensor, got shape {tuple(rewards.shape)}")
    if not (rewards.shape == values.shape == next_values.shape == terminated.shape == dones.shape):
        raise ValueError(
            "rewards, values, next_values, terminated and dones must share the [T, N] shape, got "
            f"{[tuple(x.shape) for x in (rewards, values, next_values, terminated, dones)]}"
        )
    not_term = 1.0 - terminated.to(values.dtype)
    not_done = 1.0 - dones.to(values.dtype)
    deltas = rewards + gamma * not_term * next_values - values
    advantages = torch.empty_like(values)
    last = torch.zeros_like(values[0])
    for t in range(values.shape[0] - 1, -1, -1):
        last = deltas[t] + gamma * lam * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


def clipped_surrogate_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, clip: float
) -> torch.Tensor:
    """Per-sample PPO policy loss ``-min(rho A, clip(rho, 1 - eps, 1 + eps) A)``, rho = pi / mu (eq. 7).

    ``old_log_prob`` is the behaviour policy's log-probability: for SAPG's off-policy samples it is the
    follower that acted, which makes rho the importance-sampling ratio pi_leader / pi_follower. Tensor entries
    are not checked for NaN (a per-minibatch hot path; NaN propagates to the loss, as in ``torch.nn`` losses).
    """
    for name, x in (("log_prob", log_prob), ("old_log_prob", old_log_prob), ("advantages", advantages)):
        _checks.tensor(name, x)
    clip = _checks.real("clip", clip, low=0.0, low_open=True)
    ratio = torch.exp(log_prob - old_log_prob)
    return torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip))


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float | None
) -> torch.Tensor:
    """Per-sample value loss ``max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)`` (rl_games).

    ``clip=None`` gives the plain squared error. Tensor entries are not checked for NaN (hot path)."""
    for name, x in (("values", values), ("old_values", old_values), ("returns", returns)):
        _checks.tensor(name, x)
    if clip is not None:
        clip = _checks.real("clip", clip, low=0.0, low_open=True)
    unclipped = (values - returns) ** 2
    if clip is None:
        return unclipped
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    return torch.max(unclipped, (clipped - returns) ** 2)


def bounds_loss(mean: torch.Tensor, bound: float = 1.1) -> torch.Tensor:
    """Per-sample soft penalty on action means outside ``[-bound, bound]`` (rl_games' ``bounds_loss``)."""
    _checks.tensor("mean", mean)
    bound = _checks.real("bound", bound, low=0.0)
    return (torch.clamp(mean - bound, min=0.0) ** 2 + torch.clamp(-mean - bound, min=0.0) ** 2).sum(-1)


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log-density of a diagonal Gaussian, summed over the action dimensions (NaN entries propagate)."""
    for name, x in (("actions", actions), ("mean", mean), ("log_std", log_std)):
        _checks.tensor(name, x)
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z**2 - log_std - 0.5 * _LOG_2PI).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian, summed over the action dimensions (NaN entries propagate)."""
    _checks.tensor("log_std", log_std)
    return (log_std + 0.5 * (1.0 + _LOG_2PI)).sum(-1)


def gaussian_kl(
    mean_p: torch.Tensor, log_std_p: torch.Tensor, mean_q: torch.Tensor, log_std_q: torch.Tensor
) -> torch.Tensor:
    """KL(p || q) of diagonal Gaussians, summed over the action dimensions (NaN entries propagate)."""
    for name, x in (("mean_p", mean_p), ("log_std_p", log_std_p), ("mean_q", mean_q), ("log_std_q", log_std_q)):
        _checks.tensor(name, x)
    var_p, var_q = torch.exp(2 * log_std_p), torch.exp(2 * log_std_q)
    return (log_std_q - log_std_p + (var_p + (mean_p - mean_q) ** 2) / (2 * var_q) - 0.5).sum(-1)


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` over all entries (advantage normalisation; NaN entries propagate)."""
    _checks.tensor("x", x)
    eps = _checks.real("eps", eps, low=0.0)
    if x.numel() < 2:
        return x - x.mean()
    return (x - x.mean()) / (x.std() + eps)


class RunningMeanStd:
    """Running mean and variance by the parallel-batch formula (Chan et al.), for observation normalisation."""

    def __init__(self, shape: tuple[int, ...], *, device: str | torch.device = "cpu", clip: float = 5.0) -> None:
        if not isinstance(shape, tuple) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape
        ):
            raise TypeError(f"shape must be a tuple of positive ints, got {shape!r}")
        clip = _checks.real("clip", clip, low=0.0, low_open=True)
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = 1e-4
        self.clip = clip

    def update(self, x: torch.Tensor) -> None:
        """Fold the rows of ``x`` (``[..., *shape]``) into the statistics; NaN/inf rows are refused (they would
        poison every later normalisation)."""
        _checks.finite_tensor("x", x)
        if tuple(x.shape[x.ndim - len(self.mean.shape):]) != tuple(self.mean.shape) or x.numel() == 0:
            raise ValueError(f"x must have trailing shape {tuple(self.mean.shape)}, got {tuple(x.shape)}")
        x = x.reshape(-1, *self.mean.shape).to(torch.float64)
        b_mean, b_var, b_count = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.var = m2 / total
        self.count = total

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``clamp((x - mean) / sqrt(var + 1e-8), -clip, clip)`` with the current statistics."""
        z = (x - self.mean.to(x.dtype)) / torch.sqrt(self.var.to(x.dtype) + 1e-8)
        return torch.clamp(z, -self.clip, self.clip)

    __call__ = normalize


class KLAdaptiveLR:
    """rl_games' adaptive schedule around a ``torch.optim`` optimizer.

    After each epoch, with KL the mean KL(old || new) of the epoch's minibatches and threshold kl*:
    ``lr /= 1.5`` if KL > 2 kl*, ``lr *= 1.5`` if KL < kl* / 2, clamped to ``[lr_min, lr_max]``.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        kl_threshold: float = 0.016,
        lr_min: float = 1e-6,
        lr_max: float = 1e-2,
        factor: float = 1.5,
    ) -> None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        kl_threshold = _checks.real("kl_threshold", kl_threshold, low=0.0, low_open=True)
        factor = _checks.real("factor", factor, low=1.0, low_open=True)
        lr_min = _checks.real("lr_min", lr_min, low=0.0, low_open=True)
        lr_max = _checks.real("lr_max", lr_max, low=lr_min)
        self.optimizer = optimizer
        self.kl_threshold, self.lr_min, self.lr_max, self.factor = kl_threshold, lr_min, lr_max, factor

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def step(self, kl: float) -> float:
        """Apply the rule to this epoch's mean ``kl`` and return the new learning rate."""
        kl = _checks.real("kl", kl)  # a rounding-negative KL counts as below the threshold
        lr = self.lr
        if kl > 2.0 * self.kl_threshold:
            lr = max(lr / self.factor, self.lr_min)
        elif kl < 0.5 * self.kl_threshold:
            lr = min(lr * self.factor, self.lr_max)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr
