"""Training-step and decoding cost of Libra's routed vision system against the LLaVA-style projector, side by
side in one process (the reproduction's shapes: a 2-layer width-64 Llama-style LM, 16 visual positions + a
begin-of-image token, 20 caption tokens, batch 32), interleaved, best of 5 blocks of 10 steps on one thread.

    python benchmarks/bench_libra.py [--quick]
"""

from __future__ import annotations

import os
import sys

import torch

from _timing import best_of
from icml24.language import TransformerConfig, TransformerLM
from icml24.multimodal.libra import LibraConfig, LibraModel, LLaVAStyleModel, build_caption_batch, libra_loss


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lm = TransformerLM(TransformerConfig(vocab_size=70, d_model=64, n_layers=2, n_heads=4, max_seq_len=64))
    cfg = LibraConfig(feature_dim=48, max_vision_tokens=17)
    g = torch.Generator().manual_seed(0)
    batch = build_caption_batch(torch.randint(0, 64, (32, 16, 2), generator=g), torch.rand(32, 16, 48, generator=g),
                                torch.randint(5, 70, (32, 20), generator=g), boi_id=64)  # fmt: skip
    models = {"Libra": LibraModel(lm, config=cfg),
              "Libra without bridge": LibraModel(lm, config=LibraConfig(feature_dim=48, max_vision_tokens=17,
                                                                        use_bridge=False)),
              "LLaVA-style": LLaVAStyleModel(lm, config=cfg, projector_hidden=400)}  # fmt: skip
    opts = {k: torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-3) for k, m in models.items()}
    steps = 3 if quick else 10

    def train(name: str) -> None:
        m, opt = models[name], opts[name]
        for _ in range(steps):
            out = m(batch.input_ids, vision_flag=batch.vision_flag, vision_codes=batch.vision_codes,
                    vision_features=batch.vision_features)  # fmt: skip
            loss = libra_loss(out, batch.text_labels, batch.vision_labels)
            opt.zero_grad()
            loss.backward()
            opt.step()

    best = {k: float("inf") for k in models}
    for _ in range(2 if quick else 5):  # interleaved: every model sees the same load
        for k in models:
            best[k] = min(best[k], best_of(train, k, repeats=1))
    print(f"load average {os.getloadavg()[0]:.1f}; batch 32, 37 positions, one thread, best of interleaved blocks")
    ref = best["LLaVA-style"]
    for k, t in best.items():
        print(f"{k}: {1000 * t / steps:.1f} ms per training step ({t / ref:.2f}x the LLaVA-style step)")


if __name__ == "__main__":
    main()
