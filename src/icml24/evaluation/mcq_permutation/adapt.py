"""Teach a small pretrained LM the letter format: fine-tune its top decoder layers on generated MCQs.

SmolLM2-135M answers letter-format questions at chance (it names the right option under the wrong letter;
notes, section 10), so the attack has nothing to attack. This adapts it the cheapest way that keeps the
paper's scoring: the bottom layers stay frozen and run once over the training prompts (their output is
cached), and only the top ``n_layers`` decoder layers are trained, with the cross-entropy of the gold
letter among the ``k`` letter tokens at the ``Answer:`` position. The training questions put the gold
option at every letter equally often (their orders are drawn uniformly), so the adapted model is not
taught any letter preference; whatever order sensitivity it has is its own.

Works on ``transformers`` Llama-style causal LMs (``model.model.layers``, ``model.model.norm``,
``model.lm_head``); the decoder layers are called the way ``LlamaModel.forward`` calls them (their keyword
arguments are captured by a pre-hook), so no internals are re-implemented.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from icml24.evaluation.mcq_permutation.attack import apply_order
from icml24.evaluation.mcq_permutation.questions import MCQ
from icml24.evaluation.mcq_permutation.scorers import LetterProbabilityScorer


def fit_top_layers(
    scorer: LetterProbabilityScorer,
    train: Sequence[MCQ],
    *,
    n_layers: int = 4,
    steps: int = 150,
    batch_size: int = 16,
    lr: float = 3e-4,
    seed: int = 0,
) -> dict[str, Any]:
    """Fine-tune the top ``n_layers`` decoder layers of ``scorer.model`` in place on ``train`` (each
    question shown in one uniformly drawn order). Returns a history: losses, training accuracy, seconds."""
    import torch

    if not isinstance(scorer, LetterProbabilityScorer):
        raise TypeError(f"scorer must be a LetterProbabilityScorer, got {type(scorer).__name__}")
    if isinstance(train, MCQ) or not train or not all(isinstance(q, MCQ) for q in train):
        raise ValueError("train must be a non-empty sequence of MCQ")
    layers = scorer.model.model.layers
    for name, v, lo in (("n_layers", n_layers, 1), ("steps", steps, 1), ("batch_size", batch_size, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if n_layers > len(layers):
        raise ValueError(f"n_layers must be at most the model's {len(layers)} layers, got {n_layers}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    start_time = time.perf_counter()
    rng = np.random.default_rng(seed)
    k = train[0].n_options
    ids = scorer.letter_ids(k)
    prompts, golds = [], []
    for q in train:
        opts, g = apply_order(q, rng.permutation(q.n_options))
        prompts.append(scorer._encode(scorer.prompt(q.question, opts)))
        golds.append(g)
    first = len(layers) - n_layers
    model = scorer.model
    captured: list[tuple[torch.Tensor, dict]] = []

    def grab(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        keep = {key: val for key, val in kwargs.items() if key not in ("hidden_states", "cache", "past_key_values")}
        captured.append((hidden.detach(), keep))
        raise _Stop

    # Bottom layers: frozen, run once per batch of training prompts; the top layers' inputs are cached.
    batches = []
    handle = layers[first].register_forward_pre_hook(grab, with_kwargs=True)
    pad = scorer.tokenizer.pad_token_id if scorer.tokenizer.pad_token_id is not None else 0
    try:
        with torch.no_grad():  # not inference_mode: the cached tensors feed the trained layers' autograd
            for s in range(0, len(prompts), batch_size):
                chunk = prompts[s : s + batch_size]
                width = max(len(p) for p in chunk)
                x = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for i, p in enumerate(chunk):
                    x[i, : len(p)] = torch.tensor(p)
                    mask[i, : len(p)] = 1
                try:
                    model(input_ids=x, attention_mask=mask, use_cache=False)
                except _Stop:
                    pass
                hidden, kw = captured.pop()
                last = torch.tensor([len(p) - 1 for p in chunk])
                batches.append((hidden.clone(), {key: _clone(val) for key, val in kw.items()}, last,
                                torch.tensor(golds[s : s + batch_size])))  # fmt: skip
    finally:
        handle.remove()
    top = list(layers[first:])
    for p in model.parameters():
        p.requires_grad_(False)
    params = [p for layer in top for p in layer.parameters()]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    head_w = model.lm_head.weight[ids].detach()  # the letters' rows of the output layer (tied, frozen)
    gen = np.random.default_rng(seed + 1)
    losses, hits = [], []
    model.train()
    try:
        for _ in range(steps):
            hidden, kw, last, gold = batches[int(gen.integers(len(batches)))]
            h = hidden
            for layer in top:
                out = layer(h, **kw)
                h = out[0] if isinstance(out, tuple) else out
            h = model.model.norm(h)[torch.arange(h.shape[0]), last]
            logits = h @ head_w.T
            loss = torch.nn.functional.cross_entropy(logits, gold)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            losses.append(float(loss.detach()))
            hits.append(float((logits.argmax(1) == gold).float().mean()))
    finally:
        model.eval()
        for p in params:
            p.requires_grad_(False)
    return {"loss_first": float(np.mean(losses[:10])), "loss_last": float(np.mean(losses[-10:])),
            "train_accuracy_last": float(np.mean(hits[-20:])), "n_train": len(train), "steps": steps,
            "n_layers": n_layers, "seconds": time.perf_counter() - start_time}  # fmt: skip


class _Stop(Exception):
    """Raised by the pre-hook to stop the frozen forward pass once the top layers' input is captured."""


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    return value
