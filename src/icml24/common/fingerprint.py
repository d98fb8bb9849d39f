"""Code fingerprints: which computation a stored job ran, so that the store never serves numbers of older code.

A job is keyed in the store by the fingerprint of the code it *executes* (:func:`Fingerprinter.for_fn`): a
sha256 over the normalised code of every definition that the job function can reach, found statically:

- start from the job function (``"package.module:function"``) and from the harness that runs every job
  (:data:`HARNESS`: seeding, thread pinning, metric conversion);
- a reached function or class brings in every module-level name its code refers to (a module's own
  definitions, names it imports, attribute chains on imported modules such as ``envs.make``, imports inside
  function bodies, and ``"icml24.x.y:fn"`` strings, which jobs use to name other job functions); a class is
  taken whole (its methods may be called through any instance); a module-level constant is a definition too;
- every module that reached code imports, transitively through the modules' top-level imports, contributes
  its top-level *side-effect* statements (anything but definitions and imports: a registration call, a global
  ``torch`` setting), since they run on import;
- data files (anything but Python and docs) in the folder of a module whose definitions are reached, and in
  its sub-folders that are not Python packages (``data/``), are hashed by content.

Each definition enters as a normal form of its abstract syntax tree with docstrings removed: comments,
formatting and docstrings never count, and neither does *where* a definition lives, so a reformat, a
docstring, an edit to ``analyze`` (which no job reaches), a new paper beside this one, or moving a helper to a
shared module unchanged leaves the fingerprint as it is. Third-party code is not hashed: its versions are part
of the job's recorded environment (:mod:`icml24.common.environment`).

Over-approximation is the safe side: a function-local name that shadows a module-level one brings the
module-level one in too. What static reading cannot see (``getattr`` on a computed name, ``globals()``) is not
used by job code in this package; a class is hashed whole so that method dispatch is covered.

:func:`git_state` gives the commit of the checkout the package runs from and whether its source tree is
dirty; the store records both next to the fingerprint (the fingerprint decides reuse, the commit is for
people).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

FINGERPRINT_LENGTH = 16
"""Hex digits kept of the sha256 (64 bits: a collision between two code states of one job is negligible)."""

HARNESS = ("icml24.common.experiment", "execute_job")
"""The function that runs every job (seeding, one intra-op thread, metric conversion): part of every job."""

PROVENANCE_ONLY = frozenset({"icml24.common.environment"})
"""Modules that only record where a job ran (the floating-point environment) and never compute a metric: their
definitions are not hashed, so that what is recorded can grow without invalidating stored results."""

DRIVER_DATA = frozenset({"icml24/catalogue.json", "icml24/common/results.schema.json", "icml24/py.typed"})
"""Data files next to reached modules that no job reads (the catalogue, the report's schema)."""

_SKIP_SUFFIXES = (".md", ".py", ".pyc", ".pyo", ".rst", ".typed", ".sqlite", ".sqlite-journal", ".sqlite-wal")
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}
_FN_STRING = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)*$")
_IGNORED_FIELDS = frozenset({"ctx", "type_comment", "kind", "lineno", "col_offset", "end_lineno", "end_col_offset"})


# --------------------------------------------------------------------------------------------------
# The normal form of code
# --------------------------------------------------------------------------------------------------


def _strip_docstrings(node: ast.AST) -> ast.AST:
    """Remove the docstring of every module, class and function in ``node`` (in place)."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = sub.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):  # fmt: skip
                sub.body = body[1:]
    return node


def normal_form(node: ast.AST | list | object) -> str:
    """A canonical text of an AST: node types and fields, no positions, no empty fields (so that fields a newer
    Python adds with an empty default, such as ``type_params``, do not change it)."""
    if isinstance(node, ast.AST):
        parts = [type(node).__name__]
        for name in node._fields:
            if name in _IGNORED_FIELDS:
                continue
            value = getattr(node, name, None)
            if value is None or (isinstance(value, list) and not value):
                continue
            parts.append(f"{name}={normal_form(value)}")
        return "(" + " ".join(parts) + ")"
    if isinstance(node, list):
        return "[" + ",".join(normal_form(v) for v in node) + "]"
    return repr(node)


# --------------------------------------------------------------------------------------------------
# Modules, read statically
# --------------------------------------------------------------------------------------------------


@dataclass
class _Module:
    name: str
    path: Path
    is_package: bool
    defs: dict[str, list[ast.stmt]] = field(default_factory=dict)
    """Top-level name -> the statements that bind it (def, class, assignment)."""
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Local name -> (module, attribute or None for the module itself)."""
    star_imports: list[str] = field(default_factory=list)
    side_effects: list[ast.stmt] = field(default_factory=list)
    imported: set[str] = field(default_factory=set)
    """Modules its top-level imports execute."""

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def _absolute(module: _Module, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    parts = module.package.split(".")
    if node.level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _import_bindings(module: _Module, node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str, str | None]]:
    """(local name, module, attribute) for each name an import statement binds; ``*`` as the local name."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name, None
            else:  # ``import a.b`` binds ``a``
                yield alias.name.split(".")[0], alias.name.split(".")[0], None
        return
    base = _absolute(module, node)
    if base is None:
        return
    for alias in node.names:
        yield (alias.asname or alias.name), base, alias.name


def _imported_module_names(module: _Module, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = _absolute(module, node)
    if base is None:
        return set()
    return {base} | {f"{base}.{alias.name}" for alias in node.names if alias.name != "*"}


def _bound_names(target: ast.expr) -> list[str] | None:
    """Names an assignment target binds, or ``None`` when it also writes into an object (a side effect)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        out: list[str] = []
        for elt in target.elts:
            inner = _bound_names(elt.value if isinstance(elt, ast.Starred) else elt)
            if inner is None:
                return None
            out += inner
        return out
    return None


