"""Repeated negotiation against a stream of opponents with hidden types, vectorised over trials.

Li, Mu, Qi. *A Contextual Combinatorial Bandit Approach to Negotiation*. ICML 2024,
https://arxiv.org/abs/2407.00567. The paper's setting (Section 1): at every time step the negotiator proposes a
bid and learns only whether the counterpart accepts; acceptance makes a deal, rejection leads to further
negotiation, possibly with a counter-proposal. Our miniature (the notes' reconstruction, Section 6):

* One *round* of the bandit is one proposal. A negotiation (episode) lasts until a deal or ``episode_length``
  rejected proposals; then the next opponent of the trial's stream arrives.
* An opponent has an observed profile weight ``m ~ U[0, 1]`` (its utility ``u_o = (1 - m) p_0 + m p_1``) and a
  *hidden type* ``(e, theta_min)``: its acceptance threshold at step ``s`` of the episode is the time-dependent
  concession curve ``theta_s = theta_0 - (theta_0 - theta_min) (s / T_ep)^(1/e)`` (``e < 1`` Boulware,
  ``e > 1`` Conceder).
* It accepts bid ``S`` with probability ``g(s, m, type, S) = sigmoid((u_o(S) - theta_s) / tau)``; after a
  rejection it counter-proposes the bid it likes least among those it would still accept at the next step
  (``argmin u_o(S)`` subject to ``u_o(S) >= theta_{s+1}``), which is what the learner can use to infer the type.
* The reward of a proposal is ``U(S) * y`` (own utility of the deal, 0 if rejected) and the regret of round
  ``t`` is ``max_S U(S) g_t(S) - U(S_t) g_t(S_t)``, against the oracle that knows ``g`` including the hidden type.

Opponents, their types and the acceptance draws are fixed by the seed (one stream per trial, consumed one
opponent per episode, one uniform per round), so agents simulated with one seed face the same opponents in
the same order: comparisons are paired.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._checks import positive_float, positive_int, seed_like, unit_interval
from .domains import Domain

Type = tuple[float, float]
"""An opponent type: (concession exponent e, floor theta_min)."""


def _check_types(types: object) -> tuple[Type, ...]:
    if isinstance(types, (str, bytes)) or not hasattr(types, "__iter__"):
        raise TypeError(f"types must be a sequence of (exponent, floor) pairs, got {types!r}")
    out = []
    for t in types:
        if isinstance(t, (str, bytes)) or not hasattr(t, "__len__") or len(t) != 2:
            raise ValueError(f"types must hold (exponent, floor) pairs, got {t!r}")
        e, floor = t
        if isinstance(e, bool) or not isinstance(e, numbers.Real) or not np.isfinite(e) or e <= 0:
            raise ValueError(f"types: each concession exponent must be a finite number > 0, got {e!r}")
        if isinstance(floor, bool) or not isinstance(floor, numbers.Real) or not 0 <= floor <= 1:
            raise ValueError(f"types: each floor theta_min must lie in [0, 1], got {floor!r}")
        out.append((float(e), float(floor)))
    if not out:
        raise ValueError("types must name at least one opponent type")
    return tuple(out)


@dataclass(frozen=True)
class Observation:
    """What the negotiator sees before proposing, one entry per trial.

    Attributes:
        time: normalised step in the current negotiation, ``s / episode_length`` (context).
        profile: the opponent's observed profile weight ``m`` (context).
        counter: the opponent's last counter-offer (a bid index), -1 at the start of a negotiation.
        new_episode: True at the first step of a negotiation (a new opponent).
    """

    time: np.ndarray
    profile: np.ndarray
    counter: np.ndarray
    new_episode: np.ndarray


class NegotiationEnv:
    """Negotiations on ``domain`` against opponents of hidden ``types`` (vectorised over trials).

    Args:
        domain: the bid set (:mod:`.domains`).
        types: the hidden opponent types, ``(e, theta_min)`` pairs, drawn uniformly per opponent.
        episode_length: proposals per negotiation before it fails, ``T_ep``.
        theta_start: every opponent's initial threshold ``theta_0``.
        temperature: ``tau`` of the acceptance sigmoid (notes: 0.05).

    After ``reset``: ``own_utility_`` (n_trials, n_bids), ``profiles_`` (n_trials, 2, n_bids), the per-trial
    opponent streams, and per-trial counters ``episodes_`` (finished negotiations), ``deals_`` and
    ``deal_utility_`` (sum of own utility over deals).
    """

    def __init__(
        self,
        domain: Domain,
        *,
        types: tuple[Type, ...] = ((0.2, 0.3), (1.0, 0.3), (3.0, 0.3)),
        episode_length: int = 20,
        theta_start: float = 0.95,
        temperature: float = 0.05,
    ) -> None:
        if not isinstance(domain, Domain):
            raise TypeError(f"domain must be a Domain, got {type(domain).__name__}")
        self.domain = domain
        self.types = _check_types(types)
        self.episode_length = positive_int(episode_length, "episode_length")
        self.theta_start = unit_interval(theta_start, "theta_start")
        self.temperature = positive_float(temperature, "temperature")
        if any(floor > self.theta_start for _, floor in self.types):
            raise ValueError("types: every floor theta_min must be <= theta_start")
        self.own_utility_: np.ndarray | None = None

    # -- set-up -------------------------------------------------------------------------------------------

    def reset(self, n_trials: int, horizon: int, seed: int | np.random.Generator | None = None) -> Observation:
        """Draw ``n_trials`` domains' utilities and opponent streams for ``horizon`` rounds; the first observation."""
        n = positive_int(n_trials, "n_trials")
        horizon = positive_int(horizon, "horizon")
        rng = np.random.default_rng(seed_like(seed))
        self.own_utility_, self.profiles_ = self.domain.sample_utilities(n, rng)
        # At most one opponent per round: fixed-shape streams keep the draws identical across agents.
        self._type_stream = rng.integers(0, len(self.types), (n, horizon))
        self._profile_stream = rng.uniform(0, 1, (n, horizon))
        self._uniforms = rng.uniform(0, 1, (n, horizon))
        self._exponents = np.array([e for e, _ in self.types])
        self._floors = np.array([f for _, f in self.types])
        self.n_trials_, self.horizon_ = n, horizon
        self._rows = np.arange(n)
        self.round_ = 0
        self.episodes_ = np.zeros(n, dtype=np.int64)
        self.deals_ = np.zeros(n, dtype=np.int64)
        self.deal_utility_ = np.zeros(n)
        self.step_ = np.zeros(n, dtype=np.int64)
        self.counter_ = np.full(n, -1, dtype=np.intp)
        self._new = np.ones(n, dtype=bool)
        self.type_ = np.zeros(n, dtype=np.int64)
        self.profile_ = np.zeros(n)
        self._load_opponents(np.ones(n, dtype=bool))
        return self.observe()

    def _load_opponents(self, which: np.ndarray) -> None:
        k = np.minimum(self.episodes_, self.horizon_ - 1)
        self.type_ = np.where(which, self._type_stream[self._rows, k], self.type_)
        self.profile_ = np.where(which, self._profile_stream[self._rows, k], self.profile_)
        m = self.profile_[:, None]
        self._opp_utility = (1 - m) * self.profiles_[:, 0] + m * self.profiles_[:, 1]

    # -- the model ----------------------------------------------------------------------------------------

    def threshold(self, step: np.ndarray | None = None) -> np.ndarray:
        """The opponents' acceptance threshold ``theta_s`` at ``step`` (default: the current step), (n_trials,)."""
        s = self.step_ if step is None else step
        frac = np.minimum(s / self.episode_length, 1.0)
        e, floor = self._exponents[self.type_], self._floors[self.type_]
        return self.theta_start - (self.theta_start - floor) * frac ** (1.0 / e)

    def acceptance_probabilities(self) -> np.ndarray:
        """``g_t(S)`` for every bid at the current step, shape (n_trials, n_bids) (what the oracle knows)."""
        z = (self._opp_utility - self.threshold()[:, None]) / self.temperature
        return 0.5 * (1 + np.tanh(0.5 * z))  # = sigmoid(z), without overflow warnings

    def observe(self) -> Observation:
        return Observation(self.step_ / self.episode_length, self.profile_.copy(), self.counter_.copy(),
                           self._new.copy())  # fmt: skip

    # -- one round ----------------------------------------------------------------------------------------

    def step(self, bids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, Observation]:
        """Propose ``bids`` (n_trials,) ints; returns (accepted, reward, regret, next observation)."""
        if self.own_utility_ is None:
            raise RuntimeError("call reset() before step()")
        bids = np.asarray(bids)
        if bids.shape != (self.n_trials_,) or bids.dtype.kind not in "iu":
            raise ValueError(f"bids must be an int array of shape ({self.n_trials_},), got {bids.dtype} {bids.shape}")
        if bids.min() < 0 or bids.max() >= self.domain.n_bids:
            raise ValueError(f"bids must lie in [0, {self.domain.n_bids}), got [{bids.min()}, {bids.max()}]")
        if self.round_ >= self.horizon_:
            raise RuntimeError(f"the horizon of {self.horizon_} rounds is used up; reset() first")
        g = self.acceptance_probabilities()
        value = self.own_utility_ * g
        chosen = value[self._rows, bids]
        regret = value.max(axis=1) - chosen
        self.expected_reward_ = chosen  # U(S_t) g_t(S_t): the proposal's expected reward (common-reference regret)
        self.accept_probability_ = g[self._rows, bids]  # g_t(S_t), for diagnostics
        accepted = self._uniforms[:, self.round_] < g[self._rows, bids]
        utility = self.own_utility_[self._rows, bids]
        reward = np.where(accepted, utility, 0.0)
        # Rejected: the opponent counter-proposes the bid it likes least among those above its next threshold.
        nxt = self.threshold(self.step_ + 1)
        above = self._opp_utility >= nxt[:, None]
        masked = np.where(above, self._opp_utility, np.inf)
        counter = np.where(above.any(axis=1), masked.argmin(axis=1), self._opp_utility.argmax(axis=1))
        failed = ~accepted & (self.step_ + 1 >= self.episode_length)
        done = accepted | failed
        self.deals_ += accepted
        self.deal_utility_ += reward
        self.episodes_ += done
        self.step_ = np.where(done, 0, self.step_ + 1)
        self.counter_ = np.where(done, -1, counter).astype(np.intp)
        self._new = done
        if done.any():
            self._load_opponents(done)
        self.round_ += 1
        return accepted, reward, regret, self.observe()

    def __repr__(self) -> str:
        return (f"NegotiationEnv({self.domain.name}, types={list(self.types)}, episode_length={self.episode_length}, "
                f"theta_start={self.theta_start}, temperature={self.temperature})")  # fmt: skip
