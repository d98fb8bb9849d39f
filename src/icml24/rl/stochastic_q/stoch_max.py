"""Stochastic maximisation over a sublinear random candidate set plus memory.

Fourati, Aggarwal, Alouini. "Stochastic Q-learning for Large Discrete Action Spaces". ICML 2024
(PMLR 235:13734-13759), https://arxiv.org/abs/2405.10310.

Instead of ``max_{b in A} Q(s, b)`` over all ``n`` actions, the stochastic max scores only a candidate set
``C = R u M``: ``R`` is a fresh uniform random subset of ``|R| = ceil(log2 n)`` actions drawn without
replacement, ``M`` a small memory of actions that looked good before (Section 4 of the paper):

    stoch_max_{b in A} Q(s, b) := max_{b in C} Q(s, b),      stoch_argmax analogously.

Closed forms checked by the tests and the reproduction (Section 5): if an argmax lies in ``C`` the stochastic
max is exact; ``P(argmax in R) = |R| / n``; the probability that ``R`` holds one of the top ``m`` actions is
the hypergeometric ``1 - C(n - m, |R|) / C(n, |R|)``; with a fixed ``Q`` and a memory that keeps the previous
stochastic argmax, the sequence of stochastic maxima never decreases and reaches the max with probability 1.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import gammaln

from icml24.rl.value.tabular import exact_max


def _check_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int ``>= minimum``; a clear TypeError/ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def candidate_size(n_actions: int) -> int:
    """The paper's random-set size ``ceil(log2 n)`` (at least 1)."""
    n_actions = _check_int("n_actions", n_actions, 1)
    return max(1, math.ceil(math.log2(n_actions))) if n_actions > 1 else 1


