"""Train a character-level transformer on an arithmetic split and measure where it fails.

Hu et al., "Case-Based or Rule-Based: How Do Transformers Do the Math?", ICML 2024. Section 3's
intervention: train on a grid of ``(a, b)`` problems with a square left out (leave-square-out, LSO) and
test inside the square; a rule learner is unaffected, a case-based learner fails where no close training
case exists, i.e. in the middle of the square. Section 5's Rule-Following Fine-Tuning (RFFT): train on
traces that execute the addition rule step by step, test on longer operands than seen in training.

:class:`ArithmeticLM` wraps the shared :class:`~icml24.language.TransformerLM` with a character tokenizer,
the three answer formats (direct answer, scratchpad, rule-following trace) and batched greedy evaluation:
``fit(pairs)`` then ``predict(pairs)`` / ``score(pairs)``.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch

from icml24.language.corpora.arithmetic import TASKS, rule_following_trace, scratchpad_trace
from icml24.language.tokenizers import CharTokenizer
from icml24.language.training import TrainConfig, causal_lm_labels, train_lm
from icml24.language.transformer import TransformerConfig, TransformerLM

__all__ = ["ALPHABET", "ArithmeticLM", "ArithmeticLMConfig", "FORMATS", "nearest_neighbour_predict", "target_text"]

Format = Literal["direct", "scratchpad", "rfft"]
FORMATS: tuple[str, ...] = ("direct", "scratchpad", "rfft")
ALPHABET = string.digits + string.ascii_lowercase + "+-=(),:[] \nCTF"
"""Every character the tasks and traces use."""


def target_text(task: str, a: int, b: int, fmt: Format) -> str:
    """What the model must write after the question: the answer, or a trace ending in the answer
    (scratchpad and rule-following traces exist for ``addition`` only, as in the paper)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    if fmt == "direct":
        return TASKS[task].answer(a, b)
    if task != "addition":
        raise ValueError(f"format {fmt!r} is defined for task 'addition' only, got task {task!r}")
    if fmt == "scratchpad":
        return scratchpad_trace(a, b)
    if fmt == "rfft":
        return rule_following_trace(a, b)
    raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")


@dataclass(frozen=True)
class ArithmeticLMConfig:
    """Model and training settings; defaults are the notes' CPU-sized version of the paper's GPT-2 runs."""

    task: str = "addition"
    """One of :data:`~icml24.language.corpora.arithmetic.TASKS`."""
    fmt: Format = "direct"
    """``"direct"`` answer, ``"scratchpad"`` (official cot_gen format) or ``"rfft"`` rule-following trace."""
    d_model: int = 128
    """Transformer width."""
    n_layers: int = 4
    """Blocks."""
    n_heads: int = 4
    """Attention heads."""
    positions: Literal["learned", "rope", "none"] = "rope"
    """Position scheme (RoPE or none for length generalisation)."""
    steps: int = 1500
    """Optimiser steps."""
    batch_size: int = 256
    """Sequences per step."""
    lr: float = 1e-3
    """Peak AdamW learning rate (warm-up 1% then cosine, as the official ``train.py``)."""
    weight_decay: float = 0.0
    """The official run uses 0."""
    answer_only_loss: bool = True
    """Count only the target tokens (``False``: the official full-sequence loss, question included)."""

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {sorted(TASKS)}, got {self.task!r}")
        if self.fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {FORMATS}, got {self.fmt!r}")
        for name in ("steps", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")


def _check_pairs(pairs: np.ndarray | Sequence[Sequence[int]], name: str = "pairs") -> np.ndarray:
    arr = np.asarray(pairs)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (n, 2) array of (a, b) operands, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.isfinite(arr).all() and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name} must hold non-negative integers, got dtype {arr.dtype}")
    if (arr < 0).any():
        raise ValueError(f"{name} must hold non-negative integers")
    return arr.astype(np.int64)


