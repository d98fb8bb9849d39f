"""Miniature reproduction of case-or-rule (Hu et al., ICML 2024).

Two experiments, both with the shared character transformer trained from scratch:

* ``lso``: leave-square-out. The grid ``0 <= a, b < 100`` minus a square hole of half-width ``l`` around
  (50, 50) is the training set; the hole is the test set. The control trains on a random split with the
  same number of held-out points. Claim (Section 3): accuracy collapses inside the hole, recovers towards
  its edge, and the random split is learned (near 100%); scratchpads do not remove the hole.
* ``rfft``: length generalisation (Section 5, RFFT-lite), from scratch. Train on additions with 1-3 digit
  operands in three formats (direct answer, scratchpad, rule-following trace), test on 1-5 digit operands.
  Claim: rule-following traces generalise in length far better than scratchpad and direct answers.
* ``lora_rfft``: the same with the paper's method, LoRA fine-tuning of a pretrained LM (SmolLM2-135M-Instruct
  from the bundled GGUF; the paper uses Llama-2-7B), the rule in the input for RFFT
  (:mod:`icml24.language.case_or_rule.lora_rfft`). Full scale only; skipped where the model is absent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from icml24.common import decide
from icml24.common.experiment import (
    Analysis,
    Figure,
    Job,
    JobResult,
    Reproduction,
    Table,
    figure_png,
    fmt_mean_std,
    group_results,
    mean_std,
    new_figure,
    seeds_for,
)
from icml24.language.case_or_rule.arithmetic_lm import (
    ArithmeticLM,
    ArithmeticLMConfig,
    target_text,
    with_overrides,
)
from icml24.language.corpora.arithmetic import TASKS, chebyshev_distance, random_split, square_holes

SLUG = "case-or-rule"
GRID = 100
CENTER = (50, 50)
DEFAULT_SEEDS = {"smoke": 1, "quick": 3, "full": 3}

MODEL = {
    "smoke": {"d_model": 32, "n_layers": 1, "n_heads": 2, "steps": 30, "batch_size": 32},
    "quick": {"d_model": 64, "n_layers": 2, "n_heads": 4, "steps": 1200, "batch_size": 96, "lr": 2e-3},
    "full": {"d_model": 64, "n_layers": 2, "n_heads": 4, "steps": 1500, "batch_size": 96, "lr": 2e-3},
}
LSO = {
    # arms: [task, format, splits, seeds (None: the scale's seeds; a number: the first that many),
    #        optional overrides of the scale's MODEL settings]
    "smoke": {"half_width": 3, "arms": [["addition", "direct", ["hole", "random"], None]]},
    "quick": {"half_width": 8, "arms": [["addition", "direct", ["hole", "random"], None]]},
    "full": {
        "half_width": 8,
        "arms": [
            # Full-scale cuts (the 15-minute budget at --workers 1; a first full run measured 47-63 s per
            # 1500-step direct-answer job at load ~6): 2 seeds for the direct-answer hole (quick runs 3 at
            # 1200 steps; full's point is the longer training), and one seed for the random-split control
            # (reported only), for scratchpad (1000 steps; a 1500-step pilot fit it perfectly, 300/300) and
            # for modular addition, on the hole split only for the latter two: their checks compare each
            # model with its own training problems, which needs no control. Chicken-rabbit is left out: at
            # this budget the model does not fit its training set (pilot: 0.13 training accuracy, 74 s), so it
            # would test nothing; base-9 addition and a + 2b + 3 too (the budget).
            ["addition", "direct", ["hole"], 2],
            ["addition", "direct", ["random"], 1],
            ["addition", "scratchpad", ["hole"], 1, {"steps": 1000}],
            ["mod_addition", "direct", ["hole"], 1],
        ],
    },
}
RFFT = {
    "smoke": {"train_digits": 2, "test_digits": 3, "n_train": 200, "n_test": 8, "steps": 20, "seeds": 1},
    # Full: one seed and 400 steps of 48 (pilot at 1500 x 96: 757 s for the RFFT format alone, which then
    # scored 1.00 on 1-3 digits and 0.00 on 4-5 digits, as did direct answers and scratchpad).
    "full": {"train_digits": 3, "test_digits": 5, "n_train": 20000, "n_test": 100, "steps": 400, "batch_size": 48,
             "seeds": 1},
}  # fmt: skip
LORA_RFFT = {
    # Section 5 shrunk: train on 1-3 digit operands (200 rows seen: 100 steps of 2; the official batch is 1),
    # test on 3 (in distribution), 4 and 5 digits. Pilot (40 steps of 4, lr 2e-3, load ~6): 3.1 s a step for
    # RFFT, 1.4 for scratchpad, 0.5 for direct; RFFT had learned the trace's format, not its arithmetic.
    "full": {"train_digits": 3, "test_digits": [3, 4, 5], "n_train": 3000, "n_test": 20, "steps": 100,
             "batch_size": 2, "lr": 2e-3, "seeds": 1},
}  # fmt: skip
FORMAT_NAMES = {"direct": "direct answer", "scratchpad": "scratchpad", "rfft": "rule-following trace (RFFT)"}
GAP_MARGIN = 0.05
"""A hole-vs-training gap within +-5 points is evidence of no hole (the paper reports near 0 vs near 100%)."""
SPLIT_NAMES = {"hole": "leave-square-out hole", "random": "random split (control)"}
RING_WIDTH = 4
"""The difficulty-matched control of the hole gap: the training problems in a ring of this width just outside
the hole (Chebyshev distance 9-12 from (50, 50) for half-width 8: 336 problems, operands 38-62, sums 76-124,
against the hole's operands 42-58 and sums 84-116). A random training sample (operands 0-99, sums 0-198)
is of other difficulty, so its gap to the hole mixes difficulty with distance to the training cases."""


# ---------------------------------------------------------------------------------------------- jobs
def _grid() -> np.ndarray:
    return np.stack(np.meshgrid(np.arange(GRID), np.arange(GRID), indexing="ij"), -1).reshape(-1, 2)


def run_lso(config: dict, seed: int) -> dict:
    """Train on the grid minus the test set (a square hole, or a random set of the same size)."""
    l = int(config["half_width"])
    hole = square_holes(GRID, ((CENTER[0], CENTER[1], l),)).reshape(-1)
    test = hole if config["split"] == "hole" else random_split(GRID, int(hole.sum()), 1000 + seed).reshape(-1)
    grid = _grid()
    lm_config = with_overrides(ArithmeticLMConfig(), task=config["task"], fmt=config["fmt"], **config["model"])
    lm = ArithmeticLM(lm_config).fit(grid[~test], seed=seed)
    correct = lm.correct(grid[test])
    train_sample = grid[~test][np.random.default_rng(seed).choice(int((~test).sum()), 300, replace=False)]
    train_correct = lm.correct(train_sample)
    dist = chebyshev_distance(GRID, CENTER).reshape(-1)
    ring_train = (~test) & (dist > l) & (dist <= l + RING_WIDTH)
    ring_correct = lm.correct(grid[ring_train])
    out = {
        "ring_train_correct": int(ring_correct.sum()),
        "ring_train_n": int(ring_correct.size),
        "test_accuracy": float(correct.mean()),
        "test_correct": int(correct.sum()),
        "test_n": int(correct.size),
        "train_accuracy": float(train_correct.mean()),
        "train_correct": int(train_correct.sum()),
        "train_n": int(train_correct.size),
        "final_loss": lm.history_[-1]["loss"],
        "train_seconds": lm.history_[-1]["seconds"],
    }
    if config["split"] == "hole":
        ring = chebyshev_distance(GRID, CENTER).reshape(-1)[test]
        out["ring_accuracy"] = [float(correct[ring == r].mean()) for r in range(l + 1)]
        out["ring_correct"] = [int(correct[ring == r].sum()) for r in range(l + 1)]
        out["ring_n"] = [int((ring == r).sum()) for r in range(l + 1)]
        out["hole_map"] = correct.reshape(2 * l + 1, 2 * l + 1).astype(int).tolist()
    return out


def _pairs_with_digits(rng: np.random.Generator, digits: int, n: int) -> np.ndarray:
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.integers(lo, 10**digits, size=(n, 2))


def run_rfft(config: dict, seed: int) -> dict:
    """Train on 1..train_digits-digit additions in one format; accuracy per operand length 1..test_digits."""
    rng = np.random.default_rng(seed)
    k = int(config["train_digits"])
    per = config["n_train"] // k
    train = np.concatenate([_pairs_with_digits(rng, d, per) for d in range(1, k + 1)])
    model = dict(config["model"], steps=config["steps"], batch_size=config.get("batch_size", config["model"]["batch_size"]))
    lm_config = with_overrides(ArithmeticLMConfig(), task="addition", fmt=config["fmt"], positions="rope", **model)
    test_rng = np.random.default_rng(10_000 + seed)
    tests = {d: _pairs_with_digits(test_rng, d, config["n_test"]) for d in range(1, config["test_digits"] + 1)}
    # Room for the longest test trace: the model's position table must cover it.
    longest = max(len(TASKS["addition"].question(int(a), int(b))) + len(target_text("addition", int(a), int(b), config["fmt"]))
                  for p in tests.values() for a, b in p[:3])  # fmt: skip
    lm = ArithmeticLM(lm_config).fit(train, seed=seed, max_seq_len=longest + 64)
    out: dict = {"final_loss": lm.history_[-1]["loss"], "train_seconds": lm.history_[-1]["seconds"]}
    correct = [lm.correct(tests[d]) for d in sorted(tests)]
    out["digits"] = sorted(tests)
    out["accuracy_by_digits"] = [float(c.mean()) for c in correct]
    out["correct_by_digits"] = [int(c.sum()) for c in correct]
    out["n_by_digits"] = [int(c.size) for c in correct]
    return out


def run_lora_rfft(config: dict, seed: int) -> dict:
    """LoRA-fine-tune SmolLM2-135M-Instruct on 1..train_digits-digit additions in one format; exact match per
    test operand length (Section 5's setup, shrunk)."""
    import time

    from icml24.language.case_or_rule.lora_rfft import LoRAArithmeticConfig, train_and_score
    from icml24.language.pretrained import load_pretrained

    rng = np.random.default_rng(seed)
    k = int(config["train_digits"])
    per = config["n_train"] // k
    train = np.concatenate([_pairs_with_digits(rng, d, per) for d in range(1, k + 1)])
    test_rng = np.random.default_rng(20_000 + seed)
    tests = {int(d): _pairs_with_digits(test_rng, int(d), config["n_test"]) for d in config["test_digits"]}
    t0 = time.perf_counter()
    model, tokenizer = load_pretrained("smollm2-135m-instruct")
    load_s = time.perf_counter() - t0
    cfg = LoRAArithmeticConfig(fmt=config["fmt"], steps=int(config["steps"]), batch_size=int(config["batch_size"]),
                               lr=float(config["lr"]))  # fmt: skip
    return {**train_and_score(cfg, train, tests, seed=seed, model=model, tokenizer=tokenizer), "load_seconds": load_s}


def _lora_missing() -> str | None:
    """Why the LoRA arm cannot run here (its jobs are then not built), or None."""
    import importlib.util

    from icml24.language.pretrained import bundled_model_missing

    if importlib.util.find_spec("peft") is None:
        return "peft is not installed (the 'language' extra)"
    return bundled_model_missing("smollm2-135m-instruct")


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    jobs: list[Job] = []
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    lso = LSO[scale]
    for task, fmt, splits, n_seeds, *override in lso["arms"]:
        arm_seeds = seed_list if n_seeds is None or seeds is not None else seed_list[:n_seeds]
        model = {**MODEL[scale], **(override[0] if override else {})}
        for split in splits:
            cfg = {"task": task, "fmt": fmt, "split": split, "half_width": lso["half_width"], "model": model}
            jobs += [Job(SLUG, "lso", f"{__name__}:run_lso", cfg, s) for s in arm_seeds]
    if scale in RFFT:
        r = RFFT[scale]
        model = {k: v for k, v in MODEL[scale].items() if k != "steps"}
        n_seeds = r["seeds"] if seeds is None else seeds
        for fmt in ("direct", "scratchpad", "rfft"):
            cfg = {"fmt": fmt, "model": model, **{k: v for k, v in r.items() if k != "seeds"}}
            jobs += [Job(SLUG, "rfft", f"{__name__}:run_rfft", cfg, s) for s in range(n_seeds)]
    if scale in LORA_RFFT and _lora_missing() is None:
        r = LORA_RFFT[scale]
        n_seeds = r["seeds"] if seeds is None else seeds
        for fmt in ("rfft", "scratchpad", "direct"):  # the longest first
            cfg = {"fmt": fmt, "model": "smollm2-135m-instruct", **{k: v for k, v in r.items() if k != "seeds"}}
            jobs += [Job(SLUG, "lora_rfft", f"{__name__}:run_lora_rfft", cfg, s) for s in range(n_seeds)]
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _lso_checks(results: Sequence[JobResult]) -> tuple[list, list[Table], dict]:
    groups = group_results(results, "lso", by=("task", "fmt", "split"))
    checks, rows, rings = [], [], {}
    for task, fmt in sorted({(k[0], k[1]) for k in groups}):
        hole, rnd = groups.get((task, fmt, "hole"), []), groups.get((task, fmt, "random"), [])
        for split, rs in (("hole", hole), ("random", rnd)):
            if rs:
                rows.append([task, FORMAT_NAMES[fmt], SPLIT_NAMES[split],
                             fmt_mean_std([r.metrics["test_accuracy"] for r in rs]),
                             fmt_mean_std([r.metrics["train_accuracy"] for r in rs])])  # fmt: skip
        if not hole:
            continue
        k_h, n_h = sum(r.metrics["test_correct"] for r in hole), sum(r.metrics["test_n"] for r in hole)
        main = task == "addition" and fmt == "direct"
        # The case-based signature is a generalisation gap: the hole model solves its own training problems
        # but not the hole. Comparing with its training accuracy (not only with the random split) keeps an
        # under-trained model, which fails everywhere, from passing as "case-based".
        kt_h, nt_h = sum(r.metrics["train_correct"] for r in hole), sum(r.metrics["train_n"] for r in hole)
        decisive = main or (task == "addition" and fmt == "scratchpad")
        claim = (f"{task}, {FORMAT_NAMES[fmt]}: a model trained around the left-out square solves its training "
                 "problems but fails inside the square")  # fmt: skip
        # Decisive: the hole against the training problems of the same difficulty, the ring just outside it.
        if all("ring_train_correct" in r.metrics for r in hole):
            kr_h, nr_h = sum(r.metrics["ring_train_correct"] for r in hole), sum(r.metrics["ring_train_n"] for r in hole)
            gap = decide.compare_rates(kr_h, nr_h, k_h, n_h, alternative="greater", equivalence_margin=GAP_MARGIN,
                                       effect_name="hole model: accuracy on the training ring around the hole - "
                                                   "accuracy inside the hole")  # fmt: skip
            checks.append(gap.to_check(
                id=f"hole-gap-{task}-{fmt}", claim=claim, decisive=decisive,
                evidence=f"training ring around the hole (width {RING_WIDTH}, same operand and sum range) {kr_h}/{nr_h}, "
                         f"hole {k_h}/{n_h}, pooled over {len(hole)} seeds",
            ))  # fmt: skip
        else:
            checks.append(decide.not_run_check(f"hole-gap-{task}-{fmt}", claim, "these rows predate the "
                                               "difficulty-matched ring control: rerun the lso jobs",
                                               decisive=decisive))  # fmt: skip
        sample = decide.compare_rates(kt_h, nt_h, k_h, n_h, alternative="greater", equivalence_margin=GAP_MARGIN,
                                      effect_name="hole model: accuracy on a random training sample - accuracy "
                                                  "inside the hole")  # fmt: skip
        checks.append(sample.to_check(
            id=f"hole-gap-{task}-{fmt}-vs-train-sample",
            claim=f"{claim} (reported: against a random training sample, which is of other difficulty)",
            evidence=f"training sample {kt_h}/{nt_h}, hole {k_h}/{n_h}, pooled over {len(hole)} seeds",
            decisive=False,
        ))  # fmt: skip
        if main:
            _ring_check(hole, checks)
            rings[(task, fmt)] = hole
        if not rnd:
            continue
        k_r, n_r = sum(r.metrics["test_correct"] for r in rnd), sum(r.metrics["test_n"] for r in rnd)
        kt_r, nt_r = sum(r.metrics["train_correct"] for r in rnd), sum(r.metrics["train_n"] for r in rnd)
        control = decide.compare_rates(kt_r, nt_r, k_r, n_r, alternative="greater",
                                       effect_name="random-split model: training - held-out accuracy")  # fmt: skip
        checks.append(control.to_check(
            id=f"random-gap-{task}-{fmt}",
            claim=f"{task}, {FORMAT_NAMES[fmt]} (control): the random-split model's held-out accuracy matches its "
                  "training accuracy (a supported verdict here would mean it does not generalise either)",
            evidence=f"training sample {kt_r}/{nt_r}, held out {k_r}/{n_r}",
            decisive=False,
        ))  # fmt: skip
        d = decide.compare_rates(k_r, n_r, k_h, n_h, alternative="greater",
                                 effect_name="accuracy on random held-out points - accuracy inside the hole")  # fmt: skip
        checks.append(d.to_check(
            id=f"hole-vs-random-{task}-{fmt}",
            claim=f"{task}, {FORMAT_NAMES[fmt]}: accuracy inside the left-out square is lower than on a random "
                  "split of the same size (reported: confounded by how well each model fit its training set)",
            evidence=f"hole {k_h}/{n_h}, random {k_r}/{n_r} test items pooled over {len(hole)} seeds",
            decisive=False,
        ))  # fmt: skip
        if main:
            acc = [r.metrics["test_accuracy"] for r in rnd]
            c = decide.rate_vs_value(k_r, n_r, 0.9, effect_name="random-split test accuracy")
            checks.append(c.to_check(
                id="random-split-learned",
                claim="control: the random split is learned (test accuracy above 0.9; the paper reports near 100%)",
                evidence="per seed " + ", ".join(f"{a:.3f}" for a in acc),
                decisive=False,
            ))  # fmt: skip
    table = Table("Leave-square-out: exact-match accuracy (mean ± std over seeds)",
                  ["task", "format", "test set", "test accuracy", "train accuracy (300 sampled)"], rows)  # fmt: skip
    return checks, [table] if rows else [], rings


def _ring_check(hole: Sequence[JobResult], checks: list) -> None:
    ring_x, ring_y = [], []
    for r in hole:
        for dist, acc in enumerate(r.metrics["ring_accuracy"]):
            ring_x.append(dist)
            ring_y.append(acc)
    t = decide.trend(ring_x, ring_y, claim="increasing", method="spearman",
                     effect_name="Spearman rho of ring accuracy in Chebyshev distance to the centre")  # fmt: skip
    checks.append(t.to_check(
        id="hole-recovers-towards-edge",
        claim="addition, direct answer: inside the hole, accuracy rises from the centre towards the edge",
        evidence=f"{len(ring_x)} (ring, seed) points",
    ))  # fmt: skip


ARM_NAMES = {"rfft": "from scratch", "lora_rfft": "SmolLM2-135M + LoRA"}


def _rfft_checks(results: Sequence[JobResult], experiment: str) -> tuple[list, list[Table], dict]:
    """RFFT vs scratchpad (decisive) and vs direct answers (reported) on operands longer than any trained on,
    for one arm: ``rfft`` (from scratch) or ``lora_rfft`` (pretrained + LoRA)."""
    groups = group_results(results, experiment, by=("fmt",))
    if not groups:
        return [], [], {}
    arm = ARM_NAMES[experiment]
    any_r = next(iter(groups.values()))[0]
    k_train = int(any_r.job.config["train_digits"])
    digits = [int(d) for d in any_r.metrics["digits"]]
    rows = []
    for (fmt,), rs in groups.items():
        accs = np.array([r.metrics["accuracy_by_digits"] for r in rs])
        k = np.sum([r.metrics["correct_by_digits"] for r in rs], axis=0)
        n = np.sum([r.metrics["n_by_digits"] for r in rs], axis=0)
        cells = [f"{fmt_mean_std(accs[:, i])} ({k[i]}/{n[i]})" if len(rs) > 1 else f"{accs[0, i]:.3f} ({k[i]}/{n[i]})"
                 for i in range(len(digits))]  # fmt: skip
        rows.append([FORMAT_NAMES[fmt], str(len(rs))] + cells)
    spread = "mean ± std over seeds where more than one; correct/total pooled" if any(len(v) > 1 for v in groups.values()) \
        else "one seed; correct/total test items"  # fmt: skip
    table = Table(f"Length generalisation, {arm}: trained on 1-{k_train} digit operands, exact-match accuracy ({spread})",
                  ["format", "seeds"] + [f"{d} digits" for d in digits], rows)  # fmt: skip

    def pooled(fmt: str, longer: bool) -> tuple[int, int]:
        k = n = 0
        for r in groups.get((fmt,), []):
            for d, c, m in zip(r.metrics["digits"], r.metrics["correct_by_digits"], r.metrics["n_by_digits"]):
                if (int(d) > k_train) == longer:
                    k, n = k + int(c), n + int(m)
        return k, n

    longer = [d for d in digits if d > k_train]
    span = f"{min(longer)}-{max(longer)}" if longer else "none"
    checks = []
    learned = {}
    for (fmt,), _ in groups.items():
        k_in, n_in = pooled(fmt, False)
        learned[fmt] = bool(n_in) and decide.rate_vs_value(k_in, n_in, 0.5).verdict == "supported"
    k_rule, n_rule = pooled("rfft", True)
    for base in ("scratchpad", "direct"):
        k_b, n_b = pooled(base, True)
        if n_rule and n_b:
            d = decide.compare_rates(k_rule, n_rule, k_b, n_b, alternative="greater",
                                     effect_name=f"RFFT - {FORMAT_NAMES[base]} accuracy on longer operands ({arm})")  # fmt: skip
            # Decisive only when both formats learned the lengths they were trained on: a model that has not
            # cannot show length generalisation either way, and then no verdict of the paper can be supported.
            both = learned.get("rfft", False) and learned.get(base, False)
            why = "" if both else ("; not decisive: at this budget " + " and ".join(
                FORMAT_NAMES[f] for f in ("rfft", base) if not learned.get(f, False))
                + " did not learn the trained lengths (harness check below), so the budget cannot test length "
                "generalisation")  # fmt: skip
            checks.append(d.to_check(
                id=f"rfft-beats-{base}" + ("-lora" if experiment == "lora_rfft" else ""),
                claim=f"{arm}: rule-following traces generalise to {span} digit operands better than "
                      f"{FORMAT_NAMES[base]}",
                evidence=f"RFFT {k_rule}/{n_rule}, {FORMAT_NAMES[base]} {k_b}/{n_b} items with {span} digit operands"
                         + why,
                decisive=base == "scratchpad" and both,
            ))  # fmt: skip
    for (fmt,), _ in groups.items():
        k_in, n_in = pooled(fmt, False)
        if n_in:
            lo, hi = decide.wilson_interval(k_in, n_in, 0.90)
            checks.append(decide.rate_vs_value(k_in, n_in, 0.5, effect_name="accuracy on trained lengths").to_check(
                id=f"in-distribution-{fmt}" + ("-lora" if experiment == "lora_rfft" else ""),
                claim=f"{arm}, {FORMAT_NAMES[fmt]} (harness check): the model learned the lengths it was trained on "
                      "(accuracy above 0.5); if not, its length generalisation says little",
                evidence=f"{k_in}/{n_in} = {k_in / n_in:.3f}, 90% Wilson interval [{lo:.3f}, {hi:.3f}]",
                decisive=False,
            ))  # fmt: skip
    return checks, [table], groups


def _length_figure(groups: dict, experiment: str) -> Figure:
    fig, ax = new_figure()
    k_train = int(next(iter(groups.values()))[0].job.config["train_digits"])
    for (fmt,), rs in groups.items():
        x = np.array(rs[0].metrics["digits"], dtype=float)
        k = np.sum([r.metrics["correct_by_digits"] for r in rs], axis=0)
        n = np.sum([r.metrics["n_by_digits"] for r in rs], axis=0)
        rate = k / n
        ci = np.array([decide.wilson_interval(int(a), int(b), 0.90) for a, b in zip(k, n)])
        ax[0, 0].errorbar(x, rate, yerr=[rate - ci[:, 0], ci[:, 1] - rate], marker="o", capsize=3,
                          label=FORMAT_NAMES[fmt])  # fmt: skip
    ax[0, 0].axvline(k_train + 0.5, color="grey", ls=":", label="longest training length")
    ax[0, 0].set(xlabel="operand length (digits)", ylabel="exact-match accuracy", ylim=(-0.02, 1.02),
                 title=f"Length generalisation, {ARM_NAMES[experiment]}")  # fmt: skip
    ax[0, 0].set_xticks(sorted({int(d) for rs in groups.values() for d in rs[0].metrics["digits"]}))
    ax[0, 0].legend(fontsize=8)
    return _figure(f"Length generalisation by format ({ARM_NAMES[experiment]})", fig,
                   "Exact-match accuracy by operand length; error bars: 90% Wilson intervals of the test items "
                   "pooled over seeds.")  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    results = [r for r in results if r.status == "ok"]
    lso_checks, lso_tables, rings = _lso_checks(results)
    rfft_checks, rfft_tables, rfft_groups = _rfft_checks(results, "rfft")
    lora_checks, lora_tables, lora_groups = _rfft_checks(results, "lora_rfft")
    checks = lso_checks + rfft_checks + lora_checks
    figures = []
    if rings:
        hole = rings[("addition", "direct")]
        acc = np.array([r.metrics["ring_accuracy"] for r in hole])
        fig, ax = new_figure(1, 2, width=5.0)
        dist = np.arange(acc.shape[1])
        ax[0, 0].errorbar(dist, acc.mean(0), yerr=acc.std(0, ddof=1) if len(acc) > 1 else None, marker="o",
                          capsize=3, label="inside the hole")  # fmt: skip
        rnd = [r for r in results if r.job.experiment == "lso" and r.job.config["split"] == "random"
               and r.job.config["task"] == "addition" and r.job.config["fmt"] == "direct"]  # fmt: skip
        if rnd:
            m, s, _ = mean_std([r.metrics["test_accuracy"] for r in rnd])
            ax[0, 0].axhline(m, color="grey", ls="--", label=f"random split {m:.2f} ± {s:.2f}")
        ax[0, 0].set(xlabel="Chebyshev distance to the hole centre (grid units)", ylabel="exact-match accuracy",
                     ylim=(-0.02, 1.02), title="Addition: accuracy by ring (mean ± std over seeds)")  # fmt: skip
        ax[0, 0].legend(fontsize=8)
        im = ax[0, 1].imshow(np.array(hole[0].metrics["hole_map"]), cmap="RdYlGn", vmin=0, vmax=1,
                             extent=(CENTER[1] - acc.shape[1] + 0.5, CENTER[1] + acc.shape[1] - 0.5,
                                     CENTER[0] + acc.shape[1] - 0.5, CENTER[0] - acc.shape[1] + 0.5))  # fmt: skip
        ax[0, 1].set(xlabel="b", ylabel="a", title=f"Correct (green) inside the hole, seed {hole[0].job.seed}")
        fig.colorbar(im, ax=ax[0, 1], label="correct (1) / wrong (0)")
        figures.append(_figure("Leave-square-out accuracy map", fig, "Left: accuracy per ring of the hole; "
                               "right: which test problems seed 0 solves."))  # fmt: skip
    for experiment, groups in (("rfft", rfft_groups), ("lora_rfft", lora_groups)):
        if groups:
            figures.append(_length_figure(groups, experiment))
    summary_parts = [f"Scale {scale}."]
    for c in checks:
        summary_parts.append(f"{c.claim.split(':')[0]}: {c.verdict.replace('_', ' ')} ({c.evidence}).")
    return decide.analysis(checks, summary=" ".join(summary_parts), rule="all",
                           tables=lso_tables + rfft_tables + lora_tables, figures=figures)  # fmt: skip


def _figure(title: str, fig, caption: str) -> Figure:
    return Figure(title, figure_png(fig), caption)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Transformers trained on arithmetic fail inside a left-out square of the input grid (accuracy collapses "
        "in the middle and recovers towards the edge) while a random split is learned, with or without "
        "scratchpad; rule-following fine-tuning (RFFT) generalises in length better than scratchpad, from scratch "
        "and with LoRA on a pretrained LM."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "LSO and RFFT-lite models are trained from scratch (a 2-layer, d=64, ~0.1 M-parameter character transformer "
        "with RoPE, 1200-1500 AdamW steps), not fine-tuned GPT-2 (learned positions) / Llama-2-7B.",
        "The LoRA arm fine-tunes SmolLM2-135M-Instruct (dequantised from the bundled Q4_1 GGUF), not Llama-2-7B: "
        "official adapter shape (r=8, alpha=16, dropout 0.05, q_proj and v_proj) but lr 2e-3 instead of 2e-5 and "
        "a few hundred training problems (steps x batch) instead of one epoch of the training grid, on 1-3 instead "
        "of 1-5 digit operands, tested on 3-5 instead of up to 12+ digits; plain text prompts, no chat template.",
        "LoRA arm: the rule text in the RFFT input is encoded once by the frozen pretrained model and shared as a "
        "key/value prefix (the adapters act on the question and the trace), which halves RFFT's cost on a CPU.",
        "Answer-only loss (the official GPT-2 train.py trains on the whole sequence; ArithmeticLMConfig."
        "answer_only_loss=False restores it; the official LoRA runs mask the user turn, as here); no model "
        "selection on the test set: the last step is evaluated.",
        "Chicken-rabbit questions are shortened to 'L legs,H heads=' and answered 'rabbits,chickens'; the grid is "
        "(rabbits, chickens) in [0, 100)^2; left out of the full run (the model does not fit it at this budget).",
        "Scratchpad and rule-following traces exist for addition only (the official repository also has scratchpads "
        "for modular and base-9 addition).",
        "The rule-following trace is shortened to a line reciting the operands as digit lists and one line of "
        "variable values per loop iteration (the official trace quotes every code line and the loop checks); "
        "the from-scratch arm gets no rule text in its input (a constant prefix tells a model trained from "
        "scratch nothing), the LoRA arm does.",
        "LSO holes: one square of half-width 8 around (50, 50) (the official one-hole split); no multi-hole splits.",
        "Full scale is cut to fit 15 minutes on one core: 2 seeds for the direct-answer hole; one seed for the "
        "random-split control, the scratchpad hole (1000 steps), modular addition (hole split only), the "
        "from-scratch RFFT arm (400 steps of 48) and the LoRA arm; base-9 addition, a + 2b + 3 and chicken-rabbit "
        "are not run at full.",
        "Test items are the unit of the rate comparisons (pooled over seeds); seeds are shown as spread.",
    ),
    scales=("smoke", "quick", "full"),
)
