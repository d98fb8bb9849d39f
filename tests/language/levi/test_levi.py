"""levi: the data generator's guarantees, LEVI's invariants, the baselines' interpolation, and the verdict rule."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
import torch

from icml24.common import decide
from icml24.common.experiment import Job, JobResult
from icml24.language.levi import (
    LEVI,
    DigitCNN,
    SmallMLP,
    TrainConfig,
    accuracy,
    hashed_bag_of_words,
    interpolate_weights,
    make_digit_task,
    make_review_task,
    pooled_layer_features,
    predict_logits,
    train_classifier,
)
from icml24.language.levi import data as D
from icml24.language.levi import reproduce as R
from icml24.language.pretrained import bundled_model_missing

MINILM_MISSING = bundled_model_missing("all-minilm-l6-v2")
needs_minilm = pytest.mark.skipif(MINILM_MISSING is not None, reason=MINILM_MISSING or "")
needs_peft = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft (the 'language' extra) is not installed")


# ---------------------------------------------------------------------------------------------- data
@pytest.mark.parametrize("rho", [0.95, 0.8, 0.5])
def test_shortcut_agreement_is_exactly_rho_in_training_and_flips_ood(rho):
    task = make_review_task(400, 100, 200, rho=rho, jargon_fraction=0.5, seed=3)
    for split in (task.train, task.val, task.test_id):
        for y in (0, 1):  # exact within each class: the brand carries no marginal label information
            n = int((split.labels == y).sum())
            assert split.brand_agrees[split.labels == y].sum() == round(rho * n)  # exactly, not on average
    for y in (0, 1):
        n = int((task.test_ood.labels == y).sum())
        assert task.test_ood.brand_agrees[task.test_ood.labels == y].sum() == round((1 - rho) * n)
    for split in (task.train, task.test_ood):
        assert split.jargon_only.mean() == pytest.approx(0.5, abs=1 / 100)
        assert split.labels.mean() == pytest.approx(0.5, abs=1 / 100)


def _words(text):
    return set(re.findall(r"[a-z]+", text.lower()))


def test_cues_are_where_the_generator_says():
    task = make_review_task(300, 50, 300, seed=1)
    train_vocab = set().union(*(_words(t) for t in task.train.texts))
    ood_words = {w for ws in D.SENTIMENT_WORDS["ood"].values() for w in ws}
    assert not (train_vocab & ood_words), "OOD sentiment words leak into training"
    for split in (task.train, task.test_ood):
        for text, y, jargon, agrees in zip(split.texts, split.labels, split.jargon_only, split.brand_agrees):
            words = _words(text)
            own_jargon = words & set(D.JARGON[int(y)])
            assert not (words & set(D.JARGON[1 - int(y)]))
            assert bool(own_jargon) == bool(jargon)
            brand_group = 1 if any(b in text for b in D.BRANDS[1]) else 0
            assert (brand_group == y) == bool(agrees)
    ood_templates = {t.split("{")[0] for ts in D.TEMPLATES["ood"].values() for t in ts if not t.startswith("{")}
    assert not any(t.strip() and any(x.startswith(t) for x in task.train.texts) for t in ood_templates if len(t) > 8)


def test_generators_are_seeded():
    a, b = make_review_task(50, 10, 10, seed=4), make_review_task(50, 10, 10, seed=4)
    assert a.train.texts == b.train.texts and a.test_ood.texts == b.test_ood.texts
    assert make_review_task(50, 10, 10, seed=5).train.texts != a.train.texts
    d1, d2 = make_digit_task(seed=2), make_digit_task(seed=2)
    assert np.array_equal(d1.train_x, d2.train_x) and np.array_equal(d1.test_ood_y, d2.test_ood_y)


def test_digit_task_shapes_and_shift():
    d = make_digit_task(rho=0.9, noise=0.0, seed=0)
    assert d.pre_x.shape[1:] == (1, 10, 10) and set(np.unique(d.pre_y)) == set(range(5))
    assert set(np.unique(d.train_y)) == set(range(5))  # digits 5-9 relabelled 0-4
    assert d.train_x.min() >= 0 and d.train_x.max() <= 1
    # The border mark is the class's own in ~90% of training images and never in OOD images.
    def own_mark(x, y):
        segs = [x[:, 0, 0, 2:8].sum(1), x[:, 0, 9, 2:8].sum(1), x[:, 0, 2:8, 0].sum(1), x[:, 0, 2:8, 9].sum(1),
                x[:, 0, 0, 9] + x[:, 0, 9, 0]]  # fmt: skip
        return np.stack(segs, 1).argmax(1) == y
    assert own_mark(d.train_x, d.train_y).mean() == pytest.approx(0.9, abs=0.06)
    assert own_mark(d.test_ood_x, d.test_ood_y).mean() == 0.0


@needs_minilm
def test_jargon_words_are_not_whole_tokens_of_minilm():
    from icml24.language.pretrained import load_pretrained

    _, tok = load_pretrained("all-minilm-l6-v2")
    for words in D.JARGON.values():
        for w in words:
            assert w not in tok.get_vocab() and len(tok.tokenize(w)) > 1, w
    for words in D.SENTIMENT_WORDS["ood"].values():  # the pre-trained model knows the OOD words
        assert sum(w in tok.get_vocab() for w in words) >= 6


# ---------------------------------------------------------------------------------------------- LEVI
def test_levi_with_one_view_and_no_small_model_is_an_mlp_probe():
    torch.manual_seed(0)
    levi = LEVI(view_dims=[6], small_model=None, n_classes=3, adapter_dim=4, head_hidden=5, dropout=0.0)
    probe = torch.nn.Sequential(torch.nn.LayerNorm(6), torch.nn.Linear(6, 4), torch.nn.Linear(4, 5), torch.nn.ReLU(),
                                torch.nn.Linear(5, 3))  # fmt: skip
    probe[0].load_state_dict(levi.norms[0].state_dict())
    probe[1].load_state_dict(levi.adapters[0].state_dict())
    probe[2].load_state_dict(levi.head[0].state_dict())
    probe[4].load_state_dict(levi.head[2].state_dict())
    x = torch.randn(7, 6)
    torch.testing.assert_close(levi([x]), probe(x))
    lin = LEVI(view_dims=[6], small_model=None, n_classes=3, adapter_dim=None, head_hidden=0, dropout=0.0)
    torch.testing.assert_close(lin([x]), lin.head(torch.nn.functional.layer_norm(x, (6,), lin.norms[0].weight, lin.norms[0].bias)))


def test_zeroed_small_model_adapter_gives_the_pretrained_only_model():
    torch.manual_seed(1)
    levi = LEVI(view_dims=[5, 7], small_model=SmallMLP(in_features=9, out_dim=3), n_classes=2, adapter_dim=4,
                head_hidden=6, dropout=0.0)  # fmt: skip
    with torch.no_grad():
        levi.adapters[2].weight.zero_()
        levi.adapters[2].bias.zero_()
    only = LEVI(view_dims=[5, 7], small_model=None, n_classes=2, adapter_dim=4, head_hidden=6, dropout=0.0)
    for i in range(2):
        only.norms[i].load_state_dict(levi.norms[i].state_dict())
        only.adapters[i].load_state_dict(levi.adapters[i].state_dict())
    with torch.no_grad():
        only.head[0].weight.copy_(levi.head[0].weight[:, :8])  # the pre-trained slices of the head's input
        only.head[0].bias.copy_(levi.head[0].bias)
        only.head[2].load_state_dict(levi.head[2].state_dict())
    views, small = [torch.randn(10, 5), torch.randn(10, 7)], torch.randn(10, 9)
    torch.testing.assert_close(levi(views, small), only(views))


def test_concatenation_width_and_slices_are_independent():
    torch.manual_seed(2)
    levi = LEVI(view_dims=[3, 4, 5], small_model=SmallMLP(in_features=6, out_dim=2), n_classes=2, adapter_dim=7)
    levi.eval()
    views, small = [torch.randn(4, 3), torch.randn(4, 4), torch.randn(4, 5)], torch.randn(4, 6)
    z = levi.fused(views, small)
    assert z.shape == (4, 4 * 7) and levi.slice_widths == [7, 7, 7, 7]
    changed = list(views)
    changed[1] = torch.randn(4, 4)
    z2 = levi.fused(changed, small)
    same = torch.ones(28, dtype=torch.bool)
    same[7:14] = False
    torch.testing.assert_close(z[:, same], z2[:, same])
    assert not torch.allclose(z[:, 7:14], z2[:, 7:14])
    raw = LEVI(view_dims=[3, 4], small_model=None, n_classes=2, adapter_dim=None)
    assert raw.fused([torch.randn(2, 3), torch.randn(2, 4)]).shape == (2, 7)
    with pytest.raises(ValueError, match="views"):
        levi.fused(views[:2], small)
    with pytest.raises(ValueError, match="small_input"):
        levi(views)


def test_train_classifier_learns_keeps_the_best_epoch_and_is_deterministic():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    def fit():
        torch.manual_seed(0)
        m = SmallMLP(in_features=8, out_dim=2)
        return train_classifier(m, (x[:300],), y[:300], val_inputs=(x[300:],), val_labels=y[300:],
                                config=TrainConfig(lr=3e-3, epochs=15, seed=0))  # fmt: skip
    a, b = fit(), fit()
    assert a.val_accuracy >= 0.9
    assert a.val_accuracy == max(h["val_accuracy"] for h in a.history) and a.history[a.best_epoch - 1]["val_accuracy"] == a.val_accuracy
    assert accuracy(predict_logits(a.model, (x[300:],)), y[300:]) == pytest.approx(a.val_accuracy)
    assert a.history == b.history
    frozen = SmallMLP(in_features=8, out_dim=2)
    for p in frozen.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="parameters"):
        train_classifier(frozen, (x,), y, val_inputs=(x,), val_labels=y)


def test_hashed_bag_of_words_is_normalised_and_word_level():
    f = hashed_bag_of_words(["the zentic gasket", "the florbid gasket", "the zentic gasket"], n_features=256)
    assert f.shape == (3, 256) and np.allclose(np.linalg.norm(f, axis=1), 1)
    assert np.array_equal(f[0], f[2]) and not np.array_equal(f[0], f[1])


def test_wise_ft_endpoints_and_midpoint():
    torch.manual_seed(0)
    a, b = DigitCNN(n_classes=3), DigitCNN(n_classes=3)
    x = torch.rand(4, 1, 10, 10)
    torch.testing.assert_close(interpolate_weights(a, b, 0.0)(x), a(x))
    torch.testing.assert_close(interpolate_weights(a, b, 1.0)(x), b(x))
    mid = interpolate_weights(a, b, 0.5)
    torch.testing.assert_close(mid.head.weight, (a.head.weight + b.head.weight) / 2)


@needs_minilm
@needs_peft
def test_lora_wise_ft_scales_the_low_rank_update_exactly():
    from icml24.language.levi.finetune import PooledEncoderClassifier, lora_encoder, wise_ft

    enc, _ = R._minilm()
    head = LEVI(view_dims=[384], small_model=None, n_classes=2, adapter_dim=None, head_hidden=0, dropout=0.0)
    start = PooledEncoderClassifier(encoder=lora_encoder(enc, seed=0), head=head, layer=6)
    ft = R._copy(start)
    with torch.no_grad():
        for name, p in ft.named_parameters():
            if "lora_B" in name or "lora_A" in name or name.startswith("head"):
                p.add_(0.01 * torch.randn_like(p))
    def delta(model):  # the effective update of one adapted matrix: B A * scale
        layer = model.encoder.base_model.model.encoder.layer[0].attention.self.query
        return layer.lora_B["default"].weight @ layer.lora_A["default"].weight * layer.scaling["default"]
    torch.testing.assert_close(delta(wise_ft(start, ft, 0.25)), 0.25 * delta(ft))
    torch.testing.assert_close(wise_ft(start, ft, 0.0).head.head.weight, start.head.head.weight)
    with pytest.raises(ValueError, match="start"):
        wise_ft(ft, ft, 0.5)
    with pytest.raises(ValueError, match="rank"):
        lora_encoder(enc, rank=0)
    with pytest.raises(ValueError, match="alpha"):
        lora_encoder(enc, alpha=float("nan"))


@needs_minilm
def test_frozen_encoder_cached_features_equal_on_the_fly_and_weights_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML24_CACHE", str(tmp_path))
    enc, tok = R._minilm()
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    texts = make_review_task(20, 4, 4, seed=0).train.texts
    first = R.cached_minilm_features(texts)
    assert len(list((tmp_path / "levi-features").glob("*.npz"))) == 1
    again = R.cached_minilm_features(texts)  # read back from disk
    fresh = pooled_layer_features(enc, tok, texts, layers=list(R.LAYERS), batch_size=7)
    for a, b, c in zip(first, again, fresh):
        np.testing.assert_allclose(a, b, atol=1e-6)
        np.testing.assert_allclose(a, c, atol=1e-5)
    levi = LEVI(view_dims=[384] * 3, small_model=None, n_classes=2)
    y = torch.tensor(make_review_task(20, 4, 4, seed=0).train.labels)
    views = [torch.as_tensor(f) for f in first]
    train_classifier(levi, (views,), y, val_inputs=(views,), val_labels=y, config=TrainConfig(epochs=2))
    assert all(torch.equal(before[k], v) for k, v in enc.state_dict().items())
    with pytest.raises(ValueError, match="layers"):
        pooled_layer_features(enc, tok, texts, layers=[7])
    with pytest.raises(TypeError, match="texts"):
        pooled_layer_features(enc, tok, "one text", layers=[6])


@needs_minilm
@needs_peft
def test_text_finetuning_job_runs_on_a_tiny_config(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML24_CACHE", str(tmp_path))
    cfg = dict(R.TEXT["smoke"], n_train=40, n_val=16, n_test=16, epochs_ft=1, lrs_ft=[5e-4, 1e-3], batch_size=16,
               max_length=24)
    out = R.run_text_ft(cfg, 0)
    for m in ("lora", "lp_ft", "wise_ft"):
        assert 0 <= out[f"{m}_id"] <= 1 and 0 <= out[f"{m}_ood"] <= 1
    assert out["wise_ft_alpha"] in R.WISE_ALPHAS
    assert out["lora_lr"] in (5e-4, 1e-3) and out["lp_ft_lr"] in (5e-4, 1e-3)  # picked on ID validation


# ---------------------------------------------------------------------------------------------- verdict
BASELINES = ["lp_last", "lp_multi", "small", "logit_avg"]


def _arms(rng, n_seeds, ood_gain, id_gap, sd=0.015):
    """Per-seed accuracies: baselines around 0.7 OOD / 0.98 ID, LEVI shifted by ood_gain / id_gap."""
    seeds = range(n_seeds)
    base_ood = {b: 0.70 + 0.02 * i for i, b in enumerate(BASELINES)}
    shared = rng.normal(0, 0.02, n_seeds)  # seed effects common to all methods (why pairing helps)
    ood = {b: {s: base_ood[b] + shared[s] + rng.normal(0, sd) for s in seeds} for b in BASELINES}
    idd = {b: {s: 0.98 + rng.normal(0, 0.003) for s in seeds} for b in BASELINES}
    best_ood = max(base_ood.values())
    ood["levi"] = {s: best_ood + ood_gain + shared[s] + rng.normal(0, sd) for s in seeds}
    idd["levi"] = {s: 0.98 + id_gap + rng.normal(0, 0.003) for s in seeds}
    return idd, ood


def _verdict(idd, ood):
    checks = R.arm_checks("text", idd, ood, baselines=BASELINES)
    return decide.combine(checks, "all")[0]


def test_rule_has_power_at_the_seed_count_and_rarely_supports_a_null():
    n = R.DEFAULT_SEEDS["quick"]
    # A true OOD gain of 5 points over the best baseline, ID equal, with the per-seed noise measured in the
    # quick run (std of the paired LEVI - baseline OOD differences 0.03-0.045; here 0.028 * sqrt(2) = 0.04).
    pw = decide.power(lambda a: _verdict(*a), lambda rng: _arms(rng, n, 0.05, 0.0, sd=0.028), n_sims=200, seed=0)
    assert pw.supported >= 0.8, pw.describe()
    # No gain over the best baseline: support comes only from that one test's alpha (0.05; the others are
    # Holm-corrected away from it), so allow 0.05 plus two Monte Carlo standard errors.
    null = decide.power(lambda a: _verdict(*a), lambda rng: _arms(rng, n, 0.0, 0.0), n_sims=400, seed=1)
    assert null.supported <= 0.05 + 2 * (0.05 * 0.95 / 400) ** 0.5, null.describe()


def test_hand_made_refuting_case_is_not_supported():
    # LEVI clearly worse OOD than the best baseline: the symmetric rule says not_supported.
    rng = np.random.default_rng(0)
    assert _verdict(*_arms(rng, 8, -0.05, 0.0)) == "not_supported"
    # Better OOD but ID 5 points below: the ID non-inferiority check refutes.
    idd, ood = _arms(np.random.default_rng(1), 8, 0.05, -0.05)
    checks = R.arm_checks("text", idd, ood, baselines=BASELINES)
    by_id = {c.id: c for c in checks}
    assert by_id["text-id-kept"].verdict == "not_supported"
    assert decide.combine(checks, "all")[0] == "not_supported"
    # Too few seeds to tell: inconclusive, not supported.
    assert _verdict(*_arms(np.random.default_rng(2), 2, 0.01, 0.0)) == "inconclusive"


def _with_ablation(rng, n_seeds, gain, sd):
    """Hand-made arm with the four baselines well below LEVI and LEVI without the small model ``gain`` below."""
    idd, ood = _arms(rng, n_seeds, 0.10, 0.0)
    ood["mlp_probe"] = {s: ood["levi"][s] - gain + rng.normal(0, sd) for s in ood["levi"]}
    idd["mlp_probe"] = {s: 0.99 for s in ood["levi"]}  # the best ID, but not a baseline: no effect on id-kept
    return idd, ood


def test_ablation_is_decisive_and_symmetric_on_hand_made_results():
    checks = R.arm_checks("text", *_with_ablation(np.random.default_rng(7), 16, 0.06, 0.03),
                          baselines=BASELINES, ablations=R.ABLATIONS)  # fmt: skip
    by_id = {c.id: c for c in checks}
    abl = by_id["text-ood-vs-mlp_probe"]
    assert abl.decisive and abl.verdict == "supported" and "ablation" in abl.claim
    assert "LEVI without" not in by_id["text-id-kept"].claim  # the ablation is not a competitor in ID
    assert decide.combine(checks, "all")[0] == "supported"
    # Refuted: the small model's view costs OOD accuracy, so the arm is not supported though every baseline is beaten.
    checks = R.arm_checks("text", *_with_ablation(np.random.default_rng(8), 16, -0.06, 0.03),
                          baselines=BASELINES, ablations=R.ABLATIONS)  # fmt: skip
    assert {c.id: c for c in checks}["text-ood-vs-mlp_probe"].verdict == "not_supported"
    assert decide.combine(checks, "all")[0] == "not_supported"
    # No effect of the small model (the null control of this check): inconclusive, so the arm is not supported.
    checks = R.arm_checks("text", *_with_ablation(np.random.default_rng(9), 16, 0.0, 0.03),
                          baselines=BASELINES, ablations=R.ABLATIONS)  # fmt: skip
    assert {c.id: c for c in checks}["text-ood-vs-mlp_probe"].verdict == "inconclusive"
    assert decide.combine(checks, "all")[0] == "inconclusive"


def test_ablation_power_at_the_text_seed_counts():
    # The 8-seed pilot: LEVI - LEVI without the small model +0.049 OOD, paired-difference std 0.066.
    def verdict(a):
        checks = R.arm_checks("text", *a, baselines=BASELINES, ablations=R.ABLATIONS)
        return {c.id: c for c in checks}["text-ood-vs-mlp_probe"].verdict

    n = R.TEXT_SEEDS["full"]
    pw = decide.power(verdict, lambda rng: _with_ablation(rng, n, 0.049, 0.066), n_sims=300, seed=0)
    assert pw.supported >= 0.8, pw.describe()
    # At quick's 8 seeds the same effect is found about 60% of the time (stated in the README).
    low = decide.power(verdict, lambda rng: _with_ablation(rng, R.TEXT_SEEDS["quick"], 0.049, 0.066), n_sims=300,
                       seed=2)  # fmt: skip
    assert 0.4 <= low.supported <= 0.8, low.describe()
    null = decide.power(verdict, lambda rng: _with_ablation(rng, n, 0.0, 0.066), n_sims=400, seed=1)
    assert null.supported <= 0.05 + 2 * (0.05 * 0.95 / 400) ** 0.5, null.describe()


def test_build_jobs_gives_the_text_arm_and_the_finetuning_baselines_their_seeds():
    jobs = R.build_jobs("full", None)
    count = {e: sum(j.experiment == e for j in jobs) for e in ("text", "text-ft", "vision")}
    assert count == {"text": 3 * R.TEXT_SEEDS["full"], "text-ft": R.TEXT_FT["full"]["seeds"],
                     "vision": R.DEFAULT_SEEDS["full"]}  # fmt: skip
    assert all(len(j.config["lrs_ft"]) >= 3 for j in jobs if j.experiment == "text-ft")


def _results(idd, ood, experiment="text", rho=0.9):
    out = []
    for s in idd["levi"]:
        metrics = {}
        for m in idd:
            metrics[f"{m}_id"], metrics[f"{m}_ood"] = idd[m][s], ood[m][s]
        out.append(JobResult(Job(R.SLUG, experiment, "x:y", {"rho": rho}, s), "ok", metrics))
    return out


def test_analyze_on_hand_made_results():
    idd, ood = _arms(np.random.default_rng(3), 8, 0.06, 0.0)
    vid, vood = _arms(np.random.default_rng(4), 8, 0.06, 0.0)
    analysis = R.analyze(_results(idd, ood) + _results(vid, vood, "vision"), "quick")
    assert analysis.verdict == "supported", analysis.summary
    assert {"text-id-kept", "vision-id-kept", "text-ood-vs-lp_multi"} <= {c.id for c in analysis.checks}
    assert analysis.tables and analysis.figures
    bad = R.analyze(_results(*_arms(np.random.default_rng(5), 8, -0.06, 0.0)) + _results(vid, vood, "vision"), "quick")
    assert bad.verdict == "not_supported"


def test_analyze_full_pairs_the_finetuning_seeds_and_reports_the_sweep():
    rng = np.random.default_rng(6)
    idd, ood = _arms(rng, 8, 0.06, 0.0)
    ft = []
    for s in range(5):  # LoRA-family baselines on the first 5 seeds only, paired with LEVI's same seeds
        metrics = {f"{m}_{k}": 0.7 + 0.01 * s if k == "ood" else 0.98 for m in ("lora", "lp_ft", "wise_ft")
                   for k in ("id", "ood")}  # fmt: skip
        ft.append(JobResult(Job(R.SLUG, "text-ft", "x:y", {"rho": 0.9}, s), "ok", metrics))
    sweep = _results(*_arms(rng, 8, 0.0, 0.0), rho=0.8)
    vid, vood = _arms(rng, 8, 0.06, 0.0)
    a = R.analyze(_results(idd, ood) + ft + sweep + _results(vid, vood, "vision"), "full")
    by_id = {c.id: c for c in a.checks}
    assert by_id["text-ood-vs-lora"].n == 5 and by_id["text-ood-vs-lora"].decisive
    assert not by_id["text, shortcut 0.8-ood-vs-lp_last"].decisive
    assert any("0.8" in t.title for t in a.tables)
