"""Scorers: a model's letter probabilities for one question under many option orders, in one batch.

* :class:`LetterProbabilityScorer`: the paper's MCQ prompting (Section 3; official ``LLMs_attack.py``) for
  any ``transformers`` causal LM: the prompt lists the options under letters and ends in ``Answer:``; the
  score of letter ``j`` is the next-token probability of the letter's token. All orders of a question are
  one batched forward pass; their common token prefix (header, shots, question text) is run once and its
  KV cache shared by the batch (``share_prefix``).
* :class:`EmbeddingClozeScorer`: the permutation-invariant control. Each option's text is scored by its
  embedding similarity to the question (a sentence encoder such as all-MiniLM-L6-v2) without seeing letters
  or the other options, so every order gives the same option scores and the attack cannot move it.

A scorer is any object with ``letter_probs(question, option_lists) -> (len(option_lists), k) array``;
:func:`score_questions` runs one over every order of every question and returns
:class:`~icml24.evaluation.mcq_permutation.attack.PermutationScores`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from icml24.evaluation.mcq_permutation.attack import (
    PermutationScores,
    all_permutations,
    apply_order,
    reduced_orders,
)
from icml24.evaluation.mcq_permutation.questions import LETTERS, MCQ, format_prompt

DEFAULT_INSTRUCTION = "Answer with the letter of the correct option."


class Scorer(Protocol):
    def letter_probs(self, question: str, option_lists: Sequence[Sequence[str]]) -> np.ndarray: ...


def _check_option_lists(option_lists: Sequence[Sequence[str]]) -> list[list[str]]:
    if isinstance(option_lists, str) or not isinstance(option_lists, Sequence) or len(option_lists) == 0:
        raise ValueError("option_lists must be a non-empty sequence of option lists")
    lists = [list(o) for o in option_lists]
    k = len(lists[0])
    if k < 2 or any(len(o) != k for o in lists) or not all(isinstance(x, str) for o in lists for x in o):
        raise ValueError("option_lists must hold lists of at least two str, all of one length")
    if k > len(LETTERS):
        raise ValueError(f"option_lists: at most {len(LETTERS)} options")
    return lists


class LetterProbabilityScorer:
    """Next-token letter probabilities of a causal LM after an MCQ prompt (the paper's scoring).

    Args:
        model: a ``transformers`` causal LM (``LlamaForCausalLM`` for SmolLM2), in eval mode.
        tokenizer: its tokenizer.
        chat: wrap the question in the tokenizer's chat template (user turn = the question and options and
            ``instruction``; the assistant turn is primed with ``Answer:``); ``False``: the raw MMLU prompt.
        instruction: appended to the user turn in chat mode.
        header: text before the shots and the question (the MMLU subject header).
        shots: solved examples ``(question, options, gold index)`` put before the question.
        share_prefix: run the orders' common token prefix once and share its KV cache across the batch.
        batch_size: the most orders per forward pass (all ``n!`` orders of a 4-option question: 24).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        chat: bool = False,
        instruction: str = DEFAULT_INSTRUCTION,
        header: str = "",
        shots: Sequence[tuple[str, Sequence[str], int]] = (),
        share_prefix: bool = True,
        batch_size: int = 24,
    ) -> None:
        if not callable(model):
            raise TypeError("model must be a callable causal LM")
        if not callable(getattr(tokenizer, "encode", None)):
            raise TypeError("tokenizer must have an encode method")
        for name, v in (("chat", chat), ("share_prefix", share_prefix)):
            if not isinstance(v, bool):
                raise TypeError(f"{name} must be a bool, got {v!r}")
        for name, v in (("instruction", instruction), ("header", header)):
            if not isinstance(v, str):
                raise TypeError(f"{name} must be a str, got {type(v).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model, self.tokenizer = model, tokenizer
        self.chat, self.instruction, self.header = chat, instruction, header
        self.shots = tuple((q, tuple(o), int(g)) for q, o, g in shots)
        self.share_prefix, self.batch_size = share_prefix, batch_size
        self._letter_ids: dict[int, list[int]] = {}
        self.forward_tokens = 0
        """Tokens run through the model so far (prefix once per batch when shared): the cost measured."""

    def prompt(self, question: str, options: Sequence[str]) -> str:
        """The prompt text for ``options`` in the order given."""
        if not self.chat:
            return format_prompt(question, options, header=self.header, shots=self.shots)
        body = format_prompt(question, options, header=self.header, shots=self.shots)[: -len("Answer:")]
        messages = [{"role": "user", "content": body + self.instruction}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text + "Answer:"

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def letter_ids(self, k: int) -> list[int]:
        """Token ids of ``" A"``, ``" B"``, ... as they follow ``Answer:`` (each must be one token)."""
        if k not in self._letter_ids:
            base = self._encode("Answer:")
            ids = []
            for letter in LETTERS[:k]:
                extra = self._encode("Answer: " + letter)[len(base) :]
                if len(extra) != 1:
                    raise ValueError(f"the tokenizer splits ' {letter}' after 'Answer:' into {len(extra)} tokens")
                ids.append(extra[0])
            self._letter_ids[k] = ids
        return self._letter_ids[k]

    def letter_probs(self, question: str, option_lists: Sequence[Sequence[str]]) -> np.ndarray:
        """``(len(option_lists), k)`` next-token probabilities of the letters, one row per order."""
        import torch

        lists = _check_option_lists(option_lists)
        ids = self.letter_ids(len(lists[0]))
        rows = []
        for start in range(0, len(lists), self.batch_size):
            seqs = [self._encode(self.prompt(question, o)) for o in lists[start : start + self.batch_size]]
            with torch.inference_mode():
                logits = self._last_logits(seqs)
            rows.append(torch.softmax(logits.double(), dim=-1)[:, ids].cpu().numpy())  # float64: no rounding added
        return np.concatenate(rows).astype(float)

    def _last_logits(self, seqs: list[list[int]]):
        import torch

        lcp = 0
        if self.share_prefix and len(seqs) > 1:
            shortest = min(len(s) for s in seqs)
            while lcp < shortest - 1 and all(s[lcp] == seqs[0][lcp] for s in seqs):
                lcp += 1
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        suffixes = [s[lcp:] for s in seqs]
        width = max(len(s) for s in suffixes)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), lcp + width), dtype=torch.long)
        mask[:, :lcp] = 1
        for i, s in enumerate(suffixes):  # right padding: a causal model's real tokens never see it
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, lcp : lcp + len(s)] = 1
        last = torch.tensor([len(s) - 1 for s in suffixes])
        kwargs: dict[str, Any] = {}
        # Only the last real position's logits are read: ask the model for the output layer (hidden x vocab,
        # 576 x 49152 for SmolLM2) there alone, not at every prefix and padding position.
        keep = self._logits_to_keep_kwarg()
        if lcp:
            prefix = self.model(torch.tensor([seqs[0][:lcp]]), use_cache=True, **({keep: 1} if keep else {}))
            # transformers 5 names the cache ``cache`` (``past_key_values`` is deprecated there)
            cache = prefix["cache"] if "cache" in prefix else prefix.past_key_values
            cache.batch_repeat_interleave(len(seqs))
            kwargs[self._cache_kwarg()] = cache
        rows = torch.arange(len(seqs))
        if keep:
            # a 1-D tensor keeps the same positions in every row: the distinct last positions (usually one or
            # two, the orders' suffixes differ in length only where option texts tokenise differently)
            positions, column = torch.unique(last, return_inverse=True)
            kwargs[keep] = positions
        else:
            column = last
        out = self.model(input_ids=ids, attention_mask=mask, use_cache=bool(lcp), **kwargs)
        self.forward_tokens += lcp + int(sum(len(s) for s in suffixes))
        return out.logits[rows, column]

    def _logits_to_keep_kwarg(self) -> str | None:
        """``logits_to_keep`` where the model's forward takes it (``transformers`` >= 4.49), else ``None``
        (the model computes the logits at every position and the last one is read)."""
        import inspect

        forward = getattr(self.model, "forward", None)
        if forward is None:
            return None
        return "logits_to_keep" if "logits_to_keep" in inspect.signature(forward).parameters else None

    def _cache_kwarg(self) -> str:
        """``cache`` in transformers >= 5.x (``past_key_values`` is deprecated there), else ``past_key_values``."""
        import inspect

        params = inspect.signature(self.model.forward).parameters
        return "cache" if "cache" in params else "past_key_values"

    def content_free_prior(self, k: int = 4, fillers: Sequence[str] = ("N/A", "[MASK]", "")) -> np.ndarray:
        """Contextual calibration's prior (Zhao et al., 2021): the normalised letter probabilities after a
        content-free question whose options are all the same filler, averaged over ``fillers``."""
        if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= len(LETTERS):
            raise ValueError(f"k must be an int in 2..{len(LETTERS)}, got {k!r}")
        if isinstance(fillers, str) or len(fillers) == 0:
            raise ValueError("fillers must be a non-empty sequence of str")
        rows = [self.letter_probs(f, [[f] * k])[0] for f in fillers]
        rows = [r / r.sum() for r in rows]
        return np.mean(rows, axis=0)


