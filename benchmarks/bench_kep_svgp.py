"""Benchmark: KEP-SVGP attention forward+backward time against sequence length, vs softmax attention.

    python benchmarks/bench_kep_svgp.py            # N up to 2048
    python benchmarks/bench_kep_svgp.py --quick    # N up to 512

Batch 8, width 64, 4 heads, s = 10, r = 10 (official defaults, so N' = min(N, 100) landmark tokens). Softmax
attention is O(N² d) per head; KEP-SVGP is O(N d s + N s³) per head, linear in N. The ratio is
softmax time / KEP-SVGP time (> 1: KEP-SVGP faster).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from icml24.gp.kep_svgp import KEPSVGPAttention  # noqa: E402
from icml24.vision.tiny_vit import SoftmaxAttention  # noqa: E402


def _time(module: torch.nn.Module, x: torch.Tensor, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        x = x.detach().requires_grad_(True)
        start = time.perf_counter()
        out = module(x)
        extra = module.ksvd_loss() + module.kl_divergence() if isinstance(module, KEPSVGPAttention) else 0.0
        (out.square().mean() + extra).backward()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ns = [16, 64, 256, 512] if args.quick else [16, 64, 256, 512, 1024, 2048]
    b, dim, heads = 8, 64, 4
    print(f"forward+backward seconds, batch {b}, width {dim}, {heads} heads, s=10, r=10; best of 5, one thread")
    print(f"{'N':>6} {'softmax s':>10} {'KEP-SVGP s':>11} {'softmax/KEP':>12}")
    for n in ns:
        x = torch.randn(b, n, dim)
        soft = SoftmaxAttention(dim=dim, num_heads=heads)
        kep = KEPSVGPAttention(dim=dim, num_heads=heads, seq_len=n, rank=10, rank_multi=10)
        ts, tk = _time(soft, x, 5), _time(kep, x, 5)
        print(f"{n:>6} {ts:>10.4f} {tk:>11.4f} {ts / tk:>12.2f}")


if __name__ == "__main__":
    main()
