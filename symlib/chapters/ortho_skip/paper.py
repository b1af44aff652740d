"""What Kurle et al. (2021) state about their sinc experiment (Sec. 4, Figure 1), as data.

The paper reports Figure 1 only as a picture: no number of its results is given, so this file
holds its setup, shown beside this run's in the chapter's settings table. "not stated" marks the
choices it leaves open (the profile's ``[open]`` fields).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAPER", "SINC_SETUP", "SOURCE", "SincSetup"]

PAPER = "Kurle, Januschowski, Gasthaus & Wang (2021), On symmetries in variational Bayesian neural nets"

NOT_STATED = "not stated"


@dataclass(frozen=True)
class SincSetup:
    """The sinc experiment as the paper states it (Sec. 4)."""

    hidden_widths: tuple[int, ...]
    activation: str
    n_train: int
    noise_sd: float
    data: str
    """How the inputs and targets are drawn, in words."""
    prior_posterior: str
    n_steps: int
    """Full-batch iterations."""
    n_train_samples: int
    """Monte Carlo samples per training step."""
    n_test_samples: int
    """Monte Carlo samples for predictions."""
    annealing: str
    noise_model: str = NOT_STATED
    optimiser: str = NOT_STATED
    init_sd: str = NOT_STATED
    at_prior: str = "—"
    """The paper's rule for 'a weight stayed at the prior' (it gives none: the share is ours)."""


SINC_SETUP = SincSetup(
    hidden_widths=(32,) * 5, activation="SELU", n_train=128, noise_sd=0.2,
    data="x ~ U[-1, 1], scaled sinc",
    prior_posterior="isotropic Gaussian (variance not stated) / diagonal Gaussian, local reparameterisation",
    n_steps=200_000, n_train_samples=64, n_test_samples=256, annealing="linear over the first half",
)
"""Kurle et al. Sec. 4 and the caption of Figure 1: "an MLP with 5 hidden layers of 32 units", SELU,
"128 data points" drawn uniformly in [-1, 1] with noise sd 0.2, "an isotropic Gaussian prior and a
diagonal Gaussian posterior approximation", "64 samples for training and 256 for testing",
"200.000 full-batch iterations, with a linear annealing schedule for the KL divergence in the
first half of the iterations"."""

SOURCE = "Kurle et al. Sec. 4"
"""Where :data:`SINC_SETUP`'s budget (steps, Monte Carlo samples) and protocol are stated (the
caption of Figure 1 repeats the network and the data): what a budget or a departure is counted
against."""
