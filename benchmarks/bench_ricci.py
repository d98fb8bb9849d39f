"""Benchmark: exact Ollivier-Ricci curvature (``icml24.graphs.ricci_causal.ollivier_ricci``) vs GraphRicciCurvature.

Both compute the exact curvature (alpha 0.5, earth mover's distance on shortest-path costs; GraphRicciCurvature
0.5.3 with ``method="OTD"``, ``proc=1``) of the same graphs: a sparse Watts-Strogatz ring (mean degree 4) and
random geometric graphs at mean degree about 5, 10, 20 and 40, each with about ``--edges`` edges. Timed
interleaved (each repeat runs ours then GraphRicciCurvature on every graph), after one warm-up call of each
(imports, POT's first call); one thread (BLAS/OpenMP pools limited before numpy loads). Prints per graph the
best times, the per-repeat ratios GraphRicciCurvature / ours, our time per edge (its growth in degree), the
largest curvature difference, and the load average before and after.

    .venv/bin/python benchmarks/bench_ricci.py [--quick] [--edges 3000] [--repeats 3]

Skips (exit 0, with the reason) when GraphRicciCurvature is not installed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402

from icml24.graphs.ricci_causal import ollivier_ricci  # noqa: E402


def graphs(edges: int) -> dict[str, nx.Graph]:
    out = {"Watts-Strogatz, degree 4": nx.watts_strogatz_graph(edges // 2, 4, 0.1, seed=0)}
    for degree in (5, 10, 20, 40):
        n = max(2 * edges // degree, degree + 2)
        # mean degree of a random geometric graph on the unit square: (n - 1)(pi r^2 - 8 r^3 / 3 + r^4 / 2)
        lo, hi = 0.0, 1.0
        for _ in range(60):
            radius = (lo + hi) / 2
            mean = (n - 1) * (math.pi * radius**2 - 8 * radius**3 / 3 + radius**4 / 2)
            lo, hi = (radius, hi) if mean < degree else (lo, radius)
        g = nx.random_geometric_graph(n, radius, seed=0)
        g = nx.convert_node_labels_to_integers(g.subgraph(max(nx.connected_components(g), key=len)))
        out[f"random geometric, degree {2 * g.number_of_edges() / g.number_of_nodes():.1f}"] = nx.Graph(g.edges())
    return {k: nx.convert_node_labels_to_integers(g) for k, g in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about 800 edges, 1 repeat")
    ap.add_argument("--edges", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    edges, repeats = (800, 1) if args.quick else (args.edges, args.repeats)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; one thread; about {edges} edges per graph")
    try:
        from GraphRicciCurvature.OllivierRicci import OllivierRicci
    except ImportError as err:
        print(f"skipped: GraphRicciCurvature is not installed ({err})")
        return

    def grc(g: nx.Graph) -> np.ndarray:
        orc = OllivierRicci(g.copy(), alpha=0.5, method="OTD", proc=1, verbose="ERROR")
        orc.compute_ricci_curvature()
        return np.array([orc.G[a][b]["ricciCurvature"] for a, b in g.edges()])

    gs = graphs(edges)
    small = nx.cycle_graph(8)
    ollivier_ricci(small), grc(small)  # warm-up: imports and POT's first call
    for name, g in gs.items():
        ours_t, grc_t = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            k_ours = ollivier_ricci(g)
            ours_t.append(time.perf_counter() - start)
            start = time.perf_counter()
            k_grc = grc(g)
            grc_t.append(time.perf_counter() - start)
        ratios = ", ".join(f"{b / a:.1f}x" for a, b in zip(ours_t, grc_t, strict=True))
        e = g.number_of_edges()
        print(f"{name:32s} {e:6d} edges: ours {min(ours_t):6.3f} s ({1e6 * min(ours_t) / e:6.1f} us/edge), "
              f"GraphRicciCurvature {min(grc_t):6.3f} s; GRC / ours per repeat {ratios}; "
              f"max |dk| {float(np.abs(k_ours - k_grc).max()):.1e}", flush=True)  # fmt: skip
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
