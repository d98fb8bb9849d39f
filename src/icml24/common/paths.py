"""Where the command line keeps its store and its report by default.

``ICML24_STORE`` and ``ICML24_OUT`` name the store file and the report folder; ``ICML24_HOME`` names one
folder that holds both (``$ICML24_HOME/runs/icml24.sqlite``, ``$ICML24_HOME/reports/latest``). Without
them the defaults are relative to the current directory, as before. Set one of them so that ``icml24 show``
and ``icml24 report`` find the results from any directory.
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "ICML24_STORE"
OUT_ENV = "ICML24_OUT"
HOME_ENV = "ICML24_HOME"

STORE_NAME = Path("runs") / "icml24.sqlite"
OUT_NAME = Path("reports") / "latest"


def _home() -> Path | None:
    home = os.environ.get(HOME_ENV, "").strip()
    return Path(home).expanduser() if home else None


def default_store() -> Path:
    """``$ICML24_STORE``, else ``$ICML24_HOME/runs/icml24.sqlite``, else ``runs/icml24.sqlite``."""
    explicit = os.environ.get(STORE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    home = _home()
    return home / STORE_NAME if home else STORE_NAME


def default_out() -> Path:
    """``$ICML24_OUT``, else ``$ICML24_HOME/reports/latest``, else ``reports/latest``."""
    explicit = os.environ.get(OUT_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    home = _home()
    return home / OUT_NAME if home else OUT_NAME
