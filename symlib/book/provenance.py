"""Where a chapter's numbers came from, for any chapter of the book: :mod:`symlib.book.codehash`
with every chapter findable by name.

:mod:`symlib.book.codehash` hashes code and reads chapter declarations, and sits below every
chapter: it finds a chapter whose package is imported. This module belongs to the run layer,
which may import :mod:`symlib.chapters`: importing it installs the registry's
:func:`~symlib.chapters.chapter_module` as :data:`~symlib.book.codehash.CHAPTER_FINDER`, so that
``stage_code_hash("02b_posterior_mmd-train")`` imports the chapter it needs. Every name of
:mod:`symlib.book.codehash` (its constants and helpers too) is here as well; a test that replaces
one (``monkeypatch``) replaces it in :mod:`symlib.book.codehash`, where the functions read it.
"""

from __future__ import annotations

from symlib.book import codehash
from symlib.chapters import chapter_module

globals().update({name: value for name, value in vars(codehash).items() if not name.startswith("__")})
__all__: list[str] = []   # documented once, in symlib.book.codehash

if chapter_module not in codehash.CHAPTER_FINDER:
    codehash.CHAPTER_FINDER.append(chapter_module)
