"""The statistics of the trial's analysis, over a table of participant responses.

"Conformal Prediction Sets Improve Human Decision Making" (Cresswell et al., ICML 2024,
https://arxiv.org/abs/2401.13744), Section 4: each participant answers the items of one task in one arm
(control, top-k or conformal); the outcome is the participant's accuracy; arms are compared by mean accuracy
with confidence intervals and by a one-sided test that conformal beats top-k. We implement that test as
Welch's unequal-variance t-test on per-participant accuracies, ``t = (m_a - m_b) / sqrt(s_a^2/n_a + s_b^2/n_b)``
with Welch-Satterthwaite degrees of freedom, and report the Mann-Whitney U test beside it. (The paper's
pre-registered analysis may differ in detail; our numbers are a re-analysis.)

A *response table* is any mapping from column names to equal-length columns (a dict of lists or arrays, or
a pandas DataFrame) with:

- ``task``, ``arm``: strings;
- ``correct``: 0/1 per item, or a count of correct answers per participant;
- optional ``participant``: id; rows of the same (task, arm, participant) are pooled (one row = one
  participant when absent);
- optional ``n_items``: items behind ``correct`` (1 when absent), so that released per-participant counts
  and simulated per-item answers go through the same code;
- optional ``set_size``: size of the set shown (per item), summarised per arm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ArmSummary",
    "WelchResult",
    "arm_summaries",
    "compare_arms",
    "participant_accuracy",
]

ResponseTable = Mapping[str, Sequence]


def _columns(table: ResponseTable) -> dict[str, np.ndarray]:
    required = ("task", "arm", "correct")
    if not isinstance(table, (Mapping, Sequence)) or isinstance(table, str):
        if not hasattr(table, "__getitem__") or not hasattr(table, "columns"):
            raise TypeError(f"table must be a mapping of columns (or a DataFrame), got {type(table).__name__}")
    if isinstance(table, Sequence) and table and isinstance(table[0], Mapping):  # list of records
        keys = table[0].keys()
        table = {k: [row[k] for row in table] for k in keys}
    missing = [c for c in required if c not in table]
    if missing:
        raise ValueError(f"table is missing columns {missing}; it needs task, arm, correct")
    cols = {c: np.asarray(table[c]) for c in ("task", "arm", "correct", "participant", "n_items", "set_size")
            if c in table}
    n = len(cols["task"])
    for c, v in cols.items():
        if v.ndim != 1 or len(v) != n:
            raise ValueError(f"table column {c!r} must be 1-D with {n} entries, got shape {v.shape}")
    correct = cols["correct"].astype(np.float64)
    n_items = cols["n_items"].astype(np.float64) if "n_items" in cols else np.ones(n)
    if np.isnan(correct).any() or (correct < 0).any() or (correct > n_items).any():
        raise ValueError("table column 'correct' must lie in [0, n_items] (0/1 per item when n_items is absent)")
    if (n_items <= 0).any():
        raise ValueError("table column 'n_items' must be positive")
    cols["correct"], cols["n_items"] = correct, n_items
    cols["task"] = cols["task"].astype(str)
    cols["arm"] = cols["arm"].astype(str)
    return cols


def participant_accuracy(table: ResponseTable) -> dict[tuple[str, str], np.ndarray]:
    """Per-participant accuracy, grouped by (task, arm): ``{(task, arm): array of accuracies}``."""
    cols = _columns(table)
    pid = cols["participant"].astype(str) if "participant" in cols else np.arange(len(cols["task"])).astype(str)
    keys = np.stack([cols["task"], cols["arm"], pid], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    hits = np.bincount(inverse, weights=cols["correct"], minlength=len(uniq))
    items = np.bincount(inverse, weights=cols["n_items"], minlength=len(uniq))
    acc = hits / items
    out: dict[tuple[str, str], list[float]] = {}
    for (task, arm, _), a in zip(uniq, acc):
        out.setdefault((str(task), str(arm)), []).append(float(a))
    return {k: np.asarray(v) for k, v in sorted(out.items())}


@dataclass(frozen=True)
class ArmSummary:
    """Accuracy of one arm of one task across participants."""

    task: str
    arm: str
    n: int
    """Number of participants."""
    mean: float
    """Mean per-participant accuracy."""
    sd: float
    """Sample standard deviation across participants (ddof = 1)."""
    ci_low: float
    """Lower end of the t confidence interval of the mean."""
    ci_high: float
    """Upper end of the t confidence interval of the mean."""
    mean_set_size: float
    """Mean size of the sets shown (NaN when the table has no ``set_size`` column, or for control)."""


def arm_summaries(table: ResponseTable, *, confidence: float = 0.95) -> list[ArmSummary]:
    """Mean accuracy per (task, arm) with a Student-t confidence interval ``mean +- t_{n-1} sd / sqrt(n)``."""
    from scipy import stats

    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)):
        raise TypeError(f"confidence must be a number in (0, 1), got {type(confidence).__name__}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    cols = _columns(table)
    groups = participant_accuracy(table)
    out = []
    for (task, arm), acc in groups.items():
        n = acc.size
        mean = float(acc.mean())
        sd = float(acc.std(ddof=1)) if n > 1 else float("nan")
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
        size = float("nan")
        if "set_size" in cols:
            mask = (cols["task"] == task) & (cols["arm"] == arm)
            sizes = cols["set_size"][mask].astype(np.float64)
            sizes = sizes[~np.isnan(sizes)]
            size = float(sizes.mean()) if sizes.size else float("nan")
        out.append(ArmSummary(task, arm, n, mean, sd, mean - half, mean + half, size))
    return out


@dataclass(frozen=True)
class WelchResult:
    """One-sided comparison ``arm_a > arm_b`` on one task."""

    task: str
    arm_a: str
    arm_b: str
    mean_diff: float
    """``mean(arm_a) - mean(arm_b)`` of per-participant accuracy."""
    t: float
    """Welch t statistic."""
    df: float
    """Welch-Satterthwaite degrees of freedom."""
    p_welch: float
    """One-sided p-value of Welch's t-test (alternative: arm_a has the higher mean)."""
    p_mannwhitney: float
    """One-sided p-value of the Mann-Whitney U test (same alternative)."""
    cohen_d: float
    """Standardised difference with the pooled standard deviation."""
    n_a: int
    n_b: int


