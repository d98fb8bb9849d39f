"""Uni-Med core: the Toy-Med-VQA generator, intent tags, intent-guided attention, token-level cut-mix and the
grounding metrics, against closed forms, brute-force loops and the shared tiny ViT's softmax attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.multimodal.uni_med import (
    ANSWERS,
    IntentGuidedAttention,
    MedVQATransformer,
    ToyMedVQAConfig,
    TrainConfig,
    blank_patches,
    closest_candidate,
    deletion_test,
    evaluate_vqa,
    evidence_attention_share,
    intent_key_scale,
    make_toy_med_vqa,
    parse_intent,
    pretrain_image_encoder,
    question_tokenizer,
    similarity_evidence,
    token_cutmix,
    train_vqa,
)
from icml24.multimodal.uni_med.data import INTENT_TAG
from icml24.vision.tiny_vit import SoftmaxAttention

TINY = dict(dim=16, num_heads=2, mlp_dim=16, image_layers=1, fusion_layers=2)


def _model(data, **kw):
    torch.manual_seed(0)
    return MedVQATransformer(max_question_len=data.questions.shape[1], **{**TINY, **kw})


# ------------------------------------------------------------------------------------------- data
def test_generator_is_deterministic_per_seed_and_varies_across_seeds():
    a, b = make_toy_med_vqa(50, seed=3), make_toy_med_vqa(50, seed=3)
    c = make_toy_med_vqa(50, seed=4)
    for name in ("images", "questions", "intent_mask", "answers", "evidence"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.texts == b.texts
    assert not np.array_equal(a.images, c.images)


def test_answers_are_read_off_the_rendered_pixels():
    """Presence, kind and size of the asked organ's lesion, recovered from the image alone, give the answer."""
    d = make_toy_med_vqa(400, seed=1)
    for i in range(len(d)):
        organ = d.organ_masks[i, d.side[i]]
        pix = d.images[i, 0][organ]
        dev = pix - np.median(pix)
        lesion = np.abs(dev) > 0.25  # 5 noise sds; lesion contrast is 0.4
        has = lesion.sum() > 1  # a small lesion covers 3-6 pixels, a large one 9-14
        kind = ("bright" if dev[lesion].mean() > 0 else "dark") if has else None
        size = "large" if lesion.sum() > 7 else "small"
        qt = ("presence", "bright", "kind", "size")[d.question_type[i]]
        expected = {
            "presence": "yes" if has else "no",
            "bright": "yes" if has and kind == "bright" else "no",
            "kind": kind if has else "none",
            "size": size if has else "none",
        }[qt]
        assert ANSWERS[d.answers[i]] == expected, (i, d.texts[i])
    assert set(np.unique(d.answers)) == set(range(len(ANSWERS)))


def test_evidence_patches_match_a_brute_force_overlap_loop():
    d = make_toy_med_vqa(20, config=ToyMedVQAConfig(image_size=32, patch_size=4), seed=2)
    for i in range(len(d)):
        organ = d.organ_masks[i, d.side[i]]
        expected = [organ[r : r + 4, c : c + 4].any() for r in range(0, 32, 4) for c in range(0, 32, 4)]
        assert d.evidence.shape == (20, 64)
        np.testing.assert_array_equal(d.evidence[i], expected)


def test_intent_mask_round_trips_through_the_tags_and_the_tokenizer():
    d = make_toy_med_vqa(60, config=ToyMedVQAConfig(distractor_words=7), seed=5)
    tok = question_tokenizer()
    for i, text in enumerate(d.texts):
        plain, spans, mask = parse_intent(text)
        assert f"<{INTENT_TAG}>" not in plain and len(spans) == 1 and spans[0] in plain
        ids = tok.encode(plain)
        assert tok.decode(ids) == plain
        np.testing.assert_array_equal(d.questions[i, : len(ids)], ids)
        assert (d.questions[i, len(ids) :] == 0).all()
        np.testing.assert_array_equal(d.intent_mask[i, : len(ids)], mask)
        assert " ".join(w for w, m in zip(plain.split(), mask) if m) == spans[0]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["left", "organ", "is", "what", "scan"]), st.booleans()), min_size=1, max_size=12))
