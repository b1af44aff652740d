"""Chapter 2a's views: its tables, its figures and the numbers its prose quotes, from the results."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from symlib.book.chapter import Figure, Quote, Table
from symlib.book.preconditions import ACCURACY_SHARE
from symlib.chapters.symmetry_removal import paper, reference
from symlib.chapters.symmetry_removal.figures import plot_kendall, plot_mass, plot_toy
from symlib.chapters.symmetry_removal.profiles import SymmetryRemovalProfile

__all__ = [
    "DEAD_ACCURACY",
    "QUOTES",
    "VIEWS",
    "ks_frame",
    "mass_summary_frame",
    "mode_count_frame",
    "paper_vs_ours_frame",
    "per_epoch_frame",
]

DEAD_ACCURACY = 0.105
"""Test accuracy at or below which the prose counts an OptuNet as stuck at chance level (0.1)."""

KS_LAYERS = ("toy hidden layer, raw", "toy hidden layer, canonical", "OptuNet conv2, raw", "OptuNet conv2, canonical")



def _reference_run(results: Mapping) -> dict | None:
    """The reference run on the digits this run's OptuNets read (the profile's source for a
    result cached before it recorded them), or None where none is kept (full MNIST)."""
    read = results["optunets"].get("mnist_source") or reference.mnist_source(results.config)
    return reference.load_reference(read)


def _reference_median(results: Mapping) -> float:
    """:func:`_reference_run`'s median single OptuNet, NaN where none is kept."""
    ref = _reference_run(results)
    return float("nan") if ref is None else ref["single_median"]


def mass_summary_frame(results: Mapping):
    """Figure 2 in numbers: mass and largest |weight| per layer, trained vs min-mass (medians)."""
    import pandas as pd

    mass = pd.DataFrame(results["mass"]["rows"])
    keys = [c[4:-1] for c in mass.columns if c.startswith("max|") and not c.endswith("min-mass")]
    return pd.DataFrame(
        {
            "trained (median)": [mass["mass"].median()] + [mass[f"max|{k}|"].median() for k in keys],
            "min-mass (median)": [mass["min-mass"].median()] + [mass[f"max|{k}| min-mass"].median() for k in keys],
        },
        index=["mass"] + [f"largest |weight|, {k}" for k in keys],
    ).rename_axis("quantity")


def per_epoch_frame(results: Mapping):
    """Figure 4 in numbers: per epoch, the share of (step, network) pairs whose permutation changed."""
    import pandas as pd

    per_epoch = results["changes"]["per_epoch"]
    return pd.DataFrame({"epoch": np.arange(1, len(per_epoch) + 1),
                         "share of steps × networks with a changed permutation": per_epoch.numpy()})


def ks_frame(results: Mapping):
    """App. D.3: KS tests between units, per layer and weights (toy, then OptuNet; raw, then canonical)."""
    import pandas as pd

    ks = {**results["toy_ks"], **results["optunet_ks"]}
    return pd.DataFrame({layer: ks[layer] for layer in KS_LAYERS}).T.rename_axis("layer, weights")


def mode_count_frame(results: Mapping):
    """Permutation-equivalent modes of the book's networks, OptuNet's and ResNet-18's included."""
    import pandas as pd

    return pd.DataFrame(results["modes"])


def paper_vs_ours_frame(results: Mapping):
    """The paper's settings and counts against this run's."""
    import pandas as pd

    toy, modes = results["toy"], mode_count_frame(results)
    return pd.DataFrame(
        [
            {"quantity": "toy runs kept (loss ≤ 0.01)", "paper": f"about {100 * paper.TOY_KEPT_REFERENCE:.0f} % (App. A.1)",
             "ours": f"{100 * toy['n_kept'] / toy['n_trained']:.1f} %"},
            {"quantity": "OptuNet parameters", "paper": f"{paper.OPTUNET_PARAMETERS} (Sec. 4)",
             "ours": f"{modes.set_index('network').loc['OptuNet (MNIST)', 'parameters']} (authors' public OptuNet)"},
            {"quantity": "OptuNets for Fig. 2", "paper": f"{paper.OPTUNET_MODELS:,}", "ours": f"{len(results['mass']['rows'])}"},
            {"quantity": "OptuNet epochs", "paper": f"{paper.OPTUNET_EPOCHS}", "ours": f"{results.config.optunet_epochs}"},
            {"quantity": "OptuNet restarts (accuracy < 0.15 after epoch 3)",
             "paper": "authors' code: restart from the next seed",
             "ours": f"{int(results['optunets']['restarts'].sum())}"},
            {"quantity": "median single OptuNet test accuracy",
             "paper": (f"not printed; the paper's recipe on these digits: "
                       f"{100 * _reference_median(results):.1f} % (reference run)"
                       if _reference_run(results) else
                       "not printed; no reference run on these digits is kept"),
             "ours": f"{100 * float(results['optunets']['accuracy'].median()):.1f} %"},
            {"quantity": "OptuNet permutation modes", "paper": "not given",
             "ours": modes.set_index("network").loc["OptuNet (MNIST)", "#modes"]},
        ]
    )


