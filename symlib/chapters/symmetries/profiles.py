"""Run profiles of chapter 0: `smoke`, `quick` and `paper`.

See :mod:`symlib.book.profiles` for what each profile is for; ``[open]`` marks the chapter's own
choices where the paper states none.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "SymmetriesProfile"]


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


PROFILES = {
    "smoke": SymmetriesProfile(n_inputs=16, n_group_samples=3, n_copies=20, demo_widths=(2, 4, 3, 1)),
    "quick": SymmetriesProfile(n_inputs=256, n_group_samples=50, n_copies=500, demo_widths=(2, 8, 6, 1)),
    # full: the paper-size demonstration is cheap, so it runs as is.
    "full": SymmetriesProfile(n_inputs=1024, n_group_samples=200, n_copies=5000, demo_widths=(2, 8, 6, 1)),
    "paper": SymmetriesProfile(n_inputs=1024, n_group_samples=200, n_copies=5000, demo_widths=(2, 8, 6, 1)),
}
