"""Chapter 6's remedies: every method of the five papers, fitted the same way.

All with the same number of optimisation passes (``vi_epochs``) and learning rate: mean-field VI
(:mod:`~symlib.inference.mfvi`, local reparameterisation) alone and with orthogonal skips (Kurle
et al.), with ordered hidden biases (Kurle et al.; Pourzanjani et al.), with unit-vector incoming
weights (Pourzanjani et al.; mean-field ADVI on the unconstrained angles,
:func:`symlib.nn.constrained.unit_vector_mlp`), SGM-VI with ``K`` permutations (Gelberg et al.),
multi-mode MFVI and a deep ensemble (Laurent et al.) (:func:`fit_remedy`), and the
rebasin-compact summaries ``q_r`` of the ensemble and of the HMC samples (Xiao et al.)
(:func:`fit_compact`). Each ends as weight samples of the benchmark's network.
"""

from __future__ import annotations

import math
import time
from functools import partial

import numpy as np
import torch
from torch import Tensor

from symlib import symmetry as sym
from symlib.book.preconditions import plateaued
from symlib.chapters.synthesis.benchmarks import (
    Benchmark,
    elapsed,
    map_loss,
    potential,
    predictions,
    reset_peak,
)
from symlib.inference import advi, compact, mfvi, sgm, vi_classifier
from symlib.nn import constrained as idf
from symlib.nn.mlp import Params, init_mlp
from symlib.nn.orthoskip import skip_matrices
from symlib.nn.training import SGDConfig, train_batched

__all__ = ["COMPACT", "FIT_FIELDS", "METHODS", "fit_compact", "fit_remedy", "method_name", "methods"]

METHODS = {
    "mfvi": "MFVI",
    "skip": "MFVI + orthogonal skips",
    "ordered": "MFVI + ordered biases",
    "unit": "MFVI + unit-vector weights",
    "sgm5": "SGM-VI, K = 5",
    "sgm20": "SGM-VI, K = 20",
    "multimode": "multi-mode MFVI",
    "ensemble": "deep ensemble",
    "qr_ensemble": "q_r of the ensemble",
    "qr_hmc": "q_r of HMC",
}
"""Method key -> the name in tables (SGM keys follow ``config.sgm_ks``)."""
COMPACT = ("qr_ensemble", "qr_hmc")
"""The methods that summarise another method's samples (:func:`fit_compact`): the ensemble's and
the gold standard's."""
FIT_FIELDS = ("vi_epochs", "vi_batch", "vi_lr", "vi_mc", "vi_init_sd", "sgm_ks", "n_modes", "n_members",
              "n_pred_samples")
"""The profile fields :func:`fit_remedy` reads (beside the benchmark's)."""


def methods(benchmark: str) -> list[str]:
    """The method keys run on ``benchmark``, in table order."""
    keys = ["mfvi", "skip", "ordered", "unit", "sgm5", "sgm20", "multimode", "ensemble", "qr_ensemble", "qr_hmc"]
    return [k for k in keys if not (k == "unit" and benchmark == "sinc")]  # one input: the "sphere" is {-1, 1}


def method_name(key: str, config) -> str:
    """A method's name in tables (the SGM rows show the profile's ``K``)."""
    if key in ("sgm5", "sgm20"):
        return f"SGM-VI, K = {config.sgm_ks[int(key == 'sgm20')]}"
    if key == "multimode":
        return f"multi-mode MFVI ({config.n_modes} modes)"
    if key == "ensemble":
        return f"deep ensemble ({config.n_members})"
    return METHODS[key]


