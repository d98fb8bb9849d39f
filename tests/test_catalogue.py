"""The catalogue: complete, consistent with INDEX.md and the README, and honest about status."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from icml24 import catalogue

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT.parent / "shared" / "papers" / "INDEX.md"


def test_every_entry_is_complete():
    for p in catalogue.papers():
        assert p.title and p.authors and p.claim and p.field, p.slug
        assert p.venue == "ICML" and p.year == 2024, p.slug
        assert p.arxiv or p.proceedings or p.code, f"{p.slug} needs an identifier or a code link"
        if p.arxiv:
            assert re.fullmatch(r"\d{4}\.\d{4,5}", p.arxiv), p.slug


def test_position_status_only_for_position_papers():
    assert {p.slug for p in catalogue.papers() if p.status == "position"} == {"agency", "context-explanations"}


@pytest.mark.skipif(not INDEX.exists(), reason="shared/papers/INDEX.md not beside the checkout")
def test_catalogue_matches_index():
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| `([a-z]+)` \|", INDEX.read_text(), flags=re.M)
    assert rows, "INDEX.md format changed"
    assert {s: f for s, f in rows} == {p.slug: p.field for p in catalogue.papers()}


def test_runnable_iff_reproduction_module_exists():
    """Implemented papers and position papers with a module (demonstrations) have a reproduce module; a
    planned paper has none."""
    for p in catalogue.papers():
        if not p.module:
            assert p.status != "implemented" and not p.runnable, p.slug
            continue
        try:
            importlib.import_module(f"{p.module}.reproduce")
            has = True
        except ModuleNotFoundError as exc:
            if exc.name and not p.module.startswith(exc.name) and exc.name != f"{p.module}.reproduce":
                raise  # the module exists but needs something missing: a real error
            has = False
        assert has == p.runnable, f"{p.slug}: status {p.status} but reproduce module exists={has}"


def test_readme_table_is_generated_from_the_catalogue():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- papers:start -->\n(.*?)\n<!-- papers:end -->", readme, flags=re.S)
    assert m, "README.md lacks the generated paper table markers"
    assert m.group(1).strip() == catalogue.markdown_table().strip(), (
        "README paper table is stale: run `python -m icml24.catalogue --write-readme README.md`"
    )


def test_get_unknown_names_closest():
    with pytest.raises(KeyError, match="bloop"):
        catalogue.get("blop")


def test_a_demonstration_keeps_its_position_status_and_runs_only_when_named():
    from icml24.common.registry import resolve_slugs

    demos = catalogue.demonstrations()
    assert demos, "no position paper has a demonstration"
    for p in demos:
        assert p.status == "position" and p.runnable and p.is_demonstration
        assert p not in catalogue.implemented() and p in catalogue.runnable()
        assert catalogue.reproduction(p.slug).slug == p.slug
        assert p.slug not in resolve_slugs([]).runnable  # the default sweep: implemented papers only
        assert p.slug in resolve_slugs([], include_demonstrations=True).runnable
        assert resolve_slugs([p.slug]).runnable == [p.slug]
    plain = [p for p in catalogue.papers() if p.status == "position" and not p.module]
    for p in plain:  # a position paper without a module has nothing to run
        assert not p.runnable
        with pytest.raises(LookupError, match="position"):
            catalogue.reproduction(p.slug)
        assert resolve_slugs([p.slug]).not_implemented == [(p.slug, "position")]


def _third_party_imports(package: str) -> set[str]:
    """The top-level third-party modules that any file of ``package`` imports, following ``icml24.*`` imports
    (also those inside functions: a job imports them when it runs), read from the source (nothing imported)."""
    import ast
    import sys

    src = ROOT / "src"

    def files(mod: str) -> list[Path]:
        path = src.joinpath(*mod.split("."))
        if path.is_dir():
            return sorted(path.rglob("*.py")) if mod == package else [path / "__init__.py"]
        return [path.with_suffix(".py")] if path.with_suffix(".py").is_file() else []

    seen, found, stack = set(), set(), [package]
    while stack:
        mod = stack.pop()
        if mod in seen:
            continue
        seen.add(mod)
        for f in files(mod):
            here = ".".join(f.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
            pkg = here if f.name == "__init__.py" else here.rsplit(".", 1)[0]
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                        base = ".".join(parts + ([node.module] if node.module else []))
                    names = [base] + [f"{base}.{a.name}" for a in node.names]
                for name in names:
                    if name.startswith("icml24."):
                        parts = name.split(".")
                        stack += [".".join(parts[:k]) for k in range(2, len(parts) + 1)]
                    elif name and name.split(".")[0] not in sys.stdlib_module_names and name != "icml24":
                        found.add(name.split(".")[0])
    return found


def test_the_catalogue_scales_match_each_reproduction():
    """The CLI plans from the catalogue's scales without importing reproduce.py: they must be the truth."""
    for p in catalogue.runnable():
        try:
            repro = catalogue.reproduction(p.slug)
        except catalogue.MissingExtra as exc:  # not importable here: nothing to compare against
            print(f"{p.slug}: {exc}")
            continue
        assert p.scales == tuple(repro.scales), f"{p.slug}: catalogue.json scales {p.scales} != {repro.scales}"
    assert all(not p.scales for p in catalogue.papers() if not p.runnable)


