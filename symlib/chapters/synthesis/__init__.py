"""Chapter 6: every symmetry remedy of the five papers on the same benchmarks, against a gold-standard posterior.

No paper compares the remedies with each other. Here one family of networks (a one-hidden-layer
ReLU MLP, ``N(0, 1)`` prior on every parameter) is fitted on three data sets by long multi-chain
HMC (the gold standard) and by every remedy, and every method's weight samples go through one
code path of predictions and metrics.

Notebook ``notebooks/06_synthesis.md``; :data:`CHAPTER` declares the chapter
(:mod:`symlib.book.chapter`). Modules, one job each: ``profiles`` (its `smoke` / `quick` /
`full` / `paper` sizes), ``benchmarks`` (the data sets, likelihoods, predictions and metrics),
``remedies`` (fitting every method), ``gold`` (the gold-standard HMC in resumable pieces and
what is kept of its draws), ``stages`` (the compute: gold standards, fits, metrics),
``claims`` (the ledger), ``views`` (tables, figure, quoted numbers and notes), ``paper`` (no
paper numbers: the chapter goes beyond the papers).
"""

from __future__ import annotations

from symlib.book.chapter import Chapter
from symlib.chapters.synthesis import claims as _claims  # the package's .claims stays the module
from symlib.chapters.synthesis.benchmarks import BENCHMARKS, Benchmark, load_benchmark
from symlib.chapters.synthesis.paper import REPORTED, reported
from symlib.chapters.synthesis.profiles import PROFILES, SynthesisProfile
from symlib.chapters.synthesis.remedies import METHODS
from symlib.chapters.synthesis.stages import STAGE_CODE, STAGES
from symlib.chapters.synthesis.views import QUOTES, VIEWS, findings, gold_notes

__all__ = [
    "BENCHMARKS",
    "CHAPTER",
    "METHODS",
    "PROFILES",
    "REPORTED",
    "STAGE_CODE",
    "Benchmark",
    "SynthesisProfile",
    "findings",
    "load_benchmark",
    "reported",
]


CHAPTER = Chapter(
    name="06_synthesis",
    paper="none: every remedy of the five papers side by side (Kurle et al. 2021, Laurent et al. 2024, "
          "Gelberg et al. 2024, Pourzanjani et al. 2017, Xiao et al. 2023)",
    profiles=PROFILES,
    stages=STAGES,
    claims=_claims.claims,
    views=VIEWS,
    quotes=QUOTES,
    sweeps=_claims.SWEEPS,
    sections=_claims.SECTIONS,
    notes=gold_notes,
    quick_seconds=137,
)
"""Chapter 6, declared: what the notebook, the pipeline and the tests use."""
