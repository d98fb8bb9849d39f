"""DP-SGD training of the MAE through Opacus, with a hard privacy budget (ViP Sec. 3).

Yu et al., "ViP: A Differentially Private Foundation Model for Computer Vision", ICML 2024
(https://arxiv.org/abs/2306.08842). The private stage of ViP is DP-AdamW on the MAE loss: each step
(i) samples a batch by Poisson sampling, every record independently with probability ``q``; (ii) computes
each sampled record's gradient ``g_i`` over all parameters jointly; (iii) clips it,
``g_i <- g_i min(1, C / ||g_i||_2)``; (iv) adds Gaussian noise, ``G = (sum_i g_i + sigma C xi) / (q N)`` with
``xi ~ N(0, I)``; (v) feeds ``G`` to AdamW (betas 0.9/0.95, weight decay 0.005 in the official code). The
privacy of ``T`` such steps is the Rényi-DP of the Poisson-subsampled Gaussian mechanism composed ``T`` times,
converted to ``(epsilon, delta)`` with ``delta = 1 / (2 N)`` (the paper: epsilon = 8 on LAION).

Here Opacus does all of it: :class:`opacus.PrivacyEngine` wraps the model (hook-based per-sample gradients,
:class:`~opacus.GradSampleModule`), the optimizer (:class:`~opacus.optimizers.DPOptimizer`: flat clipping,
noise, scaling by the expected batch size ``qN``) and the data loader (Poisson :class:`~opacus.data_loader.
DPDataLoader`); :class:`~opacus.utils.batch_memory_manager.BatchMemoryManager` splits the logical batch into
physical ones; the noise multiplier comes from Opacus's RDP accountant (:func:`noise_multiplier_for`, the
calibration ``make_private_with_epsilon`` uses, fed the number of steps rather than of epochs).
:func:`attach_budget_guard` makes the budget hard: a step that would take the spent epsilon past the target
raises :class:`PrivacyBudgetExceededError` before the update is applied.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from icml24.privacy.vip.mae import MaskedAutoencoder, MaskTokenFill, mask_token_grad_sample

__all__ = [
    "DPConfig",
    "MAETrainConfig",
    "PrivacyBudgetExceededError",
    "TrainResult",
    "attach_budget_guard",
    "epsilon_dp_accounting",
    "epsilon_for",
    "noise_multiplier_dp_accounting",
    "noise_multiplier_for",
    "train_mae",
    "train_mae_private",
]


# ---------------------------------------------------------------------------------------------- validation
def _real(name: str, value: object, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
          hi_open: bool = False, allow_inf: bool = False) -> float:  # fmt: skip
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not (allow_inf and v > 0)):
        raise ValueError(f"{name} must be finite{' or +inf' if allow_inf else ''}, got {value!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {value!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi:g}, got {value!r}")
    return v


def _int(name: str, value: object, lo: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


_ACCOUNTANTS = ("rdp", "prv")


def _accountant_name(value: object) -> str:
    if value not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(_ACCOUNTANTS)}, got {value!r}")
    return str(value)


# ---------------------------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class MAETrainConfig:
    """Optimisation of one MAE training stage (ViP's ``main_pretrain*.py``, shrunk to CPU scale)."""

    steps: int = 60
    """Optimizer steps ``T`` (the LAION run: about 6,000 at B = 98,304)."""
    batch_size: int = 1024
    """Batch size ``B``; in a private run the expected Poisson batch ``qN`` with ``q = 1/ceil(N/B)``."""
    lr: float = 2e-3
    """Peak AdamW learning rate (the code: ``blr * B / 256``; a fixed peak here, see the README)."""
    warmup_steps: int = 5
    """Linear warm-up steps before the cosine decay (the code warms up over 1,000 of 10,000 steps)."""
    weight_decay: float = 0.005
    """AdamW weight decay (0.005 in the DP recipe)."""
    beta1: float = 0.9
    """AdamW first-moment decay."""
    beta2: float = 0.95
    """AdamW second-moment decay (0.95 as in MAE and ViP)."""

    def __post_init__(self) -> None:
        _int("steps", self.steps)
        _int("batch_size", self.batch_size)
        _real("lr", self.lr, lo=0.0, lo_open=True)
        _int("warmup_steps", self.warmup_steps, 0)
        _real("weight_decay", self.weight_decay, lo=0.0)
        _real("beta1", self.beta1, lo=0.0, hi=1.0)
        _real("beta2", self.beta2, lo=0.0, hi=1.0)
        if self.beta1 == 1.0 or self.beta2 == 1.0:
            raise ValueError(f"beta1 and beta2 must be < 1, got {self.beta1}, {self.beta2}")

    def lr_factor(self, step: int) -> float:
        """Linear warm-up then cosine decay to 0 (MAE's ``adjust_learning_rate``), as a multiple of ``lr``."""
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        span = max(self.steps - self.warmup_steps, 1)
        return 0.5 * (1.0 + math.cos(math.pi * min(step - self.warmup_steps, span) / span))


@dataclass(frozen=True)
class DPConfig:
    """The privacy of a DP-SGD stage (ViP Sec. 3.1 and the repo's ``main_pretrain_vip.py``)."""

    target_epsilon: float = 8.0
    """Budget epsilon (the paper: 8)."""
    delta: float | None = None
    """Budget delta; ``None`` uses ``1 / (2 N)`` as the paper does."""
    max_grad_norm: float = 1.0
    """Clipping norm ``C`` of the flat per-sample gradient (the repo example: 0.1 at ViT-B scale)."""
    max_physical_batch_size: int = 256
    """Largest micro-batch whose per-sample gradients are held in memory at once (no effect on the maths)."""
    accountant: Literal["rdp", "prv"] = "rdp"
    """Opacus accountant that calibrates sigma and tracks the spent epsilon (the repo uses RDP)."""
    epsilon_tolerance: float = 0.01
    """Calibration tolerance: sigma is found so that the spent epsilon lies in ``(target - tol, target]``."""

    def __post_init__(self) -> None:
        _real("target_epsilon", self.target_epsilon, lo=0.0, lo_open=True)
        if self.delta is not None:
            _real("delta", self.delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        _real("max_grad_norm", self.max_grad_norm, lo=0.0, lo_open=True)
        _int("max_physical_batch_size", self.max_physical_batch_size)
        _accountant_name(self.accountant)
        _real("epsilon_tolerance", self.epsilon_tolerance, lo=0.0, lo_open=True)

    def delta_for(self, n_records: int) -> float:
        """``delta``, or ``1 / (2 N)`` when unset."""
        return self.delta if self.delta is not None else 1.0 / (2 * _int("n_records", n_records))


# ---------------------------------------------------------------------------------------------- accounting
def _check_accounting_args(noise_multiplier: float | None, sample_rate: float, steps: int, delta: float) -> None:
    if noise_multiplier is not None:
        _real("noise_multiplier", noise_multiplier, lo=0.0, lo_open=True)
    _real("sample_rate", sample_rate, lo=0.0, hi=1.0, lo_open=True)
    _int("steps", steps)
    _real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)


def epsilon_for(noise_multiplier: float, sample_rate: float, steps: int, delta: float, *,
                accountant: Literal["rdp", "prv"] = "rdp") -> float:  # fmt: skip
    """Epsilon spent by ``steps`` Poisson-subsampled Gaussian steps, by Opacus's accountant."""
    from opacus.accountants.utils import create_accountant

    _check_accounting_args(noise_multiplier, sample_rate, steps, delta)
    acc = create_accountant(_accountant_name(accountant))
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    return float(acc.get_epsilon(delta=delta))


def noise_multiplier_for(target_epsilon: float, sample_rate: float, steps: int, delta: float, *,
                         accountant: Literal["rdp", "prv"] = "rdp", epsilon_tolerance: float = 0.01) -> float:  # fmt: skip
    """The noise multiplier sigma for ``(target_epsilon, delta)`` after ``steps`` steps at ``sample_rate``
    (Opacus's :func:`~opacus.accountants.utils.get_noise_multiplier`, bisection to ``epsilon_tolerance``)."""
    from opacus.accountants.utils import get_noise_multiplier

    _check_accounting_args(None, sample_rate, steps, delta)
    _real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    _real("epsilon_tolerance", epsilon_tolerance, lo=0.0, lo_open=True)
    return float(get_noise_multiplier(target_epsilon=float(target_epsilon), target_delta=float(delta),
                                      sample_rate=float(sample_rate), steps=int(steps),
                                      accountant=_accountant_name(accountant), epsilon_tolerance=epsilon_tolerance))  # fmt: skip


def epsilon_dp_accounting(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """The same epsilon by Google's ``dp-accounting`` RDP accountant (an independent implementation, for the
    cross-check of Opacus): ``steps`` self-compositions of ``PoissonSampled(q, Gaussian(sigma))``."""
    import dp_accounting

    _check_accounting_args(noise_multiplier, sample_rate, steps, delta)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(float(sample_rate), dp_accounting.GaussianDpEvent(float(noise_multiplier))),
        int(steps),
    )
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(event)
    return float(acc.get_epsilon(float(delta)))


def noise_multiplier_dp_accounting(target_epsilon: float, sample_rate: float, steps: int, delta: float, *,
                                   tolerance: float = 1e-3) -> float:  # fmt: skip
    """The smallest sigma (to ``tolerance``) with :func:`epsilon_dp_accounting` ``<= target_epsilon``, by bisection."""
    _check_accounting_args(None, sample_rate, steps, delta)
    _real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    _real("tolerance", tolerance, lo=0.0, lo_open=True)
    lo, hi = 0.0, 1.0
    while epsilon_dp_accounting(hi, sample_rate, steps, delta) > target_epsilon:
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            raise ValueError(f"target_epsilon {target_epsilon!r} needs a noise multiplier above 1e4")
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if epsilon_dp_accounting(mid, sample_rate, steps, delta) > target_epsilon else (lo, mid)
    return hi


# ---------------------------------------------------------------------------------------------- the budget
class PrivacyBudgetExceededError(RuntimeError):
    """A DP step would take the spent epsilon past the budget; the step was refused (no update applied)."""


@dataclass
class BudgetGuard:
    """Hard privacy budget on a :class:`~opacus.optimizers.DPOptimizer` (see :func:`attach_budget_guard`)."""

    accountant: Any
    sample_rate: float
    epsilon: float
    delta: float
    steps: int = 0
    """Private steps taken (and accounted) so far."""

    def epsilon_after_next_step(self, noise_multiplier: float) -> float:
        trial = copy.deepcopy(self.accountant)
        trial.step(noise_multiplier=noise_multiplier, sample_rate=self.sample_rate)
        return float(trial.get_epsilon(delta=self.delta))

    def spent(self) -> float:
        """Epsilon spent so far at ``delta`` (0 before the first step)."""
        return float(self.accountant.get_epsilon(delta=self.delta)) if self.steps else 0.0


def attach_budget_guard(optimizer: Any, accountant: Any, *, sample_rate: float, epsilon: float,
                        delta: float) -> BudgetGuard:  # fmt: skip
    """Make ``(epsilon, delta)`` a hard budget of a private optimizer.

    Opacus calls the optimizer's step hook (the accountant's) after clipping and noising and before the
    wrapped optimizer's update. The guard runs first: if accounting this step would make the spent epsilon
    exceed ``epsilon``, it clears the gradients and raises :class:`PrivacyBudgetExceededError`, so the update
    is not applied and the accountant never records it; otherwise it lets the accountant record the step.
    """
    from opacus.optimizers import DPOptimizer

    if not isinstance(optimizer, DPOptimizer):
        raise TypeError(f"optimizer must be an opacus DPOptimizer, got {type(optimizer).__name__}")
    if not hasattr(accountant, "get_epsilon") or not hasattr(accountant, "step"):
        raise TypeError(f"accountant must be an opacus accountant, got {type(accountant).__name__}")
    guard = BudgetGuard(accountant, _real("sample_rate", sample_rate, lo=0.0, hi=1.0, lo_open=True),
                        _real("epsilon", epsilon, lo=0.0, lo_open=True), _real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True))  # fmt: skip
    account = optimizer.step_hook

    def hook(opt: Any) -> None:
        after = guard.epsilon_after_next_step(opt.noise_multiplier)
        if after > guard.epsilon:
            opt.zero_grad(set_to_none=True)
            raise PrivacyBudgetExceededError(
                f"step {guard.steps + 1} would spend epsilon {after:.4f} > budget {guard.epsilon:g} "
                f"(delta {guard.delta:.3g}, sigma {opt.noise_multiplier:.4f}, q {guard.sample_rate:.4g}); "
                "the step was refused and no update was applied"
            )
        if account is not None:
            account(opt)
        guard.steps += 1

    optimizer.attach_step_hook(hook)
    return guard


