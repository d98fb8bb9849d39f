"""KEP-SVGP attention: KL against torch.distributions, deterministic limit, shapes, asymmetry, regulariser,
gradcheck, drop-in use in the tiny ViT, and bad input."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.gp.kep_svgp import KEPSVGPAttention, kep_layers, kep_svgp_loss
from icml24.vision.tiny_vit import TinyViT

D64 = torch.float64


def _layer(concat=False, dtype=torch.float32, seed=0, **kw):
    torch.manual_seed(seed)
    args = {"dim": 8, "num_heads": 2, "seq_len": 6, "rank": 3, "rank_multi": 1, "concat": concat, **kw}
    return KEPSVGPAttention(**args).to(dtype)


def _x(b=2, n=6, c=8, dtype=torch.float32, seed=1):
    return torch.randn(b, n, c, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("concat", [False, True])
def test_shapes_and_positivity(concat):
    layer = _layer(concat)
    x = _x()
    assert layer(x).shape == x.shape
    e, r = layer.eigen_features(x)
    assert e.shape == r.shape == (2, 2, 6, 3)
    var = layer.predictive_variance(x)
    assert var.shape == (2, 2, 12 if concat else 6, 3) and bool((var >= 0).all())
    assert bool((layer.lambda_diag > 0).all())
    chol = layer.chol_factors()
    assert bool((torch.diagonal(chol, dim1=-2, dim2=-1) > 0).all())
    assert torch.equal(chol, torch.tril(chol))


def test_kl_against_torch_distributions_and_zero_at_prior():
    layer = _layer(dtype=D64)
    lam = layer.lambda_diag
    ref = 0.0
    for h in range(layer.num_heads):
        prior = torch.distributions.MultivariateNormal(torch.zeros(3, dtype=D64), covariance_matrix=torch.diag(lam[h] ** 2))
        for c in range(layer.rank):
            q = torch.distributions.MultivariateNormal(layer.m_u[h, :, c], scale_tril=layer.chol_factors()[h, c])
            ref = ref + torch.distributions.kl_divergence(q, prior)
    kl = float(layer.kl_divergence().detach())
    assert kl == pytest.approx(float(ref.detach()), rel=1e-10)
    assert kl > 0
    with torch.no_grad():  # q(u) = p(u) = N(0, Λ²): m = 0, L_c = Λ.
        layer.m_u.zero_()
        layer.chol_offdiag.zero_()
        layer.log_chol_diag.copy_(torch.log(layer.lambda_diag).unsqueeze(1).expand_as(layer.log_chol_diag))
    assert abs(float(layer.kl_divergence().detach())) < 1e-10


def test_deterministic_limit_and_mc_mean():
    layer = _layer(dtype=D64).eval()
    x = _x(dtype=D64)
    layer.sample = False
    a, b = layer(x), layer(x)
    assert torch.equal(a, b)
    layer.sample = True
    torch.manual_seed(3)
    assert not torch.equal(layer(x), layer(x))
    # The output is linear in the posterior sample, so the mean over draws converges to the mean path.
    with torch.no_grad():  # one batched forward of 2000 copies = 2000 independent draws
        draws = layer(x.repeat(2000, 1, 1)).reshape(2000, *x.shape)
    se = draws.std(0) / 2000**0.5
    assert bool(((draws.mean(0) - a).abs() <= 5 * se + 1e-12).all())
    # Fixed noise makes a sampled forward deterministic; zero noise is the mean path.
    _, _, z_l = layer.posterior(x)
    noise = torch.randn_like(z_l)
    assert torch.equal(layer(x, noise=noise), layer(x, noise=noise))
    torch.testing.assert_close(layer(x, noise=torch.zeros_like(z_l)), a)


def test_attention_kernel_asymmetric_and_symmetric_with_tied_maps():
    layer = _layer(dtype=D64)
    x = _x(dtype=D64)
    k = layer.attention_kernel(x)
    assert (k - k.transpose(-1, -2)).abs().max() > 1e-3
    with torch.no_grad():  # φ_q = φ_k and Ŵ_e = Ŵ_r: symmetric kernel and e = r.
        layer.qk.weight[8:] = layer.qk.weight[:8]
        layer.wr.copy_(layer.we)
    k = layer.attention_kernel(x)
    torch.testing.assert_close(k, k.transpose(-1, -2))
    e, r = layer.eigen_features(x)
    torch.testing.assert_close(e, r)


def test_ksvd_regulariser_matches_an_explicit_loop_and_is_non_negative():
    # J >= 0 alone cannot fail (J is a square); check its value against a per-head, per-token loop of the
    # notes' formula [½ mean ||Λ^{-1/2} e||² + ½ mean ||Λ^{-1/2} r||² - mean_h tr(Ŵ_eᵀ Ŵ_r)]².
    for seed in range(3):
        layer = _layer(dtype=D64, seed=seed)
        x = _x(dtype=D64, seed=seed + 10) * (seed + 1)
        layer(x)
        with torch.no_grad():
            e, r = layer.eigen_features(x)
            lam = layer.lambda_diag
        b, h, n, _ = e.shape
        e_sum = r_sum = 0.0
        for bi in range(b):
            for hi in range(h):
                for ni in range(n):
                    e_sum += float((e[bi, hi, ni] ** 2 / lam[hi]).sum())
                    r_sum += float((r[bi, hi, ni] ** 2 / lam[hi]).sum())
        trace = sum(float(torch.trace(layer.we[hi].T @ layer.wr[hi]).detach()) for hi in range(h)) / h
        ref = (0.5 * e_sum / (b * h * n) + 0.5 * r_sum / (b * h * n) - trace) ** 2
        j = float(layer.ksvd_loss().detach())
        assert j == pytest.approx(ref, rel=1e-10)
        assert j >= 0.0


@pytest.mark.parametrize("concat", [False, True])
def test_gradcheck_double(concat):
    layer = _layer(concat, dtype=D64, dim=4, seq_len=3, rank=2)
    x = _x(1, 3, 4, dtype=D64).requires_grad_(True)
    _, _, z_l = layer.posterior(x)
    noise = torch.randn(z_l.shape, generator=torch.Generator().manual_seed(5), dtype=D64)
    assert torch.autograd.gradcheck(lambda inp: layer(inp, noise=noise), (x,), eps=1e-6, atol=1e-5)
    assert torch.autograd.gradcheck(lambda inp: (layer(inp, noise=noise), layer.ksvd_loss())[1], (x,), eps=1e-6, atol=1e-5)


def test_drop_in_tiny_vit_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = TinyViT(dim=8, depth=2, num_heads=2, mlp_dim=16, num_classes=3,
                    attention_factory=lambda i: KEPSVGPAttention(dim=8, num_heads=2, seq_len=16, rank=3, rank_multi=2,
                                                                 concat=i == 0))  # fmt: skip
    images = torch.rand(4, 1, 8, 8)
    logits = model(images)
    assert logits.shape == (4, 3)
    layers = kep_layers(model)
    assert len(layers) == 2
    loss, parts = kep_svgp_loss(logits, torch.tensor([0, 1, 2, 0]), layers, eta_ksvd=1.0, eta_kl=1.0)
    loss.backward()
    assert set(parts) == {"ce", "ksvd", "kl"} and parts["kl"] > 0
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert missing == []


def test_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        KEPSVGPAttention(dim=10, num_heads=3, seq_len=4)
    with pytest.raises(ValueError, match="rank"):
        KEPSVGPAttention(dim=8, num_heads=2, seq_len=4, rank=0)
    layer = _layer()
    with pytest.raises(ValueError, match=r"shape \(B, 6, 8\)"):
        layer(torch.zeros(2, 5, 8))
    with pytest.raises(ValueError, match=r"shape \(B, 6, 8\)"):
        layer(torch.zeros(6, 8))
    with pytest.raises(ValueError, match="noise"):
        layer(_x(), noise=torch.zeros(1))
    with pytest.raises(RuntimeError, match="forward"):
        _layer().ksvd_loss()


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 3), heads=st.integers(1, 3), head_dim=st.integers(1, 4), n=st.integers(1, 9),
       rank=st.integers(1, 4), rank_multi=st.integers(1, 3), concat=st.booleans(), seed=st.integers(0, 1000))  # fmt: skip
def test_property_shapes_and_signs(b, heads, head_dim, n, rank, rank_multi, concat, seed):
    torch.manual_seed(seed)
    dim = heads * head_dim
    layer = KEPSVGPAttention(dim=dim, num_heads=heads, seq_len=n, rank=rank, rank_multi=rank_multi, concat=concat)
    x = torch.randn(b, n, dim)
    out = layer(x)
    assert out.shape == (b, n, dim) and bool(torch.isfinite(out).all())
    assert layer.n_landmarks == min(n, rank * rank_multi)
    assert float(layer.kl_divergence().detach()) >= 0.0
    assert float(layer.ksvd_loss().detach()) >= 0.0
    assert bool((layer.predictive_variance(x) >= 0).all())
