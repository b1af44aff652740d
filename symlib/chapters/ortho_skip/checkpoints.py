"""The checkpoints a run of this chapter writes (:mod:`symlib.chapters.checkpointed`): stage
``main``'s sinc fit and one per ``robustness`` setting, named by :func:`.stages.checkpoint_path`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from symlib.chapters.ortho_skip.stages import checkpoint_path

__all__ = ["checkpoints"]


def checkpoints(context: Callable) -> Iterator[Path]:
    """``context(stage name)`` gives the stage's :class:`~symlib.book.chapter.StageContext`."""
    yield checkpoint_path(context("main"), "main")
    ctx = context("robustness")
    for field, value in ctx.stage.items(ctx.config):
        yield checkpoint_path(ctx, f"{field}={value}")
