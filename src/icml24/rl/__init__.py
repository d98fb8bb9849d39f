"""Reinforcement learning: shared envs, agents and the RL papers."""
