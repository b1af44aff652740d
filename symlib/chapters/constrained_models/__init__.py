"""Chapter 4: identifiable, constrained parametrisations for Bayesian ReLU networks.

Notebook ``notebooks/04_constrained_models.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figures), ``profiles`` (its `smoke` / `quick` / `paper` sizes), ``paper`` (the paper's reported numbers).
"""

from symlib.chapters.constrained_models.experiment import (
    CHAPTER,
    VERSION,
    advi_table,
    boston_experiment,
    boston_tables,
    claims,
    compile_models,
    diagnostics_table,
    hyperbola_stats,
    paper_network,
    plot_figure1,
    plot_predictive,
    plot_prior_demo,
    prior_demo,
    run,
    settings_table,
    synthetic_data,
    synthetic_experiment,
    wilcoxon_tests,
)
from symlib.chapters.constrained_models.paper import REPORTED, reported
from symlib.chapters.constrained_models.profiles import PROFILES, ConstrainedModelsProfile

__all__ = [
    "CHAPTER",
    "PROFILES",
    "REPORTED",
    "VERSION",
    "ConstrainedModelsProfile",
    "advi_table",
    "boston_experiment",
    "boston_tables",
    "claims",
    "compile_models",
    "diagnostics_table",
    "hyperbola_stats",
    "paper_network",
    "plot_figure1",
    "plot_predictive",
    "plot_prior_demo",
    "prior_demo",
    "reported",
    "run",
    "settings_table",
    "synthetic_data",
    "synthetic_experiment",
    "wilcoxon_tests",
]
