"""A natural-language corpus that is always on disk: the docstrings of the Python standard library.

The source files are parsed with :mod:`ast` (nothing is imported or executed); module, class and function
docstrings are cleaned with :func:`inspect.cleandoc`, reduced to printable ASCII and returned in a fixed
order, so the corpus depends only on the Python version (its size is stated by the callers).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sysconfig
from pathlib import Path

__all__ = ["DOCSTRING_MODULES", "stdlib_docstrings"]

DOCSTRING_MODULES: tuple[str, ...] = (
    "argparse", "ast", "bisect", "calendar", "collections/__init__", "contextlib", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email/message", "enum", "fractions", "ftplib", "functools", "gettext",
    "glob", "heapq", "hmac", "html/parser", "http/client", "imaplib", "inspect", "ipaddress", "json/__init__",
    "json/decoder", "logging/__init__", "mailbox", "os", "pathlib", "pickle", "pprint", "queue", "random",
    "shlex", "shutil", "smtplib", "socket", "statistics", "string", "subprocess", "tarfile", "tempfile",
    "textwrap", "threading", "timeit", "tokenize", "trace", "turtle", "typing", "unittest/case", "urllib/parse",
    "uuid", "warnings", "wave", "weakref", "zipfile",
)  # fmt: skip
"""Standard-library source files (without ``.py``) read by :func:`stdlib_docstrings`; a file missing in
some Python version is skipped."""


def _clean(doc: str) -> str:
    text = inspect.cleandoc(doc)
    return "".join(ch for ch in text if ch == "\n" or 32 <= ord(ch) < 127).strip()


def stdlib_docstrings(*, min_chars: int = 40, modules: tuple[str, ...] = DOCSTRING_MODULES) -> list[str]:
    """The docstrings (at least ``min_chars`` characters long) of ``modules``, in file and source order."""
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 0:
        raise ValueError(f"min_chars must be a non-negative int, got {min_chars!r}")
    return list(_read(min_chars, tuple(modules)))


@functools.lru_cache(maxsize=4)
def _read(min_chars: int, modules: tuple[str, ...]) -> tuple[str, ...]:
    # Parsed once per process: the files do not change while it runs.
    root = Path(sysconfig.get_paths()["stdlib"])
    docs: list[str] = []
    for name in modules:
        path = root / f"{name}.py"
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        nodes.sort(key=lambda n: getattr(n, "lineno", 0))
        for node in nodes:
            doc = ast.get_docstring(node, clean=False)
            if doc:
                text = _clean(doc)
                if len(text) >= min_chars:
                    docs.append(text)
    return tuple(docs)
