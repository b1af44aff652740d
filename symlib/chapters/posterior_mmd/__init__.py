"""Chapter 2b: how close do approximate posteriors come to the reference posterior?

Laurent, Aldea & Franchi (2024), Section 4, App. B and D.2. Notebook
``notebooks/02b_posterior_mmd.md``; :data:`CHAPTER` declares the chapter
(:mod:`symlib.book.chapter`). Modules, one job each: ``profiles`` (its `smoke` / `quick` /
`full` / `paper` sizes), ``stages`` (the cached stages), ``networks`` (data, training),
``sampling`` (the approximate posteriors), ``replicates`` (the other seeds), ``evaluation`` (Table 1, App. B.4, functional
collapse), ``claims`` (the ledger and errata), ``robustness`` (the sweeps), ``diagnoses`` (why a claim would not hold), ``views`` (tables,
figures and quoted numbers), ``paper`` (the paper's reported numbers).
"""

from symlib.book.chapter import Chapter
from symlib.chapters.posterior_mmd import (
    claims as _claims,  # the package's .claims stays the module
)
from symlib.chapters.posterior_mmd import diagnoses as _diagnoses
from symlib.chapters.posterior_mmd import replicates as _replicates
from symlib.chapters.posterior_mmd import stages as _stages
from symlib.chapters.posterior_mmd.evaluation import (
    LAYERS,
    OOD_SCORES,
    evaluate,
    functional_collapse,
    method_metrics,
    ood_detection,
    remove_symmetries,
)
from symlib.chapters.posterior_mmd.networks import (
    LEARNED_ACCURACY,
    load_data,
    sample_probs,
    train_networks,
)
from symlib.chapters.posterior_mmd.paper import REPORTED, reported
from symlib.chapters.posterior_mmd.profiles import PROFILES, PosteriorMMDProfile
from symlib.chapters.posterior_mmd.robustness import SWEEPS
from symlib.chapters.posterior_mmd.sampling import METHODS, posterior_samples
from symlib.chapters.posterior_mmd.stages import CACHE_VERSION
from symlib.chapters.posterior_mmd.views import QUOTES, VIEWS

__all__ = [
    "CACHE_VERSION",
    "CHAPTER",
    "LAYERS",
    "LEARNED_ACCURACY",
    "METHODS",
    "OOD_SCORES",
    "PROFILES",
    "REPORTED",
    "STAGES",
    "STAGE_CODE",
    "PosteriorMMDProfile",
    "evaluate",
    "functional_collapse",
    "load_data",
    "method_metrics",
    "ood_detection",
    "posterior_samples",
    "remove_symmetries",
    "reported",
    "sample_probs",
    "train_networks",
]

STAGES = (*_stages.STAGES, _replicates.STAGE)
"""The chapter's stages: the first seed's five (:mod:`~symlib.chapters.posterior_mmd.stages`),
then the other seeds' (:mod:`~symlib.chapters.posterior_mmd.replicates`)."""
STAGE_CODE = {**_stages.STAGE_CODE, **_replicates.STAGE_CODE}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`)."""

CHAPTER = Chapter(
    name="02b_posterior_mmd",
    paper="Laurent, Aldea & Franchi (2024), Sec. 4, App. B and D.2: MMD between approximate posteriors "
          "and a reference posterior of OptuNets on MNIST, with and without symmetries",
    profiles=PROFILES,
    stages=STAGES,
    claims=_claims.claims,
    errata=_claims.ERRATA,
    sweeps=SWEEPS,
    views=VIEWS,
    quotes=QUOTES,
    sections=_claims.SECTIONS,
    judge_field="judge",
    diagnoses=_diagnoses.diagnoses,
    quick_seconds=130,
)
"""Chapter 2b, declared: what the notebook, the pipeline and the tests use."""
