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

Command line::

    python -m symlib.book.carry save 04_constrained_models      # cache -> carry/
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

__all__ = ["Entry", "entries", "load", "main", "save"]


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
        entry = _entry(path, chapter, prints)
        if entry is not None:
            found.append(entry)
    return found


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


def save(chapter: str, directory: pathlib.Path | None = None) -> dict:
    """Copy ``chapter``'s current cache entries into ``directory``; drop its carried ones that are
    no longer current. Returns counts and bytes."""
    directory = pathlib.Path(directory or default_dir())
    saved = skipped = removed = size = 0
    prints: dict = {}
    for e in entries(cache.cache_dir(), chapter, prints):
        if not e.current:
            skipped += 1
            continue
        _copy(e.path, directory / e.experiment / e.path.name)
        saved, size = saved + 1, size + e.size
    for e in entries(directory, chapter, prints):
        if not e.current:
            e.path.unlink()
            removed += 1
    n_pieces = _carry_pieces(chapter, pieces.pieces_path(chapter), pieces.pieces_path(chapter, directory))
    return {"chapter": chapter, "saved": saved, "bytes": size, "not current, left": skipped,
            "removed from the carry folder": removed, "pieces": n_pieces, "folder": str(directory)}


def load(chapter: str, directory: pathlib.Path | None = None) -> dict:
    """Copy ``chapter``'s current carried entries into the cache, where it has no current one."""
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
    n_pieces = _carry_pieces(chapter, pieces.pieces_path(chapter, directory), pieces.pieces_path(chapter))
    return {"chapter": chapter, "loaded": loaded, "already in the cache": kept, "not current, left": skipped,
            "pieces": n_pieces, "cache": str(root)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symlib.book.carry", description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("save", "load", "list"))
    p.add_argument("chapters", nargs="*", help="chapter names (list: all found)")
    p.add_argument("--dir", type=pathlib.Path, default=None, help="the carry folder (default: carry/ in the checkout)")
    args = p.parse_args(argv)
    if args.action != "list" and not args.chapters:
        p.error(f"{args.action} needs at least one chapter name, e.g. 04_constrained_models")
    if args.action == "list":
        directory = pathlib.Path(args.dir or default_dir())
        names = args.chapters or sorted({chapter_of(p.parent.name) for p in directory.glob("*/*.pt")})
        for chapter in names:
            found = entries(directory, chapter)
            current = sum(e.current for e in found)
            print(f"{chapter}: {len(found)} entries ({current} current, "
                  f"{sum(e.size for e in found) / 1e6:.2f} MB) in {directory}")
        return 0
    action = save if args.action == "save" else load
    for chapter in args.chapters:
        print(json.dumps(action(chapter, args.dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
