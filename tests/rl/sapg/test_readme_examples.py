"""The sapg README's Python blocks run as written (issue 13: examples that never rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[3] / "src" / "icml24" / "rl" / "sapg" / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"{README.name}:block{index}", "exec"), {"__name__": "readme_example"})
