"""Tokens per second of the shared TransformerLM against transformers' LlamaForCausalLM, same config, CPU.

Training: forward + backward + AdamW step on (batch, seq) random tokens. Decoding: greedy generation with
the KV cache from a batch of prompts. Both models hold identical weights (``to_hf_llama``), one torch
thread, interleaved repeats (best of each). Prints the ratio ours / transformers that goes into
src/icml24/language/README.md.

    python benchmarks/bench_language_transformer.py [--quick]
"""

from __future__ import annotations

import os
import sys
import time

import torch

from icml24.language import TransformerConfig, TransformerLM, lm_loss, to_hf_llama


def _train_step(model, opt, ids, hf: bool) -> None:
    logits = model(ids).logits if hf else model(ids)
    loss = lm_loss(logits[:, :-1], ids[:, 1:])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    torch.set_num_threads(1)
    config = TransformerConfig(vocab_size=64, d_model=128, n_layers=4, n_heads=4, max_seq_len=256)
    ours = TransformerLM(config)
    hf = to_hf_llama(ours).train()
    ours.train()
    batch, seq = (16, 64) if quick else (32, 128)
    ids = torch.randint(0, 64, (batch, seq), generator=torch.Generator().manual_seed(0))
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-4)
    opt_h = torch.optim.AdamW(hf.parameters(), lr=1e-4)
    steps = 3 if quick else 10
    repeats = 2 if quick else 3
    t_o, t_h = [], []
    for _ in range(repeats):  # interleaved so that load changes hit both
        t_o.append(_time(lambda: [_train_step(ours, opt_o, ids, False) for _ in range(steps)], 1))
        t_h.append(_time(lambda: [_train_step(hf, opt_h, ids, True) for _ in range(steps)], 1))
    tok = batch * seq * steps
    train_o, train_h = tok / min(t_o), tok / min(t_h)
    print(f"load {os.getloadavg()[0]:.2f}; config d=128, 4 layers, 4 heads; training batch {batch}x{seq}")
    print(f"training tokens/s: ours {train_o:,.0f}  transformers {train_h:,.0f}  ratio {train_o / train_h:.2f}x")

    ours.eval()
    hf.eval()
    prompts = torch.randint(0, 64, (16, 16), generator=torch.Generator().manual_seed(1))
    new = 16 if quick else 64
    d_o, d_h = [], []
    with torch.no_grad():
        for _ in range(repeats):
            d_o.append(_time(lambda: ours.generate(prompts, max_new_tokens=new), 1))
            d_h.append(_time(lambda: hf.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new, do_sample=False, pad_token_id=0,
                                                  min_new_tokens=new), 1))  # fmt: skip
    gen_o, gen_h = 16 * new / min(d_o), 16 * new / min(d_h)
    print(f"KV-cached greedy decoding tokens/s (16 prompts x {new} new): ours {gen_o:,.0f}  "
          f"transformers {gen_h:,.0f}  ratio {gen_o / gen_h:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
