"""Batched and single environments with the Gymnasium API (shared by the RL papers).

Batched tensor environments (``TorchVectorEnv`` subclasses) step N copies as one torch operation on any device,
with Gymnasium's vector-env API and same-step autoreset (``autoreset_mode="NextStep"`` or ``"Disabled"`` on request): the deceptive point mass of the SAPG miniature, a
``Pendulum-v1``-exact batched pendulum, and ``MountainCarContinuous-v0`` as a batched hard-exploration task. :func:`numpy_view` presents a torch env to
Gymnasium's numpy-only vector wrappers (``RecordEpisodeStatistics``, ``NormalizeReward``) without copies on CPU.
"""

from icml24.rl.envs.batched import TorchVectorEnv, numpy_view
from icml24.rl.envs.mountain_car import BatchedMountainCarContinuous
from icml24.rl.envs.pendulum import BatchedPendulum
from icml24.rl.envs.point_mass import (
    BatchedDeceptivePointMass,
    BatchedMultiGoalPointMass,
    DeceptivePointMassEnv,
    PointMassLayout,
)

__all__ = [
    "TorchVectorEnv",
    "numpy_view",
    "BatchedPendulum",
    "BatchedMountainCarContinuous",
    "BatchedDeceptivePointMass",
    "BatchedMultiGoalPointMass",
    "DeceptivePointMassEnv",
    "PointMassLayout",
]
