"""Factored-reward bandit environments, vectorised over independent trials.

Mussi, Drago, Restelli, Metelli. *Factored-Reward Bandits with Intermediate Observations*. ICML 2024,
PMLR 235:36911-36952. https://proceedings.mlr.press/v235/mussi24a.html

At every round the learner plays an action *vector* ``a = (a_1, ..., a_d)``, one of ``K`` arms in each of ``d``
factors. Factor ``i`` answers with an intermediate observation ``X_i = mu_i(a_i) + noise`` and the reward is the
product of the observations, so the expected reward of ``a`` is (the paper's problem setting)

    mu(a) = prod_i mu_i(a_i),        regret_t = prod_i max_j mu_i(j) - mu(a_t).

Two instances of the paper's experiments (and of the official code, ``FRB/env.py``) are provided:

* :class:`FactoredEnv`, the general instance: every mean drawn from U[0.3, 1] (a new instance per trial) or
  given explicitly;
* :class:`ParallelFactoredEnv`, the "parallel" instance used for F-Track: in every factor one arm (the last)
  has mean 1 and the others 0.5.

Noise is Gaussian with standard deviation ``sigma`` in every factor and correlation ``alpha`` between factors,
or Bernoulli (``X_i ~ Bernoulli(mu_i(a_i))``). Every method works on a leading *trials* axis: ``reset(n_trials)``
draws ``n_trials`` independent instances, ``step(actions)`` takes an ``(n_trials, d)`` integer array and returns
``(n_trials, d)`` observations with one numpy call.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .._checks import (
    actions_array,
    integer_array,
    means_array,
    non_negative_float,
    positive_int,
    unit_interval,
)

Noise = Literal["gaussian", "bernoulli"]


def joint_actions(n_arms: int, n_factors: int) -> np.ndarray:
    """All ``n_arms ** n_factors`` action vectors, shape (K^d, d), in lexicographic order (factor 0 slowest).

    Row ``r`` is the action vector whose flat index is ``r`` (see :func:`joint_index`): the flattened baselines
    see the problem as a ``K^d``-armed bandit over these rows.
    """
    n_arms = positive_int(n_arms, "n_arms")
    n_factors = positive_int(n_factors, "n_factors")
    grids = np.indices((n_arms,) * n_factors).reshape(n_factors, -1)
    return np.ascontiguousarray(grids.T, dtype=np.intp)


def joint_index(actions: np.ndarray, n_arms: int) -> np.ndarray:
    """The flat index in ``[0, K^d)`` of each action vector (last axis), inverse of :func:`joint_actions`."""
    n_arms = positive_int(n_arms, "n_arms")
    actions = integer_array(actions, "actions")  # a NaN cast to int64 became -9.2e18: refuse it instead
    if actions.ndim < 1:
        raise ValueError(f"actions must have at least one axis (the factors), got shape {actions.shape}")
    if actions.size and (actions.min() < 0 or actions.max() >= n_arms):
        raise ValueError(f"actions must lie in [0, {n_arms}), got values in [{actions.min()}, {actions.max()}]")
    weights = n_arms ** np.arange(actions.shape[-1] - 1, -1, -1, dtype=np.int64)
    return (actions.astype(np.int64) * weights).sum(axis=-1)


class FactoredEnv:
    """A factored-reward bandit with ``n_factors`` factors of ``n_arms`` arms each (the paper's setting).

    Args:
        n_arms: arms per factor, ``K >= 1``.
        n_factors: factors, ``d >= 1``.
        sigma: standard deviation of each factor's Gaussian noise (ignored by Bernoulli noise).
        noise: ``"gaussian"`` (``X_i = mu_i(a_i) + sigma * eps_i``) or ``"bernoulli"`` (``X_i`` in {0, 1} with
            mean ``mu_i(a_i)``; then every mean must be <= 1 and the agents should use ``sigma=0.5``).
        alpha: correlation of the noise across factors, in [0, 1]. Gaussian: ``eps_i = sqrt(alpha) z_0 +
            sqrt(1 - alpha) z_i`` with independent standard normals, so every factor keeps standard deviation
            ``sigma`` and any two factors have correlation ``alpha``. Bernoulli: each factor reuses a common
            uniform with probability ``alpha``. With ``alpha > 0`` the expected reward of a vector is no longer
            the product of the means; the regret is still measured on ``prod_i mu_i`` as in the paper.
        low, high: range of the uniform draw of the means (paper and official code: U[0.3, 1]).
        means: a fixed instance, shape (n_factors, n_arms), all > 0; when given, every trial uses it.
    """

    def __init__(
        self,
        *,
        n_arms: int,
        n_factors: int,
        sigma: float = 0.1,
        noise: Noise = "gaussian",
        alpha: float = 0.0,
        low: float = 0.3,
        high: float = 1.0,
        means: np.ndarray | None = None,
    ) -> None:
        self.n_arms = positive_int(n_arms, "n_arms")
        self.n_factors = positive_int(n_factors, "n_factors")
        self.sigma = non_negative_float(sigma, "sigma")
        if noise not in ("gaussian", "bernoulli"):
            raise ValueError(f"noise must be 'gaussian' or 'bernoulli', got {noise!r}")
        self.noise: Noise = noise
        self.alpha = unit_interval(alpha, "alpha")
        self.low = float(low)
        self.high = float(high)
        if not (0 < self.low <= self.high) or not np.isfinite(self.high):
            raise ValueError(f"low and high must satisfy 0 < low <= high < inf, got low={low}, high={high}")
        if means is not None:
            fixed = means_array(means, "means")
            if fixed.shape != (self.n_factors, self.n_arms):
                raise ValueError(
                    f"means must have shape (n_factors, n_arms) = {(self.n_factors, self.n_arms)}, got {fixed.shape}"
                )
            self.means = fixed
        else:
            self.means = None
        upper = self.high if self.means is None else float(self.means.max())
        if self.noise == "bernoulli" and upper > 1:
            raise ValueError("Bernoulli noise needs every mean <= 1 (high or means)")
        self.means_: np.ndarray | None = None
        self.rng_: np.random.Generator | None = None

    # -- instances ------------------------------------------------------------------------------------------
    def _draw_means(self, n_trials: int, rng: np.random.Generator) -> np.ndarray:
        if self.means is not None:
            return np.broadcast_to(self.means, (n_trials, *self.means.shape)).copy()
        return rng.uniform(self.low, self.high, size=(n_trials, self.n_factors, self.n_arms))

    def reset(self, n_trials: int, seed: int | np.random.Generator | None = None) -> FactoredEnv:
        """Draw ``n_trials`` independent instances (``means_``, shape (n_trials, d, K)) and a fresh noise stream."""
        n_trials = positive_int(n_trials, "n_trials")
        self.rng_ = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.means_ = self._draw_means(n_trials, self.rng_)
        self._base = (np.arange(n_trials * self.n_factors) * self.n_arms).reshape(n_trials, self.n_factors)
        return self

    def _require_reset(self) -> np.ndarray:
        if self.means_ is None:
            raise RuntimeError("call reset(n_trials, seed) before using the environment")
        return self.means_

    @property
    def n_trials(self) -> int:
        return self._require_reset().shape[0]

    def arm_means(self, actions: np.ndarray) -> np.ndarray:
        """``mu_i(a_i)`` for every trial and factor, shape (n_trials, d)."""
        means = self._require_reset()
        n, d, k = means.shape
        actions = actions_array(actions, n, d, k)
        return means.reshape(-1)[self._base + actions]  # flat gather: much cheaper than three index arrays

    def expected_reward(self, actions: np.ndarray) -> np.ndarray:
        """``mu(a) = prod_i mu_i(a_i)`` per trial, shape (n_trials,)."""
        return self.arm_means(actions).prod(axis=1)

    def optimal_reward(self) -> np.ndarray:
        """``mu* = prod_i max_j mu_i(j)`` per trial (means are positive, so the per-factor argmax is optimal)."""
        return self._require_reset().max(axis=2).prod(axis=1)

    def optimal_actions(self) -> np.ndarray:
        """The optimal action vector of each trial, shape (n_trials, d)."""
        return self._require_reset().argmax(axis=2)

    def regret(self, actions: np.ndarray) -> np.ndarray:
        """Instantaneous (pseudo-)regret ``mu* - mu(a)`` per trial, shape (n_trials,)."""
        return self.optimal_reward() - self.expected_reward(actions)

    # -- interaction ----------------------------------------------------------------------------------------
    def step(self, actions: np.ndarray) -> np.ndarray:
        """Play one action vector per trial; return the intermediate observations, shape (n_trials, d)."""
        return self.observe(self.arm_means(actions))

    def observe(self, mu: np.ndarray) -> np.ndarray:
        """Noisy observations around the played arms' means ``mu`` (n_trials, d); ``step`` = ``observe(arm_means)``."""
        rng = self.rng_
        assert rng is not None
        n, d = mu.shape
        if self.noise == "gaussian":
            eps = rng.standard_normal((n, d))
            if self.alpha > 0:
                # One shared draw per trial couples the factors; the sqrt weights keep each factor's variance.
                eps = np.sqrt(self.alpha) * rng.standard_normal((n, 1)) + np.sqrt(1 - self.alpha) * eps
            return mu + self.sigma * eps
        u = rng.random((n, d))
        if self.alpha > 0:
            shared = rng.random((n, 1))
            u = np.where(rng.random((n, d)) < self.alpha, shared, u)
        return (u < mu).astype(float)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_arms={self.n_arms}, n_factors={self.n_factors}, sigma={self.sigma}, "
            f"noise={self.noise!r}, alpha={self.alpha})"
        )


class ParallelFactoredEnv(FactoredEnv):
    """The "parallel" instance of the paper's F-Track experiment (official code: ``ParallelFactoredEnv``).

    In every factor the last arm has mean ``best_mean`` (1) and all others ``other_mean`` (0.5), so every factor
    has the same gaps and exploring a suboptimal arm of one factor can be aligned with the others.
    """

    def __init__(
        self,
        *,
        n_arms: int,
        n_factors: int,
        sigma: float = 0.1,
        noise: Noise = "gaussian",
        alpha: float = 0.0,
        best_mean: float = 1.0,
        other_mean: float = 0.5,
    ) -> None:
        n_arms = positive_int(n_arms, "n_arms")
        n_factors = positive_int(n_factors, "n_factors")
        if not (0 < other_mean < best_mean) or not np.isfinite(best_mean):
            raise ValueError(f"need 0 < other_mean < best_mean, got other_mean={other_mean}, best_mean={best_mean}")
        means = np.full((n_factors, n_arms), float(other_mean))
        means[:, -1] = float(best_mean)
        super().__init__(n_arms=n_arms, n_factors=n_factors, sigma=sigma, noise=noise, alpha=alpha, means=means)
        self.best_mean = float(best_mean)
        self.other_mean = float(other_mean)
