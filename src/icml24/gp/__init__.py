"""Gaussian processes: kernels, random features, variational GP algebra and the GP papers."""