# ---------------------------------------------------------------------------------------------- training
@dataclass
class TrainResult:
    """What a training stage did. Private-stage fields are ``None`` for a non-private stage."""

    steps: int
    """Optimizer steps taken."""
    losses: list[float] = field(default_factory=list)
    """Mean MAE loss of each step's batch (before the update)."""
    epsilon: float | None = None
    """Epsilon spent, by the Opacus accountant (at ``delta``)."""
    delta: float | None = None
    noise_multiplier: float | None = None
    """sigma: the noise std is ``sigma * C`` on the summed clipped gradients."""
    sample_rate: float | None = None
    """Poisson sampling probability ``q``."""
    batch_sizes: list[int] = field(default_factory=list)
    """Realised logical batch sizes (Poisson: they vary around ``qN``)."""


def _images(images: object) -> torch.Tensor:
    if isinstance(images, np.ndarray):
        images = torch.as_tensor(images)
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a numpy array or torch tensor, got {type(images).__name__}")
    if images.dim() != 4 or len(images) == 0:
        raise ValueError(f"images must be a non-empty (N, C, H, W) array, got shape {tuple(images.shape)}")
    if not torch.isfinite(images).all():
        raise ValueError("images must be finite")
    return images.float()


def _check_model(model: object) -> MaskedAutoencoder:
    if not isinstance(model, MaskedAutoencoder):
        raise TypeError(f"model must be a MaskedAutoencoder, got {type(model).__name__}")
    return model


