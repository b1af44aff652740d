"""The chapters whose stages checkpoint inside a fit, each with the checkpoints a run of it
writes (its package's ``checkpoints`` module), so that the checkpoints a run continues are known
apart from those a code change left behind (``tools/longruns/checkpoint_names.py`` asks; the tests
stop every checkpointing stage at its budget and compare the files it leaves with these names)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from symlib.chapters.ortho_skip import checkpoints as ortho_skip
from symlib.chapters.posterior_mmd import checkpoints as posterior_mmd
from symlib.chapters.rebasin_hmc import checkpoints as rebasin_hmc
from symlib.chapters.sgm_vi import checkpoints as sgm_vi
from symlib.chapters.synthesis import checkpoints as synthesis

__all__ = ["CHECKPOINTED"]

CHECKPOINTED: dict[str, Callable[[Callable], Iterable[Path]]] = {
    "01_ortho_skip": ortho_skip.checkpoints,
    "02b_posterior_mmd": posterior_mmd.checkpoints,
    "03_sgm_vi": sgm_vi.checkpoints,
    "05_rebasin_hmc": rebasin_hmc.checkpoints,
    "06_synthesis": synthesis.checkpoints,
}
"""Chapter name -> ``checkpoints(context)``: the paths of the checkpoints its run writes, given
``context(stage name)``, the :class:`~symlib.book.chapter.StageContext` the pipeline gives that
stage (its inputs left out: no naming function reads them)."""
