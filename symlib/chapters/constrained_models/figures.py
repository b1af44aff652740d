"""Chapter 4's figures, from the stages' results: the implied prior, Figure 1 and its predictive."""

from __future__ import annotations

import numpy as np

from symlib.chapters.constrained_models.fits import METHODS
from symlib.nn import constrained as idf

__all__ = ["plot_figure1", "plot_predictive", "plot_prior_demo"]


def plot_prior_demo(prior: dict):
    """Histograms of the first and last coordinate of the implied prior, with the uniform law."""
    from symlib.book.plotting import figure, label_panels

    dim = prior["dim"]
    fig, axes = figure(1, 2, width=7.0, height_per_row=2.8)
    axes = axes[0]
    grid = np.linspace(-1, 1, 401)
    dens = (1 - grid**2) ** ((dim - 3) / 2)
    dens /= np.trapezoid(dens, grid)
    for ax, j, lab in zip(axes, (0, 1), ("$w_1$", f"$w_{{{dim}}}$")):
        for key, colour, name in (("no_jacobian", "C3", "angles uniform"),
                                  ("authors", "C1", "Laplace(0, 1) on the angles (authors' Boston file)"),
                                  ("jacobian", "C0", "with the change of measure")):
            ax.hist(prior[key]["w"][:, j], bins=60, range=(-1, 1), density=True, histtype="step",
                    color=colour, label=name)
        ax.plot(grid, dens, "k--", lw=1, label="uniform on the sphere")
        ax.set_xlabel(lab)
        ax.set_ylabel("density")
    axes[1].legend(fontsize=7, loc="upper center")
    label_panels(axes)
    return fig


def plot_figure1(synth: dict, generator: str = "paper"):
    """Draws of ``W1[1,1]`` against ``W2[1]``: rows NUTS / ADVI MF / ADVI FR, columns models."""
    from symlib.book.plotting import figure

    ds = synth["datasets"][generator]
    methods = [m for m in METHODS if (idf.MODELS[0], m) in ds["fits"]]
    fig, axes = figure(len(methods), 3, width=8.0, height_per_row=2.5)
    truth = ds["truth"]
    for i, meth in enumerate(methods):
        for j, model in enumerate(idf.MODELS):
            ax = axes[i, j]
            p = ds["fits"][model, meth]["params"]
            ax.scatter(p["W1"][:, 0, 0], p["W2"][:, 0], s=3, alpha=0.35, color=f"C{j}", lw=0)
            for u in range(2):       # the true network and its permuted copy
                ax.plot(truth["W1"][u, 0], truth["W2"][u], "k+", ms=8)
            if i == 0:
                ax.set_title(model, fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{meth}\n$W_2[1]$", fontsize=8)
            if i == len(methods) - 1:
                ax.set_xlabel("$W_1[1,1]$")
    return fig


def plot_predictive(synth: dict, generator: str = "paper"):
    """Posterior predictive (mean and 95% interval) on the slice ``x2 = 0``, per method."""
    from symlib.book.plotting import figure

    ds = synth["datasets"][generator]
    methods = [m for m in METHODS if (idf.MODELS[0], m) in ds["fits"]]
    fig, axes = figure(1, len(methods), width=8.0, height_per_row=2.6)
    g = ds["grid"][:, 0]
    for ax, meth in zip(axes[0], methods):
        for j, model in enumerate(("unconstrained", "constrained")):
            pr = ds["fits"][model, meth]["predictive"]
            c = "C0" if j == 0 else "C2"
            ax.fill_between(g, pr["lo"], pr["hi"], color=c, alpha=0.2)
            ax.plot(g, pr["mean"], color=c, label=model)
        ax.plot(g, ds["f_true"], "k--", lw=1, label="true f")
        near = np.abs(ds["x"][:, 1]) < 0.15 * np.abs(ds["x"]).max()
        ax.plot(ds["x"][near, 0], ds["y"][near], "k.", ms=3)
        ax.set_title(meth, fontsize=9)
        ax.set_xlabel("$x_1$ (with $x_2 = 0$)")
    axes[0, 0].set_ylabel("$y$")
    axes[0, 0].legend(fontsize=8)
    return fig

