"""Chapter 2a: symmetry removal, the min-mass problem and permutations during training
(Laurent, Aldea & Franchi, 2024, first half).

Experiments, each a pure function of the chapter profile and a seed:

* :func:`toy_posterior` (Figure 1, App. A): many 2-2-1 ReLU perceptrons trained at once on two
  Gaussian classes; their output weights raw, with hidden units normalised to norm 3, and also
  sorted (from the last layer, as the paper's toy does).
* :func:`train_optunets` (Figures 2 and 4): OptuNets trained at once on MNIST, recording the
  sorting permutation of every network after every step.
* :func:`min_mass_table` (Figure 2): masses and largest weights before / after the min-mass
  scaling, with the function-invariance check and the cvxpy-vs-scipy check.
* :func:`permutation_changes` (Figure 4): Kendall's tau between successive sorting permutations.
* :func:`marginal_ks` (App. D.3): two-sample KS tests between the marginals of one layer's units.
* :func:`mode_count_table`: permutation-equivalent modes of the book's networks.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

from symlib import symmetry as sym
from symlib.book.cache import cached, device_key
from symlib.book.data import data_fingerprint, gaussian_blobs, load_mnist
from symlib.book.preconditions import ACCURACY_SHARE, accuracy_reached
from symlib.book.results import depends_on, outcome, precondition
from symlib.book.runtime import torch_threads
from symlib.chapters.symmetry_removal.profiles import SymmetryRemovalProfile
from symlib.nn.convnets import (
    OPTUNET_SHAPES,
    ResNetSpec,
    init_optunet,
    optunet_cross_entropy_batched,
    optunet_forward,
)
from symlib.nn.mlp import MLPSpec, mlp_forward
from symlib.nn.training import SGDConfig, train_batched
from symlib.symmetry import minmass as mm
from symlib.symmetry import optunet_permutation_spec, resnet_permutation_spec

__all__ = [
    "CACHE_VERSION",
    "REFERENCE_ACCURACY",
    "ROBUSTNESS_CHOICES",
    "claims",
    "depends_on",
    "errata",
    "kendall_tau",
    "ks_min_p",
    "marginal_ks",
    "min_mass_table",
    "mode_count_table",
    "permutation_changes",
    "plot_kendall",
    "plot_mass",
    "plot_toy",
    "robustness",
    "robustness_tables",
    "run",
    "toy_posterior",
    "train_optunets",
]

CACHE_VERSION = "3"  # 3: OptuNets trained with the grouped-convolution loss
CHAPTER = "02a_symmetry_removal"
TOY_SPEC = MLPSpec((2, 2, 1), "relu")
MNIST_MEAN, MNIST_SD = 0.1307, 0.3081  # the usual MNIST normalisation [open]
LEARNED_ACCURACY = 0.2  # test accuracy above which an OptuNet counts as trained (chance: 0.1)
REFERENCE_ACCURACY = 0.953
"""What OptuNet reaches on MNIST: the preconditions of claims about trained OptuNets ask for
:data:`symlib.book.preconditions.ACCURACY_SHARE` of it (median over networks)."""
REFERENCE_SOURCE = "Laurent et al. Table 1, MNIST-OptuNet DE row (no single-network accuracy is printed)"
TOY_KEPT_REFERENCE = 0.99
"""Share of the toy's runs that reach training loss <= 0.01 in the paper ("about 99 %", App. A.1)."""


# --- Figure 1: the toy posterior ----------------------------------------------------------


def _toy_loss(params, x, y):
    return F.binary_cross_entropy_with_logits(mlp_forward(params, x, TOY_SPEC)[..., 0], y)


