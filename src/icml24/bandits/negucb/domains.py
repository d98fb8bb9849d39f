"""Negotiation domains as combinatorial bid sets: multi-issue, trading and allocation.

Li, Mu, Qi. *A Contextual Combinatorial Bandit Approach to Negotiation*. ICML 2024, PMLR 235:28448-28465,
https://arxiv.org/abs/2407.00567. The paper's Figure 1 names three negotiation problems: trading (one price),
resource allocation (a split of items) and multi-issue negotiation (one value per issue). In the bandit
formulation a bid is a *super arm* made of base arms (issue values, item units, price levels); the learner sees
the bid's base-arm encoding ``b(S)`` and, after proposing it, one accept/reject outcome (full-bandit feedback).

A domain here is the bid *structure* shared by all trials (every feasible bid enumerated, its encoding and its
one-move neighbours for the candidate pool) plus a sampler of per-trial utilities: the agent's own utility
``U(S)`` in [0, 1] (known to the agent) and two opponent preference profiles ``p_0(S), p_1(S)`` in [0, 1]
(hidden); an opponent with observed profile weight ``m`` values a bid at ``u_o(S) = (1 - m) p_0(S) + m p_1(S)``.
The paper's domains (ANAC scenarios, Deal-or-No-Deal, its trading task) were not available offline, so these
are generated in code (see the README's deviations).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .._checks import non_negative_float, positive_int


def _minmax(x: np.ndarray) -> np.ndarray:
    """Scale each row to [0, 1] (a constant row becomes 0.5)."""
    lo = x.min(axis=-1, keepdims=True)
    span = x.max(axis=-1, keepdims=True) - lo
    return np.where(span > 0, (x - lo) / np.where(span > 0, span, 1.0), 0.5)


def _neighbour_table(points: np.ndarray, sizes: tuple[int, ...], step_only: bool) -> np.ndarray:
    """Rows of ``points`` (mixed-radix coordinates) one move apart: change one coordinate.

    ``step_only``: the move is +-1 (ordered coordinates: quantities, price levels); otherwise any other value
    (unordered issue values). Padded with -1.
    """
    radix = np.cumprod((1,) + tuple(reversed(sizes)))[:-1][::-1]
    rows = []
    for i, k in enumerate(sizes):
        deltas = (-1, 1) if step_only else range(1, k)
        for d in deltas:
            moved = points[:, i] + d if step_only else (points[:, i] + d) % k
            ok = (moved >= 0) & (moved < k)
            idx = points @ radix + (moved - points[:, i]) * radix[i]
            rows.append(np.where(ok, idx, -1))
    return np.stack(rows, axis=1).astype(np.intp)


@dataclass(frozen=True)
class Domain:
    """The structure of a bid set, shared by every trial.

    Attributes:
        name: what the domain is.
        points: each bid's coordinates (issue values, quantities or price level), shape (n_bids, n_coords).
        encodings: the base-arm encoding ``b(S)`` of each bid, shape (n_bids, n_base), entries in [0, 1].
        neighbours: bids one move away (one coordinate changed), shape (n_bids, n_moves), -1 padded.
    """

    name: str
    points: np.ndarray
    encodings: np.ndarray
    neighbours: np.ndarray
    sizes: tuple[int, ...] = field(default=())

    @property
    def n_bids(self) -> int:
        return int(self.encodings.shape[0])

    def sample_utilities(self, n_trials: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Per-trial own utilities (n_trials, n_bids) and opponent profiles (n_trials, 2, n_bids), all in [0, 1]."""
        raise NotImplementedError


