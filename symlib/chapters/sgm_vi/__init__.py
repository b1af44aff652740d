"""Chapter 3: variational inference under permutation symmetry, and its symmetrisation (SGM).

Gelberg, van der Ouderaa, van der Wilk & Gal (2024), "Variational inference failures under
model symmetries". Notebook ``notebooks/03_sgm_vi.md``; :data:`CHAPTER` declares the chapter
(:mod:`symlib.book.chapter`). Modules, one job each: ``profiles`` (its `smoke` / `quick` /
`full` / `paper` sizes), ``stages`` (the stages) with the compute by topic in
``stages_geometry`` (Figure 3, Theorem 3.1), ``stages_toy`` (the two-parameter BNN) and
``stages_mnist`` (Table 1, cost per step), ``rng`` (the chapter's generators), ``claims`` (the
ledger and errata), ``sweeps`` (robustness), ``diagnoses`` (why a claim does not hold), ``views`` (tables and quoted numbers), ``figures``,
``paper`` (the paper's reported numbers), and the methods only this chapter needs,
``mode_interpolation`` and ``mode_proximity``.
"""

from symlib.book.chapter import Chapter
from symlib.chapters.sgm_vi import claims as _claims  # the package's .claims stays the module
from symlib.chapters.sgm_vi import diagnoses as _diagnoses  # .diagnoses stays the module
from symlib.chapters.sgm_vi import mode_interpolation, mode_proximity
from symlib.chapters.sgm_vi.paper import REPORTED, reported
from symlib.chapters.sgm_vi.profiles import PROFILES, SGMProfile
from symlib.chapters.sgm_vi.stages import STAGE_CODE, STAGES
from symlib.chapters.sgm_vi.sweeps import SWEEPS
from symlib.chapters.sgm_vi.views import QUOTES, VIEWS

__all__ = ["CHAPTER", "PROFILES", "REPORTED", "STAGE_CODE", "SGMProfile", "mode_interpolation", "mode_proximity", "reported"]

CHAPTER = Chapter(
    name="03_sgm_vi",
    paper="Gelberg, van der Ouderaa, van der Wilk & Gal (2024), Variational inference failures under model symmetries",
    profiles=PROFILES,
    stages=STAGES,
    claims=_claims.claims,
    errata=_claims.ERRATA,
    sweeps=SWEEPS,
    views=VIEWS,
    quotes=QUOTES,
    sections=_claims.SECTIONS,
    diagnoses=_diagnoses.diagnoses,
    judge_field="judge",
    quick_seconds=186,
    # the cost per step times this machine: its table and its code check differ between runs
    machine_tables=frozenset({"cost_per_step"}),
    machine_claims=frozenset({"cost-linear-in-K"}),
)
"""Chapter 3, declared: what the notebook, the pipeline and the tests use."""