def fit_remedy(b: Benchmark, method: str, config, g_cpu: torch.Generator, g: torch.Generator, device: str) -> dict:
    """Fit ``method`` (any but the ``q_r`` ones) on ``b`` and draw ``n_pred_samples`` weight samples.

    Args:
        b: the benchmark.
        method: a key of :data:`METHODS` not in :data:`COMPACT`.
        config: reads :data:`FIT_FIELDS`.
        g_cpu: draws initialisations and skip matrices, on the CPU.
        g: draws the fit's Monte Carlo noise and minibatches and the final weight samples, on
            ``device``.
        device: where the fit runs.

    Returns:
        ``weights`` (float32, CPU), the predictions (:func:`~symlib.chapters.synthesis.benchmarks.predictions`),
        ``wall_s``, ``peak_mb``, ``stored_floats`` and ``plateau`` (the objective's plateau
        precondition, ``None`` without a curve).
    """
    s = config.n_pred_samples
    skips: dict[str, Tensor] = {}
    curve = None
    peak = reset_peak(device)
    start = time.perf_counter()
    if method in ("mfvi", "skip", "ordered", "multimode"):
        if method == "skip":
            skips = {k: v.to(device) for k, v in skip_matrices(b.spec, g_cpu).items()}
        model = mfvi.BayesMLP(b.spec, skips=skips, ordered_biases=method == "ordered")
        n_models = config.n_modes if method == "multimode" else 1
        inits = [init_mlp(b.spec, g_cpu) for _ in range(n_models)]
        params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
        q = mfvi.mean_field_from_params(model, params, init_sd=config.vi_init_sd)
        if b.task == "regression":
            res = mfvi.fit(model, q, b.x, b.y, n_steps=config.vi_epochs, n_samples=config.vi_mc, lr=config.vi_lr,
                           generator=g, noise_sd=b.noise_sd, anneal_fraction=0.0,
                           record_every=max(1, config.vi_epochs // 50), progress=False,
                           # interval means, so the plateau test sees the trend, not one estimate
                           average_records=True)
            q, curve = res.q, -res.history["elbo"].mean(0)
        else:
            q, hist = vi_classifier.fit_classifier(model, q, b.x, b.y, epochs=config.vi_epochs,
                                                   batch_size=config.vi_batch, lr=config.vi_lr, generator=g,
                                                   progress=False)
            curve = hist["loss"]
        wall = elapsed(start, device)
        per = math.ceil(s / n_models)
        w = {k: v.reshape(-1, *v.shape[2:])[:s] for k, v in mfvi.sample_weights(q, model, per, g).items()}
        stored = 2 * n_models * b.spec.n_params
    elif method == "unit":
        d = idf.n_unit_vector_mlp(b.spec)
        likelihood = potential(b, b.x, b.y, prior_sd=math.inf)

        def log_density(z):
            params, log_prior = idf.unit_vector_mlp(z, b.spec)
            return log_prior - likelihood(params)

        steps = config.vi_epochs * (1 if b.task == "regression" else math.ceil(len(b.x) / config.vi_batch))
        init = (0.5 * torch.randn(d, generator=g_cpu)).to(device)
        q = advi.fit(log_density, d, advi.Family.MEANFIELD, generator=g, n_steps=steps, lr=config.vi_lr,
                     n_mc=config.vi_mc, init_mean=init, init_scale=config.vi_init_sd, anneal=False)
        wall = elapsed(start, device)
        curve = -q.elbo_trace.numpy()
        w, _ = idf.unit_vector_mlp(q.sample(s, g), b.spec)
        stored = 2 * d
    elif method.startswith("sgm"):
        k = config.sgm_ks[int(method == "sgm20")]
        pspec = sym.mlp_permutation_spec(b.spec)
        q = sgm.mean_field({k_: v.to(device) for k_, v in init_mlp(b.spec, g_cpu).items()}, config.vi_init_sd)
        batch = len(b.x) if b.task == "regression" else config.vi_batch

        def batch_log_likelihood(w, idx):
            return -potential(b, b.x[idx], b.y[idx], prior_sd=math.inf)(w)

        res = sgm.fit(q, pspec, batch_log_likelihood, n_data=len(b.x), batch_size=batch, epochs=config.vi_epochs,
                      lr=config.vi_lr, k=k, n_samples=config.vi_mc, prior_sd=1.0, generator=g)
        wall = elapsed(start, device)
        curve = -res.history["objective"]
        w = sgm.sample_weights(res.q, pspec, s, g)
        stored = 2 * b.spec.n_params
    elif method == "ensemble":
        w, wall = _ensemble(b, config, g_cpu, g, device)
        stored = config.n_members * b.spec.n_params
    else:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(k for k in METHODS if k not in COMPACT)} "
                         f"(the q_r methods: fit_compact)")
    return _finish(b, method, w, skips, curve, wall, peak, stored)


def fit_compact(b: Benchmark, method: str, source: Params, base_wall_s: float, ref: int, config,
                g: torch.Generator, device: str) -> dict:
    """The rebasin-compact diagonal Gaussian ``q_r`` of ``source``'s samples (weight matching onto
    sample ``ref``), and ``n_pred_samples`` draws from it.

    Args:
        b: the benchmark.
        method: ``"qr_ensemble"`` or ``"qr_hmc"`` (:data:`COMPACT`), for the record's names.
        source: the samples to summarise (the ensemble's members, or thinned HMC samples).
        base_wall_s: the wall time of what produced ``source``, added to ``q_r``'s own.
        ref: the index of the reference sample every other is matched to.
        config: reads ``n_pred_samples``.
        g: draws the weight samples, on ``device``.
        device: where it runs.

    Returns:
        As :func:`fit_remedy` (``plateau`` is ``None``: nothing is optimised).
    """
    peak = reset_peak(device)
    start = time.perf_counter()
    source = {k: v.to(device) for k, v in source.items()}
    reference = {k: v[ref] for k, v in source.items()}
    q, _ = compact.rebased_moments(source, reference, b.spec, compact.Matching.WEIGHT)
    wall = base_wall_s + elapsed(start, device)
    w = compact.sample_diagonal(q, config.n_pred_samples, g)
    return _finish(b, method, w, {}, None, wall, peak, 2 * b.spec.n_params)


def _finish(b: Benchmark, method: str, w: Params, skips, curve, wall: float, peak, stored) -> dict:
    w = {k: v.detach().float().cpu() for k, v in w.items()}
    out = predictions(b, w, skips)
    plateau = plateaued(np.asarray(curve, dtype=float), what=f"{METHODS.get(method, method)} objective") \
        if curve is not None else None
    return {"weights": w, **out, "wall_s": wall, "peak_mb": peak(), "stored_floats": stored,
            "plateau": plateau}


def _ensemble(b: Benchmark, config, g_cpu, g, device) -> tuple[Params, float]:
    start = time.perf_counter()
    inits = [init_mlp(b.spec, g_cpu) for _ in range(config.n_members)]
    params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
    batch = len(b.x) if b.task == "regression" else config.vi_batch
    sgd = SGDConfig(lr=config.vi_lr, epochs=config.vi_epochs, batch_size=batch, optimizer="adam")
    loss = partial(map_loss, b=b, n=len(b.x))
    w = train_batched(loss, params, b.x, b.y, sgd, g)
    return w, elapsed(start, device)
