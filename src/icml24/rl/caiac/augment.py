"""Counterfactual data augmentation by swapping action-uninfluenced entities (CAIAC, ICML 2024, section 4.2).

Armengol Urpí et al., "Causal Action Influence Aware Counterfactual Data Augmentation", ICML 2024
(arXiv:2405.18917). Where the agent's action has no influence on entity ``j`` (``C^j < theta`` at both ``s_t``
and ``s_{t+1}``), the transition of ``j`` does not depend on the rest of the state under local independence, so
``(s_t^j, s_{t+1}^j)`` can be replaced by the same entity's transition ``(s_k^j, s_{k+1}^j)`` from any other step
``k`` where ``j`` is also uncontrolled; the counterfactual ``(s~_t, a_t, s~_{t+1})`` stays dynamically feasible
while the joint configuration of the entities is new. As in the official ``compute_counterfactuals``:

* the future state used for hindsight goal relabelling gets the same swapped sub-state, ``s~_f^j = s_k^j``, and
  an entity is swapped only if it is uncontrolled at ``t``, ``t+1`` *and* the future step ``f``;
* actions are unchanged; the goal is the achieved goal of ``s~_f`` and the reward is recomputed,
  ``r~ = reward(ag(s~_{t+1}), g~)``;
* one source step is drawn per entity and sample, uniformly among the steps where the entity is uncontrolled.

The agent entity is never swapped (an explicit guard; in the paper its CAI is always high). The baselines are
the same sampler without counterfactuals (``mode="none"``) and with every non-agent entity treated as
uncontrolled (``threshold = inf``: random entity swaps, CoDA-like but blind to influence, ``mode="random"``).
Real samples are relabelled with HER's "future" strategy (Andrychowicz et al., 2017).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from icml24.rl import _checks

__all__ = ["CounterfactualSampler", "SamplerConfig", "counterfactual_swap"]


def _bool(name: str, x: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype != bool:
        raise TypeError(f"{name} must be a bool array, got dtype {arr.dtype}")
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    return arr


def _finite(name: str, x: Any) -> np.ndarray:
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be a numeric array, got {type(x).__name__}")
    try:
        arr = np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def counterfactual_swap(states: np.ndarray, next_states: np.ndarray, future_states: np.ndarray,
                        swap: np.ndarray, source_states: np.ndarray, source_next_states: np.ndarray,
                        entity_slices: list[slice]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The swap of section 4.2 for ``n`` samples: where ``swap[i, j]``, entity ``j`` of sample ``i`` takes the
    sub-state of its source transition (``source_states[i, j]``, ``source_next_states[i, j]``, ``(n, K, d)``).

    Returns copies ``(s~_t, s~_{t+1}, s~_f)``; the future state gets the source's ``s_k^j`` (not ``s_{k+1}^j``),
    as in the official code. Untouched entries are bit-identical to the inputs.
    """
    s, s2, sf = (_finite(k, x) for k, x in (("states", states), ("next_states", next_states),
                                             ("future_states", future_states)))  # fmt: skip
    if s.ndim != 2 or s2.shape != s.shape or sf.shape != s.shape:
        raise ValueError(f"states, next_states and future_states must share an (n, d) shape, got {s.shape}, "
                         f"{s2.shape}, {sf.shape}")  # fmt: skip
    if not isinstance(entity_slices, (list, tuple)) or not all(isinstance(x, slice) for x in entity_slices):
        raise TypeError("entity_slices must be a list of slices")
    n, K = len(s), len(entity_slices)
    sw = _bool("swap", swap, (n, K))
    src, src2 = _finite("source_states", source_states), _finite("source_next_states", source_next_states)
    if src.shape != (n, K, s.shape[1]) or src2.shape != src.shape:
        raise ValueError(f"source_states and source_next_states must have shape {(n, K, s.shape[1])}, got "
                         f"{src.shape}, {src2.shape}")  # fmt: skip
    for j, sl in enumerate(entity_slices):
        w = sw[:, j : j + 1]
        s[:, sl] = np.where(w, src[:, j, sl], s[:, sl])
        s2[:, sl] = np.where(w, src2[:, j, sl], s2[:, sl])
        sf[:, sl] = np.where(w, src[:, j, sl], sf[:, sl])
    return s, s2, sf


@dataclass(frozen=True)
class SamplerConfig:
    """Minibatch composition (official Fetch config: ``ratio_cf = 0.5``, HER ``future`` relabelling)."""

    ratio_cf: float = 0.5
    """Fraction of each minibatch made of counterfactual samples (0 without augmentation)."""
    future_p: float = 0.8
    """Probability that a sample's goal is relabelled with an achieved goal of a later step of its episode."""

    def __post_init__(self) -> None:
        _checks.real("ratio_cf", self.ratio_cf, low=0.0, high=1.0)
        _checks.real("future_p", self.future_p, low=0.0, high=1.0)