def _adamw(model: nn.Module, cfg: MAETrainConfig) -> torch.optim.AdamW:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)


def train_mae(model: MaskedAutoencoder, images: np.ndarray | torch.Tensor, config: MAETrainConfig | None = None,
              *, seed: int = 0, callback: Callable[[int, float], None] | None = None) -> TrainResult:  # fmt: skip
    """Non-private MAE training with AdamW (Stage 1 of ViP on synthetic images, Sec. 3.2; also the
    non-private upper bound). Batches are drawn uniformly without replacement, reshuffled every epoch."""
    model = _check_model(model)
    x = _images(images)
    cfg = MAETrainConfig() if config is None else config
    if not isinstance(cfg, MAETrainConfig):
        raise TypeError(f"config must be an MAETrainConfig, got {type(cfg).__name__}")
    _int("seed", seed, 0)
    gen = torch.Generator().manual_seed(seed)
    model.generator = torch.Generator().manual_seed(seed + 1)
    opt = _adamw(model, cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cfg.lr_factor)
    model.train()
    b = min(cfg.batch_size, len(x))
    out = TrainResult(steps=0)
    perm, pos = torch.randperm(len(x), generator=gen), 0
    while out.steps < cfg.steps:
        if pos + b > len(x):
            perm, pos = torch.randperm(len(x), generator=gen), 0
        loss = model(x[perm[pos : pos + b]]).mean()
        pos += b
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        out.losses.append(loss.item())
        out.batch_sizes.append(b)
        out.steps += 1
        if callback is not None:
            callback(out.steps, float(loss))
    model.generator = None
    return out


