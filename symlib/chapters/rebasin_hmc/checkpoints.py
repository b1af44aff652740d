"""The checkpoints a run of this chapter writes (:mod:`symlib.chapters.checkpointed`): stage
``bayes``'s HMC run and one per ``robust`` variant, named by :func:`.stages.checkpoint_path`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from symlib.chapters.rebasin_hmc.stages import checkpoint_path

__all__ = ["checkpoints"]


def checkpoints(context: Callable) -> Iterator[Path]:
    """``context(stage name)`` gives the stage's :class:`~symlib.book.chapter.StageContext`."""
    yield checkpoint_path(context("bayes"))
    ctx = context("robust")
    for variant in ctx.stage.items(ctx.config):
        yield checkpoint_path(ctx, variant)