def toy_posterior(config: SymmetryRemovalProfile, seed: int, device: torch.device | str = "cpu") -> dict:
    """Train ``config.toy_models`` perceptrons in one vmapped computation on ``device``; remove
    symmetries.

    Initialisation as :func:`symlib.nn.mlp.init_mlp` (``W ~ N(0, 1/fan_in)``, biases
    ``N(0, 0.1^2)``), drawn for all networks at once. Removal for the figure, as in App. A.2:
    each hidden unit's incoming weights rescaled to norm ``toy_norm`` (outgoing weight
    compensating), then the two hidden units sorted by DESCENDING output weight.
    """
    gen = torch.Generator().manual_seed(seed)
    x, y = gaussian_blobs(config.toy_points_per_class, config.toy_means, gen)
    y = y.to(torch.float32)
    m = config.toy_models
    params = {}
    for k, s in TOY_SPEC.shapes().items():
        z = torch.randn((m, *s), generator=gen)
        params[k] = z / math.sqrt(s[1]) if k.startswith("W") else 0.1 * z
    cfg = SGDConfig(lr=config.toy_lr, epochs=config.toy_epochs, batch_size=config.toy_batch)
    # the draws stay on the CPU generator (the same run on every device); the arithmetic moves
    on = {k: v.to(device) for k, v in params.items()}
    trained = train_batched(_toy_loss, on, x.to(device), y.to(device), cfg, gen)
    with torch.no_grad():
        loss = torch.vmap(_toy_loss, in_dims=(0, None, None))(trained, x.to(device), y.to(device)).cpu()
    trained = {k: v.cpu() for k, v in trained.items()}
    kept = torch.isfinite(loss) & (loss <= config.toy_loss_threshold)
    nets = {k: v[kept].to(torch.float64) for k, v in trained.items()}
    ps = sym.mlp_permutation_spec(TOY_SPEC)
    norm = nets["W1"].norm(dim=-1)
    norm = torch.where(norm > 0, norm, torch.ones_like(norm))
    ident = torch.arange(2).expand(len(norm), 2)
    normalised = sym.apply_group_element(
        nets, ps, sym.GroupElement({"P1": ident}, None, {"P1": config.toy_norm / norm}))
    order = torch.argsort(normalised["W2"][:, 0, :], dim=-1, descending=True, stable=True)
    ordered = sym.apply_group_element(normalised, ps, sym.GroupElement({"P1": order}))
    probe = torch.randn(256, 2, generator=gen, dtype=torch.float64) * 4
    fwd = torch.vmap(lambda p: mlp_forward(p, probe, TOY_SPEC))
    ref = fwd(nets)
    # relative to the outputs' scale: some runs reach weights of 1e4 and logits of 1e5
    scale = ref.abs().max().item() if len(ref) else 1.0
    change = max((fwd(t) - ref).abs().max().item() / scale for t in (normalised, ordered)) if len(ref) else 0.0
    return {
        "x": x, "y": y,
        "separable": _linearly_separable(x, y),
        "n_trained": m, "n_kept": int(kept.sum()),
        "raw": nets["W2"][:, 0, :],
        "normalised": normalised["W2"][:, 0, :],
        "sorted": ordered["W2"][:, 0, :],
        "hidden_raw": torch.cat([nets["W1"], nets["b1"][..., None]], -1),
        "hidden_canonical": _toy_canonical_hidden(nets, ps),
        "max_output_change": change,  # relative: max |f(g.w) - f(w)| / max |f(w)|
    }


def _toy_canonical_hidden(nets, ps):
    canon = sym.canonicalise(nets, TOY_SPEC)
    return torch.cat([canon["W1"], canon["b1"][..., None]], -1)


def _linearly_separable(x, y) -> bool:
    from sklearn.svm import LinearSVC

    clf = LinearSVC(C=1e6, max_iter=100_000).fit(x.numpy(), y.numpy())
    return bool((clf.predict(x.numpy()) == y.numpy()).all())


