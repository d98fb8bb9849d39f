"""Flow sanity (density integrates to one, fits a target), the synthetic generator, the KDE cross-check."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml24.subgroups.syflow import TARGETS, fit_density, kde_kl, make_planted_subgroup, make_spline_flow
from icml24.subgroups.syflow.baselines import gaussian_kl
from icml24.subgroups.syflow.flows import log_density


def test_flow_density_integrates_to_one_and_fits_a_bimodal_target():
    g = torch.Generator().manual_seed(0)
    y = torch.cat([torch.randn(600, generator=g) * 0.4 - 1.5, torch.randn(600, generator=g) * 0.4 + 1.5])[:, None]
    flow = make_spline_flow(1, bins=8)
    nll = fit_density(flow, y, epochs=300, lr=5e-2)
    assert nll[-1] < nll[0] - 0.2
    grid = torch.linspace(-12, 12, 24001)[:, None]
    with torch.no_grad():
        dens = log_density(flow, grid).exp().numpy()
    assert np.trapezoid(dens, grid[:, 0].numpy()) == pytest.approx(1.0, abs=2e-3)
    # bimodal: more density at the modes than between them
    with torch.no_grad():
        at = log_density(flow, torch.tensor([[-1.5], [0.0], [1.5]])).exp().numpy()
    assert at[0] > 2 * at[1] and at[2] > 2 * at[1]
    # sample mean matches the density's mean
    with torch.no_grad():
        sample = flow().sample((20000,))
    mean_density = np.trapezoid(dens * grid[:, 0].numpy(), grid[:, 0].numpy())
    assert float(sample.mean()) == pytest.approx(mean_density, abs=0.05)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_generator_plants_a_tenth_inside_the_box_and_nothing_else_there(target):
    d = make_planted_subgroup(4000, 6, 3, target, seed=3)
    frac = d.members.mean()
    assert abs(frac - 0.1) < 3 * np.sqrt(0.1 * 0.9 / 4000)
    inside = np.all((d.X[:, d.features] >= d.intervals[:, 0]) & (d.X[:, d.features] < d.intervals[:, 1]), axis=1)
    assert np.array_equal(inside, d.members)
    assert np.prod(d.intervals[:, 1] - d.intervals[:, 0]) == pytest.approx(0.1)
    assert ((d.y[~d.members] >= 0) & (d.y[~d.members] <= 1)).all()


def test_variance_only_target_keeps_the_population_mean():
    d = make_planted_subgroup(40000, 4, 2, "variance", seed=0)
    inside, outside = d.y[d.members], d.y[~d.members]
    assert abs(inside.mean() - outside.mean()) < 0.05
    assert inside.std() > 4 * outside.std()


def test_kde_kl_matches_the_gaussian_closed_form():
    rng = np.random.default_rng(0)
    pop = rng.normal(0, 1, 20000)
    sub = rng.normal(1.0, 0.5, 2000)
    # KL(N(1, .25) || pop), pop is N(0, 1) here (the subgroup is not part of it: a clean closed form)
    assert kde_kl(sub, pop) == pytest.approx(gaussian_kl(1.0, 0.5, 0.0, 1.0), abs=0.08)
    same = rng.normal(0, 1, 2000)
    assert abs(kde_kl(same, pop)) < 0.05
