"""Masked-character language modelling on a text corpus, for training SpikeLM from scratch.

:class:`MaskedCharCorpus` turns texts (by default the standard library's docstrings) into a character
stream, splits it by document into training and held-out parts, and draws BERT-style masked windows
(:func:`icml24.language.training.mask_tokens`). :func:`train_masked_lm` trains any model on it with the
shared :func:`~icml24.language.training.train_lm` and :func:`evaluate_masked_lm` scores held-out
masked-character accuracy on a fixed set of windows (the same for every model and seed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from icml24.language.corpora import stdlib_docstrings
from icml24.language.spikelm.neurons import _check_int
from icml24.language.tokenizers import SPECIAL_TOKENS, CharTokenizer
from icml24.language.training import IGNORE_INDEX, TrainConfig, lm_loss, mask_tokens, train_lm

__all__ = ["MaskedCharCorpus", "evaluate_masked_lm", "train_masked_lm"]


@dataclass
class MaskedCharCorpus:
    """Character-level masked-LM data: training and held-out streams split by document.

    Args:
        texts: the documents; ``None`` reads :func:`~icml24.language.corpora.stdlib_docstrings`.
        seq_len: window length in characters.
        held_out_every: every ``held_out_every``-th document is held out (the rest trains).
        mask_prob: BERT's masking rate (15%).
        val_every: when > 0, every ``val_every``-th of the remaining documents is a validation document
            (``split="val"``, :meth:`val_set`), neither trained on nor tested; 0: no validation split.
    """

    texts: Sequence[str] | None = None
    seq_len: int = 64
    held_out_every: int = 10
    mask_prob: float = 0.15
    val_every: int = 0

    def __post_init__(self) -> None:
        _check_int("seq_len", self.seq_len, 2)
        _check_int("held_out_every", self.held_out_every, 2)
        if not (isinstance(self.mask_prob, (int, float)) and 0 < self.mask_prob < 1):
            raise ValueError(f"mask_prob must be in (0, 1), got {self.mask_prob!r}")
        texts = stdlib_docstrings() if self.texts is None else self.texts
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("texts must be a sequence of str")
        if isinstance(self.val_every, bool) or not isinstance(self.val_every, int) or self.val_every == 1 or self.val_every < 0:
            raise ValueError(f"val_every must be 0 (no validation split) or an int >= 2, got {self.val_every!r}")
        train_docs = [t for i, t in enumerate(texts) if i % self.held_out_every != self.held_out_every - 1]
        test_docs = [t for i, t in enumerate(texts) if i % self.held_out_every == self.held_out_every - 1]
        val_docs: list[str] = []
        if self.val_every:
            val_docs = [t for j, t in enumerate(train_docs) if j % self.val_every == self.val_every - 1]
            train_docs = [t for j, t in enumerate(train_docs) if j % self.val_every != self.val_every - 1]
        self.tokenizer = CharTokenizer.from_texts(list(texts) + ["\n"])
        self.train_ids = torch.tensor(self.tokenizer.encode("\n\n".join(train_docs)), dtype=torch.long)
        self.test_ids = torch.tensor(self.tokenizer.encode("\n\n".join(test_docs)), dtype=torch.long)
        self.val_ids = torch.tensor(self.tokenizer.encode("\n\n".join(val_docs)), dtype=torch.long)
        streams = [("training", self.train_ids), ("held-out", self.test_ids)]
        streams += [("validation", self.val_ids)] if self.val_every else []
        for name, ids in streams:
            if ids.numel() <= self.seq_len:
                raise ValueError(f"texts give a {name} stream of {ids.numel()} characters; seq_len={self.seq_len} "
                                 f"needs more (held_out_every={self.held_out_every})")  # fmt: skip

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def _windows(self, stream: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
        starts = torch.randint(0, stream.numel() - self.seq_len + 1, (n,), generator=gen)
        return torch.stack([stream[s : s + self.seq_len] for s in starts.tolist()])

    def sample(self, batch_size: int, generator: torch.Generator, *, split: str = "train") -> tuple[torch.Tensor, torch.Tensor]:
        """``(corrupted_ids, labels)`` of ``batch_size`` random windows of the ``split`` stream."""
        _check_int("batch_size", batch_size)
        if split not in ("train", "test", "val"):
            raise ValueError(f"split must be 'train', 'test' or 'val', got {split!r}")
        if split == "val" and not self.val_every:
            raise ValueError("split='val' needs a validation split: construct the corpus with val_every >= 2")
        stream = {"train": self.train_ids, "test": self.test_ids, "val": self.val_ids}[split]
        ids = self._windows(stream, batch_size, generator)
        tok = self.tokenizer
        return mask_tokens(ids, mask_id=tok.mask_id, vocab_size=tok.vocab_size, generator=generator,
                           mask_prob=self.mask_prob, first_regular_id=len(SPECIAL_TOKENS))  # fmt: skip

    def eval_set(self, n_windows: int = 256, *, seed: int = 12345) -> tuple[torch.Tensor, torch.Tensor]:
        """A fixed held-out set of masked windows (the same for every model given ``seed``)."""
        _check_int("n_windows", n_windows)
        return self.sample(n_windows, torch.Generator().manual_seed(seed), split="test")

    def val_set(self, n_windows: int = 256, *, seed: int = 54321) -> tuple[torch.Tensor, torch.Tensor]:
        """A fixed set of masked validation windows (documents neither trained on nor in the test set)."""
        _check_int("n_windows", n_windows)
        return self.sample(n_windows, torch.Generator().manual_seed(seed), split="val")

    def unigram_accuracy(self, labels: torch.Tensor) -> float:
        """Accuracy of always predicting the most frequent training character at the labelled positions."""
        top = int(torch.bincount(self.train_ids, minlength=self.vocab_size).argmax())
        keep = labels != IGNORE_INDEX
        return float((labels[keep] == top).float().mean())


@torch.no_grad()
def evaluate_masked_lm(model: nn.Module, input_ids: torch.Tensor, labels: torch.Tensor, *, batch_size: int = 64) -> dict[str, float]:
    """Held-out masked-character accuracy and loss: ``correct``, ``n``, ``accuracy``, ``loss`` (mean CE)."""
    _check_int("batch_size", batch_size)
    if input_ids.shape != labels.shape:
        raise ValueError(f"input_ids {tuple(input_ids.shape)} and labels {tuple(labels.shape)} must match")
    was_training = model.training
    model.eval()
    correct, n, nll = 0, 0, 0.0
    try:
        for i in range(0, input_ids.shape[0], batch_size):
            logits = model(input_ids[i : i + batch_size])
            lab = labels[i : i + batch_size]
            keep = lab != IGNORE_INDEX
            k = int(keep.sum())
            if k == 0:
                continue
            correct += int((logits.argmax(-1)[keep] == lab[keep]).sum())
            nll += float(lm_loss(logits, lab)) * k
            n += k
    finally:
        model.train(was_training)
    return {"correct": correct, "n": n, "accuracy": correct / n if n else math.nan, "loss": nll / n if n else math.nan}


def train_masked_lm(
    model: nn.Module, corpus: MaskedCharCorpus, config: TrainConfig, *, batch_size: int = 32, seed: int = 0
) -> list[dict[str, float]]:
    """Train ``model`` on masked windows of ``corpus`` with :func:`~icml24.language.training.train_lm`."""
    if not isinstance(corpus, MaskedCharCorpus):
        raise TypeError(f"corpus must be a MaskedCharCorpus, got {type(corpus).__name__}")
    _check_int("batch_size", batch_size)
    return train_lm(model, lambda g: corpus.sample(batch_size, g), config, seed=seed)
