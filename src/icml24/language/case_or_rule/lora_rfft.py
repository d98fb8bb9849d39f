"""Rule-Following Fine-Tuning (RFFT) of a pretrained LM with LoRA: the paper's Section 5 setup, shrunk.

Hu et al., "Case-Based or Rule-Based: How Do Transformers Do the Math?", ICML 2024, Section 5: Llama-2-7B
is fine-tuned with LoRA (the official ``llama/train.sh``: rank 8, alpha 16, dropout 0.05 on ``q_proj`` and
``v_proj``, AdamW, cosine schedule with 3% warm-up, loss on the answer turn only) on 1-5 digit additions
in one of three formats and tested on longer operands:

* direct answer: ``a+b=`` then the sum;
* scratchpad: the official ``cot_gen.py`` lines (:func:`~icml24.language.corpora.arithmetic.scratchpad_trace`);
* RFFT: the rule, a Python function adding two digit lists with a carry loop, is put in the input with
  the instruction to follow it, and the model writes the execution trace, reciting the variables after
  each step (:func:`~icml24.language.corpora.arithmetic.rule_following_trace`, a shortened form of the
  official ``prompt_base10.py`` trace), then the sum.

:class:`LoRAArithmetic` does this for any ``transformers`` causal LM (by default the bundled
SmolLM2-135M-Instruct, :func:`icml24.language.pretrained.load_pretrained`): ``fit(pairs)`` trains the
adapters, ``predict(pairs)`` decodes greedily (KV cache) and returns the last line of each generation,
``score(pairs)`` is the exact-match accuracy. ``peft`` and ``transformers`` are imported only when a model
is built (the ``language`` extra).
"""

from __future__ import annotations

import copy
import inspect
import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from icml24.language.case_or_rule.arithmetic_lm import FORMATS, _check_pairs, target_text
from icml24.language.corpora.arithmetic import TASKS
from icml24.language.training import IGNORE_INDEX, TrainConfig, train_lm

__all__ = ["RULE_CODE", "RULE_PREFIX", "LoRAArithmetic", "LoRAArithmeticConfig", "lora_prompt", "train_and_score"]

RULE_CODE = """def add(n1, n2):
    r = []
    c = 0
    while n1 or n2:
        d1 = n1.pop() if n1 else 0
        d2 = n2.pop() if n2 else 0
        t = d1 + d2 + c
        r.insert(0, t % 10)
        c = t // 10
    if c:
        r.insert(0, c)
    return r"""
"""The addition rule RFFT puts in the input: the digit-list carry loop of the paper's Fig. 5 (the official
``prompt_base10.py`` function), with the short variable names the trace recites."""

Format = Literal["direct", "scratchpad", "rfft"]


RULE_PREFIX = f"Follow the code step by step to add two numbers given as digit lists.\n{RULE_CODE}\n"
"""What RFFT puts before every question: the instruction and the rule (Section 5: "provide explicit rules
in the input and then instruct transformers to recite and follow the rules step by step")."""


def lora_prompt(a: int, b: int, fmt: Format) -> str:
    """The input for ``a + b`` in format ``fmt``: ``"a+b=\\n"`` after :data:`RULE_PREFIX` for ``"rfft"``,
    ``"a+b="`` for the other formats."""
    prefix, question = _prompt_parts(a, b, fmt)
    return prefix + question


def _prompt_parts(a: int, b: int, fmt: str) -> tuple[str, str]:
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    question = TASKS["addition"].question(*_operands(a, b))
    return (RULE_PREFIX, question + "\n") if fmt == "rfft" else ("", question)


