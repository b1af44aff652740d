"""One fit of chapter 4 and its summaries: NUTS in Stan, ADVI in torch, posterior predictive.

Shared by the synthetic (:mod:`.stages_synthetic`) and the Boston (:mod:`.stages_boston`) stages.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from symlib.chapters.constrained_models import seeds
from symlib.inference import advi
from symlib.inference import stan as st
from symlib.metrics.mcmc import bulk_ess, summary
from symlib.nn import constrained as idf

__all__ = ["METHODS", "PARAMS", "STAN_MAX_DEPTH", "advi_fit", "hyperbola_stats", "mode_labels", "nuts_fit", "predictive"]

METHODS = ("NUTS", "ADVI mean-field", "ADVI full-rank")
"""The inference methods fitted on the synthetic data."""
PARAMS = ("W1", "b1", "W2", "b2", "sigma")
"""The network's parameters, as every fit stores them."""
STAN_MAX_DEPTH = 10
"""Stan's default maximum NUTS tree depth, the paper's (it names no sampler setting); the
synthetic fits always run at it, the Boston fits at the profile's ``boston_max_depth``."""


def nuts_fit(model: str, x, y, hidden: int, prior: idf.NetPrior, *, chains: int, warmup: int,
          draws: int, seed: int, max_depth: int = STAN_MAX_DEPTH, f_points=None, code: str | None = None) -> dict:
    """One NUTS run in Stan; draws as float32 arrays ``(chains, draws, ...)`` plus diagnostics.

    ``code``: a variant of ``model``'s program with the same data block (the authors' angle prior).
    """
    name = model if code is None else f"{model}-variant"
    built = st.build(name, idf.stan_data(model, x, y, hidden, prior), seed=seed, code=code)
    fit = built.sample(chains=chains, warmup=warmup, draws=draws, max_depth=max_depth)
    params = {k: torch.as_tensor(fit.draws[k], dtype=torch.float64) for k in PARAMS}
    xs = x if f_points is None else f_points
    f = idf.forward(params, torch.as_tensor(xs, dtype=torch.float64))     # (chains, draws, n)
    flat = np.concatenate([fit.draws[k].reshape(chains, draws, -1) for k in PARAMS], axis=-1)
    worst_p, worst_f = summary(flat), summary(f.numpy())   # R-hat: max of bulk and folded
    time_s = float(np.nansum(fit.warmup_s) + np.nansum(fit.sampling_s))
    diag = {"treedepth": float(fit.sampler["treedepth__"].mean()),
            "leapfrog": float(fit.sampler["n_leapfrog__"].mean()),
            "divergent": int(fit.sampler["divergent__"].sum()),
            "hit_max_depth": float((fit.sampler["treedepth__"] >= max_depth).mean()),
            "stepsize": float(fit.sampler["stepsize__"][:, -1].mean()),
            "ess_f_median": float(np.nanmedian(bulk_ess(f.numpy()))), "ess_f_min": worst_f.bulk_ess_min,
            "ess_params_min": worst_p.bulk_ess_min,
            "tail_ess_f_min": worst_f.tail_ess_min, "tail_ess_params_min": worst_p.tail_ess_min,
            "ess_sigma": float(bulk_ess(fit.draws["sigma"])),
            "rhat_params_max": worst_p.rhat_max, "rhat_f_max": worst_f.rhat_max,
            "warmup_s": float(np.nansum(fit.warmup_s)), "sampling_s": float(np.nansum(fit.sampling_s)),
            "time_s": time_s, "wall_s": float(fit.wall_s), "build_s": float(built.build_s),
            "chains": chains, "draws": draws}
    diag["ess_per_s"] = diag["ess_f_median"] / max(diag["sampling_s"], 1e-9)
    return {"params": {k: v.reshape(-1, *v.shape[2:]).float().numpy() for k, v in params.items()},
            "diag": diag}


def advi_fit(model: str, x, y, prior, profile, seed: int, method: str, index: int) -> dict:
    """ADVI (``method``: mean-field or full-rank) in torch on ``model``'s Stan log density; fit
    ``index`` of the synthetic experiment draws from its own generators. Reads the profile's
    ``advi_*`` fields; returns ``advi_draws`` draws and the final ELBO."""
    family = advi.Family.MEANFIELD if method == "ADVI mean-field" else advi.Family.FULLRANK
    d = idf.n_unconstrained(model, x.shape[1], 2)
    gen = seeds.generator(seed, "advi", index)
    init = torch.zeros(d, dtype=torch.float64)
    if model == "constrained":      # auxiliary points start on the unit circle, not at the
        init[0:4:2] = 1.0           # origin where their angle (and its gradient) is undefined
    t0 = time.perf_counter()
    q = advi.fit(lambda z: idf.log_density(model, z, x, y, prior), d, family, generator=gen,
                 n_steps=profile.advi_steps, lr=profile.advi_lr, n_mc=profile.advi_mc,
                 init_mean=init, init_scale=profile.advi_init_scale)
    seconds = time.perf_counter() - t0
    z = advi.sample(q, profile.advi_draws, seeds.generator(seed, "advi_draws", index))
    params, _ = idf.unpack(model, z, x.shape[1], 2)
    tail = q.elbo_trace[-max(1, len(q.elbo_trace) // 10):]
    return {"params": {k: params[k].float().numpy() for k in PARAMS},
            "diag": {"time_s": seconds, "elbo": float(tail.mean()), "steps": len(q.elbo_trace)}}


def predictive(params: dict, grid: torch.Tensor, gen: torch.Generator) -> dict:
    """Posterior-predictive mean and central 95% interval of ``y`` on ``grid`` (noise included)."""
    p = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in params.items()}
    f = idf.forward(p, grid)                                                # (S, G)
    ys = f + p["sigma"][:, None] * torch.randn(f.shape, generator=gen, dtype=torch.float64)
    lo, hi = torch.quantile(ys, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0)
    return {"mean": f.mean(0).numpy(), "lo": lo.numpy(), "hi": hi.numpy()}


def hyperbola_stats(params: dict) -> dict:
    """How far the draws spread along the scaling hyperbola of hidden unit 1.

    ``corr``: correlation of ``log|W1[1,1]|`` and ``log|W2[1]|`` (near -1 on a hyperbola
    ``W1[1,1] W2[1] = const``); ``sd_log_w2``: sd of ``log|W2[1]|`` (the scale the constraint pins).
    """
    a = np.log(np.abs(params["W1"][:, 0, 0]) + 1e-12)
    b = np.log(np.abs(params["W2"][:, 0]) + 1e-12)
    corr = float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan")
    return {"corr": corr, "sd_log_w2": float(b.std())}


def mode_labels(params: dict, chains: int = 1) -> dict:
    """Which permutation copy of the hidden units each draw is in, read off the bias order.

    Every draw of an ordered model has ``b1[1] < b1[2]`` (one copy); an unconstrained chain may
    sit in either copy (``H! = 2``), and move between them. Returns the share of draws with
    ``b1[1] > b1[2]``, the number of copies reached by all chains together and the number of
    switches between copies within chains (draws are stored chain after chain).
    """
    lab = (params["b1"][:, 0] > params["b1"][:, 1]).astype(int)
    per_chain = lab.reshape(chains, -1)
    return {"share_swapped": float(lab.mean()),
            "switches": int(np.abs(np.diff(per_chain, axis=1)).sum()),
            "copies": len(np.unique(lab))}

