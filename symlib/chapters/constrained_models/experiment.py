"""Chapter 4: identifiable, constrained parametrisations for Bayesian ReLU networks.

Pourzanjani, Jiang & Petzold (2017), "Improving the identifiability of neural networks for
Bayesian inference". One hidden ReLU layer, three Stan programs (:mod:`symlib.inference.stan`,
torch twins in :mod:`symlib.nn.constrained`): unconstrained; ordered hidden biases (removes the
permutations); ordered biases plus unit-norm incoming weights through angles, last layer free
(removes the permutations and the ReLU scaling). Experiments, each a pure function of the
profile (:class:`symlib.book.profiles.ConstrainedModelsProfile`) and the seed, cached on disk:

1. **Prior on the sphere** (torch only): the implied prior of a unit vector in 13 dimensions with
   and without the angle change of measure the authors' Stan file leaves out.
2. **Synthetic data** (Sec. 4.1, Figure 1): 100 points from the paper's 2-unit network (and the
   authors' code's generator); NUTS (Stan), mean-field and full-rank ADVI (torch, on the same
   log density) for each model; draws of ``W1[1,1]`` against ``W2[1]``; posterior predictive;
   NUTS diagnostics (ESS per second, tree depth, leapfrog steps, divergences, split R-hat).
3. **Boston housing** (Sec. 4.2, Tables 1-2): 50 ReLU units, random 80/20 splits, NUTS on the
   unconstrained and the constrained model (and the constrained model under the authors' prior
   on the angles); test MSE of the posterior-predictive mean and the share of test points
   outside the central 95% posterior-predictive interval, both on the standardised target;
   paired Wilcoxon signed-rank tests.
4. **Robustness** (:func:`robustness_experiment`): the synthetic NUTS runs again under other
   weight prior scales, and in the `paper` profile Boston housing too.

Choices the paper leaves open are profile fields marked [open]; the chapter lists them. The
ledger (:func:`claims`) judges every claim by its criterion only when its preconditions
(:mod:`symlib.book.preconditions`) are met; :func:`robustness` re-judges the claims under every
setting of the open choices that were run.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import torch
from scipy import stats

from symlib import transforms as tf
from symlib.book.cache import cached
from symlib.book.data import load_boston, standardise
from symlib.book.parallel import fan_out
from symlib.book.preconditions import chains_mixed, min_p_value, test_can_reach
from symlib.book.profiles import select_profile
from symlib.book.results import Claim, Kind, Precondition, depends_on, outcome, precondition
from symlib.book.runtime import torch_threads
from symlib.chapters.constrained_models.paper import reported
from symlib.chapters.constrained_models.profiles import PROFILES, ConstrainedModelsProfile
from symlib.inference import advi
from symlib.inference import stan as st
from symlib.metrics.mcmc import bulk_ess, summary
from symlib.nn import constrained as idf

__all__ = [
    "AUTHORS_ANGLES",
    "CHAPTER",
    "VERSION",
    "advi_table",
    "authors_angle_program",
    "boston_claims",
    "boston_experiment",
    "boston_tables",
    "claims",
    "compile_models",
    "diagnostics_table",
    "errata",
    "hyperbola_stats",
    "paper_network",
    "plot_figure1",
    "plot_predictive",
    "plot_prior_demo",
    "prior_demo",
    "robustness",
    "robustness_experiment",
    "run",
    "settings_table",
    "signed_ranks",
    "synthetic_claims",
    "synthetic_data",
    "synthetic_experiment",
    "wilcoxon_tests",
]

CHAPTER = "04_constrained_models"
VERSION = "4"
"""Bump when a code change alters the cached results."""

METHODS = ("NUTS", "ADVI mean-field", "ADVI full-rank")
AUTHORS_ANGLES = "constrained, authors' angle prior"
"""Key of the Boston fits of the constrained model under the authors' prior on the angles."""
DEPTH_CAP_SHARE = 0.1
"""Largest share of NUTS iterations at the maximum tree depth for mean tree depths to be compared
(a chapter-specific precondition): a trajectory stopped at the cap measures the cap, not the
geometry of the posterior."""
_STREAMS = {"prior": 0, "synth_data": 1, "advi": 2, "predictive": 3, "boston_split": 4,
            "stan": 5, "advi_draws": 6}
_PARAMS = ("W1", "b1", "W2", "b2", "sigma")


# --------------------------------------------------------------------------- entry point


def run(config: ConstrainedModelsProfile | str, *, seed: int, device: torch.device | str = "cpu",
        progress: bool = False, refresh: bool = False) -> dict:
    """All of chapter 4's numbers; each experiment cached on its profile fields and the seed.

    Everything runs on the CPU (Stan's NUTS, and ADVI on ten-parameter models); ``device`` is
    accepted for the common chapter interface only.
    """
    profile = select_profile(CHAPTER, PROFILES, config) if isinstance(config, str) else config
    with torch_threads(profile.threads):
        out = {"compile": compile_models()}
        out["prior"] = cached(f"{CHAPTER}-prior", VERSION, _key(profile, "prior", seed),
                              lambda: prior_demo(profile, seed), refresh=refresh)
        out["synth"] = cached(f"{CHAPTER}-synth", VERSION, _key(profile, "synth", seed),
                              lambda: synthetic_experiment(profile, seed, progress=progress),
                              refresh=refresh)
        out["boston"] = cached(f"{CHAPTER}-boston", VERSION, _key(profile, "boston", seed),
                               lambda: boston_experiment(profile, seed, progress=progress),
                               refresh=refresh)
        out["robust"] = {}
        if profile.robust_w_scales:
            out["robust"] = cached(f"{CHAPTER}-robust", VERSION, _key(profile, "robust", seed),
                                   lambda: robustness_experiment(profile, seed, progress=progress),
                                   refresh=refresh)
    return out


def compile_models() -> dict:
    """Build every Stan program once (compiling it unless httpstan's cache has it); seconds each.

    Not cached by symlib: it reports what this machine paid now (about 1 s when cached).
    """
    x = torch.zeros(3, 3, dtype=torch.float64)
    out = {}
    for name in st.MODELS:
        model = st.build(name, idf.stan_data(name, x, torch.zeros(3), 1), seed=1)
        out[name] = model.build_s
    return out


