"""Multi-armed and combinatorial bandits."""
