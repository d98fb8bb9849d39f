"""Agents for factored-reward bandits, vectorised over independent trials.

Mussi, Drago, Restelli, Metelli. *Factored-Reward Bandits with Intermediate Observations*. ICML 2024,
PMLR 235:36911-36952. https://proceedings.mlr.press/v235/mussi24a.html (official code: github.com/marcomussi/FRB)

The paper's point: the reward is the product of ``d`` intermediate observations, and each observation tells
the learner about *its own* factor. So instead of treating the ``K^d`` action vectors as unrelated arms of a
bandit that only sees the (heavy-tailed) product, learn each factor separately.

* :class:`FUCB` (the paper's first algorithm): an anytime UCB1 in every factor on that factor's observation,
  ``a_i = argmax_j  mu_hat_ij + sigma * sqrt(c_exp * log t / n_ij)``; worst-case optimal up to logs.
* :class:`FTrack` (the paper's second algorithm): for a known horizon ``T``, an aligned warm-up, then it tracks the
  estimated lower-bound exploration counts ``N_ij = ceil(2 sigma^2 f_T(1/T) / Delta_hat_ij^2)`` with an
  *aligned* schedule (exploring suboptimal arms of different factors in the same rounds), and falls back to
  F-UCB when the estimates drift more than ``2 eps`` from the warm-up ones; asymptotically instance-optimal.
* Baselines on the flattened ``K^d``-armed problem that observe only the product reward: :class:`FlatUCB1`
  and :class:`FlatMoMUCB` (a median-of-means robust UCB for heavy tails, Bubeck et al. 2013).

Every agent has the same shape: ``reset(n_trials)``, then per round ``select(t) -> (n_trials, d)`` integer action
vectors and ``update(actions, observations)`` with the ``(n_trials, d)`` intermediate observations; ``t`` is the
1-based round. All state is arrays with a leading trials axis and one round costs a handful of numpy calls for
all trials together. Ties are broken towards the lowest arm index, so every agent is deterministic given the
observations.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from .._checks import actions_array, non_negative_float, observations_array, positive_float, positive_int
from .environments import joint_actions, joint_index
from .lower_bound import aligned_schedule


class FactoredAgent:
    """What every agent shares: sizes, the ``reset/select/update`` protocol and its argument checks."""

    def __init__(self, *, n_arms: int, n_factors: int) -> None:
        self.n_arms = positive_int(n_arms, "n_arms")
        self.n_factors = positive_int(n_factors, "n_factors")
        self.n_trials_: int | None = None

    def reset(self, n_trials: int) -> FactoredAgent:
        """Forget everything and prepare ``n_trials`` independent runs."""
        self.n_trials_ = positive_int(n_trials, "n_trials")
        self._reset(self.n_trials_)
        return self

    def _reset(self, n_trials: int) -> None:
        raise NotImplementedError

    def select(self, t: int) -> np.ndarray:
        """The action vectors to play at round ``t`` (1-based), shape (n_trials, n_factors)."""
        if self.n_trials_ is None:
            raise RuntimeError(f"call reset(n_trials) before select() on {type(self).__name__}")
        return self._select(positive_int(t, "t"))

    def _select(self, t: int) -> np.ndarray:
        raise NotImplementedError

    def update(self, actions: np.ndarray, observations: np.ndarray) -> None:
        """Learn from the played ``actions`` and their intermediate ``observations``, both (n_trials, d)."""
        if self.n_trials_ is None:
            raise RuntimeError(f"call reset(n_trials) before update() on {type(self).__name__}")
        actions = actions_array(actions, self.n_trials_, self.n_factors, self.n_arms)
        observations = observations_array(observations, self.n_trials_, self.n_factors)
        self._update(actions, observations)

    def _update(self, actions: np.ndarray, observations: np.ndarray) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_arms={self.n_arms}, n_factors={self.n_factors})"


class _PerFactorStats(FactoredAgent):
    """Per-factor sample counts, running sums, means and ``1/sqrt(n)``, shape (n_trials, d, K).

    Means and ``1/sqrt(n)`` are refreshed only where an arm was played, so a UCB index over all arms costs one
    multiply-add and an argmax per round.
    """

    def _reset(self, n_trials: int) -> None:
        shape = (n_trials, self.n_factors, self.n_arms)
        self.counts_ = np.zeros(shape, dtype=np.int64)
        self.sums_ = np.zeros(shape)
        self._mean = np.zeros(shape)
        self._rsqrt_n = np.full(shape, np.inf)  # 1/sqrt(n): +inf for unplayed arms puts them first
        # Flat offsets of (trial, factor, arm 0): 1-D fancy indexing is several times faster than 3 index arrays.
        self._base = (np.arange(n_trials * self.n_factors) * self.n_arms).reshape(n_trials, self.n_factors)

    @property
    def means_hat_(self) -> np.ndarray:
        """Empirical mean of every (trial, factor, arm); 0 where the arm was never played."""
        return self._mean.copy()

    def _update(self, actions: np.ndarray, observations: np.ndarray) -> None:
        # One arm per (trial, factor): the flat indices are distinct, so += is safe without np.add.at.
        idx = (self._base + actions).ravel()
        counts, sums = self.counts_.reshape(-1), self.sums_.reshape(-1)
        n = counts[idx] + 1
        counts[idx] = n
        total = sums[idx] + observations.ravel()
        sums[idx] = total
        self._mean.reshape(-1)[idx] = total / n
        self._rsqrt_n.reshape(-1)[idx] = 1.0 / np.sqrt(n)

    def _ucb_actions(self, t: int, sigma: float, c_exp: float) -> np.ndarray:
        """Per-factor UCB1 choice (F-UCB's arm choice); unplayed arms first, lowest index on ties.

        ``mu_hat + sigma * sqrt(c_exp * log t / n)`` is computed as ``mu_hat + sigma sqrt(c_exp log t) / sqrt(n)``.
        """
        scale = sigma * math.sqrt(c_exp * math.log(t))
        if scale > 0:
            return (self._mean + scale * self._rsqrt_n).argmax(axis=2)
        # t = 1 or sigma = 0: no bonus, but unplayed arms still come first (0 * inf would be NaN).
        return np.where(self.counts_ > 0, self._mean, np.inf).argmax(axis=2)


class FUCB(_PerFactorStats):
    """F-UCB: an independent anytime UCB1 in every factor on its own observation.

    Args:
        n_arms: arms per factor ``K``.
        n_factors: factors ``d``.
        sigma: sub-Gaussian scale of each factor's noise (0.5 for Bernoulli outcomes).
        c_exp: exploration constant in ``sigma * sqrt(c_exp * log t / n)`` (official code: 4).

    With ``d = 1`` F-UCB is exactly :class:`FlatUCB1`.
    """

    def __init__(self, *, n_arms: int, n_factors: int, sigma: float, c_exp: float = 4.0) -> None:
        super().__init__(n_arms=n_arms, n_factors=n_factors)
        self.sigma = non_negative_float(sigma, "sigma")
        self.c_exp = positive_float(c_exp, "c_exp")

    def _select(self, t: int) -> np.ndarray:
        return self._ucb_actions(t, self.sigma, self.c_exp)


class FTrack(_PerFactorStats):
    """F-Track: aligned warm-up, aligned tracking of the lower bound, F-UCB fallback.

    1. Warm-up: ``N0 = ceil(sqrt(log T))`` passes over the arms, aligned across factors (round ``u`` plays arm
       ``u mod K`` in every factor): ``N0 * K`` rounds.
    2. From the warm-up means, the gaps ``Delta_hat_ij`` and the counts ``N_ij = ceil(2 sigma^2 f_T(1/T) /
       Delta_hat_ij^2)`` with ``f_T(delta) = (1 + 1/log T) (c log log T + log(1/delta))``; the remaining
       ``T - N0 K`` rounds follow :func:`~.lower_bound.aligned_schedule`, whose distinct columns are served
       least-served-first (the official code's order), so exploration is spread over the horizon.
    3. Safety switch: if at any round some ``|mu_hat_ij - mu_hat_ij(warm-up)| > 2 eps`` with
       ``eps = sqrt(2 sigma^2 f_T(1/log T) / N0)``, that trial abandons the schedule and runs F-UCB to the end.

    Args:
        n_arms, n_factors: sizes ``K`` and ``d``.
        sigma: sub-Gaussian scale of each factor's noise.
        horizon: the known horizon ``T`` (>= 3 so that ``log log T`` is defined, and >= the warm-up).
        c: constant of ``f_T`` (official code: 2.5).
        c_exp: exploration constant of the F-UCB fallback.
        schedule_order: ``"increasing"`` (LP-optimal alignment) or ``"decreasing"`` (official code).

    Fitted attributes after ``reset``: ``warmup_rounds``, ``epsilon``; after the warm-up: ``required_`` (the
    ``N_ij``, shape (n_trials, d, K)), ``schedule_actions_`` (n_trials, G, d), ``schedule_counts_`` (n_trials, G),
    ``switched_`` (n_trials,) and ``switch_round_`` (n_trials,; -1 if it never switched).
    """

    def __init__(
        self,
        *,
        n_arms: int,
        n_factors: int,
        sigma: float,
        horizon: int,
        c: float = 2.5,
        c_exp: float = 4.0,
        schedule_order: Literal["increasing", "decreasing"] = "increasing",
    ) -> None:
        super().__init__(n_arms=n_arms, n_factors=n_factors)
        self.sigma = non_negative_float(sigma, "sigma")
        self.horizon = positive_int(horizon, "horizon")
        self.c = non_negative_float(c, "c")
        self.c_exp = positive_float(c_exp, "c_exp")
        if schedule_order not in ("increasing", "decreasing"):
            raise ValueError(f"schedule_order must be 'increasing' or 'decreasing', got {schedule_order!r}")
        self.schedule_order = schedule_order
        if self.horizon < 3:
            raise ValueError(f"horizon must be >= 3 for F-Track (log log T must be defined), got {horizon}")
        self.n0 = math.ceil(math.sqrt(math.log(self.horizon)))
        self.warmup_rounds = self.n0 * self.n_arms
        if self.warmup_rounds > self.horizon:
            raise ValueError(f"horizon={horizon} is shorter than the warm-up of N0*K = {self.warmup_rounds} rounds")
        self.epsilon = math.sqrt(2 * self.sigma**2 * self.f_t(1 / math.log(self.horizon)) / self.n0)

    def f_t(self, delta: float) -> float:
        """The confidence function ``f_T(delta) = (1 + 1/log T) (c log log T + log(1/delta))``."""
        log_t = math.log(self.horizon)
        return (1 + 1 / log_t) * (self.c * math.log(log_t) + math.log(1 / delta))

    def _reset(self, n_trials: int) -> None:
        super()._reset(n_trials)
        self.switched_ = np.zeros(n_trials, dtype=bool)
        self.switch_round_ = np.full(n_trials, -1, dtype=np.int64)
        self.required_: np.ndarray | None = None
        self.schedule_actions_: np.ndarray | None = None
        self.schedule_counts_: np.ndarray | None = None
        self._served: np.ndarray | None = None

    def _build_schedule(self) -> None:
        """Step 2: required counts from the warm-up estimates, then one aligned schedule per trial."""
        n, d, k = self.counts_.shape
        self._warmup_means = self.means_hat_.copy()
        best = self._warmup_means.argmax(axis=2)
        gaps = self._warmup_means.max(axis=2, keepdims=True) - self._warmup_means
        length = self.horizon - self.warmup_rounds
        num = 2 * self.sigma**2 * self.f_t(1 / self.horizon)
        # A zero estimated gap (a tie with the best) asks for infinitely many samples: the timeline caps it.
        # Noiseless (sigma = 0) estimates are exact, so a tie needs no samples at all (and 0/0 is not NaN).
        raw = np.divide(num, gaps**2, out=np.full(gaps.shape, np.inf if num > 0 else 0.0), where=gaps > 0)
        required = np.ceil(np.minimum(raw, length)).astype(np.int64)
        required[np.arange(n)[:, None], np.arange(d)[None, :], best] = 0
        self.required_ = required
        # Schedules differ per trial but are built once, after the warm-up; rounds stay vectorised.
        per_trial = [aligned_schedule(required[r], best[r], length, self.schedule_order) for r in range(n)]
        g_max = max(len(c) for _, c in per_trial)
        acts = np.zeros((n, g_max, d), dtype=np.intp)
        counts = np.zeros((n, g_max), dtype=np.int64)
        for r, (a, c) in enumerate(per_trial):
            acts[r, : len(c)] = a
            counts[r, : len(c)] = c
        self.schedule_actions_, self.schedule_counts_ = acts, counts
        self._served = np.zeros((n, g_max), dtype=np.int64)

    def _select(self, t: int) -> np.ndarray:
        n, d = self.n_trials_, self.n_factors
        assert n is not None
        if t <= self.warmup_rounds:
            return np.full((n, d), (t - 1) % self.n_arms, dtype=np.intp)
        if self.schedule_actions_ is None:
            self._build_schedule()
        assert self._served is not None and self.schedule_counts_ is not None
        drift = np.abs(self._mean - self._warmup_means).max(axis=(1, 2))
        newly = ~self.switched_ & (drift > 2 * self.epsilon)
        self.switched_ |= newly
        self.switch_round_[newly] = t
        # Least-served-first among unfinished columns; trials whose schedule ran out also fall back to F-UCB.
        open_ = self._served < self.schedule_counts_
        served = np.where(open_, self._served, np.iinfo(np.int64).max)
        group = served.argmin(axis=1)
        tracking = ~self.switched_ & open_.any(axis=1)
        actions = self.schedule_actions_[np.arange(n), group]
        if not tracking.all():
            actions = np.where(tracking[:, None], actions, self._ucb_actions(t, self.sigma, self.c_exp))
        self._served[np.flatnonzero(tracking), group[tracking]] += 1
        return actions


class _FlatAgent(FactoredAgent):
    """A bandit over the ``K^d`` action vectors that observes only the product of the observations."""

    def __init__(self, *, n_arms: int, n_factors: int) -> None:
        super().__init__(n_arms=n_arms, n_factors=n_factors)
        self.n_joint = self.n_arms**self.n_factors
        self.vectors = joint_actions(self.n_arms, self.n_factors)

    def _reset(self, n_trials: int) -> None:
        self.counts_ = np.zeros((n_trials, self.n_joint), dtype=np.int64)
        self._rows = np.arange(n_trials)

    def _update(self, actions: np.ndarray, observations: np.ndarray) -> None:
        arm = joint_index(actions, self.n_arms)
        self._learn(arm, observations.prod(axis=1))

    def _learn(self, arm: np.ndarray, reward: np.ndarray) -> None:
        raise NotImplementedError


class FlatUCB1(_FlatAgent):
    """Anytime UCB1 on the flattened ``K^d``-armed bandit with the product reward (official ``UCB1Agent``).

    Index ``r_hat_a + sigma * sqrt(c_exp * log t / n_a)``; unplayed vectors first.
    """

    def __init__(self, *, n_arms: int, n_factors: int, sigma: float, c_exp: float = 4.0) -> None:
        super().__init__(n_arms=n_arms, n_factors=n_factors)
        self.sigma = non_negative_float(sigma, "sigma")
        self.c_exp = positive_float(c_exp, "c_exp")

    def _reset(self, n_trials: int) -> None:
        super()._reset(n_trials)
        self.sums_ = np.zeros((n_trials, self.n_joint))
        self._mean = np.zeros((n_trials, self.n_joint))
        self._rsqrt_n = np.full((n_trials, self.n_joint), np.inf)

    def _select(self, t: int) -> np.ndarray:
        # Same arithmetic as F-UCB's index, so that d = 1 gives bit-identical choices.
        scale = self.sigma * math.sqrt(self.c_exp * math.log(t))
        if scale > 0:
            index = self._mean + scale * self._rsqrt_n
        else:
            index = np.where(self.counts_ > 0, self._mean, np.inf)
        return self.vectors[index.argmax(axis=1)]

    def _learn(self, arm: np.ndarray, reward: np.ndarray) -> None:
        idx = (self._rows, arm)
        self.counts_[idx] += 1
        self.sums_[idx] += reward
        n = self.counts_[idx]
        self._mean[idx] = self.sums_[idx] / n
        self._rsqrt_n[idx] = 1.0 / np.sqrt(n)


class FlatMoMUCB(_FlatAgent):
    """Median-of-means robust UCB on the flattened problem (official ``MoMRobustUCBAgent``).

    The product of ``d`` noisy factors is heavy-tailed; with variance proxy ``u`` (default ``(1 + sigma^2)^d - 1``,
    the official code's ``get_sigma_square_eq_max``) the index of vector ``a`` at round ``t`` is

        MoM_a + mult * sqrt(12 * sqrt(u) * 32 * log(e^{1/16} t) / n_a),

    where ``MoM_a`` is the median of ``k = max(floor(min(2 + 32 log t, n_a) / 2), 1)`` block means of the first
    ``floor(n_a / k) * k`` rewards. Rewards are kept as per-vector prefix sums (so a block mean is one
    subtraction); memory grows as ``n_trials * K^d * max_a n_a`` floats.

    Args:
        n_arms, n_factors: sizes ``K`` and ``d``.
        sigma: noise scale of each factor (used only for the default ``u``).
        mult: multiplier of the confidence width (official scripts: a command-line ``ht_mult``; 1 by default).
        variance_proxy: ``u``; ``None`` for ``(1 + sigma^2)^d - 1``.
    """

    def __init__(
        self,
        *,
        n_arms: int,
        n_factors: int,
        sigma: float,
        mult: float = 1.0,
        variance_proxy: float | None = None,
    ) -> None:
        super().__init__(n_arms=n_arms, n_factors=n_factors)
        self.sigma = non_negative_float(sigma, "sigma")
        self.mult = non_negative_float(mult, "mult")
        self.variance_proxy = variance_proxy
        u = (1 + self.sigma**2) ** self.n_factors - 1 if variance_proxy is None else variance_proxy
        self.u_ = non_negative_float(u, "variance_proxy")

    def _reset(self, n_trials: int) -> None:
        super()._reset(n_trials)
        self._prefix = np.zeros((n_trials, self.n_joint, 65))
        self.estimates_ = np.full((n_trials, self.n_joint), np.inf)
        self._half_c = 1  # floor((2 + 32 log 1) / 2): the block count cap of the last recomputation
        self._t = 0

    def _select(self, t: int) -> np.ndarray:
        n = self.counts_
        with np.errstate(divide="ignore", invalid="ignore"):
            width = self.mult * np.sqrt(12 * math.sqrt(self.u_) * 32 * (1 / 16 + math.log(t)) / n)
        index = np.where(n > 0, self.estimates_ + width, np.inf)
        self._t = t
        return self.vectors[index.argmax(axis=1)]

    def _mom(self, rows: np.ndarray, arms: np.ndarray, c: float) -> np.ndarray:
        """Median-of-means of the rewards of (rows[m], arms[m]) for every m, with block cap ``c``."""
        n = self.counts_[rows, arms]
        k = np.maximum(np.floor(np.minimum(c, n) / 2).astype(np.int64), 1)
        size = n // k
        j = np.arange(int(k.max()))[None, :]
        valid = j < k[:, None]
        lo = np.where(valid, j * size[:, None], 0)
        hi = np.where(valid, (j + 1) * size[:, None], 0)
        r, a = rows[:, None], arms[:, None]  # gather only the 2k prefix sums needed, never a whole buffer
        with np.errstate(divide="ignore", invalid="ignore"):
            blocks = (self._prefix[r, a, hi] - self._prefix[r, a, lo]) / size[:, None]
        blocks = np.sort(np.where(valid, blocks, np.inf), axis=1)
        mid_lo = np.take_along_axis(blocks, ((k - 1) // 2)[:, None], axis=1)[:, 0]
        mid_hi = np.take_along_axis(blocks, (k // 2)[:, None], axis=1)[:, 0]
        return np.where(n > 0, (mid_lo + mid_hi) / 2, np.inf)

    def _learn(self, arm: np.ndarray, reward: np.ndarray) -> None:
        rows = self._rows
        n_old = self.counts_[rows, arm]
        if n_old.max() + 1 >= self._prefix.shape[2]:  # grow the prefix-sum buffer geometrically
            grown = np.zeros((*self._prefix.shape[:2], 2 * self._prefix.shape[2]))
            grown[:, :, : self._prefix.shape[2]] = self._prefix
            self._prefix = grown
        self._prefix[rows, arm, n_old + 1] = self._prefix[rows, arm, n_old] + reward
        self.counts_[rows, arm] += 1
        # The official code raises t before recomputing, so the cap uses log(t + 1) after round t.
        c = 2 + 32 * math.log(self._t + 1)
        half_c = int(c // 2)
        if half_c != self._half_c:
            # The block count of every arm with n >= c changed: recompute all estimates (rare: ~16 log T times).
            self._half_c = half_c
            r, a = np.nonzero(self.counts_ > 0)
            self.estimates_[r, a] = self._mom(r, a, c)
        else:
            self.estimates_[rows, arm] = self._mom(rows, arm, c)
