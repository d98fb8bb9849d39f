"""Fuzz cases for syflow's exported callables (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.subgroups.syflow import (
    Condition,
    Rule,
    SoftIntervalRule,
    SyflowConfig,
    SyflowSubgroupDiscovery,
    discover_subgroups,
    fit_density,
    gaussian_kl,
    harmonic_conjunction,
    kde_kl,
    make_planted_subgroup,
    make_spline_flow,
    prim_box,
    sd_kl,
    sd_mean,
    soft_bin_middle,
)

RNG = np.random.default_rng(0)
X = RNG.uniform(size=(60, 3))
Y = RNG.normal(size=60)
TINY = SyflowConfig(n_subgroups=1, pop_epochs=2, epochs=4)
XT = torch.randn(20, 3, generator=torch.Generator().manual_seed(0))
CUTS = torch.tensor([[-1.0, 1.0]] * 3)


def fit(X, y, n_subgroups=1, alpha=0.5, lambd=1.0, bins=8, pop_epochs=2, epochs=4, temperature=0.2):
    """SyflowSubgroupDiscovery(...).fit(X, y): scikit-learn estimators check their parameters in fit."""
    return SyflowSubgroupDiscovery(n_subgroups, alpha=alpha, lambd=lambd, bins=bins, pop_epochs=pop_epochs,
                                   epochs=epochs, temperature=temperature).fit(X, y)  # fmt: skip


FUZZ_CASES = [
    dict(fn=fit, args=(X, Y), covers=("SyflowSubgroupDiscovery",),
         invalid={"X": [X[:, 0], np.full((60, 3), np.nan), None], "y": [Y[:10], np.full(60, np.inf)],
                  "n_subgroups": [0, 1.5], "alpha": [-0.1, 2.0], "bins": [1], "epochs": [-1], "temperature": [0.0]}),
    dict(fn=discover_subgroups, args=(X, Y, TINY),
         invalid={"X": [X[:, 0], X[:1], np.full((60, 3), np.inf)], "y": [Y[:5], np.full(60, np.nan)],
                  "config": [{"n_subgroups": 1}], "feature_names": [["a"]], "seed": [1.5]}),
    dict(fn=SyflowConfig, kwargs={"n_subgroups": 1},
         invalid={"n_subgroups": [0], "alpha": [1.5, -1.0], "lambd": [-1.0], "bins": [1], "epochs": [-2],
                  "lr_flow": [0.0], "temperature": [-0.1]}),
    dict(fn=make_planted_subgroup, args=(200, 4, 2, "normal"),
         invalid={"n_samples": [5, 2.5], "n_features": [0], "n_conditions": [0, 9], "target": ["gamma"],
                  "seed": [1.5]}),
    dict(fn=make_spline_flow, args=(1,), invalid={"n_targets": [0, 1.5], "bins": [1], "n_layers": [0]}),
    dict(fn=fit_density, args=(make_spline_flow(1), torch.randn(10, 1)), kwargs={"epochs": 2},
         invalid={"epochs": [-1, 1.5], "lr": [0.0]}),
    dict(fn=SoftIntervalRule, args=(XT.min(0).values, XT.max(0).values),
         invalid={"lower": [torch.zeros(2)], "temperature": [0.0, -1.0]}),
    dict(fn=soft_bin_middle, args=(XT, CUTS, 0.2), invalid={"cut_points": [torch.zeros(2, 2)], "temperature": [0.0]}),
    dict(fn=harmonic_conjunction, args=(torch.rand(5, 3), torch.ones(3)),
         invalid={"importance": [torch.ones(2), -torch.ones(3)], "eps": [-1.0]}),
    dict(fn=Condition, args=(0, "x0", 0.0, 1.0), invalid={"feature": [-1, 1.5], "lower": [2.0]}),
    dict(fn=Rule, args=((Condition(0, "x0", 0.0, 1.0),),), invalid={"conditions": [("x",), None]}),
    dict(fn=sd_mean, args=(X, Y), kwargs={"beam_width": 3, "depth": 1, "nbins": 3},
         invalid={"X": [X[:, 0]], "y": [Y[:5]], "n_subgroups": [0], "alpha": [2.0], "depth": [0], "nbins": [0]}),
    dict(fn=sd_kl, args=(X, Y), kwargs={"beam_width": 3, "depth": 1, "nbins": 3},
         invalid={"X": [X[:, 0]], "alpha": [-1.0], "beam_width": [0]}),
    dict(fn=prim_box, args=(X, Y), invalid={"X": [X[:, 0]], "y": [Y[:3]], "peel_alpha": [0.0, 1.0], "min_support": [1.5]}),
    dict(fn=gaussian_kl, args=(0.0, 1.0, 0.0, 1.0), invalid={"sd_p": [0.0, -1.0], "sd_q": [0.0]}),
    dict(fn=kde_kl, args=(Y[:30], Y), invalid={"y_subgroup": [np.ones(10), Y[:2]], "y_population": [Y[:2]],
                                               "max_points": [0]}),
]

EXEMPT = {
    "BaselineSubgroup": "a plain result record returned by the baselines (rule, members, quality), never built from user input",
    "FoundSubgroup": "a result record built by discover_subgroups from its own validated state",
    "PlantedSubgroup": "a result record returned by make_planted_subgroup (which is fuzzed)",
    "SyflowResult": "a result record built by discover_subgroups (which is fuzzed)",
}
