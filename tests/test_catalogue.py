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
