"""Chapter 6's views: its tables, its figure, the numbers its prose quotes and the run's notes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from symlib.book.chapter import Figure, Quote, RunResults, Table
from symlib.chapters.synthesis.benchmarks import BENCHMARKS
from symlib.chapters.synthesis.remedies import METHODS, method_name
from symlib.chapters.synthesis.stages import GOLD

__all__ = [
    "QUOTES",
    "VIEWS",
    "benchmark_table",
    "conclusion",
    "conclusion_facts",
    "diagnostics_frame",
    "findings",
    "format_table",
    "gold_notes",
    "method_colours",
    "ns_effect_in_laurent",
    "plot_quality_vs_cost",
    "verdict_words",
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


def method_colours(names, config=None) -> dict[str, str]:
    """One colour per method name, the same in every panel: the methods in :data:`METHODS` order
    (named for ``config`` where given, :func:`~symlib.chapters.synthesis.remedies.method_name`),
    then any other name in the order first met in ``names``."""
    known = [method_name(k, config) if config is not None else v for k, v in METHODS.items()]
    order = list(dict.fromkeys([*known, *names]))
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    extra = colormaps["tab20"]  # past the ten methods: its lighter shades, unlike C0-C9
    return {n: f"C{i}" if i < 10 else to_hex(extra((2 * (i - 10) + 1) % 20)) for i, n in enumerate(order)}


def plot_quality_vs_cost(results: RunResults):
    """TV to the gold standard against wall time, one panel per benchmark (mean ± SE over seeds).

    Each method has one colour in every panel (:func:`method_colours`, keyed by its name, not its
    row), and the legend lists every method of any panel once."""
    import matplotlib.pyplot as plt

    names = list(results["benchmarks"])
    tables = {n: results["benchmarks"][n]["table"] for n in names}
    methods = [m for t in tables.values() for m in t.method if m != GOLD]
    colours = method_colours(methods, results.config)
    # one panel per row, as wide as the text column: side by side, three panels were shrunk to
    # half size on the page and their text was about 5 px high
    fig, axes = plt.subplots(len(names), 1, figsize=(6.4, 2.5 * len(names) + 0.9), squeeze=False)
    legend: dict[str, object] = {}
    for ax, n in zip(axes[:, 0], names):
        t = tables[n]
        for _, r in t[t.method != GOLD].iterrows():
            h = ax.errorbar(r["time (s)"], r["TV to gold"], xerr=r["time (s) se"], yerr=r["TV to gold se"],
                            fmt="o", ms=5, color=colours[r["method"]], label=r["method"])
            legend.setdefault(r["method"], h)
        floor = t[t.method == GOLD].iloc[0]
        h = ax.axhline(floor["TV to gold"], ls="--", color="0.4", lw=1, label="HMC half vs half")
        legend.setdefault("HMC half vs half", h)
        ax.set_xscale("log")
        ax.set_title(n)
        ax.set_xlabel("wall time of the fit (s)")
        ax.set_ylabel("predictive TV to the gold standard")
    labels = sorted(legend, key=lambda m: list(colours).index(m) if m in colours else len(colours))
    fig.legend([legend[m] for m in labels], labels, loc="outside lower center", ncol=3,
               fontsize="small")  # the house constrained layout
    return fig


# --------------------------------------------------------------------------- the conclusion

_QUESTIONS = (
    # (question, metric, higher is better, benchmarks: None = every one run)
    ("predictions closest to the gold standard (lowest predictive TV)", "TV to gold", False, None),
    ("best test log-likelihood", "test LL", True, None),
    ("best calibrated (lowest ECE)", "ECE", False, ("digits",)),
    ("best out-of-distribution detection (highest OOD AUPR)", "OOD AUPR", True, ("digits",)),
)
"""The questions the conclusion answers, each by the method that does best on it."""


def conclusion_facts(results: RunResults) -> dict[str, float | str]:
    """Per question of the conclusion and benchmark: the best method (``<q>_<benchmark>``), its
    value (``..._value``), MFVI's (``..._mfvi``), and its fit's wall time over MFVI's
    (``..._cost``, the ``q_r`` of HMC counting the HMC run); ``q<i>`` indexes :data:`_QUESTIONS`.
    The floor (the gold standard against itself) is no method and is left out."""
    out: dict[str, float | str] = {}
    for i, (_, metric, higher, where) in enumerate(_QUESTIONS):
        for n, r in results["benchmarks"].items():
            t = r["table"].set_index("method")
            if (where is not None and n not in where) or metric not in t.columns:
                continue
            col = t.drop(index=GOLD)[metric].astype(float)
            best = col.idxmax() if higher else col.idxmin()
            key = f"q{i}_{n}"
            out[key] = best
            out[f"{key}_value"] = float(col[best])
            out[f"{key}_mfvi"] = float(t.loc[METHODS["mfvi"], metric])
            out[f"{key}_cost"] = float(t.loc[best, "time (s)"] / t.loc[METHODS["mfvi"], "time (s)"])
    return out


def conclusion(facts: dict, verdicts: dict[str, str] | None = None) -> str:
    """The chapter's conclusion in Markdown, from :func:`conclusion_facts` (this run's or the
    published run's): per question, the method that answers it best on each benchmark, its value
    against MFVI's and its cost; then, where given, each claim's verdict (``claim id -> words``)."""
    lines = []
    for i, (question, *_rest) in enumerate(_QUESTIONS):
        cells = []
        for key in [k for k in facts if k.startswith(f"q{i}_") and k.count("_") == 1]:  # the run's order
            n = key.split("_", 1)[1]
            v, mf, cost = facts[f"{key}_value"], facts[f"{key}_mfvi"], facts[f"{key}_cost"]
            cells.append(f"*{facts[key]}* on {n} ({v:.3f} against MFVI's {mf:.3f}, at {cost:.1f} × MFVI's wall time)")
        if cells:
            lines.append(f"- **{question[0].upper()}{question[1:]}**: " + "; ".join(cells) + ".")
    if verdicts:
        lines.append("- **The claims**: " + "; ".join(f"`{c}` ({v})" for c, v in verdicts.items()) + ".")
    return "\n".join(lines)


def verdict_words(claims: list[dict]) -> dict[str, str]:
    """Claim id -> its two verdicts in words (``reproduced: holds; robust: not judged``), from a
    results record's ``claims``."""
    from symlib.book.results import outcome

    return {c["id"]: "; ".join(f"{col}: {outcome(c['verdicts'][col]['holds'])}" for col in ("reproduced", "robust"))
            for c in claims}


def ns_effect_in_laurent() -> pd.DataFrame:
    """How symmetry removal moves the MMD in Laurent et al.'s own Table 1: per data set, the
    methods with both values, and how many of them have a higher MMD after it (NS > MMD) and a
    lower one (deep ensembles, 0 in both by construction, are left out)."""
    from symlib.chapters.posterior_mmd.paper import reported

    rows = []
    for key, name in (("table1_mnist", "MNIST / OptuNet"), ("table1_cifar100", "CIFAR-100 / ResNet-18"),
                      ("table1_tinyimagenet", "TinyImageNet / ResNet-18")):
        t = reported(f"laurent2024/{key}").frame().dropna(subset=["MMD", "NS"])
        t = t[t.method != "DE"]
        rises = t[t.NS > t.MMD]
        rows.append({"data set": name, "methods": len(t), "higher after NS": len(rises),
                     "lower after NS": int((t.NS < t.MMD).sum()),
                     "rises": ", ".join(f"{m}-mode {r}" for m, r in zip(rises.modes, rises.method))})
    return pd.DataFrame(rows)


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
