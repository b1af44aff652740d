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
   unconstrained and the constrained model; test MSE of the posterior-predictive mean and the
   share of test points outside the central 95% posterior-predictive interval, both on the
   standardised target; paired Wilcoxon signed-rank tests.

Choices the paper leaves open are profile fields marked [open]; the chapter lists them.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import torch
from scipy import stats

from symlib import transforms as tf
from symlib.book.cache import cached
from symlib.book.data import load_boston, standardise
from symlib.book.parallel import fan_out
from symlib.book.profiles import select_profile
from symlib.book.runtime import torch_threads
from symlib.chapters.constrained_models.paper import reported
from symlib.chapters.constrained_models.profiles import PROFILES, ConstrainedModelsProfile
from symlib.inference import advi
from symlib.inference import stan as st
from symlib.metrics.mcmc import bulk_ess, summary
from symlib.nn import constrained as idf

__all__ = [
    "CHAPTER",
    "VERSION",
    "advi_table",
    "boston_experiment",
    "boston_tables",
    "claims",
    "compile_models",
    "diagnostics_table",
    "hyperbola_stats",
    "paper_network",
    "plot_figure1",
    "plot_predictive",
    "plot_prior_demo",
    "prior_demo",
    "run",
    "settings_table",
    "synthetic_data",
    "synthetic_experiment",
    "wilcoxon_tests",
]

CHAPTER = "04_constrained_models"
VERSION = "3"
"""Bump when a code change alters the cached results."""

METHODS = ("NUTS", "ADVI mean-field", "ADVI full-rank")
RHAT_MIXED = 1.1  # split R-hat above which chains count as unmixed (classic; Vehtari et al. 2021: 1.01)
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
    return out


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
        for key, colour, name in (("no_jacobian", "C3", "angles uniform (authors' file)"),
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
          draws: int, seed: int, max_depth: int = 10, f_points=None) -> dict:
    """One NUTS run in Stan; draws as float32 arrays ``(chains, draws, ...)`` plus diagnostics."""
    built = st.build(model, idf.stan_data(model, x, y, hidden, prior), seed=seed)
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
            "ess_f_median": float(np.nanmedian(bulk_ess(f.numpy()))), "ess_params_min": worst_p.bulk_ess_min,
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
                         "ESS f(x) (median)": d["ess_f_median"], "min ESS params": d["ess_params_min"],
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


def boston_experiment(profile: ConstrainedModelsProfile, seed: int, *, progress: bool = False,
                      jobs: int | None = None) -> dict:
    """NUTS on the unconstrained and the constrained model for every random 80/20 split.

    The splits x models fits are independent and run through
    :func:`symlib.book.parallel.fan_out` (``jobs`` at a time, default ``$SYMLIB_JOBS``).
    """
    tasks = [(profile, seed, s, j) for s in range(profile.boston_splits)
             for j in range(len(BOSTON_MODELS))]
    fits = iter(fan_out(_boston_fit, tasks, threads=profile.threads, jobs=jobs,
                        progress=progress, desc="Boston NUTS"))
    n = len(load_boston(standardise=False)[0])
    n_test = round(profile.boston_test_fraction * n)
    splits = []
    for s in range(profile.boston_splits):
        row = {"split": s + 1, "n_train": n - n_test, "n_test": int(n_test)}
        row.update({model: next(fits) for model in BOSTON_MODELS})
        splits.append(row)
    return {"splits": splits, "hidden": profile.boston_hidden}


