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

Privacy composes across calls: two private runs on the same records spend more than either alone (two calls of
epsilon 3.99 each on one dataset spent 5.28 together). :class:`PrivacyAccount` is the accountant of one dataset
across calls: every call made with it is composed into it, its sigma calibrated so that the *total* stays within
the account's budget. A second call on data an earlier call already used, without an account, is refused.

sigma is calibrated on the stricter of two accountants, Opacus's and Google's ``dp-accounting`` RDP (their RDP
orders and conversions differ: Opacus-calibrated runs at "epsilon <= 8" read 8.001-8.013 in ``dp-accounting``),
so the spent epsilon is within the budget by both.

Randomness: by default the noise and the Poisson batches come from seeded torch generators, so a run is
reproducible, and the noise is therefore **not secret**: anyone with the seed can subtract it. Seeded noise is
for reproducing experiments only. ``DPConfig(secure_mode=True)`` uses Opacus's secure mode (a cryptographically
secure generator from ``torchcsprng`` for the noise and the batch sampling, and Opacus's defence against
floating-point attacks); the seed then has no effect on the noise.
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
    "PrivacyAccount",
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
    secure_mode: bool = False
    """Opacus's secure mode: noise and batch sampling from a cryptographically secure generator
    (``torchcsprng``, which must be installed). Off (the default), the noise is seeded: reproducible, and
    therefore not secret; use the default to reproduce experiments, ``True`` to deploy."""

    def __post_init__(self) -> None:
        if not isinstance(self.secure_mode, bool):
            raise TypeError(f"secure_mode must be True or False, got {self.secure_mode!r}")
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
def _check_accounting_args(
    noise_multiplier: float | None, sample_rate: float, steps: int, delta: float
) -> None:
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
        dp_accounting.PoissonSampledDpEvent(
            float(sample_rate), dp_accounting.GaussianDpEvent(float(noise_multiplier))
        ),
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
        lo, hi = (
            (mid, hi) if epsilon_dp_accounting(mid, sample_rate, steps, delta) > target_epsilon else (lo, mid)
        )
    return hi


def _epsilon_both(
    history: list[tuple[float, float, int]], delta: float, accountant: str
) -> tuple[float, float]:
    """``(Opacus epsilon, dp-accounting epsilon)`` of a composition ``[(sigma, q, steps), ...]`` at ``delta``."""
    import dp_accounting
    from opacus.accountants.utils import create_accountant

    acc = create_accountant(_accountant_name(accountant))
    acc.history = list(history)
    event = dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(float(q), dp_accounting.GaussianDpEvent(float(sigma))), int(t))
        for sigma, q, t in history])  # fmt: skip
    google = dp_accounting.rdp.RdpAccountant()
    google.compose(event)
    return float(acc.get_epsilon(delta=delta)), float(google.get_epsilon(float(delta)))


def calibrate_noise(target_epsilon: float, sample_rate: float, steps: int, delta: float, *,
                    history: list[tuple[float, float, int]] | None = None, accountant: Literal["rdp", "prv"] = "rdp",
                    epsilon_tolerance: float = 0.01) -> float:  # fmt: skip
    """sigma such that ``history`` followed by ``steps`` steps at ``sample_rate`` spends at most
    ``target_epsilon`` at ``delta`` by *both* Opacus's accountant and ``dp-accounting``'s RDP accountant, and
    more than ``target_epsilon - epsilon_tolerance`` by the stricter one (bisection on sigma).

    Raises :class:`PrivacyBudgetExceededError` when ``history`` alone already spends ``target_epsilon``."""
    _check_accounting_args(None, sample_rate, steps, delta)
    target = _real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    tol = _real("epsilon_tolerance", epsilon_tolerance, lo=0.0, lo_open=True)
    past = [(float(a), float(b), int(c)) for a, b, c in (history or [])]
    spent = max(_epsilon_both(past, delta, accountant)) if past else 0.0
    if spent >= target:
        raise PrivacyBudgetExceededError(
            f"the earlier calls already spent epsilon {spent:.4f} of the budget {target:g}: nothing is left for "
            "another private call"
        )

    def opacus(sigma: float) -> float:
        from opacus.accountants.utils import create_accountant

        acc = create_accountant(_accountant_name(accountant))
        acc.history = [*past, (sigma, float(sample_rate), int(steps))]
        return float(acc.get_epsilon(delta=delta))

    def strict(sigma: float) -> float:
        return max(_epsilon_both([*past, (sigma, float(sample_rate), int(steps))], delta, accountant))

    def bisect(eps: Callable[[float], float], lo: float, hi: float, grow: float) -> float:
        # Grow hi by ``grow`` until it meets the budget, then halve [lo, hi] until eps(hi) is within tol of it.
        while eps(hi) > target:
            lo, hi = hi, grow * hi
            if hi > 1e6:
                raise ValueError(f"target_epsilon {target_epsilon!r} needs a noise multiplier above 1e6")
        while target - eps(hi) > tol:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if eps(mid) > target else (lo, mid)
        return hi

    # Opacus's accountant first (fast), then the stricter of the two from there: they differ by ~0.1% in
    # epsilon, so the second bisection (dp-accounting costs ~0.3 s an evaluation) is short.
    sigma = bisect(opacus, 0.0, 10.0, grow=2.0)
    if strict(sigma) <= target:
        return sigma
    return bisect(strict, sigma, sigma * 1.01, grow=1.01)


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
        """Epsilon spent so far at ``delta`` by the accountant, earlier calls included (0 before any step)."""
        return float(self.accountant.get_epsilon(delta=self.delta)) if len(self.accountant.history) else 0.0


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


