"""The "Use it on your data" example of each README of the conformal field and of factored-reward-bandits runs
as written (so it cannot rot), and each paper README says whether its verdict could have failed."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

import icml24.bandits.factored_reward_bandits as frb
import icml24.conformal

ROOT = Path(icml24.conformal.__file__).parent
READMES = [ROOT / "README.md", *sorted(ROOT.glob("*/README.md")), Path(frb.__file__).parent / "README.md"]


def use_block(text: str) -> str:
    section = text.split("## Use it on your data", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "the section has no python block"
    return blocks[0]


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_use_it_on_your_data_block_runs(readme, tmp_path, monkeypatch):
    text = readme.read_text()
    assert "## Use it on your data" in text
    if readme.parent != ROOT:  # the paper READMEs, not the shared core's
        assert "Could this have failed?" in text
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(use_block(text), str(readme), "exec"), {"__name__": "__readme__"})
