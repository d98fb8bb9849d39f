"""The contract between a paper's ``reproduce.py`` and the runner.

A reproduction is a list of :class:`Job` s (experiment x config x seed) plus an ``analyze`` function that
turns the finished jobs' metrics into an :class:`Analysis`: tables of method vs baselines, figures and a
verdict on the paper's claim. A job is a *pure function of its config and seed*: the function is named by
its import path (``"package.module:function"``) so that the same job can run in this process, in a
process pool or on a Ray worker, and give the same numbers everywhere.

Every paper's ``reproduce.py`` exposes one module-level ``REPRODUCTION = Reproduction(...)``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

SCALES: tuple[str, ...] = ("smoke", "quick", "full", "gpu")
"""``smoke``: seconds, used by the contract tests; ``quick``: <= 2 min on 2 CPU cores; ``full``: <= 20 min;
``gpu``: a larger configuration for papers whose setting needs an accelerator."""

Verdict = Literal["supported", "not_supported", "inconclusive"]
VERDICTS: tuple[str, ...] = ("supported", "not_supported", "inconclusive")

JsonValue = Any


def canonical_json(value: JsonValue) -> str:
    """JSON with sorted keys and no whitespace: the same config always hashes the same."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)


def config_hash(config: Mapping[str, JsonValue]) -> str:
    """A short, stable hash of a job's config (sha256 of its canonical JSON)."""
    return hashlib.sha256(canonical_json(dict(config)).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Job:
    """One unit of work: ``fn(config, seed) -> metrics``.

    Attributes:
        slug: the paper's slug (catalogue key).
        experiment: the experiment's name inside the paper's reproduction (e.g. ``"regret_vs_d"``).
        fn: import path of the job function, ``"package.module:function"``.
        config: JSON-serialisable keyword config of the job (no seed in it).
        seed: the seed; the job must derive all randomness from it.
        required_metrics: metric keys the job's result must hold (filled by :meth:`Reproduction.jobs` from
            :attr:`Reproduction.required_metrics`); not part of the job's key.
    """

    slug: str
    experiment: str
    fn: str
    config: Mapping[str, JsonValue]
    seed: int
    required_metrics: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if ":" not in self.fn:
            raise ValueError(f"fn must be 'package.module:function', got {self.fn!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TypeError(f"seed must be an int, got {type(self.seed).__name__}")
        try:
            canonical_json(dict(self.config))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"config of job {self.experiment!r} must be JSON-serialisable: {exc}") from exc

    @property
    def config_hash(self) -> str:
        return config_hash(self.config)

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.slug, self.experiment, self.config_hash, self.seed)

    @property
    def label(self) -> str:
        """A readable, unique name: every scalar config item in full (nothing truncated away), plus the
        config hash when the config also holds lists or dicts (which the scalars alone may not tell apart)."""
        items = sorted(self.config.items())
        short = ",".join(f"{k}={v}" for k, v in items if _is_scalar(v))
        if any(not _is_scalar(v) for _, v in items):
            short = f"{short},cfg={self.config_hash[:8]}" if short else f"cfg={self.config_hash[:8]}"
        return f"{self.slug}/{self.experiment}[{short}] seed={self.seed}"

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "slug": self.slug,
            "experiment": self.experiment,
            "fn": self.fn,
            "config": dict(self.config),
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> Job:
        return cls(data["slug"], data["experiment"], data["fn"], dict(data["config"]), int(data["seed"]))


def _is_scalar(v: object) -> bool:
    return isinstance(v, (int, float, str, bool)) or v is None


@dataclass
class JobResult:
    """What the store keeps of a finished job."""

    job: Job
    status: Literal["ok", "error"]
    metrics: dict[str, JsonValue] = field(default_factory=dict)
    wall_time: float = 0.0
    error: str | None = None
    environment: dict[str, JsonValue] | None = field(default=None, compare=False)
    """The floating-point environment the job ran in (:func:`icml24.common.environment.job_environment`);
    ``None`` for rows stored before environments were recorded."""


