"""The rule layer's invariants (notes Sec. 7: hard limit, range, order, harmonic-mean bounds, projection,
rule consistency) and the objective's sanity."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml24.subgroups.syflow import Condition, Rule, SoftIntervalRule, harmonic_conjunction, soft_bin_middle
from icml24.subgroups.syflow.search import _kl_objective

D64 = torch.float64


def _rule(d=4, seed=0, temperature=1e-3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(500, d, generator=g, dtype=D64)
    r = SoftIntervalRule(x.min(0).values, x.max(0).values, temperature=temperature)
    r.double()
    with torch.no_grad():
        r.cut_points.copy_(torch.sort(torch.randn(d, 2, generator=g, dtype=D64), dim=1).values)
    return r, x


def test_soft_bin_is_the_interval_indicator_away_from_the_cut_points():
    x = torch.linspace(-3, 3, 601, dtype=D64)[:, None]
    cuts = torch.tensor([[-1.0, 0.5]], dtype=D64)
    T = 1e-3
    pi = soft_bin_middle(x, cuts, T)[:, 0]
    far = ((x[:, 0] + 1).abs() > 10 * T) & ((x[:, 0] - 0.5).abs() > 10 * T)
    indicator = ((x[:, 0] > -1) & (x[:, 0] < 0.5)).to(D64)
    assert torch.allclose(pi[far], indicator[far], atol=1e-4)
    # At a cut point the soft bin is one half (two equal logits).
    assert soft_bin_middle(torch.tensor([[-1.0]], dtype=D64), cuts, 0.1)[0, 0] == pytest.approx(0.5, abs=1e-6)


def test_low_temperature_conjunction_is_the_and_of_the_indicators():
    r, x = _rule()
    with torch.no_grad():
        s = r(x)
    cp = r.cut_points.detach()
    inside = ((x > cp[:, 0]) & (x < cp[:, 1])).all(1)
    margin = torch.minimum((x - cp[:, 0]).abs(), (x - cp[:, 1]).abs()).min(1).values > 10 * r.temperature
    assert torch.allclose(s[margin], inside[margin].to(D64), atol=1e-3)


def test_membership_is_in_unit_interval_and_single_feature_rule_is_its_bin():
    r, x = _rule(temperature=0.3)
    with torch.no_grad():
        s = r(x)
        assert (s >= 0).all() and (s <= 1).all()
        r.importance_raw.copy_(torch.tensor([0.0, 2.0, 0.0, -1.0], dtype=D64))
        s1 = r(x)
        pi = soft_bin_middle(x, r.cut_points, r.temperature)
        assert torch.allclose(s1, pi[:, 1], atol=1e-4)
        # a zero-importance feature does not affect s
        x2 = x.clone()
        x2[:, 0] = 100.0
        assert torch.allclose(r(x2), s1)


def test_feature_permutation_leaves_membership_unchanged():
    r, x = _rule(temperature=0.3)
    perm = torch.tensor([2, 0, 3, 1])
    r2 = SoftIntervalRule(x.min(0).values[perm], x.max(0).values[perm], temperature=0.3).double()
    with torch.no_grad():
        r.importance_raw.copy_(torch.tensor([0.5, 1.0, 2.0, 0.3], dtype=D64))
        r2.cut_points.copy_(r.cut_points[perm])
        r2.importance_raw.copy_(r.importance_raw[perm])
        assert torch.allclose(r(x), r2(x[:, perm]))


def test_harmonic_mean_lies_between_min_and_weighted_mean():
    g = torch.Generator().manual_seed(1)
    pi = torch.rand(200, 5, generator=g, dtype=D64) * 0.98 + 0.01
    a = torch.rand(5, generator=g, dtype=D64) + 0.1
    s, _ = harmonic_conjunction(pi, a, eps=0.0)
    assert (s >= pi.min(1).values - 1e-12).all()
    assert (s <= (pi @ a) / a.sum() + 1e-12).all()


def test_projection_sorts_and_clamps():
    r, x = _rule()
    with torch.no_grad():
        r.cut_points.copy_(torch.tensor([[5.0, -5.0], [100.0, 200.0], [0.1, 0.2], [-100.0, 0.0]], dtype=D64))
    r.project()
    cp = r.cut_points.detach()
    assert (cp[:, 0] <= cp[:, 1]).all()
    assert (cp >= r.limits[:, :1]).all() and (cp <= r.limits[:, 1:]).all()


def test_readable_rule_reproduces_the_hard_membership_at_low_temperature():
    r, x = _rule(temperature=1e-3)
    rule = r.rule()
    with torch.no_grad():
        hard = (r(x) > 0.5).numpy()
    assert np.mean(rule.covers(x.numpy()) == hard) >= 0.99


def test_rule_is_expressed_in_original_units():
    r, x = _rule(d=2, temperature=1e-3)
    mean, scale = np.array([10.0, -3.0]), np.array([2.0, 0.5])
    rule = r.rule(feature_names=["age", "bmi"], mean=mean, scale=scale)
    raw = x.numpy() * scale + mean
    assert np.array_equal(rule.covers(raw), r.rule().covers(x.numpy()))
    assert all(c.name in ("age", "bmi") for c in rule.conditions)


def test_rule_objects_read_and_evaluate():
    rule = Rule((Condition(0, "age", 30.0, 45.0), Condition(2, "bmi", None, 25.0)))
    assert str(rule) == "30 < age < 45 AND bmi < 25"
    X = np.array([[35, 0, 20], [50, 0, 20], [35, 0, 30]], dtype=float)
    assert rule.covers(X).tolist() == [True, False, False]
    assert rule.features == (0, 2)
    assert Rule(()).covers(X).all() and str(Rule(())) == "(everything)"


def test_objective_is_zero_when_the_subgroup_density_is_the_population_density_and_scales_with_size():
    g = torch.Generator().manual_seed(0)
    s = torch.rand(300, generator=g, dtype=D64)
    ll_pop = torch.randn(300, generator=g, dtype=D64)
    assert float(_kl_objective(s, ll_pop, ll_pop.clone(), 0.5)) == pytest.approx(0.0, abs=1e-10)
    ll_s = torch.randn(300, generator=g, dtype=D64)
    one = float(_kl_objective(s, ll_pop, ll_s, 0.5))
    two = float(_kl_objective(torch.cat([s, s]), torch.cat([ll_pop, ll_pop]), torch.cat([ll_s, ll_s]), 0.5))
    assert two == pytest.approx(one * 2**0.5, rel=1e-9)  # duplicating the data: (sum s)^alpha grows by 2^alpha
