"""Reading the released participant-level results of the trial (the only I/O of this package).

"Conformal Prediction Sets Improve Human Decision Making" (Cresswell et al., ICML 2024,
https://arxiv.org/abs/2401.13744). The authors released one CSV per task (``go-emotions.csv``,
``object-net.csv``, ``few-nerd.csv``; MIT licence) with the columns
``participant_id, experiment, num_correct, time, Age, Sex``: one row per participant. We read such a folder
wherever the user keeps it; the data is never copied into this project.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

__all__ = ["ENV_VAR", "N_QUESTIONS", "TASK_FILES", "find_trial_folder", "load_trial_results"]

ENV_VAR = "ICML24_HITL_DATA"
"""Environment variable naming a folder with the trial's CSVs."""

TASK_FILES = {"go-emotions": "go-emotions.csv", "object-net": "object-net.csv", "few-nerd": "few-nerd.csv"}

N_QUESTIONS = {"go-emotions": 40, "object-net": 100, "few-nerd": 50}
"""Questions per participant. Inferred from the highest observed ``num_correct`` (40, 98, 47) and rounded;
the paper's appendix is the authority. It only rescales accuracies: the tests' p-values do not depend on it."""


def find_trial_folder(path: str | os.PathLike | None = None, *, fallback: bool = True) -> Path | None:
    """The first folder holding at least one task CSV among: ``path``, then (if ``fallback``)
    ``$ICML24_HITL_DATA``, ``../shared/data/hitl-conformal`` and ``shared/data/hitl-conformal`` relative to
    the current directory. ``None`` when there is none."""
    candidates: list = [path]
    if fallback:
        candidates += [os.environ.get(ENV_VAR), "../shared/data/hitl-conformal", "shared/data/hitl-conformal"]
    for c in candidates:
        if not c:
            continue
        folder = Path(c).expanduser()
        if folder.is_dir() and any((folder / f).is_file() for f in TASK_FILES.values()):
            return folder.resolve()
    return None


def load_trial_results(folder: str | os.PathLike) -> dict[str, np.ndarray]:
    """A response table (see :mod:`.analysis`) with one row per participant: ``task``, ``arm``,
    ``participant``, ``correct`` (number correct), ``n_items`` and ``time`` (seconds)."""
    folder = Path(folder)
    rows: dict[str, list] = {k: [] for k in ("task", "arm", "participant", "correct", "n_items", "time")}
    found = False
    for task, fname in TASK_FILES.items():
        f = folder / fname
        if not f.is_file():
            continue
        found = True
        with f.open(newline="") as fh:
            reader = csv.DictReader(fh)
            need = {"participant_id", "experiment", "num_correct"}
            if not need <= set(reader.fieldnames or ()):
                raise ValueError(f"{f} must have the columns {sorted(need)}, got {reader.fieldnames}")
            for rec in reader:
                rows["task"].append(task)
                rows["arm"].append(rec["experiment"].strip())
                rows["participant"].append(f"{task}:{rec['participant_id']}")
                rows["correct"].append(float(rec["num_correct"]))
                rows["n_items"].append(float(N_QUESTIONS[task]))
                rows["time"].append(float(rec.get("time") or "nan"))
    if not found:
        raise FileNotFoundError(f"no trial CSV ({', '.join(TASK_FILES.values())}) in {folder}")
    return {k: np.asarray(v) for k, v in rows.items()}
