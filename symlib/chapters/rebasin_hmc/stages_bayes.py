"""The Bayesian comparison of chapter 5 (Table 1 and Figure 3 of Xiao et al. 2023).

HMC, a deep ensemble and mean-field VI for the same Bayesian MLP with an ``N(0, prior_sd^2)``
prior; their compact representations ``q_d`` and ``q_r``; agreement and total variation against
HMC's predictive; test accuracies; the per-weight sds; pruning by sd. Three functions, one per
stage: :func:`fit_ensemble` (stage ``ensemble``), :func:`fit_vi` (stage ``vi``) and
:func:`bayes_experiment` (stage ``bayes``, and each HMC variant of stage ``robust``), which
takes the two fits: they depend on none of the HMC settings, so every HMC variant shares them.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from symlib import metrics
from symlib.chapters.rebasin_hmc.hmc_summary import HMCSummary
from symlib.chapters.rebasin_hmc.stages_not import data_source, load_data
from symlib.inference import compact, ensemble, hmc, hmc_resumable, loop
from symlib.inference.mfvi import BayesMLP, mean_field_from_params
from symlib.inference.vi_classifier import fit_classifier
from symlib.metrics.mcmc import summary
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

__all__ = ["METHODS", "MIX_POINTS", "ROWS", "bayes_experiment", "fit_ensemble", "fit_vi", "mixing"]

MIX_POINTS = 20
"""Test images whose logits under every HMC sample measure mixing (R-hat, ESS): the logits are
invariant to the permutations, so they mix when the function does."""

METHODS = ("HMC sample", "HMC q_d", "HMC q_r", "Ens. sample", "Ens. q_d", "Ens. q_r", "VI q")
"""Table 1's columns, in the paper's order (names as in :func:`symlib.chapters.rebasin_hmc.paper.reported`)."""
ROWS = ("agreement with HMC", "TV to HMC", "test acc. of samples %", "test acc. of mu_d / mu_r %")



def _cpu(params: dict) -> dict:
    """A params dict on the CPU, detached: a stage's result is cached and loaded on the CPU."""
    return {k: v.detach().cpu() for k, v in params.items()}


def fit_ensemble(config, generator: torch.Generator, *, device="cpu", progress: bool = True) -> dict:
    """The deep ensemble of Table 1: ``ens_members`` MAP members, trained together (vmapped).

    Args:
        config: the profile (:data:`symlib.chapters.rebasin_hmc.stages.ENSEMBLE_FIELDS`).
        generator: draws the members' initialisation and minibatch order (a CPU generator).
        device: where the members train.
        progress: show a progress bar.

    Returns:
        ``{"params": members (leading axis: member, on the CPU), "timings": {"ensemble": s}}``.
    """
    device = torch.device(device)
    data = load_data(config, device)
    x, y = data["x_train"], data["y_train"]
    spec = MLPSpec((x.shape[1], config.width, 10))
    t = time.perf_counter()
    g_ens = generator
    members = {k: v.to(device) for k, v in ensemble.init_ensemble(spec, config.ens_members, g_ens).items()}
    ens = ensemble.train_map(
        members, x, y, spec, epochs=config.ens_epochs,
        batch_size=config.ens_batch_size, lr=config.ens_lr, generator=g_ens, prior_sd=config.prior_sd,
        progress=progress, desc="ensemble").params
    return {"params": _cpu(ens), "timings": {"ensemble": time.perf_counter() - t}}


def fit_vi(config, *, init_generator: torch.Generator, noise_generator: torch.Generator, device="cpu",
           progress: bool = True) -> dict:
    """Mean-field Gaussian VI of Table 1 (local reparameterisation, minibatch Adam).

    Args:
        config: the profile (:data:`symlib.chapters.rebasin_hmc.stages.VI_FIELDS`).
        init_generator: draws the initial means (a CPU generator: :func:`symlib.nn.mlp.init_mlp`).
        noise_generator: shuffles the minibatches and draws the Monte Carlo noise (on ``device``).
        device: where VI runs.
        progress: show a progress bar.

    Returns:
        ``{"q": the fitted DiagonalGaussian (on the CPU), "loss": per-epoch loss, "timings": {"VI": s}}``.
    """
    device = torch.device(device)
    data = load_data(config, device)
    x, y = data["x_train"], data["y_train"]
    spec = MLPSpec((x.shape[1], config.width, 10))
    t = time.perf_counter()
    model = BayesMLP(spec)
    q0 = mean_field_from_params(model, {k: v.to(device) for k, v in init_mlp(spec, init_generator).items()},
                                init_sd=config.vi_init_sd)
    q_vi_state, vi_hist = fit_classifier(model, q0, x, y, epochs=config.vi_epochs,
                                         batch_size=config.vi_batch_size, lr=config.vi_lr,
                                         generator=noise_generator, progress=progress)
    q_vi = compact.DiagonalGaussian(_cpu(q_vi_state.mean), _cpu({k: v.exp() for k, v in q_vi_state.log_sd.items()}))
    return {"q": q_vi, "loss": vi_hist["loss"], "timings": {"VI": time.perf_counter() - t}}


