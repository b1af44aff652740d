"""Chapter 5's figures: Figures 1, 2 and 3 of Xiao et al. 2023, rerun (views of stages ``not`` and ``bayes``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["plot_figure1", "plot_figure2", "plot_figure3"]


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
