"""Chapter 1's views: its tables, its two figures and the numbers its prose quotes, from the results."""

from __future__ import annotations

import numpy as np

from symlib.book.chapter import Figure, Quote, RunResults, Table
from symlib.chapters.ortho_skip.claims import FIT_TOLERANCE
from symlib.chapters.ortho_skip.paper import SINC_SETUP

__all__ = [
    "QUOTES",
    "VIEWS",
    "by_layer_frame",
    "fitted_variants",
    "gap_frame",
    "metrics_frame",
    "plot_elbo_gap",
    "plot_fits",
    "settings_frame",
]


def settings_frame(results: RunResults):
    """The paper's settings (:data:`symlib.chapters.ortho_skip.paper.SINC_SETUP`) beside this run's."""
    import pandas as pd

    cfg, p = results.config, SINC_SETUP
    widths = p.hidden_widths
    rows = [
        ("network", f"1-{widths[0]}x{len(widths)}-1, {p.activation}" if len(set(widths)) == 1
         else f"1-{'x'.join(map(str, widths))}-1, {p.activation}",
         f"1-{'x'.join(map(str, cfg.hidden_widths))}-1, SELU"),
        ("data", f"{p.n_train} points, {p.data} + N(0, {p.noise_sd:g}²)",
         f"{cfg.n_train} points, y = {cfg.amplitude:g}·sinc({cfg.frequency:g}x) + N(0, {cfg.noise_sd:g}²)"),
        ("prior / posterior", p.prior_posterior, "N(0, 1) / diagonal Gaussian, local reparameterisation"),
        ("likelihood noise", p.noise_model, "learned" if cfg.learn_noise else f"fixed at {cfg.noise_sd:g}"),
        ("iterations (full batch)", f"{p.n_steps:,}", f"{cfg.n_steps:,}"),
        ("MC samples train / test", f"{p.n_train_samples} / {p.n_test_samples}",
         f"{cfg.n_train_samples} / {cfg.n_test_samples}"),
        ("optimiser", p.optimiser, f"Adam, learning rate {cfg.learning_rate:g}"),
        ("KL annealing", p.annealing, f"linear over the first {cfg.anneal_fraction:.0%}"),
        ("initial posterior sd", p.init_sd, f"{cfg.init_sd:g}"),
        ("'stayed at the prior'", p.at_prior, f"per-weight KL[q(w)‖p(w)] < {cfg.prior_kl_threshold:g} nat"),
    ]
    return pd.DataFrame(rows, columns=["setting", "Kurle et al.", "this run"])


_METRICS = {
    "train_rmse": "train RMSE",
    "test_loglik": "test log-lik (nats/pt)",
    "epistemic_sd_in": "epistemic sd |x|≤1",
    "epistemic_sd_out": "epistemic sd 1<|x|≤2",
    "elbo": "final ELBO",
    "kl": "KL(q‖p)",
    "share_at_prior": "weights at prior",
}


def metrics_frame(results: RunResults):
    """Per-variant metrics of the sinc fits, one row per variant (by its Figure 1 label)."""
    import pandas as pd

    metrics = pd.DataFrame(results["main"]["metrics"]).set_index("label")
    return metrics[list(_METRICS)].rename(columns=_METRICS).rename_axis("variant")


def by_layer_frame(results: RunResults):
    """Share of weights at the prior per weight matrix (columns ``W1``...), one row per variant."""
    import pandas as pd

    metrics = results["main"]["metrics"]
    return pd.DataFrame({r["label"]: r["share_at_prior_by_layer"] for r in metrics}).T.rename_axis("variant")


def gap_frame(results: RunResults):
    """The ELBO-gap curve: mean scale, gap and its Monte Carlo standard error."""
    import pandas as pd

    gap = results["main"]["gap"]
    return pd.DataFrame({"mean scale t": gap["scales"], "gap (nats)": gap["gap"], "standard error": gap["standard_error"]})


def _metric(results: RunResults, variant: str, name: str) -> float:
    return next(r[name] for r in results["main"]["metrics"] if r["variant"] == variant)


def fitted_variants(results: RunResults) -> list[str]:
    """The labels of the variants whose train RMSE is within :data:`FIT_TOLERANCE` of the noise floor."""
    floor = results["main"]["reference"]["oracle_train_rmse"]
    return [r["label"] for r in results["main"]["metrics"] if r["train_rmse"] <= FIT_TOLERANCE * floor]


def plot_fits(main: dict):
    """Figure 1 of Kurle et al.: data, predictive mean, +-1 sd (epistemic and total), 2x2 panels.

    ``main`` is stage ``main``'s result (its ``fits``).

    Returns a matplotlib Figure; no global style is touched.
    """
    from symlib.book.plotting import figure, label_panels

    f = main["fits"]
    fig, axes = figure(2, 2, width=7.5, height_per_row=2.9, sharex=True, sharey=True, layout="constrained")
    x = f["x_grid"]
    for i, ax in enumerate(axes.ravel()):
        mean, epi, tot = f["mean"][i], f["epistemic_sd"][i], f["total_sd"][i]
        ax.fill_between(x, mean - tot, mean + tot, color="#9ecae1", alpha=0.6, lw=0, label="±1 sd total")
        ax.fill_between(x, mean - epi, mean + epi, color="#3182bd", alpha=0.6, lw=0, label="±1 sd epistemic")
        ax.plot(x, f["f_true"], color="0.35", lw=1.0, ls="--", label="true function")
        ax.plot(x, mean, color="#08306b", lw=1.6, label="predictive mean")
        ax.scatter(f["x_train"], f["y_train"], s=6, color="C2", zorder=3, label="data")
        for edge in (-1.0, 1.0):
            ax.axvline(edge, color="0.6", lw=0.8, ls=":")
        ax.set_title(f["labels"][i])
        ax.set_xlim(x[0], x[-1])
        ax.set_ylim(f["y_train"].min() - 1.0, f["y_train"].max() + 1.0)
    for ax in axes[-1]:
        ax.set_xlabel("x")
    for ax in axes[:, 0]:
        ax.set_ylabel("y")
    axes[0, 0].legend(loc="upper left", fontsize=8, bbox_to_anchor=(0.0, 0.9))
    label_panels(axes)
    return fig