# ---------------------------------------------------------------------------------------------- accounts
def data_fingerprint(images: torch.Tensor) -> str:
    """sha256 of a dataset's shape, dtype and bytes: which records a privacy account belongs to."""
    import hashlib

    t = images.detach().cpu().contiguous()
    h = hashlib.sha256(f"{tuple(t.shape)}|{t.dtype}".encode())
    h.update(t.numpy().tobytes())
    return h.hexdigest()


class PrivacyAccount:
    """The privacy spent on one dataset across private calls (one accountant per dataset).

    Pass the same account to every :func:`train_mae_private` call on the same records: each call is composed
    into it, its sigma calibrated so that the account's *total* stays within ``epsilon`` (each call adds at
    most its ``DPConfig.target_epsilon``; an exhausted account refuses the next call), and ``spent()`` is the guarantee that holds for the data after all of them. An
    account is bound to the first dataset it is used with and refuses any other.

    Args:
        epsilon: the total budget over every call on this dataset.
        delta: the budget's delta; None: ``1 / (2 N)`` of the dataset.
        accountant: ``"rdp"`` or ``"prv"`` (Opacus's), as in :class:`DPConfig`.
    """

    def __init__(
        self, epsilon: float, delta: float | None = None, *, accountant: Literal["rdp", "prv"] = "rdp"
    ) -> None:
        from opacus.accountants.utils import create_accountant

        self.epsilon = _real("epsilon", epsilon, lo=0.0, lo_open=True)
        self.delta = (
            None if delta is None else _real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        )
        self.accountant_name = _accountant_name(accountant)
        self.accountant = create_accountant(self.accountant_name)
        self.fingerprint: str | None = None
        self.n_records: int | None = None
        self.calls = 0

    def bind(self, images: torch.Tensor) -> None:
        """Tie the account to ``images`` on first use; refuse any other dataset afterwards."""
        fp = data_fingerprint(images)
        if self.fingerprint is None:
            self.fingerprint, self.n_records = fp, len(images)
            if self.delta is None:
                self.delta = 1.0 / (2 * len(images))
        elif fp != self.fingerprint:
            raise ValueError(
                "account belongs to another dataset (a privacy account tracks one set of records)"
            )

    @property
    def history(self) -> list[tuple[float, float, int]]:
        """The composed steps ``[(sigma, q, steps), ...]`` of every call so far."""
        return list(self.accountant.history)

    def spent(self) -> float:
        """Epsilon spent on the dataset by every call so far (Opacus's accountant; 0 before any)."""
        if not self.accountant.history or self.delta is None:
            return 0.0
        return float(self.accountant.get_epsilon(delta=self.delta))

    def spent_dp_accounting(self) -> float:
        """The same by Google's ``dp-accounting`` RDP accountant (the cross-check)."""
        if not self.accountant.history or self.delta is None:
            return 0.0
        return _epsilon_both(self.history, self.delta, self.accountant_name)[1]

    def __repr__(self) -> str:
        return f"PrivacyAccount(epsilon={self.epsilon:g}, spent={self.spent():.4f}, calls={self.calls})"


_ACCOUNTS: dict[str, PrivacyAccount] = {}
"""Datasets this process has trained on privately: fingerprint -> the account that spent on it."""


