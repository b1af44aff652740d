"""Run profiles: one frozen dataclass per chapter, with a `smoke`, `quick` and `paper` instance.

``smoke`` runs every experiment end to end in seconds (unit tests), ``quick`` is what CI and the
default book build execute (about five minutes per chapter on 2 CPU cores) and ``paper`` uses the
papers' own settings (GPU, hours). ``quick`` keeps every experiment, method and table row and only
shrinks sizes. Look a profile up with :func:`get_profile`; unknown names fail listing valid ones.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILE_NAMES", "CHAPTER_PROFILES", "get_profile", "SymmetriesProfile"]

PROFILE_NAMES = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class SymmetriesProfile:
    """Chapter 0: the symmetry group of an MLP, demonstrated numerically."""

    n_inputs: int
    """Random inputs on which original and transformed networks are compared."""
    n_group_samples: int
    """Random group elements drawn per architecture for the invariance check."""
    n_copies: int
    """Transformed copies of one network drawn for the canonicalisation figure."""
    demo_widths: tuple[int, ...]
    """The network whose copies are canonicalised (input, hidden..., output)."""


CHAPTER_PROFILES: dict[str, dict[str, object]] = {
    "00_symmetries": {
        "smoke": SymmetriesProfile(n_inputs=16, n_group_samples=3, n_copies=20, demo_widths=(2, 4, 3, 1)),
        "quick": SymmetriesProfile(n_inputs=256, n_group_samples=50, n_copies=500, demo_widths=(2, 8, 6, 1)),
        "paper": SymmetriesProfile(n_inputs=1024, n_group_samples=200, n_copies=5000, demo_widths=(2, 8, 6, 1)),
    },
}


def get_profile(chapter: str, name: str):
    """The profile ``name`` of ``chapter``.

    Raises:
        TypeError: if ``name`` is not a string (e.g. a number injected by papermill).
        ValueError: for an unknown chapter or profile, listing the valid ones.
    """
    if chapter not in CHAPTER_PROFILES:
        raise ValueError(f"unknown chapter {chapter!r}; valid chapters: {', '.join(sorted(CHAPTER_PROFILES))}")
    if not isinstance(name, str):
        raise TypeError(
            f"profile must be a string, one of {', '.join(PROFILE_NAMES)}; got {name!r} "
            f"of type {type(name).__name__} (papermill: pass it as -p profile quick)"
        )
    profiles = CHAPTER_PROFILES[chapter]
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r} for chapter {chapter}; valid profiles: {', '.join(profiles)}")
    return profiles[name]
