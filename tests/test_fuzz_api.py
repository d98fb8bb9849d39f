"""Fuzz of every paper's public entry points with invalid input (issue 14).

Each paper's tests folder holds a ``fuzz_cases.py`` with ``FUZZ_CASES``: a list of dicts

    dict(fn=callable, args=(valid positional args...), kwargs={valid keyword args},
         invalid={"argname": [bad values...]}, allowed={"argname": "why odd input is allowed"},
         covers=("OtherName", ...))

and optionally ``EXEMPT = {"ExportedName": "why it takes no fuzzing"}``. For every case:

- the valid call runs (so a failure below is caused by the bad value, not by the call);
- every listed bad value, substituted into the valid call, raises ``ValueError`` or ``TypeError`` whose
  message names the argument;
- hypothesis (derandomised, bounded) plants NaN/inf into every float argument (scalars and arrays) that
  is not listed in ``allowed``, with the same requirement.

The coverage test requires every callable in an implemented paper's ``__all__`` to be covered by a case
(as ``fn``, in ``covers``) or exempt with a reason. Papers without a ``fuzz_cases.py`` must be listed
in ``KNOWN_MISSING``, a list that may only shrink.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icml24 import catalogue
from optional_extras import missing_extra

TESTS = Path(__file__).parent

KNOWN_MISSING = {
}


def _load(path: Path):
    name = "fuzz_cases_" + "_".join(path.relative_to(TESTS).parent.parts)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        if (why := missing_extra(exc)) is None:
            raise
        SKIPPED_FILES[path] = why  # an absent extra: that paper's cases are skipped, not failed
        return None
    return module


CASE_FILES = sorted(TESTS.rglob("fuzz_cases.py"))
SKIPPED_FILES: dict[Path, str] = {}
MODULES = {p: m for p in CASE_FILES if (m := _load(p)) is not None}
CASES = [
    (f"{p.relative_to(TESTS).parent}:{_i}:{getattr(c['fn'], '__qualname__', repr(c['fn']))}", c)
    for p, m in MODULES.items()
    for _i, c in enumerate(m.FUZZ_CASES)
]
_ALLOWED_KEYS = {"fn", "args", "kwargs", "invalid", "allowed", "covers"}


def _bind(case):
    sig = inspect.signature(case["fn"])
    return sig.bind(*case.get("args", ()), **case.get("kwargs", {}))


def _call_with(case, name, value):
    bound = _bind(case)
    bound.apply_defaults()
    if name not in bound.arguments:
        raise AssertionError(f"{name!r} is not a parameter of {case['fn']}")
    bound.arguments[name] = value
    return case["fn"](*bound.args, **bound.kwargs)


def _expect_clear_error(case, name, value):
    try:
        _call_with(case, name, value)
    except (ValueError, TypeError) as exc:
        assert name in str(exc), f"{case['fn'].__qualname__}({name}={value!r}) raised {exc!r}, not naming {name!r}"
        return
    raise AssertionError(f"{case['fn'].__qualname__}({name}={_short(value)}) was accepted silently")


def _short(v):
    r = repr(v)
    # Test ids must be the same in every xdist worker: no memory addresses in them.
    r = re.sub(r" at 0x[0-9a-fA-F]+", "", r)
    return r if len(r) < 80 else r[:77] + "..."


@pytest.mark.parametrize(("label", "case"), CASES, ids=[c[0] for c in CASES])
def test_case_is_well_formed_and_valid_call_runs(label, case):
    assert set(case) <= _ALLOWED_KEYS, f"{label}: unknown keys {set(case) - _ALLOWED_KEYS}"
    assert callable(case["fn"])
    bound = _bind(case)
    for name in list(case.get("invalid", {})) + list(case.get("allowed", {})):
        assert name in inspect.signature(case["fn"]).parameters, f"{label}: {name!r} is not a parameter"
    assert bound is not None
    case["fn"](*case.get("args", ()), **case.get("kwargs", {}))


BAD = [
    (label, case, name, value)
    for label, case in CASES
    for name, values in case.get("invalid", {}).items()
    for value in values
]


@pytest.mark.parametrize(("label", "case", "name", "value"), BAD, ids=[f"{b[0]}:{b[2]}={_short(b[3])}" for b in BAD])
def test_listed_bad_input_raises_a_clear_error(label, case, name, value):
    _expect_clear_error(case, name, value)


def _float_args(case):
    """(name, kind) for every argument of the valid call that holds floats: 'scalar' or 'array'."""
    out = []
    bound = _bind(case)
    allowed = case.get("allowed", {})
    for name, value in bound.arguments.items():
        if name in allowed:
            continue
        if isinstance(value, float) and not isinstance(value, bool):
            out.append((name, "scalar"))
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
            out.append((name, "array"))
        else:
            try:
                import torch

                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                    out.append((name, "tensor"))
            except ImportError:  # pragma: no cover
                pass
    return out


NONFINITE = [(label, case, name, kind) for label, case in CASES for name, kind in _float_args(case)]


@pytest.mark.parametrize(("label", "case", "name", "kind"), NONFINITE, ids=[f"{n[0]}:{n[2]}" for n in NONFINITE])
@settings(max_examples=4, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_nonfinite_floats_raise_a_clear_error(label, case, name, kind, data):
    bad = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]), label="bad")
    value = _bind(case).arguments[name]
    if kind == "scalar":
        planted = bad
    else:
        flat_index = data.draw(st.integers(0, int(np.prod(value.shape)) - 1), label="index")
        # Contiguous copies, so that reshape(-1) is a view and the planted value lands in the argument.
        planted = value.clone().contiguous() if kind == "tensor" else np.ascontiguousarray(value).copy()
        planted.reshape(-1)[flat_index] = bad
    _expect_clear_error(case, name, planted)


def _exported_callables(paper):
    module = importlib.import_module(paper.module)
    names = getattr(module, "__all__", [])
    return {n: getattr(module, n) for n in names if callable(getattr(module, n, None))}


def _paper_case_file(paper) -> Path | None:
    for p in CASE_FILES:
        if p.parent.name == paper.slug.replace("-", "_"):
            return p
    return None


@pytest.mark.parametrize("paper", catalogue.runnable(), ids=lambda p: p.slug)
def test_every_exported_callable_is_fuzzed(paper):
    path = _paper_case_file(paper)
    if path is None:
        assert paper.slug in KNOWN_MISSING, f"{paper.slug}: add tests/.../{paper.slug.replace('-', '_')}/fuzz_cases.py"
        pytest.skip(f"{paper.slug}: no fuzz cases yet (KNOWN_MISSING)")
    assert paper.slug not in KNOWN_MISSING, f"{paper.slug} has fuzz cases now: remove it from KNOWN_MISSING"
    if path in SKIPPED_FILES:
        pytest.skip(f"{paper.slug}: its fuzz cases {SKIPPED_FILES[path]}")
    module = MODULES[path]
    covered: set[object] = set()
    for m in MODULES.values():  # shared machinery may be fuzzed in its field's file
        for c in m.FUZZ_CASES:
            covered.add(c["fn"])
            covered.update(c.get("covers", ()))
    exempt = getattr(module, "EXEMPT", {})
    missing = [n for n, obj in _exported_callables(paper).items() if obj not in covered and n not in covered and n not in exempt]
    assert not missing, f"{paper.slug}: no fuzz case for {missing} (add one, or EXEMPT with a reason)"
    assert all(isinstance(r, str) and r for r in exempt.values()), "every exemption needs a reason"
