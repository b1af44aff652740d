"""Chapter 2a: symmetry removal, the min-mass problem and permutations during training
(Laurent, Aldea & Franchi, 2024, first half).

Notebook ``notebooks/02a_symmetry_removal.md``; :data:`CHAPTER` declares the chapter
(:mod:`symlib.book.chapter`). Modules, one job each: ``profiles`` (its `smoke` / `quick` /
`full` / `paper` sizes), ``paper`` (what the paper reports), ``toy`` and ``optunets`` (the
methods: Figure 1's toy posterior; OptuNets, min-mass, Kendall's tau, KS tests, mode counts),
``stages`` (the cached, seeded compute), ``claims`` (the ledger and errata), ``robustness`` (the
sweeps), ``views`` and ``figures`` (tables, figures, quoted numbers).
"""

from symlib.book.chapter import Chapter
from symlib.chapters.symmetry_removal import claims as _claims  # .claims stays the module
from symlib.chapters.symmetry_removal.claims import ERRATA, SECTIONS, ks_min_p
from symlib.chapters.symmetry_removal.figures import plot_kendall, plot_mass, plot_toy
from symlib.chapters.symmetry_removal.optunets import (
    SortKey,
    kendall_tau,
    marginal_ks,
    min_mass_table,
    mode_count_table,
    permutation_changes,
    sorting_permutation,
    train_optunets,
)
from symlib.chapters.symmetry_removal.profiles import PROFILES, SymmetryRemovalProfile
from symlib.chapters.symmetry_removal.robustness import SWEEPS, paper_only_settings
from symlib.chapters.symmetry_removal.stages import ROBUSTNESS_CHOICES, STAGE_CODE, STAGES
from symlib.chapters.symmetry_removal.toy import toy_posterior
from symlib.chapters.symmetry_removal.views import QUOTES, VIEWS

__all__ = [
    "CHAPTER",
    "PROFILES",
    "ROBUSTNESS_CHOICES",
    "STAGE_CODE",
    "SortKey",
    "SymmetryRemovalProfile",
    "kendall_tau",
    "ks_min_p",
    "marginal_ks",
    "min_mass_table",
    "mode_count_table",
    "paper_only_settings",
    "permutation_changes",
    "plot_kendall",
    "plot_mass",
    "plot_toy",
    "sorting_permutation",
    "toy_posterior",
    "train_optunets",
]

CHAPTER = Chapter(
    name="02a_symmetry_removal",
    paper="Laurent, Aldea & Franchi (2024), A symmetry-aware exploration of Bayesian neural network posteriors, "
          "first half: symmetry removal, the min-mass problem, permutations during training",
    profiles=PROFILES,
    stages=STAGES,
    claims=_claims.claims,
    errata=ERRATA,
    sweeps=SWEEPS,
    views=VIEWS,
    quotes=QUOTES,
    sections=SECTIONS,
    judge_field="judge",
    quick_seconds=63,
    diagnoses=_claims.diagnoses,
)
"""Chapter 2a, declared: what the notebook, the pipeline and the tests use. Its ``sweeps`` are
every claim's; a claim that no setting of a profile reruns gets no rows, so no sweep, there."""
