"""Chapter 0's views: its tables, its figure and the numbers its prose quotes, from the results."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from symlib.book.chapter import Figure, Quote, Table

__all__ = [
    "QUOTES",
    "VIEWS",
    "brute_force_frame",
    "invariance_frame",
    "mode_count_frame",
    "plot_canonicalisation",
    "spread_frame",
]

WORST = "max |f(g·w)(x) - f(w)(x)|"


def invariance_frame(results: Mapping):
    """Output and weight change under sampled group elements, one row per activation."""
    import pandas as pd

    return pd.DataFrame(results["invariance"])


def brute_force_frame(results: Mapping):
    """Enumerated copies against the formula, one row per tiny network."""
    import pandas as pd

    return pd.DataFrame(results["brute"]).T.rename_axis("network")


def mode_count_frame(results: Mapping):
    """Permutation-equivalent modes of every architecture of the book."""
    import pandas as pd

    return pd.DataFrame(results["modes"])


def spread_frame(results: Mapping):
    """Per activation: copies, distinct copies and spread, before and after canonicalisation."""
    import pandas as pd

    return pd.DataFrame(
        {
            act: {
                "copies": len(d["raw"]),
                "distinct before": d["distinct_raw"],
                "distinct after": d["distinct_canonical"],
                "max distance to mean before": d["raw_spread"],
                "max distance to mean after": d["canonical_spread"],
            }
            for act, d in results["demo"].items()
        }
    ).T.rename_axis("activation")


def plot_canonicalisation(demo: dict):
    """Figure: copies in the plane of their two leading principal components, raw vs canonical."""
    from symlib.book.plotting import figure, label_panels

    fig, axes = figure(2, 2, width=7.0, height_per_row=3.0)
    for row, (act, d) in enumerate(demo.items()):
        centred = d["raw"] - d["raw"].mean(0)
        basis = torch.linalg.svd(centred, full_matrices=False).Vh[:2].T
        for col, key in enumerate(("raw", "canonical")):
            pts = (d[key] - d["raw"].mean(0)) @ basis
            ax = axes[row, col]
            ax.scatter(pts[:, 0], pts[:, 1], s=6, alpha=0.35, color="C0" if key == "raw" else "C1")
            ax.set_title(f"{act}: {len(pts)} copies, {'transformed' if key == 'raw' else 'canonicalised'}")
            ax.set_xlabel("PC 1")
            ax.set_ylabel("PC 2")
        lim_x, lim_y = axes[row, 0].get_xlim(), axes[row, 0].get_ylim()
        axes[row, 1].set_xlim(lim_x)
        axes[row, 1].set_ylim(lim_y)
    label_panels(axes)
    return fig


VIEWS = (
    Table("invariance", invariance_frame, caption="Output change under sampled group elements",
          formats={WORST: "{:.1e}"}),
    Table("brute_force_mode_count", brute_force_frame, caption="Distinct copies enumerated, against the formula"),
    Table("mode_counts", mode_count_frame, caption="Permutation-equivalent modes per architecture",
          formats={"log10 #permutation modes": "{:.1f}"}),
    Figure("fig_canonicalisation", lambda results: plot_canonicalisation(results["demo"])),
    Table("canonicalisation", spread_frame, caption="Spread of the transformed copies before and after canonicalisation",
          formats={"max distance to mean after": "{:.1e}"}),
)

QUOTES = (
    Quote("worst_output_change", lambda results: invariance_frame(results)[WORST].max()),
    Quote("canonical_spread", lambda results: spread_frame(results)["max distance to mean after"].max()),
)