def resolve(path: str) -> Callable[..., Any]:
    """Import ``"package.module:attr"``."""
    module, _, attr = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def seed_everything(seed: int) -> None:
    """Seed Python, numpy's legacy global RNG and torch. Jobs should still prefer explicit generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - seeds code that uses the legacy global RNG
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover - torch is a core dependency
        pass


def execute_job(job: Job) -> JobResult:
    """Run one job in the current process and capture its metrics or its traceback.

    Torch is pinned to one intra-op thread so that a job gives bit-identical numbers in this process, in a
    process-pool worker and on a Ray worker (reductions split over threads change the last bits).
    """
    import time
    import traceback

    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    seed_everything(job.seed)
    start = time.perf_counter()
    try:
        fn = resolve(job.fn)
        metrics = fn(dict(job.config), job.seed)
        if not isinstance(metrics, Mapping):
            raise TypeError(f"job function {job.fn} returned {type(metrics).__name__}, expected a dict")
        metrics = to_jsonable(dict(metrics))
        check_metrics(job, metrics)
        result = JobResult(job, "ok", metrics, time.perf_counter() - start)
    except Exception:  # noqa: BLE001 - a crashed job is a result too: its traceback goes to the store
        result = JobResult(job, "error", {}, time.perf_counter() - start, traceback.format_exc())
    from icml24.common.environment import job_environment  # provenance only: outside the fingerprint

    result.environment = job_environment()
    return result


class MissingMetricsError(ValueError):
    """A job returned no metrics, or lacks keys its experiment declares (a crashed job, not an ok one)."""


def check_metrics(job: Job, metrics: Mapping[str, JsonValue]) -> None:
    """The rule for a job's metrics: an empty dict is always an error (an ``ok`` row without numbers would
    quietly shrink the report's tables), and every key in ``job.required_metrics`` must be present.

    Raises:
        MissingMetricsError: naming the job function and the missing keys.
    """
    if not metrics:
        raise MissingMetricsError(f"job function {job.fn} returned no metrics (an empty dict)")
    missing = [k for k in job.required_metrics if k not in metrics]
    if missing:
        raise MissingMetricsError(
            f"job function {job.fn} returned metrics without {', '.join(missing)}, which experiment "
            f"{job.experiment!r} declares in required_metrics (it returned {', '.join(sorted(metrics)) or 'none'})"
        )


_TIMING_METRIC = re.compile(
    r"(seconds?|(^|[_/])sec([_/]|$)|(^|[_/])(time|wall|walltime)([_/]|$)|(^|[_/])cpu_per_|[_/]cpu$|throughput|_per_s$|_ms$"
    r"|(^|[_/])(load_\d+min|loadavg|load_avg|load_before|load_after)([_/]|$))"
)


def is_timing_metric(name: str) -> bool:
    """Whether a metric is a measured duration, speed or machine load (``train_seconds``,
    ``steps_per_second``, ``sec_per_epoch``, ``wall_time``, ``exact_cpu_per_step``, ``speed/time_ratio``,
    ``load_1min``, ``load_before``...). Words are
    delimited by ``_`` or ``/`` (the prefix separator of metric names). Such metrics are the one exception
    to "same seed, same numbers": the determinism contract compares every metric but these."""
    return bool(_TIMING_METRIC.search(name))


def deterministic_metrics(metrics: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The metrics without the timing ones (see :func:`is_timing_metric`)."""
    return {k: v for k, v in metrics.items() if not is_timing_metric(k)}


