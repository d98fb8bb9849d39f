"""Token matching and merging against naive loops, closed forms and the paper's invariants (notes §7)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.multimodal.crossget.merging import (
    bipartite_soft_matching,
    complete_graph_soft_matching,
    cross_guided_importance,
    merge_tokens,
    random_drop,
)
from icml24.multimodal.crossget.model import _attention


def _protected(t: int) -> torch.Tensor:
    p = torch.zeros(t, dtype=torch.bool)
    p[0] = p[-1] = True
    return p


def _naive_complete(metric, r, protected, importance):
    """The algorithm of the paper / reducer.py written as plain loops over one sequence."""
    t = metric.shape[0]
    m = (metric / metric.norm(dim=-1, keepdim=True)).tolist()
    s = [[math.fsum(a * b for a, b in zip(m[i], m[j], strict=True)) for j in range(t)] for i in range(t)]
    for i in range(t):
        for j in range(t):
            if i == j or protected[i] or protected[j]:
                s[i][j] = -math.inf
    r = min(r, int((~protected).sum()) // 2)
    g = [max(row) for row in s]
    order = sorted(range(t), key=lambda i: -g[i])
    rank = {i: p for p, i in enumerate(order)}
    score = []
    for i in range(t):
        later = [s[i][j] for j in range(t) if rank[j] > rank[i]]
        best = max(later) if later else -math.inf
        imp = 0.0 if importance is None else float(importance[i])
        score.append(imp - best)
    src = sorted(range(t), key=lambda i: score[i])[:r]
    keep = [i for i in range(t) if i not in src]
    dst = [keep[max(range(len(keep)), key=lambda p: s[a][keep[p]])] for a in src]
    return set(src), dict(zip(src, dst, strict=True))


def _naive_bipartite(metric, r, protected):
    t = metric.shape[0]
    m = metric / metric.norm(dim=-1, keepdim=True)
    a_set, b_set = list(range(0, t, 2)), list(range(1, t, 2))
    r = min(r, int((~protected).sum()) // 2, t // 2)
    best = {}
    for a in a_set:
        cands = [(float(m[a] @ m[b]), b) for b in b_set if not protected[a] and not protected[b]]
        best[a] = max(cands) if cands else (-math.inf, None)
    src = sorted(a_set, key=lambda a: -best[a][0])[:r]
    return set(src), {a: best[a][1] for a in src}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("with_importance", [False, True])
def test_complete_graph_matches_the_naive_algorithm(seed, with_importance):
    g = torch.Generator().manual_seed(seed)
    b, t, c, r = 3, 11, 5, 4
    metric = torch.randn(b, t, c, generator=g, dtype=torch.float64)
    prot = _protected(t)
    imp = torch.rand(b, t, generator=g, dtype=torch.float64) if with_importance else None
    plan = complete_graph_soft_matching(metric, r, protected=prot, importance=imp)
    for i in range(b):
        src, dst = _naive_complete(metric[i], r, prot, None if imp is None else imp[i])
        assert set(plan.src[i].tolist()) == src
        got = {int(a): int(plan.keep[i, p]) for a, p in zip(plan.src[i], plan.dst[i], strict=True)}
        assert got == dst


@pytest.mark.parametrize("seed", range(5))
def test_bipartite_matches_the_naive_algorithm(seed):
    g = torch.Generator().manual_seed(seed)
    b, t, c, r = 2, 12, 4, 5
    metric = torch.randn(b, t, c, generator=g, dtype=torch.float64)
    prot = _protected(t)
    plan = bipartite_soft_matching(metric, r, protected=prot)
    for i in range(b):
        src, dst = _naive_bipartite(metric[i], r, prot)
        assert set(plan.src[i].tolist()) == src
        got = {int(a): int(plan.keep[i, p]) for a, p in zip(plan.src[i], plan.dst[i], strict=True)}
        assert got == dst


def _plans(metric, r, prot, imp):
    yield bipartite_soft_matching(metric, r, protected=prot)
    yield complete_graph_soft_matching(metric, r, protected=prot)
    yield complete_graph_soft_matching(metric, r, protected=prot, importance=imp)
    yield random_drop(metric.shape[0], metric.shape[1], r, protected=prot, generator=torch.Generator().manual_seed(0))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(t=st.integers(3, 20), r=st.integers(0, 12), c=st.integers(1, 6), b=st.integers(1, 3), seed=st.integers(0, 999))
def test_plan_invariants(t, r, c, b, seed):
    """Protected tokens stay; sources are distinct, never destinations; order kept; sizes add up."""
    g = torch.Generator().manual_seed(seed)
    metric = torch.randn(b, t, c, generator=g, dtype=torch.float64)
    x = torch.randn(b, t, 3, generator=g, dtype=torch.float64)
    size = torch.randint(1, 4, (b, t), generator=g).double()
    prot = _protected(t)
    imp = torch.rand(b, t, generator=g, dtype=torch.float64)
    for plan in _plans(metric, r, prot, imp):
        rr = plan.r
        assert rr == min(r, (t - 2) // 2)
        for i in range(b):
            src, keep = plan.src[i].tolist(), plan.keep[i].tolist()
            assert len(set(src)) == rr and not set(src) & set(keep) and len(keep) == t - rr
            assert keep == sorted(keep) and 0 in keep and t - 1 in keep
            assert all(0 <= d < t - rr for d in plan.dst[i].tolist())
        x2, s2 = merge_tokens(x, size, plan)
        assert x2.shape == (b, t - rr, 3)
        if plan.drop:
            torch.testing.assert_close(s2, size.gather(1, plan.keep))
        else:
            torch.testing.assert_close(s2.sum(1), size.sum(1))
        # protected tokens: never merged into (destinations are unprotected), so unchanged
        torch.testing.assert_close(x2[:, 0], x[:, 0])
        torch.testing.assert_close(x2[:, -1], x[:, -1])


def test_merge_is_the_size_weighted_mean_and_the_weighted_rule_as_in_code():
    """Brute force of both merge rules, including two sources sharing one destination."""
    from icml24.multimodal.crossget.merging import MergePlan

    x = torch.tensor([[[1.0, 0.0], [2.0, 2.0], [4.0, 0.0], [0.0, 8.0], [3.0, 3.0]]], dtype=torch.float64)
    size = torch.tensor([[1.0, 2.0, 1.0, 3.0, 1.0]], dtype=torch.float64)
    # sources 2 and 3 both go into token 1 (position 1 among kept [0, 1, 4])
    plan = MergePlan(src=torch.tensor([[2, 3]]), keep=torch.tensor([[0, 1, 4]]), dst=torch.tensor([[1, 1]]))
    out, s = merge_tokens(x, size, plan)
    expected = (2 * x[0, 1] + 1 * x[0, 2] + 3 * x[0, 3]) / 6
    torch.testing.assert_close(out[0, 1], expected)
    torch.testing.assert_close(s, torch.tensor([[1.0, 6.0, 1.0]], dtype=torch.float64))
    w = torch.tensor([[[0.5, 1.5], [1.2, 0.8]]], dtype=torch.float64)
    plan_w = MergePlan(src=plan.src, keep=plan.keep, dst=plan.dst, weight=w)
    out_w, _ = merge_tokens(x, size, plan_w)
    # reducer.py: s_b x_b + Σ_a [w_a s_a x_a + (w_b,a - 1) s_b x_b], over the new size
    num = 2 * x[0, 1] + (0.5 * 1 * x[0, 2] + 0.5 * 2 * x[0, 1]) + (1.2 * 3 * x[0, 3] + (0.8 - 1) * 2 * x[0, 1])
    torch.testing.assert_close(out_w[0, 1], num / 6)
    # one source: (w_a s_a x_a + w_b s_b x_b) / (s_a + s_b); equal weights give the plain mean
    one = MergePlan(src=torch.tensor([[2]]), keep=torch.tensor([[0, 1, 3, 4]]), dst=torch.tensor([[1]]),
                    weight=torch.tensor([[[1.0, 1.0]]], dtype=torch.float64))  # fmt: skip
    out1, _ = merge_tokens(x, size, one)
    torch.testing.assert_close(out1[0, 1], (2 * x[0, 1] + x[0, 2]) / 3)


def test_identical_tokens_merge_to_themselves():
    x = torch.randn(1, 6, 4, dtype=torch.float64)
    x[0, 3] = x[0, 2]
    metric = x.clone()
    imp = torch.rand(1, 6, dtype=torch.float64)
    for plan in (bipartite_soft_matching(metric, 1, protected=_protected(6)),
                 complete_graph_soft_matching(metric, 1, protected=_protected(6), importance=imp)):  # fmt: skip
        out, s = merge_tokens(x, torch.ones(1, 6, dtype=torch.float64), plan)
        # the duplicate pair is the most similar one, so it is merged; the result equals the token
        assert set(plan.src[0].tolist()) | {int(plan.keep[0, plan.dst[0, 0]])} == {2, 3}
        assert any(torch.allclose(out[0, j], x[0, 2]) and s[0, j] == 2 for j in range(5))


def test_proportional_attention_makes_a_merged_duplicate_exact():
    """A sequence with token x twice (sizes 1, 1) attends like the sequence with x once and size 2."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    k_dup, v_dup = torch.cat([k, k[:, 2:3]], 1), torch.cat([v, v[:, 2:3]], 1)
    full = _attention(q, k_dup, v_dup, heads=2, bias=torch.zeros(2, 1, 6, dtype=torch.float64))
    size = torch.ones(2, 5, dtype=torch.float64)
    size[:, 2] = 2
    merged = _attention(q, k, v, heads=2, bias=size.log()[:, None, :])
    torch.testing.assert_close(full, merged)


