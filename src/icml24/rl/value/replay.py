"""A uniform experience-replay buffer of torch tensors, written to in batches (one row per env of a vector env).

Shared by the value-based agents of :mod:`icml24.rl.value` (DQN, Double DQN, TD3) and the papers built on them
(Stochastic Q-learning keeps the actions of a sampled minibatch as its memory set; max-reward TD3 stores the
running maximum ``y`` beside each transition). Transitions store ``terminated`` only: a truncated episode is
*not* a terminal state, so the Bellman target still bootstraps from its next observation (Gymnasium's
``terminated`` vs ``truncated`` distinction).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


class ReplayBuffer:
    """Circular FIFO buffer of named fields with uniform sampling.

    Args:
        capacity: the number of transitions kept; the oldest are overwritten.
        fields: name -> (shape of one row, dtype). ``obs``, ``action``, ``reward``, ``next_obs`` and
            ``terminated`` are the usual ones; any extra field (e.g. ``y``) is stored the same way.
        device: where the tensors live.
    """

    def __init__(
        self,
        *,
        capacity: int,
        fields: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
        device: str | torch.device = "cpu",
    ) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        if not fields:
            raise ValueError("fields must name at least one field")
        self.capacity = capacity
        self.device = torch.device(device)
        self._shapes = {k: tuple(shape) for k, (shape, _) in fields.items()}
        self._data = {
            k: torch.zeros((capacity, *shape), dtype=dtype, device=self.device) for k, (shape, dtype) in fields.items()
        }
        self._pos = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, batch: Mapping[str, torch.Tensor]) -> None:
        """Append a batch of transitions (first dimension = number of transitions, same for every field)."""
        if set(batch) != set(self._data):
            raise ValueError(f"batch fields {sorted(batch)} do not match the buffer fields {sorted(self._data)}")
        sizes = set()
        for k, v in batch.items():
            v = torch.as_tensor(v)
            if tuple(v.shape[1:]) != self._shapes[k]:
                raise ValueError(f"field {k!r}: expected rows of shape {self._shapes[k]}, got {tuple(v.shape[1:])}")
            sizes.add(v.shape[0])
        if len(sizes) != 1:
            raise ValueError(f"all fields must have the same number of rows, got {sorted(sizes)}")
        m = sizes.pop()
        if m > self.capacity:
            raise ValueError(f"batch of {m} transitions exceeds the capacity {self.capacity}")
        idx = (self._pos + torch.arange(m, device=self.device)) % self.capacity
        for k, v in batch.items():
            self._data[k][idx] = torch.as_tensor(v, device=self.device).to(self._data[k].dtype)
        self._pos = (self._pos + m) % self.capacity
        self._size = min(self._size + m, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """``batch_size`` transitions drawn uniformly with replacement."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        idx = torch.randint(self._size, (batch_size,), generator=generator, device=self.device)
        return {k: v[idx] for k, v in self._data.items()}
