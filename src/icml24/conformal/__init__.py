"""Conformal prediction."""
