"""Non-finite inputs to the kernels, likelihoods, KL terms and KEP-SVGP attention raise a clear error
instead of silently propagating NaN (issue 5: "non-finite data: a clear error")."""

from __future__ import annotations

import pytest
import torch

from icml24.gp import gaussian as G
from icml24.gp import kernels as K
from icml24.gp.kep_svgp.attention import KEPSVGPAttention

D64 = torch.float64


def _x(bad: float | None = None) -> torch.Tensor:
    x = torch.randn(5, 2, dtype=D64, generator=torch.Generator().manual_seed(0))
    if bad is not None:
        x[1, 0] = bad
    return x


SM = {"weights": torch.ones(1, dtype=D64), "means": torch.zeros(1, 2, dtype=D64), "variances": torch.ones(1, 2, dtype=D64)}


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_kernels_reject_non_finite_inputs(bad):
    with pytest.raises(ValueError, match="x1 must be finite"):
        K.rbf_kernel(_x(bad), _x(), lengthscale=1.0)
    with pytest.raises(ValueError, match="x2 must be finite"):
        K.sm_kernel(_x(), _x(bad), **SM)
    with pytest.raises(ValueError, match="x must be finite"):
        K.sm_random_features(_x(bad), eps=torch.randn(1, 4, 2, dtype=D64), **SM)


def test_likelihoods_and_kl_reject_non_finite_inputs():
    y = torch.randn(5, 3, dtype=D64)
    y_bad = y.clone()
    y_bad[0, 0] = float("nan")
    phi = torch.randn(5, 4, dtype=D64)
    with pytest.raises(ValueError, match="y must be finite"):
        G.gaussian_loglik_lowrank(y_bad, phi, 0.1)
    with pytest.raises(ValueError, match="phi must be finite"):
        G.gaussian_loglik_lowrank(y, phi * float("inf"), 0.1)
    with pytest.raises(ValueError, match="noise must be finite"):
        G.gaussian_loglik_lowrank(y, phi, float("nan"))
    with pytest.raises(ValueError, match="y must be finite"):
        G.gaussian_loglik_dense(y_bad, torch.eye(5, dtype=D64))
    with pytest.raises(ValueError, match="mean must be finite"):
        G.kl_diag_normal_std(torch.tensor([float("nan")]), torch.tensor([1.0]))
    # finite inputs still work
    assert torch.isfinite(G.gaussian_loglik_lowrank(y, phi, 0.1))


def test_kep_attention_rejects_non_finite_tokens():
    layer = KEPSVGPAttention(dim=8, num_heads=2, seq_len=4, rank=2, rank_multi=2)
    x = torch.randn(2, 4, 8)
    assert layer(x).shape == (2, 4, 8)
    x[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match="x must be finite"):
        layer(x)
