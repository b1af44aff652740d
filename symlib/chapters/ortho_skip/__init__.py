"""Chapter 1: symmetric posteriors make mean-field VI underfit; orthogonal skips break the symmetry.

Notebook ``notebooks/01_ortho_skip.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figures), ``profiles`` (its `smoke` / `quick` / `paper` sizes), ``gap``.
"""

from symlib.chapters.ortho_skip import gap
from symlib.chapters.ortho_skip.experiment import (
    CHAPTER,
    FIT_TOLERANCE,
    GAP_SE_SHARE,
    ROBUSTNESS_CHOICES,
    VARIANTS,
    VERSION,
    claims,
    depends_on,
    errata,
    plot_elbo_gap,
    plot_fits,
    robustness,
    robustness_tables,
    run,
)
from symlib.chapters.ortho_skip.profiles import PROFILES, OrthoSkipProfile

__all__ = [
    "CHAPTER",
    "FIT_TOLERANCE",
    "GAP_SE_SHARE",
    "PROFILES",
    "ROBUSTNESS_CHOICES",
    "VARIANTS",
    "VERSION",
    "OrthoSkipProfile",
    "claims",
    "depends_on",
    "errata",
    "gap",
    "plot_elbo_gap",
    "plot_fits",
    "robustness",
    "robustness_tables",
    "run",
]
