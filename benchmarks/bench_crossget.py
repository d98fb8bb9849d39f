"""Images per second of the tiny CLIP image encoder (width 48, 64 patches, 4 blocks; the crossget
reproduction's model): unmerged vs ToMe and CrossGET merging r tokens per block, one torch thread,
interleaved best-of-5 repeats on one batch. Prints throughput, measured matmul MFLOPs per image and the
speed-up over unmerged (the ratios quoted in src/icml24/multimodal/crossget/README.md).

    python benchmarks/bench_crossget.py [--quick]
"""

from __future__ import annotations

import os
import sys
import time

import torch

from icml24.multimodal.crossget import MergeConfig, SceneTextEncoder, TinyCLIP, TinyCLIPConfig
from icml24.multimodal.crossget.reproduce import MODEL
from icml24.multimodal.scenes import SceneConfig, generate_scenes
from icml24.vision.flops import count_flops


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    torch.set_num_threads(1)
    scenes = SceneConfig(max_objects=2)
    text = SceneTextEncoder(scenes)
    torch.manual_seed(0)
    model = TinyCLIP(config=TinyCLIPConfig(vocab_size=text.vocab_size, **MODEL)).eval()
    images = torch.from_numpy(generate_scenes(128 if quick else 512, config=scenes, seed=0).images)
    settings = {"unmerged": None}
    for r in (8, 16):
        settings[f"ToMe r={r}"] = MergeConfig(method="tome", r=r)
        settings[f"CrossGET r={r}"] = MergeConfig(method="crossget", r=r)
    best = dict.fromkeys(settings, float("inf"))
    with torch.no_grad():
        for _ in range(2 if quick else 5):
            for name, merge in settings.items():  # interleaved, so load changes hit every setting alike
                start = time.perf_counter()
                model.encode_image(images, merge=merge)
                best[name] = min(best[name], time.perf_counter() - start)
    print(f"load average {os.getloadavg()[0]:.1f}; {len(images)} images, one thread")
    base = best["unmerged"]
    for name, merge in settings.items():
        mflops = count_flops(model.encode_image, images[:1], merge=merge) / 1e6
        print(f"{name:14s} {len(images) / best[name]:8.0f} images/s  {mflops:6.2f} MFLOPs/image  "
              f"speed-up {base / best[name]:.2f}x")


if __name__ == "__main__":
    main()
