"""Chapter 4: identifiable, constrained parametrisations for Bayesian ReLU networks.

Pourzanjani, Jiang & Petzold (2017). Notebook ``notebooks/04_constrained_models.md``;
:data:`CHAPTER` declares the chapter (:mod:`symlib.book.chapter`). Modules, one job each:
``profiles`` (its `smoke` / `quick` / `full` / `paper` sizes), ``stages`` (the stages and the
prior demonstration), ``stages_synthetic`` and ``stages_boston`` (the two experiments' fits),
``fits`` (one NUTS or ADVI fit and its summaries), ``seeds`` (the chapter's generators),
``wilcoxon`` (the signed-rank test), ``claims`` (the ledger, erratum and robustness sweeps),
``views`` and ``figures`` (tables, figures and quoted numbers), ``paper`` (the paper's numbers).
"""

from symlib.book.chapter import Chapter
from symlib.chapters.constrained_models import (
    claims as _claims,  # the package's .claims stays the module
)
from symlib.chapters.constrained_models.figures import (
    plot_figure1,
    plot_predictive,
    plot_prior_demo,
)
from symlib.chapters.constrained_models.fits import METHODS, hyperbola_stats
from symlib.chapters.constrained_models.paper import PAPER_P, REPORTED, reported
from symlib.chapters.constrained_models.profiles import PROFILES, ConstrainedModelsProfile
from symlib.chapters.constrained_models.stages import (
    STAGE_CODE,
    STAGES,
    compile_models,
    prior_demo,
    robustness_experiment,
)
from symlib.chapters.constrained_models.stages_boston import (
    AUTHORS_ANGLES,
    BOSTON_MODELS,
    authors_angle_program,
    boston_experiment,
    boston_tasks,
)
from symlib.chapters.constrained_models.stages_synthetic import (
    paper_network,
    synthetic_data,
    synthetic_experiment,
)
from symlib.chapters.constrained_models.views import (
    QUOTES,
    VIEWS,
    advi_table,
    boston_tables,
    build_notes,
    diagnostics_table,
    settings_table,
)
from symlib.chapters.constrained_models.wilcoxon import signed_ranks, wilcoxon_frame

__all__ = [
    "AUTHORS_ANGLES",
    "BOSTON_MODELS",
    "CHAPTER",
    "METHODS",
    "PAPER_P",
    "PROFILES",
    "REPORTED",
    "STAGE_CODE",
    "ConstrainedModelsProfile",
    "advi_table",
    "authors_angle_program",
    "boston_experiment",
    "boston_tables",
    "boston_tasks",
    "compile_models",
    "diagnostics_table",
    "hyperbola_stats",
    "paper_network",
    "plot_figure1",
    "plot_predictive",
    "plot_prior_demo",
    "prior_demo",
    "reported",
    "robustness_experiment",
    "settings_table",
    "signed_ranks",
    "synthetic_data",
    "synthetic_experiment",
    "wilcoxon_frame",
]

CHAPTER = Chapter(
    name="04_constrained_models",
    paper='Pourzanjani, Jiang & Petzold (2017), "Improving the identifiability of neural networks for '
          'Bayesian inference"',
    profiles=PROFILES,
    stages=STAGES,
    claims=_claims.claims,
    errata=_claims.ERRATA,
    sweeps=_claims.SWEEPS,
    views=VIEWS,
    quotes=QUOTES,
    sections=_claims.SECTIONS,
    judge_field="judge",
    notes=build_notes,
    quick_seconds=262 + 150,  # Stan builds on a fresh machine included
    machine_text=r"per second \S+ vs \S+",
)
"""Chapter 4, declared: what the notebook, the pipeline and the tests use."""
