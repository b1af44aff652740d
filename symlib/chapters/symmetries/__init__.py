"""Chapter 0: the symmetry group G of an MLP, shown numerically.

Notebook ``notebooks/00_symmetries.md``; :data:`CHAPTER` declares the chapter
(:mod:`symlib.book.chapter`). Modules, one job each: ``profiles`` (its `smoke` / `quick` /
`full` / `paper` sizes), ``stages`` (the compute), ``claims`` (the ledger), ``views`` (tables,
figure and quoted numbers).
"""

from symlib.book.chapter import Chapter
from symlib.chapters.symmetries import claims as _claims  # the package's .claims stays the module
from symlib.chapters.symmetries.profiles import PROFILES, SymmetriesProfile
from symlib.chapters.symmetries.stages import (
    BOOK_ARCHITECTURES,
    STAGES,
    brute_force_mode_count,
    canonicalisation_demo,
    invariance_table,
    mode_count_table,
)
from symlib.chapters.symmetries.views import QUOTES, VIEWS, plot_canonicalisation

__all__ = [
    "BOOK_ARCHITECTURES",
    "CHAPTER",
    "PROFILES",
    "SymmetriesProfile",
    "brute_force_mode_count",
    "canonicalisation_demo",
    "invariance_table",
    "mode_count_table",
    "plot_canonicalisation",
]

CHAPTER = Chapter(
    name="00_symmetries",
    paper="none: the notation and the symmetry group G shared by the five papers (Kurle et al. 2021, Laurent et al. 2024)",
    profiles=PROFILES,
    stages=STAGES,
    claims=_claims.claims,
    views=VIEWS,
    quotes=QUOTES,
    sections=_claims.SECTIONS,
    quick_seconds=6,
)
"""Chapter 0, declared: what the notebook, the pipeline and the tests use."""
