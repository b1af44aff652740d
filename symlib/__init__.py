"""symlib: weight-space symmetries in Bayesian neural networks, the library behind the book."""

__version__ = "0.2.0"
