"""The checkpoints a run of this chapter writes (:mod:`symlib.chapters.checkpointed`): stage
``interp``'s Figure 3 fits and those of every ``robustness`` setting that refits them, named by
:func:`.stages.interp_checkpoint`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from symlib.chapters.sgm_vi.stages import interp_checkpoint, part_of

__all__ = ["checkpoints"]


def checkpoints(context: Callable) -> Iterator[Path]:
    """``context(stage name)`` gives the stage's :class:`~symlib.book.chapter.StageContext`."""
    yield interp_checkpoint(context("interp"))
    ctx = context("robustness")
    for field, value in ctx.stage.items(ctx.config):
        if part_of(field) == "interp":
            yield interp_checkpoint(ctx, f"{field}={value}")
