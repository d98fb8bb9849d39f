"""Simulated decision-makers who are shown prediction sets: a model of the trial, not the trial.

"Conformal Prediction Sets Improve Human Decision Making" (Cresswell et al., ICML 2024,
https://arxiv.org/abs/2401.13744) measured people. Here a *simulated* participant answers each item from
their own noisy knowledge ``h(y | x)`` combined with the set shown, by a decision rule stated below. Every
conclusion drawn from this simulation follows from the rule assumed; it is evidence about the mechanism
(can calibrated, variable-size sets help a reader who uses set size as a confidence cue?), not about people.

Knowledge. Each participant ``j`` has a skill ``beta_j`` and sees ``h_j(y | x) ∝ q(y | x)^beta_j
exp(sigma eps_{j,x,y})``: a weak classifier ``q`` trained on a different, degraded view of the input
(the human's "own knowledge"), sharpened by skill and perturbed by independent Gaussian noise per item.

Decision rules (``rule``):

- ``"bayes"`` (set-reader): the participant knows the set covers the truth with probability ``c`` (the
  arm's calibration coverage, equal in both arms by construction) and reads the set as a prior
  ``pi(y) = c / |C|`` inside ``C`` and ``(1 - c) / (K - |C|)`` outside, then answers
  ``argmax_y h(y | x) pi(y)``. A singleton is a strong hint, a large set a weak one.
- ``"restrict"``: answer ``argmax_{y in C} h(y | x)``; the set is trusted blindly, its size ignored.
- ``"anchor"``: with probability ``anchor_prob`` answer the first label listed (sets are displayed sorted by
  class id, as in the trial), otherwise behave as ``"bayes"``.
- ``"ignore_large"``: a reader who distrusts long lists: sets with more than ``max_size`` labels are
  ignored (answer from own knowledge, as in control), smaller ones are read as ``"bayes"``. Conformal sets
  are long exactly on the hard items, so this rule is built to take the help away where it matters.
- Control arm (no set): ``argmax_y h(y | x)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from icml24.conformal._validation import check_labels, check_probs

__all__ = ["DECISION_RULES", "HumanModel", "decide", "human_knowledge", "simulate_trial"]

DECISION_RULES = ("bayes", "restrict", "anchor", "ignore_large")
_FLOOR = 1e-12


@dataclass(frozen=True)
class HumanModel:
    """How simulated participants know and decide."""

    rule: str = "bayes"
    """Decision rule: ``"bayes"``, ``"restrict"``, ``"anchor"`` or ``"ignore_large"`` (see the module docstring)."""
    skill_low: float = 0.5
    """Lowest participant skill ``beta`` (exponent on the weak classifier's probabilities)."""
    skill_high: float = 2.0
    """Highest participant skill; skills are uniform on [skill_low, skill_high]."""
    noise_sd: float = 1.0
    """Standard deviation ``sigma`` of the per-item Gaussian noise on the log-knowledge."""
    anchor_prob: float = 0.3
    """Probability of answering the first listed label under the ``"anchor"`` rule."""
    max_size: int = 3
    """Under ``"ignore_large"``: sets with more labels than this are ignored."""

    def __post_init__(self) -> None:
        for name in ("skill_low", "skill_high", "noise_sd", "anchor_prob"):
            _check_nonneg(getattr(self, name), name)
        _check_size(self.max_size, "max_size")
        if self.rule not in DECISION_RULES:
            raise ValueError(f"rule must be one of {DECISION_RULES}, got {self.rule!r}")
        if not 0 <= self.skill_low <= self.skill_high:
            raise ValueError(f"need 0 <= skill_low <= skill_high, got {self.skill_low}, {self.skill_high}")
        if self.noise_sd < 0:
            raise ValueError(f"noise_sd must be >= 0, got {self.noise_sd}")
        if not 0 <= self.anchor_prob <= 1:
            raise ValueError(f"anchor_prob must be in [0, 1], got {self.anchor_prob}")
        if self.max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {self.max_size}")


def _check_generator(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (the only source of randomness), got {type(rng).__name__}")
    return rng


def _check_unit(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
    if not (np.isfinite(value) and 0 <= value <= 1):
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return float(value)


def _check_nonneg(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number >= 0, got {type(value).__name__}")
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _check_size(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def human_knowledge(q: np.ndarray, skill: np.ndarray, noise_sd: float, rng: np.random.Generator) -> np.ndarray:
    """``h ∝ q^skill exp(noise_sd * N(0, 1))`` over the last axis; ``skill`` broadcasts against ``q[..., 0]``."""
    q = np.asarray(q, dtype=np.float64)
    if q.ndim < 2:
        raise ValueError(f"q must have a class axis last (..., n_classes), got shape {q.shape}")
    check_probs(q.reshape(-1, q.shape[-1]), name="q")
    skill = np.asarray(skill, dtype=np.float64)
    if not np.isfinite(skill).all() or (skill < 0).any():
        raise ValueError("skill must be finite and >= 0")
    if skill.shape != q.shape[:-1]:
        raise ValueError(f"skill must have shape {q.shape[:-1]} (q without its class axis), got {skill.shape}")
    noise_sd = _check_nonneg(noise_sd, "noise_sd")
    rng = _check_generator(rng)
    logits = skill[..., None] * np.log(np.maximum(q, _FLOOR))
    if noise_sd > 0:
        logits = logits + noise_sd * rng.standard_normal(logits.shape)
    logits -= logits.max(axis=-1, keepdims=True)
    h = np.exp(logits)
    return h / h.sum(axis=-1, keepdims=True)


def decide(
    knowledge: np.ndarray,
    sets: np.ndarray | None,
    coverage: float,
    rule: str,
    rng: np.random.Generator,
    anchor_prob: float = 0.3,
    max_size: int = 3,
) -> np.ndarray:
    """The label each participant answers, for items ``knowledge[..., :]`` and sets ``sets[..., :]``
    (``None`` for the control arm). Ties go to the lowest class id."""
    h = np.asarray(knowledge, dtype=np.float64)
    if h.ndim < 1 or not np.isfinite(h).all() or (h < 0).any():
        raise ValueError("knowledge must be finite, non-negative scores over the classes (last axis)")
    rng = _check_generator(rng)
    anchor_prob = _check_unit(anchor_prob, "anchor_prob")
    max_size = _check_size(max_size, "max_size")
    if sets is None:
        return np.argmax(h, axis=-1)
    s = np.asarray(sets, dtype=bool)
    if s.shape != h.shape:
        raise ValueError(f"sets has shape {s.shape}, knowledge {h.shape}")
    if rule not in DECISION_RULES:
        raise ValueError(f"rule must be one of {DECISION_RULES}, got {rule!r}")
    coverage = _check_unit(coverage, "coverage")
    if rule == "restrict":
        masked = np.where(s, h, -1.0)
        choice = np.argmax(masked, axis=-1)
        empty = ~s.any(axis=-1)
        return np.where(empty, np.argmax(h, axis=-1), choice)
    n_classes = h.shape[-1]
    size = s.sum(axis=-1, keepdims=True)
    inside = coverage / np.maximum(size, 1)
    outside = np.where(size < n_classes, (1 - coverage) / np.maximum(n_classes - size, 1), 0.0)
    prior = np.where(s, inside, outside)
    log_post = np.log(np.maximum(h, _FLOOR)) + np.log(np.maximum(prior, _FLOOR))
    choice = np.argmax(log_post, axis=-1)
    if rule == "anchor":
        first = np.argmax(s, axis=-1)  # lowest class id in the set: the first label displayed
        use_anchor = (rng.random(choice.shape) < anchor_prob) & s.any(axis=-1)
        choice = np.where(use_anchor, first, choice)
    elif rule == "ignore_large":
        choice = np.where(size[..., 0] > max_size, np.argmax(h, axis=-1), choice)
    return choice


def simulate_trial(
    *,
    weak_probs: np.ndarray,
    labels: np.ndarray,
    arms: Mapping[str, tuple[np.ndarray | None, float]],
    human: HumanModel,
    n_participants: int = 50,
    n_items: int = 40,
    task: str = "task",
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Run the randomised trial with simulated participants and return a response table (one row per item).

    Args:
        weak_probs: (n_pool, K) the weak classifier ``q`` behind the participants' own knowledge.
        labels: (n_pool,) true labels of the item pool.
        arms: ``{arm name: (sets (n_pool, K) or None for control, calibration coverage of the sets)}``.
        human: knowledge and decision rule of the participants.
        n_participants: participants per arm (50 in the trial).
        n_items: items per participant, drawn without replacement from the pool.
        task: task name written into the table.
        rng: the only source of randomness.

    Returns:
        Columns ``task, arm, participant, item, correct, set_size, choice`` (see :mod:`.analysis`).
    """
    q = check_probs(weak_probs, name="weak_probs").astype(np.float64, copy=False)
    if not isinstance(human, HumanModel):
        raise TypeError(f"human must be a HumanModel, got {type(human).__name__}")
    rng = _check_generator(rng)
    if not isinstance(arms, Mapping) or not arms:
        raise TypeError(f"arms must be a non-empty mapping {{arm: (sets or None, coverage)}}, got {type(arms).__name__}")
    n_pool = q.shape[0]
    y = check_labels(labels, q.shape[1], n_samples=n_pool)
    for name, value in (("n_items", n_items), ("n_participants", n_participants)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if not 1 <= n_items <= n_pool:
        raise ValueError(f"n_items must be in [1, {n_pool}], got {n_items}")
    if n_participants < 1:
        raise ValueError(f"n_participants must be >= 1, got {n_participants}")
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("task", "arm", "participant", "item", "correct",
                                                          "set_size", "choice")}
    for arm_idx, (arm, (sets, coverage)) in enumerate(arms.items()):
        if sets is not None and np.shape(sets) != q.shape:
            raise ValueError(f"arms: the sets of arm {arm!r} must have shape {q.shape}, got {np.shape(sets)}")
        if sets is not None and not np.isin(np.asarray(sets), (0, 1)).all():
            raise ValueError(f"arms: the sets of arm {arm!r} must be boolean (or 0/1)")
        try:
            _check_unit(coverage, "coverage")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"arms: arm {arm!r}: {exc}") from exc
        # items per participant without replacement: argsort of uniform keys, vectorised over participants
        items = np.argsort(rng.random((n_participants, n_pool)), axis=1)[:, :n_items]
        skill = rng.uniform(human.skill_low, human.skill_high, size=(n_participants, 1))
        h = human_knowledge(q[items], np.broadcast_to(skill, items.shape), human.noise_sd, rng)
        shown = None if sets is None else np.asarray(sets, dtype=bool)[items]
        choice = decide(h, shown, coverage, human.rule, rng, human.anchor_prob, human.max_size)
        pid = np.broadcast_to((arm_idx * n_participants + np.arange(n_participants))[:, None], items.shape)
        cols["task"].append(np.full(items.size, task))
        cols["arm"].append(np.full(items.size, arm))
        cols["participant"].append(pid.ravel())
        cols["item"].append(items.ravel())
        cols["correct"].append((choice == y[items]).ravel().astype(np.int64))
        cols["set_size"].append(np.full(items.size, np.nan) if shown is None else shown.sum(-1).ravel().astype(float))
        cols["choice"].append(choice.ravel())
    return {k: np.concatenate(v) for k, v in cols.items()}
