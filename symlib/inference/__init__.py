"""Approximate inference for Bayesian neural networks.

- :mod:`symlib.inference.mfvi`: mean-field Gaussian VI with the local reparameterisation trick
  (chapter 1, reused by chapters 3 and 5).
"""

from symlib.inference import mfvi

__all__ = ["mfvi"]
