"""Chapter 5's compute: its stages, each a cached function of the profile fields it declares.

* ``not`` (:func:`~symlib.chapters.rebasin_hmc.stages_not.not_experiment`): Figures 1 and 2;
* ``ensemble`` (:func:`~symlib.chapters.rebasin_hmc.stages_bayes.fit_ensemble`) and ``vi``
  (:func:`~symlib.chapters.rebasin_hmc.stages_bayes.fit_vi`): the methods HMC is compared with;
  they depend on none of the HMC settings, so the main comparison and every HMC variant share them;
* ``bayes`` (:func:`~symlib.chapters.rebasin_hmc.stages_bayes.bayes_experiment`): HMC and the
  comparison of Table 1 and Figure 3;
* ``robust``: the same comparison under the other HMC settings the profile names
  (``robust_hmc``, :data:`HMC_VARIANTS`), one cached entry per variant (a fan-out stage), in
  the ``bayes`` stage's cache folder.

Every random draw comes from a named stream (:mod:`symlib.book.streams`, which
ended the old seeds' arithmetic on the run seed and their aliases: VI's initial means and Monte
Carlo noise shared ``1000 * seed + 2``, and the NoT networks of seeds 1 and 2 started like the
ensemble and VI). The ``robust`` variants draw from the ``bayes`` stage's streams, on purpose:
common random numbers, so a variant differs from the main run by its HMC settings only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import torch

from symlib.book import cache
from symlib.book.chapter import ProfileView, Stage
from symlib.book.streams import Stream
from symlib.chapters.rebasin_hmc.stages_bayes import bayes_experiment, fit_ensemble, fit_vi
from symlib.chapters.rebasin_hmc.stages_not import data_source, not_experiment
from symlib.data import data_fingerprint

__all__ = [
    "BAYES_FIELDS",
    "BAYES_STREAMS",
    "DATA_FIELDS",
    "ENSEMBLE_FIELDS",
    "HMC_VARIANTS",
    "NOT_FIELDS",
    "ROBUST_FIELDS",
    "ROBUST_MIN_CHAINS",
    "STAGES",
    "STAGE_CODE",
    "VERSION",
    "VI_FIELDS",
    "checkpoint_path",
    "checkpoint_run",
    "variant_config",
]

VERSION = "3"
"""The version of every stage; bump a stage's own when its numbers change (3: named streams)."""

DATA_FIELDS = ("data_source", "n_train", "n_test")
"""What :func:`~symlib.chapters.rebasin_hmc.stages_not.load_data` reads."""
NOT_FIELDS = (*DATA_FIELDS, "not_width", "not_seeds", "not_values", "not_epochs", "not_lr", "not_momentum",
              "not_batch_size", "path_points", "barrier_points")
ENSEMBLE_FIELDS = (*DATA_FIELDS, "width", "prior_sd", "ens_members", "ens_epochs", "ens_lr", "ens_batch_size")
VI_FIELDS = (*DATA_FIELDS, "width", "vi_epochs", "vi_lr", "vi_batch_size", "vi_init_sd")
BAYES_FIELDS = (*ENSEMBLE_FIELDS, "vi_epochs", "vi_lr", "vi_batch_size", "vi_init_sd",
                "hmc_chains", "hmc_warm_start_epochs", "hmc_burnin", "hmc_samples", "hmc_thin", "hmc_leapfrog",
                "hmc_step_size", "hmc_adapt", "hmc_jitter", "hmc_target_accept",
                "predictive_samples", "match_points", "prune_keep")
"""The ``bayes`` stage reads the HMC and evaluation fields and, through its inputs, the
ensemble's and VI's (the old key's fields, now listed rather than sliced)."""
ROBUST_FIELDS = (*BAYES_FIELDS, "robust_hmc")

