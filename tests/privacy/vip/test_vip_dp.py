"""DP-SGD through Opacus: per-sample gradients, clipping, noise, accounting, and the hard budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.privacy.vip import (
    DPConfig,
    MAEConfig,
    MAETrainConfig,
    MaskedAutoencoder,
    PrivacyAccount,
    PrivacyBudgetExceededError,
    attach_budget_guard,
    epsilon_dp_accounting,
    epsilon_for,
    noise_multiplier_dp_accounting,
    noise_multiplier_for,
    random_masking,
    train_mae,
    train_mae_private,
)
from icml24.privacy.vip.mae import MaskTokenFill, mask_token_grad_sample

pytest.importorskip("opacus")
pytest.importorskip("dp_accounting")

# Opacus's notices that do not apply to these tests (see icml24.privacy.vip.dp._quiet_opacus).
pytestmark = [
    pytest.mark.filterwarnings("ignore:Secure RNG turned off"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
    pytest.mark.filterwarnings("ignore:Optimal order is the largest alpha"),
]
TINY = MAEConfig(image_size=8, patch_size=4, dim=8, depth=1, num_heads=2, decoder_dim=8, decoder_heads=2)


@pytest.fixture(autouse=True)
def _fresh_process_accounts(monkeypatch):
    """Each test starts as a fresh process would: no dataset has been spent on yet (the per-process record of
    spent datasets is what refuses a second call on the same data; tests/privacy/vip/test_vip_accounts.py)."""
    from icml24.privacy.vip import dp

    monkeypatch.setattr(dp, "_ACCOUNTS", {})


def _gsm(model):
    from opacus import GradSampleModule
    from opacus.grad_sample import register_grad_sampler

    register_grad_sampler(MaskTokenFill)(mask_token_grad_sample)
    return GradSampleModule(model, loss_reduction="mean")


def _flat_grad_samples(model) -> torch.Tensor:
    return torch.cat([p.grad_sample.reshape(p.grad_sample.shape[0], -1) for p in model.parameters() if p.requires_grad], 1)


def _setup(n=6, seed=0):
    torch.manual_seed(seed)
    model = MaskedAutoencoder(TINY)
    x = torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(seed + 1))
    masks = random_masking(n, TINY.num_patches, TINY.num_visible, generator=torch.Generator().manual_seed(seed + 2))
    return model, x, masks


def test_opacus_per_sample_gradients_match_one_sample_at_a_time():
    """Opacus's hooks (Linear, LayerNorm, Conv2d, our mask token) against autograd one image at a time."""
    model, x, masks = _setup()
    gsm = _gsm(model)
    gsm(x, masks).mean().backward()
    got = _flat_grad_samples(model)
    params = [p for p in model.parameters() if p.requires_grad]
    for i in range(len(x)):
        one = tuple(m[i : i + 1] for m in masks)
        grads = torch.autograd.grad(model(x[i : i + 1], one).sum(), params)
        torch.testing.assert_close(got[i], torch.cat([g.reshape(-1) for g in grads]), rtol=1e-4, atol=1e-6)
    gsm.to_standard_module()


def _dp_optimizer(model, *, sigma, clip, batch):
    from opacus.optimizers import DPOptimizer

    return DPOptimizer(torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1),
                       noise_multiplier=sigma, max_grad_norm=clip, expected_batch_size=batch)  # fmt: skip


def test_clipping_bounds_every_per_sample_gradient():
    """Opacus's flat clipping: each image's clipped gradient has norm <= C; unclipped ones are unchanged."""
    model, x, masks = _setup(n=8)
    gsm = _gsm(model)
    gsm(x, masks).mean().backward()
    norms = _flat_grad_samples(model).norm(dim=1)
    clip = float(norms.median())  # half the images are clipped
    assert (norms > clip).any() and (norms <= clip).any()
    params = [p for p in model.parameters() if p.requires_grad]
    for i in range(len(x)):
        model.zero_grad(set_to_none=True)
        for p in params:
            p.grad_sample = None
        opt = _dp_optimizer(model, sigma=0.0, clip=clip, batch=1)
        gsm(x[i : i + 1], tuple(m[i : i + 1] for m in masks)).mean().backward()
        raw = _flat_grad_samples(model)[0].clone()
        opt.clip_and_accumulate()  # before any noise
        clipped = torch.cat([p.summed_grad.reshape(-1) for p in params])
        assert float(clipped.norm()) <= clip * (1 + 1e-5)
        if float(raw.norm()) <= clip:
            torch.testing.assert_close(clipped, raw)
        else:
            torch.testing.assert_close(clipped, raw * clip / raw.norm(), rtol=1e-4, atol=1e-7)
    gsm.to_standard_module()


