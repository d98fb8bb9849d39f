"""Batched and single environments with the Gymnasium API (shared by the RL papers).

Batched tensor environments (``TorchVectorEnv`` subclasses) step N copies as one torch operation on any device,
with Gymnasium's vector-env API and same-step autoreset: the deceptive point mass of the SAPG miniature, a
``Pendulum-v1``-exact batched pendulum, and ``MountainCarContinuous-v0`` as a batched hard-exploration task.
"""

from icml24.rl.envs.batched import TorchVectorEnv
from icml24.rl.envs.mountain_car import BatchedMountainCarContinuous
from icml24.rl.envs.pendulum import BatchedPendulum
from icml24.rl.envs.point_mass import BatchedDeceptivePointMass, DeceptivePointMassEnv, PointMassLayout

__all__ = [
    "TorchVectorEnv",
    "BatchedPendulum",
    "BatchedMountainCarContinuous",
    "BatchedDeceptivePointMass",
    "DeceptivePointMassEnv",
    "PointMassLayout",
]
