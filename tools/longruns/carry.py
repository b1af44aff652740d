"""Carry an unfinished chapter run from one machine, or one working day, to the next.

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
code, and the fit checks it again before continuing).

Git keeps every version of a carried file, so what is carried is kept small. A file over
:data:`COMPRESS_OVER` bytes is stored xz-compressed (``<name>.xz``, LZMA preset 9, whose 64 MiB
window also folds the copies of one draw that a checkpoint holds: chapter 5's 29.8 MB HMC
checkpoint, mostly float64 running sums of float32 draws, shrinks to 13.5 MB, where git's zlib
leaves 26.0 MB; ``tools/longruns/carry_size.py``) and
decompressed by ``load``; one whose content is already carried is not written again. ``save``
leaves out every file whose stored size is over :data:`DEFAULT_LIMIT_MIB` (``--limit MIB`` sets
another bound, ``--no-limit`` none) and names it, in the report and on stderr: a file git would
keep in every version, such as chapter 6's digits gold-standard checkpoint late in its sampling
(about 113 MB stored), stays on this machine, and a run elsewhere computes its stage again. With
``tools/longruns/gpu_piece.sh keep``'s default a GPU run's whole state goes to ``carry/`` (chapter 1's
checkpoints are under 1 MiB, chapter 2b's training chunks about 0.15 MB each, chapter 5's HMC
checkpoint about 14 MB stored with one chain), so that it survives a replaced machine once committed.

Command line::

    python -m tools.longruns.carry save 04_constrained_models      # cache -> carry/
    python -m tools.longruns.carry save --limit 2 01_ortho_skip    # files over 2 MiB stay behind
    python -m tools.longruns.carry save --no-limit 06_synthesis    # carry every file, however large
    python -m tools.longruns.carry load 04_constrained_models      # carry/ -> cache
    python -m tools.longruns.carry list                            # what carry/ holds
    python -m tools.longruns.carry load 04_constrained_models --from 842e0fc   # carry/ as a commit held it

``--dir`` names another folder; the cache is ``$SYMLIB_CACHE`` as always. ``load`` never replaces
an entry the cache already has whole and current; ``save`` removes the chapter's carried entries
that are no longer current only with ``--prune`` (else they may be a run's only copy), and its
carried checkpoints that the cache held (loaded or saved, :data:`HELD`) and no longer has (their
fit finished), except those a GPU piece dropped for the way back (``--dropped NAME``); a carried
checkpoint the cache never held, saved by another cache of the same run, stays. A checkpoint that no run in the chapter's pieces file would continue with this
code (:mod:`tools.longruns.checkpoint_names`: one left when a code change started its fit again under a new
name) is neither carried nor loaded, and ``save`` removes a carried one; one written under stage
code that the registry of proven equivalences (``published/code_equivalences.json``) joins to
this code's is the same fit, and travels under the name this code gives it. Public: :func:`save`,
:func:`load`, :func:`entries`.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from symlib.book import cache, pieces
from symlib.book.paths import project_root_or_cwd
from symlib.book.provenance import chapter_of
from symlib.chapters import CHAPTERS
from tools.longruns.checkpoint_names import bridged
from tools.longruns.checkpoint_names import live as live_checkpoints

__all__ = ["COMPRESS_OVER", "DEFAULT_LIMIT_MIB", "Entry", "at_revision", "checkpoints", "entries", "load", "main", "packed", "save"]

COMPRESS_OVER = 1 << 20
"""Files larger than this many bytes are carried xz-compressed (``<name>.xz``)."""
XZ = ".xz"
XZ_PRESET = 9
"""LZMA preset 9: a 64 MiB dictionary, so that repeats far apart in one file are found."""


def default_dir() -> pathlib.Path:
    """``carry/`` in the checkout (tracked by git)."""
    return project_root_or_cwd() / "carry"


@dataclass(frozen=True)
class Entry:
    """One cache entry file and whether this checkout would serve it as current."""

    path: pathlib.Path
    """The file as stored: ``<key>.pt``, or ``<key>.pt.xz`` in a carry folder."""
    experiment: str
    key: str
    size: int
    """Bytes as stored (compressed, for a ``.xz`` file)."""
    current: bool
    why: str

    @property
    def name(self) -> str:
        """The entry's file name in a cache, ``<key>.pt``."""
        return _plain_name(self.path)