def test_r_zero_is_the_identity_and_importance_is_a_cosine():
    x = torch.randn(2, 7, 3)
    for plan in _plans(x, 0, _protected(7), torch.rand(2, 7)):
        out, s = merge_tokens(x, torch.ones(2, 7), plan)
        torch.testing.assert_close(out, x)
        torch.testing.assert_close(s, torch.ones(2, 7))
    keys, q = torch.randn(2, 7, 3), torch.randn(2, 3)
    imp = cross_guided_importance(keys, q)
    torch.testing.assert_close(imp, torch.nn.functional.cosine_similarity(keys, q[:, None], dim=-1))


def test_ensemble_weights_are_twice_a_softmax_of_importance():
    g = torch.Generator().manual_seed(3)
    metric = torch.randn(2, 9, 4, generator=g)
    imp = torch.rand(2, 9, generator=g)
    plan = complete_graph_soft_matching(metric, 3, protected=_protected(9), importance=imp)
    dst_orig = plan.keep.gather(1, plan.dst)
    expected = 2 * torch.stack([imp.gather(1, plan.src), imp.gather(1, dst_orig)], -1).softmax(-1)
    torch.testing.assert_close(plan.weight, expected)
    assert complete_graph_soft_matching(metric, 3, protected=_protected(9), importance=imp,
                                        weighted_ensemble=False).weight is None  # fmt: skip