def make_private_mae(model: MaskedAutoencoder, images: torch.Tensor, train: MAETrainConfig, privacy: DPConfig,
                     seed: int) -> tuple[Any, Any, Any, Any, BudgetGuard, float]:  # fmt: skip
    """Opacus objects for a private stage: ``(grad-sample module, DP optimizer, Poisson loader, engine, guard,
    sigma)``. sigma is calibrated so that exactly ``train.steps`` steps spend ``privacy.target_epsilon``."""
    from opacus import PrivacyEngine
    from opacus.grad_sample import register_grad_sampler

    register_grad_sampler(MaskTokenFill)(mask_token_grad_sample)
    n = len(images)
    delta = privacy.delta_for(n)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images), batch_size=min(train.batch_size, n))
    sample_rate = 1.0 / len(loader)  # Opacus's convention (make_private sets q = 1/len(data_loader))
    sigma = noise_multiplier_for(privacy.target_epsilon, sample_rate, train.steps, delta,
                                 accountant=privacy.accountant, epsilon_tolerance=privacy.epsilon_tolerance)  # fmt: skip
    torch.manual_seed(seed)  # Opacus draws the Poisson batches from torch's global generator (secure_mode off)
    engine = PrivacyEngine(accountant=privacy.accountant)
    gsm, opt, dp_loader = engine.make_private(
        module=model, optimizer=_adamw(model, train), data_loader=loader, noise_multiplier=sigma,
        max_grad_norm=privacy.max_grad_norm, poisson_sampling=True, clipping="flat", grad_sample_mode="hooks",
        noise_generator=torch.Generator().manual_seed(seed + 2),
    )  # fmt: skip
    guard = attach_budget_guard(opt, engine.accountant, sample_rate=sample_rate, epsilon=privacy.target_epsilon,
                                delta=delta)  # fmt: skip
    return gsm, opt, dp_loader, engine, guard, sigma