def _plain_name(path: pathlib.Path) -> str:
    """``<name>`` of a stored ``<name>`` or ``<name>.xz``."""
    return path.name.removesuffix(XZ)


def _unreadable(path: pathlib.Path, reason: str) -> None:
    warnings.warn(f"carried file {path} is invalid: {reason}; it is not loaded.", cache.CacheCorruptionWarning,
                  stacklevel=4)


def _contents(path: pathlib.Path) -> bytes | None:
    """A stored file's bytes, decompressed where it is ``.xz``; None (with a warning) for an
    ``.xz`` file that does not decompress (truncated or corrupted)."""
    data = path.read_bytes()
    if not path.name.endswith(XZ):
        return data
    try:
        return lzma.decompress(data)
    except (lzma.LZMAError, EOFError) as error:
        _unreadable(path, f"it does not decompress ({error})")
        return None


def _read_header(path: pathlib.Path, *, quarantine: bool = True) -> dict | None:
    """The header of a valid entry (checksum, unpickling and its place: the experiment and key it
    records are its folder and file name, :func:`symlib.book.cache._load`); None for a bad one,
    moved aside where ``quarantine`` (the cache), left in place with a warning otherwise (the
    carry folder, which git tracks: reading it changes no file)."""
    if not path.name.endswith(XZ):
        ok, _value, meta = cache._load(path, quarantine=quarantine)
        return meta if ok else None
    data = _contents(path)
    if data is None:
        return None
    with tempfile.TemporaryDirectory(prefix="symlib-carry-") as folder:
        plain = pathlib.Path(folder) / _plain_name(path)
        plain.write_bytes(data)
        ok, _value, meta = cache._load(plain, experiment=path.parent.name, quarantine=False)
    return meta if ok else None


def _entry(path: pathlib.Path, chapter: str, prints: dict, *, quarantine: bool = False) -> Entry | None:
    experiment = path.parent.name
    if chapter_of(experiment) != chapter:
        return None
    key = _plain_name(path).removesuffix(".pt")
    meta = _read_header(path, quarantine=quarantine)
    if meta is None:
        return Entry(path, experiment, key, path.stat().st_size if path.exists() else 0, False,
                     "unreadable (checksum or payload)")
    if experiment not in prints:       # hashing the code takes a second or two: once per experiment
        prints[experiment] = cache.fingerprint(experiment)
    recorded, now = cache._recorded_with(meta), prints[experiment]
    changed = cache._changed(experiment, recorded, now)
    why = "current" if not changed else f"computed with other {' and '.join(changed)}"
    return Entry(path, experiment, key, path.stat().st_size, not changed, why)


def _stored(root: pathlib.Path, pattern: str) -> list[pathlib.Path]:
    """Files under ``root`` matching ``pattern`` (``….pt``), plain or ``.xz``."""
    root = pathlib.Path(root)
    return sorted([*root.glob(pattern), *root.glob(pattern + XZ)])


def entries(root: pathlib.Path, chapter: str, prints: dict | None = None, *, quarantine: bool = False) -> list[Entry]:
    """The cache entries of ``chapter``'s experiments under ``root`` (``<root>/<experiment>/<key>.pt``,
    or ``<key>.pt.xz`` as a carry folder stores a large one). A bad one is listed as not current;
    it is moved aside only where ``quarantine`` (the cache itself, never the carry folder)."""
    found, prints = [], ({} if prints is None else prints)
    for path in _stored(root, "*/*.pt"):
        if path.parent.name == "checkpoints":   # not cache entries (:func:`checkpoints`)
            continue
        entry = _entry(path, chapter, prints, quarantine=quarantine)
        if entry is not None:
            found.append(entry)
    return found


def checkpoints(root: pathlib.Path, chapter: str) -> list[pathlib.Path]:
    """``chapter``'s checkpoints under ``root`` (``<root>/checkpoints/<chapter>-*.pt``, or ``.pt.xz``
    as a carry folder stores a large one)."""
    return _stored(pathlib.Path(root) / "checkpoints", f"{chapter}-*.pt")


