"""Scenes per second of the shared scene generator (icml24.multimodal.scenes), vectorised vs a per-scene loop.

The per-scene loop calls ``generate_scenes(1, ...)`` n times (the same rendering code with a batch of one,
i.e. what a naive per-image data loader would do). Prints the best-of-3 wall time of each and the ratio.

    python benchmarks/bench_scenes.py [--quick]
"""

from __future__ import annotations

import os
import sys

from _timing import best_of
from icml24.multimodal.scenes import SceneConfig, generate_scenes


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    n = 1024 if quick else 4096
    config = SceneConfig()
    batched = best_of(generate_scenes, n, config=config, seed=0)

    def loop() -> None:
        for i in range(n):
            generate_scenes(1, config=config, seed=i)

    looped = best_of(loop, repeats=1 if not quick else 2)
    print(f"load average {os.getloadavg()[0]:.1f}; {n} scenes of {config.image_size}x{config.image_size}")
    print(f"batched: {batched:.3f} s ({n / batched:,.0f} scenes/s)")
    print(f"per-scene loop: {looped:.3f} s ({n / looped:,.0f} scenes/s); ratio loop / batched = {looped / batched:.1f}x")


if __name__ == "__main__":
    main()