def plot_toy(toy: dict):
    """Figure 1 of Laurent et al.: density of the two output weights, three panels."""
    from symlib.book.plotting import figure, label_panels

    fig, axes = figure(1, 3, width=9.0, height_per_row=3.0)
    axes = axes[0]
    titles = {"raw": "raw", "normalised": "hidden units normalised", "sorted": "normalised + sorted"}
    # heavy tails (a few runs reach |w| of 1e4, and normalising a nearly dead unit multiplies
    # its output weight by its tiny norm's inverse): plot asinh(w), linear near 0, log beyond
    for ax, (key, title) in zip(axes, titles.items()):
        w = np.arcsinh(toy[key].numpy())
        lim = max(np.abs(w).max(), 1.0) if len(w) else 1.0
        ax.hist2d(w[:, 0], w[:, 1], bins=90, range=[[-lim, lim], [-lim, lim]], cmap="viridis",
                  norm="log")
        ax.set_title(title)
        ax.set_xlabel("asinh(output weight of unit 1)")
        ax.set_ylabel("asinh(output weight of unit 2)")
        ax.set_aspect("equal")
    label_panels(axes)
    return fig


# --- OptuNets on MNIST --------------------------------------------------------------------


def _optunet_loss(params, x, y):
    return F.cross_entropy(optunet_forward(params, x), y)


def train_optunets(config: SymmetryRemovalProfile, seed: int, device: torch.device | str = "cpu") -> dict:
    """Train ``config.optunet_models`` OptuNets at once on ``device``; record sorting perms at
    every step.

    Initialisation, shuffles and crops are drawn from a CPU generator, so a GPU run trains the
    same networks as a CPU run up to rounding (and the GPU/CPU agreement test can compare them).

    Returns the trained parameters (float32, leading model axis), their test accuracies, and
    ``perms``: ``(steps + 1, tracked, 15)`` canonical orders (P1 | P2 | P3 concatenated) of the
    first ``config.optunet_tracked`` networks, from
    :func:`symlib.symmetry.canonicalising_element` (normalise, then sort by first weight).
    """
    gen = torch.Generator().manual_seed(seed + 1)
    data = load_mnist(config.mnist_source, flatten=False)
    x = ((data["x_train"] - MNIST_MEAN) / MNIST_SD).to(device)
    xt = ((data["x_test"] - MNIST_MEAN) / MNIST_SD).to(device)
    ps = optunet_permutation_spec()
    params = {k: v.to(device) for k, v in init_optunet(gen, config.optunet_models).items()}
    cfg = SGDConfig(lr=config.optunet_lr, epochs=config.optunet_epochs,
                    batch_size=config.optunet_batch, weight_decay=config.optunet_weight_decay,
                    momentum=config.optunet_momentum, milestones=config.optunet_milestones,
                    crop_padding=config.optunet_crop_padding)

    tracked = min(config.optunet_tracked, config.optunet_models)

    def perm_of(p):
        g = sym.canonicalising_element({k: v[:tracked] for k, v in p.items()}, ps)
        return torch.cat([g.perms[n] for n in ps.perm_sizes], -1).to(torch.int16).cpu()

    history = [perm_of(params)]
    trained = train_batched(_optunet_loss, params, x, data["y_train"].to(device), cfg, gen,
                            on_step=lambda step, p: history.append(perm_of(p)),
                            batched_loss_fn=optunet_cross_entropy_batched)
    with torch.no_grad():
        logits = torch.vmap(optunet_forward, in_dims=(0, None))(trained, xt).cpu()
    acc = (logits.argmax(-1) == data["y_test"]).float().mean(-1)
    return {
        "params": {k: v.cpu() for k, v in trained.items()},
        "accuracy": acc,
        "perms": torch.stack(history),
        "steps_per_epoch": len(x) // config.optunet_batch,
        "n_train": len(x),
    }


def min_mass_table(params: dict, seed: int) -> dict:
    """Figure 2: per network, mass and largest |weight| per layer before / after min-mass.

    Also returns the largest output change of the min-mass networks on random inputs and the
    largest gap between cvxpy's and scipy's optimal log-scales.
    """
    ps = optunet_permutation_spec()
    nets = {k: v.to(torch.float64) for k, v in params.items()}
    n = next(iter(nets.values())).shape[0]
    gen = torch.Generator().manual_seed(seed + 2)
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