class CounterfactualSampler:
    """Goal-conditioned minibatches from offline episodes, a fraction of them counterfactual.

    ``states (E, T+1, D)``, ``actions (E, T, A)``, ``goals (E, G)`` (commanded goals), ``uncontrolled
    (E, T+1, K)`` (the CAI mask of every state, or ``None`` for no augmentation), ``entity_slices`` (K slices into
    the state), ``swappable (K,)`` (False for the agent: the explicit guard), ``achieved_goal(states) -> goals`` and
    ``reward(achieved, goals) -> (n,)``; ``train_episodes`` (indices) restricts the episodes minibatch samples come
    from (swap sources are drawn from every episode). :meth:`sample` returns ``obs, action, reward, next_obs`` numpy arrays
    with ``obs = (s, g)``, plus ``is_cf (n,)``, ``swapped (n, K)`` (which entities were swapped), the raw
    ``states``/``next_states`` and the ``episode``, ``step`` and ``future_step`` each sample was drawn at.
    """

    def __init__(self, *, states: np.ndarray, actions: np.ndarray, goals: np.ndarray,
                 uncontrolled: np.ndarray | None, entity_slices: list[slice], swappable: Any,
                 achieved_goal: Callable[[np.ndarray], np.ndarray],
                 reward: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 train_episodes: np.ndarray | None = None,
                 config: SamplerConfig = SamplerConfig()) -> None:  # noqa: B008  # fmt: skip
        S, A, G = (_finite(k, x) for k, x in (("states", states), ("actions", actions), ("goals", goals)))
        if S.ndim != 3 or A.ndim != 3 or A.shape[:2] != (S.shape[0], S.shape[1] - 1):
            raise ValueError(f"states (E, T+1, D) and actions (E, T, A) must agree, got {S.shape}, {A.shape}")
        if G.ndim != 2 or len(G) != len(S):
            raise ValueError(f"goals must have shape ({len(S)}, G), got {G.shape}")
        if not isinstance(entity_slices, (list, tuple)) or not all(isinstance(x, slice) for x in entity_slices):
            raise TypeError("entity_slices must be a list of slices")
        K = len(entity_slices)
        self.swappable = _bool("swappable", swappable, (K,))
        if not callable(achieved_goal) or not callable(reward):
            raise TypeError("achieved_goal and reward must be callables")
        if not isinstance(config, SamplerConfig):
            raise TypeError(f"config must be a SamplerConfig, got {type(config).__name__}")
        self.states, self.actions, self.goals = S, A, G
        self.entity_slices = list(entity_slices)
        self.achieved_goal, self.reward, self.config = achieved_goal, reward, config
        E, T1 = S.shape[:2]
        self.E, self.T = E, T1 - 1
        if train_episodes is None:
            self.train_episodes = np.arange(E)
        else:
            te = np.asarray(train_episodes)
            if te.ndim != 1 or len(te) == 0 or not np.issubdtype(te.dtype, np.integer) or te.min() < 0 or te.max() >= E:
                raise ValueError(f"train_episodes must be a non-empty int array of episode indices in [0, {E})")
            self.train_episodes = te
        if uncontrolled is None:
            self.uncontrolled = None
        else:
            self.uncontrolled = _bool("uncontrolled", uncontrolled, (E, T1, K))
            # Transitions where entity j is uncontrolled at t and t+1: the pool of sources of each entity.
            trans = self.uncontrolled[:, :-1] & self.uncontrolled[:, 1:]
            self._trans = trans
            self._pools = [np.flatnonzero(trans[:, :, j].reshape(-1)) for j in range(K)]

    @property
    def augments(self) -> bool:
        return self.uncontrolled is not None and self.config.ratio_cf > 0

    def _draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        e = self.train_episodes[rng.integers(len(self.train_episodes), size=n)]
        t = rng.integers(self.T, size=n)
        f = t + 1 + (rng.random(n) * (self.T - t)).astype(int)  # uniform in [t+1, T]
        return e, t, np.minimum(f, self.T)

    def _goals(self, e: np.ndarray, future: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        relabel = rng.random(len(e)) < self.config.future_p
        return np.where(relabel[:, None], self.achieved_goal(future), self.goals[e])

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` samples: ``round(ratio_cf * n)`` counterfactual (when augmenting), the rest real."""
        n = _checks.integer("n", n, low=1)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
        n_cf = int(round(self.config.ratio_cf * n)) if self.augments else 0
        e, t, f = self._draw(n, rng)
        s, s2, sf = self.states[e, t], self.states[e, t + 1], self.states[e, f]
        is_cf = np.zeros(n, dtype=bool)
        swapped = np.zeros((n, len(self.entity_slices)), dtype=bool)
        if n_cf:
            c = slice(n - n_cf, n)
            ec, tc, fc = e[c], t[c], f[c]
            K, D = len(self.entity_slices), s.shape[1]
            swap = np.zeros((n_cf, K), dtype=bool)
            src = np.zeros((n_cf, K, D))
            src2 = np.zeros((n_cf, K, D))
            for j in range(K):
                pool = self._pools[j]
                if not self.swappable[j] or len(pool) == 0:
                    continue
                k = pool[rng.integers(len(pool), size=n_cf)]
                ke, kt = np.divmod(k, self.T)
                src[:, j], src2[:, j] = self.states[ke, kt], self.states[ke, kt + 1]
                swap[:, j] = self._trans[ec, tc, j] & self.uncontrolled[ec, fc, j]
            s[c], s2[c], sf[c] = counterfactual_swap(s[c], s2[c], sf[c], swap, src, src2, self.entity_slices)
            is_cf[c] = True
            swapped[c] = swap
        g = self._goals(e, sf, rng)
        r = np.asarray(self.reward(self.achieved_goal(s2), g), dtype=np.float64)
        return {
            "obs": np.concatenate([s, g], axis=1),
            "action": self.actions[e, t],
            "reward": r,
            "next_obs": np.concatenate([s2, g], axis=1),
            "is_cf": is_cf,
            "swapped": swapped,
            "episode": e,
            "step": t,
            "future_step": f,
            "states": s,
            "next_states": s2,
        }
