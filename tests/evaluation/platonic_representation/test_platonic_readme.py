"""The README's "Use it on your data" block runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import icml24.evaluation.platonic_representation as pkg


def test_readme_example_runs(capsys):
    text = (Path(pkg.__file__).parent / "README.md").read_text()
    section = text.split("## Use it on your data", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
    assert "chance" in capsys.readouterr().out
