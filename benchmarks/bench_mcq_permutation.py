"""Benchmark: scoring all 24 option orders of a question with SmolLM2 (``icml24.evaluation.mcq_permutation``).

Three ways to get the letter probabilities of the 24 orders, interleaved, one torch thread, best of
``--repeats``, on the same generated questions: one prompt at a time (the official loop), one padded batch of
24, and one batch of 24 whose common token prefix is run once and its KV cache shared (the default of
``LetterProbabilityScorer``). Raw MMLU prompt and the chat template (whose system prompt makes the shared
prefix long). Prints questions per second and the speed-ups; checks the three agree.

    .venv/bin/python benchmarks/bench_mcq_permutation.py [--quick] [--questions N]

Skips (exit 0, with the reason) when SmolLM2's wheel is not installed.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from icml24.evaluation.mcq_permutation import (
    LetterProbabilityScorer,
    apply_order,
    generate_questions,
    score_questions,
)
from icml24.language.pretrained import bundled_model_missing, load_pretrained


def one_at_a_time(scorer: LetterProbabilityScorer, qs) -> list[np.ndarray]:
    from icml24.evaluation.mcq_permutation import all_permutations

    out = []
    for q in qs:
        rows = [scorer.letter_probs(q.question, [apply_order(q, o)[0]])[0] for o in all_permutations(4)]
        out.append(np.array(rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 questions, 1 repeat")
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    n, repeats = (2, 1) if args.quick else (args.questions, args.repeats)
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch threads 1; {n} questions x 24 orders")
    reason = bundled_model_missing("smollm2-135m-instruct")
    if reason:
        print(f"skipped: {reason}")
        return
    model, tok = load_pretrained("smollm2-135m-instruct")
    qs = generate_questions(n, seed=123)
    for chat in (False, True):
        scorers = {"one prompt at a time": LetterProbabilityScorer(model, tok, chat=chat, share_prefix=False),
                   "batch of 24": LetterProbabilityScorer(model, tok, chat=chat, share_prefix=False),
                   "batch of 24, shared-prefix KV cache": LetterProbabilityScorer(model, tok, chat=chat)}  # fmt: skip
        best = {k: float("inf") for k in scorers}
        probs = {}
        for _ in range(repeats):
            for name, sc in scorers.items():
                start = time.perf_counter()
                if name == "one prompt at a time":
                    probs[name] = one_at_a_time(sc, qs)
                else:
                    probs[name] = [s.probs for s in score_questions(sc, qs)]
                best[name] = min(best[name], time.perf_counter() - start)
        ref = probs["one prompt at a time"]
        for name in scorers:
            err = max(float(np.abs(a - b).max()) for a, b in zip(probs[name], ref, strict=True))
            tokens = scorers[name].forward_tokens // repeats
            print(f"{'chat' if chat else 'raw '} {name:38s} {n / best[name]:.3f} questions/s "
                  f"({best[name] / n:.2f} s/question, {tokens // n} tokens/question, "
                  f"speed-up {best['one prompt at a time'] / best[name]:.2f}x, max |dp| {err:.1e})")  # fmt: skip


if __name__ == "__main__":
    main()