class ArithmeticLM:
    """A character transformer trained from scratch on ``question -> target`` for one task and format.

    ``fit(train_pairs, seed)`` trains (answer-only loss by default); ``predict(pairs)`` decodes greedily
    and returns the final answer line of each generation; ``score(pairs)`` is the exact-match accuracy
    against the rule (the paper's "exact match of the last number", on the whole answer line, which
    equals it for one-number answers).
    """

    def __init__(self, config: ArithmeticLMConfig | None = None) -> None:
        self.config = config or ArithmeticLMConfig()
        self.tokenizer = CharTokenizer(ALPHABET)
        self.model: TransformerLM | None = None
        self.history_: list[dict[str, float]] = []

    def _texts(self, pairs: np.ndarray) -> tuple[list[str], list[str]]:
        task = TASKS[self.config.task]
        questions = [task.question(int(a), int(b)) for a, b in pairs]
        targets = [target_text(self.config.task, int(a), int(b), self.config.fmt) for a, b in pairs]
        return questions, targets

    def fit(self, train_pairs: np.ndarray, *, seed: int = 0, max_seq_len: int | None = None) -> ArithmeticLM:
        pairs = _check_pairs(train_pairs, "train_pairs")
        cfg = self.config
        tok = self.tokenizer
        questions, targets = self._texts(pairs)
        rows = [tok.encode(q, bos=True) + tok.encode(t, eos=True) for q, t in zip(questions, targets)]
        q_len = np.array([len(q) + 1 for q in questions])
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), tok.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            attn[i, : len(r)] = 1
        answer = attn.clone()
        if cfg.answer_only_loss:
            cols = torch.arange(width)[None, :]
            answer = answer * (cols >= torch.as_tensor(q_len)[:, None]).long()
        labels = causal_lm_labels(ids, attention_mask=attn, loss_mask=answer)
        torch.manual_seed(seed)
        self.model = TransformerLM(
            TransformerConfig(
                vocab_size=tok.vocab_size, d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                max_seq_len=max_seq_len or max(2 * width + 8, 64), positions=cfg.positions,
            )
        )  # fmt: skip
        n = len(rows)

        def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            idx = torch.randint(0, n, (cfg.batch_size,), generator=gen)
            sub_attn = attn[idx]
            keep = int(sub_attn.sum(1).max())  # trim padding columns every row lacks
            return ids[idx, :keep], labels[idx, :keep]

        train_cfg = TrainConfig(steps=cfg.steps, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                warmup_steps=max(1, cfg.steps // 100), grad_clip=1.0)  # fmt: skip
        self.history_ = train_lm(self.model, batch, train_cfg, seed=seed)
        return self

    @torch.no_grad()
    def generate(self, pairs: np.ndarray, *, batch_size: int = 512) -> list[str]:
        """The full generations (trace and answer) for ``pairs``."""
        if self.model is None:
            raise RuntimeError("call fit before generate")
        pairs = _check_pairs(pairs)
        questions, targets = self._texts(pairs)
        max_new = max(len(t) for t in targets) + 4
        out: list[str] = []
        for start in range(0, len(questions), batch_size):
            qs = questions[start : start + batch_size]
            ids, mask = self.tokenizer.batch(qs, bos=True, padding_side="left")
            room = self.model.config.max_seq_len - ids.shape[1]
            gen = self.model.generate(ids, attention_mask=mask, max_new_tokens=min(max_new, room),
                                      eos_token_id=self.tokenizer.eos_id, pad_token_id=self.tokenizer.pad_id)  # fmt: skip
            for row in gen[:, ids.shape[1] :]:
                out.append(self.tokenizer.decode(row.tolist()))
        return out

    def predict(self, pairs: np.ndarray) -> list[str]:
        """The answer line (the last line) of each generation."""
        return [g.strip().split("\n")[-1].strip() for g in self.generate(pairs)]

    def correct(self, pairs: np.ndarray) -> np.ndarray:
        """Boolean array: whether each prediction equals the rule's answer."""
        pairs = _check_pairs(pairs)
        task = TASKS[self.config.task]
        preds = self.predict(pairs)
        return np.array([p == task.answer(int(a), int(b)) for p, (a, b) in zip(preds, pairs)])

    def score(self, pairs: np.ndarray) -> float:
        """Exact-match accuracy on ``pairs``."""
        return float(self.correct(pairs).mean())


def nearest_neighbour_predict(task: str, train_pairs: np.ndarray, test_pairs: np.ndarray) -> list[str]:
    """The case-based reference: answer each test problem with the stored answer of the nearest training
    problem (Euclidean in ``(a, b)``; ties to the lowest index). It shows a "hole" by construction."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    tr = _check_pairs(train_pairs, "train_pairs").astype(float)
    te = _check_pairs(test_pairs, "test_pairs").astype(float)
    d2 = ((te[:, None, :] - tr[None, :, :]) ** 2).sum(-1)
    nearest = tr[d2.argmin(1)].astype(int)
    return [TASKS[task].answer(int(a), int(b)) for a, b in nearest]


def with_overrides(config: ArithmeticLMConfig, **kwargs) -> ArithmeticLMConfig:
    """``config`` with some fields replaced (a job config is a flat dict of them)."""
    return replace(config, **{k: v for k, v in kwargs.items() if k in ArithmeticLMConfig.__dataclass_fields__})