class EmbeddingClozeScorer:
    """Per-option cloze scores from a sentence encoder: softmax over options of ``cos(e(q), e(o)) / T``.

    Each option text is embedded on its own (mean-pooled last hidden state, L2-normalised, as
    sentence-transformers pools all-MiniLM-L6-v2); the question is embedded as ``question + answer_stub``.
    The scores of an order are the option scores read in that order: invariant to permutation by
    construction (texts are embedded once per call and looked up, so not even batching noise differs).
    """

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 0.05, answer_stub: str = "") -> None:
        if not callable(model):
            raise TypeError("model must be a callable encoder")
        if not callable(tokenizer):
            raise TypeError("tokenizer must be a callable tokenizer")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
            raise ValueError(f"temperature must be a positive number, got {temperature!r}")
        if not isinstance(answer_stub, str):
            raise TypeError("answer_stub must be a str")
        self.model, self.tokenizer, self.temperature, self.answer_stub = model, tokenizer, float(temperature), answer_stub

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        enc = self.tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True)
        with torch.inference_mode():
            hidden = self.model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy().astype(float)

    def letter_probs(self, question: str, option_lists: Sequence[Sequence[str]]) -> np.ndarray:
        lists = _check_option_lists(option_lists)
        texts = sorted({o for opts in lists for o in opts})
        emb = self.embed([question + self.answer_stub, *texts])
        sims = dict(zip(texts, emb[1:] @ emb[0], strict=True))
        logits = np.array([[sims[o] for o in opts] for opts in lists]) / self.temperature
        p = np.exp(logits - logits.max(1, keepdims=True))
        return p / p.sum(1, keepdims=True)


