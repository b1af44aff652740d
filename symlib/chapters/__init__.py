"""The book's chapters, one package each, declared through the chapter contract.

``symlib.chapters.<name>`` holds everything about one chapter, one file per job
(:mod:`symlib.book.chapter` says which): ``CHAPTER``, its declaration (stages, claims, views,
sweeps, errata), its `smoke` / `quick` / `full` / `paper` sizes (``profiles``), the numbers its
paper reports (``paper``) and analyses only it needs. Chapters
are imported on demand, so looking up one chapter does not import the others (chapter 4 needs
PyStan).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from symlib.book.profiles import select_profile
from symlib.book.reference import ReportedTable, lookup

CHAPTERS = {
    "00_symmetries": "symmetries",
    "01_ortho_skip": "ortho_skip",
    "02a_symmetry_removal": "symmetry_removal",
    "02b_posterior_mmd": "posterior_mmd",
    "03_sgm_vi": "sgm_vi",
    "04_constrained_models": "constrained_models",
    "05_rebasin_hmc": "rebasin_hmc",
    "06_synthesis": "synthesis",
}
"""Chapter name (the notebook's file name) -> package under :mod:`symlib.chapters`."""

_PAPER_CHAPTERS = ("posterior_mmd", "sgm_vi", "constrained_models", "rebasin_hmc")

__all__ = [  # noqa: RUF022 (chapters in book order)
    "CHAPTERS",
    "all_profiles",
    "chapter_module",
    "declared",
    "get_profile",
    "reported",
    # the chapter packages, imported on demand
    "symmetries",
    "ortho_skip",
    "symmetry_removal",
    "posterior_mmd",
    "sgm_vi",
    "constrained_models",
    "rebasin_hmc",
    "synthesis",
]


def chapter_module(chapter: str) -> ModuleType:
    """The package of ``chapter`` (e.g. ``"01_ortho_skip"``); unknown names list the valid ones."""
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; valid chapters: {', '.join(sorted(CHAPTERS))}")
    return importlib.import_module(f"{__name__}.{CHAPTERS[chapter]}")


def declared(chapter: str):
    """The :class:`~symlib.book.chapter.Chapter` that ``symlib.chapters.<package>`` declares as
    ``CHAPTER``, or None for a name that is not a chapter of the book (a test's made-up record)."""
    from symlib.book.provenance import declared as _declared

    return _declared(chapter) if chapter in CHAPTERS else None


def get_profile(chapter: str, name: str):
    """The profile ``name`` of ``chapter``.

    Raises:
        TypeError: if ``name`` is not a string (e.g. a number injected by papermill).
        ValueError: for an unknown chapter or profile, listing the valid ones.
    """
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; valid chapters: {', '.join(sorted(CHAPTERS))}")
    profiles = importlib.import_module(f"{__name__}.{CHAPTERS[chapter]}.profiles").PROFILES
    return select_profile(chapter, profiles, name)


def all_profiles() -> dict[str, dict[str, object]]:
    """``{chapter: {profile name: profile}}`` for every chapter."""
    return {
        chapter: importlib.import_module(f"{__name__}.{package}.profiles").PROFILES
        for chapter, package in CHAPTERS.items()
    }


def reported(key: str) -> ReportedTable:
    """A table a paper reports, by key (``"<paper>/<table>"``), across all chapters."""
    tables = {}
    for package in _PAPER_CHAPTERS:
        tables |= importlib.import_module(f"{__name__}.{package}.paper").REPORTED
    return lookup(tables, key)
