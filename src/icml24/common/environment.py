"""The floating-point environment of a job: what, besides code, config and seed, decides its last bits.

The same code and seed give different numbers under another kernel set: torch dispatches its CPU kernels by
``torch.backends.cpu.get_cpu_capability()`` (AVX-512, AVX2, ..., overridable with ``ATEN_CPU_CAPABILITY``), and
numpy/scipy call whichever BLAS/LAPACK is loaded (threadpoolctl names it and its kernel architecture). Every job
records :func:`job_environment` beside its metrics; :func:`environment_key` hashes the parts that can change a
result, so the report can tell rows of another environment from rows of the reader's own, and
``icml24 compare`` can line up two stores run under two kernel sets.

This module only records: the code fingerprint leaves it out (:data:`icml24.common.fingerprint.PROVENANCE_ONLY`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
from importlib import metadata
from typing import Any

_KEY_FIELDS = ("python", "numpy", "scipy", "torch", "torch_cpu_capability", "blas", "cpu_model", "machine")
"""The fields that can change a job's numbers (the thread counts are pinned per job and left out)."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _blas() -> list[dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - scikit-learn brings threadpoolctl
        return []
    out = []
    for pool in threadpool_info():
        if pool.get("user_api") != "blas":
            continue
        out.append({k: pool.get(k) for k in ("internal_api", "version", "architecture", "threading_layer")})
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True))


@functools.lru_cache(maxsize=1)
def job_environment() -> dict[str, Any]:
    """The floating-point environment of this process (computed once): interpreter, numpy/scipy/torch
    versions, torch's build and CPU kernel capability, the BLAS/LAPACK libraries loaded and their kernel
    architecture, the CPU model. Imports torch (jobs have it loaded already)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "torch": _version("torch"),
        "torch_cpu_capability": None,
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY"),
        "cpu_model": _cpu_model(),
        "machine": platform.machine(),
        "platform": sys.platform,
    }
    try:
        import numpy  # noqa: F401 - loads its BLAS so that threadpoolctl sees it
        import torch

        env["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        env["torch_build"] = {"git": (torch.version.git_version or "")[:12], "cuda": torch.version.cuda,
                              "debug": bool(torch.version.debug)}  # fmt: skip
    except ImportError:  # pragma: no cover - torch is a core dependency
        pass
    env["blas"] = _blas()
    env["key"] = environment_key(env)
    return env


def environment_key(env: dict[str, Any] | None) -> str:
    """A short hash of the fields of ``env`` that can change a job's numbers (``""`` for no environment:
    rows stored before environments were recorded)."""
    if not env:
        return ""
    subset = {k: env.get(k) for k in _KEY_FIELDS}
    return hashlib.sha256(json.dumps(subset, sort_keys=True, default=str).encode()).hexdigest()[:12]


def describe(env: dict[str, Any] | None) -> str:
    """One line for people: ``torch 2.13.0 (AVX512), numpy 2.3.1, scipy 1.16.0, OpenBLAS 0.3.29 (Zen),
    AMD EPYC, Python 3.11.7``."""
    if not env:
        return "not recorded (rows stored before icml24 recorded environments)"
    blas = ", ".join(dict.fromkeys(  # numpy and scipy often load the same OpenBLAS build: name it once
        f"{b.get('internal_api')} {b.get('version')}" + (f" ({b['architecture']})" if b.get("architecture") else "")
        for b in env.get("blas") or []
    ))
    forced = f", ATEN_CPU_CAPABILITY={env['aten_cpu_capability']}" if env.get("aten_cpu_capability") else ""
    return (
        f"torch {env.get('torch')} ({env.get('torch_cpu_capability')}{forced}), numpy {env.get('numpy')}, "
        f"scipy {env.get('scipy')}, {blas or 'BLAS unknown'}, {env.get('cpu_model')}, Python {env.get('python')}"
    )
