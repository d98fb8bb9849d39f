"""Federated learning."""