def _is_main_guard(stmt: ast.stmt) -> bool:
    test = getattr(stmt, "test", None)
    return (
        isinstance(stmt, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )  # fmt: skip


def _read_module(name: str, path: Path, is_package: bool) -> _Module:
    module = _Module(name, path, is_package)
    try:
        tree = _strip_docstrings(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return module

    def visit(stmts: list[ast.stmt], top: bool) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                module.imported |= _imported_module_names(module, stmt)
                for local, target, attr in _import_bindings(module, stmt):
                    if local == "*":
                        module.star_imports.append(target)
                    else:
                        module.imports[local] = (target, attr)
                if not top:
                    module.side_effects.append(stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                module.defs.setdefault(stmt.name, []).append(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names: list[str] | None = []
                for t in targets:
                    bound = _bound_names(t)
                    names = None if bound is None or names is None else names + bound
                if names:
                    for n in names:
                        module.defs.setdefault(n, []).append(stmt)
                else:
                    module.side_effects.append(stmt)
            elif _is_main_guard(stmt):
                continue
            elif isinstance(stmt, (ast.If, ast.Try, ast.With)) and top:
                # ``try: import x / except ImportError: x = None``, ``if TYPE_CHECKING:``: the whole statement
                # runs on import (a side effect), and the names it binds resolve like top-level ones.
                module.side_effects.append(stmt)
                inner: list[ast.stmt] = []
                for attr in ("body", "orelse", "finalbody"):
                    inner += getattr(stmt, attr, [])
                for handler in getattr(stmt, "handlers", []):
                    inner += handler.body
                visit(inner, False)
            elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                if top:
                    module.side_effects.append(stmt)

    visit(tree.body, True)
    return module


# --------------------------------------------------------------------------------------------------
# The fingerprinter
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeUnits:
    """What a fingerprint covers: the reached definitions (``module:name``), the modules whose side-effect
    statements count, and the data files (labels relative to their top-level package's folder)."""

    definitions: tuple[str, ...]
    modules: tuple[str, ...]
    data_files: tuple[str, ...]
    missing: bool = False


class Fingerprinter:
    """Computes and caches code fingerprints (one instance per run: each module is read once)."""

    def __init__(self) -> None:
        self._modules: dict[str, _Module | None] = {}
        self._roots: dict[str, Path | None] = {}
        self._by_fn: dict[str, str] = {}
        self._file_digest: dict[Path, str] = {}
        self._stamps: dict[Path, tuple[int, int] | None] = {}
        """Every file and data folder read, with its (mtime_ns, size) *before* it was read."""

    # -- public -------------------------------------------------------------------------------------

    def for_fn(self, fn: str) -> str:
        """The fingerprint of the computation job function ``fn`` (``"package.module:function"``) runs."""
        module, name = _split_fn(fn)
        if fn not in self._by_fn:
            units, texts = self._collect(module, name)
            h = hashlib.sha256()
            if units.missing:
                # The module cannot be found (a test's placeholder fn): a fixed fingerprint from its name.
                h.update(b"missing module\0" + module.encode())
            else:
                for text in sorted(set(texts)):
                    h.update(text.encode() + b"\0")
            self._by_fn[fn] = h.hexdigest()[:FINGERPRINT_LENGTH]
        return self._by_fn[fn]

    def units(self, fn: str) -> CodeUnits:
        """What :meth:`for_fn` hashes for ``fn``, for people (``icml24 show --code``) and tests."""
        module, name = _split_fn(fn)
        return self._collect(module, name)[0]

    def changed_files(self) -> list[Path]:
        """The files (and data folders) this fingerprinter has read whose modification time or size changed
        since, or that are gone: the code on disk may no longer be the code it fingerprinted. Cheap (a ``stat``
        per file), so a runner can ask after every job."""
        return [path for path, stamp in self._stamps.items() if _stamp(path) != stamp]

    def _note(self, path: Path) -> None:
        self._stamps.setdefault(path, _stamp(path))

    # -- reading ------------------------------------------------------------------------------------

    def _root(self, top: str) -> Path | None:
        if top not in self._roots:
            try:
                spec = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                spec = None
            root = None
            if spec is not None and spec.origin and spec.origin not in ("built-in", "frozen"):
                origin = Path(spec.origin)
                root = origin.parent.parent if spec.submodule_search_locations is not None else origin.parent
            self._roots[top] = root
        return self._roots[top]

    def _module(self, name: str, tracked: frozenset[str]) -> _Module | None:
        """The module ``name`` of one of the ``tracked`` top-level packages, read from its file, or ``None``."""
        if name.split(".")[0] not in tracked:
            return None
        if name not in self._modules:
            root = self._root(name.split(".")[0])
            found = None
            if root is not None:
                base = root.joinpath(*name.split("."))
                if (base / "__init__.py").is_file():
                    self._note(base / "__init__.py")
                    found = _read_module(name, base / "__init__.py", True)
                elif base.with_suffix(".py").is_file():
                    self._note(base.with_suffix(".py"))
                    found = _read_module(name, base.with_suffix(".py"), False)
            self._modules[name] = found
        return self._modules[name]

    def _digest(self, path: Path) -> str:
        if path not in self._file_digest:
            self._note(path)
            self._file_digest[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        return self._file_digest[path]

    # -- the closure --------------------------------------------------------------------------------

    def _collect(self, module_name: str, name: str) -> tuple[CodeUnits, list[str]]:
        tracked = frozenset({module_name.split(".")[0], "icml24"})
        if self._module(module_name, tracked) is None:
            return CodeUnits((), (), (), missing=True), []
        definitions: dict[tuple[str, str], list[ast.stmt]] = {}
        executed: set[str] = set()  # modules imported by reached code: their side effects run
        todo_symbols: list[tuple[str, str]] = [(module_name, name), HARNESS]
        todo_modules: list[str] = []

        def import_module(mod_name: str) -> None:
            parts = mod_name.split(".")
            for i in range(1, len(parts) + 1):  # the package __init__s on the way run too
                sub = ".".join(parts[:i])
                if sub not in executed and sub not in PROVENANCE_ONLY and self._module(sub, tracked) is not None:
                    executed.add(sub)
                    todo_modules.append(sub)

        def refer(mod: _Module, node: ast.AST) -> None:
            """Queue every module-level symbol that ``node``'s code may use."""
            local_imports: dict[str, tuple[str, str | None]] = {}
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    for mod_name in _imported_module_names(mod, sub):
                        import_module(mod_name)
                    for local, target, attr in _import_bindings(mod, sub):
                        if local == "*":
                            todo_modules.append(target)
                        else:
                            local_imports[local] = (target, attr)
                            todo_symbols.append((target, attr) if attr else (target, ""))
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    m = _FN_STRING.match(sub.value)
                    if m and m.group(1).split(".")[0] in tracked:
                        todo_symbols.append((m.group(1), m.group(2)))
                if isinstance(sub, ast.Attribute):
                    chain = _attribute_chain(sub)
                    if chain:
                        self._resolve_chain(mod, chain, local_imports, tracked, todo_symbols)
                elif isinstance(sub, ast.Name):
                    self._resolve_chain(mod, [sub.id], local_imports, tracked, todo_symbols)

        seen_symbols: set[tuple[str, str]] = set()
        seen_modules: set[str] = set()
        while todo_symbols or todo_modules:
            while todo_modules:
                mod_name = todo_modules.pop()
                if mod_name in seen_modules:
                    continue
                seen_modules.add(mod_name)
                mod = self._module(mod_name, tracked)
                if mod is None:
                    continue
                import_module(mod_name)
                for imported in mod.imported:
                    import_module(imported)
                for stmt in mod.side_effects:
                    refer(mod, stmt)
            if not todo_symbols:
                continue
            key = todo_symbols.pop()
            if key in seen_symbols:
                continue
            seen_symbols.add(key)
            mod_name, symbol = key
            if mod_name in PROVENANCE_ONLY:
                continue
            mod = self._module(mod_name, tracked)
            if mod is None:
                # ``from a import b`` where ``a.b`` is a module, or an untracked package.
                parent, _, last = mod_name.rpartition(".")
                if parent and self._module(parent, tracked) is not None and not symbol:
                    todo_symbols.append((parent, last))
                continue
            import_module(mod_name)
            if not symbol:  # the module itself (its attributes are resolved per attribute chain)
                continue
            if symbol in mod.defs:
                if (mod_name, symbol) not in definitions:
                    definitions[(mod_name, symbol)] = mod.defs[symbol]
                    for stmt in mod.defs[symbol]:
                        refer(mod, stmt)
            elif symbol in mod.imports:  # re-exported from elsewhere
                target, attr = mod.imports[symbol]
                todo_symbols.append((target, attr) if attr else (target, ""))
            elif self._module(f"{mod_name}.{symbol}", tracked) is not None:
                todo_symbols.append((f"{mod_name}.{symbol}", ""))
            else:
                todo_symbols.extend((star, symbol) for star in mod.star_imports)

        texts: list[str] = []
        for stmts in definitions.values():
            texts.extend("def " + normal_form(stmt) for stmt in stmts)
        for mod_name in sorted(executed):
            mod = self._module(mod_name, tracked)
            if mod is not None:
                texts.extend("run " + normal_form(stmt) for stmt in mod.side_effects)
        data: list[str] = []
        for folder, root in sorted({self._folder(m, tracked) for m, _ in definitions} - {(None, None)}, key=str):
            self._note(folder)  # a data file added or removed changes the folder's mtime
            for path in _data_files(folder):
                label = path.relative_to(root).as_posix()
                if label not in DRIVER_DATA:
                    data.append(label)
                    texts.append(f"data {label} {self._digest(path)}")
        units = CodeUnits(
            tuple(sorted(f"{m}:{s}" for m, s in definitions)), tuple(sorted(executed)), tuple(sorted(set(data)))
        )
        return units, texts

    def _folder(self, mod_name: str, tracked: frozenset[str]) -> tuple[Path | None, Path | None]:
        mod = self._module(mod_name, tracked)
        root = self._root(mod_name.split(".")[0])
        # Only a package's folder holds its data: a top-level module's folder is any directory (a user's
        # working folder, with the results store itself in it).
        if mod is None or root is None or not (mod.is_package or "." in mod_name):
            return None, None
        return mod.path.parent, root

    def _resolve_chain(
        self,
        mod: _Module,
        chain: list[str],
        local_imports: dict[str, tuple[str, str | None]],
        tracked: frozenset[str],
        todo: list[tuple[str, str]],
    ) -> None:
        """Queue the symbol that ``a.b.c`` (``chain``) names in ``mod``: a definition of ``mod``, or an imported
        name, following attributes through modules (``envs.pendulum.step`` is ``step`` of ``envs.pendulum``)."""
        head, rest = chain[0], chain[1:]
        binding = local_imports.get(head) or mod.imports.get(head)
        if binding is None:
            if head in mod.defs:
                todo.append((mod.name, head))
            return
        target, attr = binding
        if attr is not None:
            if self._module(f"{target}.{attr}", tracked) is None:
                todo.append((target, attr))
                return
            target = f"{target}.{attr}"
        for part in rest:
            if self._module(f"{target}.{part}", tracked) is not None:
                target = f"{target}.{part}"
                continue
            todo.append((target, part))
            return
        todo.append((target, ""))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _attribute_chain(node: ast.Attribute) -> list[str] | None:
    parts: list[str] = []
    cur: ast.expr = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    return [cur.id, *reversed(parts)]


def _split_fn(fn: str) -> tuple[str, str]:
    if not isinstance(fn, str) or ":" not in fn:
        raise ValueError(f"fn must be 'package.module:function', got {fn!r}")
    module, _, attr = fn.partition(":")
    return module, attr.split(".")[0]


def _data_files(folder: Path) -> list[Path]:
    """Data files in ``folder`` and in its sub-folders that are not Python packages (no docs, code, caches)."""
    out: list[Path] = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.name in _SKIP_DIRS:
            continue
        if path.is_dir():
            if not (path / "__init__.py").exists():
                out.extend(p for p in sorted(path.rglob("*")) if p.is_file() and _is_data(p))
        elif _is_data(path):
            out.append(path)
    return out


def _is_data(path: Path) -> bool:
    return path.suffix not in _SKIP_SUFFIXES and not path.name.startswith(".") and not any(
        part in _SKIP_DIRS for part in path.parts
    )


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