# --------------------------------------------------------------------------- 1. the prior


def prior_demo(profile: ConstrainedModelsProfile, seed: int, dim: int = 13) -> dict:
    """Implied prior of a unit vector in ``dim`` dimensions from the constrained model's angles.

    Samples the angles exactly from the prior the Stan program puts on them: ``t_1`` uniform
    (from the auxiliary point), ``t_k`` (``k >= 2``) uniform on ``(-pi/2, pi/2)`` without the
    change of measure, or with density proportional to ``cos(t_k)^(k-1)`` with it (rejection
    sampling). Compares the coordinates of the resulting unit vectors with the uniform
    distribution on the sphere, whose every coordinate has density ``(1 - w^2)^((dim-3)/2)``.
    """
    gen = _generator(seed, "prior")
    n = profile.prior_demo_draws
    out = {"dim": dim}
    t1 = (2 * torch.rand(n, 1, generator=gen, dtype=torch.float64) - 1) * math.pi
    for jac in (False, True):
        cols = []
        for k in range(2, dim):
            if not jac:
                cols.append((torch.rand(n, generator=gen, dtype=torch.float64) - 0.5) * math.pi)
                continue
            got = torch.empty(0, dtype=torch.float64)
            while got.numel() < n:
                t = (torch.rand(4 * n, generator=gen, dtype=torch.float64) - 0.5) * math.pi
                keep = torch.rand(4 * n, generator=gen, dtype=torch.float64) < torch.cos(t) ** (k - 1)
                got = torch.cat([got, t[keep]])
            cols.append(got[:n])
        theta = torch.cat([t1, torch.stack(cols, -1)], dim=-1)
        w = tf.unit_vector_from_angles(theta)
        ref = torch.randn(n, dim, generator=gen, dtype=torch.float64)
        ref = ref / ref.norm(dim=-1, keepdim=True)
        ks = [stats.ks_2samp(w[:, i].numpy(), ref[:, i].numpy()).pvalue for i in range(dim)]
        out["jacobian" if jac else "no_jacobian"] = {
            "w": w[:, [0, dim - 1]].numpy().astype(np.float32), "ks_p": np.asarray(ks),
            "mean_abs_last": float(w[:, -1].abs().mean()), "mean_abs_first": float(w[:, 0].abs().mean())}
    out["uniform_mean_abs"] = float(ref[:, -1].abs().mean())
    # the authors' Boston prior (stan/boston.stan): Laplace(0, 1) on every angle, cut to the
    # angle's range, and no change of measure
    theta = torch.stack([_truncated_laplace(n, math.pi, gen)]
                        + [_truncated_laplace(n, math.pi / 2, gen) for _ in range(2, dim)], -1)
    w = tf.unit_vector_from_angles(theta)
    ref = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    ref = ref / ref.norm(dim=-1, keepdim=True)
    ks = [stats.ks_2samp(w[:, i].numpy(), ref[:, i].numpy()).pvalue for i in range(dim)]
    out["authors"] = {
        "w": w[:, [0, dim - 1]].numpy().astype(np.float32), "ks_p": np.asarray(ks),
        "mean_abs_last": float(w[:, -1].abs().mean()), "mean_abs_first": float(w[:, 0].abs().mean())}
    return out


def _truncated_laplace(n: int, bound: float, gen: torch.Generator) -> torch.Tensor:
    """``n`` exact draws of Laplace(0, 1) restricted to ``(-bound, bound)`` (inverse CDF of |t|)."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    size = -torch.log1p(-u * (1 - math.exp(-bound)))
    sign = torch.where(torch.rand(n, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0)
    return sign * size


def plot_prior_demo(prior: dict):
    """Histograms of the first and last coordinate of the implied prior, with the uniform law."""
    from symlib.book.plotting import figure, label_panels

    dim = prior["dim"]
    fig, axes = figure(1, 2, width=7.0, height_per_row=2.8)
    axes = axes[0]
    grid = np.linspace(-1, 1, 401)
    dens = (1 - grid**2) ** ((dim - 3) / 2)
    dens /= np.trapezoid(dens, grid)
    for ax, j, lab in zip(axes, (0, 1), ("$w_1$", f"$w_{{{dim}}}$")):
        for key, colour, name in (("no_jacobian", "C3", "angles uniform"),
                                  ("authors", "C1", "Laplace(0, 1) on the angles (authors' Boston file)"),
                                  ("jacobian", "C0", "with the change of measure")):
            ax.hist(prior[key]["w"][:, j], bins=60, range=(-1, 1), density=True, histtype="step",
                    color=colour, label=name)
        ax.plot(grid, dens, "k--", lw=1, label="uniform on the sphere")
        ax.set_xlabel(lab)
        ax.set_ylabel("density")
    axes[1].legend(fontsize=7, loc="upper center")
    label_panels(axes)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 2. synthetic data


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


def synthetic_data(profile: ConstrainedModelsProfile, seed: int, generator: str = "paper"):
    """``(x, y, truth, noise_sd, x_range)``: inputs ``(n, 2)`` uniform on a square, targets."""
    gen = _generator(seed, "synth_data", 0 if generator == "paper" else 1)
    truth = paper_network(generator)
    rng, noise = (profile.synth_x_range, profile.synth_noise_sd) if generator == "paper" else (10.0, 1.0)
    x = (2 * torch.rand(profile.synth_n, 2, generator=gen, dtype=torch.float64) - 1) * rng
    y = idf.forward(truth, x) + noise * torch.randn(profile.synth_n, generator=gen, dtype=torch.float64)
    return x, y, truth, noise, rng


def synthetic_experiment(profile: ConstrainedModelsProfile, seed: int, *, progress: bool = False,
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
        grid = _synthetic_grid(rng)
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


def _synthetic_grid(x_range: float) -> torch.Tensor:
    """101 points on the slice ``x2 = 0`` of the input square."""
    return torch.stack([torch.linspace(-x_range, x_range, 101, dtype=torch.float64),
                        torch.zeros(101, dtype=torch.float64)], -1)


def _synthetic_fit(profile: ConstrainedModelsProfile, seed: int, generator: str, index: int,
                   model: str, method: str) -> dict:
    """Fit number ``index`` of the synthetic experiment on ``generator``'s data (one task)."""
    x, y, _, _, rng = synthetic_data(profile, seed, generator)
    prior = idf.NetPrior(w_laplace=False, w_scale=profile.synth_w_scale,
                         sigma_scale=profile.sigma_scale if generator == "paper" else 2.0,
                         angle_jacobian=profile.angle_jacobian)
    if method == "NUTS":
        fit = _nuts(model, x, y, 2, prior, chains=profile.synth_chains,
                    warmup=profile.synth_warmup, draws=profile.synth_draws,
                    seed=_stan_seed(seed, 100 + index + 50 * (generator == "code")))
    else:
        fit = _advi(model, x, y, prior, profile, seed, method, index)
    fit["predictive"] = _predictive(fit["params"], _synthetic_grid(rng),
                                    _generator(seed, "predictive", index))
    fit["hyperbola"] = hyperbola_stats(fit["params"])
    fit["modes"] = _mode_labels(fit["params"], profile.synth_chains if method == "NUTS" else 1)
    return fit


