"""Chapter 2b's approximate posteriors: the weight samples of every row of Table 1.

:func:`posterior_samples` runs MC dropout, mean-field VI ("BNN"), SGHMC, SWAG and Laplace around
the trained modes (:mod:`symlib.inference.posteriors`), single- and multi-mode, and adds the deep
ensemble's members.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tqdm import tqdm

from symlib.chapters.posterior_mmd.networks import _loss, first_learned, sgd_config, test_accuracies
from symlib.inference import posteriors as post
from symlib.nn.convnets import init_optunet, optunet_forward
from symlib.nn.training import SGDConfig

__all__ = ["METHODS", "SAMPLE_FIELDS", "posterior_samples", "split_counts"]

METHODS = (("one mode", "Dropout"), ("one mode", "BNN"), ("one mode", "SGHMC"),
           ("one mode", "SWAG"), ("one mode", "Laplace"), ("multi mode", "Dropout"),
           ("multi mode", "BNN"), ("multi mode", "SWAG"), ("multi mode", "Laplace"),
           ("multi mode", "DE"))
"""Table 1's rows, in the paper's order (there is no multi-mode SGHMC row)."""
SAMPLE_FIELDS = ("modes", "samples", "dropout_p", "vi_epochs", "vi_lr", "vi_mc", "vi_prior_sd",
                 "sghmc_lr", "sghmc_friction", "sghmc_burnin_epochs", "sghmc_epochs_between",
                 "swag_snapshots", "swag_epochs_between", "swag_lr", "swag_scale",
                 "laplace_hessian", "laplace_points")
"""The profile fields the samples depend on beyond the networks' (:func:`posterior_samples`)."""


def posterior_samples(config, data: dict, nets: dict, seed: int, *,
                      progress: bool = True, device: torch.device | str = "cpu") -> dict:
    """Weight samples of every row of Table 1, as ``{"rows": [{"mode", "method", "params"}]}``
    plus which networks served as modes.

    Each method runs once on the first ``modes`` ensemble members that learned (one vmapped
    computation) and draws ``samples`` weights around each; the single-mode row keeps the
    first member's draws, the multi-mode row ``samples / modes`` draws of each member. SGHMC
    has no multi-mode row in the paper and runs one chain. MC dropout trains its own networks
    from scratch with dropout, with the same recipe and budget as the others (a few spare
    networks, since some never leave chance level).

    Every method runs on ``device``, drawing from one CPU generator (as
    :func:`~symlib.chapters.posterior_mmd.networks.train_networks`);
    the samples are returned on the CPU.
    """
    gen = torch.Generator().manual_seed(seed)
    x, y = data["x_train"].to(device), data["y_train"].to(device)
    n, s, bs = len(x), config.samples, config.batch_size
    start = first_learned(nets["ensemble_accuracy"], config.modes)
    modes = {k: v[start].to(device) for k, v in nets["ensemble"].items()}
    prior_precision = post.prior_precision_from_weight_decay(config.weight_decay, n)
    drawn: dict[str, dict] = {}
    stages = tqdm(["Dropout", "BNN", "SGHMC", "SWAG", "Laplace"], desc="methods",
                  disable=not progress)
    for method in stages:
        stages.set_postfix_str(method)
        if method == "Dropout":
            spare = config.modes + max(2, config.modes // 2)  # some never leave chance level
            init = {k: v.to(device) for k, v in init_optunet(gen, spare).items()}
            trained = post.train_dropout(optunet_forward, init, x, y,
                                         sgd_config(config), gen, p=config.dropout_p)
            dropout_acc = test_accuracies(trained, data, device)
            keep = first_learned(dropout_acc, config.modes)
            trained = {k: v[keep] for k, v in trained.items()}
            drawn[method] = post.dropout_samples(trained, s, gen, p=config.dropout_p)
        elif method == "BNN":
            prior_sd = prior_precision ** -0.5 if config.vi_prior_sd is None else config.vi_prior_sd
            vi = post.VIConfig(lr=config.vi_lr, epochs=config.vi_epochs, batch_size=bs,
                               n_mc=config.vi_mc, prior_sd=prior_sd)
            q = post.fit_mean_field(_log_lik, modes, x, y, vi, gen)
            drawn[method] = post.mean_field_sample(q, s, gen)
        elif method == "SGHMC":
            steps = n // bs
            chain = post.SGHMCConfig(lr=config.sghmc_lr, alpha=config.sghmc_friction,
                                     batch_size=bs, burn_in=config.sghmc_burnin_epochs * steps,
                                     thin=config.sghmc_epochs_between * steps, n_samples=s)
            drawn[method] = post.sghmc(post.nll_potential(optunet_forward, n, prior_precision),
                                       {k: v[:1] for k, v in modes.items()}, x, y, chain, gen)
        elif method == "SWAG":
            swag_sgd = SGDConfig(lr=config.swag_lr, epochs=1, batch_size=bs,
                                 weight_decay=config.weight_decay, momentum=config.momentum)
            state = post.train_swag(_loss, modes, x, y, swag_sgd, gen,
                                    n_snapshots=config.swag_snapshots,
                                    snapshot_every=config.swag_epochs_between,
                                    max_rank=config.swag_snapshots)
            drawn[method] = post.swag_sample(state, s, gen, scale=config.swag_scale)
        else:
            sub = torch.randperm(n, generator=gen)[:config.laplace_points].to(device)
            state = post.fit_laplace(optunet_forward, modes, x[sub], y[sub], prior_precision,
                                     config.laplace_hessian, n_data=n)
            drawn[method] = post.laplace_sample(state, s, gen)
    per_mode = split_counts(s, config.modes)
    rows = []
    for mode, method in METHODS:
        if method == "DE":
            params = {k: v[:s] for k, v in nets["ensemble"].items()}
        elif mode == "one mode":
            params = {k: v[0, :s] for k, v in drawn[method].items()}
        else:
            params = _take_multi(drawn[method], per_mode)
        rows.append({"mode": mode, "method": method,
                     "params": {k: v.detach().float().cpu().contiguous() for k, v in params.items()}})
        if method == "Laplace":  # predicts with the network linearised at each sample's mode
            at = {k: v[:, None].expand_as(drawn[method][k]) for k, v in modes.items()}
            at = {k: v[0, :s] for k, v in at.items()} if mode == "one mode" else _take_multi(at, per_mode)
            rows[-1]["centre"] = {k: v.detach().float().cpu().contiguous() for k, v in at.items()}
    return {"rows": rows, "modes_used": start, "dropout_accuracy": dropout_acc,
            "dropout_used": keep.cpu()}


def _log_lik(params, x, y):
    return -F.cross_entropy(optunet_forward(params, x), y)


def split_counts(total: int, parts: int) -> list[int]:
    """``total`` samples over ``parts`` modes, as evenly as possible."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def _take_multi(samples: dict, counts: list[int]) -> dict:
    """From ``(modes, S, ...)`` samples, the first ``counts[m]`` of mode ``m``, stacked."""
    return {k: torch.cat([v[m, :c] for m, c in enumerate(counts)]) for k, v in samples.items()}

