"""The shared language toolkit: tokenizers, the transformer (against transformers' Llama), training, metrics."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.language import (
    IGNORE_INDEX,
    CharTokenizer,
    KVCache,
    TrainConfig,
    TransformerConfig,
    TransformerLM,
    WordTokenizer,
    causal_lm_labels,
    cosine_with_warmup,
    exact_match_last_number,
    from_hf_llama,
    last_number,
    lm_loss,
    perplexity,
    to_hf_llama,
    token_accuracy,
    train_lm,
)
from icml24.language.corpora import stdlib_docstrings

ALPHABET = "0123456789+=\n,:C"


def _model(**kw) -> TransformerLM:
    torch.manual_seed(0)
    cfg = dict(vocab_size=40, d_model=32, n_layers=2, n_heads=4, max_seq_len=48)
    cfg.update(kw)
    model = TransformerLM(TransformerConfig(**cfg)).eval()
    with torch.no_grad():  # larger weights than the N(0, 0.02) init, so that differences would show
        for p in model.parameters():
            p.normal_(0, 0.2)
    return model


# ------------------------------------------------------------------ tokenizers


@settings(max_examples=50, derandomize=True, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_char_round_trip(text):
    tok = CharTokenizer(ALPHABET)
    assert tok.decode(tok.encode(text, bos=True, eos=True)) == text
    ids = tok.encode(text)
    assert all(i >= 5 for i in ids) and len(ids) == len(text)


@settings(max_examples=50, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", ".", ","]), max_size=12))
def test_word_round_trip(words):
    tok = WordTokenizer(["the", "cat", "sat", "on", "mat", ".", ","])
    text = " ".join(words)
    assert tok.decode(tok.encode(text)) == text


def test_special_ids_and_padding():
    tok = CharTokenizer.from_texts(["12+3=15"])
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id, tok.mask_id) == (0, 1, 2, 3, 4)
    ids, mask = tok.batch(["1+1=2", "12+3=15"], padding_side="left")
    assert ids.shape == mask.shape == (2, 7)
    assert mask[0].tolist() == [0, 0, 1, 1, 1, 1, 1] and ids[0, 0] == tok.pad_id
    assert tok.decode(ids[0]) == "1+1=2"
    ids_r, mask_r = tok.batch(["1+1=2", "12+3=15"])
    assert mask_r[0].tolist() == [1, 1, 1, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="'x'"):
        tok.encode("1x")
    assert CharTokenizer("ab", unknown="unk").encode("az") == [5, 3]
    assert WordTokenizer(["a"]).encode("a b") == [5, 3]
    with pytest.raises(ValueError, match="special"):
        WordTokenizer(["a", "<pad>"])
    with pytest.raises(ValueError, match="unique"):
        WordTokenizer(["a", "a"])
    with pytest.raises(ValueError, match="ids"):
        tok.decode([999])


# ------------------------------------------------------------------ transformer


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_logits_equal_transformers_llama(n_kv_heads):
    pytest.importorskip("transformers")
    model = _model(n_kv_heads=n_kv_heads)
    hf = to_hf_llama(model)
    x = torch.randint(0, 40, (3, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(model(x), hf(x).logits, atol=1e-5)
        mask = torch.ones_like(x)
        mask[0, :4] = 0
        pos = (mask.cumsum(-1) - 1).clamp_min(0)
        ours = model(x, attention_mask=mask)
        theirs = hf(x, attention_mask=mask, position_ids=pos).logits
        assert torch.allclose(ours[mask.bool()], theirs[mask.bool()], atol=1e-5)
        back = from_hf_llama(hf)
        assert torch.allclose(back(x), model(x), atol=1e-6)
        hf_gen = hf.generate(x, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(model.generate(x, attention_mask=mask, max_new_tokens=6), hf_gen)


@pytest.mark.parametrize("positions", ["rope", "learned", "none"])
def test_kv_cache_decoding_equals_full_recompute(positions):
    model = _model(positions=positions, norm="layernorm", mlp="gelu", bias=True)
    x = torch.randint(5, 40, (4, 7), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(x)
    mask[1, :3] = 0
    with_cache = model.generate(x, attention_mask=mask, max_new_tokens=10, use_cache=True)
    without = model.generate(x, attention_mask=mask, max_new_tokens=10, use_cache=False)
    assert torch.equal(with_cache, without)
    # Step-by-step logits through the cache equal one full forward pass.
    cache = KVCache(model.config.n_layers)
    with torch.no_grad():
        full = model(x)
        steps = torch.cat([model(x[:, t : t + 1], cache=cache) for t in range(x.shape[1])], dim=1)
    assert torch.allclose(full, steps, atol=1e-5)


def test_left_padding_does_not_change_a_sequence():
    model = _model()
    x = torch.randint(5, 40, (1, 6), generator=torch.Generator().manual_seed(3))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        assert torch.allclose(model(x), model(padded, attention_mask=mask)[:, 3:], atol=1e-5)


def test_causal_and_bidirectional_masks():
    x = torch.randint(5, 40, (2, 8), generator=torch.Generator().manual_seed(4))
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % 40
    dec, enc = _model(), _model(causal=False)
    with torch.no_grad():
        assert torch.allclose(dec(x)[:, :-1], dec(y)[:, :-1], atol=1e-6)  # the future is invisible
        assert not torch.allclose(enc(x)[:, :-1], enc(y)[:, :-1], atol=1e-4)  # an encoder sees it
    with pytest.raises(ValueError, match="causal"):
        enc.generate(x, max_new_tokens=1)


def test_sampling_is_seeded_and_top_k_restricts():
    model = _model()
    x = torch.randint(5, 40, (3, 4), generator=torch.Generator().manual_seed(5))
    a = model.generate(x, max_new_tokens=5, temperature=1.0, generator=torch.Generator().manual_seed(0))
    b = model.generate(x, max_new_tokens=5, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    top1 = model.generate(x, max_new_tokens=5, temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(9))
    assert torch.equal(top1, model.generate(x, max_new_tokens=5))


def test_eos_stops_and_pads():
    model = _model()
    x = torch.randint(5, 40, (2, 3), generator=torch.Generator().manual_seed(6))
    greedy = model.generate(x, max_new_tokens=4)
    eos = int(greedy[0, 3])
    out = model.generate(x, max_new_tokens=4, eos_token_id=eos, pad_token_id=0)
    row = out[0, 3:].tolist()
    assert row[0] == eos and all(t == 0 for t in row[1:])


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="n_heads"):
        TransformerConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="positions"):
        TransformerConfig(positions="alibi")
    with pytest.raises(ValueError, match="causal"):
        TransformerConfig(positions="none", causal=False)
    model = _model()
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros(1, 49, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.full((1, 3), 40))
    with pytest.raises(TypeError, match="input_ids"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.zeros(1, 3, dtype=torch.long), attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match="Llama"):
        to_hf_llama(_model(positions="learned"))


def test_tied_embeddings_and_parameter_count():
    model = _model()
    assert model.lm_head.weight is model.embed_tokens.weight
    untied = _model(tie_embeddings=False)
    assert untied.num_parameters() == model.num_parameters() + 40 * 32


# ------------------------------------------------------------------ training


def test_labels_and_answer_only_loss_masks_the_prompt():
    ids = torch.tensor([[5, 6, 7, 8, 0]])
    attn = torch.tensor([[1, 1, 1, 1, 0]])
    answer = torch.tensor([[0, 0, 1, 1, 0]])  # tokens 7 and 8 are the answer
    labels = causal_lm_labels(ids, attention_mask=attn, loss_mask=answer)
    assert labels.tolist() == [[IGNORE_INDEX, 7, 8, IGNORE_INDEX, IGNORE_INDEX]]
    logits = torch.randn(1, 5, 12, requires_grad=True)
    lm_loss(logits, labels).backward()
    grad = logits.grad.abs().sum(-1)[0]
    assert grad[0] == 0 and grad[3] == 0 and grad[4] == 0 and grad[1] > 0 and grad[2] > 0
    assert lm_loss(logits, torch.full((1, 5), IGNORE_INDEX)).item() == 0.0


def test_schedule_warms_up_and_decays():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = cosine_with_warmup(opt, warmup_steps=4, total_steps=20, min_lr_ratio=0.1)
    lrs = []
    for _ in range(20):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:])) and lrs[-1] >= 0.1


def test_train_lm_learns_a_copy_task():
    tok = CharTokenizer("abcd|")
    model = TransformerLM(TransformerConfig(vocab_size=tok.vocab_size, d_model=32, n_layers=2, n_heads=2, max_seq_len=16))

    def batch(gen):
        src = torch.randint(5, 9, (32, 4), generator=gen)
        sep = torch.full((32, 1), tok.stoi["|"])
        ids = torch.cat([src, sep, src], dim=1)
        answer = torch.zeros_like(ids)
        answer[:, 5:] = 1
        return ids, causal_lm_labels(ids, loss_mask=answer)

    def evaluate(m):
        ids, labels = batch(torch.Generator().manual_seed(123))
        return {"token_accuracy": token_accuracy(m(ids), labels)}

    hist = train_lm(model, batch, TrainConfig(steps=150, lr=3e-3, warmup_steps=10), seed=0, evaluate=evaluate)
    assert hist[-1]["token_accuracy"] > 0.9  # chance is 0.25
    assert hist[-1]["loss"] < 0.5


def test_train_config_rejects_bad_values():
    for kw, name in [({"steps": 0}, "steps"), ({"lr": -1.0}, "lr"), ({"warmup_steps": 5, "steps": 2}, "warmup_steps"),
                     ({"grad_clip": 0.0}, "grad_clip"), ({"min_lr_ratio": 2.0}, "min_lr_ratio")]:  # fmt: skip
        with pytest.raises(ValueError, match=name):
            TrainConfig(**kw)


# ------------------------------------------------------------------ metrics and corpora


def test_metrics():
    assert last_number("12+3=15") == 15 and last_number("no digits") is None and last_number("x -4") == -4
    assert exact_match_last_number(["=15", "=7", "none"], [15, 8, 1]) == pytest.approx(1 / 3)
    assert math.isnan(exact_match_last_number([], []))
    logits = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    assert token_accuracy(logits, torch.tensor([[1, IGNORE_INDEX]])) == 1.0
    assert perplexity(0.0) == 1.0 and perplexity(math.log(4)) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="mean_nll"):
        perplexity(float("nan"))


def test_stdlib_docstring_corpus_is_deterministic_and_large():
    a = stdlib_docstrings()
    assert a == stdlib_docstrings()
    assert len(a) > 500 and sum(map(len, a)) > 100_000
    assert all(all(ch == "\n" or 32 <= ord(ch) < 127 for ch in d) for d in a[:50])
