"""Two stores side by side, verdict by verdict and check by check (``icml24 compare``).

The use: rerun a paper under another floating-point kernel set (``ATEN_CPU_CAPABILITY=avx2 icml24 reproduce
SLUG --store B.sqlite``) or on another machine, then compare with the first store. A verdict that differs
between the two is *fragile*: the kernels acted like another seed, and the verdict must not be presented as
settled (add seeds or call it inconclusive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icml24.common.report import PaperReport


@dataclass(frozen=True)
class CheckDiff:
    """One sub-claim in both stores."""

    id: str
    verdict_a: str | None
    verdict_b: str | None
    effect_a: float | None
    effect_b: float | None
    p_a: float | None
    p_b: float | None
    decisive: bool

    @property
    def same_verdict(self) -> bool:
        return self.verdict_a == self.verdict_b

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "verdict_a": self.verdict_a, "verdict_b": self.verdict_b, "effect_a": self.effect_a,
                "effect_b": self.effect_b, "p_a": self.p_a, "p_b": self.p_b, "decisive": self.decisive,
                "same_verdict": self.same_verdict}  # fmt: skip


@dataclass(frozen=True)
class PaperDiff:
    """One paper in both stores: its verdicts, its checks and the environments each store's rows ran in."""

    slug: str
    verdict_a: str | None
    verdict_b: str | None
    environments_a: list[str]
    environments_b: list[str]
    checks: list[CheckDiff] = field(default_factory=list)
    kernels_a: list[str] = field(default_factory=list)
    kernels_b: list[str] = field(default_factory=list)

    @property
    def same_verdict(self) -> bool:
        return self.verdict_a == self.verdict_b

    @property
    def fragile(self) -> bool:
        """Both stores hold a verdict and they differ, or a decisive check's verdict differs."""
        decisive_flip = any(c.decisive and not c.same_verdict for c in self.checks)
        both = self.verdict_a is not None and self.verdict_b is not None
        return both and (not self.same_verdict or decisive_flip)

    @property
    def same_kernels(self) -> bool:
        """Both stores' rows ran with the same kernels (torch's capability and the BLAS kernel architecture):
        the comparison then tests determinism, not the kernel set. Asking for a capability the CPU lacks
        (``ATEN_CPU_CAPABILITY=avx512`` on an AVX2 machine), or for the one it already uses, gives the same
        kernels; ``default`` (no SIMD) always differs."""
        return bool(self.kernels_a) and self.kernels_a == self.kernels_b

    def to_dict(self) -> dict[str, Any]:
        return {"slug": self.slug, "verdict_a": self.verdict_a, "verdict_b": self.verdict_b,
                "same_verdict": self.same_verdict, "fragile": self.fragile, "environments_a": self.environments_a,
                "environments_b": self.environments_b, "kernels_a": self.kernels_a, "kernels_b": self.kernels_b,
                "same_kernels": self.same_kernels, "checks": [c.to_dict() for c in self.checks]}  # fmt: skip


def _verdict(report: PaperReport | None) -> str | None:
    if report is None or report.state != "analysed":
        return None
    return report.analysis.verdict


def _environments(report: PaperReport | None) -> list[str]:
    if report is None:
        return []
    return [str(e.get("description")) for e in (report.code.get("environments") or [])]


def kernel_set(env: dict[str, Any] | None) -> str:
    """The kernels a job ran with, in words: torch's CPU capability and each BLAS's kernel architecture
    (``"torch AVX2, openblas Haswell"``); ``""`` when not recorded."""
    if not env:
        return ""
    blas = ", ".join(f"{b.get('internal_api')} {b.get('architecture') or '?'}" for b in env.get("blas") or [])
    return f"torch {env.get('torch_cpu_capability')}" + (f", {blas}" if blas else "")


def _kernels(report: PaperReport | None) -> list[str]:
    if report is None:
        return []
    return sorted({kernel_set(e.get("environment")) for e in (report.code.get("environments") or [])} - {""})


def diff_papers(a: PaperReport | None, b: PaperReport | None) -> PaperDiff:
    """Line up one paper's two reports (either may be missing: a paper only one store holds)."""
    slug = (a or b).slug  # type: ignore[union-attr]
    checks_a = {c.id: c for c in a.analysis.checks} if _verdict(a) else {}
    checks_b = {c.id: c for c in b.analysis.checks} if _verdict(b) else {}
    checks = []
    for cid in dict.fromkeys([*checks_a, *checks_b]):
        ca, cb = checks_a.get(cid), checks_b.get(cid)
        checks.append(CheckDiff(
            cid, ca.effective_verdict if ca else None, cb.effective_verdict if cb else None,
            ca.effect if ca else None, cb.effect if cb else None, ca.p_value if ca else None,
            cb.p_value if cb else None, bool((ca or cb).decisive),  # type: ignore[union-attr]
        ))  # fmt: skip
    return PaperDiff(slug, _verdict(a), _verdict(b), _environments(a), _environments(b), checks,
                     _kernels(a), _kernels(b))  # fmt: skip
