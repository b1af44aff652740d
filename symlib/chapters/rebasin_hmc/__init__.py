"""Chapter 5: number of transpositions, rebasin and compact summaries of HMC (Xiao et al. 2023).

Notebook ``notebooks/05_rebasin_hmc.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figures), ``profiles`` (its `smoke` / `quick` / `paper` sizes), ``paper`` (the paper's reported numbers).
"""

from symlib.chapters.rebasin_hmc.experiment import (
    BAYES_FIELDS,
    METHODS,
    NOT_FIELDS,
    bayes_experiment,
    claims,
    findings,
    hmc_frame,
    load_data,
    not_experiment,
    not_frame,
    plot_figure1,
    plot_figure2,
    plot_figure3,
    pruning_table,
    run,
    settings_table,
    table1,
    weight_matching_table,
)
from symlib.chapters.rebasin_hmc.paper import REPORTED, reported
from symlib.chapters.rebasin_hmc.profiles import PROFILES, RebasinHMCProfile

__all__ = [
    "BAYES_FIELDS",
    "METHODS",
    "NOT_FIELDS",
    "PROFILES",
    "REPORTED",
    "RebasinHMCProfile",
    "bayes_experiment",
    "claims",
    "findings",
    "hmc_frame",
    "load_data",
    "not_experiment",
    "not_frame",
    "plot_figure1",
    "plot_figure2",
    "plot_figure3",
    "pruning_table",
    "reported",
    "run",
    "settings_table",
    "table1",
    "weight_matching_table",
]
