"""NegUCB and the baselines, vectorised over trials.

Li, Mu, Qi. *A Contextual Combinatorial Bandit Approach to Negotiation*. ICML 2024,
https://arxiv.org/abs/2407.00567 (the method section was not readable to us: this follows the notes'
reconstruction, ``/work/shared/papers/negucb.md`` Section 3, and the abstract's description).

* :class:`NegUCB`: kernelised UCB on ``z = (c, h, b(S))`` (context = normalised time and the opponent's
  observed profile; hidden state :class:`~.model.HiddenState`; bid encoding), full-bandit feedback (only the
  accept/reject of the proposed bid), random-Fourier-feature kernel ridge regression, and the proposal
  ``argmax_S U(S) * clip(mu + beta sigma, 0, 1)`` over all bids or, for large bid sets, over a candidate pool
  (top-M bids by own utility, random feasible bids, one-move neighbours of the incumbent, then a few steps of
  local search from the pool's best).
* Baselines (notes, Section 4): :class:`NegUCB` with ``hidden_state=False`` (the ablation), with ``beta=0`` and
  ``epsilon > 0`` (:class:`EpsilonGreedy`, no optimism), with linear features (:class:`LinearUCB`, a
  C2UCB-style linear model of acceptance on ``[1, c, h, b]`` under full-bandit feedback);
  :class:`TimeDependentTactic` (Boulware / Conceder concession of the own-utility target, the ANAC heuristics);
  :class:`RandomBidder`; :class:`OracleBidder` (knows ``g``; zero regret by definition).

Protocol: ``reset(env)`` after ``env.reset``; then per round ``select(obs) -> (n_trials,)`` bid indices and
``update(obs, bids, accepted)``.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._checks import non_negative_float, positive_float, positive_int, unit_interval
from .environment import NegotiationEnv, Observation
from .model import (
    HIDDEN_DIM,
    HiddenState,
    LinearFeatures,
    RandomFourierFeatures,
    RidgePosterior,
    SumFeatures,
    median_lengthscale,
)

CONTEXT_DIM = 2


def _seed(value: object, name: str = "seed") -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return int(value)


class NegotiationAgent:
    """The protocol every negotiator follows (see the module docstring)."""

    def reset(self, env: NegotiationEnv) -> NegotiationAgent:
        if not isinstance(env, NegotiationEnv):
            raise TypeError(f"env must be a NegotiationEnv, got {type(env).__name__}")
        if env.own_utility_ is None:
            raise RuntimeError("reset the environment before the agent (env.reset(n_trials, horizon, seed))")
        self.env_ = env
        self.own_utility_ = env.own_utility_
        self.n_trials_ = env.own_utility_.shape[0]
        self._rows = np.arange(self.n_trials_)
        self._reset(env)
        return self

    def _reset(self, env: NegotiationEnv) -> None:
        pass

    def select(self, obs: Observation) -> np.ndarray:
        raise NotImplementedError

    def update(self, obs: Observation, bids: np.ndarray, accepted: np.ndarray) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NegUCB(NegotiationAgent):
    """NegUCB: contextual kernel UCB over bids with hidden-state features and full-bandit feedback.

    Args:
        beta: the UCB width multiplier (notes: a tuned constant; 1.0 there, 0.3 here after a pilot).
        lam: the ridge / kernel regulariser ``lambda`` (notes: 1.0).
        n_features: random Fourier features ``D`` approximating the product RBF kernel.
        features: ``"rff"`` (the product RBF kernel), ``"linear"`` (``[1, c, h, b]``, the linear baseline) or
            ``"rff+linear"`` (the sum of the two kernels).
        hidden_state: include ``h`` in ``z`` (False: the ablation).
        lengthscale_state: RBF lengthscale of the context and hidden-state coordinates.
        lengthscale_bid: RBF lengthscale of the bid encoding; ``None``: the median heuristic over the bids.
        epsilon: probability of a uniformly random bid instead of the UCB choice (epsilon-greedy).
        exhaustive_limit: bid sets up to this size are scored exhaustively; larger ones through the pool.
        pool_top, pool_random, local_steps: the candidate pool (top bids by own utility, random bids, rounds of
            one-move local search from the best candidate; the incumbent's neighbours are always added).
        seed: seeds the random features and the agent's own randomness.
    """

    def __init__(
        self,
        *,
        beta: float = 0.3,
        lam: float = 1.0,
        n_features: int = 128,
        features: str = "rff+linear",
        hidden_state: bool = True,
        lengthscale_state: float = 1.0,
        lengthscale_bid: float | None = None,
        epsilon: float = 0.0,
        exhaustive_limit: int = 1024,
        pool_top: int = 128,
        pool_random: int = 64,
        local_steps: int = 2,
        seed: int = 0,
    ) -> None:
        self.beta = non_negative_float(beta, "beta")
        self.lam = positive_float(lam, "lam")
        self.n_features = positive_int(n_features, "n_features")
        if features not in ("rff", "linear", "rff+linear"):
            raise ValueError(f"features must be 'rff', 'linear' or 'rff+linear', got {features!r}")
        self.features = features
        if not isinstance(hidden_state, (bool, np.bool_)):
            raise TypeError(f"hidden_state must be a bool, got {hidden_state!r}")
        self.hidden_state = bool(hidden_state)
        self.lengthscale_state = positive_float(lengthscale_state, "lengthscale_state")
        self.lengthscale_bid = None if lengthscale_bid is None else positive_float(lengthscale_bid, "lengthscale_bid")
        self.epsilon = unit_interval(epsilon, "epsilon")
        self.exhaustive_limit = positive_int(exhaustive_limit, "exhaustive_limit")
        self.pool_top = positive_int(pool_top, "pool_top")
        self.pool_random = positive_int(pool_random, "pool_random")
        if isinstance(local_steps, bool) or not isinstance(local_steps, numbers.Integral) or local_steps < 0:
            raise ValueError(f"local_steps must be an int >= 0, got {local_steps!r}")
        self.local_steps = int(local_steps)
        self.seed = _seed(seed)

    # -- set-up ------------------------------------------------------------------------------------------

    def _reset(self, env: NegotiationEnv) -> None:
        enc = env.domain.encodings
        state_dim = CONTEXT_DIM + (HIDDEN_DIM if self.hidden_state else 0)
        if self.features == "linear":
            self.feature_map_ = LinearFeatures().bind(state_dim, enc)
        else:
            ls_bid = self.lengthscale_bid or median_lengthscale(enc, seed=self.seed)
            scales = np.concatenate([np.full(state_dim, self.lengthscale_state), np.full(enc.shape[1], ls_bid)])
            rff = RandomFourierFeatures(self.n_features, scales, self.seed)
            self.feature_map_ = (rff if self.features == "rff" else SumFeatures(rff, LinearFeatures())).bind(
                state_dim, enc)
        self.posterior_ = RidgePosterior(self.n_trials_, self.feature_map_.dim, self.lam)
        self.tracker_ = HiddenState().reset(self.n_trials_)
        self.rng_ = np.random.default_rng([self.seed, 1])
        n_bids = env.domain.n_bids
        self.exhaustive_ = n_bids <= self.exhaustive_limit
        if self.exhaustive_:
            self._all = np.broadcast_to(np.arange(n_bids), (self.n_trials_, n_bids))
        else:
            top = min(self.pool_top, n_bids)
            self._top = np.argsort(-self.own_utility_, axis=1, kind="stable")[:, :top]
        self.incumbent_ = self.own_utility_.argmax(axis=1)
        self._state: np.ndarray | None = None

    def _state_of(self, obs: Observation) -> np.ndarray:
        h = self.tracker_.update(obs, self.own_utility_)
        parts = [obs.time[:, None], obs.profile[:, None]] + ([h] if self.hidden_state else [])
        return np.concatenate(parts, axis=1)

    # -- acting ------------------------------------------------------------------------------------------

    def scores(self, state: np.ndarray, bids: np.ndarray) -> np.ndarray:
        """The optimistic value ``U(S) clip(mu + beta sigma, 0, 1)`` of candidate bids (n_trials, m)."""
        phi = self.feature_map_(state, bids)
        accept = self.posterior_.mean(phi)
        if self.beta > 0:
            accept = accept + self.beta * self.posterior_.sd(phi)
        return self.own_utility_[self._rows[:, None], bids] * np.clip(accept, 0.0, 1.0)

    def candidates(self) -> np.ndarray:
        """The candidate pool for a large bid set, (n_trials, m): top bids, random bids, incumbent's neighbours."""
        nb = self.env_.domain.neighbours
        n_bids = self.env_.domain.n_bids
        rand = self.rng_.integers(0, n_bids, (self.n_trials_, self.pool_random))
        around = nb[self.incumbent_]
        around = np.where(around >= 0, around, self.incumbent_[:, None])
        return np.concatenate([self._top, rand, around, self.incumbent_[:, None]], axis=1)

    def select(self, obs: Observation) -> np.ndarray:
        state = self._state_of(obs)
        self._state = state
        if self.exhaustive_:
            pool = self._all
            best = pool[self._rows, self.scores(state, pool).argmax(axis=1)]
        else:
            pool = self.candidates()
            sc = self.scores(state, pool)
            best, best_score = pool[self._rows, sc.argmax(axis=1)], sc.max(axis=1)
            nb = self.env_.domain.neighbours
            for _ in range(self.local_steps):  # one-move hill climbing from the pool's best
                around = nb[best]
                around = np.where(around >= 0, around, best[:, None])
                sc = self.scores(state, around)
                better = sc.max(axis=1) > best_score
                best = np.where(better, around[self._rows, sc.argmax(axis=1)], best)
                best_score = np.maximum(best_score, sc.max(axis=1))
            self.incumbent_ = best
        if self.epsilon > 0:
            explore = self.rng_.uniform(size=self.n_trials_) < self.epsilon
            best = np.where(explore, self.rng_.integers(0, self.env_.domain.n_bids, self.n_trials_), best)
        return best.astype(np.intp)

    def update(self, obs: Observation, bids: np.ndarray, accepted: np.ndarray) -> None:
        if self._state is None:
            raise RuntimeError("call select() before update()")
        phi = self.feature_map_(self._state, np.asarray(bids)[:, None])[:, 0]
        self.posterior_.update(phi, np.asarray(accepted, dtype=float))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(beta={self.beta}, lam={self.lam}, features={self.features!r}, "
                f"n_features={self.n_features}, hidden_state={self.hidden_state}, epsilon={self.epsilon})")  # fmt: skip


class EpsilonGreedy(NegUCB):
    """The same kernel regressor without optimism (``beta = 0``); a random bid with probability ``epsilon``."""

    def __init__(
        self,
        *,
        epsilon: float = 0.1,
        lam: float = 1.0,
        n_features: int = 128,
        hidden_state: bool = True,
        lengthscale_state: float = 1.0,
        lengthscale_bid: float | None = None,
        exhaustive_limit: int = 1024,
        pool_top: int = 128,
        pool_random: int = 64,
        local_steps: int = 2,
        seed: int = 0,
    ) -> None:
        super().__init__(beta=0.0, epsilon=epsilon, lam=lam, n_features=n_features, hidden_state=hidden_state,
                         lengthscale_state=lengthscale_state, lengthscale_bid=lengthscale_bid,
                         exhaustive_limit=exhaustive_limit, pool_top=pool_top, pool_random=pool_random,
                         local_steps=local_steps, seed=seed)  # fmt: skip


class LinearUCB(NegUCB):
    """Linear contextual combinatorial UCB (C2UCB-style) on ``[1, c, h, b(S)]`` with full-bandit feedback."""

    def __init__(
        self,
        *,
        beta: float = 0.3,
        lam: float = 1.0,
        hidden_state: bool = True,
        exhaustive_limit: int = 1024,
        pool_top: int = 128,
        pool_random: int = 64,
        local_steps: int = 2,
        seed: int = 0,
    ) -> None:
        super().__init__(beta=beta, lam=lam, features="linear", hidden_state=hidden_state,
                         exhaustive_limit=exhaustive_limit, pool_top=pool_top, pool_random=pool_random,
                         local_steps=local_steps, seed=seed)  # fmt: skip


class TimeDependentTactic(NegotiationAgent):
    """The ANAC time-dependent tactic: propose the bid whose own utility is just above a conceding target.

    Target at step ``s``: ``1 - (1 - floor) (s / T_ep)^(1/e)``; ``e < 1`` is Boulware (concedes late),
    ``e > 1`` Conceder. Ignores the opponent, never learns.
    """

    def __init__(self, *, exponent: float, floor: float = 0.3) -> None:
        self.exponent = positive_float(exponent, "exponent")
        self.floor = unit_interval(floor, "floor")

    def _reset(self, env: NegotiationEnv) -> None:
        self._order = np.argsort(self.own_utility_, axis=1, kind="stable")
        self._sorted = np.take_along_axis(self.own_utility_, self._order, axis=1)

    def select(self, obs: Observation) -> np.ndarray:
        target = 1.0 - (1.0 - self.floor) * obs.time ** (1.0 / self.exponent)
        pos = (self._sorted < target[:, None] - 1e-12).sum(axis=1)
        pos = np.minimum(pos, self._sorted.shape[1] - 1)
        return self._order[self._rows, pos].astype(np.intp)

    def __repr__(self) -> str:
        return f"TimeDependentTactic(exponent={self.exponent}, floor={self.floor})"


class RandomBidder(NegotiationAgent):
    """A uniformly random feasible bid every round."""

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = _seed(seed)

    def _reset(self, env: NegotiationEnv) -> None:
        self.rng_ = np.random.default_rng([self.seed, 2])

    def select(self, obs: Observation) -> np.ndarray:
        return self.rng_.integers(0, self.env_.domain.n_bids, self.n_trials_).astype(np.intp)


class OracleBidder(NegotiationAgent):
    """Knows the opponent's acceptance ``g`` (hidden type included): ``argmax_S U(S) g_t(S)``; zero regret."""

    def select(self, obs: Observation) -> np.ndarray:
        return (self.own_utility_ * self.env_.acceptance_probabilities()).argmax(axis=1).astype(np.intp)
