"""Code changes proven not to move numbers: which stage code hashes compute the same results.

A stage's cache entries and a published run record the stage code hash they were computed with
(:func:`symlib.book.provenance.stage_code_hash`); a checkout whose hash differs recomputes them
and calls the run stale. That hash covers the chapter's package and the library modules it
imports, so a change that cannot move a number (a claim reworded, a module moved, a ledger rule
added) would otherwise price a `paper` run at its CPU- or GPU-hours.

This module is the registry of such changes: ``published/code_equivalences.json``, one entry per
stage experiment and pair of hashes, each with its evidence. An entry is written only by a proof:
:mod:`symlib.book.same_numbers`, after the chapter's stages were computed under both codes in the
profiles named (``smoke`` and ``quick``) and every cache entry came out identical, bit for bit
(the evidence says which profiles, how many entries and the two commits); or
:mod:`symlib.book.bridges`, after the code both hashes cover was found to be the same syntax trees
up to renamed modules, or the same files hashed under two schemes (the evidence names the commits
and the renames). A real change has no entry, and its runs stay stale. The cache (:func:`symlib.book.cache.cached`), the carry folder
and the published records' staleness read it through :func:`equivalent`.

The registry is data, not code: it lives beside the published records and no code hash covers it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from symlib.book.paths import project_root_or_cwd

__all__ = ["REGISTRY_NAME", "add", "entries", "equivalent", "joined", "registry_path"]

REGISTRY_NAME = "code_equivalences.json"
"""The registry's file name, in ``published/``."""


def registry_path(root: Path | None = None) -> Path:
    """``published/code_equivalences.json`` of the checkout (or of ``root``)."""
    return Path(root or project_root_or_cwd()) / "published" / REGISTRY_NAME


def entries(path: Path | None = None) -> list[dict]:
    """The registry's entries ([] when there is none).

    Raises:
        ValueError: the file is not valid JSON or not a list of entries (the message names it).
    """
    path = Path(path) if path is not None else registry_path()
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); restore it from git") from None
    if not isinstance(data, list) or not all(isinstance(e, dict) and {"experiment", "from", "to", "evidence"} <= set(e)
                                             for e in data):
        raise ValueError(f"{path}: expected a list of entries with experiment, from, to and evidence")
    return data


def equivalent(experiment: str, recorded: str | None, current: str | None, *, path: Path | None = None) -> bool:
    """Whether results computed under stage code hash ``recorded`` are those ``current`` computes
    for ``experiment``: the same hash, or joined by a chain of registry entries (each proven)."""
    if recorded is None or current is None:
        return False
    return recorded == current or recorded in joined(experiment, current, path=path)


def joined(experiment: str, current: str, *, path: Path | None = None) -> set[str]:
    """Every stage code hash the registry joins to ``current`` for ``experiment`` (``current``
    included): the hashes whose results are those ``current`` computes."""
    pairs = [(e["from"], e["to"]) for e in entries(path) if e["experiment"] == experiment]
    seen, frontier = {current}, [current]
    while frontier:
        node = frontier.pop()
        for a, b in pairs:
            for x, y in ((a, b), (b, a)):
                if x == node and y not in seen:
                    seen.add(y)
                    frontier.append(y)
    return seen


def add(pairs: Iterable[tuple[str, str, str]], evidence: str, *, path: Path | None = None) -> list[dict]:
    """Append ``(experiment, from hash, to hash)`` entries with their ``evidence`` (what was
    compared, where and when); a pair already registered is not added again. Returns the new entries."""
    path = Path(path) if path is not None else registry_path()
    have = entries(path)
    known = {(e["experiment"], e["from"], e["to"]) for e in have}
    when = datetime.now(UTC).isoformat(timespec="seconds")
    new = [{"experiment": x, "from": a, "to": b, "evidence": evidence, "date": when}
           for x, a, b in pairs if a != b and (x, a, b) not in known]
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(have + new, indent=1) + "\n")
        tmp.replace(path)
    return new