def _rename_bridged(root: pathlib.Path, chapter: str, renamed: dict[str, str]) -> int:
    """Give each of ``chapter``'s checkpoints under ``root`` (a cache or carry folder) whose name is a key of ``renamed``
    (:func:`tools.longruns.checkpoint_names.bridged`: written under stage code proven to compute
    what this code does) its current name, unless one of that name is there; returns how many."""
    n = 0
    for path in checkpoints(root, chapter):
        new = renamed.get(_plain_name(path))
        if new is None:
            continue
        if not any(path.with_name(new + suffix).exists() for suffix in ("", XZ)):
            path.rename(path.with_name(new + (XZ if path.name.endswith(XZ) else "")))
            n += 1
    return n


DEFAULT_LIMIT_MIB = 32
"""The command line's bound on a carried file's stored size, in MiB (``--limit``; ``--no-limit``
carries every file): git keeps every committed version of a file, and GitHub refuses files over
100 MB. The GPU pieces' ``CARRY_LIMIT_MIB`` default is the same."""


def _too_large(size: int, limit: float | None) -> bool:
    return limit is not None and size > limit * (1 << 20)


def _write(path: pathlib.Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cache._atomic_write(path, data)   # the cache's own writer: fsync, a temporary name it can clean up


def packed(data: bytes) -> bytes:
    """The bytes carry/ stores for a file of content ``data``: xz-compressed (preset
    :data:`XZ_PRESET`) when over :data:`COMPRESS_OVER` bytes, else ``data`` itself."""
    return lzma.compress(data, preset=XZ_PRESET) if len(data) > COMPRESS_OVER else data


def _store(src: pathlib.Path, folder: pathlib.Path, limit: float | None) -> tuple[int, bool]:
    """Carry the cache file ``src`` into ``folder`` (compressed when over :data:`COMPRESS_OVER`),
    unless its stored size is over ``limit`` MiB. Returns ``(stored bytes, carried)``; a file whose
    content is carried already is left as it is (a newer xz could compress it to other bytes)."""
    data = src.read_bytes()
    plain, xz = folder / src.name, folder / (src.name + XZ)
    target, other = (xz, plain) if len(data) > COMPRESS_OVER else (plain, xz)
    if target.exists() and target.stat().st_size > 0 and _same(target, data):
        stored = None
    else:
        stored = packed(data)   # xz exactly where target is the .xz name
    size = target.stat().st_size if stored is None else len(stored)
    if _too_large(size, limit):
        return size, False
    if stored is not None:
        _write(target, stored)
    other.unlink(missing_ok=True)   # carried before in the other form
    return size, True


def _same(path: pathlib.Path, data: bytes) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cache.CacheCorruptionWarning)   # a bad one is simply rewritten
        return _contents(path) == data


def _unpack(path: pathlib.Path, dst: pathlib.Path) -> bool:
    """Put the carried ``path`` at ``dst`` (a cache file), decompressed; False if it is unreadable."""
    data = _contents(path)
    if data is None:
        return False
    _write(dst, data)
    return True


def _mib(stored: int, size: int) -> str:
    mib = f"{stored / (1 << 20):.1f} MiB"
    return mib if stored == size else f"{mib} as xz, of {size / (1 << 20):.1f} MiB"


HELD = ".held-{chapter}.json"
"""Under a cache's ``checkpoints/``: the names of ``chapter``'s checkpoints this cache has held
(loaded into it, or saved from it). ``save`` removes a carried checkpoint the cache no longer has
only if the cache held it (its fit finished here); one another cache saved stays."""


def _held_path(root: pathlib.Path, chapter: str) -> pathlib.Path:
    return pathlib.Path(root) / "checkpoints" / HELD.format(chapter=chapter)


def held(root: pathlib.Path, chapter: str) -> set[str]:
    """The names of ``chapter``'s checkpoints the cache ``root`` has held (:data:`HELD`)."""
    path = _held_path(root, chapter)
    try:
        return set(json.loads(path.read_text()))
    except FileNotFoundError:
        return set()
    except (OSError, ValueError) as exc:
        raise SystemExit(f"carry: {path} is unreadable ({exc}); delete it to treat every carried "
                         f"checkpoint as another cache's (none is then removed)") from None