HMC_VARIANTS: dict[str, dict[str, object]] = {
    "fixed step": {"hmc_adapt": False, "hmc_jitter": 0.0},
    "adapted step": {"hmc_adapt": True, "hmc_jitter": 0.0},
    "adapted step, jittered": {"hmc_adapt": True, "hmc_jitter": 0.2},
    "no warm start": {"hmc_warm_start_epochs": 0},
}
"""HMC settings the robustness stage can rerun the Bayesian comparison under (profile field
``robust_hmc``): the authors' fixed step size (``hmc_step_size``, no adaptation, no jitter), dual
averaging with or without jitter [open], and HMC from the initialisation, without the `quick`
profile's MAP warm start (as in the paper). A variant changes HMC settings only (``hmc_*``), so
it shares the ``ensemble`` and ``vi`` stages' fits."""


ROBUST_MIN_CHAINS = 4
"""A ``robust`` variant runs at least this many chains (the `paper` profile's main run has the
paper's one): the robust column's standard asks for >= 4 chains and split R-hat across them
(Vehtari et al. 2021: :data:`symlib.book.preconditions.ESS_MIN` is 100 per chain x 4)."""


BAYES_STREAMS = ("hmc", "predictive", "pruning")
"""The ``bayes`` stage's streams, which the ``robust`` variants share (common random numbers)."""


def _files(config) -> dict:
    """Key part: the fingerprints of the data files ``data_source`` names ({} for the shipped data)."""
    return data_fingerprint(data_source(config))


def _not(ctx):
    return not_experiment(ctx.config, lambda s: ctx.stream("nets", s).torch(), device=ctx.device)


def _ensemble(ctx):
    return fit_ensemble(ctx.config, ctx.stream("members").torch(), device=ctx.device)


def _vi(ctx):
    device = torch.device(ctx.device)
    return fit_vi(ctx.config, init_generator=ctx.stream("init").torch(),
                  noise_generator=ctx.stream("mc-noise").torch(device), device=device)


def _bayes_generators(ctx) -> dict[str, torch.Generator]:
    """The ``bayes`` stage's generators (also for a ``robust`` variant: common random numbers)."""
    streams = {p: Stream(ctx.run_seed, ctx.chapter, "bayes", p) for p in BAYES_STREAMS}
    return {"hmc": streams["hmc"].torch(), "predictive": streams["predictive"].torch(ctx.device),
            "pruning": streams["pruning"].torch()}


CHECKPOINT_MAX_BYTES = 48 << 20
"""Largest HMC checkpoint (chains' state and the summary's running sums): about 24 MiB at the
paper's width, which a GPU piece returns in two files."""


def variant_config(config, name: str):
    """The settings HMC variant ``name`` runs with: ``config`` (a profile or a stage's view) with
    the variant's :data:`HMC_VARIANTS` entry and at least :data:`ROBUST_MIN_CHAINS` chains."""

    def changed(c, **changes):
        return c.replace(**changes) if isinstance(c, ProfileView) else dataclasses.replace(c, **changes)

    variant = changed(config, **HMC_VARIANTS[name])
    return changed(variant, hmc_chains=max(variant.hmc_chains, ROBUST_MIN_CHAINS))


