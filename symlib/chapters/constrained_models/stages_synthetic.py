"""Chapter 4's synthetic data (Sec. 4.1, Figure 1): the data and the ``synth`` stage's fits.

100 points from the paper's 2-unit network (and the authors' code's generator); NUTS (Stan),
mean-field and full-rank ADVI (torch, on the same log density) for each model.
"""

from __future__ import annotations

import math

import torch

from symlib.book.parallel import fan_out
from symlib.chapters.constrained_models import seeds
from symlib.chapters.constrained_models.fits import (
    METHODS,
    advi_fit,
    hyperbola_stats,
    mode_labels,
    nuts_fit,
    predictive,
)
from symlib.nn import constrained as idf

__all__ = ["paper_network", "synthetic_data", "synthetic_experiment", "synthetic_grid"]


def paper_network(generator: str = "paper") -> dict[str, torch.Tensor]:
    """The data-generating network: the paper's (Sec. 4.1) or the authors' code's.

    Rows of ``W1`` are the hidden units' incoming weights. The code's network
    ``h1 = relu((x1 + x2)/sqrt2)``, ``h2 = relu((-x1 + x2)/sqrt2 - 5)``, ``y = h1 - 4 h2``.
    """
    r = 1 / math.sqrt(2)
    if generator == "paper":
        return {"W1": torch.tensor([[r, -r], [r, r]], dtype=torch.float64),
                "b1": torch.tensor([0.0, 1.0], dtype=torch.float64),
                "W2": torch.tensor([r, r], dtype=torch.float64), "b2": torch.tensor(5.0, dtype=torch.float64)}
    if generator == "code":
        return {"W1": torch.tensor([[r, r], [-r, r]], dtype=torch.float64),
                "b1": torch.tensor([0.0, -5.0], dtype=torch.float64),
                "W2": torch.tensor([1.0, -4.0], dtype=torch.float64), "b2": torch.tensor(0.0, dtype=torch.float64)}
    raise ValueError(f"unknown generator {generator!r}; valid: 'paper', 'code'")


def synthetic_data(profile, seed: int, generator: str = "paper"):
    """``(x, y, truth, noise_sd, x_range)``: inputs ``(n, 2)`` uniform on a square, targets."""
    gen = seeds.generator(seed, "synth_data", 0 if generator == "paper" else 1)
    truth = paper_network(generator)
    rng, noise = (profile.synth_x_range, profile.synth_noise_sd) if generator == "paper" else (10.0, 1.0)
    x = (2 * torch.rand(profile.synth_n, 2, generator=gen, dtype=torch.float64) - 1) * rng
    y = idf.forward(truth, x) + noise * torch.randn(profile.synth_n, generator=gen, dtype=torch.float64)
    return x, y, truth, noise, rng


def synthetic_experiment(profile, seed: int, *, progress: bool = False,
                         jobs: int | None = None) -> dict:
    """NUTS and both ADVI families on every model, for the paper's generator (and the code's).

    The fits are independent and run through :func:`symlib.book.parallel.fan_out` (``jobs`` at
    a time, default ``$SYMLIB_JOBS``); each draws from its own seeds, so the results do not
    depend on ``jobs``.
    """
    out = {"datasets": {}}
    generators = ("paper", "code") if profile.synth_code_generator else ("paper",)
    tasks = []
    for g in generators:
        x, y, truth, noise, rng = synthetic_data(profile, seed, g)
        grid = synthetic_grid(rng)
        out["datasets"][g] = {
            "x": x.numpy(), "y": y.numpy(), "truth": {k: v.numpy() for k, v in truth.items()},
            "noise_sd": noise, "grid": grid.numpy(), "f_true": idf.forward(truth, grid).numpy(),
            "fits": {}}
        methods = METHODS if g == "paper" else METHODS[:1]
        jobs_g = [(m, meth) for m in idf.MODELS for meth in methods]
        tasks += [(profile, seed, g, i, model, meth) for i, (model, meth) in enumerate(jobs_g)]
    fits = fan_out(_synthetic_fit, tasks, threads=profile.threads, jobs=jobs, progress=progress,
                   desc="synthetic fits")
    for (_, _, g, _, model, meth), fit in zip(tasks, fits):
        out["datasets"][g]["fits"][model, meth] = fit
    return out


def synthetic_grid(x_range: float) -> torch.Tensor:
    """101 points on the slice ``x2 = 0`` of the input square."""
    return torch.stack([torch.linspace(-x_range, x_range, 101, dtype=torch.float64),
                        torch.zeros(101, dtype=torch.float64)], -1)


def _synthetic_fit(profile, seed: int, generator: str, index: int,
                   model: str, method: str) -> dict:
    """Fit number ``index`` of the synthetic experiment on ``generator``'s data (one task)."""
    x, y, _, _, rng = synthetic_data(profile, seed, generator)
    prior = idf.NetPrior(w_laplace=False, w_scale=profile.synth_w_scale,
                         sigma_scale=profile.sigma_scale if generator == "paper" else 2.0,
                         angle_jacobian=profile.angle_jacobian)
    if method == "NUTS":
        fit = nuts_fit(model, x, y, 2, prior, chains=profile.synth_chains,
                    warmup=profile.synth_warmup, draws=profile.synth_draws,
                    seed=seeds.stan_seed(seed, 100 + index + 50 * (generator == "code")))
    else:
        fit = advi_fit(model, x, y, prior, profile, seed, method, index)
    fit["predictive"] = predictive(fit["params"], synthetic_grid(rng),
                                    seeds.generator(seed, "predictive", index))
    fit["hyperbola"] = hyperbola_stats(fit["params"])
    fit["modes"] = mode_labels(fit["params"], profile.synth_chains if method == "NUTS" else 1)
    return fit

