"""Position papers (no system to implement)."""
