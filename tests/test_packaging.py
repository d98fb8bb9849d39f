"""The wheel carries what the installed package needs: every implemented paper's README.md (which
`icml24 show` points to), the catalogue and the results.json schema."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from icml24 import catalogue

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_the_readmes_and_the_schema(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if out.returncode != 0 and "No module named" in out.stderr:
        pytest.skip(f"cannot build a wheel here: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("icml24-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for paper in catalogue.runnable():
        readme = "/".join(paper.module.split(".")) + "/README.md"
        assert readme in names, f"{paper.slug}: {readme} is not in the wheel"
    assert {"icml24/catalogue.json", "icml24/common/results.schema.json"} <= names
