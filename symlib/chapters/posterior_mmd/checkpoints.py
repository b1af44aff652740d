"""The checkpoints a run of this chapter writes (:mod:`symlib.chapters.checkpointed`): stage
``samples``, one after each approximate posterior, in the file :func:`.stages.samples_checkpoint`
names."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from symlib.chapters.posterior_mmd.stages import samples_checkpoint

__all__ = ["checkpoints"]


def checkpoints(context: Callable) -> Iterator[Path]:
    """``context(stage name)`` gives the stage's :class:`~symlib.book.chapter.StageContext`."""
    yield samples_checkpoint(context("samples"))
