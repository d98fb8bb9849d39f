"""Privacy across calls (issue 42): one accountant per dataset, a second call without an explicit budget is
refused, the noise is calibrated on the stricter of two accountants, and Opacus's secure mode can be turned on.

Before: two calls on the same records each reported epsilon 3.99 while together they had spent 5.28, with no
warning; Opacus-calibrated runs reported "<= 8" read 8.001-8.013 in dp-accounting; secure mode could not be
turned on.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from icml24.privacy.vip import (
    DPConfig,
    MAEConfig,
    MAETrainConfig,
    MaskedAutoencoder,
    PrivacyAccount,
    PrivacyBudgetExceededError,
    calibrate_noise,
    epsilon_dp_accounting,
    epsilon_for,
    noise_multiplier_for,
    train_mae_private,
)

pytest.importorskip("opacus")
pytest.importorskip("dp_accounting")

pytestmark = [
    pytest.mark.filterwarnings("ignore:Secure RNG turned off"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
    pytest.mark.filterwarnings("ignore:Optimal order is the largest alpha"),
]
TINY = MAEConfig(image_size=8, patch_size=4, dim=8, depth=1, num_heads=2, decoder_dim=8, decoder_heads=2)
TRAIN = MAETrainConfig(steps=6, batch_size=40, lr=1e-3, warmup_steps=1)


@pytest.fixture(autouse=True)
def _fresh_process_accounts(monkeypatch):
    from icml24.privacy.vip import dp

    monkeypatch.setattr(dp, "_ACCOUNTS", {})


def _data(seed=0, n=200):
    return torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(seed))


def _model():
    torch.manual_seed(0)
    return MaskedAutoencoder(TINY)


def test_a_second_call_on_the_same_data_without_an_account_is_refused():
    x = _data()
    first = train_mae_private(_model(), x, TRAIN, DPConfig(target_epsilon=4.0), seed=0)
    with pytest.raises(PrivacyBudgetExceededError, match=r"already used .* spent epsilon 3\.9"):
        train_mae_private(
            _model(), x.clone(), TRAIN, DPConfig(target_epsilon=4.0), seed=1
        )  # same records, a copy
    # Other data is not affected.
    other = train_mae_private(_model(), _data(seed=1), TRAIN, DPConfig(target_epsilon=4.0), seed=0)
    assert other.epsilon == pytest.approx(first.epsilon)


def test_one_account_composes_the_calls_and_keeps_the_total_within_its_budget():
    account = PrivacyAccount(epsilon=7.0)
    x = _data(seed=2)
    b1 = train_mae_private(_model(), x, TRAIN, DPConfig(target_epsilon=4.0), seed=0, account=account)
    b2 = train_mae_private(_model(), x, TRAIN, DPConfig(target_epsilon=4.0), seed=1, account=b1.account)
    assert b1.account is account and account.calls == 2 and len(account.history) == 2
    tol = DPConfig().epsilon_tolerance
    assert b1.epsilon <= 4.0 and b1.epsilon_dp_accounting <= 4.0
    assert max(b1.epsilon, b1.epsilon_dp_accounting) > 4.0 - tol
    # The total over both calls is what the account reports, within the budget by both accountants: the second
    # call raised it by at most its 4 and not past the account's 7.
    target = 7.0
    assert b1.epsilon < b2.epsilon <= target and b2.epsilon == pytest.approx(account.spent())
    assert b2.epsilon_dp_accounting <= target and max(b2.epsilon, b2.epsilon_dp_accounting) > target - tol
    assert b2.epsilon_call == pytest.approx(b2.epsilon - b1.epsilon)
    # One call's epsilon alone understates what the data has spent.
    (_, _, _), (s2, q2, t2) = account.history
    assert b2.epsilon > epsilon_for(s2, q2, t2, account.delta) + 0.05
    # The exhausted account refuses the next call, before any step.
    with pytest.raises(PrivacyBudgetExceededError, match="nothing is left"):
        train_mae_private(_model(), x, TRAIN, DPConfig(target_epsilon=4.0), seed=2, account=account)
    assert account.calls == 2


def test_an_account_refuses_another_dataset():
    account = PrivacyAccount(epsilon=8.0)
    train_mae_private(_model(), _data(seed=3), TRAIN, DPConfig(), account=account)
    with pytest.raises(ValueError, match="account belongs to another dataset"):
        train_mae_private(_model(), _data(seed=4), TRAIN, DPConfig(), account=account)


def test_the_calibration_satisfies_the_stricter_accountant():
    """The quick setting (N = 15,000, q = 1/59, 60 steps, delta 1/(2N)): Opacus's own calibration reads above 8
    in dp-accounting; ours stays within 8 by both and within the tolerance of 8 by the stricter."""
    q, steps, delta = 1 / 59, 60, 1 / 30_000
    opacus_sigma = noise_multiplier_for(8.0, q, steps, delta)
    sigma = calibrate_noise(8.0, q, steps, delta)
    eps_o, eps_g = epsilon_for(sigma, q, steps, delta), epsilon_dp_accounting(sigma, q, steps, delta)
    assert max(eps_o, eps_g) <= 8.0 and 8.0 - 0.01 < max(eps_o, eps_g)
    assert sigma >= opacus_sigma * 0.99  # both bisections stop within the tolerance
    if epsilon_dp_accounting(opacus_sigma, q, steps, delta) > 8.0:  # what the issue measured (8.001-8.013)
        assert sigma > opacus_sigma


def test_calibration_with_history_spends_only_the_remainder():
    q, delta = 0.2, 1 / 400
    sigma1 = calibrate_noise(3.0, q, 6, delta)
    sigma2 = calibrate_noise(6.0, q, 6, delta, history=[(sigma1, q, 6)])
    from icml24.privacy.vip.dp import _epsilon_both

    total = max(_epsilon_both([(sigma1, q, 6), (sigma2, q, 6)], delta, "rdp"))
    assert 6.0 - 0.01 < total <= 6.0
    with pytest.raises(PrivacyBudgetExceededError):
        calibrate_noise(2.0, q, 6, delta, history=[(sigma1, q, 6)])


def test_secure_mode_reaches_opacus():
    """secure_mode=True asks Opacus for its cryptographically secure generator: without torchcsprng that is a
    clear ImportError naming it; with it, the run is not reproducible from the seed."""
    privacy = DPConfig(target_epsilon=4.0, secure_mode=True)
    if importlib.util.find_spec("torchcsprng") is None:
        with pytest.raises(ImportError, match="torchcsprng"):
            train_mae_private(_model(), _data(seed=5), TRAIN, privacy, seed=0)
    else:  # pragma: no cover - torchcsprng is not installed here
        a = train_mae_private(_model(), _data(seed=5), TRAIN, privacy, seed=0)
        assert a.secure_mode is True
    with pytest.raises(TypeError, match="secure_mode"):
        DPConfig(secure_mode="yes")


def test_account_arguments_name_themselves():
    with pytest.raises(ValueError, match="epsilon"):
        PrivacyAccount(epsilon=0.0)
    with pytest.raises(ValueError, match="delta"):
        PrivacyAccount(epsilon=1.0, delta=1.5)
    with pytest.raises(ValueError, match="accountant"):
        PrivacyAccount(epsilon=1.0, accountant="moments")
    with pytest.raises(TypeError, match="account"):
        train_mae_private(_model(), _data(), TRAIN, DPConfig(), account="mine")