def _check_k(k: int, n: int) -> int:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise TypeError(f"candidate-set size k must be an int, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"candidate-set size k must be >= 1, got {k}")
    return int(min(k, n))


def sample_without_replacement(n: int, k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` independent uniform ``k``-subsets of ``range(n)``, shape ``(size, k)``, in O(size * k) work.

    For ``k << n``: draw with replacement and redraw the duplicates of each row (vectorised rejection); for
    large ``k`` fall back to the ``k`` smallest of ``n`` random keys. Both give uniform subsets.
    """
    n = _check_int("n", n, 1)
    size = _check_int("size", size, 0)
    _check_rng(rng)
    k = _check_k(k, n)
    if 4 * k > n:
        return np.argpartition(rng.random((size, n)), k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (size, 1))
    out = rng.integers(0, n, (size, k))
    while True:
        srt = np.sort(out, axis=1)
        dup_rows = np.nonzero((srt[:, 1:] == srt[:, :-1]).any(1))[0]
        if dup_rows.size == 0:
            return out
        # redraw whole rows that collided: keeps each accepted row uniform over k-subsets (ordered draws)
        out[dup_rows] = rng.integers(0, n, (dup_rows.size, k))


def stochastic_max(
    q: np.ndarray, k: int, rng: np.random.Generator, memory: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Row-wise ``max`` and ``argmax`` of ``q`` (``(B, n)``) over ``R u M``.

    Args:
        q: the values of every action (finite; only the candidates' entries are read after the check).
        k: ``|R|``; ``k >= n`` means the exact max.
        rng: random generator for ``R``.
        memory: ``(B, m)`` integer memory actions per row; ``-1`` marks an empty slot.

    Returns:
        ``(values (B,), argmax (B,), evaluations)`` where ``evaluations`` counts the Q entries read.
    """
    q = np.asarray(q)
    if q.ndim != 2 or q.shape[1] < 1:
        raise ValueError(f"q must be (batch, n_actions) with n_actions >= 1, got shape {q.shape}")
    if q.dtype.kind not in "biuf":
        raise TypeError(f"q must hold real numbers, got dtype {q.dtype}")
    if not np.all(np.isfinite(q)):
        raise ValueError("q must be finite (a NaN Q value has no max)")
    _check_rng(rng)
    k = _check_k(k, q.shape[1])
    if memory is not None:
        mem = np.asarray(memory)
        if mem.dtype.kind not in "iu":
            raise TypeError(f"memory must hold integer action indices (-1 = empty), got dtype {mem.dtype}")
        if mem.size % max(q.shape[0], 1) != 0:
            raise ValueError(f"memory must have {q.shape[0]} rows, got shape {mem.shape}")
        memory = mem.astype(np.int64).reshape(q.shape[0], -1)
        if np.any(memory >= q.shape[1]) or np.any(memory < -1):
            raise ValueError(f"memory actions must be in [0, {q.shape[1]}) or -1 (empty)")
    return _stochastic_max(q, k, rng, memory)


def _stochastic_max(
    q: np.ndarray, k: int, rng: np.random.Generator, memory: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`stochastic_max` without the O(B n) input checks (the learners' hot path reads O(B k) entries)."""
    B, n = q.shape
    if k >= n:
        a = q.argmax(1)
        return q[np.arange(B), a], a, q.size
    cand = sample_without_replacement(n, k, B, rng)
    valid = np.ones(cand.shape, dtype=bool)
    if memory is not None:
        cand = np.concatenate([cand, np.maximum(memory, 0)], axis=1)
        valid = np.concatenate([valid, memory >= 0], axis=1)
    vals = np.where(valid, np.take_along_axis(q, cand, 1), -np.inf)
    j = vals.argmax(1)
    rows = np.arange(B)
    return vals[rows, j], cand[rows, j], int(valid.sum())


N_MEMORY_SLOTS = 3
"""Memories a :class:`StochasticMaximizer` keeps: one per Q function that (Double) Q-learning maximises."""


class StochasticMaximizer:
    """The tabular stochastic max with a per-state memory of the previous stochastic argmax.

    A :class:`icml24.rl.value.tabular.Maximizer`: called with the Q rows of ``(run, state)`` pairs; the memory
    ``M(slot, run, state)`` holds the last stochastic argmax returned for that state (the paper's memory of recent
    maximisers), so a fixed ``Q`` gives a non-decreasing stochastic max. ``slot`` names the Q function the rows
    come from: Double Q-learning maximises three different functions (the acting sum ``Q^A + Q^B`` in slot 0,
    ``Q^A`` and ``Q^B`` for the update in slots 1 and 2), and each keeps its own memory. (A single memory shared
    by the three let one table's argmax stand in as the other's remembered maximiser: Stochastic Double
    Q-learning then plateaued at about 0.83 of V* on the Garnet MDP instead of converging to 0.99.)

    Args:
        n_runs: number of parallel runs (rows of the batch).
        n_states: number of states (memory slots per run).
        k: ``|R|`` (``None``: ``ceil(log2 n)``, resolved at the first call).
        use_memory: keep and use the memory set ``M``.
    """

    def __init__(self, *, n_runs: int, n_states: int, k: int | None = None, use_memory: bool = True) -> None:
        n_runs = _check_int("n_runs", n_runs, 1)
        n_states = _check_int("n_states", n_states, 1)
        if not isinstance(use_memory, bool):
            raise TypeError(f"use_memory must be True or False, got {use_memory!r}")
        if k is not None:
            _check_k(k, 1 << 62)
        self.k = k
        self.use_memory = use_memory
        self.memories = np.full((N_MEMORY_SLOTS, n_runs, n_states), -1, dtype=np.int64)
        self._rows = np.arange(n_runs)

    @property
    def memory(self) -> np.ndarray:
        """The memory of slot 0 (the acting Q function, and the only one Q-learning uses): ``(n_runs, n_states)``."""
        return self.memories[0]

    def __call__(
        self, q: np.ndarray, states: np.ndarray, rng: np.random.Generator, slot: int | np.ndarray = 0
    ) -> tuple[np.ndarray, ...]:
        # An int slot (every acting call) is checked with a plain comparison: this is the tabular hot path.
        if isinstance(slot, (int, np.integer)) and not isinstance(slot, bool):
            if not 0 <= slot < N_MEMORY_SLOTS:
                raise ValueError(f"slot must be an int (or one int per row) in [0, {N_MEMORY_SLOTS}), got {slot!r}")
        else:
            slot = np.asarray(slot)
            if slot.dtype.kind not in "iu" or slot.ndim > 1 or ((slot < 0) | (slot >= N_MEMORY_SLOTS)).any():
                raise ValueError(f"slot must be an int (or one int per row) in [0, {N_MEMORY_SLOTS}), got {slot!r}")
        k = self.k if self.k is not None else candidate_size(q.shape[1])
        if k >= q.shape[1]:
            # Full candidate set: the exact max with the exact learner's random tie-breaking (and rng draws), so
            # Stochastic (Double) Q-learning with |R| = n is Watkins' (Double) Q-learning bit for bit.
            v, a, ev = exact_max(q, states, rng)
        else:
            mem = self.memories[slot, self._rows, states][:, None] if self.use_memory else None
            v, a, ev = _stochastic_max(q, k, rng, mem)
        if self.use_memory:
            self.memories[slot, self._rows, states] = a
        return v, a, ev


class StochasticCandidates:
    """The deep candidate sampler (for :class:`icml24.rl.value.DQNAgent`): ``C = R u M``.

    ``R``: ``k`` uniform actions without replacement; ``M``: the actions of the replay minibatch (the official
    code's memory, ``memory="batch"``) or none (``memory="none"``). ``k >= n`` returns every action in order
    without drawing random numbers, so the agent is then exactly DQN/DDQN, bit for bit.
    """

    def __init__(self, k: int | None = None, memory: str = "batch") -> None:
        if k is not None:
            _check_k(k, 1 << 62)
        if memory not in ("batch", "none"):
            raise ValueError(f"memory must be 'batch' or 'none', got {memory!r}")
        self.k, self.memory = k, memory

    def __call__(self, n_actions: int, memory: torch.Tensor | None, generator: torch.Generator) -> torch.Tensor:
        k = self.k if self.k is not None else candidate_size(n_actions)
        if k >= n_actions:
            return torch.arange(n_actions)
        r = torch.randperm(n_actions, generator=generator)[:k] if 4 * k > n_actions else _torch_subset(
            n_actions, k, generator
        )
        if self.memory == "batch" and memory is not None:
            r = torch.unique(torch.cat([r, memory.reshape(-1).to(torch.int64)]))
        return r


def _torch_subset(n: int, k: int, generator: torch.Generator) -> torch.Tensor:
    while True:
        r = torch.randint(n, (k,), generator=generator)
        if torch.unique(r).numel() == k:
            return r


def p_argmax_in_random_set(n: int, k: int) -> float:
    """``P(a fixed argmax in R) = k / n`` for a uniform ``k``-subset ``R`` of ``n`` actions (``k >= n``: 1)."""
    n = _check_int("n", n, 1)
    k = _check_int("k", k, 1)
    return min(k, n) / n


def p_top_m_in_random_set(n: int, k: int, m: int) -> float:
    """``P(R contains at least one of the top m actions) = 1 - C(n - m, k) / C(n, k)`` (hypergeometric).

    ``0 <= m <= n``; ``m = 0`` gives 0 and ``k >= n - m + 1`` gives 1 (pigeonhole)."""
    n = _check_int("n", n, 1)
    k = _check_int("k", k, 1)
    m = _check_int("m", m, 0)
    if m > n:
        raise ValueError(f"m must be <= n = {n}, got {m}")
    k = min(k, n)
    if m == 0:
        return 0.0
    if n - m < k:
        return 1.0
    log_ratio = gammaln(n - m + 1) - gammaln(n - m - k + 1) - gammaln(n + 1) + gammaln(n - k + 1)
    return float(1.0 - np.exp(log_ratio))
