"""Byzantine attacks on federated conformal calibration.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang et al., ICML 2024,
https://arxiv.org/abs/2406.01960), Section 6 (attacks), following the official ``fl_conformal.py``.
A malicious client reports fake calibration scores (and hence a fake histogram). In our convention a
nonconformity score lies in ``[0, 1]`` and larger means stranger (the code uses the mirror convention,
conformity ``p_y``; the attacks below are the code's after ``s -> 1 - s``):

- coverage attack: every score is 0 (the most conforming value). The pooled quantile drops, sets shrink,
  and coverage falls below ``1 - alpha``;
- efficiency attack: every score is 1 (the least conforming value). The quantile rises, sets inflate to
  the full label set and become useless;
- Gaussian-noise attack: ``clip(s + N(0, sigma^2), 0, 1)`` (``sigma = 0.5`` in the paper's IID runs);
- copy attack (non-IID runs): every malicious client replays one benign client's scores, which is
  harmless in an IID federation but over-weights one client's label mix in a non-IID one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from icml24.conformal._validation import check_rng
from icml24.conformal.rob_fcp._checks import finite_real, index_array, int_at_least
from icml24.conformal.rob_fcp.characterization import check_bounds

__all__ = [
    "ATTACKS",
    "apply_attack",
    "copy_attack",
    "coverage_attack",
    "efficiency_attack",
    "gaussian_noise_attack",
]

Attack = Literal["none", "coverage", "efficiency", "gaussian_noise", "copy"]
ATTACKS: tuple[str, ...] = ("none", "coverage", "efficiency", "gaussian_noise", "copy")


def _scores(scores: object, name: str = "scores") -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one client's scores), got shape {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return s


def coverage_attack(scores: np.ndarray, low: float = 0.0) -> np.ndarray:
    """Report ``low`` (the most conforming score) for every sample: shrinks the quantile."""
    return np.full(_scores(scores).shape, finite_real(low, "low"))


def efficiency_attack(scores: np.ndarray, high: float = 1.0) -> np.ndarray:
    """Report ``high`` (the least conforming score) for every sample: inflates the sets."""
    return np.full(_scores(scores).shape, finite_real(high, "high"))


def gaussian_noise_attack(
    scores: np.ndarray,
    sigma: float = 0.5,
    *,
    rng: np.random.Generator | int | None = None,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> np.ndarray:
    """Add ``N(0, sigma^2)`` noise to each score and clip to ``bounds``."""
    sigma = finite_real(sigma, "sigma", low=0.0)
    lo, hi = check_bounds(bounds)
    s = _scores(scores)
    noisy = s + check_rng(rng).normal(0.0, sigma, size=s.shape)
    return np.clip(noisy, lo, hi)


def copy_attack(client_scores: Sequence[np.ndarray], target: int) -> np.ndarray:
    """The scores of client ``target``, replayed verbatim."""
    if len(client_scores) == 0:
        raise ValueError("client_scores is empty: there is no client to copy")
    target = int_at_least(target, "target", 0)
    if target >= len(client_scores):
        raise ValueError(f"target must be a client index in [0, {len(client_scores)}), got {target}")
    return np.array(_scores(client_scores[target], "client_scores[target]"), dtype=np.float64, copy=True)


def apply_attack(
    client_scores: Sequence[np.ndarray],
    malicious: Sequence[int] | np.ndarray,
    attack: Attack,
    *,
    rng: np.random.Generator | int | None = None,
    sigma: float = 0.5,
    copy_target: int | None = None,
) -> list[np.ndarray]:
    """Replace the malicious clients' scores by the attack's reports; benign clients are untouched.

    Args:
        client_scores: K arrays of honest scores.
        malicious: indices of the malicious clients.
        attack: one of :data:`ATTACKS`.
        rng: randomness of the Gaussian-noise attack and of the copy target.
        sigma: noise scale of the Gaussian-noise attack.
        copy_target: benign client replayed by the copy attack (default: a random benign client).

    Returns:
        A new list of K score arrays.
    """
    if attack not in ATTACKS:
        raise ValueError(f"attack must be one of {ATTACKS}, got {attack!r}")
    k = len(client_scores)
    mal = np.unique(index_array(malicious, "malicious", k))
    sigma = finite_real(sigma, "sigma", low=0.0)
    if copy_target is not None:
        copy_target = int_at_least(copy_target, "copy_target", 0)
        if copy_target >= k:
            raise ValueError(f"copy_target must be a client index in [0, {k}), got {copy_target}")
    gen = check_rng(rng)
    out = [np.asarray(s, dtype=np.float64) for s in client_scores]
    if attack == "none" or mal.size == 0:
        return out
    if attack == "copy":
        benign = np.setdiff1d(np.arange(k), mal)
        if benign.size == 0:
            raise ValueError("the copy attack needs at least one benign client to copy")
        target = int(gen.choice(benign)) if copy_target is None else int(copy_target)
        if target in set(mal.tolist()):
            raise ValueError(f"copy_target {target} is a malicious client")
    for i in mal:
        if attack == "coverage":
            out[i] = coverage_attack(out[i])
        elif attack == "efficiency":
            out[i] = efficiency_attack(out[i])
        elif attack == "gaussian_noise":
            out[i] = gaussian_noise_attack(out[i], sigma, rng=gen)
        else:
            out[i] = copy_attack(client_scores, target)
    return out