class MultiIssueDomain(Domain):
    """``n_issues`` issues with ``n_values`` values each: ``n_values ** n_issues`` bids (the full grid).

    Own utility: linear-additive with random weights and value scores plus a pairwise interaction term of
    strength ``interaction`` (so it is not linear in the base arms), min-max scaled to [0, 1] over the bids.
    Opponent profiles: ``p_0`` additive with value scores opposed to ours (``1 - a`` plus noise), ``p_1`` an
    independent random additive profile.
    """

    def __init__(self, *, n_issues: int = 3, n_values: int = 4, interaction: float = 0.3) -> None:
        n_issues = positive_int(n_issues, "n_issues")
        n_values = positive_int(n_values, "n_values")
        if n_values < 2:
            raise ValueError(f"n_values must be >= 2 (one value per issue is not a negotiation), got {n_values}")
        if n_values**n_issues > 200_000:
            raise ValueError(f"n_values ** n_issues must be <= 200000 bids, got {n_values**n_issues}")
        interaction = non_negative_float(interaction, "interaction")
        sizes = (n_values,) * n_issues
        points = np.array(list(itertools.product(range(n_values), repeat=n_issues)), dtype=np.intp)
        enc = np.zeros((points.shape[0], n_issues * n_values))
        enc[np.arange(points.shape[0])[:, None], np.arange(n_issues) * n_values + points] = 1.0
        super().__init__(f"multi-issue {n_issues}x{n_values}", points, enc, _neighbour_table(points, sizes, False),
                         sizes)  # fmt: skip
        object.__setattr__(self, "interaction", interaction)

    def sample_utilities(self, n_trials: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n_issues, n_values = len(self.sizes), self.sizes[0]
        pts = self.points
        issue = np.arange(n_issues)

        def additive(scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
            # scores (N, I, V), weights (N, I) -> (N, n_bids)
            return (weights[:, None, :] * scores[:, issue, pts]).sum(axis=2)

        scores = rng.uniform(0, 1, (n_trials, n_issues, n_values))
        weights = rng.dirichlet(np.ones(n_issues), n_trials)
        own = additive(scores, weights)
        if n_issues >= 2 and self.interaction > 0:
            pairs = list(itertools.combinations(range(n_issues), 2))
            inter = rng.uniform(-1, 1, (n_trials, len(pairs), n_values, n_values))
            for p, (i, j) in enumerate(pairs):
                own = own + self.interaction / len(pairs) * inter[:, p, pts[:, i], pts[:, j]]
        opposed = np.clip(1 - scores + 0.15 * rng.standard_normal(scores.shape), 0, 1)
        p0 = additive(opposed, rng.dirichlet(np.ones(n_issues), n_trials))
        p1 = additive(rng.uniform(0, 1, scores.shape), rng.dirichlet(np.ones(n_issues), n_trials))
        return _minmax(own), np.stack([_minmax(p0), _minmax(p1)], axis=1)


class TradingDomain(Domain):
    """One price in ``n_levels`` levels on [0, 1]; we sell: ``U(p) = p``, the buyer values ``1 - p``.

    The buyer's types differ in how far and how fast it concedes (the environment's ``types``); its utility
    over prices is the same for both profiles, so ``m`` carries no information here.
    """

    def __init__(self, *, n_levels: int = 50) -> None:
        n_levels = positive_int(n_levels, "n_levels")
        if n_levels < 2:
            raise ValueError(f"n_levels must be >= 2, got {n_levels}")
        points = np.arange(n_levels, dtype=np.intp)[:, None]
        price = points[:, 0] / (n_levels - 1)
        super().__init__(f"trading {n_levels} prices", points, price[:, None].astype(float),
                         _neighbour_table(points, (n_levels,), True), (n_levels,))  # fmt: skip

    def sample_utilities(self, n_trials: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        price = self.encodings[:, 0]
        own = np.broadcast_to(price, (n_trials, price.size)).copy()
        buyer = np.broadcast_to(1 - price, (n_trials, 2, price.size)).copy()
        return own, buyer


class AllocationDomain(Domain):
    """Split ``counts[i]`` units of each item type (Deal-or-No-Deal style): a bid is how many of each we take.

    ``prod(counts + 1)`` bids. Own utility ``v . x / v . n`` with random item values ``v``; the opponent gets
    ``n - x`` and values it with ``w_0`` (values opposed to ours plus noise) or ``w_1`` (independent). The
    encoding is unary per item (``x_i >= j`` for ``j = 1..n_i``), so nearby splits have nearby encodings.
    """

    def __init__(self, *, counts: tuple[int, ...] = (2, 3, 4)) -> None:
        if isinstance(counts, (str, bytes)) or not hasattr(counts, "__iter__"):
            raise TypeError(f"counts must be a sequence of ints >= 1, got {counts!r}")
        counts = tuple(positive_int(c, "counts") for c in counts)
        if not counts:
            raise ValueError("counts must name at least one item type")
        sizes = tuple(c + 1 for c in counts)
        points = np.array(list(itertools.product(*(range(s) for s in sizes))), dtype=np.intp)
        enc = np.concatenate([(points[:, [i]] >= np.arange(1, c + 1)[None, :]).astype(float)
                              for i, c in enumerate(counts)], axis=1)  # fmt: skip
        super().__init__(f"allocation {counts}", points, enc, _neighbour_table(points, sizes, True), sizes)
        object.__setattr__(self, "counts", counts)

    def sample_utilities(self, n_trials: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = np.asarray(self.counts, dtype=float)
        x = self.points.astype(float)
        v = rng.uniform(0.1, 1, (n_trials, n.size))
        own = (v @ x.T) / (v @ n)[:, None]
        w0 = np.clip(1.1 - v + 0.1 * rng.standard_normal(v.shape), 0.05, None)
        w1 = rng.uniform(0.1, 1, v.shape)
        opp = [(w @ (n - x).T) / (w @ n)[:, None] for w in (w0, w1)]
        return own, np.stack(opp, axis=1)
