"""The deterministic sparse-reward environments of the paper's experiments, as full next-state tables.

CliffWalking (4x12, fixed start), a CompILE-like grid (pick up ``visit_length`` objects in a given order,
start uniform over cells), the 8-puzzle (the 181,440 reachable boards) and the 2x2 Rubik's cube (3,674,160
states, one corner held fixed, clockwise quarter turns of F, R, U), each with the start distribution of the
official code (Section 5 of the paper; ``rldiff_envs.py``): scramble mixtures for the puzzles. The tables are
built without a Python loop over states: permutations are ranked by a vectorised Lehmer code, the cube's
corner permutation and orientation tables are built apart and combined by broadcasting.

A :class:`GoalTask` is the base environment; :meth:`GoalTask.mdp` gives the
:class:`~icml24.rl.value.tabular.DeterministicMDP` (reward 1 and termination on entering the goal), with
macroactions appended to the action space (:func:`icml24.rl.skills_theory.macros.augment`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

import numpy as np

from icml24.rl.value.tabular import DeterministicMDP, check_int

MacroSet = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class GoalTask:
    """A deterministic goal-reaching environment with its start distribution and macroaction priors."""

    name: str
    """Name used in tables."""
    next_state: np.ndarray = field(repr=False)
    """``(S, A)`` base next-state table; the goal row is absorbing (a macroaction stops at the goal)."""
    goal: int
    """Index of the goal state."""
    start: np.ndarray = field(repr=False)
    """``(S,)`` start distribution ``p`` (no mass on the goal)."""
    action_names: tuple[str, ...]
    """Names of the base actions."""
    macro_action_weights: tuple[tuple[float, tuple[int, ...], tuple[float, ...]], ...]
    """Random macroactions: pick a subspace with probability ``w``, then each action from ``actions`` with
    ``weights`` (the official ``--abs_base_action_weights``); one subspace of all actions = i.i.d. actions."""
    mean_macro_length: float
    """Mean length of a random macroaction (``2 + Geometric`` as in the official ``generate_abstractions``)."""
    hand_picked: tuple[MacroSet, ...] = ()
    """Hand-picked macroaction sets (our stand-in for the paper's LEMMA-learned sets)."""

    @property
    def n_states(self) -> int:
        return int(self.next_state.shape[0])

    @property
    def n_actions(self) -> int:
        return int(self.next_state.shape[1])

    def mdp(self, macros: MacroSet = ()) -> DeterministicMDP:
        """The goal MDP with ``macros`` appended to the base actions (one step each)."""
        from icml24.rl.skills_theory.macros import augment

        return DeterministicMDP.goal_reaching(augment(self.next_state, macros), self.goal, self.start)


def _absorbing(T: np.ndarray, goal: int) -> np.ndarray:
    T = T.copy()
    T[goal] = goal
    return T


# ------------------------------------------------------------------------------------------------ CliffWalking


def cliff_walking() -> GoalTask:
    """Gymnasium's CliffWalking as a table: 4x12 grid, start bottom-left, goal bottom-right, cliff between.

    Actions 0 up, 1 right, 2 down, 3 left (Gymnasium's order); walls keep the agent in place; stepping on the
    cliff sends it back to the start without ending the episode; the only reward is 1 on reaching the goal
    (the paper's sparse-reward version, ``RLDiffCliffWalkingEnv``).
    """
    rows, cols = 4, 12
    r, c = np.divmod(np.arange(rows * cols), cols)
    start_state, goal = 3 * cols, rows * cols - 1
    moves = [(-1, 0), (0, 1), (1, 0), (0, -1)]
    T = np.empty((rows * cols, 4), dtype=np.int64)
    for a, (dr, dc) in enumerate(moves):
        nr, nc = np.clip(r + dr, 0, rows - 1), np.clip(c + dc, 0, cols - 1)
        nxt = nr * cols + nc
        cliff = (nr == rows - 1) & (nc > 0) & (nc < cols - 1)
        T[:, a] = np.where(cliff, start_state, nxt)
    start = np.zeros(rows * cols)
    start[start_state] = 1.0
    hand = (
        ((1, 1),),
        ((1, 1, 1, 1),),
        ((0, *([1] * 11), 2),),
        ((0, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 2)),
        ((0, 1), (1, 1, 1)),
        ((1, 1), (1, 1, 1, 1), (1,) * 8),
    )
    # random macros move along two neighbouring directions, mostly up/right (as the official weights)
    weights = ((0.4, (0, 1), (0.3, 0.7)), (0.3, (1, 2), (0.7, 0.3)), (0.1, (2, 3), (0.7, 0.3)),
               (0.2, (3, 0), (0.3, 0.7)))  # fmt: skip
    return GoalTask("CliffWalking", _absorbing(T, goal), goal, start, ("up", "right", "down", "left"),
                    weights, 4.0, hand)  # fmt: skip


# ------------------------------------------------------------------------------------------------ CompILE grid


def compile_grid(
    *, seed: int = 1, size: int = 10, n_objects: int = 6, visit_length: int = 2, n_colours: int = 10
) -> GoalTask:
    """A CompILE-like grid world (Kipf et al., 2019; the paper's "CompILE2" with ``visit_length=2``).

    ``size x size`` cells with a wall border and up to 4 random interior wall segments (the interior stays
    connected); ``n_objects`` objects of random colours on distinct cells; the task is to pick up objects of
    ``visit_length`` given colours in order. Actions 0 left, 1 up, 2 right, 3 down, 4 pick up (removes the
    object under the agent; it counts only if it has the next colour). State = (cell, objects still on the
    board, colours collected so far); the start is uniform over free cells with every object on the board.
    """
    seed = check_int("seed", seed, 0)
    size = check_int("size", size, 4)
    n_objects = check_int("n_objects", n_objects, 1)
    visit_length = check_int("visit_length", visit_length, 1)
    n_colours = check_int("n_colours", n_colours, 1)
    if visit_length > n_objects:
        raise ValueError(f"visit_length must be <= n_objects = {n_objects}, got {visit_length}")
    if n_objects > (size - 2) ** 2 - 1:
        raise ValueError(f"n_objects must fit in the {size - 2}x{size - 2} interior, got {n_objects}")
    rng = np.random.default_rng(seed)
    inner = size - 2
    cells = rng.choice(inner * inner, size=n_objects, replace=False)
    obj_cells = [(int(i) // inner + 1, int(i) % inner + 1) for i in cells]
    colours = rng.integers(0, n_colours, size=n_objects)
    visit = rng.choice(colours, size=visit_length, replace=False)
    wall = np.zeros((size, size), dtype=bool)
    wall[0, :] = wall[-1, :] = wall[:, 0] = wall[:, -1] = True
    for _ in range(100):
        trial = wall.copy()
        for _ in range(int(rng.integers(0, 5))):
            x, y = int(rng.integers(1, size - 1)), int(rng.integers(1, size - 1))
            dx, dy = [(1, 0), (0, 1), (-1, 0), (0, -1)][int(rng.integers(4))]
            for i in range(int(rng.integers(1, 4))):
                px, py = x + dx * i, y + dy * i
                if 1 <= px < size - 1 and 1 <= py < size - 1 and (px, py) not in obj_cells:
                    trial[px, py] = True
        if _connected(~trial):
            wall = trial
            break
    free = np.argwhere(~wall)
    P = len(free)
    cell_index = -np.ones((size, size), dtype=np.int64)
    cell_index[free[:, 0], free[:, 1]] = np.arange(P)
    moves = [(-1, 0), (0, 1), (1, 0), (0, -1)]  # left, up, right, down in (x, y)
    neighbour = np.empty((P, 4), dtype=np.int64)
    for a, (dx, dy) in enumerate(moves):
        nx, ny = free[:, 0] + dx, free[:, 1] + dy
        blocked = wall[nx, ny]
        neighbour[:, a] = np.where(blocked, np.arange(P), cell_index[nx, ny])
    obj_at = -np.ones(P, dtype=np.int64)
    for j, (x, y) in enumerate(obj_cells):
        obj_at[cell_index[x, y]] = j
    n_masks = 1 << n_objects
    # state = (mask * visit_length + progress) * P + cell; the goal is one extra absorbing state
    mask, progress, cell = np.meshgrid(np.arange(n_masks), np.arange(visit_length), np.arange(P), indexing="ij")
    mask, progress, cell = mask.ravel(), progress.ravel(), cell.ravel()
    S = mask.size + 1
    goal = S - 1

    def index(m: np.ndarray, k: np.ndarray, c: np.ndarray) -> np.ndarray:
        return (m * visit_length + k) * P + c

    T = np.empty((S, 5), dtype=np.int64)
    for a in range(4):
        T[:-1, a] = index(mask, progress, neighbour[cell, a])
    j = obj_at[cell]
    present = (j >= 0) & ((mask >> np.maximum(j, 0)) & 1).astype(bool)
    right_colour = present & (colours[np.maximum(j, 0)] == visit[progress])
    new_mask = np.where(present, mask & ~(1 << np.maximum(j, 0)), mask)
    new_progress = progress + right_colour
    done = new_progress == visit_length
    T[:-1, 4] = np.where(done, goal, index(new_mask, np.minimum(new_progress, visit_length - 1), cell))
    T[goal] = goal
    start = np.zeros(S)
    start[index(np.full(P, n_masks - 1), np.zeros(P, dtype=np.int64), np.arange(P))] = 1.0 / P
    hand = (
        ((2, 2),),
        ((1, 1), (2, 2)),
        ((2, 2, 2, 4),),
        ((1, 1, 1), (3, 3, 3), (0, 0, 0), (2, 2, 2)),
        ((2, 4), (1, 4), (0, 4), (3, 4)),
        ((2, 2), (1, 1), (2, 2, 2, 2, 4)),
    )
    weights = tuple((0.25, (d, (d + 1) % 4, 4), (0.4, 0.4, 0.2)) for d in range(4))
    return GoalTask(f"CompILE{visit_length}", T, goal, start, ("left", "up", "right", "down", "pick up"),
                    weights, 4.0, hand)  # fmt: skip


def _connected(open_cells: np.ndarray) -> bool:
    cells = np.argwhere(open_cells)
    seen = np.zeros_like(open_cells)
    seen[tuple(cells[0])] = True
    frontier = seen.copy()
    while frontier.any():
        grow = np.zeros_like(frontier)
        grow[1:] |= frontier[:-1]
        grow[:-1] |= frontier[1:]
        grow[:, 1:] |= frontier[:, :-1]
        grow[:, :-1] |= frontier[:, 1:]
        frontier = grow & open_cells & ~seen
        seen |= frontier
    return bool(seen.sum() == open_cells.sum())


# ------------------------------------------------------------------------------------------------ permutations


def permutation_rank(perms: np.ndarray) -> np.ndarray:
    """Lexicographic rank of each row of ``perms`` (a permutation of ``0..n-1``), by the Lehmer code
    ``sum_i #{j > i: p_j < p_i} (n-1-i)!``; vectorised over rows."""
    perms = np.asarray(perms)
    if perms.ndim != 2:
        raise ValueError(f"perms must be a 2-d array of permutations, got shape {perms.shape}")
    n = perms.shape[1]
    later = np.triu(np.ones((n, n), dtype=bool), 1)  # later[i, j]: j > i
    smaller_later = ((perms[:, None, :] < perms[:, :, None]) & later).sum(2)
    weights = np.array([math.factorial(n - 1 - i) for i in range(n)], dtype=np.int64)
    return smaller_later @ weights


def all_permutations(n: int) -> np.ndarray:
    """All ``n!`` permutations of ``0..n-1`` in lexicographic order (row ``k`` has rank ``k``)."""
    return np.array(list(permutations(range(n))), dtype=np.int8)


def _scramble_mixture(T: np.ndarray, goal: int, max_length: int) -> np.ndarray:
    """The start distribution of the official N-puzzle env: a random walk from the goal whose steps are uniform
    over the actions that change the state, of length uniform in ``1..max_length``; the goal's own mass is
    removed and the rest renormalised."""
    S = T.shape[0]
    moves = T != np.arange(S)[:, None]
    branching = moves.sum(1)
    p = np.zeros(S)
    p[goal] = 1.0
    total = np.zeros(S)
    src, dst = np.nonzero(moves)
    dst = T[src, dst]
    for _ in range(max_length):
        p = np.bincount(dst, weights=p[src] / branching[src], minlength=S)
        total += p
    total[goal] = 0.0
    return total / total.sum()


EIGHT_PUZZLE_GODS_NUMBER = 31
"""Largest optimal solution length of the 8-puzzle (blank in a corner in the goal)."""


def eight_puzzle() -> GoalTask:
    """The 8-puzzle: the 181,440 boards reachable from the solved board ``1..8`` with the blank last.

    Actions move the blank 0 up, 1 right, 2 down, 3 left (no-op at an edge, as in the official env). Start: the
    official scramble mixture (lengths uniform in ``1..31``, God's number). All ``9!`` boards are enumerated in
    lexicographic order, each move is applied to all boards at once and ranked by the Lehmer code, and the
    solvable half is kept by a BFS from the goal.
    """
    boards = all_permutations(9)  # boards[k, cell] = tile (0 = blank), rank k
    N = boards.shape[0]
    blank = np.argmax(boards == 0, axis=1)
    r, c = np.divmod(blank, 3)
    rows = np.arange(N)
    T_full = np.empty((N, 4), dtype=np.int64)
    for a, (dr, dc) in enumerate([(-1, 0), (0, 1), (1, 0), (0, -1)]):
        nr, nc = r + dr, c + dc
        legal = (nr >= 0) & (nr < 3) & (nc >= 0) & (nc < 3)
        target = np.where(legal, nr * 3 + nc, blank)
        nxt = boards.copy()
        nxt[rows, blank] = boards[rows, target]
        nxt[rows, target] = 0
        T_full[:, a] = np.where(legal, permutation_rank(nxt), rows)
    goal_full = int(permutation_rank(np.array([[1, 2, 3, 4, 5, 6, 7, 8, 0]]))[0])
    from icml24.rl.skills_theory.difficulty import goal_distances

    keep = np.isfinite(goal_distances(T_full, goal_full))  # moves are reversible: reachable = can reach goal
    new_index = -np.ones(N, dtype=np.int64)
    new_index[keep] = np.arange(keep.sum())
    T = new_index[T_full[keep]]
    goal = int(new_index[goal_full])
    start = _scramble_mixture(T, goal, EIGHT_PUZZLE_GODS_NUMBER)
    hand = (((1, 2),), ((3, 2, 1),), ((1, 2), (2, 1)), ((3, 2, 1), (0, 1, 2)), ((0, 1, 2, 3),),
            ((1, 2), (2, 1), (3, 0), (0, 3)))  # fmt: skip
    weights = ((1.0, (0, 1, 2, 3), (0.2, 0.3, 0.3, 0.2)),)
    return GoalTask("8-puzzle", T, goal, start, ("blank up", "blank right", "blank down", "blank left"),
                    weights, 3.0, hand)  # fmt: skip


# ------------------------------------------------------------------------------------------------ 2x2 cube

# Corner cubies URF, UFL, ULB, UBR, DFR, DLF, DBL, DRB; a move is (permutation, orientation change) in the
# "is replaced by" convention: (s * m).cp[i] = s.cp[m.cp[i]], (s * m).co[i] = s.co[m.cp[i]] + m.co[i] (mod 3).
_CUBE_MOVES = {
    "F": ((1, 5, 2, 3, 0, 4, 6, 7), (1, 2, 0, 0, 2, 1, 0, 0)),
    "R": ((4, 1, 2, 0, 7, 5, 6, 3), (2, 0, 0, 1, 1, 0, 0, 2)),
    "U": ((3, 0, 1, 2, 4, 5, 6, 7), (0, 0, 0, 0, 0, 0, 0, 0)),
}
_MOVABLE = np.array([0, 1, 2, 3, 4, 5, 7])  # DBL (6) never moves under F, R, U: it fixes the cube's rotation
CUBE_MAX_SCRAMBLE = 11
"""Largest scramble length of the official 2x2 env (God's number in the half-turn metric)."""


def rubiks_cube_222() -> GoalTask:
    """The 2x2x2 Rubik's cube with the DBL corner fixed: ``7! * 3^6 = 3,674,160`` states, actions the clockwise
    quarter turns 0 F, 1 R, 2 U (the official env's action space).

    The state factors into the corner permutation (rank in ``7!``) and orientation (6 base-3 digits; the 7th is
    fixed by the sum rule), and a move acts on the orientation independently of the permutation, so each move's
    table is ``perm_table[p] * 729 + ori_table[o]`` built from a 5040-row and a 729-row table. Start: scrambles
    of length uniform in ``1..11`` of face turns (F, R, U by 1, 2 or 3 quarter turns, never the same face
    twice in a row), as the official ``generate_scramble``; the goal's own mass is removed.
    """
    perms = all_permutations(7).astype(np.int64)  # slot -> movable corner (relabelled 0..6)
    digits = np.array(np.meshgrid(*[np.arange(3)] * 6, indexing="ij")).reshape(6, -1).T  # (729, 6), base-3
    ori = np.concatenate([digits, (-digits.sum(1, keepdims=True)) % 3], axis=1)
    place = {int(c): i for i, c in enumerate(_MOVABLE)}
    T = np.empty((5040 * 729, 3), dtype=np.int32)
    pow3 = 3 ** np.arange(5, -1, -1)
    for a, name in enumerate(("F", "R", "U")):
        cp, co = _CUBE_MOVES[name]
        mcp = np.array([place[cp[int(c)]] for c in _MOVABLE])
        mco = np.array([co[int(c)] for c in _MOVABLE])
        p_next = permutation_rank(perms[:, mcp])
        o_next = ((ori[:, mcp] + mco) % 3)[:, :6] @ pow3
        T[:, a] = (p_next[:, None] * 729 + o_next[None, :]).ravel()
    goal = 0  # identity permutation (rank 0), zero orientation (index 0)
    start = _cube_scramble_mixture(T, goal)
    hand = (((0, 1),), ((0, 0),), ((0, 0, 0), (1, 1, 1), (2, 2, 2)), ((1, 2, 1, 1, 1, 2, 2, 2),),
            ((0, 0), (1, 1), (2, 2)), ((1, 2), (2, 1)))  # fmt: skip
    weights = ((1.0, (0, 1, 2), (1 / 3, 1 / 3, 1 / 3)),)
    return GoalTask("2x2 cube", T, goal, start, ("F", "R", "U"), weights, 3.0, hand)


def _cube_scramble_mixture(T: np.ndarray, goal: int) -> np.ndarray:
    S, F = T.shape
    powers = [T[:, f] for f in range(F)]
    turn_tables = []
    for f in range(F):
        t1 = powers[f].astype(np.int64)
        t2 = t1[t1]
        t3 = t1[t2]
        turn_tables.append((t1, t2, t3))
    # p[s, f]: probability of s after the scramble so far with last face f; the start spreads the "previous
    # face" uniformly so that the first face is uniform (the official code's trick)
    p = np.zeros((S, F))
    p[goal] = 1.0 / F
    total = np.zeros(S)
    for _ in range(CUBE_MAX_SCRAMBLE):
        new = np.zeros((S, F))
        row_sum = p.sum(1)
        for f in range(F):
            src = (row_sum - p[:, f]) / ((F - 1) * 3)  # a different face, then one of 3 turn amounts
            for table in turn_tables[f]:
                new[:, f] += np.bincount(table, weights=src, minlength=S)
        p = new
        total += p.sum(1)
    total[goal] = 0.0
    return total / total.sum()


def make_task(name: str, **kwargs: Any) -> GoalTask:
    """One of ``"cliff"``, ``"compile"``, ``"8puzzle"``, ``"cube"`` by name."""
    builders = {"cliff": cliff_walking, "compile": compile_grid, "8puzzle": eight_puzzle, "cube": rubiks_cube_222}
    if name not in builders:
        raise ValueError(f"name must be one of {sorted(builders)}, got {name!r}")
    return builders[name](**kwargs)
