"""Where a chapter's numbers came from: commit, profile and code hashes, device.

Every results file records them, so a published run can be compared with the code and profile
of a later checkout: when either hash differs, the numbers were made by an older version.

- The *profile hash* covers the profile's values (the dataclass, as canonical JSON).
- The *code hash* covers what can change a chapter's numbers: the library outside
  ``symlib/chapters/`` (methods and book machinery, Stan programs included), the chapter's own
  package and its notebook. Other chapters' packages are left out, so editing chapter 3 does not
  mark chapter 1 as stale.
- The *stage code hash* (:func:`stage_code_hash`) is what every cache entry records of the code
  that computed it: the same library files, the chapter's package and the chapter packages it
  imports, without the notebook (stages compute in the library). The cache recomputes an entry
  whose stage code hash is not this checkout's, and results files carry the hashes of the
  entries they were made from, so a published run is compared with the code that computed its
  numbers, not only with the code that rendered them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
from pathlib import Path

from symlib.book.paths import project_root

__all__ = [
    "chapter_of",
    "chapter_package_dir",
    "code_hash",
    "declared",
    "git_commit",
    "package_of_chapter",
    "profile_hash",
    "provenance",
    "stage_code_hash",
]

SYMLIB = Path(__file__).resolve().parents[1]


def profile_hash(config) -> str:
    """A short hash of a profile's values (any dataclass instance)."""
    values = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    text = json.dumps(
        {"type": type(config).__name__, "values": values}, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def chapter_package_dir(config) -> Path | None:
    """The chapter package a profile belongs to (``symlib/chapters/<name>/``), if it is one."""
    parts = type(config).__module__.split(".")
    if parts[:2] == ["symlib", "chapters"] and len(parts) > 2:
        return SYMLIB / "chapters" / parts[2]
    return None


RENDERING_ONLY = frozenset(
    f"book/{name}.py" for name in ("tables", "published", "pipeline", "plotting", "provenance", "reference", "paths",
                                     "side_by_side", "linkcheck", "compare", "ledger", "cards", "apidoc")
)
"""Modules that lay out pages or move files and change no number or verdict of a run: a change to
them does not make a published run stale."""


def code_hash(chapter_dir: Path | None = None, notebook: Path | None = None) -> str:
    """A short hash of the code behind a chapter's numbers and verdicts: the library outside
    ``chapters/`` (less :data:`RENDERING_ONLY`), one chapter's package and its notebook."""
    return _digest([chapter_dir] if chapter_dir is not None else [], notebook)


def chapter_of(experiment: str) -> str:
    """The chapter a cache experiment belongs to: its name up to the first ``-``
    (``"04_constrained_models-prior"`` -> ``"04_constrained_models"``)."""
    return experiment.split("-", 1)[0]


def package_of_chapter(chapter: str) -> Path | None:
    """``symlib/chapters/<package>/`` of a chapter named ``<number>_<package>``
    (``"02a_symmetry_removal"`` -> ``symmetry_removal/``), or None when there is no such package."""
    match = re.fullmatch(r"\d+[a-z]?_(\w+)", chapter)
    folder = SYMLIB / "chapters" / match.group(1) if match else None
    return folder if folder is not None and folder.is_dir() else None


def declared(chapter: str):
    """The :class:`~symlib.book.chapter.Chapter` that ``chapter``'s package declares as
    ``CHAPTER``, or None for a name with no package (a test's made-up record).

    Found by the naming convention (:func:`package_of_chapter`) and imported by name, as the
    pipeline finds a chapter's notebook: :mod:`symlib.book` depends on no chapter's code.
    """
    import importlib

    from symlib.book.chapter import Chapter

    folder = package_of_chapter(chapter)
    if folder is None:
        return None
    value = getattr(importlib.import_module(f"symlib.chapters.{folder.name}"), "CHAPTER", None)
    return value if isinstance(value, Chapter) else None


def stage_code_hash(experiment: str) -> str:
    """A short hash of the code behind the cached stages of ``experiment`` (or a chapter name).

    The library outside ``chapters/`` (less :data:`RENDERING_ONLY`), the chapter's package and
    the chapter packages that package names (``symlib.chapters.<other>``); no notebook. An
    experiment that maps to no chapter package (:func:`package_of_chapter`) counts every
    chapter package, so that no change can go unnoticed.
    """
    own = package_of_chapter(chapter_of(experiment))
    if own is None:
        return _digest([SYMLIB / "chapters"], None)
    others = set()
    for path in own.rglob("*.py"):
        others.update(re.findall(r"symlib\.chapters\.(\w+)", path.read_text(errors="replace")))
    folders = [own, *(SYMLIB / "chapters" / name for name in sorted(others))]
    return _digest([f for f in folders if f.is_dir()], None)


def _digest(chapter_dirs: list[Path], notebook: Path | None) -> str:
    """Hash the library outside ``chapters/`` (less :data:`RENDERING_ONLY`), the chapter
    packages ``chapter_dirs`` and ``notebook``."""
    chapters = SYMLIB / "chapters"
    chapter_dirs = [Path(d).resolve() for d in chapter_dirs]
    files = [
        p
        for p in SYMLIB.rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".stan")
        and p.relative_to(SYMLIB).as_posix() not in RENDERING_ONLY
        and (
            not p.is_relative_to(chapters)
            or p.parent == chapters
            or any(p.is_relative_to(d) for d in chapter_dirs)
        )
    ]
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(SYMLIB)).encode() + b"\0" + path.read_bytes() + b"\0")
    if notebook is not None and notebook.is_file():
        digest.update(b"notebook\0" + notebook.read_bytes())
    return digest.hexdigest()[:16]


def git_commit() -> str | None:
    """The checkout's commit, with ``+dirty`` when symlib/ or notebooks/ has uncommitted changes."""
    root = project_root()
    if root is None or not (root / ".git").exists():
        return None
    try:
        run = lambda *a: subprocess.run(
            ["git", *a], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        commit = run("rev-parse", "HEAD")
        dirty = run("status", "--porcelain", "--", "symlib", "notebooks")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def provenance(chapter: str, config) -> dict:
    """Commit, profile hash and code hash of a run of ``chapter`` with profile ``config``."""
    root = project_root()
    notebook = root / "notebooks" / f"{chapter}.md" if root is not None else None
    return {
        "commit": git_commit(),
        "profile_hash": profile_hash(config),
        "code_hash": code_hash(chapter_package_dir(config), notebook),
        "profile_values": json.loads(
            json.dumps(
                dataclasses.asdict(config) if dataclasses.is_dataclass(config) else None,
                default=str,
            )
        ),
    }