def _run_name(variant: str | None) -> str:
    """A run's name in its checkpoint's file name (``"main"``, ``"adapted_step_jittered"``)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", variant or "main").strip("_")


_CHECKPOINT_NAME = re.compile(r"^(?P<chapter>.+)-bayes-(?P<run>.+)-(?P<digest>[0-9a-f]{16})\.pt$")


def checkpoint_path(ctx, variant: str | None = None) -> Path:
    """Where the ``bayes`` stage (or its ``robust`` ``variant``) checkpoints HMC:
    ``<cache>/checkpoints/<chapter>-bayes-<run>-<digest>.pt``. The digest is of everything the
    chains depend on: the run's HMC settings (the ``bayes`` stage's fields, with the variant's
    changes), the run seed, the device, the data files and the ``bayes`` stage's code hash (the
    modules :data:`STAGE_CODE` declares, not the claims or texts), so a checkpoint of other
    settings or sampler code is never continued, and one of this sampler survives other edits."""
    run = ctx.config if variant is None else variant_config(ctx.config, variant)
    ident = {"chapter": ctx.chapter, "variant": variant, "fields": {f: getattr(run, f) for f in BAYES_FIELDS},
             "seed": ctx.run_seed, "device": cache.device_key(ctx.device), "data": _files(ctx.config),
             "code": cache.fingerprint(f"{ctx.chapter}-bayes")}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return cache.cache_dir() / "checkpoints" / f"{ctx.chapter}-bayes-{_run_name(variant)}-{digest}.pt"


def checkpoint_run(path: str | Path) -> tuple[str, str]:
    """The run (``"main"`` or the :data:`HMC_VARIANTS` name) and the digest of a checkpoint that
    :func:`checkpoint_path` named.

    Raises:
        ValueError: ``path`` is not such a name.
    """
    runs = {_run_name(v): v for v in HMC_VARIANTS} | {"main": "main"}
    m = _CHECKPOINT_NAME.match(Path(path).name)
    if m is None or m["run"] not in runs:
        raise ValueError(f"{Path(path).name}: not a chapter-5 HMC checkpoint name (<chapter>-bayes-<run>-<digest>.pt, "
                         f"run one of {sorted(runs)})")
    return runs[m["run"]], m["digest"]


def _bayes_in_pieces(ctx, config, variant: str | None) -> dict:
    path = checkpoint_path(ctx, variant)
    result = bayes_experiment(config, _bayes_generators(ctx), ensemble_fit=ctx.inputs["ensemble"],
                              vi_fit=ctx.inputs["vi"], device=ctx.device, checkpoint=path,
                              checkpoint_max_bytes=CHECKPOINT_MAX_BYTES, deadline=ctx.deadline)
    path.unlink(missing_ok=True)   # the stage's result is what is cached; its checkpoint is spent
    return result


def _bayes(ctx):
    return _bayes_in_pieces(ctx, ctx.config, None)


def _variants(config) -> tuple[str, ...]:
    """The ``robust`` stage's items: the HMC variants the profile names, checked."""
    unknown = set(config.robust_hmc) - set(HMC_VARIANTS)
    if unknown:
        raise ValueError(f"unknown HMC variants {sorted(unknown)} in robust_hmc; valid: {', '.join(HMC_VARIANTS)}")
    return tuple(config.robust_hmc)


def robust_variant(ctx, name: str) -> dict:
    """One item of the ``robust`` stage: the ``bayes`` stage's comparison under HMC variant ``name``,
    with at least :data:`ROBUST_MIN_CHAINS` chains."""
    return _bayes_in_pieces(ctx, variant_config(ctx.config, name), name)


STAGES = (
    Stage("not", _not, fields=NOT_FIELDS, version=VERSION, streams=("nets",), key_data=_files),
    Stage("ensemble", _ensemble, fields=ENSEMBLE_FIELDS, version=VERSION, streams=("members",), key_data=_files),
    Stage("vi", _vi, fields=VI_FIELDS, version=VERSION, streams=("init", "mc-noise"), key_data=_files),
    Stage("bayes", _bayes, fields=BAYES_FIELDS, version=VERSION, needs=("ensemble", "vi"),
          streams=BAYES_STREAMS, key_data=_files),
    Stage("robust", robust_variant, fields=ROBUST_FIELDS, version=VERSION, needs=("ensemble", "vi"),
          key_data=_files, items=_variants, experiment="05_rebasin_hmc-bayes"),
)
"""Chapter 5's stages, in the order the old ``run`` computed them. The old ``run`` fitted the
ensemble and VI inside the first ``bayes`` entry it missed and cached them only as part of it;
they are stages of their own now (cached, so a run that hits every ``bayes`` entry fits
neither). A ``robust`` item's key is the stage's key (the profile's own HMC fields and
``robust_hmc``) plus the variant's name."""

STAGE_CODE = {stage.name: ("symlib.chapters.rebasin_hmc.stages",) for stage in STAGES}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`): this module
and what it imports (``stages_not``, ``stages_bayes``, ``hmc_summary`` and the library's
samplers, networks and metrics), not ``claims``, ``views``, ``figures``, ``paper``, ``profiles``
or ``progress``. So an edit of the claims or texts leaves the cached entries current and lets a
`paper` run in GPU pieces continue its chains; an edit of the sampler restarts them."""
