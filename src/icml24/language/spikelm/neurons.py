"""Spiking neurons of SpikeLM (Xing et al., ICML 2024, arXiv:2406.03287, Section 3) and its baselines.

All neurons take a tensor whose leading axis folds ``T`` time steps over the batch, ``(T * B, ...)`` in
time-major order (row ``t * B + b``), and return spikes of the same shape. The input is the same real
value replicated over the ``T`` steps (SpikeLM replicates the hidden states at the encoder input), so the
neuron is what turns one activation into a spike train.

:class:`ElasticBiSpiking` (the paper's elastic bi-spiking, as the official ``spiking.py`` implements it):

* bi-directional, elastic amplitude: ``s_t = alpha_t * clamp(round(u_t / alpha_t), -1, 1)``, a spike of
  ``-alpha_t``, ``0`` or ``+alpha_t`` (threshold ``alpha_t / 2``); ``alpha_t`` is one scalar per layer and
  time step, so ``W s_t = alpha_t * (sum of the columns of W with s = +1 - those with s = -1)``: the
  matrix product stays accumulate-only (the amplitude folds into the weights).
* elastic frequency: ``alpha_t`` is initialised from the data on the first forward pass,
  ``alpha_t = k * mean|u_t|`` with ``k = 2`` (the LSQ initialisation with ``Qp = 1``), then frozen. The
  threshold follows the distribution of the membrane potential, and the factor ``k``
  (``alpha_init_factor``) is the firing-rate knob: a larger ``k`` raises the threshold and lowers the rate.
* membrane: ``u_1 = x_1``, ``u_t = 0.25 * (alpha_{t-1} - s_{t-1}) * u_{t-1} + x_t`` (the code's update: no
  carry after a ``+1`` spike, a carry of ``0.25 alpha u`` after silence and ``0.5 alpha u`` after ``-1``;
  the factor is detached). ``dynamics=False`` quantises each step on its own (SpikeLM's K and V spikes).
* gradient: straight-through, ``ds/du = 1`` where ``|u / alpha| <= 1`` and 0 outside (the clipped STE of
  LSQ, Esser et al. 2020); with ``learn_alpha`` the LSQ gradient of ``alpha`` is used too (the code
  computes it but freezes ``alpha``).

``amplitude="fixed"`` keeps ``alpha_t = 1``: the fixed-amplitude ternary baseline ({-1, 0, +1} spikes,
threshold 0.5, the same membrane).

:class:`BinaryLIF`: the standard leaky integrate-and-fire neuron with {0, 1} spikes (the prior spiking
LMs' neuron), ``u_t = beta * u_{t-1} * (1 - s_{t-1}) + x_t`` (reset to zero) or
``beta * u_{t-1} + x_t - theta * s_{t-1}`` (reset by subtraction), ``s_t = H(u_t - theta)``, with the
arctan surrogate gradient ``ds/du = (a / 2) / (1 + (pi a (u - theta) / 2)^2)`` (Fang et al. 2021), the
same dynamics and surrogate as ``snntorch.Leaky`` (a test checks both against it).

Every neuron counts its non-zero spikes (:attr:`SpikingNeuron.spike_count`) while
:attr:`SpikingNeuron.recording` is on, for firing rates and the AC/MAC energy estimate.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

__all__ = ["BinaryLIF", "ElasticBiSpiking", "SpikingNeuron", "atan_spike", "elastic_bi_spike"]


def _check_int(name: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def _check_positive(name: str, value, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


class _ElasticBiSpikeFn(torch.autograd.Function):
    """``alpha * clamp(round(u / alpha), -1, 1)`` with the clipped straight-through gradient of LSQ."""

    @staticmethod
    def forward(ctx, u: torch.Tensor, alpha: torch.Tensor, grad_scale: float) -> torch.Tensor:
        ctx.save_for_backward(u, alpha)
        ctx.grad_scale = grad_scale
        return torch.clamp(torch.round(u / alpha), -1.0, 1.0) * alpha

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        u, alpha = ctx.saved_tensors
        q = u / alpha
        inside = (q >= -1.0) & (q <= 1.0)
        grad_u = grad_out * inside.to(grad_out.dtype)
        grad_alpha = None
        if ctx.needs_input_grad[1]:
            # LSQ step-size gradient (Esser et al. 2020, eq. 3): round(q) - q inside, +-1 outside.
            d = torch.where(inside, torch.round(q) - q, torch.sign(q))
            grad_alpha = (d * grad_out).sum().reshape(alpha.shape) * ctx.grad_scale
        return grad_u, grad_alpha, None


def elastic_bi_spike(u: torch.Tensor, alpha: torch.Tensor | float) -> torch.Tensor:
    """One step of elastic bi-spiking: ``alpha * clamp(round(u / alpha), -1, 1)`` (values ``-alpha, 0, alpha``).

    Gradient: ``1`` for ``u`` where ``|u / alpha| <= 1``, else ``0``; LSQ's gradient for a tensor ``alpha``
    that requires grad (scaled by ``1 / sqrt(u.numel())``).
    """
    if not isinstance(u, torch.Tensor) or not u.is_floating_point():
        raise TypeError(f"u must be a floating-point torch.Tensor, got {type(u).__name__}")
    if not bool(torch.isfinite(u).all()):
        raise ValueError("u must be finite (it holds NaN or inf)")
    if not isinstance(alpha, torch.Tensor):
        alpha = torch.tensor(_check_positive("alpha", alpha), dtype=u.dtype, device=u.device)
    if alpha.numel() != 1 or not bool(torch.all(alpha > 0)):
        raise ValueError(f"alpha must be one positive scalar, got shape {tuple(alpha.shape)}")
    return _ElasticBiSpikeFn.apply(u, alpha.to(u.dtype), 1.0 / math.sqrt(max(1, u.numel())))


class _ATanSpikeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v: torch.Tensor, slope: float) -> torch.Tensor:
        ctx.save_for_backward(v)
        ctx.slope = slope
        return (v > 0).to(v.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        (v,) = ctx.saved_tensors
        a = ctx.slope
        return grad_out * (a / 2) / (1 + (math.pi / 2 * a * v) ** 2), None


def atan_spike(v: torch.Tensor, slope: float = 2.0) -> torch.Tensor:
    """Heaviside ``H(v) = [v > 0]`` forward, arctan surrogate ``(a/2) / (1 + (pi a v / 2)^2)`` backward."""
    if not isinstance(v, torch.Tensor) or not v.is_floating_point():
        raise TypeError(f"v must be a floating-point torch.Tensor, got {type(v).__name__}")
    if not bool(torch.isfinite(v).all()):
        raise ValueError("v must be finite (it holds NaN or inf)")
    return _ATanSpikeFn.apply(v, _check_positive("slope", slope))


class SpikingNeuron(nn.Module):
    """Base: the ``(T * B, ...)`` layout, spike counting and the firing rate.

    Args:
        time_steps: ``T``, the number of time steps folded into the leading axis.
    """

    def __init__(self, *, time_steps: int = 4) -> None:
        super().__init__()
        self.time_steps = _check_int("time_steps", time_steps)
        self.recording = False
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the spike and element counters."""
        self.spike_count = 0
        self.element_count = 0

    @property
    def firing_rate(self) -> float:
        """Fraction of (neuron, time step) pairs that spiked (non-zero output) while recording."""
        return self.spike_count / self.element_count if self.element_count else math.nan

    def _steps(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"x must be a floating-point torch.Tensor, got {type(x).__name__}")
        if x.dim() < 1 or x.shape[0] % self.time_steps:
            raise ValueError(f"the leading axis of x ({tuple(x.shape)}) must fold time_steps={self.time_steps} "
                             "over the batch")  # fmt: skip
        return x.view(self.time_steps, -1, *x.shape[1:])

    def _record(self, spikes: torch.Tensor) -> None:
        if self.recording:
            self.spike_count += int(torch.count_nonzero(spikes.detach()))
            self.element_count += spikes.numel()


