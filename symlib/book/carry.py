"""Carry an unfinished chapter run from one machine or session to the next.

A chapter's work is a set of cache entries (:mod:`symlib.book.cache`): one per stage, and one per
item of a fan-out stage (chapter 4's Stan fits, a sweep's settings). A run stopped at its budget
keeps every entry it finished, but only in this machine's cache. ``save`` copies the chapter's
entries that this checkout would serve -- whole (checksum), and computed with this checkout's
code and data hashes -- into a folder (by default ``carry/`` in the checkout, which git tracks);
``load`` copies them into another machine's cache, where the same ``pipeline execute`` command
then continues with what is missing. The chapter's pieces file (``<results>/pieces/<chapter>.json``,
:mod:`symlib.book.pieces`: one line per execution) travels with the entries, merged, so that a
run finished on the next machine accounts for every piece it took. Nothing is trusted blindly on arrival: the cache checks
every entry's checksum and hashes again when it serves it, so an entry carried from other code is
recomputed, never served as current.

A fit stopped inside its stage at the budget left a checkpoint (``<cache>/checkpoints/<chapter>-*.pt``:
chapter 1's VI fits, chapter 5's HMC); ``save`` carries those too and ``load`` puts one back where
the cache has none of that name (each checkpoint's name digests its settings, seed, device and
code, and the fit checks it again before continuing). ``--limit MIB`` leaves out every file larger
than that, named in the report: git keeps each version of a carried file, so a GPU run whose
state is small (chapter 1's checkpoints are under 1 MiB, chapter 2b's training chunks about
0.15 MB each) survives a replaced machine through ``carry/``, while chapter 5's 29 MiB HMC
checkpoint stays in the pieces' own state (``benchmarks/gpu_piece.sh``).

Command line::

    python -m symlib.book.carry save 04_constrained_models      # cache -> carry/
    python -m symlib.book.carry save --limit 2 01_ortho_skip    # files over 2 MiB stay behind
    python -m symlib.book.carry load 04_constrained_models      # carry/ -> cache
    python -m symlib.book.carry list                            # what carry/ holds

``--dir`` names another folder; the cache is ``$SYMLIB_CACHE`` as always. ``load`` never replaces
an entry the cache already has whole and current; ``save`` removes the chapter's carried entries
that are no longer current (they would only be recomputed). Public: :func:`save`, :func:`load`,
:func:`entries`.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from dataclasses import dataclass

from symlib.book import cache, pieces
from symlib.book.paths import project_root_or_cwd
from symlib.book.provenance import chapter_of

__all__ = ["Entry", "checkpoints", "entries", "load", "main", "save"]


def default_dir() -> pathlib.Path:
    """``carry/`` in the checkout (tracked by git)."""
    return project_root_or_cwd() / "carry"


@dataclass(frozen=True)
class Entry:
    """One cache entry file and whether this checkout would serve it as current."""

    path: pathlib.Path
    experiment: str
    key: str
    size: int
    current: bool
    why: str


def _read_header(path: pathlib.Path) -> dict | None:
    ok, _value, meta = cache._load(path)   # checksum and unpickling checked; a bad file is quarantined
    return meta if ok else None


def _entry(path: pathlib.Path, chapter: str, prints: dict) -> Entry | None:
    experiment = path.parent.name
    if chapter_of(experiment) != chapter:
        return None
    meta = _read_header(path)
    if meta is None:
        return Entry(path, experiment, path.stem, path.stat().st_size if path.exists() else 0, False,
                     "unreadable (checksum or payload)")
    if experiment not in prints:       # hashing the code takes a second or two: once per experiment
        prints[experiment] = cache.fingerprint(experiment)
    recorded, now = cache._recorded_with(meta), prints[experiment]
    changed = [name for name in ("code", "data") if recorded[f"{name}_hash"] != now[f"{name}_hash"]]
    why = "current" if not changed else f"computed with other {' and '.join(changed)}"
    return Entry(path, experiment, path.stem, path.stat().st_size, not changed, why)


def entries(root: pathlib.Path, chapter: str, prints: dict | None = None) -> list[Entry]:
    """The cache entries of ``chapter``'s experiments under ``root`` (``<root>/<experiment>/<key>.pt``)."""
    found, prints = [], ({} if prints is None else prints)
    for path in sorted(pathlib.Path(root).glob("*/*.pt")):
        if path.parent.name == "checkpoints":   # not cache entries (:func:`checkpoints`)
            continue
        entry = _entry(path, chapter, prints)
        if entry is not None:
            found.append(entry)
    return found


def checkpoints(root: pathlib.Path, chapter: str) -> list[pathlib.Path]:
    """``chapter``'s checkpoints under ``root`` (``<root>/checkpoints/<chapter>-*.pt``)."""
    return sorted((pathlib.Path(root) / "checkpoints").glob(f"{chapter}-*.pt"))


def _too_large(size: int, limit: float | None) -> bool:
    return limit is not None and size > limit * (1 << 20)