def to_jsonable(value: Any) -> JsonValue:
    """Convert numpy/torch scalars and arrays (recursively) into plain JSON types."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if hasattr(value, "detach") and hasattr(value, "tolist"):  # torch tensor
        return to_jsonable(value.detach().cpu().tolist())
    return value


# --------------------------------------------------------------------------------------------------
# What analyze() returns
# --------------------------------------------------------------------------------------------------


SPREADS: dict[str, str] = {
    "std": "sample standard deviation (ddof=1)",
    "sem": "standard error of the mean (std / sqrt(n))",
}


@dataclass(frozen=True)
class Cell:
    """A numeric table cell: the per-seed (or per-trial) values and their summary.

    The report prints :attr:`text` (``"1.234 ± 0.056 (n=5)"``); ``results.json`` keeps the numbers, so a
    reader can recompute anything from ``values``. Build one with :func:`numeric_cell`.

    Attributes:
        text: the cell as printed.
        mean: mean of the finite values (``None`` when there is none).
        std: the spread printed after ``±`` (``spread`` says which; ``None`` when there is no value).
        n: how many finite values went into ``mean``.
        values: every value, in order (non-finite ones kept as ``nan``; ``results.json`` writes ``null``).
        spread: what ``std`` is, in words: ``"std over seeds"``, ``"sem over trials"``.
    """

    text: str
    mean: float | None = None
    std: float | None = None
    n: int = 0
    values: tuple[float, ...] = ()
    spread: str = ""

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "text": self.text,
            "mean": self.mean,
            "std": self.std,
            "n": self.n,
            "values": list(self.values),
            "spread": self.spread,
        }


def numeric_cell(
    values: Sequence[float | None], digits: int = 3, *, spread: str = "std", over: str = "seeds"
) -> Cell:
    """A :class:`Cell` from per-seed values: the text of :func:`fmt_mean_std` plus the numbers.

    Args:
        values: one value per seed (or trial); ``None`` and NaN are kept in ``values`` but left out of
            the mean and the spread.
        digits: significant digits of the text.
        spread: ``"std"`` (sample std, ddof=1, as :func:`mean_std`) or ``"sem"`` (std / sqrt(n)).
        over: what the values range over, for the words of the spread (``"seeds"``, ``"trials"``).
    """
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {tuple(SPREADS)}, got {spread!r}")
    if not isinstance(values, (Sequence, np.ndarray)) or isinstance(values, str):
        raise TypeError(f"values must be a sequence of numbers, got {type(values).__name__}")
    raw = tuple(math.nan if v is None else float(v) for v in values)
    m, s, n = mean_std(raw)
    if n == 0:
        return Cell("n/a", None, None, 0, raw, f"{spread} over {over}")
    if spread == "sem":
        s = s / math.sqrt(n)
    std = s if n > 1 else None  # one value has no spread
    return Cell(fmt_mean_spread(m, std, n, digits), m, std, n, raw, f"{spread} over {over}")


_MEAN_STD_TEXT = re.compile(
    r"^\s*([-+0-9.eE]+|nan|inf|-inf)\s*±\s*([-+0-9.eE]+|nan|inf|—)\s*\(n=(\d+)\)\s*$"
)


def cell_to_json(value: JsonValue) -> dict[str, JsonValue]:
    """One table cell as ``results.json`` writes it: always an object with ``text``; numbers where known.

    A :class:`Cell` gives its numbers; a plain number gives ``value``; the :class:`MeanStdText` that
    :func:`fmt_mean_std` returns gives its per-seed ``values`` and the ``mean``, ``std`` and ``n``
    recomputed from them at full precision (not the rounded digits of its text); any other string of
    that form (``"1.23 ± 0.05 (n=3)"``) is parsed back into ``mean``, ``std`` and ``n`` (``std`` is
    ``None`` for ``"± —"``, one value).
    """
    if isinstance(value, Cell):
        return value.to_dict()
    if isinstance(value, bool) or value is None:
        return {"text": str(value) if value is not None else "", "value": value}
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value) if isinstance(value, (float, np.floating)) else int(value)
        return {"text": _cell_text(v), "value": v}
    text = str(value)
    m = _MEAN_STD_TEXT.match(text)
    if isinstance(value, MeanStdText) and value.values:
        mean, std, n = mean_std(value.values)
        return {
            "text": text,
            "mean": mean if n else None,
            "std": std if n > 1 else None,
            "n": n,
            "values": [v if math.isfinite(v) else None for v in value.values],
            "spread": "sample std (ddof=1) over the values",
        }
    if m:
        spread = None if m.group(2) == "—" else float(m.group(2))
        return {"text": text, "mean": float(m.group(1)), "std": spread, "n": int(m.group(3))}
    return {"text": text}


def _cell_text(v: float | int) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@dataclass
class Table:
    """A table for the report.

    Cells are strings, numbers or :class:`Cell` s (from :func:`numeric_cell`, which keeps the per-seed
    values for ``results.json``); :func:`fmt_mean_std` formats a string cell for text. Say in ``note``
    what a spread is when the cells are strings; a :class:`Cell` says it itself.
    """

    title: str
    columns: list[str]
    rows: list[list[JsonValue]]
    note: str = ""

    def spreads(self) -> list[str]:
        """The distinct spreads of the table's :class:`Cell` s (``["std over seeds"]``)."""
        return list(dict.fromkeys(c.spread for row in self.rows for c in row if isinstance(c, Cell) and c.spread))

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "title": self.title,
            "columns": [str(c) for c in self.columns],
            "rows": [[cell_to_json(c) for c in row] for row in self.rows],
            "note": self.note,
            "spreads": self.spreads(),
        }


