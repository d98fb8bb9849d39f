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
    for name in ("pyproject.toml", "README.md", "LICENSE"):
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
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "the LICENSE file is not in the wheel"
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: MIT" in text and "Project-URL: " in text


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _lower_bounds(requirements: list[str]) -> dict[str, tuple[int, ...]]:
    import re

    out = {}
    for req in requirements:
        m = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*>=\s*([0-9][0-9.]*)", req)
        if m:
            out[m.group(1).lower()] = tuple(int(x) for x in m.group(2).split("."))
    return out


def test_the_declared_minimums_are_what_the_code_needs():
    """scipy 1.13.1 lacks bootstrap(rng=) (decide.compare(test='rank')), numpy 1.26 lacks np.trapezoid
    (size_invariant_sod.auc), validate_data is scikit-learn 1.6, nn.RMSNorm torch 2.4. `.ci/minimums`
    installs exactly these bounds and runs the smoke tests (not in make test: it installs a second venv)."""
    project = _pyproject()["project"]
    low = _lower_bounds(project["dependencies"])
    need = {"numpy": (2, 0), "scipy": (1, 15), "scikit-learn": (1, 6), "torch": (2, 4), "statsmodels": (0, 14, 2)}
    for name, version in need.items():
        assert low.get(name, ()) >= version, f"{name} must be declared >= {'.'.join(map(str, version))}"
    assert all(_lower_bounds([d]) for d in project["dependencies"]), "every core dependency needs a >= bound"
    assert (ROOT / ".ci" / "minimums").is_file()


def test_build_license_and_urls_are_declared():
    data = _pyproject()
    assert _lower_bounds(data["build-system"]["requires"])["setuptools"] >= (77,)  # PEP 639 license field
    project = data["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License") and "icml24 developers" in license_text
    assert project["urls"] and all(u.startswith("https://") for u in project["urls"].values())


def test_extras_are_filed_where_they_are_used():
    extras = _pyproject()["project"]["optional-dependencies"]
    names = {e: {_req_name(r) for r in reqs} for e, reqs in extras.items()}
    assert "snntorch" in names["dev"] and "snntorch" not in names["language"]  # tests only
    assert "mujoco" in names["rl"] and "mujoco" in names["vision"]  # stochastic-q's full scale; vint-6d
    # the catalogue's extra -> modules table covers exactly the declared extras, and `all` installs each
    assert set(catalogue.EXTRA_MODULES) == set(extras) - {"dev", "all"}
    (everything,) = extras["all"]
    assert set(everything.split("[")[1].rstrip("]").split(",")) == set(catalogue.EXTRA_MODULES)
    for p in catalogue.papers():
        assert set(p.extras) <= set(extras), p.slug


def _req_name(req: str) -> str:
    import re

    return re.match(r"^[A-Za-z0-9_.-]+", req).group(0).lower()


def test_the_install_stamp_depends_on_the_torch_choice_and_the_cpu_index_is_documented():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(STAMP): pyproject.toml $(TORCH_CHOICE)" in makefile
    assert "$(TORCH_PIN) $(TORCH_INDEX)" in makefile and "$(TORCH_CHOICE): FORCE" in makefile
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in readme
    assert "TORCH_PIN ?= torch==2.13.0" in makefile