def test_importance_steers_sources_to_unimportant_tokens():
    """Two equally redundant pairs: the pair with lower importance is merged."""
    x = torch.zeros(1, 7, 4)
    x[0, 1] = x[0, 2] = torch.tensor([1.0, 0, 0, 0])
    x[0, 3] = x[0, 4] = torch.tensor([0, 1.0, 0, 0])
    x[0, 5] = torch.tensor([0, 0, 1.0, 0])
    x[0, 0] = x[0, 6] = torch.tensor([0, 0, 0, 1.0])
    imp = torch.tensor([[0.0, 0.9, 0.9, -0.9, -0.9, 0.0, 0.0]])
    plan = complete_graph_soft_matching(x, 1, protected=_protected(7), importance=imp)
    assert plan.src[0, 0].item() in (3, 4)
    imp2 = -imp
    plan2 = complete_graph_soft_matching(x, 1, protected=_protected(7), importance=imp2)
    assert plan2.src[0, 0].item() in (1, 2)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: complete_graph_soft_matching(torch.randn(4, 3), 1), "metric"),
        (lambda: complete_graph_soft_matching(torch.randn(1, 4, 3), -1), "r"),
        (lambda: bipartite_soft_matching(torch.full((1, 4, 3), math.nan), 1), "metric"),
        (lambda: complete_graph_soft_matching(torch.randn(1, 4, 3), 1, importance=torch.randn(4)), "importance"),
        (lambda: bipartite_soft_matching(torch.randn(1, 4, 3), 1, protected=torch.zeros(5, dtype=torch.bool)),
         "protected"),
        (lambda: random_drop(2, 5, 1, protected=torch.zeros(5)), "protected"),
        (lambda: random_drop(2, -5, 1), "tokens"),
        (lambda: cross_guided_importance(torch.randn(2, 4, 3), torch.randn(2, 4)), "cross_query"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()
