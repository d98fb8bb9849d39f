"""NegUCB's pieces: the hidden state, the feature maps of the kernel, the ridge posterior and the bid pool.

Li, Mu, Qi. *A Contextual Combinatorial Bandit Approach to Negotiation*. ICML 2024,
https://arxiv.org/abs/2407.00567. NegUCB learns the counterpart's acceptance ``g(c, h, b(S))`` by kernel
regression on the joint input ``z = (c, h, b(S))`` (observed context, hidden state, bid encoding) from
full-bandit feedback (one accept/reject per proposal) and proposes ``argmax_S U(S) * clip(mu(z) + beta
sigma(z), 0, 1)``. Kernel ridge regression with regulariser ``lambda`` after data ``(Z, y)``::

    mu(z) = k(z)^T (K + lambda I)^{-1} y,      sigma^2(z) = k(z, z) - k(z)^T (K + lambda I)^{-1} k(z).

With a product of RBF kernels on the three blocks (which is one RBF kernel on the concatenation with a
lengthscale per block), random Fourier features ``phi(z) = sqrt(2/D) cos(W z + u)`` (Rahimi & Recht 2007)
give ``k(z, z') ~ phi(z)^T phi(z')`` and the same posterior in the primal, at ``O(D^2)`` per round instead of
``O(t^2)``::

    A = lambda I + Phi^T Phi,   mu(z) = phi(z)^T A^{-1} Phi^T y,   sigma^2(z) = lambda phi(z)^T A^{-1} phi(z).

:func:`kernel_ridge_posterior` is the exact (dual) form, used to check the features and the GP equivalence.
"""

from __future__ import annotations

import numpy as np

from .._checks import positive_float, positive_int
from .environment import Observation

HIDDEN_DIM = 3


class HiddenState:
    """The recursive hidden-state summary ``h_t`` of the current negotiation, computed from past data only.

    ``h = (has_counter, U(last counter-offer), U(last counter-offer) - U(first counter-offer))``: whether the
    opponent has countered yet, how good its latest counter-offer is for us, and how far it has conceded in
    this negotiation (which tells a Conceder from a Boulware opponent). Reset at every new opponent. The
    paper's learned hidden-state mechanism was not readable to us; this is the notes' minimal version.
    """

    def reset(self, n_trials: int) -> HiddenState:
        self.first_ = np.full(n_trials, np.nan)
        self.state_ = np.zeros((n_trials, HIDDEN_DIM))
        return self

    def update(self, obs: Observation, own_utility: np.ndarray) -> np.ndarray:
        """Fold in ``obs`` (its counter-offer, if any) and return ``h_t``, shape (n_trials, 3)."""
        rows = np.arange(obs.counter.shape[0])
        has = obs.counter >= 0
        u = np.where(has, own_utility[rows, np.maximum(obs.counter, 0)], 0.0)
        self.first_ = np.where(obs.new_episode, np.nan, self.first_)
        self.first_ = np.where(has & np.isnan(self.first_), u, self.first_)
        concession = np.where(has, u - np.nan_to_num(self.first_), 0.0)
        self.state_ = np.stack([has.astype(float), u, concession], axis=1)
        return self.state_


