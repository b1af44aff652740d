"""The book's house style and small figure helpers.

The style is applied explicitly (``apply_style()`` once per notebook, or ``with style():``),
never as a side effect of importing symlib.
"""

from __future__ import annotations

import contextlib

import matplotlib
import matplotlib.style

__all__ = ["COLORS", "HOUSE_STYLE", "MIN_TEXT_PX", "TEXT_COLUMN_PX", "apply_style", "figure", "label_panels", "smallest_text_px",
           "style"]

COLORS = tuple(matplotlib.style.library["petroff10"]["axes.prop_cycle"].by_key()["color"])
"""The colour cycle of every chapter: matplotlib's ``petroff10``, chosen for colour-vision
deficiencies (Petroff 2021, "Accessible color sequences for data visualization"); blue first."""

HOUSE_STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "figure.figsize": (6.4, 4.0),
    "figure.constrained_layout.use": True,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "legend.frameon": False,
    "legend.fontsize": 9,
    "lines.linewidth": 1.6,
    "image.cmap": "viridis",
    "axes.prop_cycle": matplotlib.cycler(color=list(COLORS)),
}


TEXT_COLUMN_PX = 660
"""The widest a figure is shown in the book's text column at a 1280-px window, in CSS pixels (the
theme's column is 676 px; an image in a cell's output is shown at most 660 px wide, as the
browser check measures): a figure wider than it is shown scaled down."""

MIN_TEXT_PX = 9
"""The smallest text a figure may show on the page, in CSS pixels at :data:`TEXT_COLUMN_PX`."""


def smallest_text_px(fig, *, column_px: float = TEXT_COLUMN_PX) -> float:
    """The smallest visible text of ``fig`` as the page shows it, in pixels: its size in points at
    the house dpi, times the scale at which a figure wider than the text column is shown
    (``inf`` for a figure without text)."""
    from matplotlib.text import Text

    dpi = HOUSE_STYLE["savefig.dpi"]
    scale = min(1.0, column_px / (fig.get_figwidth() * dpi))
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes, default=float("inf")) * dpi / 72 * scale


def apply_style() -> None:
    """Apply the house style globally (call once at the top of a notebook)."""
    matplotlib.rcParams.update(HOUSE_STYLE)


def style():
    """Context manager applying the house style locally."""
    return matplotlib.rc_context(HOUSE_STYLE)


def figure(nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height_per_row: float = 3.2, **kwargs):
    """``plt.subplots`` sized for the book's text column."""
    import matplotlib.pyplot as plt

    return plt.subplots(nrows, ncols, figsize=(width, height_per_row * nrows), squeeze=False, **kwargs)


def label_panels(axes, *, start: str = "a") -> None:
    """Bold (a), (b), ... labels in the upper left of each panel."""
    with contextlib.suppress(AttributeError):
        axes = axes.ravel()
    for i, ax in enumerate(axes):
        ax.text(0.01, 0.98, f"({chr(ord(start) + i)})", transform=ax.transAxes, fontweight="bold", va="top", ha="left")
