"""Which checkpoints a chapter's run would continue, so that those no run of this code would are known.

A fit stopped inside its stage at the time budget leaves a checkpoint in
``<cache>/checkpoints/`` (chapter 1's VI fits, chapter 2b's approximate posteriors, chapter 5's
HMC runs, chapter 6's gold standards), named by a digest of everything it depends on: the
stage's profile fields, the run seed, the device type and the stage's code and data hashes. A piece continues exactly the checkpoint of its own
name. After a change to a stage's code, the next piece starts that fit again under a new name,
and the old checkpoint is *stranded*: no run of this code will read it again. Left alone it would
travel with every later GPU piece (``carry/`` is loaded into each: chapter 5's is 14-24 MB of the
64 MiB that travel), and a reader of "the newest checkpoint" could take it for the run in progress.

:func:`expected` names the checkpoints one run (chapter, profile, seed, device) would write, by
calling the chapter's own naming functions with the contexts its stages would get;
:func:`live` takes the union over the runs a chapter's pieces file records
(:mod:`symlib.book.pieces`: profile, seed, device of every execution), so that a checkpoint of
another profile still in progress is kept. ``carry save`` and ``load``
(:mod:`symlib.book.carry`) leave out and remove the stranded ones, and ``benchmarks/gpu_piece.sh``
reads the progress of exactly the run it continues::

    python -m symlib.book.checkpoints CHAPTER --profile paper --seed 0 --device cuda   # expected names
    python -m symlib.book.checkpoints CHAPTER ... --existing   # those of them in the cache, as paths

Only a chapter listed in :data:`CHECKPOINTED` checkpoints; for any other, or a pieces file that
records no run, nothing is known to be stranded (:func:`live` returns None) and nothing is removed.
The test suite stops every checkpointing stage of each listed chapter at its budget and checks
that the checkpoints it leaves are exactly :func:`expected`'s (``tests/book/test_checkpoints.py``).

A stage that checkpoints names its file with :func:`stage_checkpoint` (chapter 2b's ``samples``;
chapters 1, 5 and 6 still name theirs in their own stages modules, the same way: moving them here
would change their code hashes and make their published runs stale, so it waits for the next time
they must be republished anyway).

Public: :data:`CHECKPOINTED`, :func:`expected`, :func:`live`, :func:`runs`, :func:`stage_checkpoint`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from symlib.book import cache

__all__ = ["CHECKPOINTED", "expected", "live", "main", "runs", "stage_checkpoint"]


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


def _context(chapter: str, stage_name: str, config, seed: int, device):
    """The :class:`~symlib.book.chapter.StageContext` the pipeline gives stage ``stage_name``
    (without its inputs: no naming function reads them)."""
    from symlib.book.chapter import StageContext

    stage = _chapters().declared(chapter).stage(stage_name)
    return StageContext(chapter=chapter, stage=stage, config=stage.view(config, chapter), device=device,
                        inputs={}, run_seed=seed)


def _chapters():
    """:mod:`symlib.chapters`, imported by name (:mod:`symlib.book` imports no chapter statically):
    its ``declared`` and ``get_profile`` (ValueError listing the valid chapters or profiles)."""
    return importlib.import_module("symlib.chapters")


def _stages(package: str):
    """``symlib.chapters.<package>.stages``, imported by name: a static import here would pull the
    chapter's code into every chapter's code hash (this module is outside them,
    :data:`symlib.book.provenance.RENDERING_ONLY`, but its static imports are followed)."""
    return importlib.import_module(f"symlib.chapters.{package}.stages")


def _items(ctx) -> list:
    return list(ctx.stage.items(ctx.config))


def _ortho_skip(chapter: str, config, seed: int, device) -> Iterator[Path]:
    """Chapter 1: stage ``main``'s sinc fit and one per ``robustness`` setting
    (:func:`symlib.chapters.ortho_skip.stages.main_stage`, ``robustness_setting``)."""
    stages = _stages("ortho_skip")

    yield stages.checkpoint_path(_context(chapter, "main", config, seed, device), "main")
    ctx = _context(chapter, "robustness", config, seed, device)
    for field, value in _items(ctx):
        yield stages.checkpoint_path(ctx, f"{field}={value}")


def _rebasin_hmc(chapter: str, config, seed: int, device) -> Iterator[Path]:
    """Chapter 5: stage ``bayes``'s HMC run and one per ``robust`` variant
    (:func:`symlib.chapters.rebasin_hmc.stages.robust_variant`)."""
    stages = _stages("rebasin_hmc")

    yield stages.checkpoint_path(_context(chapter, "bayes", config, seed, device))
    ctx = _context(chapter, "robust", config, seed, device)
    for variant in _items(ctx):
        yield stages.checkpoint_path(ctx, variant)


def _posterior_mmd(chapter: str, config, seed: int, device) -> Iterator[Path]:
    """Chapter 2b: stage ``samples``, one checkpoint after each approximate posterior
    (:func:`symlib.chapters.posterior_mmd.stages.samples`)."""
    stages = _stages("posterior_mmd")

    yield stages.samples_checkpoint(_context(chapter, "samples", config, seed, device))


def _synthesis(chapter: str, config, seed: int, device) -> Iterator[Path]:
    """Chapter 6: one gold standard per benchmark (stage ``gold``)."""
    stages = _stages("synthesis")

    ctx = _context(chapter, "gold", config, seed, device)
    for name in _items(ctx):
        yield stages.gold_checkpoint(ctx, name)


CHECKPOINTED: dict[str, Callable[..., Iterable[Path]]] = {
    "01_ortho_skip": _ortho_skip,
    "02b_posterior_mmd": _posterior_mmd,
    "05_rebasin_hmc": _rebasin_hmc,
    "06_synthesis": _synthesis,
}
"""The chapters whose stages checkpoint inside a fit, and where: ``(chapter, config, seed, device)
-> the checkpoint paths``, through the chapter's own naming function."""