def _finite_array(value: object, name: str, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array, got {type(value).__name__}") from exc
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return arr


def median_lengthscale(points: np.ndarray, max_points: int = 500, seed: int = 0) -> float:
    """The median heuristic: the median pairwise Euclidean distance among (a sample of) ``points``."""
    pts = _finite_array(points, "points", 2)
    max_points = positive_int(max_points, "max_points")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if pts.shape[0] < 2:
        raise ValueError(f"points must have >= 2 rows, got shape {pts.shape}")
    if pts.shape[0] > max_points:
        pts = pts[np.random.default_rng(seed).choice(pts.shape[0], max_points, replace=False)]
    d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    med = float(np.sqrt(np.median(d2[np.triu_indices(pts.shape[0], 1)])))
    return med if med > 0 else 1.0


class RandomFourierFeatures:
    """``phi(z) = sqrt(2/D) cos(z W + u)`` for the RBF kernel with lengthscales ``(state..., bid...)``.

    The bid part ``b(S) W_b`` is computed once for all bids; a round only adds the state part and takes a cosine.
    """

    def __init__(self, n_features: int, lengthscales: np.ndarray, seed: int = 0) -> None:
        self.n_features = positive_int(n_features, "n_features")
        self.lengthscales = _finite_array(lengthscales, "lengthscales", 1)
        if self.lengthscales.size == 0 or (self.lengthscales <= 0).any():
            raise ValueError("lengthscales must be a non-empty array of numbers > 0")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        rng = np.random.default_rng(seed)
        self.weights = rng.standard_normal((self.lengthscales.size, self.n_features)) / self.lengthscales[:, None]
        self.offset = rng.uniform(0, 2 * np.pi, self.n_features)
        self.scale = np.sqrt(2.0 / self.n_features)

    def bind(self, state_dim: int, encodings: np.ndarray) -> RandomFourierFeatures:
        """Precompute the bid projections for a domain's encodings (n_bids, n_base)."""
        if state_dim + encodings.shape[1] != self.lengthscales.size:
            raise ValueError("lengthscales must have one entry per state and encoding dimension")
        self._w_state = self.weights[:state_dim]
        self._bid_proj = encodings @ self.weights[state_dim:] + self.offset
        return self

    @property
    def dim(self) -> int:
        return self.n_features

    def __call__(self, state: np.ndarray, bids: np.ndarray) -> np.ndarray:
        """Features of (state[n], bids[n, m]) for every trial n and candidate m, shape (n, m, D)."""
        return self.scale * np.cos((state @ self._w_state)[:, None, :] + self._bid_proj[bids])


class LinearFeatures:
    """``phi(z) = (1, c, h, b(S))``: the linear model of a C2UCB-style learner under full-bandit feedback."""

    def bind(self, state_dim: int, encodings: np.ndarray) -> LinearFeatures:
        self._state_dim = state_dim
        self._enc = np.concatenate([np.ones((encodings.shape[0], 1)), encodings], axis=1)
        return self

    @property
    def dim(self) -> int:
        return self._state_dim + self._enc.shape[1]

    def __call__(self, state: np.ndarray, bids: np.ndarray) -> np.ndarray:
        n, m = bids.shape
        return np.concatenate([np.broadcast_to(state[:, None, :], (n, m, state.shape[1])), self._enc[bids]], axis=2)


class SumFeatures:
    """Features of the sum of two kernels: the concatenation ``(phi_1(z), phi_2(z))``."""

    def __init__(self, *maps) -> None:
        self.maps = maps

    def bind(self, state_dim: int, encodings: np.ndarray) -> SumFeatures:
        for m in self.maps:
            m.bind(state_dim, encodings)
        return self

    @property
    def dim(self) -> int:
        return sum(m.dim for m in self.maps)

    def __call__(self, state: np.ndarray, bids: np.ndarray) -> np.ndarray:
        return np.concatenate([m(state, bids) for m in self.maps], axis=2)


class RidgePosterior:
    """Per-trial Bayesian ridge regression in feature space, updated by Sherman-Morrison (trials on axis 0).

    ``A = lambda I + Phi^T Phi``; ``mean(phi) = phi^T A^{-1} Phi^T y``; ``sd(phi) = sqrt(lambda phi^T A^{-1} phi)``
    (the kernel posterior standard deviation when ``k = phi^T phi``).
    """

    def __init__(self, n_trials: int, dim: int, lam: float) -> None:
        n_trials = positive_int(n_trials, "n_trials")
        dim = positive_int(dim, "dim")
        self.lam = positive_float(lam, "lam")
        self.a_inv = np.broadcast_to(np.eye(dim) / self.lam, (n_trials, dim, dim)).copy()
        self.b = np.zeros((n_trials, dim))
        self.theta = np.zeros((n_trials, dim))
        self.n_obs = 0

    def mean(self, phi: np.ndarray) -> np.ndarray:
        """Posterior mean for features (n, m, D), shape (n, m)."""
        return np.einsum("nmd,nd->nm", phi, self.theta)

    def sd(self, phi: np.ndarray) -> np.ndarray:
        """Posterior standard deviation for features (n, m, D), shape (n, m)."""
        quad = np.einsum("nmd,nmd->nm", phi @ self.a_inv, phi)
        return np.sqrt(np.maximum(self.lam * quad, 0.0))

    def update(self, phi: np.ndarray, y: np.ndarray) -> None:
        """Add one observation per trial: features (n, D), targets (n,)."""
        av = np.einsum("nij,nj->ni", self.a_inv, phi)
        denom = 1.0 + np.einsum("ni,ni->n", phi, av)
        self.a_inv -= av[:, :, None] * av[:, None, :] / denom[:, None, None]
        self.b += phi * y[:, None]
        self.theta = np.einsum("nij,nj->ni", self.a_inv, self.b)
        self.n_obs += 1


def kernel_ridge_posterior(
    train: np.ndarray, targets: np.ndarray, query: np.ndarray, *, lengthscales: np.ndarray | float, lam: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Exact kernel ridge regression with an RBF kernel: ``(mu(query), sigma(query))`` (notes, Section 3, step 2).

    ``mu`` equals a GP posterior mean with noise variance ``lam`` and ``sigma^2`` is ``k(z,z) - k_t(z)^T (K +
    lam I)^{-1} k_t(z)`` (the GP posterior variance of the latent function, in units of the prior variance 1).
    """
    x = _finite_array(train, "train", 2)
    q = _finite_array(query, "query", 2)
    y = _finite_array(targets, "targets", 1)
    lam = positive_float(lam, "lam")
    if x.shape[0] < 1 or x.shape[1] != q.shape[1]:
        raise ValueError(f"query must have the columns of train ({x.shape[1]}), got shape {q.shape}")
    if y.shape != (x.shape[0],):
        raise ValueError(f"targets must have shape ({x.shape[0]},), got {y.shape}")
    ls = np.asarray(lengthscales, dtype=float) if not isinstance(lengthscales, str) else np.array([np.nan])
    if ls.ndim > 1 or (ls.ndim == 1 and ls.size != x.shape[1]) or not np.isfinite(ls).all() or not np.all(ls > 0):
        raise ValueError(f"lengthscales must be a number > 0 or one per column of train ({x.shape[1]})")
    ls = np.broadcast_to(ls, (x.shape[1],))

    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = (a[:, None, :] - b[None, :, :]) / ls
        return np.exp(-0.5 * (d**2).sum(-1))

    gram = k(x, x) + lam * np.eye(x.shape[0])
    kq = k(q, x)
    sol = np.linalg.solve(gram, np.concatenate([y[:, None], kq.T], axis=1))
    mu = kq @ sol[:, 0]
    var = 1.0 - np.einsum("qi,iq->q", kq, sol[:, 1:])
    return mu, np.sqrt(np.maximum(var, 0.0))