def test_no_noise_no_clipping_step_is_the_mean_gradient():
    """sigma = 0 and C = inf: the DP gradient is the average per-sample gradient of the same masks."""
    model, x, masks = _setup(n=5)
    params = [p for p in model.parameters() if p.requires_grad]
    reference = torch.autograd.grad(model(x, masks).mean(), params)
    gsm = _gsm(model)
    opt = _dp_optimizer(model, sigma=0.0, clip=1e9, batch=5)
    gsm(x, masks).mean().backward()
    assert opt.pre_step()
    for p, ref in zip(params, reference):
        torch.testing.assert_close(p.grad, ref, rtol=1e-4, atol=1e-6)
    gsm.to_standard_module()


def test_noise_std_is_sigma_times_clip():
    model, _, _ = _setup()
    params = [p for p in model.parameters() if p.requires_grad]
    sigma, clip = 0.7, 0.3
    opt = _dp_optimizer(model, sigma=sigma, clip=clip, batch=1)
    for p in params:
        p.summed_grad = torch.zeros_like(p)
    opt.add_noise()
    noise = torch.cat([p.grad.reshape(-1) for p in params])
    assert noise.numel() > 1000
    assert abs(float(noise.std()) / (sigma * clip) - 1) < 0.1
    assert abs(float(noise.mean())) < 4 * sigma * clip / math.sqrt(noise.numel())


def test_accountant_reproduces_the_laion_setting_and_agrees_with_dp_accounting():
    """The notes' LAION run (q = 98,304 / 2.33e8, sigma 0.48, T = 6,000, delta = 1/(2N)) spends epsilon 8."""
    n = 233_000_000
    q, delta = 98_304 / n, 1 / (2 * n)
    eps_opacus = epsilon_for(0.48, q, 6000, delta)
    eps_google = epsilon_dp_accounting(0.48, q, 6000, delta)
    assert abs(eps_opacus - 8.0) < 0.1 and abs(eps_google - 8.0) < 0.1
    assert abs(eps_opacus - eps_google) < 0.05


@pytest.mark.parametrize("batch,steps", [(1024, 60), (256, 400), (1024, 200), (4096, 100)])
def test_noise_multiplier_cross_check_against_dp_accounting(batch, steps):
    """The notes' miniature settings (N = 15,000, epsilon 8, delta 1/(2N)): Opacus's calibrated sigma and a
    bisection on Google's accountant agree within 2%."""
    n = 15_000
    q = 1 / math.ceil(n / batch)
    delta = 1 / (2 * n)
    sigma = noise_multiplier_for(8.0, q, steps, delta)
    other = noise_multiplier_dp_accounting(8.0, q, steps, delta)
    assert abs(sigma / other - 1) < 0.02
    assert 7.99 - 1e-9 <= epsilon_for(sigma, q, steps, delta) <= 8.0


@settings(max_examples=20, derandomize=True, deadline=None)
@given(sigma=st.floats(0.5, 3.0), q=st.floats(1e-3, 0.2), steps=st.integers(1, 500))
def test_epsilon_is_monotone(sigma, q, steps):
    delta = 1e-5
    eps = epsilon_for(sigma, q, steps, delta)
    assert epsilon_for(sigma, q, steps + 10, delta) >= eps - 1e-9
    assert epsilon_for(sigma, min(q * 1.5, 1.0), steps, delta) >= eps - 1e-9
    assert epsilon_for(sigma * 1.2, q, steps, delta) <= eps + 1e-9


def _private_data(n=200, seed=0):
    return torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(seed))


TRAIN = MAETrainConfig(steps=6, batch_size=40, lr=1e-3, warmup_steps=1)


def test_realised_epsilon_equals_target_within_tolerance():
    model = MaskedAutoencoder(TINY)
    privacy = DPConfig(target_epsilon=3.0, max_physical_batch_size=16)
    out = train_mae_private(model, _private_data(), TRAIN, privacy, seed=0)
    assert out.steps == TRAIN.steps == len(out.losses)
    # Calibrated on the stricter of the two accountants: both within the budget, the stricter within tolerance.
    assert out.epsilon <= privacy.target_epsilon and out.epsilon_dp_accounting <= privacy.target_epsilon
    strict = max(out.epsilon, out.epsilon_dp_accounting)
    assert privacy.target_epsilon - privacy.epsilon_tolerance < strict <= privacy.target_epsilon
    assert out.epsilon_call == out.epsilon and out.account.spent() == out.epsilon and out.secure_mode is False
    assert out.epsilon == pytest.approx(epsilon_for(out.noise_multiplier, out.sample_rate, TRAIN.steps, out.delta))
    assert out.delta == pytest.approx(1 / 400) and out.sample_rate == pytest.approx(1 / 5)
    # Poisson sampling: the logical batch size varies around qN = 40.
    assert len(set(out.batch_sizes)) > 1 and abs(np.mean(out.batch_sizes) - 40) < 15


