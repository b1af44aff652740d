"""Chapter 2a's figures: Figures 1, 2 and 4 of Laurent et al., rerun."""

from __future__ import annotations

import math

import numpy as np

from symlib.nn.convnets import OPTUNET_SHAPES

__all__ = ["plot_kendall", "plot_mass", "plot_toy"]


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