def _hold(root: pathlib.Path, chapter: str, names: Iterable[str]) -> None:
    before = held(root, chapter)
    after = before | set(names)
    if after != before:
        _write_json(_held_path(root, chapter), sorted(after))


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


def save(chapter: str, directory: pathlib.Path | None = None, *, limit: float | None = None,
         dropped: Iterable[str] = (), live: Iterable[str] = (), prune: bool = False) -> dict:
    """Copy ``chapter``'s current cache entries and its checkpoints into ``directory`` (those over
    :data:`COMPRESS_OVER` bytes xz-compressed); drop its carried entries that are no longer
    current, and its carried checkpoints that the cache held (:data:`HELD`) and no longer has
    (their fit finished and its stage removed them; one the cache never held is another cache's
    fit, and stays: loaded again, one would sit in every later cache, be carried again, and
    read as a run in progress), except those named in ``dropped`` (checkpoint file names: left
    out of a GPU piece's state for the way back, ``tools/longruns/gpu_piece.sh``, so a carried older
    one is still the best place to continue from). A checkpoint that no run in the merged pieces
    file would continue with this code (:func:`tools.longruns.checkpoint_names.live`) is not carried, and
    a carried one is removed; ``live`` adds names that count as continued (those the machine that
    ran the piece named, ``tools/longruns/gpu_piece.sh``: its data, e.g. whether it had full MNIST,
    may name them otherwise than this machine would). ``limit`` (MiB): files whose stored size is
    larger than that are not carried (``"too large, left"`` names them). Returns counts and
    stored bytes.

    Carried entries computed with other code or data than this checkout's are kept (counted
    under ``"not current, kept"``: they may be a run's only copy, saved from a checkout ahead of
    or behind this one) unless ``prune`` asks to remove them."""
    directory = pathlib.Path(directory or default_dir())
    dropped = {_plain_name(pathlib.Path(name)) for name in dropped}
    saved = skipped = removed = size = 0
    too_large: list[str] = []
    prints: dict = {}
    for e in entries(cache.cache_dir(), chapter, prints, quarantine=True):
        if not e.current:
            skipped += 1
            continue
        n, carried = _store(e.path, directory / e.experiment, limit)
        if not carried:
            too_large.append(f"{e.experiment}/{e.path.name} ({_mib(n, e.size)})")
            continue
        saved, size = saved + 1, size + n
    kept_stale = 0
    for e in entries(directory, chapter, prints):
        if not e.current:
            if prune:
                e.path.unlink()
                removed += 1
            else:
                kept_stale += 1
    n_pieces = _carry_pieces(chapter, pieces.pieces_path(chapter), pieces.pieces_path(chapter, directory))
    merged = pieces.read(chapter, directory)
    renamed = bridged(chapter, merged)
    n_renamed = _rename_bridged(cache.cache_dir(), chapter, renamed)
    n_renamed += _rename_bridged(directory, chapter, renamed)
    alive = live_checkpoints(chapter, merged)
    if alive is not None:
        alive |= {_plain_name(pathlib.Path(name)) for name in live}
    n_checkpoints = stranded = 0
    in_cache = [path for path in checkpoints(cache.cache_dir(), chapter) if alive is None or path.name in alive]
    for path in in_cache:
        n, carried = _store(path, directory / "checkpoints", limit)
        if not carried:
            too_large.append(f"checkpoints/{path.name} ({_mib(n, path.stat().st_size)})")
            continue
        n_checkpoints, size = n_checkpoints + 1, size + n
    _hold(cache.cache_dir(), chapter, (path.name for path in in_cache))
    keep = {path.name for path in in_cache} | dropped
    ours = held(cache.cache_dir(), chapter)
    finished = others = 0
    for path in checkpoints(directory, chapter):
        name = _plain_name(path)
        if alive is not None and name not in alive:
            path.unlink()
            stranded += 1
        elif name in keep:
            continue
        elif name in ours:
            path.unlink()
            finished += 1
        else:
            others += 1
    return {"chapter": chapter, "saved": saved, "checkpoints": n_checkpoints, "bytes": size,
            "not current, left": skipped, "too large, left": too_large,
            "removed from the carry folder": removed, "not current, kept (prune removes)": kept_stale, "checkpoints gone from the cache, removed": finished,
            "checkpoints this cache never held, kept": others,
            "checkpoints no run of this code continues, removed": stranded,
            "checkpoints renamed for proven-equivalent code": n_renamed,
            "pieces": n_pieces, "folder": str(directory)}


