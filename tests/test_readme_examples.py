"""Every README's "use it on your data" example runs (issue 13), so the examples never rot.

A block runs when it is a fenced ```python block under a heading (of any level above it) whose text
contains "your data", or when its fence says ```python example. Blocks of one README run in order in one
namespace (a later block may use an earlier one's names), in a temporary working directory. A block that
needs a missing optional extra (gymnasium, flwr, ...) is skipped with the reason.

Every implemented paper must have such an example (KNOWN_MISSING is empty and may only stay so or list a
paper whose example is being written; the test warns when a listed paper has one).
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from icml24 import catalogue
from optional_extras import missing_extra

ROOT = Path(__file__).resolve().parents[1]

KNOWN_MISSING: set[str] = set()
"""Implemented papers whose README has no runnable "your data" example yet (may only shrink)."""


@dataclass(frozen=True)
class ExampleData:
    """What a README's example runs on against what the reproduction runs on (issue 35: the example proves the
    API generalises, so it may not rerun the experiment's own data)."""

    example: tuple[str, ...]
    """Strings in the example's code (comments stripped) that name its data: all must be there."""
    reproduction: tuple[str, ...]
    """Strings in the reproductions' ``reproduce.py`` that name their data: all must be there (so this table says
    what the reproduction really uses), and none may be in the example's code."""
    reproductions: tuple[str, ...] = ()
    """The papers whose reproductions are meant; empty: the README's own paper."""
    instances: tuple[str, ...] = ()
    """Generators the example and the reproduction share (``FactoredEnv``, ...): the settings of each call in the
    example (its literal keyword arguments) must differ from every job config of the reproductions, every scale."""


REPRODUCTION_DATA: dict[str, ExampleData] = {
    "factored-reward-bandits": ExampleData(  # the reproduction draws means ~ U[0.3, 1] at a grid of (d, K), sigma
        example=("means=means", 'noise="bernoulli"'), reproduction=('FactoredEnv(n_arms=config["n_arms"]',),
        instances=("FactoredEnv", "ParallelFactoredEnv")),
    "conformal-decision-sets": ExampleData(example=("load_wine", "simulate_trial("),
                                           reproduction=("load_digits", "load_trial_results(")),
    "rob-fcp": ExampleData(example=("make_classification(",), reproduction=("load_digits", "load_breast_cancer")),
    "src/icml24/conformal/README.md": ExampleData(  # the conformal core: the field's papers' data
        example=("load_breast_cancer",), reproduction=("load_digits",),
        reproductions=("rob-fcp", "conformal-decision-sets")),
    "advised-rflvm": ExampleData(example=("load_iris",), reproduction=("load_digits", "make_s_curve")),
    "kep-svgp": ExampleData(example=("bars[y]",), reproduction=("load_digits",)),
    "bloop": ExampleData(example=("load_diabetes",), reproduction=("load_digits", "make_quadratic(")),
    "lp-coresets": ExampleData(example=("load_digits",), reproduction=("make_regression(", "make_power_mean_instance(")),
}
"""Per README (paper slug, or a path for a shared component's README): the data of its example and of the
reproduction. Papers not listed are in NOT_YET_CHECKED."""

NOT_YET_CHECKED: set[str] = {
    "negucb", "collective-action", "context-explanations", "failure-landscape", "mcq-permutation",
    "platonic-representation", "coala", "ricci-causal", "wl-transformers", "case-or-rule", "deep-fusion", "levi",
    "spikelm", "crossget", "libra", "memvp", "uni-med", "vip", "caiac", "max-reward-rl", "mscp", "pw-dice", "sapg",
    "skills-theory", "stochastic-q", "syflow", "e3-facenet", "peg-learngene", "size-invariant-sod", "vint-6d",
}
"""Papers whose example's data is not yet checked against the reproduction's (may only shrink)."""


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


def _code_only(code: str) -> str:
    """Python source without its comments (a comment may name the reproduction's data to say it is not used)."""
    tokens = [tok for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type != tokenize.COMMENT]
    return tokenize.untokenize(tokens)


def _readme_of(name: str) -> Path:
    return ROOT / name if name.endswith(".md") else catalogue.readme_path(name)