def train_mae_private(model: MaskedAutoencoder, images: np.ndarray | torch.Tensor,
                      train: MAETrainConfig | None = None, privacy: DPConfig | None = None, *, seed: int = 0,
                      max_steps: int | None = None,
                      callback: Callable[[int, float], None] | None = None) -> TrainResult:  # fmt: skip
    """DP-SGD (DP-AdamW) MAE training on the private ``images`` through Opacus (Stage 2 of ViP, Sec. 3.1).

    sigma is calibrated for ``train.steps`` steps at ``privacy.target_epsilon``; the run takes ``max_steps``
    steps (default ``train.steps``). Asking for more than the budget allows raises
    :class:`PrivacyBudgetExceededError` at the first step that would overrun it (the model keeps the updates
    made within budget). ``model`` is trained in place (Opacus wraps it; the wrapper is removed at the end).
    """
    model = _check_model(model)
    x = _images(images)
    train = MAETrainConfig() if train is None else train
    privacy = DPConfig() if privacy is None else privacy
    if not isinstance(train, MAETrainConfig):
        raise TypeError(f"train must be an MAETrainConfig, got {type(train).__name__}")
    if not isinstance(privacy, DPConfig):
        raise TypeError(f"privacy must be a DPConfig, got {type(privacy).__name__}")
    _int("seed", seed, 0)
    total = train.steps if max_steps is None else _int("max_steps", max_steps)
    model.train()
    model.generator = torch.Generator().manual_seed(seed + 1)
    with warnings.catch_warnings():
        _quiet_opacus()
        return _private_loop(model, x, train, privacy, seed, total, callback)


def _quiet_opacus() -> None:
    """Silence Opacus's notices that do not apply here: secure RNG is off on purpose (seeded experiments);
    the full-backward-hook notice is about the first layer's input, which needs no gradient; an RDP optimum
    at the largest order only makes the bound looser (conservative)."""
    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")


def _private_loop(model: MaskedAutoencoder, x: torch.Tensor, train: MAETrainConfig, privacy: DPConfig, seed: int,
                  total: int, callback: Callable[[int, float], None] | None) -> TrainResult:  # fmt: skip
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    gsm, opt, loader, engine, guard, sigma = make_private_mae(model, x, train, privacy, seed)
    sched = torch.optim.lr_scheduler.LambdaLR(opt.original_optimizer, train.lr_factor)
    out = TrainResult(steps=0, noise_multiplier=sigma, sample_rate=guard.sample_rate, delta=guard.delta)
    loss_sum, count = 0.0, 0
    try:
        with BatchMemoryManager(data_loader=loader, max_physical_batch_size=privacy.max_physical_batch_size,
                                optimizer=opt) as memory_loader:  # fmt: skip
            while out.steps < total:
                for (xb,) in memory_loader:
                    per_image = gsm(xb)
                    # Opacus's loss_reduction="mean": the micro-batch mean; it rescales per-sample gradients.
                    loss = per_image.sum() / max(len(xb), 1)
                    loss.backward()
                    loss_sum, count = loss_sum + float(per_image.detach().sum()), count + len(xb)
                    before = guard.steps
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    if guard.steps > before:  # a logical step was taken (not a skipped micro-batch step)
                        sched.step()
                        out.steps += 1
                        out.losses.append(loss_sum / max(count, 1))
                        out.batch_sizes.append(count)
                        if callback is not None:
                            callback(out.steps, out.losses[-1])
                        loss_sum, count = 0.0, 0
                        if out.steps >= total:
                            break
    finally:
        out.epsilon = guard.spent()
        gsm.to_standard_module()  # remove Opacus's hooks and grad_sample attributes; the weights stay in model
        model.generator = None
    return out