def _operands(a: int, b: int) -> tuple[int, int]:
    for name, v in (("a", a), ("b", b)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return int(a), int(b)


@dataclass(frozen=True)
class LoRAArithmeticConfig:
    """LoRA fine-tuning settings; the adapter shape is the official ``llama/train.sh``'s, the optimisation is
    shrunk for a CPU (a few hundred steps instead of one epoch over 100k problems)."""

    fmt: Format = "rfft"
    """``"direct"`` answer, ``"scratchpad"`` (official cot_gen format) or ``"rfft"`` (rule in the input, trace)."""
    rank: int = 8
    """LoRA rank ``r`` (official: 8)."""
    alpha: float = 16.0
    """LoRA scale ``alpha`` (official: 16; the update is ``alpha / r * B A``)."""
    dropout: float = 0.05
    """Dropout on the adapters' input (official: 0.05)."""
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    """The projections that get adapters (official: FastChat's default ``q_proj``, ``v_proj``)."""
    steps: int = 200
    """Optimiser steps."""
    batch_size: int = 4
    """Sequences per step (official: 1 per device)."""
    lr: float = 1e-3
    """Peak AdamW learning rate (official: 2e-5 for one epoch of 7B; a 135M model trained for a few hundred
    steps needs a larger one)."""
    warmup_ratio: float = 0.03
    """Linear warm-up as a fraction of the steps, then cosine decay (official: 0.03)."""
    max_new_tokens_margin: int = 8
    """Decoding stops at the end-of-text token or this many tokens past the longest correct target."""

    def __post_init__(self) -> None:
        if self.fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {FORMATS}, got {self.fmt!r}")
        for name in ("rank", "steps", "batch_size", "max_new_tokens_margin"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name, v, lo_open, hi in (("alpha", self.alpha, True, math.inf), ("lr", self.lr, True, math.inf),
                                     ("dropout", self.dropout, False, 1.0), ("warmup_ratio", self.warmup_ratio, False, 1.0)):  # fmt: skip
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            ok = ok and (v > 0 if lo_open else v >= 0) and (v < hi or hi == math.inf)
            if not ok:
                raise ValueError(f"{name} must be a number in {'(0' if lo_open else '[0'}, {hi}), got {v!r}")
        if (not isinstance(self.target_modules, tuple) or not self.target_modules
                or not all(isinstance(m, str) and m for m in self.target_modules)):  # fmt: skip
            raise ValueError(f"target_modules must be a non-empty tuple of module names, got {self.target_modules!r}")


class LoRAArithmetic:
    """LoRA fine-tuning of a pretrained causal LM on ``a + b`` in one format, and greedy evaluation.

    Args:
        config: the format and the LoRA/optimisation settings.
        model, tokenizer: a ``transformers`` causal LM and its tokenizer; ``None`` loads the bundled
            SmolLM2-135M-Instruct (offline) at ``fit``. The model is wrapped by ``peft`` in ``fit``; its
            own weights stay frozen (a fresh model per ``fit`` is the caller's choice).
    """

    def __init__(self, config: LoRAArithmeticConfig | None = None, *, model: Any = None, tokenizer: Any = None) -> None:
        if config is not None and not isinstance(config, LoRAArithmeticConfig):
            raise TypeError(f"config must be a LoRAArithmeticConfig or None, got {type(config).__name__}")
        if (model is None) != (tokenizer is None):
            raise ValueError("model and tokenizer must be given together (or both None for SmolLM2)")
        self.config = config or LoRAArithmeticConfig()
        self.base_model = model
        self.tokenizer = tokenizer
        self.model: Any = None
        self.history_: list[dict[str, float]] = []
        self.n_trainable_: int = 0

    # ------------------------------------------------------------------------------------------ texts
    def _encode(self, pairs: np.ndarray) -> tuple[list[int], list[list[int]], list[list[int]]]:
        """Token ids of the shared prefix (the rule, for RFFT; else empty), each question and each target.
        The three are tokenized apart and concatenated, the same way in training and decoding."""
        tok = self.tokenizer
        prefix = _prompt_parts(0, 0, self.config.fmt)[0]
        prefix_ids = list(tok(prefix, add_special_tokens=False)["input_ids"]) if prefix else []
        questions, targets = [], []
        for a, b in pairs:
            q = _prompt_parts(int(a), int(b), self.config.fmt)[1]
            t = target_text("addition", int(a), int(b), self.config.fmt)
            questions.append(list(tok(q, add_special_tokens=False)["input_ids"]))
            targets.append(list(tok(t, add_special_tokens=False)["input_ids"]))
        return prefix_ids, questions, targets

    def _eos(self) -> int:
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer has no eos_token_id: the model cannot learn where its answer ends")
        return int(eos)

    def _pad(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad) if pad is not None else self._eos()

    @torch.no_grad()
    def _build_prefix_cache(self, prefix_ids: list[int]) -> None:
        """Encode the shared prefix once with the frozen pretrained model (adapters off). Every training row
        and every decoded question then attends to these keys and values instead of re-reading the ~130
        prefix tokens, which would double RFFT's cost; the adapters act on the question and the trace."""
        self._prefix_len = len(prefix_ids)
        self._prefix_cache = None
        if not prefix_ids:
            return
        with self.model.disable_adapter():
            out = self.model.get_base_model()(input_ids=torch.tensor([prefix_ids]), use_cache=True)
        self._prefix_cache = _returned_cache(out)

    def _cache_for(self, batch: int) -> Any:
        """A fresh copy of the prefix cache for ``batch`` rows (``None`` without a prefix)."""
        if self._prefix_cache is None:
            return None
        cache = copy.deepcopy(self._prefix_cache)
        cache.batch_repeat_interleave(batch)
        return cache

    # ------------------------------------------------------------------------------------------ fit
    def fit(self, train_pairs: np.ndarray, *, seed: int = 0) -> LoRAArithmetic:
        """Train the LoRA adapters on ``question -> target <eos>`` with the loss on the target tokens only
        (FastChat's masking of the user turn). Wraps the model with ``peft`` in place: call it once per model."""
        from peft import LoraConfig, get_peft_model

        pairs = _check_pairs(train_pairs, "train_pairs")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        cfg = self.config
        if self.base_model is None:
            from icml24.language.pretrained import load_pretrained

            self.base_model, self.tokenizer = load_pretrained("smollm2-135m-instruct")
        if self.model is not None:
            raise RuntimeError("fit was called already: build a new LoRAArithmetic on a fresh model")
        eos, pad = self._eos(), self._pad()
        prefix_ids, questions, targets = self._encode(pairs)
        rows = [q + t + [eos] for q, t in zip(questions, targets)]
        starts = [len(q) for q in questions]
        torch.manual_seed(int(seed))
        self.model = get_peft_model(
            self.base_model,
            LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                       target_modules=list(cfg.target_modules), bias="none", task_type="CAUSAL_LM"),
        )  # fmt: skip
        self.n_trainable_ = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        self._build_prefix_cache(prefix_ids)
        lengths = np.array([len(r) for r in rows])

        def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            idx = torch.randint(0, len(rows), (cfg.batch_size,), generator=gen).tolist()
            width = int(lengths[idx].max())
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            labels = torch.full((len(idx), width), IGNORE_INDEX, dtype=torch.long)
            for i, j in enumerate(idx):
                r = rows[j]
                ids[i, : len(r)] = torch.tensor(r)
                # labels[t] is the token at t + 1: the target (and eos) tokens only, not the question.
                labels[i, starts[j] - 1 : len(r) - 1] = torch.tensor(r[starts[j] :])
            return ids, labels

        def loss_fn(model: Any, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return _answer_loss(model, input_ids, labels, self._cache_for(input_ids.shape[0]))

        train_cfg = TrainConfig(steps=cfg.steps, lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.999),
                                warmup_steps=max(1, round(cfg.warmup_ratio * cfg.steps)), grad_clip=1.0)  # fmt: skip
        self.history_ = train_lm(self.model, batch, train_cfg, seed=int(seed), loss_fn=loss_fn)
        return self

    # ------------------------------------------------------------------------------------------ decode
    @torch.no_grad()
    def generate(self, pairs: np.ndarray, *, batch_size: int = 16) -> list[str]:
        """Greedy generations (trace and answer) for ``pairs``, decoded with a KV cache after the shared
        prefix; questions of one token length are batched together (no padding), and each generation stops
        at end-of-text or ``max_new_tokens_margin`` tokens past the length of its correct target."""
        if self.model is None:
            raise RuntimeError("call fit before generate")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        pairs = _check_pairs(pairs)
        _, questions, targets = self._encode(pairs)
        eos = self._eos()
        self.model.eval()
        out: list[str] = [""] * len(questions)
        by_length: dict[int, list[int]] = {}
        for i, q in enumerate(questions):
            by_length.setdefault(len(q), []).append(i)
        for members in by_length.values():
            for s in range(0, len(members), batch_size):
                chunk = members[s : s + batch_size]
                budgets = [len(targets[i]) + 1 + self.config.max_new_tokens_margin for i in chunk]
                rows = self._greedy(torch.tensor([questions[i] for i in chunk]), budgets, eos)
                for i, row in zip(chunk, rows):
                    out[i] = self.tokenizer.decode(row, skip_special_tokens=True)
        return out

    def _greedy(self, question_ids: torch.Tensor, budgets: list[int], eos: int) -> list[list[int]]:
        """Greedy decoding of a batch of equal-length questions after the prefix cache: row ``r`` gets at most
        ``budgets[r]`` new tokens; returns the tokens before eos."""
        n = question_ids.shape[0]
        # The peft-wrapped modules live inside the base model: calling it runs the adapters.
        model = self.model.get_base_model()
        kw = _cache_keyword(model)
        out = model(input_ids=question_ids, **{kw: self._cache_for(n)}, use_cache=True, logits_to_keep=1)
        generated: list[list[int]] = [[] for _ in range(n)]
        done = torch.zeros(n, dtype=torch.bool)
        limit = torch.tensor(budgets)
        for step in range(max(budgets)):
            nxt = out.logits[:, -1].argmax(-1)
            for r in range(n):
                if not done[r] and int(nxt[r]) != eos:
                    generated[r].append(int(nxt[r]))
            done |= (nxt == eos) | (limit <= step + 1)
            if bool(done.all()):
                break
            out = model(input_ids=nxt[:, None], **{kw: _returned_cache(out)}, use_cache=True, logits_to_keep=1)
        return generated

    def predict(self, pairs: np.ndarray) -> list[str]:
        """The answer line (the last line) of each generation."""
        return [_answer_line(g) for g in self.generate(pairs)]

    def correct(self, pairs: np.ndarray) -> np.ndarray:
        """Boolean array: whether each prediction is the sum (the paper's exact match)."""
        pairs = _check_pairs(pairs)
        return np.array([p == str(int(a) + int(b)) for p, (a, b) in zip(self.predict(pairs), pairs)])

    def score(self, pairs: np.ndarray) -> float:
        """Exact-match accuracy on ``pairs``."""
        return float(self.correct(pairs).mean())


def _cache_keyword(model: Any) -> str:
    """The KV-cache argument of ``model.forward``: ``cache`` in transformers >= 5.2, ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


def _returned_cache(output: Any) -> Any:
    """The KV cache a forward pass returned (``output.cache``, or ``output.past_key_values`` before 5.2)."""
    return output.cache if hasattr(output, "cache") else output.past_key_values


def _answer_line(generation: str) -> str:
    return generation.strip().split("\n")[-1].strip()


def _answer_loss(model: Any, input_ids: torch.Tensor, labels: torch.Tensor, cache: Any) -> torch.Tensor:
    """Cross-entropy on the labelled (target) positions, with the output layer applied to those only: the
    question's logits are never formed (the 49k-word output layer is about a fifth of SmolLM2's compute)."""
    base = model.get_base_model()
    mask = labels != IGNORE_INDEX
    # Right padding: real tokens never attend to the pads after them (causal), so no attention mask is
    # needed; positions continue after the prefix held in ``cache``.
    kw = _cache_keyword(base.model)
    hidden = base.model(input_ids=input_ids, **{kw: cache}, use_cache=cache is not None).last_hidden_state
    logits = base.lm_head(hidden[mask])
    return torch.nn.functional.cross_entropy(logits.float(), labels[mask])


def train_and_score(
    config: LoRAArithmeticConfig,
    train_pairs: np.ndarray,
    tests: dict[int, np.ndarray],
    *,
    seed: int = 0,
    model: Any = None,
    tokenizer: Any = None,
) -> dict[str, Any]:
    """Fit on ``train_pairs``; exact-match counts per test set (keyed by operand length); timings."""
    t0 = time.perf_counter()
    lm = LoRAArithmetic(config, model=model, tokenizer=tokenizer).fit(train_pairs, seed=seed)
    t1 = time.perf_counter()
    correct, examples = {}, {}
    for d, p in sorted(tests.items()):
        gens = lm.generate(p)
        answers = [_answer_line(g) for g in gens]
        correct[d] = np.array([x == str(int(a) + int(b)) for x, (a, b) in zip(answers, p)])
        examples[d] = gens[0]
    return {
        "digits": sorted(tests),
        "correct_by_digits": [int(c.sum()) for c in correct.values()],
        "n_by_digits": [int(c.size) for c in correct.values()],
        "accuracy_by_digits": [float(c.mean()) for c in correct.values()],
        "example_generation": {str(d): g for d, g in examples.items()},
        "final_loss": float(lm.history_[-1]["loss"]),
        "trainable_parameters": int(lm.n_trainable_),
        "train_seconds": t1 - t0,
        "eval_seconds": time.perf_counter() - t1,
    }