# ---------------------------------------------------------------------------------------------- training
@dataclass
class TrainResult:
    """What a training stage did. Private-stage fields are ``None`` for a non-private stage."""

    steps: int
    """Optimizer steps taken."""
    losses: list[float] = field(default_factory=list)
    """Mean MAE loss of each step's batch (before the update)."""
    epsilon: float | None = None
    """Epsilon spent on the dataset so far, this call and every earlier call on its account (Opacus's accountant,
    at ``delta``): the guarantee that holds for the data."""
    delta: float | None = None
    noise_multiplier: float | None = None
    """sigma: the noise std is ``sigma * C`` on the summed clipped gradients."""
    sample_rate: float | None = None
    """Poisson sampling probability ``q``."""
    batch_sizes: list[int] = field(default_factory=list)
    """Realised logical batch sizes (Poisson: they vary around ``qN``)."""
    epsilon_call: float | None = None
    """Epsilon added by this call alone (``epsilon`` minus what the account had spent before it)."""
    epsilon_dp_accounting: float | None = None
    """``epsilon`` by Google's ``dp-accounting`` RDP accountant (the cross-check; <= the budget as well)."""
    account: PrivacyAccount | None = None
    """The dataset's privacy account; pass it to the next private call on the same data."""
    secure_mode: bool | None = None
    """Whether the noise came from a secure generator (False: seeded noise, for reproduction only)."""


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
                     seed: int, account: PrivacyAccount | None = None) -> tuple[Any, Any, Any, Any, BudgetGuard, float]:  # fmt: skip
    """Opacus objects for a private stage: ``(grad-sample module, DP optimizer, Poisson loader, engine, guard,
    sigma)``. sigma is calibrated (:func:`calibrate_noise`, the stricter of two accountants) so that exactly
    ``train.steps`` steps bring the account's total to ``min(spent + privacy.target_epsilon, account.epsilon)``."""
    from opacus import PrivacyEngine
    from opacus.grad_sample import register_grad_sampler

    register_grad_sampler(MaskTokenFill)(mask_token_grad_sample)
    n = len(images)
    if account is None:
        account = PrivacyAccount(privacy.target_epsilon, privacy.delta_for(n), accountant=privacy.accountant)
    account.bind(images)
    delta = float(account.delta)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images), batch_size=min(train.batch_size, n)
    )
    sample_rate = 1.0 / len(loader)  # Opacus's convention (make_private sets q = 1/len(data_loader))
    # This call may add up to privacy.target_epsilon to what the dataset has spent, never past the account's total.
    spent = max(account.spent(), account.spent_dp_accounting())  # by the stricter accountant
    target = min(spent + privacy.target_epsilon, account.epsilon)
    if target - spent <= privacy.epsilon_tolerance:
        raise PrivacyBudgetExceededError(
            f"the account has spent epsilon {spent:.4f} of its budget {account.epsilon:g} on these records: "
            "nothing is left for another private call"
        )
    sigma = calibrate_noise(target, sample_rate, train.steps, delta, history=account.history,
                            accountant=account.accountant_name, epsilon_tolerance=privacy.epsilon_tolerance)  # fmt: skip
    if privacy.secure_mode:
        try:
            engine = PrivacyEngine(accountant=account.accountant_name, secure_mode=True)
        except ImportError as exc:
            raise ImportError("DPConfig(secure_mode=True) needs the torchcsprng package (Opacus's secure "
                              f"generator): {exc}") from exc  # fmt: skip
        noise_generator = None
    else:
        torch.manual_seed(
            seed
        )  # Opacus draws the Poisson batches from torch's global generator (secure_mode off)
        engine = PrivacyEngine(accountant=account.accountant_name)
        noise_generator = torch.Generator().manual_seed(seed + 2)  # seeded: reproducible, not secret
    engine.accountant = (
        account.accountant
    )  # the dataset's accountant: this call composes with the earlier ones
    gsm, opt, dp_loader = engine.make_private(
        module=model, optimizer=_adamw(model, train), data_loader=loader, noise_multiplier=sigma,
        max_grad_norm=privacy.max_grad_norm, poisson_sampling=True, clipping="flat", grad_sample_mode="hooks",
        noise_generator=noise_generator,
    )  # fmt: skip
    guard = attach_budget_guard(opt, account.accountant, sample_rate=sample_rate, epsilon=target, delta=delta)
    return gsm, opt, dp_loader, engine, guard, sigma