def plot_elbo_gap(main: dict):
    """The ELBO gap KL[q0 || q_mix]: (a) against the mean scale, (b) against active units.

    ``main`` is stage ``main``'s result (its ``gap``).

    Returns a matplotlib Figure; no global style is touched.
    """
    from symlib.book.plotting import figure, label_panels

    g = main["gap"]
    fig, axes = figure(1, 2, width=8.0, height_per_row=3.4, layout="constrained")
    ax = axes[0, 0]
    scales, gaps, ses = np.asarray(g["scales"]), np.asarray(g["gap"]), np.asarray(g["standard_error"])
    pos = scales > 0
    ax.errorbar(scales[pos], gaps[pos], yerr=2 * ses[pos], marker="o", ms=3, lw=1.2,
                label=r"$\mathrm{KL}[q_0\,\|\,q_\mathrm{mix}]$ (± 2 se)")
    ax.axhline(g["log_n"], color="C1", ls="--", lw=1.0, label=rf"$\log N$ = {g['log_n']:.2f} (layers 1..L)")
    ax.axhline(g["log_n_paper"], color="C2", ls=":", lw=1.0,
               label=rf"$\log \prod_{{l\geq 2}} N_l!$ = {g['log_n_paper']:.2f} (as printed)")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("mean scale t (means t·d, d ~ N(0, I), sd 1)")
    ax.set_ylabel("ELBO gap (nats)")
    ax.set_title(f"{'-'.join(map(str, g['widths']))} MLP, N = {g['n_permutations']}; |gap(t=0)| = {abs(gaps[0]):.0e}")
    ax.legend(fontsize=8, loc="lower right")
    ax = axes[0, 1]
    k = np.asarray(g["collapse_n_active"])
    ax.errorbar(k, g["collapse_gap"], yerr=2 * np.asarray(g["collapse_standard_error"]), marker="o", ms=4,
                lw=1.2, label=f"gap (scale {g['collapse_scale']:g})")
    ax.plot(k, g["collapse_limit"], color="C1", ls="--", lw=1.0, label=r"$\log \prod_l N_l!/(N_l-k)!$")
    ax.set_xticks(k)
    ax.set_xlabel("active units per hidden layer k (rest at the prior)")
    ax.set_ylabel("ELBO gap (nats)")
    ax.set_title("collapsed units shrink the gap")
    ax.legend(fontsize=8, loc="lower right")
    label_panels(axes)
    return fig


_BY_LAYER_FORMATS = {f"W{layer}": "{:.0%}" for layer in range(1, 33)}
"""Percent for every weight matrix's column (``W1``...; a table view's formats are fixed)."""

VIEWS = (
    Table("settings", settings_frame, caption="The paper's settings beside this run's",
          paper_columns=("Kurle et al.",)),
    Figure("fig_fits", lambda results: plot_fits(results["main"])),
    Table("sinc_metrics", metrics_frame, caption="Per-variant metrics on the sinc data (the paper gives only Figure 1)",
          formats={"weights at prior": "{:.1%}"}),
    Table("share_at_prior_by_layer", by_layer_frame, caption="Share of weights at the prior, per weight matrix",
          formats=_BY_LAYER_FORMATS),
    Figure("fig_gap", lambda results: plot_elbo_gap(results["main"])),
    Table("elbo_gap", gap_frame, caption="ELBO gap against the mean scale",
          formats={"gap (nats)": "{:.4f}", "standard error": "{:.1e}"}),
)

QUOTES = (
    Quote("noise_floor", lambda results: results["main"]["reference"]["oracle_train_rmse"]),
    Quote("oracle_ll", lambda results: results["main"]["reference"]["oracle_test_loglik"]),
    Quote("fit_tolerance", lambda results: FIT_TOLERANCE),
    Quote("n_steps", lambda results: results.config.n_steps),
    Quote("n_train_samples", lambda results: results.config.n_train_samples),
    Quote("paper_n_steps", lambda results: SINC_SETUP.n_steps),
    Quote("paper_n_train_samples", lambda results: SINC_SETUP.n_train_samples),
    Quote("kl_ratio", lambda results: _metric(results, "ortho_skip", "kl") / _metric(results, "plain", "kl")),
    Quote("gap_widths", lambda results: "-".join(map(str, results["main"]["gap"]["widths"]))),
    Quote("gap_n", lambda results: results["main"]["gap"]["n_permutations"]),
    Quote("gap_logn", lambda results: results["main"]["gap"]["log_n"]),
    Quote("gap_logn_paper", lambda results: results["main"]["gap"]["log_n_paper"]),
    Quote("gap_first", lambda results: results["main"]["gap"]["gap"][0]),
    Quote("gap_last", lambda results: results["main"]["gap"]["gap"][-1]),
)