def test_parse_intent_property_strip_restores_text(words):
    # Tag each maximal run of flagged words.
    parts, run = [], []
    for w, flag in words + [("", False)]:
        if flag and w:
            run.append(w)
            continue
        if run:
            parts.append(f"<{INTENT_TAG}>{' '.join(run)}</{INTENT_TAG}>")
            run = []
        if w:
            parts.append(w)
    text = " ".join(parts)
    plain, spans, mask = parse_intent(text)
    assert plain == " ".join(w for w, _ in words)
    assert mask == [f for _, f in words]
    assert all(s in plain for s in spans)


def test_parse_intent_rejects_unbalanced_tags():
    with pytest.raises(ValueError, match="tags"):
        parse_intent(f"<{INTENT_TAG}>is there")


def test_closest_candidate_returns_the_exact_candidate():
    cands = ["yes", "no", "left", "right"]
    for i, c in enumerate(cands):
        assert closest_candidate(c, cands) == i
    assert closest_candidate("the answer is yes", ["no", "yes"]) == 1


# ------------------------------------------------------------------------------------------- attention
def test_intent_attention_with_unit_scale_equals_the_shared_softmax_attention():
    torch.manual_seed(0)
    ours = IntentGuidedAttention(dim=16, num_heads=4)
    ref = SoftmaxAttention(dim=16, num_heads=4)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(3, 7, 16)
    torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(ours(x, torch.ones(3, 7)), ref(x))


def test_intent_attention_matches_pasta_multiply_and_renormalise_and_rows_sum_to_one():
    torch.manual_seed(1)
    att = IntentGuidedAttention(dim=8, num_heads=2)
    att.record = True
    x = torch.randn(2, 6, 8)
    scale = torch.tensor([[1, 1, 0.01, 1, 0.01, 0], [1, 0.5, 1, 1, 1, 1.0]])
    att(x)
    plain = att.last_attention.clone()
    att(x, scale)
    steered = att.last_attention
    expected = plain * scale[:, None, None, :]
    expected = expected / expected.sum(-1, keepdim=True)
    torch.testing.assert_close(steered, expected)
    torch.testing.assert_close(steered.sum(-1), torch.ones(2, 2, 6))
    assert (steered[0, :, :, 5] == 0).all()


def test_key_scale_closed_form():
    q = torch.tensor([[5, 6, 7, 0]])
    intent = torch.tensor([[False, True, True, False]])
    s = intent_key_scale(q, intent, 0.01, num_prefix=2)
    torch.testing.assert_close(s, torch.tensor([[1, 1, 0.01, 1, 1, 0.0]]))
    torch.testing.assert_close(intent_key_scale(q, intent, None, num_prefix=1), torch.tensor([[1, 1, 1, 1, 0.0]]))


def test_alpha_zero_makes_the_answer_invariant_to_non_intent_words():
    d = make_toy_med_vqa(16, config=ToyMedVQAConfig(distractor_words=6), seed=0)
    m = _model(d, intent_alpha=0.0).eval()
    images, q, intent = torch.from_numpy(d.images), torch.from_numpy(d.questions), torch.from_numpy(d.intent_mask)
    other = q.clone()
    g = torch.Generator().manual_seed(0)
    swap = (~intent) & (q != 0)
    other[swap] = torch.randint(5, question_tokenizer().vocab_size, (int(swap.sum()),), generator=g)
    assert (other != q).any()
    with torch.no_grad():
        torch.testing.assert_close(m(images, other, intent), m(images, q, intent))
        # and vanilla attention (the baseline) does depend on them
        base = _model(d).eval()
        assert not torch.allclose(base(images, other, intent), base(images, q, intent))
        # without intent steering the mask is ignored
        torch.testing.assert_close(base(images, q, intent), base(images, q, None))