def load(chapter: str, directory: pathlib.Path | None = None) -> dict:
    """Copy ``chapter``'s current carried entries into the cache, where it has no current one, and
    its carried checkpoints, where the cache has none of that name, less those that no run in the
    merged pieces file would continue with this code (:func:`tools.longruns.checkpoint_names.live`)."""
    directory = pathlib.Path(directory or default_dir())
    root = cache.cache_dir()
    pieces.read(chapter, directory)   # an unreadable carried pieces file fails now, before anything is copied
    pieces.read(chapter)
    loaded = kept = skipped = 0
    prints: dict = {}
    for e in entries(directory, chapter, prints):
        if not e.current:
            skipped += 1
            continue
        target = root / e.experiment / e.name
        there = _entry(target, chapter, prints, quarantine=True) if target.exists() else None
        if there is not None and there.current:
            kept += 1
            continue
        loaded += _unpack(e.path, target)
    n_pieces = _carry_pieces(chapter, pieces.pieces_path(chapter, directory), pieces.pieces_path(chapter))
    merged = pieces.read(chapter)
    renamed = bridged(chapter, merged)
    n_renamed = _rename_bridged(root, chapter, renamed)
    alive = live_checkpoints(chapter, merged)
    n_checkpoints = stranded = 0
    loaded_names: list[str] = []
    for path in checkpoints(directory, chapter):
        name = _plain_name(path)
        target = root / "checkpoints" / renamed.get(name, name)
        n_renamed += name in renamed
        if alive is not None and target.name not in alive:
            stranded += 1
        else:
            if not target.exists():   # else the cache's own is at least as far on (the same run, continued here)
                n_checkpoints += _unpack(path, target)
            loaded_names.append(target.name)
    _hold(root, chapter, loaded_names)
    return {"chapter": chapter, "loaded": loaded, "checkpoints": n_checkpoints, "already in the cache": kept,
            "not current, left": skipped, "checkpoints no run of this code continues, left": stranded,
            "checkpoints renamed for proven-equivalent code": n_renamed,
            "pieces": n_pieces, "cache": str(root)}