def test_the_catalogue_extras_cover_every_optional_module_a_paper_imports():
    """Every optional module a paper's code (and the shared code it imports) imports is installed by one of the
    extras its catalogue entry names, so a missing extra skips the paper instead of crashing mid-run."""
    optional = {m for mods in catalogue.EXTRA_MODULES.values() for m in mods}
    assert "zuko" in _third_party_imports("icml24.subgroups.syflow")  # the scan sees what a paper imports
    for p in catalogue.runnable():
        needed = _third_party_imports(p.module) & optional
        covered = {m for e in p.extras for m in catalogue.EXTRA_MODULES[e]}
        assert needed <= covered, f"{p.slug} imports {sorted(needed - covered)}: add their extra to catalogue.json"
        assert set(p.extras) <= set(catalogue.EXTRA_MODULES), p.slug
    assert catalogue.get("syflow").extras == ("subgroups",) and catalogue.get("bloop").extras == ()


def test_a_missing_extra_is_named_with_its_pip_install(monkeypatch):
    """zuko absent (None in sys.modules: find_spec says missing, import fails): syflow needs its extra."""
    import sys

    monkeypatch.setitem(sys.modules, "zuko", None)
    for name in [m for m in sys.modules if m.startswith("icml24.subgroups")]:
        monkeypatch.delitem(sys.modules, name)
    paper = catalogue.get("syflow")
    assert not catalogue.extra_installed("subgroups") and paper.missing_extras == ("subgroups",)
    assert paper.install_hint == "pip install 'icml24[subgroups]'"
    with pytest.raises(catalogue.MissingExtra, match=r"pip install 'icml24\[subgroups\]'"):
        catalogue.reproduction("syflow")
    import types

    monkeypatch.setitem(sys.modules, "pysubgroup", types.ModuleType("pysubgroup"))  # no __spec__: not found
    assert not catalogue._importable("pysubgroup")
    # the catalogue believes it installed but the import fails anyway: the same error, naming the module
    monkeypatch.setattr(catalogue, "extra_installed", lambda extra: True)
    with pytest.raises(catalogue.MissingExtra, match=r"needs zuko \(the subgroups extra\)"):
        catalogue.reproduction("syflow")


def test_an_unknown_extra_in_the_catalogue_is_refused():
    with pytest.raises(ValueError, match="extras must be among"):
        catalogue.Paper(slug="x", title="t", authors=("a",), venue="ICML", year=2024, field="common",
                        status="planned", claim="c", extras=("nope",))  # fmt: skip
    with pytest.raises(ValueError, match="needs its scales"):
        catalogue.Paper(slug="x", title="t", authors=("a",), venue="ICML", year=2024, field="common",
                        status="implemented", claim="c", module="icml24.x")  # fmt: skip