# ------------------------------------------------------------------------------------------- cut-mix
def test_cutmix_keeps_exactly_the_evidence_tokens_and_takes_the_rest_from_the_partner():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(8, 16, 4, generator=g)
    ev = torch.rand(8, 16, generator=g) < 0.3
    mixed, partner, was = token_cutmix(v, ev, p=1.0, generator=torch.Generator().manual_seed(1))
    assert was.all()
    for i in range(8):
        for q in range(16):
            torch.testing.assert_close(mixed[i, q], v[i, q] if ev[i, q] else v[partner[i], q])
    zeros, _, _ = token_cutmix(v, ev, p=1.0, generator=torch.Generator().manual_seed(1), fill="zeros")
    assert (zeros[~ev] == 0).all() and torch.equal(zeros[ev], v[ev])


def test_cutmix_with_p_zero_is_the_identity_and_p_mixes_about_p():
    v = torch.randn(400, 4, 2)
    ev = torch.zeros(400, 4, dtype=torch.bool)
    same, _, was = token_cutmix(v, ev, p=0.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(same, v) and not was.any()
    _, _, was = token_cutmix(v, ev, p=0.5, generator=torch.Generator().manual_seed(0))
    assert 0.4 < was.float().mean() < 0.6


@pytest.mark.parametrize("b", [2, 3, 5, 8, 32])
def test_cutmix_never_pairs_a_sample_with_itself(b):
    """The partner map is a derangement: a self-pair would 'mix' a sample with its own tokens (no augmentation);
    a plain randperm does that for about 1 - 1/e of the batches."""
    v = torch.randn(b, 6, 3)
    ev = torch.zeros(b, 6, dtype=torch.bool)
    for seed in range(200):
        mixed, partner, was = token_cutmix(v, ev, p=1.0, generator=torch.Generator().manual_seed(seed))
        assert sorted(partner.tolist()) == list(range(b))  # still a permutation: each sample lends once
        assert (partner != torch.arange(b)).all()
        assert was.all() and not torch.isclose(mixed, v).all(dim=(1, 2)).any()  # every mixed sample changed


def test_cutmix_of_a_single_sample_is_the_identity():
    v, ev = torch.randn(1, 6, 3), torch.zeros(1, 6, dtype=torch.bool)
    mixed, partner, was = token_cutmix(v, ev, p=1.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(mixed, v) and not was.any() and partner.tolist() == [0]


def test_similarity_evidence_matches_a_loop():
    g = torch.Generator().manual_seed(0)
    v, w = torch.randn(3, 10, 6, generator=g), torch.randn(3, 4, 6, generator=g)
    wm = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 1]], dtype=torch.bool)
    got = similarity_evidence(v, w, wm, top_k=2)
    for b in range(3):
        expected = torch.zeros(10, dtype=torch.bool)
        for j in range(4):
            if wm[b, j]:
                sims = torch.stack([torch.nn.functional.cosine_similarity(w[b, j], v[b, p], dim=0) for p in range(10)])
                expected[sims.argsort(descending=True)[:2]] = True
        assert torch.equal(got[b], expected)


# ------------------------------------------------------------------------------------------- grounding
def test_blank_patches_zeroes_exactly_the_chosen_patches():
    img = np.random.default_rng(0).random((2, 1, 8, 8)).astype(np.float32) + 1
    patches = np.array([[True, False, False, True], [False, False, False, False]])
    out = blank_patches(img, patches, 4)
    assert (out[0, 0, :4, :4] == 0).all() and (out[0, 0, 4:, 4:] == 0).all()
    np.testing.assert_array_equal(out[0, 0, :4, 4:], img[0, 0, :4, 4:])
    np.testing.assert_array_equal(out[1], img[1])


