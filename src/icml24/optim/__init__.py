"""Optimisation: gradient surgery, coresets."""
