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


def test_smallest_text_px_scales_a_figure_wider_than_the_column():
    import matplotlib.pyplot as plt

    from symlib.book import plotting

    with plotting.style():
        narrow, ax = plt.subplots(figsize=(4.0, 3.0))     # 440 px: shown at full size
        ax.set_title("t", fontsize=12)
        ax.plot([0, 1], label="a")
        ax.legend(fontsize=6)
        wide, ax = plt.subplots(figsize=(13.66, 3.0))     # 1502.6 px: shown at 660/1502.6
        ax.set_xlabel("x", fontsize=11)
        ax.tick_params(labelsize=20)
    assert plotting.smallest_text_px(narrow) == 6 * 110 / 72
    assert plotting.TEXT_COLUMN_PX == 660                 # the widest a cell's image is shown
    assert abs(plotting.smallest_text_px(wide) - 11 * 110 / 72 * 660 / (13.66 * 110)) < 1e-9
    assert plotting.smallest_text_px(plt.figure(figsize=(3, 3))) == float("inf")
    plt.close("all")
