"""The checkpoints a run of this chapter writes (:mod:`symlib.chapters.checkpointed`): one gold
standard per benchmark of stage ``gold``, named by :func:`.stages.gold_checkpoint`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from symlib.chapters.synthesis.stages import gold_checkpoint

__all__ = ["checkpoints"]


def checkpoints(context: Callable) -> Iterator[Path]:
    """``context(stage name)`` gives the stage's :class:`~symlib.book.chapter.StageContext`."""
    ctx = context("gold")
    for name in ctx.stage.items(ctx.config):
        yield gold_checkpoint(ctx, name)
