"""The decision primitives against statsmodels/scipy, their symmetry, their error rates and their power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttost_ind, ttost_paired

from icml24.common import decide
from icml24.common.experiment import ClaimCheck

RNG = np.random.default_rng(1234)
A = RNG.normal(1.0, 1.0, 12)
B = RNG.normal(0.3, 1.2, 12)


def test_paired_t_matches_statsmodels():
    d = decide.compare(A, B, paired=True, alternative="greater")
    ds = DescrStatsW(A - B)
    t, p, _ = ds.ttest_mean(0.0, alternative="larger")
    assert d.p_value == pytest.approx(p, rel=1e-10)
    lo, hi = ds.tconfint_mean(alpha=0.10)
    assert d.ci == pytest.approx((lo, hi), rel=1e-10)
    assert d.effect == pytest.approx((A - B).mean())
    assert d.ci_level == pytest.approx(0.90)
    assert d.n == 12


def test_welch_matches_statsmodels():
    d = decide.compare(A, B, paired=False, alternative="greater", margin=0.1)
    cm = CompareMeans(DescrStatsW(A), DescrStatsW(B))
    _, p, _ = cm.ttest_ind(alternative="larger", usevar="unequal", value=0.1)
    assert d.p_value == pytest.approx(p, rel=1e-9)
    assert d.ci == pytest.approx(cm.tconfint_diff(alpha=0.10, usevar="unequal"), rel=1e-9)


def test_tost_matches_statsmodels():
    x = RNG.normal(0.0, 0.1, 20)
    y = RNG.normal(0.01, 0.1, 20)
    d = decide.equivalence(x, y, margin=0.2, paired=True)
    p_sm = ttost_paired(x, y, -0.2, 0.2)[0]
    assert d.p_value == pytest.approx(p_sm, rel=1e-9)
    assert d.verdict == "supported"
    d2 = decide.equivalence(x, y, margin=0.2, paired=False)
    p_sm2 = ttost_ind(x, y, -0.2, 0.2, usevar="unequal")[0]
    assert d2.p_value == pytest.approx(p_sm2, rel=1e-9)
    far = decide.equivalence(x + 1.0, y, margin=0.2, paired=True)
    assert far.verdict == "not_supported"


def test_equivalence_margin_refutes_a_null_effect():
    x = RNG.normal(0.0, 0.05, 30)
    y = RNG.normal(0.0, 0.05, 30)
    without = decide.compare(x, y, paired=True)
    assert without.verdict == "inconclusive"  # absence of evidence only
    with_eq = decide.compare(x, y, paired=True, equivalence_margin=0.1)
    assert with_eq.verdict == "not_supported"  # evidence of absence


def test_rates_match_statsmodels_and_newcombe():
    d = decide.compare_rates(45, 50, 30, 50, alternative="greater")
    assert d.effect == pytest.approx(0.3)
    assert d.verdict == "supported"
    # Newcombe's hybrid score interval from the two Wilson intervals (Newcombe 1998, method 10).
    l1, u1 = proportion_confint(45, 50, alpha=0.10, method="wilson")
    l2, u2 = proportion_confint(30, 50, alpha=0.10, method="wilson")
    p1, p2 = 0.9, 0.6
    lo = p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    assert d.ci == pytest.approx((lo, hi), rel=1e-9)
    worse = decide.compare_rates(30, 50, 45, 50, alternative="greater")
    assert worse.verdict == "not_supported"
    same = decide.compare_rates(40, 400, 40, 400, alternative="greater", equivalence_margin=0.05)
    assert same.verdict == "not_supported"
    assert decide.compare_rates(4, 5, 3, 5).verdict == "inconclusive"


def test_rate_vs_value():
    assert decide.rate_vs_value(95, 100, 0.8).verdict == "supported"
    assert decide.rate_vs_value(60, 100, 0.8).verdict == "not_supported"
    assert decide.rate_vs_value(8, 10, 0.8).verdict == "inconclusive"
    d = decide.rate_vs_value(95, 100, 0.8)
    assert d.ci == pytest.approx(proportion_confint(95, 100, alpha=0.1, method="wilson"))


def test_trend_matches_ols_and_flat():
    x = np.repeat(np.arange(6.0), 3)
    y = 0.5 * x + RNG.normal(0, 0.3, x.size)
    d = decide.trend(x, y, claim="increasing")
    fit = OLS(y, np.column_stack([np.ones_like(x), x])).fit()
    assert d.effect == pytest.approx(fit.params[1])
    assert d.ci == pytest.approx(tuple(fit.conf_int(alpha=0.10)[1]), rel=1e-9)
    assert d.verdict == "supported"
    assert decide.trend(x, y, claim="decreasing").verdict == "not_supported"
    flat = decide.trend(x, 0.001 * x + RNG.normal(0, 0.01, x.size), claim="flat", margin=0.05)
    assert flat.verdict == "supported"
    assert decide.trend(x, y, claim="flat", margin=0.05).verdict == "not_supported"
    sp = decide.trend(x, y, claim="increasing", method="spearman")
    assert sp.verdict == "supported" and -1 <= sp.ci[0] <= sp.effect <= sp.ci[1] <= 1


def test_rank_tests():
    d = decide.compare(A + 2, B, paired=True, test="rank")
    assert d.verdict == "supported"
    u = decide.compare(A + 2, B, paired=False, test="rank")
    assert u.verdict == "supported" and u.ci[0] <= u.effect <= u.ci[1]
    assert decide.compare(A + 2, B, paired=True, test="rank") == d  # the bootstrap has a fixed seed


def test_no_spread_is_decided_by_the_sign():
    assert decide.compare([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], paired=True).verdict == "supported"
    assert decide.compare([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], paired=True).verdict == "not_supported"
    assert decide.compare([1.0, 1.0], [0.0, 0.0], paired=False).verdict == "supported"
    same = decide.compare([1.0, 1.0], [1.0, 1.0], paired=True, equivalence_margin=0.1)
    assert same.verdict == "not_supported"


def test_too_few_values_is_inconclusive_not_refuted():
    for d in (
        decide.compare([1.0], [0.0], paired=True),
        decide.compare([1.0, math.nan], [0.0, 0.0], paired=True),
        decide.compare([], [], paired=False),
        decide.trend([1.0, 2.0], [1.0, 2.0], claim="increasing"),
        decide.compare_rates(0, 0, 1, 2),
    ):
        assert d.verdict == "inconclusive"
        assert "too few" in d.rule
        check = d.to_check(id="x", claim="c")
        assert check.effect is None and check.ci is None


def test_nan_pairs_are_dropped():
    d = decide.compare([1.0, 2.0, math.nan, 3.0], [0.0, math.nan, 0.0, 1.0], paired=True)
    assert d.n == 2


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    st.lists(st.floats(-10, 10), min_size=2, max_size=12),
    st.lists(st.floats(-10, 10), min_size=2, max_size=12),
    st.booleans(),
    st.floats(-1, 1),
)
def test_symmetry_and_sanity(a, b, paired, margin):
    if paired:
        m = min(len(a), len(b))
        a, b = a[:m], b[:m]
    g = decide.compare(a, b, paired=paired, alternative="greater", margin=margin)
    mirror = decide.compare(b, a, paired=paired, alternative="less", margin=-margin)
    assert g.verdict == mirror.verdict
    if math.isfinite(g.p_value):
        assert 0 <= g.p_value <= 1 and 0 <= g.p_refute <= 1
        assert g.ci[0] <= g.effect + 1e-9 and g.effect <= g.ci[1] + 1e-9
        # The refuting test of "greater than margin" is the supporting test of "less than margin".
        less = decide.compare(a, b, paired=paired, alternative="less", margin=margin)
        assert g.p_refute == pytest.approx(less.p_value, abs=1e-12)
    assert not (g.p_value < 0.05 and g.p_refute < 0.05)


def test_type_one_error_and_power_of_compare():
    null = decide.power_of_compare(0.0, 1.0, 10, paired=True, n_sims=2000)
    assert 0.035 <= null.supported <= 0.065
    assert 0.035 <= null.not_supported <= 0.065  # symmetric: the same error rate both ways
    p = decide.power_of_compare(1.0, 1.0, 10, paired=True, n_sims=2000)
    exact = TTestPower().power(effect_size=1.0, nobs=10, alpha=0.05, alternative="larger")
    assert p.supported == pytest.approx(exact, abs=0.03)
    assert "power" in p.describe()


def test_power_of_rates():
    p = decide.power_of_rates(0.7, 0.5, 10, n_sims=500)
    assert 0.0 < p.supported < 0.6  # 10 seeds cannot reliably separate 0.7 from 0.5
    assert decide.power_of_rates(0.95, 0.5, 40, n_sims=300).supported > 0.9


def test_holm_matches_multipletests():
    ds = [decide.compare(A + s, B, paired=True) for s in (0.0, 0.3, 1.0)]
    adj = decide.holm(ds)
    ref = multipletests([d.p_value for d in ds], alpha=0.05, method="holm")[1]
    assert [d.p_value for d in adj] == pytest.approx(list(ref))
    assert all("Holm" in d.rule for d in adj)
    ps = [0.01, 0.04, 0.03, 0.005, 0.5, 0.04]
    assert decide._holm_adjust(ps) == pytest.approx(multipletests(ps, method="holm")[1])
    assert all(d.verdict == decide._verdict(d.p_value, d.p_refute, 0.05) for d in adj)


def _check(v: str, i: str, decisive: bool = True) -> ClaimCheck:
    return ClaimCheck(claim=i, verdict=v, evidence="", id=i, decisive=decisive)


def test_combine_rules():
    s, n, i = "supported", "not_supported", "inconclusive"
    assert decide.combine([_check(s, "a"), _check(s, "b")])[:2] == ("supported", ["a", "b"])
    assert decide.combine([_check(s, "a"), _check(n, "b")])[:2] == ("not_supported", ["b"])
    assert decide.combine([_check(s, "a"), _check(i, "b")])[:2] == ("inconclusive", ["b"])
    assert decide.combine([_check(s, "a"), _check(n, "b", decisive=False)])[0] == "supported"
    assert decide.combine([_check(i, "a"), _check(s, "b")], "any")[:2] == ("supported", ["b"])
    assert decide.combine([_check(n, "a"), _check(n, "b")], "any")[0] == "not_supported"
    assert decide.combine([_check(s, "a"), _check(s, "b"), _check(n, "c")], 2)[0] == "supported"
    assert decide.combine([_check(n, "a"), _check(n, "b"), _check(s, "c")], 2)[0] == "not_supported"
    assert decide.combine([])[0] == "inconclusive"
    verdict, _, text = decide.combine([_check(s, "a")])
    assert "supported if all 1" in text and "[" not in text
    a = decide.analysis([_check(s, "a"), _check(i, "b")], summary="x")
    assert a.verdict == "inconclusive" and a.decided_by == ["b"] and a.rule


def test_to_check_carries_the_numbers():
    d = decide.compare(A + 1, B, paired=True)
    c = d.to_check(id="better", claim="method beats baseline", evidence="accuracy", power=0.8)
    assert c.id == "better" and c.verdict == d.verdict and c.power == 0.8
    assert c.ci == pytest.approx(d.ci) and c.p_value == pytest.approx(d.p_value) and c.n == 12
    assert c.evidence.startswith("accuracy; mean difference")
    assert "alpha 0.05" in c.rule
    assert c.to_dict()["ci"] == list(c.ci)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: decide.compare([1, 2], [1, 2], paired=True, alpha=0.7), "alpha"),
        (lambda: decide.compare([1, 2], [1, 2], paired=True, alternative="two-sided"), "alternative"),
        (lambda: decide.compare([1, 2], [1, 2, 3], paired=True), "equal length"),
        (lambda: decide.compare("ab", [1, 2], paired=False), "method"),
        (lambda: decide.compare([1, math.inf], [1, 2], paired=False), "method"),
        (lambda: decide.compare([1, 2], [1, 2], paired=1), "paired"),
        (lambda: decide.compare([1, 2], [1, 2], paired=True, margin=math.nan), "margin"),
        (lambda: decide.compare([1, 2], [1, 2], paired=True, equivalence_margin=-1), "equivalence_margin"),
        (lambda: decide.compare([1, 2], [1, 2], paired=True, test="z"), "test"),
        (lambda: decide.compare_rates(5, 4, 1, 2), "k1"),
        (lambda: decide.compare_rates(1, 2, 1.5, 2), "k2"),
        (lambda: decide.rate_vs_value(1, 2, 1.5), "value"),
        (lambda: decide.trend([1, 2, 3], [1, 2], claim="increasing"), "equal length"),
        (lambda: decide.trend([1, 2, 3], [1, 2, 3], claim="up"), "claim"),
        (lambda: decide.trend([1, 2, 3], [1, 2, 3], claim="flat"), "margin"),
        (lambda: decide.equivalence([1, 2], [1, 2], margin=0), "margin"),
        (lambda: decide.combine([_check("supported", "a")], 3), "rule"),
        (lambda: decide.power(lambda d: "supported", lambda r: 0, n_sims=0), "n_sims"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
