"""Chapter 2a: symmetry removal, the min-mass problem and permutations during training

Notebook ``notebooks/02a_symmetry_removal.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figures), ``profiles`` (its `smoke` / `quick` / `paper` sizes).
"""

from symlib.chapters.symmetry_removal.experiment import (
    CACHE_VERSION,
    REFERENCE_ACCURACY,
    ROBUSTNESS_CHOICES,
    claims,
    depends_on,
    errata,
    kendall_tau,
    ks_min_p,
    marginal_ks,
    min_mass_table,
    mode_count_table,
    permutation_changes,
    plot_kendall,
    plot_mass,
    plot_toy,
    robustness,
    robustness_tables,
    run,
    toy_posterior,
    train_optunets,
)
from symlib.chapters.symmetry_removal.profiles import PROFILES, SymmetryRemovalProfile

__all__ = [
    "CACHE_VERSION",
    "PROFILES",
    "REFERENCE_ACCURACY",
    "ROBUSTNESS_CHOICES",
    "SymmetryRemovalProfile",
    "claims",
    "depends_on",
    "errata",
    "kendall_tau",
    "ks_min_p",
    "marginal_ks",
    "min_mass_table",
    "mode_count_table",
    "permutation_changes",
    "plot_kendall",
    "plot_mass",
    "plot_toy",
    "robustness",
    "robustness_tables",
    "run",
    "toy_posterior",
    "train_optunets",
]
