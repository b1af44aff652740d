"""Chapter 2b: how close do approximate posteriors come to the reference posterior?

Notebook ``notebooks/02b_posterior_mmd.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figures), ``profiles`` (its `smoke` / `quick` / `paper` sizes), ``paper`` (the paper's reported numbers).
"""

from symlib.chapters.posterior_mmd.experiment import (
    CACHE_VERSION,
    CHAPTER,
    LAYERS,
    LEARNED_ACCURACY,
    METHODS,
    claims,
    evaluate,
    functional_collapse,
    load_data,
    method_metrics,
    method_settings,
    paper_vs_ours,
    plot_collapse,
    plot_table,
    posterior_samples,
    reading_notes,
    run,
    sample_probs,
    train_networks,
)
from symlib.chapters.posterior_mmd.paper import REPORTED, reported
from symlib.chapters.posterior_mmd.profiles import PROFILES, PosteriorMMDProfile

__all__ = [
    "CACHE_VERSION",
    "CHAPTER",
    "LAYERS",
    "LEARNED_ACCURACY",
    "METHODS",
    "PROFILES",
    "REPORTED",
    "PosteriorMMDProfile",
    "claims",
    "evaluate",
    "functional_collapse",
    "load_data",
    "method_metrics",
    "method_settings",
    "paper_vs_ours",
    "plot_collapse",
    "plot_table",
    "posterior_samples",
    "reading_notes",
    "reported",
    "run",
    "sample_probs",
    "train_networks",
]
