"""Where a stage checkpoints inside a fit: :func:`stage_checkpoint`.

A fit stopped inside its stage at the time budget leaves a checkpoint in
``<cache>/checkpoints/``, named by a digest of everything it depends on: the stage's profile
fields, the run seed, the device type and the stage's code and data hashes. A piece continues
exactly the checkpoint of its own name; after a change to a stage's code, the next piece starts
that fit again under a new name. Which checkpoints a chapter's run would continue (so that the
others are known to be stranded) is what ``tools/longruns/checkpoint_names.py`` tells, from
:mod:`symlib.chapters.checkpointed`.

A stage that checkpoints names its file with :func:`stage_checkpoint` (chapter 2b's ``samples``;
chapters 1, 5 and 6 still name theirs in their own stages modules, the same way: moving them here
would change their code hashes and make their published runs stale, so it waits for the next time
they must be republished anyway).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from symlib.book import cache

__all__ = ["stage_checkpoint"]


def stage_checkpoint(ctx, run: str) -> Path:
    """Where run ``run`` of the stage of ``ctx`` (a :class:`~symlib.book.chapter.StageContext`)
    checkpoints: ``<cache>/checkpoints/<chapter>-<stage>-<run>-<digest>.pt``. The digest is of
    everything the stage's result depends on: its profile fields, the run seed (a stage's seeds
    and streams follow from it), the device type, its
    ``key_data`` (e.g. the data files it reads) and its code and data hashes
    (:func:`symlib.book.cache.fingerprint` of its cache experiment), so a checkpoint of other
    settings, data or code is never continued."""
    stage = ctx.stage
    ident = {"chapter": ctx.chapter, "stage": stage.name, "run": run, "fields": ctx.config.fields(),
             "seed": ctx.run_seed, "device": cache.device_key(ctx.device),
             "key_data": stage.key_data(ctx.config) if stage.key_data is not None else None,
             "code": cache.fingerprint(stage.experiment_name(ctx.chapter))}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
    label = re.sub(r"[^A-Za-z0-9.]+", "_", run).strip("_")
    return cache.cache_dir() / "checkpoints" / f"{ctx.chapter}-{stage.name}-{label}-{digest}.pt"
