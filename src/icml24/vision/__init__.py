"""Vision."""
