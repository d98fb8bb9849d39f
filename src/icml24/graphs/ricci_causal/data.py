"""Semi-synthetic networked treatment data and the error metrics of networked causal inference.

Farzam, Tannenbaum, Sapiro, ICML 2024 (PMLR 235:13086-13108) evaluate GNN effect estimators on semi-synthetic
networked data in the style of NetDeconf (Guo, Li, Liu, WSDM 2020): the network is real, confounders are latent,
treatment and outcome depend on a unit's own confounders and on its neighbours'. The benchmark graphs (BlogCatalog,
Flickr) are not available offline; this generator takes any graph and draws (notes Sec. 6):

    z_i ~ N(0, I_k),  x_i = z_i W + noise_x * eps_i                          (covariates, W fixed per draw)
    p_i = sigmoid(kappa_self * z_i.v + kappa_nbr * mean_{j~i} z_j.v)          (propensity: network confounding)
    y_i(t) = f(z_i) + g(mean_{j~i} z_j) + t * tau(z_i) + noise_y * eta_i      (potential outcomes)

with smooth nonlinear ``f(z) = sin(z.a) + 0.5 (z.b)``, ``g(m) = 2 m.c`` and a heterogeneous effect
``tau(z) = 1 + tanh(z.d)``; ``a, b, c, d, v`` are unit vectors drawn per seed. Errors: the precision in estimating
heterogeneous effects ``PEHE = sqrt(mean_i (tau_hat_i - tau_i)^2)`` and ``eps_ATE = |mean tau_hat - mean tau|``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml24.graphs.ricci_causal.curvature import as_edge_array, float_array

__all__ = ["NetworkedTreatmentData", "ate_error", "pehe", "simulate_networked_treatment", "tercile_pehe"]


@dataclass(frozen=True)
class NetworkedTreatmentData:
    """One draw of the semi-synthetic data on a fixed graph (all arrays indexed by node).

    Attributes:
        x: ``(n, covariate_dim)`` observed covariates.
        t: ``(n,)`` treatments in {0, 1}.
        y: ``(n,)`` factual outcomes ``y_i(t_i)``.
        mu0, mu1: ``(n,)`` noiseless potential outcomes; ``tau = mu1 - mu0`` is the individual effect.
        propensity: ``(n,)`` the true ``P(t_i = 1 | z)``.
        z: ``(n, latent_dim)`` the latent confounders (hidden from the estimator).
        edges: ``(E, 2)`` the undirected edges.
    """

    x: np.ndarray
    t: np.ndarray
    y: np.ndarray
    mu0: np.ndarray
    mu1: np.ndarray
    propensity: np.ndarray
    z: np.ndarray
    edges: np.ndarray

    @property
    def tau(self) -> np.ndarray:
        return self.mu1 - self.mu0

    @property
    def num_nodes(self) -> int:
        return len(self.t)


def _neighbour_mean(edges: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    """Mean of ``values`` over each node's neighbours (0 for an isolated node)."""
    out = np.zeros_like(values, dtype=float)
    np.add.at(out, edges[:, 0], values[edges[:, 1]])
    np.add.at(out, edges[:, 1], values[edges[:, 0]])
    deg = np.bincount(edges.ravel(), minlength=n).astype(float)
    return out / np.maximum(deg, 1.0).reshape((-1,) + (1,) * (values.ndim - 1))


def _unit(rng: np.random.Generator, k: int) -> np.ndarray:
    v = rng.standard_normal(k)
    return v / np.linalg.norm(v)


def _check_nonneg(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name}: expected a finite non-negative number, got {value!r}")
    return float(value)


def _check_dim(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def simulate_networked_treatment(
    graph,
    *,
    num_nodes: int | None = None,
    latent_dim: int = 8,
    covariate_dim: int = 20,
    kappa_self: float = 1.0,
    kappa_nbr: float = 1.0,
    noise_x: float = 0.1,
    noise_y: float = 0.5,
    seed: int = 0,
) -> NetworkedTreatmentData:
    """Draw the NetDeconf-style semi-synthetic data of the module docstring on ``graph``.

    ``kappa_nbr = 0`` removes the network confounding (treatment then depends on a unit's own confounders only).
    """
    edges, n = as_edge_array(graph, num_nodes)
    k = _check_dim("latent_dim", latent_dim)
    d = _check_dim("covariate_dim", covariate_dim)
    kappa_self = _check_nonneg("kappa_self", kappa_self)
    kappa_nbr = _check_nonneg("kappa_nbr", kappa_nbr)
    noise_x = _check_nonneg("noise_x", noise_x)
    noise_y = _check_nonneg("noise_y", noise_y)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected a non-negative int, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    a, b, c, dd, v = (_unit(rng, k) for _ in range(5))
    weight = rng.standard_normal((k, d)) / np.sqrt(k)
    z = rng.standard_normal((n, k))
    x = z @ weight + noise_x * rng.standard_normal((n, d))
    z_bar = _neighbour_mean(edges, n, z)
    logit = kappa_self * (z @ v) + kappa_nbr * (z_bar @ v)
    propensity = 1.0 / (1.0 + np.exp(-logit))
    t = (rng.random(n) < propensity).astype(np.int64)
    base = np.sin(z @ a) + 0.5 * (z @ b) + 2.0 * (z_bar @ c)
    tau = 1.0 + np.tanh(z @ dd)
    mu0, mu1 = base, base + tau
    y = np.where(t == 1, mu1, mu0) + noise_y * rng.standard_normal(n)
    return NetworkedTreatmentData(x.astype(np.float32), t, y, mu0, mu1, propensity, z, edges)


def _pair(tau_hat, tau) -> tuple[np.ndarray, np.ndarray]:
    a = float_array("tau_hat", tau_hat)
    b = float_array("tau", tau)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"tau_hat: expected the shape of tau {b.shape} (non-empty), got {a.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("tau_hat and tau must be finite")
    return a, b


def pehe(tau_hat, tau) -> float:
    """``sqrt(mean_i (tau_hat_i - tau_i)^2)``: the precision in estimating heterogeneous effects (Hill 2011)."""
    a, b = _pair(tau_hat, tau)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def ate_error(tau_hat, tau) -> float:
    """``|mean tau_hat - mean tau|``: the error of the average treatment effect."""
    a, b = _pair(tau_hat, tau)
    return float(abs(a.mean() - b.mean()))


def tercile_pehe(curvature, tau_hat, tau) -> tuple[float, float, float]:
    """PEHE of the nodes in the lowest, middle and highest tercile of ``curvature`` (ties split by node order)."""
    a, b = _pair(tau_hat, tau)
    kappa = float_array("curvature", curvature)
    if kappa.shape != a.shape:
        raise ValueError(f"curvature: expected shape {a.shape}, one per node, got {kappa.shape}")
    if not np.all(np.isfinite(kappa)):
        raise ValueError("curvature: must be finite")
    if a.size < 3:
        raise ValueError(f"tau_hat: tercile PEHE needs at least 3 nodes, got {a.size}")
    groups = np.array_split(np.argsort(kappa, kind="stable"), 3)
    return tuple(pehe(a[g], b[g]) for g in groups)  # type: ignore[return-value]
