"""Metrics of the language reproductions: exact match of the last number, per-token accuracy, perplexity."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch

from icml24.language.training import IGNORE_INDEX

__all__ = ["exact_match_last_number", "last_number", "perplexity", "token_accuracy"]

_INT = re.compile(r"-?\d+")


def last_number(text: str) -> int | None:
    """The last integer in ``text`` (the official case-or-rule evaluation), or ``None``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    found = _INT.findall(text)
    return int(found[-1]) if found else None


def exact_match_last_number(predictions: Sequence[str], answers: Sequence[int | str]) -> float:
    """Fraction of predictions whose last integer equals the answer (a prediction without one is wrong)."""
    if isinstance(predictions, str) or isinstance(answers, str):
        raise TypeError("predictions and answers must be sequences, not a single str")
    if len(predictions) != len(answers):
        raise ValueError(f"predictions and answers must have equal length, got {len(predictions)} and {len(answers)}")
    if not predictions:
        return math.nan
    hits = 0
    for p, a in zip(predictions, answers):
        ref = a if isinstance(a, int) else last_number(str(a))
        hits += last_number(p) == ref and ref is not None
    return hits / len(predictions)


def token_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of counted positions (label != ``IGNORE_INDEX``) where the arg-max logit is the label."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} do not match")
    keep = labels != IGNORE_INDEX
    n = int(keep.sum())
    if n == 0:
        return math.nan
    return float((logits.argmax(-1)[keep] == labels[keep]).float().mean())


def perplexity(mean_nll: float) -> float:
    """``exp`` of a mean negative log-likelihood in nats per token."""
    if not (isinstance(mean_nll, (int, float)) and math.isfinite(mean_nll) and mean_nll >= 0):
        raise ValueError(f"mean_nll must be a finite number >= 0, got {mean_nll!r}")
    return math.exp(mean_nll)
