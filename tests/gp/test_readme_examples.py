"""The "Use it on your data" example of each GP paper's README runs as written (so it cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import icml24.gp

ROOT = Path(icml24.gp.__file__).parent
READMES = sorted(ROOT.glob("*/README.md"))


def use_block(text: str) -> str:
    section = text.split("## Use it on your data", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "the section has no python block"
    return blocks[0]


def test_both_papers_have_a_readme():
    assert {p.parent.name for p in READMES} == {"advised_rflvm", "kep_svgp"}


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_use_it_on_your_data_block_runs(readme, tmp_path, monkeypatch, capsys):
    text = readme.read_text()
    assert "## Use it on your data" in text
    assert "Could this have failed?" in text
    monkeypatch.chdir(tmp_path)
    exec(compile(use_block(text), str(readme), "exec"), {"__name__": "__readme__"})
    assert capsys.readouterr().out.strip(), "the example prints its result"
