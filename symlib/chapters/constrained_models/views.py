"""Chapter 4's views: every table the page shows and stores, its figures and the numbers its
prose quotes, built from the stages' results (:class:`symlib.book.chapter.RunResults`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from symlib.book.chapter import Figure, Quote, Table
from symlib.chapters.constrained_models.figures import (
    plot_figure1,
    plot_predictive,
    plot_prior_demo,
)
from symlib.chapters.constrained_models.fits import METHODS
from symlib.chapters.constrained_models.paper import reported
from symlib.chapters.constrained_models.profiles import ConstrainedModelsProfile
from symlib.chapters.constrained_models.stages_boston import AUTHORS_ANGLES, BOSTON_MODELS
from symlib.chapters.constrained_models.wilcoxon import wilcoxon_frame
from symlib.nn import constrained as idf

__all__ = [
    "QUOTES",
    "VIEWS",
    "advi_table",
    "boston_tables",
    "build_notes",
    "diagnostics_table",
    "robustness_overview",
    "settings_table",
]


def diagnostics_table(synth: dict) -> pd.DataFrame:
    """NUTS diagnostics per dataset and model."""
    rows = []
    for g, ds in synth["datasets"].items():
        for model in idf.MODELS:
            d = ds["fits"][model, "NUTS"]["diag"]
            h = ds["fits"][model, "NUTS"]["hyperbola"]
            m = ds["fits"][model, "NUTS"]["modes"]
            rows.append({"data": "paper's network" if g == "paper" else "authors' code",
                         "model": model, "chains × draws": f"{d['chains']} × {d['draws']}",
                         "ESS f(x) (median)": d["ess_f_median"], "min bulk ESS f(x)": d.get("ess_f_min", np.nan),
                         "min ESS params": d["ess_params_min"],
                         "min tail ESS f(x)": d["tail_ess_f_min"],
                         "ESS / s": d["ess_per_s"], "mean tree depth": d["treedepth"],
                         "mean leapfrog": d["leapfrog"], "divergences": d["divergent"],
                         "max split R-hat f(x)": d["rhat_f_max"], "sampling s": d["sampling_s"],
                         "corr log|W1[1,1]|, log|W2[1]|": h["corr"],
                         "permutation copies visited": m["copies"]})
    return pd.DataFrame(rows)


def advi_table(synth: dict) -> pd.DataFrame:
    """Final ELBO (mean of the last tenth of the steps), time and posterior noise sd per fit."""
    ds = synth["datasets"]["paper"]
    rows = []
    for model in idf.MODELS:
        for meth in METHODS:
            f = ds["fits"][model, meth]
            rows.append({"model": model, "method": meth,
                         "final ELBO": f["diag"].get("elbo", float("nan")),
                         "seconds": f["diag"]["time_s"],
                         "posterior mean of sigma": float(np.mean(f["params"]["sigma"])),
                         "corr log|W1[1,1]|, log|W2[1]|": f["hyperbola"]["corr"]})
    return pd.DataFrame(rows)


def _boston_models(boston: dict) -> tuple[str, ...]:
    """The fits stored per split: the two models, and the authors' angle prior when it was run."""
    return tuple(m for m in ("unconstrained", "constrained", AUTHORS_ANGLES) if m in boston["splits"][0])