def _copy(src: pathlib.Path, dst: pathlib.Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    cache._atomic_write(dst, src.read_bytes())   # the cache's own writer: fsync, a temporary name it can clean up


def _merged(*lists: list[dict]) -> list[dict]:
    """The union of pieces entries (an entry is its JSON), oldest first."""
    seen: dict[str, dict] = {}
    for entries_ in lists:
        for e in entries_:
            seen.setdefault(json.dumps(e, sort_keys=True), e)
    return sorted(seen.values(), key=lambda e: str(e.get("started", "")))


def _write_json(path: pathlib.Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cache._atomic_write(path, json.dumps(data, indent=1).encode())


def _carry_pieces(chapter: str, src: pathlib.Path, dst: pathlib.Path) -> int:
    """Merge the pieces entries of ``src`` (a pieces file) into ``dst``; returns how many ``dst`` holds."""
    have = json.loads(dst.read_text()) if dst.is_file() else []
    new = json.loads(src.read_text()) if src.is_file() else []
    merged = _merged(have, new)
    if merged != have:
        _write_json(dst, merged)
    return len(merged)


def save(chapter: str, directory: pathlib.Path | None = None, *, limit: float | None = None) -> dict:
    """Copy ``chapter``'s current cache entries and its checkpoints into ``directory``; drop its
    carried entries that are no longer current. ``limit`` (MiB): files larger than that are not
    carried (``"too large, left"`` names them). Returns counts and bytes."""
    directory = pathlib.Path(directory or default_dir())
    saved = skipped = removed = size = 0
    too_large: list[str] = []
    prints: dict = {}
    for e in entries(cache.cache_dir(), chapter, prints):
        if not e.current:
            skipped += 1
            continue
        if _too_large(e.size, limit):
            too_large.append(f"{e.experiment}/{e.path.name} ({e.size / (1 << 20):.1f} MiB)")
            continue
        _copy(e.path, directory / e.experiment / e.path.name)
        saved, size = saved + 1, size + e.size
    for e in entries(directory, chapter, prints):
        if not e.current:
            e.path.unlink()
            removed += 1
    n_checkpoints = 0
    for path in checkpoints(cache.cache_dir(), chapter):
        n = path.stat().st_size
        if _too_large(n, limit):
            too_large.append(f"checkpoints/{path.name} ({n / (1 << 20):.1f} MiB)")
            continue
        _copy(path, directory / "checkpoints" / path.name)
        n_checkpoints, size = n_checkpoints + 1, size + n
    n_pieces = _carry_pieces(chapter, pieces.pieces_path(chapter), pieces.pieces_path(chapter, directory))
    return {"chapter": chapter, "saved": saved, "checkpoints": n_checkpoints, "bytes": size,
            "not current, left": skipped, "too large, left": too_large,
            "removed from the carry folder": removed, "pieces": n_pieces, "folder": str(directory)}


def load(chapter: str, directory: pathlib.Path | None = None) -> dict:
    """Copy ``chapter``'s current carried entries into the cache, where it has no current one, and
    its carried checkpoints, where the cache has none of that name."""
    directory = pathlib.Path(directory or default_dir())
    root = cache.cache_dir()
    loaded = kept = skipped = 0
    prints: dict = {}
    for e in entries(directory, chapter, prints):
        if not e.current:
            skipped += 1
            continue
        target = root / e.experiment / e.path.name
        there = _entry(target, chapter, prints) if target.exists() else None
        if there is not None and there.current:
            kept += 1
            continue
        _copy(e.path, target)
        loaded += 1
    n_checkpoints = 0
    for path in checkpoints(directory, chapter):
        target = root / "checkpoints" / path.name
        if not target.exists():   # the cache's own is at least as far on (the same run, continued here)
            _copy(path, target)
            n_checkpoints += 1
    n_pieces = _carry_pieces(chapter, pieces.pieces_path(chapter, directory), pieces.pieces_path(chapter))
    return {"chapter": chapter, "loaded": loaded, "checkpoints": n_checkpoints, "already in the cache": kept,
            "not current, left": skipped, "pieces": n_pieces, "cache": str(root)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symlib.book.carry", description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("save", "load", "list"))
    p.add_argument("chapters", nargs="*", help="chapter names (list: all found)")
    p.add_argument("--dir", type=pathlib.Path, default=None, help="the carry folder (default: carry/ in the checkout)")
    p.add_argument("--limit", type=float, default=None, metavar="MIB",
                   help="save: leave out every file larger than this many MiB (default: no limit)")
    args = p.parse_intermixed_args(argv)   # options before or after the chapter names
    if args.limit is not None and (args.action != "save" or args.limit <= 0):
        p.error("--limit is a positive number of MiB, for save only")
    if args.action != "list" and not args.chapters:
        p.error(f"{args.action} needs at least one chapter name, e.g. 04_constrained_models")
    if args.action == "list":
        directory = pathlib.Path(args.dir or default_dir())
        names = args.chapters or sorted({chapter_of(p.parent.name) for p in directory.glob("*/*.pt")
                                         if p.parent.name != "checkpoints"}
                                        | {chapter_of(p.name) for p in directory.glob("checkpoints/*.pt")})
        for chapter in names:
            found = entries(directory, chapter)
            current = sum(e.current for e in found)
            held = checkpoints(directory, chapter)
            print(f"{chapter}: {len(found)} entries ({current} current, "
                  f"{sum(e.size for e in found) / 1e6:.2f} MB) and {len(held)} checkpoints "
                  f"({sum(p.stat().st_size for p in held) / 1e6:.2f} MB) in {directory}")
        return 0
    for chapter in args.chapters:
        out = save(chapter, args.dir, limit=args.limit) if args.action == "save" else load(chapter, args.dir)
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