VIEWS = (
    Figure("fig_toy", lambda results: plot_toy(results["toy"])),
    Figure("fig_mass", lambda results: plot_mass(results["mass"])),
    Table("figure2_min_mass", mass_summary_frame,
          caption="Mass and largest weight per layer, trained vs min-mass (medians over networks)",
          source="Laurent et al. Fig. 2 (figure only, no numbers)"),
    Figure("fig_kendall", lambda results: plot_kendall(results["changes"], results.config.optunet_milestones)),
    Table("figure4_permutation_changes", per_epoch_frame, caption="How often the sorting permutation changes, per epoch",
          source="Laurent et al. Fig. 4 (figure only)"),
    # the caption's level is the profile's default: every profile keeps it (checked in the tests)
    Table("appendix_d3_ks", ks_frame, caption=f"Two-sample KS tests between units, level {SymmetryRemovalProfile.ks_alpha}",
          source="Laurent et al. App. D.3 (p-values shown in a figure)", formats={"rejected": "{:.3f}", "median p": "{:.3f}"}),
    Table("mode_counts", mode_count_frame, caption="Permutation-equivalent modes per architecture",
          formats={"log10 #modes": "{:.1f}"}),
    Table("paper_vs_ours", paper_vs_ours_frame, caption="Settings and counts, paper vs this run"),
)


def _ratio(results: Mapping) -> np.ndarray:
    return np.array([r["min-mass"] / r["mass"] for r in results["mass"]["rows"]])


def _accuracy(results: Mapping) -> np.ndarray:
    return results["optunets"]["accuracy"].numpy()


QUOTES = (
    Quote("toy_trained", lambda results: results["toy"]["n_trained"]),
    Quote("toy_kept", lambda results: results["toy"]["n_kept"]),
    Quote("toy_kept_pct", lambda results: 100 * results["toy"]["n_kept"] / results["toy"]["n_trained"]),
    Quote("toy_change", lambda results: results["toy"]["max_output_change"]),
    Quote("n_optunets", lambda results: len(results["mass"]["rows"])),
    Quote("optunet_epochs", lambda results: results.config.optunet_epochs),
    # the ledger's median: torch's (the lower middle value), not numpy's
    Quote("acc_median", lambda results: 100 * float(results["optunets"]["accuracy"].median())),
    Quote("acc_max", lambda results: 100 * float(_accuracy(results).max())),
    Quote("acc_dead", lambda results: int((_accuracy(results) <= DEAD_ACCURACY).sum())),
    Quote("ratio_median", lambda results: float(np.median(_ratio(results)))),
    Quote("ratio_min", lambda results: float(_ratio(results).min())),
    Quote("ratio_max", lambda results: float(_ratio(results).max())),
    Quote("mm_change", lambda results: results["mass"]["max_output_change"]),
    Quote("mm_gap", lambda results: results["mass"]["solver_gap"]),
    Quote("canon_change", lambda results: results["optunet_ks"]["canonical_output_change"]),
    Quote("kendall_n", lambda results: results["changes"]["n_networks"]),
    Quote("acc_share", lambda results: 100 * ACCURACY_SHARE),
    Quote("acc_ref", lambda results: 100 * _reference_median(results)),
    Quote("acc_needed", lambda results: 100 * ACCURACY_SHARE * _reference_median(results)),
    Quote("acc_ref_n", lambda results: len((_reference_run(results) or {"networks": []})["networks"])),
    Quote("restarts", lambda results: int(results["optunets"]["restarts"].sum())),
)