def boston_tables(boston: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Table 1 (MSE), Table 2 (share outside the 95% interval) beside the paper's, diagnostics."""
    t1_paper = reported("pourzanjani2017/table1_boston_mse").frame()
    t2_paper = reported("pourzanjani2017/table2_boston_coverage").frame()
    models = _boston_models(boston)
    out = []
    for key, paper in (("mse", t1_paper), ("outside", t2_paper)):
        rows = {}
        for model in ("unconstrained", "constrained"):
            rows[f"{model} (ours)"] = [r[model][key] for r in boston["splits"]]
            rows[f"{model} (paper)"] = _paper_row(paper, model)[: len(boston["splits"])]
        if AUTHORS_ANGLES in models:
            rows[f"{AUTHORS_ANGLES} (ours)"] = [r[AUTHORS_ANGLES][key] for r in boston["splits"]]
        frame = pd.DataFrame(rows, index=pd.Index([r["split"] for r in boston["splits"]], name="split")).T
        out.append(frame)
    diag = []
    for r in boston["splits"]:
        for model in models:
            d = r[model]["diag"]
            diag.append({"split": r["split"], "model": model, "mean tree depth": d["treedepth"],
                         "share at max depth": d["hit_max_depth"], "mean leapfrog": d["leapfrog"],
                         "divergences": d["divergent"], "ESS f(x) (median)": d["ess_f_median"],
                         "min bulk ESS f(x)": d.get("ess_f_min", float("nan")),
                         "min tail ESS f(x)": d["tail_ess_f_min"], "ESS / s": d["ess_per_s"],
                         "max split R-hat f(x)": d["rhat_f_max"], "NUTS s": d["time_s"]})
    return out[0], out[1], pd.DataFrame(diag)


def _paper_row(frame: pd.DataFrame, model: str) -> list[float]:
    """The paper's column for ``model`` from a reference table (one row per split)."""
    return [float(v) for v in frame.sort_values("split")[model].tolist()]


_SETTINGS = [
    ("synthetic", "synth_n", "training points", "100"),
    ("synthetic", "synth_x_range", "inputs x ~ U(-r, r)^2, r", "not stated (code: 10)"),
    ("synthetic", "synth_noise_sd", "noise sd", "not stated (code: 1)"),
    ("synthetic", "synth_w_scale", "normal prior sd on weights", "1 (code: 0.9)"),
    ("synthetic", "synth_chains", "NUTS chains", "1 (code)"),
    ("synthetic", "advi_lr", "ADVI learning rate (Adam)", "not stated (Stan: adaptive)"),
    ("synthetic", "advi_init_scale", "ADVI initial sd", "not stated (Stan: 1)"),
    ("synthetic", "synth_warmup", "NUTS warm-up", "1,000 (code)"),
    ("synthetic", "synth_draws", "NUTS draws", "1,000 (code)"),
    ("synthetic", "advi_steps", "ADVI steps", "not stated (Stan: up to 10,000)"),
    ("synthetic", "advi_draws", "ADVI draws", "1,000 (Stan's default)"),
    ("Boston", "boston_hidden", "hidden ReLU units", "50"),
    ("Boston", "boston_splits", "80/20 splits", "15"),
    ("Boston", "boston_chains", "NUTS chains", "1 (code)"),
    ("Boston", "boston_warmup", "NUTS warm-up", "1,000 (code: 500 in boston.R)"),
    ("Boston", "boston_draws", "NUTS draws", "1,000 (code: 500 in boston.R)"),
    ("Boston", "boston_max_depth", "NUTS max tree depth", "10 (Stan's default)"),
    ("Boston", "w_laplace", "Laplace prior on the weights (W1 and W2 here)",
     "code: Laplace(0, 1) on W1 (unconstrained), N(0, 1) on W2"),
    ("Boston", "boston_w_scale", "scale of the weight prior", "1 (code)"),
    ("Boston", "angle_jacobian", "constrained: prior on the angles",
     "code: Laplace(0, 1) on every angle, no change of measure"),
    ("Boston", "boston_authors_angles", "constrained also fitted under the authors' angle prior", "–"),
    ("both", "sigma_scale", "half-normal scale on noise sd", "not stated (code: flat)"),
    ("synthetic", "angle_jacobian", "angle change of measure", "left out (code)"),
    ("robustness", "robust_w_scales", "other weight prior scales judged", "–"),
    ("robustness", "robust_boston", "Boston housing rerun under them", "–"),
]


def settings_table(profile: ConstrainedModelsProfile) -> pd.DataFrame:
    """Every setting of the chapter: the paper's value (or "not stated") beside this run's."""
    rows = []
    for exp, name, what, paper in _SETTINGS:
        value = getattr(profile, name)
        value = f"{value:g}" if isinstance(value, float) else str(value)
        rows.append({"experiment": exp, "setting": what, "paper": paper, "this run": value})
    return pd.DataFrame(rows)



def robustness_overview(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Every claim's robustness rows in one table (without ``ours``), a ``claim`` column first."""
    rob = pd.concat({cid: f.drop(columns="ours") for cid, f in frames.items()}, names=["claim", "row"])
    return rob.reset_index(level="row", drop=True).reset_index()


# --------------------------------------------------------------------------- views and quotes

_SYNTH_DIAG_FORMATS = {
    "ESS f(x) (median)": "{:.0f}", "min bulk ESS f(x)": "{:.0f}", "min tail ESS f(x)": "{:.0f}",
    "min ESS params": "{:.0f}", "ESS / s": "{:.0f}", "mean tree depth": "{:.2f}", "mean leapfrog": "{:.1f}",
    "max split R-hat f(x)": "{:.3f}", "sampling s": "{:.2f}", "corr log|W1[1,1]|, log|W2[1]|": "{:.2f}"}
_WILCOXON_FORMATS = {
    "median difference (unc − con)": "{:+.3f}", "W+ (unc > con)": "{:g}", "W− (con > unc)": "{:g}",
    "p (ours)": "{:.3g}", "smallest attainable p": "{:.3g}", "p (paper)": "{:.3g}"}
_BOSTON_DIAG_FORMATS = {
    "mean tree depth": "{:.2f}", "share at max depth": "{:.2f}", "mean leapfrog": "{:.0f}",
    "ESS f(x) (median)": "{:.0f}", "min bulk ESS f(x)": "{:.0f}", "min tail ESS f(x)": "{:.0f}",
    "ESS / s": "{:.2f}", "max split R-hat f(x)": "{:.2f}", "NUTS s": "{:.0f}"}

VIEWS = (
    Figure("fig_prior", lambda r: plot_prior_demo(r["prior"])),
    Figure("fig_hyperbola", lambda r: plot_figure1(r["synth"])),
    Figure("fig_predictive", lambda r: plot_predictive(r["synth"])),
    Table("synthetic_fits", lambda r: advi_table(r["synth"]), caption="Every fit on the paper's synthetic data",
          source="ours", formats={"corr log|W1[1,1]|, log|W2[1]|": "{:.2f}"}),
    Table("synthetic_nuts_diagnostics", lambda r: diagnostics_table(r["synth"]),
          caption="NUTS diagnostics on the synthetic data", source="ours; paper: Sec. 4.1 (no numbers reported)",
          formats=_SYNTH_DIAG_FORMATS),
    Table("table1_boston_mse", lambda r: boston_tables(r["boston"])[0],
          caption="Table 1 of Pourzanjani et al.: test MSE (standardised target) per split",
          source="ours beside Pourzanjani et al. 2017, Table 1"),
    Table("table2_boston_outside", lambda r: boston_tables(r["boston"])[1],
          caption="Table 2 of Pourzanjani et al.: share of test points outside the central 95% "
                  "posterior-predictive interval",
          source="ours beside Pourzanjani et al. 2017, Table 2"),
    Table("wilcoxon_tests", lambda r: wilcoxon_frame(r["boston"]["splits"]),
          caption="Paired two-sided Wilcoxon signed-rank tests", source="ours; paper: Sec. 4.2",
          formats=_WILCOXON_FORMATS),
    Table("boston_nuts_diagnostics", lambda r: boston_tables(r["boston"])[2],
          caption="NUTS diagnostics on Boston housing", formats=_BOSTON_DIAG_FORMATS),
    Table("settings", lambda r: settings_table(r.config), caption="The paper's settings beside this run's"),
)
"""Every figure and table of the page, in the page's order."""

_TAGS = {"NUTS": "nuts", "ADVI mean-field": "mf", "ADVI full-rank": "fr"}


def _hyperbola(model: str, method: str, stat: str):
    return lambda r: r["synth"]["datasets"]["paper"]["fits"][model, method]["hyperbola"][stat]


def _paper_diag(model: str, column: str):
    def value(r):
        d = diagnostics_table(r["synth"])
        return d[d["data"] == "paper's network"].set_index("model").loc[model, column]
    return value


def _sigma(nuts: bool):
    def values(r):
        at = advi_table(r["synth"])
        return at[(at["method"] == "NUTS") == nuts]["posterior mean of sigma"]
    return values


def _boston_row(table: int, row: str):
    return lambda r: boston_tables(r["boston"])[table].loc[row]


def _boston_diag(r) -> pd.DataFrame:
    return boston_tables(r["boston"])[2]


def _unc_modes(r) -> dict:
    return r["synth"]["datasets"]["paper"]["fits"]["unconstrained", "NUTS"]["modes"]


QUOTES = (
    Quote("compile_total", lambda r: sum(r["compile"].values())),
    Quote("prior_abs_nojac", lambda r: r["prior"]["no_jacobian"]["mean_abs_last"]),
    Quote("prior_abs_jac", lambda r: r["prior"]["jacobian"]["mean_abs_last"]),
    Quote("prior_abs_unif", lambda r: r["prior"]["uniform_mean_abs"]),
    Quote("prior_ks_jac_min", lambda r: r["prior"]["jacobian"]["ks_p"].min()),
    Quote("prior_ks_nojac_max", lambda r: r["prior"]["no_jacobian"]["ks_p"][1:].max()),
    Quote("prior_abs_authors_last", lambda r: r["prior"]["authors"]["mean_abs_last"]),
    Quote("prior_abs_authors_first", lambda r: r["prior"]["authors"]["mean_abs_first"]),
    *(Quote(f"{name}_{model}_{tag}", _hyperbola(model, method, stat))
      for model in idf.MODELS for method, tag in _TAGS.items()
      for name, stat in (("corr", "corr"), ("sdw2", "sd_log_w2"))),
    Quote("unc_copies", lambda r: _unc_modes(r)["copies"]),
    Quote("unc_switches", lambda r: _unc_modes(r)["switches"]),
    Quote("unc_swapped", lambda r: 100 * _unc_modes(r)["share_swapped"]),
    Quote("sigma_true", lambda r: r["synth"]["datasets"]["paper"]["noise_sd"]),
    Quote("sigma_nuts_min", lambda r: _sigma(True)(r).min()),
    Quote("sigma_nuts_max", lambda r: _sigma(True)(r).max()),
    Quote("sigma_advi_min", lambda r: _sigma(False)(r).min()),
    Quote("sigma_advi_max", lambda r: _sigma(False)(r).max()),
    *(Quote(f"depth_{model}", _paper_diag(model, "mean tree depth")) for model in idf.MODELS),
    *(Quote(f"essps_{model}", _paper_diag(model, "ESS / s")) for model in idf.MODELS),
    Quote("n_splits", lambda r: len(r["boston"]["splits"])),
    Quote("mse_unc_mean", lambda r: _boston_row(0, "unconstrained (ours)")(r).mean()),
    Quote("mse_con_mean", lambda r: _boston_row(0, "constrained (ours)")(r).mean()),
    Quote("out_unc_mean", lambda r: _boston_row(1, "unconstrained (ours)")(r).mean()),
    Quote("out_con_mean", lambda r: _boston_row(1, "constrained (ours)")(r).mean()),
    Quote("mse_con_better", lambda r: (_boston_row(0, "constrained (ours)")(r)
                                       < _boston_row(0, "unconstrained (ours)")(r)).sum()),
    Quote("bdepth_unc", lambda r: _boston_diag(r).query("model == 'unconstrained'")["mean tree depth"].mean()),
    Quote("bdepth_con", lambda r: _boston_diag(r).query("model == 'constrained'")["mean tree depth"].mean()),
    Quote("bmaxdepth_share", lambda r: 100 * _boston_diag(r)["share at max depth"].mean()),
    Quote("bmaxdepth", lambda r: r.config.boston_max_depth),
    Quote("brhat_max", lambda r: _boston_diag(r)["max split R-hat f(x)"].max()),
    # the robust column's gate: the two models the Boston claims compare, not the authors' angle prior
    Quote("brhat_gate", lambda r: _boston_diag(r).loc[lambda d: d["model"].isin(BOSTON_MODELS),
                                                   "max split R-hat f(x)"].max()),
)
"""Every number the page's prose quotes (``{glue:text}`name:fmt```); integers are glued as floats."""


def build_notes(results) -> dict:
    """The results file's notes: each Stan program's build time in this run (0 when cached)."""
    return {"stan_build_s": {k: round(v, 1) for k, v in results["compile"].items()}}
