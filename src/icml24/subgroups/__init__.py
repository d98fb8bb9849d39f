"""Subgroup discovery."""
