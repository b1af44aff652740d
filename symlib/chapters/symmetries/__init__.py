"""Chapter 0: the symmetry group G of an MLP, shown numerically.

Notebook ``notebooks/00_symmetries.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figures), ``profiles`` (its `smoke` / `quick` / `paper` sizes).
"""

from symlib.chapters.symmetries.experiment import (
    BOOK_ARCHITECTURES,
    brute_force_mode_count,
    canonicalisation_demo,
    claims,
    invariance_table,
    mode_count_table,
    plot_canonicalisation,
    run,
)
from symlib.chapters.symmetries.profiles import PROFILES, SymmetriesProfile

__all__ = [
    "BOOK_ARCHITECTURES",
    "PROFILES",
    "SymmetriesProfile",
    "brute_force_mode_count",
    "canonicalisation_demo",
    "claims",
    "invariance_table",
    "mode_count_table",
    "plot_canonicalisation",
    "run",
]
