"""The example chapter's sizes, one frozen dataclass, looked up by profile name."""

from dataclasses import dataclass

__all__ = ["PROFILES", "ExampleProfile"]


@dataclass(frozen=True)
class ExampleProfile:
    n_draws: int
    """Standard normal draws of the ``draws`` stage."""
    scale: float
    """What the ``summary`` stage multiplies their standard deviation by."""
    judge: bool
    """Whether the run is sized to judge the claim (the smoke gate)."""
    label: str = "example"
    """A field no stage declares: changing it must change no cache key."""


PROFILES = {
    "smoke": ExampleProfile(n_draws=200, scale=2.0, judge=False),
    "quick": ExampleProfile(n_draws=2000, scale=2.0, judge=True),
    "full": ExampleProfile(n_draws=20000, scale=2.0, judge=True),
    "paper": ExampleProfile(n_draws=20000, scale=2.0, judge=True),
}
