"""Learning on graphs and networks."""
