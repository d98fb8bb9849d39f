"""Server aggregation of COALA's FedAvg variants, on Flower's own aggregation function.

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Eq. 1 and the server's ``aggregation`` stage: the new global model is

    theta <- sum_{k in S} w_k theta_k / sum_{k in S} w_k,     w_k = n_k ("FedAvg") or 1 ("equal"),

over every ``state_dict`` entry except the *local keys*, which the server does not average: FedBN (Li et al.,
ICLR 2021) = local keys are every batch-norm parameter and buffer (:func:`~icml24.federated.coala.models.bn_state_keys`);
each client keeps its own copies and the server's copies stay as they were. The weighted mean itself is
``flwr.serverapp.strategy.strategy_utils.aggregate_arrayrecords`` (the math of Flower's FedAvg and FedProx),
applied to the non-local entries.

A reply is checked before it is averaged (:func:`check_train_reply`, :func:`check_evaluate_reply`): the model's
keys, shapes and dtypes must be the global model's, its floats finite, its ``num-examples`` a finite integer in
``[0, max_num_examples]``; what fails is named and the strategy drops that client (not the round). Beyond the
paper (COALA trusts its clients): a client's weight ``n_k`` is capped at ``max_weight_ratio`` times the
median count of the round (Rob-FCP's cap, :func:`~icml24.conformal.rob_fcp.weights.weight_cap`), and an
update whose norm ``||theta_k - theta||`` exceeds ``max_update_ratio`` times the round's median update norm is
dropped (:func:`screen_updates`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import numpy as np
from flwr.app import Array, ArrayRecord, MetricRecord, RecordDict
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

__all__ = ["check_evaluate_reply", "check_train_reply", "fedavg_states", "screen_updates", "update_norm"]

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
                raise ValueError(
                    f"states: key {k!r} has shape {a.shape} in one state, {np.shape(states[0][k])} in another"
                )
            if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
                raise ValueError(f"states hold a non-finite value at key {k!r}")
            arrays[k] = Array(np.ascontiguousarray(a))
        records.append(
            RecordDict({"arrays": ArrayRecord(arrays), "metrics": MetricRecord({_WEIGHT: float(wk)})})
        )
    merged = aggregate_arrayrecords(records, _WEIGHT)
    return {k: merged[k].numpy() for k in shared}


def _count(metrics: Mapping[str, object], max_num_examples: float) -> tuple[float | None, str | None]:
    if "num-examples" not in metrics:
        return None, "no 'num-examples' in its metrics"
    n = metrics["num-examples"]
    if isinstance(n, bool) or not isinstance(n, (int, float, np.integer, np.floating)):
        return None, f"'num-examples' is not a number ({type(n).__name__})"
    v = float(n)
    if not math.isfinite(v) or v < 0 or v != math.floor(v):
        return None, f"'num-examples' must be a finite integer >= 0, got {n!r}"
    if v > max_num_examples:
        return None, f"'num-examples' {v:g} exceeds the bound {max_num_examples:g}"
    return v, None


def _metric_record(content: RecordDict, key: str) -> tuple[Mapping[str, object] | None, str | None]:
    records = content.metric_records
    if key in records:
        return records[key], None
    if len(records) == 1:
        return next(iter(records.values())), None
    return None, f"no {key!r} metric record (has {sorted(records)})"


def check_train_reply(
    content: RecordDict,
    reference: Mapping[str, tuple[tuple[int, ...], np.dtype]],
    *,
    arrays_key: str = "arrays",
    metrics_key: str = "metrics",
    max_num_examples: float = 1e9,
) -> tuple[dict[str, np.ndarray] | None, float | None, str | None]:
    """``(state, num_examples, None)`` for a usable training reply, ``(None, None, reason)`` otherwise.

    Usable: an ArrayRecord ``arrays_key`` with exactly the keys of ``reference`` (``{key: (shape, dtype)}``,
    the global model's), each array of that shape and dtype, every float finite; a metric record with
    ``num-examples`` a finite integer in ``[0, max_num_examples]``. Never raises on a malformed reply."""
    try:
        if arrays_key not in content.array_records:
            return None, None, f"no {arrays_key!r} array record (has {sorted(content.array_records)})"
        record = content.array_records[arrays_key]
        keys, want = set(record.keys()), set(reference)
        if keys != want:
            missing, extra = sorted(want - keys)[:5], sorted(keys - want)[:5]
            return None, None, f"wrong state keys: missing {missing}, unexpected {extra}"
        state = {}
        for k, (shape, dtype) in reference.items():
            a = record[k].numpy()
            if tuple(a.shape) != tuple(shape):
                return None, None, f"key {k!r} has shape {tuple(a.shape)}, the global model {tuple(shape)}"
            if a.dtype != dtype:
                return None, None, f"key {k!r} has dtype {a.dtype}, the global model {dtype}"
            if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
                return None, None, f"non-finite values at key {k!r} (a diverged client)"
            state[k] = a
        metrics, reason = _metric_record(content, metrics_key)
        if metrics is None:
            return None, None, reason
        n, reason = _count(metrics, float(max_num_examples))
        if n is None:
            return None, None, reason
        return state, n, None
    except Exception as exc:  # noqa: BLE001 - a broken payload is a bad client, not a server crash
        return None, None, f"unreadable reply: {type(exc).__name__}: {exc}"


def check_evaluate_reply(content: RecordDict, *, metrics_key: str = "metrics",
                         max_num_examples: float = 1e9) -> tuple[dict[str, float] | None, str | None]:  # fmt: skip
    """``(metrics, None)`` for a usable evaluation reply, ``(None, reason)`` otherwise: ``num-examples`` as in
    :func:`check_train_reply`, ``accuracy`` in [0, 1], every other metric a finite real scalar."""
    try:
        metrics, reason = _metric_record(content, metrics_key)
        if metrics is None:
            return None, reason
        n, reason = _count(metrics, float(max_num_examples))
        if n is None:
            return None, reason
        out = {"num-examples": n}
        for k, v in metrics.items():
            if k == "num-examples":
                continue
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float, np.integer, np.floating))
                or not math.isfinite(v)
            ):
                return None, f"metric {k!r} is not a finite number: {v!r}"
            out[k] = float(v)
        if "accuracy" in out and not 0.0 <= out["accuracy"] <= 1.0:
            return None, f"accuracy {out['accuracy']:g} outside [0, 1]"
        return out, None
    except Exception as exc:  # noqa: BLE001
        return None, f"unreadable reply: {type(exc).__name__}: {exc}"


def update_norm(state: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
                keys: Collection[str]) -> float:  # fmt: skip
    """``||theta_k - theta||_2`` over the floating entries of ``keys`` (float64)."""
    total = 0.0
    for k in keys:
        a = np.asarray(state[k])
        if np.issubdtype(a.dtype, np.floating):
            d = a.astype(np.float64) - np.asarray(reference[k], dtype=np.float64)
            total += float(np.dot(d.ravel(), d.ravel()))
    return math.sqrt(total)


def screen_updates(norms: Sequence[float], max_update_ratio: float | None) -> list[bool]:
    """Which updates to keep: norm ``<= max_update_ratio * median(norms)``. With a zero median (most clients
    did not move) or no ratio, every update is kept. One absurd update among three or more cannot move the
    median far, so it is screened; with two clients the median is their mean and nothing is screened."""
    x = np.asarray(norms, dtype=np.float64)
    if max_update_ratio is None or x.size == 0:
        return [True] * x.size
    med = float(np.median(x))
    if not med > 0:
        return [True] * x.size
    return [bool(v <= max_update_ratio * med) for v in x]


def is_finite_weight(value: object) -> bool:
    """A reply's weight is usable: a finite number >= 0."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
