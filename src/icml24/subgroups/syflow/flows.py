"""Target densities for SYFLOW (Sec. 3.1): normalising flows built with zuko.

A one-dimensional target gets a monotonic rational-quadratic spline (Durkan et al. 2019) on a standard-normal
base, with unconditional (free) spline parameters: 8 bins for the synthetic presets, 12 for real data, stacked
``n_layers`` times (the official presets stack two or three for the physics data). A multi-dimensional target
gets zuko's neural spline flow (autoregressive splines), since an element-wise spline would model only the
product of the marginals. Outside ``[-bound, bound]`` the spline is the identity (linear tails).
"""

from __future__ import annotations

import torch
import zuko
from zuko.distributions import DiagNormal
from zuko.flows import Flow, UnconditionalDistribution, UnconditionalTransform
from zuko.transforms import MonotonicRQSTransform


def make_spline_flow(
    n_targets: int = 1, *, bins: int = 8, n_layers: int = 1, bound: float = 6.0, dtype: torch.dtype = torch.float32
) -> Flow:
    """An unconditional normalising flow over ``n_targets``-dimensional targets.

    Args:
        n_targets: dimension ``t`` of the target.
        bins: spline bins per layer.
        n_layers: stacked spline transforms.
        bound: half-width of the spline's domain (identity outside); the targets are standardised.
        dtype: parameter dtype.

    The spline parameters start at zero: equal bin widths and heights, so the flow starts near the identity
    map and its density near the standard normal. That makes the fit deterministic without a seed.
    """
    if isinstance(n_targets, bool) or not isinstance(n_targets, int) or n_targets < 1:
        raise ValueError(f"n_targets must be a positive int, got {n_targets!r}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise ValueError(f"bins must be an int >= 2, got {bins!r}")
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive int, got {n_layers!r}")
    if n_targets > 1:
        flow = zuko.flows.NSF(features=n_targets, bins=bins, transforms=n_layers)
        return flow.to(dtype)
    transforms = []
    for _ in range(n_layers):
        transforms.append(
            UnconditionalTransform(
                MonotonicRQSTransform,
                torch.zeros(1, bins, dtype=dtype),
                torch.zeros(1, bins, dtype=dtype),
                torch.zeros(1, bins - 1, dtype=dtype),
                bound=bound,
            )
        )
    base = UnconditionalDistribution(
        DiagNormal, torch.zeros(1, dtype=dtype), torch.ones(1, dtype=dtype), buffer=True
    )
    return Flow(transforms, base)


def log_density(flow: Flow, y: torch.Tensor) -> torch.Tensor:
    """``log p(y)`` for each row of ``y`` (shape ``(n,)``)."""
    return flow().log_prob(y)


def fit_density(flow: Flow, y: torch.Tensor, *, epochs: int, lr: float = 5e-2) -> list[float]:
    """Maximum-likelihood fit, full batch, Adam (the population flow of Sec. 3.3). Returns the NLL per epoch."""
    from icml24.subgroups.syflow._validation import finite_number, finite_tensor, int_at_least

    finite_tensor("y", y, ndim=2)
    epochs = int_at_least("epochs", epochs, 0)
    lr = finite_number("lr", lr, positive=True)
    optimiser = torch.optim.Adam(flow.parameters(), lr=lr)
    history = []
    for _ in range(epochs):
        optimiser.zero_grad()
        nll = -log_density(flow, y).mean()
        nll.backward()
        optimiser.step()
        history.append(float(nll.detach()))
    return history