def test_training_past_the_budget_is_refused():
    model = MaskedAutoencoder(TINY)
    seen = []
    with pytest.raises(PrivacyBudgetExceededError, match="budget"):
        train_mae_private(model, _private_data(), TRAIN, DPConfig(target_epsilon=3.0), seed=0, max_steps=TRAIN.steps + 3,
                          callback=lambda step, loss: seen.append(step))  # fmt: skip
    assert seen == list(range(1, TRAIN.steps + 1))  # every step within budget ran, the next was refused


def test_guard_refuses_before_the_update_is_applied():
    from opacus import PrivacyEngine
    from opacus.grad_sample import register_grad_sampler

    register_grad_sampler(MaskTokenFill)(mask_token_grad_sample)
    model, x, masks = _setup(n=4)
    engine = PrivacyEngine(accountant="rdp")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x), batch_size=2)
    gsm, opt, _ = engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
                                      data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)  # fmt: skip
    one_step = epsilon_for(1.0, 0.5, 1, 1e-5)
    guard = attach_budget_guard(opt, engine.accountant, sample_rate=0.5, epsilon=one_step * 0.99, delta=1e-5)
    before = [p.detach().clone() for p in model.parameters()]
    gsm(x, masks).mean().backward()
    with pytest.raises(PrivacyBudgetExceededError):
        opt.step()
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    assert guard.steps == 0 and len(engine.accountant.history) == 0


def test_private_training_is_deterministic_given_the_seed():
    def run():
        torch.manual_seed(0)
        model = MaskedAutoencoder(TINY)
        out = train_mae_private(model, _private_data(), TRAIN, DPConfig(target_epsilon=3.0), seed=5,
                                account=PrivacyAccount(epsilon=3.0))  # two declared releases, one each
        return out.losses, [p.detach().clone() for p in model.parameters()]

    (l1, p1), (l2, p2) = run(), run()
    assert l1 == l2 and all(torch.equal(a, b) for a, b in zip(p1, p2))


def test_non_private_training_lowers_the_loss():
    torch.manual_seed(0)
    model = MaskedAutoencoder(TINY)
    out = train_mae(model, _private_data(), MAETrainConfig(steps=60, batch_size=50, lr=3e-3, warmup_steps=2), seed=0)
    assert np.mean(out.losses[-10:]) < 0.8 * np.mean(out.losses[:5])


def test_bad_configs_name_the_argument():
    with pytest.raises(ValueError, match="target_epsilon"):
        DPConfig(target_epsilon=0.0)
    with pytest.raises(ValueError, match="delta"):
        DPConfig(delta=1.0)
    with pytest.raises(ValueError, match="accountant"):
        DPConfig(accountant="moments")
    with pytest.raises(ValueError, match="steps"):
        MAETrainConfig(steps=0)
    with pytest.raises(TypeError, match="model"):
        train_mae_private(torch.nn.Linear(2, 2), _private_data())


def test_calibration_is_what_make_private_with_epsilon_does():
    """Our sigma (Opacus's get_noise_multiplier fed the number of steps) equals the one Opacus's own
    make_private_with_epsilon picks for the same number of steps given as epochs."""
    from opacus import PrivacyEngine
    from opacus.grad_sample import register_grad_sampler

    register_grad_sampler(MaskTokenFill)(mask_token_grad_sample)
    data = _private_data(n=200)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=40)  # q = 1/5
    model = MaskedAutoencoder(TINY)
    engine = PrivacyEngine(accountant="rdp")
    _, opt, _ = engine.make_private_with_epsilon(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=loader, target_epsilon=3.0,
        target_delta=1 / 400, epochs=2, max_grad_norm=1.0,
    )  # fmt: skip
    assert opt.noise_multiplier == pytest.approx(noise_multiplier_for(3.0, 1 / 5, 10, 1 / 400))


def test_prv_accountant_is_no_looser_than_rdp():
    """Opacus's PRV accountant (numerical composition) gives an epsilon at most RDP's for the quick setting,
    and the two calibrations agree within 10% in sigma."""
    q, steps, delta = 1 / 59, 60, 1 / 30_000
    sigma = noise_multiplier_for(8.0, q, steps, delta)
    assert epsilon_for(sigma, q, steps, delta, accountant="prv") <= epsilon_for(sigma, q, steps, delta) + 1e-6
    assert abs(noise_multiplier_for(8.0, q, steps, delta, accountant="prv") / sigma - 1) < 0.1
