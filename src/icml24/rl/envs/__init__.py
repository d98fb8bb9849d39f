"""Batched and single environments with the Gymnasium API (shared by the RL papers)."""
