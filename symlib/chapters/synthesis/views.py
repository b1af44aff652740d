"""Chapter 6's views: its tables, its figure, the numbers its prose quotes and the run's notes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from symlib.book.chapter import Figure, Quote, RunResults, Table
from symlib.chapters.synthesis.benchmarks import BENCHMARKS
from symlib.chapters.synthesis.remedies import METHODS
from symlib.chapters.synthesis.stages import GOLD

__all__ = [
    "QUOTES",
    "VIEWS",
    "benchmark_table",
    "diagnostics_frame",
    "findings",
    "format_table",
    "gold_notes",
    "plot_quality_vs_cost",
]


def format_table(table: pd.DataFrame) -> pd.DataFrame:
    """``mean ± se`` strings for :func:`symlib.book.tables.show_table` (the floor row has no
    standard error); a missing value is ``None``, which the table shows as "—"."""
    shown = pd.DataFrame({"method": table["method"]})
    for c in table.columns:
        if c == "method" or c.endswith(" se"):
            continue
        digits = 1 if c in ("time (s)", "size (kB)", "peak GPU (MB)") else 3
        cells = []
        for v, e in zip(table[c], table.get(f"{c} se", pd.Series([np.nan] * len(table)))):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append(None)
            elif e is None or (isinstance(e, float) and math.isnan(e)):
                cells.append(f"{v:.{digits}f}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}")
            else:
                cells.append(f"{v:.{digits}f} ± {e:.{digits}f}" if abs(v) >= 1e-3 else f"{v:.1e} ± {e:.0e}")
        shown[c] = cells
    return shown


def benchmark_table(results: RunResults, name: str) -> pd.DataFrame:
    """Benchmark ``name``'s table, every remedy and the floor (cells: mean ± SE over seeds)."""
    return format_table(results["benchmarks"][name]["table"])


def diagnostics_frame(results: RunResults) -> pd.DataFrame:
    """The gold standard's diagnostics: R-hat and ESS on predictions, canonical and raw weights."""
    rows = []
    for n, r in results["benchmarks"].items():
        for what, s in r["gold"]["diagnostics"].items():
            rows.append({"benchmark": n, "quantity": what, "max split R-hat": s["rhat_max"],
                         "min bulk ESS": s["bulk_ess_min"], "min tail ESS": s["tail_ess_min"]})
    return pd.DataFrame(rows)


def gold_notes(results: RunResults) -> dict[str, dict]:
    """The gold standards' sampler statistics, stored as notes of the results file (``gold_<benchmark>``)."""
    return {f"gold_{n}": {k: r["gold"][k] for k in ("wall_s", "accept_rate", "step_size", "n_grad_evals")}
            for n, r in results["benchmarks"].items()}


def findings(results: RunResults) -> dict[str, float | str]:
    """Per benchmark run: MFVI's, the floor's and the closest method's TV to the gold standard
    (``<benchmark>_best`` names that method), the gold standard's worst R-hat on predictions,
    raw and canonical weights, and its sampling time."""
    out: dict[str, float | str] = {}
    for n, r in results["benchmarks"].items():
        t = r["table"].set_index("method")
        mf = t.loc[METHODS["mfvi"]]
        best = t.drop(index=GOLD)["TV to gold"].idxmin()
        out[f"{n}_mfvi_tv"] = float(mf["TV to gold"])
        out[f"{n}_floor_tv"] = float(t.loc[GOLD, "TV to gold"])
        out[f"{n}_best"] = best
        out[f"{n}_best_tv"] = float(t.loc[best, "TV to gold"])
        out[f"{n}_gold_rhat"] = float(r["gold"]["diagnostics"]["predictions"]["rhat_max"])
        out[f"{n}_gold_rhat_raw"] = float(r["gold"]["diagnostics"]["raw weights"]["rhat_max"])
        out[f"{n}_gold_rhat_canon"] = float(r["gold"]["diagnostics"]["canonical weights"]["rhat_max"])
        out[f"{n}_gold_s"] = float(r["gold"]["wall_s"])
    return out


def plot_quality_vs_cost(results: RunResults):
    """TV to the gold standard against wall time, one panel per benchmark (mean ± SE over seeds)."""
    import matplotlib.pyplot as plt

    names = list(results["benchmarks"])
    # one panel per row, as wide as the text column: side by side, three panels were shrunk to
    # half size on the page and their text was about 5 px high
    fig, axes = plt.subplots(len(names), 1, figsize=(6.4, 2.5 * len(names) + 0.9), squeeze=False)
    for ax, n in zip(axes[:, 0], names):
        t = results["benchmarks"][n]["table"]
        for i, r in t[t.method != GOLD].iterrows():
            ax.errorbar(r["time (s)"], r["TV to gold"], xerr=r["time (s) se"], yerr=r["TV to gold se"],
                        fmt="o", ms=5, color=f"C{i % 10}", label=r["method"])
        floor = t[t.method == GOLD].iloc[0]
        ax.axhline(floor["TV to gold"], ls="--", color="0.4", lw=1, label="HMC half vs half")
        ax.set_xscale("log")
        ax.set_title(n)
        ax.set_xlabel("wall time of the fit (s)")
        ax.set_ylabel("predictive TV to the gold standard")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize="small")  # the house constrained layout
    return fig


def _table(name: str) -> Table:
    return Table(f"table_{name}", lambda results: benchmark_table(results, name),
                 caption=f"{name}: every remedy against the gold standard (mean and SE over seeds)")


def _quote(key: str):
    """A numeric finding of :func:`findings`; NaN where its benchmark is not run in the profile."""
    return lambda results: findings(results).get(key, math.nan)


VIEWS = (
    Table("gold_diagnostics", diagnostics_frame, caption="Gold-standard HMC: split R-hat and ESS per quantity",
          formats={"max split R-hat": "{:.3f}", "min bulk ESS": "{:.0f}", "min tail ESS": "{:.0f}"}),
    *(_table(name) for name in BENCHMARKS),
    Figure("fig_quality_cost", plot_quality_vs_cost),
)
"""The gold standard's diagnostics, one table per benchmark (``table_<benchmark>``) and the
quality-against-cost figure."""

QUOTES = tuple(Quote(f"{n}_{what}", _quote(f"{n}_{what}")) for n in BENCHMARKS
               for what in ("mfvi_tv", "floor_tv", "best_tv", "gold_rhat", "gold_rhat_raw", "gold_rhat_canon",
                            "gold_s"))
"""Every numeric finding (:func:`findings`), glued for ``{glue:text}`` in the prose."""
