"""Macroaction augmentation (Section 2 of the paper): ``A+ = A u {macroactions}``, a macroaction being a fixed
sequence of base actions executed as one step of the augmented MDP.

The augmented table is the composition ``T+(s, m) = T(...T(T(s, m_1), m_2)..., m_k)``, computed for all states
at once (``k`` gathers per macroaction). The goal row of the base table is absorbing, so a macroaction whose
execution passes through the goal stops there (the episode ends when the goal is reached).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from icml24.rl.skills_theory.difficulty import check_table
from icml24.rl.value.tabular import check_int


def check_macros(macros: object, n_base_actions: int) -> tuple[tuple[int, ...], ...]:
    """``macros`` as a tuple of non-empty tuples of base-action indices, or a clear error."""
    if isinstance(macros, (str, bytes)) or not isinstance(macros, Sequence):
        raise TypeError(f"macros must be a sequence of action sequences, got {type(macros).__name__}")
    out = []
    for m in macros:
        if isinstance(m, (str, bytes)) or not isinstance(m, Sequence) or len(m) == 0:
            raise ValueError(f"macros must hold non-empty sequences of base actions, got {m!r}")
        for a in m:
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not 0 <= a < n_base_actions:
                raise ValueError(f"macros entries must be base actions in [0, {n_base_actions}), got {a!r}")
        out.append(tuple(int(a) for a in m))
    return tuple(out)


def augment(next_state: np.ndarray, macros: Sequence[Sequence[int]]) -> np.ndarray:
    """The ``(S, A + len(macros))`` table of the base actions followed by the macroactions."""
    T = check_table(next_state)
    ms = check_macros(macros, T.shape[1])
    out = np.empty((T.shape[0], T.shape[1] + len(ms)), dtype=T.dtype)
    out[:, : T.shape[1]] = T
    for j, m in enumerate(ms):
        s = T[:, m[0]]
        for a in m[1:]:
            s = T[s, a]
        out[:, T.shape[1] + j] = s
    return out


def random_macros(
    rng: np.random.Generator,
    n_macros: int,
    *,
    action_weights: Sequence[tuple[float, Sequence[int], Sequence[float]]],
    mean_length: float,
) -> tuple[tuple[int, ...], ...]:
    """``n_macros`` distinct random macroactions, as the official ``generate_abstractions``: length
    ``2 + Geometric(1 / (mean_length - 1)) - 1`` (at least 2, mean ``mean_length``); actions drawn by picking a
    subspace ``(w, actions, weights)`` with probability ``w`` and then each action from it by ``weights``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    n_macros = check_int("n_macros", n_macros, 0)
    if isinstance(mean_length, bool) or not isinstance(mean_length, (int, float)) or not 2 < mean_length < 1e6:
        raise ValueError(f"mean_length must be a number in (2, 1e6), got {mean_length!r}")
    if not action_weights:
        raise ValueError("action_weights must list at least one (weight, actions, action weights) subspace")
    w = np.array([float(x[0]) for x in action_weights])
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise ValueError("action_weights' subspace weights must be >= 0 and sum to 1")
    out: list[tuple[int, ...]] = []
    for _ in range(1000 * (n_macros + 1)):
        if len(out) == n_macros:
            break
        length = int(rng.geometric(1.0 / (mean_length - 1.0))) + 1
        _, actions, aw = action_weights[int(rng.choice(len(action_weights), p=w))]
        seq = tuple(int(a) for a in rng.choice(np.asarray(actions), size=length, p=np.asarray(aw, dtype=float)))
        if seq not in out:
            out.append(seq)
    return tuple(out)


def macroaction_variants(
    task: Any, seed: int, *, sets_per_size: int = 5, max_size: int = 5
) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """The paper's 32 action spaces of one base environment (Section 5; the official ``compute_envinfo`` with
    ``--n_abs_spaces_per_size 1 5 5 5 5 5`` plus 6 extra sets): the base action space, the task's 6
    hand-picked macroaction sets, and ``sets_per_size`` random sets of each size ``1..max_size`` drawn by
    :func:`random_macros` from ``seed``. Returns ``(label, macros)`` pairs, the base first."""
    seed = check_int("seed", seed, 0)
    sets_per_size = check_int("sets_per_size", sets_per_size, 0)
    max_size = check_int("max_size", max_size, 0)
    rng = np.random.default_rng([seed, sum(map(ord, task.name))])
    out: list[tuple[str, tuple[tuple[int, ...], ...]]] = [("base", ())]
    out += [(f"hand-picked {i + 1}", check_macros(ms, task.n_actions)) for i, ms in enumerate(task.hand_picked)]
    for size in range(1, max_size + 1):
        for j in range(sets_per_size):
            ms = random_macros(rng, size, action_weights=task.macro_action_weights, mean_length=task.mean_macro_length)
            out.append((f"random {size}x{j + 1}", ms))
    return out
