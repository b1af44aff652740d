import subprocess
import sys

import matplotlib

from symlib.book import plotting


def test_importing_symlib_changes_no_style():
    code = (
        "import matplotlib; before = dict(matplotlib.rcParams); "
        "import symlib.book.plotting, symlib.chapters.symmetries; "
        "assert dict(matplotlib.rcParams) == before"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_style_context_is_local():
    size = matplotlib.rcParams["font.size"]
    with plotting.style():
        assert matplotlib.rcParams["axes.spines.top"] is False
    assert matplotlib.rcParams["font.size"] == size


def test_figure_and_panel_labels():
    matplotlib.use("Agg")
    _, axes = plotting.figure(2, 3)
    plotting.label_panels(axes)
    assert axes.shape == (2, 3)
    assert [t.get_text() for ax in axes.ravel() for t in ax.texts] == ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"]


def test_palette_is_matplotlibs_colour_blind_safe_cycle():
    import matplotlib.style

    assert plotting.COLORS == tuple(matplotlib.style.library["petroff10"]["axes.prop_cycle"].by_key()["color"])
    assert plotting.HOUSE_STYLE["axes.prop_cycle"].by_key()["color"] == list(plotting.COLORS)