class FunctionScorer:
    """Wraps ``fn(question, options) -> letter scores`` (one order at a time) as a scorer: for toy models,
    tests, and models of your own."""

    def __init__(self, fn: Callable[[str, Sequence[str]], Sequence[float]]) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable")
        self.fn = fn

    def letter_probs(self, question: str, option_lists: Sequence[Sequence[str]]) -> np.ndarray:
        lists = _check_option_lists(option_lists)
        return np.array([np.asarray(self.fn(question, o), dtype=float) for o in lists])


def score_questions(scorer: Scorer, mcqs: Sequence[MCQ], *, k: int | None = None) -> list[PermutationScores]:
    """Score every question under every order: all ``n!`` permutations (``k=None``; row 0 the clean order)
    or the reduce attack's ``k``-option orders (:func:`reduced_orders`). One ``letter_probs`` call (one
    batched forward pass) per question."""
    if not callable(getattr(scorer, "letter_probs", None)):
        raise TypeError("scorer must have a letter_probs(question, option_lists) method")
    if isinstance(mcqs, MCQ) or not isinstance(mcqs, Sequence) or not mcqs or not all(isinstance(q, MCQ) for q in mcqs):
        raise ValueError("mcqs must be a non-empty sequence of MCQ")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive int or None, got {k!r}")
    out = []
    for q in mcqs:
        orders = all_permutations(q.n_options) if k is None else reduced_orders(q.n_options, q.gold, k)
        if orders.shape[1] == 1:  # one option: the only letter is always predicted
            out.append(PermutationScores(orders, np.ones((len(orders), 1)), q.gold))
            continue
        probs = scorer.letter_probs(q.question, [apply_order(q, o)[0] for o in orders])
        out.append(PermutationScores(orders, np.asarray(probs, dtype=float), q.gold))
    return out