def expected(chapter: str, profile: str, *, seed: int = 0, device: str = "cpu") -> list[str]:
    """The file names of the checkpoints that ``chapter``'s run of ``profile`` with ``seed`` on
    ``device`` (its type counts: ``"cuda"``, ``"cuda (NVIDIA H100 ...)"`` and ``"cuda:1"`` are
    one) would write; [] for a chapter that does not checkpoint.

    Raises:
        ValueError: an unknown chapter or profile (the message lists the valid ones).
    """
    config = _chapters().get_profile(chapter, profile)
    names = CHECKPOINTED.get(chapter)
    if names is None:
        return []
    return sorted({Path(p).name for p in names(chapter, config, seed, _device_type(device))})


def _device_type(device: str) -> str:
    """``"cuda"`` of ``"cuda (NVIDIA H100 80GB HBM3)"`` (a pieces file's device) or ``"cuda:0"``."""
    return str(device).split(" ", 1)[0].split(":", 1)[0] or "cpu"


def runs(entries: Iterable[dict]) -> set[tuple[str, int, str]]:
    """The ``(profile, seed, device type)`` of the executions in pieces ``entries``
    (:func:`symlib.book.pieces.read`); an entry written before pieces recorded the seed ran with
    the pipeline's only seed then used, 0 (``benchmarks/gpu_piece.sh`` passes ``--seed 0``)."""
    return {(str(e["profile"]), int(e.get("seed", 0)), _device_type(e.get("device", "cpu")))
            for e in entries if e.get("profile")}


def live(chapter: str, entries: Iterable[dict]) -> set[str] | None:
    """The checkpoint file names that some run in pieces ``entries`` would continue with this
    code (:func:`expected` of each of :func:`runs`, profiles the chapter no longer has left out);
    None when that is not known -- a chapter outside :data:`CHECKPOINTED`, or no run recorded --
    so that the caller keeps every checkpoint."""
    if chapter not in CHECKPOINTED:
        return None
    recorded = runs(entries)
    if not recorded:
        return None
    profiles = _chapters().declared(chapter).profiles   # a profile this version no longer has continues nothing
    return {name for profile, seed, device in recorded if profile in profiles
            for name in expected(chapter, profile, seed=seed, device=device)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symlib.book.checkpoints", description=__doc__.splitlines()[0])
    p.add_argument("chapter")
    p.add_argument("--profile", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--existing", action="store_true",
                   help="print the paths of those in the cache ($SYMLIB_CACHE/checkpoints/) only")
    args = p.parse_args(argv)
    try:
        names = expected(args.chapter, args.profile, seed=args.seed, device=args.device)
    except ValueError as err:
        p.error(str(err))
    folder = cache.cache_dir() / "checkpoints"
    for name in names:
        if not args.existing:
            print(name)
        elif (folder / name).is_file():
            print(folder / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
