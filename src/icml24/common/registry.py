"""Which reproductions ``icml24 reproduce`` knows: the catalogue's implemented papers, the position papers'
demonstrations (when named), plus, optionally,
the user's own reproductions named in the ``ICML24_REPRODUCTIONS`` environment variable
(``"package.module:OBJECT,other.module:OBJECT"``), each a :class:`~icml24.common.experiment.Reproduction`.
The second lets a researcher run their own experiments through the same runner, store and report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from icml24 import catalogue
from icml24.common.experiment import Reproduction, resolve

ENV_VAR = "ICML24_REPRODUCTIONS"


def extra_reproductions() -> dict[str, Reproduction]:
    """The user-registered reproductions, by slug."""
    out: dict[str, Reproduction] = {}
    for spec in filter(None, (s.strip() for s in os.environ.get(ENV_VAR, "").split(","))):
        if ":" not in spec:
            raise ValueError(f"{ENV_VAR} entries must be 'package.module:OBJECT', got {spec!r}")
        repro = resolve(spec)
        if not isinstance(repro, Reproduction):
            raise TypeError(f"{spec} is a {type(repro).__name__}, expected a Reproduction")
        out[repro.slug] = repro
    return out


@dataclass(frozen=True)
class Resolution:
    """The outcome of resolving the slugs a user named."""

    runnable: list[str]
    not_implemented: list[tuple[str, str]]  # (slug, status)
    unknown: list[tuple[str, list[str]]]  # (slug, closest slugs)


def resolve_slugs(names: list[str], *, include_demonstrations: bool = False) -> Resolution:
    """Split user-given slugs into runnable, known-but-not-runnable, and unknown (with suggestions).

    No names means every implemented paper (and every user-registered reproduction); a position paper's
    demonstration joins that default only with ``include_demonstrations`` (``icml24 report`` uses it to
    report whatever the store holds). A named demonstration is always runnable.
    """
    extras = extra_reproductions()
    if not names:
        default = catalogue.runnable() if include_demonstrations else catalogue.implemented()
        return Resolution([p.slug for p in default] + list(extras), [], [])
    runnable, planned, unknown = [], [], []
    for name in dict.fromkeys(names):
        if name in extras:
            runnable.append(name)
            continue
        try:
            paper = catalogue.get(name)
        except KeyError:
            unknown.append((name, catalogue.closest(name) + [s for s in extras if s.startswith(name[:3])]))
            continue
        if paper.runnable:
            runnable.append(name)
        else:
            planned.append((name, paper.status))
    return Resolution(runnable, planned, unknown)


def get_reproduction(slug: str) -> Reproduction:
    extras = extra_reproductions()
    if slug in extras:
        return extras[slug]
    return catalogue.reproduction(slug)
