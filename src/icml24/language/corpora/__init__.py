"""Corpora generated in code or read from what is always on disk (no downloads)."""

from icml24.language.corpora.docstrings import DOCSTRING_MODULES, stdlib_docstrings

__all__ = ["DOCSTRING_MODULES", "stdlib_docstrings"]