def _boston_fit(profile: ConstrainedModelsProfile, seed: int, split: int, index: int) -> dict:
    """NUTS on split ``split`` for model ``BOSTON_MODELS[index]`` (one task): test MSE of the
    posterior-predictive mean, share of test points outside its central 95% interval."""
    model = BOSTON_MODELS[index]
    x_all, y_all = load_boston(standardise=False)
    x_all, y_all = x_all.double(), y_all.double()
    n = x_all.shape[0]
    n_test = round(profile.boston_test_fraction * n)
    prior = idf.NetPrior(w_laplace=profile.w_laplace, w_scale=1.0, sigma_scale=profile.sigma_scale,
                         angle_jacobian=profile.angle_jacobian)
    perm = torch.randperm(n, generator=_generator(seed, "boston_split", split))
    te, tr = perm[:n_test], perm[n_test:]
    xtr, xte, _, _ = standardise(x_all[tr], x_all[te])
    ytr, yte, _, _ = standardise(y_all[tr], y_all[te])
    stream = 1000 + 2 * split + index
    fit = _nuts(model, xtr, ytr, profile.boston_hidden, prior, chains=profile.boston_chains,
                warmup=profile.boston_warmup, draws=profile.boston_draws,
                seed=_stan_seed(seed, stream), max_depth=profile.boston_max_depth,
                f_points=xte[:20])
    p = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in fit["params"].items()}
    f = idf.forward(p, xte)                                          # (S, n_test)
    gen = _generator(seed, "predictive", stream)
    ys = f + p["sigma"][:, None] * torch.randn(f.shape, generator=gen, dtype=torch.float64)
    lo, hi = torch.quantile(ys, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0)
    return {"mse": float(((f.mean(0) - yte) ** 2).mean()),
            "outside": float(((yte < lo) | (yte > hi)).double().mean()),
            "diag": fit["diag"]}


def boston_tables(boston: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Table 1 (MSE), Table 2 (share outside the 95% interval) beside the paper's, diagnostics."""
    t1_paper = reported("pourzanjani2017/table1_boston_mse").frame()
    t2_paper = reported("pourzanjani2017/table2_boston_coverage").frame()
    out = []
    for key, paper in (("mse", t1_paper), ("outside", t2_paper)):
        rows = {}
        for model in ("unconstrained", "constrained"):
            rows[f"{model} (ours)"] = [r[model][key] for r in boston["splits"]]
            rows[f"{model} (paper)"] = _paper_row(paper, model)[: len(boston["splits"])]
        frame = pd.DataFrame(rows, index=pd.Index([r["split"] for r in boston["splits"]], name="split")).T
        out.append(frame)
    diag = []
    for r in boston["splits"]:
        for model in ("unconstrained", "constrained"):
            d = r[model]["diag"]
            diag.append({"split": r["split"], "model": model, "mean tree depth": d["treedepth"],
                         "share at max depth": d["hit_max_depth"], "mean leapfrog": d["leapfrog"],
                         "divergences": d["divergent"], "ESS f(x) (median)": d["ess_f_median"],
                         "min tail ESS f(x)": d["tail_ess_f_min"], "ESS / s": d["ess_per_s"], "max split R-hat f(x)": d["rhat_f_max"],
                         "NUTS s": d["time_s"]})
    return out[0], out[1], pd.DataFrame(diag)


def _paper_row(frame: pd.DataFrame, model: str) -> list[float]:
    """The paper's column for ``model`` from a reference table (one row per split)."""
    return [float(v) for v in frame.sort_values("split")[model].tolist()]


def wilcoxon_tests(boston: dict) -> pd.DataFrame:
    """Paired two-sided Wilcoxon signed-rank tests, unconstrained vs constrained, per metric."""
    rows = []
    for key, name, paper_p in (("mse", "MSE", 0.009), ("outside", "share outside 95% interval", 0.003)):
        a = np.array([r["unconstrained"][key] for r in boston["splits"]])
        b = np.array([r["constrained"][key] for r in boston["splits"]])
        p = float("nan")
        if len(a) >= 2 and np.any(a != b):
            p = float(stats.wilcoxon(a, b, alternative="two-sided").pvalue)
        k = len(a)
        rows.append({"metric": name, "splits": k, "constrained better": int((b < a).sum()),
                     "median difference (unc − con)": float(np.median(a - b)), "p (ours)": p,
                     "smallest attainable p": float(2 * 0.5**k), "p (paper)": paper_p})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- settings and claims


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
    ("Boston", "boston_warmup", "NUTS warm-up", "1,000 (code)"),
    ("Boston", "boston_draws", "NUTS draws", "1,000 (code)"),
    ("Boston", "boston_max_depth", "NUTS max tree depth", "10 (Stan's default)"),
    ("Boston", "w_laplace", "Laplace(0, 1) prior on weights", "yes (code)"),
    ("both", "sigma_scale", "half-normal scale on noise sd", "not stated"),
    ("both", "angle_jacobian", "angle change of measure", "left out (code)"),
]