def bayes_experiment(config, generators: Mapping[str, torch.Generator], *, ensemble_fit: dict, vi_fit: dict, device="cpu",
                     checkpoint: str | os.PathLike | None = None, checkpoint_max_bytes: int = 16 << 20,
                     deadline: float | None = None, progress: bool = True) -> dict:
    """Table 1 and Figure 3 of Xiao et al.: HMC, and every method's comparison with it.

    HMC's chains start from independent initialisations, optionally improved by a few Adam MAP
    epochs (``hmc_warm_start_epochs``, a shortcut through burn-in for the quick profile). ``q_r``
    rebases every sample onto one reference sample (HMC: the first kept sample of chain 0;
    ensemble: member 0) by activation matching on ``match_points`` training images; weight
    matching is reported alongside. Ensemble means are combined with HMC sds after aligning the
    ensemble's ``q_r`` to HMC's ``mu_r`` (activation matching).

    Args:
        config: the profile (:data:`symlib.chapters.rebasin_hmc.stages.BAYES_FIELDS`), or an HMC
            variant of it.
        generators: ``"hmc"`` draws HMC's initialisation, warm start and momenta (CPU),
            ``"predictive"`` the predictive draws (on ``device``) and ``"pruning"`` the random
            pruning order (CPU).
        ensemble_fit: :func:`fit_ensemble`'s result for this profile.
        vi_fit: :func:`fit_vi`'s result for this profile.
        device: where HMC and the evaluation run.
        checkpoint: HMC's checkpoint file (:func:`symlib.inference.hmc_resumable.sample_resumable`:
            the chains' state and :class:`~symlib.chapters.rebasin_hmc.hmc_summary.HMCSummary`'s
            running sums; an existing one is continued). None: a temporary file, so the run
            cannot be continued.
        checkpoint_max_bytes: refuse a larger checkpoint (``sample_resumable``'s limit).
        deadline: when the sampling must stop (seconds since the epoch: the stage's
            :attr:`~symlib.book.chapter.StageContext.deadline`); it then stops with its
            checkpoint written and :class:`~symlib.inference.loop.BudgetExhausted` is raised.
            None: no time limit.
        progress: show progress bars.
    """
    if checkpoint is None:
        with tempfile.TemporaryDirectory(prefix="symlib-hmc-") as folder:
            return bayes_experiment(config, generators, ensemble_fit=ensemble_fit, vi_fit=vi_fit, device=device,
                                    checkpoint=Path(folder) / "hmc.pt", checkpoint_max_bytes=checkpoint_max_bytes,
                                    deadline=deadline, progress=progress)
    device = torch.device(device)
    data = load_data(config, device)
    x, y, xt, yt = data["x_train"], data["y_train"], data["x_test"], data["y_test"]
    x_match = x[: config.match_points or len(x)]
    spec = MLPSpec((x.shape[1], config.width, 10))
    ens = {k: v.to(device) for k, v in ensemble_fit["params"].items()}
    q = vi_fit["q"]
    q_vi = compact.DiagonalGaussian({k: v.to(device) for k, v in q.mean.items()}, {k: v.to(device) for k, v in q.sd.items()})
    timings = {**ensemble_fit["timings"], **vi_fit["timings"]}

    # --- HMC
    t = time.perf_counter()
    g_hmc = generators["hmc"]
    start = ensemble.init_ensemble(spec, config.hmc_chains, g_hmc)
    start = {k: v.to(device) for k, v in start.items()}
    if config.hmc_warm_start_epochs:
        start = ensemble.train_map(start, x, y, spec, epochs=config.hmc_warm_start_epochs,
                                   batch_size=config.ens_batch_size, lr=config.ens_lr, generator=g_hmc,
                                   prior_sd=config.prior_sd, progress=progress, desc="HMC warm start").params
    timings["HMC warm start"] = time.perf_counter() - t
    potential = hmc.mlp_classification_potential(spec, x, y, prior_sd=config.prior_sd)
    summary_ = HMCSummary(spec, xt, yt, x_match, MIX_POINTS)
    chain = hmc_resumable.sample_resumable(
        potential, start, checkpoint=checkpoint, n_burnin=config.hmc_burnin, n_samples=config.hmc_samples,
        n_leapfrog=config.hmc_leapfrog, step_size=config.hmc_step_size, jitter=config.hmc_jitter,
        generator=g_hmc, thin=config.hmc_thin, target_accept=config.hmc_target_accept, adapt=config.hmc_adapt,
        accumulate=summary_, max_checkpoint_bytes=checkpoint_max_bytes, budget_s=loop.seconds_left(deadline),
        progress=progress).require_complete("chapter 5's HMC")
    timings["HMC sampling"] = chain.wall_time_s

    # --- evaluation
    t = time.perf_counter()
    g_eval = generators["predictive"]
    p_hmc = summary_.predictive()
    hmc_qd = summary_.moments("raw")
    hmc_qr, hmc_nots = summary_.moments("activation"), summary_.nots["activation"]
    hmc_qr_w, hmc_nots_w = summary_.moments("weight"), summary_.nots["weight"]
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

    # single-sample accuracies (diagnostics) and logits at a few test points (mixing): from the summary
    sample_acc = summary_.sample_accuracy()
    with torch.no_grad():
        forward = torch.func.vmap(mlp_forward, in_dims=(0, None, None))
        member_acc = (forward(ens, xt, spec).argmax(-1) == yt).double().mean(-1).cpu().numpy()

    # --- Figure 3: sds and pruning
    def flat(p):
        return torch.cat([v.reshape(-1) for v in p.values()]).float().cpu().numpy()

    sds = {"HMC sigma_d": flat(hmc_qd.sd), "HMC sigma_r": flat(hmc_qr.sd),
           "Ens. sigma_d": flat(ens_qd.sd), "Ens. sigma_r": flat(ens_qr.sd), "VI sigma": flat(q_vi.sd)}
    ens_aligned = compact.align(ens_qr, hmc_qr.mean, spec, compact.Matching.ACTIVATION, x=x_match)
    g_rand = generators["pruning"]
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

    n_samples = summary_.count
    chains = summary_.sample_chain()
    mixing_ = mixing(summary_.sample_logits(), chains, config.hmc_chains)
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
            "grad_evals_per_s": config.hmc_chains * chain.n_grad_evals / max(chain.wall_time_s, 1e-9),
            "wall_time_s": chain.wall_time_s,
            "pieces": chain.pieces,
            "capture": chain.capture,
            "history": chain.history,
            # how far a chain can wander: sqrt(transitions) trajectories of length L * eps, each
            # a random-walk step in a direction the data do not constrain (only the prior does)
            "exploration_scale": math.sqrt(config.hmc_burnin + config.hmc_samples * config.hmc_thin)
            * config.hmc_leapfrog * float(chain.step_size.mean()),
            "nots_to_reference": np.asarray(hmc_nots),
            "nots_to_reference_weight": np.asarray(hmc_nots_w),
            "sample_accuracy": sample_acc,
            "mixing": mixing_,
            "n_params": spec.n_params,
        },
        "ensemble": {"member_accuracy": member_acc, "nots_to_reference": np.asarray(ens_nots)},
        "vi": {"loss": vi_fit["loss"]},
        "data_source": data_source(config),
        "n_train": len(x),
        "n_test": len(xt),
        "width": config.width,
        "timings": timings,
    }


def mixing(logits: np.ndarray, chain_of: np.ndarray, n_chains: int) -> dict[str, float]:
    """Worst split R-hat, bulk and tail ESS of the samples' logits, chains laid side by side.

    NaN where there are too few draws to compute them (fewer than 4 per chain).
    """
    per_chain = np.stack([logits[chain_of == c] for c in range(n_chains)])   # (chains, draws, ...)
    try:
        worst = summary(per_chain)
    except ValueError:
        return {"rhat": float("nan"), "bulk_ess": float("nan"), "tail_ess": float("nan")}
    return {"rhat": worst.rhat_max, "bulk_ess": worst.bulk_ess_min, "tail_ess": worst.tail_ess_min}

