"""Fuzz cases for the advisedRFLVM entry points (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.gp import SpectralMixtureKernel
from icml24.gp.advised_rflvm import (
    AdvisedRFLVM,
    linear_gplvm_closed_form,
    linear_gplvm_loglik,
    rflvm_elbo,
    rflvm_official_loss,
)

D64 = torch.float64
RNG = np.random.default_rng(0)
DATA = RNG.normal(size=(12, 4)) @ np.diag([3.0, 1.0, 0.5, 0.2])
DATA_MISSING = DATA.copy()
DATA_MISSING[0, 1] = np.nan
G = torch.Generator().manual_seed(0)
YT = torch.randn(12, 4, generator=G, dtype=D64)
MEAN = torch.randn(12, 2, generator=G, dtype=D64)
STD = torch.full((12, 2), 0.3, dtype=D64)
EPS_X = torch.randn(12, 2, generator=G, dtype=D64)
EPS_W = torch.randn(2, 3, 2, generator=G, dtype=D64)
KERNEL = SpectralMixtureKernel(n_components=2, input_dim=2)
NOISE = torch.tensor(0.2, dtype=D64)
BAD_DATA = [DATA[:, 0], DATA[:1], np.full((12, 4), np.inf), np.array([["a"] * 4] * 12), None, np.zeros((12, 0))]
SMALL = {"n_iter": 3, "n_frequencies": 3, "n_eval_draws": 2, "transform_n_iter": 3, "random_state": 0}
FITTED = AdvisedRFLVM(2, **SMALL).fit(DATA)


def fit(X, n_components=2, kernel="sm", n_mixtures=2, n_frequencies=3, noise_variance=None, learn_noise=True,
        kl_weight=1.0, objective="elbo", n_iter=3, learning_rate=0.01, scaling="frobenius", n_eval_draws=2,
        transform_n_iter=3, random_state=0):  # fmt: skip
    """AdvisedRFLVM(...).fit(X): scikit-learn estimators check their parameters in fit."""
    return AdvisedRFLVM(n_components, kernel=kernel, n_mixtures=n_mixtures, n_frequencies=n_frequencies,
                        noise_variance=noise_variance, learn_noise=learn_noise, kl_weight=kl_weight,
                        objective=objective, n_iter=n_iter, learning_rate=learning_rate, scaling=scaling,
                        n_eval_draws=n_eval_draws, transform_n_iter=transform_n_iter,
                        random_state=random_state).fit(X)  # fmt: skip


def transform(X):
    """A fitted AdvisedRFLVM's transform(X) (new rows: the MAP search)."""
    return FITTED.transform(X)


def impute(X):
    """A fitted AdvisedRFLVM's impute(X) (X must be the training data)."""
    return FITTED.impute(X)


FUZZ_CASES = [
    dict(fn=fit, args=(DATA,), covers=(AdvisedRFLVM,),
         invalid={"X": BAD_DATA, "n_components": [0, 5, 1.5, "2", True], "kernel": ["matern", None],
                  "n_mixtures": [0, 2.5], "n_frequencies": [0, -3, "3"], "noise_variance": [0.0, -1.0, float("nan"), "1"],
                  "learn_noise": ["yes", None], "kl_weight": [-1.0, float("nan"), float("inf"), "1"],
                  "objective": ["paper", None], "n_iter": [0, 2.5], "learning_rate": [0.0, -0.1, float("inf")],
                  "scaling": ["minmax"], "n_eval_draws": [0], "transform_n_iter": [-1, 1.5],
                  "random_state": [-1, "seed", 1.5]},
         allowed={"X": "NaN marks a missing entry (inf is refused)"}),
    dict(fn=fit, args=(DATA,), kwargs={"objective": "official"}, invalid={"X": [DATA_MISSING]},
         allowed={"X": "NaN marks a missing entry, which the official loss refuses with a clear error"}),
    dict(fn=transform, args=(DATA[:3] + 0.1,),
         invalid={"X": [DATA[:3, :2], DATA[0], np.full((2, 4), np.inf), None, "x"]},
         allowed={"X": "NaN marks a missing entry (inf is refused)"}),
    dict(fn=impute, args=(DATA,), invalid={"X": [DATA + 1.0, DATA[:5], "x"]},
         allowed={"X": "NaN marks a missing entry"}),
    dict(fn=rflvm_elbo, args=(YT, MEAN, STD, KERNEL, NOISE), kwargs={"eps_x": EPS_X, "eps_omega": EPS_W},
         invalid={"y": [YT[:3], YT[:, 0], "y", None], "latent_mean": [MEAN[:3], MEAN[:, 0], None],
                  "latent_std": [-STD, STD[:3], None], "noise": [torch.tensor(0.0, dtype=D64), -NOISE, "n", None],
                  "eps_x": [EPS_X[:3], None], "eps_omega": [EPS_W[:1], None], "kl_weight": [-1.0, "1", None],
                  "kernel": ["sm", None], "mask": [torch.ones(3, 3, dtype=torch.bool)], "dense": ["yes"]}),
    dict(fn=rflvm_official_loss, args=(YT, MEAN, STD, KERNEL, NOISE), kwargs={"eps_x": EPS_X, "eps_omega": EPS_W},
         invalid={"y": [YT[:3], "y", None], "latent_mean": [MEAN[:3], None], "latent_std": [-STD, None],
                  "noise": [torch.tensor(0.0, dtype=D64), -NOISE, None], "eps_x": [EPS_X[:3]],
                  "eps_omega": [EPS_W[:1], None], "kernel": ["sm", None]}),
    dict(fn=linear_gplvm_closed_form, args=(DATA, 2),
         invalid={"y": [DATA[:, 0], "y", None], "n_components": [0, 12, 1.5, "2", True],
                  "noise_variance": [0.0, -1.0, "1"]}),
    dict(fn=linear_gplvm_loglik, args=(MEAN, YT, 0.3),
         invalid={"x": [MEAN[:3], "x", None], "y": [YT[:3], None], "noise_variance": [0.0, -1.0, "1", None]}),
]