@dataclass
class Figure:
    """A figure for the report: a PNG image (bytes) with a caption."""

    title: str
    png: bytes
    caption: str = ""


def _slugify(text: str, limit: int = 48) -> str:
    """A lower-case, hyphenated id of at most ``limit`` characters, cut at a word boundary."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(slug) > limit:
        cut = slug[: limit + 1].rfind("-")
        slug = slug[: cut if cut > limit // 2 else limit].strip("-")
    return slug or "check"


@dataclass
class ClaimCheck:
    """One sub-claim of the paper, its own verdict and the evidence (numbers) behind it.

    The statistical fields are filled by the decision primitives of :mod:`icml24.common.decide`
    (``Decision.to_check``); a hand-written check may leave them empty.

    Attributes:
        claim: the sub-claim in words, as the paper's README states it.
        verdict: this sub-claim's verdict.
        evidence: the numbers behind it, in words.
        id: a stable machine id (``"regret-vs-ucb1"``); derived from ``claim`` when empty.
        rule: the decision rule in words with its thresholds ("one-sided paired t-test, alpha 0.05;
            not_supported needs TOST equivalence within 0.02 or significance the other way").
        effect: the estimated effect (``effect_name`` says which: "mean difference method - baseline").
        effect_name: what ``effect`` is.
        ci: confidence interval of the effect, ``(low, high)``; ``ci_level`` its level (0.95).
        p_value: the p-value of the test in the claimed direction (after any correction).
        power: the rule's power to say ``supported`` at the paper's effect size and this run's ``n``.
        n: the sample size the rule used (seeds, trials or pairs; ``effect_name`` or ``rule`` says which).
        decisive: whether this check enters the overall verdict (``False``: reported only).
        outcome: what the rule found, finer than the verdict: ``"effect_shown"``, ``"refuted"``,
            ``"effect_below_margin"`` (an effect in the claimed direction exists but is shown smaller than the
            margin the claim needs: both tests significant; the verdict is ``inconclusive``), ``"undecided"``,
            ``"not_run"`` (a decisive arm did not run); empty for hand-written checks.
        control: the same rule run on a negative control (an arm known to have no effect), as a dict with
            ``claim``, ``verdict``, ``effect``, ``ci``, ``p_value``; ``None`` when the check has none.
        headroom: what the design allows (:class:`icml24.common.decide.Headroom` as a dict: ``baseline_best``,
            ``ceiling``, ``max_effect``, ``paper_effect``, ``can_decide``, ``text``); ``None`` when not stated.
        margin: the bar the effect must pass for ``supported``, in the effect's units (``None``: not stated or
            a pure equivalence claim); drawn in the report's forest plot.
        equivalence_margin: the half-width of the no-effect band the rule's TOST uses (``None``: none).
    """

    claim: str
    verdict: Verdict
    evidence: str
    id: str = ""
    rule: str = ""
    effect: float | None = None
    effect_name: str = ""
    ci: tuple[float, float] | None = None
    ci_level: float | None = None
    p_value: float | None = None
    power: float | None = None
    n: int | None = None
    decisive: bool = True
    outcome: str = ""
    control: dict[str, JsonValue] | None = None
    headroom: dict[str, JsonValue] | None = None
    margin: float | None = None
    equivalence_margin: float | None = None

    @property
    def uninformative(self) -> bool:
        """The negative control came out ``supported``: the rule finds the effect where there is none, so this
        check cannot decide the verdict."""
        return self.control is not None and self.control.get("verdict") == "supported"

    @property
    def limited_by_headroom(self) -> bool:
        """The design leaves less room than the paper's effect: this check cannot decide the verdict."""
        return self.headroom is not None and self.headroom.get("can_decide") is False

    @property
    def effective_verdict(self) -> Verdict:
        """The verdict this check contributes to the paper's: ``inconclusive`` when it is uninformative (its
        control came out supported) or limited by headroom, else :attr:`verdict`."""
        return "inconclusive" if self.uninformative or self.limited_by_headroom else self.verdict

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.control is not None and self.control.get("verdict") not in VERDICTS:
            raise ValueError(f"control must be a dict with a 'verdict' in {VERDICTS}, got {self.control!r}")
        if not self.id:
            self.id = _slugify(self.claim.split(":")[0])
        if self.ci is not None:
            self.ci = (float(self.ci[0]), float(self.ci[1]))

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "id": self.id,
            "claim": self.claim,
            "verdict": self.verdict,
            "evidence": self.evidence,
            "rule": self.rule,
            "effect": self.effect,
            "effect_name": self.effect_name,
            "ci": list(self.ci) if self.ci is not None else None,
            "ci_level": self.ci_level,
            "p_value": self.p_value,
            "power": self.power,
            "n": self.n,
            "decisive": self.decisive,
            "outcome": self.outcome,
            "control": self.control,
            "uninformative": self.uninformative,
            "headroom": self.headroom,
            "margin": self.margin,
            "equivalence_margin": self.equivalence_margin,
            "effective_verdict": self.effective_verdict,
        }


