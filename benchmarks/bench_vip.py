"""Benchmark: the per-sample-gradient step of DP-MAE, Opacus hooks vs torch.func (the official ViP code's way).

    python benchmarks/bench_vip.py            # micro-batches 64, 256, 1024
    python benchmarks/bench_vip.py --quick    # micro-batches 64, 256

ViP's official ``main_pretrain_vip.py`` computes per-sample gradients with functorch ``vmap(grad(...))`` and clips
and sums them by hand; we go through Opacus's ``GradSampleModule`` (backward hooks per layer). Both compute, for
one micro-batch of the reproduction's MAE (about 40k parameters, 16 patches, mask ratio 0.75, fixed masks), every
image's flat gradient, its norm, the clipped sum. A plain backward of the mean loss (no per-sample gradients) is
the non-private reference. Ratios are measured side by side in one process on one thread (best of 5).
"""

from __future__ import annotations

import argparse
import copy
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from icml24.privacy.vip import MAEConfig, MaskedAutoencoder, random_masking  # noqa: E402
from icml24.privacy.vip.mae import MaskTokenFill, mask_token_grad_sample  # noqa: E402
from icml24.privacy.vip.reproduce import MODEL  # noqa: E402

CLIP = 1.0


def _best(fn, reps: int = 5) -> tuple[float, torch.Tensor]:
    best, out = float("inf"), None
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    from opacus import GradSampleModule
    from opacus.grad_sample import register_grad_sampler

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", type=int, nargs="*", help="micro-batch sizes (overrides --quick)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    register_grad_sampler(MaskTokenFill)(mask_token_grad_sample)
    model = MaskedAutoencoder(MAEConfig(**MODEL))
    twin = copy.deepcopy(model)  # torch.func path: a copy without Opacus's backward hooks (vmap rejects them)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    buffers = {n: p.detach() for n, p in model.named_parameters() if not p.requires_grad}
    buffers.update(dict(model.named_buffers()))

    def loss_one(p, x, keep, restore, mask):
        out = torch.func.functional_call(twin, {**p, **buffers}, (x[None], (keep[None], restore[None], mask[None])))
        return out.sum()

    per_sample = torch.func.vmap(torch.func.grad(loss_one), in_dims=(None, 0, 0, 0, 0))

    def clipped_sum(flat: torch.Tensor) -> torch.Tensor:
        factor = (CLIP / (flat.norm(dim=1) + 1e-6)).clamp(max=1.0)
        return (flat * factor[:, None]).sum(0)

    def twin_step(x: torch.Tensor, masks: tuple[torch.Tensor, ...]) -> torch.Tensor:
        grads = per_sample(params, x, *masks)
        return clipped_sum(torch.cat([grads[n].reshape(len(x), -1) for n in names], 1))

    gsm = GradSampleModule(model, loss_reduction="sum")
    print("per-sample gradients + flat clipping + sum of one micro-batch; best of 5, one thread")
    print(f"{'batch':>6} {'plain bwd s':>12} {'Opacus s':>9} {'torch.func s':>13} {'Opacus/func':>12} "
          f"{'Opacus/plain':>13} {'max |diff|':>11}")  # fmt: skip
    for b in args.sizes or ([64, 256] if args.quick else [64, 256, 1024]):
        row = _measure(b, model, gsm, twin_step, clipped_sum)
        print(f"{b:>6} " + " ".join(f"{v:>{w}.{d}}" for v, (w, d) in zip(row, _FORMATS)))


_FORMATS = [(12, "4f"), (9, "4f"), (13, "4f"), (12, "2f"), (13, "2f"), (11, "2e")]


def _measure(b: int, model, gsm, twin_step, clipped_sum) -> list[float]:
    c = model.config
    x = torch.rand(b, 1, c.image_size, c.image_size, generator=torch.Generator().manual_seed(b))
    masks = random_masking(b, c.num_patches, c.num_visible, generator=torch.Generator().manual_seed(b + 1))

    def plain():
        model.zero_grad(set_to_none=True)
        gsm.disable_hooks()
        model(x, masks).mean().backward()
        gsm.enable_hooks()
        return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.requires_grad])

    def opacus():
        model.zero_grad(set_to_none=True)
        for p in model.parameters():
            p.grad_sample = None
        gsm(x, masks).sum().backward()
        return clipped_sum(torch.cat([p.grad_sample.reshape(b, -1) for p in model.parameters() if p.requires_grad], 1))

    t_plain, _ = _best(plain)
    t_opacus, g_opacus = _best(opacus)
    t_func, g_func = _best(lambda: twin_step(x, masks))
    return [t_plain, t_opacus, t_func, t_opacus / t_func, t_opacus / t_plain, float((g_opacus - g_func).abs().max())]


if __name__ == "__main__":
    main()
