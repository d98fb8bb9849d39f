"""Every README's "use it on your data" example runs (issue 13), so the examples never rot.

A block runs when it is a fenced ```python block under a heading (of any level above it) whose text
contains "your data", or when its fence says ```python example. Blocks of one README run in order in one
namespace (a later block may use an earlier one's names), in a temporary working directory. A block that
needs a missing optional extra (gymnasium, flwr, ...) is skipped with the reason.

Every implemented paper must have such an example (KNOWN_MISSING is empty and may only stay so or list a
paper whose example is being written; the test warns when a listed paper has one).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

from icml24 import catalogue
from optional_extras import missing_extra

ROOT = Path(__file__).resolve().parents[1]

KNOWN_MISSING: set[str] = set()
"""Implemented papers whose README has no runnable "your data" example yet (may only shrink)."""


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)\s*(.*)$")


def example_blocks(text: str) -> list[tuple[int, str]]:
    """The runnable example blocks of a Markdown text: ``(line number, code)`` in order."""
    blocks: list[tuple[int, str]] = []
    headings: list[tuple[int, str]] = []  # the stack of (level, text) above the current line
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker, lang, info = fence.group(1), fence.group(2).lower(), fence.group(3).lower()
            start = i + 1
            i += 1
            while i < len(lines) and not lines[i].startswith(marker[:3]):
                i += 1
            code = "\n".join(lines[start:i])
            in_section = any("your data" in h.lower() for _, h in headings)
            if lang in ("python", "py") and (in_section or "example" in info.split()):
                blocks.append((start + 1, code))
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            headings = [h for h in headings if h[0] < level] + [(level, heading.group(2))]
        i += 1
    return blocks


def _readmes() -> list[tuple[str, Path]]:
    out = [("README.md", ROOT / "README.md")]
    for paper in catalogue.runnable():
        path = catalogue.readme_path(paper.slug)
        assert path is not None, f"{paper.slug} has no README.md"
        out.append((paper.slug, path))
    return out


READMES = _readmes()


def test_extraction_finds_sections_and_marked_blocks():
    text = (
        "# Paper\n## Use it on your data\nSome words.\n```python\nx = 1\n```\n### Details\n```python\ny = x\n```\n"
        "## Numbers\n```python\nnot_run()\n```\n```bash\nicml24 reproduce\n```\n```python example\nz = 2\n```\n"
    )
    assert [code for _, code in example_blocks(text)] == ["x = 1", "y = x", "z = 2"]


def test_known_missing_only_shrinks():
    implemented = {p.slug for p in catalogue.runnable()}
    assert KNOWN_MISSING <= implemented, f"not implemented papers in KNOWN_MISSING: {KNOWN_MISSING - implemented}"
    for slug, path in READMES:
        blocks = example_blocks(path.read_text(encoding="utf-8"))
        if slug in KNOWN_MISSING:
            if blocks:  # a warning, not a failure: a paper landing its example must not break main
                warnings.warn(f"{slug} now has a 'your data' example: remove it from KNOWN_MISSING", stacklevel=1)
        elif slug != "README.md":
            assert blocks, f"{slug}: its README.md needs a runnable example under a 'Use it on your data' heading"


PAPER_READMES = [r for r in READMES if r[0] != "README.md"]


@pytest.mark.parametrize("name,path", PAPER_READMES, ids=[name for name, _ in PAPER_READMES])
def test_paper_readme_says_whether_its_verdict_could_have_failed(name, path):
    assert "Could this have failed?" in path.read_text(encoding="utf-8"), f"{name}: add the 'Could this have failed?' line"


@pytest.mark.parametrize("name,path", READMES, ids=[name for name, _ in READMES])
def test_readme_examples_run(name, path, tmp_path, monkeypatch, capsys):
    blocks = example_blocks(path.read_text(encoding="utf-8"))
    if not blocks:
        pytest.skip(f"{name}: no example block yet")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICML24_HOME", str(tmp_path))
    namespace: dict[str, object] = {"__name__": "__readme_example__"}
    for line, code in blocks:
        try:
            exec(compile(code, f"{path}:{line}", "exec"), namespace)  # noqa: S102 - the README's own example
        except ModuleNotFoundError as exc:
            if (why := missing_extra(exc)) is not None:  # an absent extra: skipped, not failed
                pytest.skip(f"{name}: the block at line {line} {why}")
            raise
    assert os.getcwd() == str(tmp_path)
    assert capsys.readouterr().out.strip(), f"{name}: the example prints its result"


def _level2_headings(text: str) -> list[str]:
    out, fence = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fence = not fence
        elif not fence and line.startswith("## "):
            out.append(line[3:].strip())
    return out


@pytest.mark.parametrize("name,path", PAPER_READMES, ids=[name for name, _ in PAPER_READMES])
def test_paper_readme_opens_with_its_your_data_example(name, path):
    """Issue 13: each paper README *opens* with its "use it on your data" example (its first section)."""
    headings = _level2_headings(path.read_text(encoding="utf-8"))
    assert headings and "your data" in headings[0].lower(), f"{name}: first section is {headings[:1]}, not 'Use it on your data'"


def test_top_level_readme_has_an_example_for_every_field():
    """Issue 13: the top-level README gains one runnable example per field of the implemented papers."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Use it on your data")
    section = text[start : text.index("\n## ", start + 1)]
    fields = {p.field for p in catalogue.implemented()}
    for field in sorted(fields):
        # "**field** (paper, link):" directly followed by its python block
        entry = re.search(rf"^\*\*{re.escape(field)}\*\* [^\n]*\n\s*```python\n", section, flags=re.M)
        assert entry, f"the top-level README has no example for the field {field!r}"
    assert len(example_blocks(section)) >= len(fields)
