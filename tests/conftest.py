"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FAKE_DIR = Path(__file__).parent / "common"


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
