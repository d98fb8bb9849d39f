"""The matmul FLOP counter against closed forms and torch.utils.flop_counter.FlopCounterMode."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from icml24.language import TransformerConfig, TransformerLM
from icml24.vision.flops import MatmulFlopCounter, UncountedOpError, _looks_like_product, count_flops
from icml24.vision.tiny_vit import TinyViT


def _reference(fn, *args) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as mode:
        fn(*args)
    return mode.get_total_flops()


def test_closed_forms():
    a, b = torch.randn(3, 4, 5), torch.randn(5, 6)
    assert count_flops(torch.matmul, a, b) == 2 * 3 * 4 * 5 * 6
    assert count_flops(lambda: a @ b) == 2 * 3 * 4 * 5 * 6
    lin = torch.nn.Linear(5, 7)
    assert count_flops(lin, a) == 2 * 12 * 5 * 7
    conv = torch.nn.Conv2d(3, 8, kernel_size=2, stride=2)
    x = torch.randn(2, 3, 8, 8)
    assert count_flops(conv, x) == 2 * (2 * 8 * 4 * 4) * (3 * 2 * 2)
    q = torch.randn(2, 4, 10, 8)
    k = torch.randn(2, 4, 12, 8)
    assert count_flops(F.scaled_dot_product_attention, q, k, k) == 2 * 8 * 10 * 12 * 16
    assert (
        count_flops(torch.einsum, "bij,bjk->bik", torch.randn(2, 3, 4), torch.randn(2, 4, 5))
        == 2 * 2 * 3 * 4 * 5
    )
    assert count_flops(torch.relu, a) == 0


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(1, 6), k=st.integers(1, 6), m=st.integers(1, 6), batch=st.integers(1, 4))
def test_matmul_agrees_with_flop_counter_mode(n, k, m, batch):
    a, b = torch.randn(batch, n, k), torch.randn(batch, k, m)
    assert count_flops(torch.bmm, a, b) == _reference(torch.bmm, a, b) == 2 * batch * n * k * m
    lin = torch.nn.Linear(k, m)
    assert count_flops(lin, a) == _reference(lin, a)


def test_tiny_vit_forward_agrees_with_flop_counter_mode():
    model = TinyViT(
        image_size=16, patch_size=4, in_channels=3, dim=32, depth=2, num_heads=4, mlp_dim=64
    ).eval()
    x = torch.randn(3, 3, 16, 16)
    ours = count_flops(model, x)
    assert ours == _reference(model, x)
    # closed form: patch conv + per block (qkv, attention, proj, MLP) + head
    b, t, d = 3, 16, 32
    per_block = 2 * b * t * d * 3 * d + 2 * 2 * b * t * t * d + 2 * b * t * d * d + 2 * 2 * b * t * d * 64
    assert ours == 2 * b * t * d * 3 * 16 + 2 * per_block + 2 * b * d * 10


def test_transformer_lm_forward_agrees_with_flop_counter_mode():
    model = TransformerLM(TransformerConfig(vocab_size=30, d_model=32, n_layers=2, n_heads=4, causal=False,
                                            positions="learned", max_seq_len=16)).eval()  # fmt: skip
    ids = torch.randint(0, 30, (2, 9))
    with torch.no_grad(), MatmulFlopCounter() as c:
        model(ids)
    # FlopCounterMode (this torch, CPU) does not see the attention kernel that F.scaled_dot_product_attention
    # dispatches to, so it misses QKᵀ and AV; everything else agrees, and those two are the closed form
    assert c.by_op["sdpa"] == 2 * (2 * 2 * 4 * 9 * 9 * (8 + 8))
    assert c.total - c.by_op["sdpa"] == _reference(model, ids)


def test_counter_accumulates_and_resets():
    lin = torch.nn.Linear(4, 4)
    with MatmulFlopCounter() as c:
        lin(torch.randn(1, 4))
        lin(torch.randn(1, 4))
    assert c.total == 2 * 2 * 16 and c.by_op["linear"] == c.total
    c.reset()
    assert c.total == 0
    with MatmulFlopCounter() as c:  # an outer product of three vectors: element-wise, no product counted
        torch.einsum("i,j,k->ijk", torch.ones(2), torch.ones(2), torch.ones(2))
    assert not c.uncounted and c.total == _reference(torch.einsum, "i,j,k->ijk", *[torch.ones(2)] * 3) == 0


def test_bad_fn():
    with pytest.raises(TypeError, match="fn"):
        count_flops(3)


def test_grouped_query_sdpa_counts_each_query_head():
    # 9 query heads share 3 key/value heads (SmolLM2-135M's layout): one L × S map per query head
    b, hq, hkv, L, S, E, Ev = 2, 9, 3, 5, 7, 8, 6
    q, k, v = torch.randn(b, hq, L, E), torch.randn(b, hkv, S, E), torch.randn(b, hkv, S, Ev)
    closed = 2 * b * hq * L * S * (E + Ev)
    sdpa = F.scaled_dot_product_attention
    assert count_flops(sdpa, q, k, v, enable_gqa=True) == closed
    assert (
        count_flops(sdpa, q, k, v, None, 0.0, True, enable_gqa=True, scale=0.3) == closed
    )  # mask/causal positional
    assert count_flops(sdpa, query=q, key=k, value=v, attn_mask=None, enable_gqa=True) == closed
    assert count_flops(sdpa, q, key=k, value=v, enable_gqa=True) == closed
    # the same products with k and v repeated to q's head count, as eager attention does
    assert count_flops(sdpa, q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1)) == closed
    # batch broadcasting (q's batch 1 against k's 3): one map per output row
    q1, k3 = torch.randn(1, 4, L, E), torch.randn(3, 4, S, E)
    assert count_flops(sdpa, q1, k3, k3) == 2 * 3 * 4 * L * S * (2 * E)


def test_grouped_query_heads_without_enable_gqa_raise_torchs_error():
    # mismatched head counts without enable_gqa are torch's error, raised unchanged (nothing counted)
    q, k = torch.randn(1, 9, 5, 8), torch.randn(1, 3, 7, 8)
    with MatmulFlopCounter() as c, pytest.raises(RuntimeError, match="size of tensor"):
        F.scaled_dot_product_attention(q, k, k)
    assert c.total == 0


@pytest.mark.parametrize("with_mask", [False, True])
def test_llama_gqa_sdpa_counts_as_eager(with_mask):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=40, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=32)  # fmt: skip
    torch.manual_seed(0)
    ids = torch.randint(0, 40, (2, 9))
    kwargs = {"attention_mask": torch.ones_like(ids)} if with_mask else {}
    totals = {}
    for impl in ("sdpa", "eager"):
        config._attn_implementation = impl
        model = transformers.LlamaForCausalLM(config).eval()
        with torch.no_grad(), MatmulFlopCounter() as c:
            model(ids, **kwargs)
        totals[impl] = c
    assert totals["sdpa"].by_op["sdpa"] > 0 and totals["eager"].by_op["sdpa"] == 0  # the two paths did differ
    assert totals["sdpa"].total == totals["eager"].total
    # per layer: QKᵀ and AV over 6 query heads of dim 8, L = S = 9
    assert totals["sdpa"].by_op["sdpa"] == 2 * (2 * 2 * 6 * 9 * 9 * (8 + 8))


def test_addmm_family_closed_forms_and_reference():
    a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(3, 5)
    b1, b2, bc = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(2, 3, 5)
    # (fn, args, closed form, whether FlopCounterMode has a formula: it counts 0 for the in-place variants,
    # addbmm, mv and addmv, so those are checked against the closed form only)
    cases = [
        (torch.addmm, (c, a, b), 2 * 3 * 4 * 5, True),
        (lambda: c.addmm(a, b, beta=0.5, alpha=2.0), (), 2 * 3 * 4 * 5, True),
        (lambda: c.clone().addmm_(a, b), (), 2 * 3 * 4 * 5, False),
        (lambda: torch.addmm(c, mat1=a, mat2=b), (), 2 * 3 * 4 * 5, True),
        (torch.baddbmm, (bc, b1, b2), 2 * 2 * 3 * 4 * 5, True),
        (lambda: bc.clone().baddbmm_(b1, b2), (), 2 * 2 * 3 * 4 * 5, False),
        (torch.addbmm, (c, b1, b2), 2 * 2 * 3 * 4 * 5, False),
        (torch.mm, (a, b), 2 * 3 * 4 * 5, True),
        (torch.mv, (a, torch.randn(4)), 2 * 3 * 4, False),
        (torch.addmv, (torch.randn(3), a, torch.randn(4)), 2 * 3 * 4, False),
    ]
    for fn, args, closed, torch_counts in cases:
        assert count_flops(fn, *args) == closed, fn
        assert _reference(fn, *args) == (closed if torch_counts else 0), fn
    assert count_flops(torch.dot, torch.randn(7), torch.randn(7)) == 2 * 7


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_and_transposed_conv_agree_with_flop_counter_mode(transposed):
    cls = torch.nn.ConvTranspose2d if transposed else torch.nn.Conv2d
    conv = cls(6, 4, kernel_size=3, stride=2, groups=2)
    x = torch.randn(2, 6, 7, 7)
    assert count_flops(conv, x) == _reference(conv, x) > 0


_LETTERS = "abcdef"


@st.composite
def _einsum_cases(draw):
    sizes = {ch: draw(st.integers(1, 4)) for ch in _LETTERS}
    n_ops = draw(st.integers(1, 4))
    terms = [draw(st.lists(st.sampled_from(_LETTERS), min_size=0, max_size=3)) for _ in range(n_ops)]
    used = sorted({ch for t in terms for ch in t})
    out = draw(st.lists(st.sampled_from(used), unique=True, max_size=len(used))) if used else []
    explicit = draw(st.booleans())
    equation = ",".join("".join(t) for t in terms) + ("->" + "".join(out) if explicit else "")
    operands = [torch.randn(tuple(sizes[ch] for ch in t)) for t in terms]
    return equation, operands


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=_einsum_cases())
def test_einsum_any_operands_agrees_with_flop_counter_mode(case):
    # ATen's einsum runs one bmm per contracted pair (FlopCounterMode counts those); diagonals, sums and
    # element-wise pairs are no products; the order follows opt_einsum's path for three or more operands
    equation, operands = case
    assert count_flops(torch.einsum, equation, *operands) == _reference(torch.einsum, equation, *operands)


def test_einsum_ellipsis_sublist_and_list_forms():
    a, b, c = torch.randn(2, 3, 4), torch.randn(4, 5), torch.randn(5, 6)
    assert count_flops(torch.einsum, "...ij,jk->...ik", a, b) == 2 * 2 * 3 * 4 * 5
    assert count_flops(torch.einsum, "bij,jk,kl->bil", [a, b, c]) == _reference(
        torch.einsum, "bij,jk,kl->bil", a, b, c
    )
    assert count_flops(torch.einsum, a, [0, 1, 2], b, [2, 3], [0, 1, 3]) == 2 * 2 * 3 * 4 * 5
    # a label only one operand has is summed out before the product (ATen), not multiplied through
    assert count_flops(torch.einsum, "ij,jk->k", torch.randn(3, 4), b) == 2 * 4 * 5


def _mha_closed(length, n, e, source, kdim, vdim, extra_keys=0):
    return 2 * length * n * e * e + 2 * source * n * (kdim + vdim) * e + 4 * n * length * (source + extra_keys) * e \
        + 2 * length * n * e * e  # fmt: skip


@pytest.mark.parametrize("kwargs", [{}, {"kdim": 6, "vdim": 10}, {"add_bias_kv": True}, {"add_zero_attn": True},
                                    {"batch_first": True}])  # fmt: skip
def test_multihead_attention_closed_form_and_reference(kwargs):
    e, h, length, source, n = 16, 4, 5, 7, 3
    mha = torch.nn.MultiheadAttention(e, h, **kwargs).eval()
    kdim, vdim = kwargs.get("kdim", e), kwargs.get("vdim", e)
    first = kwargs.get("batch_first", False)
    shape = (lambda t, d: (n, t, d)) if first else (lambda t, d: (t, n, d))
    q, k, v = (
        torch.randn(*shape(length, e)),
        torch.randn(*shape(source, kdim)),
        torch.randn(*shape(source, vdim)),
    )
    extra = int(bool(kwargs.get("add_bias_kv"))) + int(bool(kwargs.get("add_zero_attn")))
    closed = _mha_closed(length, n, e, source, kdim, vdim, extra)
    # need_weights=True runs bmm/baddbmm, which FlopCounterMode counts: the two agree exactly
    assert count_flops(mha, q, k, v) == _reference(lambda: mha(q, k, v)) == closed
    mask = torch.zeros(length, source)  # before bias_k / the zero key are appended
    assert count_flops(mha, q, k, v, attn_mask=mask) == closed  # the baddbmm path
    # need_weights=False runs scaled_dot_product_attention, whose CPU kernel FlopCounterMode does not see
    assert count_flops(mha, q, k, v, need_weights=False) == closed
    with MatmulFlopCounter() as c:
        mha(q, k, v, need_weights=False)
    assert c.by_op["attention"] == closed and c.total == closed  # counted once, not also through its insides


def test_multihead_attention_unbatched_and_self_attention():
    mha = torch.nn.MultiheadAttention(8, 2).eval()
    x = torch.randn(6, 8)  # unbatched (L, E)
    assert count_flops(mha, x, x, x) == _mha_closed(6, 1, 8, 6, 8, 8) == _reference(lambda: mha(x, x, x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_layers_count_attention_and_feed_forward(norm_first):
    d, h, ff, b, length, mem = 16, 4, 32, 2, 5, 3
    enc = torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True, norm_first=norm_first)
    x = torch.randn(b, length, d)
    closed = _mha_closed(length, b, d, length, d, d) + 2 * (2 * b * length * d * ff)
    for mode in (enc.eval, enc.train):  # eval would take the fused fast path without a torch-function mode
        mode()
        assert count_flops(enc, x) == closed
    # FlopCounterMode (train mode: no fused path) sees all but the attention kernel: QKᵀ and AV
    assert _reference(enc, x) == closed - 4 * b * length * length * d
    dec = torch.nn.TransformerDecoderLayer(d, h, ff, dropout=0.0, batch_first=True).eval()
    memory = torch.randn(b, mem, d)
    closed_dec = (_mha_closed(length, b, d, length, d, d) + _mha_closed(length, b, d, mem, d, d)
                  + 2 * (2 * b * length * d * ff))  # fmt: skip
    assert count_flops(dec, x, memory) == closed_dec
    stack = torch.nn.TransformerEncoder(enc, num_layers=2, enable_nested_tensor=False).eval()
    assert count_flops(stack, x) == 2 * closed


def test_uncountable_products_raise_or_are_listed_never_zero():
    x = torch.randn(2, 3, 4)
    cases = [
        lambda: torch.tensordot(x, torch.randn(4, 5), dims=1),
        lambda: torch.nn.functional.bilinear(torch.randn(2, 3), torch.randn(2, 4), torch.randn(5, 3, 4)),
        lambda: torch.nn.LSTM(4, 6)(x),
        lambda: torch.linalg.solve(torch.eye(3) * 2, torch.randn(3, 2)),
        lambda: torch.inner(x, x),
        lambda: torch.cdist(x, x),
        lambda: torch.fft.rfft(x),
        lambda: torch.linalg.multi_dot([torch.randn(2, 3), torch.randn(3, 4), torch.randn(4, 5)]),
    ]
    for fn in cases:
        with pytest.raises(UncountedOpError, match="no FLOP formula"), torch.no_grad():
            count_flops(fn)
        with (
            pytest.warns(RuntimeWarning, match="not counted"),
            torch.no_grad(),
            MatmulFlopCounter(strict=False) as c,
        ):
            fn()
        assert c.uncounted
    # the fused kernels behind nn.MultiheadAttention / nn.TransformerEncoderLayer's fast paths
    assert _looks_like_product("_native_multi_head_attention") and _looks_like_product(
        "_transformer_encoder_layer_fwd"
    )
    with pytest.raises(TypeError, match="strict"):
        MatmulFlopCounter(strict=1)


def test_element_wise_ops_are_not_flagged():
    for name in ["add", "mul", "softmax", "layer_norm", "gelu", "cat", "__getitem__", "sum", "upsample_bilinear2d",
                 "mvlgamma", "fftfreq", "slice_inverse", "interpolate", "embedding", "cross_entropy", "lgamma",
                 "cumsum", "topk", "scatter_reduce", "argsort", "gather", "__get__", "normalize", "cosine_similarity"]:  # fmt: skip
        assert not _looks_like_product(name), name
    x = torch.randn(2, 4, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            count_flops(
                lambda: torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear").softmax(-1)
            )
            == 0
        )
