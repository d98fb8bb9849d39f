"""Evaluation and analysis of models."""
