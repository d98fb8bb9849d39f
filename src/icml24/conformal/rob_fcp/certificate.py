"""The coverage certificate of Rob-FCP under Byzantine clients.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang et al., ICML 2024,
https://arxiv.org/abs/2406.01960), Theorem 1 (IID clients), as computed by the official
``src/certification.py``. With ``K`` clients of which ``K_b`` are benign, ``tau = K_m / K_b < 1``,
``H`` histogram bins, ``n_b`` calibration samples per benign client (the smallest), a quantile-sketch error
``epsilon`` (0 for exact quantiles) and a failure probability ``beta``: with probability at least
``1 - beta`` over the calibration data,

    P_gap = [H Phi^-1(1 - beta / (2 H K_b)) / (2 sqrt(n_b))] (1 + 2 tau / (1 - tau)),
    1 - alpha - P_gap - (epsilon N + 1) / (N + K_b)  <=  P[Y in C(X)]  <=  1 - alpha + epsilon + K_b / (N + K_b) + P_gap.

``P_gap`` bounds how far the histograms of wrongly kept malicious clients can move the quantile: it grows
with the Byzantine ratio ``tau`` (and blows up as ``tau -> 1``) and with ``H`` (finer histograms are noisier
per bin), and shrinks as ``1 / sqrt(n_b)``. The official code plugs the per-client size ``n_b`` in for ``N``;
that is our default (``n_total=None``) and it is the more conservative choice for the lower bound. Passing
``n_total`` (the total benign sample count, FCP's ``N``) gives the tighter reading. The bounds are clipped to
``[0, 1]`` as in the code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from icml24.common.validation import positive_int
from icml24.conformal._validation import check_alpha

__all__ = ["CoverageBound", "rob_fcp_bound"]


@dataclass(frozen=True)
class CoverageBound:
    """Certified coverage interval.

    Attributes:
        lower: certified lower bound on the coverage, clipped to [0, 1].
        upper: certified upper bound, clipped to [0, 1].
        p_gap: the Byzantine/histogram term ``P_gap``.
    """

    lower: float
    upper: float
    p_gap: float


def rob_fcp_bound(
    n_clients: int,
    n_benign: int,
    n_per_client: int,
    *,
    n_bins: int = 100,
    alpha: float = 0.1,
    beta: float = 0.05,
    eps: float = 0.0,
    n_total: int | None = None,
) -> CoverageBound:
    """Rob-FCP's coverage bound (Theorem 1; official ``certification.py``).

    Args:
        n_clients: ``K``.
        n_benign: ``K_b``, with ``K_m = K - K_b < K_b``.
        n_per_client: ``n_b``, the smallest calibration size of a benign client.
        n_bins: ``H``, the number of histogram bins.
        alpha: target miscoverage.
        beta: failure probability of the certificate, in (0, 1).
        eps: quantile-sketch error ``epsilon`` (0 for exact quantiles), in [0, 1).
        n_total: ``N`` in the finite-sample terms; ``None`` uses ``n_per_client`` as the official code.

    Example:
        >>> b = rob_fcp_bound(10, 8, 20000, n_bins=5, alpha=0.1, beta=0.05)
        >>> round(b.lower, 3), round(b.upper, 3)
        (0.805, 0.995)
    """
    k = positive_int(n_clients, "n_clients")
    kb = positive_int(n_benign, "n_benign")
    nb = positive_int(n_per_client, "n_per_client")
    h = positive_int(n_bins, "n_bins")
    alpha = check_alpha(alpha)
    beta = check_alpha(beta, "beta")
    if kb > k:
        raise ValueError(f"n_benign ({kb}) cannot exceed n_clients ({k})")
    tau = (k - kb) / kb
    if tau >= 1:
        raise ValueError(
            f"n_benign = {kb} of n_clients = {k}: the bound needs fewer malicious than benign clients "
            f"(tau = K_m / K_b < 1), got tau = {tau}"
        )
    if not 0.0 <= float(eps) < 1.0:
        raise ValueError(f"eps must be in [0, 1), got {eps!r}")
    n = nb if n_total is None else positive_int(n_total, "n_total")
    p_gap = h * norm.ppf(1.0 - beta / (2.0 * h * kb)) / (2.0 * np.sqrt(nb)) * (1.0 + 2.0 * tau / (1.0 - tau))
    lower = 1.0 - alpha - p_gap - (eps * n + 1.0) / (n + kb)
    upper = 1.0 - alpha + eps + kb / (n + kb) + p_gap
    return CoverageBound(float(np.clip(lower, 0.0, 1.0)), float(np.clip(upper, 0.0, 1.0)), float(p_gap))
