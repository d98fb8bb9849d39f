"""Token matching and merging: ToMe's bipartite soft matching, CrossGET's complete-graph soft matching with
cross-guided importance and the importance-weighted ensemble, and random dropping.

Shi, Tao, Rao, Yang, Yuan, Wang, "CrossGET: Cross-Guided Ensemble of Tokens for Accelerating Vision-Language
Transformers", ICML 2024 (https://arxiv.org/abs/2305.17455), §3.2-3.3; Bolya et al., "Token Merging: Your
ViT but Faster", ICLR 2023 (https://arxiv.org/abs/2210.09461), §3.

Every rule returns a :class:`MergePlan` for a batch: which ``r`` tokens of each sequence are *sources*
(merged away), which tokens are kept (in their original order), and into which kept token each source goes.
:func:`merge_tokens` then applies the plan to the tokens and their *sizes* (how many input tokens each one
stands for), so proportional attention (``+ log s_j`` on the attention logits, ToMe §3, CrossGET eq. 8) and
the size-weighted average stay exact after any number of merges.

CrossGET's complete-graph soft matching (§3.3, "Complete-Graph Soft Matching"), as in the official
``CLIP/clip/reducer.py``: with normalised keys ``k̂``, the similarity ``S = k̂ k̂ᵀ`` (diagonal and protected
tokens ``-inf``); tokens are ranked by their best similarity ``g_i = max_j S_ij`` (descending) and a token may
only be merged *into* a token ranked after it (``M_ij = -inf`` for ``rank(j) <= rank(i)``), which rules out
chains; with the cross-guided importance ``I_i = cos(k_i, q_cross)`` the score is
``I_i - max_j (S_ij + M_ij)`` and the ``r`` smallest scores (redundant *and* unimportant) are the sources;
each source goes to its most similar non-source token. The merged token is the importance-weighted ensemble
(§3.2, "Cross-Guided Ensemble"): ``(w_a, w_b) = 2 softmax(I_a, I_b)``,
``x_b ← (w_a s_a x_a + w_b s_b x_b) / (s_a + s_b)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = [
    "MergePlan",
    "bipartite_soft_matching",
    "complete_graph_soft_matching",
    "cross_guided_importance",
    "merge_tokens",
    "random_drop",
]


@dataclass(frozen=True)
class MergePlan:
    """Which tokens of each sequence go where (all index tensors are int64, batch first).

    Attributes:
        src: ``(B, r)`` indices of the tokens merged away (or dropped).
        keep: ``(B, T - r)`` indices of the tokens that stay, ascending (original order).
        dst: ``(B, r)`` for each source, the *position in* ``keep`` of the token it is merged into.
        weight: ``(B, r, 2)`` ensemble weights ``(w_src, w_dst)`` with ``w_src + w_dst = 2`` (CrossGET), or
            ``None`` for the plain size-weighted mean (ToMe).
        drop: sources are discarded instead of merged (random dropping).
    """

    src: torch.Tensor
    keep: torch.Tensor
    dst: torch.Tensor
    weight: torch.Tensor | None = None
    drop: bool = False

    @property
    def r(self) -> int:
        return int(self.src.shape[1])


def check_tensor(name: str, value: object, dim: int | None = None, *, finite: bool = True) -> torch.Tensor:
    """``value`` as a finite floating tensor (of ``dim`` dimensions), else a ``ValueError``/``TypeError`` naming it.

    ``finite=False`` skips the NaN/inf scan (a full pass over the tensor): for calls inside a forward pass whose
    input was already checked once at the boundary (:meth:`TinyCLIP.encode_image`).
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if dim is not None and value.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimensions, got shape {tuple(value.shape)}")
    if finite and value.is_floating_point() and not torch.isfinite(value).all():
        raise ValueError(f"{name} must be finite (it holds NaN or inf)")
    return value


def _check_metric(metric: torch.Tensor, r: int, finite: bool = True) -> None:
    if not isinstance(metric, torch.Tensor) or metric.dim() != 3:
        raise ValueError(f"metric must be a (batch, tokens, channels) tensor, got "
                         f"{tuple(metric.shape) if isinstance(metric, torch.Tensor) else type(metric).__name__}")  # fmt: skip
    if finite and not torch.isfinite(metric).all():
        raise ValueError("metric must be finite")
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise ValueError(f"r must be an int >= 0, got {r!r}")


def _protected_mask(protected: torch.Tensor | None, b: int, t: int, device) -> torch.Tensor:
    if protected is None:
        return torch.zeros(b, t, dtype=torch.bool, device=device)
    if not isinstance(protected, torch.Tensor) or protected.dtype != torch.bool:
        raise TypeError("protected must be a bool tensor of shape (tokens,) or (batch, tokens)")
    if protected.shape not in ((t,), (b, t)):
        raise ValueError(f"protected must have shape ({t},) or ({b}, {t}), got {tuple(protected.shape)}")
    return protected.expand(b, t)