def plot_mass(mass: dict):
    """Figure 2 of Laurent et al.: masses before / after, and the largest weight per layer."""
    import pandas as pd

    from symlib.book.plotting import figure, label_panels

    df = pd.DataFrame(mass["rows"])
    fig, axes = figure(1, 2, width=9.0, height_per_row=3.2)
    axes = axes[0]
    bins = np.linspace(min(df["min-mass"].min(), df["mass"].min()) * 0.95, df["mass"].max() * 1.05, 30)
    axes[0].hist(df["mass"], bins=bins, alpha=0.6, label="trained")
    axes[0].hist(df["min-mass"], bins=bins, alpha=0.6, label="min-mass equivalent")
    axes[0].set_xlabel("mass (sum of squared weights)")
    axes[0].set_ylabel("networks")
    axes[0].legend()
    keys = [k[4:-1] for k in df.columns if k.startswith("max|") and not k.endswith("min-mass")]
    pos = np.arange(len(keys))
    # the same two colours as panel (a), named in a legend rather than in the caption
    for shift, suffix, colour, name in ((-0.18, "|", "C0", "trained"), (0.18, "| min-mass", "C1", "min-mass")):
        axes[1].boxplot([df[f"max|{k}{suffix}"] for k in keys], positions=pos + shift, widths=0.3, patch_artist=True,
                        boxprops={"facecolor": colour, "alpha": 0.6}, medianprops={"color": "k"}, label=name)
    axes[1].set_xticks(pos, [f"{k}\n({math.prod(OPTUNET_SHAPES[k])})" for k in keys])
    axes[1].set_ylabel("largest |weight| per layer")
    axes[1].legend()
    label_panels(axes)
    return fig


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


def plot_kendall(changes: dict, milestones=()):
    """Figure 4 (left) of Laurent et al.: mean Kendall's tau between successive permutations."""
    from symlib.book.plotting import figure

    fig, axes = figure(1, 1, width=7.0, height_per_row=3.0)
    ax = axes[0, 0]
    epochs = np.arange(1, len(changes["mean_tau"]) + 1) / changes["steps_per_epoch"]
    ax.plot(epochs, changes["mean_tau"].numpy(), lw=0.8)
    for m in milestones:
        ax.axvline(m, color="grey", ls=":", lw=1)
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean Kendall's τ (successive steps)")
    return fig


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


def _optunet_conv2_units(params):
    w = params["W2"]
    return w.reshape(w.shape[0], 10, -1)


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


# --- ledger: preconditions, claims, errata ------------------------------------------------


def _sized_to_judge(config: SymmetryRemovalProfile):
    """The run is sized to judge claims: the ``smoke`` profile only tests the plumbing.

    A chapter-level precondition: smoke's few networks could pass a criterion by chance.
    """
    return precondition("profile", "profile sized to judge claims (not smoke)",
                        "yes" if config.judge else "no (judge=False)", config.judge)


def _toy_trained(toy: dict):
    """The toy's perceptrons trained as the paper's did: the share of runs reaching training loss
    <= 0.01 is at least 90 % of the paper's (about 99 %, App. A.1).

    A chapter-level precondition with the shared threshold
    (:data:`symlib.book.preconditions.ACCURACY_SHARE`): the toy's measure of training is the
    paper's kept share, not a test accuracy.
    """
    share = toy["n_kept"] / max(toy["n_trained"], 1)
    need = ACCURACY_SHARE * TOY_KEPT_REFERENCE
    return precondition("toy_trained", f"share of toy runs with training loss <= 0.01 >= {ACCURACY_SHARE:.0%} of "
                        f"{TOY_KEPT_REFERENCE:.0%} (Laurent et al. App. A.1)", share, share >= need)


