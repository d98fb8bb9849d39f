"""Benchmark: scoring all 24 option orders of a question with SmolLM2 (``icml24.evaluation.mcq_permutation``).

Four ways to get the letter probabilities of the 24 orders, interleaved (every repeat runs each arm once, in
turn), one torch thread, on the same generated questions:

* one prompt at a time with the logits at every position, as the official loop does (``model(ids).logits[0,
  -1]``);
* one padded batch of 24;
* one batch of 24 whose common token prefix is run once and its KV cache shared, with the logits at every
  position (the scorer before ``logits_to_keep``);
* the same with the output layer at the read positions only (``logits_to_keep``: the default of
  ``LetterProbabilityScorer``).

Raw MMLU prompt and the chat template (whose system prompt makes the shared prefix long). Prints seconds per
question (best of the repeats), the speed-ups, each repeat's ratio of the last two arms (the spread), and checks
that all arms agree.

    .venv/bin/python benchmarks/bench_mcq_permutation.py [--quick] [--questions N] [--repeats R]

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


class FullLogitsScorer(LetterProbabilityScorer):
    """The scorer with the output layer at every position (what it did before ``logits_to_keep``)."""

    def _logits_to_keep_kwarg(self) -> str | None:
        return None


def one_at_a_time(scorer: LetterProbabilityScorer, qs) -> list[np.ndarray]:
    from icml24.evaluation.mcq_permutation import all_permutations

    out = []
    for q in qs:
        rows = [scorer.letter_probs(q.question, [apply_order(q, o)[0]])[0] for o in all_permutations(4)]
        out.append(np.array(rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 question, 1 repeat, raw prompt only")
    ap.add_argument("--questions", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n, repeats = (1, 1) if args.quick else (args.questions, args.repeats)
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch threads 1; {n} questions x 24 orders")
    reason = bundled_model_missing("smollm2-135m-instruct")
    if reason:
        print(f"skipped: {reason}")
        return
    model, tok = load_pretrained("smollm2-135m-instruct")
    qs = generate_questions(n, seed=123)
    for chat in (False,) if args.quick else (False, True):
        scorers = {"one prompt at a time, all logits": FullLogitsScorer(model, tok, chat=chat, share_prefix=False),
                   "batch of 24": LetterProbabilityScorer(model, tok, chat=chat, share_prefix=False),
                   "shared-prefix batch, all logits": FullLogitsScorer(model, tok, chat=chat),
                   "shared-prefix batch, last logits": LetterProbabilityScorer(model, tok, chat=chat)}  # fmt: skip
        times: dict[str, list[float]] = {k: [] for k in scorers}
        probs = {}
        for _ in range(repeats):
            for name, sc in scorers.items():
                start = time.perf_counter()
                if name.startswith("one prompt"):
                    probs[name] = one_at_a_time(sc, qs)
                else:
                    probs[name] = [s.probs for s in score_questions(sc, qs)]
                times[name].append(time.perf_counter() - start)
        best = {k: min(v) for k, v in times.items()}
        ref_name = "one prompt at a time, all logits"
        ref = probs[ref_name]
        for name in scorers:
            err = max(float(np.abs(a - b).max()) for a, b in zip(probs[name], ref, strict=True))
            tokens = scorers[name].forward_tokens // repeats
            print(f"{'chat' if chat else 'raw '} {name:34s} {best[name] / n:.2f} s/question "
                  f"({tokens // n} tokens/question, speed-up {best[ref_name] / best[name]:.2f}x, max |dp| {err:.1e})")  # fmt: skip
        ratios = [a / b for a, b in zip(times["shared-prefix batch, all logits"],
                                        times["shared-prefix batch, last logits"], strict=True)]  # fmt: skip
        print(f"{'chat' if chat else 'raw '} logits_to_keep gain per repeat (all logits / last logits): "
              + ", ".join(f"{r:.2f}x" for r in ratios))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
