"""The no-download fallback: a tiny transformer trained from scratch to answer letter-format MCQs.

Notes, section 6B: when no pretrained model is installed (and in tests), the attack is shown on a small
causal transformer (the shared :class:`~icml24.language.TransformerLM`, word tokens) trained only on the
letter after ``Answer:``. Trained with a skew of the gold letter (``gold_skew`` of the training questions
have their gold option at letter A) and a limited budget, it learns the task partly and the letter
prior partly, like the models of the paper; trained with uniformly drawn orders (permutation augmentation,
``gold_skew=None``) it is taught no letter preference. It is a mechanism demonstration, not evidence
about pretrained LLMs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from icml24.evaluation.mcq_permutation.attack import apply_order
from icml24.evaluation.mcq_permutation.questions import LETTERS, MCQ, format_prompt


class TinyLetterModel:
    """A from-scratch causal transformer that reads an MCQ prompt and predicts the answer letter.

    Args:
        d_model: width; n_layers: blocks; n_heads: attention heads.
        steps: AdamW steps; batch_size: questions per step; lr: peak learning rate (cosine decay).
        gold_skew: probability that a training question shows its gold option at letter A (the rest
            spread uniformly); ``None`` draws every order uniformly (permutation augmentation).
        seed: seeds the initialisation and the training orders.
    """

    def __init__(
        self,
        *,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        steps: int = 400,
        batch_size: int = 64,
        lr: float = 3e-3,
        gold_skew: float | None = 0.4,
        seed: int = 0,
    ) -> None:
        for name, v in (("d_model", d_model), ("n_layers", n_layers), ("n_heads", n_heads), ("steps", steps),
                        ("batch_size", batch_size)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        if gold_skew is not None and (isinstance(gold_skew, bool) or not isinstance(gold_skew, (int, float))
                                      or not 0 <= gold_skew <= 1):  # fmt: skip
            raise ValueError(f"gold_skew must be a probability in [0, 1] or None, got {gold_skew!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.d_model, self.n_layers, self.n_heads = d_model, n_layers, n_heads
        self.steps, self.batch_size, self.lr, self.gold_skew, self.seed = steps, batch_size, lr, gold_skew, seed

    def _order(self, q: MCQ, rng: np.random.Generator) -> np.ndarray:
        n = q.n_options
        if self.gold_skew is None:
            return rng.permutation(n)
        k = n
        weights = np.full(k, (1 - self.gold_skew) / (k - 1))
        weights[0] = self.gold_skew
        gold_letter = int(rng.choice(k, p=weights))
        rest = [i for i in rng.permutation(n) if i != q.gold]
        rest.insert(gold_letter, q.gold)
        return np.array(rest)

    def fit(self, mcqs: Sequence[MCQ]) -> TinyLetterModel:
        """Train on ``mcqs`` (a fresh order per question per step). Sets ``model_``, ``tokenizer_``, ``history_``."""
        import torch

        from icml24.language import TransformerConfig, TransformerLM, WordTokenizer

        if isinstance(mcqs, MCQ) or not mcqs or not all(isinstance(q, MCQ) for q in mcqs):
            raise ValueError("mcqs must be a non-empty sequence of MCQ")
        k = mcqs[0].n_options
        texts = [format_prompt(q.question, q.options) for q in mcqs] + [" ".join(LETTERS[:k])]
        self.tokenizer_ = WordTokenizer.from_texts(texts, lowercase=False)
        self.k_ = k
        longest = max(len(self.tokenizer_.encode(t)) for t in texts) + 8
        torch.manual_seed(self.seed)
        cfg = TransformerConfig(vocab_size=self.tokenizer_.vocab_size, d_model=self.d_model, n_layers=self.n_layers,
                                n_heads=self.n_heads, max_seq_len=max(64, longest))  # fmt: skip
        self.model_ = TransformerLM(cfg)
        opt = torch.optim.AdamW(self.model_.parameters(), lr=self.lr, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + np.cos(np.pi * s / self.steps)))
        rng = np.random.default_rng(self.seed)
        self.history_ = []
        self.model_.train()
        for _ in range(self.steps):
            batch = [mcqs[int(i)] for i in rng.integers(len(mcqs), size=self.batch_size)]
            shown = [apply_order(q, self._order(q, rng)) for q in batch]
            logits = self._letter_logits([q.question for q in batch], [o for o, _ in shown])
            loss = torch.nn.functional.cross_entropy(logits, torch.tensor([g for _, g in shown]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            self.history_.append(float(loss.detach()))
        self.model_.eval()
        return self

    def _letter_logits(self, questions: Sequence[str], option_lists: Sequence[Sequence[str]]):
        import torch

        seqs = [self.tokenizer_.encode(format_prompt(q, o)) for q, o in zip(questions, option_lists, strict=True)]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.tokenizer_.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        logits = self.model_(ids, attention_mask=mask)
        last = logits[torch.arange(len(seqs)), torch.tensor([len(s) - 1 for s in seqs])]
        letter_ids = [self.tokenizer_.stoi[L] for L in LETTERS[: self.k_]]
        return last[:, letter_ids]

    def letter_probs(self, question: str, option_lists: Sequence[Sequence[str]]) -> np.ndarray:
        """``(len(option_lists), k)`` letter probabilities (softmax over the ``k`` letters), one batch."""
        import torch

        if not hasattr(self, "model_"):
            raise RuntimeError("call fit before letter_probs")
        lists = [list(o) for o in option_lists]
        if not lists or any(len(o) != self.k_ for o in lists):
            raise ValueError(f"option_lists must hold lists of {self.k_} options")
        with torch.inference_mode():
            return torch.softmax(self._letter_logits([question] * len(lists), lists), -1).numpy().astype(float)
