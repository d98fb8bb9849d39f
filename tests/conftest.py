"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FAKE_DIR = Path(__file__).parent / "common"

# The suite runs with --import-mode=importlib (no test folder on sys.path); the shared test helpers at this
# folder's top (optional_extras) are importable by name from every test module.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One torch intra-op thread per test, as the runner gives each job: the suite runs under
    ``pytest -n 2`` on 2 cores, the tests' tensors are small, and extra OpenMP workers only spin and
    contend (they cost 10-100x more CPU time than the work on a loaded machine)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def fake_env(monkeypatch, tmp_path):
    """Register the fake reproductions and return an environment for subprocesses."""
    monkeypatch.syspath_prepend(str(FAKE_DIR))
    spec = "icml24_fake_repro:REPRODUCTION,icml24_fake_repro:CRASHING"
    monkeypatch.setenv("ICML24_REPRODUCTIONS", spec)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(FAKE_DIR), env.get("PYTHONPATH", "")])
    env["ICML24_REPRODUCTIONS"] = spec
    env["CI"] = "1"
    return env


ICML24 = [sys.executable, "-m", "icml24"]