def _nuts(model: str, x, y, hidden: int, prior: idf.NetPrior, *, chains: int, warmup: int,
          draws: int, seed: int, max_depth: int = 10, f_points=None, code: str | None = None) -> dict:
    """One NUTS run in Stan; draws as float32 arrays ``(chains, draws, ...)`` plus diagnostics.

    ``code``: a variant of ``model``'s program with the same data block (the authors' angle prior).
    """
    name = model if code is None else f"{model}-variant"
    built = st.build(name, idf.stan_data(model, x, y, hidden, prior), seed=seed, code=code)
    fit = built.sample(chains=chains, warmup=warmup, draws=draws, max_depth=max_depth)
    params = {k: torch.as_tensor(fit.draws[k], dtype=torch.float64) for k in _PARAMS}
    xs = x if f_points is None else f_points
    f = idf.forward(params, torch.as_tensor(xs, dtype=torch.float64))     # (chains, draws, n)
    flat = np.concatenate([fit.draws[k].reshape(chains, draws, -1) for k in _PARAMS], axis=-1)
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


def _advi(model: str, x, y, prior, profile, seed: int, method: str, index: int) -> dict:
    family = advi.Family.MEANFIELD if method == "ADVI mean-field" else advi.Family.FULLRANK
    d = idf.n_unconstrained(model, x.shape[1], 2)
    gen = _generator(seed, "advi", index)
    init = torch.zeros(d, dtype=torch.float64)
    if model == "constrained":      # auxiliary points start on the unit circle, not at the
        init[0:4:2] = 1.0           # origin where their angle (and its gradient) is undefined
    t0 = time.perf_counter()
    q = advi.fit(lambda z: idf.log_density(model, z, x, y, prior), d, family, generator=gen,
                 n_steps=profile.advi_steps, lr=profile.advi_lr, n_mc=profile.advi_mc,
                 init_mean=init, init_scale=profile.advi_init_scale)
    seconds = time.perf_counter() - t0
    z = advi.sample(q, profile.advi_draws, _generator(seed, "advi_draws", index))
    params, _ = idf.unpack(model, z, x.shape[1], 2)
    tail = q.elbo_trace[-max(1, len(q.elbo_trace) // 10):]
    return {"params": {k: params[k].float().numpy() for k in _PARAMS},
            "diag": {"time_s": seconds, "elbo": float(tail.mean()), "steps": len(q.elbo_trace)}}


def _predictive(params: dict, grid: torch.Tensor, gen: torch.Generator) -> dict:
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


def _mode_labels(params: dict, chains: int = 1) -> dict:
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


def diagnostics_table(synth: dict) -> pd.DataFrame:
    """NUTS diagnostics per dataset and model."""
    rows = []
    for g, ds in synth["datasets"].items():
        for model in idf.MODELS:
            d = ds["fits"][model, "NUTS"]["diag"]
            h = ds["fits"][model, "NUTS"]["hyperbola"]
            m = ds["fits"][model, "NUTS"]["modes"]
            rows.append({"data": "paper's network" if g == "paper" else "authors' code",
                         "model": model, "chains × draws": f"{d['chains']} × {d['draws']}",
                         "ESS f(x) (median)": d["ess_f_median"], "min bulk ESS f(x)": d.get("ess_f_min", np.nan),
                         "min ESS params": d["ess_params_min"],
                         "min tail ESS f(x)": d["tail_ess_f_min"],
                         "ESS / s": d["ess_per_s"], "mean tree depth": d["treedepth"],
                         "mean leapfrog": d["leapfrog"], "divergences": d["divergent"],
                         "max split R-hat f(x)": d["rhat_f_max"], "sampling s": d["sampling_s"],
                         "corr log|W1[1,1]|, log|W2[1]|": h["corr"],
                         "permutation copies visited": m["copies"]})
    return pd.DataFrame(rows)


def advi_table(synth: dict) -> pd.DataFrame:
    """Final ELBO (mean of the last tenth of the steps), time and posterior noise sd per fit."""
    ds = synth["datasets"]["paper"]
    rows = []
    for model in idf.MODELS:
        for meth in METHODS:
            f = ds["fits"][model, meth]
            rows.append({"model": model, "method": meth,
                         "final ELBO": f["diag"].get("elbo", float("nan")),
                         "seconds": f["diag"]["time_s"],
                         "posterior mean of sigma": float(np.mean(f["params"]["sigma"])),
                         "corr log|W1[1,1]|, log|W2[1]|": f["hyperbola"]["corr"]})
    return pd.DataFrame(rows)


def plot_figure1(synth: dict, generator: str = "paper"):
    """Draws of ``W1[1,1]`` against ``W2[1]``: rows NUTS / ADVI MF / ADVI FR, columns models."""
    from symlib.book.plotting import figure

    ds = synth["datasets"][generator]
    methods = [m for m in METHODS if (idf.MODELS[0], m) in ds["fits"]]
    fig, axes = figure(len(methods), 3, width=8.0, height_per_row=2.5)
    truth = ds["truth"]
    for i, meth in enumerate(methods):
        for j, model in enumerate(idf.MODELS):
            ax = axes[i, j]
            p = ds["fits"][model, meth]["params"]
            ax.scatter(p["W1"][:, 0, 0], p["W2"][:, 0], s=3, alpha=0.35, color=f"C{j}", lw=0)
            for u in range(2):       # the true network and its permuted copy
                ax.plot(truth["W1"][u, 0], truth["W2"][u], "k+", ms=8)
            if i == 0:
                ax.set_title(model, fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{meth}\n$W_2[1]$", fontsize=8)
            if i == len(methods) - 1:
                ax.set_xlabel("$W_1[1,1]$")
    fig.tight_layout()
    return fig


def plot_predictive(synth: dict, generator: str = "paper"):
    """Posterior predictive (mean and 95% interval) on the slice ``x2 = 0``, per method."""
    from symlib.book.plotting import figure

    ds = synth["datasets"][generator]
    methods = [m for m in METHODS if (idf.MODELS[0], m) in ds["fits"]]
    fig, axes = figure(1, len(methods), width=8.0, height_per_row=2.6)
    g = ds["grid"][:, 0]
    for ax, meth in zip(axes[0], methods):
        for j, model in enumerate(("unconstrained", "constrained")):
            pr = ds["fits"][model, meth]["predictive"]
            c = "C0" if j == 0 else "C2"
            ax.fill_between(g, pr["lo"], pr["hi"], color=c, alpha=0.2)
            ax.plot(g, pr["mean"], color=c, label=model)
        ax.plot(g, ds["f_true"], "k--", lw=1, label="true f")
        near = np.abs(ds["x"][:, 1]) < 0.15 * np.abs(ds["x"]).max()
        ax.plot(ds["x"][near, 0], ds["y"][near], "k.", ms=3)
        ax.set_title(meth, fontsize=9)
        ax.set_xlabel("$x_1$ (with $x_2 = 0$)")
    axes[0, 0].set_ylabel("$y$")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 3. Boston housing


BOSTON_MODELS = ("unconstrained", "constrained")
"""The two models of Sec. 4.2, under this chapter's priors."""


def boston_experiment(profile: ConstrainedModelsProfile, seed: int, *, progress: bool = False,
                      jobs: int | None = None) -> dict:
    """NUTS on the unconstrained and the constrained model for every random 80/20 split.

    With ``boston_authors_angles`` the constrained model is also fitted under the authors' prior on
    the angles (:func:`authors_angle_program`), stored under :data:`AUTHORS_ANGLES`. The splits x
    fits are independent and run through :func:`symlib.book.parallel.fan_out` (``jobs`` at a
    time, default ``$SYMLIB_JOBS``); each draws from its own seeds, so the results do not depend
    on ``jobs``.
    """
    keys = BOSTON_MODELS + ((AUTHORS_ANGLES,) if profile.boston_authors_angles else ())
    tasks = [(profile, seed, s, key) for s in range(profile.boston_splits) for key in keys]
    fits = iter(fan_out(_boston_fit, tasks, threads=profile.threads, jobs=jobs,
                        progress=progress, desc="Boston NUTS"))
    n = len(load_boston(standardise=False)[0])
    n_test = round(profile.boston_test_fraction * n)
    splits = []
    for s in range(profile.boston_splits):
        row = {"split": s + 1, "n_train": n - n_test, "n_test": int(n_test)}
        row.update({key: next(fits) for key in keys})
        splits.append(row)
    return {"splits": splits, "hidden": profile.boston_hidden}


def _boston_fit(profile: ConstrainedModelsProfile, seed: int, split: int, key: str) -> dict:
    """NUTS on split ``split`` for ``key`` (one of :data:`BOSTON_MODELS` or :data:`AUTHORS_ANGLES`;
    one task): test MSE of the posterior-predictive mean, share of test points outside its
    central 95% interval."""
    x_all, y_all = load_boston(standardise=False)
    x_all, y_all = x_all.double(), y_all.double()
    n = x_all.shape[0]
    n_test = round(profile.boston_test_fraction * n)
    prior = idf.NetPrior(w_laplace=profile.w_laplace, w_scale=profile.boston_w_scale,
                         sigma_scale=profile.sigma_scale, angle_jacobian=profile.angle_jacobian)
    if key == AUTHORS_ANGLES:
        # the authors' prior on the angles, and no change of measure (stan/boston.stan)
        model, code, prior, stream = "constrained", authors_angle_program(), replace(prior, angle_jacobian=False), 5000 + split
    else:
        model, code, stream = key, None, 1000 + 2 * split + BOSTON_MODELS.index(key)
    perm = torch.randperm(n, generator=_generator(seed, "boston_split", split))
    te, tr = perm[:n_test], perm[n_test:]
    xtr, xte, _, _ = standardise(x_all[tr], x_all[te])
    ytr, yte, _, _ = standardise(y_all[tr], y_all[te])
    fit = _nuts(model, xtr, ytr, profile.boston_hidden, prior, chains=profile.boston_chains,
                warmup=profile.boston_warmup, draws=profile.boston_draws,
                seed=_stan_seed(seed, stream), max_depth=profile.boston_max_depth,
                f_points=xte[:20], code=code)
    p = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in fit["params"].items()}
    f = idf.forward(p, xte)                                          # (S, n_test)
    gen = _generator(seed, "predictive", stream)
    ys = f + p["sigma"][:, None] * torch.randn(f.shape, generator=gen, dtype=torch.float64)
    lo, hi = torch.quantile(ys, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0)
    return {"mse": float(((f.mean(0) - yte) ** 2).mean()),
            "outside": float(((yte < lo) | (yte > hi)).double().mean()),
            "diag": fit["diag"]}


def authors_angle_program() -> str:
    """The constrained Stan program with the authors' Boston prior on the angles.

    The authors' ``stan/boston.stan`` puts Laplace(0, 1) on every angle of a unit vector (the
    first in ``(-pi, pi)``, the others in ``(-pi/2, pi/2)``) and leaves the change of measure out.
    Here the first angle is ``atan2`` of the auxiliary point, whose own N(0, I) prior makes it
    uniform; adding the Laplace term on that angle gives it the authors' density (continuous where
    it wraps at ``+-pi``). Fit it with ``angle_jacobian = 0``.
    """
    code = st.program("constrained")
    for anchor, added in (
        ("    target += normal_lpdf(p[h] | 0, 1);\n",
         "    target += double_exponential_lpdf(atan2(p[h][2], p[h][1]) | 0, 1);\n"),
        ("  if (angle_jacobian) {\n", "  target += double_exponential_lpdf(to_vector(t) | 0, 1);\n"),
    ):
        if code.count(anchor) != 1:
            raise RuntimeError(f"the constrained Stan program changed: {anchor.strip()!r} not found once")
        code = code.replace(anchor, anchor + added if anchor.startswith("    target") else added + anchor)
    return code


def _boston_models(boston: dict) -> tuple[str, ...]:
    """The fits stored per split: the two models, and the authors' angle prior when it was run."""
    return tuple(m for m in ("unconstrained", "constrained", AUTHORS_ANGLES) if m in boston["splits"][0])


def boston_tables(boston: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Table 1 (MSE), Table 2 (share outside the 95% interval) beside the paper's, diagnostics."""
    t1_paper = reported("pourzanjani2017/table1_boston_mse").frame()
    t2_paper = reported("pourzanjani2017/table2_boston_coverage").frame()
    models = _boston_models(boston)
    out = []
    for key, paper in (("mse", t1_paper), ("outside", t2_paper)):
        rows = {}
        for model in ("unconstrained", "constrained"):
            rows[f"{model} (ours)"] = [r[model][key] for r in boston["splits"]]
            rows[f"{model} (paper)"] = _paper_row(paper, model)[: len(boston["splits"])]
        if AUTHORS_ANGLES in models:
            rows[f"{AUTHORS_ANGLES} (ours)"] = [r[AUTHORS_ANGLES][key] for r in boston["splits"]]
        frame = pd.DataFrame(rows, index=pd.Index([r["split"] for r in boston["splits"]], name="split")).T
        out.append(frame)
    diag = []
    for r in boston["splits"]:
        for model in models:
            d = r[model]["diag"]
            diag.append({"split": r["split"], "model": model, "mean tree depth": d["treedepth"],
                         "share at max depth": d["hit_max_depth"], "mean leapfrog": d["leapfrog"],
                         "divergences": d["divergent"], "ESS f(x) (median)": d["ess_f_median"],
                         "min bulk ESS f(x)": d.get("ess_f_min", float("nan")),
                         "min tail ESS f(x)": d["tail_ess_f_min"], "ESS / s": d["ess_per_s"],
                         "max split R-hat f(x)": d["rhat_f_max"], "NUTS s": d["time_s"]})
    return out[0], out[1], pd.DataFrame(diag)


def _paper_row(frame: pd.DataFrame, model: str) -> list[float]:
    """The paper's column for ``model`` from a reference table (one row per split)."""
    return [float(v) for v in frame.sort_values("split")[model].tolist()]


def wilcoxon_tests(boston: dict, constrained: str = "constrained") -> pd.DataFrame:
    """Paired two-sided Wilcoxon signed-rank tests, unconstrained vs ``constrained``, per metric."""
    return _wilcoxon(boston["splits"], constrained)


def _wilcoxon(splits: list[dict], constrained: str) -> pd.DataFrame:
    rows = []
    for key, name, paper_p in (("mse", "MSE", PAPER_P["mse"]), ("outside", "share outside 95% interval",
                                                                  PAPER_P["outside"])):
        a = np.array([r["unconstrained"][key] for r in splits])
        b = np.array([r[constrained][key] for r in splits])
        w_plus, w_minus, p = signed_ranks(a - b)
        k = len(a)
        rows.append({"metric": name, "splits": k, "constrained better": int((b < a).sum()),
                     "median difference (unc − con)": float(np.median(a - b)),
                     "W+ (unc > con)": w_plus, "W− (con > unc)": w_minus, "p (ours)": p,
                     "smallest attainable p": min_p_value("wilcoxon", k), "p (paper)": paper_p})
    return pd.DataFrame(rows)


def signed_ranks(d) -> tuple[float, float, float]:
    """Wilcoxon signed-rank sums of paired differences ``d`` and the two-sided p-value.

    ``W+`` sums the ranks of ``|d|`` over positive differences, ``W−`` over negative ones (zero
    differences dropped, ties given mid-ranks, as in R's ``wilcox.test`` and scipy's default);
    the side with the larger sum is the direction the test speaks for. The p-value is scipy's
    (exact for small samples without ties, normal approximation otherwise); NaN when every
    difference is zero or there are fewer than two.
    """
    d = np.asarray(d, dtype=float)
    nz = d[d != 0]
    if len(nz) == 0:
        return 0.0, 0.0, float("nan")
    ranks = stats.rankdata(np.abs(nz))
    w_plus, w_minus = float(ranks[nz > 0].sum()), float(ranks[nz < 0].sum())
    p = float(stats.wilcoxon(d, alternative="two-sided").pvalue) if len(d) >= 2 else float("nan")
    return w_plus, w_minus, p


PAPER_P = {"mse": 0.009, "outside": 0.003}
"""The paper's Wilcoxon p-values (Sec. 4.2), MSE and coverage."""


def errata() -> list[dict[str, str]]:
    """Inconsistencies of the paper the chapter points out (for :meth:`ChapterResults.add_erratum`).

    Sec. 4.2's p = 0.009 for the MSE cannot come from Table 1: the table's differences are positive
    in 14 splits and zero in one, and the signed-rank test on them gives a p-value an order of
    magnitude smaller (computed here from the table, with R's defaults). The coverage p = 0.003
    agrees with Table 2 (about 0.004), so it is not listed.
    """
    t1 = reported("pourzanjani2017/table1_boston_mse").frame()
    d = np.round(t1["unconstrained"].to_numpy() - t1["constrained"].to_numpy(), 2)
    w_plus, w_minus, p = signed_ranks(d)
    return [{
        "id": "wilcoxon-mse-p",
        "where": "Sec. 4.2 against Table 1",
        "paper_says": f"paired Wilcoxon test of the MSE: p = {PAPER_P['mse']}",
        "correction": (f"Table 1 gives p = {p:.2g} (two-sided signed-rank test, {int((d > 0).sum())} "
                       f"positive differences, {int((d == 0).sum())} zero dropped, W+ = {w_plus:g}, "
                       f"W− = {w_minus:g}, normal approximation with ties as in R's wilcox.test); the "
                       "chapter judges its own test at p < 0.05, which either value passes"),
    }]


# --------------------------------------------------------------------------- settings


_SETTINGS = [
    ("synthetic", "synth_n", "training points", "100"),
    ("synthetic", "synth_x_range", "inputs x ~ U(-r, r)^2, r", "not stated (code: 10)"),
    ("synthetic", "synth_noise_sd", "noise sd", "not stated (code: 1)"),
    ("synthetic", "synth_w_scale", "normal prior sd on weights", "1 (code: 0.9)"),
    ("synthetic", "synth_chains", "NUTS chains", "1 (code)"),
    ("synthetic", "advi_lr", "ADVI learning rate (Adam)", "not stated (Stan: adaptive)"),
    ("synthetic", "advi_init_scale", "ADVI initial sd", "not stated (Stan: 1)"),
    ("synthetic", "synth_warmup", "NUTS warm-up", "1,000 (code)"),
    ("synthetic", "synth_draws", "NUTS draws", "1,000 (code)"),
    ("synthetic", "advi_steps", "ADVI steps", "not stated (Stan: up to 10,000)"),
    ("synthetic", "advi_draws", "ADVI draws", "1,000 (Stan's default)"),
    ("Boston", "boston_hidden", "hidden ReLU units", "50"),
    ("Boston", "boston_splits", "80/20 splits", "15"),
    ("Boston", "boston_chains", "NUTS chains", "1 (code)"),
    ("Boston", "boston_warmup", "NUTS warm-up", "1,000 (code: 500 in boston.R)"),
    ("Boston", "boston_draws", "NUTS draws", "1,000 (code: 500 in boston.R)"),
    ("Boston", "boston_max_depth", "NUTS max tree depth", "10 (Stan's default)"),
    ("Boston", "w_laplace", "Laplace prior on the weights (W1 and W2 here)",
     "code: Laplace(0, 1) on W1 (unconstrained), N(0, 1) on W2"),
    ("Boston", "boston_w_scale", "scale of the weight prior", "1 (code)"),
    ("Boston", "angle_jacobian", "constrained: prior on the angles",
     "code: Laplace(0, 1) on every angle, no change of measure"),
    ("Boston", "boston_authors_angles", "constrained also fitted under the authors' angle prior", "–"),
    ("both", "sigma_scale", "half-normal scale on noise sd", "not stated (code: flat)"),
    ("synthetic", "angle_jacobian", "angle change of measure", "left out (code)"),
    ("robustness", "robust_w_scales", "other weight prior scales judged", "–"),
    ("robustness", "robust_boston", "Boston housing rerun under them", "–"),
]


def settings_table(profile: ConstrainedModelsProfile) -> pd.DataFrame:
    """Every setting of the chapter: the paper's value (or "not stated") beside this run's."""
    rows = []
    for exp, name, what, paper in _SETTINGS:
        value = getattr(profile, name)
        value = f"{value:g}" if isinstance(value, float) else str(value)
        rows.append({"experiment": exp, "setting": what, "paper": paper, "this run": value})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- claims


def claims(results: dict, *, judge: bool = True) -> list[Claim]:
    """The claims ledger: each claim of the paper with its criterion and preconditions.

    Criteria and thresholds are fixed here, before the run. A claim whose preconditions are not
    met is not judged (:class:`symlib.book.results.Claim`); with ``judge=False`` (the `smoke`
    profile) none is. Where the robustness stage ran, the measurement says whether the verdict
    depends on an open choice (:func:`robustness`).
    """
    out = synthetic_claims(results["synth"]["datasets"]["paper"]["fits"], judge=judge)
    out += boston_claims(results["boston"]["splits"], judge=judge)
    frames = robustness(results, judge=judge)
    return [replace(c, ours=f"{c.ours}; robustness: {depends_on(frames[c.id])}")
            if c.id in frames else c for c in out]


def _profile_gate(judge: bool) -> list[Precondition]:
    """The precondition a `smoke`-sized profile fails: it is sized to test the code, not the paper."""
    return [] if judge else [precondition("profile", "profile sized to judge the claims",
                                          "no: sized to test the code", False)]


def _mixed(diags: list[dict], what: str, *, rhat_only: bool = False) -> list[Precondition]:
    """:func:`chains_mixed` on the network's outputs f(x), worst over the given NUTS fits.

    f(x) is invariant to both symmetries, so it mixes when the function does, whatever the
    parametrisation (parameters of the unconstrained model never mix across copies).
    """
    rhat = float(np.max([d["rhat_f_max"] for d in diags]))
    bulk = float(np.min([d.get("ess_f_min", np.nan) for d in diags]))
    tail = float(np.min([d["tail_ess_f_min"] for d in diags]))
    pre = chains_mixed(rhat, bulk, tail, what=what)
    return pre[:1] if rhat_only else pre


def synthetic_claims(fits: dict, *, judge: bool = True) -> list[Claim]:
    """The claims of Sec. 4.1 on the NUTS fits ``fits[model, "NUTS"]`` of one synthetic dataset.

    Every claim rests on NUTS draws, so each needs mixed chains (f(x), both models compared). The
    tree-depth claim also needs trajectories that were not cut at the depth cap
    (:data:`DEPTH_CAP_SHARE`). The ESS claim needs R-hat only: its measured quantity is the ESS,
    so a minimum ESS would decide it.
    """
    gate = _profile_gate(judge)
    nuts = {m: fits[m, "NUTS"] for m in idf.MODELS}
    du, dc = nuts["unconstrained"]["diag"], nuts["constrained"]["diag"]
    mixed = _mixed([du, dc], "f(x), unconstrained and constrained")
    hu, hc = nuts["unconstrained"]["hyperbola"], nuts["constrained"]["hyperbola"]
    ratio = hu["sd_log_w2"] / max(hc["sd_log_w2"], 1e-12)
    mu, mo, mc = (nuts[m]["modes"] for m in idf.MODELS)
    capped = max(du["hit_max_depth"], dc["hit_max_depth"])
    return [
        Claim(
            id="hyperbola-removed",
            text="Unconstrained NUTS draws of W1[1,1] against W2[1] trace a hyperbola of equivalent "
                 "solutions; the unit-vector constraint removes it",
            paper="Figure 1 (left): a hyperbola when unconstrained, a compact cloud when constrained",
            ours=(f"corr(log|W1[1,1]|, log|W2[1]|) = {hu['corr']:.2f} unconstrained, {hc['corr']:.2f} "
                  f"constrained; sd of log|W2[1]| shrinks {ratio:.1f}-fold"),
            holds=bool(hu["corr"] < -0.5 and ratio >= 2),
            criterion="corr(log|W1[1,1]|, log|W2[1]|) < -0.5 unconstrained, and the sd of log|W2[1]| "
                      "at least 2-fold smaller constrained",
            preconditions=(*gate, *mixed)),
        Claim(
            id="permutation-copies-removed",
            text="Draws of the ordered and constrained models lie in one permutation copy of the "
                 "hidden units (one order of the biases)",
            paper="Theorem 3.1",
            ours=(f"copies (bias orders) reached by {du['chains']} NUTS chains: unconstrained "
                  f"{mu['copies']} ({mu['switches']} switches within chains), ordered {mo['copies']}, "
                  f"constrained {mc['copies']}"),
            holds=bool(mo["copies"] == 1 and mc["copies"] == 1),
            criterion="every draw of the ordered and the constrained model has b1[1] < b1[2] (holds by "
                      "construction of Stan's ordered type)",
            preconditions=tuple(gate), kind=Kind.CODE_CHECK),
        Claim(
            id="shallower-trees",
            text="NUTS needs shallower trees on the constrained model",
            paper="Sec. 4.1: average NUTS tree depth lower in the constrained case",
            ours=(f"mean tree depth {du['treedepth']:.2f} unconstrained, {dc['treedepth']:.2f} "
                  f"constrained; leapfrog steps {du['leapfrog']:.1f} vs {dc['leapfrog']:.1f}"),
            holds=bool(dc["treedepth"] < du["treedepth"]),
            criterion="mean NUTS tree depth lower constrained than unconstrained",
            preconditions=(*gate, *mixed, precondition(
                "depth_cap", f"share of NUTS iterations at the maximum tree depth <= {DEPTH_CAP_SHARE:.0%}",
                capped, capped <= DEPTH_CAP_SHARE))),
        Claim(
            id="ess-lower-constrained",
            text="The number of effective samples is lower in the constrained case (as the paper "
                 "words it; 'higher' would match its argument)",
            paper="Sec. 4.1: 'the number of effective samples ... to be lower in the constrained case'",
            ours=(f"median bulk ESS of f(x) {du['ess_f_median']:.0f} unconstrained, "
                  f"{dc['ess_f_median']:.0f} constrained; per second {du['ess_per_s']:.2g} vs "
                  f"{dc['ess_per_s']:.2g}"),
            holds=bool(dc["ess_f_median"] < du["ess_f_median"]),
            criterion="median bulk ESS of f(x) at the training inputs lower constrained (same draws)",
            preconditions=(*gate, *_mixed([du, dc], "f(x), unconstrained and constrained", rhat_only=True))),
    ]


def boston_claims(splits: list[dict], *, judge: bool = True, constrained: str = "constrained") -> list[Claim]:
    """The claims of Sec. 4.2 on the Boston splits, unconstrained vs ``constrained``.

    Each needs the NUTS chains of every split mixed in f(x) at test points. "In every split" can
    be told from chance only with enough splits, so that claim needs a sign test able to reach
    p < 0.05; the Wilcoxon claims need the same of their test.
    """
    gate = _profile_gate(judge)
    k = len(splits)
    mixed = _mixed([r[m]["diag"] for r in splits for m in ("unconstrained", constrained)],
                   "f(x) at test points, every split and model")
    mse_u = np.array([r["unconstrained"]["mse"] for r in splits])
    mse_c = np.array([r[constrained]["mse"] for r in splits])
    out_u = np.array([r["unconstrained"]["outside"] for r in splits])
    out_c = np.array([r[constrained]["outside"] for r in splits])
    not_worse = np.round(mse_c, 2) <= np.round(mse_u, 2)
    out = [
        Claim(
            id="boston-mse-lower",
            text="The constrained model's test MSE is lower in every split",
            paper="Sec. 4.2: 'in every case the constrained version ... outperformed'; Table 1: lower "
                  "in 14 of 15 splits, equal in one",
            ours=(f"not worse in {int(not_worse.sum())} of {k} splits (lower in "
                  f"{int((mse_c < mse_u).sum())}); mean {mse_u.mean():.3f} vs {mse_c.mean():.3f}"),
            holds=bool(not_worse.all()),
            criterion="constrained MSE <= unconstrained MSE in every split, both rounded to 2 decimals "
                      "as in Table 1",
            preconditions=(*gate, *mixed, test_can_reach("sign", k))),
        Claim(
            id="boston-outside-less-often",
            text="The constrained model's 95% intervals miss test points less often",
            paper="Sec. 4.2 and Table 2: mean share outside 0.107 unconstrained, 0.072 constrained",
            ours=(f"mean share outside {out_u.mean():.3f} unconstrained, {out_c.mean():.3f} constrained; "
                  f"lower in {int((out_c < out_u).sum())} of {k} splits"),
            holds=bool(out_c.mean() < out_u.mean()),
            criterion="mean share of test points outside the central 95% interval lower constrained",
            preconditions=(*gate, *mixed)),
    ]
    w = _wilcoxon(splits, constrained)
    for i, (cid, paper_p) in enumerate((("wilcoxon-mse", PAPER_P["mse"]), ("wilcoxon-coverage", PAPER_P["outside"]))):
        r = w.iloc[i]
        out.append(Claim(
            id=cid,
            text=f"A paired Wilcoxon test finds the {r['metric']} difference significant, in the "
                 "constrained model's favour",
            paper=f"Sec. 4.2: p = {paper_p}",
            ours=(f"p = {r['p (ours)']:.3g} with {k} splits; signed-rank sums W+ = "
                  f"{r['W+ (unc > con)']:g} (unconstrained higher), W− = {r['W− (con > unc)']:g}"),
            holds=bool(r["p (ours)"] < 0.05 and r["W+ (unc > con)"] > r["W− (con > unc)"]),
            criterion="paired two-sided Wilcoxon signed-rank p < 0.05, in the constrained model's "
                      "favour (W+ > W−: the unconstrained model's values higher)",
            preconditions=(*gate, *mixed, test_can_reach("wilcoxon", k))))
    return out


# --------------------------------------------------------------------------- robustness


def robustness_experiment(profile: ConstrainedModelsProfile, seed: int, *, progress: bool = False,
                          jobs: int | None = None) -> dict:
    """The synthetic NUTS runs again under every weight prior scale of ``robust_w_scales``.

    The paper's generator and data, the three models, NUTS only (every synthetic claim rests on
    NUTS); with ``robust_boston`` also Boston housing under each scale (no authors' angle prior).
    Only the summaries the claims need are kept. Every fit is a task of
    :func:`symlib.book.parallel.fan_out`.
    """
    out = {"synth": {}, "boston": {}}
    tasks = [(profile, seed, k, w, model) for k, w in enumerate(profile.robust_w_scales)
             for model in idf.MODELS]
    fits = fan_out(_robust_synthetic_fit, tasks, threads=profile.threads, jobs=jobs,
                   progress=progress, desc="robustness (synthetic)")
    for (_, _, _, w, model), fit in zip(tasks, fits):
        out["synth"].setdefault(w, {})[model, "NUTS"] = fit
    if profile.robust_boston:
        for w in profile.robust_w_scales:
            variant = replace(profile, boston_w_scale=w, boston_authors_angles=False)
            out["boston"][w] = boston_experiment(variant, seed, progress=progress, jobs=jobs)["splits"]
    return out


def _robust_synthetic_fit(profile: ConstrainedModelsProfile, seed: int, k: int, w_scale: float,
                          model: str) -> dict:
    """NUTS on the paper's synthetic data under weight prior sd ``w_scale`` (one task)."""
    x, y, _, _, _ = synthetic_data(profile, seed, "paper")
    prior = idf.NetPrior(w_laplace=False, w_scale=w_scale, sigma_scale=profile.sigma_scale,
                         angle_jacobian=profile.angle_jacobian)
    fit = _nuts(model, x, y, 2, prior, chains=profile.synth_chains, warmup=profile.synth_warmup,
                draws=profile.synth_draws, seed=_stan_seed(seed, 3000 + 10 * k + idf.MODELS.index(model)))
    return {"diag": fit["diag"], "hyperbola": hyperbola_stats(fit["params"]),
            "modes": _mode_labels(fit["params"], profile.synth_chains)}


def robustness(results: dict, *, judge: bool = True) -> dict[str, pd.DataFrame]:
    """Per claim, its verdict under every setting of the open choices that were run.

    The first row of each table is this run. Synthetic claims: the weight prior scale
    (robustness stage) and the data generator (the authors' code's, run beside the paper's);
    Boston claims: the prior on the angles (the authors', when fitted) and, in the `paper`
    profile, the weight prior scale. The code check is left out (it holds by construction).
    """
    rows: dict[str, list[dict]] = {}

    def add(choice, setting, entries):
        for c in entries:
            if c.kind is Kind.CLAIM:
                rows.setdefault(c.id, []).append({
                    "choice": choice, "setting": setting, "verdict": outcome(c.holds),
                    "failed preconditions": ", ".join(p.name for p in c.failed_preconditions) or "–",
                    "ours": c.ours})

    synth, robust = results["synth"]["datasets"], results.get("robust") or {}
    alternatives = list((robust.get("synth") or {}).items())
    if alternatives or "code" in synth:
        add("this run", "as in this run", synthetic_claims(synth["paper"]["fits"], judge=judge))
        for w, fits in alternatives:
            add("weight prior sd (synthetic)", f"{w:g}", synthetic_claims(fits, judge=judge))
        if "code" in synth:
            add("data generator", "the authors' code's (x ~ U(-10, 10)^2, noise sd 1)",
                synthetic_claims(synth["code"]["fits"], judge=judge))
    splits = results["boston"]["splits"]
    boston_alternatives = list((robust.get("boston") or {}).items())
    if AUTHORS_ANGLES in splits[0] or boston_alternatives:
        add("this run", "as in this run", boston_claims(splits, judge=judge))
        if AUTHORS_ANGLES in splits[0]:
            add("prior on the angles (constrained)", "Laplace(0, 1), no change of measure (authors' code)",
                boston_claims(splits, judge=judge, constrained=AUTHORS_ANGLES))
        for w, alt in boston_alternatives:
            add("weight prior scale (Boston)", f"{w:g}", boston_claims(alt, judge=judge))
    return {cid: pd.DataFrame(r) for cid, r in rows.items()}


# --------------------------------------------------------------------------- helpers


def _key(profile: ConstrainedModelsProfile, part: str, seed: int) -> dict:
    fields = {k: v for k, v in profile.__dict__.items() if k not in ("judge", "threads")}
    boston = ("boston_", "w_laplace", "sigma_scale", "angle_jacobian")
    prefix = {"prior": ("prior_",), "synth": ("synth_", "advi_", "sigma_scale", "angle_jacobian"),
              "boston": boston,
              "robust": ("synth_", "robust_", "sigma_scale", "angle_jacobian",
                         *(boston if profile.robust_boston else ()))}[part]
    return {"seed": int(seed), **{k: v for k, v in fields.items() if k.startswith(prefix)}}


def _stan_seed(seed: int, index: int) -> int:
    state = np.random.SeedSequence([int(seed), _STREAMS["stan"], int(index)]).generate_state(1)
    return int(state[0] % (2**31 - 2)) + 1


def _generator(seed: int, stream: str, *extra: int) -> torch.Generator:
    """An independent generator per (run seed, stream, extra ints), via numpy's SeedSequence."""
    entropy = [int(seed), _STREAMS[stream], *(int(e) for e in extra)]
    state = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))
