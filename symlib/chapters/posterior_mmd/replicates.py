"""Chapter 2b's replicates: the whole experiment again under independent seeds, for the robust column.

The paper ran Table 1 once. Today's standard asks a robust "holds" to rest on several seeds
(:func:`symlib.book.preconditions.replicated`), so the profile's ``seeds`` field reruns
training (reference checkpoints and ensemble), sampling and evaluation ``seeds - 1`` more
times, each from its own named streams (``train``, ``samples``, ``eval``, one per replicate).
The first seed is the chapter's own stages (``train`` ... ``eval``); this stage adds the others,
each cached on its own (a fan-out stage), so that a run in pieces keeps the replicates it
finished. It lives in its own module so that the code hash of the first seed's stages does not
change with it (:data:`STAGE_CODE`).

Each replicate keeps what the claims and sweeps read: Table 1's rows, App. B.4's kernel
aggregations, the functional-collapse statistics, the accuracies and restarts the gates read,
the OOD and digits records and, where the profile sweeps the OOD score, the OOD columns under
every score (``"detection"``).
"""

from __future__ import annotations

from symlib.book.chapter import Stage, StageContext
from symlib.book.runtime import torch_threads
from symlib.chapters.posterior_mmd import ood as _ood
from symlib.chapters.posterior_mmd.evaluation import EVAL_FIELDS, evaluate, ood_detection
from symlib.chapters.posterior_mmd.networks import TRAIN_FIELDS, load_data, train_networks
from symlib.chapters.posterior_mmd.sampling import SAMPLE_FIELDS, posterior_samples
from symlib.chapters.symmetry_removal.reference import mnist_source

__all__ = ["FIELDS", "STAGE", "STAGE_CODE", "replicate", "replicate_items"]

FIELDS = (*TRAIN_FIELDS, "threads", *SAMPLE_FIELDS, *EVAL_FIELDS, "robustness", "seeds")
"""The profile fields a replicate depends on: everything the first seed's ``eval`` and
``robustness`` stages depend on, and how many seeds the profile asks for."""
VERSION = "1"
"""The stage's version."""


def replicate_items(config) -> list[int]:
    """The replicates beyond the first seed: ``[1, ..., seeds - 1]`` (none for one seed)."""
    return list(range(1, int(config.seeds)))


def replicate(ctx: StageContext, item: int) -> dict:
    """Replicate ``item``: train, sample and evaluate from the replicate's own streams; the
    ``eval`` stage's result without the per-pair tensors the claims do not read."""
    config = ctx.config
    seeds = {purpose: ctx.stream(purpose, item).seed63() for purpose in ("train", "samples", "eval")}
    with torch_threads(config.threads):
        data = load_data(config)
        nets = train_networks(config, data, seeds["train"], progress=False, jobs=1, device=ctx.device)
        samples = posterior_samples(config, data, nets, seeds["samples"], progress=False, device=ctx.device)
        out = evaluate(config, data, nets, samples, seeds["eval"], ctx.device)
        detection = ood_detection(data, samples, ctx.device) if "ood_score" in config.robustness else None
    collapse = {k: v for k, v in out["collapse"].items() if k in ("pearson_r", "p_value", "n_pairs")}
    return {**out, "collapse": collapse, "detection": detection,
            "ood": _ood.record(config.ood_source, len(data["x_ood"])), "mnist_source": mnist_source(config)}


STAGE = Stage("replicates", replicate, fields=FIELDS, version=VERSION, needs=(),
              streams=("train", "samples", "eval"), key_data=_ood.key_data, items=replicate_items)
"""The replicates stage (after the chapter's five stages; needs none of them)."""

STAGE_CODE = {"replicates": ("symlib.chapters.posterior_mmd.replicates",)}
"""The code the stage runs: this module and what it imports."""
