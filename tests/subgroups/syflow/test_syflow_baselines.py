"""The baselines get the same care as the method: each finds what its quality can see, and misses what it cannot."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.subgroups.syflow import gaussian_kl, make_planted_subgroup, prim_box, sd_kl, sd_mean


def _f1(a, b):
    return 2 * np.sum(a & b) / (a.sum() + b.sum())


@pytest.fixture(scope="module")
def normal():
    return make_planted_subgroup(2000, 4, 1, "normal", seed=0)


@pytest.fixture(scope="module")
def variance():
    return make_planted_subgroup(2000, 4, 1, "variance", seed=0)


def test_sd_mean_finds_an_upward_mean_shift_and_its_rule_matches_its_members(normal):
    best = sd_mean(normal.X, normal.y, n_subgroups=2, alpha=1.0, beam_width=5, depth=2, nbins=20)[0]
    assert _f1(best.members, normal.members) > 0.7
    assert np.array_equal(best.rule.covers(normal.X), best.members)
    assert best.rule.features == normal.features


def test_sd_mean_cannot_see_a_variance_only_subgroup_but_sd_kl_can(variance):
    mu = sd_mean(variance.X, variance.y, n_subgroups=1, alpha=1.0, beam_width=5, depth=2, nbins=10)[0]
    # alpha 0.5: with alpha 1 the Gaussian KL prefers the large, pure-uniform rest of the data (KL 0.34 x 58%).
    # beam 20: the narrow box needs both of its one-sided selectors, and a 5-wide beam drops them at depth 1.
    kl = sd_kl(variance.X, variance.y, n_subgroups=1, alpha=0.5, beam_width=20, depth=2, nbins=20)[0]
    assert _f1(mu.members, variance.members) < 0.4
    assert _f1(kl.members, variance.members) > 0.7
    assert np.array_equal(kl.rule.covers(variance.X), kl.members)


def test_prim_peels_to_the_high_mean_box(normal):
    box = prim_box(normal.X, normal.y, min_support=0.1)
    assert _f1(box.members, normal.members) > 0.7
    assert box.members.mean() >= 0.1 - 1e-9


def test_gaussian_kl_closed_form():
    assert gaussian_kl(0.0, 1.0, 0.0, 1.0) == 0.0
    assert gaussian_kl(1.0, 1.0, 0.0, 1.0) == pytest.approx(0.5)
    assert gaussian_kl(0.0, 2.0, 0.0, 1.0) == pytest.approx(np.log(0.5) + 2.0 - 0.5)
