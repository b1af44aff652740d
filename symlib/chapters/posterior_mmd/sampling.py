"""Chapter 2b's approximate posteriors: the weight samples of every row of Table 1.

:func:`posterior_samples` runs MC dropout, mean-field VI ("BNN"), SGHMC, SWAG and Laplace around
the trained modes (:mod:`symlib.inference.posteriors`), single- and multi-mode, and adds the deep
ensemble's members. Given a checkpoint file it can stop between two methods and continue there
with the numbers of an uninterrupted run (the `paper` profile's methods take 25-484 s each on 2
CPU cores, the whole about 18 min: longer than a piece of a run on the GPU machine).
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from symlib.book import cache
from symlib.chapters.posterior_mmd.networks import _loss, first_learned, sgd_config, test_accuracies
from symlib.inference import posteriors as post
from symlib.inference.loop import BudgetExhausted
from symlib.nn.convnets import init_optunet, optunet_forward
from symlib.nn.training import SGDConfig

__all__ = ["METHODS", "POSTERIORS", "SAMPLE_FIELDS", "posterior_samples", "split_counts"]

METHODS = (("one mode", "Dropout"), ("one mode", "BNN"), ("one mode", "SGHMC"),
           ("one mode", "SWAG"), ("one mode", "Laplace"), ("multi mode", "Dropout"),
           ("multi mode", "BNN"), ("multi mode", "SWAG"), ("multi mode", "Laplace"),
           ("multi mode", "DE"))
"""Table 1's rows, in the paper's order (there is no multi-mode SGHMC row)."""
POSTERIORS = ("Dropout", "BNN", "SGHMC", "SWAG", "Laplace")
"""The methods that draw samples, in the order they run (and draw from the generator); a run in
pieces stops between two of them (:func:`posterior_samples`)."""
CHECKPOINT_FORMAT = 1
"""The layout of the checkpoint :func:`posterior_samples` writes between its methods."""
SAMPLE_FIELDS = ("modes", "samples", "dropout_p", "vi_epochs", "vi_lr", "vi_mc", "vi_prior_sd",
                 "sghmc_lr", "sghmc_friction", "sghmc_burnin_epochs", "sghmc_epochs_between",
                 "swag_snapshots", "swag_epochs_between", "swag_lr", "swag_scale",
                 "laplace_hessian", "laplace_points")
"""The profile fields the samples depend on beyond the networks' (:func:`posterior_samples`)."""


def posterior_samples(config, data: dict, nets: dict, seed: int, *,
                      progress: bool = True, device: torch.device | str = "cpu",
                      checkpoint: str | Path | None = None, budget_s: float | None = None) -> dict:
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

    With ``checkpoint`` (a file path), the run can be stopped between two methods and continued:
    after each method but the last it writes the draws so far and the generator's state there
    (atomically), and a call that finds the file skips the methods it holds, so that a continued
    run gives the numbers of an uninterrupted one bit for bit. With ``budget_s`` as well, it stops
    once that many seconds have passed, after the method then running, raising
    :class:`~symlib.inference.loop.BudgetExhausted` (a method itself cannot stop: in a
    run in pieces each must fit one piece).
    """
    began = time.monotonic()
    gen = torch.Generator().manual_seed(seed)
    x, y = data["x_train"].to(device), data["y_train"].to(device)
    n, s, bs = len(x), config.samples, config.batch_size
    start = first_learned(nets["ensemble_accuracy"], config.modes)
    modes = {k: v[start].to(device) for k, v in nets["ensemble"].items()}
    prior_precision = post.prior_precision_from_weight_decay(config.weight_decay, n)
    state = _resume(checkpoint, gen, device)
    drawn: dict[str, dict] = state["drawn"]
    dropout_acc, keep = state["dropout_accuracy"], state["dropout_used"]
    todo = [m for m in POSTERIORS if m not in drawn]
    stages = tqdm(todo, desc="methods", disable=not progress)
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
            swag = post.train_swag(_loss, modes, x, y, swag_sgd, gen,
                                   n_snapshots=config.swag_snapshots,
                                   snapshot_every=config.swag_epochs_between,
                                   max_rank=config.swag_snapshots)
            drawn[method] = post.swag_sample(swag, s, gen, scale=config.swag_scale)
        else:
            sub = torch.randperm(n, generator=gen)[:config.laplace_points].to(device)
            laplace = post.fit_laplace(optunet_forward, modes, x[sub], y[sub], prior_precision,
                                       config.laplace_hessian, n_data=n)
            drawn[method] = post.laplace_sample(laplace, s, gen)
        if checkpoint is not None and len(drawn) < len(POSTERIORS):
            _save(checkpoint, drawn, dropout_acc, keep, gen)
            if budget_s is not None and time.monotonic() - began >= budget_s:
                raise BudgetExhausted(
                    f"samples: stopped at its time budget after {', '.join(drawn)} "
                    f"({len(drawn)} of {len(POSTERIORS)} methods); run again to continue from its checkpoint")
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


def _resume(checkpoint: str | Path | None, gen: torch.Generator, device) -> dict:
    """What a checkpoint written by :func:`_save` holds (the draws moved onto ``device``; the
    dropout networks' accuracies and indices on the CPU, where they are made), with ``gen`` put in
    its state; nothing done where there is no checkpoint (or none asked for)."""
    if checkpoint is None or not Path(checkpoint).is_file():
        return {"drawn": {}, "dropout_accuracy": None, "dropout_used": None}
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    if saved.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{checkpoint}: a samples checkpoint of format {saved.get('format')!r}, "
                         f"not {CHECKPOINT_FORMAT}; delete it to start the stage again")
    gen.set_state(saved["generator"])
    drawn = {m: {k: v.to(device) for k, v in d.items()} for m, d in saved["drawn"].items()}
    return {"drawn": drawn, "dropout_accuracy": saved["dropout_accuracy"], "dropout_used": saved["dropout_used"]}


def _save(checkpoint: str | Path, drawn: dict, dropout_acc, keep, gen: torch.Generator) -> None:
    """Write the methods done so far and the generator's state to ``checkpoint`` (atomically)."""
    buf = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "generator": gen.get_state(),
                "drawn": {m: {k: v.detach().cpu() for k, v in d.items()} for m, d in drawn.items()},
                "dropout_accuracy": dropout_acc,
                "dropout_used": None if keep is None else keep.detach().cpu()}, buf)
    path = Path(checkpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    cache._atomic_write(path, buf.getvalue())


def _log_lik(params, x, y):
    return -F.cross_entropy(optunet_forward(params, x), y)


def split_counts(total: int, parts: int) -> list[int]:
    """``total`` samples over ``parts`` modes, as evenly as possible."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def _take_multi(samples: dict, counts: list[int]) -> dict:
    """From ``(modes, S, ...)`` samples, the first ``counts[m]`` of mode ``m``, stacked."""
    return {k: torch.cat([v[m, :c] for m, c in enumerate(counts)]) for k, v in samples.items()}

