"""Run every benchmark script in this folder (``python benchmarks/run_all.py [--full]``).

Each ``bench_*.py`` is a standalone script that prints its timings and the speed ratio that goes into its
paper's README. By default they run with ``--quick``; ``--full`` runs the sizes stated in the READMEs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    full = "--full" in sys.argv[1:]
    failed = []
    for script in sorted(Path(__file__).parent.glob("bench_*.py")):
        cmd = [sys.executable, str(script)] + ([] if full else ["--quick"])
        print(f"== {script.name} ==", flush=True)
        start = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"-- {script.name}: exit {rc} in {time.perf_counter() - start:.1f}s", flush=True)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
