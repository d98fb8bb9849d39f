"""Tokenizers for the toy corpora: one id per character, or one id per word of a fixed vocabulary.

Both share the special tokens ``<pad>`` (id 0), ``<bos>``, ``<eos>``, ``<unk>`` and ``<mask>`` (ids 1-4), so
models and losses can rely on ``pad_id == 0``. ``encode``/``decode`` round-trip every string made of the
vocabulary (characters, or words joined by single spaces); :meth:`Tokenizer.batch` pads a list of texts
into tensors, on the right for training or on the left for batched generation.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

import torch

__all__ = ["CharTokenizer", "SPECIAL_TOKENS", "Tokenizer", "WordTokenizer"]

SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>", "<mask>")


class Tokenizer:
    """Shared machinery: the vocabulary, special ids, padding into tensors."""

    def __init__(self, symbols: Sequence[str]) -> None:
        symbols = list(symbols)
        dup = [s for s, n in Counter(symbols).items() if n > 1]
        if dup:
            raise ValueError(f"symbols must be unique, got duplicates {dup[:5]}")
        clash = [s for s in symbols if s in SPECIAL_TOKENS]
        if clash:
            raise ValueError(f"symbols must not contain the special tokens {clash}")
        self.itos: list[str] = list(SPECIAL_TOKENS) + symbols
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id, self.mask_id = range(len(SPECIAL_TOKENS))

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def _split(self, text: str) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _join(self, pieces: list[str]) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        """Token ids of ``text`` (with ``<bos>``/``<eos>`` when asked)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids = [self._id(p) for p in self._split(text)]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def _id(self, piece: str) -> int:
        raise NotImplementedError  # pragma: no cover

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        """Text of ``ids``; special tokens are dropped unless ``skip_special=False``."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        pieces = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.vocab_size:
                raise ValueError(f"ids must be ints in [0, {self.vocab_size}), got {i!r}")
            if skip_special and i < len(SPECIAL_TOKENS):
                continue
            pieces.append(self.itos[i])
        return self._join(pieces)

    def batch(
        self,
        texts: Sequence[str],
        *,
        bos: bool = False,
        eos: bool = False,
        padding_side: Literal["right", "left"] = "right",
        max_length: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)`` of shape ``(len(texts), longest)``, padded with ``<pad>``.

        Right padding suits training (positions start at 0 for every row); left padding suits batched
        generation (every prompt ends at the last column). ``max_length`` truncates (from the right).
        """
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of str, not one str")
        rows = [self.encode(t, bos=bos, eos=eos) for t in texts]
        if max_length is not None:
            if max_length < 1:
                raise ValueError(f"max_length must be >= 1, got {max_length}")
            rows = [r[:max_length] for r in rows]
        width = max((len(r) for r in rows), default=0)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            if not r:
                continue
            sl = slice(0, len(r)) if padding_side == "right" else slice(width - len(r), width)
            ids[i, sl] = torch.tensor(r, dtype=torch.long)
            mask[i, sl] = 1
        return ids, mask


class CharTokenizer(Tokenizer):
    """One token per character of a fixed alphabet; unknown characters raise (or map to ``<unk>``).

    Args:
        alphabet: the characters, in id order (ids start after the special tokens).
        unknown: ``"error"`` raises on a character outside the alphabet; ``"unk"`` maps it to ``<unk>``
            (then decoding is not the identity for such text).
    """

    def __init__(self, alphabet: Iterable[str], *, unknown: Literal["error", "unk"] = "error") -> None:
        chars = list(alphabet) if not isinstance(alphabet, str) else list(alphabet)
        bad = [c for c in chars if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise ValueError(f"alphabet must hold single characters, got {bad[:5]}")
        if unknown not in ("error", "unk"):
            raise ValueError(f"unknown must be 'error' or 'unk', got {unknown!r}")
        super().__init__(chars)
        self.unknown = unknown

    @classmethod
    def from_texts(cls, texts: Iterable[str], **kwargs) -> CharTokenizer:
        """The alphabet of the characters in ``texts`` (sorted, so the ids do not depend on text order)."""
        return cls(sorted(set("".join(texts))), **kwargs)

    def _split(self, text: str) -> list[str]:
        return list(text)

    def _join(self, pieces: list[str]) -> str:
        return "".join(pieces)

    def _id(self, piece: str) -> int:
        i = self.stoi.get(piece)
        if i is None or i < len(SPECIAL_TOKENS):
            if self.unknown == "unk":
                return self.unk_id
            raise ValueError(f"text holds the character {piece!r}, which is not in the alphabet")
        return i


class WordTokenizer(Tokenizer):
    """One token per word of a fixed vocabulary; words are split on white space and punctuation.

    ``decode`` joins words with single spaces, so it round-trips text whose words are separated by single
    spaces; a word outside the vocabulary becomes ``<unk>``.
    """

    _WORD = re.compile(r"\w+|[^\w\s]")

    def __init__(self, vocabulary: Iterable[str], *, lowercase: bool = True) -> None:
        words = list(vocabulary)
        bad = [w for w in words if not isinstance(w, str) or not w or any(ch.isspace() for ch in w)]
        if bad:
            raise ValueError(f"vocabulary must hold non-empty words without spaces, got {bad[:5]}")
        super().__init__(words)
        self.lowercase = lowercase

    @classmethod
    def from_texts(
        cls, texts: Iterable[str], *, max_size: int | None = None, min_count: int = 1, lowercase: bool = True
    ) -> WordTokenizer:
        """The ``max_size`` most frequent words (ties broken alphabetically) seen at least ``min_count`` times."""
        counts: Counter[str] = Counter()
        for t in texts:
            counts.update(cls._WORD.findall(t.lower() if lowercase else t))
        ranked = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        return cls(ranked[:max_size] if max_size is not None else ranked, lowercase=lowercase)

    def _split(self, text: str) -> list[str]:
        return self._WORD.findall(text.lower() if self.lowercase else text)

    def _join(self, pieces: list[str]) -> str:
        return " ".join(pieces)

    def _id(self, piece: str) -> int:
        i = self.stoi.get(piece)
        return self.unk_id if i is None or i < len(SPECIAL_TOKENS) else i