def at_revision(revision: str, directory: pathlib.Path | None, into: pathlib.Path) -> pathlib.Path:
    """The carry folder ``directory`` (default ``carry/``) as git commit ``revision`` held it,
    written under ``into``; returns the folder's copy there. A finished run's carried state is
    deleted once it is published, but git keeps it: this is how a published `paper` run, whose
    cache is gone, is loaded again (to render it after an edit of its chapter's views, say).

    Raises:
        ValueError: ``directory`` is in no git checkout, or ``revision`` does not hold it.
    """
    directory = pathlib.Path(directory or default_dir()).absolute()
    existing = next(p for p in (directory, *directory.parents) if p.is_dir())
    top = subprocess.run(["git", "-C", str(existing), "rev-parse", "--show-toplevel"],
                         check=False, capture_output=True, text=True)
    if top.returncode:
        raise ValueError(f"{directory} is in no git checkout: --from reads a carry folder from git's history")
    top = pathlib.Path(top.stdout.strip()).resolve()
    rel = directory.resolve().relative_to(top)
    tar = subprocess.run(["git", "-C", str(top), "archive", "--format=tar", revision, "--", rel.as_posix()],
                         check=False, capture_output=True)
    if tar.returncode:
        raise ValueError(f"git holds no {rel.as_posix()}/ at {revision!r}: "
                         f"{tar.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
        archive.extractall(into, filter="data")
    return pathlib.Path(into) / rel


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.longruns.carry", description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("save", "load", "list"))
    p.add_argument("chapters", nargs="*", help="chapter names (list: all found)")
    p.add_argument("--dir", type=pathlib.Path, default=None, help="the carry folder (default: carry/ in the checkout)")
    p.add_argument("--limit", type=float, default=None, metavar="MIB",
                   help=f"save: leave out (and name) every file whose stored size is over this many MiB "
                        f"(default: {DEFAULT_LIMIT_MIB})")
    p.add_argument("--no-limit", action="store_true", help="save: carry every file, however large")
    p.add_argument("--live", action="append", default=[], metavar="CHECKPOINT",
                   help="save: a checkpoint file name that a recorded run continues, as the machine that ran "
                        "it named it (kept even where this machine would name that run's otherwise)")
    p.add_argument("--dropped", action="append", default=[], metavar="CHECKPOINT",
                   help="save: a checkpoint file name left out of the state on purpose (a GPU piece's way "
                        "back): a carried one of that name is kept, not removed as finished")
    p.add_argument("--prune", action="store_true",
                   help="save: remove carried entries computed with other code or data (kept by default)")
    p.add_argument("--from", dest="revision", default=None, metavar="REV",
                   help="load, list: the carry folder as git commit REV held it (a finished run's state, "
                        "deleted once published: `git log --oneline -- carry/pieces/CHAPTER.json`)")
    args = p.parse_intermixed_args(argv)   # options before or after the chapter names
    if args.limit is not None and (args.action != "save" or args.limit <= 0):
        p.error("--limit is a positive number of MiB, for save only")
    if args.no_limit and (args.action != "save" or args.limit is not None):
        p.error("--no-limit is for save only, without --limit")
    if args.action == "save" and not args.no_limit and args.limit is None:
        args.limit = DEFAULT_LIMIT_MIB
    if (args.dropped or args.live or args.prune) and args.action != "save":
        p.error("--dropped, --live and --prune are for save only")
    if args.action != "list" and not args.chapters:
        p.error(f"{args.action} needs at least one chapter name, e.g. 04_constrained_models")
    if unknown := [c for c in args.chapters if c not in CHAPTERS]:
        p.error(f"unknown chapter {', '.join(map(repr, unknown))}; valid chapters: {', '.join(sorted(CHAPTERS))}")
    if args.revision is not None:
        if args.action == "save":
            p.error("--from is for load and list: history is not written to")
        with tempfile.TemporaryDirectory() as tmp:
            try:
                folder = at_revision(args.revision, args.dir, pathlib.Path(tmp))
            except ValueError as err:
                p.error(str(err))
            return _act(args, folder, f"{args.dir or default_dir()} at {args.revision}")
    return _act(args, pathlib.Path(args.dir or default_dir()))


def _act(args, directory: pathlib.Path, shown=None) -> int:
    """``args.action`` on the carry folder ``directory`` (named ``shown`` in what ``list`` prints)."""
    if args.action == "list":
        names = args.chapters or sorted({chapter_of(p.parent.name) for p in _stored(directory, "*/*.pt")
                                         if p.parent.name != "checkpoints"}
                                        | {chapter_of(p.name) for p in _stored(directory, "checkpoints/*.pt")})
        if not names:
            print(f"nothing carried in {shown or directory}")
        for chapter in names:
            found = entries(directory, chapter)
            current = sum(e.current for e in found)
            held = checkpoints(directory, chapter)
            alive = live_checkpoints(chapter, pieces.read(chapter, directory)) if held else None
            stranded = "" if alive is None else \
                f", {sum(_plain_name(p) not in alive for p in held)} that no recorded run continues with this code"
            print(f"{chapter}: {len(found)} entries ({current} current, "
                  f"{sum(e.size for e in found) / 1e6:.2f} MB) and {len(held)} checkpoints "
                  f"({sum(p.stat().st_size for p in held) / 1e6:.2f} MB{stranded}) in {shown or directory} (sizes as stored)")
        return 0
    for chapter in args.chapters:
        out = (save(chapter, directory, limit=args.limit, dropped=args.dropped, live=args.live, prune=args.prune)
               if args.action == "save"
               else load(chapter, directory))
        print(json.dumps(out))
        if out.get("too large, left"):
            print(f"carry: {chapter}: left on this machine, over {args.limit:g} MiB stored: "
                  f"{'; '.join(out['too large, left'])}. A run elsewhere computes them again; "
                  "carry them with --no-limit (git keeps every version of a carried file).", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