def _separable(toy: dict):
    """The toy's two classes are linearly separable, as the paper ensured (App. A.1).

    A chapter-level precondition: with overlapping classes no run reaches loss <= 0.01 cleanly,
    and the kept runs would be a selection the paper did not make.
    """
    return precondition("separable", "toy classes linearly separable (as the paper ensured)",
                        "yes" if toy["separable"] else "no", toy["separable"])


def ks_min_p(n: int, m: int) -> float:
    """The smallest p-value a two-sided two-sample KS test can return with samples of n and m."""
    if min(n, m) < 1:
        return 1.0
    return float(stats.ks_2samp(np.arange(n), np.arange(m) + n).pvalue)  # fully separated samples


def _ks_can_reach(n: int, what: str, alpha: float):
    """Whether KS tests between units, on ``n`` networks per unit, can reject at ``alpha`` at all.

    A chapter-level precondition (the shared :func:`symlib.book.preconditions.test_can_reach`
    knows rank tests, not KS): a claim that the tests do *not* reject means nothing when they
    cannot.
    """
    p = ks_min_p(n, n)
    return precondition("power", f"KS test on {what} can reach p < {alpha:g} (smallest p with n = m = {n})",
                        p, p < alpha)


def claims(results: dict, config: SymmetryRemovalProfile) -> list[dict]:
    """The chapter's ledger, judged on this run's numbers.

    Criteria and preconditions are fixed here, before any run. Claims about trained OptuNets
    need their median test accuracy to reach the shared share of :data:`REFERENCE_ACCURACY`
    (:func:`symlib.book.preconditions.accuracy_reached`); claims about the toy need its runs
    trained as the paper's and its classes separable; claims that KS tests do not reject need
    tests able to reject.

    Returns:
        Dicts with the fields of :class:`symlib.book.results.Claim`.
    """
    toy, mass, ch, ks = results["toy"], results["mass"], results["changes"], results["ks"]
    gate = [_sized_to_judge(config)]
    raw = toy["raw"]
    share_raw = float((raw[:, 0] > raw[:, 1]).double().mean()) if len(raw) else float("nan")
    share_sorted = float((toy["sorted"][:, 0] >= toy["sorted"][:, 1]).double().mean()) if len(raw) else float("nan")
    ks_raw = stats.ks_2samp(raw[:, 0].numpy(), raw[:, 1].numpy()).pvalue if len(raw) > 1 else float("nan")
    dup_holds = abs(share_raw - 0.5) < 0.03 and ks_raw > 0.01 and share_sorted == 1.0
    ratio = np.array([r["min-mass"] / r["mass"] for r in mass["rows"]])
    per_epoch = ch["per_epoch"].numpy()
    q = max(len(per_epoch) // 4, 1)
    early, late = float(per_epoch[:q].mean()), float(per_epoch[-q:].mean())
    ks_before, ks_after = ks["toy hidden layer, raw"], ks["toy hidden layer, canonical"]
    conv_before, conv_after = ks["OptuNet conv2, raw"], ks["OptuNet conv2, canonical"]
    a = config.ks_alpha
    acc = results["optunets"]["accuracy"]
    trained = gate + [accuracy_reached(float(acc.median()), REFERENCE_ACCURACY, what="median OptuNet test accuracy",
                                       reference_source=REFERENCE_SOURCE)]
    toy_ok = gate + [_toy_trained(toy), _separable(toy)]
    return [
        {
            "id": "toy-duplicated-modes",
            "text": "The raw posterior of the toy's output weights is symmetric (each mode duplicated by the permutation); after normalising and sorting the duplication is gone",
            "paper": "Laurent et al. Fig. 1, Sec. 3.1",
            "ours": (f"raw: share with w1 > w2 = {share_raw:.3f}, KS p(w1 vs w2) = {ks_raw:.2f}; "
                     f"sorted: share with w1 >= w2 = {share_sorted:.3f} ({toy['n_kept']} runs)"),
            "holds": bool(dup_holds),
            "criterion": "raw: |share(w1 > w2) - 0.5| < 0.03 and KS p(w1 vs w2) > 0.01; sorted: w1 >= w2 in every run",
            "preconditions": toy_ok,
        },
        {
            "id": "not-min-mass",
            "text": "Networks trained with weight decay are not at their min-mass point: an equivalent network of smaller mass exists",
            "paper": "Laurent et al. Fig. 2, Prop. 2",
            "ours": (f"min-mass / trained mass: median {np.median(ratio):.3f} (range {ratio.min():.3f}-{ratio.max():.3f}) "
                     f"over {len(ratio)} OptuNets"),
            # the paper: networks "always seem subject to scaling symmetries", so every network
            "holds": bool(len(ratio) > 0 and ratio.max() < 0.99),
            "criterion": "min-mass / trained mass < 0.99 for every network",
            "preconditions": trained,
        },
        {
            "id": "permutations-rare-late",
            "text": "The sorting permutation changes often early in training and becomes rare in the last phase",
            "paper": "Laurent et al. Fig. 4, Sec. 5.2",
            "ours": (f"share of (network, step) pairs whose permutation changed: first quarter of training {early:.3f}, "
                     f"last quarter {late:.3f} ({ch['n_networks']} networks above chance, "
                     f"{config.optunet_epochs} epochs)"),
            "holds": bool(late < early / 5),
            "criterion": "share of changed permutations in the last quarter of the epochs < 1/5 of the first quarter's",
            "preconditions": trained,
        },
        {
            "id": "identical-marginals",
            "text": "All marginals of a layer are identical before symmetry removal (KS tests do not reject) and differ after: the toy's hidden layer",
            "paper": "Laurent et al. Prop. 1 corollary, App. D.3 (shown there on an energy-efficiency MLP)",
            "ours": (f"KS rejections at {a}: toy hidden layer {ks_before['rejected']:.2f} raw vs "
                     f"{ks_after['rejected']:.2f} canonical ({ks_before['tests']} tests, {toy['n_kept']} runs)"),
            "holds": bool(ks_before["rejected"] <= 2 * a and ks_after["rejected"] > 0.5),
            "criterion": f"share of KS tests rejecting at {a:g}: <= {2 * a:g} raw, > 0.5 canonical",
            "preconditions": toy_ok + [_ks_can_reach(toy["n_kept"], "the toy's units", a)],
        },
        {
            "id": "identical-marginals-optunet",
            "text": "All marginals of a layer are identical before symmetry removal (KS tests do not reject): OptuNet's second convolution",
            "paper": "Laurent et al. Prop. 1 corollary, App. D.3 (shown there on an energy-efficiency MLP)",
            "ours": (f"KS rejections at {a}: OptuNet conv2 {conv_before['rejected']:.2f} raw vs "
                     f"{conv_after['rejected']:.2f} canonical ({conv_before['tests']} tests, {len(acc)} networks)"),
            "holds": bool(conv_before["rejected"] <= 2 * a),
            "criterion": f"share of KS tests rejecting at {a:g} on the raw weights <= {2 * a:g}",
            "preconditions": trained + [_ks_can_reach(len(acc), "OptuNet's channels", a)],
        },
    ]


def errata() -> list[dict]:
    """The paper's slips the chapter corrects.

    Returns:
        Dicts with the fields of :meth:`symlib.book.results.ChapterResults.add_erratum`.
    """
    ours = sym.spec_log10_order(optunet_permutation_spec())
    return [
        {
            "id": "sort-key",
            "where": "Laurent et al. Sec. 5.2 vs App. C.2",
            "paper_says": "Sec. 5.2: the instabilities of Fig. 4 'are due to the sorting mechanism based on the "
                          "maximum values of the weights of the neurons'; App. C.2: units are ordered 'according "
                          "to the value of their first corresponding parameter'",
            "correction": "units are sorted by their first incoming weight (App. C.2; for a convolution the first "
                          "kernel entry) everywhere in this chapter, Figure 4 included",
        },
        {
            "id": "grouped-conv-count",
            "where": "Laurent et al. App. D.4.2",
            "paper_says": "a grouped convolution restricts the previous layer's permutations to within groups, but "
                          "'the number of output permutations does not change' (10! for OptuNet's second "
                          "convolution)",
            "correction": "an output channel of a grouped convolution reads only its own group's inputs, so only "
                          "permutations within each group of 5 output channels, and the swap of the two groups "
                          "together with the first convolution's channels, leave the function unchanged: "
                          f"2 x 5! x 5! x 3! = {10 ** ours:,.0f} permutation modes for OptuNet, not 10! x 3!",
        },
    ]


# --- robustness: the open choices ------------------------------------------------------------

ROBUSTNESS_CHOICES = {
    "toy_means": ("toy class means", "toy"),
    "toy_epochs": ("toy epochs (the paper: early stopping)", "toy"),
    "optunet_momentum": ("OptuNet momentum", "optunets"),
}
"""Profile fields the sensitivity sweep may change: (name in words, stage it reruns)."""

_STAGE_CLAIMS = {
    "toy": ("toy-duplicated-modes", "identical-marginals"),
    "optunets": ("not-min-mass", "permutations-rare-late", "identical-marginals-optunet"),
}


def robustness(config: SymmetryRemovalProfile, *, seed: int, device: torch.device | str = "cpu") -> list[dict]:
    """The chapter rerun under each setting of ``config.robustness`` (cached per setting).

    A toy setting reruns the toy and its KS tests only; an OptuNet setting reruns the whole
    chapter's computation (the toy is a few percent of it).

    Returns:
        One dict per setting: ``field``, ``value``, ``choice`` (in words), ``stage`` and
        ``results`` (the chapter's results under the setting, enough for :func:`claims`) and
        ``config`` (the setting's profile).
    """
    out = []
    for field, value in config.robustness:
        if field not in ROBUSTNESS_CHOICES:
            raise ValueError(f"robustness field {field!r} is not one of {', '.join(ROBUSTNESS_CHOICES)}")
        choice, stage = ROBUSTNESS_CHOICES[field]
        setting = dataclasses.replace(config, robustness=(), **{field: value})
        key = {"profile": dataclasses.asdict(setting), "seed": seed, "stage": stage, **device_key(device),
               **(data_fingerprint(config.mnist_source) if stage == "optunets" else {})}
        part = cached(CHAPTER, CACHE_VERSION, key,
                      lambda setting=setting, stage=stage: _sweep_stage(setting, seed, stage, device))
        out.append({"field": field, "value": value, "choice": choice, "stage": stage, "results": part,
                    "config": setting})
    return out


def _sweep_stage(config: SymmetryRemovalProfile, seed: int, stage: str,
                 device: torch.device | str = "cpu") -> dict:
    if stage == "optunets":
        return _compute(config, seed, device)
    with torch_threads(config.threads):
        toy = toy_posterior(config, seed, device)
    return {"toy": toy, "ks": {
        "toy hidden layer, raw": marginal_ks(toy["hidden_raw"], config.ks_alpha),
        "toy hidden layer, canonical": marginal_ks(toy["hidden_canonical"], config.ks_alpha),
    }}


def robustness_tables(results: dict, sweep: list[dict], config: SymmetryRemovalProfile) -> dict:
    """Per claim: its verdict as run and under every setting of the sweep that reruns its stage.

    Returns:
        ``{claim id: DataFrame}`` with columns ``choice``, ``setting``, ``verdict`` (holds /
        does not hold / not judged), ``failed preconditions`` and ``ours``; the first row is the
        run itself. Claims no setting touches are left out.
    """
    import pandas as pd

    from symlib.book.results import Claim

    def rows_of(res, cfg, choice, setting, ids):
        out = {}
        for c in claims(res, cfg):
            if c["id"] in ids:
                claim = Claim(**c)
                out[c["id"]] = {"choice": choice, "setting": setting, "verdict": outcome(claim.holds),
                                "failed preconditions": "; ".join(f"{p.criterion} ({p.measured})"
                                                                  for p in claim.failed_preconditions),
                                "ours": c["ours"]}
        return out

    touched = {cid for s in sweep for cid in _STAGE_CLAIMS[s["stage"]]}
    table = {cid: [row] for cid, row in rows_of(results, config, "as run", "this profile", touched).items()}
    for s in sweep:
        merged = {**results, **s["results"], "ks": {**results["ks"], **s["results"]["ks"]}}
        for cid, row in rows_of(merged, s["config"], s["choice"], f"{s['field']} = {s['value']}",
                                _STAGE_CLAIMS[s["stage"]]).items():
            table[cid].append(row)
    columns = ["choice", "setting", "verdict", "failed preconditions", "ours"]
    return {cid: pd.DataFrame(r, columns=columns) for cid, r in table.items()}




def _compute(config: SymmetryRemovalProfile, seed: int, device: torch.device | str = "cpu") -> dict:
    with torch_threads(config.threads):
        return _compute_all(config, seed, device)


def _compute_all(config: SymmetryRemovalProfile, seed: int, device: torch.device | str = "cpu") -> dict:
    toy = toy_posterior(config, seed, device)
    nets = train_optunets(config, seed, device)
    mass = min_mass_table(nets["params"], seed)
    # networks stuck at chance level have (nearly) no gradient and so a frozen order: they
    # would make permutations look rarer than they are, so Figure 4 uses the others
    tracked = nets["perms"].shape[1]
    changes = permutation_changes(nets["perms"], nets["steps_per_epoch"],
                                  nets["accuracy"][:tracked] > LEARNED_ACCURACY)
    ps = optunet_permutation_spec()
    raw64 = {k: v.double() for k, v in nets["params"].items()}
    canon = sym.canonicalise(raw64, ps)
    probe = torch.randn(16, 1, 28, 28, generator=torch.Generator().manual_seed(seed + 3), dtype=torch.float64)
    fwd = torch.vmap(optunet_forward, in_dims=(0, None))
    ref = fwd(raw64, probe)
    nets["canonical_output_change"] = ((fwd(canon, probe) - ref).abs().max() / ref.abs().max()).item()
    ks = {
        "toy hidden layer, raw": marginal_ks(toy["hidden_raw"], config.ks_alpha),
        "toy hidden layer, canonical": marginal_ks(toy["hidden_canonical"], config.ks_alpha),
        "OptuNet conv2, raw": marginal_ks(_optunet_conv2_units(nets["params"]), config.ks_alpha),
        "OptuNet conv2, canonical": marginal_ks(_optunet_conv2_units(canon), config.ks_alpha),
    }
    nets = {k: v for k, v in nets.items() if k != "perms"}
    return {"toy": toy, "optunets": nets, "mass": mass, "changes": changes, "ks": ks}


def run(config: SymmetryRemovalProfile, *, seed: int, device: torch.device | str = "cpu") -> dict:
    """All of chapter 2a's numbers, cached on disk by (profile, seed, device); the training runs
    on ``device``, the min-mass solver (cvxpy) on the CPU. The sensitivity sweep is its own
    stage (:func:`robustness`)."""
    main = dataclasses.replace(config, robustness=())
    key = {"profile": dataclasses.asdict(main), "seed": seed, **device_key(device),
           **data_fingerprint(config.mnist_source)}
    results = cached(CHAPTER, CACHE_VERSION, key, lambda: _compute(main, seed, device))
    results["modes"] = mode_count_table()
    results["claims"] = claims(results, config)
    results["errata"] = errata()
    return results
