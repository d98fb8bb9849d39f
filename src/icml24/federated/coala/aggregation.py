"""Server aggregation of COALA's FedAvg variants, on Flower's own aggregation function.

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Eq. 1 and the server's ``aggregation`` stage: the new global model is

    theta <- sum_{k in S} w_k theta_k / sum_{k in S} w_k,     w_k = n_k ("FedAvg") or 1 ("equal"),

over every ``state_dict`` entry except the *local keys*, which the server does not average: FedBN (Li et al.,
ICLR 2021) = local keys are every batch-norm parameter and buffer (:func:`~icml24.federated.coala.models.bn_state_keys`);
each client keeps its own copies and the server's copies stay as they were. The weighted mean itself is
``flwr.serverapp.strategy.strategy_utils.aggregate_arrayrecords`` (the math of Flower's FedAvg and FedProx),
applied to the non-local entries.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import numpy as np
from flwr.app import Array, ArrayRecord, MetricRecord, RecordDict
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

__all__ = ["fedavg_states"]

_WEIGHT = "aggregation-weight"


def fedavg_states(
    states: Sequence[Mapping[str, np.ndarray]],
    weights: Sequence[float] | None = None,
    *,
    local_keys: Collection[str] = (),
) -> dict[str, np.ndarray]:
    """Weighted mean of client model states over every key not in ``local_keys``.

    Args:
        states: one ``{key: array}`` per client, all with the same keys and shapes.
        weights: one non-negative weight per client (sample counts for FedAvg); None: equal weights.
        local_keys: keys that are not aggregated (FedBN: batch-norm state); they are absent from the result.

    Returns:
        ``{key: weighted mean}`` in the key order of ``states[0]``, without ``local_keys``.
    """
    if isinstance(states, Mapping) or not isinstance(states, Sequence) or len(states) == 0:
        raise ValueError("states must be a non-empty sequence of {key: array} mappings")
    if not all(isinstance(s, Mapping) for s in states):
        raise TypeError("states must hold mappings from state keys to arrays")
    keys = list(states[0])
    for i, s in enumerate(states):
        if list(s) != keys:
            raise ValueError(f"states[{i}] has keys {sorted(s)} but states[0] has {sorted(keys)}")
    if weights is None:
        w = np.ones(len(states))
    else:
        try:
            w = np.asarray(weights, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"weights must be numbers, got {weights!r}") from exc
        if w.shape != (len(states),):
            raise ValueError(f"weights must hold one number per state ({len(states)}), got shape {w.shape}")
        if not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
            raise ValueError(f"weights must be finite, non-negative and not all zero, got {w.tolist()}")
    if isinstance(local_keys, str):
        raise TypeError("local_keys must be a collection of keys, not one string")
    local = set(local_keys)
    shared = [k for k in keys if k not in local]
    if not shared:
        return {}
    records = []
    for s, wk in zip(states, w, strict=True):
        arrays = {}
        for k in shared:
            a = np.asarray(s[k])
            if a.shape != np.shape(states[0][k]):
                raise ValueError(f"states: key {k!r} has shape {a.shape} in one state, {np.shape(states[0][k])} in another")
            if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
                raise ValueError(f"states hold a non-finite value at key {k!r}")
            arrays[k] = Array(np.ascontiguousarray(a))
        records.append(RecordDict({"arrays": ArrayRecord(arrays), "metrics": MetricRecord({_WEIGHT: float(wk)})}))
    merged = aggregate_arrayrecords(records, _WEIGHT)
    return {k: merged[k].numpy() for k in shared}


def is_finite_weight(value: object) -> bool:
    """A reply's weight is usable: a finite number >= 0."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
