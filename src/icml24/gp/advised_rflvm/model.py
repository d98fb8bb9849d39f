"""advisedRFLVM: a GPLVM with a spectral-mixture kernel, differentiable random Fourier features and a learned
projection variance, fitted by variational inference with automatic differentiation.

Li, Lin, Yin, Zhang, "Preventing Model Collapse in Gaussian Process Latent Variable Models", ICML 2024
(PMLR 235), https://arxiv.org/abs/2404.01697.

Model (Sec. 4): data ``Y ∈ R^{N×D}``, latents ``X ∈ R^{N×Q}`` with prior ``N(0, I)``. Each output column is
``y_d = Φ(X) β_d + e_d`` with ``β_d ~ N(0, I_M)`` and ``e_d ~ N(0, σ² I)``, where ``Φ`` are random Fourier
features of a spectral-mixture kernel whose frequencies are reparameterised (``ω = μ_j + √v_j ⊙ ε``), so
marginally ``y_d ~ N(0, Φ Φᵀ + σ² I)`` with ``E[Φ Φᵀ] = K_SM``. The variational family is
``q(X) = Π_n N(x_n | m_n, diag s_n²)``. The objective is the ELBO
``E_{q(X), ε}[Σ_d log N(y_d | 0, Φ Φᵀ + σ² I)] - KL(q(X) || p(X))``, estimated with one reparameterised draw of
``X`` and of ``ε`` per step, with the Woodbury form of the log-likelihood; kernel hyperparameters, σ² and
``q(X)`` are all learned by Adam. Learning σ² (instead of fixing it) is what prevents the collapse analysed
in :mod:`icml24.gp.advised_rflvm.linear`; the SM kernel prevents the collapse due to an inflexible kernel.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted
from torch.nn import functional as F

from icml24.gp.gaussian import (
    gaussian_loglik_dense,
    gaussian_loglik_lowrank,
    kl_diag_normal_std,
    lowrank_posterior_weights,
)
from icml24.gp.kernels import RBFKernel, SpectralMixtureKernel, rbf_to_sm_variance
from icml24.gp.linalg import DEFAULT_DTYPE, check_bool, check_scalar, check_tensor, psd_cholesky

__all__ = ["AdvisedRFLVM", "rflvm_elbo", "rflvm_official_loss"]

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn

    def _validate_data(est, x, *, reset, ensure_all_finite, **kw):
        return est._validate_data(x, reset=reset, force_all_finite=ensure_all_finite, **kw)


_NOISE_FLOOR = 1e-6  # relative to the data variance: keeps A = ΦᵀΦ + σ²I well conditioned


def rflvm_elbo(
    y: torch.Tensor,
    latent_mean: torch.Tensor,
    latent_std: torch.Tensor,
    kernel: torch.nn.Module,
    noise: torch.Tensor,
    *,
    eps_x: torch.Tensor,
    eps_omega: torch.Tensor,
    mask: torch.Tensor | None = None,
    kl_weight: float = 1.0,
    dense: bool = False,
) -> torch.Tensor:
    """One-sample reparameterised ELBO of advisedRFLVM (Sec. 4).

    ``x = m + s ⊙ eps_x`` is a draw from ``q(X)``, ``eps_omega`` the frequency draw of the random features;
    returns ``Σ_d log N(y_d | 0, Φ(x) Φ(x)ᵀ + σ² I) - kl_weight · KL(q(X) || N(0, I))``, the likelihood by
    Woodbury (or the dense N×N Cholesky when ``dense``, for N <= M).
    """
    _check_elbo_args(y, latent_mean, latent_std, eps_x, kernel, noise, eps_omega)
    check_scalar("kl_weight", kl_weight, low=0.0, strict=False, allow_tensor=False)
    check_bool("dense", dense)
    x = latent_mean + latent_std * eps_x
    phi = kernel.features(x, eps_omega)
    if dense:
        if mask is not None:
            raise ValueError("dense=True does not support a mask")
        eye = torch.eye(y.shape[0], dtype=y.dtype)
        loglik = gaussian_loglik_dense(y, phi @ phi.T + noise * eye, jitter=0.0)
    else:
        loglik = gaussian_loglik_lowrank(y, phi, noise, mask=mask)
    return loglik - kl_weight * kl_diag_normal_std(latent_mean, latent_std)


_OFFICIAL_JITTER = 1e-8  # the official code's ``zitter`` added to the noise in ``A``


def rflvm_official_loss(
    y: torch.Tensor,
    latent_mean: torch.Tensor,
    latent_std: torch.Tensor,
    kernel: torch.nn.Module,
    noise: torch.Tensor,
    *,
    eps_x: torch.Tensor,
    eps_omega: torch.Tensor,
) -> torch.Tensor:
    """The loss that the official code minimises (``RFF_GPLVM.compute_loss`` with ``kl_option=True``), an ablation.

    It is *not* the negative ELBO of the paper. With ``A = ΦᵀΦ + (σ² + 1e-8) I_M`` and ``L = chol(A)``, for
    ``N > M`` it is ``(1/(2σ²))[tr(YᵀY) - ||L⁻¹ΦᵀY||²] + Σ log diag L + (N - M)·√σ² + (N/2) log 2π``: the
    log-determinant ``log|A|`` enters once (halved) instead of ``D/2`` times, and the noise term
    ``(D/2)(N - M) log σ²`` is replaced by ``(N - M)·√σ²``. For ``N <= M`` it is
    ``[(ND/2) log 2π + D·log(Σ diag C) + ½||C⁻¹Y||²]/(ND)`` with ``C = chol(ΦΦᵀ + σ²I)`` (the log of a *sum*
    of the diagonal). The KL term is ``KL(q(X)||p(X)) / (N·Q) / (N·50)``. Same reparameterised draws as
    :func:`rflvm_elbo`; returns the loss to minimise (a scalar).
    """
    _check_elbo_args(y, latent_mean, latent_std, eps_x, kernel, noise, eps_omega)
    n, d = y.shape
    q = latent_mean.shape[1]
    x = latent_mean + latent_std * eps_x
    phi = kernel.features(x, eps_omega)
    noise = torch.as_tensor(noise, dtype=y.dtype)
    m = phi.shape[1]
    if n > m:
        a = phi.T @ phi + (noise + _OFFICIAL_JITTER) * torch.eye(m, dtype=y.dtype)
        chol = psd_cholesky(a, jitter=0.0, name="A = PhiᵀPhi + noise I")
        b = torch.linalg.solve_triangular(chol, phi.T @ y, upper=False)
        nll = (0.5 / noise) * ((y * y).sum() - (b * b).sum())
        nll = nll + torch.log(torch.diagonal(chol)).sum()
        nll = nll - m * noise.sqrt() + 0.5 * n * (math.log(2 * math.pi) + 2 * noise.sqrt())
    else:
        c = phi @ phi.T + noise * torch.eye(n, dtype=y.dtype)
        chol = psd_cholesky(c, jitter=0.0, name="C = PhiPhiᵀ + noise I")
        alpha = torch.linalg.solve_triangular(chol, y, upper=False)
        nll = (0.5 * n * d * math.log(2 * math.pi) + torch.diagonal(chol).sum().log() * d
               + 0.5 * (alpha * alpha).sum()) / (d * n)  # fmt: skip
    kl = kl_diag_normal_std(latent_mean, latent_std) / (n * q) / (n * 50)
    return nll + kl


def _check_elbo_args(
    y: torch.Tensor,
    latent_mean: torch.Tensor,
    latent_std: torch.Tensor,
    eps_x: torch.Tensor,
    kernel: object,
    noise: object,
    eps_omega: torch.Tensor,
) -> None:
    for name, t in (("y", y), ("latent_mean", latent_mean), ("latent_std", latent_std), ("eps_x", eps_x)):
        check_tensor(name, t, ndim=2)
    if not isinstance(kernel, torch.nn.Module) or not hasattr(kernel, "features"):
        raise TypeError(f"kernel must be a kernel module with features() (RBFKernel, SpectralMixtureKernel), got "
                        f"{type(kernel).__name__}")  # fmt: skip
    check_scalar("noise", noise, low=0.0)
    check_tensor("eps_omega", eps_omega, ndim=3)
    q = latent_mean.shape[1] if latent_mean.dim() == 2 else -1
    if eps_omega.shape[0] != kernel.n_components or eps_omega.shape[2] != q:
        raise ValueError(f"eps_omega must have shape (m, L, Q) = ({kernel.n_components}, L, {q}), got "
                         f"{tuple(eps_omega.shape)}")  # fmt: skip
    if bool((latent_std <= 0).any()):
        raise ValueError("latent_std must be > 0")
    if latent_mean.shape[0] != y.shape[0]:
        raise ValueError(f"latent_mean must have one row per row of y ({y.shape[0]}), got {latent_mean.shape[0]}")
    if latent_std.shape != latent_mean.shape or eps_x.shape != latent_mean.shape:
        raise ValueError(
            f"latent_std and eps_x must have the shape of latent_mean {tuple(latent_mean.shape)}, got "
            f"{tuple(latent_std.shape)} and {tuple(eps_x.shape)}"
        )


class AdvisedRFLVM(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """advisedRFLVM as a scikit-learn transformer (``fit`` / ``transform`` / ``fit_transform`` / ``impute`` /
    ``inverse_transform``; ``get_feature_names_out`` gives ``advisedrflvm0, ...``, so ``set_output`` works).

    ``NaN`` entries of the data are treated as missing: the likelihood uses only the observed entries of each
    column (exact per-column Woodbury), and :meth:`impute` fills them with the posterior mean. A row with no
    observed entry carries no information about its latent: ``fit`` and ``transform`` give it the prior
    ``N(0, I)`` (latent mean 0, std 1) with a warning, and ``fit`` leaves it out of the optimisation.

    Parameters:
        n_components: latent dimension ``Q`` (paper: 2).
        kernel: ``"sm"`` (spectral mixture, the paper's model) or ``"rbf"`` (the RBF-RFLVM ablation).
        n_mixtures: SM components ``m`` (official code: 2). Ignored for ``"rbf"``.
        n_frequencies: frequencies per component (``L/2`` in the notes; official code: 25 in the demo, 50 for
            imputation). Features: ``M = 2 · m · n_frequencies``.
        noise_variance: projection variance σ² as a multiple of the mean squared entry of the preprocessed
            data; the initial value when ``learn_noise`` else the fixed value. ``None``: 0.1.
        learn_noise: learn σ² (the paper's fix) or keep it fixed (the collapse-prone setting).
        kl_weight: weight of ``KL(q(X)||p(X))`` (1 is the ELBO; ~0 mimics the official code's down-weighting).
        objective: ``"elbo"`` (the paper's ELBO, Sec. 4) or ``"official"`` (the official code's loss,
            :func:`rflvm_official_loss`, an ablation; ``kl_weight`` is then unused and missing entries are not
            supported).
        n_iter: Adam steps (official code: 10,000).
        learning_rate: Adam learning rate (official code: 0.01).
        scaling: ``"frobenius"`` divides the centred data by its Frobenius norm (official demo), ``"standard"``
            standardises each column, ``"none"`` only centres.
        n_eval_draws: frequency draws averaged for the posterior mean in :meth:`impute` and :meth:`transform`.
        transform_n_iter: Adam steps of the MAP search for rows :meth:`transform` has not seen in ``fit``.
        random_state: seed of all draws (initialisation, ε for X and for ω): ``None``, an int or a
            ``numpy.random.RandomState``.
        verbose: ``0`` is silent; ``k > 0`` prints the loss ``k`` times over the fit (every ``n_iter // k`` steps).

    Fitted attributes: ``embedding_`` (latent means, ``(N, Q)``), ``latent_std_``, ``noise_variance_`` (σ² in
    preprocessed units), ``kernel_`` (the fitted kernel module), ``loss_curve_`` (the loss per step: negative
    ELBO per data entry, or the official loss), ``n_features_in_``, ``mean_``, ``scale_``.
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        kernel: Literal["sm", "rbf"] = "sm",
        n_mixtures: int = 2,
        n_frequencies: int = 25,
        noise_variance: float | None = None,
        learn_noise: bool = True,
        kl_weight: float = 1.0,
        objective: Literal["elbo", "official"] = "elbo",
        n_iter: int = 10_000,
        learning_rate: float = 0.01,
        scaling: Literal["frobenius", "standard", "none"] = "frobenius",
        n_eval_draws: int = 10,
        transform_n_iter: int = 300,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.n_mixtures = n_mixtures
        self.n_frequencies = n_frequencies
        self.noise_variance = noise_variance
        self.learn_noise = learn_noise
        self.kl_weight = kl_weight
        self.objective = objective
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.scaling = scaling
        self.n_eval_draws = n_eval_draws
        self.transform_n_iter = transform_n_iter
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN marks a missing entry
        return tags

    def _more_tags(self) -> dict:  # scikit-learn < 1.6
        return {"allow_nan": True}

    # ------------------------------------------------------------------ checks
    def _check_params(self, n: int, d: int) -> None:
        if isinstance(self.n_components, bool) or not isinstance(self.n_components, (int, np.integer)):
            raise TypeError(f"n_components must be an int, got {type(self.n_components).__name__}")
        if self.n_components < 1:
            raise ValueError(f"n_components must be a positive int, got {self.n_components!r}")
        if self.n_components > d:
            raise ValueError(
                f"n_components (latent dimension {self.n_components}) must not exceed the data dimension {d}"
            )
        if self.kernel not in ("sm", "rbf"):
            raise ValueError(f"kernel must be 'sm' or 'rbf', got {self.kernel!r}")
        if self.objective not in ("elbo", "official"):
            raise ValueError(f"objective must be 'elbo' or 'official', got {self.objective!r}")
        for name in ("n_mixtures", "n_frequencies", "n_iter", "n_eval_draws", "transform_n_iter"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name} must be an int, got {type(v).__name__}")
            if v < (0 if name == "transform_n_iter" else 1):
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name, lo_ok in (("noise_variance", False), ("kl_weight", True), ("learning_rate", False)):
            v = getattr(self, name)
            if v is None and name == "noise_variance":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise TypeError(f"{name} must be a number, got {type(v).__name__}")
            if not math.isfinite(v) or v < 0 or (v == 0 and not lo_ok):
                raise ValueError(f"{name} must be finite and {'>= 0' if lo_ok else '> 0'}, got {v!r}")
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, (int, np.integer)) or self.verbose < 0:
            raise TypeError(f"verbose must be an int >= 0, got {self.verbose!r}")
        if not isinstance(self.learn_noise, (bool, np.bool_)):
            raise TypeError(f"learn_noise must be a bool, got {type(self.learn_noise).__name__}")
        if self.scaling not in ("frobenius", "standard", "none"):
            raise ValueError(f"scaling must be 'frobenius', 'standard' or 'none', got {self.scaling!r}")

    def _check_data(self, x: object, *, reset: bool) -> np.ndarray:
        """scikit-learn's input validation (2-D, numeric, dense, no inf; NaN allowed as missing), with the
        argument named in every message."""
        try:
            arr = _validate_data(
                self, x, reset=reset, accept_sparse=False, dtype=np.float64, ensure_all_finite="allow-nan",
                ensure_min_samples=2 if reset else 1,
            )  # fmt: skip
        except TypeError as exc:
            raise TypeError(f"X: {exc}") from exc
        except ValueError as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith("X") else f"X: {msg}") from exc
        empty = np.isnan(arr).all(axis=1)
        if reset and np.isnan(arr).all(axis=0).any():
            raise ValueError("X has a column with no observed (non-NaN) entry: its mean and scale are undefined")
        if reset and (~empty).sum() < 2:
            raise ValueError("X needs at least 2 rows with an observed (non-NaN) entry")
        if empty.any():
            rows = np.flatnonzero(empty)
            warnings.warn(
                f"X has {rows.size} row(s) with no observed (non-NaN) entry (first: {rows[:5].tolist()}): they get "
                "the prior latent N(0, I) (mean 0, std 1), since the data say nothing about them",
                UserWarning, stacklevel=3,
            )  # fmt: skip
        return arr

    # ------------------------------------------------------------------ fitting
    def fit(self, X: np.ndarray, y: object = None) -> AdvisedRFLVM:  # noqa: N803 - scikit-learn signature
        """Fit the variational latents, kernel and σ² by maximising the ELBO. ``y`` is ignored."""
        data = self._check_data(X, reset=True)
        n, d = data.shape
        self._check_params(n, d)
        observed_all = ~np.isnan(data)
        keep = observed_all.any(axis=1)  # rows with no observed entry: prior latent, left out of the fit
        observed = observed_all[keep]
        has_missing = not observed.all()
        if has_missing and self.objective == "official":
            raise ValueError("X has missing (NaN) entries, which objective='official' does not support")
        mean = np.nanmean(data, axis=0)
        centred = np.where(observed, data[keep] - mean, 0.0)
        n = centred.shape[0]
        if self.scaling == "frobenius":
            scale = np.full(d, np.sqrt((centred**2).sum()))
        elif self.scaling == "standard":
            scale = np.sqrt((centred**2).sum(0) / observed.sum(0))
        else:
            scale = np.ones(d)
        scale = np.where(scale > 0, scale, 1.0)
        yt = torch.as_tensor(centred / scale, dtype=DEFAULT_DTYPE)
        mask = torch.as_tensor(observed) if has_missing else None
        data_var = float((yt**2).sum() / observed.sum())
        if data_var <= 0:
            raise ValueError("X is constant: there is nothing to embed")

        try:
            seed = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"random_state must be None, an int in [0, 2**32) or a RandomState: {exc}") from exc
        gen = torch.Generator().manual_seed(seed)
        q = int(self.n_components)
        kern = self._init_kernel(q, data_var, gen)
        mu0 = self._pca_init(np.where(observed, centred, 0.0), q)
        mu_x = torch.nn.Parameter(torch.as_tensor(mu0, dtype=DEFAULT_DTYPE))
        raw_s = torch.nn.Parameter(torch.full((n, q), _inv_softplus(0.1), dtype=DEFAULT_DTYPE))
        rel = 0.1 if self.noise_variance is None else float(self.noise_variance)
        floor = _NOISE_FLOOR * data_var
        raw_noise = torch.nn.Parameter(
            torch.tensor(_inv_softplus(max(rel * data_var - floor, floor)), dtype=DEFAULT_DTYPE),
            requires_grad=bool(self.learn_noise),
        )
        params = [mu_x, raw_s, *kern.parameters()] + ([raw_noise] if self.learn_noise else [])
        opt = torch.optim.Adam(params, lr=self.learning_rate)
        n_freq, m = int(self.n_frequencies), kern.n_components
        use_dense = mask is None and n <= 2 * m * n_freq
        losses = np.empty(int(self.n_iter))
        n_entries = float(observed.sum())
        for it in range(int(self.n_iter)):
            opt.zero_grad(set_to_none=True)
            draws = {
                "eps_x": torch.randn(n, q, generator=gen, dtype=DEFAULT_DTYPE),
                "eps_omega": torch.randn(m, n_freq, q, generator=gen, dtype=DEFAULT_DTYPE),
            }
            noise = F.softplus(raw_noise) + floor
            if self.objective == "official":
                loss = rflvm_official_loss(yt, mu_x, F.softplus(raw_s), kern, noise, **draws)
            else:
                elbo = rflvm_elbo(
                    yt, mu_x, F.softplus(raw_s), kern, noise, mask=mask, kl_weight=float(self.kl_weight),
                    dense=use_dense, **draws,
                )  # fmt: skip
                loss = -elbo / n_entries
            loss.backward()
            opt.step()
            losses[it] = float(loss.detach())
            if self.verbose and ((it + 1) % max(1, int(self.n_iter) // int(self.verbose)) == 0 or it == 0):
                print(f"[AdvisedRFLVM] step {it + 1}/{int(self.n_iter)}  loss {losses[it]:.6g}", flush=True)
        self.mean_ = mean
        self.scale_ = scale
        with torch.no_grad():
            self.noise_variance_ = float(F.softplus(raw_noise) + floor)
            self.embedding_ = np.zeros((len(data), q))
            self.embedding_[keep] = mu_x.detach().numpy()
            self.latent_std_ = np.ones((len(data), q))
            self.latent_std_[keep] = F.softplus(raw_s).detach().numpy()
        self.kernel_ = kern
        self.loss_curve_ = losses
        self.n_iter_ = int(self.n_iter)
        self._y = yt
        self._mask = mask
        self._train_data = data
        # Row lookup for transform: a row seen in fit maps to its latent mean (averaged over duplicate rows),
        # whatever its position, so transform(X[perm]) == transform(X)[perm].
        self._row_index: dict[bytes, list[int]] = {}
        for i, row in enumerate(data):
            self._row_index.setdefault(_row_key(row), []).append(i)
        self._eval_eps = torch.randn(int(self.n_eval_draws), m, n_freq, q, generator=gen, dtype=DEFAULT_DTYPE)
        with torch.no_grad():
            mu = torch.as_tensor(self.embedding_[keep], dtype=DEFAULT_DTYPE)
            self._betas = [
                lowrank_posterior_weights(yt, kern.features(mu, e), self.noise_variance_, mask=mask)
                for e in self._eval_eps
            ]
        return self

    def fit_transform(self, X: np.ndarray, y: object = None) -> np.ndarray:  # noqa: N803
        """``fit(X).transform(X)``, warning once (not twice) about rows with no observed entry."""
        self.fit(X, y)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="X has .* no observed", category=UserWarning)
            return self.transform(X)

    def _init_kernel(self, q: int, data_var: float, gen: torch.Generator) -> torch.nn.Module:
        # Initial signal variance 0.9 of the data's, lengthscale 1 in the unit-variance PCA latent space.
        if self.kernel == "rbf":
            return RBFKernel(lengthscale=1.0, variance=0.9 * data_var)
        m = int(self.n_mixtures)
        means = torch.rand(m, q, generator=gen, dtype=DEFAULT_DTYPE) * 0.5
        means[0] = 0.0  # one low-frequency (RBF-like) component, the others periodic
        return SpectralMixtureKernel(
            n_components=m,
            input_dim=q,
            weights=torch.full((m,), 0.9 * data_var / m, dtype=DEFAULT_DTYPE),
            means=means,
            variances=torch.full((m, q), rbf_to_sm_variance(1.0), dtype=DEFAULT_DTYPE),
        )

    @staticmethod
    def _pca_init(centred: np.ndarray, q: int) -> np.ndarray:
        u, s, _ = np.linalg.svd(centred, full_matrices=False)
        z = u[:, :q] * s[:q]
        std = z.std(axis=0)
        return z / np.where(std > 0, std, 1.0)

    # ------------------------------------------------------------------ outputs
    def _posterior_mean(self, mu: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out = torch.zeros(mu.shape[0], self.n_features_in_, dtype=DEFAULT_DTYPE)
            for e, beta in zip(self._eval_eps, self._betas):
                out += self.kernel_.features(mu, e) @ beta
            return out / len(self._betas)

    def reconstruct(self) -> np.ndarray:
        """Posterior mean ``K(X, X)(K + σ²I)⁻¹ Y`` at the latent means, in the original units, ``(N, D)``."""
        check_is_fitted(self, "embedding_")
        f = self._posterior_mean(torch.as_tensor(self.embedding_, dtype=DEFAULT_DTYPE)).numpy()
        return f * self.scale_ + self.mean_

    def impute(self, X: np.ndarray | None = None) -> np.ndarray:  # noqa: N803
        """The training data with its ``NaN`` entries replaced by the posterior mean.

        ``X`` defaults to the training data; if given it must be the array passed to :meth:`fit`.
        """
        check_is_fitted(self, "embedding_")
        data = self._train_data if X is None else self._check_data(X, reset=False)
        if data.shape != self._train_data.shape or not np.array_equal(data, self._train_data, equal_nan=True):
            raise ValueError("X: impute(X) needs the data the model was fitted on (call fit(X) first)")
        return np.where(np.isnan(data), self.reconstruct(), data)

    def transform(self, X: np.ndarray) -> np.ndarray:  # noqa: N803
        """Latent means of the rows of ``X``, each row on its own (row order and batch do not matter).

        A row that was in the training data gets its fitted latent mean (``embedding_``; the mean over
        identical training rows). Any other row gets the MAP latent under the fitted model (posterior-mean
        map, σ², prior ``N(0, I)``), found by ``transform_n_iter`` Adam steps from the latent of the training row
        whose reconstruction is nearest. The paper defines no out-of-sample map; this one is ours.
        """
        check_is_fitted(self, "embedding_")
        data = self._check_data(X, reset=False)
        out = np.empty((data.shape[0], self.embedding_.shape[1]))
        new_rows = []
        for i, row in enumerate(data):
            idx = self._row_index.get(_row_key(row))
            if idx is None and np.isnan(row).all():
                out[i] = 0.0  # no observed entry: the prior mean (warned in _check_data)
            elif idx is None:
                new_rows.append(i)
            else:
                out[i] = self.embedding_[idx].mean(0)
        if new_rows:
            out[new_rows] = self._map_latents(data[new_rows])
        return out

    def inverse_transform(self, X: np.ndarray) -> np.ndarray:  # noqa: N803
        """The data the latents ``X`` (``(n, Q)``) map to: the posterior mean of ``f(x)``, in original units.

        ``inverse_transform(transform(X))`` is the model's reconstruction of ``X`` (:meth:`reconstruct` for
        the training rows), with every entry filled, observed or not.
        """
        check_is_fitted(self, "embedding_")
        z = check_array(X, dtype=np.float64, input_name="X")
        if z.shape[1] != self.embedding_.shape[1]:
            raise ValueError(f"X must have n_components = {self.embedding_.shape[1]} columns, got {z.shape[1]}")
        f = self._posterior_mean(torch.tensor(z, dtype=DEFAULT_DTYPE)).numpy()
        return f * self.scale_ + self.mean_

    @property
    def _n_features_out(self) -> int:  # for ClassNamePrefixFeaturesOutMixin.get_feature_names_out
        return int(self.embedding_.shape[1])

    def _map_latents(self, data: np.ndarray) -> np.ndarray:
        # Each row's objective involves only its own latent, and Adam's update is element-wise, so every row
        # follows the trajectory it would follow alone.
        obs = ~np.isnan(data)
        yt = torch.as_tensor(np.where(obs, (data - self.mean_) / self.scale_, 0.0), dtype=DEFAULT_DTYPE)
        w = torch.as_tensor(obs, dtype=DEFAULT_DTYPE)
        recon = self._posterior_mean(torch.as_tensor(self.embedding_, dtype=DEFAULT_DTYPE))
        dist = (w.unsqueeze(1) * (yt.unsqueeze(1) - recon.unsqueeze(0)) ** 2).sum(-1)
        x = torch.nn.Parameter(torch.as_tensor(self.embedding_, dtype=DEFAULT_DTYPE)[dist.argmin(1)].clone())
        opt = torch.optim.Adam([x], lr=0.05)
        for _ in range(int(self.transform_n_iter)):
            opt.zero_grad(set_to_none=True)
            f = sum(self.kernel_.features(x, e) @ b for e, b in zip(self._eval_eps, self._betas)) / len(self._betas)
            loss = (w * (yt - f) ** 2).sum() / (2 * self.noise_variance_) + 0.5 * (x * x).sum()
            loss.backward()
            opt.step()
        return x.detach().numpy()


def _row_key(row: np.ndarray) -> bytes:
    # +0.0 folds -0.0 into 0.0; NaN (missing) rows compare by their bit pattern, which numpy keeps.
    return np.ascontiguousarray(row + 0.0, dtype=np.float64).tobytes()


def _inv_softplus(v: float) -> float:
    return float(v + math.log(-math.expm1(-v)))