def compare_arms(
    table: ResponseTable, task: str, arm_a: str = "conformal", arm_b: str = "topk", *, alternative: str = "greater"
) -> WelchResult:
    """Welch's t-test (and Mann-Whitney U) of per-participant accuracy, ``arm_a`` vs ``arm_b`` on ``task``.

    ``alternative="greater"`` is the paper's hypothesis that conformal sets beat top-k sets.
    """
    from scipy import stats

    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"alternative must be 'greater', 'less' or 'two-sided', got {alternative!r}")
    groups = participant_accuracy(table)
    if not any(t == task for t, _ in groups):
        raise ValueError(f"task {task!r} has no responses; tasks present: {sorted({t for t, _ in groups})}")
    for pname, arm in (("arm_a", arm_a), ("arm_b", arm_b)):
        if (task, arm) not in groups:
            have = sorted(a for t, a in groups if t == task)
            raise ValueError(f"{pname} = {arm!r} has no responses in task {task!r}; arms present: {have}")
    a, b = groups[(task, arm_a)], groups[(task, arm_b)]
    if a.size < 2 or b.size < 2:
        raise ValueError(f"each arm needs at least 2 participants, got {a.size} and {b.size}")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = np.sqrt(va + vb)
    diff = float(a.mean() - b.mean())
    if se == 0:
        t = float(np.sign(diff) * np.inf) if diff else 0.0
        df = float(a.size + b.size - 2)
    else:
        t = diff / se
        df = float((va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)))
    if se > 0:
        p = float(stats.ttest_ind(a, b, equal_var=False, alternative=alternative).pvalue)
    else:
        # Both arms constant: the difference is certain, so the p-value is 0 or 1 in the tested direction.
        holds = {"greater": diff > 0, "less": diff < 0, "two-sided": diff != 0}[alternative]
        p = 0.0 if holds else 1.0
    p_mw = float(stats.mannwhitneyu(a, b, alternative=alternative).pvalue)
    pooled = np.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))
    d = diff / pooled if pooled > 0 else float("nan")
    return WelchResult(task, arm_a, arm_b, diff, float(t), df, p, p_mw, float(d), int(a.size), int(b.size))
