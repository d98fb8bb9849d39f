"""Libra's reproduction: the analyze rules on hand-made results (supporting, refuting, undecided), their
power at the run's seed count by simulation, and a tiny end-to-end run of the job function."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common import decide
from icml24.common.experiment import Job, JobResult
from icml24.multimodal.libra import reproduce as R


def _result(variant: str, seed: int, f1: float, *, text_change: float = 0.0, params: int = 1000) -> JobResult:
    job = Job(R.SLUG, "captioning", "icml24.multimodal.libra.reproduce:run_variant", {"variant": variant}, seed)
    metrics = {m: 0.5 for m in R.METRICS}
    metrics.update({"attribute_f1": f1, "trainable_parameters": params, "text_loss_base": 1.0,
                    "text_loss": 1.0 + text_change, "text_loss_change": text_change,
                    "lm_unchanged": text_change == 0.0})  # fmt: skip
    return JobResult(job, "ok", metrics)


def _results(libra, llava, no_bridge, ft_change, frozen_change=0.0):
    out = []
    for s, (a, b, c, d) in enumerate(zip(libra, llava, no_bridge, ft_change)):
        out += [_result("libra", s, a, text_change=frozen_change), _result("llava", s, b),
                _result("libra-no-bridge", s, c), _result("full-ft", s, 0.4, text_change=d, params=3000)]  # fmt: skip
    return out


def _by_id(analysis):
    return {c.id: c for c in analysis.checks}


def test_supported_when_libra_beats_both_and_finetuning_forgets():
    res = _results([0.50, 0.55, 0.52], [0.30, 0.33, 0.31], [0.40, 0.44, 0.41], [0.8, 0.9, 0.7])
    a = R.analyze(res, "quick")
    checks = _by_id(a)
    assert checks["libra-beats-llava"].verdict == "supported"
    assert checks["bridge-helps"].verdict == "supported"
    assert checks["full-finetuning-degrades-text"].verdict == "supported"
    assert checks["frozen-lm-text-unchanged"].verdict == "supported"
    assert a.verdict == "supported"
    assert set(a.decided_by) == {"libra-beats-llava", "bridge-helps"}
    # the two text-loss checks are reported only: they cannot fail by construction / are not the paper's claim
    assert not checks["frozen-lm-text-unchanged"].decisive and not checks["full-finetuning-degrades-text"].decisive


def test_not_supported_when_libra_is_on_par_with_llava():
    # Paired differences within +-0.005 of zero: the TOST shows "no better" (the refuting case).
    res = _results([0.300, 0.331, 0.312], [0.301, 0.330, 0.310], [0.20, 0.22, 0.21], [0.8, 0.9, 0.7])
    a = R.analyze(res, "quick")
    assert _by_id(a)["libra-beats-llava"].verdict == "not_supported"
    assert a.verdict == "not_supported"


def test_not_supported_when_libra_is_worse_and_inconclusive_when_noisy():
    worse = _results([0.20, 0.22, 0.21], [0.30, 0.33, 0.31], [0.10, 0.12, 0.11], [0.8, 0.9, 0.7])
    assert _by_id(R.analyze(worse, "quick"))["libra-beats-llava"].verdict == "not_supported"
    noisy = _results([0.40, 0.20, 0.36], [0.30, 0.33, 0.31], [0.10, 0.12, 0.11], [0.8, 0.9, 0.7])
    a = R.analyze(noisy, "quick")
    assert _by_id(a)["libra-beats-llava"].verdict == "inconclusive"
    assert a.verdict == "inconclusive"


def test_a_frozen_lm_whose_text_loss_moved_is_reported_not_decisive():
    res = _results([0.50, 0.55, 0.52], [0.30, 0.33, 0.31], [0.40, 0.44, 0.41], [0.8, 0.9, 0.7], frozen_change=0.01)
    a = R.analyze(res, "quick")
    assert _by_id(a)["frozen-lm-text-unchanged"].verdict == "not_supported"
    assert a.verdict == "supported"  # the caption claims decide


def test_finetuning_that_does_not_forget_is_reported_not_decisive():
    res = _results([0.50, 0.55, 0.52], [0.30, 0.33, 0.31], [0.40, 0.44, 0.41], [-0.2, -0.25, -0.22])
    a = R.analyze(res, "quick")
    assert _by_id(a)["full-finetuning-degrades-text"].verdict == "not_supported"
    assert a.verdict == "supported"


def test_analyze_copes_with_missing_variants():
    a = R.analyze([_result("libra", 0, 0.3), _result("libra", 1, 0.4)], "quick")
    assert {c.id for c in a.checks} == {"frozen-lm-text-unchanged"}
    assert R.analyze([], "quick").checks == []


@pytest.mark.parametrize("scale", ["quick", "full"])
def test_power_of_the_caption_rule_at_the_run_seed_count_matches_the_noncentral_t(scale):
    """Simulated paired F1 differences with a true gain of GAIN and a seed-to-seed sd of 0.03: the rule's rate
    of 'supported' (decide.power) equals the analytic power the checks report, within simulation error."""
    n = R.DEFAULT_SEEDS[scale]
    sd = 0.03

    def simulate(rng):
        return R.GAIN + sd * rng.standard_normal(n)

    def rule(diff):
        return decide.compare(diff, np.zeros(n), paired=True, alternative="greater",
                              equivalence_margin=R.EQUIVALENCE, alpha=R.ALPHA)  # fmt: skip

    sim = decide.power(rule, simulate, n_sims=600, seed=0)
    # The power the checks report: the noncentral-t formula at the observed sd of the differences.
    diffs = R.GAIN + np.linspace(-1, 1, n)
    diffs = R.GAIN + (diffs - diffs.mean()) / diffs.std(ddof=1) * sd  # exactly sd
    analytic = R._power(diffs, R.GAIN)
    assert sim.supported == pytest.approx(analytic, abs=0.06)
    # and with no effect the rule rarely says supported (its false-support rate is about alpha)
    null = decide.power(rule, lambda rng: sd * rng.standard_normal(n), n_sims=600, seed=1)
    assert null.supported <= 0.09


def test_jobs_cover_every_variant_and_seed():
    quick = R.build_jobs("quick", None)
    assert {j.config["variant"] for j in quick} == set(R.VARIANTS["quick"])
    assert len(quick) == len(R.VARIANTS["quick"]) * R.DEFAULT_SEEDS["quick"]
    full = R.build_jobs("full", None)
    per_variant = {v: sum(j.config["variant"] == v for j in full) for v in R.VARIANTS["full"]}
    assert all(per_variant[v] == (R.ABLATION_SEEDS if v in R.ABLATIONS else R.DEFAULT_SEEDS["full"]) for v in per_variant)


def test_tiny_run_of_every_variant():
    cfg = {**R.SETTINGS["smoke"], "scene": R.SCENE}
    for variant in R.VARIANTS["full"]:
        out = R.run_variant({**cfg, "variant": variant}, 0)
        assert set(R.METRICS) <= set(out)
        assert 0 <= out["attribute_f1"] <= 1
        if variant == "full-ft":
            assert not out["lm_unchanged"] and out["text_loss_change"] != 0
        else:
            assert out["lm_unchanged"] and out["text_loss_change"] == 0.0


def test_llava_projector_is_sized_to_libra_trainable_count():
    import copy

    import torch

    from icml24.language import TransformerConfig, TransformerLM
    from icml24.multimodal.libra import LibraConfig, LibraModel

    torch.manual_seed(0)
    lm = TransformerLM(TransformerConfig(vocab_size=30, d_model=32, n_layers=2, n_heads=2, max_seq_len=40))
    cfg = LibraConfig(codebook_size=8, feature_dim=12, max_vision_tokens=5)
    target = LibraModel(copy.deepcopy(lm), config=cfg).num_parameters(trainable_only=True)
    llava = R.build_model("llava", copy.deepcopy(lm), cfg, match_parameters=target)
    assert abs(llava.num_parameters(trainable_only=True) - target) <= 2 * 32 + 1
    ft = R.build_model("full-ft", copy.deepcopy(lm), cfg, match_parameters=target)
    assert ft.num_parameters(trainable_only=True) == llava.num_parameters(trainable_only=True) + lm.num_parameters()


@pytest.mark.parametrize("variant", ["llava", "full-ft"])
def test_llava_baseline_gets_libras_visual_embedding_initialisation(variant):
    """The parameter-matching probe runs on a forked RNG: seeded alike, the LLaVA-style model's visual input
    embedding is initialised exactly as Libra's (before the fix the probe consumed the draws first)."""
    import copy

    import torch

    from icml24.language import TransformerConfig, TransformerLM
    from icml24.multimodal.libra import LibraConfig, LibraModel

    torch.manual_seed(0)
    lm = TransformerLM(TransformerConfig(vocab_size=30, d_model=32, n_layers=2, n_heads=2, max_seq_len=40))
    cfg = LibraConfig(codebook_size=8, feature_dim=12, max_vision_tokens=5)
    torch.manual_seed(3)
    libra = LibraModel(copy.deepcopy(lm), config=cfg)
    target = libra.num_parameters(trainable_only=True)
    torch.manual_seed(3)
    llava = R.build_model(variant, copy.deepcopy(lm), cfg, match_parameters=target)
    a, b = libra.visual_tokens.state_dict(), llava.visual_tokens_embed.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    torch.manual_seed(4)
    other = R.build_model(variant, copy.deepcopy(lm), cfg, match_parameters=target)
    assert not all(torch.equal(a[k], v) for k, v in other.visual_tokens_embed.state_dict().items())
