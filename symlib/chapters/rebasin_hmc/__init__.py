"""Chapter 5: number of transpositions, rebasin and compact summaries of HMC (Xiao et al. 2023).

Notebook ``notebooks/05_rebasin_hmc.md``; :data:`CHAPTER` declares the chapter
(:mod:`symlib.book.chapter`). Modules, one job each: ``profiles`` (its `smoke` / `quick` /
`full` / `paper` sizes), ``stages`` (the stages, with ``stages_not`` and ``stages_bayes``
holding their compute), ``claims`` (the ledger and its robustness sweeps), ``views`` (tables
and quoted numbers) with ``figures``, and ``paper`` (the paper's reported numbers and settings).
"""

from symlib.book.chapter import Chapter
from symlib.chapters.rebasin_hmc import claims as _claims  # the package's .claims stays the module
from symlib.chapters.rebasin_hmc.paper import PAPER_SETTINGS, REPORTED, reported
from symlib.chapters.rebasin_hmc.profiles import PROFILES, RebasinHMCProfile
from symlib.chapters.rebasin_hmc.stages import (
    BAYES_FIELDS,
    HMC_VARIANTS,
    NOT_FIELDS,
    STAGE_CODE,
    STAGES,
)
from symlib.chapters.rebasin_hmc.stages_bayes import METHODS
from symlib.chapters.rebasin_hmc.views import QUOTES, VIEWS, timing_notes

__all__ = [
    "BAYES_FIELDS",
    "CHAPTER",
    "HMC_VARIANTS",
    "METHODS",
    "NOT_FIELDS",
    "PAPER_SETTINGS",
    "PROFILES",
    "REPORTED",
    "STAGE_CODE",
    "RebasinHMCProfile",
    "reported",
]

CHAPTER = Chapter(
    name="05_rebasin_hmc",
    paper="Xiao, Liu and Bamler 2023: compact representations of HMC samples by rebasin",
    profiles=PROFILES,
    stages=STAGES,
    claims=_claims.claims,
    errata=_claims.ERRATA,
    sweeps=_claims.SWEEPS,
    views=VIEWS,
    quotes=QUOTES,
    sections=_claims.SECTIONS,
    judge_field="judge",
    notes=timing_notes,
    quick_seconds=140,
)
"""Chapter 5, declared: what the notebook, the pipeline and the tests use."""
