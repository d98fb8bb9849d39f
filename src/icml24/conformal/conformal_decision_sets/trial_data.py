"""Reading the released participant-level results of the trial (the only I/O of this package).

"Conformal Prediction Sets Improve Human Decision Making" (Cresswell et al., ICML 2024,
https://arxiv.org/abs/2401.13744). The authors released one CSV per task (MIT licence, github.com/
layer6ai-labs/hitl-conformal-prediction) with the columns ``participant_id, experiment, num_correct, time,
Age, Sex``: one row per participant. The three files (about 19 KB) ship with this package, with their
licence and attribution (``data/LICENSE``, ``data/ATTRIBUTION.md``), so the re-analysis gives the same
result from any directory. A user's own copy is read instead when passed as ``path`` or named by
``$ICML24_HITL_DATA``. Nothing is looked up relative to the current directory.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

__all__ = [
    "BUNDLED_DATA",
    "ENV_VAR",
    "N_QUESTIONS",
    "TASK_FILES",
    "find_trial_folder",
    "load_trial_results",
]

ENV_VAR = "ICML24_HITL_DATA"
"""Environment variable naming a folder with the trial's CSVs (used instead of the bundled copy)."""

BUNDLED_DATA = Path(__file__).resolve().parent / "data"
"""The copy of the released CSVs that ships with the package (MIT licence, see ``LICENSE`` there)."""

TASK_FILES = {"go-emotions": "go-emotions.csv", "object-net": "object-net.csv", "few-nerd": "few-nerd.csv"}

N_QUESTIONS = {"go-emotions": 40, "object-net": 100, "few-nerd": 50}
"""Questions per participant. Inferred from the highest observed ``num_correct`` (40, 98, 47) and rounded;
the paper's appendix is the authority. It only rescales accuracies: the tests' p-values do not depend on it."""


def _has_data(folder: Path) -> bool:
    return folder.is_dir() and any((folder / f).is_file() for f in TASK_FILES.values())


def find_trial_folder(path: str | os.PathLike | None = None, *, bundled: bool = True) -> Path | None:
    """The folder to read the trial's CSVs from.

    Order: ``path`` if given (a folder without any task CSV raises ``FileNotFoundError``: a wrong path the
    user typed must not be silently replaced), else ``$ICML24_HITL_DATA`` if set (same rule), else the
    bundled copy (when ``bundled``). ``None`` when there is none. Never relative to the current directory
    unless ``path`` itself is relative.
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder path (str or os.PathLike) or None, got {type(path).__name__}")
    if bundled not in (True, False):
        raise TypeError(f"bundled must be a bool, got {bundled!r}")
    for source, value in (("path", path), (ENV_VAR, os.environ.get(ENV_VAR))):
        if value is None or (source == ENV_VAR and not str(value).strip()):
            continue
        folder = Path(value).expanduser()
        if not _has_data(folder):
            raise FileNotFoundError(
                f"{source} = {str(value)!r} is not a folder with any of the trial CSVs "
                f"({', '.join(TASK_FILES.values())})"
            )
        return folder.resolve()
    if bundled and _has_data(BUNDLED_DATA):
        return BUNDLED_DATA
    return None


def load_trial_results(folder: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """A response table (see :mod:`.analysis`) with one row per participant: ``task``, ``arm``,
    ``participant``, ``correct`` (number correct), ``n_items`` and ``time`` (seconds).

    ``folder=None`` reads the bundled copy (or ``$ICML24_HITL_DATA``), see :func:`find_trial_folder`.
    """
    found_folder = find_trial_folder(folder)
    if found_folder is None:
        raise FileNotFoundError(
            f"no trial CSVs: the bundled copy is missing from this installation ({BUNDLED_DATA}); pass a folder "
            f"or set {ENV_VAR}"
        )
    rows: dict[str, list] = {k: [] for k in ("task", "arm", "participant", "correct", "n_items", "time")}
    for task, fname in TASK_FILES.items():
        f = found_folder / fname
        if not f.is_file():
            continue
        with f.open(newline="") as fh:
            reader = csv.DictReader(fh)
            need = {"participant_id", "experiment", "num_correct"}
            if not need <= set(reader.fieldnames or ()):
                raise ValueError(f"{f} must have the columns {sorted(need)}, got {reader.fieldnames}")
            for line, rec in enumerate(reader, start=2):
                try:
                    correct = float(rec["num_correct"])
                    time = float(rec.get("time") or "nan")
                except ValueError as exc:
                    raise ValueError(f"{f}, line {line}: num_correct and time must be numbers ({exc})") from exc
                if not (np.isfinite(correct) and 0 <= correct <= N_QUESTIONS[task]):
                    raise ValueError(
                        f"{f}, line {line}: num_correct must be in [0, {N_QUESTIONS[task]}], got {rec['num_correct']!r}"
                    )
                rows["task"].append(task)
                rows["arm"].append(rec["experiment"].strip())
                rows["participant"].append(f"{task}:{rec['participant_id']}")
                rows["correct"].append(correct)
                rows["n_items"].append(float(N_QUESTIONS[task]))
                rows["time"].append(time)
    return {k: np.asarray(v) for k, v in rows.items()}
