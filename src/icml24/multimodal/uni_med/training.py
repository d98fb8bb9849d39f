"""Training, evaluation and grounding metrics of the Med-VQA transformer (Uni-Med, ICML 2024).

Training follows the paper's recipe where it fits a model trained from scratch: AdamW, cosine schedule
with 3% linear warm-up, cross-entropy on the answer (the paper's causal-LM loss on answer tokens only),
token-level cut-mix on the visual tokens with probability ``cutmix_p``.

Grounding ("answers traceable to their evidence"), two measures against the generator's evidence patches:

- evidence attention share: of the CLS token's attention rollout on the visual tokens (Abnar & Zuidema 2020:
  the product over fusion layers of ``0.5 A + 0.5 I``, heads averaged), the share on the evidence patches;
  chance is the evidence's share of the patches;
- deletion test: accuracy when the evidence patches are blanked (set to the background level 0) versus
  when as many random non-evidence patches are blanked; a model that answers from the evidence loses more
  in the first case (``deletion_gap = acc(random blanked) - acc(evidence blanked)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from icml24.language.training import warmup_times_cosine
from icml24.multimodal.uni_med.cutmix import token_cutmix
from icml24.multimodal.uni_med.data import ToyMedVQA
from icml24.multimodal.uni_med.model import MedVQATransformer

__all__ = [
    "TrainConfig",
    "blank_patches",
    "deletion_test",
    "evaluate_vqa",
    "evidence_attention_share",
    "pretrain_image_encoder",
    "train_vqa",
]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation of :func:`train_vqa` (the paper's schedule; lr and batch for training from scratch)."""

    epochs: int = 10
    """Passes over the training set (the paper: 10 epochs)."""
    batch_size: int = 64
    """Samples per step (the paper: 1 per device on GPUs, for a 7B LLM)."""
    lr: float = 2e-3
    """Peak AdamW learning rate (the paper: 2e-5 for LoRA on PMC-LLaMA; a model trained from scratch
    needs a larger one)."""
    weight_decay: float = 0.01
    """AdamW weight decay (the paper: 0)."""
    warmup_ratio: float = 0.03
    """Share of steps of linear warm-up before the cosine decay (the paper: 3%)."""
    cutmix_p: float = 0.0
    """Token-level cut-mix probability per sample (0: off, the baseline; Uni-Med: 0.5)."""
    cutmix_fill: str = "partner"
    """Tokens outside the evidence: ``"partner"`` (another sample's) or ``"zeros"``."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not 0 < self.lr < 1:
            raise ValueError(f"lr must be a number in (0, 1), got {self.lr!r}")
        for name in ("weight_decay", "warmup_ratio", "cutmix_p"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
        if self.cutmix_fill not in ("partner", "zeros"):
            raise ValueError(f"cutmix_fill must be 'partner' or 'zeros', got {self.cutmix_fill!r}")


def _check(model: object, data: object) -> None:
    if not isinstance(model, MedVQATransformer):
        raise TypeError(f"model must be a MedVQATransformer, got {type(model).__name__}")
    if not isinstance(data, ToyMedVQA):
        raise TypeError(f"data must be a ToyMedVQA, got {type(data).__name__}")


def _tensors(data: ToyMedVQA, idx: np.ndarray | slice) -> tuple[torch.Tensor, ...]:
    return (torch.from_numpy(data.images[idx]), torch.from_numpy(data.questions[idx]),
            torch.from_numpy(data.intent_mask[idx]), torch.from_numpy(data.evidence[idx]),
            torch.from_numpy(data.answers[idx]))  # fmt: skip


def train_vqa(model: MedVQATransformer, data: ToyMedVQA, *, config: TrainConfig | None = None,
              seed: int = 0) -> list[float]:  # fmt: skip
    """Train ``model`` in place on ``data``; returns the mean training loss of each epoch.

    The shuffling and the cut-mix draws come from a torch generator seeded with ``seed`` (the weights from
    the global torch seed at construction).
    """
    _check(model, data)
    cfg = TrainConfig() if config is None else config
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(cfg).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    gen = torch.Generator().manual_seed(seed)
    n = len(data)
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = cfg.epochs * steps_per_epoch
    warmup = max(1, round(cfg.warmup_ratio * total))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    model.train()
    history = []
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=gen).numpy()
        losses = []
        for s in range(steps_per_epoch):
            images, questions, intent, evidence, answers = _tensors(data, order[s * cfg.batch_size : (s + 1) * cfg.batch_size])
            tokens = model.embed_image(images)
            if cfg.cutmix_p > 0:
                # Mix patch tokens before the image encoder: the mixed sample's evidence tokens are exactly i's
                # and nothing of the partner's asked organ leaks into them through attention.
                tokens, _, _ = token_cutmix(tokens, evidence, p=cfg.cutmix_p, generator=gen, fill=cfg.cutmix_fill)
            visual = model.encode_tokens(tokens)
            loss = F.cross_entropy(model.fuse(visual, questions, intent), answers)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        history.append(float(np.mean(losses)))
    model.eval()
    return history


def pretrain_image_encoder(model: MedVQATransformer, data: ToyMedVQA, *, steps: int = 500, batch_size: int = 64,
                           lr: float = 3e-3, seed: int = 0) -> list[float]:  # fmt: skip
    """Pretrain the image encoder on image-level findings before VQA training; returns the loss per step.

    The paper's image encoder comes pretrained (PMC-CLIP, on PubMed figure-caption pairs); a from-scratch
    encoder cannot learn to see from 1000 VQA samples. Here the stand-in is supervised: the mean visual token
    of the left half of the patch grid predicts the left organ's finding (none / small or large, bright or
    dark lesion, ``data.findings``), the right half the right organ's, with a linear head that is dropped
    afterwards. Only the image encoder (patch embedding and its blocks) is trained; the questions are not used.
    """
    _check(model, data)
    for name, v in (("steps", steps), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 1:
        raise ValueError(f"lr must be a number in (0, 1), got {lr!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if data.findings.shape != (len(data), 2):
        raise ValueError("data must carry findings of shape (n, 2) (make_toy_med_vqa writes them)")
    gen = torch.Generator().manual_seed(seed)
    grid = model.config.image_size // model.config.patch_size
    left = torch.zeros(grid, grid, dtype=torch.bool)
    left[:, : grid // 2] = True
    left = left.reshape(-1)
    head = torch.nn.Linear(model.config.dim, 5)
    params = list(model.image_encoder.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    sched = warmup_times_cosine(opt, warmup_steps=steps // 30, total_steps=steps)
    images, findings = torch.from_numpy(data.images), torch.from_numpy(data.findings)
    model.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(data), (min(batch_size, len(data)),), generator=gen)
        visual = model.encode_image(images[idx])
        pooled = torch.stack([visual[:, left].mean(1), visual[:, ~left].mean(1)], 1)  # (B, 2, dim)
        loss = F.cross_entropy(head(pooled).reshape(-1, 5), findings[idx].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def _predict(model: MedVQATransformer, data: ToyMedVQA, images: np.ndarray | None = None,
             batch_size: int = 500) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Predicted answer ids and the evidence attention share per sample."""
    model.eval()
    imgs = data.images if images is None else images
    preds, shares = [], []
    p = model.config.num_patches
    for s in range(0, len(data), batch_size):
        sl = slice(s, s + batch_size)
        _, questions, intent, evidence, _ = _tensors(data, sl)
        logits = model.fuse(model.encode_image(torch.from_numpy(imgs[sl])), questions, intent, record_attention=True)
        preds.append(logits.argmax(-1).numpy())
        # Attention rollout (Abnar & Zuidema, 2020) through the fusion layers, heads averaged, the residual as
        # 0.5 I: it counts the CLS token's attention that reaches the image through the question tokens too.
        # Its CLS row over the visual tokens, renormalised, is where the answer reads the image.
        rollout = None
        for blk in model.blocks:
            a = blk.attn.last_attention.mean(1)
            a = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
            rollout = a if rollout is None else a @ rollout
        att = rollout[:, 0, 1 : 1 + p]
        att = att / att.sum(-1, keepdim=True)
        shares.append((att * evidence).sum(-1).numpy())
        for blk in model.blocks:
            blk.attn.record, blk.attn.last_attention = False, None
    return np.concatenate(preds), np.concatenate(shares)