def test_uniform_attention_gives_the_chance_evidence_share():
    """With zero query/key weights attention is uniform, so the share is |evidence| / patches exactly."""
    d = make_toy_med_vqa(10, seed=0)
    m = _model(d)
    with torch.no_grad():
        for blk in m.blocks:
            blk.attn.qkv.weight[: 2 * 16].zero_()
            blk.attn.qkv.bias[: 2 * 16].zero_()
    share = evidence_attention_share(m, d)
    np.testing.assert_allclose(share, d.evidence.mean(1), rtol=1e-5)
    ev = evaluate_vqa(m, d)
    assert ev["evidence_attention_share"] == pytest.approx(ev["evidence_patch_share"], rel=1e-5)


def test_deletion_test_is_consistent_with_evaluation():
    d = make_toy_med_vqa(40, seed=1)
    m = _model(d)
    out = deletion_test(m, d, seed=0)
    assert out["deletion_gap"] == pytest.approx(out["accuracy_random_blanked"] - out["accuracy_evidence_blanked"])
    assert 0 <= out["accuracy_evidence_blanked"] <= 1
    assert deletion_test(m, d, seed=0) == out


# ------------------------------------------------------------------------------------------- training
def test_training_is_deterministic_and_learns_a_small_set():
    d = make_toy_med_vqa(64, seed=0)
    mixed = TrainConfig(epochs=3, batch_size=32, cutmix_p=0.5)
    h1 = train_vqa(_model(d, intent_alpha=0.01), d, config=mixed, seed=1)
    assert h1 == train_vqa(_model(d, intent_alpha=0.01), d, config=mixed, seed=1)
    assert h1 != train_vqa(_model(d, intent_alpha=0.01), d, config=mixed, seed=2)
    m = _model(d, intent_alpha=0.01)
    h = train_vqa(m, d, config=TrainConfig(epochs=40, batch_size=32, lr=3e-3), seed=1)
    assert h[-1] < 0.5 * h[0]
    assert evaluate_vqa(m, d)["accuracy"] > 0.6


def test_findings_match_the_answers_and_pretraining_touches_only_the_image_encoder():
    d = make_toy_med_vqa(200, seed=3)
    f = d.findings[np.arange(len(d)), d.side]
    presence = d.question_type == 0
    assert ((f[presence] > 0) == (d.answers[presence] == ANSWERS.index("yes"))).all()
    kind = d.question_type == 2
    bright = np.isin(f[kind], (1, 2))
    assert (bright == (d.answers[kind] == ANSWERS.index("bright"))).all()
    m = _model(d)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    losses = pretrain_image_encoder(m, d, steps=60, batch_size=32, lr=3e-3, seed=0)
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    after = m.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("image_encoder.") for k in changed)
    assert losses == pretrain_image_encoder(_model(d), d, steps=60, batch_size=32, lr=3e-3, seed=0)


def test_intent_feature_baseline_uses_the_tags_as_input_and_shares_the_initialisation():
    """The information-matched baseline: the intent tags enter as an embedding (zero at init, so the untrained
    model equals the baseline), with vanilla attention; a required input, unlike intent-guided attention."""
    torch.manual_seed(0)
    base = MedVQATransformer()
    torch.manual_seed(0)
    tagged = MedVQATransformer(intent_feature=True)
    shared = base.state_dict()
    assert all(torch.equal(shared[k], v) for k, v in tagged.state_dict().items() if k in shared)
    assert set(tagged.state_dict()) - set(shared) == {"intent_embed.weight"}
    g = torch.Generator().manual_seed(0)
    images = torch.rand(3, 1, 16, 16, generator=g)
    q = torch.randint(1, 20, (3, 7), generator=g)
    intent = torch.rand(3, 7, generator=g) < 0.5
    torch.testing.assert_close(tagged(images, q, intent), base(images, q, intent))
    with torch.no_grad():
        tagged.intent_embed.weight.normal_()
    assert not torch.allclose(tagged(images, q, intent), tagged(images, q, ~intent))
    with pytest.raises(ValueError, match="intent_mask"):
        tagged(images, q, None)
    with pytest.raises(TypeError, match="intent_feature"):
        MedVQATransformer(intent_feature=1)
