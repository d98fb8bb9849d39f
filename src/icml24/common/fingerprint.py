"""Code fingerprints: which code a stored job ran, so that the store never serves numbers of older code.

A job is keyed in the store by the fingerprint of the code it runs (:func:`code_fingerprint`): a sha256 over
the content of

- the job function's module and every file of its package (the paper's folder, data files included,
  ``*.md`` and caches excluded),
- the field package ``icml24.<field>`` (its shared machinery: ``rl/envs``, ``gp/kernels``...) *without* the
  folders of the field's other papers, so that editing one paper does not invalidate its neighbours,
- ``icml24.common`` (the experiment contract that runs every job, the shared models), except the modules
  that run only in the driver, around the jobs, and cannot change a job's metrics (:data:`DRIVER_ONLY`:
  store, runner, leases, report, registry, decision rules; ``analyze`` is rerun from the stored metrics at every
  report, so a change there shows at once without rerunning jobs),
- and every module of the same top-level package reachable from those files by ``import`` statements
  (found statically, lazy in-function imports included), so that a paper that imports another paper's code
  is invalidated when that code changes.

Files are hashed by their path relative to the top-level package and their bytes, so a checkout and an
installed wheel of the same code have the same fingerprint. A :class:`Fingerprinter` caches each file's
digest and each module's fingerprint, so one run computes a paper's fingerprint once, not once per job.

:func:`git_state` gives the commit of the checkout the package runs from and whether its source tree is
dirty; the store records both next to the fingerprint (the fingerprint decides reuse, the commit is for
people).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FINGERPRINT_LENGTH = 16
"""Hex digits kept of the sha256 (64 bits: a collision between two code states of one job is negligible)."""

DRIVER_ONLY = frozenset(
    f"icml24/common/{name}.py" for name in ("store", "runner", "report", "registry", "fingerprint", "leases", "decide")
)
"""Modules of ``icml24.common`` left out of fingerprints: they run in the driver only (a job module that
imports one of them brings it back in through the import closure)."""

_SKIP_SUFFIXES = (".md", ".pyc", ".pyo", ".rst")
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def _module_origin(module: str) -> tuple[Path | None, bool]:
    """The file of ``module`` and whether it is a package, without importing the module itself (its
    parent packages are imported, as for any import). ``(None, False)`` when it cannot be found."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None, False
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None, False
    return Path(spec.origin), spec.submodule_search_locations is not None


def _package_files(folder: Path, exclude: Iterable[Path] = ()) -> list[Path]:
    """Every file under ``folder`` that can change a result (no docs, no caches), minus ``exclude`` folders."""
    excluded = [e.resolve() for e in exclude]
    out = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix in _SKIP_SUFFIXES or path.name.startswith("."):
            continue
        if any(part in _SKIP_DIRS for part in path.parts):
            continue
        resolved = path.resolve()
        if any(resolved.is_relative_to(e) for e in excluded):
            continue
        out.append(path)
    return out


