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
(:mod:`tools.longruns.carry`) leave out and remove the stranded ones, and ``tools/longruns/gpu_piece.sh``
reads the progress of exactly the run it continues. A change proven to move no number (a
registry entry, :mod:`symlib.book.equivalence`) strands nothing: :func:`bridged` maps the names
its checkpoints had under the old code hash to those this code gives, and ``carry`` renames them::

    python -m tools.longruns.checkpoint_names CHAPTER --profile paper --seed 0 --device cuda   # expected names
    python -m tools.longruns.checkpoint_names CHAPTER ... --existing   # those of them in the cache, as paths

Only a chapter listed in :data:`~symlib.chapters.checkpointed.CHECKPOINTED` (each with its
package's ``checkpoints`` module) checkpoints; for any other, or a pieces file that
records no run, nothing is known to be stranded (:func:`live` returns None) and nothing is removed.
The test suite stops every checkpointing stage of each listed chapter at its budget and checks
that the checkpoints it leaves are exactly :func:`expected`'s (``tests/longruns/test_checkpoints.py``).
Each stage names its checkpoints itself (:func:`symlib.book.checkpoints.stage_checkpoint`, or
its chapter's own naming function).

Public: :func:`expected`, :func:`live`, :func:`bridged`, :func:`runs`, :func:`main`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from symlib.book import cache, equivalence
from symlib.book.chapter import StageContext
from symlib.chapters import declared, get_profile
from symlib.chapters.checkpointed import CHECKPOINTED

__all__ = ["bridged", "expected", "live", "main", "runs"]


def _context(chapter: str, config, seed: int, device):
    """``context(stage name)``: the :class:`~symlib.book.chapter.StageContext` the pipeline gives
    that stage of ``chapter`` (without its inputs: no naming function reads them)."""
    spec = declared(chapter)

    def context(stage_name: str) -> StageContext:
        stage = spec.stage(stage_name)
        return StageContext(chapter=chapter, stage=stage, config=stage.view(config, chapter), device=device,
                            inputs={}, run_seed=seed)

    return context


def expected(chapter: str, profile: str, *, seed: int = 0, device: str = "cpu") -> list[str]:
    """The file names of the checkpoints that ``chapter``'s run of ``profile`` with ``seed`` on
    ``device`` (its type counts: ``"cuda"``, ``"cuda (NVIDIA H100 ...)"`` and ``"cuda:1"`` are
    one) would write; [] for a chapter that does not checkpoint.

    Raises:
        ValueError: an unknown chapter or profile (the message lists the valid ones).
    """
    return sorted(set(_names(chapter, profile, seed, device)))


def _names(chapter: str, profile: str, seed: int, device: str) -> list[str]:
    """The checkpoint file names of one run, in the order the chapter's naming function gives
    them ([] for a chapter that does not checkpoint)."""
    config = get_profile(chapter, profile)
    names = CHECKPOINTED.get(chapter)
    if names is None:
        return []
    return [Path(p).name for p in names(_context(chapter, config, seed, _device_type(device)))]


def _device_type(device: str) -> str:
    """``"cuda"`` of ``"cuda (NVIDIA H100 80GB HBM3)"`` (a pieces file's device) or ``"cuda:0"``."""
    return str(device).split(" ", 1)[0].split(":", 1)[0] or "cpu"


def runs(entries: Iterable[dict]) -> set[tuple[str, int, str]]:
    """The ``(profile, seed, device type)`` of the executions in pieces ``entries``
    (:func:`symlib.book.pieces.read`); an entry written before pieces recorded the seed ran with
    the pipeline's only seed then used, 0 (``tools/longruns/gpu_piece.sh`` passes ``--seed 0``)."""
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
    return {name for profile, seed, device in _current(chapter, recorded)
            for name in expected(chapter, profile, seed=seed, device=device)}


def _current(chapter: str, recorded: set[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """The recorded runs of a profile this version still has (one it no longer has continues nothing)."""
    profiles = declared(chapter).profiles
    return [run for run in recorded if run[0] in profiles]


def _renamed(chapter: str, profile: str, seed: int, device: str) -> dict[str, str]:
    """Old name -> :func:`expected` name of the checkpoints that the run would have written under
    a stage code hash the registry (:mod:`symlib.book.equivalence`) joins to the current one."""
    real = cache.fingerprint
    asked: list[str] = []

    def recording(experiment: str) -> dict:
        asked.append(experiment)
        return real(experiment)

    def named(fingerprint) -> list[str]:
        cache.fingerprint = fingerprint   # the naming functions look it up on the module, per call
        try:
            return _names(chapter, profile, seed, device)
        finally:
            cache.fingerprint = real

    now = named(recording)
    out: dict[str, str] = {}
    for experiment in sorted(set(asked)):
        current = real(experiment)
        for old_hash in sorted(equivalence.joined(experiment, current["code_hash"]) - {current["code_hash"]}):
            then = named(lambda e, x=experiment, h=old_hash: {**real(e), "code_hash": h} if e == x else real(e))
            out.update({a: b for a, b in zip(then, now) if a != b})
    return out


def bridged(chapter: str, entries: Iterable[dict]) -> dict[str, str]:
    """Old name -> current name of each checkpoint that a run in pieces ``entries`` wrote under
    stage code that the registry of proven equivalences (``published/code_equivalences.json``,
    :mod:`symlib.book.equivalence`) joins to this code: the same fit, continued under this code's
    name instead of being stranded by a change that moved no number."""
    if chapter not in CHECKPOINTED:
        return {}
    out: dict[str, str] = {}
    for profile, seed, device in _current(chapter, runs(entries)):
        out.update(_renamed(chapter, profile, seed, device))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.longruns.checkpoint_names", description=__doc__.splitlines()[0])
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
