"""Language models."""
