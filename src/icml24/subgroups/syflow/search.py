"""SYFLOW: learning exceptional subgroups by end-to-end maximising a KL divergence (Xu et al., ICML 2024).

https://arxiv.org/abs/2402.12930 (official code github.com/nilspwalter/syflow, read, not copied).

The method (Sec. 3, Alg. 1). Inputs ``X`` (n, d) and a target ``Y`` (n, t), both standardised.

1. Fit a flow ``p_pop`` to all of ``Y`` by maximum likelihood.
2. For each subgroup in turn, start a :class:`SoftIntervalRule` at "everything" and two fresh flows, ``p_S`` (the
   subgroup) and ``p_C`` (its complement), and alternate, full batch, ``flow_steps`` flow steps with
   ``rule_steps`` rule steps:

   * flow step: maximise the mixture likelihood ``sum_i log(s_i p_S(y_i) + (1 - s_i) p_C(y_i))`` with the soft
     membership ``s_i`` held fixed;
   * rule step: minimise ``L = (sum_i s_i)^(alpha - 1) sum_i s_i [(l_pop,i - mean l_pop) - (l_S,i - mean l_S)]``
     with ``l = log p(y)`` held fixed. ``-L`` is ``|S|^alpha`` times the soft average of the log-ratio
     ``log p_S - log p_pop`` (centred), a size-weighted estimate of ``KL(P_S || P_pop)`` (Eq. 4 with the
     size weight of Eq. 5). From the second subgroup on, ``lambda`` times the mean of the same term with
     ``p_pop`` replaced by each earlier subgroup's flow is added: a new subgroup must also differ from the
     earlier ones (Sec. 3.4).

   Rule-step details from the official code, kept as options: the cut points' gradient is scaled by the
   mean harmonic denominator / 2000, the gradient norm is clipped at ``d``, Adam with ``lr_rule``, and the
   temperature is halved at 50% and 75% of the epochs.
3. After training, the temperature is chosen from ``2^-1 ... 2^-10`` to minimise the objective; the hard
   subgroup is ``s(x) > 0.5`` and its readable :class:`~icml24.subgroups.syflow.rule.Rule` keeps the
   features with importance >= 0.1 whose interval cuts the data range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from icml24.subgroups.syflow.flows import fit_density, log_density, make_spline_flow
from icml24.subgroups.syflow.rule import Rule, SoftIntervalRule


@dataclass(frozen=True)
class SyflowConfig:
    """Hyperparameters of SYFLOW; the defaults are the official synthetic-data preset."""

    n_subgroups: int = 3
    """How many subgroups to find, one after the other."""
    alpha: float = 0.5
    """Size exponent of the objective ``|S|^alpha KL``: 0 favours small pure subgroups, 1 large ones."""
    lambd: float = 1.0
    """Weight of the term that pushes a subgroup away from the earlier ones."""
    bins: int = 8
    """Spline bins per flow layer (8 synthetic, 12 real data)."""
    n_layers: int = 1
    """Stacked spline layers per flow."""
    bound: float = 6.0
    """Half-width of the spline domain on the standardised target (identity outside)."""
    pop_epochs: int = 2000
    """Full-batch maximum-likelihood epochs of the population flow."""
    epochs: int = 1500
    """Alternating epochs per subgroup (each is one flow step or one rule step)."""
    flow_steps: int = 2
    """Flow steps in each alternation cycle."""
    rule_steps: int = 2
    """Rule steps in each alternation cycle."""
    lr_flow: float = 5e-2
    """Adam learning rate of the flows."""
    lr_rule: float = 2e-2
    """Adam learning rate of the rule layer."""
    temperature: float = 0.2
    """Initial temperature of the soft binning."""
    anneal: bool = True
    """Halve the temperature at 50% and at 75% of the epochs."""
    select_temperature: bool = True
    """After training, choose the temperature from 2^-1..2^-10 that minimises the objective."""
    bin_deviation: float = 0.2
    """Cut points may leave the data range by this fraction of the range."""
    learn_importance: bool = True
    """Learn the per-feature importances ``a_j`` (else all are 1 and every feature's interval counts)."""
    scale_cut_gradient: bool = True
    """Scale the cut points' gradient by the mean harmonic denominator / 2000 (official code)."""
    clip_gradient: bool = True
    """Clip the rule's gradient norm at the number of features (official code)."""
    final_fit_epochs: int = 0
    """Refit the subgroup flow on the hard subgroup afterwards (0 in the official presets)."""
    eps: float = 1e-5
    """The harmonic mean's epsilon."""

    def __post_init__(self) -> None:
        for name in ("n_subgroups", "bins", "n_layers", "flow_steps", "rule_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (2 if name == "bins" else 1):
                raise ValueError(f"{name} must be an int >= {2 if name == 'bins' else 1}, got {v!r}")
        for name in ("pop_epochs", "epochs", "final_fit_epochs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        for name in ("alpha", "lambd", "bin_deviation"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha!r}")
        for name in ("lr_flow", "lr_rule", "temperature", "bound", "eps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")


SYNTHETIC = SyflowConfig()
"""The official synthetic-data preset (alpha 0.5, lambda 1, 8-bin splines, 2000 + 1500 epochs, 3 subgroups)."""
REAL_DATA = SyflowConfig(n_subgroups=5, alpha=0.3, lambd=2.0, bins=12, pop_epochs=1000, epochs=1000)
"""The official real-data preset (alpha 0.3, lambda 2, 12-bin splines, 1000 + 1000 epochs, 5 subgroups)."""
TEMPERATURE_GRID: tuple[float, ...] = tuple(2.0**-i for i in range(1, 11))


@dataclass
class FoundSubgroup:
    """One subgroup found by SYFLOW.

    Attributes:
        rule: the readable rule in the original feature units.
        members: hard membership ``s(x) > 0.5`` of the training rows.
        kl: ``KL(P_S || P_pop)`` estimated with the fitted flows: the mean of ``log p_S(y) - log p_pop(y)`` over
            the hard members (nats; invariant to the target's standardisation).
        objective: the final value of the (population) objective ``-L`` at the selected temperature.
        temperature: the selected temperature.
        soft_rule: the trained rule layer (works on standardised inputs).
        subgroup_flow: the subgroup's flow (on the standardised target).
    """

    rule: Rule
    members: np.ndarray
    kl: float
    objective: float
    temperature: float
    soft_rule: SoftIntervalRule = field(repr=False)
    subgroup_flow: torch.nn.Module = field(repr=False)

    @property
    def size(self) -> int:
        return int(self.members.sum())


@dataclass
class SyflowResult:
    """The output of :func:`discover_subgroups`."""

    subgroups: list[FoundSubgroup]
    population_flow: torch.nn.Module = field(repr=False)
    x_mean: np.ndarray = field(repr=False)
    x_scale: np.ndarray = field(repr=False)
    y_mean: np.ndarray = field(repr=False)
    y_scale: np.ndarray = field(repr=False)

    @property
    def rules(self) -> list[Rule]:
        return [g.rule for g in self.subgroups]

    def soft_membership(self, X: np.ndarray) -> np.ndarray:
        """``s(x)`` of each subgroup for new rows, shape ``(n, n_subgroups)``."""
        xt = torch.as_tensor((np.asarray(X, dtype=float) - self.x_mean) / self.x_scale, dtype=torch.float32)
        with torch.no_grad():
            return np.stack([g.soft_rule(xt).numpy() for g in self.subgroups], axis=1)


def _standardise(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = a.mean(axis=0)
    scale = a.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)  # a constant column stays constant (and is never cut)
    return (a - mean) / scale, mean, scale


def _kl_objective(s: torch.Tensor, ll_ref: torch.Tensor, ll_s: torch.Tensor, alpha: float) -> torch.Tensor:
    """``L = (sum s)^(alpha-1) sum_i s_i [(l_ref,i - mean l_ref) - (l_S,i - mean l_S)]`` (to be minimised)."""
    size = s.sum().clamp_min(1e-8)
    return size ** (alpha - 1) * (s * ((ll_ref - ll_ref.mean()) - (ll_s - ll_s.mean()))).sum()


def _check_xy(X: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"X must be a numeric array (n_samples, n_features): {exc}") from exc
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D array with >= 2 rows and >= 1 column, got shape {X.shape}")
    try:
        y = np.asarray(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"y must be a numeric array (n_samples,) or (n_samples, n_targets): {exc}") from exc
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] != X.shape[0] or y.shape[1] < 1:
        raise ValueError(f"y must have shape ({X.shape[0]},) or ({X.shape[0]}, t), got {y.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X must be finite (no NaN or inf)")
    if not np.isfinite(y).all():
        raise ValueError("y must be finite (no NaN or inf)")
    return X, y


def discover_subgroups(
    X: np.ndarray,
    y: np.ndarray,
    config: SyflowConfig = SYNTHETIC,
    *,
    feature_names: Sequence[str] | None = None,
    seed: int = 0,
) -> SyflowResult:
    """Find ``config.n_subgroups`` exceptional subgroups of ``(X, y)`` one after the other (Alg. 1).

    Args:
        X: ``(n, d)`` numeric features (standardised inside; the rules come back in the original units).
        y: ``(n,)`` or ``(n, t)`` numeric target.
        config: the hyperparameters (:data:`SYNTHETIC` or :data:`REAL_DATA` presets).
        feature_names: names for the rules (default ``x0, x1, ...``).
        seed: seeds torch's generator for the run (the flows start deterministic; torch's global state is
            restored afterwards).
    """
    X, y = _check_xy(X, y)
    if not isinstance(config, SyflowConfig):
        raise TypeError(f"config must be a SyflowConfig, got {type(config).__name__}")
    if feature_names is not None:
        feature_names = [str(f) for f in feature_names]
        if len(feature_names) != X.shape[1]:
            raise ValueError(f"feature_names must have {X.shape[1]} names, got {len(feature_names)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    xs, x_mean, x_scale = _standardise(X)
    ys, y_mean, y_scale = _standardise(y)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        xt = torch.as_tensor(xs, dtype=torch.float32)
        yt = torch.as_tensor(ys, dtype=torch.float32)
        t = ys.shape[1]
        pop = make_spline_flow(t, bins=config.bins, n_layers=config.n_layers, bound=config.bound)
        fit_density(pop, yt, epochs=config.pop_epochs, lr=config.lr_flow)
        with torch.no_grad():
            ll_pop = log_density(pop, yt)
        found: list[FoundSubgroup] = []
        for _ in range(config.n_subgroups):
            priors = [log_density(g.subgroup_flow, yt).detach() for g in found]
            found.append(_one_subgroup(xt, yt, ll_pop, priors, config, feature_names, x_mean, x_scale))
    return SyflowResult(found, pop, x_mean, x_scale, y_mean, y_scale)


def _one_subgroup(xt, yt, ll_pop, priors, config: SyflowConfig, feature_names, x_mean, x_scale) -> FoundSubgroup:
    d, t = xt.shape[1], yt.shape[1]
    rule = SoftIntervalRule(xt.min(0).values, xt.max(0).values, temperature=config.temperature, eps=config.eps,
                            bin_deviation=config.bin_deviation, learn_importance=config.learn_importance)  # fmt: skip
    flow_s = make_spline_flow(t, bins=config.bins, n_layers=config.n_layers, bound=config.bound)
    flow_c = make_spline_flow(t, bins=config.bins, n_layers=config.n_layers, bound=config.bound)
    opt_flows = torch.optim.Adam([*flow_s.parameters(), *flow_c.parameters()], lr=config.lr_flow)
    opt_rule = torch.optim.Adam([p for p in rule.parameters() if p.requires_grad], lr=config.lr_rule)
    cycle = config.flow_steps + config.rule_steps
    for epoch in range(config.epochs):
        if epoch % cycle < config.flow_steps:
            # Flow step: the mixture likelihood with the memberships held fixed.
            with torch.no_grad():
                s = rule(xt)
            opt_flows.zero_grad()
            mix = torch.stack([log_density(flow_c, yt) + torch.log1p(-s + 1e-5), log_density(flow_s, yt)
                               + torch.log(s + 1e-5)], dim=1)  # fmt: skip
            (-torch.logsumexp(mix, dim=1).mean()).backward()
            opt_flows.step()
        else:
            with torch.no_grad():
                ll_s = log_density(flow_s, yt)
            opt_rule.zero_grad()
            s = rule(xt)
            loss = _kl_objective(s, ll_pop, ll_s, config.alpha)
            if priors:
                loss = loss + config.lambd * torch.stack([_kl_objective(s, p, ll_s, config.alpha) for p in priors]).mean()
            loss.backward()
            if config.scale_cut_gradient and rule.cut_points.grad is not None:
                # Official heuristic: the harmonic denominator (large where pi ~ 0) damps the cut-point gradient.
                rule.cut_points.grad.mul_(rule.last_denominator_mean / 2000.0)
            if config.clip_gradient:
                torch.nn.utils.clip_grad_norm_(rule.parameters(), float(d))
            opt_rule.step()
            rule.project()
        if config.anneal and epoch in (config.epochs // 2, 3 * config.epochs // 4) and config.epochs >= 4:
            rule.temperature /= 2
    with torch.no_grad():
        members = (rule(xt) > 0.5).numpy()
    if config.final_fit_epochs and members.sum() > 1:
        fit_density(flow_s, yt[torch.as_tensor(members)], epochs=config.final_fit_epochs, lr=config.lr_flow)
    with torch.no_grad():
        ll_s = log_density(flow_s, yt)
        if config.select_temperature:
            scores = []
            for temp in TEMPERATURE_GRID:
                rule.temperature = temp
                scores.append(float(_kl_objective(rule(xt), ll_pop, ll_s, config.alpha)))
            rule.temperature = TEMPERATURE_GRID[int(np.argmin(scores))]
        s = rule(xt)
        objective = -float(_kl_objective(s, ll_pop, ll_s, config.alpha))
        members = (s > 0.5).numpy()
        kl = float((ll_s - ll_pop)[torch.as_tensor(members)].mean()) if members.any() else 0.0
    readable = rule.rule(feature_names=feature_names, mean=x_mean, scale=x_scale)
    return FoundSubgroup(readable, members, kl, objective, rule.temperature, rule, flow_s)


def with_overrides(config: SyflowConfig, **overrides: object) -> SyflowConfig:
    """``config`` with some fields replaced (validated)."""
    return replace(config, **overrides)
