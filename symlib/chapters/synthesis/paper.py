"""The numbers the papers report for this chapter: none.

Chapter 6 compares the remedies of the five papers with each other on benchmarks none of them
used, so there is no paper table to set beside ours. The interface of the other chapters is kept
(``REPORTED``, ``reported``) so the catalogue and the book treat every chapter alike.
"""

from __future__ import annotations

from symlib.book.reference import ReportedTable, lookup

__all__ = ["REPORTED", "reported"]

REPORTED: dict[str, ReportedTable] = {}


def reported(key: str) -> ReportedTable:
    """A reported table by key; this chapter has none, so every key fails listing the (no) valid ones."""
    return lookup(REPORTED, key)