def settings_table(profile: ConstrainedModelsProfile) -> pd.DataFrame:
    """Every setting of the chapter: the paper's value (or "not stated") beside this run's."""
    rows = []
    for exp, name, what, paper in _SETTINGS:
        value = getattr(profile, name)
        value = f"{value:g}" if isinstance(value, float) else str(value)
        rows.append({"experiment": exp, "setting": what, "paper": paper, "this run": value})
    return pd.DataFrame(rows)


def claims(results: dict, *, judge: bool = True) -> list[dict]:
    """The claims ledger (paper's claim, our measurement, whether it held in this run)."""
    def verdict(value):
        return (None if value is None else bool(value)) if judge else None

    out = []
    ds = results["synth"]["datasets"]["paper"]
    nuts = {m: ds["fits"][m, "NUTS"] for m in idf.MODELS}
    hu, hc = nuts["unconstrained"]["hyperbola"], nuts["constrained"]["hyperbola"]
    ratio = hu["sd_log_w2"] / max(hc["sd_log_w2"], 1e-12)
    out.append({
        "id": "hyperbola-removed",
        "text": "Unconstrained NUTS draws of W1[1,1] against W2[1] trace a hyperbola of equivalent "
             "solutions; the unit-vector constraint removes it",
        "paper": "Figure 1 (left): a hyperbola when unconstrained, a compact cloud when constrained",
        "ours": (f"corr(log|W1[1,1]|, log|W2[1]|) = {hu['corr']:.2f} unconstrained, {hc['corr']:.2f} "
              f"constrained; sd of log|W2[1]| shrinks {ratio:.1f}-fold (criterion: corr < -0.5 "
              "unconstrained and at least 2-fold shrinkage)"),
        "holds": verdict(hu["corr"] < -0.5 and ratio >= 2)})
    mu, mc = nuts["unconstrained"]["modes"], nuts["constrained"]["modes"]
    mo = nuts["ordered"]["modes"]
    seen = mu["copies"] > 1
    out.append({
        "id": "permutation-copies-removed",
        "text": "Unconstrained, NUTS chains reach several permutation copies of the hidden units; "
                "with ordered biases only one",
        "paper": "Theorem 3.1",
        "ours": (f"copies (bias orders) reached by {nuts['unconstrained']['diag']['chains']} NUTS "
                 f"chains: unconstrained {mu['copies']} ({mu['switches']} switches within chains), "
                 f"ordered {mo['copies']}, constrained {mc['copies']}"
                 + ("" if seen else "; the unconstrained chains stayed in one copy, so nothing to remove")),
        "holds": verdict((mo["copies"] == 1 and mc["copies"] == 1) if seen else None)})
    du, dc = nuts["unconstrained"]["diag"], nuts["constrained"]["diag"]
    capped = _boston_capped(results)
    out.append({
        "id": "shallower-trees",
        "text": "NUTS needs shallower trees (fewer leapfrog steps) on the constrained model",
        "paper": "Sec. 4.1: average NUTS tree depth lower in the constrained case",
        "ours": (f"synthetic: mean tree depth {du['treedepth']:.2f} → {dc['treedepth']:.2f}, "
                 f"leapfrog {du['leapfrog']:.1f} → {dc['leapfrog']:.1f}" + _boston_depth(results)
                 + ("; Boston not judged: most trees hit the depth cap" if capped else "")),
        "holds": verdict(dc["treedepth"] < du["treedepth"]
                         and (capped or _boston_depth_holds(results)))})
    mixed = max(du["rhat_f_max"], dc["rhat_f_max"]) <= RHAT_MIXED
    out.append({
        "id": "ess-lower-constrained",
        "text": "The number of effective samples is lower in the constrained case (as the paper "
             "words it; a typo for 'higher' is likely)",
        "paper": "Sec. 4.1: 'the number of effective samples ... to be lower in the constrained case'",
        "ours": (f"median bulk ESS of f(x) {du['ess_f_median']:.0f} unconstrained, "
              f"{dc['ess_f_median']:.0f} constrained; per second {du['ess_per_s']:.2g} vs "
              f"{dc['ess_per_s']:.2g}; max split R-hat of f(x) {du['rhat_f_max']:.2f} vs "
              f"{dc['rhat_f_max']:.2f}"
              + ("" if mixed else f" (not judged: R-hat above {RHAT_MIXED}, the chains have not "
                 "mixed and ESS counts only their noise)")),
        "holds": verdict(dc["ess_f_median"] < du["ess_f_median"] if mixed else None)})
    b = results["boston"]
    k = len(b["splits"])
    mse_u = np.array([r["unconstrained"]["mse"] for r in b["splits"]])
    mse_c = np.array([r["constrained"]["mse"] for r in b["splits"]])
    out_u = np.array([r["unconstrained"]["outside"] for r in b["splits"]])
    out_c = np.array([r["constrained"]["outside"] for r in b["splits"]])
    enough = k >= 3
    out.append({
        "id": "boston-mse-lower",
        "text": "The constrained model's test MSE is lower in most splits",
        "paper": "Table 1: lower in 14 of 15 splits (equal in one)",
        "ours": f"lower in {int((mse_c < mse_u).sum())} of {k} splits; mean {mse_u.mean():.3f} vs {mse_c.mean():.3f}",
        "holds": verdict(bool((mse_c < mse_u).sum() > k / 2) if enough else None)})
    dev_u, dev_c = np.abs(out_u - 0.05), np.abs(out_c - 0.05)
    out.append({
        "id": "boston-coverage-closer",
        "text": "The constrained model's 95% intervals miss the nominal 5% of test points more "
             "closely",
        "paper": "Table 2: mean share outside 0.107 unconstrained, 0.072 constrained",
        "ours": (f"mean share outside {out_u.mean():.3f} unconstrained, {out_c.mean():.3f} constrained; "
              f"closer to 0.05 in {int((dev_c < dev_u).sum())} of {k} splits"),
        "holds": verdict(bool(dev_c.mean() < dev_u.mean()) if enough else None)})
    w = wilcoxon_tests(b)
    for i, (cid, paper_p) in enumerate((("wilcoxon-mse", 0.009), ("wilcoxon-coverage", 0.003))):
        r = w.iloc[i]
        can = r["smallest attainable p"] < 0.05
        out.append({
            "id": cid,
            "text": f"A paired Wilcoxon test finds the {r['metric']} difference significant (p < 0.05)",
            "paper": f"p = {paper_p}",
            "ours": (f"p = {r['p (ours)']:.3g} with {k} splits (smallest attainable p "
                  f"{r['smallest attainable p']:.3g}" + ("" if can else ": too few splits to judge") + ")"),
            "holds": verdict(bool(r["p (ours)"] < 0.05) if can and math.isfinite(r["p (ours)"]) else None)})
    return out


