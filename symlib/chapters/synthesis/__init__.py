"""Chapter 6: every symmetry remedy of the five papers on the same benchmarks, against a gold-standard posterior.

Notebook ``notebooks/06_synthesis.md``. Modules: ``experiment`` (``run`` and the chapter's tables,
claims and figure), ``profiles`` (its `smoke` / `quick` / `full` / `paper` sizes), ``paper`` (no
paper numbers: the chapter goes beyond the papers).
"""

from symlib.chapters.synthesis.experiment import (
    BENCHMARKS,
    CACHE_VERSION,
    METHODS,
    Benchmark,
    claims,
    diagnostics_frame,
    findings,
    format_table,
    load_benchmark,
    plot_quality_vs_cost,
    run,
)
from symlib.chapters.synthesis.paper import REPORTED, reported
from symlib.chapters.synthesis.profiles import PROFILES, SynthesisProfile

__all__ = [
    "BENCHMARKS",
    "CACHE_VERSION",
    "METHODS",
    "PROFILES",
    "REPORTED",
    "Benchmark",
    "SynthesisProfile",
    "claims",
    "diagnostics_frame",
    "findings",
    "format_table",
    "load_benchmark",
    "plot_quality_vs_cost",
    "reported",
    "run",
]