def evaluate_vqa(model: MedVQATransformer, data: ToyMedVQA, *, batch_size: int = 500) -> dict[str, float]:
    """Accuracy (overall, closed, open) and the evidence attention share (mean; and its chance level)."""
    _check(model, data)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    pred, share = _predict(model, data, batch_size=batch_size)
    correct = pred == data.answers
    out = {
        "accuracy": float(correct.mean()),
        "correct": int(correct.sum()),
        "n": int(correct.size),
        "closed_accuracy": float(correct[data.is_closed].mean()) if data.is_closed.any() else float("nan"),
        "open_accuracy": float(correct[~data.is_closed].mean()) if (~data.is_closed).any() else float("nan"),
        "evidence_attention_share": float(share.mean()),
        "evidence_patch_share": float(data.evidence.mean()),
    }
    return out


def evidence_attention_share(model: MedVQATransformer, data: ToyMedVQA) -> np.ndarray:
    """Per sample, the share of the CLS token's visual attention on the evidence patches (see module doc)."""
    _check(model, data)
    return _predict(model, data)[1]


def blank_patches(images: np.ndarray, patches: np.ndarray, patch_size: int) -> np.ndarray:
    """Copies of ``images`` ``(n, C, H, W)`` with the patches where ``patches`` ``(n, P)`` is True set to 0."""
    if not isinstance(images, np.ndarray) or images.ndim != 4:
        raise ValueError("images must be an (n, C, H, W) array")
    if not np.isfinite(images).all():
        raise ValueError("images must be finite")
    if isinstance(patch_size, bool) or not isinstance(patch_size, int) or patch_size < 1 \
            or images.shape[2] % patch_size or images.shape[3] % patch_size:  # fmt: skip
        raise ValueError(f"patch_size must be a positive int dividing the image sides, got {patch_size!r}")
    gh, gw = images.shape[2] // patch_size, images.shape[3] // patch_size
    if not isinstance(patches, np.ndarray) or patches.shape != (images.shape[0], gh * gw):
        raise ValueError(f"patches must be a bool array of shape ({images.shape[0]}, {gh * gw})")
    pix = np.repeat(np.repeat(patches.reshape(-1, gh, gw), patch_size, 1), patch_size, 2)
    return np.where(pix[:, None], np.float32(0), images).astype(images.dtype)


def deletion_test(model: MedVQATransformer, data: ToyMedVQA, *, seed: int = 0) -> dict[str, float]:
    """Accuracy with the evidence patches blanked, with as many random non-evidence patches blanked, and the
    gap between the two (see the module docstring)."""
    _check(model, data)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    rng = np.random.default_rng(seed)
    ev = data.evidence
    # Random non-evidence patches, as many as the evidence (all of them where there are fewer).
    keys = np.where(ev, np.inf, rng.random(ev.shape))
    rank = keys.argsort(1).argsort(1)
    control = (rank < ev.sum(1, keepdims=True)) & ~ev
    ps = model.config.patch_size
    acc_ev = float((_predict(model, data, blank_patches(data.images, ev, ps))[0] == data.answers).mean())
    acc_ctrl = float((_predict(model, data, blank_patches(data.images, control, ps))[0] == data.answers).mean())
    return {"accuracy_evidence_blanked": acc_ev, "accuracy_random_blanked": acc_ctrl,
            "deletion_gap": acc_ctrl - acc_ev}  # fmt: skip
