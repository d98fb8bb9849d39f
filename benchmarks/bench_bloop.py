"""Benchmark: the cost of a Bloop step against a plain optimizer step on the summed loss.

    python benchmarks/bench_bloop.py            # MLP 64-256-128-10 and a wider 64-1024-1024-10
    python benchmarks/bench_bloop.py --quick

Timings are interleaved: 15 rounds, each running a block of every method back to back (rotating the
order), and the ratio to plain Adam is taken within each round; we report its median, IQR and range.

Bloop needs two gradients (two backward passes through the shared graph) and a few global inner products;
the plain "mixed" baseline does one backward of ``L_main + lam L_aux``. We also time a reference
implementation that flattens all gradients into one vector (``parameters_to_vector``), projects, and
writes the result back: the per-tensor list arithmetic of :mod:`icml24.optim.bloop` avoids that copy.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from icml24.optim.bloop import Bloop
from icml24.optim.bloop.reproduce import weight_norm


def make(sizes: list[int], seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def bench(sizes: list[int], steps: int, rounds: int, batch: int = 64) -> None:
    x = torch.randn(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))
    lam, rho = 0.1, 0.01
    ce = torch.nn.functional.cross_entropy

    model = make(sizes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def plain() -> None:
        opt.zero_grad()
        (ce(model(x), y) + lam * weight_norm(model)).backward()
        opt.step()

    model_b = make(sizes)
    bl = Bloop(torch.optim.Adam(model_b.parameters(), lr=1e-4), lam=lam, ema=rho)

    def bloop() -> None:
        bl.step(ce(model_b(x), y), weight_norm(model_b))

    model_f = make(sizes)
    params = list(model_f.parameters())
    opt_f = torch.optim.Adam(params, lr=1e-4)
    state: dict[str, torch.Tensor] = {}
    v2p = torch.nn.utils.parameters_to_vector

    def flat() -> None:
        gm = v2p(torch.autograd.grad(ce(model_f(x), y), params))
        aux = torch.autograd.grad(weight_norm(model_f), params, allow_unused=True)
        ga = v2p([torch.zeros_like(p) if g is None else g for g, p in zip(aux, params)])
        e = state.get("e", gm)
        e = e + rho * (gm - e)
        state["e"] = e
        d = gm + lam * (ga - (ga @ e) / (e @ e + 1e-7) * e)
        i = 0
        for p in params:
            p.grad = d[i : i + p.numel()].view_as(p).clone()
            i += p.numel()
        opt_f.step()

    fns = {"plain Adam on L_main + lam L_aux": plain, "Bloop (GradientSurgery)": bloop,
           "flattened-vector reference": flat}  # fmt: skip
    for fn in fns.values():  # warm-up
        for _ in range(5):
            fn()
    # interleaved rounds: each round times a block of every method back to back (order rotated), so that
    # load changes on the shared machine hit all methods alike; ratios are taken within a round
    per_step: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            t0 = time.perf_counter()
            for _ in range(steps):
                fns[name]()
            per_step[name].append((time.perf_counter() - t0) / steps)
    n_params = sum(p.numel() for p in model.parameters())
    base = np.array(per_step[names[0]])
    print(f"MLP {sizes} ({n_params} parameters), batch {batch}, {rounds} interleaved rounds of {steps} steps, 1 thread")
    for name, ts in per_step.items():
        t = np.array(ts)
        ratio = t / base
        q = np.percentile(ratio, [0, 25, 50, 75, 100])
        print(f"  {name:<34} median {np.median(t) * 1e3:8.3f} ms/step   vs plain: median x{q[2]:.2f} "
              f"(IQR {q[1]:.2f}-{q[3]:.2f}, range {q[0]:.2f}-{q[4]:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    bench([64, 256, 128, 10], 20, 5 if args.quick else 15)
    if not args.quick:
        bench([64, 1024, 1024, 10], 5, 15)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
