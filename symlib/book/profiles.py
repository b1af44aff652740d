"""Run profiles: what each of `smoke`, `quick` and `paper` is for, and how one is selected.

Each chapter keeps its own profile dataclass with a `smoke`, `quick` and `paper` instance
(``symlib/chapters/<chapter>/profiles.py``). ``smoke`` runs every experiment end to end in
seconds (unit tests), ``quick`` is what CI and the default book build execute (about five minutes
per chapter on 2 CPU cores) and ``paper`` uses the papers' own settings (GPU, hours). ``quick``
keeps every experiment, method and table row and only shrinks sizes. :func:`select_profile`
looks one up; unknown names fail listing the valid ones.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PROFILE_NAMES", "select_profile"]

PROFILE_NAMES = ("smoke", "quick", "full", "paper")


def select_profile(chapter: str, profiles: Mapping[str, object], name: str):
    """The profile ``name`` among a chapter's ``profiles``.

    Raises:
        TypeError: if ``name`` is not a string (e.g. a number injected by papermill).
        ValueError: for an unknown profile, listing the valid ones.
    """
    if not isinstance(name, str):
        raise TypeError(
            f"profile must be a string, one of {', '.join(PROFILE_NAMES)}; got {name!r} "
            f"of type {type(name).__name__} (papermill: pass it as -p profile quick)"
        )
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r} for chapter {chapter}; valid profiles: {', '.join(profiles)}")
    return profiles[name]
