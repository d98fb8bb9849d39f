"""Differential privacy."""