def _boston_depth(results) -> str:
    s = results["boston"]["splits"]
    tu = np.mean([r["unconstrained"]["diag"]["treedepth"] for r in s])
    tc = np.mean([r["constrained"]["diag"]["treedepth"] for r in s])
    return f"; Boston (mean over splits): {tu:.2f} → {tc:.2f}"


def _boston_capped(results) -> bool:
    """Whether most NUTS iterations on Boston hit the maximum tree depth (depths not comparable)."""
    s = results["boston"]["splits"]
    return any(r[m]["diag"]["hit_max_depth"] > 0.5 for r in s for m in ("unconstrained", "constrained"))


def _boston_depth_holds(results) -> bool:
    s = results["boston"]["splits"]
    return all(r["constrained"]["diag"]["treedepth"] <= r["unconstrained"]["diag"]["treedepth"] for r in s)


# --------------------------------------------------------------------------- helpers


def _key(profile: ConstrainedModelsProfile, part: str, seed: int) -> dict:
    fields = {k: v for k, v in profile.__dict__.items() if k not in ("judge", "threads")}
    prefix = {"prior": ("prior_",), "synth": ("synth_", "advi_", "sigma_scale", "angle_jacobian"),
              "boston": ("boston_", "w_laplace", "sigma_scale", "angle_jacobian")}[part]
    return {"seed": int(seed), **{k: v for k, v in fields.items() if k.startswith(prefix)}}


def _stan_seed(seed: int, index: int) -> int:
    state = np.random.SeedSequence([int(seed), _STREAMS["stan"], int(index)]).generate_state(1)
    return int(state[0] % (2**31 - 2)) + 1


def _generator(seed: int, stream: str, *extra: int) -> torch.Generator:
    """An independent generator per (run seed, stream, extra ints), via numpy's SeedSequence."""
    entropy = [int(seed), _STREAMS[stream], *(int(e) for e in extra)]
    state = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))