@dataclass
class Analysis:
    """The outcome of a reproduction: a verdict on the claim, a one-paragraph summary with the numbers,
    the method-vs-baselines tables, figures, and per-sub-claim checks.

    ``rule`` states in words how the sub-claims' verdicts combine into ``verdict``; ``decided_by`` lists
    the ids of the checks that decided it (empty: derived by the report from the decisive checks).
    ``not_run`` lists the arms that were not built at this scale and why (``"LoRA arm: needs the
    `language` extra"``); the report fills it from :attr:`Reproduction.missing_arms`.
    """

    verdict: Verdict
    summary: str
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    checks: list[ClaimCheck] = field(default_factory=list)
    rule: str = ""
    decided_by: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        # Ids name checks apart: a repeated one (two claims with the same opening words) gets -2, -3...
        seen: dict[str, int] = {}
        for check in self.checks:
            base = check.id
            seen[base] = seen.get(base, 0) + 1
            if seen[base] > 1:
                check.id = f"{base}-{seen[base]}"


@dataclass(frozen=True)
class Reproduction:
    """A paper's reproduction.

    Attributes:
        slug: catalogue slug.
        claim: the claim being checked, one or two sentences.
        build_jobs: ``(scale, seeds) -> list[Job]``; ``seeds=None`` means the scale's default seed count.
        analyze: ``(results, scale) -> Analysis``; gets only successful results (crashed jobs are reported
            separately) and must cope with missing ones.
        deviations: every deviation from the paper's setting, stated plainly.
        scales: the scales this reproduction supports.
        required_metrics: per experiment, the metric keys ``analyze`` needs from each of its jobs. A job whose
            metrics lack one is stored as crashed (with the missing keys named), not ok; so is a job that
            returns no metrics at all, declared or not (:func:`check_metrics`).
        missing_arms: ``scale -> [reason, ...]``: the arms ``build_jobs`` left out at this scale because an
            optional package is absent (see :func:`missing_extra`); the report lists them, and ``analyze`` must
            make a check whose decisive arm is missing inconclusive (:func:`icml24.common.decide.not_run_check`),
            never decide it with a substitute.
    """

    slug: str
    claim: str
    build_jobs: Callable[[str, int | None], list[Job]]
    analyze: Callable[[Sequence[JobResult], str], Analysis]
    deviations: tuple[str, ...] = ()
    scales: tuple[str, ...] = ("smoke", "quick", "full")
    required_metrics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    missing_arms: Callable[[str], list[str]] | None = None

    def not_run(self, scale: str) -> list[str]:
        """The arms not built at ``scale`` and why (empty when every arm can run here)."""
        return list(self.missing_arms(scale)) if self.missing_arms is not None else []

    def __post_init__(self) -> None:
        for experiment, keys in dict(self.required_metrics).items():
            if not isinstance(experiment, str) or isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
                raise TypeError(
                    f"required_metrics of {self.slug} must map experiment names to tuples of metric names, "
                    f"got {experiment!r}: {keys!r}"
                )

    def jobs(self, scale: str, seeds: int | None = None) -> list[Job]:
        if scale not in self.scales:
            raise ValueError(f"scale must be one of {self.scales} for {self.slug}, got {scale!r}")
        if seeds is not None and seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        jobs = self.build_jobs(scale, seeds)
        keys = [j.key for j in jobs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{self.slug}: build_jobs({scale!r}) produced duplicate jobs")
        for j in jobs:
            if j.slug != self.slug:
                raise ValueError(f"job slug {j.slug!r} does not match reproduction slug {self.slug!r}")
        required = dict(self.required_metrics)
        if required:
            jobs = [
                replace(j, required_metrics=tuple(required[j.experiment])) if j.experiment in required else j
                for j in jobs
            ]
        return jobs


# --------------------------------------------------------------------------------------------------
# Helpers for analyze()
# --------------------------------------------------------------------------------------------------


def missing_extra(module: str, extra: str) -> str | None:
    """``None`` when ``module`` can be imported here, else the reason an arm that needs it is not run
    (``"needs the `language` extra: pip install 'icml24[language]'"``). For ``build_jobs`` and
    :attr:`Reproduction.missing_arms`: an arm whose package is missing is recorded as not run, not replaced."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"needs the `{extra}` extra: pip install 'icml24[{extra}]'"


def mean_std(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean, sample standard deviation (ddof=1; 0 for one value) and count, ignoring NaN."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return math.nan, math.nan, 0
    std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    return float(arr.mean()), std, int(arr.size)


class MeanStdText(str):
    """The text of :func:`fmt_mean_std` that also carries the values it summarises, so that
    ``results.json`` gets the per-seed values of every paper's tables without a change to their code."""

    values: tuple[float, ...]

    def __new__(cls, text: str, values: Sequence[float | None] = ()) -> MeanStdText:
        obj = super().__new__(cls, text)
        obj.values = tuple(math.nan if v is None else float(v) for v in values)
        return obj

    def __reduce__(self):  # pickles (process pools, Ray) as the same text with its values
        return (MeanStdText, (str(self), self.values))


def fmt_mean_std(values: Sequence[float], digits: int = 3) -> str:
    """``"1.234 ± 0.056 (n=5)"``: the report's standard cell for a metric over seeds (the sample std,
    ddof=1), written by :func:`fmt_mean_spread`. The returned string carries ``values`` for
    ``results.json`` (see :class:`MeanStdText`), which recomputes the numbers from them at full precision."""
    vals = [v for v in values]
    m, s, n = mean_std(vals)
    if n == 0:
        return MeanStdText("n/a", vals)
    return MeanStdText(fmt_mean_spread(m, s if n > 1 else None, n, digits), vals)


SPREAD_NONE = "—"
"""What a cell prints for the spread of a single value (a sample std needs two)."""

_SCI_LOW, _SCI_HIGH = -3, 5
"""Decimal exponents outside ``[_SCI_LOW, _SCI_HIGH)`` are written in scientific notation."""

_MAX_EXTRA_DIGITS = 3
"""The mean never shows more than ``digits + 3`` significant digits, however small the spread."""


def fmt_mean_spread(mean: float, spread: float | None, n: int, digits: int = 3) -> str:
    """``"0.00125 ± 0.000785 (n=3)"``: mean and spread rounded to the same decimal place.

    The place is the one that gives the spread ``digits`` significant digits; when the spread is 0 (every
    value the same) it gives the mean ``digits`` significant digits, never cuts its integer part, and drops
    trailing zeros (``"20 ± 0 (n=3)"``); with one value (``spread=None``) the spread is ``"—"``. Numbers
    below 1e-3 or from 1e5 up share one exponent: ``"3.8212e+05 ± 0.0012e+05 (n=3)"``.

    Args:
        mean: the mean of the values.
        spread: their spread (std or sem), ``None`` when there is one value.
        n: how many values.
        digits: significant digits of the spread (of the mean when the spread is 0 or ``None``).
    """
    if not isinstance(digits, int) or isinstance(digits, bool) or digits < 1:
        raise ValueError(f"digits must be a positive int, got {digits!r}")
    if spread is not None and spread < 0:
        raise ValueError(f"spread must be >= 0 or None, got {spread!r}")
    if not math.isfinite(mean) or (spread is not None and not math.isfinite(spread)):
        return f"{mean:.{digits}g} ± {SPREAD_NONE if spread is None else f'{spread:.{digits}g}'} (n={n})"
    scale = max(abs(mean), spread or 0.0)
    exp = math.floor(math.log10(scale)) if scale > 0 else 0
    sci = scale > 0 and not (_SCI_LOW <= exp < _SCI_HIGH)
    mean_exp = math.floor(math.log10(abs(mean))) if mean != 0 else exp
    exact = not spread  # 0 or None: place from the mean
    if exact:
        place = digits - 1 - mean_exp
        if not sci:
            place = max(place, 0)  # 3823 ± 0, not 3820 ± 0
    else:
        place = digits - 1 - math.floor(math.log10(spread))
        place = min(place, digits - 1 + _MAX_EXTRA_DIGITS - mean_exp) if mean != 0 else place
    unit = 10.0**exp if sci else 1.0
    place_in_unit = place + exp if sci else place  # the same decimal place, counted in the mantissa
    decimals = max(place_in_unit, 0)
    m_text = _fixed(mean / unit, decimals, place_in_unit)
    if spread == 0 and n > 1 and "." in m_text:  # every value the same: an exact number, no padding zeros
        m_text = m_text.rstrip("0").rstrip(".")
        decimals = len(m_text.partition(".")[2])
    suffix = f"e{exp:+03d}" if sci else ""
    if spread is None:
        return f"{m_text}{suffix} ± {SPREAD_NONE} (n={n})"
    s_text = _fixed(spread / unit, decimals, place_in_unit)
    if spread > 0 and float(s_text) == 0:  # below the mean's last digit: say how small it is
        return f"{m_text}{suffix} ± {spread:.1e} (n={n})"
    return f"{m_text}{suffix} ± {s_text}{suffix} (n={n})"


def _fixed(x: float, decimals: int, place: int) -> str:
    """``x`` rounded to ``place`` decimals (negative: tens, hundreds) and printed with ``decimals``; no
    ``-0``."""
    if place < 0:
        x = round(x, place)
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _fmt(x: float, digits: int) -> str:
    """One number with ``digits`` significant digits (scientific below 1e-3 and from 1e5 up)."""
    if x == 0 or (1e-3 <= abs(x) < 1e5):
        return f"{x:.{digits}g}" if abs(x) >= 1 else f"{x:.{digits}f}"
    return f"{x:.{digits - 1}e}"


def group_results(
    results: Sequence[JobResult], experiment: str | None = None, by: Sequence[str] = ()
) -> dict[tuple[JsonValue, ...], list[JobResult]]:
    """Group successful results of one experiment by the given config keys (in the order given)."""
    groups: dict[tuple[JsonValue, ...], list[JobResult]] = {}
    for r in results:
        if r.status != "ok" or (experiment is not None and r.job.experiment != experiment):
            continue
        key = tuple(_hashable(r.job.config.get(k)) for k in by)
        groups.setdefault(key, []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: tuple(_sort_key(x) for x in kv[0])))


def _sort_key(x: JsonValue) -> tuple[int, JsonValue]:
    """Numbers sort numerically (d=2 before d=10), then everything else by its text."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return (0, x)
    return (1, str(x))


def _hashable(v: JsonValue) -> JsonValue:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def metric_values(results: Sequence[JobResult], metric: str) -> list[float]:
    """The values of one scalar metric across results (missing ones skipped)."""
    return [float(r.metrics[metric]) for r in results if metric in r.metrics and r.metrics[metric] is not None]


def seeds_for(scale: str, seeds: int | None, defaults: Mapping[str, int]) -> list[int]:
    """The seed list for a scale: ``seeds`` if given, else the scale's default count; seeds are 0..n-1."""
    n = seeds if seeds is not None else defaults[scale]
    return list(range(n))


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it (uses the non-interactive Agg backend)."""
    import io

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 5.0, height: float = 3.6) -> tuple[Any, Any]:
    """A matplotlib figure on the Agg backend, safe in worker processes without a display; ``width`` and
    ``height`` are per panel. Its layout is ``"constrained"``: labels, titles and a legend placed outside
    (``fig.legend(loc="outside right upper")``) never overlap the panels, so no ``tight_layout`` call."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained"
    )