def test_reproduction_data_covers_every_paper():
    """Every implemented paper is either checked in REPRODUCTION_DATA or still listed in NOT_YET_CHECKED."""
    implemented = {p.slug for p in catalogue.runnable()}
    checked = {name for name in REPRODUCTION_DATA if not name.endswith(".md")}
    assert not checked & NOT_YET_CHECKED, f"both checked and not yet checked: {checked & NOT_YET_CHECKED}"
    assert checked | NOT_YET_CHECKED <= implemented, f"not implemented: {(checked | NOT_YET_CHECKED) - implemented}"
    assert implemented <= checked | NOT_YET_CHECKED, f"add to REPRODUCTION_DATA: {implemented - checked - NOT_YET_CHECKED}"


@pytest.mark.parametrize("name", sorted(REPRODUCTION_DATA))
def test_readme_example_runs_on_data_the_reproduction_does_not_use(name):
    """Issue 35: the example runs on another dataset or generated instance than the reproduction."""
    entry = REPRODUCTION_DATA[name]
    code = _code_only("\n".join(c for _, c in example_blocks(_readme_of(name).read_text(encoding="utf-8"))))
    assert code.strip(), f"{name}: no example block"
    for marker in entry.example:
        assert marker in code, f"{name}: its example no longer contains {marker!r}: update REPRODUCTION_DATA"
    slugs = entry.reproductions or (name,)
    sources = {s: (catalogue.readme_path(s).parent / "reproduce.py").read_text(encoding="utf-8") for s in slugs}
    for slug, source in sources.items():
        for marker in entry.reproduction:
            assert marker in source, f"{slug}: reproduce.py no longer contains {marker!r}: update REPRODUCTION_DATA"
    for marker in entry.reproduction:
        assert marker not in code, f"{name}: the example uses the reproduction's data ({marker!r}): use other data"
    for constructor in entry.instances:
        calls = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", getattr(node.func, "attr", None)) == constructor]
        assert calls, f"{name}: no {constructor}(...) call in the example"
        for call in calls:
            settings = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords
                        if kw.arg and isinstance(kw.value, ast.Constant)}
            assert settings, f"{name}: {constructor}(...) has no literal settings to compare"
            for slug in slugs:
                for job in _all_jobs(slug):
                    shared = settings.keys() & job.config.keys()
                    assert not shared or any(settings[k] != job.config[k] for k in shared), (
                        f"{name}: {constructor}({settings}) is the reproduction's instance {job.config}")


TOP_NOT_YET_COPIED: set[str] = {"multimodal", "privacy", "federated"}
"""Fields whose top-README example differs from its source README's (may only shrink)."""


def _top_field_examples() -> list[tuple[str, str, Path, str]]:
    """``(field, source, source README, code)`` of each example of the top README's "by field" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Use it on your data")
    section = text[start : text.index("\n## ", start + 1)]
    out = []
    for m in re.finditer(r"^\*\*([\w-]+)\*\* \(([^,]+), \[`([^`]+)`\]", section, flags=re.M):
        blocks = example_blocks("## your data\n" + section[m.end() :])
        out.append((m.group(1), m.group(2), ROOT / m.group(3), blocks[0][1] if blocks else ""))
    return out


TOP_EXAMPLES = _top_field_examples()


@pytest.mark.parametrize("field,source,path,code", TOP_EXAMPLES, ids=[f"{f}-{s}" for f, s, _, _ in TOP_EXAMPLES])
def test_top_readme_examples_are_copies_of_their_source(field, source, path, code):
    """The top README's example of a field is the first example of the README it links to, verbatim."""
    first = example_blocks(path.read_text(encoding="utf-8"))
    same = bool(first) and first[0][1] == code
    if field in TOP_NOT_YET_COPIED:
        if same:
            warnings.warn(f"{field}: its top-README example is now a copy: remove it from TOP_NOT_YET_COPIED", stacklevel=1)
        return
    assert same, f"the top README's {field} example differs from {path.relative_to(ROOT)}'s first example: copy it"


def _all_jobs(slug: str) -> list:
    """The jobs of every scale the reproduction has."""
    rep, jobs = catalogue.reproduction(slug), []
    for scale in ("smoke", "quick", "full", "gpu"):
        try:
            jobs += rep.build_jobs(scale, None)
        except (KeyError, ValueError):  # a scale this paper does not define
            continue
    assert jobs, f"{slug}: no jobs at any scale"
    return jobs
