"""Chapter 1: symmetric posteriors make mean-field VI underfit; orthogonal skips break the symmetry.

Notebook ``notebooks/01_ortho_skip.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figures), ``profiles`` (its `smoke` / `quick` / `paper` sizes), ``gap``.
"""

from symlib.chapters.ortho_skip import gap
from symlib.chapters.ortho_skip.experiment import (
    CHAPTER,
    FIT_TOLERANCE,
    VARIANTS,
    VERSION,
    claims,
    plot_elbo_gap,
    plot_fits,
    run,
)
from symlib.chapters.ortho_skip.profiles import PROFILES, OrthoSkipProfile

__all__ = [
    "CHAPTER",
    "FIT_TOLERANCE",
    "PROFILES",
    "VARIANTS",
    "VERSION",
    "OrthoSkipProfile",
    "claims",
    "gap",
    "plot_elbo_gap",
    "plot_fits",
    "run",
]