def _plan_from_sources(src: torch.Tensor, dst_orig: torch.Tensor, t: int, weight=None, drop=False) -> MergePlan:
    """Build the plan from source indices and their destinations as original indices."""
    b, r = src.shape
    is_src = torch.zeros(b, t, dtype=torch.bool, device=src.device)
    is_src.scatter_(1, src, True)
    keep = torch.arange(t, device=src.device).expand(b, t)[~is_src].view(b, t - r)
    # position of each original index among the kept ones
    position = torch.cumsum(~is_src, dim=1) - 1
    dst = position.gather(1, dst_orig) if r else dst_orig
    return MergePlan(src=src, keep=keep, dst=dst, weight=weight, drop=drop)


def _capacity(protected: torch.Tensor) -> int:
    """Largest r every sequence allows: half its unprotected tokens (ToMe's and CrossGET's bound)."""
    return int(((~protected).sum(1).min()) // 2)


@torch.no_grad()
def bipartite_soft_matching(
    metric: torch.Tensor, r: int, *, protected: torch.Tensor | None = None, check_finite: bool = True
) -> MergePlan:
    """ToMe's bipartite soft matching (Bolya et al., 2023, §3, "Bipartite Soft Matching").

    Tokens alternate into sets A (even positions) and B (odd positions); every A token draws an edge to its
    most similar B token (cosine similarity of ``metric``); the ``r`` most similar edges are merged (A into B).

    Args:
        metric: ``(B, T, C)`` the features compared (ToMe: the attention keys averaged over heads).
        r: tokens to remove; clipped to ``(T - protected) // 2``.
        protected: ``(T,)`` or ``(B, T)`` bool: tokens that are never sources nor destinations (CLS, ...).
        check_finite: scan ``metric`` for NaN/inf (``False`` inside a forward pass checked at its input).
    """
    _check_metric(metric, r, check_finite)
    b, t, _ = metric.shape
    prot = _protected_mask(protected, b, t, metric.device)
    r = min(r, _capacity(prot), t // 2)
    m = metric / metric.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    a_idx = torch.arange(0, t, 2, device=metric.device)
    b_idx = torch.arange(1, t, 2, device=metric.device)
    scores = m[:, a_idx] @ m[:, b_idx].transpose(1, 2)
    scores = scores.masked_fill(prot[:, a_idx, None] | prot[:, None, b_idx], -math.inf)
    node_max, node_idx = scores.max(dim=-1)
    order = node_max.argsort(dim=-1, descending=True, stable=True)[:, :r]
    src = a_idx[order]
    dst_orig = b_idx[node_idx.gather(1, order)]
    return _plan_from_sources(src, dst_orig, t)


def cross_guided_importance(keys: torch.Tensor, cross_query: torch.Tensor, *, check_finite: bool = True) -> torch.Tensor:
    """CrossGET's token importance ``I_i = cos(k_i, q_cross)`` (§3.2, eq. 4; ``reducer.py``).

    Args:
        keys: ``(B, T, C)`` the layer's attention keys.
        cross_query: ``(B, C)`` the cross token's query in the same layer.
        check_finite: scan the inputs for NaN/inf (``False`` inside a forward pass checked at its input).

    Returns:
        ``(B, T)`` cosine similarities in ``[-1, 1]``.
    """
    check_tensor("keys", keys, 3, finite=check_finite)
    check_tensor("cross_query", cross_query, finite=check_finite)
    if cross_query.shape != (keys.shape[0], keys.shape[2]):
        raise ValueError(f"keys must be (B, T, C) and cross_query (B, C), got {tuple(keys.shape)} and "
                         f"{tuple(cross_query.shape)}")  # fmt: skip
    k = keys / keys.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    q = cross_query / cross_query.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (k @ q[..., None])[..., 0]


@torch.no_grad()
def complete_graph_soft_matching(
    metric: torch.Tensor,
    r: int,
    *,
    protected: torch.Tensor | None = None,
    importance: torch.Tensor | None = None,
    weighted_ensemble: bool = True,
    check_finite: bool = True,
) -> MergePlan:
    """CrossGET's complete-graph soft matching with cross-guided importance (§3.3, Algorithm 1).

    Args:
        metric: ``(B, T, C)`` the features compared (CrossGET: the layer's keys, all heads).
        r: tokens to remove; clipped to ``(T - protected) // 2`` (as ``reducer.py``).
        protected: ``(T,)`` or ``(B, T)`` bool: never sources nor destinations (CLS, cross token).
        importance: ``(B, T)`` cross-guided importance (:func:`cross_guided_importance`); ``None`` ranks by
            redundancy alone (the "w/o cross-guided matching" ablation).
        weighted_ensemble: with ``importance``, merge with the weights ``2 softmax(I_src, I_dst)``
            (cross-guided ensemble); ``False`` keeps the size-weighted mean (the ablation).
        check_finite: scan ``metric`` and ``importance`` for NaN/inf (``False`` inside a forward pass checked
            at its input).
    """
    _check_metric(metric, r, check_finite)
    b, t, _ = metric.shape
    prot = _protected_mask(protected, b, t, metric.device)
    if importance is not None:
        check_tensor("importance", importance, finite=check_finite)
        if importance.shape != (b, t):
            raise ValueError(f"importance must have shape ({b}, {t}), got {tuple(importance.shape)}")
    r = min(r, _capacity(prot))
    m = metric / metric.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    sim = m @ m.transpose(1, 2)
    # exactly symmetric, so a mutual best pair has exactly equal best similarities and ties resolve by position
    sim = (sim + sim.transpose(1, 2)) / 2
    eye = torch.eye(t, dtype=torch.bool, device=metric.device)
    sim = sim.masked_fill(eye | prot[:, :, None] | prot[:, None, :], -math.inf)
    # rank tokens by their best match; i may only merge into tokens ranked after it (no chains)
    order = sim.max(dim=-1).values.argsort(dim=-1, descending=True, stable=True)
    rank = order.argsort(dim=-1)
    later = rank[:, None, :] > rank[:, :, None]
    best_later = sim.masked_fill(~later, -math.inf).max(dim=-1).values
    score = -best_later if importance is None else importance - best_later
    # stable sort: ties (e.g. identical tokens) resolve by position, like the reference's argsort
    src = score.argsort(dim=-1, stable=True)[:, :r]
    is_src = torch.zeros(b, t, dtype=torch.bool, device=metric.device).scatter_(1, src, True)
    dst_orig = sim.gather(1, src[..., None].expand(b, r, t)).masked_fill(is_src[:, None, :], -math.inf).argmax(-1)
    weight = None
    if importance is not None and weighted_ensemble:
        pair = torch.stack([importance.gather(1, src), importance.gather(1, dst_orig)], dim=-1)
        weight = 2 * pair.softmax(dim=-1)
    return _plan_from_sources(src, dst_orig, t, weight=weight)


def random_drop(
    batch: int, tokens: int, r: int, *, protected: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> MergePlan:  # fmt: skip
    """Drop ``r`` random unprotected tokens of each sequence (the random-pruning baseline)."""
    for name, v in (("batch", batch), ("tokens", tokens), ("r", r)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    prot = _protected_mask(protected, batch, tokens, "cpu")
    r = min(r, _capacity(prot))
    noise = torch.rand(batch, tokens, generator=generator).masked_fill(prot, math.inf)
    src = noise.argsort(dim=-1)[:, :r]
    return _plan_from_sources(src, src.new_zeros(batch, r), tokens, drop=True)


def merge_tokens(
    x: torch.Tensor, size: torch.Tensor, plan: MergePlan, *, check_finite: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply a plan: ``(x, size) -> (x', size')`` with ``T - r`` tokens.

    A merge is the size-weighted mean ``x_b ← (s_a x_a + s_b x_b) / (s_a + s_b)``, ``s_b ← s_a + s_b``
    (ToMe); with ``plan.weight`` it is CrossGET's ensemble ``(w_a s_a x_a + w_b s_b x_b) / (s_a + s_b)``.
    When several sources share a destination, each adds ``w_a s_a x_a + (w_b - 1) s_b x_b`` to the
    destination's ``s_b x_b``, exactly as the official ``reducer.py`` scatter-adds (so the destination weight
    counts once per source). Dropping keeps the kept tokens and their sizes unchanged.

    Args:
        x: ``(B, T, C)`` tokens.
        size: ``(B, T)`` sizes (1 for input tokens).
        plan: from one of the matching rules, for this ``(B, T)``.
        check_finite: scan ``x`` and ``size`` for NaN/inf (``False`` inside a forward pass checked at its input).
    """
    check_tensor("x", x, 3, finite=check_finite)
    check_tensor("size", size, finite=check_finite)
    if not isinstance(plan, MergePlan):
        raise TypeError(f"plan must be a MergePlan, got {type(plan).__name__}")
    b, t, c = x.shape
    if size.shape != (b, t):
        raise ValueError(f"size must have the (batch, tokens) shape of x, ({b}, {t}), got {tuple(size.shape)}")
    if plan.keep.shape[0] != b or plan.keep.shape[1] + plan.r != t:
        raise ValueError(f"plan is for {tuple(plan.keep.shape[:1])} sequences of {plan.keep.shape[1] + plan.r} "
                         f"tokens, got x of shape {(b, t, c)}")  # fmt: skip
    keep = plan.keep
    kept_size = size.gather(1, keep)
    if plan.r == 0 or plan.drop:
        return x.gather(1, keep[..., None].expand(-1, -1, c)), kept_size
    src_size = size.gather(1, plan.src)
    weighted = x * size[..., None]
    src_x = weighted.gather(1, plan.src[..., None].expand(-1, -1, c))
    dst_x = weighted.gather(1, keep[..., None].expand(-1, -1, c))
    index = plan.dst[..., None].expand(-1, -1, c)
    if plan.weight is None:
        added = src_x
    else:
        w_src, w_dst = plan.weight[..., 0, None], plan.weight[..., 1, None]
        added = w_src * src_x + (w_dst - 1) * dst_x.gather(1, index)
    new_size = kept_size.scatter_add(1, plan.dst, src_size)
    merged = dst_x.scatter_add(1, index, added)
    return merged / new_size[..., None], new_size
