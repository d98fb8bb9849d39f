"""SYFLOW as a scikit-learn estimator: ``fit(X, y)`` finds subgroups, ``predict(X)`` gives membership."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from icml24.subgroups.syflow.rule import Rule, harmonic_conjunction, soft_bin_middle
from icml24.subgroups.syflow.search import SyflowConfig, SyflowResult, discover_subgroups


class SyflowSubgroupDiscovery(BaseEstimator):
    """Exceptional subgroups of a numeric target by SYFLOW (Xu et al., ICML 2024; see :mod:`.search`).

    The hyperparameters are those of :class:`~icml24.subgroups.syflow.search.SyflowConfig` (defaults: the
    official synthetic preset); ``random_state`` seeds torch for the fit (the flows and rules start
    deterministic, so it matters only through torch's non-determinism, if any).

    Attributes (after ``fit``):
        rules_: one :class:`~icml24.subgroups.syflow.rule.Rule` per subgroup, in the original feature units;
            ``str(rule)`` reads like ``"0.21 < x3 < 0.67 AND x7 > 0.4"``.
        subgroup_kl_: ``KL(P_S || P_pop)`` of each subgroup, estimated with the flows (nats).
        subgroup_sizes_: training rows in each subgroup (hard membership ``s(x) > 0.5``).
        result_: the full :class:`~icml24.subgroups.syflow.search.SyflowResult` (flows, soft rules).
        n_features_in_, feature_names_in_: as in scikit-learn.
    """

    def __init__(
        self,
        n_subgroups: int = 3,
        *,
        alpha: float = 0.5,
        lambd: float = 1.0,
        bins: int = 8,
        n_layers: int = 1,
        pop_epochs: int = 2000,
        epochs: int = 1500,
        lr_flow: float = 5e-2,
        lr_rule: float = 2e-2,
        temperature: float = 0.2,
        learn_importance: bool = True,
        random_state: int | None = 0,
    ) -> None:
        self.n_subgroups = n_subgroups
        self.alpha = alpha
        self.lambd = lambd
        self.bins = bins
        self.n_layers = n_layers
        self.pop_epochs = pop_epochs
        self.epochs = epochs
        self.lr_flow = lr_flow
        self.lr_rule = lr_rule
        self.temperature = temperature
        self.learn_importance = learn_importance
        self.random_state = random_state

    def _config(self) -> SyflowConfig:
        return SyflowConfig(n_subgroups=self.n_subgroups, alpha=self.alpha, lambd=self.lambd, bins=self.bins,
                            n_layers=self.n_layers, pop_epochs=self.pop_epochs, epochs=self.epochs,
                            lr_flow=self.lr_flow, lr_rule=self.lr_rule, temperature=self.temperature,
                            learn_importance=self.learn_importance)  # fmt: skip

    def fit(self, X, y) -> SyflowSubgroupDiscovery:
        """Find the subgroups of ``(X, y)``; ``y`` is a numeric target, one value per row."""
        config = self._config()
        if self.random_state is not None and (
            isinstance(self.random_state, bool) or not isinstance(self.random_state, (int, np.integer))
        ):
            raise TypeError(f"random_state must be an int or None, got {self.random_state!r}")
        X, y = self._validate_xy(X, y)
        seed = int(self.random_state) if self.random_state is not None else int(np.random.SeedSequence().entropy % 2**31)
        names = [str(f) for f in self.feature_names_in_] if hasattr(self, "feature_names_in_") else None
        self.result_: SyflowResult = discover_subgroups(X, y, config, feature_names=names, seed=seed)
        self.rules_: list[Rule] = self.result_.rules
        self.subgroup_kl_ = np.array([g.kl for g in self.result_.subgroups])
        self.subgroup_sizes_ = np.array([g.size for g in self.result_.subgroups])
        return self

    def predict(self, X) -> np.ndarray:
        """Membership of each row in each subgroup's rule: a bool array ``(n_samples, n_subgroups)``."""
        check_is_fitted(self)
        X = self._validate_x(X)
        return np.stack([rule.covers(X) for rule in self.rules_], axis=1)

    def decision_function(self, X) -> np.ndarray:
        """Soft membership ``s(x)`` in ``[0, 1]`` of each row in each subgroup, ``(n_samples, n_subgroups)``."""
        check_is_fitted(self)
        X = self._validate_x(X)
        xs = torch.as_tensor((X - self.result_.x_mean) / self.result_.x_scale, dtype=torch.float64)
        out = []
        with torch.no_grad():
            for g in self.result_.subgroups:
                r = g.soft_rule
                pi = soft_bin_middle(xs, r.cut_points.double(), r.temperature)
                out.append(harmonic_conjunction(pi, r.importance.double(), r.eps)[0].numpy())
        return np.stack(out, axis=1)

    def _validate_xy(self, X, y):
        from sklearn.utils import check_array

        try:
            check_array(X, ensure_min_samples=2, dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"X must be a finite numeric 2-D array (n_samples >= 2, n_features): {exc}") from exc
        try:
            return validate_data(self, X, y, y_numeric=True, ensure_min_samples=2, dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"y must be a finite numeric target, one value per row of X: {exc}") from exc

    def _validate_x(self, X):
        try:
            return validate_data(self, X, reset=False, dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"X must be a finite numeric 2-D array like the training data: {exc}") from exc

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