def train_mae_private(model: MaskedAutoencoder, images: np.ndarray | torch.Tensor,
                      train: MAETrainConfig | None = None, privacy: DPConfig | None = None, *, seed: int = 0,
                      max_steps: int | None = None, account: PrivacyAccount | None = None,
                      callback: Callable[[int, float], None] | None = None) -> TrainResult:  # fmt: skip
    """DP-SGD (DP-AdamW) MAE training on the private ``images`` through Opacus (Stage 2 of ViP, Sec. 3.1).

    sigma is calibrated for ``train.steps`` steps at ``privacy.target_epsilon`` (on the stricter of Opacus's
    and ``dp-accounting``'s accountants); the run takes ``max_steps`` steps (default ``train.steps``). Asking for
    more than the budget allows raises :class:`PrivacyBudgetExceededError` at the first step that would overrun
    it (the model keeps the updates made within budget). ``model`` is trained in place (Opacus wraps it; the
    wrapper is removed at the end).

    Across calls: with ``account`` (a :class:`PrivacyAccount`), this call may raise the dataset's total epsilon
    (every earlier call on the account composed with this one) by at most ``privacy.target_epsilon`` and never
    past ``account.epsilon``; sigma is calibrated for that total (``privacy.delta`` is not used: the account's
    delta is); an account with nothing left refuses the call before any step. Without ``account``, a call on
    records that an earlier private call of this process used is refused (PrivacyBudgetExceededError naming
    what was spent): pass that call's ``result.account`` to continue within its budget, or a new
    ``PrivacyAccount`` to declare a separate budget explicitly.

    The noise is seeded by ``seed`` (reproducible, not secret) unless ``privacy.secure_mode``.
    """
    model = _check_model(model)
    x = _images(images)
    train = MAETrainConfig() if train is None else train
    privacy = DPConfig() if privacy is None else privacy
    if not isinstance(train, MAETrainConfig):
        raise TypeError(f"train must be an MAETrainConfig, got {type(train).__name__}")
    if not isinstance(privacy, DPConfig):
        raise TypeError(f"privacy must be a DPConfig, got {type(privacy).__name__}")
    if account is not None and not isinstance(account, PrivacyAccount):
        raise TypeError(f"account must be a PrivacyAccount or None, got {type(account).__name__}")
    _int("seed", seed, 0)
    total = train.steps if max_steps is None else _int("max_steps", max_steps)
    fp = data_fingerprint(x)
    if account is None:
        earlier = _ACCOUNTS.get(fp)
        if earlier is not None and earlier.spent() > 0:
            raise PrivacyBudgetExceededError(
                f"these {len(x)} records were already used by {earlier.calls} private call(s) of this process, "
                f"which spent epsilon {earlier.spent():.4f} (budget {earlier.epsilon:g}); privacy composes across "
                "calls, so a second call needs an explicit budget: pass account=<the first call's result.account> "
                "to continue within its budget, or account=PrivacyAccount(epsilon=...) to declare a separate one"
            )
        account = PrivacyAccount(privacy.target_epsilon, privacy.delta, accountant=privacy.accountant)
    account.bind(x)
    _ACCOUNTS[fp] = account
    model.train()
    model.generator = torch.Generator().manual_seed(seed + 1)
    with warnings.catch_warnings():
        _quiet_opacus()
        return _private_loop(model, x, train, privacy, seed, total, callback, account)


def _quiet_opacus() -> None:
    """Silence Opacus's notices that do not apply here: secure RNG is off on purpose (seeded experiments; the
    docstrings and README say that seeded noise is for reproduction only, and ``DPConfig.secure_mode`` turns it on);
    the full-backward-hook notice is about the first layer's input, which needs no gradient; an RDP optimum
    at the largest order only makes the bound looser (conservative)."""
    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")


def _private_loop(model: MaskedAutoencoder, x: torch.Tensor, train: MAETrainConfig, privacy: DPConfig, seed: int,
                  total: int, callback: Callable[[int, float], None] | None,
                  account: PrivacyAccount) -> TrainResult:  # fmt: skip
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    spent_before = account.spent()
    gsm, opt, loader, engine, guard, sigma = make_private_mae(model, x, train, privacy, seed, account)
    account.calls += 1
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
        out.epsilon_call = out.epsilon - spent_before
        out.epsilon_dp_accounting = account.spent_dp_accounting()
        out.account, out.secure_mode = account, privacy.secure_mode
        gsm.to_standard_module()  # remove Opacus's hooks and grad_sample attributes; the weights stay in model
        model.generator = None
    return out
