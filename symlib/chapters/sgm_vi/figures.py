"""Chapter 3's figures: Figures 3 and 4 of Gelberg et al. rerun, Theorem 3.1, MNIST gains, cost."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from symlib.chapters.sgm_vi.stages_geometry import proximity_table, threshold_table
from symlib.chapters.sgm_vi.stages_mnist import mnist_gains
from symlib.chapters.sgm_vi.stages_toy import sgm_key, toy_pspec
from symlib.inference import sgm

__all__ = ["plot_cost", "plot_figure3", "plot_figure4", "plot_mnist_gain", "plot_proximity"]


def plot_figure3(interp: dict):
    """Figure 3 of Gelberg et al.: |mu*|/a against a/s for every s; (c) a* against s."""
    import matplotlib.ticker

    from symlib.book.plotting import figure, label_panels

    dims = interp["dims"]
    fig, axes = figure(1, len(dims) + 1, width=9.0, height_per_row=3.0)
    axes = axes[0]
    grid = interp["a_over_sd"]
    for ax, dim in zip(axes, dims):
        for i, s in enumerate(interp["sds"]):
            ax.plot(grid, interp[dim]["ratio"][i], marker="o", ms=3, label=f"s = {s:g}")
        ax.axhline(0.5, color="0.5", ls=":", lw=1)
        ax.set(xlabel="a / s", ylabel="|μ*| / a", title=f"D = {dim}", ylim=(-0.05, 1.1))
    axes[0].legend(loc="upper right")
    ax = axes[-1]
    t = threshold_table(interp)
    for j, dim in enumerate(dims):
        sub = t[t["D"] == dim]
        ax.plot(sub["component sd s"], sub["a* (ours)"], marker="os"[j % 2], label=f"ours, D = {dim}")
    s = np.asarray(interp["sds"])
    ax.plot(s, 5 * s, color="0.4", ls="--", label="paper: a* ≈ 5 s")
    ax.set(xscale="log", yscale="log", xlabel="component sd s", ylabel="threshold a*", title="a* vs s")
    ax.set_xticks(s, [f"{v:g}" for v in s])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.legend()
    label_panels(axes)
    return fig


def plot_proximity(prox: dict):
    """Relative distance to the nearest permuted copy against width, with both bounds."""
    from symlib.book.plotting import figure

    df = proximity_table(prox)
    fig, axes = figure(1, 1, width=6.4, height_per_row=3.4)
    ax = axes[0, 0]
    for j, ((d_in, d_out), grp) in enumerate(df.groupby(["d_i", "d_o"])):
        grp = grp.sort_values("width")
        color = f"C{j}"
        ax.plot(grp["width"], grp["mean"], marker="o", color=color, label=f"measured, d_i={d_in}, d_o={d_out}")
        ax.fill_between(grp["width"], grp["min"], grp["max"], color=color, alpha=0.2)
        ax.plot(grp["width"], grp["theorem 3.1 bound"], ls="--", color=color,
                label=f"Theorem 3.1 bound, d_i={d_in}, d_o={d_out}")
    grp = df.drop_duplicates("width").sort_values("width")
    ax.plot(grp["width"], grp["sqrt(8/d_h)"], ls=":", color="0.3", label="√(8/d_h) (any d_i, d_o)")
    ax.axhline(2.0, color="0.7", lw=1)
    lo = max(float(df["min"].min()) / 3.0, 1e-8)
    ax.set(xscale="log", yscale="log", xlabel="hidden width $d_h$",
           ylabel=r"$\min_{g \neq e} \|w - g w\| \,/\, \|w\|$", ylim=(lo, 1e4))
    ax.legend(fontsize=7, loc="upper right", frameon=True, framealpha=0.9, edgecolor="none")
    return fig


def plot_figure4(toy: dict, *, a_indices=(0, -1), n_seeds: int = 10):
    """Figure 4 of Gelberg et al.: exact posterior, MFVI's q and SGM's q^G over (w1, w2)."""
    from symlib.book.plotting import figure, label_panels

    key = sgm_key(toy)
    fig, axes = figure(len(a_indices), 3, width=9.0, height_per_row=3.1)
    pspec = toy_pspec()
    for row, ai in enumerate(a_indices):
        ai = ai % len(toy["a"])
        g = toy["grid"]["per_a"][ai]
        axis = g["axis"]
        w1, w2 = np.meshgrid(axis, axis, indexing="xy")
        post = np.exp(g["log_post"] - g["log_post"].max())
        pts = torch.tensor(np.stack([w1, w2], -1).reshape(1, -1, 2, 1), dtype=torch.float64)
        for col, (title, method, sym) in enumerate((("exact posterior", None, False),
                                                     ("MFVI: q", "MFVI", False),
                                                     (f"{key}: q^G", key, True))):
            ax = axes[row, col]
            ax.contourf(w1, w2, post, levels=[0.05, 0.3, 0.7, 1.01], colors=["0.85", "0.65", "0.4"])
            if method is not None:
                res = toy[method]
                for r in range(min(n_seeds, res["mean"].shape[1])):
                    q = sgm.MeanField({"W1": torch.tensor(res["mean"][ai, r], dtype=torch.float64).reshape(1, 2, 1)},
                                      {"W1": torch.log(torch.tensor(res["sd"][ai, r], dtype=torch.float64)).reshape(1, 2, 1)})
                    logd = (sgm.mixture_log_prob(q, pspec, {"W1": pts}) if sym
                            else sgm.log_prob(q, pspec, {"W1": pts}))[0].reshape(w1.shape).numpy()
                    dens = np.exp(logd - logd.max())
                    ax.contour(w1, w2, dens, levels=[0.1], colors=[f"C{r % 7}"], linewidths=1.0)
                ax.scatter(res["mean"][ai, :, 0], res["mean"][ai, :, 1], s=8, color="k", zorder=3)
            a = toy["a"][ai]
            ax.plot([a, -a], [-a, a], "+", color="C1", ms=12, mew=0.8, zorder=4)
            ax.set(xlabel="w1", ylabel="w2", title=f"a = {a:g}: {title}", aspect="equal")
    label_panels(axes)
    return fig


def plot_mnist_gain(mnist: dict):
    """SGM - MFVI accuracy against width, ours (paired mean ± se) beside the paper's."""
    from symlib.book.plotting import figure

    g = mnist_gains(mnist)
    fig, axes = figure(1, 1, width=6.4, height_per_row=3.2)
    ax = axes[0, 0]
    offsets = np.linspace(-0.6, 0.6, g["method"].nunique())
    for j, (method, grp) in enumerate(g.groupby("method", sort=False)):
        ax.errorbar(grp["width"] + offsets[j], grp["gain (ours)"], yerr=2 * grp["se"], marker="o",
                    color=f"C{j}", capsize=3, label=f"{method} (ours, ±2 se)")
        ax.plot(grp["width"] + offsets[j], grp["gain (paper)"], marker="*", ms=9, ls=":",
                color=f"C{j}", label=f"{method} (paper)")
    ax.axhline(0, color="0.5", lw=1)
    ax.set(xlabel="hidden width", ylabel="accuracy gain over MFVI (points)")
    ax.legend(fontsize=7, ncol=2)
    return fig


def plot_cost(cost: dict):
    """Milliseconds per optimisation step against K, both ways of computing the ratios."""
    from symlib.book.plotting import figure

    df = pd.DataFrame(cost["rows"])
    fig, axes = figure(1, 1, width=6.0, height_per_row=3.0)
    ax = axes[0, 0]
    labels = {"unit_pairs": "unit-pair matrices (used for training)",
              "direct": "direct: every permuted component materialised"}
    for path, grp in df.groupby("path", sort=False):
        ax.plot(grp["K"], grp["ms per step"], marker="o", label=labels[path])
    ax.set(xlabel="K (1 = MFVI)", ylabel="ms per step", ylim=(0, None))
    ax.legend()
    return fig