def _imported_modules(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of the modules an ``import`` statement anywhere in ``source`` may refer to
    (``from a.b import c`` yields ``a.b`` and ``a.b.c``: ``c`` may be a submodule)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    continue
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


@dataclass(frozen=True)
class CodeFiles:
    """The files a fingerprint covers, each with its label (its path from its top-level package's folder,
    e.g. ``icml24/common/store.py``), sorted by label."""

    files: tuple[tuple[str, Path], ...]


class Fingerprinter:
    """Computes and caches code fingerprints (one instance per run: files are read once)."""

    def __init__(self) -> None:
        self._file_digest: dict[Path, str] = {}
        self._by_module: dict[str, str] = {}

    def for_fn(self, fn: str) -> str:
        """The fingerprint of the code that job function ``fn`` (``"package.module:function"``) runs."""
        if not isinstance(fn, str) or ":" not in fn:
            raise ValueError(f"fn must be 'package.module:function', got {fn!r}")
        return self.for_module(fn.partition(":")[0])

    def for_module(self, module: str) -> str:
        """The fingerprint of ``module`` (see the module docstring for what it covers)."""
        if module not in self._by_module:
            files = code_files(module)
            h = hashlib.sha256()
            if files is None:
                # The module cannot be found (a test's placeholder fn): a fixed fingerprint from its name.
                h.update(b"missing module\0" + module.encode())
            else:
                for label, path in files.files:
                    h.update(label.encode() + b"\0" + self._digest(path).encode() + b"\0")
            self._by_module[module] = h.hexdigest()[:FINGERPRINT_LENGTH]
        return self._by_module[module]

    def _digest(self, path: Path) -> str:
        if path not in self._file_digest:
            self._file_digest[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        return self._file_digest[path]


def code_files(module: str) -> CodeFiles | None:
    """The files the fingerprint of ``module`` covers, or ``None`` when the module cannot be found."""
    origin, is_package = _module_origin(module)
    if origin is None:
        return None
    root = _top_root(module)
    files: set[Path] = {origin}
    package = module if is_package else module.rpartition(".")[0]
    if package:
        pkg_origin, _ = _module_origin(package)
        if pkg_origin is not None:
            files.update(_package_files(pkg_origin.parent))
    _add_import_closure(files, module.split(".")[0], root)
    labelled = {(path.relative_to(root).as_posix(), path) for path in files}
    # icml24.common (the runner, the contract, the decision rules) and the field's shared machinery.
    icml24_root = _top_root("icml24")
    shared = _icml24_shared_files(module if module.startswith("icml24.") else "")
    _add_import_closure(shared, "icml24", icml24_root)
    labelled.update((path.relative_to(icml24_root).as_posix(), path) for path in shared)
    return CodeFiles(tuple(sorted(labelled)))


def _top_root(module: str) -> Path:
    """The folder that holds ``module``'s top-level package (or top-level module)."""
    top = module.split(".")[0]
    origin, is_package = _module_origin(top)
    if origin is None:  # pragma: no cover - a found module has a findable top-level package
        raise ModuleNotFoundError(top)
    return origin.parent.parent if is_package else origin.parent


def _icml24_shared_files(module: str) -> set[Path]:
    """``icml24.common`` and the field package minus the folders of the field's other papers."""
    from icml24 import catalogue

    files: set[Path] = set()
    common, _ = _module_origin("icml24.common")
    if common is not None:
        root = common.parent.parent.parent
        files.update(
            p for p in _package_files(common.parent) if p.relative_to(root).as_posix() not in DRIVER_ONLY
        )
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] != "common":
        field_module = ".".join(parts[:2])
        field_origin, field_is_package = _module_origin(field_module)
        if field_origin is not None and field_is_package:
            others = []
            for paper in catalogue.papers():
                if not paper.module or module == paper.module or module.startswith(paper.module + "."):
                    continue
                if paper.module.startswith(field_module + "."):
                    origin, is_pkg = _module_origin(paper.module)
                    if origin is not None and is_pkg:
                        others.append(origin.parent)
            files.update(_package_files(field_origin.parent, exclude=others))
    return files


def _add_import_closure(files: set[Path], top: str, root: Path) -> None:
    """Add, to ``files``, every module of package ``top`` that their ``import`` statements reach."""
    seen_modules: set[str] = set()
    todo = [p for p in files if p.suffix == ".py"]
    while todo:
        path = todo.pop()
        module, is_package = _module_name(path, root)
        if module is None:
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for name in _imported_modules(source, module, is_package):
            if name.split(".")[0] != top or name in seen_modules:
                continue
            seen_modules.add(name)
            parts = name.split(".")
            # The module and the __init__ of every package on its path run on import.
            candidates = [root.joinpath(*parts[:i], "__init__.py") for i in range(1, len(parts) + 1)]
            candidates.append(root.joinpath(*parts).with_suffix(".py"))
            for origin in candidates:
                if origin.is_file() and origin not in files:
                    files.add(origin)
                    todo.append(origin)


def _module_name(path: Path, root: Path) -> tuple[str | None, bool]:
    try:
        rel = path.relative_to(root).with_suffix("")
    except ValueError:
        return None, False
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def combine(fingerprints: Iterable[str]) -> str:
    """One fingerprint for several (a paper whose jobs live in several modules); one stays as it is."""
    unique = sorted(set(fingerprints))
    if len(unique) == 1:
        return unique[0]
    return hashlib.sha256("\0".join(unique).encode()).hexdigest()[:FINGERPRINT_LENGTH]


@dataclass(frozen=True)
class GitState:
    """The commit of the checkout the package runs from and whether its source tree has changes."""

    commit: str | None
    dirty: bool | None


def git_state(path: Path | None = None) -> GitState:
    """The git commit (short) of the checkout holding ``path`` (default: this package) and whether the
    package's source tree differs from it (uncommitted or untracked files). ``GitState(None, None)``
    outside a git checkout (an installed wheel) or without git."""
    where = (path or Path(__file__).resolve().parent.parent).resolve()
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0 or not head.stdout.strip():
            return GitState(None, None)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=normal", "--", "."],
            cwd=where, capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return GitState(None, None)
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return GitState(head.stdout.strip(), dirty)
