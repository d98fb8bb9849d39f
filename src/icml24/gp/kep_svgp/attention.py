"""KEP-SVGP attention: self-attention as a pair of sparse variational GPs on kernel-SVD eigen-features.

Chen, Tao, Tonin, Suykens, "Self-Attention through Kernel-Eigen Pair Sparse Variational Gaussian Processes",
ICML 2024 (PMLR 235), https://arxiv.org/abs/2402.01476.

Softmax attention is an *asymmetric* kernel ``κ(x_i, x_j) = <φ_q(x_i), φ_k(x_j)>`` (queries and keys use
different maps). Its kernel SVD (KSVD, as in Primal-Attention) has two adjoint sets of singular functions,
the left ones on queries and the right ones on keys, sharing singular values ``Λ``. KEP-SVGP uses these
eigen-features as inducing features of two sparse variational GPs; the inducing covariance is then
diagonal (``Λ``), so the SVGP posterior needs only ``Λ⁻¹`` instead of an N×N or M×M inverse. Per head:

* ``q_n = normalize(W_q x_n)``, ``k_n = normalize(W_k x_n)`` (``φ_q``, ``φ_k``);
* data-dependent projections ``W_e = X̃ Ŵ_e``, ``W_r = X̃ Ŵ_r`` from ``N' = min(N, s·r)`` evenly spaced tokens;
* eigen-features (projection scores) ``e_n = W_eᵀ q_n``, ``r_n = W_rᵀ k_n`` in ``R^s``;
* posterior ``f_n = z_nᵀ m + z_nᵀ L ε`` per output channel, with ``z_n = Λ⁻¹(e_n + r_n)`` (sum variant) or the
  two branches stacked and mixed back over the token axis by a learned linear map (concatenation variant);
  ``m`` and ``L`` (lower-triangular, positive diagonal) are the variational parameters of ``q(u) = N(m, L Lᵀ)``;
* KL to the prior ``p(u) = N(0, Λ²)`` and the KSVD regulariser
  ``J = [½ mean ||Λ^{-1/2} e||² + ½ mean ||Λ^{-1/2} r||² - mean_h tr(Ŵ_eᵀ Ŵ_r)]²`` (the primal KSVD objective,
  zero at a KSVD stationary point) enter the loss ``CE + η_ksvd Σ J + η_kl Σ KL``.

This module follows the official code's algebra (prior ``N(0, Λ²)``, no value or output projection), except
that each channel's Cholesky factor is a genuine lower-triangular matrix whose log-determinant is the one in
the KL (see the README).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from icml24.gp.gaussian import kl_normal_chol_diag_prior
from icml24.gp.linalg import check_bool, check_int, check_scalar, check_tensor

__all__ = ["KEPSVGPAttention"]


class KEPSVGPAttention(nn.Module):
    """Drop-in replacement for a multi-head self-attention block, ``(B, N, C) -> (B, N, C)``.

    Args:
        dim: token width ``C`` (divisible by ``num_heads``).
        num_heads: heads ``H``; head width ``d_h = C / H``.
        seq_len: number of tokens ``N`` the layer is built for (fixes ``N'`` and the concat mixing map).
        rank: ``s``, the number of KSVD eigen-pairs (official default 10).
        rank_multi: ``r``; ``N' = min(N, s·r)`` tokens build the projections (official default 10).
        concat: concatenation variant instead of the sum variant.
        qk_bias: bias in the query/key map.
        proj_drop: dropout on the output.
        sample: draw from the posterior in ``forward`` (training and MC prediction); ``False`` returns the
            posterior-mean path (deterministic).

    After each forward, :meth:`ksvd_loss` uses that call's eigen-features; :meth:`kl_divergence` depends only on
    the parameters.
    """

    def __init__(
        self,
        *,
        dim: int,
        num_heads: int,
        seq_len: int,
        rank: int = 10,
        rank_multi: int = 10,
        concat: bool = False,
        qk_bias: bool = False,
        proj_drop: float = 0.0,
        sample: bool = True,
    ):
        super().__init__()
        for name, v in (("dim", dim), ("num_heads", num_heads), ("seq_len", seq_len), ("rank", rank),
                        ("rank_multi", rank_multi)):  # fmt: skip
            check_int(name, v)
        for name, v in (("concat", concat), ("qk_bias", qk_bias), ("sample", sample)):
            check_bool(name, v)
        check_scalar("proj_drop", proj_drop, low=0.0, strict=False, allow_tensor=False)
        if proj_drop >= 1:
            raise ValueError(f"proj_drop must be a probability in [0, 1), got {proj_drop!r}")
        if dim % num_heads:
            raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        self.seq_len, self.rank, self.rank_multi, self.concat = seq_len, rank, rank_multi, concat
        self.sample = sample
        self.n_landmarks = min(seq_len, rank * rank_multi)
        h, s, n_l = num_heads, rank, self.n_landmarks
        self.qk = nn.Linear(dim, 2 * dim, bias=qk_bias)
        self.we = nn.Parameter(torch.empty(h, n_l, s))
        self.wr = nn.Parameter(torch.empty(h, n_l, s))
        for w in (self.we, self.wr):
            for i in range(h):
                nn.init.orthogonal_(w.data[i])
        self.log_lambda_sqrt_inv = nn.Parameter(torch.rand(h, s))  # log Λ^{-1/2}, uniform init as in the code
        self.m_u = nn.Parameter(torch.randn(h, s, s))  # (head, eigen-dim, channel)
        self.chol_offdiag = nn.Parameter(torch.randn(h, s, s, s))  # (head, channel, s, s); strict lower part used
        self.log_chol_diag = nn.Parameter(torch.randn(h, s, s))  # (head, channel, s)
        self.final = nn.Linear(s, self.head_dim)
        self.token_mix = nn.Linear(2 * seq_len, seq_len) if concat else None
        self.proj_drop = nn.Dropout(proj_drop)
        self.register_buffer(
            "landmarks", torch.linspace(0, seq_len - 1, n_l).round().long(), persistent=False
        )
        self._escore: torch.Tensor | None = None
        self._rscore: torch.Tensor | None = None

    # ------------------------------------------------------------------ pieces
    @property
    def lambda_diag(self) -> torch.Tensor:
        """Singular values ``Λ`` per head, ``(H, s)``, positive by construction."""
        return torch.exp(-2.0 * self.log_lambda_sqrt_inv)

    def chol_factors(self) -> torch.Tensor:
        """Variational Cholesky factors ``L_c`` per head and channel, ``(H, s, s, s)``, lower-triangular."""
        return torch.tril(self.chol_offdiag, diagonal=-1) + torch.diag_embed(torch.exp(self.log_chol_diag))

    def _check(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3 or x.shape[1] != self.seq_len or x.shape[2] != self.dim:
            raise ValueError(f"x must have shape (B, {self.seq_len}, {self.dim}), got {tuple(x.shape)}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError("x must be finite (it holds NaN or inf)")

    def query_key(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ℓ2-normalised queries and keys ``φ_q(x), φ_k(x)``, each ``(B, H, N, d_h)``."""
        b, n, _ = x.shape
        q, k = self.qk(x).reshape(b, n, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return F.normalize(q, dim=-1), F.normalize(k, dim=-1)

    def attention_kernel(self, x: torch.Tensor) -> torch.Tensor:
        """The asymmetric attention kernel ``κ(x_i, x_j) = <φ_q(x_i), φ_k(x_j)>``, ``(B, H, N, N)``."""
        self._check(x)
        q, k = self.query_key(x)
        return q @ k.transpose(-2, -1)

    def eigen_features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Left/right KSVD projection scores ``e = W_eᵀ φ_q(x)``, ``r = W_rᵀ φ_k(x)``, each ``(B, H, N, s)``."""
        self._check(x)
        b, _, _ = x.shape
        q, k = self.query_key(x)
        # X̃_h: the head slice of N' evenly spaced input tokens, (B, H, d_h, N').
        xs = x[:, self.landmarks, :].reshape(b, self.n_landmarks, self.num_heads, self.head_dim).permute(0, 2, 3, 1)
        w_e = xs @ self.we  # (B, H, d_h, s)
        w_r = xs @ self.wr
        return q @ w_e, k @ w_r

    def posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(z, mean, z L)``: SVGP inputs ``z`` ``(B, H, N*, s)``, posterior mean ``(B, H, N*, s)`` and the
        Cholesky-projected inputs ``(B, H, N*, c, s)`` whose squared norm is the predictive variance;
        ``N* = N`` (sum) or ``2N`` (concat)."""
        e, r = self.eigen_features(x)
        self._escore, self._rscore = e, r
        lam_inv = torch.exp(2.0 * self.log_lambda_sqrt_inv).unsqueeze(1)  # Λ⁻¹, (H, 1, s)
        z = (torch.cat((e, r), dim=2) if self.concat else e + r) * lam_inv
        mean = z @ self.m_u
        z_l = torch.einsum("bhns,hcst->bhnct", z, self.chol_factors())
        return z, mean, z_l

    def predictive_variance(self, x: torch.Tensor) -> torch.Tensor:
        """Marginal posterior variance ``z_nᵀ L_c L_cᵀ z_n`` of each head's SVGP output, ``(B, H, N*, s)``."""
        _, _, z_l = self.posterior(x)
        return (z_l * z_l).sum(-1)

    # ------------------------------------------------------------------ forward and loss terms
    def forward(self, x: torch.Tensor, *, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Attention output ``(B, N, C)``. ``noise`` (``(B, H, N*, s, s)`` standard normal) fixes the draw."""
        _, mean, z_l = self.posterior(x)
        if noise is not None:
            check_tensor("noise", noise)
            if noise.shape != z_l.shape:
                raise ValueError(f"noise must have shape {tuple(z_l.shape)}, got {tuple(noise.shape)}")
            f = mean + (z_l * noise).sum(-1)
        elif self.sample:
            f = mean + (z_l * torch.randn_like(z_l)).sum(-1)
        else:
            f = mean
        out = self.final(f)  # (B, H, N*, d_h)
        if self.token_mix is not None:
            out = self.token_mix(out.transpose(-1, -2)).transpose(-1, -2)
        b, n = x.shape[0], x.shape[1]
        return self.proj_drop(out.transpose(1, 2).reshape(b, n, self.dim))

    def kl_divergence(self) -> torch.Tensor:
        """``Σ_heads Σ_channels KL(N(m_c, L_c L_cᵀ) || N(0, Λ²))``."""
        prior_var = (self.lambda_diag**2).unsqueeze(1)  # (H, 1, s)
        return kl_normal_chol_diag_prior(self.m_u.transpose(-1, -2), self.chol_factors(), prior_var)

    def ksvd_loss(self) -> torch.Tensor:
        """KSVD regulariser ``J >= 0`` on the eigen-features of the last forward call."""
        if self._escore is None or self._rscore is None:
            raise RuntimeError("ksvd_loss() needs a forward() call first")
        lam_sqrt_inv = torch.exp(self.log_lambda_sqrt_inv).unsqueeze(1)  # (H, 1, s)
        e_term = 0.5 * ((self._escore * lam_sqrt_inv) ** 2).sum(-1).mean()
        r_term = 0.5 * ((self._rscore * lam_sqrt_inv) ** 2).sum(-1).mean()
        trace = torch.einsum("hps,hps->h", self.we, self.wr).mean()
        return (e_term + r_term - trace) ** 2