class ElasticBiSpiking(SpikingNeuron):
    """SpikeLM's elastic bi-spiking neuron (see the module docstring for the equations).

    Args:
        time_steps: ``T`` (the paper and code use 4).
        amplitude: ``"elastic"`` (``alpha_t`` from the data, SpikeLM) or ``"fixed"`` (``alpha_t = 1``).
        alpha_init_factor: ``k`` in ``alpha_t = k * mean|u_t|`` (code default 2): the firing-rate knob.
        dynamics: integrate the membrane over time steps (the code's ``SpikeLinear``); ``False`` quantises
            each step alone (the code's K/V spikes).
        learn_alpha: train ``alpha_t`` with the LSQ gradient after its initialisation (the code freezes it).
        decay: the membrane carry factor (0.25 in the code).
    """

    def __init__(
        self,
        *,
        time_steps: int = 4,
        amplitude: Literal["elastic", "fixed"] = "elastic",
        alpha_init_factor: float = 2.0,
        dynamics: bool = True,
        learn_alpha: bool = False,
        decay: float = 0.25,
    ) -> None:
        super().__init__(time_steps=time_steps)
        if amplitude not in ("elastic", "fixed"):
            raise ValueError(f"amplitude must be 'elastic' or 'fixed', got {amplitude!r}")
        for name, flag in (("dynamics", dynamics), ("learn_alpha", learn_alpha)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        if learn_alpha and amplitude == "fixed":
            raise ValueError("learn_alpha needs amplitude='elastic' (a fixed amplitude is not learned)")
        self.amplitude = amplitude
        self.alpha_init_factor = _check_positive("alpha_init_factor", alpha_init_factor)
        self.dynamics = dynamics
        self.decay = _check_positive("decay", decay, allow_zero=True)
        self.alpha = nn.Parameter(torch.ones(self.time_steps), requires_grad=learn_alpha)
        # Fixed amplitude needs no data; elastic waits for the first batch.
        self.register_buffer("initialized", torch.tensor(amplitude == "fixed"))

    def extra_repr(self) -> str:
        return (f"time_steps={self.time_steps}, amplitude={self.amplitude!r}, alpha_init_factor="
                f"{self.alpha_init_factor:g}, dynamics={self.dynamics}")  # fmt: skip

    @torch.no_grad()
    def _initialize(self, t: int, u: torch.Tensor) -> None:
        # LSQ init with Qp = 1: alpha = k * mean|u| (the code's AlphaInit, k = 2), floored away from 0.
        self.alpha[t] = max(self.alpha_init_factor * float(u.abs().mean()), 1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = self._steps(x)
        init = not bool(self.initialized)
        out = []
        u = None
        for t in range(self.time_steps):
            if not self.dynamics or t == 0:
                u = steps[t]
            else:
                prev_alpha = self.alpha[t - 1].detach()
                u = self.decay * (prev_alpha - out[t - 1].detach()) * u + steps[t]
            if init:
                self._initialize(t, u)
            alpha = self.alpha[t].clamp_min(1e-5)
            out.append(_ElasticBiSpikeFn.apply(u, alpha, 1.0 / math.sqrt(max(1, u.numel()))))
        if init:
            self.initialized.fill_(True)
        spikes = torch.stack(out).view_as(x)
        self._record(spikes)
        return spikes


class BinaryLIF(SpikingNeuron):
    """Leaky integrate-and-fire with {0, 1} spikes and the arctan surrogate gradient (``snntorch.Leaky``).

    Args:
        time_steps: ``T``.
        beta: membrane decay in ``[0, 1]``.
        threshold: firing threshold ``theta`` (> 0), or ``"data"``: ``theta = mean|u_1|`` of the first batch,
            then frozen (SpikeLM's data-driven threshold ``alpha_1 / 2`` with ``k = 2``, so that the baseline
            fires from the start at any activation scale).
        reset: ``"zero"`` (hard reset) or ``"subtract"`` (soft reset by ``theta``).
        surrogate_slope: ``a`` of the arctan surrogate (snntorch's default 2).
    """

    def __init__(
        self,
        *,
        time_steps: int = 4,
        beta: float = 0.25,
        threshold: float | Literal["data"] = 1.0,
        reset: Literal["zero", "subtract"] = "zero",
        surrogate_slope: float = 2.0,
    ) -> None:
        super().__init__(time_steps=time_steps)
        self.beta = _check_positive("beta", beta, allow_zero=True)
        if self.beta > 1:
            raise ValueError(f"beta must be in [0, 1], got {beta!r}")
        self.data_threshold = threshold == "data"
        self.threshold = 1.0 if self.data_threshold else _check_positive("threshold", threshold)
        self.register_buffer("initialized", torch.tensor(not self.data_threshold))
        if reset not in ("zero", "subtract"):
            raise ValueError(f"reset must be 'zero' or 'subtract', got {reset!r}")
        self.reset = reset
        self.surrogate_slope = _check_positive("surrogate_slope", surrogate_slope)

    def extra_repr(self) -> str:
        return f"time_steps={self.time_steps}, beta={self.beta:g}, threshold={self.threshold:g}, reset={self.reset!r}"

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "threshold"] = torch.tensor(self.threshold)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        theta = state_dict.pop(prefix + "threshold", None)
        if theta is not None:
            self.threshold = float(theta)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = self._steps(x)
        if not bool(self.initialized):
            self.threshold = max(float(steps[0].detach().abs().mean()), 1e-5)
            self.initialized.fill_(True)
        u = torch.zeros_like(steps[0])
        s = torch.zeros_like(steps[0])
        out = []
        for t in range(self.time_steps):
            fired = s.detach()  # the reset signal is detached, as in snntorch
            if self.reset == "zero":
                u = self.beta * u * (1 - fired) + steps[t]
            else:
                u = self.beta * u + steps[t] - self.threshold * fired
            s = _ATanSpikeFn.apply(u - self.threshold, self.surrogate_slope)
            out.append(s)
        spikes = torch.stack(out).view_as(x)
        self._record(spikes)
        return spikes
